//! The lock kinds, each one closed variant of [`LockKind`] that owns everything that sets
//! it apart: the scripts it runs (acquire, release, force-release), their KEYS and ARGV,
//! how its acquire reply is read (with or without a fencing token), and how its waiters
//! wait (the channel they listen on, the queue that orders them).
//!
//! Only the kinds that exist can be written: a fenced fair lock, say, is not a value of
//! the type (the old `AcquireSpec { fair, fence_ttl_ms }` pair could hold both, and then
//! silently meant fair). A new kind (a read or write hold, a semaphore permit) is a new
//! variant, and the compiler lists every `match` that must learn it.
//!
//! What one acquire is asked ([`AcquireSpec`]: a kind, a single try or a waiting call,
//! replica sync) and what it answers ([`AcquireReply`]) live here too, beside the kind.
//!
//! The store runs every call of every kind through one entry point (its `run_script`,
//! behind [`LockStore::acquire`](crate::LockStore::acquire),
//! [`LockStore::release`](crate::LockStore::release) and
//! [`LockStore::force_release`](crate::LockStore::force_release)): the write gate, the
//! `WAIT` pipeline, `NOSCRIPT` reloads and redirects are the same for all of them.

use fred::types::{Key, Value};

use crate::call::{
    acquire_from_reply, int_arg, non_negative, static_arg, unexpected, unlock_message, Acquire, CallSettings,
    ScriptArgs,
};
use crate::error::Result;
use crate::names::LockNames;
use crate::owner::OwnerId;
use crate::replicas::ReplicaSync;
use crate::script::LuaScript;
use crate::scripts;

/// One kind of reentrant lock on Redisson's `RLock` Hash: which scripts its calls run and
/// how its waiters wait. Fixed for the life of a lock handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// A plain reentrant lock (`acquire.lua`, `release.lua`, `force_release.lua`). Its
    /// waiting calls queue up in leasehold's wait queue on the server
    /// (`leasehold_lock_queue:{NAME}`) and a release hands the lock to the first live one.
    Reentrant {
        /// A queue entry's life without a refresh, in ms (> 0).
        queue_keepalive_ms: u64,
    },
    /// A reentrant lock whose fresh holds get a fencing token (`fenced_acquire.lua`,
    /// then `release.lua` and `force_release.lua` as [`LockKind::Reentrant`]). Its
    /// waiters queue in leasehold's wait queue as [`LockKind::Reentrant`]'s do; a waiter
    /// handed the lock gets its token when it claims it (`fenced_acquire.lua`'s header).
    Fenced {
        /// The TTL the counter `redisson_lock_token:{NAME}` is given with each token, in
        /// ms (> 0).
        counter_ttl_ms: u64,
        /// A queue entry's life without a refresh, in ms (> 0).
        queue_keepalive_ms: u64,
    },
    /// Redisson's `RFairLock` (`fair_acquire.lua`, `fair_release.lua`,
    /// `fair_force_release.lua`): granted in the order of `redisson_lock_queue:{NAME}`,
    /// each waiter told on its own channel.
    Fair {
        /// A queue entry's deadline is the server's time + this, in ms (> 0).
        keepalive_ms: u64,
    },
    /// A read hold of Redisson's `RReadWriteLock` (`read_acquire.lua`,
    /// `read_release.lua`, `rw_force_release.lua`): the owner is the reader field
    /// `CLIENT_UUID:N`, each hold has its timeout key
    /// `{NAME}:OWNER:rwlock_timeout:k`. Waiters listen on `redisson_rwlock:{NAME}` and
    /// its grant channel `leasehold_rwlock__grants:{NAME}`; a waiting reader that is
    /// refused registers in `leasehold_rwlock_readers:{NAME}` ([`QueueKind::Readers`]),
    /// and the next write release grants it its hold in one step.
    Read {
        /// The life of the reader's registration without a refresh, in ms (> 0).
        queue_keepalive_ms: u64,
    },
    /// The write hold of Redisson's `RReadWriteLock` (`write_acquire.lua`,
    /// `write_release.lua`, `rw_force_release.lua`): the owner is the writer field
    /// `CLIENT_UUID:N:write`. Waits on [`LockKind::Read`]'s channel; a waiting writer
    /// records itself in `leasehold_rwlock_writers:{NAME}` ([`QueueKind::WriterIntent`]),
    /// which keeps new leasehold readers out until it got the lock or gave up.
    Write {
        /// The life of the writer's entry without a refresh, in ms (> 0).
        queue_keepalive_ms: u64,
    },
    /// A candidate of a leader election: the lead is a reentrant lock Hash,
    /// `leasehold_election:{NAME}` (`election_acquire.lua`, `election_release.lua`,
    /// `election_force_release.lua`). Waiters queue in leasehold's wait queue as
    /// [`LockKind::Reentrant`]'s do; a fresh lead issues a term from
    /// `leasehold_election_term:{NAME}` (a fencing token), records the leader and its
    /// value in `leasehold_election_leader:{NAME}`, and publishes the change on
    /// `leasehold_election__channel:{NAME}` (see [`crate::election`]).
    Election {
        /// The TTL the term counter is given with each term, in ms (> 0). The leader
        /// record has none (it must outlive the longest lead).
        counter_ttl_ms: u64,
        /// A queue entry's life without a refresh, in ms (> 0).
        queue_keepalive_ms: u64,
    },
}

/// The channel a kind's waiters listen on for a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitChannel {
    /// The lock's release channel, `redisson_lock__channel:{NAME}`, shared by every
    /// waiter of the lock (and of the locks that share it, `x` and `{x}`).
    Lock,
    /// The waiter's own channel, `redisson_lock__channel:{NAME}:OWNER`: a release tells
    /// the queue head only.
    Own,
    /// A read/write lock's channel, `redisson_rwlock:{NAME}`, shared by its readers and
    /// writers: a read release publishes `0` (one waiter per lock tries), a write
    /// release `1` (every waiter tries).
    ReadWrite,
    /// A count-down latch's channel, `redisson_countdownlatch__channel__{NAME}` (no lock
    /// kind waits on it; see [`crate::latch`]): every message wakes every local waiter.
    Latch,
}

/// What orders a kind's waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Only a local line per lock in each client (first come, first tried); nothing on
    /// the server.
    Local,
    /// leasehold's wait queue beside the `RLock` layout (`leasehold_lock_queue:{NAME}`,
    /// `leasehold_lock_waiters:{NAME}`, queue messages on `leasehold_lock__queue:{NAME}`):
    /// a release hands the lock to the first live waiter.
    Server,
    /// Redisson's fair queue (`redisson_lock_queue:{NAME}`, `redisson_lock_timeout:{NAME}`).
    Fair,
    /// A read/write lock's waiting writers (`leasehold_rwlock_writers:{NAME}`, writer ->
    /// deadline, and their order `leasehold_rwlock_writers:order:{NAME}`): a free lock
    /// goes to the earliest live waiting writer (every client's writers are in one
    /// order; each client also keeps a local line), and while a live writer waits no new
    /// leasehold reader enters. Kept alive by the waiter's calls and removed when its
    /// wait ends, as a queue entry.
    WriterIntent,
    /// Waiters that exclude none of their own kind: nothing on the server and no line
    /// order. Every release message wakes every such local waiter, each keeps its own
    /// timers, and none stands in front of another waiter of the lock.
    Shared,
    /// A read/write lock's readers: shared waiters (as [`QueueKind::Shared`]: in no
    /// line, standing in front of nobody; a reader kept out by a waiting writer must not
    /// keep that writer from its turn) that are also registered on the server
    /// (`leasehold_rwlock_readers:{NAME}`, owner -> deadline and lease), kept alive by
    /// the waiter's calls and removed when its wait ends, as a queue entry. A write
    /// release grants every registered reader its hold and names it on the grant
    /// channel: the waiter takes the hold over without a script.
    Readers,
}

/// How to acquire: the lock's kind (which script, its KEYS and ARGV, how its reply is
/// read), whether it is a waiting call, and whether replicas must acknowledge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireSpec {
    /// The lock's kind.
    pub kind: LockKind,
    /// A waiting call (not a single try): a server-queued kind queues up (or refreshes
    /// its entry) when not acquired, a fair one too, and a fenced one flags the holder
    /// so that its release wakes this waiter. A single try writes nothing when the lock
    /// is held.
    pub waiting: bool,
    /// A waiting call of a wait whose earlier call was answered "held": a reader's
    /// registration may exist, and an acquire removes it (a reader's first call has
    /// none to remove, and skips that).
    pub registered: bool,
    /// The call's ticket (its owner's turn number): a reader's registration keeps it
    /// and a grant names it back.
    pub ticket: u64,
    /// Follow the script with `WAIT`.
    pub sync: Option<ReplicaSync>,
    /// The value a [`LockKind::Election`] candidate proclaims when it takes the lead
    /// (`None` for every other kind, and taken as empty for an election).
    pub value: Option<fred::bytes::Bytes>,
}

/// The answer to [`LockStore::acquire`](crate::LockStore::acquire).
#[derive(Debug)]
pub struct AcquireReply {
    /// What the script answered.
    pub acquire: Acquire,
    /// The hold's fencing token (fenced acquires that acquired).
    pub token: Option<u64>,
    /// What `WAIT` answered (with [`AcquireSpec::sync`]): the number of replicas that
    /// acknowledged, or the error `WAIT` itself failed with.
    pub acknowledged: Option<Result<u32>>,
}

impl LockKind {
    /// The kind's name in spans and metric labels: `lock`, `fenced` or `fair`.
    pub fn name(&self) -> &'static str {
        match self {
            LockKind::Reentrant { .. } => "lock",
            LockKind::Fenced { .. } => "fenced",
            LockKind::Fair { .. } => "fair",
            LockKind::Read { .. } => "read",
            LockKind::Write { .. } => "write",
            LockKind::Election { .. } => "election",
        }
    }

    /// Where its waiters hear a release.
    pub fn wait_channel(&self) -> WaitChannel {
        match self {
            LockKind::Reentrant { .. } | LockKind::Fenced { .. } | LockKind::Election { .. } => WaitChannel::Lock,
            LockKind::Fair { .. } => WaitChannel::Own,
            LockKind::Read { .. } | LockKind::Write { .. } => WaitChannel::ReadWrite,
        }
    }

    /// What orders its waiters.
    pub fn queue(&self) -> QueueKind {
        match self {
            LockKind::Reentrant { .. } | LockKind::Fenced { .. } | LockKind::Election { .. } => QueueKind::Server,
            LockKind::Fair { .. } => QueueKind::Fair,
            LockKind::Read { .. } => QueueKind::Readers,
            LockKind::Write { .. } => QueueKind::WriterIntent,
        }
    }

    /// The life of a queue entry without a refresh, in ms, for the kinds whose waiters
    /// hold a place in a server queue (every kind's now: a reader's registration too).
    pub fn queue_keepalive_ms(&self) -> Option<u64> {
        match *self {
            LockKind::Reentrant { queue_keepalive_ms }
            | LockKind::Fenced { queue_keepalive_ms, .. }
            | LockKind::Election { queue_keepalive_ms, .. } => Some(queue_keepalive_ms),
            LockKind::Fair { keepalive_ms } => Some(keepalive_ms),
            LockKind::Write { queue_keepalive_ms } | LockKind::Read { queue_keepalive_ms } => Some(queue_keepalive_ms),
        }
    }

    /// Whether a fresh hold of this kind carries a fencing token.
    pub fn issues_tokens(&self) -> bool {
        matches!(self, LockKind::Fenced { .. } | LockKind::Election { .. })
    }

    /// The KEYS and ARGV of its acquire script ([`LockKind::acquire_script`]): take or
    /// re-enter the lock for `owner`, ending with `target` holds. `waiting`: a waiting
    /// call (not a single try), which a server-queued kind queues up (or refreshes) when
    /// it does not acquire, a fair one too, and a fenced one uses to flag the holder.
    /// `registered`: an earlier call of the same wait was answered "held" (a reader's
    /// registration may exist: its acquire removes it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire_args(
        &self,
        names: &LockNames,
        owner: &OwnerId,
        lease_ms: u64,
        target: u64,
        waiting: bool,
        registered: bool,
        ticket: u64,
        value: Option<&fred::bytes::Bytes>,
        settings: CallSettings,
    ) -> ScriptArgs {
        match *self {
            LockKind::Election { counter_ttl_ms, queue_keepalive_ms } => {
                // fenced_acquire.lua's KEYS and ARGV (the term counter for the token
                // counter), then the leader record, the change channel and the value.
                let mut keys = vec![Key::from(names.key_arg())];
                keys.extend(names.queue_args().iter().cloned().map(Key::from));
                keys.push(Key::from(names.election_term_key()));
                keys.push(Key::from(names.election_record_key()));
                keys.push(Key::from(names.election_channel()));
                // The waiting candidates: a queued campaign registers its value (and
                // this call's ticket) for a resign's one-step grant.
                keys.push(Key::from(names.election_candidates_key()));
                let keepalive = if waiting { queue_keepalive_ms.max(1) } else { 0 };
                let args = vec![
                    int_arg(lease_ms),
                    Value::Bytes(owner.arg()),
                    int_arg(target.max(1)),
                    int_arg(keepalive),
                    static_arg(settings.publish),
                    int_arg(counter_ttl_ms),
                    Value::Bytes(value.cloned().unwrap_or_default()),
                    int_arg(ticket),
                ];
                (keys, args)
            }
            LockKind::Reentrant { queue_keepalive_ms } => {
                let mut keys = vec![Key::from(names.key_arg())];
                let keepalive = if waiting { queue_keepalive_ms.max(1) } else { 0 };
                let mut args =
                    vec![int_arg(lease_ms), Value::Bytes(owner.arg()), int_arg(target.max(1)), int_arg(keepalive)];
                // A single try names only the lock key and publishes nothing.
                if waiting {
                    keys.extend(names.queue_args().iter().cloned().map(Key::from));
                    args.push(static_arg(settings.publish));
                }
                (keys, args)
            }
            LockKind::Fenced { counter_ttl_ms, queue_keepalive_ms } => {
                // acquire.lua's KEYS and ARGV (the queue keys even for a single try, so
                // that the counter stays KEYS[5]), then the counter and its TTL.
                let mut keys = vec![Key::from(names.key_arg())];
                keys.extend(names.queue_args().iter().cloned().map(Key::from));
                keys.push(Key::from(names.token_key()));
                let keepalive = if waiting { queue_keepalive_ms.max(1) } else { 0 };
                let args = vec![
                    int_arg(lease_ms),
                    Value::Bytes(owner.arg()),
                    int_arg(target.max(1)),
                    int_arg(keepalive),
                    static_arg(settings.publish),
                    int_arg(counter_ttl_ms),
                ];
                (keys, args)
            }
            LockKind::Fair { keepalive_ms } => {
                let args = vec![
                    int_arg(lease_ms),
                    Value::Bytes(owner.arg()),
                    int_arg(target.max(1)),
                    int_arg(keepalive_ms.max(1)),
                    int_arg(u64::from(waiting)),
                    unlock_message(),
                    static_arg(settings.publish),
                ];
                (fair_keys(names), args)
            }
            LockKind::Read { queue_keepalive_ms } => {
                // The owner's timeout-key prefix is built by the script from ARGV (a key
                // that never exists must not be declared: TRYAGAIN in a migrating slot).
                let keys = vec![
                    Key::from(names.key_arg()),
                    Key::from(names.rw_writers_key()),
                    Key::from(names.rw_readers_key()),
                ];
                let mut args = rw_acquire_args(names, owner, lease_ms, target);
                let flag = match (waiting, registered) {
                    (false, _) => "0",
                    (true, false) => "1",
                    (true, true) => "2",
                };
                args.push(static_arg(flag));
                args.push(int_arg(if waiting { queue_keepalive_ms.max(1) } else { 0 }));
                args.push(int_arg(ticket));
                (keys, args)
            }
            LockKind::Write { queue_keepalive_ms } => {
                let keys = vec![
                    Key::from(names.key_arg()),
                    Key::from(names.rw_writers_key()),
                    Key::from(names.rw_writers_order_key()),
                ];
                let mut args = rw_acquire_args(names, owner, lease_ms, target);
                args.push(int_arg(if waiting { queue_keepalive_ms.max(1) } else { 0 }));
                (keys, args)
            }
        }
    }

    /// Reads an acquire script's reply: what it answered, and the hold's fencing token
    /// when this kind issues one and the lock was acquired.
    ///
    /// # Errors
    /// [`ErrorKind::Redis`](crate::ErrorKind::Redis) for a reply of another shape (a
    /// fenced acquire that acquired without a token included).
    pub(crate) fn parse_acquire(&self, names: &LockNames, reply: &[i64]) -> Result<(Acquire, Option<u64>)> {
        let script = self.acquire_script().name();
        let acquire = acquire_from_reply(script, names, reply)?;
        let token = match (acquire, self.issues_tokens(), reply) {
            (Acquire::Acquired { .. }, true, [_, _, token]) => Some(non_negative(*token)),
            (Acquire::Acquired { .. }, true, other) => return Err(unexpected(script, names, other)),
            _ => None,
        };
        Ok((acquire, token))
    }

    /// The script that acquires a lock of this kind.
    pub(crate) fn acquire_script(&self) -> &'static LuaScript {
        match self {
            LockKind::Reentrant { .. } => &scripts::ACQUIRE,
            LockKind::Fenced { .. } => &scripts::FENCED_ACQUIRE,
            LockKind::Fair { .. } => &scripts::FAIR_ACQUIRE,
            LockKind::Read { .. } => &scripts::READ_ACQUIRE,
            LockKind::Write { .. } => &scripts::WRITE_ACQUIRE,
            LockKind::Election { .. } => &scripts::ELECTION_ACQUIRE,
        }
    }

    /// The script that releases a lock of this kind (and undoes an acquire, and cleans
    /// up a wait).
    pub(crate) fn release_script(&self) -> &'static LuaScript {
        match self {
            LockKind::Reentrant { .. } | LockKind::Fenced { .. } => &scripts::RELEASE,
            LockKind::Fair { .. } => &scripts::FAIR_RELEASE,
            LockKind::Read { .. } => &scripts::READ_RELEASE,
            LockKind::Write { .. } => &scripts::WRITE_RELEASE,
            LockKind::Election { .. } => &scripts::ELECTION_RELEASE,
        }
    }

    /// The KEYS and ARGV of its release script: set `owner`'s hold count to `target`
    /// (at 0 remove it and tell the waiters), raising the TTL to `need_ms` while holds
    /// remain. `leave_queue`: also remove the owner's entry from leasehold's wait queue
    /// (a wait that ended without the lock); only a server-queued kind has one. A fair
    /// release always removes the owner's entry of the fair queue.
    pub(crate) fn release_args(
        &self,
        names: &LockNames,
        owner: &OwnerId,
        target: u64,
        need_ms: u64,
        leave_queue: bool,
        settings: CallSettings,
    ) -> ScriptArgs {
        match self {
            LockKind::Reentrant { .. } | LockKind::Fenced { .. } | LockKind::Election { .. } => {
                let leave_queue = leave_queue && self.queue() == QueueKind::Server;
                let mut keys = vec![Key::from(names.key_arg()), Key::from(names.channel_arg())];
                keys.extend(names.queue_args().iter().cloned().map(Key::from));
                if matches!(self, LockKind::Election { .. }) {
                    // election_release.lua: release.lua's, then the record, the change
                    // channel, the term counter and the waiting candidates (a grant of
                    // the lead issues the next leader's term in the release).
                    keys.push(Key::from(names.election_record_key()));
                    keys.push(Key::from(names.election_channel()));
                    keys.push(Key::from(names.election_term_key()));
                    keys.push(Key::from(names.election_candidates_key()));
                }
                let mut args = vec![
                    Value::Bytes(owner.arg()),
                    int_arg(target),
                    int_arg(need_ms),
                    unlock_message(),
                    int_arg(u64::from(settings.always_read_queue)),
                    int_arg(u64::from(leave_queue)),
                    static_arg(settings.publish),
                    int_arg(u64::from(settings.redisson_waiters)),
                ];
                if let LockKind::Election { counter_ttl_ms, .. } = *self {
                    args.push(int_arg(counter_ttl_ms));
                }
                (keys, args)
            }
            LockKind::Fair { .. } => {
                let args = vec![
                    Value::Bytes(owner.arg()),
                    int_arg(target),
                    int_arg(need_ms),
                    unlock_message(),
                    static_arg(settings.publish),
                ];
                (fair_keys(names), args)
            }
            LockKind::Read { .. } | LockKind::Write { .. } => {
                let reads = matches!(self, LockKind::Read { .. });
                // A read release declares only the lock key: it builds the owner's
                // timeout-key prefix from ARGV and takes the channel in ARGV (a key that
                // never exists makes the call TRYAGAIN in a migrating slot; see
                // `read_release.lua`); a write release names the channel and the waiting
                // writers.
                // A read wait's clean-up also names the waiting readers (it removes the
                // owner's registration); a write release names the waiting readers it
                // grants.
                let mut keys = vec![Key::from(names.key_arg())];
                if !reads {
                    keys.push(Key::from(names.rwlock_channel()));
                    keys.push(Key::from(names.rw_writers_key()));
                    keys.push(Key::from(names.rw_readers_key()));
                    keys.push(Key::from(names.rw_writers_order_key()));
                } else if leave_queue {
                    keys.push(Key::from(names.rw_readers_key()));
                }
                let message = if reads { unlock_message() } else { read_unlock_message() };
                let mut args = vec![
                    Value::Bytes(owner.arg()),
                    int_arg(target),
                    int_arg(need_ms),
                    Value::from(names.rw_key_prefix()),
                    static_arg(settings.publish),
                    message,
                ];
                if reads {
                    args.push(Value::from(names.rwlock_channel()));
                    if leave_queue {
                        args.push(int_arg(1));
                    }
                } else {
                    args.push(int_arg(u64::from(leave_queue)));
                    args.push(Value::from(names.rw_grants_channel()));
                }
                (keys, args)
            }
        }
    }

    /// The script that deletes a lock of this kind whoever holds it and tells its
    /// waiters (a fair lock: the queue head).
    pub(crate) fn force_release_script(&self) -> &'static LuaScript {
        match self {
            LockKind::Reentrant { .. } | LockKind::Fenced { .. } => &scripts::FORCE_RELEASE,
            LockKind::Fair { .. } => &scripts::FAIR_FORCE_RELEASE,
            LockKind::Read { .. } | LockKind::Write { .. } => &scripts::RW_FORCE_RELEASE,
            LockKind::Election { .. } => &scripts::ELECTION_FORCE_RELEASE,
        }
    }

    /// The KEYS and ARGV of its force-release script.
    /// `by`: who forces it (the forcing client's connection name), recorded with the
    /// removed owners in the lock's history `leasehold_history:{NAME}`; `None` records
    /// nothing.
    pub(crate) fn force_release_args(&self, names: &LockNames, by: Option<&str>, settings: CallSettings) -> ScriptArgs {
        // The history key and who, last in ARGV (never declared: see `force_release.lua`).
        let history = match by {
            Some(by) => [Value::from(names.history_key()), Value::from(by)],
            None => [static_arg(""), static_arg("")],
        };
        let mut args = vec![unlock_message(), static_arg(settings.publish)];
        match self {
            LockKind::Read { .. } | LockKind::Write { .. } => {
                // "1" whoever held it: every waiter, reader or writer, may try.
                let mut args =
                    vec![read_unlock_message(), static_arg(settings.publish), Value::from(names.rwlock_channel())];
                args.extend(history);
                // Only the lock key is declared; the channel is in ARGV (see
                // `rw_force_release.lua`).
                (vec![Key::from(names.key_arg())], args)
            }
            LockKind::Reentrant { .. } | LockKind::Fenced { .. } => {
                args.extend(history);
                (vec![Key::from(names.key_arg()), Key::from(names.channel_arg())], args)
            }
            LockKind::Fair { .. } => {
                args.extend(history);
                (fair_keys(names), args)
            }
            LockKind::Election { .. } => {
                args.extend(history);
                let keys = vec![
                    Key::from(names.key_arg()),
                    Key::from(names.channel_arg()),
                    Key::from(names.election_record_key()),
                    Key::from(names.election_channel()),
                ];
                (keys, args)
            }
        }
    }
}

/// The ARGV of `read_acquire.lua` and `write_acquire.lua`: lease, owner field (the
/// reader's, or the writer's `OWNER:write`), hold count, the timeout keys' prefix.
fn rw_acquire_args(names: &LockNames, owner: &OwnerId, lease_ms: u64, target: u64) -> Vec<Value> {
    vec![int_arg(lease_ms), Value::Bytes(owner.arg()), int_arg(target.max(1)), Value::from(names.rw_key_prefix())]
}

/// [`READ_UNLOCK_MESSAGE`](crate::names::READ_UNLOCK_MESSAGE) (`"1"`) as a script
/// argument: wakes every waiter.
fn read_unlock_message() -> Value {
    static_arg(crate::names::READ_UNLOCK_MESSAGE)
}

/// The KEYS of the fair-lock scripts: the lock key, its queue, its deadlines and its
/// release channel (the prefix of every waiter's own channel).
fn fair_keys(names: &LockNames) -> Vec<Key> {
    vec![
        Key::from(names.key_arg()),
        Key::from(names.queue_key()),
        Key::from(names.timeout_key()),
        Key::from(names.channel_arg()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CallSettings {
        CallSettings { publish: "spublish", always_read_queue: false, redisson_waiters: true }
    }

    fn text(values: &[Value]) -> Vec<String> {
        values.iter().map(|v| v.as_string().unwrap_or_default()).collect()
    }

    fn key_text(keys: &[Key]) -> Vec<String> {
        keys.iter().map(|k| k.as_str_lossy().into_owned()).collect()
    }

    const REENTRANT: LockKind = LockKind::Reentrant { queue_keepalive_ms: 10_000 };
    const FENCED: LockKind = LockKind::Fenced { counter_ttl_ms: 5_000, queue_keepalive_ms: 9_000 };
    const FAIR: LockKind = LockKind::Fair { keepalive_ms: 7_000 };

    #[test]
    fn each_kind_runs_its_own_scripts() {
        let scripts = |kind: LockKind| {
            (kind.acquire_script().name(), kind.release_script().name(), kind.force_release_script().name())
        };
        assert_eq!(scripts(REENTRANT), ("acquire.lua", "release.lua", "force_release.lua"));
        assert_eq!(scripts(FENCED), ("fenced_acquire.lua", "release.lua", "force_release.lua"));
        assert_eq!(scripts(FAIR), ("fair_acquire.lua", "fair_release.lua", "fair_force_release.lua"));
    }

    #[test]
    fn the_plan_of_each_kind() {
        assert_eq!((REENTRANT.wait_channel(), REENTRANT.queue()), (WaitChannel::Lock, QueueKind::Server));
        assert_eq!((FENCED.wait_channel(), FENCED.queue()), (WaitChannel::Lock, QueueKind::Server));
        assert_eq!((FAIR.wait_channel(), FAIR.queue()), (WaitChannel::Own, QueueKind::Fair));
        assert_eq!([REENTRANT, FENCED, FAIR].map(|k| k.queue_keepalive_ms()), [Some(10_000), Some(9_000), Some(7_000)]);
        assert_eq!([REENTRANT, FENCED, FAIR].map(|k| k.name()), ["lock", "fenced", "fair"]);
    }

    #[test]
    fn a_single_try_of_the_plain_lock_names_only_its_key() {
        let names = LockNames::new("k").expect("valid");
        let owner = crate::ClientId::new_random().next_owner();
        let (keys, args) = REENTRANT.acquire_args(&names, &owner, 30_000, 2, false, false, 9, None, settings());
        assert_eq!(key_text(&keys), ["k"]);
        assert_eq!(text(&args), ["30000", owner.as_str(), "2", "0"]);
        let (keys, args) = REENTRANT.acquire_args(&names, &owner, 30_000, 2, true, false, 9, None, settings());
        assert_eq!(keys.len(), 4);
        assert_eq!(text(&args), ["30000", owner.as_str(), "2", "10000", "spublish"]);
    }

    #[test]
    fn fenced_and_fair_arguments_are_as_their_headers_say() {
        let names = LockNames::new("k").expect("valid");
        let owner = crate::ClientId::new_random().next_owner();
        // acquire.lua's KEYS and ARGV, then the counter and its TTL; a single try names
        // the queue keys too (the counter stays KEYS[5]) with a keep-alive of 0.
        let queue = ["leasehold_lock_queue:{k}", "leasehold_lock_waiters:{k}", "leasehold_lock__queue:{k}"];
        let (keys, args) = FENCED.acquire_args(&names, &owner, 30_000, 1, true, false, 9, None, settings());
        assert_eq!(key_text(&keys), ["k", queue[0], queue[1], queue[2], "redisson_lock_token:{k}"]);
        assert_eq!(text(&args), ["30000", owner.as_str(), "1", "9000", "spublish", "5000"]);
        let (keys, args) = FENCED.acquire_args(&names, &owner, 30_000, 1, false, false, 9, None, settings());
        assert_eq!(keys.len(), 5);
        assert_eq!(text(&args), ["30000", owner.as_str(), "1", "0", "spublish", "5000"]);
        let (keys, args) = FAIR.acquire_args(&names, &owner, 30_000, 1, false, false, 9, None, settings());
        assert_eq!(
            key_text(&keys),
            ["k", "redisson_lock_queue:{k}", "redisson_lock_timeout:{k}", "redisson_lock__channel:{k}"]
        );
        assert_eq!(text(&args), ["30000", owner.as_str(), "1", "7000", "0", "0", "spublish"]);
        // A fenced wait's clean-up leaves leasehold's wait queue, as a plain one's.
        let (_, args) = FENCED.release_args(&names, &owner, 0, 0, true, settings());
        assert_eq!(text(&args)[5], "1");
        let (_, args) = REENTRANT.release_args(&names, &owner, 0, 0, true, settings());
        assert_eq!(text(&args)[5], "1");
    }

    #[test]
    fn read_and_write_holds_use_the_rwlock_layout() {
        const WRITE: LockKind = LockKind::Write { queue_keepalive_ms: 8_000 };
        const READ: LockKind = LockKind::Read { queue_keepalive_ms: 7_000 };
        let names = LockNames::new("k").expect("valid");
        let reader = crate::ClientId::new_random().next_owner();
        let writer = reader.writer();
        assert_eq!(writer.as_str(), format!("{reader}:write"));
        let scripts = |kind: LockKind| {
            (kind.acquire_script().name(), kind.release_script().name(), kind.force_release_script().name())
        };
        assert_eq!(scripts(READ), ("read_acquire.lua", "read_release.lua", "rw_force_release.lua"));
        assert_eq!(scripts(WRITE), ("write_acquire.lua", "write_release.lua", "rw_force_release.lua"));
        let plan = |kind: LockKind| (kind.wait_channel(), kind.queue(), kind.queue_keepalive_ms());
        assert_eq!(plan(READ), (WaitChannel::ReadWrite, QueueKind::Readers, Some(7_000)));
        assert_eq!(plan(WRITE), (WaitChannel::ReadWrite, QueueKind::WriterIntent, Some(8_000)));
        let writers = "leasehold_rwlock_writers:{k}";
        let (keys, args) = READ.acquire_args(&names, &reader, 30_000, 2, true, false, 9, None, settings());
        // No timeout-key prefix among the keys: it never exists (TRYAGAIN in a migrating
        // slot); the script builds it from ARGV[4] and the owner.
        let readers = "leasehold_rwlock_readers:{k}";
        assert_eq!(key_text(&keys), ["k", writers, readers]);
        assert_eq!(text(&args), ["30000", reader.as_str(), "2", "{k}", "1", "7000", "9"]);
        let (_, args) = READ.acquire_args(&names, &reader, 30_000, 1, true, true, 9, None, settings());
        assert_eq!(text(&args)[4..], ["2", "7000", "9"], "a registered wait removes its entry when it acquires");
        let (_, args) = READ.acquire_args(&names, &reader, 30_000, 1, false, false, 9, None, settings());
        assert_eq!(text(&args)[4..], ["0", "0", "9"], "a single try registers nothing");
        let order = "leasehold_rwlock_writers:order:{k}";
        let (keys, args) = WRITE.acquire_args(&names, &writer, 30_000, 1, false, false, 9, None, settings());
        assert_eq!(key_text(&keys), ["k", writers, order]);
        assert_eq!(text(&args), ["30000", writer.as_str(), "1", "{k}", "0"], "a single try records no intent");
        let (_, args) = WRITE.acquire_args(&names, &writer, 30_000, 1, true, false, 9, None, settings());
        assert_eq!(text(&args)[4], "8000");
        let (keys, args) = READ.release_args(&names, &reader, 0, 0, true, settings());
        assert_eq!(key_text(&keys), ["k", readers], "a wait's clean-up leaves the waiting readers");
        assert_eq!(text(&args), [reader.as_str(), "0", "0", "{k}", "spublish", "0", "redisson_rwlock:{k}", "1"]);
        let (keys, args) = READ.release_args(&names, &reader, 0, 0, false, settings());
        assert_eq!(key_text(&keys), ["k"], "an unlock declares only the lock");
        assert_eq!(text(&args).len(), 7);
        let (keys, args) = WRITE.release_args(&names, &writer, 1, 30_000, false, settings());
        assert_eq!(key_text(&keys), ["k", "redisson_rwlock:{k}", writers, readers, order]);
        assert_eq!(
            text(&args),
            [writer.as_str(), "1", "30000", "{k}", "spublish", "1", "0", "leasehold_rwlock__grants:{k}"]
        );
        let (_, args) = WRITE.release_args(&names, &writer, 0, 0, true, settings());
        assert_eq!(text(&args)[6], "1", "a wait's clean-up leaves the waiting writers");
        let (keys, args) = READ.force_release_args(&names, None, settings());
        assert_eq!(
            (key_text(&keys), text(&args)),
            (vec!["k".to_owned()], ["1", "spublish", "redisson_rwlock:{k}", "", ""].map(str::to_owned).to_vec())
        );
        // With who forces it: the history key (in ARGV, never declared) and who.
        let (keys, args) = READ.force_release_args(&names, Some("leasehold:u:ops"), settings());
        assert_eq!(key_text(&keys), ["k"]);
        assert_eq!(text(&args)[3..], ["leasehold_history:{k}", "leasehold:u:ops"]);
        // A name with a hash tag is its own prefix (Redisson's suffixName rule).
        let tagged = LockNames::new("{a}b").expect("valid");
        assert_eq!(tagged.rw_timeout_prefix("o"), "{a}b:o:rwlock_timeout");
        assert_eq!(tagged.rwlock_channel(), "redisson_rwlock:{a}b");
        for tagged_writers in [tagged.rw_writers_key(), tagged.rw_writers_order_key()] {
            assert_eq!(
                crate::names::key_slot(tagged_writers.as_bytes()),
                crate::names::key_slot(b"{a}b"),
                "{tagged_writers}"
            );
        }
        assert_eq!([READ.name(), WRITE.name()], ["read", "write"]);
    }

    #[test]
    fn an_election_runs_its_own_scripts_on_its_keys() {
        const ELECTION: LockKind = LockKind::Election { counter_ttl_ms: 5_000, queue_keepalive_ms: 3_000 };
        let names = LockNames::new(&crate::names::election_key("e")).expect("valid");
        assert_eq!(names.key(), "leasehold_election:{e}");
        let owner = crate::ClientId::new_random().next_owner();
        let scripts = (
            ELECTION.acquire_script().name(),
            ELECTION.release_script().name(),
            ELECTION.force_release_script().name(),
        );
        assert_eq!(scripts, ("election_acquire.lua", "election_release.lua", "election_force_release.lua"));
        assert_eq!(
            (ELECTION.wait_channel(), ELECTION.queue(), ELECTION.queue_keepalive_ms()),
            (WaitChannel::Lock, QueueKind::Server, Some(3_000))
        );
        let value = fred::bytes::Bytes::from_static(b"host:1");
        let (keys, args) = ELECTION.acquire_args(&names, &owner, 10_000, 1, true, false, 9, Some(&value), settings());
        let keys = key_text(&keys);
        assert_eq!(keys[0], "leasehold_election:{e}");
        assert_eq!(
            keys[4..],
            [
                "leasehold_election_term:{e}",
                "leasehold_election_leader:{e}",
                "leasehold_election__channel:{e}",
                "leasehold_election_candidates:{e}"
            ]
        );
        assert_eq!(text(&args), ["10000", owner.as_str(), "1", "3000", "spublish", "5000", "host:1", "9"]);
        let (keys, args) = ELECTION.release_args(&names, &owner, 0, 0, false, settings());
        assert_eq!(
            key_text(&keys)[5..],
            [
                "leasehold_election_leader:{e}",
                "leasehold_election__channel:{e}",
                "leasehold_election_term:{e}",
                "leasehold_election_candidates:{e}"
            ]
        );
        assert_eq!(text(&args)[8..], ["5000"], "the term counter's TTL, for a grant's term");
        let (keys, _) = ELECTION.force_release_args(&names, None, settings());
        assert_eq!(key_text(&keys)[2..], ["leasehold_election_leader:{e}", "leasehold_election__channel:{e}"]);
        // Every key of the election is in the name's slot, whatever braces the name has.
        for name in ["e", "{a}b", "a{b", "}{"] {
            let names = LockNames::new(&crate::names::election_key(name)).expect("valid");
            let slot = crate::names::key_slot(name.as_bytes());
            for key in [
                names.key().to_owned(),
                names.election_term_key(),
                names.election_record_key(),
                names.election_channel(),
                names.election_candidates_key(),
                names.lock_queue_key(),
            ] {
                assert_eq!(crate::names::key_slot(key.as_bytes()), slot, "{key} of {name}");
            }
        }
        assert_eq!(
            ELECTION.parse_acquire(&names, &[1, 1, 42]).expect("term"),
            (Acquire::Acquired { holds: 1 }, Some(42))
        );
    }

    #[test]
    fn only_a_fenced_acquire_answers_a_token() {
        let names = LockNames::new("k").expect("valid");
        assert_eq!(
            FENCED.parse_acquire(&names, &[1, 1, 42]).expect("token"),
            (Acquire::Acquired { holds: 1 }, Some(42))
        );
        assert!(FENCED.parse_acquire(&names, &[1, 1]).is_err(), "acquired without a token");
        assert_eq!(REENTRANT.parse_acquire(&names, &[1, 2]).expect("plain"), (Acquire::Acquired { holds: 2 }, None));
        let held = FENCED.parse_acquire(&names, &[0, 100]).expect("held");
        assert_eq!(held.1, None);
    }
}
