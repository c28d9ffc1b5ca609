//! One of several processes contending for one lock, for the cross-process mutual
//! exclusion test.
//!
//! Usage: `contender URL NAME TASKS ITERATIONS`. Each of `TASKS` tasks takes the lock
//! `ITERATIONS` times and, while holding it, (1) claims a shared "inside" flag with
//! `SET NX` — failing means another holder is inside, (2) increments a counter with a
//! non-atomic GET, sleep, SET, (3) clears the flag. Around the critical section it reads
//! the server's clock (`TIME`, one clock for every process) right after acquiring and
//! right before releasing, and prints `INTERVAL START_US END_US`: a sub-interval of the
//! true hold, so two printed intervals that overlap prove two holds overlapped. Prints
//! `DONE` and exits 0, or prints `OVERLAP` / `ERROR ...` and exits 1.

use std::time::Duration;

use leasehold::fred::prelude::{Client as FredClient, KeysInterface};

async fn critical_section(fred: &FredClient, name: &str) -> Result<(), String> {
    let inside_key = format!("{name}:inside");
    let counter_key = format!("{name}:counter");
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, tasks, iterations] = args.as_slice() else {
        eprintln!("usage: contender URL NAME TASKS ITERATIONS");
        std::process::exit(2);
    };
    let tasks: usize = tasks.parse().expect("TASKS is a number");
    let iterations: usize = iterations.parse().expect("ITERATIONS is a number");
    let client = leasehold::Client::connect(url).await.expect("connect");
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let client = client.clone();
        let name = name.clone();
        handles.push(tokio::spawn(async move {
            let lock = client.lock(&name);
            let mut intervals = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                let guard = lock.lock_with_lease(Duration::from_secs(10)).await.map_err(|e| format!("ERROR {e}"))?;
                let start = server_time_us(client.fred()).await;
                let result = critical_section(client.fred(), &name).await;
                let end = server_time_us(client.fred()).await;
                guard.unlock().await.map_err(|e| format!("ERROR {e}"))?;
                result?;
                intervals.push((start?, end?));
            }
            Ok::<Vec<(u64, u64)>, String>(intervals)
        }));
    }
    for handle in handles {
        match handle.await {
            Ok(Ok(intervals)) => {
                for (start, end) in intervals {
                    println!("INTERVAL {start} {end}");
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
