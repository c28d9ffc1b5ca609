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

use std::time::Duration;

use lock_core::{LockNames, Result};
use tokio::time::Instant;

use crate::guard::LockGuard;
use crate::hold::LeaseMode;
use crate::lock::Lock;

/// A deadline far enough away to stand for "never" (about 30 years).
fn never() -> Instant {
    Instant::now() + Duration::from_secs(30 * 365 * 24 * 3600)
}

pub(crate) async fn acquire_loop(
    lock: &Lock,
    names: &LockNames,
    lease: Duration,
    lease_ms: u64,
    mode: LeaseMode,
    deadline: Option<Instant>,
) -> Result<Option<LockGuard>> {
    let client = &lock.inner.client.inner;
    let subscriber = &client.subscriber;
    let zero_wait = deadline.is_some_and(|d| d <= Instant::now());

    // Fast path: one round trip, no subscription. Skipped when local waiters are already
    // queued on this lock, so a newcomer does not overtake them (FIFO among local
    // waiters) — unless this owner holds the lock already: a re-entry must never queue
    // behind waiters who are waiting for it. Waiters on another lock that shares the
    // channel (`x` and `{x}`) do not count.
    if zero_wait || subscriber.lock_waiters(names.channel(), names.key()) == 0 || lock.inner.holds.has_current() {
        match lock.attempt(names, lease, lease_ms, mode).await? {
            Ok(guard) => return Ok(Some(guard)),
            Err(_) if zero_wait => return Ok(None),
            Err(_) => {}
        }
    }

    let deadline = deadline.unwrap_or_else(never);
    if Instant::now() >= deadline {
        // The wait ran out during the fast path: no point subscribing.
        return Ok(None);
    }
    // Register before the next attempt: a release published from here on wakes us.
    let waiter = subscriber.register_lock(names.channel_arc(), names.key_arc());
    let subscribe_by = deadline.min(Instant::now() + client.config.command_timeout);
    if !waiter.subscribed_by(subscribe_by).await {
        // Degraded, not stuck: we still retry on the holder's TTL, and the resubscribe
        // wakes every waiter once it is confirmed.
        tracing::debug!(channel = %names.channel(), "subscription not confirmed yet; waiting on TTL");
    }
    let mut retry_at: Option<Instant> = None;
    loop {
        if let Some(held_until) = waiter.take_held_until() {
            // The waiter ahead just acquired: the lock is held until about then.
            retry_at = Some(held_until);
        }
        let now = Instant::now();
        let timer_due = waiter.is_first() && retry_at.is_some_and(|at| now >= at);
        if waiter.take_turn() || timer_due {
            match lock.attempt(names, lease, lease_ms, mode).await? {
                Ok(guard) => {
                    // The next in line waits for our release instead of trying now.
                    waiter.acquired(guard.lease_deadline().into());
                    return Ok(Some(guard));
                }
                Err(pttl) => {
                    // The server's expiry is at most `pttl` after the reply arrived: retrying
                    // then never comes before the key has expired.
                    retry_at = pttl.map(|pttl| Instant::now() + pttl);
                    tracing::trace!(?pttl, "held by another owner; waiting");
                }
            }
            continue;
        }
        if now >= deadline {
            return Ok(None);
        }
        // Only the first in line keeps a TTL timer; the others wait for their turn.
        let until = match retry_at {
            Some(at) if waiter.is_first() => at.min(deadline),
            _ => deadline,
        };
        waiter.wait_until(until).await;
    }
}
