//! `multilock`: the multi-lock's figures (issue 20 item 8).
//!
//! 1. Dining philosophers: 5 tasks, 5 locks (`fork:0` … `fork:4`, each in its own
//!    slot: no hash tag), task `i` takes forks `i` and `i + 1 mod 5` with
//!    `MultiLock::try_lock_for(5 s)`, even tasks naming them in that order and odd tasks
//!    the other way round, tasks on 2 clients (task `i` on client `i mod 2`, so each
//!    pair of neighbours shares a fork across clients), for `--seconds` (10). A wait that
//!    runs out (5 s without the pair) is counted as a deadlock; the eating (holds of
//!    both forks) of each task is counted, and min/max over the tasks says whether
//!    every task progresses. Two neighbours inside their critical sections at once (a
//!    fork held twice) is an overlap.
//!    Run twice: each task's pair through one client (task `i` on client `i mod 2`),
//!    then each fork through one client (fork `f` on client `f mod 2`), so that most
//!    pairs span two clients and the canonical order is what prevents deadlock.
//! 2. Scripts per acquire of a same-slot pair (`{pair}:a`, `{pair}:b`) on one client:
//!    `EVALSHA` calls (`INFO commandstats`) per `try_lock` over `--pairs` (200)
//!    acquires, each followed by its unlock (counted apart: one `EVALSHA` per client
//!    and slot as well, `multi_release.lua`).
//!
//! Exits with 1 on a deadlock, an overlap, a failed call, or keys left behind.
//! `REDIS_URL` selects a server; without it a throwaway `redis-server` is started.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{Client, MultiLock};
use leasehold_benches::{check_flags, dbsize, flag, print_machine, rerun_command, BoxError, CommandStats, Target};

const PHILOSOPHERS: usize = 5;
const WAIT: Duration = Duration::from_secs(5);
const FLAGS: &[&str] = &["--seconds", "--pairs"];

/// What one philosopher did.
#[derive(Debug, Default)]
struct Tally {
    meals: AtomicU64,
    timeouts: AtomicU64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: multilock [--seconds N] [--pairs N]");
        return Ok(ExitCode::SUCCESS);
    }
    check_flags(&args, FLAGS)?;
    let run_for = Duration::from_secs(flag(&args, "--seconds")?.unwrap_or(10));
    let pairs: u64 = flag(&args, "--pairs")?.unwrap_or(200);
    println!("# multilock: dining philosophers and the one-script path");
    println!("rerun: {}", rerun_command("multilock"));
    let target = Target::from_env();
    let clients = [Client::connect(target.url()).await?, Client::connect(target.url()).await?];
    print_machine(clients[0].fred(), &target).await?;

    let mut failed = false;
    failed |= philosophers(&clients, run_for, Split::TaskPerClient).await?;
    failed |= philosophers(&clients, run_for, Split::ForkPerClient).await?;
    failed |= scripts_per_acquire(&clients[0], pairs).await?;

    if target.is_own() {
        let left = dbsize(clients[0].fred()).await?;
        if left > 0 {
            println!("FAIL: {left} keys left behind");
            failed = true;
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// How the philosophers' forks are spread over the two clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// Task `i` takes both its forks through client `i mod 2` (on a standalone server
    /// a pair is then one script: atomic, whatever the order).
    TaskPerClient,
    /// Fork `f` is taken through client `f mod 2`, so most pairs span both clients and
    /// are taken in two round trips, in the canonical order.
    ForkPerClient,
}

/// Part 1; `true` on a deadlock, an overlap or a failed call.
async fn philosophers(clients: &[Client; 2], run_for: Duration, split: Split) -> Result<bool, BoxError> {
    let how = match split {
        Split::TaskPerClient => "task i on client i mod 2",
        Split::ForkPerClient => "fork f through client f mod 2",
    };
    println!(
        "\n## dining philosophers: {PHILOSOPHERS} tasks, {PHILOSOPHERS} forks, 2 clients ({how}), opposite orders, \
         {run_for:?}, try_lock_for({WAIT:?}), watchdog mode, hold = one yield"
    );
    let tallies: Arc<Vec<Tally>> = Arc::new((0..PHILOSOPHERS).map(|_| Tally::default()).collect());
    let forks_in_use: Arc<Vec<AtomicBool>> = Arc::new((0..PHILOSOPHERS).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for i in 0..PHILOSOPHERS {
        let (left, right) = (i, (i + 1) % PHILOSOPHERS);
        let order = if i % 2 == 0 { [left, right] } else { [right, left] };
        let multi = match split {
            Split::TaskPerClient => clients[i % 2].multi_lock(order.map(|f| format!("fork:{f}"))),
            Split::ForkPerClient => MultiLock::new(order.map(|f| clients[f % 2].lock(format!("fork:{f}")))),
        };
        let (tallies, forks, overlaps, errors) =
            (tallies.clone(), forks_in_use.clone(), overlaps.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                match multi.try_lock_for(WAIT).await {
                    Ok(Some(guard)) => {
                        for f in [left, right] {
                            if forks[f].swap(true, Ordering::AcqRel) {
                                overlaps.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        tokio::task::yield_now().await;
                        for f in [left, right] {
                            forks[f].store(false, Ordering::Release);
                        }
                        tallies[i].meals.fetch_add(1, Ordering::Relaxed);
                        if guard.unlock().await.is_err() {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(None) => {
                        tallies[i].timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => {
                        println!("task {i}: {error}");
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let meals: Vec<u64> = tallies.iter().map(|t| t.meals.load(Ordering::Relaxed)).collect();
    let deadlocks: u64 = tallies.iter().map(|t| t.timeouts.load(Ordering::Relaxed)).sum();
    let (min, max) = (meals.iter().copied().min().unwrap_or(0), meals.iter().copied().max().unwrap_or(0));
    let ratio = if max == 0 { 0.0 } else { min as f64 / max as f64 };
    let total: u64 = meals.iter().sum();
    println!("meals per task (task i holds forks i, i+1; odd tasks name them reversed): {meals:?}");
    println!(
        "total {total} ({:.0}/s); per-task min/max {ratio:.2}; deadlocks (5 s waits that ran out) {deadlocks}; \
         overlaps {}; errors {}",
        total as f64 / run_for.as_secs_f64(),
        overlaps.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed)
    );
    let bad = deadlocks > 0 || overlaps.load(Ordering::Relaxed) > 0 || errors.load(Ordering::Relaxed) > 0;
    if bad {
        println!("FAIL: a deadlock, an overlap or an error");
    }
    if ratio < 0.5 {
        println!("note: per-task min/max below 0.5");
    }
    Ok(bad)
}

/// Part 2; `true` on a failed call.
async fn scripts_per_acquire(client: &Client, pairs: u64) -> Result<bool, BoxError> {
    println!("\n## scripts per acquire: a same-slot pair ({{pair}}:a, {{pair}}:b) on one client, {pairs} acquires");
    let multi = client.multi_lock(["{pair}:b", "{pair}:a"]);
    let (mut acquire_scripts, mut unlock_scripts, mut acquire_calls, mut unlock_calls) = (0, 0, 0, 0);
    for _ in 0..pairs {
        let before = CommandStats::fetch(client.fred()).await?;
        let Some(guard) = multi.try_lock().await? else {
            println!("FAIL: a free pair was not taken");
            return Ok(true);
        };
        let taken = CommandStats::fetch(client.fred()).await?;
        guard.unlock().await?;
        let after = CommandStats::fetch(client.fred()).await?;
        let acquire = taken.since(&before);
        acquire_scripts += acquire.calls("evalsha") + acquire.calls("eval");
        acquire_calls += acquire.client_calls();
        let unlock = after.since(&taken);
        unlock_scripts += unlock.calls("evalsha") + unlock.calls("eval");
        unlock_calls += unlock.client_calls();
    }
    let per = |n: u64| n as f64 / pairs as f64;
    println!(
        "EVALSHA per acquire {:.2}; client commands per acquire {:.2} (INFO excluded); EVALSHA per unlock {:.2}; client commands per unlock {:.2} (one script per client and slot, issue 29)",
        per(acquire_scripts),
        per(acquire_calls),
        per(unlock_scripts),
        per(unlock_calls)
    );
    Ok(false)
}
