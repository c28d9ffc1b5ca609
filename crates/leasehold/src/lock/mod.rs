//! The reentrant lock handle and its acquire paths.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Acquire, AcquireReply, AcquireSpec, Error, LockKind, LockNames, OwnerId, Result};
use tokio::time::Instant;

use crate::client::ClientShared;
use crate::guard::LockGuard;
use crate::hold::{LeaseMode, OwnerHolds};
use crate::retry::ReplaySafeRetry;
use crate::wait::NotAcquired;

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

/// What a lock handle and its guards share: the client, the names, the owner and its
/// holds.
pub(crate) struct LockShared {
    pub(crate) client: Arc<ClientShared>,
    /// `Err` text when the name was invalid; reported by every operation.
    pub(crate) names: std::result::Result<LockNames, String>,
    pub(crate) owner: OwnerId,
    pub(crate) holds: OwnerHolds,
    /// The lock's kind: which scripts its acquires, releases, undos, wait clean-ups and
    /// force-releases run, whether its holds carry tokens, and how its waiters wait
    /// ([`LockKind::Reentrant`] for a [`Lock`], [`LockKind::Fenced`] for a
    /// [`FencedLock`](crate::FencedLock), [`LockKind::Fair`] for a
    /// [`FairLock`](crate::FairLock)). Every branch point asks it.
    pub(crate) kind: LockKind,
    /// The owner's waits that hold a place in a server queue (plain and fair locks), not
    /// yet ended: counted from before a wait's first call to the start of its clean-up.
    /// A clean-up (of a wait that ended, was cancelled, or of an acquire whose outcome is
    /// unknown) that finds, under the owner's turn, another such wait still live sends
    /// nothing: that wait's next call sets the owner's absolute hold count anyway, and
    /// its own end cleans up; removing the queue entry would take that wait's place.
    pub(crate) queued_waits: AtomicUsize,
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
        let names = LockNames::new(key).map_err(|e| e.to_string());
        let holds = OwnerHolds::default();
        let queued_waits = AtomicUsize::new(0);
        Lock { shared: Arc::new(LockShared { client, names, owner, holds, kind, queued_waits }) }
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
    /// its type. Holders find out at their next renewal (watchdog mode) or unlock.
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the delete happens whether or not the future is polled again.
    pub async fn force_unlock(&self) -> Result<bool> {
        let names = self.shared.names()?;
        self.shared.client.store.force_release(&self.shared.kind, names).await
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

impl LockShared {
    /// The lock kind, for spans and metrics.
    pub(crate) fn telemetry_kind(&self) -> crate::telemetry::Kind {
        crate::telemetry::Kind::of(&self.kind)
    }

    /// How the watchdog renews this kind's holds: a read hold's own timeout keys with
    /// the Hash, every other kind's owner field's key.
    fn renew_spec(&self, names: &LockNames) -> lock_watchdog::RenewSpec {
        match self.kind {
            LockKind::Read => lock_watchdog::RenewSpec::ReadHold {
                timeout_prefix: Arc::from(names.rw_timeout_prefix(self.owner.as_str())),
            },
            _ => lock_watchdog::RenewSpec::Field,
        }
    }

    /// Whether a wait of this owner that holds a place in the server's queue is live
    /// (see [`LockShared::queued_waits`]). Read under the owner's turn.
    pub(crate) fn has_live_queued_wait(&self) -> bool {
        self.queued_waits.load(Ordering::Acquire) > 0
    }

    /// The life of a queue entry without a refresh (fair and server-queued waits).
    pub(crate) fn queue_keepalive(&self) -> Duration {
        self.client.fair_keepalive
    }

    /// The lock's Redis key (empty when the name was: the only invalid name).
    pub(crate) fn key(&self) -> &str {
        self.names.as_ref().map_or("", LockNames::key)
    }

    pub(crate) fn names(&self) -> Result<&LockNames> {
        self.names.as_ref().map_err(|message| Error::invalid_argument(message.clone()))
    }

    /// Sets the owner's hold count on the server to `target`, with the kind's release
    /// (`release.lua`, or `fair_release.lua` for a fair lock, which also removes the
    /// owner's queue entry and tells the queue head). With `leave_queue`, a plain lock's
    /// release also removes the owner's entry from the lock's wait queue (the kinds
    /// without one ignore it). Every release, undo and wait clean-up goes
    /// through here; the caller holds the owner's turn.
    pub(crate) async fn set_holds(
        &self,
        names: &LockNames,
        target: u64,
        need_ms: u64,
        leave_queue: bool,
    ) -> Result<lock_core::Release> {
        self.client.store.release(&self.kind, names, &self.owner, target, need_ms, leave_queue).await
    }

    /// Sets the owner's count back to what it accounts for (no TTL raised) and, when the
    /// server answers that the owner holds nothing, ends its local hold: the undo of an
    /// acquire whose outcome nobody will use, and the clean-up of a fair wait. The caller
    /// holds the owner's turn.
    pub(crate) async fn reset_holds(&self, names: &LockNames) -> Result<lock_core::Release> {
        let result = self.set_holds(names, self.holds.accounted(), 0, true).await?;
        if result == lock_core::Release::Released {
            self.holds.server_holds_nothing(None);
        }
        Ok(result)
    }

    /// Records an acquire the server answered with `holds`, sent at `sent_at` in turn
    /// `seq` (the caller still holds it): the hold joined or started, its watchdog
    /// entry (watchdog mode) and its tracking after reconnects, and the new guard. Also
    /// used by a multi-lock's one-script acquire, for each member it took.
    pub(crate) fn record_acquired(
        self: &Arc<Self>,
        names: &LockNames,
        seq: u64,
        holds: u64,
        sent_at: Instant,
        lease: Duration,
        mode: LeaseMode,
    ) -> LockGuard {
        let watchdog = &self.client.watchdog;
        let kind = self.telemetry_kind().as_str();
        let hold = self.holds.acquired(seq, holds, sent_at, lease, mode, |lease_state| {
            watchdog.register_spec(
                names.key_arc().clone(),
                self.owner.clone(),
                lease_state,
                kind,
                self.renew_spec(names),
            )
        });
        // Every hold, fixed lease included, is checked after each reconnect, with the
        // owner recorded here (never one computed later).
        hold.track(|lease_state| watchdog.track_tagged(names.key_arc().clone(), self.owner.clone(), lease_state, kind));
        LockGuard::new(self.clone(), hold, mode)
    }

    /// One acquire attempt: `Ok(Ok(guard))`, or `Ok(Err(..))` when held by another (or,
    /// for a waiting call, when another waiter is ahead). With `enqueue`, a plain lock's
    /// owner queues up in the lock's wait queue, or refreshes its entry.
    ///
    /// Cancel safety: a drop-guard gives back, in the background, any hold the attempt
    /// may have taken if the future is dropped while the script is in flight, or if the
    /// outcome is ambiguous (timeout, connection lost after sending).
    pub(crate) async fn attempt(
        self: &Arc<Self>,
        names: &LockNames,
        lease: Duration,
        lease_ms: u64,
        mode: LeaseMode,
        enqueue: bool,
    ) -> Result<std::result::Result<LockGuard, NotAcquired>> {
        let turn = self.holds.turn().await;
        // Under the turn, the accounted holds are exactly what the server should count.
        let target = self.holds.accounted() + 1;
        let mut pending = PendingAcquire { lock: self, names, armed: true };
        let sent_at = Instant::now();
        let spec = AcquireSpec { kind: self.kind, waiting: enqueue, sync: self.client.sync };
        let reply = self.client.store.acquire(names, &self.owner, lease_ms, target, spec).await;
        match reply {
            Ok(AcquireReply { acquire: Acquire::Acquired { holds }, token, acknowledged }) => {
                if let Err(error) = crate::replicas::check(self.client.sync, acknowledged, names) {
                    // Not replicated: give the hold back in this turn, before returning.
                    // If that fails, `pending` stays armed and retries in the background.
                    pending.armed = !crate::replicas::undo_now(self, names).await;
                    return Err(error);
                }
                pending.armed = false;
                let guard = self.record_acquired(names, turn.seq, holds, sent_at, lease, mode);
                drop(turn);
                Ok(Ok(guard.with_token(token)))
            }
            Ok(AcquireReply { acquire: Acquire::Held { pttl, position }, .. }) => {
                pending.armed = false;
                Ok(Err(NotAcquired { pttl, position }))
            }
            Err(error) => {
                // Definite errors (WRONGTYPE, bad reply) and errors raised before sending
                // wrote nothing: no undo needed.
                pending.armed = error.is_ambiguous();
                Err(error)
            }
        }
    }
}

/// The queue keep-alive of `client`'s locks in whole milliseconds (validated at build
/// time: 1 ms to a year).
pub(crate) fn keepalive_ms(client: &ClientShared) -> u64 {
    u64::try_from(client.fair_keepalive.as_millis()).unwrap_or(u64::MAX).max(1)
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

/// Gives back a hold whose acquire's outcome the caller will never see.
struct PendingAcquire<'a> {
    lock: &'a Arc<LockShared>,
    names: &'a LockNames,
    armed: bool,
}

impl Drop for PendingAcquire<'_> {
    fn drop(&mut self) {
        if self.armed {
            spawn_set_holds(self.lock.clone(), self.names.clone(), "abandoned acquire undone");
        }
    }
}

/// Sets the owner's count on the server back to what its live guards account for, in the
/// background on the current runtime (nothing is sent if there is none): the undo of an
/// abandoned acquire, and the clean-up of a cancelled fair wait (whose queue entry
/// `fair_release.lua` removes at the same time).
///
/// It takes the owner's next turn, so it runs after the acquire it undoes (same
/// connection, sent later). The count it sends gives back the abandoned hold if it was
/// taken and changes nothing if not; a retry sets the same count again, and retries are
/// bounded by the replay window.
pub(crate) fn spawn_set_holds(lock: Arc<LockShared>, names: LockNames, done: &'static str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    drop(runtime.spawn(async move {
        let mut retry = ReplaySafeRetry::new();
        loop {
            let turn = lock.holds.turn().await;
            if lock.has_live_queued_wait() {
                // A live wait of this owner sets its absolute count with its next call
                // and cleans up at its own end; leaving the queue now would take its
                // place (a wait restarted at once after a cancelled one, or a refresh
                // whose reply was lost while the wait goes on).
                tracing::debug!(lock = %names.key(), "{done}: left to the owner's live wait");
                return;
            }
            retry.sending();
            match lock.reset_holds(&names).await {
                Ok(result) => {
                    tracing::debug!(lock = %names.key(), ?result, "{done}");
                    return;
                }
                Err(error) => {
                    drop(turn);
                    let Some(backoff) = retry.after(&error, &lock.client.config) else {
                        tracing::warn!(lock = %names.key(), %error, "could not set the owner's holds back; its lease (and queue entry) will expire");
                        return;
                    };
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }));
}

/// A lock owner's holds, for [`Client::shutdown`](crate::Client::shutdown).
impl crate::live::LiveHold for LockShared {
    /// Sets the owner's hold count to 0, in its turn, if it holds the lock as far as it
    /// knows. A retry is never needed for safety: a release that did not land leaves the
    /// lock to expire with its lease (the watchdog is stopped next).
    fn release(&self) -> crate::live::BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let _turn = self.holds.turn().await;
            if !self.holds.has_current() {
                return Ok(());
            }
            let names = self.names()?;
            self.set_holds(names, 0, 0, false).await.map(drop)
        })
    }

    /// Every hold of the owner ends: its guards report lost, renewal and tracking stop.
    fn end_locally(&self) {
        self.holds.server_holds_nothing(None);
    }
}
