//! The local view of one hold's lease: when it runs out, and whether it is known lost.
//!
//! One `LeaseState` is shared by every guard of one continuous hold (the reentrant holds
//! of one owner) and by the watchdog entry that renews it. The deadline is on the
//! monotonic clock (`tokio::time::Instant`, which is `std::time::Instant` unless a test
//! pauses time) and computed from when the command that set the server's TTL was
//! *sent*: the server's real expiry is never earlier than the local deadline.

use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// A hold's lease deadline and its lost flag.
#[derive(Debug)]
pub struct LeaseState {
    inner: Mutex<Inner>,
    changed: Notify,
}

#[derive(Debug)]
struct Inner {
    expires_at: Instant,
    lost: bool,
}

impl LeaseState {
    /// A lease that runs out at `expires_at`.
    pub fn new(expires_at: Instant) -> Self {
        LeaseState { inner: Mutex::new(Inner { expires_at, lost: false }), changed: Notify::new() }
    }

    /// Records that a command sent at `sent_at` made the server's TTL at least `lease`:
    /// the deadline moves to `sent_at + lease` if that is later. leasehold's scripts
    /// never shorten a lock's TTL, so a deadline never has to move back. Does nothing
    /// once the hold is lost: a lost hold is never revived.
    pub fn extend(&self, sent_at: Instant, lease: Duration) {
        let until = crate::args::instant_after(sent_at, lease);
        let mut inner = self.inner.lock();
        if !inner.lost && until > inner.expires_at {
            inner.expires_at = until;
            drop(inner);
            self.changed.notify_waiters();
        }
    }

    /// Marks the hold lost and wakes everyone waiting in [`LeaseState::lost`].
    /// Returns `true` if this call made the change.
    pub fn mark_lost(&self) -> bool {
        let mut inner = self.inner.lock();
        let first = !inner.lost;
        inner.lost = true;
        drop(inner);
        if first {
            // Once lost, a waiter registered later sees the flag before it sleeps: only
            // the change itself needs to wake anyone.
            self.changed.notify_waiters();
        }
        first
    }

    /// `true` once the hold was marked lost (by a renewal or a check after a reconnect
    /// that found the owner gone, or by the watchdog when renewals failed past the
    /// deadline).
    pub fn is_marked_lost(&self) -> bool {
        self.inner.lock().lost
    }

    /// `true` when the hold is marked lost or its lease deadline has passed.
    pub fn is_lost(&self) -> bool {
        let inner = self.inner.lock();
        inner.lost || Instant::now() >= inner.expires_at
    }

    /// The local lease deadline.
    pub fn expires_at(&self) -> Instant {
        self.inner.lock().expires_at
    }

    /// Resolves when the hold is lost: marked lost, or its deadline passed without
    /// being extended.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Register before reading the state, so no change is missed in between.
            notified.as_mut().enable();
            let (lost, expires_at) = {
                let inner = self.inner.lock();
                (inner.lost, inner.expires_at)
            };
            if lost || Instant::now() >= expires_at {
                return;
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(expires_at) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn lost_fires_at_the_deadline_unless_extended() {
        let start = Instant::now();
        let lease = LeaseState::new(start + Duration::from_secs(3));
        let waited = tokio::time::timeout(Duration::from_secs(2), lease.lost()).await;
        assert!(waited.is_err(), "not lost before the deadline");
        lease.extend(Instant::now(), Duration::from_secs(3));
        assert!(!lease.is_lost());
        let extended = lease.expires_at();
        lease.extend(Instant::now(), Duration::from_secs(1));
        assert_eq!(lease.expires_at(), extended, "a shorter lease never moves the deadline back");
        lease.lost().await;
        assert!(Instant::now() >= start + Duration::from_secs(5));
        assert!(lease.is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn mark_lost_wakes_waiters_and_cannot_be_undone() {
        let lease = std::sync::Arc::new(LeaseState::new(Instant::now() + Duration::from_secs(60)));
        let waiter = tokio::spawn({
            let lease = lease.clone();
            async move { lease.lost().await }
        });
        tokio::task::yield_now().await;
        assert!(lease.mark_lost());
        assert!(!lease.mark_lost());
        waiter.await.expect("waiter");
        lease.extend(Instant::now(), Duration::from_secs(60));
        assert!(lease.is_lost());
    }
}
