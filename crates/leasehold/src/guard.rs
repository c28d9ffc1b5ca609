//! The guard of one acquired hold.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, ErrorKind, Release, RequestId, Result};
use tokio::time::Instant;

use crate::hold::{Hold, LeaseMode};
use crate::lock::Lock;

/// How many times an unlock is sent when the outcome is unknown (timeout, connection
/// lost). The same request id is used each time, so it is applied at most once.
const UNLOCK_ATTEMPTS: u32 = 3;

/// One hold of a [`Lock`]. Release it with [`LockGuard::unlock`], which reports errors.
///
/// Dropping a guard without `unlock` releases it in the background on the runtime that
/// acquired it; if that runtime is gone, the lease simply expires (a watchdog guard stops
/// being renewed the moment it is dropped). `Drop` never blocks and never panics.
///
/// A guard can learn that its lock was lost: [`LockGuard::is_lost`] and
/// [`LockGuard::lost`]. Work that must not outlive the lock should `select!` on
/// `lost()`. No client-side signal can stop a process that is paused past its lease;
/// only a check at the guarded resource (a fencing token, not yet provided by
/// leasehold) closes that gap.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock (in the background)"]
pub struct LockGuard {
    lock: Lock,
    hold: Arc<Hold>,
    mode: LeaseMode,
    lease_ms: u64,
    /// The acquire request that took this hold (its latch is deleted on release).
    acquired_by: RequestId,
    runtime: Option<tokio::runtime::Handle>,
    /// Set once the guard was detached (unlocked); `Drop` then does nothing.
    done: bool,
}

impl LockGuard {
    pub(crate) fn new(lock: Lock, hold: Arc<Hold>, mode: LeaseMode, lease_ms: u64, acquired_by: RequestId) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        LockGuard { lock, hold, mode, lease_ms, acquired_by, runtime, done: false }
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// `true` when the lock is known lost: a renewal found the owner gone, renewals
    /// failed until the lease ran out, another guard's unlock or the server said the
    /// hold ended, or (explicit lease) the lease deadline passed.
    pub fn is_lost(&self) -> bool {
        self.hold.lease.is_lost()
    }

    /// Resolves when the lock is lost (see [`LockGuard::is_lost`]). Never resolves while
    /// the hold is alive and renewed.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.hold.lease.lost().await;
    }

    /// The local lease deadline on the monotonic clock: the server's expiry is never
    /// earlier (it is computed from when the command that set the TTL was sent).
    /// Watchdog renewals move it forward.
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.hold.lease.expires_at().into_std()
    }

    /// Whether this guard is in watchdog mode (renewed while held).
    pub fn is_watchdog(&self) -> bool {
        self.mode == LeaseMode::Watchdog
    }

    /// Whether the watchdog is renewing this hold now.
    pub fn is_renewed(&self) -> bool {
        self.hold.is_renewed()
    }

    /// Gives back this hold. The last hold of the owner deletes the key and publishes
    /// the unlock message, waking one waiter; otherwise the lease is set again.
    ///
    /// # Errors
    /// - [`ErrorKind::LockLost`] when the hold was already known lost; nothing is sent.
    /// - [`ErrorKind::NotOwner`] when the server says this owner holds nothing (the lease
    ///   ran out, or it was force-unlocked); nothing is written or published. Also when
    ///   this guard's hold already ended (nothing is sent, so a later hold of the same
    ///   owner is never released by mistake).
    /// - Timeouts and connection errors after retrying with the same request id; the
    ///   hold is then no longer renewed and expires with its lease.
    ///
    /// # Cancel safety
    /// The guard is consumed: renewal for it stops before anything is sent, so dropping
    /// the future mid-way leaves no renewal behind; a release already sent still applies,
    /// and one never sent leaves the lock to expire with its lease.
    pub async fn unlock(mut self) -> Result<()> {
        self.done = true;
        let holds = &self.lock.inner.holds;
        let names = self.lock.names()?.clone();
        let key = names.key().to_owned();
        let lost = self.hold.lease.is_marked_lost();
        let current = holds.is_current(&self.hold);
        // Detach first, synchronously: if this future is dropped mid-release, renewal
        // has already stopped for this guard.
        holds.detach(&self.hold, self.mode);
        if lost {
            return Err(Error::new(ErrorKind::LockLost, "the lock was lost before unlock").with_key(key));
        }
        if !current {
            return Err(Error::new(ErrorKind::NotOwner, "this guard's hold has already ended").with_key(key));
        }
        let client = &self.lock.inner.client.inner;
        let store = &client.store;
        let request = RequestId::new_random();
        let first_sent = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent_at = Instant::now();
            match store.release(&names, &self.lock.inner.owner, self.lease_ms, &request, &self.acquired_by).await {
                Ok(release) => {
                    holds.released(&self.hold, release, sent_at, Duration::from_millis(self.lease_ms));
                    if release == Release::NotOwner {
                        return Err(Error::new(ErrorKind::NotOwner, "the lock is not held by this owner").with_key(key));
                    }
                    return Ok(());
                }
                Err(error) if error.is_ambiguous() && attempt < UNLOCK_ATTEMPTS => {
                    // A retry is only safe while the server still remembers the request
                    // (its unlock latch lives for the replay window).
                    let backoff = Duration::from_millis(50 * u64::from(attempt));
                    let retry_done_by = first_sent.elapsed() + backoff + client.config.command_timeout;
                    if retry_done_by >= client.config.replay_window {
                        return Err(error);
                    }
                    tokio::time::sleep(backoff).await;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let holds = &self.lock.inner.holds;
        let current = holds.is_current(&self.hold) && !self.hold.lease.is_marked_lost();
        // Stop renewing at once, whatever happens to the release below.
        holds.detach(&self.hold, self.mode);
        if !current {
            return;
        }
        let (Some(runtime), Ok(names)) = (self.runtime.as_ref(), self.lock.names()) else { return };
        let names = names.clone();
        let lock = self.lock.clone();
        let hold = self.hold.clone();
        let lease_ms = self.lease_ms;
        let acquired_by = self.acquired_by.clone();
        // A dead runtime drops the task: the lease then expires on its own.
        drop(runtime.spawn(async move {
            let store = &lock.inner.client.inner.store;
            let request = RequestId::new_random();
            let sent_at = Instant::now();
            match store.release(&names, &lock.inner.owner, lease_ms, &request, &acquired_by).await {
                Ok(release) => lock.inner.holds.released(&hold, release, sent_at, Duration::from_millis(lease_ms)),
                Err(error) => {
                    tracing::warn!(lock = %names.key(), %error, "background release of a dropped guard failed; the lease will expire");
                }
            }
        }));
    }
}
