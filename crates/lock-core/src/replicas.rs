//! Replica acknowledgement of acquires (`WAIT`), and the acquire entry point that chooses
//! between `acquire.lua` and `fenced_acquire.lua`.
//!
//! One Redis primary is the source of truth: if it fails over before a lock reached a
//! replica, the promoted replica does not have the lock and hands it to a second owner.
//! With [`ReplicaSync`], every acquire script is followed on the same connection by
//! `WAIT replicas timeout`, pipelined right behind it (no round trip in between). `WAIT`
//! answers how many replicas acknowledged every write the connection made before it, so
//! the script's writes included. The caller gives the hold back when fewer acknowledged
//! ([`ReplicaSync::check`]).

use std::time::Duration;

use fred::prelude::{Client, ClientLike, LuaInterface};
use fred::types::{ClusterHash, CustomCommand, Key, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::names::{key_slot, LockNames};
use crate::owner::OwnerId;
use crate::script::LuaScript;
use crate::store::{acquire_args, acquire_from_reply, fair_keys, non_negative, unexpected, Acquire, LockStore};
use crate::{args, scripts};

/// How many replicas must acknowledge each acquire, and how long the primary may wait for
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaSync {
    replicas: u32,
    timeout_ms: u64,
}

impl ReplicaSync {
    /// `replicas` acknowledgements (at least 1) within `timeout` (1 ms to a year, in whole
    /// milliseconds rounded up; `WAIT` with 0 would block forever).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for 0 replicas or a timeout outside that range.
    pub fn new(replicas: u32, timeout: Duration) -> Result<Self> {
        if replicas == 0 {
            return Err(Error::invalid_argument("replica sync needs at least 1 replica"));
        }
        let timeout_ms = args::lease_millis(timeout, "replica sync timeout")?;
        Ok(ReplicaSync { replicas, timeout_ms })
    }

    /// The number of replicas that must acknowledge.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// The `WAIT` timeout in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// `Ok` when `acknowledged` replicas are enough, else [`ErrorKind::ReplicaSync`]
    /// about `key`.
    ///
    /// # Errors
    /// [`ErrorKind::ReplicaSync`] when `acknowledged < replicas`.
    pub fn check(&self, acknowledged: u32, key: &str) -> Result<()> {
        if acknowledged >= self.replicas {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::ReplicaSync,
            format!(
                "{acknowledged} of {} replicas acknowledged the acquire within {} ms; the hold was given back",
                self.replicas, self.timeout_ms
            ),
        )
        .with_key(key))
    }
}

/// How to acquire: which script, and whether replicas must acknowledge it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireSpec {
    /// `Some(ttl_ms)`: run `fenced_acquire.lua` and issue a fencing token, giving the
    /// counter that TTL; `None`: `acquire.lua` (or `fair_acquire.lua`, see
    /// [`AcquireSpec::fair`], which takes precedence).
    pub fence_ttl_ms: Option<u64>,
    /// Follow the script with `WAIT`.
    pub sync: Option<ReplicaSync>,
    /// `Some(..)`: run `fair_acquire.lua` (a fair lock; no fencing token is issued).
    pub fair: Option<FairAcquire>,
    /// `Some(keep-alive ms)`: a waiting call of a plain or fenced lock (`acquire.lua`,
    /// `fenced_acquire.lua`): queue up in the lock's wait queue when not acquired, and
    /// flag the holder. Ignored by the fair scripts, which have their own queue.
    pub queue_keepalive_ms: Option<u64>,
    /// A waiting call (not a single try). No script reads it any more: the plain and
    /// fenced scripts queue and flag when [`AcquireSpec::queue_keepalive_ms`] is set,
    /// the fair scripts when [`FairAcquire::enqueue`] is.
    pub waiting: bool,
}

/// The fair-lock part of an acquire ([`AcquireSpec::fair`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairAcquire {
    /// A queued entry's deadline is the server's time + this (ms, > 0).
    pub keepalive_ms: u64,
    /// Queue up (or refresh the entry) when not acquired; `false` for a single try.
    pub enqueue: bool,
}

/// The answer to [`LockStore::acquire_with`].
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

impl LockStore {
    /// Runs the acquire that `spec` describes: `acquire.lua` or `fenced_acquire.lua`, and
    /// with [`AcquireSpec::sync`] a `WAIT` pipelined right behind it. Without a fence or
    /// sync this is exactly [`LockStore::acquire`].
    ///
    /// `WAIT` is not checked here: the caller decides what too few acknowledgements mean
    /// ([`ReplicaSync::check`]) and gives the hold back.
    ///
    /// # Errors
    /// As [`LockStore::acquire`]; a fencing counter that is not an integer is
    /// [`ErrorKind::Redis`]. The script and `WAIT` together are bounded by the command
    /// timeout.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the commands back: once written they run, and
    /// only their answers are lost.
    pub async fn acquire_with(
        &self,
        names: &LockNames,
        owner: &OwnerId,
        lease_ms: u64,
        target: u64,
        spec: AcquireSpec,
    ) -> Result<AcquireReply> {
        let (script, keys, args) = match (spec.fair, spec.fence_ttl_ms) {
            (Some(fair), _) => {
                let args = vec![
                    lease_ms.to_string(),
                    owner.as_str().to_owned(),
                    target.max(1).to_string(),
                    fair.keepalive_ms.max(1).to_string(),
                    if fair.enqueue { "1" } else { "0" }.to_owned(),
                    crate::names::UNLOCK_MESSAGE.to_owned(),
                    self.publish_command().to_owned(),
                ];
                (&*scripts::FAIR_ACQUIRE, to_keys(fair_keys(names)), to_values(args))
            }
            (None, None) if spec.sync.is_none() => {
                let acquire = self.acquire(names, owner, lease_ms, target, spec.queue_keepalive_ms).await?;
                return Ok(AcquireReply { acquire, token: None, acknowledged: None });
            }
            (None, None) => {
                let (keys, args) =
                    acquire_args(names, owner, lease_ms, target, spec.queue_keepalive_ms, self.publish_command());
                (&*scripts::ACQUIRE, keys, args)
            }
            (None, Some(token_ttl_ms)) => {
                // acquire.lua's KEYS and ARGV (the queue's too, even for a single try),
                // then the counter and its TTL.
                let keys = vec![
                    names.key().to_owned(),
                    names.lock_queue_key(),
                    names.lock_waiters_key(),
                    names.lock_queue_channel(),
                    names.token_key(),
                ];
                let args = vec![
                    lease_ms.to_string(),
                    owner.as_str().to_owned(),
                    target.max(1).to_string(),
                    spec.queue_keepalive_ms.map_or(0, |ms| ms.max(1)).to_string(),
                    self.publish_command().to_owned(),
                    token_ttl_ms.to_string(),
                ];
                (&*scripts::FENCED_ACQUIRE, to_keys(keys), to_values(args))
            }
        };
        let budget = self.write_budget(names.key()).await?;
        let (reply, acknowledged): (Vec<i64>, _) = match spec.sync {
            None => (script.run(self.client(), names.key(), budget, keys, args).await?, None),
            Some(sync) => {
                let (reply, waited) =
                    run_then_wait(script, self.client(), names.key(), budget, keys, args, sync).await?;
                (reply, Some(waited))
            }
        };
        let acquire = acquire_from_reply(script.name(), names, &reply)?;
        let token = match (acquire, spec.fence_ttl_ms, reply.as_slice()) {
            (Acquire::Acquired { .. }, Some(_), [_, _, token]) => Some(non_negative(*token)),
            (Acquire::Acquired { .. }, Some(_), other) => return Err(unexpected(script.name(), names, other)),
            _ => None,
        };
        Ok(AcquireReply { acquire, token, acknowledged })
    }
}

fn to_keys(keys: Vec<String>) -> Vec<Key> {
    keys.into_iter().map(Key::from).collect()
}

fn to_values(args: Vec<String>) -> Vec<Value> {
    args.into_iter().map(Value::from).collect()
}

/// Runs `script` and, pipelined right behind it on the same connection, `WAIT`. Returns
/// the script's reply and what `WAIT` answered.
///
/// The order on the wire is what makes `WAIT` cover the script: fred queues a command
/// when its future is first polled, and `join!(biased; …)` polls the script first. A
/// `NOSCRIPT` answer (a restarted or failed-over server forgot the script) means the
/// script did not run and the `WAIT` behind it covered nothing of it, so the script is
/// loaded and the pair sent again. (fred's `evalsha_with_reload` would send the reloaded
/// script *after* the `WAIT`, which would then not cover it.)
async fn run_then_wait(
    script: &LuaScript,
    client: &Client,
    key: &str,
    timeout: Duration,
    keys: Vec<Key>,
    args: Vec<Value>,
    sync: ReplicaSync,
) -> Result<(Vec<i64>, Result<u32>)> {
    // In a cluster, WAIT goes to the node of the lock key's slot: the same connection
    // as the script.
    let slot = key_slot(key.as_bytes());
    let pair = || {
        let script_call = client.evalsha::<Vec<i64>, _, _, _>(script.sha1(), keys.clone(), Value::Array(args.clone()));
        // Not marked blocking: fred would otherwise hold every later command of the
        // client back until WAIT answers. The server holds them back anyway (a blocked
        // client's later commands wait), but fred need not add its own bookkeeping.
        let wait_call = client.custom::<i64, u64>(
            CustomCommand::new_static("WAIT", ClusterHash::Custom(slot), false),
            vec![u64::from(sync.replicas), sync.timeout_ms],
        );
        // Boxed: fred's futures are several KB each, and a debug build would otherwise
        // put the pair on the stack of whoever polls the acquire.
        Box::pin(async move { tokio::join!(biased; script_call, wait_call) })
    };
    let call = || {
        Box::pin(async {
            let (reply, waited) = match pair().await {
                (Err(error), _) if error.details().starts_with("NOSCRIPT") => {
                    // On every primary of a cluster (one SCRIPT LOAD elsewhere).
                    client.script_load_cluster::<(), _>(script.source()).await?;
                    pair().await
                }
                other => other,
            };
            Ok::<_, fred::error::Error>((reply?, waited))
        })
    };
    let (reply, waited) = crate::script::bounded_retry(timeout, script.name(), key, call).await?;
    let acknowledged = waited
        .map_err(|error| Error::from_fred(error).with_key(key))
        .map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX));
    Ok((reply, acknowledged))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_needs_a_replica_and_a_timeout_that_waits() {
        assert!(ReplicaSync::new(0, Duration::from_secs(1)).expect_err("0").is_invalid_argument());
        assert!(ReplicaSync::new(1, Duration::ZERO).expect_err("WAIT 0 blocks forever").is_invalid_argument());
        assert!(ReplicaSync::new(1, Duration::MAX).is_err());
        let sync = ReplicaSync::new(2, Duration::from_micros(1_500)).expect("valid");
        assert_eq!((sync.replicas(), sync.timeout_ms()), (2, 2));
        assert!(sync.check(2, "k").is_ok());
        let err = sync.check(1, "k").expect_err("short");
        assert!(err.is_replica_sync() && !err.is_transient() && !err.is_ambiguous(), "{err}");
    }
}
