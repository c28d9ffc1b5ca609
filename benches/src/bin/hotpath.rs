//! `hotpath`: the flash-sale hot path (issue 9): `try_lock` + unlock on many distinct
//! keys, no waiting, side by side with the fastest peers, in one process against one
//! server.
//!
//! Contenders (each a "pair" = one acquire + one release):
//!
//! 1. `leasehold-watchdog`: leasehold `lock.try_lock()` + `guard.unlock()`;
//! 2. `leasehold-lease`: leasehold `lock.try_lock_with(Duration::ZERO, 10 s)` + unlock;
//! 3. `leasehold-lean`: as `leasehold-lease`, on a client built with
//!    `redisson_waiters(false)`: a release nobody waits for publishes nothing;
//! 4. `rslock`: rslock 0.10 `LockManager::new(vec![url])`, `lock(key, 10 s)` + `unlock`;
//! 5. `setnx`: plain fred, `SET key owner NX PX 10000` + a compare-and-delete script
//!    (`EVALSHA`);
//! 6. `floor`: two `EVALSHA`s of `return 1` through one fred client, the least any
//!    script-based pair can cost;
//! 7. `scripts`: leasehold's own `acquire.lua` and `release.lua`, with the arguments a
//!    fixed-lease `try_lock_with` + `unlock` sends, through plain fred (`EVALSHA`, string
//!    arguments): the same server work as `leasehold-lease` without leasehold's client;
//! 8. `simple`: leasehold's `SimpleLock`, `simple_lock(key).try_lock_with(0, 10 s)` (one
//!    `SET NX PX`) + `guard.unlock()` (one `EVALSHA` compare-and-delete): rslock's
//!    algorithm through leasehold's client;
//! 9. `leasehold-wait`: leasehold's waiting path on a free key, `lock.lock_with_lease(10 s)`
//!    + `guard.unlock()`: what an uncontended `lock()` costs (issue 17 item 3).
//! 10. `leasehold-metrics`: `leasehold-watchdog`'s pair with a metrics recorder
//!     recording (leasehold's `metrics` feature into a `metrics-util` atomic registry,
//!     the storage an exporter keeps): the overhead of the metrics (issue 21; target
//!     <= 3% pairs/s against `leasehold-watchdog`). The facade cannot uninstall a
//!     recorder, so it is installed right before this contender, which always runs last:
//!     every other contender runs with no recorder at all.
//!
//! Every pair uses a fresh key, `lock:order:<contender>:<task>:<n>` (the contender tag
//! keeps contenders apart on a server that is not flushed), so nothing contends.
//! Measured per contender: throughput with 64 tasks for 5 s; the latency of 2,000
//! sequential pairs from one task; server commands per pair (`INFO commandstats` delta
//! over the throughput phase, commands run inside scripts included, `INFO` excluded);
//! Redis CPU per pair (`INFO cpu` `used_cpu_sys + used_cpu_user` deltas) in both phases;
//! the keys left and the locks still held after both phases; Redis memory per held lock
//! (10,000 held at once, `used_memory` delta, every key the contender creates included).
//!
//! Between contenders: `FLUSHALL` (only on a server this program started),
//! `CONFIG RESETSTAT` and a 500 ms pause. Exits with 1 only when a correctness invariant
//! breaks: an acquire on a distinct key that does not acquire, a release that does not
//! release, a failed call, or a lock still held after its release.
//!
//! `--versus a,b` (e.g. `--versus simple,rslock`) runs instead a side-by-side
//! comparison of two contenders in this one process: `--blocks N` (12) blocks of
//! `--block-ms N` (800) ms per side, alternating (a, b, b, a, a, b, ...: each side goes
//! first as often), `--tasks` tasks each; it prints every block's pairs/s, each side's
//! median of its blocks, and the median of the per-block-pair ratios a/b. Alternating
//! short blocks cancels the drift of a shared machine's load that separate 5 s runs
//! suffer (they swung between 0.75 and 1.00 of each other). Each block also reads the
//! CPU it cost per pair, outside its timed window: this process's (every thread's
//! `schedstat`, so the client side: the side's tasks, its connection's task, the
//! runtime) and Redis's (`INFO cpu`); the medians of both per side are printed too.
//!
//! Flags: `--seconds N` (5), `--tasks N` (64), `--pairs N` (2000), `--held N` (10000),
//! `--only a,b` (every contender; names as above), `--versus a,b`, `--blocks N`,
//! `--block-ms N`. `REDIS_URL` selects a server (it must
//! be otherwise idle for the CPU and memory figures); without it a throwaway
//! `redis-server` is started.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::prelude::{Builder, Client as FredClient, ClientLike, Config, KeysInterface, LuaInterface, ReconnectPolicy};
use fred::types::{ClusterHash, CustomCommand, Expiration, InfoKind, SetOptions};
use leasehold::{Client, LockGuard, SimpleGuard};
use leasehold_benches::{
    check_flags, dbsize, flag, info, info_field, join_all, micros, ms, percentile, print_machine, print_table,
    rerun_command, BoxError, CommandStats, Target,
};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};

const FLAGS: &[&str] = &["--seconds", "--tasks", "--pairs", "--held", "--only", "--versus", "--blocks", "--block-ms"];
/// The fixed lease of the fixed-lease contenders (leasehold-lease, rslock, setnx).
const LEASE: Duration = Duration::from_secs(10);
/// Sequential pairs run before each contender's measurements (scripts loaded, connections warm).
const WARMUP_PAIRS: usize = 50;
/// The compare-and-delete release of the `setnx` baseline.
const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
/// The trivial script of the `floor` contender.
const TRIVIAL: &str = "return 1";
/// leasehold's scripts, sent by the `scripts` contender.
const ACQUIRE_LUA: &str = include_str!("../../../crates/lock-core/lua/acquire.lua");
const RELEASE_LUA: &str = include_str!("../../../crates/lock-core/lua/release.lua");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    LeaseholdWatchdog,
    LeaseholdLease,
    LeaseholdLean,
    Rslock,
    SetNx,
    Floor,
    Scripts,
    Simple,
    LeaseholdWait,
    LeaseholdMetrics,
}

impl Contender {
    const ALL: [Contender; 10] = [
        Contender::LeaseholdWatchdog,
        Contender::LeaseholdLease,
        Contender::LeaseholdLean,
        Contender::Rslock,
        Contender::SetNx,
        Contender::Floor,
        Contender::Scripts,
        Contender::Simple,
        Contender::LeaseholdWait,
        Contender::LeaseholdMetrics,
    ];

    fn name(self) -> &'static str {
        match self {
            Contender::LeaseholdWatchdog => "leasehold-watchdog",
            Contender::LeaseholdLease => "leasehold-lease",
            Contender::LeaseholdLean => "leasehold-lean",
            Contender::Rslock => "rslock",
            Contender::SetNx => "setnx",
            Contender::Floor => "floor",
            Contender::Scripts => "scripts",
            Contender::Simple => "simple",
            Contender::LeaseholdWait => "leasehold-wait",
            Contender::LeaseholdMetrics => "leasehold-metrics",
        }
    }

    /// What one pair is, for the headings.
    fn describe(self) -> &'static str {
        match self {
            Contender::LeaseholdWatchdog => "leasehold try_lock() + unlock() (watchdog mode)",
            Contender::LeaseholdLease => "leasehold try_lock_with(ZERO, 10 s) + unlock() (fixed lease)",
            Contender::LeaseholdLean => "leasehold try_lock_with(ZERO, 10 s) + unlock(), redisson_waiters(false)",
            Contender::Rslock => "rslock 0.10 LockManager::lock(key, 10 s) + unlock(&lock)",
            Contender::SetNx => "fred SET key owner NX PX 10000 + EVALSHA compare-and-delete",
            Contender::Floor => "fred EVALSHA `return 1` twice (no key)",
            Contender::Scripts => "fred EVALSHA of leasehold's acquire.lua + release.lua (no leasehold client)",
            Contender::Simple => {
                "leasehold SimpleLock::try_lock_with(0, 10 s) + unlock() (SET NX PX + compare-and-delete)"
            }
            Contender::LeaseholdWait => "leasehold lock_with_lease(10 s) + unlock() (the waiting path, uncontended)",
            Contender::LeaseholdMetrics => "leasehold try_lock() + unlock() (watchdog mode), metrics recorded",
        }
    }

    /// The tag in this contender's key names, `lock:order:<tag>:…`.
    fn tag(self) -> &'static str {
        match self {
            Contender::LeaseholdWatchdog => "lw",
            Contender::LeaseholdLease => "ll",
            Contender::LeaseholdLean => "ln",
            Contender::Rslock => "rs",
            Contender::SetNx => "nx",
            Contender::Floor => "fl",
            Contender::Scripts => "sc",
            Contender::Simple => "sp",
            Contender::LeaseholdWait => "lk",
            Contender::LeaseholdMetrics => "lm",
        }
    }

    fn holds_keys(self) -> bool {
        self != Contender::Floor
    }
}

#[derive(Debug, Clone)]
struct Settings {
    run_for: Duration,
    tasks: usize,
    pairs: usize,
    held: usize,
    contenders: Vec<Contender>,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let contenders = match flag::<String>(args, "--only")? {
            None => Contender::ALL.to_vec(),
            Some(list) => list
                .split(',')
                .map(|name| {
                    Contender::ALL
                        .into_iter()
                        .find(|c| c.name() == name.trim())
                        .ok_or_else(|| format!("--only: unknown contender {name:?}"))
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        // Last: its recorder stays installed once it is (see the module docs).
        let mut contenders = contenders;
        contenders.sort_by_key(|contender| *contender == Contender::LeaseholdMetrics);
        let settings = Settings {
            run_for: Duration::from_secs(flag(args, "--seconds")?.unwrap_or(5)),
            tasks: flag(args, "--tasks")?.unwrap_or(64),
            pairs: flag(args, "--pairs")?.unwrap_or(2000),
            held: flag(args, "--held")?.unwrap_or(10_000),
            contenders,
        };
        if settings.tasks == 0 || settings.pairs == 0 || settings.held == 0 || settings.run_for.is_zero() {
            return Err("--seconds, --tasks, --pairs and --held must be above 0".into());
        }
        Ok(settings)
    }
}

/// Everything the contenders use: one leasehold client, one fred client, one rslock
/// manager (with its own connection), the loaded script hashes, and this run's owner
/// prefix for the `setnx` baseline.
struct Ctx {
    leasehold: Client,
    /// Built with `redisson_waiters(false)`, for `leasehold-lean`.
    leasehold_lean: Client,
    fred: FredClient,
    rslock: rslock::LockManager,
    compare_and_delete: String,
    trivial: String,
    acquire_lua: String,
    release_lua: String,
    owner_prefix: String,
    /// Numbers the `setnx` owner values.
    owners: AtomicU64,
}

/// One acquired lock, whichever contender took it.
enum Held {
    Leasehold(LockGuard),
    Simple(SimpleGuard),
    Rslock(rslock::Lock),
    Plain { key: String, owner: String },
    Script { key: String, owner: String },
    Nothing,
}

async fn acquire(ctx: &Ctx, contender: Contender, key: String) -> Result<Held, BoxError> {
    match contender {
        Contender::LeaseholdWatchdog | Contender::LeaseholdMetrics => {
            let guard = ctx.leasehold.lock(&key).try_lock().await?;
            Ok(Held::Leasehold(guard.ok_or_else(|| format!("try_lock() did not acquire the distinct key {key}"))?))
        }
        Contender::LeaseholdLease => {
            let guard = ctx.leasehold.lock(&key).try_lock_with(Duration::ZERO, LEASE).await?;
            Ok(Held::Leasehold(guard.ok_or_else(|| format!("try_lock_with() did not acquire the distinct key {key}"))?))
        }
        Contender::LeaseholdLean => {
            let guard = ctx.leasehold_lean.lock(&key).try_lock_with(Duration::ZERO, LEASE).await?;
            Ok(Held::Leasehold(guard.ok_or_else(|| format!("try_lock_with() did not acquire the distinct key {key}"))?))
        }
        Contender::LeaseholdWait => {
            // A waiting acquire: on a distinct key it never waits.
            Ok(Held::Leasehold(ctx.leasehold.lock(&key).lock_with_lease(LEASE).await?))
        }
        Contender::Simple => {
            let guard = ctx.leasehold.simple_lock(&key).try_lock_with(Duration::ZERO, LEASE).await?;
            Ok(Held::Simple(
                guard.ok_or_else(|| format!("simple try_lock_with() did not acquire the distinct key {key}"))?,
            ))
        }
        Contender::Rslock => match ctx.rslock.lock(key.as_str(), LEASE).await {
            Ok(lock) => Ok(Held::Rslock(lock)),
            Err(error) => Err(format!("rslock lock({key}) failed: {error}").into()),
        },
        Contender::SetNx => {
            let owner = format!("{}:{}", ctx.owner_prefix, ctx.owners.fetch_add(1, Ordering::Relaxed));
            let lease_ms = i64::try_from(LEASE.as_millis())?;
            let reply: Option<String> = ctx
                .fred
                .set(key.as_str(), owner.as_str(), Some(Expiration::PX(lease_ms)), Some(SetOptions::NX), false)
                .await?;
            if reply.is_none() {
                return Err(format!("SET NX did not acquire the distinct key {key}").into());
            }
            Ok(Held::Plain { key, owner })
        }
        Contender::Floor => {
            let one: i64 = ctx.fred.evalsha(ctx.trivial.as_str(), Vec::<String>::new(), Vec::<String>::new()).await?;
            if one != 1 {
                return Err(format!("the trivial script answered {one}").into());
            }
            Ok(Held::Nothing)
        }
        Contender::Scripts => {
            // What `try_lock_with(ZERO, LEASE)` sends: KEYS = [key], ARGV = [lease ms, owner,
            // 1, 0 (a single try)].
            let owner = format!("{}:{}", ctx.owner_prefix, ctx.owners.fetch_add(1, Ordering::Relaxed));
            let args = vec![LEASE.as_millis().to_string(), owner.clone(), "1".to_owned(), "0".to_owned()];
            let reply: Vec<i64> = ctx.fred.evalsha(ctx.acquire_lua.as_str(), vec![key.clone()], args).await?;
            if reply.first() != Some(&1) {
                return Err(format!("acquire.lua did not acquire the distinct key {key}: {reply:?}").into());
            }
            Ok(Held::Script { key, owner })
        }
    }
}

async fn release(ctx: &Ctx, held: Held) -> Result<(), BoxError> {
    match held {
        Held::Leasehold(guard) => Ok(guard.unlock().await?),
        Held::Simple(guard) => Ok(guard.unlock().await?),
        // rslock's unlock answers nothing (best effort); the held-lock count after each
        // phase checks that it released.
        Held::Rslock(lock) => {
            ctx.rslock.unlock(&lock).await;
            Ok(())
        }
        Held::Plain { key, owner } => {
            let deleted: i64 = ctx.fred.evalsha(ctx.compare_and_delete.as_str(), key.as_str(), owner).await?;
            if deleted != 1 {
                return Err(format!("compare-and-delete of {key} deleted {deleted} keys").into());
            }
            Ok(())
        }
        Held::Script { key, owner } => {
            // What the last `unlock` of a default client sends: KEYS = [key, channel,
            // queue, waiter entries, queue channel], ARGV = [owner, 0, 0, "0", 0, 0,
            // "publish", 1].
            let keys = vec![
                key.clone(),
                format!("redisson_lock__channel:{{{key}}}"),
                format!("leasehold_lock_queue:{{{key}}}"),
                format!("leasehold_lock_waiters:{{{key}}}"),
                format!("leasehold_lock__queue:{{{key}}}"),
            ];
            let args: Vec<String> =
                [owner.as_str(), "0", "0", "0", "0", "0", "publish", "1"].iter().map(|a| (*a).to_owned()).collect();
            let left: i64 = ctx.fred.evalsha(ctx.release_lua.as_str(), keys, args).await?;
            if left != 0 {
                return Err(format!("release.lua of {key} answered {left}").into());
            }
            Ok(())
        }
        Held::Nothing => {
            let one: i64 = ctx.fred.evalsha(ctx.trivial.as_str(), Vec::<String>::new(), Vec::<String>::new()).await?;
            if one != 1 {
                return Err(format!("the trivial script answered {one}").into());
            }
            Ok(())
        }
    }
}

/// The key of pair `n` of `task`.
fn pair_key(contender: Contender, task: usize, n: u64) -> String {
    format!("lock:order:{}:{task}:{n}", contender.tag())
}

/// What one contender measured.
#[derive(Debug, Default)]
struct Outcome {
    tp_pairs: u64,
    tp_wall: Duration,
    /// `INFO commandstats` delta over the throughput phase.
    commands: CommandStats,
    tp_cpu_us: f64,
    /// This process's CPU over the throughput phase (`/proc/self/stat`), µs.
    tp_proc_cpu_us: f64,
    /// Sorted per-pair latencies of the sequential phase, µs.
    latencies: Vec<u64>,
    lat_cpu_us: f64,
    keys_left: u64,
    held_left: u64,
    /// `used_memory` that `FLUSHALL` gave back after both phases (own server only).
    leftover_bytes: Option<u64>,
    /// Memory phase: `used_memory` delta and `DBSIZE` delta while holding `held` locks.
    mem_delta: Option<(i64, i64)>,
    mem_held_left: u64,
    problems: Vec<String>,
}

impl Outcome {
    fn pairs_per_sec(&self) -> f64 {
        self.tp_pairs as f64 / self.tp_wall.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    fn cpu_per_pair(&self) -> f64 {
        self.tp_cpu_us / self.tp_pairs.max(1) as f64
    }

    fn proc_cpu_per_pair(&self) -> f64 {
        self.tp_proc_cpu_us / self.tp_pairs.max(1) as f64
    }

    fn lat_cpu_per_pair(&self) -> f64 {
        self.lat_cpu_us / self.latencies.len().max(1) as f64
    }

    fn p50(&self) -> u64 {
        percentile(&self.latencies, 50.0)
    }

    fn per_pair(&self, calls: u64) -> f64 {
        calls as f64 / self.tp_pairs.max(1) as f64
    }

    /// `name=calls/pair` for every command, most called first.
    fn breakdown(&self) -> String {
        let mut entries: Vec<(&String, u64)> = self.commands.0.iter().map(|(n, s)| (n, s.calls)).collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        entries
            .iter()
            .map(|(name, calls)| format!("{name}={}", trim(self.per_pair(*calls))))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Two decimals without trailing zeros: `2`, `1.5`, `0.01`.
fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: hotpath [--seconds N] [--tasks N] [--pairs N] [--held N] [--only a,b]");
        println!("contenders: {}", Contender::ALL.map(Contender::name).join(", "));
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    let versus = versus_from_args(&args)?;
    println!("# hotpath: try_lock + unlock on distinct keys, leasehold against its peers");
    println!("rerun: {}", rerun_command("hotpath"));
    let target = Target::from_env();
    let url = target.url().to_owned();

    let leasehold = Client::builder().url(&url).connect().await?;
    let leasehold_lean = Client::builder().url(&url).redisson_waiters(false).connect().await?;
    let mut builder = Builder::from_config(Config::from_url(&url)?);
    builder.set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
    let fred = builder.build()?;
    fred.init().await?;
    print_machine(&fred, &target).await?;
    let compare_and_delete: String = fred.script_load(COMPARE_AND_DELETE).await?;
    let trivial: String = fred.script_load(TRIVIAL).await?;
    let acquire_lua: String = fred.script_load(ACQUIRE_LUA).await?;
    let release_lua: String = fred.script_load(RELEASE_LUA).await?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let ctx = Arc::new(Ctx {
        leasehold,
        leasehold_lean,
        fred: fred.clone(),
        // Connects on first use, one multiplexed connection.
        rslock: rslock::LockManager::new(vec![url.clone()]),
        compare_and_delete,
        trivial,
        acquire_lua,
        release_lua,
        owner_prefix: format!("{}-{nanos:x}", std::process::id()),
        owners: AtomicU64::new(0),
    });
    println!(
        "settings: throughput {:?} with {} tasks, {} sequential pairs for latency, {} locks held for memory; fixed lease {:?}",
        settings.run_for, settings.tasks, settings.pairs, settings.held, LEASE
    );
    println!("keys: a fresh key per pair, lock:order:<contender tag>:<task>:<n> (no contention); held: lock:order:<tag>:held:<i>");
    if !target.is_own() {
        println!("note: REDIS_URL is set, so nothing is flushed: earlier contenders' keys expire during later ones");
    }

    if let Some(versus) = versus {
        return run_versus(&ctx, &versus, &settings, &target).await;
    }

    let mut outcomes: Vec<(Contender, Outcome)> = Vec::new();
    let mut failed = false;
    for &contender in &settings.contenders {
        println!();
        println!("## {} — {}", contender.name(), contender.describe());
        reset(&fred, &target).await?;
        if contender == Contender::LeaseholdMetrics {
            metrics::set_global_recorder(AtomicRecorder).map_err(|_| "a metrics recorder was installed already")?;
        }
        match measure(&ctx, contender, &settings, &target).await {
            Ok(mut outcome) => {
                print_details(contender, &outcome, &settings);
                if contender == Contender::LeaseholdMetrics {
                    let (acquires, holds) =
                        (recorded("leasehold_acquire_duration_seconds"), recorded("leasehold_hold_duration_seconds"));
                    println!("metrics recorded: {acquires} acquire durations, {holds} hold durations");
                    if acquires == 0 || holds == 0 {
                        outcome.problems.push("the recorder got no acquire or hold durations".to_owned());
                    }
                }
                for problem in &outcome.problems {
                    println!("INVARIANT BROKEN: {problem}");
                    failed = true;
                }
                outcomes.push((contender, outcome));
            }
            Err(error) => {
                println!("RUN FAILED (invariant broken): {error}");
                failed = true;
            }
        }
    }
    reset(&fred, &target).await?;

    println!();
    println!("## summary (times in ms; CPU in µs of Redis used_cpu_sys + used_cpu_user)");
    print_summary(&outcomes, &settings);
    print_ratios(&outcomes, &settings);
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The recorder of `leasehold-metrics`: every metric into an atomic registry, the
/// storage exporters such as `metrics-exporter-prometheus` keep (a histogram is an
/// `AtomicBucket`, a counter and a gauge an `AtomicU64`).
struct AtomicRecorder;

/// [`AtomicRecorder`]'s storage, read back after the contender.
static REGISTRY: LazyLock<Registry<Key, AtomicStorage>> = LazyLock::new(Registry::atomic);

/// How many values the histograms named `name` hold (every label set).
fn recorded(name: &str) -> usize {
    let mut values = 0;
    REGISTRY.visit_histograms(|key, bucket| {
        if key.name() == name {
            values += bucket.data().len();
        }
    });
    values
}

impl metrics::Recorder for AtomicRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        REGISTRY.get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        REGISTRY.get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        REGISTRY.get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
    }
}

/// The `--versus` comparison: two contenders, alternating blocks.
#[derive(Debug, Clone, Copy)]
struct Versus {
    sides: [Contender; 2],
    blocks: usize,
    block: Duration,
}

fn versus_from_args(args: &[String]) -> Result<Option<Versus>, BoxError> {
    let Some(list) = flag::<String>(args, "--versus")? else { return Ok(None) };
    let find = |name: &str| {
        Contender::ALL
            .into_iter()
            .find(|c| c.name() == name.trim())
            .ok_or_else(|| format!("--versus: unknown contender {name:?}"))
    };
    let (a, b) = list.split_once(',').ok_or("--versus takes two contenders, a,b")?;
    let (a, b) = (find(a)?, find(b)?);
    if a == b || a == Contender::LeaseholdMetrics || b == Contender::LeaseholdMetrics {
        return Err("--versus: two different contenders, not leasehold-metrics".into());
    }
    let blocks = flag(args, "--blocks")?.unwrap_or(12);
    let block = Duration::from_millis(flag(args, "--block-ms")?.unwrap_or(800));
    if blocks == 0 || block.is_zero() {
        return Err("--blocks and --block-ms must be above 0".into());
    }
    Ok(Some(Versus { sides: [a, b], blocks, block }))
}

/// The median of `values` (not empty).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// What one block of a `--versus` side measured.
#[derive(Debug, Clone, Copy, Default)]
struct BlockRate {
    pairs_per_sec: f64,
    /// This process's CPU (every thread, `schedstat`) per pair, µs.
    client_cpu_us: f64,
    /// Redis's CPU (`INFO cpu`) per pair, µs.
    redis_cpu_us: f64,
}

/// One block of `contender`: `tasks` tasks, fresh keys, for `length`: pairs/s and the
/// client's and the server's CPU per pair (read outside the timed window).
async fn block(
    ctx: &Arc<Ctx>,
    contender: Contender,
    tasks: usize,
    length: Duration,
    round: usize,
) -> Result<BlockRate, BoxError> {
    let redis_before = redis_cpu_us(&ctx.fred).await?;
    let client_before = threads_cpu_ns();
    let start = Instant::now();
    let end = start + length;
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            let mut n = 0_u64;
            while Instant::now() < end {
                let key = format!("lock:order:{}:{round}:{task}:{n}", contender.tag());
                let held = acquire(&ctx, contender, key).await?;
                release(&ctx, held).await?;
                n += 1;
            }
            Ok::<u64, BoxError>(n)
        }));
    }
    let pairs: u64 = join_all(handles).await.map_err(|error| format!("a block task failed: {error}"))?.iter().sum();
    let elapsed = start.elapsed();
    let client_ns = threads_cpu_ns().saturating_sub(client_before);
    let redis_us = redis_cpu_us(&ctx.fred).await? - redis_before;
    let per_pair = pairs.max(1) as f64;
    Ok(BlockRate {
        pairs_per_sec: pairs as f64 / elapsed.as_secs_f64(),
        client_cpu_us: client_ns as f64 / 1000.0 / per_pair,
        redis_cpu_us: redis_us / per_pair,
    })
}

/// The CPU time of every thread of this process so far (the first field of each
/// `/proc/self/task/*/schedstat`: ns on the CPU, exact where `/proc/self/stat` counts
/// 10 ms ticks); 0 when unreadable. Threads that ended are not counted: the runtime's
/// workers live for the whole run.
fn threads_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()))
        .sum()
}

/// Runs `versus`: warm-up of both sides, then alternating blocks; prints each block, the
/// medians and the ratio, and checks that nothing is left held.
async fn run_versus(
    ctx: &Arc<Ctx>,
    versus: &Versus,
    settings: &Settings,
    target: &Target,
) -> Result<ExitCode, BoxError> {
    let [a, b] = versus.sides;
    println!(
        "versus: {} against {}, {} blocks of {:?} per side, alternating, {} tasks",
        a.name(),
        b.name(),
        versus.blocks,
        versus.block,
        settings.tasks
    );
    reset(&ctx.fred, target).await?;
    for contender in versus.sides {
        for i in 0..WARMUP_PAIRS {
            let held = acquire(ctx, contender, format!("lock:order:{}:warm:{i}", contender.tag())).await?;
            release(ctx, held).await?;
        }
    }
    let (mut rates_a, mut rates_b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..versus.blocks {
        // a first in rounds 0, 3, 4, 7, 8, ...; b first in 1, 2, 5, 6, ...: each side
        // leads as often, and the order of neighbouring rounds mirrors.
        let a_first = matches!(round % 4, 0 | 3);
        let order = if a_first { [a, b] } else { [b, a] };
        let mut rate = [BlockRate::default(); 2];
        for contender in order {
            let r = block(ctx, contender, settings.tasks, versus.block, round).await?;
            rate[usize::from(contender == b)] = r;
        }
        println!(
            "block {round:>2}: {} {:>9.0} pairs/s ({:.2} / {:.2} µs client / redis CPU per pair), {} {:>9.0} pairs/s ({:.2} / {:.2}), ratio {:.3}",
            a.name(),
            rate[0].pairs_per_sec,
            rate[0].client_cpu_us,
            rate[0].redis_cpu_us,
            b.name(),
            rate[1].pairs_per_sec,
            rate[1].client_cpu_us,
            rate[1].redis_cpu_us,
            rate[0].pairs_per_sec / rate[1].pairs_per_sec
        );
        rates_a.push(rate[0]);
        rates_b.push(rate[1]);
        ratios.push(rate[0].pairs_per_sec / rate[1].pairs_per_sec);
    }
    let mut held_left = 0;
    for contender in versus.sides {
        if contender.holds_keys() {
            held_left += count_keys(&ctx.fred, &format!("lock:order:{}:*", contender.tag())).await?;
        }
    }
    let med = |rates: &[BlockRate], field: fn(&BlockRate) -> f64| median(&rates.iter().map(field).collect::<Vec<_>>());
    let (pps_a, pps_b) = (med(&rates_a, |r| r.pairs_per_sec), med(&rates_b, |r| r.pairs_per_sec));
    println!(
        "median: {} {:.0} pairs/s, {} {:.0} pairs/s; ratio of medians {:.3}; median of per-block ratios {:.3}",
        a.name(),
        pps_a,
        b.name(),
        pps_b,
        pps_a / pps_b,
        median(&ratios)
    );
    println!(
        "median CPU per pair: {} {:.2} µs client, {:.2} µs redis; {} {:.2} µs client, {:.2} µs redis (client: every thread of this process while the side ran)",
        a.name(),
        med(&rates_a, |r| r.client_cpu_us),
        med(&rates_a, |r| r.redis_cpu_us),
        b.name(),
        med(&rates_b, |r| r.client_cpu_us),
        med(&rates_b, |r| r.redis_cpu_us)
    );
    reset(&ctx.fred, target).await?;
    if held_left > 0 {
        println!("INVARIANT BROKEN: {held_left} locks still held after every pair was released");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `FLUSHALL` (own server only), `CONFIG RESETSTAT`, and a moment for the server.
async fn reset(fred: &FredClient, target: &Target) -> Result<(), BoxError> {
    if target.is_own() {
        flushall(fred).await?;
    }
    let command = CustomCommand::new_static("CONFIG", ClusterHash::Random, false);
    let _: String = fred.custom(command, vec!["RESETSTAT"]).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

async fn measure(
    ctx: &Arc<Ctx>,
    contender: Contender,
    settings: &Settings,
    target: &Target,
) -> Result<Outcome, BoxError> {
    let mut out = Outcome::default();
    let fred = &ctx.fred;
    // Warm-up: scripts loaded (rslock loads its own on the first NOSCRIPT), connections used.
    for i in 0..WARMUP_PAIRS {
        let held = acquire(ctx, contender, format!("lock:order:{}:warm:{i}", contender.tag())).await?;
        release(ctx, held).await?;
    }

    // Throughput: `tasks` tasks, a fresh key per pair, until the run time is over.
    let commands_before = CommandStats::fetch(fred).await?;
    let cpu_before = redis_cpu_us(fred).await?;
    let proc_before = process_cpu_us();
    let start = Instant::now();
    let end = start + settings.run_for;
    let mut handles = Vec::with_capacity(settings.tasks);
    for task in 0..settings.tasks {
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            let mut n = 0_u64;
            while Instant::now() < end {
                let held = acquire(&ctx, contender, pair_key(contender, task, n)).await?;
                release(&ctx, held).await?;
                n += 1;
            }
            Ok::<u64, BoxError>(n)
        }));
    }
    let pairs = join_all(handles).await;
    out.tp_wall = start.elapsed();
    out.tp_pairs += pairs.map_err(|error| format!("a throughput task failed: {error}"))?.iter().sum::<u64>();
    out.tp_proc_cpu_us = process_cpu_us() - proc_before;
    out.tp_cpu_us = redis_cpu_us(fred).await? - cpu_before;
    out.commands = CommandStats::fetch(fred).await?.since(&commands_before);

    // Latency: one task, sequential pairs, each timed.
    let cpu_before = redis_cpu_us(fred).await?;
    let mut latencies = Vec::with_capacity(settings.pairs);
    for i in 0..settings.pairs {
        let n = i as u64;
        let key = pair_key(contender, settings.tasks, n);
        let started = Instant::now();
        let held = acquire(ctx, contender, key).await?;
        release(ctx, held).await?;
        latencies.push(micros(started.elapsed()));
    }
    out.lat_cpu_us = redis_cpu_us(fred).await? - cpu_before;
    latencies.sort_unstable();
    out.latencies = latencies;

    out.keys_left = dbsize(fred).await?;
    out.held_left = count_keys(fred, &format!("lock:order:{}:*", contender.tag())).await?;
    if contender.holds_keys() && out.held_left > 0 {
        out.problems.push(format!("{} locks still held after every pair was released", out.held_left));
    }

    if contender.holds_keys() {
        measure_memory(ctx, contender, settings, target, &mut out).await?;
    }
    Ok(out)
}

/// Holds `settings.held` locks at once (acquired by `settings.tasks` tasks), and reads
/// `used_memory` and `DBSIZE` before and while holding; then releases them all.
async fn measure_memory(
    ctx: &Arc<Ctx>,
    contender: Contender,
    settings: &Settings,
    target: &Target,
    out: &mut Outcome,
) -> Result<(), BoxError> {
    let fred = &ctx.fred;
    if target.is_own() {
        // Leftovers of the pairs (before issue 9, leasehold's unlock latches) would expire while we
        // measure: drop them, and see what they took.
        let with_leftovers = used_memory(fred).await?;
        flushall(fred).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        out.leftover_bytes = Some(with_leftovers.saturating_sub(used_memory(fred).await?));
    }
    let memory_before = used_memory(fred).await?;
    let keys_before = dbsize(fred).await?;
    let tasks = settings.tasks.min(settings.held);
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let ctx = ctx.clone();
        let (tasks, held) = (tasks, settings.held);
        handles.push(tokio::spawn(async move {
            let mut guards = Vec::new();
            for i in (task..held).step_by(tasks) {
                let key = format!("lock:order:{}:held:{i}", contender.tag());
                guards.push(acquire(&ctx, contender, key).await?);
            }
            Ok::<Vec<Held>, BoxError>(guards)
        }));
    }
    let all: Vec<Vec<Held>> =
        join_all(handles).await.map_err(|error| format!("acquiring the held locks failed: {error}"))?;
    let memory_holding = used_memory(fred).await?;
    let keys_holding = dbsize(fred).await?;
    out.mem_delta = Some((
        i64::try_from(memory_holding)? - i64::try_from(memory_before)?,
        i64::try_from(keys_holding)? - i64::try_from(keys_before)?,
    ));
    let mut handles = Vec::with_capacity(all.len());
    for guards in all {
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            for held in guards {
                release(&ctx, held).await?;
            }
            Ok::<(), BoxError>(())
        }));
    }
    for handle in handles {
        handle.await.map_err(|e| format!("release task: {e}"))??;
    }
    out.mem_held_left = count_keys(fred, &format!("lock:order:{}:held:*", contender.tag())).await?;
    if out.mem_held_left > 0 {
        out.problems
            .push(format!("{} of the {} held locks still held after their release", out.mem_held_left, settings.held));
    }
    Ok(())
}

/// This process's CPU time so far (`utime + stime` of `/proc/self/stat`, in clock ticks
/// of 10 ms: `USER_HZ` is 100 on Linux), µs; 0 when unreadable.
fn process_cpu_us() -> f64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let Some((_, rest)) = text.rsplit_once(')') else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 * 10_000.0
}

/// Redis's CPU time so far (`used_cpu_sys + used_cpu_user` of `INFO cpu`), µs.
async fn redis_cpu_us(fred: &FredClient) -> Result<f64, BoxError> {
    let text = info(fred, InfoKind::Cpu).await?;
    let field = |name: &str| -> Result<f64, BoxError> {
        Ok(info_field(&text, name)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("INFO cpu has no {name}"))?)
    };
    Ok((field("used_cpu_sys")? + field("used_cpu_user")?) * 1_000_000.0)
}

async fn used_memory(fred: &FredClient) -> Result<u64, BoxError> {
    let text = info(fred, InfoKind::Memory).await?;
    Ok(info_field(&text, "used_memory").and_then(|v| v.parse().ok()).ok_or("INFO memory has no used_memory")?)
}

async fn flushall(fred: &FredClient) -> Result<(), BoxError> {
    let command = CustomCommand::new_static("FLUSHALL", ClusterHash::Random, false);
    let _: String = fred.custom(command, vec!["SYNC"]).await?;
    Ok(())
}

/// The number of distinct keys matching `pattern` (`SCAN … MATCH`).
async fn count_keys(fred: &FredClient, pattern: &str) -> Result<u64, BoxError> {
    let mut seen = HashSet::new();
    let mut cursor = "0".to_owned();
    loop {
        let command = CustomCommand::new_static("SCAN", ClusterHash::Random, false);
        let args = vec![cursor.clone(), "MATCH".to_owned(), pattern.to_owned(), "COUNT".to_owned(), "1000".to_owned()];
        let (next, keys): (String, Vec<String>) = fred.custom(command, args).await?;
        seen.extend(keys);
        if next == "0" {
            return Ok(seen.len() as u64);
        }
        cursor = next;
    }
}

fn memory_cells(contender: Contender, out: &Outcome, held: usize) -> (String, String) {
    match out.mem_delta {
        Some((bytes, keys)) => (format!("{:.0}", bytes as f64 / held as f64), trim(keys as f64 / held as f64)),
        None if !contender.holds_keys() => ("–".to_owned(), "–".to_owned()),
        None => ("?".to_owned(), "?".to_owned()),
    }
}

fn print_details(contender: Contender, out: &Outcome, settings: &Settings) {
    println!(
        "throughput: {} pairs by {} tasks in {:.2} s = {:.0} pairs/s (pairs started before {:?} complete)",
        out.tp_pairs,
        settings.tasks,
        out.tp_wall.as_secs_f64(),
        out.pairs_per_sec(),
        settings.run_for
    );
    println!(
        "latency ({} sequential pairs, one task): p50 {} ms, p99 {} ms, max {} ms",
        out.latencies.len(),
        ms(out.p50()),
        ms(percentile(&out.latencies, 99.0)),
        ms(out.latencies.last().copied().unwrap_or(0))
    );
    println!(
        "redis commands (throughput phase, INFO excluded, in-script included): {} = {:.2}/pair: {}",
        out.commands.total_calls(),
        out.per_pair(out.commands.total_calls()),
        out.breakdown()
    );
    println!(
        "redis CPU: {:.2} µs/pair with {} tasks ({:.0} µs in all), {:.2} µs/pair sequential ({:.0} µs)",
        out.cpu_per_pair(),
        settings.tasks,
        out.tp_cpu_us,
        out.lat_cpu_per_pair(),
        out.lat_cpu_us
    );
    println!(
        "bench process CPU (client side, all contenders' code in this process): {:.2} µs/pair with {} tasks",
        out.proc_cpu_per_pair(),
        settings.tasks
    );
    println!(
        "after both phases: DBSIZE {}, locks still held {}{}",
        out.keys_left,
        out.held_left,
        out.leftover_bytes.map_or_else(String::new, |b| format!(", used_memory freed by FLUSHALL {b} B"))
    );
    if let Some((bytes, keys)) = out.mem_delta {
        let (per_lock, keys_per_lock) = memory_cells(contender, out, settings.held);
        println!(
            "holding {} locks: used_memory +{bytes} B ({per_lock} B per lock), DBSIZE +{keys} ({keys_per_lock} keys per lock); still held after releasing them: {}",
            settings.held, out.mem_held_left
        );
    }
}

fn print_summary(outcomes: &[(Contender, Outcome)], settings: &Settings) {
    let mut header = vec!["metric".to_owned()];
    header.extend(outcomes.iter().map(|(c, _)| c.name().to_owned()));
    let row = |name: String, cell: &dyn Fn(Contender, &Outcome) -> String| -> Vec<String> {
        let mut cells = vec![name];
        cells.extend(outcomes.iter().map(|(c, o)| cell(*c, o)));
        cells
    };
    let rows = vec![
        row(format!("pairs/s ({} tasks, {} s)", settings.tasks, settings.run_for.as_secs()), &|_, o| {
            format!("{:.0}", o.pairs_per_sec())
        }),
        row(format!("pair p50 / p99 (1 task, {})", settings.pairs), &|_, o| {
            format!("{} / {}", ms(o.p50()), ms(percentile(&o.latencies, 99.0)))
        }),
        row("redis commands / pair (all)".to_owned(), &|_, o| format!("{:.2}", o.per_pair(o.commands.total_calls()))),
        row("  of which evalsha / pair".to_owned(), &|_, o| format!("{:.2}", o.per_pair(o.commands.calls("evalsha")))),
        row(format!("redis CPU µs / pair ({} tasks)", settings.tasks), &|_, o| format!("{:.2}", o.cpu_per_pair())),
        row("redis CPU µs / pair (1 task)".to_owned(), &|_, o| format!("{:.2}", o.lat_cpu_per_pair())),
        row(format!("bench process CPU µs / pair ({} tasks)", settings.tasks), &|_, o| {
            format!("{:.2}", o.proc_cpu_per_pair())
        }),
        row("keys left / locks held after".to_owned(), &|_, o| format!("{} / {}", o.keys_left, o.held_left)),
        row("used_memory of the keys left (B)".to_owned(), &|c, o| match o.leftover_bytes {
            Some(bytes) => bytes.to_string(),
            None if !c.holds_keys() => "–".to_owned(),
            None => "?".to_owned(),
        }),
        row(format!("used_memory B / held lock ({})", settings.held), &|c, o| memory_cells(c, o, settings.held).0),
        row("keys / held lock".to_owned(), &|c, o| memory_cells(c, o, settings.held).1),
    ];
    print_table(&header, &rows);
    println!("commands per pair (throughput phase):");
    for (contender, outcome) in outcomes {
        println!("  {:<18} {}", contender.name(), outcome.breakdown());
    }
}

/// The three targets, printed (nothing asserted).
fn print_ratios(outcomes: &[(Contender, Outcome)], settings: &Settings) {
    let find = |c: Contender| outcomes.iter().find(|(x, _)| *x == c).map(|(_, o)| o);
    println!("targets of issue 9 (printed, not asserted):");
    let (floor, setnx, rslock) = (find(Contender::Floor), find(Contender::SetNx), find(Contender::Rslock));
    for leasehold in
        [Contender::LeaseholdWatchdog, Contender::LeaseholdLease, Contender::LeaseholdLean, Contender::LeaseholdWait]
    {
        let Some(lh) = find(leasehold) else { continue };
        let name = leasehold.name();
        if let Some(floor) = floor {
            println!(
                "  {name} pair p50 / floor p50 = {} / {} ms = {:.2} (target <= 1.10)",
                ms(lh.p50()),
                ms(floor.p50()),
                lh.p50() as f64 / floor.p50().max(1) as f64
            );
        }
        if let Some(setnx) = setnx {
            println!(
                "  {name} Redis CPU per pair / setnx's = {:.2} / {:.2} µs = {:.2}x with {} tasks; sequential {:.2} / {:.2} µs = {:.2}x (target <= 2x)",
                lh.cpu_per_pair(),
                setnx.cpu_per_pair(),
                lh.cpu_per_pair() / setnx.cpu_per_pair().max(f64::MIN_POSITIVE),
                settings.tasks,
                lh.lat_cpu_per_pair(),
                setnx.lat_cpu_per_pair(),
                lh.lat_cpu_per_pair() / setnx.lat_cpu_per_pair().max(f64::MIN_POSITIVE)
            );
        }
        if let Some(rslock) = rslock {
            println!(
                "  {name} pairs/s / rslock's = {:.0} / {:.0} = {:.2} (target >= 1)",
                lh.pairs_per_sec(),
                rslock.pairs_per_sec(),
                lh.pairs_per_sec() / rslock.pairs_per_sec().max(f64::MIN_POSITIVE)
            );
        }
        if let Some(scripts) = find(Contender::Scripts) {
            println!(
                "  {name} against its own scripts through plain fred: pair p50 {} / {} ms = {:.2}, bench CPU per pair {:.2} / {:.2} µs = {:.2}, pairs/s {:.0} / {:.0} = {:.2} (not a target)",
                ms(lh.p50()),
                ms(scripts.p50()),
                lh.p50() as f64 / scripts.p50().max(1) as f64,
                lh.proc_cpu_per_pair(),
                scripts.proc_cpu_per_pair(),
                lh.proc_cpu_per_pair() / scripts.proc_cpu_per_pair().max(f64::MIN_POSITIVE),
                lh.pairs_per_sec(),
                scripts.pairs_per_sec(),
                lh.pairs_per_sec() / scripts.pairs_per_sec().max(f64::MIN_POSITIVE)
            );
        }
    }
    // Issue 17 item 2: the simple lock against rslock, pair for pair the same algorithm.
    if let (Some(simple), Some(rslock)) = (find(Contender::Simple), rslock) {
        println!(
            "  simple pairs/s / rslock's = {:.0} / {:.0} = {:.2} (target >= 0.95); server calls per pair {:.2} / {:.2} (target 4)",
            simple.pairs_per_sec(),
            rslock.pairs_per_sec(),
            simple.pairs_per_sec() / rslock.pairs_per_sec().max(f64::MIN_POSITIVE),
            simple.per_pair(simple.commands.total_calls()),
            rslock.per_pair(rslock.commands.total_calls())
        );
    }
}
