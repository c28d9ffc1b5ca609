//! Ending every wait at `Client::shutdown` while the connection can still clean up
//! after it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, ErrorKind};
use tokio::sync::Notify;

/// The client's waits, as `Client::shutdown` sees them: it asks every wait to end
/// ([`Stopping::stop`]), then waits, bounded, for each one that holds a place in a
/// server queue to remove it ([`Stopping::drained`]) before it closes the connection.
/// Without this, a waiter's queue entry would outlive its client by its keep-alive: a
/// release would hand the lock (or an election's lead) to a waiter that is gone, and
/// the next one would wait that long. The background clean-up of a cancelled wait (a
/// CLI's campaign dropped at Ctrl-C, just before its shutdown) is counted the same way.
#[derive(Debug, Default)]
pub(crate) struct Stopping {
    stopped: AtomicBool,
    /// Waits that hold a queue place on the server, and background clean-ups of waits
    /// and acquires, that have not ended yet.
    queued: AtomicUsize,
    /// Told at [`Stopping::stop`] and whenever a counted wait ends.
    changed: Notify,
}

impl Stopping {
    /// Whether the client is shutting down: a wait ends at its next step.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The error a wait ends with once the client shuts down (nothing more is sent for
    /// it than the removal of its queue place).
    pub(crate) fn error() -> Error {
        Error::unsent(ErrorKind::Shutdown, "the client is shutting down: the wait ended")
    }

    /// Asks every wait to end (each removes its queue place as it goes).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Resolves once the client shuts down ([`Stopping::stop`]).
    ///
    /// Cancel safe: it only observes.
    pub(crate) async fn stopped(&self) {
        self.until(|| self.is_stopped()).await;
    }

    /// Resolves once `done` holds, checked at once and after each notification.
    async fn until(&self, done: impl Fn() -> bool) {
        let notified = self.changed.notified();
        tokio::pin!(notified);
        loop {
            // Registered before the check: a change between the two is not missed.
            notified.as_mut().enable();
            if done() {
                return;
            }
            notified.as_mut().await;
            notified.set(self.changed.notified());
        }
    }

    /// Counts a wait that holds a queue place (or a clean-up in the background) until
    /// the returned value is dropped (after the wait's own clean-up).
    pub(crate) fn enter(self: &Arc<Self>) -> QueuedWait {
        self.queued.fetch_add(1, Ordering::SeqCst);
        QueuedWait(self.clone())
    }

    /// Waits until no counted wait is left, or `timeout` passed (a server that does
    /// not answer: what is left is cleaned up by the keep-alive on the server).
    /// `true` when none is left.
    ///
    /// Cancel safe: it only observes.
    pub(crate) async fn drained(&self, timeout: Duration) -> bool {
        let drained = self.until(|| self.queued.load(Ordering::SeqCst) == 0);
        tokio::time::timeout(timeout, drained).await.is_ok()
    }
}

/// A wait that holds a queue place (or a clean-up), counted by [`Stopping`] while it
/// lives.
pub(crate) struct QueuedWait(Arc<Stopping>);

impl Drop for QueuedWait {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
        // Only a shutdown waits for the count (every `lock()` passes here: no lock
        // taken otherwise). In the one order of these SeqCst operations, a `false`
        // here comes before `stop`, whose drain then reads the count after this
        // decrement.
        if self.0.is_stopped() {
            self.0.changed.notify_waiters();
        }
    }
}
