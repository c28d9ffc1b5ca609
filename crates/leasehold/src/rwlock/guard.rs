//! The guards of a read/write lock's holds: a [`LockGuard`] each, typed by side.

use lock_core::Result;

use crate::lock::guard::LockGuard;

macro_rules! rw_guard {
    ($(#[$doc:meta])* $name:ident, $side:literal) => {
        $(#[$doc])*
        #[must_use = "dropping the guard releases the hold (in the background)"]
        #[clippy::has_significant_drop]
        #[derive(Debug)]
        pub struct $name {
            guard: LockGuard,
        }

        impl $name {
            pub(crate) fn new(guard: LockGuard) -> Self {
                $name { guard }
            }

            /// The hold's [`LockGuard`] (the blocking API waits on its lost signal).
            #[cfg(feature = "blocking")]
            pub(crate) fn lock_guard(&self) -> &LockGuard {
                &self.guard
            }

            /// The lock's Redis key.
            pub fn key(&self) -> &str {
                self.guard.key()
            }

            /// The owner field this hold counts in.
            pub fn owner(&self) -> &str {
                self.guard.owner()
            }

            #[doc = concat!("Gives back this ", $side, " hold, as [`LockGuard::unlock`] does.")]
            ///
            /// # Errors
            /// As [`LockGuard::unlock`].
            ///
            /// # Cancel safety
            /// As [`LockGuard::unlock`]: a release whose future is dropped finishes in
            /// the background.
            pub async fn unlock(self) -> Result<()> {
                self.guard.unlock().await
            }

            /// `true` when the hold is known lost (see [`LockGuard::is_lost`]).
            pub fn is_lost(&self) -> bool {
                self.guard.is_lost()
            }

            /// Resolves when the hold is lost (see [`LockGuard::lost`]).
            ///
            /// # Cancel safety
            /// Cancel safe: it only observes.
            pub async fn lost(&self) {
                self.guard.lost().await;
            }

            /// The local lease deadline (see [`LockGuard::lease_deadline`]).
            pub fn lease_deadline(&self) -> std::time::Instant {
                self.guard.lease_deadline()
            }

            /// Keeps the hold past the guard without renewing it (see
            /// [`LockGuard::detach`]): nothing is sent, and it expires with its lease.
            pub fn detach(self) {
                self.guard.detach();
            }

            /// Whether the watchdog is renewing this hold now.
            pub fn is_renewed(&self) -> bool {
                self.guard.is_renewed()
            }
        }
    };
}

rw_guard!(
    /// A read hold of a [`ReadWriteLock`](crate::ReadWriteLock): shared with every
    /// other reader. Dropping it releases the hold in the background; prefer
    /// [`ReadGuard::unlock`].
    ReadGuard,
    "read"
);

rw_guard!(
    /// The write hold of a [`ReadWriteLock`](crate::ReadWriteLock): excludes every
    /// reader and writer but its own owner's reads. Dropping it releases the hold in
    /// the background; prefer [`WriteGuard::unlock`].
    WriteGuard,
    "write"
);
