//! leasehold against the real Redisson 4.7.0 client (issue 28): a Java peer
//! (`interop/redisson`, driven through `leasehold_test_support::redisson_java::JavaPeer`)
//! and leasehold share each kind by name, both ways, on a standalone server and, for
//! `RLock`, on the local cluster. One Java process per test; its handles are Java
//! threads (Redisson's lock owners). Waits are bounded by deadlines; wake-ups are timed
//! against bounds far below any TTL or poll, so only a pub/sub message can meet them.

use std::time::Duration;

use leasehold_test_support::redisson_java::JavaPeer;
use leasehold_tests::{client_with, raw, wait_until, RedisCluster, RedisServer, RespValue};
use tokio::time::{timeout, Instant};

/// Generous bound for anything that must happen "soon".
const WITHIN: Duration = Duration::from_secs(10);
/// A wake-up by message: a few round trips plus a loaded CI machine; far below the
/// 30 s lease (watchdog default) that a missed message would wait for.
const WAKE: Duration = Duration::from_millis(1500);
/// The default watchdog timeout of both sides, unless a test says otherwise.
const WATCHDOG: Duration = Duration::from_secs(30);

/// A peer connected to `server`, or return (skip) when Java is not available outside CI.
macro_rules! java_on {
    ($server:expr, $watchdog:expr) => {
        match JavaPeer::single(&$server.url(), $watchdog).await {
            Some(peer) => peer,
            None => return,
        }
    };
}

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<String> {
    raw(server, &["HGET", key, field]).as_str().map(str::to_owned)
}

fn numsub(server: &RedisServer, channel: &str) -> i64 {
    match raw(server, &["PUBSUB", "NUMSUB", channel]) {
        RespValue::Array(items) => items.get(1).and_then(RespValue::as_int).unwrap_or(0),
        other => panic!("PUBSUB NUMSUB: {other:?}"),
    }
}

/// Waits until Java's `handle` has started its command and someone listens on `channel`.
async fn java_waiting(java: &JavaPeer, server: &RedisServer, handle: &str, channel: &str) {
    assert!(java.wait_begin(handle, WITHIN).await, "{handle} started");
    assert!(wait_until(WITHIN, || numsub(server, channel) >= 1).await, "java subscribed to {channel}");
}

// ---------------------------------------------------------------- RLock and Lock

/// Exclusion and reentrancy both ways: Java's two holds are one owner field with count 2
/// (read by leasehold on the server), leasehold's two holds likewise; neither side can
/// take the other's lock; the first unlock of two keeps it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_and_lock_exclude_and_count_reentries_both_ways() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let lock = client.lock("rj:reentry");

    java.ok("j", "lock lock rj:reentry").await;
    java.ok("j", "lock lock rj:reentry").await;
    let owner = java.owner("j").await;
    assert_eq!(hget(&server, "rj:reentry", &owner).as_deref(), Some("2"), "Redisson's owner field and count");
    assert_eq!(java.ok_int("j", "holdcount lock rj:reentry").await, 2);
    assert!(lock.is_locked().await.expect("is_locked"));
    assert_eq!(lock.hold_count().await.expect("hold_count"), 0, "per owner: leasehold holds nothing");
    assert!(lock.try_lock().await.expect("try_lock").is_none(), "Java holds it");
    java.ok("j", "unlock lock rj:reentry").await;
    assert_eq!(hget(&server, "rj:reentry", &owner).as_deref(), Some("1"));
    assert!(lock.try_lock().await.expect("try_lock").is_none(), "still held once by Java");
    java.ok("j", "unlock lock rj:reentry").await;
    assert_eq!(raw(&server, &["EXISTS", "rj:reentry"]).as_int(), Some(0));

    let first = lock.lock().await.expect("lock");
    let second = lock.lock().await.expect("re-enter");
    assert_eq!(hget(&server, "rj:reentry", lock.owner()).as_deref(), Some("2"));
    assert!(java.ok_bool("j", "islocked lock rj:reentry").await);
    assert!(!java.ok_bool("j", "held lock rj:reentry").await);
    assert_eq!(java.ok_int("j", "holdcount lock rj:reentry").await, 0);
    assert!(!java.ok_bool("j", "trylock lock rj:reentry -1").await, "leasehold holds it");
    second.unlock().await.expect("unlock");
    assert!(!java.ok_bool("j", "trylock lock rj:reentry 100").await, "still held once by leasehold");
    let err = java.call("j", "unlock lock rj:reentry").await.expect_err("Java does not own it");
    assert_eq!(err.class, "java.lang.IllegalMonitorStateException");
    first.unlock().await.expect("unlock");
    assert!(java.ok_bool("j", "trylock lock rj:reentry -1").await, "free: Java takes it");
    java.ok("j", "unlock lock rj:reentry").await;
}

/// Redisson's watchdog (lockWatchdogTimeout 2 s) keeps a leasehold waiter out for
/// 2.5 leases; Java's unlock then lets it in at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_watchdog_keeps_a_leasehold_waiter_out_past_its_timeout() {
    let server = RedisServer::start();
    let java = java_on!(server, Duration::from_secs(2));
    let client = client_with(&server.url(), WATCHDOG).await;
    let lock = client.lock("rj:watchdog");
    java.ok("j", "lock lock rj:watchdog").await;
    let pttl = raw(&server, &["PTTL", "rj:watchdog"]).as_int().expect("pttl");
    assert!((1..=2000).contains(&pttl), "Redisson's lease is its lockWatchdogTimeout: {pttl}");
    let started = Instant::now();
    assert!(lock.try_lock_for(Duration::from_secs(5)).await.expect("try_lock_for").is_none(), "renewed by Java");
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert!(java.ok_bool("j", "held lock rj:watchdog").await);
    let waiter = tokio::spawn({
        let lock = client.lock("rj:watchdog");
        async move { lock.try_lock_for(WITHIN).await.expect("try_lock_for") }
    });
    assert!(wait_until(WITHIN, || client.stats().waiters >= 1).await);
    let unlocked = Instant::now();
    java.ok("j", "unlock lock rj:watchdog").await;
    let guard = timeout(WITHIN, waiter).await.expect("in time").expect("task").expect("acquired");
    assert!(unlocked.elapsed() < WAKE, "woken by Java's unlock: {:?}", unlocked.elapsed());
    guard.unlock().await.expect("unlock");
}

/// Java's unlock wakes a leasehold waiter, and leasehold's unlock a Redisson waiter,
/// each within a few round trips (both holds have 30 s leases: only the message can
/// explain a wake-up this fast).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sides_unlock_wakes_the_others_waiter() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    unlock_wakes_across(&java, &server.url(), || numsub(&server, "redisson_lock__channel:{rj:wake}"), "rj:wake").await;
}

async fn unlock_wakes_across(java: &JavaPeer, url: &str, java_listens: impl Fn() -> i64, name: &str) {
    let client = client_with(url, WATCHDOG).await;
    // Java holds, leasehold waits.
    java.ok("j", &format!("lock lock {name}")).await;
    let waiter = tokio::spawn({
        let lock = client.lock(name);
        async move { lock.try_lock_for(Duration::from_secs(60)).await.expect("try_lock_for") }
    });
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert!(
        wait_until(WITHIN, || client.stats().waiters >= 1 && client.subscribed_channels().contains(&channel)).await
    );
    let unlocked = Instant::now();
    java.ok("j", &format!("unlock lock {name}")).await;
    let guard = timeout(WITHIN, waiter).await.expect("in time").expect("task").expect("acquired");
    let rust_woken = unlocked.elapsed();
    assert!(rust_woken < WAKE, "leasehold woken by Redisson's unlock: {rust_woken:?}");

    // leasehold holds, Java waits.
    java.send("w", &format!("trylock lock {name} 60000")).await;
    assert!(java.wait_begin("w", WITHIN).await);
    assert!(wait_until(WITHIN, || java_listens() >= 1).await, "Redisson subscribed");
    assert!(java.reply_within("w", Duration::from_millis(300)).await.is_none(), "Java waits");
    let unlocked = Instant::now();
    guard.unlock().await.expect("unlock");
    let reply = java.reply_within("w", WITHIN).await.expect("Java's reply");
    let java_woken = unlocked.elapsed();
    assert_eq!(reply, Ok("true".to_owned()));
    assert!(java_woken < WAKE, "Redisson woken by leasehold's unlock: {java_woken:?}");
    eprintln!("wake-up: leasehold by Redisson {rust_woken:?}, Redisson by leasehold {java_woken:?}");
    java.ok("w", &format!("unlock lock {name}")).await;
}

/// leasehold's `force_unlock` of Java's lock: Redisson no longer holds (its unlock
/// fails); Redisson's `forceUnlock` of leasehold's lock: the guard learns it is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_tells_the_other_side() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), Duration::from_secs(3)).await;
    let lock = client.lock("rj:force");

    java.ok("j", "lock lock rj:force").await;
    assert!(lock.force_unlock().await.expect("force_unlock"));
    assert!(!java.ok_bool("j", "held lock rj:force").await);
    assert!(!java.ok_bool("j", "islocked lock rj:force").await);
    let err = java.call("j", "unlock lock rj:force").await.expect_err("no longer Java's");
    assert_eq!(err.class, "java.lang.IllegalMonitorStateException");

    let guard = lock.lock().await.expect("lock");
    assert!(java.ok_bool("j", "forceunlock lock rj:force").await);
    timeout(WITHIN, guard.lost()).await.expect("the guard learns the lock is gone");
    assert!(guard.is_lost());
    assert!(java.ok_bool("j", "trylock lock rj:force -1").await, "free for Java");
    java.ok("j", "unlock lock rj:force").await;
    drop(guard);
}

/// On the local cluster (Redis 7: Redisson uses sharded pub/sub): exclusion, the owner
/// field, and each side's unlock waking the other's waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_and_lock_on_the_cluster() {
    let cluster = RedisCluster::shared();
    let nodes: Vec<String> = cluster.addrs().iter().map(|a| format!("redis://{a}")).collect();
    let Some(java) = JavaPeer::cluster(&nodes, WATCHDOG).await else { return };
    let client = client_with(&cluster.url(), WATCHDOG).await;
    for name in ["rjc:a", "rjc:b", "rjc:c"] {
        let lock = client.lock(name);
        java.ok("j", &format!("lock lock {name}")).await;
        let owner = java.owner("j").await;
        assert_eq!(cluster.on_key(name, &["HGET", name, &owner]).as_str(), Some("1"), "{name}");
        assert!(lock.try_lock().await.expect("try_lock").is_none(), "{name}: Java holds it");
        java.ok("j", &format!("unlock lock {name}")).await;
        let guard = lock.try_lock().await.expect("try_lock").expect("free");
        assert!(!java.ok_bool("j", &format!("trylock lock {name} -1")).await, "{name}: leasehold holds it");
        guard.unlock().await.expect("unlock");
    }
    let name = "rjc:wake";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = cluster.primary_for(name);
    let listens = || {
        let shard = match cluster.on(&node, &["PUBSUB", "SHARDNUMSUB", &channel]) {
            RespValue::Array(items) => items.get(1).and_then(RespValue::as_int).unwrap_or(0),
            _ => 0,
        };
        let classic: i64 = cluster
            .addrs()
            .iter()
            .map(|n| match cluster.on(n, &["PUBSUB", "NUMSUB", &channel]) {
                RespValue::Array(items) => items.get(1).and_then(RespValue::as_int).unwrap_or(0),
                _ => 0,
            })
            .sum();
        shard + classic
    };
    unlock_wakes_across(&java, &cluster.url(), listens, name).await;
}

// ---------------------------------------------------------- RFairLock and FairLock

/// Queues J1, R1, J2, R2 behind a leasehold holder and checks they are served in that
/// order. `java_wait` is how the Java waiters wait: `lock` (Redisson then dates its queue
/// entries and, when it acquires, lowers every other entry's deadline by its
/// `fairLockWaitTimeout`) or `trylock ... WAIT` (by WAIT instead).
async fn queue_j_r_j_r(server: &RedisServer, java: &JavaPeer, name: &str, java_wait: &str) -> FairQueue {
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client_with(&server.url(), WATCHDOG).await);
    }
    let holder = clients[0].fair_lock(name).lock().await.expect("lock");
    let queued = |n: i64| {
        let queue = &queue;
        async move { wait_until(WITHIN, || raw(server, &["LLEN", queue]).as_int() == Some(n)).await }
    };
    let spawn_rust = |client: &leasehold::Client| {
        let lock = client.fair_lock(name);
        tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60)).await.expect("wait").expect("acquired") })
    };
    java.send("j1", java_wait).await;
    assert!(queued(1).await, "j1 queued");
    let r1 = spawn_rust(&clients[1]);
    assert!(queued(2).await, "r1 queued");
    java.send("j2", java_wait).await;
    assert!(queued(3).await, "j2 queued");
    let r2 = spawn_rust(&clients[2]);
    assert!(queued(4).await, "r2 queued");
    holder.unlock().await.expect("unlock");
    assert_eq!(java.reply_within("j1", WITHIN).await.expect("j1 first"), Ok(java_wait_ok(java_wait)));
    assert!(!r1.is_finished() && !r2.is_finished() && !java.has_reply("j2"));
    FairQueue { _clients: clients, r1, r2, queue }
}

struct FairQueue {
    _clients: Vec<leasehold::Client>,
    r1: tokio::task::JoinHandle<leasehold::LockGuard>,
    r2: tokio::task::JoinHandle<leasehold::LockGuard>,
    queue: String,
}

fn java_wait_ok(java_wait: &str) -> String {
    if java_wait.starts_with("trylock") {
        "true".to_owned()
    } else {
        String::new()
    }
}

/// Waiters queued Java, Rust, Java, Rust are served in that order, when Redisson's
/// `fairLockWaitTimeout` (the amount its acquire takes off every queued deadline) is
/// shorter than leasehold's queue keep-alive (10 s): see the next test for the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_serves_waiters_in_arrival_order_across_languages() {
    let server = RedisServer::start();
    let Some(java) = JavaPeer::start() else { return };
    java.connect(&format!("single {} fairwait=1000", server.url())).await;
    let name = "rj:fair";
    let q = queue_j_r_j_r(&server, &java, name, &format!("lock fair {name}")).await;
    java.ok("j1", &format!("unlock fair {name}")).await;
    let g1 = timeout(WITHIN, q.r1).await.expect("r1 second").expect("task");
    assert!(!q.r2.is_finished() && !java.has_reply("j2"), "r1 second");
    g1.unlock().await.expect("unlock");
    assert_eq!(java.reply_within("j2", WITHIN).await, Some(Ok(String::new())), "j2 third");
    assert!(!q.r2.is_finished());
    java.ok("j2", &format!("unlock fair {name}")).await;
    let g2 = timeout(WITHIN, q.r2).await.expect("r2 fourth").expect("task");
    g2.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["LLEN", &q.queue]).as_int(), Some(0));
}

/// Redisson's own defaults (a `tryLock` wait of 60 s, or `fairLockWaitTimeout` 5 min):
/// when J1 acquires, Redisson lowers every queued deadline by that much, so the leasehold
/// entries behind it look expired and are purged; J2 is served before R1, and the
/// leasehold waiters queue again at the back and are served after (they lose their place,
/// never their wait). docs/comparison.md, "Fair lock".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_long_waits_push_leasehold_fair_waiters_back_but_never_strand_them() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let name = "rj:fair-default";
    let q = queue_j_r_j_r(&server, &java, name, &format!("trylock fair {name} 60000")).await;
    java.ok("j1", &format!("unlock fair {name}")).await;
    assert_eq!(java.reply_within("j2", WITHIN).await, Some(Ok("true".to_owned())), "J2 before R1");
    assert!(!q.r1.is_finished() && !q.r2.is_finished());
    java.ok("j2", &format!("unlock fair {name}")).await;
    let (g1, g2) = (timeout(WITHIN, q.r1), timeout(WITHIN, q.r2));
    let g1 = g1.await.expect("r1 served after all").expect("task");
    g1.unlock().await.expect("unlock");
    let g2 = g2.await.expect("r2 served after all").expect("task");
    g2.unlock().await.expect("unlock");
}

/// A Java waiter killed in the queue (SIGKILL: no clean-up) holds the leasehold waiter
/// behind it no longer than its deadline in Redisson's timeout set (the lock's TTL when
/// it queued + `fairLockWaitTimeout`, here 2 s + 2 s) plus one refresh of the leasehold
/// waiter (a third of its 10 s keep-alive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_java_fair_waiter_does_not_hold_rust_waiters_beyond_its_timeout() {
    let server = RedisServer::start();
    let Some(mut java) = JavaPeer::start() else { return };
    java.connect(&format!("single {} fairwait=2000", server.url())).await;
    let name = "rj:fair-killed";
    let queue = "redisson_lock_queue:{rj:fair-killed}";
    let holder_client = client_with(&server.url(), Duration::from_secs(2)).await;
    let waiter_client = client_with(&server.url(), WATCHDOG).await;
    let holder = holder_client.fair_lock(name).lock().await.expect("lock");
    java.send("j", &format!("lock fair {name}")).await;
    assert!(wait_until(WITHIN, || raw(&server, &["LLEN", queue]).as_int() == Some(1)).await, "java queued");
    let java_id = java.ok("o", "id").await;
    let java_entry = raw(&server, &["LINDEX", queue, "0"]).as_str().expect("head").to_owned();
    assert!(java_entry.starts_with(&java_id), "the head is Java's: {java_entry}");
    let deadline: i64 = raw(&server, &["ZSCORE", "redisson_lock_timeout:{rj:fair-killed}", &java_entry])
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("the Java waiter's deadline");
    let waiter = tokio::spawn({
        let lock = waiter_client.fair_lock(name);
        async move { lock.try_lock_for(Duration::from_secs(60)).await.expect("wait") }
    });
    assert!(wait_until(WITHIN, || raw(&server, &["LLEN", queue]).as_int() == Some(2)).await, "rust queued");
    java.kill().await;
    holder.unlock().await.expect("unlock");
    let guard = timeout(Duration::from_secs(20), waiter).await.expect("not held by the dead waiter").expect("task");
    let guard = guard.expect("acquired");
    let now_ms = server_time_ms(&server);
    let late = now_ms - deadline;
    assert!(late < 3_334 + 1_500, "held {late} ms past the dead waiter's deadline");
    guard.unlock().await.expect("unlock");
}

fn server_time_ms(server: &RedisServer) -> i64 {
    match raw(server, &["TIME"]) {
        RespValue::Array(parts) => {
            let secs: i64 = parts[0].as_str().and_then(|s| s.parse().ok()).expect("secs");
            let micros: i64 = parts[1].as_str().and_then(|s| s.parse().ok()).expect("micros");
            secs * 1000 + micros / 1000
        }
        other => panic!("TIME: {other:?}"),
    }
}

// -------------------------------------------------------- RFencedLock and FencedLock

/// Tokens strictly increase across both clients, re-entries included (Redisson
/// increments on every acquire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_strictly_increase_across_both() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let lock = client.fenced_lock("rj:fenced");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        tokens.push(java.ok_int("j", "lock fenced rj:fenced").await);
        tokens.push(java.ok_int("j", "lock fenced rj:fenced").await);
        assert_eq!(java.ok_int("j", "token rj:fenced").await, *tokens.last().expect("token"));
        assert!(lock.try_lock().await.expect("try_lock").is_none());
        java.ok("j", "unlock fenced rj:fenced").await;
        java.ok("j", "unlock fenced rj:fenced").await;
        let guard = lock.lock().await.expect("lock");
        tokens.push(i64::try_from(guard.token()).expect("token"));
        assert_eq!(java.ok("j", "trylock fenced rj:fenced 0").await, "null", "leasehold holds it");
        guard.unlock().await.expect("unlock");
        let token = java.ok("j", "trylock fenced rj:fenced 1000").await;
        tokens.push(token.parse().expect("a token"));
        java.ok("j", "unlock fenced rj:fenced").await;
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "strictly increasing: {tokens:?}");
}

/// Redisson 4.7.0's `tryLockAndGetToken()` (no arguments: "one attempt", by its name and
/// javadoc) waits until the lock is free: it passes waitTime -1, which its wait loop reads
/// as "wait forever". Recorded in docs/comparison.md; the peer's `trylock fenced NAME 0`
/// is the one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_argumentless_try_lock_and_get_token_waits_for_the_lock() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let guard = client.fenced_lock("rj:fenced-try").lock().await.expect("lock");
    java.send("j", "trylock fenced rj:fenced-try -1").await;
    assert!(java.reply_within("j", Duration::from_secs(1)).await.is_none(), "Redisson waits");
    let token = guard.token();
    guard.unlock().await.expect("unlock");
    let reply = java.reply_within("j", WITHIN).await.expect("acquired once free").expect("ok");
    assert!(reply.parse::<u64>().expect("a token") > token);
    java.ok("j", "unlock fenced rj:fenced-try").await;
}

// ---------------------------------------------------- RCountDownLatch and CountDownLatch

/// Either side's count-down opens the other side's wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn either_sides_count_down_opens_the_others_wait() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let latch = client.count_down_latch("rj:latch").with_recheck(Duration::from_secs(120));

    assert!(java.ok_bool("j", "latch.set rj:latch 2").await);
    assert_eq!(latch.count().await.expect("count"), 2);
    let waiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.try_wait_for(Duration::from_secs(60)).await.expect("wait") }
    });
    assert!(wait_until(WITHIN, || client.stats().waiters >= 1).await);
    java.ok("j", "latch.down rj:latch").await;
    assert_eq!(latch.count().await.expect("count"), 1);
    assert!(!waiter.is_finished());
    let opened = Instant::now();
    java.ok("j", "latch.down rj:latch").await;
    assert!(timeout(WITHIN, waiter).await.expect("in time").expect("task"), "opened");
    assert!(opened.elapsed() < WAKE, "by Redisson's message: {:?}", opened.elapsed());

    assert!(latch.try_set_count(2).await.expect("set"));
    assert_eq!(java.ok_int("j", "latch.count rj:latch").await, 2);
    java.send("w", "latch.await rj:latch 60000").await;
    java_waiting(&java, &server, "w", "redisson_countdownlatch__channel__{rj:latch}").await;
    latch.count_down().await.expect("down");
    assert!(java.reply_within("w", Duration::from_millis(300)).await.is_none(), "not open at 1");
    let opened = Instant::now();
    latch.count_down().await.expect("down");
    assert_eq!(java.reply_within("w", WITHIN).await, Some(Ok("true".to_owned())));
    assert!(opened.elapsed() < WAKE, "by leasehold's message: {:?}", opened.elapsed());
}
