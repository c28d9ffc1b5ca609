//! The watchdog's per-hold batches (`renew_batch.lua`, `verify_batch.lua`,
//! `read_renew_batch.lua`, `read_renew_timeouts.lua`, `pes_renew_batch.lua`) through a
//! slot migration: following `ASK` with `ASKING`, and splitting a batch whose keys
//! straddle the move.
//!
//! Every such script declares, per hold, only a key that exists while the hold does (the
//! lock's Hash, a permit's `ZSet`): Redis answers a call that declares a missing key in a
//! migrating slot with `TRYAGAIN` even when nothing moved, until the migration ends.
//! Keys derived from a declared one (a read hold's timeout keys) travel in ARGV; they
//! share its hash tag, so its slot.
//!
//! While a slot is MIGRATING, its source answers `ASK slot target` for a command whose
//! keys are all gone from it (moved to the target) and `TRYAGAIN` for one whose keys are
//! split between the two nodes; nothing runs. leasehold's clients tell fred not to follow
//! redirects (`max_redirections = 0`: fred 10.1 jams after following an `ASK`,
//! `docs/cluster.md` §3), so fred answers "Too many redirections" and the other calls
//! wait for the migration to end. A renewal cannot wait: a migration window longer than
//! the lease would let the lock expire under its holder. So a hold batch that meets a
//! redirect asks the node fred's slot map names for the slot (`CLUSTER NODES`, its own
//! line) where the slot is migrating to, and sends `ASKING` and the script (as `EVAL`) in
//! one pipeline to that node (routed by a slot it serves in fred's map): fred writes a
//! pipeline's commands back to back on one connection, so `ASKING` flags exactly the
//! script. fred itself never sees an `ASK` it could follow: the source's answer reaches
//! it only as the "Too many redirections" it gives when told to follow none. A batch refused with `TRYAGAIN`
//! (straddling: some keys moved, some not) is split into one call per hold: each runs on
//! the source if its key is still there, or follows `ASK` to the target if it moved.
//!
//! Why a one-key call that follows `ASK` cannot wrongly report a hold lost: the source
//! answers `ASK` only when the key is not on it, and `MIGRATE` writes the key on the
//! target before it deletes it from the source, so a key absent from both (the script
//! then answers 0) is really gone (expired or deleted), as it would be without a
//! migration. A call with several keys that are not all on the target is refused there
//! with `TRYAGAIN` (Redis's `getNodeByQuery`), and split.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use fred::clients::Client;
use fred::prelude::{ClientLike, ClusterInterface, FromValue, LuaInterface};
use fred::types::config::{Options, Server};
use fred::types::{ClusterHash, CustomCommand, Value};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::error::{refused_before_running, Error, ErrorKind, Result};
use crate::script::LuaScript;

/// The first pause before a refused call is sent again, and the longest (as
/// [`crate::script::bounded_retry`]'s).
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// One hold of a batch: its key (KEYS), and its own ARGV entries (the owner, and for a
/// read hold its timeout-key prefix; a permit's raw id).
pub(crate) type HoldArgs = (String, Vec<Value>);

/// Runs a per-hold batch script on the slot of its keys (one slot: the watchdog groups
/// batches by slot): KEYS = the holds' keys, ARGV = `leading` then each hold's own
/// entries, in order.
/// Refusals that ran nothing are sent again within `budget` (as
/// [`crate::script::bounded_retry`]); an `ASK` is followed to the slot's migration target
/// and a batch that straddles a migration is split (see the module docs). Answers the
/// script's reply, one integer per hold in order.
///
/// # Errors
/// [`ErrorKind::Timeout`] when `budget` runs out; the last refusal when the time runs out
/// between two; any other classified fred error, with the first key attached.
///
/// # Cancel safety
/// Dropping the future drops the calls in flight (a split batch's calls run in tasks
/// of a `JoinSet`, aborted with it); a call already written still runs on the server.
pub(crate) async fn run_hold_batch(
    client: &Client,
    script: &'static LuaScript,
    leading: Vec<Value>,
    holds: Vec<HoldArgs>,
    budget: Duration,
) -> Result<Vec<i64>> {
    let now = Instant::now();
    let deadline = now.checked_add(budget).unwrap_or_else(|| crate::args::far_future(now));
    let batch = Batch { client: client.clone(), script, leading, deadline };
    batch.run(holds, None).await
}

/// What every call of one batch (and of its split parts) shares.
#[derive(Clone)]
struct Batch {
    client: Client,
    script: &'static LuaScript,
    leading: Vec<Value>,
    deadline: Instant,
}

impl Batch {
    /// Sends `holds` until answered, refused for good, or out of time. `target`: where the
    /// slot was last seen migrating to (a split passes its lookup on to its parts).
    async fn run(&self, holds: Vec<HoldArgs>, mut target: Option<Target>) -> Result<Vec<i64>> {
        let Some(first_key) = holds.first().map(|(key, _)| key.clone()) else { return Ok(Vec::new()) };
        let slot = fred::util::redis_keyslot(first_key.as_bytes());
        let keys: Vec<String> = holds.iter().map(|(key, _)| key.clone()).collect();
        let args: Vec<Value> = self.leading.iter().cloned().chain(holds.iter().flat_map(|(_, a)| a.clone())).collect();
        let mut pause = FIRST_PAUSE;
        loop {
            let mut error = match self.bounded(&first_key, evalsha(&self.client, self.script, &keys, &args)).await? {
                Ok(reply) => return Ok(reply),
                Err(error) => error,
            };
            if is_redirect(&error) {
                // ASK (the keys left for the slot's migration target) or MOVED (fred has
                // synced its slot map: sent again, the call goes to the new owner). Only
                // the node fred's map names for the slot tells which.
                let known = match target.take() {
                    Some(known) => Some(known),
                    None => self.bounded(&first_key, migration_target(&self.client, slot)).await?,
                };
                if let Some(to) = known {
                    tracing::debug!(
                        target: crate::TARGET,
                        key = %first_key,
                        target = %to.server,
                        "following ASK with ASKING",
                    );
                    let asked = asking_eval(&self.client, &to, self.script, &keys, &args);
                    match self.bounded(&first_key, asked).await? {
                        Ok(reply) => return Ok(reply),
                        Err(refused) => {
                            // Kept for the split's parts: the lookup stays true until the
                            // migration ends (then the target answers MOVED or runs it).
                            target = Some(to);
                            error = refused;
                        }
                    }
                }
            }
            if holds.len() > 1 && is_tryagain(&error) {
                // Some keys moved, some not (the source's TRYAGAIN), or not all are on the
                // target (its TRYAGAIN after ASKING): one call per hold.
                tracing::debug!(
                    target: crate::TARGET,
                    key = %first_key,
                    holds = holds.len(),
                    "batch straddles a migration: splitting",
                );
                return self.split(holds, target).await;
            }
            if !refused_before_running(&error) || Instant::now() + pause >= self.deadline {
                return Err(Error::from_fred(error).with_key(first_key));
            }
            tracing::debug!(target: crate::TARGET, key = %first_key, %error, "refused before running; sending again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    /// One call per hold, all at once (fred pipelines them), answers in order. The first
    /// failure fails the batch: the watchdog then retries every hold of it, which only
    /// renews again those that were renewed.
    async fn split(&self, holds: Vec<HoldArgs>, target: Option<Target>) -> Result<Vec<i64>> {
        let count = holds.len();
        let mut calls = JoinSet::new();
        for (index, hold) in holds.into_iter().enumerate() {
            let part = self.part(hold, target.clone());
            calls.spawn(async move { (index, part.await) });
        }
        let mut replies = vec![0; count];
        while let Some(joined) = calls.join_next().await {
            let (index, result) = joined.map_err(|e| Error::new(ErrorKind::Redis, format!("split call: {e}")))?;
            let reply = result?;
            let [answer] = reply[..] else {
                let script = self.script.name();
                return Err(Error::new(ErrorKind::Redis, format!("{script} answered {reply:?} for one key")));
            };
            replies[index] = answer;
        }
        Ok(replies)
    }

    /// One hold of a split batch, as a boxed future of a named type: `run` and `split`
    /// call each other, and the compiler cannot tell that such a cycle of unnamed
    /// futures is `Send`.
    fn part(&self, hold: HoldArgs, target: Option<Target>) -> Pin<Box<dyn Future<Output = Result<Vec<i64>>> + Send>> {
        let part = self.clone();
        Box::pin(async move { part.run(vec![hold], target).await })
    }

    /// `call`, cut at the batch's deadline: `Err` is the timeout, `Ok` the call's outcome.
    async fn bounded<T>(&self, key: &str, call: impl Future<Output = T>) -> Result<T> {
        tokio::time::timeout_at(self.deadline, call).await.map_err(|_| {
            Error::new(ErrorKind::Timeout, format!("{} did not answer in time", self.script.name())).with_key(key)
        })
    }
}

/// One `EVALSHA` on the node of the keys' slot (fred's map), loading the script on every
/// primary and sending it once more when the node answers `NOSCRIPT`.
async fn evalsha(
    client: &Client,
    script: &LuaScript,
    keys: &[String],
    args: &[Value],
) -> Result<Vec<i64>, fred::error::Error> {
    match client.evalsha(script.sha1(), keys.to_vec(), args.to_vec()).await {
        Err(error) if error.details().starts_with("NOSCRIPT") => {
            let _: Value = client.script_load_cluster(script.source()).await?;
            client.evalsha(script.sha1(), keys.to_vec(), args.to_vec()).await
        }
        other => other,
    }
}

/// A slot's migration target, as fred knows it: the primary, and a slot fred's map gives
/// it, to route commands to its connection by.
#[derive(Clone, Debug)]
struct Target {
    server: Server,
    slot: u16,
}

/// Commands routed like a key of `slot` (fred's cached map). Not fred's `cluster_node`:
/// for a node fred has no connection to at the moment, that fails with "Failed to route
/// command" *and* makes fred reconnect every connection; routed by slot, such a command
/// goes to another node instead, which refuses it (`MOVED`, or `ASK` from the source)
/// without running it.
fn routed_by(slot: u16) -> Options {
    Options { cluster_hash: Some(ClusterHash::Custom(slot)), ..Options::default() }
}

/// `ASKING` then `EVAL` of the script, in one pipeline on `target`'s connection. `EVAL`
/// rather than `EVALSHA`: this path is rare, and a `NOSCRIPT` there would need the pair
/// sent again.
async fn asking_eval(
    client: &Client,
    target: &Target,
    script: &LuaScript,
    keys: &[String],
    args: &[Value],
) -> Result<Vec<i64>, fred::error::Error> {
    let pipeline = client.pipeline().with_options(&routed_by(target.slot));
    let no_args: Vec<Value> = Vec::new();
    let _: () = pipeline.custom(CustomCommand::new_static("ASKING", ClusterHash::Random, false), no_args).await?;
    let mut eval: Vec<Value> = Vec::with_capacity(2 + keys.len() + args.len());
    eval.push(Value::from(script.source()));
    eval.push(Value::from(i64::try_from(keys.len()).unwrap_or(i64::MAX)));
    eval.extend(keys.iter().map(|key| Value::from(key.as_str())));
    eval.extend(args.iter().cloned());
    let _: () = pipeline.custom(CustomCommand::new_static("EVAL", ClusterHash::Random, false), eval).await?;
    let mut replies = pipeline.try_all::<Value>().await.into_iter();
    match (replies.next(), replies.next()) {
        (Some(Ok(_)), Some(Ok(reply))) => Vec::<i64>::from_value(reply),
        (Some(Err(error)), _) | (_, Some(Err(error))) => Err(error),
        _ => Err(fred::error::Error::new(fred::error::ErrorKind::Protocol, "ASKING + EVAL: missing replies")),
    }
}

/// Where `slot` is being migrated to, as the node fred's slot map names for it says
/// (`CLUSTER NODES`: `[slot->-id]` on its own line), as one of the primaries in fred's
/// map. `None` when the slot is not migrating (the redirect was a `MOVED`, or the
/// migration ended), when the lookup fails, or when the target is not a primary fred
/// knows (a new node without slots: fred has no connection to it).
async fn migration_target(client: &Client, slot: u16) -> Option<Target> {
    let map = client.cached_cluster_state()?;
    let nodes: String = match client.with_options(&routed_by(slot)).cluster_nodes().await {
        Ok(nodes) => nodes,
        Err(error) => {
            tracing::debug!(target: crate::TARGET, %error, slot, "CLUSTER NODES failed");
            return None;
        }
    };
    let (host, port, hostname) = migrating_to(&nodes, slot)?;
    map.slots().iter().find_map(|range| {
        let server = &range.primary;
        let same = server.port == port && (*server.host == *host || hostname.as_deref() == Some(&*server.host));
        same.then(|| Target { server: server.clone(), slot: range.start })
    })
}

/// The `(ip, port, hostname)` of the node `slot` is migrating to, read from a node's
/// `CLUSTER NODES`: the `[slot->-id]` entry of the line flagged `myself`, then the
/// address of the line with that id (`ip:port@bus[,hostname]`).
fn migrating_to(nodes: &str, slot: u16) -> Option<(String, u16, Option<String>)> {
    fn fields(line: &str) -> Vec<&str> {
        line.split(' ').filter(|f| !f.is_empty()).collect()
    }
    let myself = nodes
        .lines()
        .map(fields)
        .find(|line| line.get(2).is_some_and(|flags| flags.split(',').any(|flag| flag == "myself")))?;
    let marker = format!("[{slot}->-");
    let id = myself.iter().skip(8).find_map(|entry| entry.strip_prefix(&marker)?.strip_suffix(']'))?;
    let line = nodes.lines().map(fields).find(|line| line.first() == Some(&id))?;
    let address = line.get(1)?;
    let (endpoint, hostname) = address.split_once(',').map_or((*address, None), |(e, h)| (e, Some(h)));
    let ip_port = endpoint.split_once('@').map_or(endpoint, |(ip_port, _)| ip_port);
    let (ip, port) = ip_port.rsplit_once(':')?;
    let port = port.parse().ok()?;
    Some((ip.to_owned(), port, hostname.filter(|h| !h.is_empty()).map(str::to_owned)))
}

/// fred's answer to a `MOVED` or `ASK` it was told not to follow.
fn is_redirect(error: &fred::error::Error) -> bool {
    error.details().starts_with("Too many redirections")
}

/// The server's `TRYAGAIN`: a multi-key command whose keys are not all on the node.
fn is_tryagain(error: &fred::error::Error) -> bool {
    error.details().trim_start_matches("ERR ").trim_start().starts_with("TRYAGAIN")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,node-4 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383 [10923-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [5000->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f] [77->-07c37dfeb235213a872192d90877d0cd55635b91]
";

    #[test]
    fn the_migration_target_is_read_from_the_sources_own_line() {
        assert_eq!(migrating_to(NODES, 5000), Some(("127.0.0.1".to_owned(), 30003, None)));
        assert_eq!(migrating_to(NODES, 77), Some(("127.0.0.1".to_owned(), 30004, Some("node-4".to_owned()))));
        // Not migrating from this node (another node's importing entry does not count).
        assert_eq!(migrating_to(NODES, 10923), None);
        assert_eq!(migrating_to(NODES, 1), None);
        assert_eq!(migrating_to("", 5000), None);
        // The target's line is missing or unreadable: no guess.
        let orphan = NODES.replace("292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003", "x y");
        assert_eq!(migrating_to(&orphan, 5000), None);
    }

    #[test]
    fn redirects_and_tryagain_are_told_apart() {
        let fred = |text: &str| fred::error::Error::new(fred::error::ErrorKind::Unknown, text.to_owned());
        assert!(is_redirect(&fred("Too many redirections.")));
        assert!(!is_redirect(&fred("TRYAGAIN Multiple keys request during rehashing of slot")));
        assert!(is_tryagain(&fred("TRYAGAIN Multiple keys request during rehashing of slot")));
        assert!(is_tryagain(&fred("ERR TRYAGAIN x")));
        assert!(!is_tryagain(&fred("CLUSTERDOWN The cluster is down")));
    }
}
