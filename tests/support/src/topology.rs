//! [`Topology`]: where a parameterised test runs (a private Redis or Valkey server, or a
//! cluster with a prefix of the test's own), with [`both_topologies!`](crate::both_topologies) to run one body on
//! each.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{client_with, raw_command, RedisCluster, RedisServer, RespValue, ServerKind};

/// Where a parameterised test runs: a private standalone server (Redis, or Valkey), or
/// a Redis Cluster with a prefix that makes the test's names its own (other test
/// processes use the shared cluster at the same time). Write the test once as
/// `async fn name(t: &Topology)`, get every lock name and raw key from
/// [`Topology::name`], and reach the server only through these methods;
/// [`both_topologies!`](crate::both_topologies) makes the three `#[tokio::test]`s.
#[derive(Debug)]
pub struct Topology {
    kind: Kind,
    /// Prefix of every name of this test: empty on a standalone server, `tPID.SALT.N:`
    /// on a cluster (no glob characters, and its `t` is its only one, so no other test's
    /// prefix contains it).
    prefix: String,
}

#[derive(Debug)]
enum Kind {
    /// A private server: Redis, or Valkey ([`Topology::valkey`]).
    Standalone(RedisServer),
    /// [`RedisCluster::shared`]: never change its topology, assert only on own names.
    SharedCluster(&'static RedisCluster),
    /// [`RedisCluster::start`], this test's alone.
    PrivateCluster(RedisCluster),
}

/// A [`Topology`]'s server or cluster, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    /// The standalone server.
    Server(&'a RedisServer),
    /// The cluster.
    Cluster(&'a RedisCluster),
}

impl Topology {
    /// A private standalone server.
    ///
    /// # Panics
    /// When `redis-server` cannot start.
    pub fn standalone() -> Topology {
        Topology { kind: Kind::Standalone(RedisServer::start()), prefix: String::new() }
    }

    /// A private standalone Valkey server ([`ServerKind::Valkey`]). Everything else is as
    /// on [`Topology::standalone`]: a Valkey test is the same body on another server.
    ///
    /// # Panics
    /// When the Valkey binary is not set ([`ServerKind::available`] first) or cannot
    /// start.
    pub fn valkey() -> Topology {
        Topology { kind: Kind::Standalone(ServerKind::Valkey.start()), prefix: String::new() }
    }

    /// The shared cluster ([`RedisCluster::shared`]) with a prefix unique to this test.
    ///
    /// # Panics
    /// When the cluster cannot start.
    pub fn shared_cluster() -> Topology {
        Topology { kind: Kind::SharedCluster(RedisCluster::shared()), prefix: unique_prefix() }
    }

    /// A private cluster ([`RedisCluster::start`], 3–4 s to form): for tests that act on
    /// every connection of a node or count them.
    ///
    /// # Panics
    /// When the cluster cannot start.
    pub fn private_cluster() -> Topology {
        Topology { kind: Kind::PrivateCluster(RedisCluster::start()), prefix: unique_prefix() }
    }

    /// The server or the cluster.
    pub fn place(&self) -> Place<'_> {
        match &self.kind {
            Kind::Standalone(server) => Place::Server(server),
            Kind::SharedCluster(cluster) => Place::Cluster(cluster),
            Kind::PrivateCluster(cluster) => Place::Cluster(cluster),
        }
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.place(), Place::Cluster(_))
    }

    /// The URL clients connect with (`redis://…` or `redis-cluster://…`).
    pub fn url(&self) -> String {
        match self.place() {
            Place::Server(server) => server.url(),
            Place::Cluster(cluster) => cluster.url(),
        }
    }

    /// The test's own name for `base` (a lock name, a raw key, a key prefix): `base`
    /// itself on a standalone server, `PREFIX` + `base` on a cluster. Every key and
    /// channel derived from a lock name contains the whole name, so the prefix is in
    /// them too (which [`Topology::channels`] and [`Topology::keys`] rely on).
    pub fn name(&self, base: &str) -> String {
        format!("{}{base}", self.prefix)
    }

    /// `host:port` of the node that serves `key` (the server, or the primary of the
    /// key's slot): where its scripts run and its channel is subscribed.
    pub fn node_for(&self, key: &str) -> String {
        match self.place() {
            Place::Server(server) => server.addr(),
            Place::Cluster(cluster) => cluster.primary_for(key),
        }
    }

    /// Every node (`host:port`).
    pub fn nodes(&self) -> Vec<String> {
        match self.place() {
            Place::Server(server) => vec![server.addr()],
            Place::Cluster(cluster) => cluster.addrs(),
        }
    }

    /// Runs one command on the node that serves `key` over a raw connection (no
    /// redirects followed).
    pub fn on_key(&self, key: &str, args: &[&str]) -> RespValue {
        run(&self.node_for(key), args)
    }

    /// `key`'s PTTL in ms (-2 absent, -1 no expiry).
    pub fn pttl(&self, key: &str) -> i64 {
        self.on_key(key, &["PTTL", key]).as_int().unwrap_or_else(|| panic!("PTTL {key}"))
    }

    /// Whether `key` exists.
    pub fn exists(&self, key: &str) -> bool {
        self.on_key(key, &["EXISTS", key]) == RespValue::Integer(1)
    }

    /// `HGETALL key` as sorted (field, value) pairs.
    pub fn hgetall(&self, key: &str) -> Vec<(String, String)> {
        pairs(self.on_key(key, &["HGETALL", key]), key)
    }

    /// The glob that matches this test's names: `*` on a standalone server.
    fn pattern(&self) -> String {
        format!("*{}*", self.prefix)
    }

    /// The channels this test has subscribed, sorted: every channel of a standalone
    /// server (`PUBSUB CHANNELS *`); on a cluster, the channels with the test's prefix,
    /// shard channels (`PUBSUB SHARDCHANNELS`) and classic ones, on every node.
    pub fn channels(&self) -> Vec<String> {
        let pattern = self.pattern();
        let kinds: &[&[u8]] = if self.is_cluster() { &[b"CHANNELS", b"SHARDCHANNELS"] } else { &[b"CHANNELS"] };
        let commands: Vec<[&[u8]; 3]> = kinds.iter().map(|kind| [b"PUBSUB", *kind, pattern.as_bytes()]).collect();
        let commands: Vec<&[&[u8]]> = commands.iter().map(|c| c.as_slice()).collect();
        let mut found = BTreeSet::new();
        // One connection per node for both questions: tests poll this every few ms.
        for node in self.nodes() {
            for reply in crate::raw_commands(&node, &commands) {
                found.extend(names_in(reply, "PUBSUB"));
            }
        }
        found.into_iter().collect()
    }

    /// This test's keys, sorted: every key of a standalone server (`KEYS *`); on a
    /// cluster the keys with the test's prefix on every primary. The clients'
    /// descriptions (`leasehold_client:{UUID}`) are left out: every live client has one.
    pub fn keys(&self) -> Vec<String> {
        let nodes = match self.place() {
            Place::Server(server) => vec![server.addr()],
            Place::Cluster(cluster) => cluster.primaries(),
        };
        let pattern = self.pattern();
        let mut found = BTreeSet::new();
        for node in nodes {
            found.extend(names_in(run(&node, &["KEYS", &pattern]), "KEYS"));
        }
        found.into_iter().filter(|key| !crate::is_client_description(key)).collect()
    }

    /// The command the lock scripts publish with (as `MONITOR` shows it): `publish` on a
    /// standalone server, `spublish` on the cluster (Redis 7: sharded pub/sub, the
    /// clients' default).
    pub fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "spublish"
        } else {
            "publish"
        }
    }

    /// A client as [`client`](fn@crate::client) makes one (30 s watchdog, 2 s command timeout).
    ///
    /// # Panics
    /// When the topology cannot be reached.
    pub async fn client(&self) -> leasehold::Client {
        client_with(&self.url(), Duration::from_secs(30)).await
    }

    /// A client as [`client_with`] makes one.
    ///
    /// # Panics
    /// When the topology cannot be reached.
    pub async fn client_with(&self, watchdog: Duration) -> leasehold::Client {
        client_with(&self.url(), watchdog).await
    }
}

/// `tPID.SALT.N:`: the process id, a salt from the clock taken once per process (a pid
/// reused later in a long nextest run gets another), and a counter for the tests of one
/// `cargo test` process.
fn unique_prefix() -> String {
    static SALT: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let salt = SALT.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_micros())
    });
    format!("t{}.{salt}.{}:", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn run(addr: &str, args: &[&str]) -> RespValue {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw_command(addr, &bytes)
}

fn names_in(reply: RespValue, what: &str) -> Vec<String> {
    match reply {
        RespValue::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        other => panic!("unexpected {what} reply {other:?}"),
    }
}

fn pairs(reply: RespValue, key: &str) -> Vec<(String, String)> {
    let flat = names_in(reply, &format!("HGETALL {key}"));
    let mut pairs: Vec<(String, String)> = flat.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
    pairs.sort();
    pairs
}

/// Three `#[tokio::test]`s (multi-thread, 2 workers) for the test body
/// `async fn NAME(t: &Topology)`: `NAME::standalone` on [`Topology::standalone`],
/// `NAME::valkey` on [`Topology::valkey`] (run only when [`ServerKind::available`] says
/// so) and `NAME::cluster` on [`Topology::shared_cluster`] (or on the constructor named
/// after the comma, e.g. `both_topologies!(NAME, private_cluster)`).
/// `both_topologies!(sync NAME)` does the same with `#[test]` for `fn NAME(t: &Topology)`.
#[macro_export]
macro_rules! both_topologies {
    ($name:ident) => {
        $crate::both_topologies!($name, shared_cluster);
    };
    ($name:ident, $cluster:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn standalone() {
                super::$name(&$crate::Topology::standalone()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn valkey() {
                if $crate::ServerKind::Valkey.available() {
                    super::$name(&$crate::Topology::valkey()).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster() {
                super::$name(&$crate::Topology::$cluster()).await;
            }
        }
    };
    (sync $name:ident) => {
        mod $name {
            #[test]
            fn standalone() {
                super::$name(&$crate::Topology::standalone());
            }

            #[test]
            fn valkey() {
                if $crate::ServerKind::Valkey.available() {
                    super::$name(&$crate::Topology::valkey());
                }
            }

            #[test]
            fn cluster() {
                super::$name(&$crate::Topology::shared_cluster());
            }
        }
    };
}
