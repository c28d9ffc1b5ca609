//! The blocking [`SimpleLock`] and its [`SimpleGuard`]: [`crate::SimpleLock`] and
//! [`crate::SimpleGuard`], each call run on the client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Result;

use super::held::{Guarded, Handle};
use super::runtime::Runner;
use super::shared::BlockingShared;

/// The blocking form of [`crate::SimpleLock`]: `SET NX PX` and compare-and-delete; not
/// reentrant, not renewed, no wake-ups, no lost signal. The same methods and errors,
/// each call blocking the calling thread until it is answered.
#[derive(Debug)]
pub struct SimpleLock {
    handle: Handle<crate::SimpleLock>,
}

impl SimpleLock {
    pub(crate) fn new(client: &Arc<BlockingShared>, lock: crate::SimpleLock) -> Self {
        SimpleLock { handle: Handle::new(client, lock) }
    }

    /// The Redis key.
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// The owner value this handle writes, `CLIENT_UUID-N`.
    pub fn owner(&self) -> &str {
        self.handle.get().owner()
    }

    fn guard(&self, guard: crate::SimpleGuard) -> SimpleGuard {
        SimpleGuard::new(guard, self.handle.runner().clone())
    }

    /// As [`crate::SimpleLock::lock_with_lease`]: waits as long as it takes, then holds
    /// the lock for `lease`.
    ///
    /// # Errors
    /// As [`crate::SimpleLock::lock_with_lease`] and [`Lock::lock`](super::Lock::lock).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<SimpleGuard> {
        let guard = self.handle.call(move |lock| async move { lock.lock_with_lease(lease).await })?;
        Ok(self.guard(guard))
    }

    /// As [`crate::SimpleLock::try_lock_with`]: tries until acquired or `wait` passed.
    ///
    /// # Errors
    /// As [`crate::SimpleLock::try_lock_with`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<SimpleGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_lock_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.guard(guard)))
    }
}

/// The guard of a blocking [`SimpleLock`]: the blocking form of [`crate::SimpleGuard`].
/// Dropping it releases the lock in the background (never blocking); once the client's
/// last clone was dropped, nothing is sent (that drop released it).
#[must_use = "dropping the guard releases the lock (in the background)"]
#[clippy::has_significant_drop]
pub struct SimpleGuard {
    held: Guarded<crate::SimpleGuard>,
}

impl std::fmt::Debug for SimpleGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl SimpleGuard {
    fn new(guard: crate::SimpleGuard, runner: Arc<Runner>) -> Self {
        SimpleGuard { held: Guarded::new(guard, runner) }
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.held.get().key()
    }

    /// The owner value this guard's lock holds (as [`crate::SimpleGuard::owner`]).
    pub fn owner(&self) -> &str {
        self.held.get().owner()
    }

    /// `true` once the lease deadline has passed (as [`crate::SimpleGuard::is_lost`]).
    /// Sends nothing and never blocks.
    pub fn is_lost(&self) -> bool {
        self.held.get().is_lost()
    }

    /// Blocks until the lease deadline passes or `timeout` does: `true` when it passed
    /// (the blocking form of [`crate::SimpleGuard::lost`]).
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that
    /// runs async tasks.
    pub fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        self.held.wait_lost(timeout)
    }

    /// The local lease deadline (as [`crate::SimpleGuard::lease_deadline`]).
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.held.get().lease_deadline()
    }

    /// Lets go of the guard without releasing the lock (as
    /// [`crate::SimpleGuard::detach`]): nothing is sent, and the key expires with its
    /// lease.
    pub fn detach(self) {
        self.held.detach(crate::SimpleGuard::detach);
    }

    /// Deletes the key if it still holds this owner, and waits for the answer.
    ///
    /// # Errors
    /// As [`crate::SimpleGuard::unlock`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks (the guard is then dropped, which releases it
    /// in the background); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the
    /// client was shut down or its last clone dropped.
    pub fn unlock(self) -> Result<()> {
        self.held.unlock()
    }
}
