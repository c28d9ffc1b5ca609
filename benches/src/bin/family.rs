//! `family`: the semaphore, the permit semaphore and the latch against Redisson 4.7's own
//! scripts (issue 29 item 1), side by side in one process against one server: pairs per
//! second and server calls per pair.
//!
//! Operations (`--only sem,pes,latch`; all by default), each a "pair" on keys no other
//! task touches (so nothing contends or waits):
//!
//! - `sem`: a semaphore of 1 permit per task; leasehold `sem.try_acquire(1)` + the
//!   permit's `release()`, against Redisson's `tryAcquire(1)` + `release(1)` scripts
//!   (`tests/support/src/redisson_semaphore.rs`) through plain fred (`EVALSHA`).
//! - `pes`: a permit semaphore of 1 permit per task; leasehold `try_acquire()` (a
//!   watchdog-renewed permit) + `release()`, against Redisson's `tryAcquire` with a
//!   30 s lease + `tryRelease(id)` scripts (`redisson_pes.rs`; `now` and the expiry from
//!   the client's clock, as Redisson sends them).
//! - `latch`: a fresh latch per trio; leasehold `try_set_count(1)` + `count_down()` +
//!   `wait()` (on the open latch: one read), against Redisson's
//!   `trySetCount(1)` and `countDown()` scripts + `GET` (`getCount`, what `await` reads).
//!
//! The two sides alternate in blocks of `--block-ms` (800) for `--blocks` (6) blocks per
//! side, so the machine's load drift falls on both alike; the figure per side is the
//! median of its blocks' pairs/s, and the ratio is leasehold's over Redisson's. Server
//! calls per pair: the `INFO commandstats` delta over all of a side's blocks (commands
//! run inside scripts included, `INFO` and `CONFIG` left out) over its pairs; server µs
//! per pair: the `usec` of the commands the clients sent (a script's includes what it
//! runs), over the pairs: the share of the single-threaded server each pair takes.
//! Keys left: `DBSIZE` after the operation's blocks less before them (the operation
//! records leasehold leaves behind while they live; Redisson's scripts leave none).
//!
//! Flags: `--tasks N` (16), `--blocks N` (6), `--block-ms N` (800), `--only a,b`.
//! `REDIS_URL` selects a server (it must be otherwise idle); without it a throwaway
//! `redis-server` is started.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::prelude::{Builder, Client as FredClient, ClientLike, Config, LuaInterface, ReconnectPolicy};
use fred::types::{ClusterHash, CustomCommand};
use leasehold::Client;
use leasehold_benches::{
    check_flags, flag, is_sent_by_client, join_all, print_machine, print_table, rerun_command, BoxError, CommandStats,
    Target,
};
use leasehold_test_support::redisson_latch::{redisson_latch_channel, REDISSON_COUNT_DOWN, REDISSON_TRY_SET_COUNT};
use leasehold_test_support::redisson_pes::{REDISSON_PES_ACQUIRE, REDISSON_PES_TRY_RELEASE};
use leasehold_test_support::redisson_semaphore::{REDISSON_SEM_RELEASE, REDISSON_SEM_TRY_ACQUIRE};

const FLAGS: &[&str] = &["--tasks", "--blocks", "--block-ms", "--only"];
const OPS: &[&str] = &["sem", "pes", "latch"];

#[derive(Debug, Clone)]
struct Settings {
    tasks: usize,
    blocks: usize,
    block: Duration,
    only: Vec<String>,
}

/// Redisson's scripts, loaded once.
#[derive(Debug, Clone)]
struct Shas {
    sem_acquire: String,
    sem_release: String,
    pes_acquire: String,
    pes_release: String,
    latch_set: String,
    latch_down: String,
}

#[derive(Debug, Default, Clone)]
struct Side {
    per_block: Vec<f64>,
    pairs: u64,
    calls: u64,
    usec: u64,
}

impl Side {
    fn median(&self) -> f64 {
        let mut sorted = self.per_block.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
    }
}

fn epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

async fn set_up(op: &str, client: &Client, fred: &FredClient, tasks: usize) -> Result<(), BoxError> {
    for task in 0..tasks {
        match op {
            "sem" => {
                client.semaphore(format!("family:lh:sem:{task}")).try_set_permits(1).await?;
                let set = CustomCommand::new_static("SET", ClusterHash::FirstKey, false);
                let _: String = fred.custom(set, vec![format!("family:rs:sem:{task}"), "1".to_owned()]).await?;
            }
            "pes" => {
                client.permit_expirable_semaphore(format!("family:lh:pes:{task}")).try_set_permits(1).await?;
                let set = CustomCommand::new_static("SET", ClusterHash::FirstKey, false);
                let _: String = fred.custom(set, vec![format!("family:rs:pes:{task}"), "1".to_owned()]).await?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// One task's pairs until `end`.
async fn pairs(
    op: &str,
    redisson: bool,
    client: Client,
    fred: FredClient,
    shas: Arc<Shas>,
    task: usize,
    end: Instant,
) -> Result<u64, BoxError> {
    let mut done = 0u64;
    let mut n = 0u64;
    // One handle per task, made once, as a service keeps it (the Redisson side formats
    // its key and channel per pair, as its client does per call).
    let sem = client.semaphore(format!("family:lh:sem:{task}"));
    let pes = client.permit_expirable_semaphore(format!("family:lh:pes:{task}"));
    while Instant::now() < end {
        match (op, redisson) {
            ("sem", false) => {
                let permit = sem.try_acquire(1).await?.ok_or("sem: no permit")?;
                permit.release().await?;
            }
            ("sem", true) => {
                let key = format!("family:rs:sem:{task}");
                let taken: i64 = fred.evalsha(shas.sem_acquire.as_str(), vec![key.clone()], vec!["1"]).await?;
                if taken != 1 {
                    return Err("sem (Redisson): no permit".into());
                }
                let channel = format!("redisson_sc:{{{key}}}");
                let _: Option<i64> =
                    fred.evalsha(shas.sem_release.as_str(), vec![key, channel], vec!["1", "publish"]).await?;
            }
            ("pes", false) => {
                let permit = pes.try_acquire().await?.ok_or("pes: no permit")?;
                permit.release().await?;
            }
            ("pes", true) => {
                let key = format!("family:rs:pes:{task}");
                let timeout = format!("{{{key}}}:timeout");
                let channel = format!("redisson_sc:{{{key}}}");
                let id = format!("{task:08x}{n:024x}");
                let now = epoch_ms();
                let args = vec![
                    "1".to_owned(),
                    (now + 30_000).to_string(),
                    now.to_string(),
                    "922337203685477".to_owned(),
                    "publish".to_owned(),
                    id.clone(),
                ];
                let taken: Option<String> = fred
                    .evalsha(shas.pes_acquire.as_str(), vec![key.clone(), timeout.clone(), channel.clone()], args)
                    .await?;
                if taken.as_deref() != Some("OK") {
                    return Err(format!("pes (Redisson): no permit ({taken:?})").into());
                }
                let args = vec![id, "1".to_owned(), epoch_ms().to_string(), "publish".to_owned()];
                let released: i64 = fred.evalsha(shas.pes_release.as_str(), vec![key, channel, timeout], args).await?;
                if released != 1 {
                    return Err("pes (Redisson): not released".into());
                }
            }
            ("latch", false) => {
                let latch = client.count_down_latch(format!("family:lh:latch:{task}:{n}"));
                if !latch.try_set_count(1).await? {
                    return Err("latch: already set".into());
                }
                latch.count_down().await?;
                latch.wait().await?;
            }
            _ => {
                let key = format!("family:rs:latch:{task}:{n}");
                let channel = redisson_latch_channel(&key);
                let set: i64 = fred
                    .evalsha(shas.latch_set.as_str(), vec![key.clone(), channel.clone()], vec!["1", "1", "publish"])
                    .await?;
                if set != 1 {
                    return Err("latch (Redisson): already set".into());
                }
                let _: Option<i64> =
                    fred.evalsha(shas.latch_down.as_str(), vec![key.clone(), channel], vec!["0", "publish"]).await?;
                let get = CustomCommand::new_static("GET", ClusterHash::FirstKey, false);
                let count: Option<i64> = fred.custom(get, vec![key]).await?;
                if count.unwrap_or(0) > 0 {
                    return Err("latch (Redisson): not open".into());
                }
            }
        }
        n += 1;
        done += 1;
    }
    Ok(done)
}

async fn block(
    op: &str,
    redisson: bool,
    client: &Client,
    fred: &FredClient,
    shas: &Arc<Shas>,
    settings: &Settings,
    side: &mut Side,
) -> Result<(), BoxError> {
    let before = CommandStats::fetch(fred).await?;
    let start = Instant::now();
    let end = start + settings.block;
    let mut handles = Vec::new();
    for task in 0..settings.tasks {
        let (op, client, fred, shas) = (op.to_owned(), client.clone(), fred.clone(), shas.clone());
        handles.push(tokio::spawn(async move { pairs(&op, redisson, client, fred, shas, task, end).await }));
    }
    let done: u64 = join_all(handles).await?.iter().sum();
    let elapsed = start.elapsed().as_secs_f64();
    let spent = CommandStats::fetch(fred).await?.since(&before);
    side.per_block.push(done as f64 / elapsed);
    side.pairs += done;
    side.calls += spent.total_calls() - spent.calls("config|resetstat");
    // Server time: what the top-level commands took (a script's time includes the
    // commands it runs), over the pairs.
    side.usec += spent
        .0
        .iter()
        .filter(|(name, _)| is_sent_by_client(name) || name.as_str() == "get")
        .map(|(_, s)| s.usec)
        .sum::<u64>();
    Ok(())
}

/// `DBSIZE`: the keys in the bench's database.
async fn dbsize(fred: &FredClient) -> Result<i64, BoxError> {
    Ok(fred.custom(CustomCommand::new_static("DBSIZE", ClusterHash::FirstKey, false), Vec::<String>::new()).await?)
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: family [--tasks N] [--blocks N] [--block-ms N] [--only sem,pes,latch]");
        return Ok(ExitCode::SUCCESS);
    }
    check_flags(&args, FLAGS)?;
    let only: Option<String> = flag(&args, "--only")?;
    let settings = Settings {
        tasks: flag(&args, "--tasks")?.unwrap_or(16),
        blocks: flag(&args, "--blocks")?.unwrap_or(6),
        block: Duration::from_millis(flag(&args, "--block-ms")?.unwrap_or(800)),
        only: only.map_or_else(
            || OPS.iter().map(|s| (*s).to_owned()).collect(),
            |o| o.split(',').map(str::to_owned).collect(),
        ),
    };
    if settings.tasks == 0
        || settings.blocks == 0
        || settings.block.is_zero()
        || settings.only.iter().any(|o| !OPS.contains(&o.as_str()))
    {
        return Err("--tasks, --blocks and --block-ms must be above 0; --only takes sem, pes, latch".into());
    }
    println!("# family: semaphore, permit semaphore and latch pairs against Redisson's scripts");
    println!("rerun: {}", rerun_command("family"));
    let target = Target::from_env();
    let url = target.url().to_owned();
    let client = Client::builder().url(&url).connect().await?;
    let mut builder = Builder::from_config(Config::from_url(&url)?);
    builder.set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
    let fred = builder.build()?;
    fred.init().await?;
    print_machine(&fred, &target).await?;
    println!("settings: {settings:?}");
    let shas = Arc::new(Shas {
        sem_acquire: fred.script_load(REDISSON_SEM_TRY_ACQUIRE).await?,
        sem_release: fred.script_load(REDISSON_SEM_RELEASE).await?,
        pes_acquire: fred.script_load(REDISSON_PES_ACQUIRE).await?,
        pes_release: fred.script_load(REDISSON_PES_TRY_RELEASE).await?,
        latch_set: fred.script_load(REDISSON_TRY_SET_COUNT).await?,
        latch_down: fred.script_load(REDISSON_COUNT_DOWN).await?,
    });
    let header: Vec<String> = [
        "operation",
        "leasehold pairs/s",
        "Redisson pairs/s",
        "ratio",
        "leasehold calls/pair",
        "Redisson calls/pair",
        "leasehold server µs/pair",
        "Redisson server µs/pair",
        "keys left",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut rows = Vec::new();
    for op in &settings.only {
        set_up(op, &client, &fred, settings.tasks).await?;
        let keys_before = dbsize(&fred).await?;
        let (mut ours, mut theirs) = (Side::default(), Side::default());
        // A warm-up block per side (scripts loaded, connections up), not counted.
        block(op, false, &client, &fred, &shas, &settings, &mut Side::default()).await?;
        block(op, true, &client, &fred, &shas, &settings, &mut Side::default()).await?;
        for _ in 0..settings.blocks {
            block(op, false, &client, &fred, &shas, &settings, &mut ours).await?;
            block(op, true, &client, &fred, &shas, &settings, &mut theirs).await?;
        }
        // What the run left behind (Redisson's side leaves nothing): leasehold's
        // operation records, while they live.
        let keys_left = dbsize(&fred).await? - keys_before;
        let per_pair = |side: &Side| if side.pairs == 0 { 0.0 } else { side.calls as f64 / side.pairs as f64 };
        let usec = |side: &Side| if side.pairs == 0 { 0.0 } else { side.usec as f64 / side.pairs as f64 };
        rows.push(vec![
            op.clone(),
            format!("{:.0}", ours.median()),
            format!("{:.0}", theirs.median()),
            format!("{:.2}", ours.median() / theirs.median().max(1.0)),
            format!("{:.2}", per_pair(&ours)),
            format!("{:.2}", per_pair(&theirs)),
            format!("{:.2}", usec(&ours)),
            format!("{:.2}", usec(&theirs)),
            format!("{keys_left}"),
        ]);
    }
    print_table(&header, &rows);
    Ok(ExitCode::SUCCESS)
}
