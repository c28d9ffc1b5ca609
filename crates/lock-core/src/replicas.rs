//! Replica acknowledgement of acquires (`WAIT`): how many replicas must acknowledge
//! ([`ReplicaSync`], asked for in [`AcquireSpec::sync`](crate::AcquireSpec::sync)) and
//! the pipeline that sends `WAIT` right behind the acquire script.
//!
//! One Redis primary is the source of truth: if it fails over before a lock reached a
//! replica, the promoted replica does not have the lock and hands it to a second owner.
//! With [`ReplicaSync`], every acquire script is followed on the same connection by
//! `WAIT replicas timeout`, pipelined right behind it (no round trip in between). `WAIT`
//! answers how many replicas acknowledged every write the connection made before it, so
//! the script's writes included. The caller gives the hold back when fewer acknowledged
//! ([`ReplicaSync::check`]).

use std::time::Duration;

use fred::prelude::{Client, ClientLike, FromValue, LuaInterface};
use fred::types::{ClusterHash, CustomCommand, Value};

use crate::args;
use crate::call::ScriptArgs;
use crate::error::{Error, ErrorKind, Result};
use crate::names::key_slot;
use crate::script::LuaScript;

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

/// Runs `script` with the KEYS and ARGV `build` makes (anew for each send) and,
/// pipelined right behind it on the same connection, `WAIT`. Returns the script's reply
/// and what `WAIT` answered.
///
/// The order on the wire is what makes `WAIT` cover the script: fred queues a command
/// when its future is first polled, and `join!(biased; …)` polls the script first. A
/// `NOSCRIPT` answer (a restarted or failed-over server forgot the script) means the
/// script did not run and the `WAIT` behind it covered nothing of it, so the script is
/// loaded and the pair sent again. (fred's `evalsha_with_reload` would send the reloaded
/// script *after* the `WAIT`, which would then not cover it.)
pub(crate) async fn run_then_wait<R, B>(
    script: &LuaScript,
    client: &Client,
    key: &str,
    timeout: Duration,
    build: &B,
    sync: ReplicaSync,
) -> Result<(R, Result<u32>)>
where
    R: FromValue,
    B: Fn() -> ScriptArgs + Send + Sync,
{
    // In a cluster, WAIT goes to the node of the lock key's slot: the same connection
    // as the script.
    let slot = key_slot(key.as_bytes());
    let pair = || {
        let (keys, args) = build();
        let script_call = client.evalsha::<R, _, _, _>(script.sha1(), keys, Value::Array(args));
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
