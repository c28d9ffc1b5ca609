//! `latch`: the count-down latch's wake-up figures (issue 19 item 7), as ratios in one
//! run against one server.
//!
//! Per round (`--rounds`, default 5): a latch with count 2; `--waiters` waiters (default
//! 100) spread over `--clients` clients (default 4), each an unbounded `wait()` on its
//! client's handle with a recheck interval far past the run (so only the `0` message
//! can wake them); once every client counts its waiters and has the channel
//! subscribed, one round trip is measured per client (the PING p50 over 200 PINGs, just
//! before), one `count_down()` takes the count to 1, and the last `count_down()` is
//! timed. Per waiter: the time from the last `count_down()` call (and from its return)
//! to the waiter's return, in round trips of its own client. Target: every waiter
//! within 3 round trips of the last `count_down`.
//!
//! The floor beside it: per client, as many `count()` calls (one `GET` each) sent at
//! once as that client has waiters, in round trips from the send to the last answer:
//! what the waiters' reads after the message cost at the least.
//!
//! Exits with 1 only when an invariant breaks: a waiter that returns before the last
//! count down, a failed call, a latch key left behind.
//!
//! Flags: `--waiters N` (100), `--clients N` (4), `--rounds N` (5). `REDIS_URL` selects
//! a server; without it a throwaway `redis-server` is started.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{Client, CountDownLatch};
use leasehold_benches::{
    check_flags, flag, join_all, micros, ms, percentile, ping_rtts, print_machine, print_table, rerun_command,
    BoxError, Target,
};

const FLAGS: &[&str] = &["--waiters", "--clients", "--rounds"];
/// Far past the run: a waiter returns on the message, never on its recheck.
const NO_RECHECK: Duration = Duration::from_secs(600);
/// The longest a round waits for its waiters to subscribe, or to return.
const ROUND_BOUND: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
struct Settings {
    waiters: usize,
    clients: usize,
    rounds: usize,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let settings = Settings {
            waiters: flag(args, "--waiters")?.unwrap_or(100),
            clients: flag(args, "--clients")?.unwrap_or(4),
            rounds: flag(args, "--rounds")?.unwrap_or(5),
        };
        if settings.waiters == 0 || settings.clients == 0 || settings.rounds == 0 {
            return Err("--waiters, --clients and --rounds must be above 0".into());
        }
        Ok(settings)
    }
}

/// What one round measured.
#[derive(Debug, Default)]
struct Round {
    /// The last `count_down()` call, in µs.
    count_down_us: u64,
    /// Each client's round trip (PING p50), in µs.
    rtt_us: Vec<u64>,
    /// Per waiter: from the last `count_down()` call to its return, in round trips of
    /// its client, sorted.
    from_call_rtts: Vec<f64>,
    /// Per waiter: from that call's return, in round trips, sorted.
    from_return_rtts: Vec<f64>,
    /// Per waiter, the same from the call in µs, sorted.
    from_call_us: Vec<u64>,
    /// Per client: `count()` × its waiters sent at once, the last answer in round trips.
    floor_rtts: Vec<f64>,
}

async fn round(
    clients: &[Client],
    settings: Settings,
    index: usize,
    problems: &mut Vec<String>,
) -> Result<Round, BoxError> {
    let name = format!("latch:bench:{index}");
    let latches: Vec<CountDownLatch> =
        clients.iter().map(|client| client.count_down_latch(&name).with_recheck(NO_RECHECK)).collect();
    if !latches[0].try_set_count(2).await? {
        return Err(format!("{name} existed before the round").into());
    }
    let last_called = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let early = Arc::new(AtomicBool::new(false));
    let mut waiters = Vec::with_capacity(settings.waiters);
    let per_client: Vec<usize> =
        (0..settings.clients).map(|c| (0..settings.waiters).filter(|w| w % settings.clients == c).count()).collect();
    for w in 0..settings.waiters {
        let client = w % settings.clients;
        let latch = latches[client].clone();
        let (last_called, early) = (last_called.clone(), early.clone());
        waiters.push(tokio::spawn(async move {
            latch.wait().await?;
            let returned = Instant::now();
            if last_called.lock().map_or(true, |at| at.is_none()) {
                early.store(true, Ordering::Relaxed);
            }
            Ok::<_, BoxError>((client, returned))
        }));
    }
    let channel = latches[0].channel().to_owned();
    let subscribed = tokio::time::timeout(ROUND_BOUND, async {
        loop {
            let ready = clients
                .iter()
                .zip(&per_client)
                .all(|(client, &n)| client.stats().waiters >= n && client.subscribed_channels().contains(&channel));
            if ready {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    if subscribed.is_err() {
        return Err(format!("round {index}: the waiters did not all subscribe within {ROUND_BOUND:?}").into());
    }
    let mut out = Round::default();
    for client in clients {
        out.rtt_us.push(percentile(&ping_rtts(client.fred(), 200).await?, 50.0).max(1));
    }
    if latches[1 % latches.len()].count_down().await? != 1 {
        problems.push(format!("round {index}: the first count down did not leave 1"));
    }
    let called = Instant::now();
    if let Ok(mut at) = last_called.lock() {
        *at = Some(called);
    }
    let left = latches[0].count_down().await?;
    let returned = Instant::now();
    out.count_down_us = micros(returned - called);
    if left != 0 {
        problems.push(format!("round {index}: the last count down left {left}"));
    }
    let woken = tokio::time::timeout(ROUND_BOUND, join_all(waiters)).await.map_err(|_| "waiters did not return")??;
    if early.load(Ordering::Relaxed) {
        problems.push(format!("round {index}: a waiter returned before the last count down"));
    }
    for (client, at) in woken {
        let rtt = out.rtt_us[client] as f64;
        let since_call = micros(at.saturating_duration_since(called));
        out.from_call_us.push(since_call);
        out.from_call_rtts.push(since_call as f64 / rtt);
        out.from_return_rtts.push(micros(at.saturating_duration_since(returned)) as f64 / rtt);
    }
    out.from_call_rtts.sort_by(f64::total_cmp);
    out.from_return_rtts.sort_by(f64::total_cmp);
    out.from_call_us.sort_unstable();
    // The floor: as many reads at once per client as it had waiters.
    for (client, (latch, &n)) in latches.iter().zip(&per_client).enumerate() {
        let sent = Instant::now();
        let reads: Vec<_> = (0..n)
            .map(|_| {
                let latch = latch.clone();
                tokio::spawn(async move { Ok::<_, BoxError>(latch.count().await?) })
            })
            .collect();
        join_all(reads).await?;
        out.floor_rtts.push(micros(sent.elapsed()) as f64 / out.rtt_us[client] as f64);
    }
    if latches[0].count().await? != 0 || latches[0].delete().await? {
        problems.push(format!("round {index}: {name} was left behind"));
    }
    Ok(out)
}

fn rtts(value: f64) -> String {
    format!("{value:.2}")
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: latch [--waiters N] [--clients N] [--rounds N]");
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!("# latch: a count-down latch released under many waiters in several clients");
    println!("rerun: {}", rerun_command("latch"));
    let target = Target::from_env();
    let mut clients = Vec::with_capacity(settings.clients);
    for _ in 0..settings.clients {
        clients.push(Client::builder().url(target.url()).connect().await?);
    }
    print_machine(clients[0].fred(), &target).await?;
    println!("settings: {settings:?}");
    let mut problems = Vec::new();
    let mut all_call: Vec<f64> = Vec::new();
    let mut all_return: Vec<f64> = Vec::new();
    let header: Vec<String> = [
        "round",
        "rtt p50 ms (per client)",
        "last count_down ms",
        "from call p50/p90/p99/max RTTs",
        "from return p50/max RTTs",
        "from call max ms",
        "floor: reads at once, max RTTs",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut rows = Vec::new();
    for index in 0..settings.rounds {
        let r = round(&clients, settings, index, &mut problems).await?;
        let q = |v: &[f64], p: f64| rtts(percentile(v, p));
        rows.push(vec![
            index.to_string(),
            r.rtt_us.iter().map(|us| ms(*us)).collect::<Vec<_>>().join(" "),
            ms(r.count_down_us),
            format!(
                "{} / {} / {} / {}",
                q(&r.from_call_rtts, 50.0),
                q(&r.from_call_rtts, 90.0),
                q(&r.from_call_rtts, 99.0),
                q(&r.from_call_rtts, 100.0)
            ),
            format!("{} / {}", q(&r.from_return_rtts, 50.0), q(&r.from_return_rtts, 100.0)),
            ms(percentile(&r.from_call_us, 100.0)),
            rtts(r.floor_rtts.iter().copied().fold(0.0, f64::max)),
        ]);
        all_call.extend(&r.from_call_rtts);
        all_return.extend(&r.from_return_rtts);
    }
    print_table(&header, &rows);
    all_call.sort_by(f64::total_cmp);
    all_return.sort_by(f64::total_cmp);
    let within = all_call.iter().filter(|v| **v <= 3.0).count();
    println!(
        "all rounds, {} wake-ups: from the call p50 {} p90 {} p99 {} max {} RTTs; from the return p50 {} max {} RTTs; \
         {within} of {} within 3 RTTs of the call (target: all)",
        all_call.len(),
        rtts(percentile(&all_call, 50.0)),
        rtts(percentile(&all_call, 90.0)),
        rtts(percentile(&all_call, 99.0)),
        rtts(percentile(&all_call, 100.0)),
        rtts(percentile(&all_return, 50.0)),
        rtts(percentile(&all_return, 100.0)),
        all_call.len(),
    );
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for problem in &problems {
            eprintln!("PROBLEM: {problem}");
        }
        Ok(ExitCode::from(1))
    }
}
