//! The wait loop: register, subscribe, try, then sleep until a release message or the
//! holder's TTL, in FIFO order among local waiters.
//!
//! ```text
//!  fast path ──acquired──▶ done            (no local waiter ahead: one round trip)
//!     │ held / skipped
//!     ▼
//!  register in the channel queue ─▶ await SUBSCRIBE confirmation (bounded)
//!     ▼
//!  ┌▶ have a turn? ──yes──▶ attempt ──acquired──▶ leave queue, done
//!  │      │ no                 │ held: retry_at = now + PTTL
//!  │      ▼                    ▼
//!  └── sleep until: a turn (message, became first, lost messages) │ retry_at (first only) │ deadline ──▶ None
//! ```

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, Error, LockNames, Result};
use tokio::time::Instant;

use crate::guard::LockGuard;
use crate::hold::LeaseMode;
use crate::lock::LockShared;

/// Jittered exponential back-off between attempts that failed with a transient error:
/// 50 ms doubling to 1 s, each delay drawn from its upper half so that many waiters
/// hit by one outage do not retry in step.
struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(1);

    fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    fn next_delay(&mut self) -> Duration {
        use std::hash::{BuildHasher, Hasher};
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        // std's per-instance random hash keys are random enough for jitter.
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let half = delay / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_nanos(random % nanos)
    }
}

/// What one acquire call did, for its span.
#[derive(Debug, Default)]
pub(crate) struct AcquireRun {
    /// Acquire scripts sent (attempts), the fast path's included.
    pub(crate) attempts: u32,
}

pub(crate) async fn acquire_loop(
    lock: &Arc<LockShared>,
    names: &LockNames,
    lease: Duration,
    lease_ms: u64,
    mode: LeaseMode,
    deadline: Option<Instant>,
    run: &mut AcquireRun,
) -> Result<Option<LockGuard>> {
    let client = &lock.client;
    let subscriber = &client.subscriber;
    let zero_wait = deadline.is_some_and(|d| d <= Instant::now());
    let mut backoff = Backoff::new();
    let mut last_error: Option<Error> = None;
    let mut retry_at: Option<Instant> = None;
    // A plain lock's waiters queue up on the server (`acquire.lua`): the server's queue
    // orders every client's waiters, and a release hands the lock to its head.
    let server_queued = lock.kind.queue() == lock_core::QueueKind::Server;
    // A fair lock's waiter listens on its own channel (`redisson_lock__channel:{NAME}:OWNER`,
    // to which a release publishes for the queue head only); the others on the lock's.
    let own_channel = lock.kind.wait_channel() == lock_core::WaitChannel::Own;
    let channel: Arc<str> =
        if own_channel { Arc::from(names.waiter_channel(lock.owner.as_str())) } else { names.channel_arc().clone() };
    // A queued waiter re-attempts at least every third of the keep-alive, which refreshes
    // its queue entry's deadline (a waiter that stops doing so is purged as dead). A fair
    // waiter's refresh is due at once, so one that skipped the fast path queues up as
    // soon as it is first.
    let queued = lock.kind.queue() != lock_core::QueueKind::Local;
    let refresh_every = queued.then(|| lock.queue_keepalive() / 3);
    let mut refresh_at: Option<Instant> = refresh_every.map(|_| Instant::now());
    // Removes this owner's queue entry unless the wait ends by acquiring (the acquire
    // removed it): inline when the wait ends, in the background when it is cancelled.
    // Declared before the waiter, so that a cancelled wait drops the waiter first.
    let mut entry = (queued && !zero_wait).then(|| QueueEntry::new(lock, names));
    let mut position: Option<u64> = None;
    let mut first_sent_at = Instant::now();
    // Whether the fast path ran and was answered "held": only then does its send time
    // tell the channel what this waiter may have missed.
    let mut fast_path_held = false;

    // Fast path: one round trip, no subscription. A waiter of a lock without a server
    // queue skips it when local waiters are already queued on this lock, so a newcomer
    // does not overtake them (FIFO among local waiters) — unless this owner holds the
    // lock already: a re-entry must never queue behind waiters who are waiting for it.
    // Waiters on another lock that shares the channel (`x` and `{x}`) do not count. A
    // server-queued waiter always takes it: the server puts it at the end of the queue.
    if zero_wait || server_queued || subscriber.lock_waiters(&channel, names.key()) == 0 || lock.holds.has_current() {
        first_sent_at = Instant::now();
        run.attempts += 1;
        let attempt = lock.attempt(names, lease, lease_ms, mode, !zero_wait).await;
        refresh_at = refresh_every.map(|every| args::instant_after(Instant::now(), every));
        match attempt {
            Ok(Ok(guard)) => return Ok(Some(disarm(entry, guard))),
            Ok(Err(_)) if zero_wait => return Ok(None),
            Ok(Err(held)) => {
                fast_path_held = true;
                position = held.position;
                retry_at = held.pttl.map(|pttl| args::instant_after(Instant::now(), pttl));
            }
            Err(error) if zero_wait || !error.is_transient() => return leave(entry, Err(error)).await,
            Err(error) => {
                tracing::debug!(%error, "acquire failed; retrying while the wait lasts");
                retry_at = Some(args::instant_after(Instant::now(), backoff.next_delay()));
                last_error = Some(error);
            }
        }
    }

    let deadline = deadline.unwrap_or_else(|| args::far_future(Instant::now()));
    if Instant::now() >= deadline {
        // The wait ran out during the fast path: no point subscribing.
        return leave(entry, last_error.map_or(Ok(None), Err)).await;
    }
    // From here on the call waits: counted in `Client::stats` (and the waiters gauge)
    // until it ends, however it ends.
    let mut waiting = client.telemetry.wait_begin(names.key(), lock.telemetry_kind());
    // Register before the next attempt: a release published from here on wakes us. A
    // server-queued waiter is also given what its client heard since the fast path was
    // sent (or a turn to catch up, if its client was not listening all that time).
    let waiter = if server_queued {
        let queue_channel: Arc<str> = Arc::from(names.lock_queue_channel());
        let owner: Arc<str> = Arc::from(lock.owner.as_str());
        subscriber.register_queued(&channel, &queue_channel, names.key_arc(), &owner, position, first_sent_at)
    } else if own_channel && fast_path_held {
        // Alone on its own channel: the channel's history says whether a release came.
        subscriber.register_lock_after(&channel, names.key_arc(), first_sent_at)
    } else {
        subscriber.register_lock(&channel, names.key_arc())
    };
    let subscribe_by = deadline.min(args::instant_after(Instant::now(), client.config.command_timeout));
    if !waiter.subscribed_by(subscribe_by).await {
        // Degraded, not stuck: we still retry on the holder's TTL, and the resubscribe
        // wakes every waiter once it is confirmed.
        tracing::debug!(channel = %channel, "subscription not confirmed yet; waiting on TTL");
    }
    if last_error.is_some() {
        // The fast path failed: the turn a first-in-line waiter starts with is spent;
        // the back-off timer says when to try again.
        let _ = waiter.take_turn();
    }
    // A waiter in a local line only (a fenced lock's) that the waiter ahead left by
    // acquiring has never flagged the new holder, and that holder's acquire flagged
    // nothing either: with `redisson_waiters(false)` its release would publish nothing
    // and this waiter would sleep until the holder's lease ran out. One call flags it.
    let flag_new_holders = !queued && !client.config.redisson_waiters;
    let mut flag_holder = false;
    loop {
        if let Some(held_until) = waiter.take_held_until() {
            // The waiter ahead just acquired (or a queue message made this waiter the
            // head of a held lock): the lock is held until about then.
            retry_at = Some(held_until);
            flag_holder = flag_new_holders;
        }
        let now = Instant::now();
        let due = |at: Option<Instant>| at.is_some_and(|at| now >= at);
        // After a transient error every waiter retries on its back-off, wherever it is in
        // line (its place is kept); otherwise only the first keeps the TTL timer.
        let retrying = last_error.is_some();
        let timer_due = ((waiter.is_first() || retrying) && due(retry_at)) || due(refresh_at);
        let flag_now = std::mem::take(&mut flag_holder);
        if waiter.take_turn() || timer_due || flag_now {
            run.attempts += 1;
            waiting.wake_up();
            let attempt = lock.attempt(names, lease, lease_ms, mode, true).await;
            refresh_at = refresh_every.map(|every| args::instant_after(Instant::now(), every));
            match attempt {
                Ok(Ok(guard)) => {
                    // The next in line waits for our release instead of trying now.
                    waiter.acquired(guard.lease_deadline().into());
                    return Ok(Some(disarm(entry, guard)));
                }
                Ok(Err(held)) => {
                    // The server's expiry is at most `pttl` after the reply arrived: retrying
                    // then never comes before the key has expired. A hostile PTTL cannot
                    // overflow the clock.
                    retry_at = held.pttl.map(|pttl| args::instant_after(Instant::now(), pttl));
                    waiter.set_position(held.position);
                    backoff.reset();
                    last_error = None;
                    tracing::trace!(pttl = ?held.pttl, position = ?held.position, "not acquired; waiting");
                }
                Err(error) if error.is_transient() => {
                    // Keep our place in line and try again after a back-off.
                    tracing::debug!(%error, "acquire failed; retrying while the wait lasts");
                    retry_at = Some(args::instant_after(Instant::now(), backoff.next_delay()));
                    last_error = Some(error);
                }
                Err(error) => {
                    drop(waiter);
                    return leave(entry.take(), Err(error)).await;
                }
            }
            continue;
        }
        if now >= deadline {
            drop(waiter);
            return leave(entry.take(), last_error.map_or(Ok(None), Err)).await;
        }
        // Only the first in line keeps a TTL timer (and a waiter retrying after an
        // error, its back-off); every queued waiter keeps its refresh timer. The others
        // wait for their turn.
        let ttl_timer = if waiter.is_first() || last_error.is_some() { retry_at } else { None };
        let until = [ttl_timer, refresh_at].into_iter().flatten().fold(deadline, Instant::min);
        waiter.wait_until(until).await;
    }
}

/// A waiter's entry in the server's queue (a fair lock's `redisson_lock_queue:{NAME}` and
/// its deadline in `redisson_lock_timeout:{NAME}`; a plain lock's
/// `leasehold_lock_queue:{NAME}` and `leasehold_lock_waiters:{NAME}`), removed unless the
/// wait acquired. While it exists (until its clean-up starts) the wait counts in
/// [`LockShared::queued_waits`], so that no clean-up of this owner removes the entry
/// under a wait that is still going on.
struct QueueEntry {
    lock: Arc<LockShared>,
    names: LockNames,
    /// Cleared once nothing is left to clean up (acquired, or removed inline).
    armed: bool,
    /// Whether this wait still counts in `queued_waits`.
    counted: bool,
}

impl QueueEntry {
    fn new(lock: &Arc<LockShared>, names: &LockNames) -> Self {
        lock.queued_waits.fetch_add(1, Ordering::AcqRel);
        QueueEntry { lock: lock.clone(), names: names.clone(), armed: true, counted: true }
    }

    /// The wait is over (it ends or is being cleaned up): it no longer keeps a place
    /// that another clean-up must respect.
    fn uncount(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.lock.queued_waits.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for QueueEntry {
    fn drop(&mut self) {
        self.uncount();
        // Still armed: the wait was cancelled, or its inline clean-up failed. Clean up in
        // the background, as the undo of an abandoned acquire does (same script, same
        // turn discipline, retries bounded by the replay window; nothing is sent if by
        // then another wait of the owner is live). Synchronous and non-blocking.
        if self.armed {
            crate::lock::spawn_set_holds(self.lock.clone(), self.names.clone(), "cancelled wait cleaned up");
        }
    }
}

/// The wait acquired: the acquire script removed the queue entry.
fn disarm(entry: Option<QueueEntry>, guard: LockGuard) -> LockGuard {
    if let Some(mut entry) = entry {
        entry.armed = false;
    }
    guard
}

/// The wait ends without the lock (its `Waiter` already dropped): remove the queue entry
/// now, with one attempt under the owner's turn (so it cannot land after a later acquire
/// of the same owner and remove that one's entry), then answer `result`. Another wait of
/// the same owner still live (tasks sharing one `Arc<Lock>`, or a wait started right
/// after) keeps the entry, and its own end cleans up. If the attempt fails, the entry's
/// `Drop` retries in the background.
async fn leave(entry: Option<QueueEntry>, result: Result<Option<LockGuard>>) -> Result<Option<LockGuard>> {
    let Some(mut entry) = entry else { return result };
    entry.uncount();
    let lock = entry.lock.clone();
    let turn = lock.holds.turn().await;
    if lock.has_live_queued_wait() {
        entry.armed = false;
        return result;
    }
    // The accounted holds: a live hold of this owner stays as it is, an abandoned
    // acquire's hold (if it was taken) is given back, and the queue entry goes.
    match lock.reset_holds(&entry.names).await {
        Ok(_) => entry.armed = false,
        Err(error) => {
            tracing::debug!(lock = %entry.names.key(), %error, "wait clean-up failed; retrying in the background");
        }
    }
    drop(turn);
    result
}
