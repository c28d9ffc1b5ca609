//! `contention`: many tasks contending on one lock name, with leasehold's waiting
//! (pub/sub wake-ups, FIFO among local waiters) and with a polling baseline built here
//! (`try_lock` every 50 ms, what the polling crates do).
//!
//! Each task loops: acquire with a 10 s lease, hold 1 ms (tokio sleep), unlock, until
//! the run time is over; every acquire started before then completes. Reported per run:
//! acquisitions/s, wait time (lock called → guard), acquisitions per task (fairness),
//! Redis commands per acquisition (`INFO commandstats` before/after), handoff latency
//! (previous holder's `unlock` returned → next holder has its guard), and how often the
//! releasing task won the lock again (re-win rate).
//!
//! Handoffs are paired by acquisition order: each holder takes a sequence number while
//! it holds the lock (so numbers follow the order of holds), and handoff `k` is
//! `acquired[k + 1] − unlock_returned[k]`. That pairs each release with the next hold
//! even when the next holder gets its guard before the releasing task has run again.
//!
//! Exits with 1 if two holders were ever inside the critical section at once, or if a
//! lock call failed.
//!
//! Flags: `--seconds N` (10), `--clients N` (both 1 and 4 when absent), `--tasks N`
//! (64, split evenly over the clients), `--hold-ms N` (1), `--poll-ms N` (50),
//! `--mode leasehold|polling|both` (both), `--latency-ms N` (0: none; else a TCP proxy
//! in front of Redis adds N ms each way, to see handoff on a slower network).
//! `REDIS_URL` selects a server; without it a throwaway `redis-server` is started.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{Client, Lock, LockGuard};
use leasehold_benches::{
    check_flags, flag, micros, ms, ms_signed, percentile, ping_rtts, print_machine, print_table, rerun_command,
    signed_nanos, BoxError, CommandStats, Target,
};
use leasehold_test_support::Proxy;

const LEASE: Duration = Duration::from_secs(10);
const FLAGS: &[&str] = &["--seconds", "--clients", "--tasks", "--hold-ms", "--poll-ms", "--mode", "--latency-ms"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `lock_with_lease`: leasehold's pub/sub waiting.
    Leasehold,
    /// `try_lock_with(ZERO, lease)` and a fixed sleep between attempts.
    Polling,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Leasehold => "leasehold",
            Mode::Polling => "polling",
        }
    }
}

#[derive(Debug, Clone)]
struct Settings {
    run_for: Duration,
    tasks: usize,
    client_counts: Vec<usize>,
    hold: Duration,
    poll: Duration,
    modes: Vec<Mode>,
    /// Added each way by a TCP proxy in front of Redis (none when zero).
    latency: Duration,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let tasks = flag::<usize>(args, "--tasks")?.unwrap_or(64);
        let client_counts = match flag::<usize>(args, "--clients")? {
            Some(n) => vec![n],
            None => vec![1, 4],
        };
        if tasks == 0 || client_counts.iter().any(|&c| c == 0 || tasks % c != 0) {
            return Err(format!("--tasks {tasks} must be above 0 and divisible by --clients {client_counts:?}").into());
        }
        let modes = match flag::<String>(args, "--mode")?.as_deref() {
            None | Some("both") => vec![Mode::Leasehold, Mode::Polling],
            Some("leasehold") => vec![Mode::Leasehold],
            Some("polling") => vec![Mode::Polling],
            Some(other) => return Err(format!("--mode {other:?}: expected leasehold, polling or both").into()),
        };
        Ok(Settings {
            run_for: Duration::from_secs(flag(args, "--seconds")?.unwrap_or(10)),
            tasks,
            client_counts,
            hold: Duration::from_millis(flag(args, "--hold-ms")?.unwrap_or(1)),
            poll: Duration::from_millis(flag(args, "--poll-ms")?.unwrap_or(50)),
            modes,
            latency: Duration::from_millis(flag(args, "--latency-ms")?.unwrap_or(0)),
        })
    }
}

/// One hold, as the holding task saw it.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// Position in the order of holds (taken while holding the lock).
    seq: u64,
    task: usize,
    client: usize,
    /// From calling lock to having the guard.
    wait_us: u64,
    /// From having the guard to calling unlock (the "1 ms" tokio sleep, really).
    hold_us: u64,
    acquired: Instant,
    /// When `unlock()` returned.
    released: Instant,
    /// `try_lock` calls made (polling only; 0 for leasehold).
    attempts: u64,
}

/// What every task shares: the critical-section check and the hold counter.
#[derive(Debug, Default)]
struct Shared {
    inside: AtomicU64,
    overlaps: AtomicU64,
    seq: AtomicU64,
}

#[derive(Debug)]
struct RunResult {
    label: String,
    mode: Mode,
    clients: usize,
    wall: Duration,
    /// Acquisitions within the run time (the rest drained afterwards).
    in_window: u64,
    run_for: Duration,
    /// Sorted by `seq`.
    records: Vec<Record>,
    per_task: Vec<u64>,
    commands: CommandStats,
    /// Subscriber counters summed over the clients (deltas).
    subscribe_calls: u64,
    unsubscribe_calls: u64,
    messages: u64,
    wake_alls: u64,
    overlaps: u64,
}

#[derive(Debug, Clone, Copy)]
struct Baseline {
    ping_p50_us: u64,
    ping_p99_us: u64,
    acquire_p50_us: u64,
    unlock_p50_us: u64,
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: contention [--seconds N] [--clients N] [--tasks N] [--hold-ms N] [--poll-ms N] \
             [--mode leasehold|polling|both] [--latency-ms N]"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!("# contention: {} tasks on one lock name", settings.tasks);
    println!("rerun: {}", rerun_command("contention"));
    let target = Target::from_env();
    let proxy = if settings.latency.is_zero() {
        None
    } else {
        let proxy = Proxy::start(&target.addr()).await;
        proxy.set_latency(settings.latency);
        Some(proxy)
    };
    let url = proxy.as_ref().map_or_else(|| target.url().to_owned(), Proxy::url);
    let probe = Client::builder().url(&url).connect().await?;
    print_machine(probe.fred(), &target).await?;
    if proxy.is_some() {
        println!(
            "  network          through a TCP proxy adding {:?} each way (tokio timer: rounds up to 1 ms ticks)",
            settings.latency
        );
    }
    println!(
        "settings: run {:?} per variant, {} tasks, lease {:?}, hold {:?} (tokio sleep), polling interval {:?}",
        settings.run_for, settings.tasks, LEASE, settings.hold, settings.poll
    );

    let baseline = measure_baseline(&probe).await?;
    println!(
        "round trips on this machine: PING p50 {} ms, p99 {} ms; uncontended acquire (1 EVALSHA) p50 {} ms; unlock p50 {} ms",
        ms(baseline.ping_p50_us),
        ms(baseline.ping_p99_us),
        ms(baseline.acquire_p50_us),
        ms(baseline.unlock_p50_us)
    );
    drop(probe);

    let mut results = Vec::new();
    let mut failed = false;
    for &mode in &settings.modes {
        for &clients in &settings.client_counts {
            let run_id = results.len();
            println!();
            println!("## {} — {} client(s) × {} tasks", mode.name(), clients, settings.tasks / clients);
            match run(&settings, &url, mode, clients, run_id).await {
                Ok(result) => {
                    print_details(&result, &baseline);
                    if result.overlaps > 0 {
                        println!("INVARIANT BROKEN: {} acquisitions found another holder inside", result.overlaps);
                        failed = true;
                    }
                    results.push(result);
                }
                Err(error) => {
                    println!("RUN FAILED: {error}");
                    failed = true;
                }
            }
        }
    }

    println!();
    println!("## summary (times in ms; RTT = PING p50 {} ms)", ms(baseline.ping_p50_us));
    print_summary(&results, &baseline);
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// PING round trips, and the uncontended acquire and unlock (one script call each).
async fn measure_baseline(client: &Client) -> Result<Baseline, BoxError> {
    let pings = ping_rtts(client.fred(), 2000).await?;
    let lock = client.lock("bench:contention:baseline");
    let mut acquires = Vec::new();
    let mut unlocks = Vec::new();
    for i in 0..520 {
        let start = Instant::now();
        let guard = lock.try_lock_with(Duration::ZERO, LEASE).await?.ok_or("the baseline lock was held by someone")?;
        let acquired = Instant::now();
        guard.unlock().await?;
        // The first calls load the scripts (NOSCRIPT, SCRIPT LOAD): not counted.
        if i >= 20 {
            acquires.push(micros(acquired - start));
            unlocks.push(micros(acquired.elapsed()));
        }
    }
    acquires.sort_unstable();
    unlocks.sort_unstable();
    Ok(Baseline {
        ping_p50_us: percentile(&pings, 50.0),
        ping_p99_us: percentile(&pings, 99.0),
        acquire_p50_us: percentile(&acquires, 50.0),
        unlock_p50_us: percentile(&unlocks, 50.0),
    })
}

async fn run(
    settings: &Settings,
    url: &str,
    mode: Mode,
    client_count: usize,
    run_id: usize,
) -> Result<RunResult, BoxError> {
    let mut clients = Vec::with_capacity(client_count);
    for _ in 0..client_count {
        let client = Client::builder().url(url).connect().await?;
        // Warm the connection (and the scripts) outside the measured window.
        let warm = client.lock(format!("bench:contention:warm:{run_id}"));
        if let Some(guard) = warm.try_lock_with(Duration::ZERO, LEASE).await? {
            guard.unlock().await?;
        }
        clients.push(client);
    }
    let name = format!("bench:contention:{run_id}:{}", mode.name());
    let shared = Arc::new(Shared::default());
    let sub_before: Vec<[u64; 4]> = clients.iter().map(subscriber_counters).collect();
    let commands_before = CommandStats::fetch(clients[0].fred()).await?;

    let start = Instant::now();
    let end = start + settings.run_for;
    let per_client = settings.tasks / client_count;
    let mut handles = Vec::with_capacity(settings.tasks);
    for task in 0..settings.tasks {
        let client_index = task / per_client;
        let lock = clients[client_index].lock(&name);
        let shared = shared.clone();
        let (hold, poll) = (settings.hold, settings.poll);
        handles.push(tokio::spawn(async move {
            contend(TaskSpec { lock, task, client: client_index, mode, end, hold, poll }, &shared).await
        }));
    }
    let mut records = Vec::new();
    let mut per_task = Vec::with_capacity(settings.tasks);
    let mut first_error: Option<BoxError> = None;
    for handle in handles {
        match handle.await {
            Ok(Ok(task_records)) => {
                per_task.push(task_records.len() as u64);
                records.extend(task_records);
            }
            Ok(Err(error)) => {
                per_task.push(0);
                first_error.get_or_insert_with(|| Box::new(error));
            }
            Err(join_error) => {
                per_task.push(0);
                first_error.get_or_insert_with(|| Box::new(join_error));
            }
        }
    }
    let wall = start.elapsed();
    if let Some(error) = first_error {
        return Err(format!("a task failed: {error}").into());
    }
    // The last waiter's departure makes the subscriber task send UNSUBSCRIBE; let it.
    let settle = Instant::now() + Duration::from_secs(2);
    while clients.iter().any(|c| !c.subscribed_channels().is_empty()) && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let commands = CommandStats::fetch(clients[0].fred()).await?.since(&commands_before);
    let sub_after: Vec<[u64; 4]> = clients.iter().map(subscriber_counters).collect();
    let delta = |i: usize| -> u64 { sub_after.iter().zip(&sub_before).map(|(a, b)| a[i].saturating_sub(b[i])).sum() };
    records.sort_by_key(|r| r.seq);
    let in_window = records.iter().filter(|r| r.acquired < end).count() as u64;
    Ok(RunResult {
        label: format!("{} {}×{}", mode.name(), client_count, per_client),
        mode,
        clients: client_count,
        wall,
        in_window,
        run_for: settings.run_for,
        records,
        per_task,
        commands,
        subscribe_calls: delta(0),
        unsubscribe_calls: delta(1),
        messages: delta(2),
        wake_alls: delta(3),
        overlaps: shared.overlaps.load(Ordering::SeqCst),
    })
}

/// A client's subscriber counters: SUBSCRIBE calls, UNSUBSCRIBE calls, messages, wake-alls.
fn subscriber_counters(client: &Client) -> [u64; 4] {
    let s = client.stats().subscriber;
    [s.subscribe_calls, s.unsubscribe_calls, s.messages, s.wake_alls]
}

struct TaskSpec {
    lock: Lock,
    task: usize,
    client: usize,
    mode: Mode,
    end: Instant,
    hold: Duration,
    poll: Duration,
}

/// One contending task: acquire, hold, unlock, until `end`.
async fn contend(spec: TaskSpec, shared: &Shared) -> leasehold::Result<Vec<Record>> {
    let mut records = Vec::new();
    while Instant::now() < spec.end {
        let called = Instant::now();
        let (guard, attempts) = match spec.mode {
            Mode::Leasehold => (spec.lock.lock_with_lease(LEASE).await?, 0),
            Mode::Polling => poll_acquire(&spec.lock, spec.poll).await?,
        };
        let acquired = Instant::now();
        if shared.inside.fetch_add(1, Ordering::SeqCst) != 0 {
            shared.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        let seq = shared.seq.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(spec.hold).await;
        let held = acquired.elapsed();
        shared.inside.fetch_sub(1, Ordering::SeqCst);
        guard.unlock().await?;
        let released = Instant::now();
        records.push(Record {
            seq,
            task: spec.task,
            client: spec.client,
            wait_us: micros(acquired - called),
            hold_us: micros(held),
            acquired,
            released,
            attempts,
        });
    }
    Ok(records)
}

/// The polling baseline: one `try_lock` attempt, then a fixed sleep, until acquired.
async fn poll_acquire(lock: &Lock, interval: Duration) -> leasehold::Result<(LockGuard, u64)> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        if let Some(guard) = lock.try_lock_with(Duration::ZERO, LEASE).await? {
            return Ok((guard, attempts));
        }
        tokio::time::sleep(interval).await;
    }
}

/// Figures derived from one run.
#[derive(Debug, Clone)]
struct Figures {
    acquisitions: u64,
    rate: f64,
    wait_p50: u64,
    wait_p99: u64,
    wait_max: u64,
    hold_p50: u64,
    min_per_task: u64,
    max_per_task: u64,
    rewin: f64,
    same_client: f64,
    handoff_p50: i64,
    handoff_p99: i64,
    handoff_other_p50: i64,
    handoff_other_p99: i64,
    negative_handoffs: usize,
    client_cmds_per_acq: f64,
    all_cmds_per_acq: f64,
    acquire_calls_per_acq: f64,
}

fn figures(result: &RunResult) -> Figures {
    let records = &result.records;
    let acquisitions = records.len() as u64;
    let per_acq = |n: u64| if acquisitions == 0 { 0.0 } else { n as f64 / acquisitions as f64 };
    let mut waits: Vec<u64> = records.iter().map(|r| r.wait_us).collect();
    waits.sort_unstable();
    let mut holds: Vec<u64> = records.iter().map(|r| r.hold_us).collect();
    holds.sort_unstable();
    let mut handoffs = Vec::new();
    let mut handoffs_other = Vec::new();
    let (mut rewins, mut same_client) = (0_u64, 0_u64);
    for pair in records.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        let handoff = signed_nanos(prev.released, next.acquired);
        handoffs.push(handoff);
        if next.task == prev.task {
            rewins += 1;
        } else {
            handoffs_other.push(handoff);
        }
        if next.client == prev.client {
            same_client += 1;
        }
    }
    let pairs = handoffs.len() as f64;
    handoffs.sort_unstable();
    handoffs_other.sort_unstable();
    // Scripts run = acquire attempts + releases; every acquisition has one release.
    let acquire_calls = result.commands.calls("evalsha").saturating_sub(acquisitions);
    Figures {
        acquisitions,
        rate: result.in_window as f64 / result.run_for.as_secs_f64(),
        wait_p50: percentile(&waits, 50.0),
        wait_p99: percentile(&waits, 99.0),
        wait_max: waits.last().copied().unwrap_or(0),
        hold_p50: percentile(&holds, 50.0),
        min_per_task: result.per_task.iter().copied().min().unwrap_or(0),
        max_per_task: result.per_task.iter().copied().max().unwrap_or(0),
        rewin: if pairs > 0.0 { rewins as f64 / pairs } else { 0.0 },
        same_client: if pairs > 0.0 { same_client as f64 / pairs } else { 0.0 },
        handoff_p50: percentile(&handoffs, 50.0),
        handoff_p99: percentile(&handoffs, 99.0),
        handoff_other_p50: percentile(&handoffs_other, 50.0),
        handoff_other_p99: percentile(&handoffs_other, 99.0),
        negative_handoffs: handoffs.iter().filter(|h| **h < 0).count(),
        client_cmds_per_acq: per_acq(result.commands.client_calls()),
        all_cmds_per_acq: per_acq(result.commands.total_calls()),
        acquire_calls_per_acq: per_acq(acquire_calls),
    }
}

fn print_details(result: &RunResult, baseline: &Baseline) {
    let f = figures(result);
    let c = &result.commands;
    println!(
        "{} acquisitions within the {:.0} s run = {:.0}/s; {} in all, the last one {:.2} s after the start (acquires started before the end complete)",
        result.in_window,
        result.run_for.as_secs_f64(),
        f.rate,
        f.acquisitions,
        result.wall.as_secs_f64()
    );
    println!("hold (guard → unlock called; a 1 ms tokio sleep rounds up to the timer tick): p50 {} ms", ms(f.hold_p50));
    println!(
        "wait (lock called → guard): p50 {} ms, p99 {} ms, max {} ms",
        ms(f.wait_p50),
        ms(f.wait_p99),
        ms(f.wait_max)
    );
    println!(
        "per task: min {} max {} acquisitions (tasks with none: {}); per client: {}",
        f.min_per_task,
        f.max_per_task,
        result.per_task.iter().filter(|n| **n == 0).count(),
        per_client(result)
    );
    println!(
        "handoff (unlock returned → next guard): p50 {} ms ({:.1} PING RTT, {:.1} acquire calls), p99 {} ms; to another task: p50 {} ms ({:.1} RTT), p99 {} ms; negative (next guard before the releaser saw its unlock return): {}",
        ms_signed(f.handoff_p50),
        rtts(f.handoff_p50, baseline),
        f.handoff_p50 as f64 / 1000.0 / baseline.acquire_p50_us.max(1) as f64,
        ms_signed(f.handoff_p99),
        ms_signed(f.handoff_other_p50),
        rtts(f.handoff_other_p50, baseline),
        ms_signed(f.handoff_other_p99),
        f.negative_handoffs
    );
    println!(
        "re-win (releasing task holds next): {:.1}%; next holder on the same client: {:.1}%",
        f.rewin * 100.0,
        f.same_client * 100.0
    );
    println!(
        "redis commands (INFO commandstats delta, INFO itself excluded): {} sent by clients ({:.2}/acquisition), {} in all incl. commands run inside scripts ({:.2}/acquisition)",
        c.client_calls(),
        f.client_cmds_per_acq,
        c.total_calls(),
        f.all_cmds_per_acq
    );
    println!(
        "  evalsha {} (acquire attempts {:.2}/acquisition + 1 release), subscribe {}, unsubscribe {}, publish {}",
        c.calls("evalsha"),
        f.acquire_calls_per_acq,
        c.calls("subscribe"),
        c.calls("unsubscribe"),
        c.calls("publish")
    );
    println!("  all: {}", c.breakdown());
    if result.mode == Mode::Polling {
        let attempts: u64 = result.records.iter().map(|r| r.attempts).sum();
        println!("  try_lock attempts counted by the tasks: {attempts}");
    }
    println!(
        "subscriber (summed over {} client(s)): SUBSCRIBE calls {}, UNSUBSCRIBE calls {}, messages {}, wake-alls {}",
        result.clients, result.subscribe_calls, result.unsubscribe_calls, result.messages, result.wake_alls
    );
}

/// Acquisitions per client, `a / b / …`.
fn per_client(result: &RunResult) -> String {
    let mut counts = vec![0_u64; result.clients];
    for record in &result.records {
        counts[record.client] += 1;
    }
    counts.iter().map(u64::to_string).collect::<Vec<_>>().join(" / ")
}

fn rtts(ns: i64, baseline: &Baseline) -> f64 {
    if baseline.ping_p50_us == 0 {
        return 0.0;
    }
    ns as f64 / 1000.0 / baseline.ping_p50_us as f64
}

fn print_summary(results: &[RunResult], baseline: &Baseline) {
    let all: Vec<Figures> = results.iter().map(figures).collect();
    let mut header = vec!["metric".to_owned()];
    header.extend(results.iter().map(|r| r.label.clone()));
    let row = |name: &str, cell: &dyn Fn(&Figures, &RunResult) -> String| -> Vec<String> {
        let mut cells = vec![name.to_owned()];
        cells.extend(all.iter().zip(results).map(|(f, r)| cell(f, r)));
        cells
    };
    let rows = vec![
        row("acquisitions/s", &|f, _| format!("{:.0}", f.rate)),
        row("hold p50 (1 ms sleep)", &|f, _| ms(f.hold_p50)),
        row("wait p50 / p99 / max", &|f, _| format!("{} / {} / {}", ms(f.wait_p50), ms(f.wait_p99), ms(f.wait_max))),
        row("acquisitions per task min / max", &|f, _| format!("{} / {}", f.min_per_task, f.max_per_task)),
        row("acquisitions per client", &|_, r| per_client(r)),
        row("re-win rate", &|f, _| format!("{:.1}%", f.rewin * 100.0)),
        row("handoff p50 / p99", &|f, _| format!("{} / {}", ms_signed(f.handoff_p50), ms_signed(f.handoff_p99))),
        row("handoff p50 in PING RTT", &|f, _| format!("{:.1}", rtts(f.handoff_p50, baseline))),
        row("handoff p50 in uncontended acquires", &|f, _| {
            format!("{:.1}", f.handoff_p50 as f64 / 1000.0 / baseline.acquire_p50_us.max(1) as f64)
        }),
        row("handoff to another task p50 / p99", &|f, _| {
            format!("{} / {}", ms_signed(f.handoff_other_p50), ms_signed(f.handoff_other_p99))
        }),
        row("client commands / acquisition", &|f, _| format!("{:.2}", f.client_cmds_per_acq)),
        row("acquire scripts / acquisition", &|f, _| format!("{:.2}", f.acquire_calls_per_acq)),
        row("all commands incl. in-script / acq.", &|f, _| format!("{:.2}", f.all_cmds_per_acq)),
        row("subscribe / unsubscribe / publish", &|_, r| {
            format!(
                "{} / {} / {}",
                r.commands.calls("subscribe"),
                r.commands.calls("unsubscribe"),
                r.commands.calls("publish")
            )
        }),
        row("messages received / acquisition", &|f, r| {
            format!("{:.2}", if f.acquisitions == 0 { 0.0 } else { r.messages as f64 / f.acquisitions as f64 })
        }),
        row("overlaps (must be 0)", &|_, r| r.overlaps.to_string()),
    ];
    print_table(&header, &rows);
}
