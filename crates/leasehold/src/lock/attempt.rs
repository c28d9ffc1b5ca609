//! A lock's acquire path: one attempt on the server ([`LockShared::attempt`]), the
//! record of a hold it took, and the wait around attempts ([`acquire`]), as the wait
//! engine (`wait/`) sees it. Every lock kind (plain, fair, fenced, read, write, a
//! multi-lock's members) acquires through here.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, Acquire, AcquireReply, AcquireSpec, LockNames, Result, WaitChannel};
use tokio::time::Instant;
use tracing::Instrument;

use crate::lock::guard::LockGuard;
use crate::lock::hold::LeaseMode;
use crate::lock::shared::{spawn_set_holds, LockShared};
use crate::wait::{Attempt, NotAcquired, ServerQueue, WaitPlan};

/// One acquire call of a lock: what each attempt sends (the lease, its mode) and how the
/// call waits (from the lock's kind).
struct LockAttempt<'a> {
    lock: &'a Arc<LockShared>,
    names: &'a LockNames,
    lease: Duration,
    lease_ms: u64,
    mode: LeaseMode,
    plan: WaitPlan,
    /// A waiting reader's latest call answered "held" (its registration on the server):
    /// its ticket and send time. A grant that names another ticket is not this wait's;
    /// one that names it is counted from that send (no later than the grant).
    registration: parking_lot::Mutex<Option<(u64, Instant)>>,
}

impl<'a> LockAttempt<'a> {
    fn new(lock: &'a Arc<LockShared>, names: &'a LockNames, lease: Duration, lease_ms: u64, mode: LeaseMode) -> Self {
        let kind = lock.kind;
        // A fair lock's waiter listens on its own channel
        // (`redisson_lock__channel:{NAME}:OWNER`, to which a release publishes for the
        // queue head only); the others on the lock's.
        let channel = match kind.wait_channel() {
            WaitChannel::Lock => names.channel_arc().clone(),
            WaitChannel::Own => Arc::from(names.waiter_channel(lock.owner.as_str())),
            // A read/write lock's readers and writers share `redisson_rwlock:{NAME}`.
            WaitChannel::ReadWrite => Arc::from(names.rwlock_channel()),
            // No lock kind waits on a latch's channel (`LockKind::wait_channel` never
            // answers it); the lock's own channel keeps this match total.
            WaitChannel::Latch => names.channel_arc().clone(),
        };
        let plan = WaitPlan {
            key: names.key_arc().clone(),
            channel,
            channel_kind: kind.wait_channel(),
            queue: kind.queue(),
            keepalive: lock.queue_keepalive(),
            kind: lock.telemetry_kind(),
            // A read/write lock's readers and writers subscribe its grant channel too.
            grants: (kind.wait_channel() == WaitChannel::ReadWrite).then(|| Arc::from(names.rw_grants_channel())),
            permits: None,
        };
        LockAttempt { lock, names, lease, lease_ms, mode, plan, registration: parking_lot::Mutex::new(None) }
    }
}

impl Attempt for LockAttempt<'_> {
    type Acquired = LockGuard;

    fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    fn server_queue(&self) -> ServerQueue {
        ServerQueue { channel: Arc::from(self.names.lock_queue_channel()), owner: Arc::from(self.lock.owner.as_str()) }
    }

    async fn attempt(&self, waiting: bool) -> Result<std::result::Result<LockGuard, NotAcquired>> {
        let registered = self.registration.lock().is_some();
        let tried = self.lock.attempt(self.names, self.lease, self.lease_ms, self.mode, waiting, registered).await;
        if let Ok(Err(NotAcquired { ticket: Some(ticket), .. })) = &tried {
            *self.registration.lock() = Some(*ticket);
        }
        tried
    }

    /// A write release granted this reader its hold (or a resign granted this
    /// candidate its election's lead, with a term): record it as an acquire the
    /// server answered with count 1, sent when the granted registration's call was
    /// (before the grant: the guard's deadline is never later than the server's), with
    /// the lease the server gave. Under the owner's turn, and only when the grant names
    /// this wait's latest refused call (a later refused call means the grant was gone by
    /// then; another call of the owner registered after this one: the grant is its) and
    /// the owner accounts for no hold (else an attempt sets its count right).
    async fn claim(&self, grant: lock_pubsub::Grant) -> Option<LockGuard> {
        let lock = self.lock;
        let turn = lock.holds.turn().await;
        let (ticket, sent_at) = (*self.registration.lock())?;
        if ticket != grant.ticket || lock.holds.accounted() != 0 {
            tracing::debug!(
                target: crate::telemetry::TARGET,
                lock = %self.names.key(),
                ticket,
                granted = grant.ticket,
                "a grant not this wait's to take over; trying instead",
            );
            return None;
        }
        // The lease the server gave, counted from that call's send: the grant came after
        // that call was answered "queued" (a grant names the latest such call), so the
        // guard's deadline is never later than the server's expiry. An election's grant
        // carries the term the release issued.
        let lease = Duration::from_millis(grant.lease_ms);
        let guard = lock.record_acquired(self.names, turn.seq, 1, sent_at, lease, self.mode);
        drop(turn);
        if grant.term.is_some() && self.mode == LeaseMode::Watchdog {
            // An election's grant: its TTL was cut to the queue entry's life left, and
            // the deadline counts from a call up to a refresh period old, so as little
            // as a third of the lease may be left locally; the next periodic renewal
            // can come a third of the lease later. When under half is left, renew now
            // (in the background: the campaign returns at once) rather than risk the
            // deadline passing first and the new leader being told it lost.
            let left = guard.lease_deadline().saturating_duration_since(std::time::Instant::now());
            if left < lock.watchdog_lease() / 2 {
                lock.watchdog().renew_now();
            }
        }
        Some(guard.with_token(grant.term))
    }

    fn held_until(guard: &LockGuard) -> Instant {
        if guard.is_shared() {
            // A read hold does not exclude the next reader in line: it tries at once
            // (a writer behind it is answered "held" and keeps its place).
            return Instant::now();
        }
        guard.lease_deadline().into()
    }

    fn holds_already(&self) -> bool {
        self.lock.holds.has_current()
    }

    fn queue_entered(&self) {
        self.lock.queued_waits.fetch_add(1, Ordering::AcqRel);
    }

    fn queue_left(&self) {
        self.lock.queued_waits.fetch_sub(1, Ordering::AcqRel);
    }

    /// With one attempt under the owner's turn (so it cannot land after a later acquire
    /// of the same owner and remove that one's entry). Another wait of the same owner
    /// still live (tasks sharing one `Arc<Lock>`, or a wait started right after) keeps
    /// the entry, and its own end cleans up.
    async fn leave(&self) -> bool {
        let lock = self.lock;
        let _turn = lock.holds.turn().await;
        if lock.has_live_queued_wait() {
            return true;
        }
        // The accounted holds: a live hold of this owner stays as it is, an abandoned
        // acquire's hold (if it was taken) is given back, and the queue entry goes.
        match lock.reset_holds(self.names).await {
            Ok(_) => true,
            Err(error) => {
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    lock = %self.names.key(),
                    %error,
                    "wait clean-up failed; retrying in the background",
                );
                false
            }
        }
    }

    /// As the undo of an abandoned acquire does (same script, same turn discipline,
    /// retries bounded by the replay window; nothing is sent if by then another wait of
    /// the owner is live).
    fn leave_in_background(&self) {
        spawn_set_holds(self.lock.clone(), self.names.clone(), "cancelled wait cleaned up");
    }
}

/// The shared acquire path of every lock kind. `wait`: `None` = unbounded, `Some(ZERO)`
/// = one attempt.
pub(crate) async fn acquire(
    shared: &Arc<LockShared>,
    wait: Option<Duration>,
    mode: LeaseMode,
) -> Result<Option<LockGuard>> {
    let start = Instant::now();
    // Every check happens before anything is sent.
    let names = shared.names()?;
    let lease = match mode {
        LeaseMode::Watchdog => shared.watchdog_lease(),
        LeaseMode::Fixed(lease) => lease,
    };
    let lease_ms = args::lease_millis(lease, "lease")?;
    let deadline = wait.map(|wait| args::wait_deadline(start, wait)).transpose()?;
    let waits = wait != Some(Duration::ZERO);
    let kind = shared.telemetry_kind();
    let client = &shared.client;
    let env = client.wait_env();
    let attempt = LockAttempt::new(shared, names, lease, lease_ms, mode);
    let mut run = crate::wait::AcquireRun::default();
    let result = if tracing::enabled!(target: crate::telemetry::TARGET, tracing::Level::DEBUG) {
        // The lock name is a field, never part of the span's name (bounded names).
        let span = tracing::debug_span!(
            target: crate::telemetry::TARGET,
            "leasehold.acquire",
            lock = %names.key(),
            kind = kind.as_str(),
            mode = if waits { "wait" } else { "try" },
            lease_ms,
            watchdog = mode == LeaseMode::Watchdog,
            wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            db.system.name = "redis",
            attempts = tracing::field::Empty,
            outcome = tracing::field::Empty,
            token = tracing::field::Empty,
        );
        let acquire = crate::wait::wait_for(&attempt, &env, deadline, &mut run);
        let result = acquire.instrument(span.clone()).await;
        span.record("attempts", run.attempts);
        span.record("outcome", crate::telemetry::Outcome::of(&result, waits).as_str());
        if let Some(token) = result.as_ref().ok().and_then(|g| g.as_ref()).and_then(LockGuard::token) {
            span.record("token", token);
        }
        result
    } else {
        // No span to fill: skip building it on the hot path.
        crate::wait::wait_for(&attempt, &env, deadline, &mut run).await
    };
    let outcome = crate::telemetry::Outcome::of(&result, waits);
    client.telemetry.acquire_done(names.key(), kind, waits, outcome, start.elapsed());
    result
}

/// The acquire side of a lock owner: one attempt, and the record of what it took.
impl LockShared {
    /// Records an acquire the server answered with `holds`, sent at `sent_at` in turn
    /// `seq` (the caller still holds it): the hold joined or started, its watchdog
    /// entry (watchdog mode) and its tracking after reconnects, and the new guard. Also
    /// used by a multi-lock's one-script acquire, for each member it took.
    pub(crate) fn record_acquired(
        self: &Arc<Self>,
        names: &LockNames,
        seq: u64,
        holds: u64,
        sent_at: Instant,
        lease: Duration,
        mode: LeaseMode,
    ) -> LockGuard {
        let watchdog = self.watchdog();
        let kind = self.telemetry_kind().as_str();
        let hold = self.holds.acquired(seq, holds, sent_at, lease, mode, |lease_state| {
            watchdog.register_spec(
                names.key_arc().clone(),
                self.owner.clone(),
                lease_state,
                kind,
                self.renew_spec(names),
            )
        });
        // Every hold, fixed lease included, is checked after each reconnect, with the
        // owner recorded here (never one computed later).
        hold.track(|lease_state| watchdog.track_tagged(names.key_arc().clone(), self.owner.clone(), lease_state, kind));
        LockGuard::new(self.clone(), hold, mode)
    }

    /// One acquire attempt: `Ok(Ok(guard))`, or `Ok(Err(..))` when held by another (or,
    /// for a waiting call, when another waiter is ahead). With `enqueue`, a plain lock's
    /// owner queues up in the lock's wait queue, or refreshes its entry.
    ///
    /// Cancel safety: a drop-guard gives back, in the background, any hold the attempt
    /// may have taken if the future is dropped while the script is in flight, or if the
    /// outcome is ambiguous (timeout, connection lost after sending).
    pub(crate) async fn attempt(
        self: &Arc<Self>,
        names: &LockNames,
        lease: Duration,
        lease_ms: u64,
        mode: LeaseMode,
        enqueue: bool,
        registered: bool,
    ) -> Result<std::result::Result<LockGuard, NotAcquired>> {
        let turn = self.holds.turn().await;
        // Under the turn, the accounted holds are exactly what the server should count.
        let target = self.holds.accounted() + 1;
        let mut pending = PendingAcquire { lock: self, names, armed: true };
        let sent_at = Instant::now();
        let value = self.election.as_ref().map(|election| election.value.lock().clone());
        let spec = AcquireSpec {
            kind: self.kind,
            waiting: enqueue,
            registered,
            ticket: turn.seq,
            sync: self.client.sync,
            value,
        };
        let reply = self.client.store.acquire(names, &self.owner, lease_ms, target, spec).await;
        match reply {
            Ok(AcquireReply { acquire: Acquire::Acquired { holds }, token, acknowledged }) => {
                if let Err(error) = crate::lock::replicas::check(self.client.sync, acknowledged, names) {
                    // Not replicated: give the hold back in this turn, before returning.
                    // If that fails, `pending` stays armed and retries in the background.
                    pending.armed = !crate::lock::replicas::undo_now(self, names).await;
                    return Err(error);
                }
                pending.armed = false;
                let guard = self.record_acquired(names, turn.seq, holds, sent_at, lease, mode);
                drop(turn);
                Ok(Ok(guard.with_token(token)))
            }
            Ok(AcquireReply { acquire: Acquire::Held { pttl, position }, .. }) => {
                pending.armed = false;
                // A waiting call that was refused left its ticket with the server (a
                // reader's registration).
                Ok(Err(NotAcquired { pttl, position, ticket: enqueue.then_some((turn.seq, sent_at)) }))
            }
            Err(error) => {
                // Definite errors (WRONGTYPE, bad reply) and errors raised before sending
                // wrote nothing: no undo needed.
                pending.armed = error.is_ambiguous();
                Err(error)
            }
        }
    }
}

/// Gives back a hold whose acquire's outcome the caller will never see.
struct PendingAcquire<'a> {
    lock: &'a Arc<LockShared>,
    names: &'a LockNames,
    armed: bool,
}

impl Drop for PendingAcquire<'_> {
    fn drop(&mut self) {
        if self.armed {
            spawn_set_holds(self.lock.clone(), self.names.clone(), "abandoned acquire undone");
        }
    }
}
