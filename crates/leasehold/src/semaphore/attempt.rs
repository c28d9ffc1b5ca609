//! A semaphore's acquire, as the wait engine (`wait/`) sees it: one attempt is one
//! `sem_try_acquire.lua`; a waiting call keeps a place in the semaphore's wait queue on
//! the server (`leasehold_sem_queue:{NAME}`, issue 29 item 4), which releases serve in
//! arrival order, and learns of its grant from a message on
//! `leasehold_sem_grants:{NAME}` without a call; it re-checks on a timer (which also
//! keeps its queue entry alive) in case a message was lost.
//!
//! Every attempt of one acquire call carries the call's operation id ([`SemaphoreOp`]),
//! so a retried or late-run attempt counts once (the server answers it from the
//! operation's record). A call that ends without handing its permits to its caller while
//! some attempt's outcome is unknown (in flight, timed out, reply lost, future dropped)
//! is undone in the background (`semaphore_ops::cancel_in_background`).

use std::sync::Arc;
use std::time::Duration;

use lock_core::semaphore::{SemaphoreAttempt, SemaphoreNames, SemaphoreOp, QUEUE_KEEPALIVE};
use lock_core::{LockStore, QueueKind, Result, WaitChannel};
use tokio::time::Instant;

use crate::semaphore::ops::{cancel_in_background, ReleaseMode};
use crate::telemetry::Kind;
use crate::wait::{Attempt, NotAcquired, ServerQueue, WaitPlan};

/// How often the first waiter of a client's line tries again unprompted. Redisson
/// publishes nothing when the key expires or is deleted, a message can be lost (a
/// reconnect, a broadcast lag) and the count may be set by a script that publishes
/// nothing: this bounds how long any of that can keep a waiter waiting for permits that
/// are there. One call a second per semaphore per client, from its first waiter only.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// How a [`Semaphore`](crate::Semaphore)'s waiter for `permits` permits waits: in the
/// semaphore's wait queue on the server ([`QueueKind::Server`], entry keep-alive
/// [`QUEUE_KEEPALIVE`], refreshed every third of it), woken by a grant naming its
/// operation on `grants` or, as the head, by a count that covers it on the count
/// channel.
fn queue_plan(names: &SemaphoreNames, permits: u64) -> WaitPlan {
    WaitPlan {
        key: names.key_arc().clone(),
        channel: names.channel().clone(),
        channel_kind: WaitChannel::Lock,
        queue: QueueKind::Server,
        keepalive: QUEUE_KEEPALIVE,
        kind: Kind::Semaphore,
        grants: None,
        permits: Some(permits),
    }
}

/// One acquire call of `permits` permits, as the operation `op`.
pub(crate) struct PermitsAttempt {
    store: LockStore,
    names: SemaphoreNames,
    permits: u32,
    plan: WaitPlan,
    op: SemaphoreOp,
    /// `op` in hex: its queue member and the owner its grant messages name.
    owner: Arc<str>,
    state: parking_lot::Mutex<OpState>,
}

/// What the call knows of its operation's outcome.
#[derive(Default)]
struct OpState {
    /// An attempt is in flight: dropped now, its outcome is unknown.
    in_flight: bool,
    /// An attempt ended without its outcome (a timeout, a lost reply, a reset
    /// connection): it may have taken, now or later.
    unsure: bool,
    /// When the first attempt was sent: the undo's retries end `OP_TAKEN_TTL` after it.
    first_sent: Option<Instant>,
    /// An attempt answered "taken" and handed its [`SemaphoreTaken`] out: the permits
    /// are no longer this call's to give back.
    handed_out: bool,
    /// A waiting attempt was sent: the operation may hold a place in the wait queue,
    /// and a release may grant it permits, until its undo removes the place.
    queued: bool,
    /// When the latest attempt was sent (a queued operation's undo has until a grant's
    /// record, written at most a keep-alive after it, expires).
    last_sent: Option<Instant>,
}

/// The permits one acquire took: its operation id and count. Whoever holds it owes
/// them back: [`SemaphoreTaken::keep`] takes that over (a permit guard, or a caller that
/// will `release(n)` itself); dropped without it, it undoes the acquire in the background
/// (the caller never learned of the permits).
pub(crate) struct SemaphoreTaken {
    store: LockStore,
    names: SemaphoreNames,
    op: SemaphoreOp,
    permits: u32,
    first_sent: Instant,
    /// The operation answered on its one send, on a client that never resends by
    /// itself: no copy of it can run again (its release may consume its record).
    clean: bool,
    kept: bool,
}

impl SemaphoreTaken {
    /// The caller has the permits now and owes them back: dropping this no longer
    /// undoes the acquire. Returns the acquire's operation id (a release with it gives
    /// exactly these permits back, once), how many were taken, and how their release
    /// treats the acquire's record.
    pub(crate) fn keep(mut self) -> (SemaphoreOp, u32, ReleaseMode) {
        self.kept = true;
        (self.op, self.permits, ReleaseMode::new(self.first_sent, self.clean))
    }
}

impl Drop for SemaphoreTaken {
    fn drop(&mut self) {
        if !self.kept {
            cancel_in_background(self.store.clone(), self.names.clone(), self.op, self.first_sent);
        }
    }
}

impl PermitsAttempt {
    pub(crate) fn new(store: LockStore, names: SemaphoreNames, permits: u32) -> Self {
        let plan = queue_plan(&names, u64::from(permits));
        let op = SemaphoreOp::random();
        let owner = Arc::from(op.to_string());
        PermitsAttempt { store, names, permits, plan, op, owner, state: parking_lot::Mutex::default() }
    }

    /// The permits of this call's operation, handed out (`state` locked by the caller).
    fn taken(&self, state: &mut OpState, first_sent: Instant) -> SemaphoreTaken {
        state.handed_out = true;
        SemaphoreTaken {
            store: self.store.clone(),
            names: self.names.clone(),
            op: self.op,
            permits: self.permits,
            first_sent,
            // Every attempt answered (one that was not taken wrote no record, or only
            // a queue place, and a grant is written once) and none can run again: the
            // record is written once, by one copy of the operation or by its grant.
            clean: !state.unsure && !state.in_flight && !self.store.may_resend(),
            kept: false,
        }
    }
}

impl Attempt for PermitsAttempt {
    type Acquired = SemaphoreTaken;

    fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    fn server_queue(&self) -> ServerQueue {
        ServerQueue { channel: self.names.grants().clone(), owner: self.owner.clone() }
    }

    /// One `sem_try_acquire.lua` as this call's operation (`waiting`: it queues, or
    /// refreshes its queue entry, when it does not take). Safe to drop at any point: an
    /// attempt dropped in flight, or one that failed without an answer, leaves the call
    /// in doubt, and the call's `Drop` undoes the operation (and leaves the queue)
    /// unless permits were handed out.
    async fn attempt(&self, waiting: bool) -> Result<std::result::Result<SemaphoreTaken, NotAcquired>> {
        let first_sent = {
            let mut state = self.state.lock();
            // An earlier attempt dropped in flight may still run: the call is in doubt.
            state.unsure |= state.in_flight;
            state.in_flight = true;
            state.queued |= waiting;
            let now = Instant::now();
            state.last_sent = Some(now);
            *state.first_sent.get_or_insert(now)
        };
        let keepalive = waiting.then_some(QUEUE_KEEPALIVE);
        let reply = self.store.semaphore_try_acquire(&self.names, i64::from(self.permits), self.op, keepalive).await;
        let mut state = self.state.lock();
        state.in_flight = false;
        match reply {
            Ok(SemaphoreAttempt::Taken) => Ok(Ok(self.taken(&mut state, first_sent))),
            Ok(SemaphoreAttempt::NotTaken { position }) => {
                Ok(Err(NotAcquired { pttl: Some(RECHECK), position, ticket: None }))
            }
            Err(error) => {
                // A timeout or a connection lost after sending: it may have run (or run
                // later). A retry of the same operation is answered from its record.
                state.unsure |= error.is_ambiguous();
                Err(error)
            }
        }
    }

    /// A grant message named this call's operation: a release served it from the queue
    /// and wrote its record "taken N" (the permits are its own in Redis).
    fn granted(&self) -> Option<SemaphoreTaken> {
        let mut state = self.state.lock();
        let first_sent = state.first_sent?;
        Some(self.taken(&mut state, first_sent))
    }

    /// Nothing waits behind a queued semaphore waiter locally (the server orders them):
    /// the timer is what a permit semaphore's line would keep, [`RECHECK`].
    fn held_until(_: &SemaphoreTaken) -> Instant {
        lock_core::args::instant_after(Instant::now(), RECHECK)
    }

    fn holds_already(&self) -> bool {
        false
    }

    // The queue place is left by the call's `Drop` (the undo, `sem_cancel.lua`, which
    // also gives back a grant that came too late): the trait's default clean-up.
}

impl Drop for PermitsAttempt {
    /// The call is over. If it handed no permits out while an attempt's outcome is
    /// unknown, the operation is undone in the background (never blocking): the permits
    /// it took are given back, or a late run of it is refused.
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if !state.handed_out && (state.in_flight || state.unsure || state.queued) {
            // A queued operation may be granted until its undo runs: that grant's record
            // is written after the latest send, and lives `OP_TAKEN_TTL` from then.
            let since = if state.queued { state.last_sent } else { state.first_sent };
            cancel_in_background(self.store.clone(), self.names.clone(), self.op, since.unwrap_or_else(Instant::now));
        }
    }
}
