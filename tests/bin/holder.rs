//! A lock holder in its own process, for tests that kill (`SIGKILL`) or stop
//! (`SIGSTOP`) the holder.
//!
//! Usage: `holder URL NAME WATCHDOG_MS`. It takes `NAME` in watchdog mode and prints
//! `LOCKED <owner>`; prints `LOST` when the guard learns the lock is lost; on a stdin
//! line `UNLOCK` it unlocks and prints `UNLOCK OK` or `UNLOCK ERR <kind>`, then exits.

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
    let [_, url, name, watchdog_ms] = args.as_slice() else {
        eprintln!("usage: holder URL NAME WATCHDOG_MS");
        std::process::exit(2);
    };
    let watchdog = Duration::from_millis(watchdog_ms.parse().expect("WATCHDOG_MS is a number"));
    let client = leasehold::Client::builder()
        .url(url.as_str())
        .watchdog_timeout(watchdog)
        .command_timeout(leasehold_tests::command_timeout_for(watchdog))
        .connect()
        .await
        .expect("connect");
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
