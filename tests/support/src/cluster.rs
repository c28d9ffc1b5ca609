//! A local Redis Cluster: 3 primaries and 3 replicas on free ports, one temp dir.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::raw::{raw_command, RespValue};
use crate::reaper::{Reaper, Watch};
use crate::server::{free_port, make_temp_dir, RedisServer, ServerOptions};
use crate::shared;

/// How long the whole start may take before it panics.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// Slots of the three primaries.
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// A Redis Cluster of 3 primaries (slots split evenly) with one replica each, on
/// 127.0.0.1, no persistence, `cluster-node-timeout` 5 s (long enough that a loaded
/// machine does not fail a node over by itself; manual failovers do not wait for it).
///
/// Two ways to get one:
/// - [`RedisCluster::shared`]: one per test binary under `cargo test`, one per nextest
///   run under `cargo nextest run` (shared by every test process, see `shared.rs`).
///   Tests on it must leave the topology as they found it: no failovers, no slot moves.
/// - [`RedisCluster::start`]: a private one, for tests that change the topology;
///   killed when dropped.
///
/// Either way every server is in one process group that dies with the test process (or
/// the nextest run): no `redis-server` is left behind, even after a `SIGKILL`.
#[derive(Debug)]
pub struct RedisCluster {
    /// Ports of the nodes as started: primaries first (slot ranges in order), then the
    /// replica of each, in the same order. Roles change with failovers.
    ports: Vec<u16>,
    /// The servers and their reaper, when this process started them.
    owned: Option<(Vec<RedisServer>, Reaper)>,
}

static SHARED: OnceLock<RedisCluster> = OnceLock::new();

impl RedisCluster {
    /// Starts a private cluster and waits until it is fully formed: every node reports
    /// `cluster_state:ok` with all 16384 slots, every node sees 3 primaries that own slots
    /// and 3 connected replicas, and every replica is in sync with its primary.
    ///
    /// # Panics
    /// When `redis-server` is missing or the cluster does not form within 30 s.
    pub fn start() -> RedisCluster {
        Self::start_with_node_timeout(Duration::from_secs(5))
    }

    /// [`RedisCluster::start`] with another `cluster-node-timeout`: how long a node must be
    /// unreachable before the others fail it over (a killed primary's replica takes over
    /// about a second after that). Short timeouts make a loaded machine's slow node look
    /// dead, so keep them for tests that kill nodes.
    ///
    /// # Panics
    /// As [`RedisCluster::start`], or for a timeout over `u32::MAX` ms.
    pub fn start_with_node_timeout(node_timeout: Duration) -> RedisCluster {
        Self::start_private(node_timeout, &ServerOptions::default())
    }

    /// [`RedisCluster::start`] with the `redis-server` at `binary`, which may be older
    /// than 7.0 (then the cluster bus is on port + 10000 and the slots are assigned with
    /// `CLUSTER ADDSLOTS`, as 6.x requires).
    ///
    /// # Panics
    /// As [`RedisCluster::start`], or when `binary` cannot be run.
    pub fn start_with_binary(binary: impl Into<PathBuf>) -> RedisCluster {
        Self::start_private(Duration::from_secs(5), &ServerOptions::default().binary(binary))
    }

    fn start_private(node_timeout: Duration, base: &ServerOptions) -> RedisCluster {
        let ms = u32::try_from(node_timeout.as_millis()).unwrap_or_else(|_| panic!("node timeout too long"));
        let dir = make_temp_dir();
        let reaper = Reaper::start(&dir, Watch::ThisProcess).unwrap_or_else(|e| panic!("{e}"));
        let (ports, servers) = form(&dir, reaper.group(), ms, base).unwrap_or_else(|e| panic!("cluster: {e}"));
        RedisCluster { ports, owned: Some((servers, reaper)) }
    }

    /// Kills the node at `addr` (`SIGKILL`), for good. Only on a private cluster.
    ///
    /// # Panics
    /// On the shared cluster, or when `addr` is not a node of this cluster.
    pub fn kill(&mut self, addr: &str) {
        self.assert_private();
        self.node(addr).kill();
    }

    /// Freezes the node at `addr` (`SIGSTOP`, see [`RedisServer::pause`]): its connections
    /// stay open and nothing answers; [`RedisCluster::kill`] still kills it. Only on a
    /// private cluster.
    ///
    /// # Panics
    /// On the shared cluster, or when `addr` is not a node of this cluster.
    pub fn pause(&mut self, addr: &str) {
        self.assert_private();
        self.node(addr).pause();
    }

    /// Resumes a node frozen by [`RedisCluster::pause`] (`SIGCONT`).
    ///
    /// # Panics
    /// As [`RedisCluster::pause`].
    pub fn resume(&mut self, addr: &str) {
        self.assert_private();
        self.node(addr).resume();
    }

    fn node(&mut self, addr: &str) -> &mut RedisServer {
        let (servers, _) = self.owned.as_mut().unwrap_or_else(|| panic!("not started by this process"));
        servers.iter_mut().find(|s| s.addr() == addr).unwrap_or_else(|| panic!("no node {addr}"))
    }

    /// Waits until the nodes other than `dead` report `cluster_state:ok` and agree on
    /// the primaries (after a failover), within `deadline`. Returns whether they did.
    pub fn wait_settled_without(&self, dead: &str, deadline: Duration) -> bool {
        let live: Vec<String> = self.addrs().into_iter().filter(|a| a != dead).collect();
        poll(deadline, || {
            let views: Vec<Option<Vec<String>>> = live.iter().map(|a| primaries_seen_by(a)).collect();
            views.iter().all(|v| v.as_ref().is_some_and(|p| p.len() == 3 && !p.iter().any(|a| a == dead)))
                && views.windows(2).all(|w| w[0] == w[1])
        })
    }

    /// The cluster shared by this test binary (or nextest run), started on first use.
    /// Do not change its topology.
    ///
    /// # Panics
    /// As [`RedisCluster::start`].
    pub fn shared() -> &'static RedisCluster {
        SHARED.get_or_init(|| {
            let (ports, owned) = shared::get_or_start("cluster", |dir, watch| {
                let reaper = Reaper::start(dir, watch)?;
                let (ports, servers) = form(dir, reaper.group(), 5_000, &ServerOptions::default())?;
                Ok((ports, (servers, reaper)))
            });
            RedisCluster { ports, owned }
        })
    }

    /// `redis-cluster://127.0.0.1:P?node=127.0.0.1:Q&…`, naming every node (so the URL
    /// still works after failovers).
    pub fn url(&self) -> String {
        let mut nodes = self.ports.iter();
        let first = nodes.next().copied().unwrap_or_default();
        let rest: Vec<String> = nodes.map(|p| format!("node=127.0.0.1:{p}")).collect();
        format!("redis-cluster://127.0.0.1:{first}?{}", rest.join("&"))
    }

    /// Panics unless this process started this cluster and it is not the shared one:
    /// only such a cluster may change its topology.
    fn assert_private(&self) {
        let shared = SHARED.get().map_or(std::ptr::null(), |s| s);
        assert!(self.owned.is_some() && !std::ptr::eq(self, shared), "only on a private cluster");
    }

    /// `127.0.0.1:PORT` of every node, primaries first (as started).
    pub fn addrs(&self) -> Vec<String> {
        self.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect()
    }

    /// `127.0.0.1:PORT` of the primaries now (from `CLUSTER SLOTS`), in slot order.
    ///
    /// # Panics
    /// When no node answers.
    pub fn primaries(&self) -> Vec<String> {
        let mut ranges = self.slot_ranges();
        ranges.sort_by_key(|r| r.0);
        ranges.into_iter().map(|r| r.2).collect()
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    ///
    /// # Panics
    /// When no node answers.
    pub fn slot(&self, key: &str) -> u16 {
        let reply = self.any(&["CLUSTER", "KEYSLOT", key]);
        reply.as_int().and_then(|n| u16::try_from(n).ok()).unwrap_or_else(|| panic!("CLUSTER KEYSLOT: {reply:?}"))
    }

    /// `127.0.0.1:PORT` of the primary serving `key`'s slot now.
    ///
    /// # Panics
    /// When no node answers or no primary serves the slot.
    pub fn primary_for(&self, key: &str) -> String {
        let slot = self.slot(key);
        self.slot_ranges()
            .into_iter()
            .find(|(from, to, _)| (*from..=*to).contains(&slot))
            .map(|r| r.2)
            .unwrap_or_else(|| panic!("no primary serves slot {slot}"))
    }

    /// Runs one command on the primary serving `key` (raw connection, no redirects).
    ///
    /// # Panics
    /// When the node cannot be reached.
    pub fn on_key(&self, key: &str, args: &[&str]) -> RespValue {
        run(&self.primary_for(key), args)
    }

    /// Runs one command on the node at `addr`.
    ///
    /// # Panics
    /// When the node cannot be reached.
    pub fn on(&self, addr: &str, args: &[&str]) -> RespValue {
        run(addr, args)
    }

    /// Runs one command on the replica at `addr` after `READONLY` on the same
    /// connection (a cluster replica otherwise redirects every keyed command).
    ///
    /// # Panics
    /// When the node cannot be reached.
    pub fn on_replica(&self, addr: &str, args: &[&str]) -> RespValue {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut replies = crate::raw::raw_commands(addr, &[&[b"READONLY"], &bytes]);
        replies.pop().unwrap_or(RespValue::Nil)
    }

    /// The replica of the primary at `addr` (from that primary's `INFO replication`).
    ///
    /// # Panics
    /// When it has no connected replica.
    pub fn replica_of(&self, primary: &str) -> String {
        let info = text(&run(primary, &["INFO", "replication"]));
        info.lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .find_map(|l| {
                let field = |name: &str| l.split(',').find_map(|f| f.split_once('=').filter(|kv| kv.0.ends_with(name)));
                let port = field("port")?.1;
                Some(format!("127.0.0.1:{port}"))
            })
            .unwrap_or_else(|| panic!("{primary} has no online replica: {info}"))
    }

    /// Cuts the replica at `replica` off from its primary for good, so that nothing
    /// written from now on reaches it: its `masteruser` becomes a user that does not
    /// exist (and `masterauth` a wrong password) and its link is killed, so it stays a
    /// replica with what it had. Returns once its link is down. Only on a private cluster.
    ///
    /// # Panics
    /// On the shared cluster, when the node refuses, or when the link is still up after 5 s.
    pub fn cut_off_replica(&self, replica: &str) {
        self.assert_private();
        cut_off_replica(replica);
    }

    /// `master` or `slave` (`INFO replication`'s `role`), or empty when the node at
    /// `addr` does not answer.
    pub fn role(&self, addr: &str) -> String {
        role(addr)
    }

    /// A manual failover of the primary at `primary`: `CLUSTER FAILOVER` on its replica,
    /// then waits until every node sees the replica as the slots' primary, the old primary
    /// as its replica and in sync, and `cluster_state:ok`. Returns the new primary.
    /// Only on a private cluster ([`RedisCluster::start`]).
    ///
    /// # Panics
    /// On the shared cluster, or when the failover does not complete within 20 s.
    pub fn failover(&self, primary: &str) -> String {
        self.assert_private();
        let replica = self.replica_of(primary);
        let reply = run(&replica, &["CLUSTER", "FAILOVER"]);
        assert_eq!(reply.as_str(), Some("OK"), "CLUSTER FAILOVER on {replica}: {reply:?}");
        let done = poll(Duration::from_secs(20), || {
            role(&replica) == "master"
                && role(primary) == "slave"
                && text(&run(primary, &["INFO", "replication"])).contains("master_link_status:up")
                && self.settled()
        });
        assert!(
            done,
            "failover of {primary} to {replica} did not complete: {}",
            text(&run(&replica, &["CLUSTER", "NODES"]))
        );
        replica
    }

    /// Starts moving `slot` from the primary serving it to `target` (another primary) by
    /// hand, as `redis-cli --cluster reshard` does: `CLUSTER SETSLOT slot IMPORTING` on the
    /// target, `MIGRATING` on the source. Keys then move one by one with
    /// [`SlotMigration::migrate_key`] (the source answers `ASK` for keys it no longer
    /// has), and [`SlotMigration::finish`] gives the slot to the target. Only on a
    /// private cluster.
    ///
    /// # Panics
    /// On the shared cluster, or when a node refuses.
    pub fn begin_migration(&self, slot: u16, target: &str) -> SlotMigration {
        self.assert_private();
        let source = self
            .slot_ranges()
            .into_iter()
            .find(|(from, to, _)| (*from..=*to).contains(&slot))
            .map(|r| r.2)
            .unwrap_or_else(|| panic!("no primary serves slot {slot}"));
        assert_ne!(source, target, "the slot is already on {target}");
        let id = |addr: &str| text(&run(addr, &["CLUSTER", "MYID"]));
        let migration =
            SlotMigration { slot, source_id: id(&source), target_id: id(target), source, target: target.to_owned() };
        let slot_text = slot.to_string();
        expect_ok(target, &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &migration.source_id])
            .unwrap_or_else(|e| panic!("{e}"));
        expect_ok(&migration.source, &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &migration.target_id])
            .unwrap_or_else(|e| panic!("{e}"));
        migration
    }

    /// Whether every node reports `cluster_state:ok` and the same primaries.
    fn settled(&self) -> bool {
        let views: Vec<Option<Vec<String>>> = self.addrs().iter().map(|a| primaries_seen_by(a)).collect();
        views.iter().all(Option::is_some) && views.windows(2).all(|w| w[0] == w[1])
    }

    /// `(first slot, last slot, primary addr)` from `CLUSTER SLOTS` on any node.
    fn slot_ranges(&self) -> Vec<(u16, u16, String)> {
        let reply = self.any(&["CLUSTER", "SLOTS"]);
        let RespValue::Array(ranges) = reply else { panic!("CLUSTER SLOTS: {reply:?}") };
        ranges
            .iter()
            .filter_map(|range| {
                let RespValue::Array(fields) = range else { return None };
                let from = u16::try_from(fields.first()?.as_int()?).ok()?;
                let to = u16::try_from(fields.get(1)?.as_int()?).ok()?;
                let RespValue::Array(primary) = fields.get(2)? else { return None };
                let port = primary.get(1)?.as_int()?;
                Some((from, to, format!("127.0.0.1:{port}")))
            })
            .collect()
    }

    fn any(&self, args: &[&str]) -> RespValue {
        self.addrs()
            .iter()
            .find(|a| crate::server::ping_addr(a))
            .map(|a| run(a, args))
            .unwrap_or_else(|| panic!("no cluster node answers"))
    }

    /// How many times `addr` was sent `command` (lowercase, as `INFO commandstats`
    /// names it) since its last `CONFIG RESETSTAT`: its `calls` plus its
    /// `rejected_calls` (a command refused with a redirect or `TRYAGAIN` is rejected,
    /// not run).
    ///
    /// # Panics
    /// When the node cannot be reached.
    pub fn command_count(&self, addr: &str, command: &str) -> u64 {
        let info = run(addr, &["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:");
        let line = info.as_str().and_then(|t| t.lines().find_map(|l| l.strip_prefix(&prefix)).map(str::to_owned));
        line.unwrap_or_default()
            .split(',')
            .filter_map(|f| f.split_once('=').filter(|(k, _)| *k == "calls" || *k == "rejected_calls"))
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum()
    }

    /// How many replies `addr` gave with the error `prefix` (`ASK`, `TRYAGAIN`, as
    /// `INFO errorstats` names them) since its last `CONFIG RESETSTAT`.
    ///
    /// # Panics
    /// When the node cannot be reached.
    pub fn error_count(&self, addr: &str, prefix: &str) -> u64 {
        let info = run(addr, &["INFO", "errorstats"]);
        let head = format!("errorstat_{prefix}:count=");
        info.as_str().and_then(|t| t.lines().find_map(|l| l.strip_prefix(&head)?.trim().parse().ok())).unwrap_or(0)
    }

    /// The directory of the cluster's files (node logs under `node-PORT/`), when this
    /// process started it.
    pub fn dir(&self) -> Option<PathBuf> {
        self.owned.as_ref().map(|(_, reaper)| reaper.dir().to_path_buf())
    }
}

/// A slot being moved by hand between two primaries ([`RedisCluster::begin_migration`]).
#[derive(Debug)]
pub struct SlotMigration {
    slot: u16,
    source: String,
    target: String,
    source_id: String,
    target_id: String,
}

impl SlotMigration {
    /// The node the slot leaves.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The node the slot goes to.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// `MIGRATE`s `key` from the source to the target (`NOKEY` when it is not there).
    ///
    /// # Panics
    /// When the source refuses.
    pub fn migrate_key(&self, key: &str) {
        let (host, port) = self.target.rsplit_once(':').unwrap_or(("127.0.0.1", ""));
        let reply = run(&self.source, &["MIGRATE", host, port, key, "0", "5000"]);
        assert!(matches!(reply.as_str(), Some("OK" | "NOKEY")), "MIGRATE {key}: {reply:?}");
    }

    /// Runs one command on the target as a client following an `ASK` does: `ASKING`, then
    /// the command, on one new connection. (Without `ASKING` the target answers `MOVED`
    /// for the slot's keys until the slot is handed over.)
    ///
    /// # Panics
    /// When the target cannot be reached or refuses `ASKING`.
    pub fn on_target_asking(&self, args: &[&str]) -> RespValue {
        let command: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut replies = crate::raw::raw_commands(&self.target, &[&[b"ASKING"], &command]).into_iter();
        let asking = replies.next();
        assert_eq!(asking.as_ref().and_then(RespValue::as_str), Some("OK"), "ASKING on {}", self.target);
        replies.next().unwrap_or_else(|| panic!("no reply to {args:?} on {}", self.target))
    }

    /// Gives the slot to the target on both nodes (`CLUSTER SETSLOT slot NODE target`;
    /// the others learn it by gossip): from then on the source answers `MOVED` for it.
    /// Checks that no key of the slot was left on the source.
    ///
    /// # Panics
    /// When a node refuses or the source still has keys of the slot after 10 s.
    pub fn finish(self) {
        let slot_text = self.slot.to_string();
        for addr in [&self.target, &self.source] {
            expect_ok(addr, &["CLUSTER", "SETSLOT", &slot_text, "NODE", &self.target_id])
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let moved = poll(Duration::from_secs(10), || {
            run(&self.source, &["CLUSTER", "COUNTKEYSINSLOT", &slot_text]) == RespValue::Integer(0)
        });
        assert!(moved, "slot {} still has keys on {}", self.slot, self.source);
    }
}

/// Starts 6 nodes in `dir` (process group `group`), joins them, assigns the slots and
/// replicas, and waits until the cluster is formed.
fn form(
    dir: &std::path::Path,
    group: u32,
    node_timeout_ms: u32,
    base: &ServerOptions,
) -> Result<(Vec<u16>, Vec<RedisServer>), String> {
    let started = Instant::now();
    // 7.0 added `cluster-port` and `CLUSTER ADDSLOTSRANGE`; before it the bus is on
    // port + 10000 and slots are added one by one.
    let modern = base.binary.is_none() || base.major_version()? >= 7;
    let mut servers = Vec::new();
    for _ in 0..6 {
        servers.push(start_node(dir, group, node_timeout_ms, base, modern)?);
    }
    let ports: Vec<u16> = servers.iter().map(RedisServer::port).collect();
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    // Distinct epochs up front (as `redis-cli --cluster create` does): no epoch
    // collisions to resolve while the cluster forms.
    for (i, addr) in addrs.iter().enumerate() {
        expect_ok(addr, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()])?;
    }
    for (addr, (from, to)) in addrs.iter().zip(RANGES) {
        if modern {
            expect_ok(addr, &["CLUSTER", "ADDSLOTSRANGE", &from.to_string(), &to.to_string()])?;
        } else {
            let slots: Vec<String> = (from..=to).map(|slot| slot.to_string()).collect();
            let mut args = vec!["CLUSTER", "ADDSLOTS"];
            args.extend(slots.iter().map(String::as_str));
            expect_ok(addr, &args)?;
        }
    }
    // From 7.0 the bus is on its own port (`cluster-port`), not PORT + 10000: name it.
    let bus = if modern {
        match run(&addrs[0], &["CONFIG", "GET", "cluster-port"]) {
            RespValue::Array(pair) => pair.get(1).map(text).unwrap_or_default(),
            other => return Err(format!("CONFIG GET cluster-port: {other:?}")),
        }
    } else {
        (u32::from(ports[0]) + 10_000).to_string()
    };
    for addr in &addrs[1..] {
        expect_ok(addr, &["CLUSTER", "MEET", "127.0.0.1", &ports[0].to_string(), &bus])?;
    }
    let deadline = started + START_DEADLINE;
    let wait = |what: &str, condition: &mut dyn FnMut() -> bool| -> Result<(), String> {
        while !condition() {
            if Instant::now() > deadline {
                return Err(format!("{what} not reached within {START_DEADLINE:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    };
    wait("every node knows 6 nodes", &mut || {
        addrs.iter().all(|a| text(&run(a, &["CLUSTER", "INFO"])).contains("cluster_known_nodes:6"))
    })?;
    let ids: Vec<String> = addrs.iter().map(|a| text(&run(a, &["CLUSTER", "MYID"]))).collect();
    for (replica, primary_id) in addrs[3..].iter().zip(&ids[..3]) {
        expect_ok(replica, &["CLUSTER", "REPLICATE", primary_id])?;
    }
    wait("cluster_state:ok with 3 primaries and 3 synced replicas on every node", &mut || {
        addrs.iter().all(|a| {
            let info = text(&run(a, &["CLUSTER", "INFO"]));
            info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
        }) && addrs.iter().all(|a| primaries_seen_by(a).is_some_and(|p| p.len() == 3) && replicas_seen_by(a) == 3)
            && addrs[3..].iter().all(|a| text(&run(a, &["INFO", "replication"])).contains("master_link_status:up"))
    })?;
    Ok((ports, servers))
}

fn start_node(
    dir: &std::path::Path,
    group: u32,
    node_timeout_ms: u32,
    base: &ServerOptions,
    modern: bool,
) -> Result<RedisServer, String> {
    let mut last_error = String::new();
    // Enough tries that "port + 10000 is a port, and free" (before 7.0) always comes up.
    for _ in 0..20 {
        let port = free_port();
        let mut options = ServerOptions { port: Some(port), ..base.clone() }
            .arg("cluster-enabled", "yes")
            .arg("cluster-config-file", "nodes.conf")
            .arg("cluster-node-timeout", &node_timeout_ms.to_string())
            // Replicas sync at once instead of waiting 5 s for more replicas.
            .arg("repl-diskless-sync-delay", "0");
        if modern {
            let bus = free_port();
            if bus == port {
                continue;
            }
            options = options.arg("cluster-port", &bus.to_string());
        } else if port > u16::MAX - 10_000 || !port_free(port + 10_000) {
            // Before 7.0 the bus is always on port + 10000.
            continue;
        }
        match RedisServer::try_start_in(dir.join(format!("node-{port}")), options, Some(group)) {
            Ok(server) => return Ok(server),
            Err(error) => last_error = error,
        }
    }
    Err(format!("could not start a cluster node: {last_error}"))
}

/// Whether nothing listens on `port` of 127.0.0.1 now.
fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The primaries (that own slots) in `addr`'s `CLUSTER NODES`, sorted; `None` unless
/// the node reports `cluster_state:ok`.
fn primaries_seen_by(addr: &str) -> Option<Vec<String>> {
    if !text(&run(addr, &["CLUSTER", "INFO"])).contains("cluster_state:ok") {
        return None;
    }
    let nodes = text(&run(addr, &["CLUSTER", "NODES"]));
    let mut primaries: Vec<String> = nodes
        .lines()
        .filter(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            fields.get(2).is_some_and(|f| f.contains("master") && !f.contains("fail")) && fields.len() > 8
        })
        .filter_map(|l| l.split(' ').nth(1).map(|a| a.split('@').next().unwrap_or(a).to_owned()))
        .collect();
    primaries.sort();
    Some(primaries)
}

/// Replicas in `addr`'s `CLUSTER NODES` with a connected link.
fn replicas_seen_by(addr: &str) -> usize {
    let nodes = text(&run(addr, &["CLUSTER", "NODES"]));
    nodes
        .lines()
        .filter(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            fields.get(2).is_some_and(|f| f.contains("slave") && !f.contains("fail"))
                && fields.get(7) == Some(&"connected")
        })
        .count()
}

fn role(addr: &str) -> String {
    let info = text(&run(addr, &["INFO", "replication"]));
    info.lines().find_map(|l| l.strip_prefix("role:")).unwrap_or_default().trim().to_owned()
}

pub(crate) fn run(addr: &str, args: &[&str]) -> RespValue {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw_command(addr, &bytes)
}

pub(crate) fn expect_ok(addr: &str, args: &[&str]) -> Result<(), String> {
    match run(addr, args) {
        RespValue::Simple(ok) if ok == "OK" => Ok(()),
        other => Err(format!("{args:?} on {addr}: {other:?}")),
    }
}

pub(crate) fn text(value: &RespValue) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// Polls `condition` every 20 ms until it is true or `deadline` passes (blocking: for
/// the harness's start-up and topology changes). Returns whether it became true.
/// See [`RedisCluster::cut_off_replica`].
pub(crate) fn cut_off_replica(replica: &str) {
    for (name, value) in [("masteruser", "leasehold-nobody"), ("masterauth", "wrong")] {
        let reply = run(replica, &["CONFIG", "SET", name, value]);
        assert_eq!(reply.as_str(), Some("OK"), "CONFIG SET {name} on {replica}: {reply:?}");
    }
    run(replica, &["CLIENT", "KILL", "TYPE", "master"]);
    let down = || text(&run(replica, &["INFO", "replication"])).contains("master_link_status:down");
    assert!(poll(Duration::from_secs(5), down), "the link of {replica} is still up");
}

pub(crate) fn poll(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
