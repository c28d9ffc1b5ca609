//! One of several processes contending for one lock, for the cross-process mutual
//! exclusion tests (scenario 1 of the reliability notes, and scenario 19 on a cluster).
//!
//! Usage: `contender URL NAME TASKS ITERATIONS [--resource PREFIX] [--fenced]`. Each of
//! `TASKS` tasks takes the lock `NAME` `ITERATIONS` times and, while holding it, (1)
//! claims a shared "inside" flag `PREFIX:inside` with `SET NX` — failing means another
//! holder is inside, (2) increments a counter `PREFIX:counter` with a non-atomic GET,
//! sleep, SET, (3) clears the flag. `PREFIX` defaults to `NAME`; on a cluster a prefix
//! with its own hash tag keeps the resource off the lock's shard. Around the critical
//! section it reads the server's clock (`TIME`, one clock for every process) right
//! after acquiring and right before releasing, and prints `INTERVAL START_US END_US
//! TOKEN`: a sub-interval of the true hold, so two printed intervals that overlap prove
//! two holds overlapped. `TOKEN` is the hold's fencing token with `--fenced` (the lock
//! is then a `FencedLock`), else 0. Prints `DONE` and exits 0, or prints `OVERLAP` /
//! `ERROR ...` and exits 1.

use std::time::Duration;

use leasehold::fred::prelude::{Client as FredClient, KeysInterface};

async fn critical_section(fred: &FredClient, prefix: &str) -> Result<(), String> {
    let inside_key = format!("{prefix}:inside");
    let counter_key = format!("{prefix}:counter");
    let claimed: Option<String> = fred
        .set(&inside_key, "1", None, Some(leasehold::fred::types::SetOptions::NX), false)
        .await
        .map_err(|e| e.to_string())?;
    if claimed.is_none() {
        return Err("OVERLAP".to_owned());
    }
    let value: Option<i64> = fred.get(&counter_key).await.map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_micros(300)).await;
    let () = fred.set(&counter_key, value.unwrap_or(0) + 1, None, None, false).await.map_err(|e| e.to_string())?;
    let _: i64 = fred.del(&inside_key).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// The server's clock in microseconds (`TIME`).
async fn server_time_us(fred: &FredClient) -> Result<u64, String> {
    use leasehold::fred::prelude::ClientLike;
    use leasehold::fred::types::{ClusterHash, CustomCommand};
    let time = CustomCommand::new_static("TIME", ClusterHash::FirstKey, false);
    let (secs, micros): (u64, u64) = fred.custom(time, Vec::<String>::new()).await.map_err(|e| e.to_string())?;
    Ok(secs * 1_000_000 + micros)
}

/// A hold of either kind.
enum Guard {
    Plain(leasehold::LockGuard),
    Fenced(leasehold::FencedGuard),
}

impl Guard {
    fn token(&self) -> u64 {
        match self {
            Guard::Plain(_) => 0,
            Guard::Fenced(guard) => guard.token(),
        }
    }

    async fn unlock(self) -> leasehold::Result<()> {
        match self {
            Guard::Plain(guard) => guard.unlock().await,
            Guard::Fenced(guard) => guard.unlock().await,
        }
    }
}

/// One task's holds: `(start, end, token)` each.
async fn rounds(client: leasehold::Client, args: Args) -> Result<Vec<(u64, u64, u64)>, String> {
    const LEASE: Duration = Duration::from_secs(10);
    let (plain, fenced) = (client.lock(&args.name), client.fenced_lock(&args.name));
    let mut intervals = Vec::with_capacity(args.iterations);
    for _ in 0..args.iterations {
        let guard = if args.fenced {
            fenced.lock_with_lease(LEASE).await.map(Guard::Fenced)
        } else {
            plain.lock_with_lease(LEASE).await.map(Guard::Plain)
        };
        let guard = guard.map_err(|e| format!("ERROR {e}"))?;
        let token = guard.token();
        let start = server_time_us(client.fred()).await;
        let result = critical_section(client.fred(), &args.resource).await;
        let end = server_time_us(client.fred()).await;
        guard.unlock().await.map_err(|e| format!("ERROR {e}"))?;
        result?;
        intervals.push((start?, end?, token));
    }
    Ok(intervals)
}

#[derive(Clone)]
struct Args {
    url: String,
    name: String,
    tasks: usize,
    iterations: usize,
    resource: String,
    fenced: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut resource, mut fenced) = (None, false);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--resource" => resource = Some(args.next().ok_or("--resource needs a PREFIX")?),
            "--fenced" => fenced = true,
            _ => positional.push(arg),
        }
    }
    let [url, name, tasks, iterations] = <[String; 4]>::try_from(positional).map_err(|_| "four arguments")?;
    Ok(Args {
        tasks: tasks.parse().map_err(|_| "TASKS is a number")?,
        iterations: iterations.parse().map_err(|_| "ITERATIONS is a number")?,
        resource: resource.unwrap_or_else(|| name.clone()),
        url,
        name,
        fenced,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = parse_args().unwrap_or_else(|error| {
        eprintln!("{error}; usage: contender URL NAME TASKS ITERATIONS [--resource PREFIX] [--fenced]");
        std::process::exit(2);
    });
    let client = leasehold::Client::connect(&args.url).await.expect("connect");
    let handles: Vec<_> = (0..args.tasks).map(|_| tokio::spawn(rounds(client.clone(), args.clone()))).collect();
    for handle in handles {
        match handle.await {
            Ok(Ok(intervals)) => {
                for (start, end, token) in intervals {
                    println!("INTERVAL {start} {end} {token}");
                }
            }
            Ok(Err(message)) => {
                println!("{message}");
                std::process::exit(1);
            }
            Err(join) => {
                println!("ERROR task panicked: {join}");
                std::process::exit(1);
            }
        }
    }
    println!("DONE");
}
