//! Interop of `PermitExpirableSemaphore` with Redisson's `RPermitExpirableSemaphore`
//! without a JVM (issue 19 item 4): copies of Redisson 4.7's scripts
//! (`tests/support/src/redisson_pes.rs`, KEYS and ARGV as Redisson sends them, its
//! client clock included) run against leasehold's and the other way round, on Redis
//! and on Valkey (`both_servers!`). Waits are bounded by deadlines.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::ErrorKind;
use leasehold_test_support::redisson_pes::{REDISSON_PES_ACQUIRE, REDISSON_PES_AVAILABLE, REDISSON_PES_TRY_RELEASE};
use leasehold_test_support::{
    both_servers, client, raw, raw_command, wait_until, Listener, RedisServer, RespValue, ServerKind,
};
use tokio::time::{timeout, Instant};

/// How often a waiting acquire reads the semaphore again with no message (leasehold's
/// `RECHECK`): a wake-up much sooner than this came from a message or a lease's end.
const RECHECK: Duration = Duration::from_secs(1);

/// A Java client's clock, as Redisson reads it (`System.currentTimeMillis()`).
fn java_now() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis()).expect("ms")
}

/// 16 random bytes, as Redisson's ids (std's per-process random hasher keys).
fn random_id() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos());
        hasher.finish().to_be_bytes()
    };
    let (a, b) = (half(), half());
    std::array::from_fn(|i| if i < 8 { a[i] } else { b[i - 8] })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(id: &str) -> Vec<u8> {
    (0..id.len() / 2).map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

/// A Redisson client's `RPermitExpirableSemaphore` on `name` (a name without braces).
struct Java<'a> {
    server: &'a RedisServer,
    name: &'a str,
}

impl Java<'_> {
    fn timeout_key(&self) -> String {
        format!("{{{}}}:timeout", self.name)
    }

    fn channel(&self) -> String {
        format!("redisson_sc:{{{}}}", self.name)
    }

    /// `tryAcquire()` (lease `None`: non-expiring) or with a lease: the permit's hex id.
    fn try_acquire(&self, lease: Option<Duration>) -> Option<String> {
        let id = random_id();
        let expiry =
            lease.map_or(922_337_203_685_477, |lease| java_now() + i64::try_from(lease.as_millis()).expect("ms"));
        let (timeout, channel) = (self.timeout_key(), self.channel());
        let (expiry, now) = (expiry.to_string(), java_now().to_string());
        let args: [&[u8]; 12] = [
            b"EVAL",
            REDISSON_PES_ACQUIRE.as_bytes(),
            b"3",
            self.name.as_bytes(),
            timeout.as_bytes(),
            channel.as_bytes(),
            b"1",
            expiry.as_bytes(),
            now.as_bytes(),
            b"922337203685477",
            b"publish",
            &id,
        ];
        match raw_command(&self.server.addr(), &args) {
            RespValue::Simple(ok) | RespValue::Bulk(ok) if ok == "OK" => Some(hex(&id)),
            _ => None,
        }
    }

    /// `tryRelease(id)`: `true` when released.
    fn try_release(&self, id: &str) -> bool {
        let (timeout, channel, now) = (self.timeout_key(), self.channel(), java_now().to_string());
        let raw_id = unhex(id);
        let args: [&[u8]; 10] = [
            b"EVAL",
            REDISSON_PES_TRY_RELEASE.as_bytes(),
            b"3",
            self.name.as_bytes(),
            channel.as_bytes(),
            timeout.as_bytes(),
            &raw_id,
            b"1",
            now.as_bytes(),
            b"publish",
        ];
        raw_command(&self.server.addr(), &args).as_int() == Some(1)
    }

    /// `availablePermits()`.
    fn available(&self) -> RespValue {
        let (timeout, channel, now) = (self.timeout_key(), self.channel(), java_now().to_string());
        raw(self.server, &["EVAL", REDISSON_PES_AVAILABLE, "3", self.name, &timeout, &channel, &now, "publish"])
    }
}

/// Whether the permit `id` (hex) is listed in the `ZSet` under its raw 16 bytes.
fn is_listed(server: &RedisServer, zset: &str, id: &str) -> bool {
    raw_command(&server.addr(), &[b"ZSCORE", zset.as_bytes(), &unhex(id)]) != RespValue::Nil
}

/// Permits taken by one side are listed and released by id by the other, and the count
/// agrees throughout.
async fn permits_are_listed_and_released_by_id_across_sides(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let java = Java { server: &server, name: "pes:iop" };
    let sem = client.permit_expirable_semaphore("pes:iop");
    assert!(sem.try_set_permits(3).await.expect("set"));
    let java_id = java.try_acquire(Some(Duration::from_secs(60))).expect("Java takes one");
    let java_forever = java.try_acquire(None).expect("Java takes a non-expiring one");
    let ours = sem.acquire_with_lease(Duration::from_secs(60)).await.expect("ours");
    assert!(java.try_acquire(None).is_none(), "3 taken");
    assert_eq!(sem.acquired_permits().await.expect("q"), 3, "Java's permits count as held");
    for id in [&java_id, &java_forever, &ours.id().to_owned()] {
        assert!(is_listed(&server, "{pes:iop}:timeout", id), "{id} listed under its raw bytes");
    }
    assert!(sem.try_release(&java_id).await.expect("leasehold releases Java's"), "by Java's id");
    assert!(java.try_release(ours.id()), "Java releases leasehold's by its id");
    assert_eq!(ours.release().await.expect_err("released by Java").kind(), ErrorKind::NotOwner);
    assert!(sem.try_release(&java_forever).await.expect("release"));
    assert_eq!(sem.available_permits().await.expect("q"), 3);
    assert_eq!(raw(&server, &["ZCARD", "{pes:iop}:timeout"]).as_int(), Some(0));
}
both_servers!(permits_are_listed_and_released_by_id_across_sides);

/// Each side's release wakes the other's waiter: a Java release wakes a leasehold waiter
/// by its message (well before the 1 s re-check), and a leasehold release publishes the
/// count a Java `SemaphorePubSub` listens for.
async fn each_sides_release_wakes_the_other(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let java = Java { server: &server, name: "pes:wake" };
    let sem = client.permit_expirable_semaphore("pes:wake");
    sem.set_permits(1).await.expect("set");
    let java_id = java.try_acquire(None).expect("Java holds the one permit");
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire_with_lease(Duration::from_secs(30)).await })
    };
    assert!(wait_until(Duration::from_secs(5), || client.subscribed_channels().contains(&java.channel())).await);
    // Past the waiter's first attempt: it is queued, so only a message (or the re-check)
    // can let it in.
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1).await, "the waiter queued");
    let released_at = Instant::now();
    assert!(java.try_release(&java_id));
    let permit = timeout(Duration::from_secs(3), waiter).await.expect("woken").expect("task").expect("permit");
    // Faster than the 1 s re-check by a factor of 2.
    assert!(released_at.elapsed() < RECHECK / 2, "woken by the message: {:?}", released_at.elapsed());
    let mut listener = Listener::start(&server, &java.channel());
    permit.release().await.expect("release");
    assert_eq!(listener.next_message(), "1", "the count Java's listener reads");
    assert!(java.try_acquire(None).is_some(), "the Java waiter it wakes gets in");
}
both_servers!(each_sides_release_wakes_the_other);

/// Redisson's reclaim `unpack`s every expired id and fails on 20,000 of them; leasehold's
/// bounded reclaim answers and then Redisson's works again.
async fn redissons_unbounded_reclaim_fails_where_leaseholds_does_not(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let java = Java { server: &server, name: "pes:unpack" };
    let sem = client.permit_expirable_semaphore("pes:unpack");
    sem.set_permits(0).await.expect("set");
    for batch in 0..20 {
        let mut command: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), b"{pes:unpack}:timeout".to_vec()];
        for i in 0..1000u32 {
            command.push(b"1000".to_vec());
            command.push(format!("expired-{batch}-{i}").into_bytes());
        }
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        assert_eq!(raw_command(&server.addr(), &args).as_int(), Some(1000));
    }
    match java.available() {
        RespValue::Error(message) => assert!(message.contains("unpack"), "{message}"),
        other => panic!("Redisson's reclaim of 20,000 ids should fail, got {other:?}"),
    }
    assert_eq!(sem.available_permits().await.expect("available"), 20_000);
    for _ in 0..19 {
        sem.available_permits().await.expect("reclaims a chunk");
    }
    assert_eq!(raw(&server, &["ZCARD", "{pes:unpack}:timeout"]).as_int(), Some(0));
    assert_eq!(
        java.available()
            .as_str()
            .map(str::to_owned)
            .or_else(|| java.available().as_int().map(|n| n.to_string()))
            .as_deref(),
        Some("20000")
    );
}
both_servers!(redissons_unbounded_reclaim_fails_where_leaseholds_does_not);
