//! One instance of a fleet that runs a job once per tick (`tests/once_per_tick.rs`), the
//! way `LockGuard::unlock_after`'s doc example does it: ticks aligned to a shared start,
//! `try_lock`, the job, `unlock_after(min_hold)`.
//!
//! Usage: `ticker URL NAME START_UNIX_MS OFFSET_MS PERIOD_MS MIN_HOLD_MS TICKS JOB_MS`.
//! Its first tick fires at the wall-clock time `START_UNIX_MS + OFFSET_MS` (the offset
//! stands for the skew between instances' schedulers), then every `PERIOD_MS`, `TICKS`
//! times. At each tick it tries the lock once; when it gets it, it prints `RAN <tick>`,
//! works `JOB_MS` and calls `unlock_after(MIN_HOLD_MS)`; otherwise it prints
//! `SKIPPED <tick>`. An error prints `ERR <tick> <kind>`. It prints `DONE` at the end.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn millis(arg: &str) -> u64 {
    arg.parse().unwrap_or_else(|_| panic!("{arg:?} is not a number"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, start, offset, period, min_hold, ticks, job] = args.as_slice() else {
        eprintln!("usage: ticker URL NAME START_UNIX_MS OFFSET_MS PERIOD_MS MIN_HOLD_MS TICKS JOB_MS");
        std::process::exit(2);
    };
    let (start, offset, period) = (millis(start), millis(offset), Duration::from_millis(millis(period)));
    let (min_hold, ticks, job) = (Duration::from_millis(millis(min_hold)), millis(ticks), millis(job));
    let client = leasehold::Client::connect(url.as_str()).await.expect("connect");
    let lock = client.lock(name.as_str());
    // The first tick on the wall clock, as every instance computes it from the shared
    // start; then the monotonic clock keeps the period.
    let now_ms = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis()).expect("ms");
    let first = tokio::time::Instant::now() + Duration::from_millis((start + offset).saturating_sub(now_ms));
    let mut interval = tokio::time::interval_at(first, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    for tick in 0..ticks {
        interval.tick().await;
        match lock.try_lock().await {
            Ok(Some(guard)) => {
                say(&format!("RAN {tick}"));
                tokio::time::sleep(Duration::from_millis(job)).await;
                if let Err(error) = guard.unlock_after(min_hold).await {
                    say(&format!("ERR {tick} {}", error.kind()));
                }
            }
            Ok(None) => say(&format!("SKIPPED {tick}")),
            Err(error) => say(&format!("ERR {tick} {}", error.kind())),
        }
    }
    client.shutdown().await.expect("shutdown");
    say("DONE");
}
