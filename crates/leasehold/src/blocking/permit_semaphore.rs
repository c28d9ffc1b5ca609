//! The blocking [`PermitExpirableSemaphore`] and its [`Permit`]:
//! [`crate::PermitExpirableSemaphore`] and [`crate::Permit`], each call run on the
//! client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Result;

use super::held::{Guarded, Handle};
use super::runtime::Runner;
use super::shared::BlockingShared;

/// The blocking form of [`crate::PermitExpirableSemaphore`] (Redisson's
/// `RPermitExpirableSemaphore` layout): the same methods and errors, each call blocking
/// the calling thread until it is answered.
///
/// Every method fails with [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
/// on a thread that runs async tasks (nothing sent), and with
/// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the client was shut down.
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let partner = client.permit_expirable_semaphore("partner-api");
/// partner.try_set_permits(3)?;
/// let permit = partner.acquire()?; // renewed by the watchdog while held
/// // ... call the rate-limited partner ...
/// permit.release()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PermitExpirableSemaphore {
    handle: Handle<crate::PermitExpirableSemaphore>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: &Arc<BlockingShared>, semaphore: crate::PermitExpirableSemaphore) -> Self {
        PermitExpirableSemaphore { handle: Handle::new(client, semaphore) }
    }

    /// The Redis key (the count String).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// The permits' sorted set, `{NAME}:timeout`.
    pub fn timeout_key(&self) -> &str {
        self.handle.get().timeout_key()
    }

    /// The channel releases publish on, `redisson_sc:{NAME}`.
    pub fn channel(&self) -> &str {
        self.handle.get().channel()
    }

    fn permit(&self, permit: crate::Permit) -> Permit {
        Permit::new(permit, self.handle.runner().clone())
    }

    /// As [`crate::PermitExpirableSemaphore::acquire`]: waits for a permit renewed by
    /// the watchdog while held.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire`].
    pub fn acquire(&self) -> Result<Permit> {
        self.handle.call(|s| async move { s.acquire().await }).map(|permit| self.permit(permit))
    }

    /// As [`crate::PermitExpirableSemaphore::acquire_with_lease`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire_with_lease`].
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        self.handle.call(move |s| async move { s.acquire_with_lease(lease).await }).map(|permit| self.permit(permit))
    }

    /// As [`crate::PermitExpirableSemaphore::try_acquire`]: one attempt.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<Permit>> {
        Ok(self.handle.call(|s| async move { s.try_acquire().await })?.map(|permit| self.permit(permit)))
    }

    /// As [`crate::PermitExpirableSemaphore::try_acquire_for`]: waits at most `wait`, for
    /// a permit renewed while held.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire_for`].
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<Permit>> {
        let acquired = self.handle.call(move |s| async move { s.try_acquire_for(wait).await })?;
        Ok(acquired.map(|permit| self.permit(permit)))
    }

    /// As [`crate::PermitExpirableSemaphore::try_acquire_with`]: waits at most `wait`.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire_with`].
    pub fn try_acquire_with(&self, wait: Duration, lease: Duration) -> Result<Option<Permit>> {
        let acquired = self.handle.call(move |s| async move { s.try_acquire_with(wait, lease).await })?;
        Ok(acquired.map(|permit| self.permit(permit)))
    }

    /// As [`crate::PermitExpirableSemaphore::try_release`]: releases a permit by its id.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_release`].
    pub fn try_release(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.handle.call(move |s| async move { s.try_release(&id).await })
    }

    /// As [`crate::PermitExpirableSemaphore::update_lease`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::update_lease`].
    pub fn update_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        let id = id.to_owned();
        self.handle.call(move |s| async move { s.update_lease(&id, lease).await })
    }

    /// As [`crate::PermitExpirableSemaphore::available_permits`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.handle.call(|s| async move { s.available_permits().await })
    }

    /// As [`crate::PermitExpirableSemaphore::acquired_permits`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquired_permits`].
    pub fn acquired_permits(&self) -> Result<i64> {
        self.handle.call(|s| async move { s.acquired_permits().await })
    }

    /// As [`crate::PermitExpirableSemaphore::set_permits`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::set_permits`].
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        self.handle.call(move |s| async move { s.set_permits(permits).await })
    }

    /// As [`crate::PermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.handle.call(move |s| async move { s.try_set_permits(permits).await })
    }

    /// As [`crate::PermitExpirableSemaphore::add_permits`].
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.handle.call(move |s| async move { s.add_permits(delta).await })
    }
}

/// A permit of a blocking [`PermitExpirableSemaphore`]: the blocking form of
/// [`crate::Permit`]. Dropping it releases the permit in the background (never
/// blocking); once the client's last clone was dropped, nothing is sent, and the permit
/// comes back when its lease ends.
#[must_use = "dropping the permit releases it (in the background)"]
#[clippy::has_significant_drop]
pub struct Permit {
    held: Guarded<crate::Permit>,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl Permit {
    fn new(permit: crate::Permit, runner: Arc<Runner>) -> Self {
        Permit { held: Guarded::new(permit, runner) }
    }

    /// The permit's id, 32 lowercase hex digits (as [`crate::Permit::id`]).
    pub fn id(&self) -> &str {
        self.held.get().id()
    }

    /// The semaphore's Redis key.
    pub fn key(&self) -> &str {
        self.held.get().key()
    }

    /// The local lease deadline (as [`crate::Permit::lease_deadline`]).
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.held.get().lease_deadline()
    }

    /// Whether the watchdog renews this permit now (as [`crate::Permit::is_renewed`]).
    pub fn is_renewed(&self) -> bool {
        self.held.get().is_renewed()
    }

    /// Lets go of the permit without releasing it (as [`crate::Permit::detach`]):
    /// renewal stops, nothing is sent, and it stays listed until its lease runs out.
    pub fn detach(self) {
        self.held.detach(crate::Permit::detach);
    }

    /// `true` once the permit is known lost (as [`crate::Permit::is_lost`]). Sends
    /// nothing and never blocks.
    pub fn is_lost(&self) -> bool {
        self.held.get().is_lost()
    }

    /// Blocks until the permit is lost or `timeout` passes: `true` when it is lost.
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that
    /// runs async tasks.
    pub fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        self.held.wait_lost(timeout)
    }

    /// Releases the permit and waits for the server's answer.
    ///
    /// # Errors
    /// As [`crate::Permit::release`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks (the permit is then dropped, which releases it
    /// in the background); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the
    /// client was shut down or its last clone dropped.
    pub fn release(self) -> Result<()> {
        self.held.unlock()
    }
}
