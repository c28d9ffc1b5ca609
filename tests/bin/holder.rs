//! A lock holder in its own process, for tests that kill (`SIGKILL`) or stop
//! (`SIGSTOP`) the holder.
//!
//! Usage: `holder URL NAME WATCHDOG_MS [fenced]`. It takes `NAME` in watchdog mode and
//! prints `LOCKED <owner>` (with `fenced`: a [`leasehold::FencedLock`], and
//! `LOCKED <owner> <token>`); prints `LOST` when the guard learns the lock is lost; on a
//! stdin line `UNLOCK` it unlocks and prints `UNLOCK OK` or `UNLOCK ERR <kind>`, then
//! exits. In fenced mode a line `WRITE KEY VALUE` makes a fenced write with its token
//! (whether or not it still holds the lock) and prints `WRITE OK`,
//! `WRITE REJECTED <fence>` or `WRITE ERR <kind>`.
//!
//! `holder URL NAME LEASE_MS permit` takes one permit of the permit-expirable semaphore
//! `NAME` with a lease of `LEASE_MS`, prints `LOCKED <permit id>`, and holds it until
//! killed or stdin closes. `holder URL NAME WATCHDOG_MS permit-watchdog` takes one with
//! `acquire()` (renewed by a watchdog of `WATCHDOG_MS`) instead.

use std::io::Write;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, name, watchdog_ms, fenced) = match args.as_slice() {
        [_, url, name, watchdog_ms] => (url, name, watchdog_ms, false),
        [_, url, name, watchdog_ms, mode] if mode == "fenced" => (url, name, watchdog_ms, true),
        [_, url, name, lease_ms, mode] if mode == "permit" => return hold_permit(url, name, lease_ms, false).await,
        [_, url, name, watchdog_ms, mode] if mode == "permit-watchdog" => {
            return hold_permit(url, name, watchdog_ms, true).await;
        }
        _ => {
            eprintln!("usage: holder URL NAME WATCHDOG_MS [fenced]");
            std::process::exit(2);
        }
    };
    let watchdog = Duration::from_millis(watchdog_ms.parse().expect("WATCHDOG_MS is a number"));
    let client = leasehold::Client::builder()
        .url(url.as_str())
        .watchdog_timeout(watchdog)
        .command_timeout(leasehold_test_support::command_timeout_for(watchdog))
        .connect()
        .await
        .expect("connect");
    if fenced {
        return hold_fenced(&client, name).await;
    }
    let lock = client.lock(name);
    let guard = lock.lock().await.expect("lock");
    say(&format!("LOCKED {}", lock.owner()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut reported_lost = false;
    loop {
        tokio::select! {
            () = guard.lost(), if !reported_lost => {
                reported_lost = true;
                say("LOST");
            }
            line = lines.next_line() => {
                match line {
                    Ok(Some(line)) if line.trim() == "UNLOCK" => break,
                    Ok(Some(_)) => {}
                    _ => return,
                }
            }
        }
    }
    match guard.unlock().await {
        Ok(()) => say("UNLOCK OK"),
        Err(error) => say(&format!("UNLOCK ERR {}", error.kind())),
    }
}

async fn hold_fenced(client: &leasehold::Client, name: &str) {
    let lock = client.fenced_lock(name);
    let guard = lock.lock().await.expect("fenced lock");
    say(&format!("LOCKED {} {}", lock.owner(), guard.token()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut reported_lost = false;
    loop {
        tokio::select! {
            () = guard.lost(), if !reported_lost => {
                reported_lost = true;
                say("LOST");
            }
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { return };
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.as_slice() {
                    ["UNLOCK"] => break,
                    ["WRITE", key, value] => match guard.fenced_set(key, value).await {
                        Ok(leasehold::fence::FencedWrite::Written) => say("WRITE OK"),
                        Ok(leasehold::fence::FencedWrite::Rejected { fence }) => say(&format!("WRITE REJECTED {fence}")),
                        Err(error) => say(&format!("WRITE ERR {}", error.kind())),
                    },
                    _ => {}
                }
            }
        }
    }
    match guard.unlock().await {
        Ok(()) => say("UNLOCK OK"),
        Err(error) => say(&format!("UNLOCK ERR {}", error.kind())),
    }
}

async fn hold_permit(url: &str, name: &str, lease_ms: &str, watchdog: bool) {
    let lease = Duration::from_millis(lease_ms.parse().expect("LEASE_MS is a number"));
    let client = leasehold::Client::builder()
        .url(url)
        .watchdog_timeout(lease)
        .command_timeout(leasehold_test_support::command_timeout_for(lease))
        .connect()
        .await
        .expect("connect");
    let sem = client.permit_expirable_semaphore(name);
    let permit = if watchdog { sem.acquire().await } else { sem.acquire_with_lease(lease).await }.expect("permit");
    say(&format!("LOCKED {}", permit.id()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(_)) = lines.next_line().await {}
    drop(permit);
}
