//! leasehold against the real Redisson 4.7.0 client (issue 28): a Java peer
//! (`interop/redisson`, driven through `leasehold_test_support::redisson_java::JavaPeer`)
//! and leasehold share each kind by name, both ways, on a standalone server and, for
//! `RLock`, on the local cluster. One Java process per test; its handles are Java
//! threads (Redisson's lock owners). Waits are bounded by deadlines; wake-ups are timed
//! against bounds far below any TTL or poll, so only a pub/sub message can meet them.

use std::time::Duration;

use leasehold_test_support::redisson_java::JavaPeer;
use leasehold_test_support::{client_with, raw, raw_command, wait_until, RedisCluster, RedisServer, RespValue};
use tokio::time::{timeout, Instant};

/// Generous bound for anything that must happen "soon".
const WITHIN: Duration = Duration::from_secs(10);
/// A wake-up by message: a few round trips plus a loaded CI machine; far below the
/// 30 s lease (watchdog default) that a missed message would wait for.
const WAKE: Duration = Duration::from_secs(2);
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

/// A once-per-tick job's kept lock (`unlock_after`, issue 31): the real Redisson client
/// sees it held (`isLocked`, `remainTimeToLive` no longer than the time left) until the
/// minimum hold is over, and a Redisson `tryLock` waiting on it, told the shorter TTL by
/// the unlock message, takes it then: not before, and not much after (the holder's lease
/// was 30 s, and its wait is 10 s: without the message it would time out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_lock_is_held_for_redisson_until_the_min_hold_then_its_waiter_takes_it() {
    const MIN_HOLD: Duration = Duration::from_millis(1500);
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let lock = client.lock("rj:kept");
    let before = Instant::now();
    let guard = lock.lock().await.expect("lock");
    java.send("w", "trylock lock rj:kept 10000").await;
    java_waiting(&java, &server, "w", "redisson_lock__channel:{rj:kept}").await;

    guard.unlock_after(MIN_HOLD).await.expect("unlock_after");
    let released = Instant::now();
    assert!(java.ok_bool("r", "islocked lock rj:kept").await, "Redisson sees it held");
    let ttl = java.ok_int("r", "ttl lock rj:kept").await;
    assert!((1..=1500).contains(&ttl), "Redisson's remainTimeToLive is the time left: {ttl}");
    assert!(!java.ok_bool("r", "trylock lock rj:kept -1").await, "nor can Redisson take it");

    let reply = java.reply_within("w", WITHIN + WITHIN).await.expect("the waiter answered");
    let got = Instant::now();
    assert_eq!(reply.expect("tryLock").as_str(), "true", "the Redisson waiter took the lock");
    assert!(got >= before + MIN_HOLD, "not before the minimum hold: {:?}", got - before);
    assert!(got <= released + MIN_HOLD + WAKE, "not much after it: {:?}", got - released);
    java.ok("w", "unlock lock rj:kept").await;
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
    let Some(java) = java_on_cluster(cluster).await else { return };
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
    unlock_wakes_across(&java, &cluster.url(), || cluster_listeners(cluster, name, &channel), name).await;
}

/// Subscribers of `channel` (of the lock `name`, same slot) on the cluster: sharded on
/// the slot's primary plus classic on every node.
fn cluster_listeners(cluster: &RedisCluster, name: &str, channel: &str) -> i64 {
    let count = |reply: RespValue| match reply {
        RespValue::Array(items) => items.get(1).and_then(RespValue::as_int).unwrap_or(0),
        _ => 0,
    };
    let shard = count(cluster.on(&cluster.primary_for(name), &["PUBSUB", "SHARDNUMSUB", channel]));
    let classic: i64 = cluster.addrs().iter().map(|n| count(cluster.on(n, &["PUBSUB", "NUMSUB", channel]))).sum();
    shard + classic
}

async fn java_on_cluster(cluster: &RedisCluster) -> Option<JavaPeer> {
    let nodes: Vec<String> = cluster.addrs().iter().map(|a| format!("redis://{a}")).collect();
    JavaPeer::cluster(&nodes, WATCHDOG).await
}

/// On the cluster: a Java reader and a leasehold reader share; Java's read release wakes
/// a leasehold writer and leasehold's write release a Java reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_on_the_cluster() {
    let cluster = RedisCluster::shared();
    let Some(java) = java_on_cluster(cluster).await else { return };
    let (a, b) = (client_with(&cluster.url(), WATCHDOG).await, client_with(&cluster.url(), WATCHDOG).await);
    let name = "rjc:rw";
    java.ok("jr", &format!("lock read {name}")).await;
    let read = a.read_write_lock(name).try_read().await.expect("try_read").expect("readers share");
    let writer = tokio::spawn({
        let rw = b.read_write_lock(name);
        async move { rw.try_write_for(Duration::from_secs(60)).await.expect("wait").expect("written") }
    });
    assert!(wait_until(WITHIN, || b.stats().waiters >= 1).await);
    read.unlock().await.expect("unlock");
    let released = Instant::now();
    java.ok("jr", &format!("unlock read {name}")).await;
    let write = timeout(WITHIN, writer).await.expect("in time").expect("task");
    assert!(released.elapsed() < WAKE, "woken by Redisson's read release: {:?}", released.elapsed());
    java.send("jr", &format!("trylock read {name} 60000")).await;
    assert!(java.wait_begin("jr", WITHIN).await);
    let channel = format!("redisson_rwlock:{{{name}}}");
    assert!(wait_until(WITHIN, || cluster_listeners(cluster, name, &channel) >= 1).await, "Redisson subscribed");
    let released = Instant::now();
    write.unlock().await.expect("unlock");
    assert_eq!(java.reply_within("jr", WITHIN).await, Some(Ok("true".to_owned())));
    assert!(released.elapsed() < WAKE, "Redisson woken by leasehold's write release: {:?}", released.elapsed());
    java.ok("jr", &format!("unlock read {name}")).await;
}

/// On the cluster: semaphore counts exact across both, each side's release wakes the
/// other side's waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_on_the_cluster() {
    let cluster = RedisCluster::shared();
    let Some(java) = java_on_cluster(cluster).await else { return };
    let client = client_with(&cluster.url(), WATCHDOG).await;
    let name = "rjc:sem";
    let sem = client.semaphore(name);
    assert!(java.ok_bool("j", &format!("sem.set {name} 2")).await);
    let two = sem.acquire(2).await.expect("acquire");
    assert_eq!(java.ok_int("j", &format!("sem.available {name}")).await, 0);
    java.send("w", &format!("sem.try {name} 1 60000")).await;
    assert!(java.wait_begin("w", WITHIN).await);
    let channel = format!("redisson_sc:{{{name}}}");
    assert!(wait_until(WITHIN, || cluster_listeners(cluster, name, &channel) >= 1).await, "Redisson subscribed");
    let released = Instant::now();
    two.release().await.expect("release");
    assert_eq!(java.reply_within("w", WITHIN).await, Some(Ok("true".to_owned())));
    assert!(released.elapsed() < WAKE, "Redisson woken by leasehold's release: {:?}", released.elapsed());
    java.ok("j", &format!("sem.acquire {name} 1")).await;
    let waiter = tokio::spawn({
        let sem = client.semaphore(name);
        async move { sem.try_acquire_for(2, Duration::from_secs(60)).await.expect("wait").expect("acquired") }
    });
    assert!(wait_until(WITHIN, || client.stats().waiters >= 1).await);
    let released = Instant::now();
    java.ok("j", &format!("sem.release {name} 2")).await;
    let permit = timeout(WITHIN, waiter).await.expect("in time").expect("task");
    assert!(released.elapsed() < WAKE, "woken by Redisson's release: {:?}", released.elapsed());
    permit.release().await.expect("release");
    assert_eq!(java.ok_int("j", &format!("sem.available {name}")).await, 2, "exact");
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
    // Each hand-off is a message to the head's own channel: far sooner than leasehold's
    // refresh (a third of its 10 s keep-alive) or the 30 s leases.
    let released = Instant::now();
    java.ok("j1", &format!("unlock fair {name}")).await;
    let g1 = timeout(WITHIN, q.r1).await.expect("r1 second").expect("task");
    assert!(released.elapsed() < WAKE, "r1 woken by Redisson's fair unlock: {:?}", released.elapsed());
    assert!(!q.r2.is_finished() && !java.has_reply("j2"), "r1 second");
    let released = Instant::now();
    g1.unlock().await.expect("unlock");
    assert_eq!(java.reply_within("j2", WITHIN).await, Some(Ok(String::new())), "j2 third");
    assert!(released.elapsed() < WAKE, "j2 woken by leasehold's fair unlock: {:?}", released.elapsed());
    assert!(!q.r2.is_finished());
    let released = Instant::now();
    java.ok("j2", &format!("unlock fair {name}")).await;
    let g2 = timeout(WITHIN, q.r2).await.expect("r2 fourth").expect("task");
    assert!(released.elapsed() < WAKE, "r2 woken by Redisson's fair unlock: {:?}", released.elapsed());
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
    assert!(late < 3_334 + 2_000, "held {late} ms past the dead waiter's deadline");
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

// ------------------------------------------------ RReadWriteLock and ReadWriteLock

/// Readers share across languages, writers exclude, and each side's release wakes the
/// other side's waiter: a Java read release wakes a leasehold writer, a leasehold write
/// release wakes a Java reader, a leasehold read release wakes a Java writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_readers_share_writers_exclude_releases_wake_across() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let (a, b) = (client_with(&server.url(), WATCHDOG).await, client_with(&server.url(), WATCHDOG).await);
    let name = "rj:rw";
    let rw = a.read_write_lock(name);

    java.ok("jr", &format!("lock read {name}")).await;
    let read = rw.try_read().await.expect("try_read").expect("readers share");
    assert_eq!(raw(&server, &["HGET", name, "mode"]).as_str(), Some("read"));
    assert!(
        b.read_write_lock(name).try_write().await.expect("try_write").is_none(),
        "readers exclude a leasehold writer"
    );
    assert!(!java.ok_bool("jw", &format!("trylock write {name} 0")).await, "readers exclude a Java writer");
    let writer = tokio::spawn({
        let rw = b.read_write_lock(name);
        async move { rw.try_write_for(Duration::from_secs(60)).await.expect("wait").expect("written") }
    });
    assert!(wait_until(WITHIN, || b.stats().waiters >= 1).await);
    read.unlock().await.expect("unlock");
    assert!(!writer.is_finished(), "Java still reads");
    let released = Instant::now();
    java.ok("jr", &format!("unlock read {name}")).await;
    let write = timeout(WITHIN, writer).await.expect("in time").expect("task");
    assert!(released.elapsed() < WAKE, "woken by Redisson's read release: {:?}", released.elapsed());

    // leasehold writes; a Java reader waits and is woken by the write release.
    assert!(!java.ok_bool("jr", &format!("trylock read {name} 0")).await, "the writer excludes Java readers");
    java.send("jr", &format!("trylock read {name} 60000")).await;
    java_waiting(&java, &server, "jr", &format!("redisson_rwlock:{{{name}}}")).await;
    let released = Instant::now();
    write.unlock().await.expect("unlock");
    assert_eq!(java.reply_within("jr", WITHIN).await, Some(Ok("true".to_owned())));
    assert!(released.elapsed() < WAKE, "Redisson woken by leasehold's write release: {:?}", released.elapsed());

    // Java reads, leasehold reads too; a Java writer waits and is woken when the last
    // reader (leasehold's) leaves.
    let read = rw.read().await.expect("read");
    java.ok("jr", &format!("unlock read {name}")).await;
    java.send("jw", &format!("trylock write {name} 60000")).await;
    assert!(java.wait_begin("jw", WITHIN).await);
    assert!(java.reply_within("jw", Duration::from_millis(300)).await.is_none(), "leasehold still reads");
    let released = Instant::now();
    read.unlock().await.expect("unlock");
    assert_eq!(java.reply_within("jw", WITHIN).await, Some(Ok("true".to_owned())));
    assert!(released.elapsed() < WAKE, "Redisson's writer woken by leasehold's read release: {:?}", released.elapsed());
    assert!(rw.try_read().await.expect("try_read").is_none(), "Java writes");
    java.ok("jw", &format!("unlock write {name}")).await;
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0));
}

/// What a Java reader does against leasehold's phases (docs/architecture/read-write-lock.md,
/// "What a Java (Redisson) reader or writer does against it"): Redisson's read acquire
/// knows no queue, so a Java reader passes a waiting leasehold writer (a leasehold reader
/// that comes then waits behind it), and the writer waits for the Java read too. Behind a
/// leasehold write, a registered leasehold reader is granted by the release and the Java
/// reader, never granted, gets in on the release's `1`: both read together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_reader_passes_a_waiting_leasehold_writer_and_joins_a_granted_phase() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let (a, b) = (client_with(&server.url(), WATCHDOG).await, client_with(&server.url(), WATCHDOG).await);
    let name = "rj:phases";
    let read = a.read_write_lock(name).read().await.expect("read");
    let writer = tokio::spawn({
        let rw = b.read_write_lock(name);
        async move { rw.try_write_for(Duration::from_secs(60)).await.expect("wait").expect("written") }
    });
    let writers = format!("leasehold_rwlock_writers:{{{name}}}");
    assert!(wait_until(WITHIN, || raw(&server, &["ZCARD", &writers]).as_int() == Some(1)).await, "writer waits");
    assert!(a.read_write_lock(name).try_read().await.expect("try_read").is_none(), "a leasehold reader waits");
    assert!(java.ok_bool("jr", &format!("trylock read {name} 0")).await, "a Java reader passes the waiting writer");
    read.unlock().await.expect("unlock");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the leasehold writer waits for the Java read too");
    let released = Instant::now();
    java.ok("jr", &format!("unlock read {name}")).await;
    let write = timeout(WITHIN, writer).await.expect("in time").expect("task");
    assert!(released.elapsed() < WAKE, "woken by Redisson's read release: {:?}", released.elapsed());

    // Behind the leasehold write: a leasehold reader (registered) and a Java reader.
    let reader = tokio::spawn({
        let rw = a.read_write_lock(name);
        async move { rw.try_read_for(Duration::from_secs(60)).await.expect("wait").expect("read") }
    });
    let readers = format!("leasehold_rwlock_readers:{{{name}}}");
    assert!(wait_until(WITHIN, || raw(&server, &["HLEN", &readers]).as_int() == Some(1)).await, "registered");
    java.send("jr", &format!("trylock read {name} 60000")).await;
    java_waiting(&java, &server, "jr", &format!("redisson_rwlock:{{{name}}}")).await;
    let released = Instant::now();
    write.unlock().await.expect("unlock");
    let leasehold_read = timeout(WITHIN, reader).await.expect("granted").expect("task");
    assert_eq!(java.reply_within("jr", WITHIN).await, Some(Ok("true".to_owned())), "the Java reader is in");
    assert!(released.elapsed() < WAKE, "both in at the release: {:?}", released.elapsed());
    assert_eq!(raw(&server, &["HGET", name, "mode"]).as_str(), Some("read"));
    leasehold_read.unlock().await.expect("unlock");
    java.ok("jr", &format!("unlock read {name}")).await;
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0));
}

/// Each side's watchdog renews only its own read holds: with both watchdogs at 2 s, both
/// read holds outlive 2.5 leases; once Java is killed (`SIGKILL`) its hold's timeout key expires
/// within its lease while leasehold's stays renewed, and after leasehold's read release
/// a writer gets in (the dead Java reader holds nobody out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sides_watchdog_renews_only_its_own_read_holds() {
    let server = RedisServer::start();
    let Some(mut java) = JavaPeer::single(&server.url(), Duration::from_secs(2)).await else { return };
    let client = client_with(&server.url(), Duration::from_secs(2)).await;
    let name = "rj:rw-renew";
    let rw = client.read_write_lock(name);
    java.ok("jr", &format!("lock read {name}")).await;
    let java_owner = java.owner("jr").await;
    let read = rw.read().await.expect("read");
    let java_timeout = format!("{{{name}}}:{java_owner}:rwlock_timeout:1");
    let rust_timeout = format!("{{{name}}}:{}:rwlock_timeout:1", rw.owner());
    let pttl = |key: &str| raw(&server, &["PTTL", key]).as_int().expect("pttl");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(pttl(&java_timeout) > 0 && pttl(&rust_timeout) > 0, "both renewed");
    assert!(!read.is_lost());
    java.kill().await;
    assert!(wait_until(Duration::from_secs(2) + WAKE, || pttl(&java_timeout) == -2).await, "Java's hold expires");
    assert!(pttl(&rust_timeout) > 0, "leasehold's stays renewed");
    assert!(!read.is_lost());
    let writer = client.read_write_lock(name);
    assert!(writer.try_write().await.expect("try_write").is_none(), "leasehold still reads");
    read.unlock().await.expect("unlock");
    let write = writer.try_write_for(WITHIN).await.expect("try_write_for").expect("no live reader left");
    write.unlock().await.expect("unlock");
}

// ------------------------------------- RSemaphore, RPermitExpirableSemaphore and theirs

/// Counts exact across both, and each side's release wakes the other side's waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_counts_are_exact_and_releases_wake_across() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let name = "rj:sem";
    let sem = client.semaphore(name);
    assert!(java.ok_bool("j", &format!("sem.set {name} 5")).await);
    assert!(!sem.try_set_permits(9).await.expect("set"), "already set by Java");
    let two = sem.acquire(2).await.expect("acquire");
    assert_eq!(java.ok_int("j", &format!("sem.available {name}")).await, 3);
    java.ok("j", &format!("sem.acquire {name} 3")).await;
    assert_eq!(sem.available_permits().await.expect("available"), 0);
    assert!(sem.try_acquire(1).await.expect("try").is_none());

    let waiter = tokio::spawn({
        let sem = client.semaphore(name);
        async move { sem.try_acquire_for(2, Duration::from_secs(60)).await.expect("wait").expect("acquired") }
    });
    assert!(wait_until(WITHIN, || client.stats().waiters >= 1).await);
    java.ok("j", &format!("sem.release {name} 1")).await;
    assert!(!waiter.is_finished(), "one permit is not two");
    let released = Instant::now();
    java.ok("j", &format!("sem.release {name} 1")).await;
    let two_more = timeout(WITHIN, waiter).await.expect("in time").expect("task");
    assert!(released.elapsed() < WAKE, "woken by Redisson's release: {:?}", released.elapsed());
    assert_eq!(java.ok_int("j", &format!("sem.available {name}")).await, 0);

    java.send("w", &format!("sem.try {name} 3 60000")).await;
    java_waiting(&java, &server, "w", &format!("redisson_sc:{{{name}}}")).await;
    two.release().await.expect("release");
    assert!(java.reply_within("w", Duration::from_millis(300)).await.is_none(), "two permits are not three");
    let released = Instant::now();
    two_more.release().await.expect("release");
    assert_eq!(java.reply_within("w", WITHIN).await, Some(Ok("true".to_owned())));
    assert!(released.elapsed() < WAKE, "Redisson woken by leasehold's release: {:?}", released.elapsed());
    assert_eq!(sem.available_permits().await.expect("available"), 1);
    java.ok("j", &format!("sem.release {name} 4")).await;
    assert_eq!(sem.available_permits().await.expect("available"), 5, "exact after every move");
}

/// The semaphore's wait queue (issue 29 item 4) with a real Redisson waiter: a
/// leasehold release with a leasehold waiter queued grants it the permit (the Java
/// waiter woken by the count finds none and waits on); a leasehold release with nobody
/// queued lets the Java waiter in; a Java release wakes the queued leasehold head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_queue_with_a_java_waiter() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let name = "rj:semq";
    let channel = format!("redisson_sc:{{{name}}}");
    let sem = client.semaphore(name);
    assert!(sem.try_set_permits(1).await.expect("set"));
    let held = sem.acquire(1).await.expect("free");
    java.send("w", &format!("sem.try {name} 1 60000")).await;
    java_waiting(&java, &server, "w", &channel).await;
    let waiter = tokio::spawn({
        let sem = client.semaphore(name);
        async move { sem.acquire(1).await.expect("acquire") }
    });
    let queue = format!("leasehold_sem_queue:{{{name}}}");
    let zcard = |key: &str| leasehold_test_support::raw(&server, &["ZCARD", key]).as_int().unwrap_or(-1);
    assert!(wait_until(WITHIN, || zcard(&queue) == 1).await, "the leasehold waiter queued");
    assert!(wait_until(WITHIN, || numsub(&server, &channel) >= 2).await, "both sides listen");
    held.release().await.expect("release");
    let permit = timeout(WITHIN, waiter).await.expect("the queued waiter is granted").expect("task");
    assert!(java.reply_within("w", Duration::from_millis(300)).await.is_none(), "Java found nothing left");
    let released = Instant::now();
    permit.release().await.expect("release");
    assert_eq!(java.reply_within("w", WITHIN).await, Some(Ok("true".to_owned())), "nobody queued: Java gets in");
    assert!(released.elapsed() < WAKE, "Redisson woken by leasehold's release: {:?}", released.elapsed());
    let waiter = tokio::spawn({
        let sem = client.semaphore(name);
        async move { sem.acquire(1).await.expect("acquire") }
    });
    assert!(wait_until(WITHIN, || zcard(&queue) == 1).await, "queued again");
    let released = Instant::now();
    java.ok("j", &format!("sem.release {name} 1")).await;
    let permit = timeout(WITHIN, waiter).await.expect("woken by the Java release").expect("task");
    assert!(released.elapsed() < WAKE, "the head woken by Redisson's count: {:?}", released.elapsed());
    permit.release().await.expect("release");
    assert_eq!(java.ok_int("j", &format!("sem.available {name}")).await, 1, "exact");
}

/// Permit ids are listed and released across: each side releases the other's permit
/// by id, counts stay exact, and each side's release wakes the other side's waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_expirable_semaphore_ids_are_released_across_and_releases_wake() {
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let name = "rj:pes";
    let pes = client.permit_expirable_semaphore(name);
    assert!(java.ok_bool("j", &format!("pes.set {name} 2")).await);
    let java_id = java.ok("j", &format!("pes.acquire {name} 60000")).await;
    let permit = pes.acquire_with_lease(Duration::from_secs(60)).await.expect("acquire");
    // Both ids are listed in Redisson's timeout set (members: the id's 16 bytes, which
    // both clients print as 32 hex digits).
    assert_eq!(raw(&server, &["ZCARD", pes.timeout_key()]).as_int(), Some(2));
    for id in [java_id.as_str(), permit.id()] {
        let member = unhex(id);
        let score = raw_command(&server.addr(), &[b"ZSCORE", pes.timeout_key().as_bytes(), &member]);
        assert!(score.as_str().is_some(), "permit {id} listed");
    }
    assert_eq!(java.ok_int("j", &format!("pes.available {name}")).await, 0);
    assert_eq!(pes.available_permits().await.expect("available"), 0);
    assert_eq!(java.ok("j", &format!("pes.try {name} 0 1000")).await, "null");

    assert!(pes.try_release(&java_id).await.expect("release Java's"), "leasehold releases Java's permit by id");
    assert_eq!(java.ok_int("j", &format!("pes.available {name}")).await, 1);
    assert!(!java.ok_bool("j", &format!("pes.tryrelease {name} {java_id}")).await, "released once");
    assert!(java.ok_bool("j", &format!("pes.tryrelease {name} {}", permit.id())).await, "Java releases leasehold's");
    assert_eq!(pes.available_permits().await.expect("available"), 2);
    drop(permit);

    // Both taken by Java; a leasehold waiter is woken by Java's release.
    let first = java.ok("j", &format!("pes.acquire {name} -1")).await;
    let second = java.ok("j", &format!("pes.acquire {name} -1")).await;
    let waiter = tokio::spawn({
        let pes = client.permit_expirable_semaphore(name);
        async move { pes.try_acquire_for(Duration::from_secs(60)).await.expect("wait").expect("acquired") }
    });
    assert!(wait_until(WITHIN, || client.stats().waiters >= 1).await);
    let released = Instant::now();
    java.ok("j", &format!("pes.release {name} {first}")).await;
    let mine = timeout(WITHIN, waiter).await.expect("in time").expect("task");
    assert!(released.elapsed() < WAKE, "woken by Redisson's release: {:?}", released.elapsed());
    // A Java waiter is woken by leasehold's release.
    java.send("w", &format!("pes.try {name} 60000 60000")).await;
    java_waiting(&java, &server, "w", pes.channel()).await;
    let released = Instant::now();
    mine.release().await.expect("release");
    let id = java.reply_within("w", WITHIN).await.expect("Java's reply").expect("ok");
    assert_ne!(id, "null");
    assert!(released.elapsed() < WAKE, "Redisson woken by leasehold's release: {:?}", released.elapsed());
    java.ok("j", &format!("pes.release {name} {second}")).await;
    java.ok("j", &format!("pes.release {name} {id}")).await;
    assert_eq!(pes.available_permits().await.expect("available"), 2);
}

fn unhex(id: &str) -> Vec<u8> {
    assert_eq!(id.len(), 32, "a permit id: {id}");
    (0..id.len()).step_by(2).map(|i| u8::from_str_radix(&id[i..i + 2], 16).expect("hex")).collect()
}

// -------------------------------------------------- RedissonMultiLock and MultiLock

/// Dining philosophers: five forks, philosophers alternating Java and Rust, Java taking
/// its two forks in one order and Rust in the other; every philosopher eats a few times,
/// nobody deadlocks, a Rust philosopher eating holds both forks alone, and no fork is
/// held at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dining_philosophers_mixing_redisson_and_leasehold_multi_locks() {
    const SEATS: usize = 6;
    const MEALS: usize = 5;
    let server = RedisServer::start();
    let java = java_on!(server, WATCHDOG);
    let client = client_with(&server.url(), WATCHDOG).await;
    let fork = |i: usize| format!("rj:fork:{}", i % SEATS);
    let mut rust = Vec::new();
    for seat in (1..SEATS).step_by(2) {
        let multi = client.multi_lock([fork(seat + 1), fork(seat)]);
        let addr = server.addr();
        rust.push(tokio::spawn(async move {
            for _ in 0..MEALS {
                let guard = multi.lock().await.expect("both forks");
                for member in guard.guards() {
                    let holders = raw_command(&addr, &[b"HKEYS", member.key().as_bytes()]);
                    let expected = RespValue::Array(vec![RespValue::Bulk(member.owner().to_owned())]);
                    assert_eq!(holders, expected, "{} is this philosopher's alone", member.key());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.unlock().await.expect("unlock");
            }
        }));
    }
    let java_seats: Vec<usize> = (0..SEATS).step_by(2).collect();
    for &seat in &java_seats {
        for _ in 0..MEALS {
            java.send(&format!("p{seat}"), &format!("multi.lock {},{}", fork(seat), fork(seat + 1))).await;
            java.send(&format!("p{seat}"), &format!("multi.unlock {},{}", fork(seat), fork(seat + 1))).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    for &seat in &java_seats {
        for _ in 0..2 * MEALS {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = java.reply_within(&format!("p{seat}"), left).await.expect("no deadlock");
            assert_eq!(reply, Ok(String::new()), "philosopher {seat}");
        }
    }
    for task in rust {
        timeout(deadline.saturating_duration_since(Instant::now()), task).await.expect("no deadlock").expect("task");
    }
    for i in 0..SEATS {
        assert_eq!(raw(&server, &["EXISTS", &fork(i)]).as_int(), Some(0), "fork {i} free at the end");
    }
}
