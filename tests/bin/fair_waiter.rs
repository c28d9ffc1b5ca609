//! A queued waiter in its own process (a `FairLock`, or with `KIND` = `lock` a `Lock`,
//! `fenced` a `FencedLock`, `semaphore` one permit of a `Semaphore`, whose queue
//! keep-alive is fixed), for the cross-process FIFO and dead-waiter tests.
//!
//! Usage: `fair_waiter URL NAME ID KEEPALIVE_MS HOLD_MS [fair|lock|fenced|semaphore|read:LEASE_MS|write]`.
//! With `read:LEASE_MS` it waits for a read of the read/write lock `NAME` with that
//! lease (`read_with_lease`) and prints `QUEUING <reader owner>` first; with `write`,
//! for its write (`write()`), printing `QUEUING <writer field>` (`OWNER:write`); with `semaphore`, for one permit
//! (`acquire(1)`), printing `QUEUING -`. Otherwise it prints
//! `QUEUING <owner>`, waits for `NAME` with `lock()` (command timeout 1 s, the given
//! keep-alive),
//! then `RPUSH NAME:order ID` while holding it (a fenced lock also `RPUSH NAME:tokens
//! TOKEN`), prints `LOCKED`, holds it `HOLD_MS`, unlocks, prints `UNLOCKED` and exits.

use std::io::Write;
use std::time::Duration;

use leasehold::fred::prelude::ClientLike;
use leasehold::fred::types::{ClusterHash, CustomCommand};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, name, id, keepalive_ms, hold_ms, kind) = match args.as_slice() {
        [_, url, name, id, keepalive_ms, hold_ms] => (url, name, id, keepalive_ms, hold_ms, "fair"),
        [_, url, name, id, keepalive_ms, hold_ms, kind] => (url, name, id, keepalive_ms, hold_ms, kind.as_str()),
        _ => {
            eprintln!("usage: fair_waiter URL NAME ID KEEPALIVE_MS HOLD_MS [fair|lock|fenced|semaphore]");
            std::process::exit(2);
        }
    };
    let millis = |s: &str| Duration::from_millis(s.parse().expect("a number of ms"));
    let client = leasehold::Client::builder()
        .url(url.as_str())
        .command_timeout(Duration::from_secs(1))
        .queue_keepalive(millis(keepalive_ms))
        .connect()
        .await
        .expect("connect");
    let rpush = CustomCommand::new_static("RPUSH", ClusterHash::FirstKey, false);
    let push = |key: String, value: String| {
        let client = client.clone();
        let rpush = rpush.clone();
        async move {
            let _: i64 = client.fred().custom(rpush, vec![key, value]).await.expect("RPUSH");
        }
    };
    let hold = millis(hold_ms);
    if let Some(lease) = kind.strip_prefix("read:") {
        let rw = client.read_write_lock(name);
        say(&format!("QUEUING {}", rw.owner()));
        let guard = rw.read_with_lease(millis(lease)).await.expect("read");
        push(format!("{name}:order"), id.clone()).await;
        say("LOCKED");
        tokio::time::sleep(hold).await;
        guard.unlock().await.expect("unlock");
        say("UNLOCKED");
        return;
    }
    if kind == "write" {
        let rw = client.read_write_lock(name);
        say(&format!("QUEUING {}:write", rw.owner()));
        let guard = rw.write().await.expect("write");
        push(format!("{name}:order"), id.clone()).await;
        say("LOCKED");
        tokio::time::sleep(hold).await;
        guard.unlock().await.expect("unlock");
        say("UNLOCKED");
        return;
    }
    if kind == "semaphore" {
        let sem = client.semaphore(name);
        say("QUEUING -");
        let permit = sem.acquire(1).await.expect("semaphore");
        push(format!("{name}:order"), id.clone()).await;
        say("LOCKED");
        tokio::time::sleep(hold).await;
        permit.release().await.expect("release");
        say("UNLOCKED");
        return;
    }
    if kind == "fenced" {
        let lock = client.fenced_lock(name);
        say(&format!("QUEUING {}", lock.owner()));
        let guard = lock.lock().await.expect("fenced lock");
        push(format!("{name}:order"), id.clone()).await;
        push(format!("{name}:tokens"), guard.token().to_string()).await;
        say("LOCKED");
        tokio::time::sleep(hold).await;
        guard.unlock().await.expect("unlock");
        say("UNLOCKED");
        return;
    }
    let guard = if kind == "lock" {
        let lock = client.lock(name);
        say(&format!("QUEUING {}", lock.owner()));
        lock.lock().await.expect("lock")
    } else {
        let lock = client.fair_lock(name);
        say(&format!("QUEUING {}", lock.owner()));
        lock.lock().await.expect("fair lock")
    };
    push(format!("{name}:order"), id.clone()).await;
    say("LOCKED");
    tokio::time::sleep(hold).await;
    guard.unlock().await.expect("unlock");
    say("UNLOCKED");
}
