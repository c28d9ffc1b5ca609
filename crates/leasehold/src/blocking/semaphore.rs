//! The blocking [`Semaphore`]: [`crate::Semaphore`], each call run on the client's
//! runtime thread.

use std::time::Duration;

use lock_core::Result;

use super::held::Handle;
use super::Client;

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
/// exports.acquire(1)?;
/// // ... at most 8 of these run at once across the fleet ...
/// exports.release(1)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Semaphore {
    handle: Handle<crate::Semaphore>,
}

impl Semaphore {
    pub(crate) fn new(client: &Client, semaphore: crate::Semaphore) -> Self {
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

    /// As [`crate::Semaphore::acquire`]: waits until `permits` are taken.
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    pub fn acquire(&self, permits: u32) -> Result<()> {
        self.handle.call(move |s| async move { s.acquire(permits).await })
    }

    /// As [`crate::Semaphore::try_acquire`]: one attempt.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u32) -> Result<bool> {
        self.handle.call(move |s| async move { s.try_acquire(permits).await })
    }

    /// As [`crate::Semaphore::try_acquire_with`]: waits at most `wait`.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire_with`].
    pub fn try_acquire_with(&self, permits: u32, wait: Duration) -> Result<bool> {
        self.handle.call(move |s| async move { s.try_acquire_with(permits, wait).await })
    }

    /// As [`crate::Semaphore::release`]: gives `permits` back and publishes the count.
    ///
    /// # Errors
    /// As [`crate::Semaphore::release`].
    pub fn release(&self, permits: u32) -> Result<()> {
        self.handle.call(move |s| async move { s.release(permits).await })
    }
}
