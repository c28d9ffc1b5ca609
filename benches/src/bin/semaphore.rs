//! `semaphore`: the semaphore's figures (issue 19 item 7), as ratios in one run against
//! one server.
//!
//! `--clients` clients (4) × `--tasks` tasks each (16) share one semaphore of
//! `--permits` permits (8) for `--seconds` (5): each task loops {take 1 permit, hold
//! `--hold-ms` (1, a tokio sleep), release it}. Two contenders, one after the other on
//! a fresh server state:
//!
//! - `leasehold`: `sem.acquire(1)` (a waiter that finds no permit queues on the server;
//!   a release serves the queue head-first and the waiter learns of its grant from a
//!   message, without a request) and the permit's `release()`;
//! - `redisson`: Redisson 4.7's `RSemaphore` pattern, its own scripts sent through fred:
//!   `tryAcquire` (GET, DECRBY) first; on a miss the task waits on its client's latch,
//!   which a count message `k` on `redisson_sc:{NAME}` releases `min(waiters, k)` times
//!   (`SemaphorePubSub.onMessage`), and tries again; `release` is INCRBY + PUBLISH. Each
//!   client keeps one subscription for the run (Redisson unsubscribes when its last
//!   waiter leaves: not counted here);
//! - `polling`: `sem.try_acquire(1)` retried after a `--poll-ms` (2) sleep until it
//!   succeeds, then the permit's `release()`: a semaphore without pub/sub.
//!
//! Figures per contender: acquisitions in all, per task min and max and min/max (every
//! task served: target >= 0.5), and requests per acquisition: the top-level commands
//! the server ran (`INFO commandstats` delta, commands inside scripts and `INFO` left
//! out; `(S)SUBSCRIBE`, `PING` and the releases counted) over the acquisitions (target
//! <= 3; a release is one of them).
//!
//! Exits with 1 when an invariant breaks: more tasks inside than permits, a failed
//! call, permits not all back at the end.
//!
//! Flags: `--clients N`, `--tasks N`, `--permits N`, `--seconds N`, `--hold-ms N`,
//! `--poll-ms N`, `--kind sem|pes` (`pes`: a `PermitExpirableSemaphore` with 30 s leases,
//! `acquire_with_lease` against polling `try_acquire_with(0, lease)`; no Redisson row). `REDIS_URL` selects a server (it must be otherwise idle); without it
//! a throwaway `redis-server` is started.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::{
    Builder, Client as FredClient, ClientLike, Config, EventInterface, LuaInterface, PubsubInterface, ReconnectPolicy,
};
use fred::types::{ClusterHash, CustomCommand};
use leasehold::Client;
use leasehold_benches::{
    check_flags, flag, join_all, print_machine, print_table, rerun_command, BoxError, CommandStats, Target,
};
use leasehold_test_support::redisson_semaphore::{REDISSON_SEM_RELEASE, REDISSON_SEM_TRY_ACQUIRE};

const FLAGS: &[&str] = &["--clients", "--tasks", "--permits", "--seconds", "--hold-ms", "--poll-ms", "--kind"];
const NAME: &str = "bench:semaphore";

#[derive(Debug, Clone)]
struct Settings {
    clients: usize,
    tasks: usize,
    permits: u32,
    run_for: Duration,
    hold: Duration,
    poll: Duration,
    /// `--kind pes`: a `PermitExpirableSemaphore` (leased permits, 30 s) instead.
    pes: bool,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let settings = Settings {
            clients: flag(args, "--clients")?.unwrap_or(4),
            tasks: flag(args, "--tasks")?.unwrap_or(16),
            permits: flag(args, "--permits")?.unwrap_or(8),
            run_for: Duration::from_secs(flag(args, "--seconds")?.unwrap_or(5)),
            hold: Duration::from_millis(flag(args, "--hold-ms")?.unwrap_or(1)),
            poll: Duration::from_millis(flag(args, "--poll-ms")?.unwrap_or(2)),
            pes: match flag::<String>(args, "--kind")?.as_deref() {
                None | Some("sem") => false,
                Some("pes") => true,
                Some(other) => return Err(format!("--kind sem|pes, got {other:?}").into()),
            },
        };
        if settings.clients == 0 || settings.tasks == 0 || settings.permits == 0 || settings.run_for.is_zero() {
            return Err("--clients, --tasks, --permits and --seconds must be above 0".into());
        }
        Ok(settings)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    Leasehold,
    Redisson,
    Polling,
}

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Leasehold => "leasehold",
            Contender::Redisson => "redisson",
            Contender::Polling => "polling",
        }
    }
}

/// What one contender's run measured.
struct Outcome {
    per_task: Vec<u64>,
    requests: u64,
}

async fn reset(fred: &FredClient, target: &Target) -> Result<(), BoxError> {
    if target.is_own() {
        let command = CustomCommand::new_static("FLUSHALL", ClusterHash::Random, false);
        let _: String = fred.custom(command, vec!["SYNC"]).await?;
    } else {
        let command = CustomCommand::new_static("DEL", ClusterHash::Random, false);
        let _: i64 = fred.custom(command, vec![NAME]).await?;
    }
    let command = CustomCommand::new_static("CONFIG", ClusterHash::Random, false);
    let _: String = fred.custom(command, vec!["RESETSTAT"]).await?;
    Ok(())
}

/// One Redisson client of the `redisson` contender: its command connection, its
/// subscription's latch, and how many of its tasks wait on the latch (Redisson's
/// `RedissonLockEntry.acquired()`).
#[derive(Clone)]
struct RedissonClient {
    fred: FredClient,
    latch: Arc<tokio::sync::Semaphore>,
    waiting: Arc<AtomicUsize>,
    shas: Arc<(String, String)>,
}

impl RedissonClient {
    async fn connect(url: &str) -> Result<Self, BoxError> {
        let fred = Builder::from_config(Config::from_url(url)?).build()?;
        fred.init().await?;
        let acquire: String = fred.script_load(REDISSON_SEM_TRY_ACQUIRE).await?;
        let release: String = fred.script_load(REDISSON_SEM_RELEASE).await?;
        let ear = Builder::from_config(Config::from_url(url)?).build_subscriber_client()?;
        ear.init().await?;
        let latch = Arc::new(tokio::sync::Semaphore::new(0));
        let waiting = Arc::new(AtomicUsize::new(0));
        let mut messages = ear.message_rx();
        ear.subscribe(format!("redisson_sc:{{{NAME}}}")).await?;
        let (latch_in, waiting_in) = (latch.clone(), waiting.clone());
        tokio::spawn(async move {
            // Keeps the subscriber client alive as long as messages come.
            let _ear = ear;
            while let Ok(message) = messages.recv().await {
                // SemaphorePubSub.onMessage: release(min(acquired(), message)).
                let count = message.value.as_i64().unwrap_or(0).max(0);
                let wake = usize::try_from(count).unwrap_or(0).min(waiting_in.load(Ordering::SeqCst));
                latch_in.add_permits(wake);
            }
        });
        Ok(RedissonClient { fred, latch, waiting, shas: Arc::new((acquire, release)) })
    }

    async fn try_acquire(&self) -> Result<bool, BoxError> {
        let taken: i64 = self.fred.evalsha(self.shas.0.as_str(), vec![NAME], vec!["1"]).await?;
        Ok(taken == 1)
    }

    /// `RSemaphore.acquire(1)`: a try, then (subscribed) try and wait on the latch.
    async fn acquire(&self) -> Result<(), BoxError> {
        if self.try_acquire().await? {
            return Ok(());
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let result = async {
            loop {
                if self.try_acquire().await? {
                    return Ok::<(), BoxError>(());
                }
                self.latch.acquire().await?.forget();
            }
        }
        .await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        result
    }

    async fn release(&self) -> Result<(), BoxError> {
        let channel = format!("redisson_sc:{{{NAME}}}");
        let _: fred::types::Value =
            self.fred.evalsha(self.shas.1.as_str(), vec![NAME, channel.as_str()], vec!["1", "publish"]).await?;
        Ok(())
    }
}

/// A `PermitExpirableSemaphore` permit's lease in the bench (`--kind pes`).
const LEASE: Duration = Duration::from_secs(30);

/// What one task holds.
enum Held {
    Sem(leasehold::SemaphorePermit),
    Pes(leasehold::Permit),
    Theirs,
}

async fn run(
    contender: Contender,
    clients: &[Client],
    redisson: &[RedissonClient],
    fred: &FredClient,
    settings: &Settings,
    overlap: &Arc<AtomicBool>,
) -> Result<Outcome, BoxError> {
    if settings.pes {
        clients[0].permit_expirable_semaphore(NAME).set_permits(settings.permits).await?;
    } else if !clients[0].semaphore(NAME).try_set_permits(settings.permits).await? {
        return Err("the semaphore was already set".into());
    }
    let before = CommandStats::fetch(fred).await?;
    let inside = Arc::new(AtomicUsize::new(0));
    let end = Instant::now() + settings.run_for;
    let mut handles = Vec::new();
    for (client, theirs) in clients.iter().zip(redisson) {
        for _ in 0..settings.tasks {
            let (sem, inside, overlap, settings) =
                (client.semaphore(NAME), inside.clone(), overlap.clone(), settings.clone());
            let pes = client.permit_expirable_semaphore(NAME);
            let theirs = theirs.clone();
            handles.push(tokio::spawn(async move {
                let mut acquisitions = 0u64;
                while Instant::now() < end {
                    let permit = match contender {
                        Contender::Leasehold if settings.pes => Held::Pes(pes.acquire_with_lease(LEASE).await?),
                        Contender::Leasehold => Held::Sem(sem.acquire(1).await?),
                        Contender::Redisson => {
                            theirs.acquire().await?;
                            Held::Theirs
                        }
                        Contender::Polling => loop {
                            if settings.pes {
                                if let Some(permit) = pes.try_acquire_with(Duration::ZERO, LEASE).await? {
                                    break Held::Pes(permit);
                                }
                            } else if let Some(permit) = sem.try_acquire(1).await? {
                                break Held::Sem(permit);
                            }
                            tokio::time::sleep(settings.poll).await;
                        },
                    };
                    if inside.fetch_add(1, Ordering::SeqCst) >= settings.permits as usize {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    tokio::time::sleep(settings.hold).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    match permit {
                        Held::Sem(permit) => permit.release().await?,
                        Held::Pes(permit) => permit.release().await?,
                        Held::Theirs => theirs.release().await?,
                    }
                    acquisitions += 1;
                }
                Ok::<u64, BoxError>(acquisitions)
            }));
        }
    }
    let per_task = join_all(handles).await?;
    let spent = CommandStats::fetch(fred).await?.since(&before);
    let left = if settings.pes {
        clients[0].permit_expirable_semaphore(NAME).available_permits().await?
    } else {
        clients[0].semaphore(NAME).available_permits().await?
    };
    if left != i64::from(settings.permits) {
        return Err(format!("{left} permits at the end, not {}", settings.permits).into());
    }
    Ok(Outcome { per_task, requests: spent.top_level_calls(&["info", "config|resetstat"]) })
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: semaphore [--clients N] [--tasks N] [--permits N] [--seconds N] [--hold-ms N] [--poll-ms N] \
             [--kind sem|pes]"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!("# semaphore: tasks of several clients sharing one semaphore, woken by messages, against Redisson's pattern and polling");
    println!("rerun: {}", rerun_command("semaphore"));
    let target = Target::from_env();
    let url = target.url().to_owned();
    let mut clients = Vec::new();
    let mut redisson = Vec::new();
    for _ in 0..settings.clients {
        clients.push(Client::builder().url(&url).connect().await?);
        redisson.push(RedissonClient::connect(&url).await?);
    }
    let mut builder = Builder::from_config(Config::from_url(&url)?);
    builder.set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
    let fred = builder.build()?;
    fred.init().await?;
    print_machine(&fred, &target).await?;
    println!("settings: {settings:?}");
    let overlap = Arc::new(AtomicBool::new(false));
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let contenders: &[Contender] = if settings.pes {
        // Redisson's RPermitExpirableSemaphore pattern is not reproduced here.
        &[Contender::Leasehold, Contender::Polling]
    } else {
        &[Contender::Leasehold, Contender::Redisson, Contender::Polling]
    };
    for &contender in contenders {
        reset(&fred, &target).await?;
        if target.is_own() {
            // FLUSHALL dropped the scripts: load Redisson's again.
            for theirs in &redisson {
                let _: String = theirs.fred.script_load(REDISSON_SEM_TRY_ACQUIRE).await?;
                let _: String = theirs.fred.script_load(REDISSON_SEM_RELEASE).await?;
            }
        }
        match run(contender, &clients, &redisson, &fred, &settings, &overlap).await {
            Ok(outcome) => {
                let total: u64 = outcome.per_task.iter().sum();
                let min = outcome.per_task.iter().copied().min().unwrap_or(0);
                let max = outcome.per_task.iter().copied().max().unwrap_or(0);
                let ratio = if max == 0 { 0.0 } else { min as f64 / max as f64 };
                let per_acquisition = if total == 0 { 0.0 } else { outcome.requests as f64 / total as f64 };
                rows.push(vec![
                    contender.name().to_owned(),
                    total.to_string(),
                    format!("{:.0}", total as f64 / settings.run_for.as_secs_f64()),
                    min.to_string(),
                    max.to_string(),
                    format!("{ratio:.2}"),
                    outcome.requests.to_string(),
                    format!("{per_acquisition:.2}"),
                ]);
            }
            Err(error) => problems.push(format!("{}: {error}", contender.name())),
        }
    }
    if overlap.load(Ordering::SeqCst) {
        problems.push("more tasks inside than permits".to_owned());
    }
    println!();
    let header: Vec<String> =
        ["contender", "acquisitions", "per s", "task min", "task max", "min/max", "requests", "requests/acq"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
    print_table(&header, &rows);
    println!(
        "targets (issue 29 item 4): min/max >= 0.5, requests/acq <= 2.5 (a release counts as one request), \
         leasehold's per s >= redisson's"
    );
    for problem in &problems {
        println!("PROBLEM: {problem}");
    }
    Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
