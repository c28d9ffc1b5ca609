//! The minimal lock: `SET key owner NX PX lease`, released by an atomic
//! compare-and-delete.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, Error, ErrorKind, OwnerId, Result};
use tokio::time::Instant;

use crate::client::ClientShared;

/// The classic minimal Redis lock, kept as the baseline leasehold improves on.
///
/// - Mutual exclusion with a lease: `SET key owner NX PX lease`, so a crashed holder
///   cannot block others longer than the lease.
/// - The value is the owner (`CLIENT_UUID-N`), and release is a Lua compare-and-delete,
///   so nobody deletes another owner's lock.
///
/// Known limits, each solved by [`Lock`](crate::Lock): not reentrant (a second
/// `try_lock` by the same owner fails); no renewal (work longer than the lease runs
/// unprotected); waiting retries on the holder's TTL instead of being woken by a
/// release; no lost-lock signal. Its String key is not compatible with Redisson's Hash
/// layout: do not use one name for both kinds.
///
/// Like [`Lock`](crate::Lock), the handle is the owner and is not `Clone`.
pub struct SimpleLock {
    shared: Arc<SimpleShared>,
}

/// What a simple lock handle and its guards share.
struct SimpleShared {
    client: Arc<ClientShared>,
    key: String,
    owner: OwnerId,
}

impl std::fmt::Debug for SimpleLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleLock")
            .field("key", &crate::debug::Bounded(&self.shared.key))
            .field("owner", &self.shared.owner.as_str())
            .finish()
    }
}

/// The guard of a [`SimpleLock`]. Dropping it without [`SimpleGuard::unlock`] releases it
/// in the background on the runtime that acquired it (never blocking); if that runtime
/// is gone, the lease expires.
#[must_use = "dropping the guard releases the lock (in the background)"]
pub struct SimpleGuard {
    lock: Arc<SimpleShared>,
    deadline: Instant,
    runtime: Option<tokio::runtime::Handle>,
    done: bool,
}

impl SimpleLock {
    pub(crate) fn new(client: Arc<ClientShared>, key: String) -> Self {
        let owner = client.id.next_simple_owner();
        SimpleLock { shared: Arc::new(SimpleShared { client, key, owner }) }
    }

    /// The Redis key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The owner value this handle writes, `CLIENT_UUID-N`.
    pub fn owner(&self) -> &str {
        self.shared.owner.as_str()
    }

    fn check_name(&self) -> Result<()> {
        if self.shared.key.is_empty() {
            return Err(Error::invalid_argument("a lock name must not be empty"));
        }
        Ok(())
    }

    /// One `SET NX PX`: `None` when the key is taken (by anyone, this owner included).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name or a lease under 1 ms or over a
    /// year (nothing sent); connection errors and timeouts.
    ///
    /// # Cancel safety
    /// If dropped while in flight, the lock may be taken and then expires with its lease.
    pub async fn try_lock(&self, lease: Duration) -> Result<Option<SimpleGuard>> {
        self.check_name()?;
        let lease_ms = args::lease_millis(lease, "lease")?;
        let sent_at = Instant::now();
        match self.shared.client.store.simple_acquire(&self.shared.key, &self.shared.owner, lease_ms).await? {
            None => Ok(Some(SimpleGuard::new(self.shared.clone(), args::instant_after(sent_at, lease)))),
            Some(_) => Ok(None),
        }
    }

    /// Tries until acquired or `wait` has passed, sleeping for the holder's remaining
    /// TTL between tries (no fixed-interval polling, but no wake-up on release either).
    ///
    /// # Errors
    /// As [`SimpleLock::try_lock`]; an overflowing wait is [`ErrorKind::InvalidArgument`].
    ///
    /// # Cancel safety
    /// As [`SimpleLock::try_lock`].
    pub async fn try_lock_for(&self, wait: Duration, lease: Duration) -> Result<Option<SimpleGuard>> {
        self.check_name()?;
        let lease_ms = args::lease_millis(lease, "lease")?;
        let deadline = args::wait_deadline(Instant::now(), wait)?;
        loop {
            let sent_at = Instant::now();
            match self.shared.client.store.simple_acquire(&self.shared.key, &self.shared.owner, lease_ms).await? {
                None => return Ok(Some(SimpleGuard::new(self.shared.clone(), args::instant_after(sent_at, lease)))),
                Some(pttl) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    // No expiry on the holder: retry at the deadline only.
                    let retry = pttl
                        .map_or(deadline, |p| args::instant_after(now, p.max(Duration::from_millis(1))).min(deadline));
                    tokio::time::sleep_until(retry).await;
                }
            }
        }
    }
}

impl std::fmt::Debug for SimpleGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleGuard")
            .field("key", &crate::debug::Bounded(&self.lock.key))
            .field("owner", &self.lock.owner.as_str())
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl SimpleGuard {
    fn new(lock: Arc<SimpleShared>, deadline: Instant) -> Self {
        SimpleGuard { lock, deadline, runtime: tokio::runtime::Handle::try_current().ok(), done: false }
    }

    /// Whether the lease deadline has passed (the key may be gone or someone else's).
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Deletes the key if it still holds this owner.
    ///
    /// # Errors
    /// [`ErrorKind::NotOwner`] when the key is gone or holds another owner (nothing
    /// deleted); [`ErrorKind::WrongType`]; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the compare-and-delete applies.
    pub async fn unlock(mut self) -> Result<()> {
        self.done = true;
        if self.lock.client.store.simple_release(&self.lock.key, &self.lock.owner).await? {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::NotOwner, "the lock is not held by this owner").with_key(self.lock.key.clone()))
        }
    }
}

impl Drop for SimpleGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(runtime) = self.runtime.as_ref() else { return };
        let lock = self.lock.clone();
        drop(runtime.spawn(async move {
            let _ = lock.client.store.simple_release(&lock.key, &lock.owner).await;
        }));
    }
}
