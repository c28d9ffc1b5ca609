//! Helpers shared by the integration tests: a server, a client with short timeouts,
//! raw commands that bypass the client under test, [`Topology`] with
//! [`both_topologies!`] for the suites that run on a standalone server, on Valkey and on
//! a cluster, and [`ServerKind`] with [`both_servers!`] for the standalone-only tests
//! that run on Redis and on Valkey.

pub mod expiring;
mod listener;
pub mod semaphore_load;
mod server_kind;

pub use listener::Listener;

pub use server_kind::{ServerKind, VALKEY_SERVER_VAR};

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use leasehold_test_support::{
    raw_command, wait_until, Monitor, Proxy, RedisCluster, RedisServer, RespValue, SentinelSet, ServerOptions,
    SlotMigration, TlsFiles, SENTINEL_SERVICE,
};

/// A client on `url` with a short watchdog timeout and command timeout for tests: 2 s,
/// or less when the renewal period (`watchdog / 3`) is shorter (the config requires the
/// command timeout to fit inside it).
///
/// # Panics
/// When the server cannot be reached.
pub async fn client_with(url: &str, watchdog: Duration) -> leasehold::Client {
    leasehold::Client::builder()
        .url(url)
        .watchdog_timeout(watchdog)
        .command_timeout(command_timeout_for(watchdog))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// The command timeout [`client_with`] uses for a watchdog timeout.
pub fn command_timeout_for(watchdog: Duration) -> Duration {
    Duration::from_secs(2).min((watchdog / 3).saturating_sub(Duration::from_millis(1)))
}

/// A client with a 30 s watchdog (the default) and a 2 s command timeout.
///
/// # Panics
/// When the server cannot be reached.
pub async fn client(server: &RedisServer) -> leasehold::Client {
    client_with(&server.url(), Duration::from_secs(30)).await
}

/// Runs one command on `server` over a separate raw connection.
pub fn raw(server: &RedisServer, args: &[&str]) -> RespValue {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw_command(&server.addr(), &bytes)
}

/// `PUBSUB CHANNELS *` on `server`, sorted.
pub fn pubsub_channels(server: &RedisServer) -> Vec<String> {
    match raw(server, &["PUBSUB", "CHANNELS", "*"]) {
        RespValue::Array(items) => {
            let mut names: Vec<String> = items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            names.sort();
            names
        }
        other => panic!("unexpected PUBSUB reply {other:?}"),
    }
}

/// The key's PTTL in ms (-2 absent, -1 no expiry).
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    raw(server, &["PTTL", key]).as_int().unwrap_or_else(|| panic!("PTTL {key}"))
}

/// `HGETALL key` as sorted (field, value) pairs.
pub fn hgetall(server: &RedisServer, key: &str) -> Vec<(String, String)> {
    match raw(server, &["HGETALL", key]) {
        RespValue::Array(items) => {
            let flat: Vec<String> = items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            let mut pairs: Vec<(String, String)> = flat.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
            pairs.sort();
            pairs
        }
        other => panic!("unexpected HGETALL reply {other:?}"),
    }
}

/// A lock holder in a child process (`tests/bin/holder.rs`), killed on drop.
pub struct HolderProcess {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl HolderProcess {
    /// Starts the holder binary `bin` (pass `env!("CARGO_BIN_EXE_holder")`) as
    /// `holder URL NAME WATCHDOG_MS` and waits for its `LOCKED` line.
    ///
    /// # Panics
    /// When the child cannot start or does not lock within 10 s.
    pub async fn start(bin: &str, url: &str, name: &str, watchdog: Duration) -> (Self, String) {
        Self::start_with(bin, &[url, name, &watchdog.as_millis().to_string()]).await
    }

    /// Starts the holder in fenced mode (`holder URL NAME WATCHDOG_MS fenced`): it holds a
    /// `FencedLock`. Returns the owner and the hold's token.
    ///
    /// # Panics
    /// As [`HolderProcess::start`], or when the `LOCKED` line has no token.
    pub async fn start_fenced(bin: &str, url: &str, name: &str, watchdog: Duration) -> (Self, String, u64) {
        let (holder, rest) = Self::start_with(bin, &[url, name, &watchdog.as_millis().to_string(), "fenced"]).await;
        let (owner, token) = rest.split_once(' ').unwrap_or_else(|| panic!("no token in {rest:?}"));
        let token = token.parse().unwrap_or_else(|_| panic!("bad token in {rest:?}"));
        (holder, owner.to_owned(), token)
    }

    async fn start_with(bin: &str, args: &[&str]) -> (Self, String) {
        let mut holder = Self::spawn(bin, args);
        let line = holder.next_line(Duration::from_secs(10)).await.expect("LOCKED line");
        let owner = line.strip_prefix("LOCKED ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_owned();
        (holder, owner)
    }

    /// Starts `bin` with `args` (stdin and stdout piped, killed on drop) without waiting
    /// for any line: for child processes other than the holder (`tests/bin/fair_waiter.rs`).
    ///
    /// # Panics
    /// When the child cannot start.
    pub fn spawn(bin: &str, args: &[&str]) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(bin)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn holder");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        HolderProcess { child, stdin, lines: tokio::io::BufReader::new(stdout).lines() }
    }

    /// The child's next stdout line, or `None` after `timeout`.
    pub async fn next_line(&mut self, timeout: Duration) -> Option<String> {
        match tokio::time::timeout(timeout, self.lines.next_line()).await {
            Ok(Ok(line)) => line,
            _ => None,
        }
    }

    /// Asks the child to unlock.
    pub async fn send_unlock(&mut self) {
        self.send_line("UNLOCK").await;
    }

    /// Sends one line (a command such as `WRITE KEY VALUE`) to the child.
    pub async fn send_line(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to holder");
        self.stdin.flush().await.expect("flush");
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends a signal (`KILL`, `STOP`, `CONT`) to the child.
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill").arg(format!("-{name}")).arg(self.pid().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{name} failed");
    }
}

/// Where a parameterised test runs: a private standalone server (Redis, or Valkey), or
/// a Redis Cluster with a prefix that makes the test's names its own (other test
/// processes use the shared cluster at the same time). Write the test once as
/// `async fn name(t: &Topology)`, get every lock name and raw key from
/// [`Topology::name`], and reach the server only through these methods;
/// [`both_topologies!`] makes the three `#[tokio::test]`s.
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
            for reply in leasehold_test_support::raw_commands(&node, &commands) {
                found.extend(names_in(reply, "PUBSUB"));
            }
        }
        found.into_iter().collect()
    }

    /// This test's keys, sorted: every key of a standalone server (`KEYS *`); on a
    /// cluster the keys with the test's prefix on every primary.
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
        found.into_iter().collect()
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

    /// A client as [`client`] makes one (30 s watchdog, 2 s command timeout).
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

/// The end of a failover-during-contention test (`tests/cluster.rs`, `tests/sentinel.rs`):
/// two holders of `holder` whose locks never reached the promoted replica, one renewed and
/// one with a fixed lease, are told `lost()` within 5 s of `since` (the promotion or the
/// announcement, named `event` in messages), the fixed lease by the watchdog's check
/// after the reconnect; then every contending task finishes within 20 s.
///
/// # Panics
/// When any of that does not happen.
pub async fn assert_unreplicated_holders_told_and_no_waiter_stuck<T>(
    since: std::time::Instant,
    event: &str,
    holder: &leasehold::Client,
    guards: [(&str, &leasehold::LockGuard); 2],
    tasks: Vec<tokio::task::JoinHandle<T>>,
) {
    for (what, guard) in guards {
        tokio::time::timeout_at((since + Duration::from_secs(5)).into(), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("the {what} holder was not told lost() within 5 s of the {event}"));
        eprintln!("the {what} holder was told lost() {:?} after the {event}", since.elapsed());
    }
    // The watchdog counts a loss before it marks the hold; the wait only covers the
    // stats' relaxed ordering, never a check still to come.
    let counted = |s: &leasehold::WatchdogStats| s.checks >= 1 && s.lost >= 2;
    wait_until(Duration::from_secs(1), || counted(&holder.stats().watchdog)).await;
    let stats = holder.stats().watchdog;
    assert!(counted(&stats), "the fixed lease was found gone by a check: {stats:?}");
    tokio::time::timeout(Duration::from_secs(20), async {
        for task in tasks {
            task.await.expect("task");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("a waiter is stuck after the {event}"));
}

/// Starts `processes` `contender` processes (`bin`, the test's
/// `env!("CARGO_BIN_EXE_contender")`: `tests/bin/contender.rs`) on the lock `name` at
/// `url`, each with `tasks` tasks taking it `iterations` times, with `extra` arguments
/// (`--resource PREFIX`, `--fenced`). Killed when dropped.
///
/// # Panics
/// When a process cannot be started.
pub fn spawn_contenders(
    bin: &str,
    url: &str,
    name: &str,
    processes: usize,
    (tasks, iterations): (usize, usize),
    extra: &[&str],
) -> Vec<tokio::process::Child> {
    (0..processes)
        .map(|_| {
            tokio::process::Command::new(bin)
                .args([url, name, &tasks.to_string(), &iterations.to_string()])
                .args(extra)
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("spawn contender")
        })
        .collect()
}

/// Waits (within `deadline` in all) for every contender to print `DONE` and exit 0, and
/// returns every logged hold `(start µs, end µs, token)`, sorted by start.
///
/// # Panics
/// When one fails (its output is in the message) or the deadline passes.
pub async fn contenders_intervals(children: Vec<tokio::process::Child>, deadline: Duration) -> Vec<(u64, u64, u64)> {
    let until = tokio::time::Instant::now() + deadline;
    let mut intervals = Vec::new();
    for child in children {
        let output = tokio::time::timeout_at(until, child.wait_with_output())
            .await
            .expect("contender finishes in time")
            .expect("contender output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains("DONE"), "contender failed: {stdout}");
        for line in stdout.lines().filter_map(|l| l.strip_prefix("INTERVAL ")) {
            let fields: Vec<u64> = line.split(' ').map(|f| f.parse().expect("INTERVAL START END TOKEN")).collect();
            let [start, end, token] = fields[..] else { panic!("INTERVAL START END TOKEN: {line}") };
            intervals.push((start, end, token));
        }
    }
    intervals.sort_unstable();
    intervals
}
