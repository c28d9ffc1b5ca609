//! Typed, low-level lock operations on a fred [`Client`].
//!
//! Each method is one round trip (one script or one command), bounded by the store's
//! command timeout. Arguments are validated by the callers (see [`crate::args`]); the
//! methods here take whole milliseconds that are already known to be valid.

use std::time::Duration;

use fred::prelude::{Client, FromValue, HashesInterface, KeysInterface};
use fred::types::{Key, Value};

use crate::call::{int_arg, non_negative, pttl_from_reply, release_from_reply, CallSettings, ScriptArgs};
use crate::error::{Error, ErrorKind, Result};
use crate::gate::WriteGate;
use crate::kind::{AcquireReply, AcquireSpec, LockKind};
use crate::names::LockNames;
use crate::owner::OwnerId;
use crate::replicas::{run_then_wait, ReplicaSync};
use crate::script::LuaScript;
use crate::scripts;

// Defined with the other reply parsing in `call.rs` (a leaf module the lock kinds use
// too); their path here is kept.
pub use crate::call::{Acquire, Release};

/// The fred client plus the settings every lock operation needs.
#[derive(Clone, Debug)]
pub struct LockStore {
    client: Client,
    command_timeout: Duration,
    /// Whether every release reads the wait queue, even when its unlock message reached
    /// no subscriber (see `release.lua`, ARGV[5]).
    always_read_queue: bool,
    /// The command the scripts publish with: `publish`, or `spublish` for sharded
    /// pub/sub in a cluster (the scripts' last ARGV).
    publish: &'static str,
    /// Whether every last release publishes the unlock message, for Redisson waiters
    /// (`release.lua`, ARGV[8]); when `false`, only a release a leasehold waiter flagged.
    redisson_waiters: bool,
    /// Through Sentinel: the gate every lock write waits at while a switch of primary
    /// is followed ([`LockStore::with_write_gate`]).
    gate: Option<WriteGate>,
    /// Set by [`LockStore::close`] (the client was shut down): every later call of this
    /// store and of its clones fails with [`ErrorKind::Shutdown`], nothing sent.
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// The scripts' publish command with classic pub/sub.
const PUBLISH: &str = "publish";
/// The scripts' publish command with sharded pub/sub (a cluster on Redis 7.0 or later).
const SPUBLISH: &str = "spublish";

impl LockStore {
    /// A store on `client`; `command_timeout` bounds each call.
    pub fn new(client: Client, command_timeout: Duration) -> Self {
        LockStore {
            client,
            command_timeout,
            always_read_queue: false,
            publish: PUBLISH,
            redisson_waiters: true,
            gate: None,
            closed: std::sync::Arc::default(),
        }
    }

    /// Refuses every later call of this store and of its clones with
    /// [`ErrorKind::Shutdown`] (nothing is sent): the client was shut down.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether [`LockStore::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The error of a call after [`LockStore::close`].
    pub(crate) fn check_open(&self, key: &str) -> Result<()> {
        if self.is_closed() {
            return Err(Error::unsent(ErrorKind::Shutdown, "the client was shut down: not sent").with_key(key));
        }
        Ok(())
    }

    /// Makes every lock write (acquire, release, renewal, the check after a reconnect,
    /// force-release, the simple lock's scripts, fenced writes) wait at `gate` while it
    /// is closed, before the command is handed to fred: the time waited counts in the
    /// call's command timeout, and a gate still closed when it runs out fails the call
    /// with an [`ErrorKind::Connection`] error that [`Error::is_not_sent`]. Reads
    /// (`EXISTS`, `HGET`, `PTTL`, `GET`) do not wait.
    #[must_use]
    pub fn with_write_gate(mut self, gate: WriteGate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Waits at the write gate, if there is one and it is closed, and returns how long
    /// the write may still take: the command timeout less the time waited.
    ///
    /// # Errors
    /// An unsent [`ErrorKind::Connection`] error when the gate did not open within the
    /// command timeout.
    pub(crate) async fn write_budget(&self, key: &str) -> Result<Duration> {
        self.check_open(key)?;
        let Some(gate) = self.gate.as_ref().filter(|gate| !gate.is_open()) else { return Ok(self.command_timeout) };
        let started = tokio::time::Instant::now();
        let opened = gate.wait_open(self.command_timeout).await;
        let left = self.command_timeout.saturating_sub(started.elapsed());
        if !opened || left.is_zero() {
            return Err(Error::unsent(
                ErrorKind::Connection,
                "the client is still switching to the new primary the sentinels announced: not sent",
            )
            .with_key(key));
        }
        Ok(left)
    }

    /// Makes the scripts publish with `SPUBLISH` (sharded pub/sub; `true`) or `PUBLISH`
    /// (`false`, the default). Every channel a script publishes on has the lock key's
    /// hash tag, so `SPUBLISH` stays in the script's slot. Waiters must then subscribe
    /// with `SSUBSCRIBE`.
    #[must_use]
    pub fn sharded_pubsub(mut self, sharded: bool) -> Self {
        self.publish = if sharded { SPUBLISH } else { PUBLISH };
        self
    }

    /// Whether the scripts publish with `SPUBLISH` ([`LockStore::sharded_pubsub`]).
    pub fn is_sharded_pubsub(&self) -> bool {
        self.publish == SPUBLISH
    }

    /// Makes every release read the lock's wait queue, even when its unlock message
    /// reached no subscriber. Needed where `PUBLISH` does not count every subscriber: a
    /// cluster with classic pub/sub counts only those of the node that ran the script.
    #[must_use]
    pub fn always_reading_queue(mut self, always: bool) -> Self {
        self.always_read_queue = always;
        self
    }

    /// Whether Redisson clients may wait on these locks (`true`, the default): every
    /// last release publishes Redisson's unlock message, as Redisson's own unlock does.
    /// With `false`, a release publishes (and reads the wait queue) only when a
    /// leasehold waiter flagged its owner (`release.lua`, "The waiter flag"): an
    /// uncontended release is one `HDEL`.
    #[must_use]
    pub fn redisson_waiters(mut self, wake: bool) -> Self {
        self.redisson_waiters = wake;
        self
    }

    /// The fred client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The bound on each call.
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Loads every script into the server's cache, so the first calls (such as a
    /// watchdog round's concurrent batches) do not each meet `NOSCRIPT` and load it.
    /// A server that restarts later forgets them; `EVALSHA` then reloads on demand.
    ///
    /// # Errors
    /// Timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn load_scripts(&self) -> Result<()> {
        for script in scripts::all() {
            script.load(&self.client, self.command_timeout).await?;
        }
        Ok(())
    }

    /// What a script call of any kind needs to know of this store.
    pub(crate) fn call_settings(&self) -> CallSettings {
        CallSettings {
            publish: self.publish,
            always_read_queue: self.always_read_queue,
            redisson_waiters: self.redisson_waiters,
        }
    }

    /// The one entry point that runs a script call of any lock kind, on the key `key`:
    /// it waits at the write gate, then sends `EVALSHA` with the KEYS and ARGV `build`
    /// makes (anew for each send), loading the script on `NOSCRIPT` and sending again
    /// after a redirect or `TRYAGAIN`, all within the command timeout. With `sync`, `WAIT`
    /// is pipelined right behind the script on the same connection, and its answer is
    /// returned beside the script's (see [`ReplicaSync`]).
    ///
    /// # Errors
    /// As [`LuaScript::run`]; an unsent [`ErrorKind::Connection`] error when the write
    /// gate stayed closed.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the commands back: once written they run, and
    /// only their answers are lost.
    pub(crate) async fn run_script<R, B>(
        &self,
        key: &str,
        script: &'static LuaScript,
        build: B,
        sync: Option<ReplicaSync>,
    ) -> Result<(R, Option<Result<u32>>)>
    where
        R: FromValue,
        B: Fn() -> ScriptArgs + Send + Sync,
    {
        let budget = self.write_budget(key).await?;
        match sync {
            None => Ok((script.run_with(&self.client, key, budget, build).await?, None)),
            Some(sync) => {
                let (reply, waited) = run_then_wait(script, &self.client, key, budget, &build, sync).await?;
                Ok((reply, Some(waited)))
            }
        }
    }

    /// Runs the acquire of `spec`'s kind: take the lock for `owner`, or re-enter it,
    /// ending with `target` holds (the owner's live guards + 1; a replay sets the same
    /// count again), with a `WAIT` pipelined behind it when [`AcquireSpec::sync`] asks.
    /// A waiting call ([`AcquireSpec::waiting`]) of a server-queued kind that does not
    /// acquire is queued (or its entry refreshed), and a free lock goes to it only when
    /// no live waiter is ahead.
    ///
    /// `WAIT` is not checked here: the caller decides what too few acknowledgements mean
    /// ([`ReplicaSync::check`]) and gives the hold back.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key (or a queue key) holds another type; a reply
    /// of the wrong shape (a fencing counter that is not an integer, a fenced acquire
    /// without a token) is [`ErrorKind::Redis`]; timeouts and connection errors. The
    /// script and `WAIT` together are bounded by the command timeout.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the commands back: once written they run, and
    /// only their answers are lost.
    pub async fn acquire(
        &self,
        names: &LockNames,
        owner: &OwnerId,
        lease_ms: u64,
        target: u64,
        spec: AcquireSpec,
    ) -> Result<AcquireReply> {
        let kind = spec.kind;
        let settings = self.call_settings();
        let value = spec.value.as_ref();
        let build = || {
            kind.acquire_args(
                names,
                owner,
                lease_ms,
                target,
                spec.waiting,
                spec.registered,
                spec.ticket,
                value,
                settings,
            )
        };
        let (reply, acknowledged): (Vec<i64>, _) =
            self.run_script(names.key(), kind.acquire_script(), build, spec.sync).await?;
        let (acquire, token) = kind.parse_acquire(names, &reply)?;
        Ok(AcquireReply { acquire, token, acknowledged })
    }

    /// Runs the release of `kind`: set `owner`'s hold count to `target` (the holds its
    /// other live guards account for); at 0 the owner is removed, the unlock message
    /// published and the lock handed on (`release.lua`: to the first live waiter of its
    /// wait queue; `fair_release.lua`: told to the queue head on its own channel). While
    /// holds remain, the key's TTL is raised to `need_ms` (never lowered; 0 leaves it as
    /// it is). A replay sets the same count again. Also undoes an acquire whose caller
    /// went away (`target` = the live guards, `need_ms` = 0); with `leave_queue`, it also
    /// removes the owner's entry of leasehold's wait queue (a wait that ended without the
    /// lock; only [`LockKind::Reentrant`] has one). A fair release always removes the
    /// owner's entry of the fair queue and purges its dead heads.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a Hash (or a queue key holds another
    /// type); timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn release(
        &self,
        kind: &LockKind,
        names: &LockNames,
        owner: &OwnerId,
        target: u64,
        need_ms: u64,
        leave_queue: bool,
    ) -> Result<Release> {
        let settings = self.call_settings();
        let build = || kind.release_args(names, owner, target, need_ms, leave_queue, settings);
        let (reply, _): (i64, _) = self.run_script(names.key(), kind.release_script(), build, None).await?;
        Ok(release_from_reply(reply))
    }

    /// Runs the force-release of `kind`: delete the lock whoever holds it and tell its
    /// waiters (`force_release.lua` publishes on the release channel and deletes the key
    /// whatever its type; `fair_force_release.lua` tells the queue head, whose place and
    /// the other waiters' stay). Returns `true` if a lock was deleted. With `by` (who
    /// forces it: the forcing client's connection name), a deletion is recorded in the
    /// lock's history, `leasehold_history:{NAME}`, with the owners it removed (see
    /// [`crate::who::lock_history`]).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when a fair lock's queue is not a List or its deadlines
    /// not a sorted set; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    ///
    /// A history the script may not touch does not stop the unlock: the ACL user's
    /// (no `~leasehold_history:*`), or one not on this node while its cluster slot
    /// migrates. The script's first read of it is refused, before anything is
    /// written; the call is sent again without the record, and a warning says so.
    pub async fn force_release(&self, kind: &LockKind, names: &LockNames, by: Option<&str>) -> Result<bool> {
        match self.force_release_once(kind, names, by).await {
            Err(error) if crate::who::retry_without_history(by, &error, names.key()) => {
                self.force_release_once(kind, names, None).await
            }
            result => result,
        }
    }

    async fn force_release_once(&self, kind: &LockKind, names: &LockNames, by: Option<&str>) -> Result<bool> {
        let settings = self.call_settings();
        let build = || kind.force_release_args(names, by, settings);
        let (reply, _): (i64, _) = self.run_script(names.key(), kind.force_release_script(), build, None).await?;
        Ok(reply == 1)
    }

    /// Runs `renew_batch.lua` for `holds` (lock key, owner) with one lease: returns, per
    /// hold in order, `true` if it was extended and `false` if its owner field is gone.
    ///
    /// In a cluster every key of one call must be in one hash slot; the watchdog groups
    /// them. While that slot migrates, an `ASK` is followed (`ASKING` + the script on the
    /// target) and a batch whose keys straddle the move is split into one call per hold
    /// (`docs/cluster.md` §2), all within the command timeout.
    ///
    /// # Errors
    /// Timeouts and connection errors; then nothing is known about any hold of the batch.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn renew_batch(&self, holds: &[(&str, &str)], lease_ms: u64) -> Result<Vec<bool>> {
        self.run_hold_batch(&scripts::RENEW_BATCH, holds, vec![int_arg(lease_ms)]).await
    }

    /// Runs `read_renew_batch.lua` for read holds of read/write locks, `(lock key,
    /// reader owner, its timeout-key prefix)`: returns, per hold in order, `true` if
    /// its reader field exists (its own timeout keys and the Hash were extended) and
    /// `false` if it is gone. In a cluster every key of one call must be in one slot
    /// (the watchdog groups by slot).
    ///
    /// Only the Hashes are declared (the prefixes go in ARGV), and a slot migration is
    /// followed as by [`LockStore::renew_batch`]. A hold whose timeout keys were not all
    /// next to its Hash (the migration moved one and not the other) has those keys
    /// renewed next, one call per key following the migration
    /// (`read_renew_timeouts.lua`), within the same budget.
    ///
    /// # Errors
    /// Timeouts and connection errors; then nothing is known about any hold of the batch.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn read_renew_batch(&self, holds: &[(String, String, String)], lease_ms: u64) -> Result<Vec<bool>> {
        /// The most timeout keys renewed one by one for one hold (a count beyond it is
        /// not a count leasehold makes).
        const MOST_TIMEOUT_KEYS: i64 = 1024;
        let Some((first_key, _, _)) = holds.first() else { return Ok(Vec::new()) };
        let budget = self.write_budget(first_key).await?;
        let start = tokio::time::Instant::now();
        let batch = holds
            .iter()
            .map(|(key, owner, prefix)| (key.clone(), vec![Value::from(owner.as_str()), Value::from(prefix.as_str())]))
            .collect();
        let lease = vec![int_arg(lease_ms)];
        let reply =
            crate::ask::run_hold_batch(&self.client, &scripts::READ_RENEW_BATCH, lease.clone(), batch, budget).await?;
        if reply.len() != holds.len() {
            return Err(Error::new(
                ErrorKind::Redis,
                format!("read_renew_batch.lua answered {} results for {} holds", reply.len(), holds.len()),
            ));
        }
        // `count + 1`: the hold is there, but not every timeout key was next to its Hash.
        let strays: Vec<crate::ask::HoldArgs> = holds
            .iter()
            .zip(&reply)
            .filter(|(_, answer)| **answer >= 2)
            .flat_map(|((_, _, prefix), answer)| {
                (1..=(answer - 1).min(MOST_TIMEOUT_KEYS)).map(move |k| (format!("{prefix}:{k}"), Vec::new()))
            })
            .collect();
        if !strays.is_empty() {
            tracing::debug!(
                target: crate::TARGET,
                key = %first_key,
                keys = strays.len(),
                "read renewal: timeout keys away from their Hash",
            );
            let left = budget.saturating_sub(start.elapsed());
            // Answers ignored: a timeout key gone from both nodes is a hold whose own
            // lease ran out; its reader field (the hold count) was renewed above.
            crate::ask::run_hold_batch(&self.client, &scripts::READ_RENEW_TIMEOUTS, lease, strays, left).await?;
        }
        Ok(reply.into_iter().map(|answer| answer >= 1).collect())
    }

    /// Runs `verify_batch.lua` for `holds` (lock key, owner): returns, per hold in
    /// order, `true` if its owner field exists and `false` if it is gone. Read-only: no
    /// TTL is touched, so checking a fixed-lease hold never extends it.
    ///
    /// In a cluster every key of one call must be in one hash slot; the watchdog groups
    /// them. A slot migration is followed as by [`LockStore::renew_batch`].
    ///
    /// # Errors
    /// Timeouts and connection errors; then nothing is known about any hold of the batch.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn verify_batch(&self, holds: &[(&str, &str)]) -> Result<Vec<bool>> {
        // Read-only, but it waits at the write gate too: after a switch it must read the
        // new primary, not the old one.
        self.run_hold_batch(&scripts::VERIFY_BATCH, holds, Vec::new()).await
    }

    /// Runs a per-hold batch script (`renew_batch.lua`, `verify_batch.lua`): KEYS = the
    /// holds' keys, ARGV = `leading` (if any) then their owners; answers one `0`/`1` per
    /// hold, in order.
    async fn run_hold_batch(
        &self,
        script: &'static LuaScript,
        holds: &[(&str, &str)],
        leading: Vec<Value>,
    ) -> Result<Vec<bool>> {
        let Some((first_key, _)) = holds.first() else { return Ok(Vec::new()) };
        let budget = self.write_budget(first_key).await?;
        // Not `script.run`: a hold batch follows a slot migration's ASK (and splits a
        // batch that straddles one) instead of waiting for the migration to end, which
        // could outlast the leases (`ask.rs`).
        let batch = holds.iter().map(|(key, owner)| ((*key).to_owned(), vec![Value::from(*owner)])).collect();
        let reply = crate::ask::run_hold_batch(&self.client, script, leading, batch, budget).await?;
        if reply.len() != holds.len() {
            return Err(Error::new(
                ErrorKind::Redis,
                format!("{} answered {} results for {} keys", script.name(), reply.len(), holds.len()),
            ));
        }
        Ok(reply.into_iter().map(|answer| answer == 1).collect())
    }

    /// `SET key owner NX PX lease`: one command, no script. Returns `true` when
    /// acquired; `false` when the key exists (held by anyone, this owner included, or a
    /// key of another type). A waiting caller reads the holder's TTL with
    /// [`LockStore::pttl`] only then, so an uncontended acquire costs one server call.
    ///
    /// # Errors
    /// Timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost (the lock, if taken, expires with its lease).
    pub async fn simple_acquire(&self, key: &str, owner: &OwnerId, lease_ms: u64) -> Result<bool> {
        use fred::types::{Expiration, SetOptions};
        let budget = self.write_budget(key).await?;
        // Validated by the caller: 1 ms to a year, so it fits an i64.
        let px = i64::try_from(lease_ms).unwrap_or(i64::MAX);
        let reply: Value = crate::script::bounded_retry(budget, "SET NX PX", key, || {
            self.client.set(key, Value::Bytes(owner.arg()), Some(Expiration::PX(px)), Some(SetOptions::NX), false)
        })
        .await?;
        // `OK` when set, nil when the key exists.
        Ok(!reply.is_null())
    }

    /// Runs `simple_release.lua`: delete `key` if it still holds `owner`. Returns `true`
    /// if it was deleted.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a String; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn simple_release(&self, key: &str, owner: &OwnerId) -> Result<bool> {
        let budget = self.write_budget(key).await?;
        // The owner as its shared byte string (no copy); the key copied once per send.
        let build = || (vec![Key::from(key)], vec![Value::Bytes(owner.arg())]);
        // Inline, not boxed: awaited once, by the unlocking task only.
        let reply: i64 = scripts::SIMPLE_RELEASE.run_with_inline(&self.client, key, budget, build).await?;
        Ok(reply == 1)
    }

    /// `EXISTS key`: is the lock held by anyone?
    ///
    /// # Errors
    /// Timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn exists(&self, key: &str) -> Result<bool> {
        let n: i64 = self.bounded(key, || self.client.exists(key)).await?;
        Ok(n == 1)
    }

    /// `HGET key owner`: the owner's hold count, 0 when it holds nothing.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a Hash; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn hold_count(&self, key: &str, owner: &OwnerId) -> Result<u64> {
        let holds: Option<i64> = self.bounded(key, || self.client.hget(key, owner.as_str())).await?;
        Ok(holds.map_or(0, non_negative))
    }

    /// A read/write lock's `mode` field (`HGET key mode`) and its field count
    /// (`HLEN`), in one pipeline-free pair of reads: `(None, 0)` when there is no key.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a Hash; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn rw_mode(&self, key: &str) -> Result<(Option<String>, u64)> {
        let mode: Option<String> = self.bounded(key, || self.client.hget(key, "mode")).await?;
        if mode.is_none() {
            return Ok((None, 0));
        }
        let fields: i64 = self.bounded(key, || self.client.hlen(key)).await?;
        Ok((mode, non_negative(fields)))
    }

    /// `PTTL key`: `None` when the key is absent, `Some(None)` when it has no expiry.
    ///
    /// # Errors
    /// Timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn pttl(&self, key: &str) -> Result<Option<Option<Duration>>> {
        let pttl: i64 = self.bounded(key, || self.client.pttl(key)).await?;
        Ok(match pttl {
            -2 => None,
            other => Some(pttl_from_reply(other)),
        })
    }

    pub(crate) async fn bounded<R, Fut>(&self, key: &str, call: impl FnMut() -> Fut) -> Result<R>
    where
        Fut: std::future::Future<Output = Result<R, fred::error::Error>>,
    {
        self.check_open(key)?;
        crate::script::bounded_retry(self.command_timeout, "Redis", key, call).await
    }
}
