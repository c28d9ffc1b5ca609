//! The blocking [`Lock`] and its [`LockGuard`]: [`crate::Lock`] and
//! [`crate::LockGuard`], each call run on the client's runtime thread.

pub(crate) mod fair;
pub(crate) mod fenced;

use std::sync::Arc;

use std::time::Duration;

use lock_core::Result;

use crate::blocking::held::{leased_guard_methods, Guarded, Handle};
use crate::blocking::shared::BlockingShared;

/// The blocking form of [`crate::Lock`]: a reentrant lock in Redisson's `RLock` layout,
/// with the same methods, the same owner rules and the same errors, each call blocking
/// the calling thread until it is answered.
///
/// The handle is the owner, as in the async API: threads that must exclude each other
/// take their own `client.lock(name)`; threads that share one handle (an `Arc<Lock>`)
/// share the owner and re-enter. A handle keeps its client's runtime thread running.
///
/// # Examples
/// ```no_run
/// # fn demo() -> leasehold::Result<()> {
/// let client = leasehold::blocking::Client::connect("redis://127.0.0.1:6379")?;
/// let lock = client.lock("report:daily");
/// let guard = lock.lock()?; // waits; renewed while held, even while this thread sleeps
/// // ... critical section ...
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Lock {
    handle: Handle<crate::Lock>,
}

impl Lock {
    pub(crate) fn new(client: &Arc<BlockingShared>, lock: crate::Lock) -> Self {
        Lock { handle: Handle::new(client, lock) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// This handle's owner id, `CLIENT_UUID:N`: the Hash field it writes.
    pub fn owner(&self) -> &str {
        self.handle.get().owner()
    }

    /// The async handle of the same owner, and the client, for a blocking multi-lock
    /// that takes this handle over (the handle is consumed, so the owner stays one).
    pub(crate) fn into_async(self) -> (crate::Lock, Arc<BlockingShared>) {
        let lock = crate::Lock { shared: self.handle.get().shared.clone() };
        (lock, self.handle.client().clone())
    }

    fn guard(&self, guard: crate::LockGuard) -> LockGuard {
        LockGuard::new(guard, self.handle.runner().clone())
    }

    /// As [`crate::Lock::lock`]: waits as long as it takes, in watchdog mode.
    ///
    /// # Errors
    /// As [`crate::Lock::lock`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks (nothing sent); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown)
    /// after [`Client::shutdown`](crate::blocking::Client::shutdown).
    pub fn lock(&self) -> Result<LockGuard> {
        self.handle.call(|lock| async move { lock.lock().await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::Lock::lock_with_lease`].
    ///
    /// # Errors
    /// As [`crate::Lock::lock_with_lease`] and [`Lock::lock`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.handle.call(move |lock| async move { lock.lock_with_lease(lease).await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::Lock::try_lock`]: one attempt, no waiting.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock`] and [`Lock::lock`].
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        Ok(self.handle.call(|lock| async move { lock.try_lock().await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::Lock::try_lock_for`]: waits at most `wait`, watchdog mode.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_for`] and [`Lock::lock`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        Ok(self.handle.call(move |lock| async move { lock.try_lock_for(wait).await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::Lock::try_lock_with`]: waits at most `wait`, then holds for `lease`.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_with`] and [`Lock::lock`].
    pub fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<LockGuard>> {
        let acquired = self.handle.call(move |lock| async move { lock.try_lock_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.guard(guard)))
    }

    /// As [`crate::Lock::force_unlock`].
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`] and [`Lock::lock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.handle.call(|lock| async move { lock.force_unlock().await })
    }

    crate::blocking::lock::blocking_queries!();
}

/// The read-only queries of a blocking lock whose field `handle` wraps a handle with
/// the async `is_locked`, `is_held`, `hold_count` and `remaining_ttl`.
macro_rules! blocking_queries {
    () => {
        /// As [`crate::Lock::is_locked`]: whether any owner holds the lock now.
        ///
        /// # Errors
        /// As [`crate::Lock::is_locked`] and [`Lock::lock`](crate::blocking::Lock::lock).
        pub fn is_locked(&self) -> crate::Result<bool> {
            self.handle.call(|lock| async move { lock.is_locked().await })
        }

        /// As [`crate::Lock::is_held`]: whether this owner holds the lock now.
        ///
        /// # Errors
        /// As [`crate::Lock::is_held`] and [`Lock::lock`](crate::blocking::Lock::lock).
        pub fn is_held(&self) -> crate::Result<bool> {
            self.handle.call(|lock| async move { lock.is_held().await })
        }

        /// As [`crate::Lock::hold_count`]: this owner's hold count on the server.
        ///
        /// # Errors
        /// As [`crate::Lock::hold_count`] and [`Lock::lock`](crate::blocking::Lock::lock).
        pub fn hold_count(&self) -> crate::Result<u64> {
            self.handle.call(|lock| async move { lock.hold_count().await })
        }

        /// As [`crate::Lock::remaining_ttl`]: the lock key's remaining TTL.
        ///
        /// # Errors
        /// As [`crate::Lock::remaining_ttl`] and [`Lock::lock`](crate::blocking::Lock::lock).
        pub fn remaining_ttl(&self) -> crate::Result<Option<std::time::Duration>> {
            self.handle.call(|lock| async move { lock.remaining_ttl().await })
        }
    };
}
pub(crate) use blocking_queries;

/// One hold of a blocking [`Lock`] (or [`FairLock`](crate::blocking::FairLock)): the blocking
/// form of [`crate::LockGuard`].
///
/// Release it with [`LockGuard::unlock`], which reports errors. Dropping it releases
/// the hold in the background on the client's runtime thread: `Drop` never blocks and
/// never panics. While it lives, the runtime thread renews a watchdog-mode hold, whether
/// or not the owning thread is busy or asleep. If the client's last clone is dropped
/// first, that drop releases the hold (see [`Client`](crate::blocking::Client), "Dropping the last clone"); the
/// guard then reports [`LockGuard::is_lost`] and its `unlock` fails with
/// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown).
#[must_use = "dropping the guard releases the lock (in the background)"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    held: Guarded<crate::LockGuard>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl LockGuard {
    pub(crate) fn new(guard: crate::LockGuard, runner: std::sync::Arc<crate::blocking::runtime::Runner>) -> Self {
        LockGuard { held: Guarded::new(guard, runner) }
    }

    /// Whether this guard is in watchdog mode (as [`crate::LockGuard::is_watchdog`]).
    pub fn is_watchdog(&self) -> bool {
        self.held.get().is_watchdog()
    }

    /// Gives back this hold but keeps the lock taken until `min_hold` after it was
    /// acquired, and waits for the server's answer, as [`crate::LockGuard::unlock_after`] (a
    /// once-per-tick job).
    ///
    /// # Errors
    /// As [`crate::LockGuard::unlock_after`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks (the guard is then dropped, which releases the
    /// hold in the background); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once
    /// the client was shut down or its last clone dropped.
    pub fn unlock_after(self, min_hold: std::time::Duration) -> crate::Result<()> {
        self.held.unlock_with(move |guard| guard.unlock_after(min_hold))
    }

    leased_guard_methods!("crate::LockGuard");
}
