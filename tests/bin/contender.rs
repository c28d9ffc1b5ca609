//! One of several processes contending for one lock, for the cross-process mutual
//! exclusion test.
//!
//! Usage: `contender URL NAME TASKS ITERATIONS`. Each of `TASKS` tasks takes the lock
//! `ITERATIONS` times and, while holding it, (1) claims a shared "inside" flag with
//! `SET NX` — failing means another holder is inside, (2) increments a counter with a
//! non-atomic GET, sleep, SET, (3) clears the flag. Prints `DONE` and exits 0, or prints
//! `OVERLAP` / `ERROR ...` and exits 1.

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
            for _ in 0..iterations {
                let guard = lock.lock_with_lease(Duration::from_secs(10)).await.map_err(|e| format!("ERROR {e}"))?;
                let result = critical_section(client.fred(), &name).await;
                guard.unlock().await.map_err(|e| format!("ERROR {e}"))?;
                result?;
            }
            Ok::<(), String>(())
        }));
    }
    for handle in handles {
        match handle.await {
            Ok(Ok(())) => {}
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
