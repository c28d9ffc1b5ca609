//! `renewal`: one client holds many locks in watchdog mode (default 10,000, watchdog
//! timeout 3 s, so a renewal round every 1 s) and we watch the watchdog for several
//! periods.
//!
//! Reported per renew batch size (default 100 and 500): renew script calls per round
//! (from the watchdog's counters and from `INFO commandstats`) against
//! `ceil(locks / batch)`, how long one round takes (client view: sampled from the holds'
//! local lease deadlines; server view: `EVALSHA` CPU time), process memory per held lock
//! (`VmRSS` delta, approximate) and Redis memory per held lock (`used_memory` delta once
//! the acquire latches have expired).
//!
//! Checked (exit 1 if broken): every `try_lock` succeeds, every lock still exists after
//! the observation (which is longer than the lease, so only renewals keep them), no hold
//! is reported lost, every unlock succeeds and leaves no lock key behind.
//!
//! Flags: `--locks N` (10000), `--observe-secs N` (5), `--watchdog-ms N` (3000),
//! `--batches A,B` (100,500), `--chunk N` (500 concurrent acquires), `--acquire
//! concurrent|sequential` (concurrent: spawned tasks, `--chunk` at a time; sequential:
//! one by one from the main task, for the memory comparison). `REDIS_URL` selects
//! a server (it must be otherwise idle for the memory figures); without it a throwaway
//! `redis-server` is started.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use fred::prelude::{Client as FredClient, ClientLike, KeysInterface};
use fred::types::{ClusterHash, CustomCommand, InfoKind};
use leasehold::{Client, LockGuard};
use leasehold_benches::{
    check_flags, dbsize, flag, info, info_field, micros, ms, percentile, print_machine, print_table, rerun_command,
    vm_rss_kib, BoxError, CommandStats, Target,
};
use tokio::task::JoinSet;

const FLAGS: &[&str] = &["--locks", "--observe-secs", "--watchdog-ms", "--batches", "--chunk", "--acquire"];
/// Keys per `EXISTS` call when counting the locks.
const EXISTS_CHUNK: usize = 1000;

#[derive(Debug, Clone)]
struct Settings {
    locks: usize,
    observe: Duration,
    watchdog: Duration,
    batches: Vec<usize>,
    chunk: usize,
    /// Acquire from spawned tasks, `chunk` at a time (`true`), or one by one from the
    /// main task.
    concurrent: bool,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let batches = match flag::<String>(args, "--batches")? {
            None => vec![100, 500],
            Some(list) => list
                .split(',')
                .map(|b| b.trim().parse::<usize>().map_err(|_| format!("--batches: cannot parse {b:?}")))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let settings = Settings {
            locks: flag(args, "--locks")?.unwrap_or(10_000),
            observe: Duration::from_secs(flag(args, "--observe-secs")?.unwrap_or(5)),
            watchdog: Duration::from_millis(flag(args, "--watchdog-ms")?.unwrap_or(3000)),
            batches,
            chunk: flag(args, "--chunk")?.unwrap_or(500),
            concurrent: match flag::<String>(args, "--acquire")?.as_deref() {
                None | Some("concurrent") => true,
                Some("sequential") => false,
                Some(other) => return Err(format!("--acquire {other:?}: expected concurrent or sequential").into()),
            },
        };
        if settings.locks == 0 || settings.chunk == 0 || settings.batches.contains(&0) {
            return Err("--locks, --chunk and every batch size must be above 0".into());
        }
        if settings.observe <= settings.watchdog {
            println!(
                "note: observing {:?}, not longer than the lease {:?}: existence at the end does not prove renewal",
                settings.observe, settings.watchdog
            );
        }
        Ok(settings)
    }
}

/// The figures of one batch size.
#[derive(Debug, Clone, Default)]
struct Figures {
    batch: usize,
    acquire_time: Duration,
    observed: Duration,
    rounds: u64,
    calls: u64,
    failed_calls: u64,
    lost: u64,
    evalsha: u64,
    hexists: u64,
    pexpire: u64,
    evalsha_usec: u64,
    round_times_us: Vec<u64>,
    rss_before_kib: u64,
    rss_acquired_kib: u64,
    rss_holding_kib: u64,
    rss_after_unlock_kib: u64,
    redis_base: u64,
    redis_with_latches: u64,
    redis_holding: u64,
    latches_expired: bool,
    keys_holding: u64,
    still_held: u64,
    left_after_unlock: u64,
    unlock_errors: u64,
    problems: Vec<String>,
}

impl Figures {
    fn expected_calls(&self, locks: usize) -> usize {
        locks.div_ceil(self.batch)
    }

    fn calls_per_round(&self) -> f64 {
        if self.rounds == 0 {
            0.0
        } else {
            self.calls as f64 / self.rounds as f64
        }
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: renewal [--locks N] [--observe-secs N] [--watchdog-ms N] [--batches 100,500] [--chunk N] \
             [--acquire concurrent|sequential]"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!("# renewal: {} locks held in watchdog mode by one client", settings.locks);
    println!("rerun: {}", rerun_command("renewal"));
    let target = Target::from_env();
    let admin = Client::builder().url(target.url()).connect().await?;
    print_machine(admin.fred(), &target).await?;
    println!(
        "settings: watchdog timeout {:?} (renewal period {:?}), observe {:?}, batches {:?}, acquire with try_lock() {}",
        settings.watchdog,
        settings.watchdog / 3,
        settings.observe,
        settings.batches,
        if settings.concurrent {
            format!("from spawned tasks, {} at a time", settings.chunk)
        } else {
            "one by one from the main task".to_owned()
        }
    );
    let sample = admin.lock("bench:renew:size");
    println!(
        "size of a try_lock() future: {} B (each concurrent acquire has one in flight, inside its task)",
        std::mem::size_of_val(&sample.try_lock())
    );
    println!("note: VmRSS figures are meaningful for the first batch size only; later ones reuse memory freed by earlier ones");

    let mut all = Vec::new();
    for &batch in &settings.batches {
        println!();
        println!("## batch size {batch}");
        if target.is_own() {
            // Leftover latches of the previous batch would expire during this one and
            // spoil the memory figures; on our own server, drop them.
            flushall(admin.fred()).await?;
        } else {
            // Wait out the previous batch's unlock latches, then reclaim them.
            tokio::time::sleep(admin.config().replay_window + Duration::from_millis(200)).await;
            reclaim_expired(admin.fred()).await?;
        }
        let figures = run(&settings, target.url(), batch).await?;
        print_details(&figures, &settings);
        all.push(figures);
    }

    println!();
    println!("## summary ({} locks, period {:?})", settings.locks, settings.watchdog / 3);
    print_summary(&all, &settings);
    let problems: Vec<&String> = all.iter().flat_map(|f| &f.problems).collect();
    if problems.is_empty() {
        println!("invariants: all {} locks held through the observation, none lost, all released", settings.locks);
        Ok(ExitCode::SUCCESS)
    } else {
        for problem in problems {
            println!("INVARIANT BROKEN: {problem}");
        }
        Ok(ExitCode::FAILURE)
    }
}

async fn run(settings: &Settings, url: &str, batch: usize) -> Result<Figures, BoxError> {
    let mut f = Figures { batch, ..Figures::default() };
    let client =
        Client::builder().url(url).watchdog_timeout(settings.watchdog).renew_batch_size(batch).connect().await?;
    let fred = client.fred().clone();
    let keys_before = dbsize(&fred).await?;
    // Load the scripts and warm the connection before measuring anything.
    let warm = client.lock(format!("bench:renew:warm:{batch}"));
    if let Some(guard) = warm.try_lock().await? {
        guard.unlock().await?;
    }
    f.redis_base = used_memory(&fred).await?;
    f.rss_before_kib = vm_rss_kib().unwrap_or(0);

    let names: Vec<String> = (0..settings.locks).map(|i| format!("bench:renew:{batch}:{i}")).collect();
    let started = Instant::now();
    let mut guards: Vec<LockGuard> = Vec::with_capacity(settings.locks);
    if !settings.concurrent {
        for name in &names {
            match client.lock(name).try_lock().await? {
                Some(guard) => guards.push(guard),
                None => f.problems.push(format!("try_lock found {name} already held")),
            }
        }
    }
    for chunk in names.chunks(settings.chunk).filter(|_| settings.concurrent) {
        let mut set = JoinSet::new();
        for (offset, name) in chunk.iter().enumerate() {
            let lock = client.lock(name);
            set.spawn(async move { (offset, lock.try_lock().await) });
        }
        let mut got: Vec<Option<LockGuard>> = (0..chunk.len()).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            let (offset, result) = joined.map_err(|e| format!("acquire task: {e}"))?;
            match result? {
                Some(guard) => got[offset] = Some(guard),
                None => f.problems.push(format!("try_lock found {} already held", chunk[offset])),
            }
        }
        guards.extend(got.into_iter().flatten());
    }
    f.acquire_time = started.elapsed();
    let acquired_at = Instant::now();
    if guards.len() != settings.locks {
        f.problems.push(format!("acquired {} of {} locks", guards.len(), settings.locks));
    }
    f.redis_with_latches = used_memory(&fred).await?;
    let keys_with_latches = dbsize(&fred).await?;
    println!(
        "acquired {} locks in {:.2} s; DBSIZE {} (locks + acquire latches, which expire after the 10 s replay window)",
        guards.len(),
        f.acquire_time.as_secs_f64(),
        keys_with_latches
    );

    f.rss_acquired_kib = vm_rss_kib().unwrap_or(0);

    // Let one round run first (the client loads every script at connect, so this is
    // only for a clean start at a round boundary), then observe whole periods, ending
    // half-way between two rounds.
    let period = settings.watchdog / 3;
    let (first_round, _) = next_round(&client, &guards, settings.watchdog).await.ok_or("no renewal round ran")?;
    let stats_before = client.stats().watchdog;
    let commands_before = CommandStats::fetch(&fred).await?;
    let observe_start = Instant::now();
    let until = first_round + settings.observe + period / 2;
    f.round_times_us = sample_rounds(&client, &guards, until, settings.watchdog).await;
    tokio::time::sleep_until(until.into()).await;
    let stats_after = client.stats().watchdog;
    let commands = CommandStats::fetch(&fred).await?.since(&commands_before);
    f.observed = observe_start.elapsed();
    f.rounds = stats_after.rounds - stats_before.rounds;
    f.calls = stats_after.calls - stats_before.calls;
    f.failed_calls = stats_after.failed_calls - stats_before.failed_calls;
    f.evalsha = commands.calls("evalsha");
    f.evalsha_usec = commands.usec("evalsha");
    f.hexists = commands.calls("hexists");
    f.pexpire = commands.calls("pexpire");
    println!("  commands while observing: {}", commands.breakdown());

    // Still held? Counted on the server, lock keys only (the latches are other keys).
    f.still_held = count_existing(&fred, &names).await?;
    if f.still_held != settings.locks as u64 {
        f.problems.push(format!("{} of {} lock keys exist after the observation", f.still_held, settings.locks));
    }
    let lost_guards = guards.iter().filter(|g| g.is_lost()).count();
    if lost_guards > 0 {
        f.problems.push(format!("{lost_guards} guards report their lock lost"));
    }
    if stats_after.registered != settings.locks {
        f.problems.push(format!("the watchdog renews {} holds, not {}", stats_after.registered, settings.locks));
    }

    // Redis memory of the locks alone: wait until the acquire latches have expired.
    // Redis reclaims expired keys lazily and tolerates some 10% of them in memory; wait
    // out the replay window, then visit every key (SCAN deletes the expired ones).
    tokio::time::sleep_until((acquired_at + client.config().replay_window + Duration::from_millis(200)).into()).await;
    reclaim_expired(&fred).await?;
    f.keys_holding = dbsize(&fred).await?;
    f.latches_expired = f.keys_holding == keys_before + settings.locks as u64;
    f.redis_holding = used_memory(&fred).await?;
    f.rss_holding_kib = vm_rss_kib().unwrap_or(0);
    f.lost = client.stats().watchdog.lost;
    if f.lost != 0 {
        f.problems.push(format!("the watchdog reported {} holds lost", f.lost));
    }

    // Release everything, concurrently in chunks.
    let mut remaining = guards;
    while !remaining.is_empty() {
        let take = remaining.len().min(settings.chunk);
        let mut set = JoinSet::new();
        for guard in remaining.drain(..take) {
            set.spawn(guard.unlock());
        }
        while let Some(joined) = set.join_next().await {
            if !matches!(joined, Ok(Ok(()))) {
                f.unlock_errors += 1;
            }
        }
    }
    f.left_after_unlock = count_existing(&fred, &names).await?;
    f.rss_after_unlock_kib = vm_rss_kib().unwrap_or(0);
    if f.unlock_errors > 0 {
        f.problems.push(format!("{} unlocks failed", f.unlock_errors));
    }
    if f.left_after_unlock > 0 {
        f.problems.push(format!("{} lock keys remain after unlocking all", f.left_after_unlock));
    }
    let registered = client.stats().watchdog.registered;
    if registered != 0 {
        f.problems.push(format!("{registered} holds still registered with the watchdog after unlock"));
    }
    Ok(f)
}

/// Waits for the watchdog's next round and for it to finish: the round counter moves,
/// then every hold's local lease deadline moves forward (the round's replies were
/// applied). Returns when the counter was seen to move and how long the round took;
/// `None` if no round completes within two periods. Resolution is about 1 ms (tokio
/// timer), the scans of the guards included.
async fn next_round(client: &Client, guards: &[LockGuard], timeout: Duration) -> Option<(Instant, u64)> {
    let period = timeout / 3;
    let give_up = Instant::now() + 2 * period;
    let seen = client.stats().watchdog.rounds;
    let detected = loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if client.stats().watchdog.rounds != seen {
            break Instant::now();
        }
        if Instant::now() >= give_up {
            return None;
        }
    };
    // A renewed hold's deadline is (round's send time + timeout); before the round it
    // was about one period earlier. Half a period separates the two.
    let threshold = detected + timeout - period / 2;
    while Instant::now() < give_up {
        if guards.iter().all(|g| g.lease_deadline() >= threshold) {
            return Some((detected, micros(detected.elapsed())));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// Times every round that starts before `until`.
async fn sample_rounds(client: &Client, guards: &[LockGuard], until: Instant, timeout: Duration) -> Vec<u64> {
    let mut times = Vec::new();
    while Instant::now() + timeout / 3 < until {
        match next_round(client, guards, timeout).await {
            Some((detected, took)) if detected < until => times.push(took),
            _ => break,
        }
    }
    times.sort_unstable();
    times
}

async fn count_existing(fred: &FredClient, names: &[String]) -> Result<u64, BoxError> {
    let mut total = 0;
    for chunk in names.chunks(EXISTS_CHUNK) {
        let n: u64 = fred.exists(chunk.to_vec()).await?;
        total += n;
    }
    Ok(total)
}

async fn used_memory(fred: &FredClient) -> Result<u64, BoxError> {
    let text = info(fred, InfoKind::Memory).await?;
    Ok(info_field(&text, "used_memory").and_then(|v| v.parse().ok()).ok_or("INFO memory has no used_memory")?)
}

async fn flushall(fred: &FredClient) -> Result<(), BoxError> {
    let command = CustomCommand::new_static("FLUSHALL", ClusterHash::Random, false);
    let _: String = fred.custom(command, vec!["SYNC"]).await?;
    Ok(())
}

/// Walks the whole keyspace with `SCAN`, which deletes the expired keys it meets.
async fn reclaim_expired(fred: &FredClient) -> Result<(), BoxError> {
    let mut cursor = "0".to_owned();
    loop {
        let command = CustomCommand::new_static("SCAN", ClusterHash::Random, false);
        let (next, _keys): (String, Vec<String>) =
            fred.custom(command, vec![cursor.clone(), "COUNT".to_owned(), "1000".to_owned()]).await?;
        if next == "0" {
            return Ok(());
        }
        cursor = next;
    }
}

fn per_lock(after: u64, before: u64, locks: usize) -> String {
    if after < before {
        return format!("-{:.0}", (before - after) as f64 / locks as f64);
    }
    format!("{:.0}", (after - before) as f64 / locks as f64)
}

fn print_details(f: &Figures, settings: &Settings) {
    let periods = f.observed.as_secs_f64() / (settings.watchdog / 3).as_secs_f64();
    println!(
        "observed {:.2} s ({periods:.1} periods): {} rounds, {} renew calls ({:.1} per round; ceil({}/{}) = {}), failed calls {}",
        f.observed.as_secs_f64(),
        f.rounds,
        f.calls,
        f.calls_per_round(),
        settings.locks,
        f.batch,
        f.expected_calls(settings.locks),
        f.failed_calls
    );
    let per_round = |n: u64| if f.rounds == 0 { 0.0 } else { n as f64 / f.rounds as f64 };
    println!(
        "  server: EVALSHA {} ({:.1} per round), HEXISTS {} and PEXPIRE {} inside the script ({:.0} and {:.0} per round)",
        f.evalsha,
        per_round(f.evalsha),
        f.hexists,
        f.pexpire,
        per_round(f.hexists),
        per_round(f.pexpire)
    );
    println!(
        "  round time, client view (counter moved → every deadline extended), {} samples: p50 {} ms, max {} ms; server CPU in EVALSHA per round {} ms ({:.1} µs per key)",
        f.round_times_us.len(),
        ms(percentile(&f.round_times_us, 50.0)),
        ms(f.round_times_us.last().copied().unwrap_or(0)),
        ms(per_round(f.evalsha_usec) as u64),
        per_round(f.evalsha_usec) / settings.locks as f64
    );
    println!(
        "  process VmRSS: {} KiB before, {} KiB right after acquiring, {} KiB holding after the rounds ({} B per lock), {} KiB after unlocking all",
        f.rss_before_kib,
        f.rss_acquired_kib,
        f.rss_holding_kib,
        per_lock(f.rss_holding_kib * 1024, f.rss_before_kib * 1024, settings.locks),
        f.rss_after_unlock_kib
    );
    println!(
        "  redis used_memory: {} B before, {} B with acquire latches ({} B per lock), {} B holding after the latches expired{} ({} B per lock)",
        f.redis_base,
        f.redis_with_latches,
        per_lock(f.redis_with_latches, f.redis_base, settings.locks),
        f.redis_holding,
        if f.latches_expired { String::new() } else { format!(" (NOT all gone: DBSIZE {})", f.keys_holding) },
        per_lock(f.redis_holding, f.redis_base, settings.locks)
    );
    println!(
        "  checks: {} of {} locks exist after observing, watchdog lost {}, unlock errors {}, {} keys left after unlock",
        f.still_held, settings.locks, f.lost, f.unlock_errors, f.left_after_unlock
    );
}

fn print_summary(all: &[Figures], settings: &Settings) {
    let mut header = vec!["metric".to_owned()];
    header.extend(all.iter().map(|f| format!("batch {}", f.batch)));
    let row = |name: &str, cell: &dyn Fn(&Figures) -> String| -> Vec<String> {
        let mut cells = vec![name.to_owned()];
        cells.extend(all.iter().map(cell));
        cells
    };
    let per_round = |f: &Figures, n: u64| if f.rounds == 0 { 0.0 } else { n as f64 / f.rounds as f64 };
    let rows = vec![
        row("acquire all (s)", &|f| format!("{:.2}", f.acquire_time.as_secs_f64())),
        row("rounds observed", &|f| f.rounds.to_string()),
        row("renew calls per round (watchdog)", &|f| format!("{:.1}", f.calls_per_round())),
        row("EVALSHA per round (commandstats)", &|f| format!("{:.1}", per_round(f, f.evalsha))),
        row("ceil(N / batch)", &|f| f.expected_calls(settings.locks).to_string()),
        row("round time p50 / max (ms, client)", &|f| {
            format!(
                "{} / {}",
                ms(percentile(&f.round_times_us, 50.0)),
                ms(f.round_times_us.last().copied().unwrap_or(0))
            )
        }),
        row("server CPU per round (ms)", &|f| ms(per_round(f, f.evalsha_usec) as u64)),
        row("process RSS per held lock (B)", &|f| {
            per_lock(f.rss_holding_kib * 1024, f.rss_before_kib * 1024, settings.locks)
        }),
        row("redis used_memory per held lock (B)", &|f| per_lock(f.redis_holding, f.redis_base, settings.locks)),
        row("  … with acquire latches (B)", &|f| per_lock(f.redis_with_latches, f.redis_base, settings.locks)),
        row("held at end / lost / failed calls", &|f| format!("{} / {} / {}", f.still_held, f.lost, f.failed_calls)),
    ];
    print_table(&header, &rows);
}
