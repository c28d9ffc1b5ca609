//! The fenced lock: a [`Lock`] whose holds carry fencing tokens.
//!
//! It is the same machinery (waiting, watchdog, turns, undo, `lost()`) with one
//! difference: its acquires run `fenced_acquire.lua`, which also issues the token.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, ErrorKind, Result};

use crate::client::shared::ClientShared;
use crate::lock::guard::LockGuard;
use crate::lock::hold::LeaseMode;
use crate::lock::Lock;
use lock_core::fence::FencedWrite;

/// A reentrant lock whose every fresh hold gets a **fencing token**: a number larger than
/// every token issued before for the same name, by any client or process.
///
/// A lease cannot stop a holder that was paused past it (a GC pause, `SIGSTOP`, a
/// swapped-out VM) from writing after another owner took the lock; [`LockGuard::lost`]
/// only tells it afterwards. The token closes that gap at the resource: the resource
/// remembers the largest token that wrote it and refuses smaller ones, so the paused
/// holder's late write is rejected ([`FencedGuard::fenced_set`] for a String in Redis,
/// or the same check in a database: see [`crate::fence`]).
///
/// Everything else is [`Lock`]'s: the same Redisson `RLock` data (a Redisson `RLock` or
/// `RFencedLock` on the same name excludes it), waiting, watchdog renewal, the lost
/// signal, cancellation, and [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas).
/// The counter is Redisson's `RFencedLock` counter, `redisson_lock_token:{NAME}`.
///
/// **Tokens.** A fresh hold's token is `max(counter, server time in µs) + 1`, so tokens
/// strictly increase while the counter exists, and a server that lost it (a restart
/// without persistence, a failover to a replica without it or with an older value, an
/// expired counter) starts again above every earlier token, as long as its clock reads
/// later than the old server's did when it issued the last one (`docs/architecture/fencing.md`
/// states the assumption precisely). **A re-entry returns the outer
/// hold's token** (Redisson's `RFencedLock` issues a new one): every guard of one hold
/// writes with the same fence: a re-entry answers the counter's value, which no other
/// owner can move while this one holds the lock.
///
/// **Waiting.** Waiters queue in the lock's server-side wait queue, as [`Lock`]'s do
/// (`docs/architecture/wait-queue.md`): they get the lock in arrival order across every
/// client and process, and a release hands it to the queue's head, whose claim of it
/// issues that waiter a new token, larger than every earlier one.
///
/// Like [`Lock`], the handle is the owner, and it is not `Clone`.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// use leasehold::fence::FencedWrite;
/// let lock = client.fenced_lock("invoice:9");
/// let guard = lock.lock().await?;
/// let token = guard.token(); // pass it to whatever the lock guards
/// match guard.fenced_set("invoice:9:status", "paid").await? {
///     FencedWrite::Written => {}
///     FencedWrite::Rejected { fence } => eprintln!("a later holder ({fence} > {token}) wrote first"),
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub struct FencedLock {
    lock: Lock,
}

impl std::fmt::Debug for FencedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FencedLock").field(&self.lock).finish()
    }
}

impl FencedLock {
    pub(crate) fn new(client: Arc<ClientShared>, key: &str) -> Self {
        let counter_ttl_ms = client.fence_token_ttl_ms;
        let queue_keepalive_ms = crate::lock::shared::keepalive_ms(&client);
        FencedLock {
            lock: Lock::with_kind(client, key, lock_core::LockKind::Fenced { counter_ttl_ms, queue_keepalive_ms }),
        }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// The Redis key of the token counter, `redisson_lock_token:{NAME}`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    pub fn token_key(&self) -> Result<String> {
        Ok(self.lock.shared.names()?.token_key())
    }

    /// This handle's owner id, `CLIENT_UUID:N`.
    pub fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// As [`Lock::lock`], with a token.
    ///
    /// # Errors
    /// As [`Lock::lock`]; [`ErrorKind::ReplicaSync`] as described at
    /// [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas).
    ///
    /// # Cancel safety
    /// As [`Lock::lock`]: an acquire in flight is undone in the background (its token is
    /// never handed out; tokens may skip numbers, they never repeat).
    pub async fn lock(&self) -> Result<FencedGuard> {
        let guard = self.lock.acquire(None, LeaseMode::Watchdog).await?;
        let guard = guard.ok_or_else(|| Error::new(ErrorKind::Timeout, "an unbounded wait ended without the lock"))?;
        FencedGuard::new(guard)
    }

    /// As [`Lock::lock_with_lease`], with a token.
    ///
    /// # Errors
    /// As [`Lock::lock_with_lease`] and [`FencedLock::lock`].
    ///
    /// # Cancel safety
    /// As [`FencedLock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<FencedGuard> {
        let guard = self.lock.acquire(None, LeaseMode::Fixed(lease)).await?;
        let guard = guard.ok_or_else(|| Error::new(ErrorKind::Timeout, "an unbounded wait ended without the lock"))?;
        FencedGuard::new(guard)
    }

    /// As [`Lock::try_lock`], with a token.
    ///
    /// # Errors
    /// As [`Lock::try_lock`] and [`FencedLock::lock`].
    ///
    /// # Cancel safety
    /// As [`FencedLock::lock`].
    pub async fn try_lock(&self) -> Result<Option<FencedGuard>> {
        self.lock.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await?.map(FencedGuard::new).transpose()
    }

    /// As [`Lock::try_lock_for`], with a token.
    ///
    /// # Errors
    /// As [`Lock::try_lock_for`] and [`FencedLock::lock`].
    ///
    /// # Cancel safety
    /// As [`FencedLock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<FencedGuard>> {
        self.lock.acquire(Some(wait), LeaseMode::Watchdog).await?.map(FencedGuard::new).transpose()
    }

    /// As [`Lock::try_lock_with`], with a token.
    ///
    /// # Errors
    /// As [`Lock::try_lock_with`] and [`FencedLock::lock`].
    ///
    /// # Cancel safety
    /// As [`FencedLock::lock`].
    pub async fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<FencedGuard>> {
        self.lock.acquire(Some(wait), LeaseMode::Fixed(lease)).await?.map(FencedGuard::new).transpose()
    }

    /// As [`Lock::force_unlock`]. The counter stays (it expires with its TTL).
    ///
    /// # Errors
    /// As [`Lock::force_unlock`].
    ///
    /// # Cancel safety
    /// As [`Lock::force_unlock`].
    pub async fn force_unlock(&self) -> Result<bool> {
        self.lock.force_unlock().await
    }

    crate::lock::forward_queries!();
}

/// One hold of a [`FencedLock`], with its fencing token. It derefs to the
/// [`LockGuard`] of the hold, so everything but the token and
/// [`FencedGuard::fenced_set`] is [`LockGuard`]'s ([`LockGuard::lost`],
/// [`LockGuard::is_lost`], [`LockGuard::key`], …), including `Drop` (a background
/// release). [`FencedGuard::unlock`] and [`FencedGuard::detach`] consume the guard, as
/// [`LockGuard`]'s do.
#[must_use = "dropping the guard releases the lock (in the background)"]
#[clippy::has_significant_drop]
pub struct FencedGuard {
    guard: LockGuard,
    token: u64,
}

impl std::fmt::Debug for FencedGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedGuard").field("token", &self.token).field("guard", &self.guard).finish()
    }
}

impl std::ops::Deref for FencedGuard {
    type Target = LockGuard;

    fn deref(&self) -> &LockGuard {
        &self.guard
    }
}

impl FencedGuard {
    fn new(guard: LockGuard) -> Result<Self> {
        match guard.token() {
            Some(token) => Ok(FencedGuard { guard, token }),
            // fenced_acquire.lua always answers a token; a reply without one is refused
            // (the guard is dropped, which releases the hold in the background).
            None => Err(Error::new(ErrorKind::Redis, "a fenced acquire answered no token").with_key(guard.key())),
        }
    }

    /// The hold's fencing token: larger than every token issued for this lock name
    /// before this hold began; a re-entry has its outer hold's token. Hand it to the
    /// guarded resource with every write.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Writes the String `resource` in Redis only if no holder with a larger token wrote
    /// it first (see [`crate::fence::fenced_set`], which this calls with
    /// [`FencedGuard::token`]). Works whether or not the lock is still held: the point is
    /// to reject the write of a holder that lost the lock without knowing.
    ///
    /// # Errors
    /// As [`crate::fence::fenced_set`].
    ///
    /// # Cancel safety
    /// As [`crate::fence::fenced_set`].
    pub async fn fenced_set(&self, resource: &str, value: impl AsRef<[u8]>) -> Result<FencedWrite> {
        self.guard.client().store.fenced_write(resource, self.token, value.as_ref()).await
    }

    /// As [`LockGuard::detach`]: stops the renewal, sends nothing, and leaves the key to
    /// expire with its lease. The token stays valid at the resource until a later
    /// holder's token is used there.
    pub fn detach(self) {
        self.guard.detach();
    }

    /// As [`LockGuard::unlock`]. The last release deletes the lock's Hash; the counter
    /// stays.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`].
    pub async fn unlock(self) -> Result<()> {
        self.guard.unlock().await
    }

    /// As [`LockGuard::unlock_after`]: gives back the hold but keeps the lock taken
    /// until `min_hold` after it was acquired (a once-per-tick job), then lets it
    /// expire. The next owner's claim issues it a larger token, as after any release.
    ///
    /// # Errors
    /// As [`LockGuard::unlock_after`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock_after`].
    pub async fn unlock_after(self, min_hold: Duration) -> Result<()> {
        self.guard.unlock_after(min_hold).await
    }
}
