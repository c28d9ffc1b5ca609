//! `fleet`: fairness of one lock name across a fleet of service instances (issue 10:
//! "no service instance starves, no thundering herd").
//!
//! Two shapes contend on ONE lock name, one after the other:
//!
//! - **clients**: K leasehold `Client`s (each with its own connections) × T tasks inside
//!   this process (default 4 × 16);
//! - **processes**: P child processes × T tasks (default 8 × 8). Each child is this same
//!   program re-run with `--worker`, with its own `Client`. The children connect, print
//!   `READY`, and wait for a `GO START_NS` line on stdin; all of them start at `START_NS`
//!   on the machine's wall clock. When done each prints its samples on stdout (format
//!   below) and `DONE`; the parent aggregates.
//!
//! Each task loops, until the run time is over: `lock_with_lease(10 s)` → claim an
//! "inside" flag with `SET NX` (failing = another holder is inside: an overlap) → hold
//! for `--hold-ms` with a tokio sleep → `DEL` the flag → `unlock`. Every acquire started
//! before the end completes (each is bounded: 30 s after the end it is an error).
//!
//! Reported per shape: acquisitions/s; wait (lock called → guard) p50/p99/max;
//! acquisitions per task min/max, their ratio, tasks with none; each client's/process's
//! share (its acquisitions ÷ the mean per client/process); top-level requests per
//! acquisition (`INFO commandstats` delta of the commands clients send, leaving out what
//! scripts run inside the server and the program's own `SET NX`/`DEL`/`INFO`); handoff
//! (previous holder's `unlock` returned → next holder has its guard) and re-win rate;
//! overlaps. Then the targets of issue 10, printed, not asserted, except overlaps.
//!
//! Clocks: in the clients shape every time is this process's `Instant`. In the processes
//! shape wait and hold are each child's `Instant`; the acquire and release times used
//! for handoffs are the wall clock (`SystemTime`, `CLOCK_REALTIME`), one clock for every
//! process on the machine (and the clock a local redis-server's `TIME` reads). Holds are
//! ordered by their acquire times (holds do not overlap; the check proves it).
//!
//! Worker output, one record a line: `ACQ TASK WAIT_US HOLD_US ACQUIRED_NS RELEASED_NS`,
//! `TASK TASK COUNT`, `OVERLAPS N`, `SUB SUBSCRIBES UNSUBSCRIBES MESSAGES WAKE_ALLS`,
//! then `DONE`; or `ERROR MESSAGE` and exit status 1.
//!
//! Exits with 1 if two holders were ever inside at once, or if a lock call failed.
//!
//! Flags: `--seconds N` (8, per shape), `--clients N` (4), `--tasks N` (16, per client),
//! `--processes N` (8), `--process-tasks N` (8, per process), `--hold-ms N` (1),
//! `--kind lock|fair` (the lock type: `leasehold::Lock` or `leasehold::FairLock`),
//! `--shape clients|processes|both` (both). `REDIS_URL` selects a server; without it a
//! throwaway `redis-server` is started.

use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::prelude::{Client as FredClient, KeysInterface};
use fred::types::SetOptions;
use leasehold::{Client, Lock, LockGuard};
use leasehold_benches::{
    check_flags, flag, micros, ms, ms_signed, percentile, ping_rtts, print_machine, print_table, rerun_command,
    signed_nanos, BoxError, CommandStats, Target,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const LEASE: Duration = Duration::from_secs(10);
/// How long after the end of the run an acquire may still take before it is an error.
const GRACE: Duration = Duration::from_secs(30);
/// How long a worker may take to connect and say `READY` (and to be told `GO`).
const STARTUP: Duration = Duration::from_secs(30);
/// From sending `GO` to the common start.
const START_DELAY: Duration = Duration::from_millis(200);
/// How long to wait for the subscribers' last `UNSUBSCRIBE` after a run.
const SETTLE: Duration = Duration::from_secs(2);
/// Left out of the top-level requests: this program's own `INFO`, and `QUIT`, sent when
/// a dropped `Client` closes its connections (the previous shape's clients may close
/// theirs during the next shape's run). The inside flag's `SET`/`DEL` are script
/// commands, left out anyway.
const OWN_COMMANDS: &[&str] = &["info", "quit"];
const FLAGS: &[&str] =
    &["--seconds", "--clients", "--tasks", "--processes", "--process-tasks", "--hold-ms", "--kind", "--shape"];
const WORKER_FLAGS: &[&str] =
    &["--worker", "--url", "--name", "--tasks", "--first-task", "--hold-ms", "--seconds", "--kind"];

/// The lock type under test. Each kind says how a task makes its handle and acquires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockKind {
    /// `leasehold::Lock`, acquired with `lock_with_lease(10 s)`.
    Lock,
    /// `leasehold::FairLock` (server-side FIFO queue), acquired with `lock_with_lease(10 s)`.
    Fair,
}

impl LockKind {
    fn parse(text: &str) -> Result<Self, BoxError> {
        match text {
            "lock" => Ok(LockKind::Lock),
            "fair" => Ok(LockKind::Fair),
            other => {
                Err(format!("--kind {other:?}: the lock types are: lock (leasehold::Lock), fair (leasehold::FairLock)")
                    .into())
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            LockKind::Lock => "lock",
            LockKind::Fair => "fair",
        }
    }

    /// What a task calls to acquire, for the printed settings.
    fn acquire_call(self) -> &'static str {
        match self {
            LockKind::Lock => "Lock::lock_with_lease(10 s)",
            LockKind::Fair => "FairLock::lock_with_lease(10 s)",
        }
    }

    fn handle(self, client: &Client, name: &str) -> Contender {
        match self {
            LockKind::Lock => Contender::Lock(client.lock(name)),
            LockKind::Fair => Contender::Fair(client.fair_lock(name)),
        }
    }
}

/// One task's lock handle (the handle is the owner).
enum Contender {
    Lock(Lock),
    Fair(leasehold::FairLock),
}

impl Contender {
    async fn acquire(&self) -> leasehold::Result<Held> {
        match self {
            Contender::Lock(lock) => Ok(Held::Lock(lock.lock_with_lease(LEASE).await?)),
            Contender::Fair(lock) => Ok(Held::Lock(lock.lock_with_lease(LEASE).await?)),
        }
    }
}

/// A held lock of some kind.
enum Held {
    Lock(LockGuard),
}

impl Held {
    async fn unlock(self) -> leasehold::Result<()> {
        match self {
            Held::Lock(guard) => guard.unlock().await,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// K `Client`s × T tasks in this process.
    Clients,
    /// P child processes × T tasks.
    Processes,
}

#[derive(Debug, Clone)]
struct Settings {
    run_for: Duration,
    clients: usize,
    tasks: usize,
    processes: usize,
    process_tasks: usize,
    hold: Duration,
    kind: LockKind,
    shapes: Vec<Shape>,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let shapes = match flag::<String>(args, "--shape")?.as_deref() {
            None | Some("both") => vec![Shape::Clients, Shape::Processes],
            Some("clients") => vec![Shape::Clients],
            Some("processes") => vec![Shape::Processes],
            Some(other) => return Err(format!("--shape {other:?}: expected clients, processes or both").into()),
        };
        let settings = Settings {
            run_for: Duration::from_secs(flag(args, "--seconds")?.unwrap_or(8)),
            clients: flag(args, "--clients")?.unwrap_or(4),
            tasks: flag(args, "--tasks")?.unwrap_or(16),
            processes: flag(args, "--processes")?.unwrap_or(8),
            process_tasks: flag(args, "--process-tasks")?.unwrap_or(8),
            hold: Duration::from_millis(flag(args, "--hold-ms")?.unwrap_or(1)),
            kind: LockKind::parse(flag::<String>(args, "--kind")?.as_deref().unwrap_or("lock"))?,
            shapes,
        };
        if settings.clients == 0 || settings.tasks == 0 || settings.processes == 0 || settings.process_tasks == 0 {
            return Err("--clients, --tasks, --processes and --process-tasks must be above 0".into());
        }
        Ok(settings)
    }
}

/// Nanoseconds since the UNIX epoch on the wall clock: one clock for every process here.
fn wall_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Where acquire and release times are read.
#[derive(Debug, Clone, Copy)]
enum Clock {
    /// Nanoseconds since this instant (one process).
    Since(Instant),
    /// [`wall_ns`] (across processes).
    Wall,
}

impl Clock {
    fn now_ns(self) -> i64 {
        match self {
            Clock::Since(origin) => signed_nanos(origin, Instant::now()),
            Clock::Wall => wall_ns(),
        }
    }
}

/// One hold, as the holding task saw it.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// Task number within the shape.
    task: usize,
    /// Client or process number.
    group: usize,
    /// From calling lock to having the guard.
    wait_us: u64,
    /// From having the guard to calling unlock (flag `SET NX`, sleep, flag `DEL`).
    hold_us: u64,
    acquired_ns: i64,
    /// When `unlock()` returned.
    released_ns: i64,
}

struct TaskSpec {
    contender: Contender,
    fred: FredClient,
    inside_key: String,
    task: usize,
    group: usize,
    end: Instant,
    hold: Duration,
    clock: Clock,
}

/// One contending task: acquire, hold, unlock, until `end`.
async fn contend(spec: TaskSpec, overlaps: Arc<AtomicU64>) -> Result<Vec<Record>, BoxError> {
    let give_up = tokio::time::Instant::from_std(spec.end + GRACE);
    let mut records = Vec::new();
    while Instant::now() < spec.end {
        let called = Instant::now();
        let held = tokio::time::timeout_at(give_up, spec.contender.acquire())
            .await
            .map_err(|_| format!("task {}: no guard {GRACE:?} after the end of the run", spec.task))??;
        let acquired = Instant::now();
        let acquired_ns = spec.clock.now_ns();
        let claimed: Option<String> = spec.fred.set(&spec.inside_key, "1", None, Some(SetOptions::NX), false).await?;
        if claimed.is_none() {
            overlaps.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(spec.hold).await;
        if claimed.is_some() {
            let _: i64 = spec.fred.del(&spec.inside_key).await?;
        }
        let hold_us = micros(acquired.elapsed());
        held.unlock().await?;
        let released_ns = spec.clock.now_ns();
        records.push(Record {
            task: spec.task,
            group: spec.group,
            wait_us: micros(acquired - called),
            hold_us,
            acquired_ns,
            released_ns,
        });
    }
    Ok(records)
}

/// Acquires and releases an uncontended name once, so connections are warm.
async fn warm(client: &Client, kind: LockKind, name: &str) -> Result<(), BoxError> {
    kind.handle(client, name).acquire().await?.unlock().await?;
    Ok(())
}

/// Waits (at most [`SETTLE`]) for the clients' last `UNSUBSCRIBE`.
async fn settle(clients: &[Client]) {
    let until = Instant::now() + SETTLE;
    while clients.iter().any(|c| !c.subscribed_channels().is_empty()) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A client's subscriber counters: SUBSCRIBE calls, UNSUBSCRIBE calls, messages, wake-alls.
fn subscriber_counters(client: &Client) -> [u64; 4] {
    let s = client.stats().subscriber;
    [s.subscribe_calls, s.unsubscribe_calls, s.messages, s.wake_alls]
}

fn add_counters(sum: &mut [u64; 4], after: [u64; 4], before: [u64; 4]) {
    for i in 0..4 {
        sum[i] += after[i].saturating_sub(before[i]);
    }
}

/// Spawns the tasks of one group and collects their records and per-task counts.
async fn run_tasks(specs: Vec<TaskSpec>, overlaps: &Arc<AtomicU64>) -> Result<(Vec<Record>, Vec<u64>), BoxError> {
    let handles: Vec<_> = specs.into_iter().map(|spec| tokio::spawn(contend(spec, overlaps.clone()))).collect();
    let mut records = Vec::new();
    let mut per_task = Vec::with_capacity(handles.len());
    let mut first_error: Option<BoxError> = None;
    for handle in handles {
        match handle.await {
            Ok(Ok(task_records)) => {
                per_task.push(task_records.len() as u64);
                records.extend(task_records);
            }
            Ok(Err(error)) => {
                per_task.push(0);
                first_error.get_or_insert(error);
            }
            Err(join_error) => {
                per_task.push(0);
                first_error.get_or_insert_with(|| Box::new(join_error));
            }
        }
    }
    match first_error {
        Some(error) => Err(format!("a task failed: {error}").into()),
        None => Ok((records, per_task)),
    }
}

/// What one shape measured.
#[derive(Debug)]
struct ShapeResult {
    label: String,
    /// "client" or "process".
    group_word: &'static str,
    groups: usize,
    run_for: Duration,
    wall: Duration,
    /// End of the run on the records' clock (acquisitions before it are "in the window").
    end_ns: i64,
    /// Sorted by `acquired_ns`.
    records: Vec<Record>,
    per_task: Vec<u64>,
    commands: CommandStats,
    overlaps: u64,
    /// SUBSCRIBE calls, UNSUBSCRIBE calls, messages, wake-alls, summed over the groups.
    subscriber: [u64; 4],
    clock: &'static str,
}

async fn run_clients(settings: &Settings, url: &str, run_id: &str) -> Result<ShapeResult, BoxError> {
    let name = format!("bench:fleet:{run_id}:clients");
    let inside_key = format!("{name}:inside");
    let mut clients = Vec::with_capacity(settings.clients);
    for i in 0..settings.clients {
        let client = Client::builder().url(url).connect().await?;
        warm(&client, settings.kind, &format!("bench:fleet:{run_id}:warm:{i}")).await?;
        clients.push(client);
    }
    let fred = clients[0].fred().clone();
    let _: i64 = fred.del(&inside_key).await?;
    let sub_before: Vec<[u64; 4]> = clients.iter().map(subscriber_counters).collect();
    let overlaps = Arc::new(AtomicU64::new(0));
    let commands_before = CommandStats::fetch(&fred).await?;

    let start = Instant::now();
    let end = start + settings.run_for;
    let mut specs = Vec::new();
    for (group, client) in clients.iter().enumerate() {
        for i in 0..settings.tasks {
            specs.push(TaskSpec {
                contender: settings.kind.handle(client, &name),
                fred: client.fred().clone(),
                inside_key: inside_key.clone(),
                task: group * settings.tasks + i,
                group,
                end,
                hold: settings.hold,
                clock: Clock::Since(start),
            });
        }
    }
    let (mut records, per_task) = run_tasks(specs, &overlaps).await?;
    let wall = start.elapsed();
    settle(&clients).await;
    let commands = CommandStats::fetch(&fred).await?.since(&commands_before);
    let mut subscriber = [0; 4];
    for (client, before) in clients.iter().zip(sub_before) {
        add_counters(&mut subscriber, subscriber_counters(client), before);
    }
    records.sort_by_key(|r| r.acquired_ns);
    Ok(ShapeResult {
        label: format!("{} clients × {} tasks", settings.clients, settings.tasks),
        group_word: "client",
        groups: settings.clients,
        run_for: settings.run_for,
        wall,
        end_ns: i64::try_from(settings.run_for.as_nanos()).unwrap_or(i64::MAX),
        records,
        per_task,
        commands,
        overlaps: overlaps.load(Ordering::SeqCst),
        subscriber,
        clock: "Instant (one process)",
    })
}

/// A running worker process and its pipes.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// What one worker reported.
#[derive(Debug, Default)]
struct WorkerReport {
    records: Vec<Record>,
    /// (task, acquisitions)
    tasks: Vec<(usize, u64)>,
    overlaps: u64,
    subscriber: [u64; 4],
}

fn field<T: std::str::FromStr>(parts: &[&str], index: usize, line: &str) -> Result<T, BoxError> {
    parts.get(index).and_then(|p| p.parse().ok()).ok_or_else(|| format!("bad worker line {line:?}").into())
}

/// Reads a worker's output to the end and waits for it to exit.
async fn collect(group: usize, mut worker: Worker) -> Result<WorkerReport, BoxError> {
    drop(worker.stdin);
    let mut report = WorkerReport::default();
    let mut done = false;
    while let Some(line) = worker.lines.next_line().await? {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.first().copied() {
            Some("ACQ") => report.records.push(Record {
                task: field(&parts, 1, &line)?,
                group,
                wait_us: field(&parts, 2, &line)?,
                hold_us: field(&parts, 3, &line)?,
                acquired_ns: field(&parts, 4, &line)?,
                released_ns: field(&parts, 5, &line)?,
            }),
            Some("TASK") => report.tasks.push((field(&parts, 1, &line)?, field(&parts, 2, &line)?)),
            Some("OVERLAPS") => report.overlaps = field(&parts, 1, &line)?,
            Some("SUB") => {
                for i in 0..4 {
                    report.subscriber[i] = field(&parts, i + 1, &line)?;
                }
            }
            Some("DONE") => done = true,
            Some("ERROR") => return Err(format!("worker {group}: {line}").into()),
            _ => return Err(format!("worker {group}: unexpected line {line:?}").into()),
        }
    }
    let status = worker.child.wait().await?;
    if !status.success() || !done {
        return Err(format!("worker {group} ended with {status} (DONE seen: {done})").into());
    }
    Ok(report)
}

async fn run_processes(settings: &Settings, url: &str, run_id: &str) -> Result<ShapeResult, BoxError> {
    let name = format!("bench:fleet:{run_id}:processes");
    let inside_key = format!("{name}:inside");
    let probe = Client::builder().url(url).connect().await?;
    let _: i64 = probe.fred().del(&inside_key).await?;
    let exe = std::env::current_exe()?;
    let mut workers = Vec::with_capacity(settings.processes);
    for p in 0..settings.processes {
        let mut child = Command::new(&exe)
            .args(["--worker", &p.to_string(), "--url", url, "--name", &name])
            .args(["--tasks", &settings.process_tasks.to_string()])
            .args(["--first-task", &(p * settings.process_tasks).to_string()])
            .args(["--hold-ms", &settings.hold.as_millis().to_string()])
            .args(["--seconds", &settings.run_for.as_secs().to_string(), "--kind", settings.kind.name()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("worker without stdin")?;
        let stdout = child.stdout.take().ok_or("worker without stdout")?;
        workers.push(Worker { child, stdin, lines: BufReader::new(stdout).lines() });
    }
    let ready_by = tokio::time::Instant::now() + STARTUP;
    for (p, worker) in workers.iter_mut().enumerate() {
        let line = tokio::time::timeout_at(ready_by, worker.lines.next_line())
            .await
            .map_err(|_| format!("worker {p} not READY within {STARTUP:?}"))??;
        if line.as_deref() != Some("READY") {
            return Err(format!("worker {p}: expected READY, got {line:?}").into());
        }
    }
    let commands_before = CommandStats::fetch(probe.fred()).await?;
    let start_ns = wall_ns() + i64::try_from(START_DELAY.as_nanos()).unwrap_or(0);
    for worker in &mut workers {
        worker.stdin.write_all(format!("GO {start_ns}\n").as_bytes()).await?;
        worker.stdin.flush().await?;
    }
    let started = Instant::now();
    let mut handles: Vec<_> =
        workers.into_iter().enumerate().map(|(p, worker)| tokio::spawn(collect(p, worker))).collect();
    let finish_by = tokio::time::Instant::now() + START_DELAY + settings.run_for + GRACE + STARTUP;
    let mut reports = Vec::with_capacity(handles.len());
    let mut first_error: Option<BoxError> = None;
    for handle in &mut handles {
        match tokio::time::timeout_at(finish_by, &mut *handle).await {
            Ok(Ok(Ok(report))) => reports.push(report),
            Ok(Ok(Err(error))) => {
                first_error.get_or_insert(error);
            }
            Ok(Err(join_error)) => {
                first_error.get_or_insert_with(|| Box::new(join_error));
            }
            Err(_) => {
                first_error.get_or_insert_with(|| "a worker did not finish in time".into());
            }
        }
    }
    if let Some(error) = first_error {
        // Aborting a collector drops its child, which kills it.
        for handle in &handles {
            handle.abort();
        }
        return Err(error);
    }
    let wall = started.elapsed().saturating_sub(START_DELAY);
    let commands = CommandStats::fetch(probe.fred()).await?.since(&commands_before);
    let total_tasks = settings.processes * settings.process_tasks;
    let mut per_task = vec![0_u64; total_tasks];
    let mut records = Vec::new();
    let mut overlaps = 0;
    let mut subscriber = [0; 4];
    for report in reports {
        for (task, count) in report.tasks {
            *per_task.get_mut(task).ok_or("worker reported an unknown task")? = count;
        }
        records.extend(report.records);
        overlaps += report.overlaps;
        add_counters(&mut subscriber, report.subscriber, [0; 4]);
    }
    records.sort_by_key(|r| r.acquired_ns);
    Ok(ShapeResult {
        label: format!("{} processes × {} tasks", settings.processes, settings.process_tasks),
        group_word: "process",
        groups: settings.processes,
        run_for: settings.run_for,
        wall,
        end_ns: start_ns + i64::try_from(settings.run_for.as_nanos()).unwrap_or(i64::MAX),
        records,
        per_task,
        commands,
        overlaps,
        subscriber,
        clock: "wall clock (CLOCK_REALTIME, common to the processes)",
    })
}

/// `--worker`: one process of the processes shape (see the module docs for the protocol).
async fn worker(args: &[String]) -> Result<(), BoxError> {
    check_flags(args, WORKER_FLAGS)?;
    let index: usize = flag(args, "--worker")?.ok_or("--worker needs the process number")?;
    let url: String = flag(args, "--url")?.ok_or("--url missing")?;
    let name: String = flag(args, "--name")?.ok_or("--name missing")?;
    let tasks: usize = flag(args, "--tasks")?.ok_or("--tasks missing")?;
    let first_task: usize = flag(args, "--first-task")?.ok_or("--first-task missing")?;
    let hold = Duration::from_millis(flag(args, "--hold-ms")?.ok_or("--hold-ms missing")?);
    let run_for = Duration::from_secs(flag(args, "--seconds")?.ok_or("--seconds missing")?);
    let kind = LockKind::parse(&flag::<String>(args, "--kind")?.ok_or("--kind missing")?)?;

    let client = Client::builder().url(&url).connect().await?;
    warm(&client, kind, &format!("{name}:warm:{index}")).await?;
    println!("READY");
    let mut line = String::new();
    let mut stdin = BufReader::new(tokio::io::stdin());
    tokio::time::timeout(STARTUP, stdin.read_line(&mut line)).await.map_err(|_| "no GO line")??;
    let start_ns: i64 =
        line.trim().strip_prefix("GO ").and_then(|n| n.parse().ok()).ok_or_else(|| format!("bad GO line {line:?}"))?;
    if let Ok(ahead) = u64::try_from(start_ns - wall_ns()) {
        tokio::time::sleep(Duration::from_nanos(ahead)).await;
    }
    let late = u64::try_from(wall_ns() - start_ns).unwrap_or(0);
    let end = Instant::now() + run_for.saturating_sub(Duration::from_nanos(late));
    let sub_before = subscriber_counters(&client);
    let overlaps = Arc::new(AtomicU64::new(0));
    let inside_key = format!("{name}:inside");
    let specs = (0..tasks)
        .map(|i| TaskSpec {
            contender: kind.handle(&client, &name),
            fred: client.fred().clone(),
            inside_key: inside_key.clone(),
            task: first_task + i,
            group: index,
            end,
            hold,
            clock: Clock::Wall,
        })
        .collect();
    let (records, per_task) = run_tasks(specs, &overlaps).await?;
    settle(std::slice::from_ref(&client)).await;
    let mut subscriber = [0; 4];
    add_counters(&mut subscriber, subscriber_counters(&client), sub_before);
    for r in &records {
        println!("ACQ {} {} {} {} {}", r.task, r.wait_us, r.hold_us, r.acquired_ns, r.released_ns);
    }
    for (i, count) in per_task.iter().enumerate() {
        println!("TASK {} {count}", first_task + i);
    }
    println!("OVERLAPS {}", overlaps.load(Ordering::SeqCst));
    println!("SUB {} {} {} {}", subscriber[0], subscriber[1], subscriber[2], subscriber[3]);
    println!("DONE");
    Ok(())
}

/// Figures derived from one shape's run.
#[derive(Debug, Clone)]
struct Figures {
    acquisitions: u64,
    in_window: u64,
    rate: f64,
    wait_p50: u64,
    wait_p99: u64,
    wait_max: u64,
    hold_mean_us: f64,
    task_min: u64,
    task_max: u64,
    task_ratio: f64,
    tasks_without: usize,
    /// Tasks whose only acquisitions came after the end of the run.
    tasks_only_after: usize,
    per_group: Vec<u64>,
    shares: Vec<f64>,
    share_min: f64,
    share_max: f64,
    top_level: u64,
    top_level_per_acq: f64,
    evalsha_per_acq: f64,
    all_per_acq: f64,
    handoff_p50: i64,
    handoff_p99: i64,
    negative_handoffs: usize,
    rewin: f64,
    same_group: f64,
}

fn figures(result: &ShapeResult) -> Figures {
    let records = &result.records;
    let acquisitions = records.len() as u64;
    let per_acq = |n: u64| if acquisitions == 0 { 0.0 } else { n as f64 / acquisitions as f64 };
    let in_window = records.iter().filter(|r| r.acquired_ns < result.end_ns).count() as u64;
    let mut waits: Vec<u64> = records.iter().map(|r| r.wait_us).collect();
    waits.sort_unstable();
    let hold_sum: u64 = records.iter().map(|r| r.hold_us).sum();
    // Fairness counts only what was acquired within the run: after its end the tasks
    // that were still waiting get the lock one by one, with nobody else contending.
    let mut per_task = vec![0_u64; result.per_task.len()];
    let mut per_group = vec![0_u64; result.groups];
    for record in records.iter().filter(|r| r.acquired_ns < result.end_ns) {
        if let Some(count) = per_task.get_mut(record.task) {
            *count += 1;
        }
        if let Some(count) = per_group.get_mut(record.group) {
            *count += 1;
        }
    }
    let task_min = per_task.iter().copied().min().unwrap_or(0);
    let task_max = per_task.iter().copied().max().unwrap_or(0);
    let tasks_without = per_task.iter().filter(|n| **n == 0).count();
    let mean = in_window as f64 / result.groups.max(1) as f64;
    let shares: Vec<f64> = per_group.iter().map(|&n| if mean > 0.0 { n as f64 / mean } else { 0.0 }).collect();
    let mut handoffs = Vec::new();
    let (mut rewins, mut same_group) = (0_u64, 0_u64);
    for pair in records.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        handoffs.push(next.acquired_ns - prev.released_ns);
        rewins += u64::from(next.task == prev.task);
        same_group += u64::from(next.group == prev.group);
    }
    let pairs = handoffs.len().max(1) as f64;
    handoffs.sort_unstable();
    let top_level = result.commands.top_level_calls(OWN_COMMANDS);
    Figures {
        acquisitions,
        in_window,
        rate: in_window as f64 / result.run_for.as_secs_f64().max(f64::MIN_POSITIVE),
        wait_p50: percentile(&waits, 50.0),
        wait_p99: percentile(&waits, 99.0),
        wait_max: waits.last().copied().unwrap_or(0),
        hold_mean_us: if acquisitions == 0 { 0.0 } else { hold_sum as f64 / acquisitions as f64 },
        task_min,
        task_max,
        task_ratio: if task_max == 0 { 0.0 } else { task_min as f64 / task_max as f64 },
        tasks_without,
        tasks_only_after: per_task.iter().zip(&result.per_task).filter(|(w, all)| **w == 0 && **all > 0).count(),
        per_group,
        share_min: shares.iter().copied().fold(f64::INFINITY, f64::min),
        share_max: shares.iter().copied().fold(0.0, f64::max),
        shares,
        top_level,
        top_level_per_acq: per_acq(top_level),
        evalsha_per_acq: per_acq(result.commands.calls("evalsha")),
        all_per_acq: per_acq(result.commands.total_calls()),
        handoff_p50: percentile(&handoffs, 50.0),
        handoff_p99: percentile(&handoffs, 99.0),
        negative_handoffs: handoffs.iter().filter(|h| **h < 0).count(),
        rewin: rewins as f64 / pairs,
        same_group: same_group as f64 / pairs,
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

fn print_details(result: &ShapeResult) {
    let f = figures(result);
    let c = &result.commands;
    let tasks = result.per_task.len();
    println!(
        "{} acquisitions within the {:.0} s run = {:.0}/s; {} in all, the last released {:.2} s after the start",
        f.in_window,
        result.run_for.as_secs_f64(),
        f.rate,
        f.acquisitions,
        result.wall.as_secs_f64()
    );
    println!(
        "hold (guard → unlock called: flag SET NX, tokio sleep, flag DEL): mean {:.3} ms",
        f.hold_mean_us / 1000.0
    );
    println!(
        "wait (lock called → guard): p50 {} ms, p99 {} ms, max {} ms",
        ms(f.wait_p50),
        ms(f.wait_p99),
        ms(f.wait_max)
    );
    println!(
        "per task, within the run: min {} max {} (min/max {:.2}); tasks with none: {} of {tasks} ({} of them acquired only after the end)",
        f.task_min, f.task_max, f.task_ratio, f.tasks_without, f.tasks_only_after
    );
    let groups: Vec<String> = f.per_group.iter().zip(&f.shares).map(|(n, share)| format!("{n} ({share:.2})")).collect();
    println!("per {}, within the run (acquisitions, share of the mean): {}", result.group_word, groups.join(" / "));
    println!(
        "handoff (unlock returned → next guard, clock: {}): p50 {} ms, p99 {} ms, negative {}; re-win (releasing task holds next) {:.1}%; next holder in the same {} {:.1}%",
        result.clock,
        ms_signed(f.handoff_p50),
        ms_signed(f.handoff_p99),
        f.negative_handoffs,
        f.rewin * 100.0,
        result.group_word,
        f.same_group * 100.0
    );
    println!(
        "redis commands (INFO commandstats delta): top-level {} ({:.2}/acquisition; evalsha {:.2}/acquisition); all incl. in-script and the flag's SET/DEL {:.2}/acquisition",
        f.top_level, f.top_level_per_acq, f.evalsha_per_acq, f.all_per_acq
    );
    println!("  all: {}", c.breakdown());
    let s = result.subscriber;
    println!(
        "subscriber (summed over the {} {}): SUBSCRIBE calls {}, UNSUBSCRIBE calls {}, messages {} ({:.2}/acquisition), wake-alls {}",
        result.groups,
        if result.group_word == "process" { "processes" } else { "clients" },
        s[0],
        s[1],
        s[2],
        if f.acquisitions == 0 { 0.0 } else { s[2] as f64 / f.acquisitions as f64 },
        s[3]
    );
    println!("targets of issue 10 (printed, not asserted; overlaps asserted):");
    println!(
        "  every task acquires within the run: {} of {tasks} tasks with none: {}",
        f.tasks_without,
        verdict(f.tasks_without == 0)
    );
    println!(
        "  per-task min/max = {} / {} = {:.2} (target >= 0.5): {}",
        f.task_min,
        f.task_max,
        f.task_ratio,
        verdict(f.task_ratio >= 0.5)
    );
    println!(
        "  {} share min / max = {:.2} / {:.2} of the mean (target within 0.5-2): {}",
        result.group_word,
        f.share_min,
        f.share_max,
        verdict(f.share_min >= 0.5 && f.share_max <= 2.0)
    );
    let bound_us = 2.0 * tasks as f64 * f.hold_mean_us;
    println!(
        "  wait p99 = {} ms; 2 × {tasks} tasks × mean hold {:.3} ms = {:.1} ms (target p99 <= that): {}",
        ms(f.wait_p99),
        f.hold_mean_us / 1000.0,
        bound_us / 1000.0,
        verdict(f.wait_p99 as f64 <= bound_us)
    );
    println!(
        "  top-level requests / acquisition = {:.2} (target <= 3): {}",
        f.top_level_per_acq,
        verdict(f.top_level_per_acq <= 3.0)
    );
    println!("  overlaps = {} (must be 0): {}", result.overlaps, verdict(result.overlaps == 0));
}

fn print_summary(results: &[ShapeResult]) {
    let all: Vec<Figures> = results.iter().map(figures).collect();
    let mut header = vec!["metric".to_owned()];
    header.extend(results.iter().map(|r| r.label.clone()));
    let row = |name: &str, cell: &dyn Fn(&Figures, &ShapeResult) -> String| -> Vec<String> {
        let mut cells = vec![name.to_owned()];
        cells.extend(all.iter().zip(results).map(|(f, r)| cell(f, r)));
        cells
    };
    let rows = vec![
        row("acquisitions/s", &|f, _| format!("{:.0}", f.rate)),
        row("hold mean (ms)", &|f, _| format!("{:.3}", f.hold_mean_us / 1000.0)),
        row("wait p50 / p99 / max", &|f, _| format!("{} / {} / {}", ms(f.wait_p50), ms(f.wait_p99), ms(f.wait_max))),
        row("per task min / max (ratio), in the run", &|f, _| {
            format!("{} / {} ({:.2})", f.task_min, f.task_max, f.task_ratio)
        }),
        row("tasks with 0 acquisitions in the run", &|f, r| format!("{} of {}", f.tasks_without, r.per_task.len())),
        row("per client/process, in the run", &|f, _| {
            f.per_group.iter().map(u64::to_string).collect::<Vec<_>>().join(" / ")
        }),
        row("share of mean min / max", &|f, _| format!("{:.2} / {:.2}", f.share_min, f.share_max)),
        row("top-level requests / acquisition", &|f, _| format!("{:.2}", f.top_level_per_acq)),
        row("evalsha / acquisition", &|f, _| format!("{:.2}", f.evalsha_per_acq)),
        row("handoff p50 / p99", &|f, _| format!("{} / {}", ms_signed(f.handoff_p50), ms_signed(f.handoff_p99))),
        row("re-win / next in same client|process", &|f, _| {
            format!("{:.1}% / {:.1}%", f.rewin * 100.0, f.same_group * 100.0)
        }),
        row("messages received / acquisition", &|f, r| {
            format!("{:.2}", if f.acquisitions == 0 { 0.0 } else { r.subscriber[2] as f64 / f.acquisitions as f64 })
        }),
        row("overlaps (must be 0)", &|_, r| r.overlaps.to_string()),
    ];
    print_table(&header, &rows);
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        if let Err(error) = worker(&args).await {
            println!("ERROR {error}");
            // Not a return: a read of stdin may still be pending on a blocking thread.
            std::process::exit(1);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: fleet [--seconds N] [--clients N] [--tasks N] [--processes N] [--process-tasks N] [--hold-ms N] \
             [--kind lock|fair] [--shape clients|processes|both]"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!(
        "# fleet: one lock name, {} clients × {} tasks and {} processes × {} tasks",
        settings.clients, settings.tasks, settings.processes, settings.process_tasks
    );
    println!("rerun: {}", rerun_command("fleet"));
    let target = Target::from_env();
    let probe = Client::builder().url(target.url()).connect().await?;
    print_machine(probe.fred(), &target).await?;
    let pings = ping_rtts(probe.fred(), 500).await?;
    println!(
        "settings: run {:?} per shape, kind {} ({}), hold {:?} (tokio sleep), lease {:?}; PING p50 {} ms",
        settings.run_for,
        settings.kind.name(),
        settings.kind.acquire_call(),
        settings.hold,
        LEASE,
        ms(percentile(&pings, 50.0))
    );
    drop(probe);
    let run_id = format!("{}:{}", std::process::id(), wall_ns() / 1_000_000);
    let mut results = Vec::new();
    let mut failed = false;
    for &shape in &settings.shapes {
        println!();
        let outcome = match shape {
            Shape::Clients => {
                println!("## {} clients × {} tasks (one process)", settings.clients, settings.tasks);
                run_clients(&settings, target.url(), &run_id).await
            }
            Shape::Processes => {
                println!("## {} processes × {} tasks", settings.processes, settings.process_tasks);
                run_processes(&settings, target.url(), &run_id).await
            }
        };
        match outcome {
            Ok(result) => {
                print_details(&result);
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
    println!();
    println!("## summary (times in ms)");
    print_summary(&results);
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
