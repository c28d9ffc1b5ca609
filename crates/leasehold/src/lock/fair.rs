//! The fair lock: a [`Lock`] granted strictly in queue order across processes.
//!
//! It is the same machinery (waiting, watchdog, turns, undo, `lost()`) with three
//! differences: its acquires run `fair_acquire.lua` (which queues the owner in
//! `redisson_lock_queue:{NAME}` and only grants the lock to the queue head), its releases,
//! undos and wait clean-ups run `fair_release.lua` (which also removes the owner's queue
//! entry and publishes to the new head's own channel), and its waiters listen on their own
//! channel, `redisson_lock__channel:{NAME}:OWNER`, and refresh their queue entry.

use std::sync::Arc;
use std::time::Duration;

use lock_core::Result;

use crate::client::shared::ClientShared;
use crate::lock::guard::LockGuard;
use crate::lock::Lock;

/// A reentrant lock granted **strictly in the order its waiters queued**, across every
/// client and process (Redisson's `RFairLock` layout).
///
/// A plain [`Lock`] queues its waiters too, in leasehold's own queue beside Redisson's
/// `RLock` layout (a release hands the lock to the first live waiter); what `FairLock`
/// adds is Redisson's `RFairLock` layout, so that Java services using `RFairLock` share
/// the queue, and a strict queue even for `try_lock`. A `FairLock` keeps the queue on
/// the server: a waiter appends its owner field to the List `redisson_lock_queue:{NAME}` and
/// records a deadline in the sorted set `redisson_lock_timeout:{NAME}`; only the queue head
/// may take a free lock, and a release publishes to the head's own channel
/// `redisson_lock__channel:{NAME}:OWNER` only. A Redisson `RFairLock` on the same name
/// shares the queue, the deadlines and the channels.
///
/// **Dead and departed waiters never block the queue.** A queue entry's deadline is the
/// server's clock (`TIME`) plus the client's keep-alive
/// ([`ClientBuilder::queue_keepalive`](crate::ClientBuilder::queue_keepalive),
/// default 10 s); a live waiter refreshes it at least every third of that, and every
/// script purges the heads whose deadline passed. So a waiter whose process died stops
/// holding up the queue within one keep-alive. A wait that times out removes its entry
/// at its deadline, in the background (so that a slow or frozen server cannot hold its
/// answer back); so does a cancelled wait. (Redisson's entries
/// last 5 minutes and measure time on each client's wall clock.)
///
/// Everything else is [`Lock`]'s: reentrancy (a re-entry never queues), the watchdog,
/// the lost signal, cancellation and replica acknowledgement. The handle is the owner, and
/// it is not `Clone`. `try_lock` never queues: it takes the lock only when it is free and
/// nobody is queued (or this owner is first). Do not use a plain [`Lock`] and a
/// `FairLock` on one name: they exclude each other, but a fair release does not publish on
/// the plain lock's channel, so plain waiters only retry on the holder's TTL.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// let lock = client.fair_lock("report:daily");
/// let guard = lock.lock().await?; // behind every waiter that queued first, in any process
/// tokio::select! {
///     () = guard.lost() => eprintln!("lock lost: stop writing"),
///     () = async { /* critical section */ } => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub struct FairLock {
    lock: Lock,
}

impl std::fmt::Debug for FairLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FairLock").field(&self.lock).finish()
    }
}

impl FairLock {
    pub(crate) fn new(client: Arc<ClientShared>, key: &str) -> Self {
        let keepalive_ms = crate::lock::shared::keepalive_ms(&client);
        FairLock { lock: Lock::with_kind(client, key, lock_core::LockKind::Fair { keepalive_ms }) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// This handle's owner id, `CLIENT_UUID:N`: the Hash field it writes and the entry it
    /// queues.
    pub fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// The Redis key of the wait queue, `redisson_lock_queue:{NAME}`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    pub fn queue_key(&self) -> Result<String> {
        Ok(self.lock.shared.names()?.queue_key())
    }

    /// The Redis key of the waiters' deadlines, `redisson_lock_timeout:{NAME}`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    pub fn timeout_key(&self) -> Result<String> {
        Ok(self.lock.shared.names()?.timeout_key())
    }

    /// The channel this handle's waits listen on, `redisson_lock__channel:{NAME}:OWNER`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    pub fn waiter_channel(&self) -> Result<String> {
        Ok(self.lock.shared.names()?.waiter_channel(self.owner()))
    }

    /// As [`Lock::lock`], in queue order: queues behind every waiter already queued.
    ///
    /// # Errors
    /// As [`Lock::lock`]; also [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when
    /// the queue or deadline key holds another type.
    ///
    /// # Cancel safety
    /// As [`Lock::lock`], and the queue entry is removed in the background (bounded by
    /// the replay window; otherwise it is purged one keep-alive later).
    pub async fn lock(&self) -> Result<LockGuard> {
        self.lock.lock().await
    }

    /// As [`Lock::lock_with_lease`], in queue order.
    ///
    /// # Errors
    /// As [`FairLock::lock`] and [`Lock::lock_with_lease`].
    ///
    /// # Cancel safety
    /// As [`FairLock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.lock.lock_with_lease(lease).await
    }

    /// One attempt, no waiting and **no queueing**: the lock is taken only if it is free
    /// and nobody is queued ahead (Redisson's fair `tryLock()`). `None` otherwise.
    ///
    /// # Errors
    /// As [`FairLock::lock`], and any error of its one attempt.
    ///
    /// # Cancel safety
    /// As [`Lock::try_lock`].
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.lock.try_lock().await
    }

    /// Waits at most `wait` in queue order, watchdog mode. `None` when the wait ran out;
    /// the queue entry is then removed in the background (the answer comes at the
    /// deadline whatever the server does).
    ///
    /// # Errors
    /// As [`Lock::try_lock_for`] and [`FairLock::lock`].
    ///
    /// # Cancel safety
    /// As [`FairLock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.lock.try_lock_for(wait).await
    }

    /// Waits at most `wait` in queue order, then holds the lock for `lease`.
    ///
    /// # Errors
    /// As [`Lock::try_lock_with`] and [`FairLock::lock`].
    ///
    /// # Cancel safety
    /// As [`FairLock::lock`].
    pub async fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<LockGuard>> {
        self.lock.try_lock_with(wait, lease).await
    }

    /// Deletes the lock whoever holds it and tells the queue head (after purging dead
    /// heads); queued waiters keep their places. Returns `true` if there was a key.
    ///
    /// # Errors
    /// As [`Lock::force_unlock`]; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType)
    /// when the queue or deadline key holds another type.
    ///
    /// # Cancel safety
    /// As [`Lock::force_unlock`].
    pub async fn force_unlock(&self) -> Result<bool> {
        self.lock.force_unlock().await
    }

    crate::lock::forward_queries!();
}
