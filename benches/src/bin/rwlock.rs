//! `rwlock`: the read/write lock's figures (issue 18 item 6), as ratios in one run
//! against one server.
//!
//! 1. **Uncontended pairs** on distinct keys, `--tasks` tasks × `--pairs` pairs each:
//!    - `leasehold-read`: `rw.try_read()` + `guard.unlock()` (watchdog mode);
//!    - `leasehold-write`: `rw.try_write()` + `guard.unlock()` (watchdog mode);
//!    - `redisson-read`: Redisson 4.7's `RedissonReadLock` acquire and unlock scripts
//!      (`leasehold_test_support::redisson_rwlock`, shared with `tests/rw_interop.rs`)
//!      through bare fred `EVALSHA`, with the KEYS and ARGV Redisson sends (lease 30 s,
//!      owner `id:tid`), then the `DEL` of the unlock latch Redisson sends after every
//!      unlock;
//!    - `redisson-write`: the same for `RedissonWriteLock`.
//!
//!    Per pair: server commands (`INFO commandstats` delta, commands run inside scripts
//!    included, `INFO` excluded) and Redis CPU (`INFO cpu` `used_cpu_sys +
//!    used_cpu_user` delta). Target: leasehold's no more than Redisson's.
//! 2. **One hand-off** (2a): a reader on one client releases, a writer waiting on the
//!    other gets in; 20 tries, the p50 is "one hand-off" below.
//!    **Readers and a writer**: 8 reader tasks (4 per client, 2 clients, each its own
//!    handle) cycle `read()`, hold `--hold-ms` (a tokio sleep), `unlock()`, for
//!    `--seconds`; one writer task cycles `write()`, hold 1 ms, `unlock()`, pause
//!    `--writer-pause-ms`: once on the second client (sharing it with 4 readers, the
//!    issue's shape), once on a third client of its own (a diagnostic). Figures: the
//!    writer's wait (from the call to the guard) p50/p99/max, the longest read hold
//!    (guard to `unlock()` returned), the last read release to the writer's guard.
//!    Target: writer wait p99 <= 2 × (longest read hold + 2a's hand-off p50).
//! 3. **64 readers behind a writer**: a writer holds the lock, 64 readers (32 per client,
//!    each its own handle) call `read()` and queue; the writer's `unlock()`; each reader's
//!    time from the `unlock()` call (and from its return) to its guard, in round trips
//!    (one round trip = the PING p50 on that reader's client, measured just before).
//!    `--rounds` rounds. Target: every reader in within 3 round trips of the release.
//!
//! Exits with 1 only when an invariant breaks: an uncontended acquire that does not
//! acquire, a release that does not release, a failed call, a reader and the writer
//! inside at once, a reader in before the writer released, keys left behind.
//!
//! Flags: `--pairs N` (2000 per task), `--tasks N` (8), `--seconds N` (5), `--hold-ms N`
//! (3), `--writer-pause-ms N` (20), `--readers N` (64), `--rounds N` (5). `REDIS_URL`
//! selects a server (it must be otherwise idle for the CPU figures); without it a
//! throwaway `redis-server` is started.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fred::prelude::{
    Builder, Client as FredClient, ClientLike, Config, EventInterface, KeysInterface, LuaInterface, PubsubInterface,
    ReconnectPolicy,
};
use fred::types::{ClusterHash, CustomCommand, InfoKind, Value};
use leasehold::Client;
use leasehold_benches::{
    check_flags, dbsize, flag, info, info_field, join_all, micros, ms, percentile, ping_rtts, print_machine,
    print_table, rerun_command, BoxError, CommandStats, Target,
};
use leasehold_test_support::redisson_rwlock::{
    REDISSON_READ_ACQUIRE, REDISSON_READ_UNLOCK, REDISSON_WRITE_ACQUIRE, REDISSON_WRITE_UNLOCK,
};

const FLAGS: &[&str] =
    &["--pairs", "--tasks", "--seconds", "--hold-ms", "--writer-pause-ms", "--readers", "--rounds", "--part"];
/// Redisson's default lease (its watchdog timeout), sent by the Redisson contenders.
const REDISSON_LEASE_MS: &str = "30000";
/// The latch TTL Redisson's unlock scripts get (its default timeout × retries, about).
const LATCH_TTL_MS: &str = "20000";
/// Sequential pairs before each contender's measurement (scripts loaded, connections warm).
const WARMUP_PAIRS: usize = 50;
/// A Redisson client id (`ServiceManager.id`); the thread id follows after a colon.
const REDISSON_ID: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

#[derive(Debug, Clone)]
struct Settings {
    pairs: usize,
    tasks: usize,
    run_for: Duration,
    hold: Duration,
    writer_pause: Duration,
    readers: usize,
    rounds: usize,
    /// `--part N`: run part N only (1 to 4; its summary lines too); 0 (the default): all.
    part: usize,
}

impl Settings {
    /// Whether part `n` runs.
    fn runs(&self, n: usize) -> bool {
        self.part == 0 || self.part == n
    }
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let settings = Settings {
            pairs: flag(args, "--pairs")?.unwrap_or(2000),
            tasks: flag(args, "--tasks")?.unwrap_or(8),
            run_for: Duration::from_secs(flag(args, "--seconds")?.unwrap_or(5)),
            hold: Duration::from_millis(flag(args, "--hold-ms")?.unwrap_or(3)),
            writer_pause: Duration::from_millis(flag(args, "--writer-pause-ms")?.unwrap_or(20)),
            readers: flag(args, "--readers")?.unwrap_or(64),
            rounds: flag(args, "--rounds")?.unwrap_or(5),
            part: flag(args, "--part")?.unwrap_or(0),
        };
        if settings.part > 4 {
            return Err("--part is 1 to 4 (0: all)".into());
        }
        if settings.pairs == 0
            || settings.tasks == 0
            || settings.run_for.is_zero()
            || settings.readers == 0
            || settings.rounds == 0
        {
            return Err("--pairs, --tasks, --seconds, --readers and --rounds must be above 0".into());
        }
        Ok(settings)
    }
}

/// The uncontended contenders of part 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    LeaseholdRead,
    LeaseholdWrite,
    RedissonRead,
    RedissonWrite,
}

impl Contender {
    const ALL: [Contender; 4] =
        [Contender::LeaseholdRead, Contender::RedissonRead, Contender::LeaseholdWrite, Contender::RedissonWrite];

    fn name(self) -> &'static str {
        match self {
            Contender::LeaseholdRead => "leasehold-read",
            Contender::LeaseholdWrite => "leasehold-write",
            Contender::RedissonRead => "redisson-read",
            Contender::RedissonWrite => "redisson-write",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Contender::LeaseholdRead => "leasehold rw.try_read() + unlock() (watchdog mode)",
            Contender::LeaseholdWrite => "leasehold rw.try_write() + unlock() (watchdog mode)",
            Contender::RedissonRead => "Redisson 4.7 read acquire + read unlock scripts (EVALSHA) + DEL latch",
            Contender::RedissonWrite => "Redisson 4.7 write acquire + write unlock scripts (EVALSHA) + DEL latch",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Contender::LeaseholdRead => "lr",
            Contender::LeaseholdWrite => "lw",
            Contender::RedissonRead => "rr",
            Contender::RedissonWrite => "rw",
        }
    }
}

/// The loaded Redisson script hashes.
struct Scripts {
    read_acquire: String,
    read_unlock: String,
    write_acquire: String,
    write_unlock: String,
}

/// One pair of `contender` on the fresh lock `name`, by task `task`; `n` numbers the
/// latch.
async fn pair(
    leasehold: &Client,
    fred: &FredClient,
    scripts: &Scripts,
    contender: Contender,
    name: &str,
    task: usize,
    n: u64,
) -> Result<(), BoxError> {
    match contender {
        Contender::LeaseholdRead => {
            let guard = leasehold.read_write_lock(name).try_read().await?;
            guard.ok_or_else(|| format!("try_read() did not acquire the distinct key {name}"))?.unlock().await?;
        }
        Contender::LeaseholdWrite => {
            let guard = leasehold.read_write_lock(name).try_write().await?;
            guard.ok_or_else(|| format!("try_write() did not acquire the distinct key {name}"))?.unlock().await?;
        }
        Contender::RedissonRead => {
            let owner = format!("{REDISSON_ID}:{task}");
            let prefix = format!("{{{name}}}:{owner}:rwlock_timeout");
            let args = vec![REDISSON_LEASE_MS.to_owned(), owner.clone(), format!("{owner}:write")];
            let reply: Value =
                fred.evalsha(scripts.read_acquire.as_str(), vec![name.to_owned(), prefix.clone()], args).await?;
            if !reply.is_null() {
                return Err(format!("Redisson's read acquire did not acquire {name}: {reply:?}").into());
            }
            let latch = format!("redisson_unlock_latch:{{{name}}}:{task:08x}{n:024x}");
            let keys = vec![
                name.to_owned(),
                format!("redisson_rwlock:{{{name}}}"),
                prefix,
                format!("{{{name}}}"),
                latch.clone(),
            ];
            let args = vec!["0".to_owned(), owner, "publish".to_owned(), LATCH_TTL_MS.to_owned()];
            let released: Value = fred.evalsha(scripts.read_unlock.as_str(), keys, args).await?;
            if released.as_i64() != Some(1) {
                return Err(format!("Redisson's read unlock of {name} answered {released:?}").into());
            }
            let _: i64 = fred.del(latch).await?;
        }
        Contender::RedissonWrite => {
            let writer = format!("{REDISSON_ID}:{task}:write");
            let args = vec![REDISSON_LEASE_MS.to_owned(), writer.clone()];
            let reply: Value = fred.evalsha(scripts.write_acquire.as_str(), vec![name.to_owned()], args).await?;
            if !reply.is_null() {
                return Err(format!("Redisson's write acquire did not acquire {name}: {reply:?}").into());
            }
            let latch = format!("redisson_unlock_latch:{{{name}}}:{task:08x}{n:024x}");
            let keys = vec![name.to_owned(), format!("redisson_rwlock:{{{name}}}"), latch.clone()];
            let args = vec![
                "1".to_owned(),
                REDISSON_LEASE_MS.to_owned(),
                writer,
                "publish".to_owned(),
                LATCH_TTL_MS.to_owned(),
            ];
            let released: Value = fred.evalsha(scripts.write_unlock.as_str(), keys, args).await?;
            if released.as_i64() != Some(1) {
                return Err(format!("Redisson's write unlock of {name} answered {released:?}").into());
            }
            let _: i64 = fred.del(latch).await?;
        }
    }
    Ok(())
}

/// What one contender of part 1 measured.
#[derive(Debug, Default)]
struct PairOutcome {
    pairs: u64,
    wall: Duration,
    commands: CommandStats,
    cpu_us: f64,
    /// Sorted pair latencies, µs.
    latencies: Vec<u64>,
    keys_left: u64,
}

impl PairOutcome {
    fn per_pair(&self, value: f64) -> f64 {
        value / self.pairs.max(1) as f64
    }

    fn commands_per_pair(&self) -> f64 {
        self.per_pair(self.commands.total_calls() as f64)
    }

    fn cpu_per_pair(&self) -> f64 {
        self.per_pair(self.cpu_us)
    }

    fn breakdown(&self) -> String {
        let mut entries: Vec<(&String, u64)> = self.commands.0.iter().map(|(n, s)| (n, s.calls)).collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        entries
            .iter()
            .map(|(name, calls)| format!("{name}={:.2}", self.per_pair(*calls as f64)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

async fn measure_pairs(
    leasehold: &Client,
    fred: &FredClient,
    scripts: &Arc<Scripts>,
    contender: Contender,
    settings: &Settings,
) -> Result<PairOutcome, BoxError> {
    for i in 0..WARMUP_PAIRS {
        pair(leasehold, fred, scripts, contender, &format!("rw:bench:{}:warm:{i}", contender.tag()), 0, i as u64)
            .await?;
    }
    let commands_before = CommandStats::fetch(fred).await?;
    let cpu_before = redis_cpu_us(fred).await?;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(settings.tasks);
    for task in 0..settings.tasks {
        let (leasehold, fred, scripts, pairs) = (leasehold.clone(), fred.clone(), scripts.clone(), settings.pairs);
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(pairs);
            for n in 0..pairs as u64 {
                let name = format!("rw:bench:{}:{task}:{n}", contender.tag());
                let started = Instant::now();
                pair(&leasehold, &fred, &scripts, contender, &name, task, n).await?;
                latencies.push(micros(started.elapsed()));
            }
            Ok::<Vec<u64>, BoxError>(latencies)
        }));
    }
    let mut out = PairOutcome::default();
    let latencies = join_all(handles).await;
    out.wall = start.elapsed();
    out.latencies = latencies?.concat();
    out.cpu_us = redis_cpu_us(fred).await? - cpu_before;
    out.commands = CommandStats::fetch(fred).await?.since(&commands_before);
    out.pairs = out.latencies.len() as u64;
    out.latencies.sort_unstable();
    out.keys_left = dbsize(fred).await?;
    Ok(out)
}

/// What part 2 measured.
#[derive(Debug, Default)]
struct MixedOutcome {
    /// Sorted writer waits, µs.
    writer_waits: Vec<u64>,
    /// Sorted read holds (guard to `unlock()` returned), µs.
    read_holds: Vec<u64>,
    /// Sorted hand-offs: the last read release returned → the writer's guard, µs
    /// (negative values, the writer in before the reader heard its release's reply,
    /// count as 0).
    handoffs: Vec<u64>,
    reads: u64,
    writes: u64,
    overlaps: u64,
    wall: Duration,
}

/// Part 2: 8 readers (half per client) cycling and 1 writer (second client).
async fn measure_mixed(
    clients: &[Client; 2],
    writer_client: &Client,
    name: &str,
    settings: &Settings,
) -> Result<MixedOutcome, BoxError> {
    const READERS: usize = 8;
    let readers_in = Arc::new(AtomicUsize::new(0));
    let writer_in = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let last_read_release = Arc::new(Mutex::new(None::<Instant>));
    let start = Instant::now();
    let end = start + settings.run_for;
    let mut readers = Vec::with_capacity(READERS);
    for r in 0..READERS {
        let rw = clients[r % 2].read_write_lock(name);
        let (readers_in, writer_in, overlaps, last) =
            (readers_in.clone(), writer_in.clone(), overlaps.clone(), last_read_release.clone());
        let hold = settings.hold;
        readers.push(tokio::spawn(async move {
            let mut holds = Vec::new();
            while Instant::now() < end {
                let guard = rw.read().await?;
                let got = Instant::now();
                readers_in.fetch_add(1, Ordering::SeqCst);
                if writer_in.load(Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(hold).await;
                if writer_in.load(Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                readers_in.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await?;
                let released = Instant::now();
                *last.lock().map_err(|_| "poisoned")? = Some(released);
                holds.push(micros(released - got));
            }
            Ok::<Vec<u64>, BoxError>(holds)
        }));
    }
    let writer = {
        let rw = writer_client.read_write_lock(name);
        let (readers_in, writer_in, overlaps, last) =
            (readers_in.clone(), writer_in.clone(), overlaps.clone(), last_read_release.clone());
        let pause = settings.writer_pause;
        tokio::spawn(async move {
            let (mut waits, mut handoffs) = (Vec::new(), Vec::new());
            // Let the readers get going first.
            tokio::time::sleep(pause).await;
            while Instant::now() < end {
                let asked = Instant::now();
                let guard = rw.write().await?;
                let got = Instant::now();
                writer_in.store(true, Ordering::SeqCst);
                if readers_in.load(Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                waits.push(micros(got - asked));
                if let Some(released) = *last.lock().map_err(|_| "poisoned")? {
                    handoffs.push(micros(got.saturating_duration_since(released)));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                if readers_in.load(Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                writer_in.store(false, Ordering::SeqCst);
                guard.unlock().await?;
                tokio::time::sleep(pause).await;
            }
            Ok::<(Vec<u64>, Vec<u64>), BoxError>((waits, handoffs))
        })
    };
    let mut out = MixedOutcome::default();
    for handle in readers {
        let holds = handle.await.map_err(|e| format!("reader task: {e}"))??;
        out.reads += holds.len() as u64;
        out.read_holds.extend(holds);
    }
    let (waits, handoffs) = writer.await.map_err(|e| format!("writer task: {e}"))??;
    out.wall = start.elapsed();
    out.writes = waits.len() as u64;
    out.writer_waits = waits;
    out.handoffs = handoffs;
    out.writer_waits.sort_unstable();
    out.read_holds.sort_unstable();
    out.handoffs.sort_unstable();
    out.overlaps = overlaps.load(Ordering::SeqCst);
    Ok(out)
}

/// One hand-off, alone: a reader on the first client holds, a writer on the second
/// waits (`write()`, queued), the reader's `unlock()`; µs from its return to the
/// writer's guard (0 when the writer got in first), sorted, over `times` tries.
async fn measure_handoff(clients: &[Client; 2], times: usize) -> Result<Vec<u64>, BoxError> {
    let mut handoffs = Vec::with_capacity(times);
    for i in 0..times {
        let name = format!("rw:bench:handoff:{i}");
        let reader = clients[0].read_write_lock(&name).read().await?;
        let waiting_before = clients[1].stats().waiters;
        let rw = clients[1].read_write_lock(&name);
        let writer = tokio::spawn(async move {
            let guard = rw.write().await?;
            Ok::<_, BoxError>((Instant::now(), guard))
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while clients[1].stats().waiters <= waiting_before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        reader.unlock().await?;
        let released = Instant::now();
        let (got, guard) = writer.await.map_err(|e| format!("writer task: {e}"))??;
        handoffs.push(micros(got.saturating_duration_since(released)));
        guard.unlock().await?;
    }
    handoffs.sort_unstable();
    Ok(handoffs)
}

/// What one round of part 3 measured.
#[derive(Debug, Default)]
struct WakeRound {
    /// Per reader: µs from the `unlock()` call to its guard, in round trips of its client.
    from_call_rtts: Vec<f64>,
    /// Per reader: the same from `unlock()` returned (negative: in before the reply).
    from_return_rtts: Vec<f64>,
    /// µs the `unlock()` call took.
    unlock_us: u64,
    /// Readers in before the writer's `unlock()` was called.
    early: usize,
    queued: usize,
    /// µs from the `unlock()` call to the first and to the last reader in.
    first_last_us: (u64, u64),
    /// The same per client: where the spread comes from (the message reaching each
    /// client, or the claims after it).
    per_client_us: Vec<(u64, u64)>,
    /// The PING p50 of each client, µs.
    rtt_us: Vec<u64>,
    /// The floor: the same readers' `try_read()`s sent all at once on a free lock, per
    /// reader the time from the start to its guard, in round trips, sorted.
    burst_rtts: Vec<f64>,
    /// Server calls from the `unlock()` call to the last reader in (the wake-up).
    wake_calls: CommandStats,
    /// Server calls from before the first reader's call to the last reader in.
    round_calls: CommandStats,
}

/// Part 3: `readers` readers (spread over the clients) queued behind a writer that
/// releases.
async fn measure_wake(
    clients: &[Client],
    fred: &FredClient,
    settings: &Settings,
    round: usize,
) -> Result<WakeRound, BoxError> {
    let name = format!("rw:bench:wake:{round}");
    let n = clients.len();
    // One round trip per client, just before.
    let mut rtt_us = Vec::with_capacity(n);
    for client in clients {
        rtt_us.push(percentile(&ping_rtts(client.fred(), 200).await?, 50.0).max(1));
    }
    let writer = clients[0].read_write_lock(&name).write().await?;
    let waiting_before: usize = clients.iter().map(|c| c.stats().waiters).sum();
    let round_before = CommandStats::fetch(fred).await?;
    let mut handles = Vec::with_capacity(settings.readers);
    for r in 0..settings.readers {
        let rw = clients[r % n].read_write_lock(&name);
        handles.push(tokio::spawn(async move {
            let guard = rw.read().await?;
            let got = Instant::now();
            Ok::<_, BoxError>((r % n, got, guard))
        }));
    }
    // Every reader queued (its first attempt answered "held"), within a deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut queued = 0;
    while Instant::now() < deadline {
        queued = clients.iter().map(|c| c.stats().waiters).sum::<usize>() - waiting_before;
        if queued >= settings.readers {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A little more, so that every queued reader is listening, not mid-call.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let wake_before = CommandStats::fetch(fred).await?;
    let called = Instant::now();
    writer.unlock().await?;
    let returned = Instant::now();
    let mut out = WakeRound { unlock_us: micros(returned - called), queued, ..WakeRound::default() };
    let (mut first, mut last) = (u64::MAX, 0);
    let mut per_client = vec![(u64::MAX, 0_u64); n];
    let mut guards = Vec::with_capacity(settings.readers);
    let mut arrivals = Vec::with_capacity(settings.readers);
    for handle in handles {
        arrivals.push(handle.await.map_err(|e| format!("reader task: {e}"))??);
    }
    let after = CommandStats::fetch(fred).await?;
    out.wake_calls = after.since(&wake_before);
    out.round_calls = after.since(&round_before);
    for (client, got, guard) in arrivals {
        let rtt = rtt_us[client] as f64;
        if got < called {
            out.early += 1;
        }
        let since_call = micros(got.saturating_duration_since(called));
        (first, last) = (first.min(since_call), last.max(since_call));
        per_client[client] = (per_client[client].0.min(since_call), per_client[client].1.max(since_call));
        out.from_call_rtts.push(since_call as f64 / rtt);
        let from_return = leasehold_benches::signed_nanos(returned, got) as f64 / 1000.0;
        out.from_return_rtts.push(from_return / rtt);
        guards.push(guard);
    }
    for guard in guards {
        guard.unlock().await?;
    }
    out.first_last_us = (first, last);
    out.per_client_us = per_client;
    out.burst_rtts = burst(clients, settings, &format!("rw:bench:burst:{round}"), &rtt_us).await?;
    out.rtt_us = rtt_us;
    out.from_call_rtts.sort_by(f64::total_cmp);
    out.from_return_rtts.sort_by(f64::total_cmp);
    Ok(out)
}

/// The floor of part 3: `settings.readers` tasks (spread over the clients) each send one
/// `try_read()` at the same moment on a free lock; per reader, the time from that moment
/// to its guard in round trips of its client, sorted. Every guard is released after.
async fn burst(clients: &[Client], settings: &Settings, name: &str, rtt_us: &[u64]) -> Result<Vec<f64>, BoxError> {
    let n = clients.len();
    let barrier = Arc::new(tokio::sync::Barrier::new(settings.readers + 1));
    let started = Arc::new(Mutex::new(None::<Instant>));
    let mut handles = Vec::with_capacity(settings.readers);
    for r in 0..settings.readers {
        let rw = clients[r % n].read_write_lock(name);
        let barrier = barrier.clone();
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let guard = rw.try_read().await?.ok_or("a try_read() on a lock only read did not acquire")?;
            Ok::<_, BoxError>((r % n, Instant::now(), guard))
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    *started.lock().map_err(|_| "poisoned")? = Some(Instant::now());
    barrier.wait().await;
    let start = started.lock().map_err(|_| "poisoned")?.ok_or("no start")?;
    let mut rtts = Vec::with_capacity(settings.readers);
    let mut guards = Vec::with_capacity(settings.readers);
    for handle in handles {
        let (client, got, guard) = handle.await.map_err(|e| format!("burst task: {e}"))??;
        rtts.push(micros(got.saturating_duration_since(start)) as f64 / rtt_us[client] as f64);
        guards.push(guard);
    }
    for guard in guards {
        guard.unlock().await?;
    }
    rtts.sort_by(f64::total_cmp);
    Ok(rtts)
}

/// One Redisson 4.7 client of part 3's contender: a command connection and a subscriber
/// connection whose messages on the lock's channel wake every local waiter (Redisson's
/// `LockPubSub`: a `1` releases every waiting thread of the entry), as a counter.
struct RedissonClient {
    fred: FredClient,
    subscriber: fred::clients::SubscriberClient,
    heard: tokio::sync::watch::Sender<u64>,
}

impl RedissonClient {
    async fn connect(url: &str) -> Result<Arc<Self>, BoxError> {
        let fred = Builder::from_config(Config::from_url(url)?).build()?;
        fred.init().await?;
        let subscriber = Builder::from_config(Config::from_url(url)?).build_subscriber_client()?;
        subscriber.init().await?;
        let (heard, _) = tokio::sync::watch::channel(0_u64);
        let client = Arc::new(RedissonClient { fred, subscriber, heard });
        let mut messages = client.subscriber.message_rx();
        let pump = client.clone();
        tokio::spawn(async move {
            while messages.recv().await.is_ok() {
                pump.heard.send_modify(|n| *n += 1);
            }
        });
        Ok(client)
    }
}

/// What one round of part 3's Redisson contender measured.
#[derive(Debug, Default)]
struct RedissonWakeRound {
    /// µs from the write unlock's call to the first and to the last reader in.
    first_last_us: (u64, u64),
    early: usize,
    wake_calls: CommandStats,
    round_calls: CommandStats,
}

/// Part 3's contender: the same shape with Redisson 4.7's pattern through bare fred. A
/// writer holds (`RedissonWriteLock`'s acquire script); each client subscribes the
/// channel once (Redisson's shared entry); each reader runs the read acquire script,
/// then (held) again once subscribed, and while it answers a TTL waits for a message
/// (or that TTL) and runs it again (`RedissonLock.lock()`'s loop); the
/// write unlock script (and the `DEL` of its latch, as Redisson sends it) releases.
async fn measure_redisson_wake(
    clients: &[Arc<RedissonClient>],
    fred: &FredClient,
    scripts: &Arc<Scripts>,
    settings: &Settings,
    round: usize,
) -> Result<RedissonWakeRound, BoxError> {
    let name = format!("rw:bench:rwake:{round}");
    let channel = format!("redisson_rwlock:{{{name}}}");
    let writer = format!("{REDISSON_ID}:9999:write");
    let reply: Value = fred
        .evalsha(scripts.write_acquire.as_str(), vec![name.clone()], vec![REDISSON_LEASE_MS.to_owned(), writer.clone()])
        .await?;
    if !reply.is_null() {
        return Err(format!("Redisson's write acquire did not acquire {name}: {reply:?}").into());
    }
    let round_before = CommandStats::fetch(fred).await?;
    for client in clients {
        client.subscriber.subscribe(channel.clone()).await?;
    }
    let asked = Arc::new(AtomicUsize::new(0));
    let n = clients.len();
    let mut handles = Vec::with_capacity(settings.readers);
    for r in 0..settings.readers {
        let (client, scripts, name, asked) = (clients[r % n].clone(), scripts.clone(), name.clone(), asked.clone());
        handles.push(tokio::spawn(async move {
            let owner = format!("{REDISSON_ID}:{r}");
            let prefix = format!("{{{name}}}:{owner}:rwlock_timeout");
            let args = vec![REDISSON_LEASE_MS.to_owned(), owner.clone(), format!("{owner}:write")];
            let mut heard = client.heard.subscribe();
            // Redisson's `lock()`: one try, then (held) the subscription, then tries in
            // a loop, waiting for a message or the TTL between them.
            let keys = vec![name.clone(), prefix.clone()];
            let reply: Value = client.fred.evalsha(scripts.read_acquire.as_str(), keys.clone(), args.clone()).await?;
            asked.fetch_add(1, Ordering::SeqCst);
            if reply.is_null() {
                return Ok::<_, BoxError>((Instant::now(), owner));
            }
            loop {
                heard.borrow_and_update();
                let reply: Value =
                    client.fred.evalsha(scripts.read_acquire.as_str(), keys.clone(), args.clone()).await?;
                let Some(ttl) = reply.as_i64() else { return Ok::<_, BoxError>((Instant::now(), owner)) };
                let wait = Duration::from_millis(u64::try_from(ttl).unwrap_or(1).max(1));
                let _ = tokio::time::timeout(wait, heard.changed()).await;
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while asked.load(Ordering::SeqCst) < settings.readers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let wake_before = CommandStats::fetch(fred).await?;
    let called = Instant::now();
    let latch = format!("redisson_unlock_latch:{{{name}}}:{round:032x}");
    let keys = vec![name.clone(), channel.clone(), latch.clone()];
    let args =
        vec!["1".to_owned(), REDISSON_LEASE_MS.to_owned(), writer, "publish".to_owned(), LATCH_TTL_MS.to_owned()];
    let released: Value = fred.evalsha(scripts.write_unlock.as_str(), keys, args).await?;
    if released.as_i64() != Some(1) {
        return Err(format!("Redisson's write unlock of {name} answered {released:?}").into());
    }
    let _: i64 = fred.del(latch).await?;
    let mut out = RedissonWakeRound::default();
    let mut owners = Vec::with_capacity(settings.readers);
    let (mut first, mut last) = (u64::MAX, 0);
    for handle in handles {
        let (got, owner) = handle.await.map_err(|e| format!("Redisson reader task: {e}"))??;
        if got < called {
            out.early += 1;
        }
        let since_call = micros(got.saturating_duration_since(called));
        (first, last) = (first.min(since_call), last.max(since_call));
        owners.push(owner);
    }
    let after = CommandStats::fetch(fred).await?;
    out.wake_calls = after.since(&wake_before);
    out.round_calls = after.since(&round_before);
    out.first_last_us = (first, last);
    for client in clients {
        client.subscriber.unsubscribe(channel.clone()).await?;
    }
    // Readers out (not measured): the hold keys go with the lock.
    let _: i64 = fred.del(name.clone()).await?;
    for owner in owners {
        let _: i64 = fred.del(format!("{{{name}}}:{owner}:rwlock_timeout:1")).await?;
    }
    Ok(out)
}

/// What part 4 measured.
#[derive(Debug, Default)]
struct PhaseOutcome {
    /// Per task: acquisitions (readers first, then writers).
    reads_per_reader: Vec<u64>,
    writes_per_writer: Vec<u64>,
    /// Sorted waits (call to guard), µs.
    read_waits: Vec<u64>,
    write_waits: Vec<u64>,
    /// Per write: its wait divided by (1 + the writes of other writers that got in
    /// while it waited), µs, sorted: the wait per turn. Writers are served in order
    /// among themselves, so a looping writer also waits for the writers ahead of it
    /// (each with the read phase before it); the phase-fair bound is per turn.
    write_waits_per_turn: Vec<u64>,
    /// Per write: the writes of other writers that got in while it waited, sorted.
    writers_ahead: Vec<u64>,
    /// Phases seen: a write phase per write hold, a read phase from the first reader in
    /// to the last out; their longest, µs.
    read_phases: u64,
    longest_read_phase: u64,
    longest_write_phase: u64,
    /// Every read phase's length and every write hold's, µs, sorted: the longest alone
    /// is one outlier on a loaded machine (a 3 ms hold that took 60 ms), so the p99 is
    /// printed beside it.
    read_phase_lengths: Vec<u64>,
    write_phase_lengths: Vec<u64>,
    overlaps: u64,
    wall: Duration,
}

/// Part 4: `PHASE_WRITERS` writers and `PHASE_READERS` readers, each its own handle, on
/// 3 clients, looping `write()`/`read()`, hold `--hold-ms`, `unlock()`, for `--seconds`.
async fn measure_phases(clients: &[Client], name: &str, settings: &Settings) -> Result<PhaseOutcome, BoxError> {
    let readers_in = Arc::new(AtomicUsize::new(0));
    let writer_in = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    // Writes in so far (every writer's): how many went ahead of a waiting writer.
    let writes_in = Arc::new(AtomicU64::new(0));
    // The read phase now running: when it started (its first reader in), µs since `start`.
    let phase = Arc::new(Mutex::new((0_u64, 0_u64, 0_u64))); // (phases, started_at_us, longest_us)
    let read_phase_lengths = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let end = start + settings.run_for;
    let n = clients.len();
    let hold = settings.hold;
    let mut readers = Vec::new();
    for r in 0..PHASE_READERS {
        let rw = clients[r % n].read_write_lock(name);
        let (readers_in, writer_in, overlaps, phase, lengths) =
            (readers_in.clone(), writer_in.clone(), overlaps.clone(), phase.clone(), read_phase_lengths.clone());
        readers.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            while Instant::now() < end {
                let asked = Instant::now();
                let guard = rw.read().await?;
                let got = Instant::now();
                waits.push(micros(got - asked));
                {
                    let mut p = phase.lock().map_err(|_| "poisoned")?;
                    if readers_in.fetch_add(1, Ordering::SeqCst) == 0 {
                        p.0 += 1;
                        p.1 = micros(got - start);
                    }
                }
                if writer_in.load(Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(hold).await;
                {
                    let mut p = phase.lock().map_err(|_| "poisoned")?;
                    if readers_in.fetch_sub(1, Ordering::SeqCst) == 1 {
                        let length = micros(Instant::now() - start).saturating_sub(p.1);
                        p.2 = p.2.max(length);
                        lengths.lock().map_err(|_| "poisoned")?.push(length);
                    }
                }
                guard.unlock().await?;
            }
            Ok::<Vec<u64>, BoxError>(waits)
        }));
    }
    let mut writers = Vec::new();
    for w in 0..PHASE_WRITERS {
        let rw = clients[w % n].read_write_lock(name);
        let (readers_in, writer_in, overlaps, writes_in) =
            (readers_in.clone(), writer_in.clone(), overlaps.clone(), writes_in.clone());
        writers.push(tokio::spawn(async move {
            let (mut waits, mut holds, mut turns) = (Vec::new(), Vec::new(), Vec::new());
            while Instant::now() < end {
                let asked = Instant::now();
                let before = writes_in.load(Ordering::SeqCst);
                let guard = rw.write().await?;
                let got = Instant::now();
                let ahead = writes_in.fetch_add(1, Ordering::SeqCst) - before;
                waits.push(micros(got - asked));
                turns.push((micros(got - asked) / (ahead + 1), ahead));
                if writer_in.swap(true, Ordering::SeqCst) || readers_in.load(Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(hold).await;
                if readers_in.load(Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                writer_in.store(false, Ordering::SeqCst);
                holds.push(micros(got.elapsed()));
                guard.unlock().await?;
            }
            Ok::<(Vec<u64>, Vec<u64>, Vec<(u64, u64)>), BoxError>((waits, holds, turns))
        }));
    }
    let mut out = PhaseOutcome::default();
    for handle in readers {
        let waits = handle.await.map_err(|e| format!("reader task: {e}"))??;
        out.reads_per_reader.push(waits.len() as u64);
        out.read_waits.extend(waits);
    }
    for handle in writers {
        let (waits, holds, turns) = handle.await.map_err(|e| format!("writer task: {e}"))??;
        let longest = holds.iter().copied().max().unwrap_or(0);
        out.write_phase_lengths.extend(holds);
        out.writes_per_writer.push(waits.len() as u64);
        out.write_waits.extend(waits);
        for (per_turn, ahead) in turns {
            out.write_waits_per_turn.push(per_turn);
            out.writers_ahead.push(ahead);
        }
        out.longest_write_phase = out.longest_write_phase.max(longest);
    }
    out.wall = start.elapsed();
    let p = *phase.lock().map_err(|_| "poisoned")?;
    (out.read_phases, out.longest_read_phase) = (p.0, p.2);
    out.read_waits.sort_unstable();
    out.write_waits.sort_unstable();
    out.write_waits_per_turn.sort_unstable();
    out.read_phase_lengths = std::mem::take(&mut *read_phase_lengths.lock().map_err(|_| "poisoned")?);
    out.read_phase_lengths.sort_unstable();
    out.write_phase_lengths.sort_unstable();
    out.writers_ahead.sort_unstable();
    out.overlaps = overlaps.load(Ordering::SeqCst);
    Ok(out)
}

/// Part 4's shape: looping writers and readers.
const PHASE_WRITERS: usize = 6;
/// Part 3's clients (the shape: 64 readers on 4 clients).
const WAKE_CLIENTS: usize = 4;
const PHASE_READERS: usize = 12;

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

/// `FLUSHALL` (own server only), `CONFIG RESETSTAT`, and a moment for the server.
async fn reset(fred: &FredClient, target: &Target) -> Result<(), BoxError> {
    if target.is_own() {
        let command = CustomCommand::new_static("FLUSHALL", ClusterHash::Random, false);
        let _: String = fred.custom(command, vec!["SYNC"]).await?;
    }
    let command = CustomCommand::new_static("CONFIG", ClusterHash::Random, false);
    let _: String = fred.custom(command, vec!["RESETSTAT"]).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(f64::MIN_POSITIVE)
}

fn print_pairs(outcomes: &[(Contender, PairOutcome)], settings: &Settings) {
    let mut header = vec!["metric".to_owned()];
    header.extend(outcomes.iter().map(|(c, _)| c.name().to_owned()));
    let row = |name: &str, cell: &dyn Fn(&PairOutcome) -> String| -> Vec<String> {
        let mut cells = vec![name.to_owned()];
        cells.extend(outcomes.iter().map(|(_, o)| cell(o)));
        cells
    };
    let rows = vec![
        row(&format!("pairs ({} tasks)", settings.tasks), &|o| o.pairs.to_string()),
        row("pairs/s", &|o| format!("{:.0}", o.pairs as f64 / o.wall.as_secs_f64().max(f64::MIN_POSITIVE))),
        row("pair p50 / p99 (ms)", &|o| {
            format!("{} / {}", ms(percentile(&o.latencies, 50.0)), ms(percentile(&o.latencies, 99.0)))
        }),
        row("redis commands / pair (all)", &|o| format!("{:.2}", o.commands_per_pair())),
        row("  of which evalsha / pair", &|o| format!("{:.2}", o.per_pair(o.commands.calls("evalsha") as f64))),
        row("redis CPU µs / pair", &|o| format!("{:.2}", o.cpu_per_pair())),
        row("keys left after", &|o| o.keys_left.to_string()),
    ];
    print_table(&header, &rows);
    println!("commands per pair:");
    for (contender, outcome) in outcomes {
        println!("  {:<16} {}", contender.name(), outcome.breakdown());
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: rwlock [--pairs N] [--tasks N] [--seconds N] [--hold-ms N] [--writer-pause-ms N] [--readers N] [--rounds N] [--part 1-4]"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!("# rwlock: the read/write lock, uncontended pairs against Redisson's scripts, readers and a writer, readers woken by a write release");
    println!("rerun: {}", rerun_command("rwlock"));
    let target = Target::from_env();
    let url = target.url().to_owned();
    let clients = [Client::builder().url(&url).connect().await?, Client::builder().url(&url).connect().await?];
    let mut builder = Builder::from_config(Config::from_url(&url)?);
    builder.set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
    let fred = builder.build()?;
    fred.init().await?;
    print_machine(&fred, &target).await?;
    println!("commit           {}", git_head().unwrap_or_else(|| "unknown".to_owned()));
    println!("settings: {settings:?}");
    if !target.is_own() {
        println!("note: REDIS_URL is set, so nothing is flushed and the keys-left figures include other keys");
    }
    let scripts = Arc::new(Scripts {
        read_acquire: fred.script_load(REDISSON_READ_ACQUIRE).await?,
        read_unlock: fred.script_load(REDISSON_READ_UNLOCK).await?,
        write_acquire: fred.script_load(REDISSON_WRITE_ACQUIRE).await?,
        write_unlock: fred.script_load(REDISSON_WRITE_UNLOCK).await?,
    });
    let mut problems: Vec<String> = Vec::new();

    // Part 1.
    let mut pairs = Vec::new();
    for contender in Contender::ALL.into_iter().filter(|_| settings.runs(1)) {
        println!();
        println!("## 1. {} — {}", contender.name(), contender.describe());
        reset(&fred, &target).await?;
        match measure_pairs(&clients[0], &fred, &scripts, contender, &settings).await {
            Ok(outcome) => {
                println!(
                    "{} pairs in {:.2} s; {:.2} commands/pair: {}; Redis CPU {:.2} µs/pair; DBSIZE after {}",
                    outcome.pairs,
                    outcome.wall.as_secs_f64(),
                    outcome.commands_per_pair(),
                    outcome.breakdown(),
                    outcome.cpu_per_pair(),
                    outcome.keys_left
                );
                if target.is_own() && outcome.keys_left > 0 {
                    problems.push(format!("{}: {} keys left after every pair", contender.name(), outcome.keys_left));
                }
                pairs.push((contender, outcome));
            }
            Err(error) => problems.push(format!("{}: {error}", contender.name())),
        }
    }

    // Part 2.
    let mut mixed = Vec::new();
    let mut handoffs = Vec::new();
    if settings.runs(2) {
        println!();
        println!("## 2a. one hand-off: a reader (client 1) releases, a waiting writer (client 2) gets in; 20 tries");
        reset(&fred, &target).await?;
        handoffs = match measure_handoff(&clients, 20).await {
            Ok(handoffs) => {
                println!(
                    "reader unlock() returned -> writer's guard: p50 {} ms, max {} ms",
                    ms(percentile(&handoffs, 50.0)),
                    ms(handoffs.last().copied().unwrap_or(0))
                );
                handoffs
            }
            Err(error) => {
                problems.push(format!("hand-off: {error}"));
                Vec::new()
            }
        };
        let writer_own = Client::builder().url(&url).connect().await?;
        for (shape, writer_client) in
            [("writer on client 2, with 4 readers", &clients[1]), ("writer on a 3rd client of its own", &writer_own)]
        {
            println!();
            println!(
            "## 2. 8 readers (4 per client, read() + hold {:?} + unlock()) and 1 writer (write() + hold 1 ms + unlock(), pause {:?}) for {:?}; {shape}",
            settings.hold, settings.writer_pause, settings.run_for
        );
            reset(&fred, &target).await?;
            let name = format!("rw:bench:mixed:{}", mixed.len());
            match measure_mixed(&clients, writer_client, &name, &settings).await {
                Ok(outcome) => {
                    println!(
                    "{} reads, {} writes in {:.2} s; overlaps {} (must be 0); writer waits p50 / p99 / max {} / {} / {} ms",
                    outcome.reads,
                    outcome.writes,
                    outcome.wall.as_secs_f64(),
                    outcome.overlaps,
                    ms(percentile(&outcome.writer_waits, 50.0)),
                    ms(percentile(&outcome.writer_waits, 99.0)),
                    ms(outcome.writer_waits.last().copied().unwrap_or(0))
                );
                    if outcome.overlaps > 0 {
                        problems.push(format!(
                            "{shape}: a reader and the writer inside at once {} times",
                            outcome.overlaps
                        ));
                    }
                    if outcome.writes == 0 {
                        problems.push(format!("{shape}: the writer never got the lock"));
                    }
                    mixed.push((shape, outcome));
                }
                Err(error) => problems.push(format!("{shape}: readers and writer: {error}")),
            }
        }
        writer_own.shutdown().await?;
    }

    // Part 3.
    let mut rounds = Vec::new();
    let mut redisson_rounds = Vec::new();
    if settings.runs(3) {
        println!();
        println!(
        "## 3. {} readers on {WAKE_CLIENTS} clients behind 1 writer that releases, {} rounds, alternating with Redisson 4.7's pattern (bare fred: its scripts, one subscription per client, every reader retrying on the message)",
        settings.readers, settings.rounds
    );
        reset(&fred, &target).await?;
        let mut wake_clients = Vec::with_capacity(WAKE_CLIENTS);
        let mut redisson_clients = Vec::with_capacity(WAKE_CLIENTS);
        for _ in 0..WAKE_CLIENTS {
            wake_clients.push(Client::builder().url(&url).connect().await?);
            redisson_clients.push(RedissonClient::connect(&url).await?);
        }
        for round in 0..settings.rounds {
            match measure_wake(&wake_clients, &fred, &settings, round).await {
                Ok(outcome) => {
                    println!(
                    "leasehold round {round}: RTT {:?} µs; {} queued before the release; unlock() took {} ms (its script {} µs on the server); first / last reader in {} / {} ms after the call (per client {:?} µs); from the call, in RTTs: p50 {:.2}, max {:.2}; from its return: p50 {:.2}, max {:.2}; in before the call {}; server calls per reader: wake-up {:.2} ({}), whole round {:.2}; floor (the same {} try_read() at once on a free lock) p50 {:.2}, max {:.2} RTTs",
                    outcome.rtt_us,
                    outcome.queued,
                    ms(outcome.unlock_us),
                    outcome.wake_calls.usec("evalsha"),
                    ms(outcome.first_last_us.0),
                    ms(outcome.first_last_us.1),
                    outcome.per_client_us,
                    percentile(&outcome.from_call_rtts, 50.0),
                    outcome.from_call_rtts.last().copied().unwrap_or(0.0),
                    percentile(&outcome.from_return_rtts, 50.0),
                    outcome.from_return_rtts.last().copied().unwrap_or(0.0),
                    outcome.early,
                    outcome.wake_calls.total_calls() as f64 / settings.readers as f64,
                    outcome.wake_calls.breakdown(),
                    outcome.round_calls.total_calls() as f64 / settings.readers as f64,
                    settings.readers,
                    percentile(&outcome.burst_rtts, 50.0),
                    outcome.burst_rtts.last().copied().unwrap_or(0.0)
                );
                    if outcome.early > 0 {
                        problems
                            .push(format!("round {round}: {} readers in before the writer released", outcome.early));
                    }
                    rounds.push(outcome);
                }
                Err(error) => problems.push(format!("round {round}: {error}")),
            }
            match measure_redisson_wake(&redisson_clients, &fred, &scripts, &settings, round).await {
                Ok(outcome) => {
                    println!(
                    "redisson  round {round}: first / last reader in {} / {} ms after the call; server calls per reader: wake-up {:.2} ({}), whole round {:.2}",
                    ms(outcome.first_last_us.0),
                    ms(outcome.first_last_us.1),
                    outcome.wake_calls.total_calls() as f64 / settings.readers as f64,
                    outcome.wake_calls.breakdown(),
                    outcome.round_calls.total_calls() as f64 / settings.readers as f64,
                );
                    if outcome.early > 0 {
                        problems
                            .push(format!("Redisson round {round}: {} readers in before the release", outcome.early));
                    }
                    redisson_rounds.push(outcome);
                }
                Err(error) => problems.push(format!("Redisson round {round}: {error}")),
            }
        }
        for client in wake_clients {
            client.shutdown().await?;
        }
    }

    // Part 4.
    let mut phases = None;
    if settings.runs(4) {
        println!();
        println!(
        "## 4. phases: {PHASE_WRITERS} looping writers and {PHASE_READERS} looping readers on 3 clients (write()/read() + hold {:?} + unlock()) for {:?}",
        settings.hold, settings.run_for
    );
        reset(&fred, &target).await?;
        let third = Client::builder().url(&url).connect().await?;
        let phase_clients = [clients[0].clone(), clients[1].clone(), third.clone()];
        phases = match measure_phases(&phase_clients, "rw:bench:phases", &settings).await {
            Ok(outcome) => {
                println!(
                "{} reads ({} read phases), {} writes in {:.2} s; overlaps {} (must be 0); reads per reader {:?}; writes per writer {:?}",
                outcome.reads_per_reader.iter().sum::<u64>(),
                outcome.read_phases,
                outcome.writes_per_writer.iter().sum::<u64>(),
                outcome.wall.as_secs_f64(),
                outcome.overlaps,
                outcome.reads_per_reader,
                outcome.writes_per_writer
            );
                if outcome.overlaps > 0 {
                    problems.push(format!("phases: a reader and a writer inside at once {} times", outcome.overlaps));
                }
                Some(outcome)
            }
            Err(error) => {
                problems.push(format!("phases: {error}"));
                None
            }
        };
        third.shutdown().await?;
    }
    let keys_left = dbsize(&fred).await?;
    if target.is_own() && keys_left > 0 {
        problems.push(format!("{keys_left} keys left after parts 2 and 3"));
    }

    println!();
    println!("## summary");
    print_pairs(&pairs, &settings);
    println!();
    println!("targets of issue 18 item 6 (printed, not asserted):");
    let find = |c: Contender| pairs.iter().find(|(x, _)| *x == c).map(|(_, o)| o);
    for (ours, theirs) in
        [(Contender::LeaseholdRead, Contender::RedissonRead), (Contender::LeaseholdWrite, Contender::RedissonWrite)]
    {
        if let (Some(a), Some(b)) = (find(ours), find(theirs)) {
            println!(
                "  {} / {}: commands per pair {:.2} / {:.2} = {:.2}, Redis CPU per pair {:.2} / {:.2} µs = {:.2} (target <= 1)",
                ours.name(),
                theirs.name(),
                a.commands_per_pair(),
                b.commands_per_pair(),
                ratio(a.commands_per_pair(), b.commands_per_pair()),
                a.cpu_per_pair(),
                b.cpu_per_pair(),
                ratio(a.cpu_per_pair(), b.cpu_per_pair())
            );
        }
    }
    let handoff = percentile(&handoffs, 50.0);
    for (shape, m) in &mixed {
        let (p50, p99, max) = (
            percentile(&m.writer_waits, 50.0),
            percentile(&m.writer_waits, 99.0),
            m.writer_waits.last().copied().unwrap_or(0),
        );
        let longest_hold = m.read_holds.last().copied().unwrap_or(0);
        let bound = 2 * (longest_hold + handoff);
        println!(
            "  {shape}: {} reads, {} writes; writer wait p50 / p99 / max {} / {} / {} ms; read hold p50 {} ms, longest {} ms; last read release -> writer in p50 / p99 {} / {} ms",
            m.reads,
            m.writes,
            ms(p50),
            ms(p99),
            ms(max),
            ms(percentile(&m.read_holds, 50.0)),
            ms(longest_hold),
            ms(percentile(&m.handoffs, 50.0)),
            ms(percentile(&m.handoffs, 99.0))
        );
        println!(
            "  {shape}: writer wait p99 / (2 x (longest read hold + one hand-off, 2a's p50 {} ms)) = {} / {} ms = {:.2} (target <= 1)",
            ms(handoff),
            ms(p99),
            ms(bound),
            ratio(p99 as f64, bound as f64)
        );
    }
    if !rounds.is_empty() {
        let mut from_call: Vec<f64> = rounds.iter().flat_map(|r| r.from_call_rtts.iter().copied()).collect();
        let mut from_return: Vec<f64> = rounds.iter().flat_map(|r| r.from_return_rtts.iter().copied()).collect();
        from_call.sort_by(f64::total_cmp);
        from_return.sort_by(f64::total_cmp);
        let within = from_call.iter().filter(|v| **v <= 3.0).count();
        let mut floor: Vec<f64> = rounds.iter().flat_map(|r| r.burst_rtts.iter().copied()).collect();
        floor.sort_by(f64::total_cmp);
        println!(
            "  readers woken by a write release ({} readers on {WAKE_CLIENTS} clients x {} rounds), in RTTs of their client: from the unlock() call p50 / p99 / max {:.2} / {:.2} / {:.2}; from its return {:.2} / {:.2} / {:.2}; within 3 RTTs of the call: {} of {} (target: all)",
            settings.readers,
            rounds.len(),
            percentile(&from_call, 50.0),
            percentile(&from_call, 99.0),
            from_call.last().copied().unwrap_or(0.0),
            percentile(&from_return, 50.0),
            percentile(&from_return, 99.0),
            from_return.last().copied().unwrap_or(0.0),
            within,
            from_call.len()
        );
        println!(
            "  floor: the same readers' try_read() sent at once on a free lock, in RTTs p50 / p99 / max {:.2} / {:.2} / {:.2}",
            percentile(&floor, 50.0),
            percentile(&floor, 99.0),
            floor.last().copied().unwrap_or(0.0)
        );
        let mut ours: Vec<u64> = rounds.iter().map(|r| r.first_last_us.1).collect();
        let mut theirs: Vec<u64> = redisson_rounds.iter().map(|r| r.first_last_us.1).collect();
        ours.sort_unstable();
        theirs.sort_unstable();
        let per_reader = |calls: u64, n: usize| calls as f64 / (n * settings.readers).max(1) as f64;
        let wake = |rs: &[&CommandStats]| rs.iter().map(|c| c.total_calls()).sum::<u64>();
        let our_wake = per_reader(wake(&rounds.iter().map(|r| &r.wake_calls).collect::<Vec<_>>()), rounds.len());
        let our_round = per_reader(wake(&rounds.iter().map(|r| &r.round_calls).collect::<Vec<_>>()), rounds.len());
        let their_wake =
            per_reader(wake(&redisson_rounds.iter().map(|r| &r.wake_calls).collect::<Vec<_>>()), redisson_rounds.len());
        let their_round = per_reader(
            wake(&redisson_rounds.iter().map(|r| &r.round_calls).collect::<Vec<_>>()),
            redisson_rounds.len(),
        );
        println!(
            "  the last of {} readers on {WAKE_CLIENTS} clients in, from the write unlock's call: leasehold median {} ms (rounds {:?} µs), Redisson's pattern median {} ms (rounds {:?} µs): {:.2}x (target <= 0.5)",
            settings.readers,
            ms(percentile(&ours, 50.0)),
            ours,
            ms(percentile(&theirs, 50.0)),
            theirs,
            ratio(percentile(&ours, 50.0) as f64, percentile(&theirs, 50.0) as f64)
        );
        println!(
            "  server calls per admitted reader: wake-up (unlock call to last in) {our_wake:.2} against Redisson's {their_wake:.2}; whole round (first call to last in) {our_round:.2} against {their_round:.2} (target <= Redisson's)"
        );
    }
    if let Some(p) = &phases {
        let reads: u64 = p.reads_per_reader.iter().sum();
        let writes: u64 = p.writes_per_writer.iter().sum();
        // Phase-fair: read and write phases alternate, so each side's fair share is half
        // the phases.
        let fair = (writes + p.read_phases) as f64 / 2.0;
        let longest = p.longest_read_phase.max(p.longest_write_phase);
        let spread = |v: &[u64]| {
            let (min, max) = (v.iter().min().copied().unwrap_or(0), v.iter().max().copied().unwrap_or(0));
            (min, max)
        };
        println!(
            "  phases ({PHASE_WRITERS} writers, {PHASE_READERS} readers, 3 clients): {reads} reads in {} read phases, {writes} writes; read phases / fair share {:.2}, write phases / fair share {:.2} (target 0.5-2); per reader min/max {:?}, per writer min/max {:?}",
            p.read_phases,
            ratio(p.read_phases as f64, fair),
            ratio(writes as f64, fair),
            spread(&p.reads_per_reader),
            spread(&p.writes_per_writer)
        );
        println!(
            "  phases: longest read phase {} ms, longest write phase {} ms; read wait p50 / p99 / max {} / {} / {} ms (p99 / 2 x longest phase {:.2}, target <= 1); write wait p50 / p99 / max {} / {} / {} ms (p99 / 2 x longest phase {:.2}; p99 / ({PHASE_WRITERS} writers x (longest write + longest read phase)) {:.2})",
            ms(p.longest_read_phase),
            ms(p.longest_write_phase),
            ms(percentile(&p.read_waits, 50.0)),
            ms(percentile(&p.read_waits, 99.0)),
            ms(p.read_waits.last().copied().unwrap_or(0)),
            ratio(percentile(&p.read_waits, 99.0) as f64, 2.0 * longest as f64),
            ms(percentile(&p.write_waits, 50.0)),
            ms(percentile(&p.write_waits, 99.0)),
            ms(p.write_waits.last().copied().unwrap_or(0)),
            ratio(percentile(&p.write_waits, 99.0) as f64, 2.0 * longest as f64),
            ratio(
                percentile(&p.write_waits, 99.0) as f64,
                (PHASE_WRITERS as u64 * (p.longest_write_phase + p.longest_read_phase)) as f64
            )
        );
        println!(
            "  phases: writers ahead of a write (other writers' writes while it waited) p50 / p99 / max {} / {} / {}; write wait per turn (wait / (1 + writers ahead)) p50 / p99 / max {} / {} / {} ms (p99 / 2 x longest phase {:.2}, target <= 1)",
            percentile(&p.writers_ahead, 50.0),
            percentile(&p.writers_ahead, 99.0),
            p.writers_ahead.last().copied().unwrap_or(0),
            ms(percentile(&p.write_waits_per_turn, 50.0)),
            ms(percentile(&p.write_waits_per_turn, 99.0)),
            ms(p.write_waits_per_turn.last().copied().unwrap_or(0)),
            ratio(percentile(&p.write_waits_per_turn, 99.0) as f64, 2.0 * longest as f64)
        );
        let p99_phase = percentile(&p.read_phase_lengths, 99.0).max(percentile(&p.write_phase_lengths, 99.0));
        println!(
            "  phases: read phase p50 / p99 {} / {} ms, write hold p50 / p99 {} / {} ms; against 2 x the p99 phase ({} ms): read wait p99 {:.2}, write wait p99 {:.2}, write wait per turn p99 {:.2}",
            ms(percentile(&p.read_phase_lengths, 50.0)),
            ms(percentile(&p.read_phase_lengths, 99.0)),
            ms(percentile(&p.write_phase_lengths, 50.0)),
            ms(percentile(&p.write_phase_lengths, 99.0)),
            ms(2 * p99_phase),
            ratio(percentile(&p.read_waits, 99.0) as f64, 2.0 * p99_phase as f64),
            ratio(percentile(&p.write_waits, 99.0) as f64, 2.0 * p99_phase as f64),
            ratio(percentile(&p.write_waits_per_turn, 99.0) as f64, 2.0 * p99_phase as f64)
        );
    }
    for problem in &problems {
        println!("INVARIANT BROKEN: {problem}");
    }
    for client in &clients {
        client.shutdown().await?;
    }
    Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `git rev-parse --short HEAD` of the working directory, if git answers.
fn git_head() -> Option<String> {
    let output = std::process::Command::new("git").args(["rev-parse", "--short", "HEAD"]).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}
