//! [`ReadWriteLock`]: Redisson's `RReadWriteLock`, many readers or one writer, reentrant
//! on each side, with a write hold able to take read holds (a downgrade). The read and
//! write sides are two lock owners on the lock engine (`lock/`), with the read side's
//! own timeout keys; this file is the handle, `guard.rs` the typed guards
//! ([`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard)).

pub(crate) mod guard;

use std::time::Duration;

use lock_core::{args, Error, ErrorKind, LockKind, Result};

use crate::lock::hold::LeaseMode;
use crate::lock::Lock;
use crate::rwlock::guard::{ReadGuard, WriteGuard};

/// A handle on one read/write lock, and the owner that holds it: many readers share it,
/// a writer excludes every reader and every other writer.
///
/// The data in Redis is Redisson 4.7's `RReadWriteLock` layout, byte for byte: the Hash
/// `NAME` with field `mode` = `read`/`write`, this owner's reader field `CLIENT_UUID:N`
/// = its read hold count, its writer field `CLIENT_UUID:N:write` = its write hold count,
/// one String `{NAME}:CLIENT_UUID:N:rwlock_timeout:k` per read hold, and the channel
/// `redisson_rwlock:{NAME}` (a read release publishes `0`, a write release `1`). A Java
/// service using Redisson and a Rust service using leasehold share the same locks.
///
/// As [`Lock`], the handle *is* the owner: each
/// [`Client::read_write_lock`](crate::Client::read_write_lock) call makes a new one.
/// Through one handle, a read inside a read, a write inside a write and a read inside
/// a write (a downgrade: release the write, keep reading) re-enter. A write while the
/// handle holds only reads (an upgrade) would wait for itself forever, so it fails at
/// once with [`ErrorKind::WouldDeadlock`], no write sent: the handle first asks the
/// server whether it still holds a live read (a `force_unlock` or an expiry may have
/// removed it), and if not, its read guards report lost and the write goes ahead.
///
/// Waiting never polls: waiters listen on `redisson_rwlock:{NAME}` (and leasehold's
/// grant channel beside it). A waiting reader that is refused registers on the server
/// (`leasehold_rwlock_readers:{NAME}`, beside Redisson's layout), and a write release
/// (or a downgrade) grants every registered reader its read hold in the release itself,
/// in Redisson's layout with the lease the reader asked for, and names it on the grant
/// channel: the reader's guard is made without another call. The last read release
/// wakes a writer. A waiter also retries when the holder's lease runs out, as for
/// [`Lock`], and a waiting reader rechecks every third of the queue keep-alive (a grant
/// whose message was lost is found then).
///
/// Phase-fair: while a leasehold writer waits (`leasehold_rwlock_writers:{NAME}`), no
/// new leasehold reader enters, so a writer waits for at most the read phase it arrived
/// in; the readers waiting when a write hold ends get in before the next writer.
/// Waiting writers get in in the order they came, across clients
/// (`leasehold_rwlock_writers:order:{NAME}`); one whose process died holds the others
/// back at most its queue keep-alive. Readers that already hold a read re-enter. Redisson's readers know neither: a Java
/// reader passes a waiting leasehold writer, and is never granted (it retries on the
/// release message). Take nested reads through the same handle: a fresh read through a
/// second handle while the first holds one and a writer waits would wait for that
/// writer, which waits for the first read.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// let rw = client.read_write_lock("catalog");
/// {
///     let read = rw.read().await?; // shared with every other reader
///     read.unlock().await?;
/// }
/// let write = client.read_write_lock("catalog").write().await?; // excludes all
/// write.unlock().await?;
/// # Ok(()) }
/// ```
pub struct ReadWriteLock {
    /// The reader side: kind [`LockKind::Read`], owner `CLIENT_UUID:N`.
    reader: Lock,
    /// The writer side: kind [`LockKind::Write`], owner `CLIENT_UUID:N:write`.
    writer: Lock,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("key", &crate::debug::Bounded(self.reader.key()))
            .field("owner", &self.reader.owner())
            .field("reading", &self.reader.shared.holds.has_current())
            .field("writing", &self.writer.shared.holds.has_current())
            .finish()
    }
}

impl ReadWriteLock {
    pub(crate) fn new(client: std::sync::Arc<crate::client::shared::ClientShared>, key: &str) -> Self {
        let owner = client.id.next_owner();
        let writer_owner = owner.writer();
        let queue_keepalive_ms = crate::lock::shared::keepalive_ms(&client);
        let reader = Lock::with_owner(client.clone(), key, LockKind::Read { queue_keepalive_ms }, owner);
        let writer = Lock::with_owner(client, key, LockKind::Write { queue_keepalive_ms }, writer_owner);
        ReadWriteLock { reader, writer }
    }

    /// The lock's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.reader.key()
    }

    /// This handle's reader owner id, `CLIENT_UUID:N` (its writer field is this +
    /// `:write`).
    pub fn owner(&self) -> &str {
        self.reader.owner()
    }

    /// Waits as long as it takes for a read hold, in watchdog mode (the lease is the
    /// client's watchdog timeout, renewed every third of it while the guard lives; the
    /// watchdog renews this client's own read holds only).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name; [`ErrorKind::WrongType`] when
    /// the key holds another type or a lock that is not a read/write lock (a Hash
    /// without `mode`), nothing written; [`ErrorKind::Redis`] for a script error.
    /// Transient errors are retried as in [`Lock::lock`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing behind: it leaves the local line, registers
    /// no renewal, and a hold an acquire in flight may have taken is given back in the
    /// background.
    pub async fn read(&self) -> Result<ReadGuard> {
        unbounded(self.reader.acquire(None, LeaseMode::Watchdog).await).map(ReadGuard::new)
    }

    /// Waits as long as it takes for the write hold, in watchdog mode.
    ///
    /// # Errors
    /// [`ErrorKind::WouldDeadlock`] when this handle holds reads but not the write and
    /// the server confirms a live read of it (nothing written); otherwise as
    /// [`ReadWriteLock::read`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`]; the writer's entry among the waiting writers (which
    /// keeps new readers out) is removed too, in the background.
    pub async fn write(&self) -> Result<WriteGuard> {
        self.refuse_upgrade().await?;
        unbounded(self.writer.acquire(None, LeaseMode::Watchdog).await).map(WriteGuard::new)
    }

    /// Waits as long as it takes, then holds a read for `lease` (never renewed).
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`]; a zero, sub-millisecond or over-a-year lease is
    /// [`ErrorKind::InvalidArgument`] before anything is sent.
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn read_with_lease(&self, lease: Duration) -> Result<ReadGuard> {
        unbounded(self.reader.acquire(None, LeaseMode::Fixed(lease)).await).map(ReadGuard::new)
    }

    /// Waits as long as it takes, then holds the write for `lease` (never renewed).
    ///
    /// # Errors
    /// As [`ReadWriteLock::write`] and [`ReadWriteLock::read_with_lease`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn write_with_lease(&self, lease: Duration) -> Result<WriteGuard> {
        self.refuse_upgrade().await?;
        unbounded(self.writer.acquire(None, LeaseMode::Fixed(lease)).await).map(WriteGuard::new)
    }

    /// One attempt for a read, no waiting: one round trip, `None` when another owner
    /// holds the write. Watchdog mode.
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`], and any error of its one attempt.
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_read(&self) -> Result<Option<ReadGuard>> {
        Ok(self.reader.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await?.map(ReadGuard::new))
    }

    /// One attempt for the write, no waiting: one round trip, `None` when anyone else
    /// holds a read or the write. Watchdog mode.
    ///
    /// # Errors
    /// As [`ReadWriteLock::write`], and any error of its one attempt.
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_write(&self) -> Result<Option<WriteGuard>> {
        self.refuse_upgrade().await?;
        Ok(self.writer.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await?.map(WriteGuard::new))
    }

    /// Waits at most `wait` for a read, watchdog mode (renewed while held). `None` when
    /// the wait ran out; a zero `wait` is one attempt, as [`ReadWriteLock::try_read`].
    /// The bound holds whatever the server does (frozen, unreachable) and whatever the
    /// command timeout (see [`Lock::try_lock_for`](crate::Lock::try_lock_for)).
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`]; when the last attempt before the deadline failed with
    /// a transient error, that error. A wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_read_for(&self, wait: Duration) -> Result<Option<ReadGuard>> {
        Ok(self.reader.acquire(Some(wait), LeaseMode::Watchdog).await?.map(ReadGuard::new))
    }

    /// Waits at most `wait` for the write, watchdog mode (renewed while held). `None`
    /// when the wait ran out. The bound holds as in [`ReadWriteLock::try_write_with`],
    /// the upgrade check included.
    ///
    /// # Errors
    /// As [`ReadWriteLock::write`] and [`ReadWriteLock::try_read_for`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_write_for(&self, wait: Duration) -> Result<Option<WriteGuard>> {
        self.bounded_write(wait, LeaseMode::Watchdog).await
    }

    /// Waits at most `wait` for a read, then holds it for `lease` (never renewed).
    /// `None` when the wait ran out. The bound holds whatever the server does (frozen,
    /// unreachable) and whatever the command timeout (see
    /// [`Lock::try_lock_for`](crate::Lock::try_lock_for)).
    ///
    /// # Errors
    /// As [`ReadWriteLock::read_with_lease`]; when the last attempt before the
    /// deadline failed with a transient error, that error.
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_read_with(&self, wait: Duration, lease: Duration) -> Result<Option<ReadGuard>> {
        Ok(self.reader.acquire(Some(wait), LeaseMode::Fixed(lease)).await?.map(ReadGuard::new))
    }

    /// Waits at most `wait` for the write, then holds it for `lease` (never renewed).
    /// `None` when the wait ran out. The bound holds whatever the server does (frozen,
    /// unreachable) and whatever the command timeout, the upgrade check included (see
    /// [`Lock::try_lock_for`](crate::Lock::try_lock_for)).
    ///
    /// # Errors
    /// As [`ReadWriteLock::write_with_lease`] and [`ReadWriteLock::try_read_with`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_write_with(&self, wait: Duration, lease: Duration) -> Result<Option<WriteGuard>> {
        self.bounded_write(wait, LeaseMode::Fixed(lease)).await
    }

    /// The bounded write of [`ReadWriteLock::try_write_for`] and
    /// [`ReadWriteLock::try_write_with`].
    async fn bounded_write(&self, wait: Duration, mode: LeaseMode) -> Result<Option<WriteGuard>> {
        // The upgrade check asks the server when this handle holds reads: within the
        // bound too (a frozen server must not hold the caller past it), and the wait
        // gets what is left.
        let start = tokio::time::Instant::now();
        let deadline = args::wait_deadline(start, wait)?;
        if !wait.is_zero() {
            match tokio::time::timeout_at(deadline, self.refuse_upgrade()).await {
                Ok(checked) => checked?,
                Err(_) => return Ok(None),
            }
        } else {
            self.refuse_upgrade().await?;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        Ok(self.writer.acquire(Some(left), mode).await?.map(WriteGuard::new))
    }

    /// Whether anyone holds a read now (Redisson's `isLocked` of the read lock: read
    /// mode, or write mode with a read of the writer's beside its write).
    ///
    /// # Errors
    /// Empty name; [`ErrorKind::WrongType`]; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_read_locked(&self) -> Result<bool> {
        let shared = &self.reader.shared;
        let names = shared.names()?;
        let (mode, fields) = shared.client.store.rw_mode(names.key()).await?;
        Ok(match mode.as_deref() {
            Some("read") => true,
            Some("write") => fields > 2,
            _ => false,
        })
    }

    /// Whether anyone holds the write now.
    ///
    /// # Errors
    /// As [`ReadWriteLock::is_read_locked`].
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_write_locked(&self) -> Result<bool> {
        let shared = &self.reader.shared;
        let names = shared.names()?;
        Ok(shared.client.store.rw_mode(names.key()).await?.0.as_deref() == Some("write"))
    }

    /// Deletes the lock whoever holds it, readers and writer, and wakes every waiter.
    /// Returns `true` if there was a lock to delete. Holders find out at their next
    /// renewal (watchdog mode) or unlock (their `lost()` resolves then).
    ///
    /// # Errors
    /// Empty name; [`ErrorKind::WrongType`] when the key holds another type or a lock
    /// that is not a read/write lock (nothing deleted); connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the delete happens whether or not the future is polled again.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.writer.force_unlock().await
    }

    /// An upgrade (a write while this owner holds only reads) would wait for its own
    /// reads forever: refused before the write is sent. Local state only says the owner
    /// *may* hold reads (a `force_unlock`, or a lease that ran out, removed them without
    /// telling it until its next renewal), so the refusal asks the server first, in the
    /// reader's turn (no read acquire or release of this owner runs meanwhile): only a
    /// read hold of this owner that is still alive there (its field, and one of its
    /// timeout keys) refuses. Reads the server no longer holds end locally (their guards
    /// report lost) and the write goes ahead.
    async fn refuse_upgrade(&self) -> Result<()> {
        let reader = &self.reader.shared;
        if !reader.holds.has_current() || self.writer.shared.holds.has_current() {
            return Ok(());
        }
        let _turn = reader.holds.turn().await;
        if !reader.holds.has_current() {
            return Ok(());
        }
        let names = reader.names()?;
        let store = &reader.client.store;
        let count = store.hold_count(names.key(), &reader.owner).await?;
        let mut alive = false;
        if count > 0 {
            let prefix = names.rw_timeout_prefix(reader.owner.as_str());
            // A read hold lives while any of its owner's timeout keys does (rw_prune.lua);
            // the lowest outlives the others (read_acquire.lua), so look there first.
            // A count this client never makes (beyond a few nested reads) refuses
            // without a round trip per hold.
            alive = count > MAX_CHECKED_HOLDS;
            for k in 1..=count.min(MAX_CHECKED_HOLDS) {
                if store.exists(&format!("{prefix}:{k}")).await? {
                    alive = true;
                    break;
                }
            }
        }
        if alive {
            return Err(Error::unsent(
                ErrorKind::WouldDeadlock,
                "a write while this owner holds only reads (an upgrade) would wait for itself forever: release the reads first",
            )
            .with_key(self.key()));
        }
        tracing::debug!(
            target: crate::telemetry::TARGET,
            lock = %names.key(),
            "the server holds no read of this owner: its read guards are lost, the write goes ahead",
        );
        reader.holds.server_holds_nothing(None, crate::lock::hold::Ended::Found);
        Ok(())
    }
}

/// The most read holds of one owner whose timeout keys an upgrade check looks at one by
/// one; above it the reads count as alive (the write is refused).
const MAX_CHECKED_HOLDS: u64 = 16;

/// The guard of an unbounded wait (which ends only with one, or an error).
fn unbounded<G>(acquired: Result<Option<G>>) -> Result<G> {
    acquired?.ok_or_else(|| Error::new(ErrorKind::Timeout, "an unbounded wait ended without the lock"))
}
