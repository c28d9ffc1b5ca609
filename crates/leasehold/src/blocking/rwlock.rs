//! The blocking [`ReadWriteLock`] and its [`ReadGuard`] and [`WriteGuard`]:
//! [`crate::ReadWriteLock`] and its guards, each call run on the client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Result;

use super::held::{leased_guard_methods, Guarded, Handle};
use super::runtime::Runner;
use super::shared::BlockingShared;

/// The blocking form of [`crate::ReadWriteLock`]: many readers or one writer, in
/// Redisson's `RReadWriteLock` layout; the same methods and errors (an upgrade is
/// [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock), nothing sent), each
/// call blocking the calling thread until it is answered.
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let rw = client.read_write_lock("catalog");
/// let read = rw.read()?; // shared with every other reader
/// read.unlock()?;
/// let write = client.read_write_lock("catalog").write()?; // excludes all
/// write.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ReadWriteLock {
    handle: Handle<crate::ReadWriteLock>,
}

impl ReadWriteLock {
    pub(crate) fn new(client: &Arc<BlockingShared>, lock: crate::ReadWriteLock) -> Self {
        ReadWriteLock { handle: Handle::new(client, lock) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// This handle's reader owner id, `CLIENT_UUID:N` (its writer field is this +
    /// `:write`).
    pub fn owner(&self) -> &str {
        self.handle.get().owner()
    }

    fn read_guard(&self, guard: crate::ReadGuard) -> ReadGuard {
        ReadGuard { held: Guarded::new(guard, self.runner()) }
    }

    fn write_guard(&self, guard: crate::WriteGuard) -> WriteGuard {
        WriteGuard { held: Guarded::new(guard, self.runner()) }
    }

    fn runner(&self) -> Arc<Runner> {
        self.handle.runner().clone()
    }

    /// As [`crate::ReadWriteLock::read`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::read`] and [`Lock::lock`](super::Lock::lock).
    pub fn read(&self) -> Result<ReadGuard> {
        self.handle.call(|lock| async move { lock.read().await }).map(|guard| self.read_guard(guard))
    }

    /// As [`crate::ReadWriteLock::write`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::write`] and [`Lock::lock`](super::Lock::lock).
    pub fn write(&self) -> Result<WriteGuard> {
        self.handle.call(|lock| async move { lock.write().await }).map(|guard| self.write_guard(guard))
    }

    /// As [`crate::ReadWriteLock::read_with_lease`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::read_with_lease`] and [`Lock::lock`](super::Lock::lock).
    pub fn read_with_lease(&self, lease: Duration) -> Result<ReadGuard> {
        self.handle
            .call(move |lock| async move { lock.read_with_lease(lease).await })
            .map(|guard| self.read_guard(guard))
    }

    /// As [`crate::ReadWriteLock::write_with_lease`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::write_with_lease`] and [`Lock::lock`](super::Lock::lock).
    pub fn write_with_lease(&self, lease: Duration) -> Result<WriteGuard> {
        let acquired = self.handle.call(move |lock| async move { lock.write_with_lease(lease).await })?;
        Ok(self.write_guard(acquired))
    }

    /// As [`crate::ReadWriteLock::try_read`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_read`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_read(&self) -> Result<Option<ReadGuard>> {
        Ok(self.handle.call(|lock| async move { lock.try_read().await })?.map(|guard| self.read_guard(guard)))
    }

    /// As [`crate::ReadWriteLock::try_write`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_write`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_write(&self) -> Result<Option<WriteGuard>> {
        Ok(self.handle.call(|lock| async move { lock.try_write().await })?.map(|guard| self.write_guard(guard)))
    }

    /// As [`crate::ReadWriteLock::try_read_for`]: waits at most `wait`, renewed while held.
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_read_for`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<ReadGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_read_for(wait).await })?;
        Ok(acquired.map(|guard| self.read_guard(guard)))
    }

    /// As [`crate::ReadWriteLock::try_write_for`]: waits at most `wait`, renewed while held.
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_write_for`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<WriteGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_write_for(wait).await })?;
        Ok(acquired.map(|guard| self.write_guard(guard)))
    }

    /// As [`crate::ReadWriteLock::try_read_with`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_read_with`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_read_with(&self, wait: Duration, lease: Duration) -> Result<Option<ReadGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_read_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.read_guard(guard)))
    }

    /// As [`crate::ReadWriteLock::try_write_with`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_write_with`] and [`Lock::lock`](super::Lock::lock).
    pub fn try_write_with(&self, wait: Duration, lease: Duration) -> Result<Option<WriteGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_write_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.write_guard(guard)))
    }

    /// As [`crate::ReadWriteLock::is_read_locked`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::is_read_locked`] and [`Lock::lock`](super::Lock::lock).
    pub fn is_read_locked(&self) -> Result<bool> {
        self.handle.call(|lock| async move { lock.is_read_locked().await })
    }

    /// As [`crate::ReadWriteLock::is_write_locked`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::is_write_locked`] and [`Lock::lock`](super::Lock::lock).
    pub fn is_write_locked(&self) -> Result<bool> {
        self.handle.call(|lock| async move { lock.is_write_locked().await })
    }

    /// As [`crate::ReadWriteLock::force_unlock`].
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::force_unlock`] and [`Lock::lock`](super::Lock::lock).
    pub fn force_unlock(&self) -> Result<bool> {
        self.handle.call(|lock| async move { lock.force_unlock().await })
    }
}

macro_rules! blocking_rw_guard {
    ($(#[$doc:meta])* $name:ident, $async:literal) => {
        $(#[$doc])*
        #[must_use = "dropping the guard releases the hold (in the background)"]
        #[clippy::has_significant_drop]
        pub struct $name {
            held: Guarded<crate::$name>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.held.get().fmt(f)
            }
        }

        impl $name {
            leased_guard_methods!($async);
        }
    };
}

blocking_rw_guard!(
    /// A read hold of a blocking [`ReadWriteLock`]: the blocking form of
    /// [`crate::ReadGuard`]. Dropping it releases the hold in the background.
    ReadGuard,
    "crate::ReadGuard"
);

blocking_rw_guard!(
    /// The write hold of a blocking [`ReadWriteLock`]: the blocking form of
    /// [`crate::WriteGuard`]. Dropping it releases the hold in the background.
    WriteGuard,
    "crate::WriteGuard"
);
