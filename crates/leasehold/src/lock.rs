//! The reentrant lock handle and its acquire paths.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, Acquire, Error, LockNames, OwnerId, RequestId, Result};
use tokio::time::Instant;
use tracing::Instrument;

use crate::client::Client;
use crate::guard::LockGuard;
use crate::hold::{LeaseMode, OwnerHolds};

/// A handle on one reentrant lock, and the owner that holds it.
///
/// The handle *is* the owner: each [`Client::lock`] call makes a new owner id
/// (`CLIENT_UUID:N`), and clones of a handle share it. Acquiring again through the
/// same owner while it holds the lock re-enters (hold count + 1, one more guard); another
/// handle for the same name is another owner and is excluded, in this process as in any
/// other. The tokio task id is deliberately not used as the owner: tasks migrate,
/// `join!` branches share one task, and task ids are reused once a task ends.
///
/// The data in Redis is Redisson's `RLock` layout, so a Java service using Redisson and
/// a Rust service using leasehold exclude each other on the same name.
#[derive(Debug, Clone)]
pub struct Lock {
    pub(crate) inner: Arc<LockInner>,
}

#[derive(Debug)]
pub(crate) struct LockInner {
    pub(crate) client: Client,
    /// `Err` text when the name was invalid; reported by every operation.
    pub(crate) names: std::result::Result<LockNames, String>,
    pub(crate) key: String,
    pub(crate) owner: OwnerId,
    pub(crate) holds: OwnerHolds,
}

impl Lock {
    pub(crate) fn new(client: Client, key: String) -> Self {
        let names = LockNames::new(&key).map_err(|e| e.to_string());
        let owner = client.inner.id.next_owner();
        Lock { inner: Arc::new(LockInner { client, names, key, owner, holds: OwnerHolds::default() }) }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// This handle's owner id, `CLIENT_UUID:N`: the Hash field it writes.
    pub fn owner(&self) -> &str {
        self.inner.owner.as_str()
    }

    pub(crate) fn names(&self) -> Result<&LockNames> {
        self.inner.names.as_ref().map_err(|message| Error::invalid_argument(message.clone()))
    }

    /// Waits as long as it takes to acquire the lock, in watchdog mode: the lease is the
    /// client's watchdog timeout (default 30 s), renewed every third of it while the
    /// guard lives.
    ///
    /// Waiting does not poll: the task sleeps until a release message on the lock's
    /// channel (or the holder's TTL) gives it a turn; local waiters go in FIFO order.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name
    /// (nothing sent); [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key
    /// holds another type; connection errors and timeouts.
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
    /// As [`Lock::lock`].
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await
    }

    /// Waits at most `wait` (measured on the monotonic clock from the call), watchdog
    /// mode. `None` when the wait ran out.
    ///
    /// # Errors
    /// As [`Lock::lock`]; a wait that overflows the clock is
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
    /// its type. Holders find out at their next renewal (watchdog mode) or unlock.
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the delete happens whether or not the future is polled again.
    pub async fn force_unlock(&self) -> Result<bool> {
        let names = self.names()?;
        self.inner.client.inner.store.force_release(names).await
    }

    /// Whether any owner holds the lock now.
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_locked(&self) -> Result<bool> {
        let names = self.names()?;
        self.inner.client.inner.store.exists(names.key()).await
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
        let names = self.names()?;
        self.inner.client.inner.store.hold_count(names.key(), &self.inner.owner).await
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
        let names = self.names()?;
        Ok(self.inner.client.inner.store.pttl(names.key()).await?.flatten())
    }

    /// The shared acquire path. `wait`: `None` = unbounded, `Some(ZERO)` = one attempt.
    async fn acquire(&self, wait: Option<Duration>, mode: LeaseMode) -> Result<Option<LockGuard>> {
        let start = Instant::now();
        // Every check happens before anything is sent.
        let names = self.names()?.clone();
        let lease = match mode {
            LeaseMode::Watchdog => self.inner.client.inner.config.watchdog_timeout,
            LeaseMode::Fixed(lease) => lease,
        };
        let lease_ms = args::lease_millis(lease, "lease")?;
        let deadline = wait.map(|wait| args::wait_deadline(start, wait)).transpose()?;
        let span = tracing::debug_span!(
            "leasehold.acquire",
            lock = %names.key(),
            wait_ms = wait.map(|w| w.as_millis()),
            outcome = tracing::field::Empty,
        );
        let result =
            crate::wait::acquire_loop(self, &names, lease, lease_ms, mode, deadline).instrument(span.clone()).await;
        let outcome = match &result {
            Ok(Some(_)) => "acquired",
            Ok(None) => "timed out",
            Err(_) => "error",
        };
        span.record("outcome", outcome);
        result
    }

    /// One acquire attempt: `Ok(Ok(guard))` or `Ok(Err(pttl))` when held by another.
    ///
    /// Cancel safety: a drop-guard undoes the hold in the background if the future is
    /// dropped while the script is in flight, or if the outcome is ambiguous (timeout,
    /// connection lost).
    pub(crate) async fn attempt(
        &self,
        names: &LockNames,
        lease: Duration,
        lease_ms: u64,
        mode: LeaseMode,
    ) -> Result<std::result::Result<LockGuard, Option<Duration>>> {
        let request = RequestId::new_random();
        let store = &self.inner.client.inner.store;
        let mut pending = PendingAcquire { lock: self, names, request: &request, lease_ms, armed: true };
        let sent_at = Instant::now();
        let reply = store.acquire(names, &self.inner.owner, lease_ms, &request).await;
        match reply {
            Ok(Acquire::Acquired { holds }) => {
                pending.armed = false;
                let watchdog = &self.inner.client.inner.watchdog;
                let hold = self.inner.holds.acquired(holds, sent_at, lease, mode, |lease_state| {
                    watchdog.register(names.key_arc().clone(), self.inner.owner.clone(), lease_state)
                });
                Ok(Ok(LockGuard::new(self.clone(), hold, mode, lease_ms, request.clone())))
            }
            Ok(Acquire::Held { pttl }) => {
                pending.armed = false;
                Ok(Err(pttl))
            }
            Err(error) => {
                // Definite errors (WRONGTYPE, bad reply) wrote nothing: no undo needed.
                pending.armed = error.is_ambiguous();
                Err(error)
            }
        }
    }
}

/// Undoes an acquire whose outcome the caller will never see.
struct PendingAcquire<'a> {
    lock: &'a Lock,
    names: &'a LockNames,
    request: &'a RequestId,
    lease_ms: u64,
    armed: bool,
}

impl Drop for PendingAcquire<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let store = self.lock.inner.client.inner.store.clone();
        let names = self.names.clone();
        let owner = self.lock.inner.owner.clone();
        let request = self.request.clone();
        let lease_ms = self.lease_ms;
        // Sent after the acquire on the same connection, so it runs after it.
        drop(runtime.spawn(async move {
            match store.undo_acquire(&names, &owner, lease_ms, &request).await {
                Ok(result) => tracing::debug!(lock = %names.key(), ?result, "abandoned acquire undone"),
                Err(error) => tracing::warn!(lock = %names.key(), %error, "could not undo an abandoned acquire; its lease will expire"),
            }
        }));
    }
}
