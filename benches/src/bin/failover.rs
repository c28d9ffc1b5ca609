//! `failover`: how long two owners can overlap after a cluster failover that lost the
//! last hold (issue 12). Each run starts a private 3+3 cluster, cuts one shard's replica
//! off from its primary (so nothing written from then on replicates), and takes a lock
//! on that shard with a holder client: renewed (watchdog mode) or with a fixed 300 s
//! lease. A contender client waits for the same lock (`lock()`, subscribed to its
//! release channel). Then the replica takes over with `CLUSTER FAILOVER TAKEOVER`,
//! either after the old primary is `SIGKILL`ed (`kill`) or while it keeps running and is
//! demoted, which closes no client connection (`demote`). The promoted replica never had
//! the hold, so the lock is free there.
//!
//! Printed per case, as offsets from the moment the takeover was answered `OK`: when the
//! holder was told `lost()`, when the contender acquired, and the **overlap**: from the
//! contender's acquisition to the holder being told (negative: the holder was told
//! first, so no code that stops at `lost()` overlapped).
//!
//! Both clients run with the defaults (30 s watchdog, 5 s command timeout). Nodes are
//! started by the program on free ports in temp dirs and killed at the end of each run;
//! `REDIS_URL` is not used. Exits with 1 when a run does not complete: the holder not
//! told or the contender not acquiring within 30 s.
//!
//! Then the same through Sentinel (a primary, its replica and three sentinels): the
//! replica is cut off, the hold taken, the contender waiting, and `SENTINEL FAILOVER`
//! promotes the replica; the old primary stays up (the sentinels demote it later).
//! Printed as offsets from the `SENTINEL FAILOVER` reply: when the replica said it was a
//! primary (`ROLE`, polled every millisecond), when a sentinel announced
//! `+switch-master`, when the holder was told `lost()`, when the contender acquired, and
//! the overlap.
//!
//! Flags: `--runs N` (3 per case).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface};
use leasehold::Client;
use leasehold_benches::{check_flags, flag, ms_signed, print_table, rerun_command, signed_nanos, BoxError};
use leasehold_test_support::{raw_command, wait_until, RedisCluster, RespValue, SentinelSet, SENTINEL_SERVICE};

const FLAGS: &[&str] = &["--runs"];
const NAME: &str = "{overlap}:lock";
const CHANNEL: &str = "redisson_lock__channel:{overlap}:lock";
const FIXED_LEASE: Duration = Duration::from_secs(300);
const GIVE_UP: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Primary {
    /// `SIGKILL`ed before the takeover.
    Kill,
    /// Left running: demoted to a replica by the new primary's epoch.
    Demote,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    Renewed,
    Fixed,
}

/// One run's offsets from the failover command, in nanoseconds.
struct Run {
    lost: i64,
    acquired: i64,
}

/// A Sentinel run: a [`Run`], and when the replica was promoted and when it was announced.
struct SentinelRun {
    run: Run,
    promoted: i64,
    announced: i64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: failover [--runs N]");
        return Ok(ExitCode::SUCCESS);
    }
    check_flags(&args, FLAGS)?;
    let runs: usize = flag(&args, "--runs")?.unwrap_or(3);
    if runs == 0 {
        return Err("--runs must be above 0".into());
    }
    println!("# failover: overlap of two owners after a cluster failover that lost the last hold");
    println!("rerun: {}", rerun_command("failover"));
    println!(
        "machine: {} cores; load average {}",
        leasehold_benches::nproc(),
        leasehold_benches::load_average().unwrap_or_default()
    );
    println!("settings: {runs} runs per case; fixed lease {FIXED_LEASE:?}; offsets from the takeover's OK");
    let mut rows = Vec::new();
    for primary in [Primary::Kill, Primary::Demote] {
        for hold in [Hold::Renewed, Hold::Fixed] {
            let mut results = Vec::new();
            for _ in 0..runs {
                match one_run(primary, hold).await {
                    Ok(run) => results.push(run),
                    Err(error) => {
                        eprintln!("{primary:?}/{hold:?}: {error}");
                        return Ok(ExitCode::FAILURE);
                    }
                }
            }
            rows.push(row(primary, hold, &results));
        }
    }
    let header: Vec<String> =
        ["old primary", "hold", "holder told lost()", "contender acquired", "overlap (acquired → told)"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
    println!("\n## cluster: offsets from CLUSTER FAILOVER TAKEOVER's OK, ms, min / median / max");
    print_table(&header, &rows);

    let mut rows = Vec::new();
    for hold in [Hold::Renewed, Hold::Fixed] {
        let mut results = Vec::new();
        for _ in 0..runs {
            match sentinel_run(hold).await {
                Ok(run) => results.push(run),
                Err(error) => {
                    eprintln!("sentinel/{hold:?}: {error}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        let mut row = vec![format!("{hold:?}").to_lowercase()];
        row.push(spread(results.iter().map(|r| r.promoted).collect()));
        row.push(spread(results.iter().map(|r| r.announced).collect()));
        let runs: Vec<Run> = results.into_iter().map(|r| r.run).collect();
        row.extend(columns(&runs));
        rows.push(row);
    }
    let header: Vec<String> = [
        "hold",
        "replica promoted",
        "+switch-master",
        "holder told lost()",
        "contender acquired",
        "overlap (acquired → told)",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    println!("\n## sentinel: offsets from SENTINEL FAILOVER's OK, ms, min / median / max");
    print_table(&header, &rows);
    Ok(ExitCode::SUCCESS)
}

/// `min / median / max` of `values`, in ms.
fn spread(mut values: Vec<i64>) -> String {
    values.sort_unstable();
    let median = values[values.len() / 2];
    format!("{} / {} / {}", ms_signed(values[0]), ms_signed(median), ms_signed(values[values.len() - 1]))
}

/// Told, acquired and the overlap, each as a spread.
fn columns(results: &[Run]) -> [String; 3] {
    [
        spread(results.iter().map(|r| r.lost).collect()),
        spread(results.iter().map(|r| r.acquired).collect()),
        spread(results.iter().map(|r| r.lost.saturating_sub(r.acquired)).collect()),
    ]
}

fn row(primary: Primary, hold: Hold, results: &[Run]) -> Vec<String> {
    let mut row = vec![format!("{primary:?}").to_lowercase(), format!("{hold:?}").to_lowercase()];
    row.extend(columns(results));
    row
}

/// Holds `lock` (renewed or with the fixed lease) and starts `contender` waiting for it;
/// returns once the contender's release channel is subscribed on `node`.
async fn hold_and_wait(
    holder: &Client,
    contender: Client,
    hold: Hold,
    node: &str,
) -> Result<(leasehold::LockGuard, tokio::task::JoinHandle<Waited>), BoxError> {
    let lock = holder.lock(NAME);
    let guard = match hold {
        Hold::Renewed => lock.lock().await?,
        Hold::Fixed => lock.lock_with_lease(FIXED_LEASE).await?,
    };
    let waiting = tokio::spawn(async move {
        let guard = contender.lock(NAME).lock().await;
        (Instant::now(), guard, contender)
    });
    let numsub: &[u8] = if holder.pubsub_mode() == leasehold::PubsubMode::Sharded { b"SHARDNUMSUB" } else { b"NUMSUB" };
    let subscribed = || {
        let reply = raw_command(node, &[b"PUBSUB", numsub, CHANNEL.as_bytes()]);
        matches!(&reply, RespValue::Array(items) if matches!(items.get(1), Some(RespValue::Integer(n)) if *n > 0))
    };
    if !wait_until(Duration::from_secs(5), subscribed).await {
        return Err("the contender never subscribed".into());
    }
    Ok((guard, waiting))
}

/// What the contender's task ends with: when it acquired, the result, its client.
type Waited = (Instant, leasehold::Result<leasehold::LockGuard>, Client);

/// Waits for the holder to be told and the contender to acquire; their instants.
async fn told_and_acquired(
    guard: &leasehold::LockGuard,
    waiting: tokio::task::JoinHandle<Waited>,
) -> Result<(Instant, Instant), BoxError> {
    let told = async {
        guard.lost().await;
        Instant::now()
    };
    let (told, acquired) = tokio::join!(tokio::time::timeout(GIVE_UP, told), tokio::time::timeout(GIVE_UP, waiting));
    let told = told.map_err(|_| "the holder was not told lost()")?;
    let (acquired, contender_guard, _contender) = acquired.map_err(|_| "the contender did not acquire")??;
    contender_guard?.unlock().await?;
    Ok((told, acquired))
}

async fn one_run(primary_fate: Primary, hold: Hold) -> Result<Run, BoxError> {
    let mut cluster = RedisCluster::start();
    let primary = cluster.primary_for(NAME);
    let replica = cluster.replica_of(&primary);
    let holder = Client::connect(&cluster.url()).await?;
    let contender = Client::connect(&cluster.url()).await?;
    cluster.cut_off_replica(&replica);
    let (guard, waiting) = hold_and_wait(&holder, contender, hold, &primary).await?;
    if primary_fate == Primary::Kill {
        cluster.kill(&primary);
    }
    let reply = cluster.on(&replica, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    let took_over = Instant::now();
    if reply.as_str() != Some("OK") {
        return Err(format!("CLUSTER FAILOVER TAKEOVER: {reply:?}").into());
    }
    let (told, acquired) = told_and_acquired(&guard, waiting).await?;
    Ok(Run { lost: signed_nanos(took_over, told), acquired: signed_nanos(took_over, acquired) })
}

async fn sentinel_run(hold: Hold) -> Result<SentinelRun, BoxError> {
    let set = SentinelSet::start();
    let (primary, replica) = (set.primary(), set.replica());
    let holder = Client::connect(&set.url()).await?;
    let contender = Client::connect(&set.url()).await?;
    set.cut_off_replica();
    let (guard, waiting) = hold_and_wait(&holder, contender, hold, &primary).await?;
    // The bench's own ear on the announcement, and a thread polling the replica's role.
    let sentinel = &set.sentinels()[0];
    let ear = Builder::from_config(Config::from_url(&format!("redis://{sentinel}"))?).build_subscriber_client()?;
    ear.init().await?;
    let mut messages = ear.message_rx();
    ear.subscribe("+switch-master").await?;
    ear.ping::<()>(None).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (stop, replica) = (stop.clone(), replica.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if says_master(&replica) {
                    return Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            None
        })
    };
    let reply = set.on(sentinel, &["SENTINEL", "FAILOVER", SENTINEL_SERVICE]);
    let failover = Instant::now();
    if reply.as_str() != Some("OK") {
        stop.store(true, Ordering::Relaxed);
        return Err(format!("SENTINEL FAILOVER: {reply:?}").into());
    }
    let announced = async {
        let _ = messages.recv().await;
        Instant::now()
    };
    let (announced, told) = tokio::join!(tokio::time::timeout(GIVE_UP, announced), told_and_acquired(&guard, waiting));
    let announced = announced.map_err(|_| "no +switch-master")?;
    let (told, acquired) = told?;
    stop.store(true, Ordering::Relaxed);
    let promoted = poller.join().map_err(|_| "the role poller panicked")?.ok_or("the replica never said master")?;
    let _ = ear.quit().await;
    Ok(SentinelRun {
        run: Run { lost: signed_nanos(failover, told), acquired: signed_nanos(failover, acquired) },
        promoted: signed_nanos(failover, promoted),
        announced: signed_nanos(failover, announced),
    })
}

/// Whether the server at `addr` answers `ROLE` with `master`. Not the harness's
/// `raw_command`, which panics on a closed connection: the sentinels kill the promoted
/// replica's clients (`CLIENT KILL TYPE normal`) as they promote it.
fn says_master(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    if stream.write_all(b"ROLE\r\n").is_err() {
        return false;
    }
    // `*3\r\n$6\r\nmaster\r\n…` or `*5\r\n$5\r\nslave\r\n…`: the role is in the first 16 bytes.
    let mut reply = [0u8; 16];
    stream.read_exact(&mut reply).is_ok() && reply.windows(6).any(|w| w == b"master")
}
