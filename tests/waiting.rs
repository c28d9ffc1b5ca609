//! Waiting by pub/sub: mutual exclusion under contention, wake-ups, lost messages,
//! cancellation, and no leaked subscriptions.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_tests::{client, client_with, pubsub_channels, raw, wait_until, RedisServer};

const LEASE: Duration = Duration::from_secs(10);

/// 64 tasks over 4 clients increment a counter with a non-atomic GET / sleep / SET
/// under the lock; a compare-and-set "inside" flag catches any overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_increments_are_exact_and_never_overlap() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..64 {
        let client = clients[t % 4].clone();
        let inside = inside.clone();
        let addr = server.addr();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("counter-lock");
            for _ in 0..5 {
                let guard = lock.lock_with_lease(LEASE).await.expect("lock");
                assert!(
                    inside.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok(),
                    "another holder was inside the critical section"
                );
                let fred = client.fred();
                let value: Option<i64> = fred_get(fred, "counter").await;
                tokio::time::sleep(Duration::from_micros(200)).await;
                fred_set(fred, "counter", value.unwrap_or(0) + 1).await;
                inside.store(false, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            }
            drop(addr);
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(raw(&server, &["GET", "counter"]).as_str(), Some("320"));
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
    for client in &clients {
        // The client's view follows the server's once the UNSUBSCRIBE's reply is in.
        assert!(wait_until(Duration::from_secs(5), || client.subscribed_channels().is_empty()).await);
    }
}

async fn fred_get(fred: &leasehold::fred::prelude::Client, key: &str) -> Option<i64> {
    use leasehold::fred::prelude::KeysInterface;
    fred.get(key).await.expect("GET")
}

async fn fred_set(fred: &leasehold::fred::prelude::Client, key: &str, value: i64) {
    use leasehold::fred::prelude::KeysInterface;
    let () = fred.set(key, value, None, None, false).await.expect("SET");
}

/// A bounded wait on a held lock ends after about the wait, with `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_for_returns_none_after_the_wait() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.lock("held").lock_with_lease(LEASE).await.expect("holder");
    let start = Instant::now();
    let got = client.lock("held").try_lock_for(Duration::from_secs(3)).await.expect("wait");
    let waited = start.elapsed();
    assert!(got.is_none());
    assert!(waited >= Duration::from_secs(3), "returned early: {waited:?}");
    assert!(waited < Duration::from_millis(3_500), "returned late: {waited:?}");
    holder.unlock().await.expect("unlock");
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
}

/// A release wakes the waiter at once (not at its TTL timer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_wakes_a_waiter_promptly() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let holder = a.lock("prompt").lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let waiter = tokio::spawn(async move {
        let guard = b.lock("prompt").lock_with_lease(LEASE).await.expect("waiter");
        let at = Instant::now();
        guard.unlock().await.expect("unlock");
        at
    });
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).len() == 2).await);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let released = Instant::now();
    holder.unlock().await.expect("unlock");
    let acquired = waiter.await.expect("waiter task");
    let handoff = acquired.duration_since(released);
    assert!(handoff < Duration::from_secs(2), "handoff took {handoff:?}; a 30 s TTL timer was not the wake-up");
}

/// The holder's key expires and nobody publishes: the waiter gets in within TTL + slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_without_a_message_still_lets_the_waiter_in() {
    let server = RedisServer::start();
    let client = client(&server).await;
    // A foreign holder in Redisson's layout that will never publish.
    raw(&server, &["HSET", "expiring", "00000000-0000-0000-0000-000000000000:1", "1"]);
    raw(&server, &["PEXPIRE", "expiring", "1000"]);
    let start = Instant::now();
    let guard = client.lock("expiring").lock_with_lease(LEASE).await.expect("lock");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(900), "acquired before the holder expired: {waited:?}");
    assert!(waited < Duration::from_millis(1_800), "waited far past the TTL: {waited:?}");
    guard.unlock().await.expect("unlock");
}

/// The subscriber connection is killed while 8 tasks wait: all acquire in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_killed_subscriber_connection() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let waiters_client = client(&server).await;
    let holder = holder_client.lock("killed").lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let acquired = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = waiters_client.clone();
        let acquired = acquired.clone();
        tasks.push(tokio::spawn(async move {
            let guard = client.lock("killed").lock_with_lease(LEASE).await.expect("waiter");
            acquired.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.unlock().await.expect("unlock");
        }));
    }
    assert!(wait_until(Duration::from_secs(5), || waiters_client.local_waiters("killed") == 8).await);
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).len() == 2).await);
    let killed = raw(&server, &["CLIENT", "KILL", "TYPE", "pubsub"]).as_int();
    assert!(killed >= Some(1), "no pubsub connection was killed: {killed:?}");
    holder.unlock().await.expect("unlock");
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(20), task).await.expect("waiters finish").expect("task");
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 8);
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
}

/// 5000 lock/unlock operations over 5 names by 64 tasks: no error, no leftover channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_operations_leave_no_channel() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut tasks = Vec::new();
    for t in 0..64u64 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let ops = if t < 8 { 79 } else { 78 }; // 8 * 79 + 56 * 78 = 5000
            for i in 0..ops {
                let lock = client.lock(format!("name-{}", (t + i) % 5));
                let guard = lock.lock_with_lease(LEASE).await.expect("lock");
                guard.unlock().await.expect("unlock");
            }
            ops
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("task");
    }
    assert_eq!(total, 5000);
    assert!(
        wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await,
        "{:?}",
        pubsub_channels(&server)
    );
    for n in 0..5 {
        assert_eq!(raw(&server, &["EXISTS", &format!("name-{n}")]).as_int(), Some(0));
    }
}

/// Waiting futures dropped by timeouts and aborts leave no subscription and no lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_waiters_leak_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.lock("dropped").lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("dropped");
            // Half time out through `select!`-style cancellation, half are aborted below.
            let limit = if i % 2 == 0 { Duration::from_millis(100 + i * 10) } else { Duration::from_secs(60) };
            let _ = tokio::time::timeout(limit, lock.lock_with_lease(LEASE)).await;
        }));
    }
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters("dropped") >= 8).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    assert_eq!(client.local_waiters("dropped"), 0);
    holder.unlock().await.expect("unlock");
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
    assert_eq!(raw(&server, &["EXISTS", "dropped"]).as_int(), Some(0), "no lock acquired in the background");
    assert_eq!(client.watchdog_stats().registered, 0);
}

/// Local waiters acquire in the order they queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_waiters_are_served_in_fifo_order() {
    let server = RedisServer::start();
    let client = client_with(&server.url(), Duration::from_secs(30)).await;
    let holder = client.lock("fifo").lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6usize {
        let task_client = client.clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = task_client.lock("fifo").lock_with_lease(LEASE).await.expect("waiter");
            order.lock().expect("poisoned").push(i);
            guard.unlock().await.expect("unlock");
        }));
        // Queue them one at a time so the order is known.
        assert!(wait_until(Duration::from_secs(5), || client.local_waiters("fifo") == i + 1).await);
    }
    holder.unlock().await.expect("unlock");
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(*order.lock().expect("poisoned"), vec![0, 1, 2, 3, 4, 5], "{:?}", client.subscriber_stats());
}

/// An owner that already holds the lock re-enters at once, even with local waiters
/// queued behind it (they wait for it; it must not wait for them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_never_queues_behind_local_waiters() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("reenter");
    let first = lock.lock().await.expect("first");
    let waiter = tokio::spawn({
        let client = client.clone();
        async move {
            let guard = client.lock("reenter").lock_with_lease(LEASE).await.expect("waiter");
            guard.unlock().await.expect("waiter unlock");
        }
    });
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters("reenter") == 1).await);
    let second = tokio::time::timeout(Duration::from_secs(2), lock.lock()).await.expect("re-entry did not queue");
    let second = second.expect("re-entered");
    assert_eq!(lock.hold_count().await.expect("count"), 2);
    second.unlock().await.expect("unlock second");
    first.unlock().await.expect("unlock first");
    tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("waiter gets in").expect("task");
}

/// Dropping every handle of a client closes its command and subscriber connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_client_closes_its_connections() {
    let server = RedisServer::start();
    // Connections other than the one asking (CLIENT LIST includes the caller).
    let others = || match raw(&server, &["CLIENT", "LIST"]) {
        leasehold_tests::RespValue::Bulk(list) => list.lines().count() - 1,
        other => panic!("CLIENT LIST: {other:?}"),
    };
    let client = client(&server).await;
    // Use the subscriber once so its task has run.
    let holder = client.lock("bye").lock_with_lease(LEASE).await.expect("holder");
    let waited = client.lock("bye").try_lock_for(Duration::from_millis(100)).await.expect("wait");
    assert!(waited.is_none());
    holder.unlock().await.expect("unlock");
    assert_eq!(others(), 2, "one command and one subscriber connection");
    drop(client);
    assert!(wait_until(Duration::from_secs(5), || others() == 0).await, "both connections closed: {}", others());
}

/// Four OS processes × 16 tasks: a non-atomic increment under the lock is exact, and a
/// shared `SET NX` "inside" flag never finds another holder inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_exclude_each_other() {
    let server = RedisServer::start();
    let mut children = Vec::new();
    for _ in 0..4 {
        children.push(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_contender"))
                .args([server.url().as_str(), "xproc", "16", "5"])
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("spawn contender"),
        );
    }
    let mut intervals: Vec<(u64, u64)> = Vec::new();
    for child in children {
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("contender finishes")
            .expect("contender output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains("DONE"), "contender failed: {stdout}");
        for line in stdout.lines().filter_map(|l| l.strip_prefix("INTERVAL ")) {
            let (start, end) = line.split_once(' ').expect("INTERVAL START END");
            intervals.push((start.parse().expect("start"), end.parse().expect("end")));
        }
    }
    // Each interval lies inside a true hold, on the server's one clock: overlapping
    // intervals would prove overlapping holds.
    assert_eq!(intervals.len(), 320, "every acquisition logged its interval");
    intervals.sort_unstable();
    for pair in intervals.windows(2) {
        assert!(pair[0].1 < pair[1].0, "holds overlap: {:?} and {:?}", pair[0], pair[1]);
    }
    assert_eq!(raw(&server, &["GET", "xproc:counter"]).as_str(), Some("320"));
    assert_eq!(raw(&server, &["EXISTS", "xproc", "xproc:inside"]).as_int(), Some(0));
    assert!(pubsub_channels(&server).is_empty());
}

/// A subscriber that falls behind (a broadcast lag: messages were dropped) wakes every
/// waiter, since it cannot know which releases it missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_subscriber_wakes_every_waiter() {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
    let server = RedisServer::start();
    let mut builder = Builder::from_config(Config::from_url(&server.url()).expect("url"));
    builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    // A tiny buffer, so a burst of messages overflows it.
    builder.with_performance_config(|p| p.broadcast_channel_capacity = 2);
    let fred = builder.build_subscriber_client().expect("subscriber client");
    fred.init().await.expect("connect");
    let subscriber = lock_pubsub::Subscriber::start(fred, Duration::from_secs(2));
    let channel: Arc<str> = Arc::from("redisson_lock__channel:{lag}");
    let first = subscriber.register(&channel);
    let second = subscriber.register(&channel);
    assert!(first.take_turn(), "the first in line starts with a turn");
    assert!(!second.take_turn());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    assert!(second.subscribed_by(deadline).await);
    // Unlock messages alone would only ever wake the first in line. One script
    // publishes them all, so they reach the subscriber in one burst.
    let burst = "for i = 1, 5000 do redis.call('publish', KEYS[1], '0') end return 1";
    assert_eq!(raw(&server, &["EVAL", burst, "1", &channel]).as_int(), Some(1));
    assert!(wait_until(Duration::from_secs(5), || subscriber.stats().wake_alls >= 1).await, "{:?}", subscriber.stats());
    assert!(second.take_turn(), "the waiter behind the first was woken too");
    drop((first, second));
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
}

/// `x` and `{x}` share the channel `redisson_lock__channel:{x}`. A waiter queued on the
/// held `x` must not hold up a caller of the free `{x}` in the same client: the local
/// FIFO queue is per lock, not per channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_lock_does_not_queue_behind_another_lock_on_its_channel() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let channel = "redisson_lock__channel:{x}";
    let owner_a = client.lock("x").lock_with_lease(Duration::from_secs(30)).await.expect("A holds x");
    let w1 = tokio::spawn({
        let client = client.clone();
        async move {
            let guard = client.lock("x").lock_with_lease(LEASE).await.expect("W1");
            guard.unlock().await.expect("W1 unlock");
        }
    });
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters("x") == 1).await, "W1 queued");
    // The release channel, and the queue channel subscribed with it.
    let subscribed = ["leasehold_lock__queue:{x}", channel];
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server) == subscribed).await);

    let braced = client.lock("{x}");
    let start = Instant::now();
    let guard = tokio::time::timeout(Duration::from_secs(1), braced.lock())
        .await
        .expect("the free {x} was not acquired within 1 s: it queued behind the waiter on x")
        .expect("lock {x}");
    assert!(start.elapsed() < Duration::from_secs(1));
    assert!(!w1.is_finished(), "W1 still waits: x is held by A");
    guard.unlock().await.expect("unlock {x}");

    owner_a.unlock().await.expect("A unlocks x");
    tokio::time::timeout(Duration::from_secs(2), w1).await.expect("W1 acquires x once A releases it").expect("W1");
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
}

/// An unlock message cannot say which of the locks on a channel was released, so it
/// wakes the first waiter of every lock on it: releasing `x` wakes the waiter on `x`
/// even though a waiter on `{x}` (held by someone else) queued on the channel first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_its_lock_even_behind_another_lock_on_the_channel() {
    let server = RedisServer::start();
    let holders = client(&server).await;
    let waiters = client(&server).await;
    let channel = "redisson_lock__channel:{x}";
    let hold = Duration::from_secs(30);
    let braced_holder = holders.lock("{x}").lock_with_lease(hold).await.expect("hold {x}");
    let plain_holder = holders.lock("x").lock_with_lease(hold).await.expect("hold x");

    let before_braced = evalsha_calls(&server);
    let on_braced = tokio::spawn({
        let client = waiters.clone();
        async move {
            let guard = client.lock("{x}").lock_with_lease(LEASE).await.expect("waiter on {x}");
            guard.unlock().await.expect("unlock {x}");
        }
    });
    assert!(wait_until(Duration::from_secs(5), || waiters.local_waiters("{x}") == 1).await);
    // The release channel, and the queue channel subscribed with it.
    let subscribed = ["leasehold_lock__queue:{x}", channel];
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server) == subscribed).await);
    // And the client saw the server confirm it (so it heard everything from here on).
    assert!(wait_until(Duration::from_secs(5), || waiters.subscribed_channels().contains(&channel.to_owned())).await);
    // The waiter on {x} registered before its client was listening: once subscribed, it
    // catches up with one more attempt (a release might have gone unheard).
    assert!(wait_until(Duration::from_secs(5), || evalsha_calls(&server) >= before_braced + 2).await, "caught up");
    let attempts_before = evalsha_calls(&server);
    let on_plain = tokio::spawn({
        let client = waiters.clone();
        async move {
            let guard = client.lock("x").lock_with_lease(LEASE).await.expect("waiter on x");
            let at = Instant::now();
            guard.unlock().await.expect("unlock x");
            at
        }
    });
    assert!(wait_until(Duration::from_secs(5), || waiters.local_waiters("x") == 1).await);
    // Its fast-path attempt was answered "held" (it queued as the head of x's queue)
    // before it registered, and its client's subscription was confirmed all along, so
    // it needs no catch-up attempt: none of it is in flight when `x` is released, and
    // only a wake-up (or its 30 s timer) can let it in now.
    let attempted = wait_until(Duration::from_secs(2), || evalsha_calls(&server) > attempts_before).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(evalsha_calls(&server), attempts_before + 1, "one attempt: the fast path, no catch-up");

    let released = Instant::now();
    plain_holder.unlock().await.expect("release x");
    let acquired = tokio::time::timeout(Duration::from_secs(2), on_plain)
        .await
        .expect("the release of x did not wake the waiter on x within 2 s")
        .expect("waiter task");
    assert!(acquired.duration_since(released) < Duration::from_secs(2));
    assert!(attempted, "the waiter on x tried before the release");
    assert!(!on_braced.is_finished(), "{{x}} is still held");

    braced_holder.unlock().await.expect("release {x}");
    tokio::time::timeout(Duration::from_secs(2), on_braced).await.expect("the waiter on {x} gets in").expect("task");
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
}

/// `calls` of `cmdstat_evalsha` in `INFO commandstats` (0 before the first one).
fn evalsha_calls(server: &RedisServer) -> u64 {
    let info = raw(server, &["INFO", "commandstats"]);
    let text = info.as_str().unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// A subscriber on its own fred connection, with a reconnect policy.
async fn bare_subscriber(server: &RedisServer) -> lock_pubsub::Subscriber {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
    let mut builder = Builder::from_config(Config::from_url(&server.url()).expect("url"));
    builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    let fred = builder.build_subscriber_client().expect("subscriber client");
    fred.init().await.expect("connect");
    lock_pubsub::Subscriber::start(fred, Duration::from_secs(2))
}

/// The last waiter leaves a channel and a new one registers at once: before the task
/// sends `UNSUBSCRIBE`, while it is in flight, or after. Whatever the order, the new
/// waiter is confirmed only when the server really has the subscription (`PUBLISH`
/// counts one receiver), and a message then wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_registered_again_while_unsubscribing_ends_up_subscribed() {
    let server = RedisServer::start();
    let subscriber = bare_subscriber(&server).await;
    let channel: Arc<str> = Arc::from("redisson_lock__channel:{again}");
    let lock: Arc<str> = Arc::from("again");
    let confirm = || tokio::time::Instant::now() + Duration::from_secs(5);
    for round in 0..1000 {
        let first = subscriber.register_lock(&channel, &lock);
        assert!(first.subscribed_by(confirm()).await, "round {round}: first not confirmed");
        drop(first);
        // A different head start for the task's UNSUBSCRIBE in each round.
        for _ in 0..round % 8 {
            tokio::task::yield_now().await;
        }
        let again = subscriber.register_lock(&channel, &lock);
        assert!(again.subscribed_by(confirm()).await, "round {round}: {:?}", subscriber.stats());
        assert!(again.take_turn(), "the first in line starts with a turn");
        let receivers = raw(&server, &["PUBLISH", &channel, "0"]).as_int();
        if receivers != Some(1) {
            let later = wait_until(Duration::from_secs(1), || pubsub_channels(&server).len() == 1).await;
            panic!("round {round}: {receivers:?} receivers; subscribed 1 s later: {later}; {:?}", subscriber.stats());
        }
        assert!(again.wait_until(confirm()).await && again.take_turn(), "round {round}: the message woke it");
        drop(again);
    }
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
    assert!(wait_until(Duration::from_secs(5), || subscriber.active_channels().is_empty()).await);
}

/// Two locks on one channel share one subscription: it lives while either has a
/// waiter, and goes with the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_one_channel_share_one_subscription() {
    let server = RedisServer::start();
    let subscriber = bare_subscriber(&server).await;
    let channel: Arc<str> = Arc::from("redisson_lock__channel:{shared}");
    let deadline = || tokio::time::Instant::now() + Duration::from_secs(5);
    let plain = subscriber.register_lock(&channel, &Arc::from("shared"));
    let braced = subscriber.register_lock(&channel, &Arc::from("{shared}"));
    assert!(plain.subscribed_by(deadline()).await && braced.subscribed_by(deadline()).await);
    assert!(plain.take_turn() && braced.take_turn(), "each is first in its own line");
    assert_eq!(subscriber.waiters(&channel), 2);
    assert_eq!(subscriber.lock_waiters(&channel, "shared"), 1);
    assert_eq!(subscriber.lock_waiters(&channel, "{shared}"), 1);
    assert_eq!(subscriber.stats().subscribe_calls, 1, "one SUBSCRIBE for both");
    drop(plain);
    assert_eq!(raw(&server, &["PUBLISH", &channel, "0"]).as_int(), Some(1), "still subscribed for {{shared}}");
    assert!(braced.wait_until(deadline()).await && braced.take_turn());
    assert_eq!(subscriber.active_channels(), vec![channel.to_string()]);
    drop(braced);
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).is_empty()).await);
    assert!(wait_until(Duration::from_secs(5), || subscriber.active_channels().is_empty()).await);
    assert_eq!(subscriber.stats().unsubscribe_calls, 1);
}
