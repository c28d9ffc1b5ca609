//! # Fencing: a paused holder's late write is rejected
//!
//! Two workers share a lock on a report and write the report's value in Redis.
//!
//! 1. Worker A takes the fenced lock with a 1 s lease, gets token `tA`, and writes.
//! 2. Worker A "pauses" (here it just sleeps 1.5 s without renewing, as a GC pause or a
//!    `SIGSTOP` would make it) and its lease runs out.
//! 3. Worker B takes the lock, gets token `tB > tA`, and writes.
//! 4. Worker A wakes up, unaware, and writes again with `tA`: the fence rejects it, and
//!    the report keeps B's value. The same late write *without* the fence (a plain `SET`)
//!    would have overwritten B's.
//!
//! ## Running it
//!
//! ```text
//! cargo run -p leasehold-demo --bin fencing
//! ```
//!
//! With `REDIS_URL` unset it starts a throwaway `redis-server` (killed at exit); with it
//! set, it uses that server and deletes its keys at the end. Exit status 1 if the fence
//! failed to reject the late write.

use std::process::ExitCode;
use std::time::Duration;

use leasehold::fence::{fenced_set, FencedWrite};
use leasehold::fred::prelude::KeysInterface;
use leasehold_test_support::Target;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    // `REDIS_URL`, or a throwaway server that lives until main returns.
    let target = Target::from_env();
    let url = target.url().to_owned();
    match run(&url).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str) -> leasehold::Result<bool> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let lock_name = format!("fencing-demo:{run}:lock");
    let report = format!("fencing-demo:{run}:report");
    let worker_a = leasehold::Client::connect(url).await?;
    let worker_b = leasehold::Client::connect(url).await?;
    println!("redis: {url}");

    let lock_a = worker_a.fenced_lock(&lock_name);
    let guard_a = lock_a.lock_with_lease(Duration::from_secs(1)).await?;
    let token_a = guard_a.token();
    println!("A  locked with token {token_a} (1 s lease)");
    println!("A  writes 'draft by A' ............ {:?}", guard_a.fenced_set(&report, "draft by A").await?);

    println!("A  pauses for 1.5 s (GC, SIGSTOP): its lease runs out");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    println!("A  lost? {} (A does not look: a paused process cannot)", guard_a.is_lost());

    let lock_b = worker_b.fenced_lock(&lock_name);
    let guard_b = lock_b.lock().await?;
    let token_b = guard_b.token();
    println!("B  locked with token {token_b} (> {token_a})");
    println!("B  writes 'final by B' ............ {:?}", guard_b.fenced_set(&report, "final by B").await?);

    let late = fenced_set(&worker_a, &report, token_a, "late write by A").await?;
    println!("A  wakes and writes with {token_a} ..... {late:?}");
    let value: Option<String> = worker_b.fred().get(&report).await.map_err(leasehold::Error::from)?;
    println!("report = {:?}", value.as_deref().unwrap_or(""));
    println!("(without the fence, A's late plain SET would have replaced B's value)");

    guard_b.unlock().await?;
    let _ = guard_a.unlock().await; // NotOwner / LockLost: its hold is long gone
    let _: i64 = worker_b
        .fred()
        .del(vec![report.clone(), leasehold::fence::fence_key(&report), lock_b.token_key()?])
        .await
        .map_err(leasehold::Error::from)?;

    let ok =
        matches!(late, FencedWrite::Rejected { fence } if fence == token_b) && value.as_deref() == Some("final by B");
    println!("{}", if ok { "OK: the late write was rejected" } else { "FAILED: the late write got through" });
    Ok(ok)
}
