//! One waiter's place in its lock's queue (on the lock's release channel).

use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::channel::ChannelWaiters;

/// Where a departing waiter goes: the subscriber's shared state, which takes it out of
/// its line and lets an emptied channel linger, then unsubscribes it. A trait, so that
/// this file need not name the subscriber (which makes waiters): no import loop.
pub(crate) trait Departures: std::fmt::Debug + Send + Sync {
    /// Called once by a departing waiter, from its `Drop`: synchronous and non-blocking.
    fn leave(&self, waiters: &Arc<ChannelWaiters>, lock: &str, id: u64, held_until: Option<Instant>);
}

/// A place in line for one lock, on that lock's release channel. Dropping it leaves the
/// line (handing the turn on when needed) and, for the last waiter on the channel (over
/// all its locks), unsubscribes in the background.
#[derive(Debug)]
#[must_use = "a waiter leaves the line as soon as it is dropped"]
pub struct Waiter {
    shared: Arc<dyn Departures>,
    waiters: Arc<ChannelWaiters>,
    /// The lock key: which of the channel's queues this waiter is in.
    lock: Arc<str>,
    id: u64,
    signal: Arc<Notify>,
    /// Set by [`Waiter::acquired`]: the end of the lease this waiter just took.
    held_until: Option<Instant>,
}

impl Waiter {
    pub(crate) fn new(
        shared: Arc<dyn Departures>,
        waiters: Arc<ChannelWaiters>,
        lock: Arc<str>,
        id: u64,
        signal: Arc<Notify>,
    ) -> Self {
        Waiter { shared, waiters, lock, id, signal, held_until: None }
    }

    /// Leaves the line because this waiter acquired the lock, which it holds until
    /// about `held_until`. The next waiter gets a timer instead of a turn: it waits for
    /// the release message rather than try a lock that was just taken.
    pub fn acquired(mut self, held_until: Instant) {
        self.held_until = Some(held_until);
    }

    /// The timer a departing acquirer left this waiter (see [`Waiter::acquired`]), if
    /// any. Taking it clears it.
    pub fn take_held_until(&self) -> Option<Instant> {
        self.waiters.take_held_until(&self.lock, self.id)
    }

    /// The read hold a grant message says a write release gave this waiter's owner, if
    /// one did (only for a waiter made by
    /// [`Subscriber::register_reader`](crate::Subscriber::register_reader)). Taking it
    /// clears it.
    pub fn take_granted(&self) -> Option<crate::Grant> {
        self.waiters.take_granted(self.id)
    }

    /// `true` if this waiter may try to acquire now: it was first in line when it
    /// registered, became first, or a release message woke it. Consumes the turn.
    pub fn take_turn(&self) -> bool {
        self.waiters.take_wake(&self.lock, self.id)
    }

    /// `true` once a grant message named this waiter (a semaphore's queued waiter,
    /// [`Subscriber::register_queued_permits`](crate::Subscriber::register_queued_permits)):
    /// its permits are its own in Redis, the operation's record says so. Consumes it.
    pub fn take_served(&self) -> bool {
        self.waiters.take_served(self.id)
    }

    /// Records where the server's wait queue has this waiter now (0 = head; `None`: not
    /// queued), as its last call reported. Only for a waiter made by
    /// [`Subscriber::register_queued`](crate::Subscriber::register_queued); ignored
    /// otherwise.
    pub fn set_position(&self, position: Option<u64>) {
        self.waiters.set_position(self.id, position);
    }

    /// `true` while this waiter is first in line for its lock (waiters on other locks
    /// of the same channel do not count; for a server-queued waiter, while it is the
    /// head of the server's queue as last reported). Only the first waiter retries on
    /// the holder's TTL; the others wait for their turn.
    pub fn is_first(&self) -> bool {
        self.waiters.is_first(&self.lock, self.id)
    }

    /// `true` once the server confirmed the channel's subscription (one per channel,
    /// shared by every lock on it).
    pub fn is_subscribed(&self) -> bool {
        self.waiters.is_subscribed()
    }

    /// Waits until the subscription is confirmed or `deadline` passes; returns whether
    /// it is confirmed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn subscribed_by(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.waiters.subscribed()).await.is_ok()
    }

    /// Waits until this waiter is given a turn, its place changes (it became first in
    /// line), or `deadline` passes. Returns `true` when it has a turn (which
    /// [`Waiter::take_turn`] then consumes). It may also return early without a turn:
    /// callers re-plan and wait again.
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up that arrives meanwhile stays recorded on the waiter.
    pub async fn wait_until(&self, deadline: Instant) -> bool {
        if self.waiters.has_wake(&self.lock, self.id) {
            return true;
        }
        tokio::select! {
            () = self.signal.notified() => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
        self.waiters.has_wake(&self.lock, self.id)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // Synchronous and non-blocking: the UNSUBSCRIBE, if any, is sent by the
        // subscriber task.
        self.shared.leave(&self.waiters, &self.lock, self.id, self.held_until);
    }
}
