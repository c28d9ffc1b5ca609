//! The blocking [`Semaphore`] and its [`SemaphorePermit`]: [`crate::Semaphore`] and
//! [`crate::SemaphorePermit`], each call run on the client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Result;

use super::held::{Guarded, Handle};
use super::runtime::Runner;
use super::shared::BlockingShared;

/// The blocking form of [`crate::Semaphore`] (Redisson's `RSemaphore` layout): the same
/// methods and errors, each call blocking the calling thread until it is answered. A
/// semaphore hands out counts, not guards: what `acquire` took, `release` gives back.
///
/// Every method fails with [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
/// on a thread that runs async tasks (nothing sent), and with
/// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the client was shut down.
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let exports = client.semaphore("exports");
/// exports.try_set_permits(8)?;
/// let permit = exports.acquire(1)?;
/// // ... at most 8 of these run at once across the fleet ...
/// permit.release()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Semaphore {
    handle: Handle<crate::Semaphore>,
}

impl Semaphore {
    pub(crate) fn new(client: &Arc<BlockingShared>, semaphore: crate::Semaphore) -> Self {
        Semaphore { handle: Handle::new(client, semaphore) }
    }

    /// The Redis key (the count String).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// The channel releases publish on, `redisson_sc:{NAME}`.
    pub fn channel(&self) -> &str {
        self.handle.get().channel()
    }

    /// As [`crate::Semaphore::try_set_permits`]: sets the count if it was never set.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.handle.call(move |s| async move { s.try_set_permits(permits).await })
    }

    /// As [`crate::Semaphore::add_permits`]: adds `delta` (may be negative) to the count.
    ///
    /// # Errors
    /// As [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.handle.call(move |s| async move { s.add_permits(delta).await })
    }

    /// As [`crate::Semaphore::available_permits`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.handle.call(|s| async move { s.available_permits().await })
    }

    /// As [`crate::Semaphore::drain_permits`]: takes every available permit.
    ///
    /// # Errors
    /// As [`crate::Semaphore::drain_permits`].
    pub fn drain_permits(&self) -> Result<i64> {
        self.handle.call(|s| async move { s.drain_permits().await })
    }

    fn permit(&self, permit: crate::SemaphorePermit) -> SemaphorePermit {
        SemaphorePermit::new(permit, self.handle.runner().clone())
    }

    /// As [`crate::Semaphore::acquire`]: waits until `permits` are taken.
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    pub fn acquire(&self, permits: u32) -> Result<SemaphorePermit> {
        self.handle.call(move |s| async move { s.acquire(permits).await }).map(|permit| self.permit(permit))
    }

    /// As [`crate::Semaphore::try_acquire`]: one attempt.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermit>> {
        let taken = self.handle.call(move |s| async move { s.try_acquire(permits).await })?;
        Ok(taken.map(|permit| self.permit(permit)))
    }

    /// As [`crate::Semaphore::try_acquire_for`]: waits at most `wait`.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire_for`].
    pub fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<Option<SemaphorePermit>> {
        let taken = self.handle.call(move |s| async move { s.try_acquire_for(permits, wait).await })?;
        Ok(taken.map(|permit| self.permit(permit)))
    }

    /// As [`crate::Semaphore::release`]: gives `permits` back and publishes the count.
    ///
    /// # Errors
    /// As [`crate::Semaphore::release`].
    pub fn release(&self, permits: u32) -> Result<()> {
        self.handle.call(move |s| async move { s.release(permits).await })
    }
}

/// Permits of a blocking [`Semaphore`]: the blocking form of [`crate::SemaphorePermit`].
/// Dropping it gives the permits back in the background (never blocking); once the
/// client's last clone was dropped, nothing is sent.
#[must_use = "dropping the permit gives its permits back (in the background)"]
#[clippy::has_significant_drop]
pub struct SemaphorePermit {
    held: Guarded<crate::SemaphorePermit>,
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl SemaphorePermit {
    fn new(permit: crate::SemaphorePermit, runner: Arc<Runner>) -> Self {
        SemaphorePermit { held: Guarded::new(permit, runner) }
    }

    /// How many permits it holds (as [`crate::SemaphorePermit::permits`]).
    pub fn permits(&self) -> u32 {
        self.held.get().permits()
    }

    /// The semaphore's Redis key.
    pub fn key(&self) -> &str {
        self.held.get().key()
    }

    /// `true` once the client's shutdown gave the permits back (as
    /// [`crate::SemaphorePermit::is_lost`]). Sends nothing and never blocks.
    pub fn is_lost(&self) -> bool {
        self.held.get().is_lost()
    }

    /// Blocks until the permits are lost (the client was shut down) or `timeout`
    /// passes: `true` when they are (the blocking form of
    /// [`crate::SemaphorePermit::lost`]).
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that
    /// runs async tasks.
    pub fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        self.held.wait_lost(timeout)
    }

    /// Gives the permits back and waits for the server's answer.
    ///
    /// # Errors
    /// As [`crate::SemaphorePermit::release`];
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks (the permit is then dropped, which gives the permits back in the
    /// background); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the client
    /// was shut down or its last clone dropped.
    pub fn release(self) -> Result<()> {
        self.held.unlock()
    }

    /// Keeps the permits taken (as [`crate::SemaphorePermit::detach`]): nothing is sent.
    pub fn detach(self) {
        self.held.detach(crate::SemaphorePermit::detach);
    }
}
