//! A semaphore's acquire, as the wait engine (`wait.rs`) sees it: one attempt is one
//! `sem_try_acquire.lua`, a waiter waits in its client's line on `redisson_sc:{NAME}`
//! for a count that covers it, and re-checks on a timer in case a message was lost.

use std::sync::Arc;
use std::time::Duration;

use lock_core::semaphore::SemaphoreNames;
use lock_core::{Error, ErrorKind, LockStore, QueueKind, Result, WaitChannel};
use tokio::time::Instant;

use crate::telemetry::Kind;
use crate::wait::{Attempt, NotAcquired, ServerQueue, WaitPlan};

/// How often the first waiter of a client's line tries again unprompted. Redisson
/// publishes nothing when the key expires or is deleted, a message can be lost (a
/// reconnect, a broadcast lag) and the count may be set by a script that publishes
/// nothing: this bounds how long any of that can keep a waiter waiting for permits that
/// are there. One call a second per semaphore per client, from its first waiter only.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// One acquire call of `permits` permits.
pub(crate) struct PermitsAttempt {
    store: LockStore,
    names: SemaphoreNames,
    permits: i64,
    plan: WaitPlan,
}

impl PermitsAttempt {
    pub(crate) fn new(store: LockStore, names: SemaphoreNames, permits: u32) -> Self {
        let plan = WaitPlan {
            key: names.key_arc().clone(),
            channel: names.channel().clone(),
            channel_kind: WaitChannel::Lock,
            queue: QueueKind::Local,
            keepalive: RECHECK,
            kind: Kind::Semaphore,
            permits: Some(u64::from(permits)),
        };
        PermitsAttempt { store, names, permits: i64::from(permits), plan }
    }
}

impl Attempt for PermitsAttempt {
    type Acquired = ();

    fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    fn server_queue(&self) -> ServerQueue {
        // Never asked: a semaphore's waiters have no server queue (`QueueKind::Local`).
        ServerQueue { channel: self.names.channel().clone(), owner: Arc::from("") }
    }

    /// The script runs in a task of its own, so that a caller that goes away while it
    /// is in flight (a cancelled wait, a timed-out `select!`) does not lose the permits
    /// it may have taken: the task gives them back (`sem_release.lua`) when nobody is
    /// left to receive them.
    async fn attempt(&self, _waiting: bool) -> Result<std::result::Result<(), NotAcquired>> {
        let (store, names, permits) = (self.store.clone(), self.names.clone(), self.permits);
        let (answer, answered) = tokio::sync::oneshot::channel();
        drop(tokio::spawn(async move {
            let taken = store.semaphore_try_acquire(&names, permits).await;
            if let Err(Ok(true)) = answer.send(taken) {
                // The caller went away with the permits taken: give them back.
                if let Err(error) = store.semaphore_release(&names, permits).await {
                    tracing::warn!(semaphore = %names.key(), %error, permits, "permits of a cancelled acquire not given back");
                }
            }
        }));
        match answered.await {
            Ok(Ok(true)) => Ok(Ok(())),
            Ok(Ok(false)) => Ok(Err(NotAcquired { pttl: Some(RECHECK), position: None })),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                Err(Error::new(ErrorKind::Shutdown, "the runtime stopped the semaphore's call")
                    .with_key(self.names.key()))
            }
        }
    }

    /// The next waiter in line becomes first and waits for the next count message, or
    /// for [`RECHECK`]: the message that woke this waiter woke as many as its count
    /// covered, so trying at once would mostly be answered "not enough".
    fn held_until((): &()) -> Instant {
        lock_core::args::instant_after(Instant::now(), RECHECK)
    }

    fn holds_already(&self) -> bool {
        false
    }

    fn queue_entered(&self) {}

    fn queue_left(&self) {}

    async fn leave(&self) -> bool {
        true
    }

    fn leave_in_background(&self) {}
}
