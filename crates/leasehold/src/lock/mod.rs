//! [`Lock`]: the reentrant lock, Redisson's `RLock` (a Hash per lock, field `UUID:N` =
//! owner, value = hold count), renewed by the watchdog while held, waiters woken by a
//! release message; and its variants on the same engine, [`FairLock`](crate::FairLock)
//! (granted in queue order across processes) and [`FencedLock`](crate::FencedLock)
//! (every hold carries a fencing token).
//!
//! Files: this one (the handle and its queries); `shared.rs` (what the handle and its
//! guards share, and the calls that set the owner's count); `attempt.rs` (one attempt
//! and the wait around attempts); `guard.rs` ([`LockGuard`]); `hold.rs` (the owner's
//! local record of its holds); `retry.rs` (when a release is sent again); `replicas.rs`
//! (`WAIT` after an acquire); `fair.rs` and `fenced.rs` (the variants). The read/write
//! lock and the multi-lock acquire through this engine too (`rwlock/`, `multi/`).

pub(crate) mod attempt;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod guard;
pub(crate) mod hold;
pub(crate) mod replicas;
pub(crate) mod retry;
pub(crate) mod shared;

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, LockKind, LockNames, OwnerId, Result};

use crate::client::shared::ClientShared;
use crate::lock::guard::LockGuard;
use crate::lock::hold::{LeaseMode, OwnerHolds};
use crate::lock::shared::{keepalive_ms, LockShared};

/// A handle on one reentrant lock, and the owner that holds it.
///
/// The handle *is* the owner: each [`Client::lock`](crate::Client::lock) call makes a new owner id
/// (`CLIENT_UUID:N`). Acquiring again through the same handle while it holds the lock
/// re-enters (hold count + 1, one more guard); another handle for the same name is
/// another owner and is excluded, in this process as in any other. The tokio task id is
/// deliberately not used as the owner: tasks migrate, `join!` branches share one task,
/// and task ids are reused once a task ends.
///
/// `Lock` is deliberately not `Clone`: a clone would be the same owner, so two tasks
/// given clones would re-enter instead of excluding each other. To share one owner
/// between tasks on purpose, put the handle in an `Arc`; to make tasks exclude each
/// other, give each its own `client.lock(name)`. See the crate docs, "Ownership and
/// reentrancy".
///
/// The data in Redis is Redisson's `RLock` layout, so a Java service using Redisson and
/// a Rust service using leasehold exclude each other on the same name.
pub struct Lock {
    pub(crate) shared: Arc<LockShared>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("key", &crate::debug::Bounded(self.shared.key()))
            .field("owner", &self.shared.owner.as_str())
            .field("held", &self.shared.holds.has_current())
            .finish()
    }
}

impl Lock {
    /// The shared acquire path ([`attempt::acquire`]). `wait`: `None` = unbounded,
    /// `Some(ZERO)` = one attempt.
    pub(crate) async fn acquire(&self, wait: Option<Duration>, mode: LeaseMode) -> Result<Option<LockGuard>> {
        attempt::acquire(&self.shared, wait, mode).await
    }

    pub(crate) fn new(client: Arc<ClientShared>, key: &str) -> Self {
        let queue_keepalive_ms = keepalive_ms(&client);
        Self::with_kind(client, key, LockKind::Reentrant { queue_keepalive_ms })
    }

    /// A lock of `kind`: the handle every lock variant wraps.
    pub(crate) fn with_kind(client: Arc<ClientShared>, key: &str, kind: LockKind) -> Self {
        let owner = client.id.next_owner();
        Self::with_owner(client, key, kind, owner)
    }

    /// A lock of `kind` held by `owner` (a read/write lock's reader and writer share
    /// one id: `OWNER` and `OWNER:write`).
    pub(crate) fn with_owner(client: Arc<ClientShared>, key: &str, kind: LockKind, owner: OwnerId) -> Self {
        Self::from_parts(client, key, kind, owner, None)
    }

    /// An election candidate's lock (`election/`): kind [`LockKind::Election`] on the
    /// lead key, a new owner, renewed by the election's own watchdog.
    pub(crate) fn for_election(
        client: Arc<ClientShared>,
        key: &str,
        kind: LockKind,
        election: crate::lock::shared::ElectionHold,
    ) -> Self {
        let owner = client.id.next_owner();
        Self::from_parts(client, key, kind, owner, Some(election))
    }

    fn from_parts(
        client: Arc<ClientShared>,
        key: &str,
        kind: LockKind,
        owner: OwnerId,
        election: Option<crate::lock::shared::ElectionHold>,
    ) -> Self {
        let names = LockNames::new(key).map_err(|e| e.to_string());
        let (holds, queued_waits) = (OwnerHolds::default(), AtomicUsize::new(0));
        Lock { shared: Arc::new(LockShared { client, names, owner, holds, kind, queued_waits, election }) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.shared.key()
    }

    /// This handle's owner id, `CLIENT_UUID:N`: the Hash field it writes.
    pub fn owner(&self) -> &str {
        self.shared.owner.as_str()
    }

    /// Waits as long as it takes to acquire the lock, in watchdog mode: the lease is the
    /// client's watchdog timeout (default 30 s), renewed every third of it while the
    /// guard lives.
    ///
    /// Waiting does not poll, and waiters are served in arrival order across every
    /// client and process: a waiter that does not get the lock queues in the lock's
    /// wait queue on the server (`leasehold_lock_queue:{NAME}`, beside Redisson's
    /// layout), and a release hands the lock straight to the first live waiter, which
    /// its release message wakes to claim it (one more round trip). A waiter whose
    /// process died is skipped once its queue entry's keep-alive
    /// ([`ClientBuilder::queue_keepalive`](crate::ClientBuilder::queue_keepalive),
    /// default 10 s) runs out. [`Lock::try_lock`] never queues.
    ///
    /// Transient errors (timeouts, connection errors, a server that is loading or
    /// read-only) do not end the wait: the attempt is retried with jittered back-off
    /// (50 ms doubling to 1 s) for as long as the wait lasts, keeping the waiter's place
    /// in line.
    ///
    /// # Errors
    /// Only definite errors end the wait:
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name
    /// (nothing sent); [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key
    /// holds another type; [`ErrorKind::Redis`](crate::ErrorKind::Redis) for a script or
    /// permission error.
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing behind: it leaves the wait queue (handing its
    /// turn on), registers no renewal, and if an acquire was in flight, the hold it may
    /// have taken is given back in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let lock = client.lock("inventory:42");
    /// let guard = lock.lock().await?;
    /// tokio::select! {
    ///     () = guard.lost() => eprintln!("lock lost: stop writing"),
    ///     () = async { /* critical section */ } => {}
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<LockGuard> {
        let guard = self.acquire(None, LeaseMode::Watchdog).await?;
        guard.ok_or_else(|| Error::new(lock_core::ErrorKind::Timeout, "an unbounded wait ended without the lock"))
    }

    /// Waits as long as it takes, then holds the lock for `lease` (never renewed).
    ///
    /// # Errors
    /// As [`Lock::lock`]; a zero, sub-millisecond or over-a-year lease is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) before anything is sent.
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let guard = self.acquire(None, LeaseMode::Fixed(lease)).await?;
        guard.ok_or_else(|| Error::new(lock_core::ErrorKind::Timeout, "an unbounded wait ended without the lock"))
    }

    /// One attempt, no waiting: one round trip, `None` when another owner holds the lock.
    /// Watchdog mode (renewed while held). For fast-fail paths such as a flash sale; for
    /// a critical section of a few milliseconds, `try_lock_with(Duration::ZERO, lease)`
    /// takes a fixed lease and skips the watchdog registration.
    ///
    /// # Errors
    /// As [`Lock::lock`], and any error of its one attempt: nothing is retried.
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await
    }

    /// Waits at most `wait` (measured on the monotonic clock from the call), watchdog
    /// mode. `None` when the wait ran out. Transient errors are retried as in
    /// [`Lock::lock`] until the wait runs out.
    ///
    /// The bound holds whatever the server does (frozen, unreachable) and whatever the
    /// command timeout: at the deadline an attempt still in flight is abandoned (the
    /// hold it may take when it runs late is given back in the background) and the
    /// wait queue is left in the background. A zero `wait` is one attempt, as
    /// [`Lock::try_lock`], bounded by the command timeout.
    ///
    /// # Errors
    /// As [`Lock::lock`]; when the last attempt before the deadline failed with a
    /// transient error, that error. A wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Some(wait), LeaseMode::Watchdog).await
    }

    /// Waits at most `wait`, then holds the lock for `lease` (never renewed).
    ///
    /// # Errors
    /// As [`Lock::lock_with_lease`] and [`Lock::try_lock_for`].
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    pub async fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Some(wait), LeaseMode::Fixed(lease)).await
    }

    /// Deletes the lock whoever holds it and wakes its waiters. Returns `true` if there
    /// was a key to delete. Like Redisson's `forceUnlock`, it deletes the key whatever
    /// its type. Holders find out at their next renewal (watchdog mode) or unlock. A
    /// deletion is recorded in the lock's history (`leasehold_history:{NAME}`: when, this
    /// client's connection name, the owners removed; [`Client::lock_history`](crate::Client::lock_history)).
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the delete happens whether or not the future is polled again.
    pub async fn force_unlock(&self) -> Result<bool> {
        let names = self.shared.names()?;
        let by = Some(self.shared.client.who.connection_name.as_str());
        self.shared.client.store.force_release(&self.shared.kind, names, by).await
    }

    /// Whether any owner holds the lock now.
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_locked(&self) -> Result<bool> {
        let names = self.shared.names()?;
        self.shared.client.store.exists(names.key()).await
    }

    /// Whether this owner holds the lock now, according to the server.
    ///
    /// # Errors
    /// Empty name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType); connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_held(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// This owner's hold count on the server (0 when it holds nothing).
    ///
    /// # Errors
    /// Empty name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType); connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn hold_count(&self) -> Result<u64> {
        let names = self.shared.names()?;
        self.shared.client.store.hold_count(names.key(), &self.shared.owner).await
    }

    /// The lock key's remaining TTL: `None` when nobody holds the lock (or the key has
    /// no expiry, which a leasehold lock never has).
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let names = self.shared.names()?;
        Ok(self.shared.client.store.pttl(names.key()).await?.flatten())
    }
}

/// The read-only queries of a lock variant that wraps a [`Lock`] in a field `lock`
/// (`FencedLock`, `FairLock`): each answers exactly as [`Lock`]'s does.
macro_rules! forward_queries {
    () => {
        /// As [`Lock::is_locked`].
        ///
        /// # Errors
        /// As [`Lock::is_locked`].
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        pub async fn is_locked(&self) -> Result<bool> {
            self.lock.is_locked().await
        }

        /// As [`Lock::is_held`].
        ///
        /// # Errors
        /// As [`Lock::is_held`].
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        pub async fn is_held(&self) -> Result<bool> {
            self.lock.is_held().await
        }

        /// As [`Lock::hold_count`].
        ///
        /// # Errors
        /// As [`Lock::hold_count`].
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        pub async fn hold_count(&self) -> Result<u64> {
            self.lock.hold_count().await
        }

        /// As [`Lock::remaining_ttl`].
        ///
        /// # Errors
        /// As [`Lock::remaining_ttl`].
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
            self.lock.remaining_ttl().await
        }
    };
}
pub(crate) use forward_queries;
