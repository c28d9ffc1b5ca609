//! The wait queue of a plain `Lock` (issue 10, part 1): releases hand the lock to the
//! first live waiter across clients and processes, so a newcomer cannot barge in, and
//! the queue lives beside Redisson's `RLock` layout without changing what a Redisson
//! peer sees. (Queue order across processes, dead and departed waiters: `fairlock.rs`,
//! which runs those tests for both lock types.)

use std::time::Duration;

use leasehold::fred::clients::SubscriberClient;
use leasehold::fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface};
use leasehold_test_support::{
    client, hgetall, pubsub_channels, raw, wait_until, HolderProcess, Monitor, RedisServer, RespValue,
};

fn lrange(server: &RedisServer, key: &str) -> Vec<String> {
    match raw(server, &["LRANGE", key, "0", "-1"]) {
        RespValue::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        other => panic!("LRANGE {key}: {other:?}"),
    }
}

/// A `Lock` waiter in its own process (`tests/bin/fair_waiter.rs` with kind `lock`);
/// returns it and its owner once it is queued behind the holder.
async fn queued_lock_waiter(server: &RedisServer, name: &str, queue: &str) -> (HolderProcess, String) {
    let url = server.url();
    let args = [url.as_str(), name, "w", "10000", "100", "lock"];
    let mut child = HolderProcess::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args);
    let line = child.next_line(Duration::from_secs(10)).await.expect("QUEUING line");
    let owner = line.strip_prefix("QUEUING ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_owned();
    assert!(wait_until(Duration::from_secs(10), || lrange(server, queue) == [owner.clone()]).await, "queued");
    (child, owner)
}

/// The release hands the lock to the queued waiter at once: while that waiter (stopped
/// with SIGSTOP, so it cannot claim yet) has not run, the lock is its own, a newcomer's
/// `try_lock` and the releaser's own next `try_lock` both fail, and once it runs again
/// it claims the lock. Without the hand-over, the newcomer would take the free lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_the_queued_waiter_so_no_newcomer_barges_in() {
    let server = RedisServer::start();
    let name = "queue:handover";
    let queue = "leasehold_lock_queue:{queue:handover}";
    let releaser = client(&server).await;
    let lock = releaser.lock(name);
    let guard = lock.lock_with_lease(Duration::from_secs(30)).await.expect("held");
    let (mut waiter, waiter_owner) = queued_lock_waiter(&server, name, queue).await;
    // Its client subscribes right after it queued: only then does a release know that
    // someone waits (before that, the lock is freed and the waiter's catch-up takes it).
    let queue_channel = "leasehold_lock__queue:{queue:handover}".to_owned();
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).contains(&queue_channel)).await);
    waiter.signal("STOP");

    guard.unlock().await.expect("unlock");
    assert_eq!(hgetall(&server, name), vec![(waiter_owner.clone(), "1".to_owned())], "handed to the waiter");
    let ttl = leasehold_test_support::pttl(&server, name);
    assert!(ttl > 0 && ttl <= 10_000, "the hand-over's TTL is cut to the waiter's keep-alive: {ttl}");
    assert!(lrange(&server, queue).is_empty(), "the waiter left the queue with the hand-over");
    let newcomer = client(&server).await;
    assert!(newcomer.lock(name).try_lock().await.expect("try").is_none(), "a newcomer cannot barge in");
    assert!(lock.try_lock().await.expect("try").is_none(), "nor can the releaser take it back");

    waiter.signal("CONT");
    assert_eq!(waiter.next_line(Duration::from_secs(5)).await.as_deref(), Some("LOCKED"), "the waiter claims it");
    assert_eq!(waiter.next_line(Duration::from_secs(5)).await.as_deref(), Some("UNLOCKED"));
    let left = leasehold_test_support::lock_keys(&server);
    assert_eq!(left, ["queue:handover:order"], "nothing left but the waiter's record (and the clients' descriptions)");
}

// Redisson's RLock scripts, transcribed by hand from RedissonLock.java
// (tryLockInnerAsync, and unlockInnerAsync without its unlock latch, which no other
// client reads). KEYS and ARGV as Redisson passes them.
const REDISSON_TRY_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or \
     (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
     redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
     return redis.call('pttl', KEYS[1]);";
const REDISSON_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
     local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
     if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; \
     else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

/// A hand-written Redisson `RLock` peer and leasehold `Lock`s on one name, with the
/// queue in play: a Redisson release wakes the queued leasehold waiter (it hands nothing
/// over), a leasehold release wakes a waiting Redisson peer, and when both wait, the
/// leasehold release hands the lock to the queued leasehold waiter while the Redisson
/// peer, woken too, finds it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_rlock_peer_and_queued_waiters_wake_each_other() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "queue:mixed";
    let channel = "redisson_lock__channel:{queue:mixed}";
    let java = "5a1f2c3d-0000-4000-8000-00000000cafe:7";
    let redisson_try = || raw(&server, &["EVAL", REDISSON_TRY_LOCK, "1", name, "30000", java]);
    let redisson_unlock = || raw(&server, &["EVAL", REDISSON_UNLOCK, "2", name, channel, "0", "30000", java]);

    // The Java side's subscription to the release channel, as Redisson makes it.
    let subscriber: SubscriberClient =
        Builder::from_config(Config::from_url(&server.url()).expect("url")).build_subscriber_client().expect("build");
    subscriber.init().await.expect("connect");
    let mut messages = subscriber.message_rx();
    subscriber.subscribe(channel).await.expect("subscribe");
    subscriber.ping::<()>(None).await.expect("subscribed");

    // Redisson holds; a leasehold waiter queues, and Redisson's unlock wakes it at once
    // (the 30 s TTL and the 10 s keep-alive's refresh are far later).
    assert_eq!(redisson_try(), RespValue::Nil, "Redisson acquires the free lock");
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move {
            let got = client.lock(name).try_lock_for(Duration::from_secs(20)).await;
            (got, tokio::time::Instant::now())
        })
    };
    let queue = "leasehold_lock_queue:{queue:mixed}";
    assert!(wait_until(Duration::from_secs(5), || lrange(&server, queue).len() == 1).await, "leasehold queued");
    let queue_channel = "leasehold_lock__queue:{queue:mixed}".to_owned();
    assert!(
        wait_until(Duration::from_secs(5), || pubsub_channels(&server).contains(&queue_channel)).await,
        "subscribed"
    );
    let released = tokio::time::Instant::now();
    assert_eq!(redisson_unlock().as_int(), Some(1), "Redisson released");
    let (got, at) = waiting.await.expect("task");
    let guard = got.expect("no error").expect("acquired");
    assert!(at - released < Duration::from_secs(2), "woken by Redisson's publish, after {:?}", at - released);
    assert!(lrange(&server, queue).is_empty(), "the waiter left the queue");
    while messages.try_recv().is_ok() {}

    // leasehold holds, Redisson waits: leasehold's release publishes `0` and Redisson
    // then acquires.
    assert!(redisson_try().as_int().is_some_and(|ttl| ttl > 0), "Redisson is excluded");
    guard.unlock().await.expect("unlock");
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await.expect("woken").expect("message");
    assert_eq!((message.channel.to_string(), message.value.as_string()), (channel.to_owned(), Some("0".to_owned())));
    assert_eq!(redisson_try(), RespValue::Nil, "the woken Redisson peer acquires");

    // Both wait behind a leasehold holder: Redisson hears the `0`, but the lock went to
    // the queued leasehold waiter.
    assert_eq!(redisson_unlock().as_int(), Some(1));
    let holder = client.lock(name).lock().await.expect("leasehold holds");
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { client.lock(name).try_lock_for(Duration::from_secs(20)).await })
    };
    assert!(wait_until(Duration::from_secs(5), || lrange(&server, queue).len() == 1).await, "leasehold queued");
    let queued = lrange(&server, queue).remove(0);
    assert!(redisson_try().as_int().is_some_and(|ttl| ttl > 0), "Redisson waits too");
    while messages.try_recv().is_ok() {}
    holder.unlock().await.expect("unlock");
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await.expect("woken").expect("message");
    assert_eq!(message.value.as_string(), Some("0".to_owned()), "Redisson is woken");
    assert!(redisson_try().as_int().is_some_and(|ttl| ttl > 0), "but the lock was handed to the queued waiter");
    let guard = waiting.await.expect("task").expect("no error").expect("acquired");
    assert_eq!(guard.owner(), queued);
    guard.unlock().await.expect("unlock");
    assert_eq!(redisson_try(), RespValue::Nil, "and Redisson gets it after that");
    assert_eq!(redisson_unlock().as_int(), Some(1));
    assert_eq!(leasehold_test_support::lock_keys(&server), Vec::<String>::new(), "nothing left behind");
    let _ = subscriber.quit().await;
}

/// A client whose releases publish only when a leasehold waiter flagged the holder.
async fn lean_client(server: &RedisServer) -> leasehold::Client {
    leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(2))
        .redisson_waiters(false)
        .connect()
        .await
        .expect("connect")
}

/// The `PUBLISH` commands the scripts ran on `channel` (`[0 lua] "publish" "CHANNEL" …`).
fn publishes_on(monitor: &Monitor, channel: &str) -> usize {
    let needle = format!("\"publish\" \"{channel}\"");
    monitor.commands().iter().filter(|line| line.contains(&needle)).count()
}

/// The waiter flag (`redisson_waiters(false)`): a release nobody waits for is one `HDEL`
/// (no `PUBLISH`, nothing left behind); a waiting `Lock` of another (default) client
/// flags the holder, so the release still hands the lock over at once; with a second
/// waiter queued, the new owner is flagged by the hand-over and its own release wakes
/// that waiter too; a `FencedLock` waiter (queued the same way) flags the holder as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lean_release_publishes_only_for_flagged_waiters_and_wakes_every_kind() {
    let server = RedisServer::start();
    let lean = lean_client(&server).await;
    let other = client(&server).await;
    let monitor = Monitor::start(&server.addr());

    // Nobody waits: the release is the HDEL alone.
    let guard = lean.lock("lean:alone").try_lock().await.expect("try").expect("free");
    guard.unlock().await.expect("unlock");
    monitor.sync(&server.addr());
    assert_eq!(raw(&server, &["EXISTS", "lean:alone"]).as_int(), Some(0));
    assert_eq!(publishes_on(&monitor, "redisson_lock__channel:{lean:alone}"), 0, "no PUBLISH without waiters");
    let evals = monitor.commands().iter().filter(|l| l.contains("\"hdel\" \"lean:alone\"")).count();
    assert_eq!(evals, 1, "the release removed the owner (and its flag) in one HDEL");

    // A holder, then two queued waiters: one on the other (default) client, one lean.
    let name = "lean:queue";
    let queue = "leasehold_lock_queue:{lean:queue}";
    let holder_lock = lean.lock(name);
    let holder = holder_lock.lock_with_lease(Duration::from_secs(30)).await.expect("held");
    let flag = format!("{}:w", holder_lock.owner());
    let first = {
        let lock = other.lock(name);
        tokio::spawn(async move {
            let guard = lock.try_lock_for(Duration::from_secs(20)).await;
            (lock, guard)
        })
    };
    assert!(wait_until(Duration::from_secs(5), || lrange(&server, queue).len() == 1).await, "first queued");
    let second = {
        let lock = lean.lock(name);
        tokio::spawn(async move {
            let guard = lock.try_lock_for(Duration::from_secs(20)).await;
            (lock, guard)
        })
    };
    assert!(wait_until(Duration::from_secs(5), || lrange(&server, queue).len() == 2).await, "second queued");
    let fields: Vec<String> = hgetall(&server, name).into_iter().map(|(field, _)| field).collect();
    let mut expected = vec![holder_lock.owner().to_owned(), flag.clone()];
    expected.sort();
    assert_eq!(fields, expected, "the waiters flagged the holder");

    // The lease is 30 s: a release that woke nobody would leave the waiters there.
    holder.unlock().await.expect("unlock");
    let (first_lock, first_guard) =
        tokio::time::timeout(Duration::from_secs(3), first).await.expect("the first waiter is woken").expect("task");
    let first_guard = first_guard.expect("no error").expect("acquired");
    let first_flag = format!("{}:w", first_lock.owner());
    let fields: Vec<String> = hgetall(&server, name).into_iter().map(|(field, _)| field).collect();
    assert!(fields.contains(&first_flag), "the hand-over flagged the new owner for the waiter behind: {fields:?}");
    assert!(!fields.contains(&flag), "the old owner's flag went with its field: {fields:?}");

    // Released through the other client (publishing as always); then the lean waiter's
    // own release, with nobody behind it, publishes nothing.
    first_guard.unlock().await.expect("unlock");
    let (_second_lock, second_guard) =
        tokio::time::timeout(Duration::from_secs(3), second).await.expect("the second waiter is woken").expect("task");
    let second_guard = second_guard.expect("no error").expect("acquired");
    monitor.sync(&server.addr());
    let before = publishes_on(&monitor, "redisson_lock__channel:{lean:queue}");
    second_guard.unlock().await.expect("unlock");
    monitor.sync(&server.addr());
    assert_eq!(publishes_on(&monitor, "redisson_lock__channel:{lean:queue}"), before, "no waiter, no PUBLISH");

    // A FencedLock waiter queues as a Lock's does, and its waiting call flags the holder.
    let fenced = lean.fenced_lock("lean:fenced");
    let fenced_holder = fenced.lock_with_lease(Duration::from_secs(30)).await.expect("held");
    let fenced_waiter = {
        let lock = other.fenced_lock("lean:fenced");
        tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(20)).await.map(|g| g.is_some()) })
    };
    let fenced_flag = format!("{}:w", fenced.owner());
    assert!(
        wait_until(Duration::from_secs(5), || hgetall(&server, "lean:fenced").iter().any(|(f, _)| *f == fenced_flag))
            .await,
        "the fenced waiter flagged the holder"
    );
    fenced_holder.unlock().await.expect("unlock");
    let woken = tokio::time::timeout(Duration::from_secs(3), fenced_waiter).await.expect("the fenced waiter is woken");
    assert!(woken.expect("task").expect("no error"), "the fenced waiter acquired (and its guard released on drop)");
    let keys = raw(&server, &["KEYS", "lean:*"]);
    assert!(
        wait_until(
            Duration::from_secs(5),
            || matches!(raw(&server, &["KEYS", "lean:*"]), RespValue::Array(ref k) if k.is_empty())
        )
        .await,
        "no lock key left: {keys:?}"
    );
}

/// Issue 17, item 3: a waiting acquire of a free lock that nobody queues for costs what
/// a single try costs: the script reads the queue only when it can matter (one EXISTS
/// counts the lock key and the queue). Counted on the server, commands inside scripts
/// included: 7 per `lock()` + `unlock()` pair (EVALSHA, EXISTS, HSET, PEXPIRE; EVALSHA,
/// HDEL, PUBLISH), as for `try_lock()` + `unlock()`; it was 11.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_costs_what_try_lock_costs() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let count = |pair: &str| {
        let lock = client.lock(format!("queue:lean:{pair}"));
        let monitor = Monitor::start(&server.addr());
        (lock, monitor)
    };
    let (lock, monitor) = count("lock");
    lock.lock().await.expect("lock").unlock().await.expect("unlock");
    monitor.sync(&server.addr());
    let waiting = monitor.commands();
    let (lock, monitor) = count("try");
    lock.try_lock().await.expect("try").expect("free").unlock().await.expect("unlock");
    monitor.sync(&server.addr());
    let single = monitor.commands();
    assert_eq!(waiting.len(), single.len(), "lock(): {waiting:#?}\ntry_lock(): {single:#?}");
    assert!(waiting.len() <= 8, "{waiting:#?}");
    // The contended path still queues: a waiter of a held lock is in its queue.
    let guard = client.lock("queue:lean:held").lock().await.expect("held");
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            let got = client.lock("queue:lean:held").try_lock_for(Duration::from_secs(10)).await;
            got.expect("no error").expect("acquired").unlock().await.expect("unlock");
        })
    };
    let queue = "leasehold_lock_queue:{queue:lean:held}";
    assert!(wait_until(Duration::from_secs(5), || lrange(&server, queue).len() == 1).await, "queued");
    guard.unlock().await.expect("unlock");
    tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("handed over").expect("task");
}

/// Redisson's `testLeaseTimeout` on the plain `Lock`'s server queue (issue 26): eight
/// owners 100 ms apart, each `try_lock_with(10 s, 1 s)` and never unlocking, all acquire
/// in arrival order, each as soon as the lease before it ran out; on eight handles of one
/// client, then on eight clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiring_lock_holders_hand_off_in_order() {
    let server = RedisServer::start();
    let (lease, slack) = (Duration::from_secs(1), Duration::from_millis(700));
    let one = client(&server).await;
    let acquired = leasehold_test_support::expiring::expiring_holders(8, |_| {
        let lock = one.lock("queue:expiring-one");
        async move {
            let guard = lock.try_lock_with(Duration::from_secs(10), Duration::from_secs(1)).await.expect("wait");
            guard.map(leasehold::LockGuard::detach).is_some()
        }
    })
    .await;
    leasehold_test_support::expiring::assert_hand_offs(&acquired, lease, slack, Duration::from_secs(11));
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(client(&server).await);
    }
    let acquired = leasehold_test_support::expiring::expiring_holders(8, |i| {
        let lock = clients[i].lock("queue:expiring-eight");
        async move {
            let guard = lock.try_lock_with(Duration::from_secs(10), Duration::from_secs(1)).await.expect("wait");
            guard.map(leasehold::LockGuard::detach).is_some()
        }
    })
    .await;
    leasehold_test_support::expiring::assert_hand_offs(&acquired, lease, slack, Duration::from_secs(11));
}
