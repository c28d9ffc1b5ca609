//! The permits one acquire of a [`Semaphore`](crate::Semaphore) took, as a guard.

use lock_core::Result;

use crate::semaphore::Semaphore;

/// The permits one acquire of a [`Semaphore`](crate::Semaphore) took: tokio's
/// `SemaphorePermit`, across processes. Give them back with
/// [`SemaphorePermit::release`], which reports errors.
///
/// Dropping it without `release` gives the permits back in the background on the
/// runtime that acquired them (so a request handler cancelled between its acquire and
/// its release, a client hanging up on axum, leaks nothing); if that runtime is gone,
/// nothing can be sent and the permits stay taken. `Drop` never blocks and never panics.
/// [`SemaphorePermit::forget`] keeps them taken on purpose (to be given back later with
/// [`Semaphore::release`](crate::Semaphore::release), by this process or another).
///
/// The permits have no owner and no lease in Redis (Redisson's `RSemaphore` layout): a
/// process that dies holding them never gives them back. Use
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) where that matters.
/// [`Client::shutdown`](crate::Client::shutdown) gives back the permits of every
/// permit guard still alive.
#[must_use = "dropping the permit gives its permits back (in the background)"]
#[clippy::has_significant_drop]
pub struct SemaphorePermit {
    semaphore: Semaphore,
    permits: u32,
    runtime: Option<tokio::runtime::Handle>,
    /// Set once the permits were given back (or forgotten); `Drop` then does nothing.
    done: bool,
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("key", &crate::debug::Bounded(self.semaphore.key()))
            .field("permits", &self.permits)
            .finish()
    }
}

impl SemaphorePermit {
    /// The guard of `permits` permits just taken through `semaphore`.
    pub(crate) fn new(semaphore: Semaphore, permits: u32) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        SemaphorePermit { semaphore, permits, runtime, done: false }
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore's Redis key.
    pub fn key(&self) -> &str {
        self.semaphore.key()
    }

    /// Gives the permits back and publishes the new count, which wakes at most that
    /// many waiters of each client.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key now holds
    /// another type (nothing written); timeouts and connection errors once the retries
    /// are spent: the give-back then goes on in the background (see below).
    ///
    /// # Cancel safety
    /// Dropping the future gives the permits back in the background, as dropping the
    /// guard does; a release already sent is not applied twice.
    pub async fn release(mut self) -> Result<()> {
        let result = self.semaphore.give_back(self.permits).await;
        if result.is_ok() {
            self.done = true;
        }
        result
    }

    /// Keeps the permits taken: nothing is sent, now or on drop. They stay taken until
    /// someone calls [`Semaphore::release`](crate::Semaphore::release).
    pub fn forget(mut self) {
        self.done = true;
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(runtime) = self.runtime.take() else {
            tracing::warn!(semaphore = %self.semaphore.key(), permits = self.permits, "a permit dropped with no runtime left: its permits stay taken");
            return;
        };
        let (semaphore, permits) = (self.semaphore.clone(), self.permits);
        drop(runtime.spawn(async move {
            if let Err(error) = semaphore.give_back(permits).await {
                tracing::warn!(semaphore = %semaphore.key(), %error, permits, "the permits of a dropped permit guard were not given back");
            }
        }));
    }
}
