//! [`MultiGuard`]: the guards of every member of a [`MultiLock`](crate::MultiLock).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use lock_core::Result;

use crate::lock::guard::LockGuard;

/// Every member of a [`MultiLock`](crate::MultiLock) held: one [`LockGuard`] per member,
/// in canonical order.
///
/// Dropping it releases every member in the background (one script per group, as
/// [`MultiGuard::unlock`]) and stops their renewal at once; `Drop` never blocks. So a guard
/// that is not kept releases at once, which the compiler warns about:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # async fn demo(multi: leasehold::MultiLock) -> leasehold::Result<()> {
/// multi.lock().await?; // taken and given back at once: refused
/// # Ok(()) }
/// ```
///
/// It has [`keys`](MultiGuard::keys) where a single lock's guard has `key`: it holds
/// several.
#[must_use = "dropping the guard releases every member (in the background)"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    pub(crate) fn new(guards: Vec<LockGuard>) -> Self {
        MultiGuard { guards }
    }

    /// The members' guards, in the canonical order they were taken.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The members' Redis keys, in the canonical order they were taken.
    pub fn keys(&self) -> Vec<&str> {
        self.guards.iter().map(LockGuard::key).collect()
    }

    /// `true` when any member is known lost (see [`LockGuard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Resolves when any member is lost (see [`LockGuard::lost`]). Never resolves while
    /// every member is held and renewed.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        let mut each: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = self
            .guards
            .iter()
            .map(|guard| Box::pin(guard.lost()) as Pin<Box<dyn Future<Output = ()> + Send + '_>>)
            .collect();
        // Polls every member's signal each time (each registers its waker) until one fires.
        std::future::poll_fn(|cx| {
            if each.iter_mut().any(|lost| lost.as_mut().poll(cx).is_ready()) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    /// The earliest member's local lease deadline (see [`LockGuard::lease_deadline`]).
    pub fn lease_deadline(&self) -> std::time::Instant {
        // A multi-lock has at least one member (an empty one is refused before anything
        // is sent), so `min` has a value; `now` only keeps this total.
        self.guards.iter().map(LockGuard::lease_deadline).min().unwrap_or_else(std::time::Instant::now)
    }

    /// Whether the watchdog is renewing every member now (see [`LockGuard::is_renewed`]).
    pub fn is_renewed(&self) -> bool {
        self.guards.iter().all(LockGuard::is_renewed)
    }

    /// Lets go of every member without releasing it (as [`LockGuard::detach`] each):
    /// renewal stops at once, nothing is sent, and each key expires with its lease.
    pub fn detach(mut self) {
        for guard in std::mem::take(&mut self.guards) {
            guard.detach();
        }
    }

    /// Gives back every member: the members of one client and hash slot (on a
    /// standalone server: all of one client's) by one script in one round trip, as
    /// they were taken, the last group first. Each member is released as its own
    /// [`LockGuard::unlock`] releases it (its count set to what its owner's other
    /// guards account for, the unlock message published on its channel at its last
    /// hold, the lock handed to its first queued waiter), and a member that fails does
    /// not keep the others from being released; the first error is returned.
    ///
    /// # Errors
    /// The first member's error, as [`LockGuard::unlock`]'s
    /// ([`ErrorKind::LockLost`](crate::ErrorKind::LockLost) or
    /// [`ErrorKind::NotOwner`](crate::ErrorKind::NotOwner) for a member that was lost,
    /// timeouts and connection errors, after the same replay-safe retries).
    ///
    /// # Cancel safety
    /// The guard is consumed: dropping the future mid-way releases the members not yet
    /// sent in the background (as dropping their guards does); none stays renewed.
    pub async fn unlock(mut self) -> Result<()> {
        let guards = std::mem::take(&mut self.guards);
        let results = crate::multi::release::unlock_all(guards).await;
        results.into_iter().find_map(std::result::Result::err).map_or(Ok(()), Err)
    }
}

impl Drop for MultiGuard {
    /// Releases every member in the background, one script per group (as
    /// [`MultiGuard::unlock`] groups them); never blocks.
    fn drop(&mut self) {
        let guards = std::mem::take(&mut self.guards);
        if !guards.is_empty() {
            crate::multi::release::drop_all(guards);
        }
    }
}

/// Gives back `guards` now, one script per group, for an acquire that will not return
/// them (it failed, ran out of time, or must start again). Errors are logged: a member
/// that could not be released expires with its lease and is no longer renewed. If the
/// caller is cancelled meanwhile, the guards not yet released are dropped, which
/// releases them in the background.
pub(crate) async fn release_all(guards: Vec<LockGuard>) {
    let keys: Vec<String> = guards.iter().map(|guard| guard.key().to_owned()).collect();
    for (key, result) in keys.iter().zip(crate::multi::release::unlock_all(guards).await) {
        if let Err(error) = result {
            tracing::debug!(
                target: crate::telemetry::TARGET,
                lock = %key,
                %error,
                "multi-lock: giving back a member failed; it expires with its lease",
            );
        }
    }
}
