//! A permit-expirable semaphore's acquire, as the wait engine (`wait/`) sees it: one
//! attempt is one `pes_try_acquire.lua`; a waiter waits in its client's line on
//! `redisson_sc:{NAME}` (the plain semaphore's line and messages), and also until the
//! earliest lease ends, which the script answers (Redisson publishes nothing then).

use std::sync::Arc;
use std::time::Duration;

use lock_core::pes::{PermitId, PesAcquire};
use lock_core::{Error, ErrorKind, Result};
use tokio::time::Instant;

use crate::permit_semaphore::permit::Permit;
use crate::permit_semaphore::shared::PesShared;
use crate::semaphore::attempt::{line_plan, RECHECK};
use crate::wait::{Attempt, NotAcquired, ServerQueue, WaitPlan};

/// One acquire call of one permit with a lease (`renewed`: the watchdog timeout, and
/// the watchdog renews the permit).
pub(crate) struct PermitAttempt {
    shared: Arc<PesShared>,
    lease: Duration,
    renewed: bool,
    lease_ms: i64,
    plan: WaitPlan,
}

impl PermitAttempt {
    pub(crate) fn new(shared: Arc<PesShared>, lease: Duration, renewed: bool, lease_ms: i64) -> Result<Self> {
        let names = shared.names()?;
        let plan = line_plan(names.key_arc(), names.channel(), 1);
        Ok(PermitAttempt { shared, lease, renewed, lease_ms, plan })
    }
}

/// The ms until the earliest lease ends, as a wake-up: 1 ms late (so that the script
/// finds it expired), at most [`RECHECK`] (a lost message, a Java release).
fn retry_after(next_expiry: Option<u64>) -> Duration {
    next_expiry.map_or(RECHECK, |ms| Duration::from_millis(ms.saturating_add(1)).min(RECHECK))
}

impl Attempt for PermitAttempt {
    type Acquired = Permit;

    fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    fn server_queue(&self) -> ServerQueue {
        // Never asked: these waiters have no server queue (`QueueKind::Local`).
        ServerQueue { channel: self.plan.channel.clone(), owner: Arc::from("") }
    }

    /// The script runs in a task of its own, which makes the [`Permit`] as soon as the
    /// answer comes: a caller that went away meanwhile drops it unread, and its `Drop`
    /// releases it in the background. No permit is left taken by a cancelled wait.
    async fn attempt(&self, _waiting: bool) -> Result<std::result::Result<Permit, NotAcquired>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (shared, lease, renewed, lease_ms) = (self.shared.clone(), self.lease, self.renewed, self.lease_ms);
        drop(tokio::spawn(async move {
            let id = PermitId::random();
            let sent_at = Instant::now();
            let answer = match shared.names() {
                Ok(names) => shared.client.store.pes_try_acquire(names, &id, lease_ms).await,
                Err(error) => Err(error),
            };
            let answer = answer.map(|reply| match reply {
                PesAcquire::Taken(_) => Ok(Permit::new(shared.clone(), id, sent_at, lease, renewed)),
                PesAcquire::Busy(next) => Err(next),
            });
            // A caller gone: the value comes back and is dropped here (a Permit releases).
            drop(tx.send(answer));
        }));
        match rx.await {
            Ok(Ok(Ok(permit))) => Ok(Ok(permit)),
            Ok(Ok(Err(next))) => Ok(Err(NotAcquired { pttl: Some(retry_after(next)), position: None, ticket: None })),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                Err(Error::new(ErrorKind::Shutdown, "the runtime stopped the semaphore's call")
                    .with_key(&*self.plan.key))
            }
        }
    }

    /// The next waiter in line waits for the next message, the lease's end or
    /// [`RECHECK`], whichever comes first.
    fn held_until(permit: &Permit) -> Instant {
        permit.lease_end().min(lock_core::args::instant_after(Instant::now(), RECHECK))
    }

    fn holds_already(&self) -> bool {
        false
    }

    // No queue place: the trait's default clean-up (nothing to remove).
}
