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
    /// it may have taken: whichever of the task and the departing caller comes second
    /// gives them back (`sem_release.lua`), see [`Handoff`].
    async fn attempt(&self, _waiting: bool) -> Result<std::result::Result<(), NotAcquired>> {
        let (store, names, permits) = (self.store.clone(), self.names.clone(), self.permits);
        let handoff = Arc::new(Handoff::default());
        let caller = Caller { handoff: handoff.clone(), store: store.clone(), names: names.clone(), permits };
        drop(tokio::spawn(async move {
            let taken = store.semaphore_try_acquire(&names, permits).await;
            if handoff.answer(taken) {
                give_back(store, names, permits).await;
            }
        }));
        match caller.answer().await {
            Some(Ok(true)) => Ok(Ok(())),
            Some(Ok(false)) => Ok(Err(NotAcquired { pttl: Some(RECHECK), position: None })),
            Some(Err(error)) => Err(error),
            None => {
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

    // No queue place: the trait's default clean-up (nothing to remove).
}

/// Where an attempt's task leaves its answer for the caller, and where a caller that
/// went away says so: the permits taken are never lost between the two.
#[derive(Default)]
struct Handoff {
    state: parking_lot::Mutex<HandoffState>,
    answered: tokio::sync::Notify,
}

#[derive(Default)]
enum HandoffState {
    /// The script has not answered, and the caller still waits.
    #[default]
    Pending,
    /// The script answered; the caller has not read it yet.
    Answered(Result<bool>),
    /// The caller read the answer.
    Read,
    /// The caller went away before the answer came.
    Abandoned,
}

impl Handoff {
    /// The task's side: leaves `taken` for the caller. `true` when the caller went away
    /// and the task must give the permits back.
    fn answer(&self, taken: Result<bool>) -> bool {
        let mut state = self.state.lock();
        if matches!(*state, HandoffState::Abandoned) {
            return matches!(taken, Ok(true));
        }
        *state = HandoffState::Answered(taken);
        drop(state);
        self.answered.notify_one();
        false
    }
}

/// The caller's side of a [`Handoff`]; dropping it unread gives back permits the answer
/// holds (in the background) or tells the task to.
struct Caller {
    handoff: Arc<Handoff>,
    store: LockStore,
    names: SemaphoreNames,
    permits: i64,
}

impl Caller {
    /// Waits for the task's answer; `None` if the task ended without one (its runtime
    /// shut down).
    async fn answer(&self) -> Option<Result<bool>> {
        loop {
            let notified = self.handoff.answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.handoff.state.lock();
                if matches!(*state, HandoffState::Answered(_)) {
                    if let HandoffState::Answered(taken) = std::mem::replace(&mut *state, HandoffState::Read) {
                        return Some(taken);
                    }
                }
            }
            if Arc::strong_count(&self.handoff) == 1 {
                return None; // the task is gone without answering
            }
            notified.await;
        }
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        let mut state = self.handoff.state.lock();
        match std::mem::replace(&mut *state, HandoffState::Abandoned) {
            HandoffState::Answered(Ok(true)) => {
                // Taken, never read: give it back. Never blocks; with no runtime left there
                // is nothing to send it with.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let (store, names, permits) = (self.store.clone(), self.names.clone(), self.permits);
                    drop(runtime.spawn(give_back(store, names, permits)));
                }
            }
            HandoffState::Read => *state = HandoffState::Read,
            _ => {}
        }
    }
}

/// Gives back the permits of an acquire whose caller went away.
async fn give_back(store: LockStore, names: SemaphoreNames, permits: i64) {
    if let Err(error) = store.semaphore_release(&names, permits).await {
        tracing::warn!(semaphore = %names.key(), %error, permits, "permits of a cancelled acquire not given back");
    }
}
