//! The blocking [`FairLock`]: [`crate::FairLock`], each call run on the client's
//! runtime thread. Its guards are blocking [`LockGuard`]s.

use std::sync::Arc;

use std::time::Duration;

use lock_core::Result;

use crate::blocking::held::Handle;
use crate::blocking::shared::BlockingShared;
use crate::blocking::LockGuard;

/// The blocking form of [`crate::FairLock`]: granted strictly in queue order across
/// every client and process, in Redisson's `RFairLock` layout; the same methods and
/// errors, each call blocking the calling thread until it is answered.
#[derive(Debug)]
pub struct FairLock {
    handle: Handle<crate::FairLock>,
}

impl FairLock {
    pub(crate) fn new(client: &Arc<BlockingShared>, lock: crate::FairLock) -> Self {
        FairLock { handle: Handle::new(client, lock) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// This handle's owner id, `CLIENT_UUID:N`.
    pub fn owner(&self) -> &str {
        self.handle.get().owner()
    }

    /// As [`crate::FairLock::queue_key`].
    ///
    /// # Errors
    /// As [`crate::FairLock::queue_key`].
    pub fn queue_key(&self) -> Result<String> {
        self.handle.get().queue_key()
    }

    /// As [`crate::FairLock::timeout_key`].
    ///
    /// # Errors
    /// As [`crate::FairLock::timeout_key`].
    pub fn timeout_key(&self) -> Result<String> {
        self.handle.get().timeout_key()
    }

    /// As [`crate::FairLock::waiter_channel`].
    ///
    /// # Errors
    /// As [`crate::FairLock::waiter_channel`].
    pub fn waiter_channel(&self) -> Result<String> {
        self.handle.get().waiter_channel()
    }

    fn guard(&self, guard: crate::LockGuard) -> LockGuard {
        LockGuard::new(guard, self.handle.runner().clone())
    }

    /// As [`crate::FairLock::lock`]: waits in queue order as long as it takes.
    ///
    /// # Errors
    /// As [`crate::FairLock::lock`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn lock(&self) -> Result<LockGuard> {
        self.handle.call(|lock| async move { lock.lock().await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::FairLock::lock_with_lease`].
    ///
    /// # Errors
    /// As [`crate::FairLock::lock_with_lease`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.handle.call(move |lock| async move { lock.lock_with_lease(lease).await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::FairLock::try_lock`]: one attempt, no waiting and no queueing.
    ///
    /// # Errors
    /// As [`crate::FairLock::try_lock`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        Ok(self.handle.call(|lock| async move { lock.try_lock().await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::FairLock::try_lock_for`].
    ///
    /// # Errors
    /// As [`crate::FairLock::try_lock_for`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        Ok(self.handle.call(move |lock| async move { lock.try_lock_for(wait).await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::FairLock::try_lock_with`].
    ///
    /// # Errors
    /// As [`crate::FairLock::try_lock_with`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<LockGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_lock_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.guard(guard)))
    }

    /// As [`crate::FairLock::force_unlock`].
    ///
    /// # Errors
    /// As [`crate::FairLock::force_unlock`] and [`Lock::lock`](crate::blocking::Lock::lock).
    pub fn force_unlock(&self) -> Result<bool> {
        self.handle.call(|lock| async move { lock.force_unlock().await })
    }

    crate::blocking::lock::blocking_queries!();
}
