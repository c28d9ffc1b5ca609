//! The wait engine: register, subscribe, try, then sleep until a release message or the
//! holder's TTL, in FIFO order among local waiters. Generic over what it waits for (an
//! [`Attempt`]: a lock, a semaphore's permits) and over where it hears releases (a [`Line`]: the client's
//! subscriber), so that any kind of hold can wait with it, and its unit tests can drive
//! it with a fake of each on paused time.
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
//!  └── sleep until: a turn (message, became first, lost messages) │ retry_at (first only) │ refresh_at (queued) │ deadline ──▶ None
//! ```
//!
//! A bounded wait ends at its deadline whatever the server does (frozen, unreachable,
//! slow): every step that talks to the server (the fast path, each attempt, the
//! clean-up of a wait that failed) races the deadline, and a step the deadline beats is
//! dropped: the attempt's own cancel safety gives back what it may have taken, and the
//! queue place is left in the background ([`Attempt::leave_in_background`]). See
//! `docs/architecture/time.md`, "Bounds".

mod attempt;
mod backoff;
mod entry;
mod line;
mod stopping;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::time::Duration;

use lock_core::{args, Error, QueueKind, Result, WaitChannel};
use tokio::time::Instant;

pub(crate) use attempt::{Attempt, NotAcquired, ServerQueue, WaitPlan};
pub(crate) use backoff::Backoff;
use entry::{disarm, leave, QueueEntry};
pub(crate) use line::{Join, Line, Slot};
pub(crate) use stopping::Stopping;

use crate::telemetry::Telemetry;

/// What one acquire call did, for its span.
#[derive(Debug, Default)]
pub(crate) struct AcquireRun {
    /// Attempts sent, the fast path's included.
    pub(crate) attempts: u32,
}

/// What a wait needs of its client besides the attempt: where it hears releases, where
/// it is counted, and two settings.
pub(crate) struct WaitEnv<'a, L> {
    /// The local lines (the client's subscriber).
    pub(crate) line: &'a L,
    /// Counts the wait and its wake-ups.
    pub(crate) telemetry: &'a Telemetry,
    /// The longest a wait waits for its channel's subscription to be confirmed (the
    /// command timeout) before it goes on waiting on timers only.
    pub(crate) subscribe_timeout: Duration,
    /// Whether every last release publishes (`ClientBuilder::redisson_waiters`); when
    /// not, a waiter of a local line only flags each new holder itself.
    pub(crate) redisson_waiters: bool,
    /// The client's shutdown: a wait ends at it, removing its queue place first.
    pub(crate) stopping: &'a std::sync::Arc<Stopping>,
}

/// Waits for `attempt` until `deadline` (`None`: unbounded; a deadline already passed:
/// one try). `Ok(None)` when the deadline passed without acquiring; `Err` for a definite
/// error, or for the transient error of the last attempt before the deadline.
///
/// A bounded wait (a deadline not yet passed) returns by its deadline whatever the
/// server does: an attempt still in flight then is dropped (it undoes, in the
/// background, a hold it may have taken), and the queue place is left in the
/// background instead of inline. A single try (a deadline already passed) is bounded by
/// the command timeout only, as before.
///
/// Transient errors never end the wait: the attempt is retried after a jittered
/// back-off (50 ms doubling to 1 s), keeping the waiter's place in line.
///
/// Cancel safety: dropping the future leaves the line, and a queue place is given up by
/// [`Attempt::leave_in_background`] (once); what an attempt in flight took is the
/// attempt's to give back.
///
/// At `Client::shutdown` ([`Stopping::stop`]) a wait ends with
/// [`ErrorKind::Shutdown`](lock_core::ErrorKind::Shutdown) at its next step (an attempt
/// in flight is answered first), removing its queue place inline while the connection
/// is still open; the shutdown waits for that, bounded. A wait that starts after it
/// began sends nothing.
pub(crate) async fn wait_for<A: Attempt, L: Line>(
    attempt: &A,
    env: &WaitEnv<'_, L>,
    deadline: Option<Instant>,
    run: &mut AcquireRun,
) -> Result<Option<A::Acquired>> {
    if env.stopping.is_stopped() {
        return Err(Stopping::error());
    }
    let plan = attempt.plan();
    let zero_wait = deadline.is_some_and(|d| d <= Instant::now());
    // The deadline every server step of a bounded wait races (none for an unbounded
    // wait or a single try).
    let bound = deadline.filter(|_| !zero_wait);
    let mut backoff = Backoff::new();
    let mut last_error: Option<Error> = None;
    let mut retry_at: Option<Instant> = None;
    // A plain lock's waiters queue up on the server (`acquire.lua`): the server's queue
    // orders every client's waiters, and a release hands the lock to its head.
    let server_queued = plan.queue == QueueKind::Server;
    // Shared waiters (readers) exclude nobody of their kind: none waits behind another.
    let shared = matches!(plan.queue, QueueKind::Shared | QueueKind::Readers);
    // A queued waiter re-attempts at least every third of the keep-alive, which refreshes
    // its queue entry's deadline (a waiter that stops doing so is purged as dead). A fair
    // waiter's refresh is due at once, so one that skipped the fast path queues up as
    // soon as it is first.
    let queued = plan.is_queued();
    let refresh_every = queued.then(|| plan.keepalive / 3);
    let mut refresh_at: Option<Instant> = refresh_every.map(|_| Instant::now());
    // Removes this owner's queue entry unless the wait ends by acquiring (the acquire
    // removed it): inline when the wait ends, in the background when it is cancelled.
    // Declared before the slot, so that a cancelled wait drops the slot first; and
    // after the wait's count for the shutdown (taken once the fast path did not
    // acquire: the uncontended call pays nothing), which so ends after the inline
    // clean-up. A shutdown that begins during the fast path itself does not wait for
    // it: as for an acquire racing the shutdown, its queue entry then expires with its
    // keep-alive.
    let _counted: Option<stopping::QueuedWait>;
    let mut entry = (queued && !zero_wait).then(|| QueueEntry::new(attempt));
    let mut position: Option<u64> = None;
    // The fast path's send time too (no second clock read for it: nothing between here
    // and its send awaits, and an earlier time only makes the channel replay more).
    let first_sent_at = Instant::now();
    // Whether the fast path ran and was answered "held": only then does its send time
    // tell the channel what this waiter may have missed.
    let mut fast_path_held = false;

    // Fast path: one round trip, no subscription. A waiter without a server queue skips
    // it when local waiters are already in line for this key, so a newcomer does not
    // overtake them (FIFO among local waiters) — unless this owner holds already: a
    // re-entry must never queue behind waiters who are waiting for it. Waiters on another
    // key that shares the channel (`x` and `{x}`) do not count. A server-queued waiter
    // always takes it: the server puts it at the end of the queue; so does a shared one
    // (a reader overtakes nobody: readers share, and a waiting writer's preference is
    // kept by the server).
    // `holds_already` before `local_waiters`: it is the cheaper of the two (the line's
    // count takes the subscriber's registry lock and hashes the channel), and always true
    // for a latch, whose every wait takes the fast path.
    if zero_wait || server_queued || shared || attempt.holds_already() || env.line.local_waiters(plan) == 0 {
        run.attempts += 1;
        let Some(tried) = before(bound, attempt.attempt(!zero_wait)).await else {
            // The deadline came first (a frozen or unreachable server): the attempt is
            // dropped, and the entry's `Drop` leaves the queue in the background.
            return Ok(None);
        };
        refresh_at = refresh_every.map(|every| args::instant_after(Instant::now(), every));
        match tried {
            Ok(Ok(acquired)) => return Ok(Some(disarm(entry, acquired))),
            Ok(Err(_)) if zero_wait => return Ok(None),
            Ok(Err(held)) => {
                fast_path_held = true;
                position = held.position;
                retry_at = held.pttl.map(|pttl| args::instant_after(Instant::now(), pttl));
            }
            Err(error) if zero_wait || !error.is_transient() => return leave(entry, Err(error), bound).await,
            Err(error) => {
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    %error,
                    "acquire failed; retrying while the wait lasts",
                );
                retry_at = Some(args::instant_after(Instant::now(), backoff.next_delay()));
                last_error = Some(error);
            }
        }
    }

    _counted = entry.is_some().then(|| env.stopping.enter());
    let deadline = deadline.unwrap_or_else(|| args::far_future(Instant::now()));
    if Instant::now() >= deadline {
        // The wait ran out during the fast path: no point subscribing.
        return leave(entry, last_error.map_or(Ok(None), Err), bound).await;
    }
    // From here on the call waits: counted in `Client::stats` (and the waiters gauge)
    // until it ends, however it ends.
    let mut waiting = env.telemetry.wait_begin(&plan.key, plan.kind);
    // Register before the next attempt: a release published from here on wakes us. A
    // server-queued waiter is also given what its client heard since the fast path was
    // sent (or a turn to catch up, if its client was not listening all that time).
    let how = if server_queued {
        Join::Queued { queue: attempt.server_queue(), position, sent_at: first_sent_at }
    } else if plan.queue == QueueKind::Readers {
        // A reader registered on the server: a write release grants it its hold and
        // names it on the grant channel.
        Join::Reader { owner: attempt.server_queue().owner, sent_at: fast_path_held.then_some(first_sent_at) }
    } else if shared {
        Join::Shared(fast_path_held.then_some(first_sent_at))
    } else if let Some(permits) = plan.permits {
        // A semaphore's waiter: its channel's history says whether a count came since
        // the fast path was answered "not enough".
        Join::Permits { permits, sent_at: fast_path_held.then_some(first_sent_at) }
    } else if plan.channel_kind == WaitChannel::Own && fast_path_held {
        // Alone on its own channel: the channel's history says whether a release came.
        Join::InLineAfter(first_sent_at)
    } else {
        Join::InLine
    };
    let slot = env.line.join(plan, how);
    let subscribe_by = deadline.min(args::instant_after(Instant::now(), env.subscribe_timeout));
    if !slot.subscribed_by(subscribe_by).await {
        // Degraded, not stuck: we still retry on the holder's TTL, and the resubscribe
        // wakes every waiter once it is confirmed.
        tracing::debug!(
            target: crate::telemetry::TARGET,
            channel = %plan.channel,
            "subscription not confirmed yet; waiting on TTL",
        );
    }
    if last_error.is_some() {
        // The fast path failed: the turn a first-in-line waiter starts with is spent;
        // the back-off timer says when to try again.
        let _ = slot.take_turn();
    }
    // A waiter in a local line only (no lock kind today: fenced waiters queue on the
    // server since issue 18; kept for kinds without a server queue) that the waiter ahead left by
    // acquiring has never flagged the new holder, and that holder's acquire flagged
    // nothing either: with `redisson_waiters(false)` its release would publish nothing
    // and this waiter would sleep until the holder's lease ran out. One call flags it.
    let flag_new_holders = !queued && !env.redisson_waiters;
    let mut flag_holder = false;
    // A grant that was not this wait's to take over: an attempt finds out at once.
    let mut grant_turn = false;
    loop {
        if env.stopping.is_stopped() {
            // The client shuts down: leave the queue now, while the connection is open
            // (a grant this wait was given is given back by the clean-up).
            drop(slot);
            return leave(entry.take(), Err(Stopping::error()), bound).await;
        }
        if let Some(grant) = slot.take_granted() {
            // A write release granted this reader its hold (one step, no script): take
            // it over. Its own checks decide whether the grant is this wait's.
            let _ = slot.take_turn();
            waiting.wake_up();
            let Some(claimed) = before(bound, attempt.claim(grant)).await else {
                // The deadline came first: the clean-up gives back what the server
                // granted (the owner accounts for no hold).
                drop(slot);
                return leave(entry.take(), last_error.map_or(Ok(None), Err), bound).await;
            };
            if let Some(acquired) = claimed {
                slot.acquired(A::held_until(&acquired));
                return Ok(Some(disarm(entry, acquired)));
            }
            grant_turn = true;
        }
        if slot.take_served() {
            // A release served this waiter from the server's queue: its permits are its
            // own in Redis (the operation's record says so), and no call is needed.
            if let Some(acquired) = attempt.granted() {
                slot.acquired(A::held_until(&acquired));
                return Ok(Some(disarm(entry, acquired)));
            }
        }
        if let Some(held_until) = slot.take_held_until() {
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
        let timer_due = ((slot.is_first() || retrying) && due(retry_at)) || due(refresh_at);
        if bound.is_some() && now >= deadline {
            // A bounded wait never starts an attempt past its deadline: it could not
            // end in time.
            drop(slot);
            return leave(entry.take(), last_error.map_or(Ok(None), Err), bound).await;
        }
        let flag_now = std::mem::take(&mut flag_holder);
        if slot.take_turn() || timer_due || flag_now || std::mem::take(&mut grant_turn) {
            run.attempts += 1;
            waiting.wake_up();
            let Some(tried) = before(bound, attempt.attempt(true)).await else {
                // The deadline came first: the attempt is dropped (it undoes what it may
                // have taken) and the queue is left in the background. The answer is
                // the last one known: the transient error of the attempt before, if any.
                drop(slot);
                return leave(entry.take(), last_error.map_or(Ok(None), Err), bound).await;
            };
            refresh_at = refresh_every.map(|every| args::instant_after(Instant::now(), every));
            match tried {
                Ok(Ok(acquired)) => {
                    // The next in line waits for our release instead of trying now.
                    slot.acquired(A::held_until(&acquired));
                    return Ok(Some(disarm(entry, acquired)));
                }
                Ok(Err(held)) => {
                    // The server's expiry is at most `pttl` after the reply arrived: retrying
                    // then never comes before the key has expired. A hostile PTTL cannot
                    // overflow the clock.
                    retry_at = held.pttl.map(|pttl| args::instant_after(Instant::now(), pttl));
                    slot.set_position(held.position);
                    backoff.reset();
                    last_error = None;
                    tracing::trace!(
                        target: crate::telemetry::TARGET,
                        pttl = ?held.pttl,
                        position = ?held.position,
                        "not acquired; waiting",
                    );
                }
                Err(error) if error.is_transient() => {
                    // Keep our place in line and try again after a back-off.
                    tracing::debug!(
                        target: crate::telemetry::TARGET,
                        %error,
                        "acquire failed; retrying while the wait lasts",
                    );
                    retry_at = Some(args::instant_after(Instant::now(), backoff.next_delay()));
                    last_error = Some(error);
                }
                Err(error) => {
                    drop(slot);
                    return leave(entry.take(), Err(error), bound).await;
                }
            }
            continue;
        }
        if now >= deadline {
            drop(slot);
            return leave(entry.take(), last_error.map_or(Ok(None), Err), bound).await;
        }
        // Only the first in line keeps a TTL timer (and a waiter retrying after an
        // error, its back-off); every queued waiter keeps its refresh timer. The others
        // wait for their turn.
        let ttl_timer = if slot.is_first() || last_error.is_some() { retry_at } else { None };
        let until = [ttl_timer, refresh_at].into_iter().flatten().fold(deadline, Instant::min);
        tokio::select! {
            _ = slot.wait_until(until) => {}
            () = env.stopping.stopped() => {}
        }
    }
}

/// Runs `step` (one attempt) unless `bound` passes first: `None` when it did, and the
/// step was dropped (its cancel safety gives back what it may have taken). Without a
/// bound it runs to its end (an unbounded wait, a single try).
async fn before<F: Future>(bound: Option<Instant>, step: F) -> Option<F::Output> {
    match bound {
        Some(deadline) => tokio::time::timeout_at(deadline, step).await.ok(),
        None => Some(step.await),
    }
}
