//! `blocking`: the uncontended `lock()` + `unlock()` pair through the blocking API
//! (`leasehold::blocking`, a call handed to the client's runtime thread and the caller
//! parked until it answers) against the same pair through the async API (awaited in a
//! task of a multi-thread runtime), in one run, on one server.
//!
//! Reported: p50, p90, p99 and mean of each pair, in rounds that alternate the two
//! sides (so a change of machine load hits both), and the ratio blocking / async of the
//! p50s and p99s over every round (issue 22's target: p50 at most 1.3x), with the
//! server's `PING` round trip for scale.
//!
//! Checked (exit 1 if broken): every `lock()` and `unlock()` succeeds, and no lock key
//! is left behind.
//!
//! Flags: `--pairs N` per side per round (2000), `--rounds N` (3), `--warmup N` pairs per
//! side before the first round (200). `REDIS_URL` selects a server; without it a
//! throwaway `redis-server` is started.

use std::process::ExitCode;
use std::time::Instant;

use leasehold_benches::{
    check_flags, flag, micros, ms, percentile, ping_rtts, print_machine, print_table, rerun_command, BoxError, Target,
};

const FLAGS: &[&str] = &["--pairs", "--rounds", "--warmup"];
const ASYNC_NAME: &str = "bench:blocking:async";
const BLOCKING_NAME: &str = "bench:blocking:blocking";

/// `pairs` async lock + unlock pairs, each timed, in a task of `runtime`.
fn async_pairs(
    runtime: &tokio::runtime::Runtime,
    client: &leasehold::Client,
    pairs: usize,
) -> Result<Vec<u64>, BoxError> {
    let client = client.clone();
    let task = runtime.spawn(async move {
        let lock = client.lock(ASYNC_NAME);
        let mut times = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            let start = Instant::now();
            lock.lock().await?.unlock().await?;
            times.push(micros(start.elapsed()));
        }
        Ok::<_, leasehold::Error>(times)
    });
    Ok(runtime.block_on(task)??)
}

/// `pairs` blocking lock + unlock pairs, each timed, from this (plain) thread.
fn blocking_pairs(client: &leasehold::blocking::Client, pairs: usize) -> Result<Vec<u64>, BoxError> {
    let lock = client.lock(BLOCKING_NAME);
    let mut times = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let start = Instant::now();
        lock.lock()?.unlock()?;
        times.push(micros(start.elapsed()));
    }
    Ok(times)
}

/// One row: label, p50, p90, p99, mean (ms).
fn row(label: &str, times: &mut [u64]) -> Vec<String> {
    times.sort_unstable();
    let mean = times.iter().sum::<u64>() / times.len().max(1) as u64;
    let cells = [50.0, 90.0, 99.0].map(|p| ms(percentile(times, p)));
    let mut row = vec![label.to_owned()];
    row.extend(cells);
    row.push(ms(mean));
    row
}

fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: blocking [--pairs N] [--rounds N] [--warmup N]");
        return Ok(ExitCode::SUCCESS);
    }
    check_flags(&args, FLAGS)?;
    let pairs: usize = flag(&args, "--pairs")?.unwrap_or(2000);
    let rounds: usize = flag(&args, "--rounds")?.unwrap_or(3);
    let warmup: usize = flag(&args, "--warmup")?.unwrap_or(200);
    println!("# blocking: the blocking lock() + unlock() pair against the async pair");
    println!("rerun: {}", rerun_command("blocking"));
    let target = Target::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let async_client = runtime.block_on(leasehold::Client::connect(target.url()))?;
    runtime.block_on(print_machine(async_client.fred(), &target))?;
    let blocking_client = leasehold::blocking::Client::connect(target.url())?;
    let rtts = runtime.block_on(ping_rtts(async_client.fred(), 1000))?;
    println!(
        "PING round trip: p50 {} ms, p99 {} ms; async side: a task of a {}-worker multi-thread runtime; \
         blocking side: the main thread, calls run on the client's current-thread runtime thread",
        ms(percentile(&rtts, 50.0)),
        ms(percentile(&rtts, 99.0)),
        runtime.metrics().num_workers()
    );
    println!(
        "settings: {pairs} pairs per side per round, {rounds} rounds (alternating), {warmup} warm-up pairs per side"
    );
    async_pairs(&runtime, &async_client, warmup)?;
    blocking_pairs(&blocking_client, warmup)?;

    let header: Vec<String> = ["pair (ms)", "p50", "p90", "p99", "mean"].iter().map(|s| (*s).to_owned()).collect();
    let (mut all_async, mut all_blocking) = (Vec::new(), Vec::new());
    let mut rows = Vec::new();
    for round in 1..=rounds {
        let mut times = async_pairs(&runtime, &async_client, pairs)?;
        rows.push(row(&format!("round {round}: async"), &mut times));
        all_async.extend(times);
        let mut times = blocking_pairs(&blocking_client, pairs)?;
        rows.push(row(&format!("round {round}: blocking"), &mut times));
        all_blocking.extend(times);
    }
    rows.push(row("all rounds: async", &mut all_async));
    rows.push(row("all rounds: blocking", &mut all_blocking));
    print_table(&header, &rows);
    let ratio = |p: f64| percentile(&all_blocking, p) as f64 / percentile(&all_async, p).max(1) as f64;
    println!("blocking / async: p50 {:.2}x, p99 {:.2}x (target: p50 <= 1.30x)", ratio(50.0), ratio(99.0));

    let left = runtime.block_on(async {
        let mut left = Vec::new();
        for name in [ASYNC_NAME, BLOCKING_NAME] {
            if async_client.lock(name).is_locked().await? {
                left.push(name);
            }
        }
        Ok::<_, leasehold::Error>(left)
    })?;
    blocking_client.shutdown()?;
    if !left.is_empty() {
        println!("BROKEN: lock keys left behind: {left:?}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
