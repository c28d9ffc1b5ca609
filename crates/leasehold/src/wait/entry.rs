//! A wait's place in a server queue, cleaned up however the wait ends.

use tokio::time::Instant;

use super::attempt::Attempt;

/// A waiter's entry in the server's queue (a fair lock's `redisson_lock_queue:{NAME}` and
/// its deadline in `redisson_lock_timeout:{NAME}`; a plain lock's
/// `leasehold_lock_queue:{NAME}` and `leasehold_lock_waiters:{NAME}`), removed unless the
/// wait acquired. While it exists (until its clean-up starts) the wait counts as queued
/// ([`Attempt::queue_entered`]), so that no clean-up of this owner removes the entry
/// under a wait that is still going on.
pub(super) struct QueueEntry<'a, A: Attempt> {
    attempt: &'a A,
    /// Cleared once nothing is left to clean up (acquired, or removed inline).
    armed: bool,
    /// Whether this wait still counts as queued.
    counted: bool,
}

impl<'a, A: Attempt> QueueEntry<'a, A> {
    pub(super) fn new(attempt: &'a A) -> Self {
        attempt.queue_entered();
        QueueEntry { attempt, armed: true, counted: true }
    }

    /// The wait is over (it ends or is being cleaned up): it no longer keeps a place
    /// that another clean-up must respect.
    fn uncount(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.attempt.queue_left();
        }
    }
}

impl<A: Attempt> Drop for QueueEntry<'_, A> {
    fn drop(&mut self) {
        self.uncount();
        // Still armed: the wait was cancelled, or its inline clean-up failed. Clean up in
        // the background. Synchronous and non-blocking.
        if self.armed {
            self.attempt.leave_in_background();
        }
    }
}

/// The wait acquired: the acquire removed the queue entry.
pub(super) fn disarm<A: Attempt>(entry: Option<QueueEntry<'_, A>>, acquired: A::Acquired) -> A::Acquired {
    if let Some(mut entry) = entry {
        entry.armed = false;
    }
    acquired
}

/// The wait ends without acquiring (its line slot already dropped): remove the queue
/// entry now ([`Attempt::leave`]), then answer `result`. If that fails, the entry's
/// `Drop` retries in the background.
///
/// A bounded wait (`bound`: its deadline) removes it inline only while the deadline
/// lasts: past it, or once it passes mid-way (the inline clean-up is then dropped), the
/// entry's `Drop` leaves in the background and the answer is not held back.
pub(super) async fn leave<A: Attempt, T>(entry: Option<QueueEntry<'_, A>>, result: T, bound: Option<Instant>) -> T {
    let Some(mut entry) = entry else { return result };
    entry.uncount();
    let left = match bound {
        None => entry.attempt.leave().await,
        Some(deadline) => {
            Instant::now() < deadline && tokio::time::timeout_at(deadline, entry.attempt.leave()).await.unwrap_or(false)
        }
    };
    if left {
        entry.armed = false;
    }
    result
}
