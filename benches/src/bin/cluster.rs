//! `cluster`: leasehold on one standalone server and on a local Redis Cluster (3 primaries
//! + 3 replicas), the same two workloads in one run (issue 12):
//!
//! 1. **Distinct keys** (the flash-sale path): `--tasks` tasks on one client, each doing
//!    `try_lock_with(ZERO, 10 s)` + `unlock` on a fresh key per pair for `--seconds`
//!    (keys have no hash tag, so in the cluster they spread over every slot); then one
//!    task's `--pairs` sequential pairs for the latency.
//! 2. **Contended**: `--tasks` tasks over `--clients` clients on `--names` lock names
//!    (task `i` on client `i % clients` and name `(i / clients) % names`, so every name
//!    is contended by every client), each looping `lock_with_lease(10 s)`, hold 1 ms,
//!    `unlock` for `--seconds`: acquisitions/s, the wait (call → guard) p50/p99, the
//!    spread of acquisitions over tasks, and `EVALSHA`s per acquisition (`INFO
//!    commandstats` summed over the primaries).
//!
//! Topologies: `standalone` (one `redis-server`), `cluster` (sharded pub/sub, the default
//! on Redis 7), `cluster-classic` (the same cluster with `sharded_subscription_mode(Off)`:
//! classic pub/sub, and every release reads the wait queue; contended workload only, since
//! the distinct-keys path waits for nothing). Servers are started by the program on free
//! ports in temp dirs and killed at the end; `REDIS_URL` is not used.
//!
//! Exits with 1 when a correctness invariant breaks: two holders of one name inside the
//! critical section at once, a distinct-key `try_lock` that does not acquire, or a failed
//! call.
//!
//! Flags: `--seconds N` (5), `--tasks N` (64), `--clients N` (4), `--names N` (8),
//! `--pairs N` (2000).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{Client, ShardedSubscriptionMode};
use leasehold_benches::{
    check_flags, flag, info_field, micros, ms, percentile, print_table, rerun_command, BoxError, CommandStats,
};
use leasehold_test_support::{raw_command, RedisCluster, RedisServer};

const FLAGS: &[&str] = &["--seconds", "--tasks", "--clients", "--names", "--pairs"];
const LEASE: Duration = Duration::from_secs(10);
const HOLD: Duration = Duration::from_millis(1);

#[derive(Debug, Clone, Copy)]
struct Settings {
    run_for: Duration,
    tasks: usize,
    clients: usize,
    names: usize,
    pairs: usize,
}

/// Where the run goes: a URL, the nodes whose `INFO` counts, and the pub/sub mode.
struct Topology {
    name: &'static str,
    url: String,
    /// The primaries (or the one server): their `INFO commandstats` and `INFO cpu` are summed.
    nodes: Vec<String>,
    mode: ShardedSubscriptionMode,
}

impl Topology {
    async fn client(&self) -> Result<Client, BoxError> {
        Ok(Client::builder().url(&self.url).sharded_subscription_mode(self.mode).connect().await?)
    }

    fn command_stats(&self) -> CommandStats {
        let mut total = CommandStats::default();
        for node in &self.nodes {
            for (name, stat) in CommandStats::parse(&info_text(node, "commandstats")).0 {
                let entry = total.0.entry(name).or_default();
                entry.calls += stat.calls;
                entry.usec += stat.usec;
            }
        }
        total
    }

    /// `used_cpu_sys + used_cpu_user` summed over the nodes, in µs.
    fn cpu_us(&self) -> f64 {
        self.nodes
            .iter()
            .map(|node| {
                let text = info_text(node, "cpu");
                let field = |name| info_field(&text, name).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
                (field("used_cpu_sys") + field("used_cpu_user")) * 1e6
            })
            .sum()
    }
}

fn info_text(node: &str, section: &str) -> String {
    raw_command(node, &[b"INFO", section.as_bytes()]).as_str().unwrap_or_default().to_owned()
}

#[derive(Debug, Default)]
struct Distinct {
    pairs: u64,
    wall: Duration,
    cpu_us: f64,
    evalsha: u64,
    commands: u64,
    latencies: Vec<u64>,
}

#[derive(Debug, Default)]
struct Contended {
    acquisitions: u64,
    wall: Duration,
    waits: Vec<u64>,
    per_task: Vec<u64>,
    evalsha: u64,
    breakdown: String,
}

async fn distinct(topology: &Topology, settings: Settings) -> Result<Distinct, BoxError> {
    let client = topology.client().await?;
    for n in 0..50 {
        pair(&client, &format!("bench:warm:{n}")).await?;
    }
    let before_stats = topology.command_stats();
    let before_cpu = topology.cpu_us();
    let start = Instant::now();
    let deadline = start + settings.run_for;
    let mut tasks = Vec::new();
    for task in 0..settings.tasks {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                pair(&client, &format!("bench:d:{task}:{n}")).await?;
                n += 1;
            }
            Ok::<u64, BoxError>(n)
        }));
    }
    let mut pairs = 0;
    for task in tasks {
        pairs += task.await??;
    }
    let wall = start.elapsed();
    let cpu_us = topology.cpu_us() - before_cpu;
    let stats = topology.command_stats().since(&before_stats);
    let mut latencies = Vec::with_capacity(settings.pairs);
    for n in 0..settings.pairs {
        let at = Instant::now();
        pair(&client, &format!("bench:s:{n}")).await?;
        latencies.push(micros(at.elapsed()));
    }
    latencies.sort_unstable();
    Ok(Distinct { pairs, wall, cpu_us, evalsha: stats.calls("evalsha"), commands: stats.total_calls(), latencies })
}

async fn pair(client: &Client, key: &str) -> Result<(), BoxError> {
    let guard = client.lock(key).try_lock_with(Duration::ZERO, LEASE).await?;
    let guard = guard.ok_or_else(|| format!("INVARIANT BROKEN: try_lock of the distinct key {key} did not acquire"))?;
    guard.unlock().await?;
    Ok(())
}

async fn contended(topology: &Topology, settings: Settings) -> Result<Contended, BoxError> {
    let mut clients = Vec::new();
    for _ in 0..settings.clients {
        clients.push(topology.client().await?);
    }
    let names: Vec<String> = (0..settings.names).map(|i| format!("bench:c:{i}")).collect();
    let inside: Arc<Vec<AtomicBool>> = Arc::new((0..settings.names).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicU64::new(0));
    let before = topology.command_stats();
    let start = Instant::now();
    let deadline = start + settings.run_for;
    let mut tasks = Vec::new();
    for task in 0..settings.tasks {
        let client = clients[task % clients.len()].clone();
        // Each name's tasks are spread over every client: a fleet, not one client's line.
        let index = (task / clients.len()) % names.len();
        let name = names[index].clone();
        let (inside, overlaps) = (inside.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            let lock = client.lock(&name);
            let mut waits = Vec::new();
            while Instant::now() < deadline {
                let called = Instant::now();
                let guard = lock.lock_with_lease(LEASE).await?;
                waits.push(micros(called.elapsed()));
                if inside[index].swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(HOLD).await;
                inside[index].store(false, Ordering::SeqCst);
                guard.unlock().await?;
            }
            Ok::<Vec<u64>, BoxError>(waits)
        }));
    }
    let mut result = Contended::default();
    for task in tasks {
        let waits = task.await??;
        result.per_task.push(waits.len() as u64);
        result.waits.extend(waits);
    }
    result.wall = start.elapsed();
    let stats = topology.command_stats().since(&before);
    result.acquisitions = result.per_task.iter().sum();
    result.evalsha = stats.calls("evalsha");
    result.breakdown = stats.breakdown();
    result.waits.sort_unstable();
    let overlaps = overlaps.load(Ordering::SeqCst);
    if overlaps > 0 {
        return Err(format!("INVARIANT BROKEN: {overlaps} overlapping holds").into());
    }
    Ok(result)
}

fn per(count: u64, of: u64) -> String {
    format!("{:.2}", count as f64 / of.max(1) as f64)
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: cluster [--seconds N] [--tasks N] [--clients N] [--names N] [--pairs N]");
        return Ok(ExitCode::SUCCESS);
    }
    check_flags(&args, FLAGS)?;
    let settings = Settings {
        run_for: Duration::from_secs(flag(&args, "--seconds")?.unwrap_or(5)),
        tasks: flag(&args, "--tasks")?.unwrap_or(64),
        clients: flag(&args, "--clients")?.unwrap_or(4),
        names: flag(&args, "--names")?.unwrap_or(8),
        pairs: flag(&args, "--pairs")?.unwrap_or(2000),
    };
    if settings.tasks == 0 || settings.clients == 0 || settings.names == 0 || settings.pairs == 0 {
        return Err("--tasks, --clients, --names and --pairs must be above 0".into());
    }
    println!("# cluster: leasehold on a standalone server and on a local 3+3 Redis Cluster");
    println!("rerun: {}", rerun_command("cluster"));
    println!(
        "machine: {} cores; load average {}",
        leasehold_benches::nproc(),
        leasehold_benches::load_average().unwrap_or_default()
    );
    println!("settings: {settings:?}; lease {LEASE:?}, hold {HOLD:?}");

    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let topologies = [
        Topology {
            name: "standalone",
            url: server.url(),
            nodes: vec![server.addr()],
            mode: ShardedSubscriptionMode::Auto,
        },
        Topology {
            name: "cluster",
            url: cluster.url(),
            nodes: cluster.primaries(),
            mode: ShardedSubscriptionMode::Auto,
        },
        Topology {
            name: "cluster-classic",
            url: cluster.url(),
            nodes: cluster.primaries(),
            mode: ShardedSubscriptionMode::Off,
        },
    ];
    let shards: Vec<String> = (0..settings.names)
        .map(|i| {
            let name = format!("bench:c:{i}");
            let node = cluster.primary_for(&name);
            let shard = cluster.primaries().iter().position(|p| *p == node).map_or(0, |p| p + 1);
            format!("{name}→{shard}")
        })
        .collect();
    println!("contended names on the cluster's primaries (1-3): {}", shards.join(" "));

    let mut failed = false;
    let mut distinct_rows = Vec::new();
    let mut contended_rows = Vec::new();
    for topology in &topologies {
        if topology.name != "cluster-classic" {
            match distinct(topology, settings).await {
                Ok(d) => distinct_rows.push(vec![
                    topology.name.to_owned(),
                    format!("{:.0}", d.pairs as f64 / d.wall.as_secs_f64()),
                    format!("{} / {}", ms(percentile(&d.latencies, 50.0)), ms(percentile(&d.latencies, 99.0))),
                    per(d.commands, d.pairs),
                    per(d.evalsha, d.pairs),
                    format!("{:.2}", d.cpu_us / d.pairs.max(1) as f64),
                ]),
                Err(error) => {
                    println!("{}: distinct keys FAILED: {error}", topology.name);
                    failed = true;
                }
            }
        }
        match contended(topology, settings).await {
            Ok(c) => {
                let min = c.per_task.iter().copied().min().unwrap_or(0);
                let max = c.per_task.iter().copied().max().unwrap_or(0);
                println!("{} contended, commands: {}", topology.name, c.breakdown);
                contended_rows.push(vec![
                    topology.name.to_owned(),
                    format!("{:.0}", c.acquisitions as f64 / c.wall.as_secs_f64()),
                    format!("{} / {}", ms(percentile(&c.waits, 50.0)), ms(percentile(&c.waits, 99.0))),
                    format!("{min} / {max}"),
                    per(c.evalsha, c.acquisitions),
                ]);
            }
            Err(error) => {
                println!("{}: contended FAILED: {error}", topology.name);
                failed = true;
            }
        }
    }
    println!();
    println!("## distinct keys: try_lock_with(ZERO, 10 s) + unlock, a fresh key per pair");
    let header: Vec<String> = [
        "topology",
        "pairs/s",
        "pair p50 / p99 (1 task)",
        "commands / pair",
        "evalsha / pair",
        "Redis CPU µs / pair (primaries)",
    ]
    .map(str::to_owned)
    .to_vec();
    print_table(&header, &distinct_rows);
    println!();
    println!(
        "## contended: {} tasks over {} clients on {} names, lock_with_lease + 1 ms hold + unlock",
        settings.tasks, settings.clients, settings.names
    );
    let header: Vec<String> =
        ["topology", "acquisitions/s", "wait p50 / p99", "per task min / max", "evalsha / acquisition"]
            .map(str::to_owned)
            .to_vec();
    print_table(&header, &contended_rows);
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
