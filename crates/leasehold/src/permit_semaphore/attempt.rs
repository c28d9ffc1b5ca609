//! A permit-expirable semaphore's acquire, as the wait engine (`wait/`) sees it: one
//! attempt is one `pes_try_acquire.lua`; a waiting call keeps a place in the
//! semaphore's wait queue on the server (`leasehold_pes_queue:{NAME}`, issue 29 item 4)
//! under the id of the permit it waits for, a release grants it that permit and says so
//! on `leasehold_sem_grants:{NAME}` (no call needed), and the waiter also looks again
//! when the earliest lease ends, which the script answers (Redisson publishes nothing
//! then), and every second (its entry's refresh).

use std::sync::Arc;
use std::time::Duration;

use lock_core::pes::{PermitId, PesAcquire, PesWait};
use lock_core::semaphore::QUEUE_KEEPALIVE;
use lock_core::{Error, ErrorKind, QueueKind, Result, WaitChannel};
use tokio::time::Instant;

use crate::permit_semaphore::permit::Permit;
use crate::permit_semaphore::shared::PesShared;
use crate::semaphore::attempt::RECHECK;
use crate::telemetry::Kind;
use crate::wait::{Attempt, Backoff, NotAcquired, ServerQueue, WaitPlan};

/// One acquire call of one permit with a lease (`renewed`: the watchdog timeout, and
/// the watchdog renews the permit), under one permit id for all its attempts (its
/// queue member, and the id a grant gives the permit).
pub(crate) struct PermitAttempt {
    shared: Arc<PesShared>,
    lease: Duration,
    renewed: bool,
    lease_ms: i64,
    plan: WaitPlan,
    id: PermitId,
    /// `id` in hex: the owner its grant messages name.
    owner: Arc<str>,
    state: parking_lot::Mutex<CallState>,
}

/// What the call knows of its queue place and its permit.
#[derive(Default)]
struct CallState {
    /// A waiting attempt was sent: the id may hold a queue place, and a release may
    /// grant it the permit, until the undo (`pes_cancel.lua`) runs.
    queued: bool,
    /// A permit of this call reached its caller: nothing to undo.
    handed_out: bool,
    /// When the first and the latest attempt were sent.
    first_sent: Option<Instant>,
    last_sent: Option<Instant>,
}

impl PermitAttempt {
    pub(crate) fn new(shared: Arc<PesShared>, lease: Duration, renewed: bool, lease_ms: i64) -> Result<Self> {
        let names = shared.names()?;
        // In the semaphore's wait queue on the server, as a plain semaphore's waiter
        // waits (the count channel and the grants channel of the same name).
        let plan = WaitPlan {
            key: names.key_arc().clone(),
            channel: names.channel().clone(),
            channel_kind: WaitChannel::Lock,
            queue: QueueKind::Server,
            keepalive: QUEUE_KEEPALIVE,
            kind: Kind::Semaphore,
            grants: None,
            permits: Some(1),
        };
        let id = PermitId::random();
        let owner = Arc::from(id.to_string());
        Ok(PermitAttempt { shared, lease, renewed, lease_ms, plan, id, owner, state: parking_lot::Mutex::default() })
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
        let grants = self.shared.names().map_or_else(|_| self.plan.channel.clone(), |names| names.grants().clone());
        ServerQueue { channel: grants, owner: self.owner.clone() }
    }

    /// The script runs in a task of its own, which makes the [`Permit`] as soon as the
    /// answer comes: a caller that went away meanwhile drops it unread, and its `Drop`
    /// releases it in the background. No permit is left taken by a cancelled wait.
    ///
    /// Every attempt of the call sends the same id: a waiting one queues it (or
    /// refreshes its entry), and a later one first looks whether the id holds a permit
    /// already (granted, or taken by an attempt whose answer was lost), whose lease is
    /// then counted from the call's first send (never later than the server's); a permit
    /// taken now counts from this attempt's send.
    async fn attempt(&self, waiting: bool) -> Result<std::result::Result<Permit, NotAcquired>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (shared, lease, renewed, lease_ms, id) =
            (self.shared.clone(), self.lease, self.renewed, self.lease_ms, self.id);
        let (retry, first_sent) = {
            let mut state = self.state.lock();
            let now = Instant::now();
            state.queued |= waiting;
            state.last_sent = Some(now);
            (state.first_sent.is_some(), *state.first_sent.get_or_insert(now))
        };
        let wait = waiting.then_some(PesWait { keepalive: QUEUE_KEEPALIVE, retry });
        drop(tokio::spawn(async move {
            let sent_at = Instant::now();
            let answer = match shared.names() {
                Ok(names) => shared.client.store.pes_try_acquire(names, &id, lease_ms, wait).await,
                Err(error) => Err(error),
            };
            let answer = answer.map(|reply| match reply {
                PesAcquire::Taken(_) => Ok(Permit::new(shared.clone(), id, sent_at, lease, renewed)),
                // Held since an earlier attempt or a grant: its lease is counted from the
                // call's first send, never later than the server's.
                PesAcquire::Held(_) => Ok(Permit::new(shared.clone(), id, first_sent, lease, renewed)),
                PesAcquire::Busy(next, position) => Err((next, position)),
            });
            // A caller gone: the value comes back and is dropped here (a Permit releases).
            drop(tx.send(answer));
        }));
        match rx.await {
            Ok(Ok(Ok(permit))) => {
                self.state.lock().handed_out = true;
                Ok(Ok(permit))
            }
            Ok(Ok(Err((next, position)))) => {
                Ok(Err(NotAcquired { pttl: Some(retry_after(next)), position, ticket: None }))
            }
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

    /// A grant message named this call's id: a release gave it the permit, after the
    /// latest attempt ran (an attempt after the grant would have found it), so its lease
    /// is counted from that attempt's send.
    fn granted(&self) -> Option<Permit> {
        let mut state = self.state.lock();
        let since = state.last_sent?;
        state.handed_out = true;
        Some(Permit::new(self.shared.clone(), self.id, since, self.lease, self.renewed))
    }

    fn holds_already(&self) -> bool {
        false
    }

    // The queue place is left by the call's `Drop` (`pes_cancel.lua`, which also
    // releases a permit granted too late): the trait's default clean-up.
}

impl Drop for PermitAttempt {
    /// The call is over. If a waiting attempt was sent and no permit reached the caller,
    /// its queue place is left and a permit granted (or taken by an attempt whose answer
    /// was lost) under its id is released, in the background, never blocking.
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if !state.queued || state.handed_out {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                target: crate::telemetry::TARGET,
                semaphore = %self.plan.key,
                "no runtime to leave a semaphore's wait queue on",
            );
            return;
        };
        let (shared, id) = (self.shared.clone(), self.id);
        drop(runtime.spawn(async move { leave(&shared, &id).await }));
    }
}

/// `pes_cancel.lua` for the call's id, retried after a back-off (50 ms doubling to 1 s)
/// while the errors are transient, for at most [`LEAVE_FOR`]: past it, the entry is
/// purged by its deadline anyway, and a permit granted meanwhile expires with its lease.
async fn leave(shared: &PesShared, id: &PermitId) {
    let Ok(names) = shared.names() else { return };
    let give_up_at = lock_core::args::instant_after(Instant::now(), LEAVE_FOR);
    let mut backoff = Backoff::new();
    loop {
        let Err(error) = shared.client.store.pes_cancel(names, id).await else { return };
        let delay = backoff.next_delay();
        if !error.is_transient() || Instant::now() + delay >= give_up_at {
            tracing::warn!(
                target: crate::telemetry::TARGET,
                semaphore = %names.key(), %error,
                "a waiter did not leave a semaphore's wait queue: its entry lapses within 3 s, and a permit \
                 granted to it meanwhile expires with its lease"
            );
            return;
        }
        tracing::debug!(
            target: crate::telemetry::TARGET,
            semaphore = %names.key(),
            %error,
            "leaving a semaphore's wait queue failed; retrying",
        );
        tokio::time::sleep(delay).await;
    }
}

/// How long the undo of a queued call is retried.
const LEAVE_FOR: Duration = Duration::from_secs(60);
