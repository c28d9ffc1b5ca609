//! Interop of `ReadWriteLock` with Redisson's `RReadWriteLock` without a JVM (issue 18
//! item 5), as `tests/lock.rs` does for `RLock`: copies of Redisson 4.7's
//! read/write acquire and unlock scripts (`RedissonReadLock`, `RedissonWriteLock`,
//! KEYS and ARGV as Redisson sends them, `/work/shared/notes/redisson-family.md` §1)
//! run against leasehold's holds and the other way round. Every test runs on Redis and
//! on Valkey (`both_servers!`). Waits are bounded by deadlines.

use std::time::Duration;

use leasehold_test_support::redisson_rwlock::{
    REDISSON_READ_ACQUIRE, REDISSON_READ_UNLOCK, REDISSON_WRITE_ACQUIRE, REDISSON_WRITE_UNLOCK,
};
use leasehold_test_support::{both_servers, client, hgetall, raw, Listener, RedisServer, RespValue, ServerKind};
use tokio::time::{timeout, Instant};

const LEASE: Duration = Duration::from_secs(30);

/// One Java thread of a Redisson client: its owner `id:tid`, sending Redisson's scripts
/// for the lock `name` (a name without braces).
struct Java<'a> {
    server: &'a RedisServer,
    name: &'a str,
    owner: String,
}

impl<'a> Java<'a> {
    fn new(server: &'a RedisServer, name: &'a str, tid: u32) -> Self {
        Java { server, name, owner: format!("7c9e6679-7425-40de-944b-e07fc1f90ae7:{tid}") }
    }

    fn timeout_prefix(&self) -> String {
        format!("{{{}}}:{}:rwlock_timeout", self.name, self.owner)
    }

    fn channel(&self) -> String {
        format!("redisson_rwlock:{{{}}}", self.name)
    }

    fn latch(&self) -> String {
        format!("redisson_unlock_latch:{{{}}}:{:032x}", self.name, rand_id())
    }

    /// `None` when acquired, else the PTTL Redisson would wait.
    fn read(&self, lease_ms: u64) -> Option<i64> {
        let (prefix, writer) = (self.timeout_prefix(), format!("{}:write", self.owner));
        let lease = lease_ms.to_string();
        reply(raw(self.server, &["EVAL", REDISSON_READ_ACQUIRE, "2", self.name, &prefix, &lease, &self.owner, &writer]))
    }

    fn write(&self, lease_ms: u64) -> Option<i64> {
        let writer = format!("{}:write", self.owner);
        let lease = lease_ms.to_string();
        reply(raw(self.server, &["EVAL", REDISSON_WRITE_ACQUIRE, "1", self.name, &lease, &writer]))
    }

    fn read_unlock(&self) -> Option<i64> {
        let (channel, prefix, key_prefix, latch) =
            (self.channel(), self.timeout_prefix(), format!("{{{}}}", self.name), self.latch());
        let keys = [self.name, channel.as_str(), prefix.as_str(), key_prefix.as_str(), latch.as_str()];
        let mut args = vec!["EVAL", REDISSON_READ_UNLOCK, "5"];
        args.extend(keys);
        args.extend(["0", self.owner.as_str(), "publish", "20000"]);
        let answer = reply(raw(self.server, &args));
        raw(self.server, &["DEL", &latch]);
        answer
    }

    fn write_unlock(&self) -> Option<i64> {
        let (channel, latch, writer) = (self.channel(), self.latch(), format!("{}:write", self.owner));
        let answer = reply(raw(
            self.server,
            &[
                "EVAL",
                REDISSON_WRITE_UNLOCK,
                "3",
                self.name,
                &channel,
                &latch,
                "1",
                "30000",
                &writer,
                "publish",
                "20000",
            ],
        ));
        raw(self.server, &["DEL", &latch]);
        answer
    }
}

/// A script's nil or integer reply.
fn reply(value: RespValue) -> Option<i64> {
    match value {
        RespValue::Nil => None,
        other => Some(other.as_int().unwrap_or_else(|| panic!("an integer or nil, got {other:?}"))),
    }
}

/// A request id (Redisson's is 16 random bytes in hex; any unique value will do).
fn rand_id() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(1);
    u128::from(h.finish())
}

/// Redisson's readers and leasehold's share the lock, whichever comes first, and each
/// side's release leaves the other's reads held.
async fn readers_share_with_redisson_readers(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let name = "rwi:share";
    let (java1, java2) = (Java::new(&server, name, 1), Java::new(&server, name, 2));
    assert_eq!(java1.read(30_000), None, "Redisson reads first");
    let rw = client.read_write_lock(name);
    let ours = rw.try_read().await.expect("try").expect("leasehold joins a Redisson read");
    assert_eq!(java2.read(30_000), None, "and Redisson joins leasehold's");
    assert_eq!(hgetall(&server, name).len(), 4, "mode and three readers");
    assert_eq!(java1.read_unlock(), Some(0), "Redisson's release: others still read");
    assert_eq!(java2.read_unlock(), Some(0));
    assert!(rw.is_read_locked().await.expect("q"), "leasehold's read survives Redisson's releases");
    assert!(client.read_write_lock(name).try_write().await.expect("try").is_none());
    ours.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0), "the last release deletes the lock");

    // leasehold first; Redisson's last release (with leasehold's timeout keys counted)
    // after leasehold's.
    let ours = rw.read_with_lease(LEASE).await.expect("read");
    assert_eq!(java1.read(30_000), None);
    ours.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["HGET", name, "mode"]).as_str(), Some("read"));
    assert_eq!(java1.read_unlock(), Some(1), "Redisson's last release deletes the lock");
}
both_servers!(readers_share_with_redisson_readers);

/// A Redisson writer excludes leasehold's readers and writers, and a leasehold writer
/// excludes Redisson's (its scripts answer a PTTL).
async fn writers_exclude_both_ways(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let name = "rwi:write";
    let java = Java::new(&server, name, 7);
    assert_eq!(java.write(30_000), None);
    let rw = client.read_write_lock(name);
    assert!(rw.try_read().await.expect("try").is_none(), "a Redisson writer excludes leasehold readers");
    assert!(rw.try_write().await.expect("try").is_none(), "and writers");
    assert_eq!(java.write_unlock(), Some(1));

    let ours = rw.try_write().await.expect("try").expect("free");
    let ttl = java.read(30_000).expect("a leasehold writer excludes Redisson readers");
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
    assert!(java.write(30_000).is_some(), "and writers");
    // A read of leasehold's writer inside its write, then the write released (a
    // downgrade): Redisson sees a read lock.
    let read = rw.try_read().await.expect("try").expect("read in write");
    ours.unlock().await.expect("unlock");
    assert_eq!(java.read(30_000), None, "after the downgrade Redisson readers join");
    assert!(java.write(30_000).is_some(), "but no writer");
    read.unlock().await.expect("unlock");
    assert_eq!(java.read_unlock(), Some(1));
    assert_eq!(java.write(30_000), None);
    assert_eq!(java.write_unlock(), Some(1));
}
both_servers!(writers_exclude_both_ways);

/// Redisson's releases wake leasehold's waiters: its write release (`1`) every waiting
/// reader, its last read release (`0`) a waiting writer. leasehold's releases publish
/// what Redisson's waiters listen for, on the same channel: `1` for a write release and
/// a downgrade, `0` for the last read release.
async fn each_sides_release_wakes_the_others_waiters(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let name = "rwi:wake";
    let java = Java::new(&server, name, 3);

    assert_eq!(java.write(30_000), None);
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let rw = client.read_write_lock(name);
            tokio::spawn(async move {
                let guard = rw.try_read_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
                (Instant::now(), guard)
            })
        })
        .collect();
    let channel = java.channel();
    assert!(
        leasehold_test_support::wait_until(Duration::from_secs(5), || client.subscribed_channels().contains(&channel))
            .await,
        "leasehold's readers listen on {channel}"
    );
    let released = Instant::now();
    assert_eq!(java.write_unlock(), Some(1));
    let mut guards = Vec::new();
    for reader in readers {
        let (at, guard) = timeout(Duration::from_secs(5), reader).await.expect("in time").expect("task");
        assert!(at.duration_since(released) < Duration::from_secs(2), "woken by Redisson's write release");
        guards.push(guard);
    }
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }

    assert_eq!(java.read(30_000), None);
    let rw = client.read_write_lock(name);
    let writer = tokio::spawn(async move {
        let guard = rw.try_write_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        (Instant::now(), guard)
    });
    assert!(
        leasehold_test_support::wait_until(Duration::from_secs(5), || client.subscribed_channels().contains(&channel))
            .await,
        "the writer listens"
    );
    let released = Instant::now();
    assert_eq!(java.read_unlock(), Some(1));
    let (at, write) = timeout(Duration::from_secs(5), writer).await.expect("in time").expect("task");
    assert!(at.duration_since(released) < Duration::from_secs(2), "woken by Redisson's read release");

    // leasehold's releases, as a Java client's LockPubSub hears them.
    let mut listener = Listener::start(&server, &channel);
    write.unlock().await.expect("unlock");
    assert_eq!(listener.next_message(), "1", "a write release wakes every Redisson waiter");
    assert_eq!(java.write(30_000), None, "and Redisson's writer gets in");
    assert_eq!(java.write_unlock(), Some(1));
    assert_eq!(listener.next_message(), "1");
    let rw = client.read_write_lock(name);
    let write = rw.write_with_lease(LEASE).await.expect("write");
    let read = rw.try_read().await.expect("try").expect("read in write");
    write.unlock().await.expect("downgrade");
    assert_eq!(listener.next_message(), "1", "a downgrade publishes too (Redisson's does not)");
    assert_eq!(java.read(30_000), None, "Redisson readers join the downgraded lock");
    assert_eq!(java.read_unlock(), Some(0));
    read.unlock().await.expect("unlock");
    assert_eq!(listener.next_message(), "0", "the last read release: Redisson's read-unlock message");
}
both_servers!(each_sides_release_wakes_the_others_waiters);
