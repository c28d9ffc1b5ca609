//! # Once per tick: a job a fleet runs once per tick, whoever's tick comes first
//!
//! Three instances (three clients, as three processes would have) run the same
//! scheduled job every second. Their schedulers fire a little apart (0, 80 and 160 ms
//! after the whole second: clock skew and scheduling jitter), and each one, at each
//! tick, tries the lock once:
//!
//! ```text
//! let Some(guard) = lock.try_lock().await? else { continue };  // another instance has it
//! job().await;
//! guard.unlock_after(min_hold).await?;                          // kept until start + min_hold
//! ```
//!
//! The job takes 20 ms, less than the skew: a plain `unlock` would free the lock before
//! the later instances' ticks fire, and they would run the tick again. `unlock_after`
//! keeps the key until 400 ms after the acquire (more than the 160 ms skew, less than
//! the 1 s period minus it), so each tick runs exactly once. The last run prints the
//! same ticks with a plain `unlock` for comparison.
//!
//! ## Running it
//!
//! ```text
//! cargo run -p leasehold-demo --bin once-per-tick
//! ```
//!
//! With `REDIS_URL` unset it starts a throwaway `redis-server` (killed at exit); with it
//! set, it uses that server (the lock names are unique per run, and nothing is left once
//! the kept keys expire). Exit status 1 if a tick ran other than once with
//! `unlock_after`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_test_support::Target;
use tokio::sync::Mutex;
use tokio::time::{interval_at, Instant, MissedTickBehavior};

const PERIOD: Duration = Duration::from_secs(1);
const MIN_HOLD: Duration = Duration::from_millis(400);
const JOB: Duration = Duration::from_millis(20);
const TICKS: u64 = 5;
/// Each instance's scheduler fires this much after the whole second.
const SKEWS_MS: [u64; 3] = [0, 80, 160];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    // `REDIS_URL`, or a throwaway server that lives until main returns.
    let target = Target::from_env();
    let url = target.url().to_owned();
    println!("redis: {url}");
    let result = async {
        let kept = run(&url, true).await?;
        let plain = run(&url, false).await?;
        Ok::<_, leasehold::Error>((kept, plain))
    };
    match result.await {
        Ok((kept, plain)) => {
            println!("runs per tick with unlock_after({MIN_HOLD:?}): {kept:?}");
            println!("runs per tick with a plain unlock:         {plain:?}");
            if kept.iter().all(|&runs| runs == 1) {
                ExitCode::SUCCESS
            } else {
                eprintln!("a tick ran other than once with unlock_after");
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the fleet for [`TICKS`] ticks and answers how many instances ran each tick.
async fn run(url: &str, min_hold: bool) -> leasehold::Result<Vec<u32>> {
    let name =
        format!("once-per-tick-demo:{}:{}", uuid::Uuid::new_v4().simple(), if min_hold { "kept" } else { "plain" });
    let runs = Arc::new(Mutex::new(vec![0_u32; usize::try_from(TICKS).unwrap_or(0)]));
    // The first tick: the next whole second of the wall clock, plus a second to connect.
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let into_second = Duration::from_nanos(u64::from(since_epoch.subsec_nanos()));
    let first = Instant::now() + (PERIOD - into_second) + PERIOD;
    let mut instances = Vec::new();
    for (instance, skew) in SKEWS_MS.into_iter().enumerate() {
        let client = leasehold::Client::connect(url).await?;
        let (name, runs) = (name.clone(), runs.clone());
        instances.push(tokio::spawn(async move {
            let lock = client.lock(&name);
            let mut ticks = interval_at(first + Duration::from_millis(skew), PERIOD);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
            for tick in 0..TICKS {
                ticks.tick().await;
                let Some(guard) = lock.try_lock().await? else { continue };
                println!(
                    "tick {tick}: instance {instance} runs the job{}",
                    if min_hold { "" } else { " (plain unlock)" }
                );
                runs.lock().await[usize::try_from(tick).unwrap_or(0)] += 1;
                tokio::time::sleep(JOB).await;
                if min_hold {
                    guard.unlock_after(MIN_HOLD).await?;
                } else {
                    guard.unlock().await?;
                }
            }
            client.shutdown().await
        }));
    }
    for instance in instances {
        instance.await.map_err(|error| leasehold::Error::new(leasehold::ErrorKind::Redis, error.to_string()))??;
    }
    let runs = runs.lock().await.clone();
    Ok(runs)
}
