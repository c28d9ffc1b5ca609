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

pub(crate) async fn acquire_loop(
    lock: &Arc<LockShared>,
    names: &LockNames,
    lease: Duration,
    lease_ms: u64,
    mode: LeaseMode,
    deadline: Option<Instant>,
) -> Result<Option<LockGuard>> {
    let client = &lock.client;
    let subscriber = &client.subscriber;
    let zero_wait = deadline.is_some_and(|d| d <= Instant::now());
    let mut backoff = Backoff::new();
    let mut last_error: Option<Error> = None;
    let mut retry_at: Option<Instant> = None;

    // Fast path: one round trip, no subscription. Skipped when local waiters are already
    // queued on this lock, so a newcomer does not overtake them (FIFO among local
    // waiters) — unless this owner holds the lock already: a re-entry must never queue
    // behind waiters who are waiting for it. Waiters on another lock that shares the
    // channel (`x` and `{x}`) do not count.
    if zero_wait || subscriber.lock_waiters(names.channel(), names.key()) == 0 || lock.holds.has_current() {
        match lock.attempt(names, lease, lease_ms, mode).await {
            Ok(Ok(guard)) => return Ok(Some(guard)),
            Ok(Err(_)) if zero_wait => return Ok(None),
            Ok(Err(_)) => {}
            Err(error) if zero_wait || !error.is_transient() => return Err(error),
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
        return last_error.map_or(Ok(None), Err);
    }
    // Register before the next attempt: a release published from here on wakes us.
    let waiter = subscriber.register_lock(names.channel_arc(), names.key_arc());
    let subscribe_by = deadline.min(args::instant_after(Instant::now(), client.config.command_timeout));
    if !waiter.subscribed_by(subscribe_by).await {
        // Degraded, not stuck: we still retry on the holder's TTL, and the resubscribe
        // wakes every waiter once it is confirmed.
        tracing::debug!(channel = %names.channel(), "subscription not confirmed yet; waiting on TTL");
    }
    if last_error.is_some() {
        // The fast path failed: the turn a first-in-line waiter starts with is spent;
        // the back-off timer says when to try again.
        let _ = waiter.take_turn();
    }
    loop {
        if let Some(held_until) = waiter.take_held_until() {
            // The waiter ahead just acquired: the lock is held until about then.
            retry_at = Some(held_until);
        }
        let now = Instant::now();
        let timer_due = waiter.is_first() && retry_at.is_some_and(|at| now >= at);
        if waiter.take_turn() || timer_due {
            match lock.attempt(names, lease, lease_ms, mode).await {
                Ok(Ok(guard)) => {
                    // The next in line waits for our release instead of trying now.
                    waiter.acquired(guard.lease_deadline().into());
                    return Ok(Some(guard));
                }
                Ok(Err(pttl)) => {
                    // The server's expiry is at most `pttl` after the reply arrived: retrying
                    // then never comes before the key has expired. A hostile PTTL cannot
                    // overflow the clock.
                    retry_at = pttl.map(|pttl| args::instant_after(Instant::now(), pttl));
                    backoff.reset();
                    last_error = None;
                    tracing::trace!(?pttl, "held by another owner; waiting");
                }
                Err(error) if error.is_transient() => {
                    // Keep our place in line and try again after a back-off.
                    tracing::debug!(%error, "acquire failed; retrying while the wait lasts");
                    retry_at = Some(args::instant_after(Instant::now(), backoff.next_delay()));
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
            continue;
        }
        if now >= deadline {
            return last_error.map_or(Ok(None), Err);
        }
        // Only the first in line keeps a TTL timer; the others wait for their turn.
        let until = match retry_at {
            Some(at) if waiter.is_first() => at.min(deadline),
            _ => deadline,
        };
        waiter.wait_until(until).await;
    }
}
