//! A Sentinel set-up: one primary, one replica and three sentinels on free ports.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::cluster::{cut_off_replica, poll, run, text};
use crate::raw::RespValue;
use crate::reaper::{Reaper, Watch};
use crate::server::{free_port, make_temp_dir, ping, RedisServer, ServerOptions};
use crate::shared;

/// The service name the sentinels monitor.
pub const SERVICE: &str = "leasehold";
const START_DEADLINE: Duration = Duration::from_secs(30);

/// A primary, its replica and three sentinels (quorum 2, `down-after-milliseconds` 2 s)
/// monitoring it as [`SERVICE`], on 127.0.0.1 without persistence. Like
/// [`RedisCluster`](crate::RedisCluster): [`SentinelSet::shared`] for tests that leave
/// it as it is, [`SentinelSet::start`] for a private one; every process dies with the
/// test process (or the nextest run).
#[derive(Debug)]
pub struct SentinelSet {
    /// Primary, replica, then the three sentinels, as started.
    ports: Vec<u16>,
    #[allow(dead_code)] // held only to keep the servers (and their reaper) alive
    owned: Option<(Vec<RedisServer>, Vec<std::process::Child>, Reaper)>,
}

static SHARED: OnceLock<SentinelSet> = OnceLock::new();

impl SentinelSet {
    /// Starts a private set-up and waits until it is ready: the replica is in sync and
    /// every sentinel names the primary for [`SERVICE`], lists the replica, and knows the
    /// two other sentinels.
    ///
    /// # Panics
    /// When a server does not start or the set-up is not ready within 30 s.
    pub fn start() -> SentinelSet {
        let dir = make_temp_dir();
        let (ports, owned) = build(&dir, Watch::ThisProcess).unwrap_or_else(|e| panic!("sentinel set-up: {e}"));
        SentinelSet { ports, owned: Some(owned) }
    }

    /// The set-up shared by this test binary (or nextest run). Do not fail it over.
    ///
    /// # Panics
    /// As [`SentinelSet::start`].
    pub fn shared() -> &'static SentinelSet {
        SHARED.get_or_init(|| {
            let (ports, owned) = shared::get_or_start("sentinel", build);
            SentinelSet { ports, owned }
        })
    }

    /// `redis-sentinel://127.0.0.1:S1?sentinelServiceName=leasehold&node=127.0.0.1:S2&node=…`
    pub fn url(&self) -> String {
        let sentinels = &self.ports[2..];
        let rest: Vec<String> = sentinels[1..].iter().map(|p| format!("&node=127.0.0.1:{p}")).collect();
        format!("redis-sentinel://127.0.0.1:{}?sentinelServiceName={SERVICE}{}", sentinels[0], rest.concat())
    }

    /// `127.0.0.1:PORT` of the primary as started.
    pub fn primary(&self) -> String {
        format!("127.0.0.1:{}", self.ports[0])
    }

    /// `127.0.0.1:PORT` of the replica as started.
    pub fn replica(&self) -> String {
        format!("127.0.0.1:{}", self.ports[1])
    }

    /// `127.0.0.1:PORT` of the three sentinels.
    pub fn sentinels(&self) -> Vec<String> {
        self.ports[2..].iter().map(|p| format!("127.0.0.1:{p}")).collect()
    }

    /// Runs one command on `addr` over a raw connection.
    ///
    /// # Panics
    /// When it cannot be reached.
    pub fn on(&self, addr: &str, args: &[&str]) -> RespValue {
        run(addr, args)
    }

    /// Cuts the replica off from the primary for good, as
    /// [`RedisCluster::cut_off_replica`](crate::RedisCluster::cut_off_replica) does: nothing
    /// written from now on reaches it, and it stays a replica the sentinels can promote.
    /// Only on a private set-up.
    ///
    /// # Panics
    /// On the shared set-up, when the replica refuses, or when its link is still up after 5 s.
    pub fn cut_off_replica(&self) {
        assert!(!std::ptr::eq(self, SHARED.get().map_or(std::ptr::null(), |s| s)), "not on the shared set-up");
        cut_off_replica(&self.replica());
    }
}

type Owned = (Vec<RedisServer>, Vec<std::process::Child>, Reaper);

fn build(dir: &std::path::Path, watch: Watch) -> Result<(Vec<u16>, Owned), String> {
    let started = Instant::now();
    let reaper = Reaper::start(dir, watch)?;
    let group = reaper.group();
    let primary = start_data_node(dir, group, None)?;
    let replica = start_data_node(dir, group, Some(primary.port()))?;
    let synced = poll(START_DEADLINE, || {
        text(&run(&format!("127.0.0.1:{}", replica.port()), &["INFO", "replication"])).contains("master_link_status:up")
    });
    if !synced {
        return Err("the replica did not sync".to_owned());
    }
    let mut sentinels = Vec::new();
    let mut ports = vec![primary.port(), replica.port()];
    for i in 0..3 {
        let (child, port) = start_sentinel(dir, group, i, primary.port())?;
        sentinels.push(child);
        ports.push(port);
    }
    let remaining = START_DEADLINE.saturating_sub(started.elapsed());
    let ready = poll(remaining, || {
        ports[2..].iter().all(|p| {
            let addr = format!("127.0.0.1:{p}");
            let primary_named = match run(&addr, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE]) {
                RespValue::Array(a) => a.get(1).and_then(RespValue::as_str) == Some(&ports[0].to_string()),
                _ => false,
            };
            let count = |what: &str| match run(&addr, &["SENTINEL", what, SERVICE]) {
                RespValue::Array(a) => a.len(),
                _ => 0,
            };
            primary_named && count("REPLICAS") == 1 && count("SENTINELS") == 2
        })
    });
    if !ready {
        return Err(format!("the sentinels did not learn the set-up within {START_DEADLINE:?}"));
    }
    Ok((ports, (vec![primary, replica], sentinels, reaper)))
}

fn start_data_node(dir: &std::path::Path, group: u32, primary: Option<u16>) -> Result<RedisServer, String> {
    let mut last_error = String::new();
    for _ in 0..5 {
        let port = free_port();
        let mut options =
            ServerOptions { port: Some(port), ..ServerOptions::default() }.arg("repl-diskless-sync-delay", "0");
        if let Some(primary) = primary {
            options.extra_args.extend(["--replicaof".to_owned(), "127.0.0.1".to_owned(), primary.to_string()]);
        }
        match RedisServer::try_start_in(dir.join(format!("node-{port}")), options, Some(group)) {
            Ok(server) => return Ok(server),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

fn start_sentinel(
    dir: &std::path::Path,
    group: u32,
    index: usize,
    primary: u16,
) -> Result<(std::process::Child, u16), String> {
    use std::os::unix::process::CommandExt;
    let mut last_error = String::new();
    for _ in 0..5 {
        let port = free_port();
        let sdir = dir.join(format!("sentinel-{index}-{port}"));
        std::fs::create_dir_all(&sdir).map_err(|e| e.to_string())?;
        let conf = format!(
            "port {port}\nbind 127.0.0.1\nprotected-mode no\nlogfile sentinel.log\ndir {}\n\
             sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {SERVICE} 2000\n\
             sentinel failover-timeout {SERVICE} 10000\n\
             sentinel parallel-syncs {SERVICE} 1\n",
            sdir.display()
        );
        let path = sdir.join("sentinel.conf");
        std::fs::write(&path, conf).map_err(|e| e.to_string())?;
        let mut child = std::process::Command::new("redis-server")
            .arg(&path)
            .arg("--sentinel")
            .current_dir(&sdir)
            .process_group(i32::try_from(group).map_err(|e| e.to_string())?)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn redis-server --sentinel: {e}"))?;
        let up = poll(Duration::from_secs(10), || ping(port) || child.try_wait().ok().flatten().is_some());
        if up && ping(port) {
            return Ok((child, port));
        }
        let _ = child.kill();
        let _ = child.wait();
        last_error = std::fs::read_to_string(sdir.join("sentinel.log")).unwrap_or_default();
    }
    Err(format!("could not start a sentinel: {last_error}"))
}
