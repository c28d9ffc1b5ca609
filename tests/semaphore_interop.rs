//! Interop of `Semaphore` with Redisson's `RSemaphore` without a JVM (issue 19 item 4):
//! copies of Redisson 4.7's semaphore scripts (`tests/support/src/redisson_semaphore.rs`,
//! KEYS and ARGV as Redisson sends them) run against leasehold's semaphore and the other
//! way round, on Redis and on Valkey (`both_servers!`). Waits are bounded by deadlines.

use std::time::Duration;

use leasehold_test_support::redisson_semaphore::{
    REDISSON_SEM_ADD_PERMITS, REDISSON_SEM_DRAIN, REDISSON_SEM_RELEASE, REDISSON_SEM_TRY_ACQUIRE,
    REDISSON_SEM_TRY_SET_PERMITS,
};
use leasehold_test_support::{both_servers, client, raw, wait_until, Listener, RedisServer, RespValue, ServerKind};
use tokio::time::timeout;

/// A Redisson client's `RSemaphore` on `name` (a name without braces), sending
/// Redisson's scripts.
struct Java<'a> {
    server: &'a RedisServer,
    name: &'a str,
}

impl Java<'_> {
    fn channel(&self) -> String {
        format!("redisson_sc:{{{}}}", self.name)
    }

    fn eval(&self, script: &str, with_channel: bool, args: &[&str]) -> RespValue {
        let channel = self.channel();
        let mut command = vec!["EVAL", script];
        if with_channel {
            command.extend(["2", self.name, &channel]);
        } else {
            command.extend(["1", self.name]);
        }
        command.extend(args);
        if with_channel {
            command.push("publish");
        }
        raw(self.server, &command)
    }

    fn try_acquire(&self, permits: u32) -> bool {
        self.eval(REDISSON_SEM_TRY_ACQUIRE, false, &[&permits.to_string()]).as_int() == Some(1)
    }

    fn release(&self, permits: u32) {
        assert_eq!(self.eval(REDISSON_SEM_RELEASE, true, &[&permits.to_string()]), RespValue::Nil);
    }

    fn try_set_permits(&self, permits: u32) -> bool {
        self.eval(REDISSON_SEM_TRY_SET_PERMITS, true, &[&permits.to_string()]).as_int() == Some(1)
    }

    fn add_permits(&self, delta: i64) {
        assert_eq!(self.eval(REDISSON_SEM_ADD_PERMITS, true, &[&delta.to_string()]), RespValue::Nil);
    }

    fn drain(&self) -> i64 {
        match self.eval(REDISSON_SEM_DRAIN, false, &[]) {
            RespValue::Integer(n) => n,
            other => other.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("drain: {other:?}")),
        }
    }
}

/// Counts stay right whichever side changes them: each side reads and takes what the
/// other set, released, added and drained.
async fn counts_agree_both_ways(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let java = Java { server: &server, name: "sem:iop" };
    let sem = client.semaphore("sem:iop");
    assert!(java.try_set_permits(5));
    assert!(!sem.try_set_permits(9).await.expect("set"), "Java set it first");
    assert_eq!(sem.available_permits().await.expect("q"), 5);
    sem.try_acquire(2).await.expect("try").expect("5 free").detach();
    assert!(java.try_acquire(3) && !java.try_acquire(1), "Java sees the 3 leasehold left");
    java.release(2);
    assert_eq!(sem.available_permits().await.expect("q"), 2);
    java.add_permits(-3);
    assert_eq!(sem.available_permits().await.expect("q"), -1);
    assert!(sem.try_acquire(1).await.expect("try").is_none());
    sem.add_permits(3).await.expect("add");
    sem.release(1).await.expect("release");
    assert_eq!(java.drain(), 3);
    assert_eq!(sem.drain_permits().await.expect("drain"), 0);
    assert!(!java.try_set_permits(0), "the key is there, at 0");
    assert_eq!(raw(&server, &["GET", "sem:iop"]).as_str(), Some("0"));
}
both_servers!(counts_agree_both_ways);

/// A Java release wakes a leasehold waiter by its message (not by the re-check: the
/// client's subscriber counts it), and a negative count Java's addPermits publishes
/// wakes nobody and breaks nothing.
async fn a_java_release_wakes_a_leasehold_waiter(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let java = Java { server: &server, name: "sem:wake" };
    let waiter = {
        let sem = client.semaphore("sem:wake");
        tokio::spawn(async move { sem.acquire(2).await.map(leasehold::SemaphorePermit::detach) })
    };
    let sem = client.semaphore("sem:wake");
    assert!(wait_until(Duration::from_secs(5), || sem.local_waiters() == 1).await, "a never-set semaphore: it waits");
    assert!(wait_until(Duration::from_secs(5), || client.subscribed_channels().contains(&java.channel())).await);
    // Counted from before Java's first message: the "1" below wakes the first waiter
    // too (the first in line is always woken), and its attempt may already find the
    // count of 2, before the "2" message is counted.
    let messages = client.stats().subscriber.messages;
    java.add_permits(-1); // publishes "-1"
    java.try_set_permits(1); // the key exists: nothing
    java.release(2); // publishes "1": not enough for 2
    assert!(!waiter.is_finished());
    java.release(1); // publishes "2"
    timeout(Duration::from_secs(3), waiter).await.expect("woken").expect("task").expect("acquire");
    assert!(client.stats().subscriber.messages > messages, "the message was heard");
    assert_eq!(java.drain(), 0, "the waiter took both");
}
both_servers!(a_java_release_wakes_a_leasehold_waiter);

/// leasehold publishes what a Java waiter listens for: the new count on
/// `redisson_sc:{NAME}`, never one below 1; after each, a Java waiter's try succeeds.
async fn leasehold_publishes_what_a_java_waiter_hears(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let java = Java { server: &server, name: "sem:pub" };
    let mut listener = Listener::start(&server, &java.channel());
    let sem = client.semaphore("sem:pub");
    assert!(sem.try_set_permits(2).await.expect("set"));
    assert_eq!(listener.next_message(), "2");
    assert!(java.try_acquire(2));
    sem.release(1).await.expect("release");
    assert_eq!(listener.next_message(), "1");
    assert!(java.try_acquire(1), "the Java waiter the message woke gets in");
    sem.add_permits(-10).await.expect("take away"); // -10: nothing published
    sem.release(1).await.expect("release"); // -9: nothing published
    sem.add_permits(12).await.expect("add"); // 3
    assert_eq!(listener.next_message(), "3", "no negative count came before");
    assert!(java.try_acquire(3));
}
both_servers!(leasehold_publishes_what_a_java_waiter_hears);
