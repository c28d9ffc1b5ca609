//! A semaphore in Redisson's `RSemaphore` layout: the String `NAME` holds the count of
//! available permits (decimal; a missing key counts as 0), and releases publish the new
//! count on `redisson_sc:{NAME}`. Each call is one script (`lua/sem_*.lua`) through the
//! store's one entry point, so it waits at the write gate, reloads on `NOSCRIPT` and
//! follows redirects as a lock's calls do.
//!
//! The calls that change the count on behalf of one acquire or release carry an
//! operation id ([`SemaphoreOp`]) and leave a short-lived record of it beside the count
//! (`leasehold_sem_op:{NAME}:OP`, which Redisson never reads), so that a retried, replayed
//! or late-run call counts once and an acquire whose outcome was never learned can be
//! undone ([`LockStore::semaphore_cancel`]); `docs/architecture/semaphores.md`, "Exactly
//! once", has the state machine.

use std::sync::Arc;
use std::time::Duration;

use fred::prelude::KeysInterface;
use fred::types::{Key, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::names::{derived_key, unique_key, SEMAPHORE_CHANNEL_PREFIX};
use crate::scripts;
use crate::store::LockStore;

/// The key and channel of one semaphore, made once per handle.
#[derive(Debug, Clone)]
pub struct SemaphoreNames {
    key: Arc<str>,
    channel: Arc<str>,
    /// `leasehold_sem_queue:{NAME}`, `leasehold_sem_waiters:{NAME}`: the wait queue.
    queue: Arc<str>,
    entries: Arc<str>,
    /// `leasehold_sem_grants:{NAME}`: the grants of the queue's waiters.
    grants: Arc<str>,
    /// `leasehold_sem_op:{NAME}:`, the records' prefix.
    op_prefix: Arc<str>,
}

impl SemaphoreNames {
    /// The names of the semaphore `key`: its channel `redisson_sc:{NAME}` is derived as
    /// every lock channel is ([`derived_key`]: Redisson's rule, except for names with
    /// braces but no valid hash tag, whose channel is kept in the key's slot).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    pub fn new(key: &str) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::invalid_argument("a semaphore name must not be empty"));
        }
        Ok(SemaphoreNames {
            key: Arc::from(key),
            channel: Arc::from(derived_key(SEMAPHORE_CHANNEL_PREFIX, key)),
            // Two semaphores `x` and `{x}` have two counts, so two queues: `unique_key`
            // (`derived_key` would give them one).
            queue: Arc::from(unique_key(SEMAPHORE_QUEUE_PREFIX, key)),
            entries: Arc::from(unique_key(SEMAPHORE_WAITERS_PREFIX, key)),
            grants: Arc::from(derived_key(SEMAPHORE_GRANTS_PREFIX, key)),
            op_prefix: Arc::from(format!("{}:", derived_key(SEMAPHORE_OP_PREFIX, key))),
        })
    }

    /// The wait queue, `leasehold_sem_queue:{NAME}` (a ZSET of waiting operations by
    /// arrival), in `NAME`'s slot and distinct for every name (`names::unique_key`).
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The queue's entries, `leasehold_sem_waiters:{NAME}` (a Hash op -> `"PERMITS
    /// DEADLINE_MS"`), in `NAME`'s slot.
    pub fn entries(&self) -> &str {
        &self.entries
    }

    /// The grants channel, `leasehold_sem_grants:{NAME}`: a release that serves the queue
    /// publishes `"OP NEXT WAIT_MS"` there per waiter it served.
    pub fn grants(&self) -> &Arc<str> {
        &self.grants
    }

    /// The queue keys and the grants channel, after the keys a script takes first.
    fn queue_keys(&self) -> [Key; 3] {
        [Key::from(&*self.queue), Key::from(&*self.entries), Key::from(&*self.grants)]
    }

    /// The count's key, `NAME`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key as a shared string.
    pub fn key_arc(&self) -> &Arc<str> {
        &self.key
    }

    /// The channel, `redisson_sc:{NAME}`.
    pub fn channel(&self) -> &Arc<str> {
        &self.channel
    }

    /// The record of the operation `op`, `leasehold_sem_op:{NAME}:OP` (OP in 32 hex
    /// digits): derived like the channel ([`derived_key`]), so it is in `NAME`'s slot.
    pub fn op_key(&self, op: SemaphoreOp) -> String {
        format!("{}{op}", self.op_prefix)
    }

    fn key_only(&self) -> Vec<Key> {
        vec![Key::from(&*self.key)]
    }

    fn key_and_channel(&self) -> Vec<Key> {
        vec![Key::from(&*self.key), Key::from(&*self.channel)]
    }
}

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// Prefix of a semaphore operation's record, `leasehold_sem_op:{NAME}:OP` (leasehold
/// only; Redisson ignores it): a String `"STATE N"` (`taken`, `released` or `cancelled`,
/// and the permits it moved) with a PX TTL, in `NAME`'s hash slot.
pub const SEMAPHORE_OP_PREFIX: &str = "leasehold_sem_op";

/// Prefix of a semaphore's wait queue, `leasehold_sem_queue:{NAME}` (leasehold only): a
/// ZSET of the waiting acquires' operation ids, scored by arrival (server µs).
pub const SEMAPHORE_QUEUE_PREFIX: &str = "leasehold_sem_queue";

/// Prefix of the queue's entries, `leasehold_sem_waiters:{NAME}`: a Hash op ->
/// `"PERMITS DEADLINE_MS"` (the permits wanted, and the server time past which the entry
/// is dead: its waiter refreshes it every keep-alive / 3).
pub const SEMAPHORE_WAITERS_PREFIX: &str = "leasehold_sem_waiters";

/// Prefix of the grants channel, `leasehold_sem_grants:{NAME}`.
pub const SEMAPHORE_GRANTS_PREFIX: &str = "leasehold_sem_grants";

/// The life of a queued waiter's entry without a refresh: a waiter refreshes it every
/// third of it (its recheck), and an entry past it is purged unserved. Short, because a
/// waiter that dies while queued and is served before its entry runs out loses the
/// permits it was granted, as a holder that dies does.
pub const QUEUE_KEEPALIVE: Duration = Duration::from_secs(3);

/// The timer a grant message gives the waiter it makes the head (`WAIT_MS`): it looks
/// again on its own this long after (the count did not cover it when the message went).
pub const GRANT_NEXT_WAIT: Duration = Duration::from_secs(1);

/// What one acquire attempt got ([`LockStore::semaphore_try_acquire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemaphoreAttempt {
    /// The permits are the operation's (taken now, by an earlier run, or granted).
    Taken,
    /// Not taken. `position`: a waiting call's place in the wait queue (0 = the head);
    /// `None` for a try.
    NotTaken {
        /// The place in the queue.
        position: Option<u64>,
    },
}

/// The message of the [`ErrorKind::WrongType`] a count-changing script's refused
/// `INCRBY`/`DECRBY` becomes (see `Error::counter_not_integer`).
pub(crate) const NOT_A_COUNT: &str = "WRONGTYPE: the semaphore's key holds a String that is not a count";

/// How long a `taken` record lives: the window in which a retry of the same acquire (a
/// wait retrying through an outage, a fred client replaying after a reconnect) or the
/// undo of an acquire whose outcome was never learned can still come and be answered
/// from it. Past it the record is gone: a retry would take again and an undo would find
/// nothing to give back (the permits of that one acquire stay taken, as without records).
pub const OP_TAKEN_TTL: Duration = Duration::from_secs(300);

/// How long a `released` or `cancelled` record lives: the window in which a replay of the
/// release or undo (retried within it, see `leasehold`'s release retries), or a late run
/// of an undone acquire (a command still in flight when its undo ran), is recognised and
/// changes nothing.
pub const OP_DONE_TTL: Duration = Duration::from_secs(60);

/// How long after an acquire's first send the release of its permits may still consume
/// its `taken` record (`sem_release.lua`'s consume mode: the record is deleted, nothing is
/// left behind) rather than replace it with a `released` tombstone: [`OP_TAKEN_TTL`] less
/// three [`OP_DONE_TTL`]s, 2 min. A release decided within it sends every retry (two
/// calls of [`OP_DONE_TTL`] at most: the guard's release, then its drop's give-back)
/// before [`CONSUME_LAST_SEND`], so each reaches the server while the record lives unless
/// held in the network for over a minute, the bound the tombstones assume too.
pub const CONSUME_WITHIN: Duration = Duration::from_secs(OP_TAKEN_TTL.as_secs() - 3 * OP_DONE_TTL.as_secs());

/// The last moment after an acquire's first send at which a consuming release is sent:
/// [`OP_TAKEN_TTL`] less one [`OP_DONE_TTL`] (a send after it could find the record
/// expired and take that for a replay).
pub const CONSUME_LAST_SEND: Duration = Duration::from_secs(OP_TAKEN_TTL.as_secs() - OP_DONE_TTL.as_secs());

/// One semaphore operation's id: 16 random bytes, made once per acquire or release call
/// and sent with every retry of it and with its undo. Its record is
/// [`SemaphoreNames::op_key`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SemaphoreOp([u8; 16]);

impl SemaphoreOp {
    /// A new random id (two v4 UUIDs mixed, so all 128 bits are random).
    pub fn random() -> Self {
        let a = uuid::Uuid::new_v4().as_u128();
        let b = uuid::Uuid::new_v4().as_u128();
        SemaphoreOp((a ^ b.rotate_left(17)).to_be_bytes())
    }
}

impl std::fmt::Display for SemaphoreOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::names::write_hex(&self.0, f)
    }
}

impl std::fmt::Debug for SemaphoreOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SemaphoreOp({self})")
    }
}

/// The answer of a release ([`LockStore::semaphore_release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemaphoreRelease {
    /// The count of available permits after the call.
    pub count: i64,
    /// `true` when this call gave the permits back; `false` when an earlier run of the
    /// same operation had (a replay: nothing changed).
    pub applied: bool,
}

fn millis(ttl: Duration) -> Value {
    int(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

impl LockStore {
    /// `sem_try_acquire.lua`: takes `permits` (1 or more) if that many are available, as
    /// the operation `op`: a retry of the same `op` answers from its record (`Taken` if
    /// it took, or a release granted it) and never takes twice. `keepalive`: a waiting
    /// call, which takes only when nobody is queued and otherwise keeps a place in the
    /// wait queue for `op` (entered, or refreshed to live `keepalive` more); `None`: a
    /// single try, which never reads the queue.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a String holding a whole number, or
    /// the record is not one; [`ErrorKind::Redis`] when `op` was released or cancelled
    /// already (nothing taken); timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost (permits it took, or a place it queued, are given back by
    /// [`LockStore::semaphore_cancel`] of the same `op`).
    pub async fn semaphore_try_acquire(
        &self,
        names: &SemaphoreNames,
        permits: i64,
        op: SemaphoreOp,
        keepalive: Option<Duration>,
    ) -> Result<SemaphoreAttempt> {
        let publish = self.call_settings().publish;
        let record = names.op_key(op);
        let op_text = op.to_string();
        let build = || {
            let mut keys = vec![Key::from(&*names.key), Key::from(record.as_str())];
            keys.extend(names.queue_keys());
            let args = vec![
                int(permits),
                millis(OP_TAKEN_TTL),
                millis(keepalive.unwrap_or(Duration::ZERO)),
                crate::call::static_arg(publish),
                Value::from(op_text.as_str()),
                Value::from(&*names.op_prefix),
                millis(GRANT_NEXT_WAIT),
            ];
            (keys, args)
        };
        let (reply, _): (Vec<i64>, _) = self
            .run_script(names.key(), &scripts::SEM_TRY_ACQUIRE, build, None)
            .await
            .map_err(|e| e.counter_not_integer(NOT_A_COUNT))?;
        match reply[..] {
            [1] => Ok(SemaphoreAttempt::Taken),
            [0] => Ok(SemaphoreAttempt::NotTaken { position: None }),
            [0, place] => Ok(SemaphoreAttempt::NotTaken { position: u64::try_from(place).ok() }),
            [-1] => {
                Err(Error::new(ErrorKind::Redis, format!("semaphore operation {op} was released or cancelled already"))
                    .with_key(names.key()))
            }
            _ => Err(Error::new(ErrorKind::Redis, format!("sem_try_acquire.lua gave an unexpected reply {reply:?}"))
                .with_key(names.key())),
        }
    }

    /// `sem_release.lua`: gives back `permits` (1 or more) as the operation `op` (a plain
    /// release of permits taken elsewhere: a fresh `op` per call, the same for its
    /// retries) and publishes the new count (when above 0). A replay of `op` changes
    /// nothing. With an acquire's `op` it gives back exactly the permits that acquire
    /// took (its record says how many; `permits` counts only when the record expired
    /// while they were held), once; a release of an acquire that was cancelled changes
    /// nothing.
    ///
    /// `consume`: the release of an acquire that answered on its one send (no copy of
    /// it can run again) within [`CONSUME_WITHIN`] of that send: its `taken` record is
    /// deleted instead of turned into a `released` tombstone (`permits` must then be
    /// the acquire's), so the pair leaves no key behind; every send of one operation's
    /// release must use the same mode.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`]: retry with the same `op`.
    pub async fn semaphore_release(
        &self,
        names: &SemaphoreNames,
        permits: i64,
        op: SemaphoreOp,
        consume: bool,
    ) -> Result<SemaphoreRelease> {
        let publish = self.call_settings().publish;
        let record = names.op_key(op);
        let always = self.call_settings().always_read_queue;
        let build = || {
            let mut keys = vec![Key::from(&*names.key), Key::from(&*names.channel), Key::from(record.as_str())];
            keys.extend(names.queue_keys());
            let mode = int(i64::from(consume));
            let args = vec![
                int(permits),
                crate::call::static_arg(publish),
                millis(OP_DONE_TTL),
                mode,
                int(i64::from(always)),
                Value::from(&*names.op_prefix),
                millis(OP_TAKEN_TTL),
                millis(GRANT_NEXT_WAIT),
            ];
            (keys, args)
        };
        let (reply, _): (Vec<i64>, _) = self
            .run_script(names.key(), &scripts::SEM_RELEASE, build, None)
            .await
            .map_err(|e| e.counter_not_integer(NOT_A_COUNT))?;
        match reply[..] {
            [count, applied] => Ok(SemaphoreRelease { count, applied: applied == 1 }),
            _ => Err(Error::new(ErrorKind::Redis, format!("sem_release.lua gave an unexpected reply {reply:?}"))
                .with_key(names.key())),
        }
    }

    /// `sem_cancel.lua`: undoes the acquire `op` whose outcome the caller never learned:
    /// the permits it took are given back (and published), or, when it has not run, a
    /// tombstone refuses it if it runs later. Returns the permits given back (0: none
    /// taken, or undone already). Replay-safe.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_release`].
    pub async fn semaphore_cancel(&self, names: &SemaphoreNames, op: SemaphoreOp) -> Result<i64> {
        let publish = self.call_settings().publish;
        let record = names.op_key(op);
        let op_text = op.to_string();
        let build = || {
            let mut keys = vec![Key::from(&*names.key), Key::from(&*names.channel), Key::from(record.as_str())];
            keys.extend(names.queue_keys());
            let args = vec![
                crate::call::static_arg(publish),
                millis(OP_DONE_TTL),
                Value::from(op_text.as_str()),
                Value::from(&*names.op_prefix),
                millis(OP_TAKEN_TTL),
                millis(GRANT_NEXT_WAIT),
            ];
            (keys, args)
        };
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_CANCEL, build, None).await?;
        Ok(reply)
    }

    /// `sem_try_set_permits.lua`: sets the count to `permits` (0 or more) if the key is
    /// missing, and publishes it. `true` when it was set.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_try_set_permits(&self, names: &SemaphoreNames, permits: i64) -> Result<bool> {
        let publish = self.call_settings().publish;
        let build = || (names.key_and_channel(), vec![int(permits), crate::call::static_arg(publish)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_TRY_SET_PERMITS, build, None).await?;
        Ok(reply == 1)
    }

    /// `sem_add_permits.lua`: adds `delta` (which may be negative) to the count and
    /// publishes the result when above 0. Returns the count after the change.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_add_permits(&self, names: &SemaphoreNames, delta: i64) -> Result<i64> {
        let publish = self.call_settings().publish;
        let build = || (names.key_and_channel(), vec![int(delta), crate::call::static_arg(publish)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_ADD_PERMITS, build, None).await?;
        Ok(reply)
    }

    /// `sem_drain.lua`: takes every available permit; returns how many there were.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_drain(&self, names: &SemaphoreNames) -> Result<i64> {
        let build = || (names.key_only(), Vec::new());
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_DRAIN, build, None).await?;
        Ok(reply)
    }

    /// Whether the command client may send one command more than once on its own
    /// (fred's `max_command_attempts` above 1: a client given to
    /// `leasehold::Client::from_fred` may replay what was in flight after a reconnect).
    /// leasehold's own clients never do: an acquire that answered was then sent once,
    /// and no copy of it can still run.
    pub fn may_resend(&self) -> bool {
        fred::prelude::ClientLike::connection_config(self.client()).max_command_attempts > 1
    }

    /// `GET NAME`: the count of available permits (0 for a missing key).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a String holding a whole number;
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn semaphore_count(&self, names: &SemaphoreNames) -> Result<i64> {
        let key = names.key();
        let raw: Option<String> = self.bounded(key, || self.client().get(key)).await?;
        match raw {
            None => Ok(0),
            Some(text) => text.trim().parse::<i64>().map_err(|_| {
                Error::new(ErrorKind::WrongType, "the semaphore's key holds a String that is not a count").with_key(key)
            }),
        }
    }

    /// `EXISTS NAME`: whether the semaphore was ever set (its count key is there).
    ///
    /// # Errors
    /// Timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn semaphore_exists(&self, names: &SemaphoreNames) -> Result<bool> {
        let key = names.key();
        let count: i64 = self.bounded(key, || self.client().exists(key)).await?;
        Ok(count > 0)
    }
}
