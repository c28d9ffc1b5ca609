//! The blocking [`FencedLock`] and its [`FencedGuard`]: [`crate::FencedLock`] and
//! [`crate::FencedGuard`], each call run on the client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Result;

use crate::blocking::held::{leased_guard_methods, Guarded, Handle};
use crate::blocking::runtime::Runner;
use crate::blocking::shared::BlockingShared;
use crate::fence::FencedWrite;

/// The blocking form of [`crate::FencedLock`]: a reentrant lock whose every fresh hold
/// gets a fencing token; the same methods and errors, each call blocking the calling
/// thread until it is answered.
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let guard = client.fenced_lock("ledger:7").lock()?;
/// // The resource accepts the write only if no later holder wrote already.
/// let written = guard.fenced_set("ledger:7:balance", "120")?;
/// assert!(written.is_written());
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FencedLock {
    handle: Handle<crate::FencedLock>,
}

impl FencedLock {
    pub(crate) fn new(client: &Arc<BlockingShared>, lock: crate::FencedLock) -> Self {
        FencedLock { handle: Handle::new(client, lock) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// As [`crate::FencedLock::token_key`].
    ///
    /// # Errors
    /// As [`crate::FencedLock::token_key`].
    pub fn token_key(&self) -> Result<String> {
        self.handle.get().token_key()
    }

    /// This handle's owner id, `CLIENT_UUID:N`.
    pub fn owner(&self) -> &str {
        self.handle.get().owner()
    }

    fn guard(&self, guard: crate::FencedGuard) -> FencedGuard {
        FencedGuard::new(guard, self.handle.runner().clone())
    }

    /// As [`crate::FencedLock::lock`], with a token.
    ///
    /// # Errors
    /// As [`crate::FencedLock::lock`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn lock(&self) -> Result<FencedGuard> {
        self.handle.call(|lock| async move { lock.lock().await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::FencedLock::lock_with_lease`], with a token.
    ///
    /// # Errors
    /// As [`crate::FencedLock::lock_with_lease`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<FencedGuard> {
        self.handle.call(move |lock| async move { lock.lock_with_lease(lease).await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::FencedLock::try_lock`], with a token.
    ///
    /// # Errors
    /// As [`crate::FencedLock::try_lock`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn try_lock(&self) -> Result<Option<FencedGuard>> {
        Ok(self.handle.call(|lock| async move { lock.try_lock().await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::FencedLock::try_lock_for`], with a token.
    ///
    /// # Errors
    /// As [`crate::FencedLock::try_lock_for`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<FencedGuard>> {
        Ok(self.handle.call(move |lock| async move { lock.try_lock_for(wait).await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::FencedLock::try_lock_with`], with a token.
    ///
    /// # Errors
    /// As [`crate::FencedLock::try_lock_with`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<FencedGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_lock_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.guard(guard)))
    }

    /// As [`crate::FencedLock::force_unlock`].
    ///
    /// # Errors
    /// As [`crate::FencedLock::force_unlock`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn force_unlock(&self) -> Result<bool> {
        self.handle.call(|lock| async move { lock.force_unlock().await })
    }

    crate::blocking::lock::blocking_queries!();
}

/// One hold of a blocking [`FencedLock`], with its fencing token: the blocking form of
/// [`crate::FencedGuard`]. Dropping it releases the hold in the background, as a
/// blocking [`LockGuard`](crate::blocking::LockGuard) does.
#[must_use = "dropping the guard releases the lock (in the background)"]
#[clippy::has_significant_drop]
pub struct FencedGuard {
    held: Guarded<crate::FencedGuard>,
}

impl std::fmt::Debug for FencedGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl FencedGuard {
    fn new(guard: crate::FencedGuard, runner: Arc<Runner>) -> Self {
        FencedGuard { held: Guarded::new(guard, runner) }
    }

    /// The hold's fencing token (as [`crate::FencedGuard::token`]).
    pub fn token(&self) -> u64 {
        self.held.get().token()
    }

    /// Whether this guard is in watchdog mode (as [`crate::LockGuard::is_watchdog`]).
    pub fn is_watchdog(&self) -> bool {
        self.held.get().is_watchdog()
    }

    /// As [`crate::FencedGuard::fenced_set`]: writes the String `resource` only if no
    /// holder with a larger token wrote it first.
    ///
    /// # Errors
    /// As [`crate::fence::fenced_set`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks; [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown)
    /// once the client's runtime stopped.
    pub fn fenced_set(&self, resource: &str, value: impl AsRef<[u8]>) -> Result<FencedWrite> {
        let client = self.held.get().client_shared();
        let (resource, value, token) = (resource.to_owned(), value.as_ref().to_vec(), self.token());
        self.held.run(async move { client.store.fenced_write(&resource, token, &value).await })
    }

    /// Gives back this hold but keeps the lock taken until `min_hold` after it was
    /// acquired, and waits for the server's answer, as [`crate::FencedGuard::unlock_after`] (a
    /// once-per-tick job).
    ///
    /// # Errors
    /// As [`crate::FencedGuard::unlock_after`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks (the guard is then dropped, which releases the
    /// hold in the background); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once
    /// the client was shut down or its last clone dropped.
    pub fn unlock_after(self, min_hold: std::time::Duration) -> crate::Result<()> {
        self.held.unlock_with(move |guard| guard.unlock_after(min_hold))
    }

    leased_guard_methods!("crate::LockGuard");
}
