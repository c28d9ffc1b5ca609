//! Waiting by pub/sub: mutual exclusion under contention, wake-ups, lost messages,
//! cancellation, and no leaked subscriptions.
//!
//! Every test runs three times (`NAME::standalone`, `NAME::valkey`, `NAME::cluster`,
//! see `both_topologies!`): on a private Redis server, on a private Valkey server, and
//! on a cluster (sharded pub/sub: a lock's channels are shard channels on its slot's
//! primary), where every name has the test's prefix and the subscription checks look at
//! the test's own channels only.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_test_support::{both_topologies, wait_until, Monitor, Place, RespValue, Topology};

const LEASE: Duration = Duration::from_secs(10);

/// 64 tasks over 4 clients increment a counter with a non-atomic GET / sleep / SET
/// under the lock; a compare-and-set "inside" flag catches any overlap.
async fn contended_increments_are_exact_and_never_overlap(t: &Topology) {
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(t.client().await);
    }
    let (name, counter) = (t.name("counter-lock"), t.name("counter"));
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..64 {
        let client = clients[i % 4].clone();
        let inside = inside.clone();
        let (name, counter) = (name.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let lock = client.lock(&name);
            for _ in 0..5 {
                let guard = lock.lock_with_lease(LEASE).await.expect("lock");
                assert!(
                    inside.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok(),
                    "another holder was inside the critical section"
                );
                let fred = client.fred();
                let value: Option<i64> = fred_get(fred, &counter).await;
                tokio::time::sleep(Duration::from_micros(200)).await;
                fred_set(fred, &counter, value.unwrap_or(0) + 1).await;
                inside.store(false, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(t.on_key(&counter, &["GET", &counter]).as_str(), Some("320"));
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
    for client in &clients {
        // The client's view follows the server's once the UNSUBSCRIBE's reply is in.
        assert!(wait_until(Duration::from_secs(5), || client.subscribed_channels().is_empty()).await);
    }
}
both_topologies!(contended_increments_are_exact_and_never_overlap);

async fn fred_get(fred: &leasehold::fred::prelude::Client, key: &str) -> Option<i64> {
    use leasehold::fred::prelude::KeysInterface;
    fred.get(key).await.expect("GET")
}

async fn fred_set(fred: &leasehold::fred::prelude::Client, key: &str, value: i64) {
    use leasehold::fred::prelude::KeysInterface;
    let () = fred.set(key, value, None, None, false).await.expect("SET");
}

/// A bounded wait on a held lock ends after about the wait, with `None`.
async fn try_lock_for_returns_none_after_the_wait(t: &Topology) {
    let client = t.client().await;
    let name = t.name("held");
    let holder = client.lock(&name).lock_with_lease(LEASE).await.expect("holder");
    let start = Instant::now();
    let got = client.lock(&name).try_lock_for(Duration::from_secs(3)).await.expect("wait");
    let waited = start.elapsed();
    assert!(got.is_none());
    assert!(waited >= Duration::from_secs(3), "returned early: {waited:?}");
    assert!(waited < Duration::from_millis(3_500), "returned late: {waited:?}");
    holder.unlock().await.expect("unlock");
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
}
both_topologies!(try_lock_for_returns_none_after_the_wait);

/// A release wakes the waiter at once (not at its TTL timer).
async fn release_wakes_a_waiter_promptly(t: &Topology) {
    let a = t.client().await;
    let b = t.client().await;
    let name = t.name("prompt");
    let holder = a.lock(&name).lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let watched = b.clone();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            let guard = b.lock(&name).lock_with_lease(LEASE).await.expect("waiter");
            let at = Instant::now();
            guard.unlock().await.expect("unlock");
            at
        }
    });
    // The release channel and the queue channel (on a cluster, shard channels).
    assert!(wait_until(Duration::from_secs(5), || t.channels().len() == 2).await, "{:?}", t.channels());
    // Past its first attempt: queued, so only the release's message lets it in in time.
    assert!(wait_until(Duration::from_secs(5), || watched.stats().waiters == 1).await, "the waiter queued");
    let released = Instant::now();
    holder.unlock().await.expect("unlock");
    let acquired = waiter.await.expect("waiter task");
    let handoff = acquired.duration_since(released);
    assert!(handoff < Duration::from_secs(2), "handoff took {handoff:?}; a 30 s TTL timer was not the wake-up");
}
both_topologies!(release_wakes_a_waiter_promptly);

/// The holder's key expires and nobody publishes: the waiter gets in within TTL + slack.
async fn expiry_without_a_message_still_lets_the_waiter_in(t: &Topology) {
    let client = t.client().await;
    let name = t.name("expiring");
    // A foreign holder in Redisson's layout that will never publish.
    t.on_key(&name, &["HSET", &name, "00000000-0000-0000-0000-000000000000:1", "1"]);
    // The clock is read before the TTL is set: a slow reply cannot eat the lower bound.
    let start = Instant::now();
    t.on_key(&name, &["PEXPIRE", &name, "1000"]);
    let guard = client.lock(&name).lock_with_lease(LEASE).await.expect("lock");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(900), "acquired before the holder expired: {waited:?}");
    assert!(waited < Duration::from_millis(1_800), "waited far past the TTL: {waited:?}");
    guard.unlock().await.expect("unlock");
}
both_topologies!(expiry_without_a_message_still_lets_the_waiter_in);

/// The subscriber connection is killed while 8 tasks wait: all acquire in turn. On a
/// private cluster (`CLIENT KILL TYPE pubsub` on the lock's primary cuts every
/// subscriber there, which on the shared cluster would be other tests' too).
async fn waiters_survive_a_killed_subscriber_connection(t: &Topology) {
    let holder_client = t.client().await;
    let waiters_client = t.client().await;
    let name = t.name("killed");
    let holder = holder_client.lock(&name).lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let acquired = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = waiters_client.clone();
        let acquired = acquired.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let guard = client.lock(&name).lock_with_lease(LEASE).await.expect("waiter");
            acquired.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.unlock().await.expect("unlock");
        }));
    }
    assert!(wait_until(Duration::from_secs(5), || waiters_client.local_waiters(&name) == 8).await);
    assert!(wait_until(Duration::from_secs(5), || t.channels().len() == 2).await);
    let killed = t.on_key(&name, &["CLIENT", "KILL", "TYPE", "pubsub"]).as_int();
    assert!(killed >= Some(1), "no pubsub connection was killed: {killed:?}");
    holder.unlock().await.expect("unlock");
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(20), task).await.expect("waiters finish").expect("task");
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 8);
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
}
both_topologies!(waiters_survive_a_killed_subscriber_connection, private_cluster);

/// 5000 lock/unlock operations over 5 names by 64 tasks: no error, no leftover channel.
async fn five_thousand_operations_leave_no_channel(t: &Topology) {
    let client = t.client().await;
    let names: Arc<Vec<String>> = Arc::new((0..5).map(|n| t.name(&format!("name-{n}"))).collect());
    let mut tasks = Vec::new();
    for task in 0..64u64 {
        let client = client.clone();
        let names = names.clone();
        tasks.push(tokio::spawn(async move {
            let ops = if task < 8 { 79 } else { 78 }; // 8 * 79 + 56 * 78 = 5000
            for i in 0..ops {
                let lock = client.lock(&names[usize::try_from((task + i) % 5).expect("small")]);
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
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await, "{:?}", t.channels());
    for name in names.iter() {
        assert!(!t.exists(name), "{name} left held");
    }
}
both_topologies!(five_thousand_operations_leave_no_channel);

/// Waiting futures dropped by timeouts and aborts leave no subscription and no lock.
async fn dropped_waiters_leak_nothing(t: &Topology) {
    let client = t.client().await;
    let name = t.name("dropped");
    let holder = client.lock(&name).lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let client = client.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock(&name);
            // Half time out through `select!`-style cancellation, half are aborted below.
            let limit = if i % 2 == 0 { Duration::from_millis(100 + i * 10) } else { Duration::from_secs(60) };
            let _ = tokio::time::timeout(limit, lock.lock_with_lease(LEASE)).await;
        }));
    }
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters(&name) >= 8).await);
    // The timed half has timed out (100-240 ms): every even task has ended by itself.
    let timed_out = wait_until(Duration::from_secs(5), || tasks.iter().step_by(2).all(|t| t.is_finished())).await;
    assert!(timed_out, "the timed waits ended");
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    assert_eq!(client.local_waiters(&name), 0);
    holder.unlock().await.expect("unlock");
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
    assert!(!t.exists(&name), "no lock acquired in the background");
    assert_eq!(client.stats().watchdog.registered, 0);
}
both_topologies!(dropped_waiters_leak_nothing);

/// Local waiters acquire in the order they queued.
async fn local_waiters_are_served_in_fifo_order(t: &Topology) {
    let client = t.client().await;
    let name = t.name("fifo");
    let holder = client.lock(&name).lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6usize {
        let task_client = client.clone();
        let order = order.clone();
        let task_name = name.clone();
        tasks.push(tokio::spawn(async move {
            let guard = task_client.lock(&task_name).lock_with_lease(LEASE).await.expect("waiter");
            order.lock().expect("poisoned").push(i);
            guard.unlock().await.expect("unlock");
        }));
        // Queue them one at a time so the order is known.
        assert!(wait_until(Duration::from_secs(5), || client.local_waiters(&name) == i + 1).await);
    }
    holder.unlock().await.expect("unlock");
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(*order.lock().expect("poisoned"), vec![0, 1, 2, 3, 4, 5], "{:?}", client.stats().subscriber);
}
both_topologies!(local_waiters_are_served_in_fifo_order);

/// An owner that already holds the lock re-enters at once, even with local waiters
/// queued behind it (they wait for it; it must not wait for them).
async fn reentry_never_queues_behind_local_waiters(t: &Topology) {
    let client = t.client().await;
    let name = t.name("reenter");
    let lock = client.lock(&name);
    let first = lock.lock().await.expect("first");
    let waiter = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move {
            let guard = client.lock(&name).lock_with_lease(LEASE).await.expect("waiter");
            guard.unlock().await.expect("waiter unlock");
        }
    });
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters(&name) == 1).await);
    let second = tokio::time::timeout(Duration::from_secs(2), lock.lock()).await.expect("re-entry did not queue");
    let second = second.expect("re-entered");
    assert_eq!(lock.hold_count().await.expect("count"), 2);
    second.unlock().await.expect("unlock second");
    first.unlock().await.expect("unlock first");
    tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("waiter gets in").expect("task");
}
both_topologies!(reentry_never_queues_behind_local_waiters);

/// Client connections (command and subscriber, not a replica's link) on `node`, other
/// than the one asking.
fn client_connections(node: &str) -> usize {
    let count =
        |kind: &str| match leasehold_test_support::raw_command(node, &[b"CLIENT", b"LIST", b"TYPE", kind.as_bytes()]) {
            RespValue::Bulk(list) => list.lines().count(),
            other => panic!("CLIENT LIST: {other:?}"),
        };
    count("normal") - 1 + count("pubsub")
}

/// Dropping every handle of a client closes its command and subscriber connections. On
/// a private cluster (it counts every connection of every node): there the client has
/// connections on every primary, and all of them close.
async fn dropping_the_client_closes_its_connections(t: &Topology) {
    let others = || t.nodes().iter().map(|node| client_connections(node)).sum::<usize>();
    let client = t.client().await;
    let name = t.name("bye");
    // Use the subscriber once so its task has run.
    let holder = client.lock(&name).lock_with_lease(LEASE).await.expect("holder");
    let waited = client.lock(&name).try_lock_for(Duration::from_millis(100)).await.expect("wait");
    assert!(waited.is_none());
    holder.unlock().await.expect("unlock");
    match t.place() {
        Place::Server(_) => assert_eq!(others(), 2, "one command and one subscriber connection"),
        Place::Cluster(cluster) => {
            for primary in cluster.primaries() {
                let n = client_connections(&primary);
                assert!(n >= 2, "{primary}: {n} connections, not a command and a subscriber connection");
            }
        }
    }
    drop(client);
    assert!(wait_until(Duration::from_secs(5), || others() == 0).await, "every connection closed: {}", others());
}
both_topologies!(dropping_the_client_closes_its_connections, private_cluster);

/// Four OS processes × 16 tasks: a non-atomic increment under the lock is exact, and a
/// shared `SET NX` "inside" flag never finds another holder inside.
async fn four_processes_exclude_each_other(t: &Topology) {
    let name = t.name("xproc");
    let children =
        leasehold_test_support::spawn_contenders(env!("CARGO_BIN_EXE_contender"), &t.url(), &name, 4, (16, 5), &[]);
    let intervals = leasehold_test_support::contenders_intervals(children, Duration::from_secs(60)).await;
    // Each interval lies inside a true hold, on the server's one clock (on a cluster,
    // every node runs on this machine's clock): overlapping intervals would prove
    // overlapping holds.
    assert_eq!(intervals.len(), 320, "every acquisition logged its interval");
    for pair in intervals.windows(2) {
        assert!(pair[0].1 < pair[1].0, "holds overlap: {:?} and {:?}", pair[0], pair[1]);
    }
    let counter = format!("{name}:counter");
    assert_eq!(t.on_key(&counter, &["GET", &counter]).as_str(), Some("320"));
    let inside = format!("{name}:inside");
    assert!(!t.exists(&name) && !t.exists(&inside));
    assert!(t.channels().is_empty());
}
both_topologies!(four_processes_exclude_each_other);

/// A subscriber that falls behind (a broadcast lag: messages were dropped) wakes every
/// waiter, since it cannot know which releases it missed.
async fn a_lagging_subscriber_wakes_every_waiter(t: &Topology) {
    // A tiny buffer, so a burst of messages overflows it.
    let subscriber = bare_subscriber(t, Some(2)).await;
    let channel: Arc<str> = Arc::from(format!("redisson_lock__channel:{{{}}}", t.name("lag")));
    let first = subscriber.register(&channel);
    let second = subscriber.register(&channel);
    assert!(first.take_turn(), "the first in line starts with a turn");
    assert!(!second.take_turn());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    assert!(second.subscribed_by(deadline).await);
    // Unlock messages alone would only ever wake the first in line. One script
    // publishes them all, so they reach the subscriber in one burst.
    let burst = format!("for i = 1, 5000 do redis.call('{}', KEYS[1], '0') end return 1", t.publish_command());
    assert_eq!(t.on_key(&channel, &["EVAL", &burst, "1", &channel]).as_int(), Some(1));
    assert!(wait_until(Duration::from_secs(5), || subscriber.stats().wake_alls >= 1).await, "{:?}", subscriber.stats());
    assert!(second.take_turn(), "the waiter behind the first was woken too");
    drop((first, second));
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
}
both_topologies!(a_lagging_subscriber_wakes_every_waiter);

/// `x` and `{x}` share the channel `redisson_lock__channel:{x}`. A waiter queued on the
/// held `x` must not hold up a caller of the free `{x}` in the same client: the local
/// FIFO queue is per lock, not per channel.
async fn a_free_lock_does_not_queue_behind_another_lock_on_its_channel(t: &Topology) {
    let client = t.client().await;
    let (x, braced_x) = (t.name("x"), format!("{{{}}}", t.name("x")));
    let channel = format!("redisson_lock__channel:{{{x}}}");
    let owner_a = client.lock(&x).lock_with_lease(Duration::from_secs(30)).await.expect("A holds x");
    let w1 = tokio::spawn({
        let client = client.clone();
        let x = x.clone();
        async move {
            let guard = client.lock(&x).lock_with_lease(LEASE).await.expect("W1");
            guard.unlock().await.expect("W1 unlock");
        }
    });
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters(&x) == 1).await, "W1 queued");
    // The release channel, and the queue channel subscribed with it.
    let subscribed = [format!("leasehold_lock__queue:{{{x}}}"), channel.clone()];
    assert!(wait_until(Duration::from_secs(5), || t.channels() == subscribed).await, "{:?}", t.channels());

    let braced = client.lock(&braced_x);
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
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
}
both_topologies!(a_free_lock_does_not_queue_behind_another_lock_on_its_channel);

/// An unlock message cannot say which of the locks on a channel was released, so it
/// wakes the first waiter of every lock on it: releasing `x` wakes the waiter on `x`
/// even though a waiter on `{x}` (held by someone else) queued on the channel first.
async fn a_release_wakes_its_lock_even_behind_another_lock_on_the_channel(t: &Topology) {
    let holders = t.client().await;
    let waiters = t.client().await;
    let (x, braced_x) = (t.name("x"), format!("{{{}}}", t.name("x")));
    let channel = format!("redisson_lock__channel:{{{x}}}");
    let hold = Duration::from_secs(30);
    let braced_holder = holders.lock(&braced_x).lock_with_lease(hold).await.expect("hold {x}");
    let plain_holder = holders.lock(&x).lock_with_lease(hold).await.expect("hold x");

    let attempts = Attempts::start(t, &[&x, &braced_x]);
    let before_braced = attempts.count();
    let on_braced = tokio::spawn({
        let client = waiters.clone();
        let braced_x = braced_x.clone();
        async move {
            let guard = client.lock(&braced_x).lock_with_lease(LEASE).await.expect("waiter on {x}");
            guard.unlock().await.expect("unlock {x}");
        }
    });
    assert!(wait_until(Duration::from_secs(5), || waiters.local_waiters(&braced_x) == 1).await);
    // The release channel, and the queue channel subscribed with it.
    let subscribed = [format!("leasehold_lock__queue:{{{x}}}"), channel.clone()];
    assert!(wait_until(Duration::from_secs(5), || t.channels() == subscribed).await, "{:?}", t.channels());
    // And the client saw the server confirm it (so it heard everything from here on).
    assert!(wait_until(Duration::from_secs(5), || waiters.subscribed_channels().contains(&channel)).await);
    // The waiter on {x} registered before its client was listening: once subscribed, it
    // catches up with one more attempt (a release might have gone unheard).
    assert!(wait_until(Duration::from_secs(5), || attempts.count() >= before_braced + 2).await, "caught up");
    let attempts_before = attempts.synced_count();
    let on_plain = tokio::spawn({
        let client = waiters.clone();
        let x = x.clone();
        async move {
            let guard = client.lock(&x).lock_with_lease(LEASE).await.expect("waiter on x");
            let at = Instant::now();
            guard.unlock().await.expect("unlock x");
            at
        }
    });
    assert!(wait_until(Duration::from_secs(5), || waiters.local_waiters(&x) == 1).await);
    // Its fast-path attempt was answered "held" (it queued as the head of x's queue)
    // before it registered, and its client's subscription was confirmed all along, so
    // it needs no catch-up attempt: none of it is in flight when `x` is released, and
    // only a wake-up (or its 30 s timer) can let it in now.
    let attempted = wait_until(Duration::from_secs(2), || attempts.count() > attempts_before).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(attempts.synced_count(), attempts_before + 1, "one attempt: the fast path, no catch-up");

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
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
}
both_topologies!(a_release_wakes_its_lock_even_behind_another_lock_on_the_channel);

/// Counts the script calls (`EVALSHA`) on some locks, from a `MONITOR` on their node
/// (the locks share a slot): on a cluster node the other tests' calls are not counted.
struct Attempts {
    monitor: Monitor,
    node: String,
    /// `"EVALSHA" "` … `" "NUMKEYS" "KEY" "`: what follows the SHA in a call on one of
    /// the locks, as `KEY" "`.
    keys: Vec<String>,
}

impl Attempts {
    fn start(t: &Topology, keys: &[&str]) -> Attempts {
        let node = t.node_for(keys[0]);
        assert!(keys.iter().all(|k| t.node_for(k) == node), "the locks share a node");
        let keys = keys.iter().map(|k| format!("{k}\" \"")).collect();
        Attempts { monitor: Monitor::start(&node), node, keys }
    }

    /// Calls on the locks that the monitor has seen so far.
    fn count(&self) -> usize {
        let is_call = |line: &String| {
            // `TIME [DB ADDR] "EVALSHA" "SHA" "NUMKEYS" "KEY" "…`: split after the
            // `] "` into the command, the SHA, NUMKEYS and the rest from the key on.
            let Some((_, quoted)) = line.split_once("] \"") else { return false };
            let words: Vec<&str> = quoted.splitn(4, "\" \"").collect();
            words.len() == 4
                && words[0].eq_ignore_ascii_case("evalsha")
                && self.keys.iter().any(|key| words[3].starts_with(key.as_str()))
        };
        self.monitor.commands().iter().filter(|line| is_call(line)).count()
    }

    /// [`Attempts::count`] once every call sent so far has been seen.
    fn synced_count(&self) -> usize {
        self.monitor.sync(&self.node);
        self.count()
    }
}

/// A subscriber on its own fred connection(s), with a reconnect policy and, when given,
/// a broadcast buffer of `capacity` messages. On a cluster, sharded (`SSUBSCRIBE` on
/// each channel's primary), as a client's own subscriber is there.
async fn bare_subscriber(t: &Topology, capacity: Option<usize>) -> lock_pubsub::Subscriber {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
    let mut builder = Builder::from_config(Config::from_url(&t.url()).expect("url"));
    builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    if let Some(capacity) = capacity {
        builder.with_performance_config(|p| p.broadcast_channel_capacity = capacity);
    }
    let fred = builder.build_subscriber_client().expect("subscriber client");
    fred.init().await.expect("connect");
    let mode = if t.is_cluster() { lock_pubsub::PubsubMode::Sharded } else { lock_pubsub::PubsubMode::Classic };
    let subscriber = lock_pubsub::Subscriber::start_with(fred, Duration::from_secs(2), mode, None);
    assert_eq!(subscriber.mode(), mode);
    subscriber
}

/// Publishes `message` on `channel` as the scripts do (`PUBLISH`, or `SPUBLISH` on the
/// channel's primary) and returns the number of receivers the server counted.
fn publish(t: &Topology, channel: &str, message: &str) -> Option<i64> {
    t.on_key(channel, &[&t.publish_command().to_uppercase(), channel, message]).as_int()
}

/// The last waiter leaves a channel and a new one registers at once: before the task
/// sends `UNSUBSCRIBE`, while it is in flight, or after. Whatever the order, the new
/// waiter is confirmed only when the server really has the subscription (`PUBLISH`
/// counts one receiver), and a message then wakes it.
async fn a_channel_registered_again_while_unsubscribing_ends_up_subscribed(t: &Topology) {
    let subscriber = bare_subscriber(t, None).await;
    let lock: Arc<str> = Arc::from(t.name("again"));
    let channel: Arc<str> = Arc::from(format!("redisson_lock__channel:{{{lock}}}"));
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
        let receivers = publish(t, &channel, "0");
        if receivers != Some(1) {
            let later = wait_until(Duration::from_secs(1), || t.channels().len() == 1).await;
            panic!("round {round}: {receivers:?} receivers; subscribed 1 s later: {later}; {:?}", subscriber.stats());
        }
        assert!(again.wait_until(confirm()).await && again.take_turn(), "round {round}: the message woke it");
        drop(again);
    }
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
    assert!(wait_until(Duration::from_secs(5), || subscriber.active_channels().is_empty()).await);
}
both_topologies!(a_channel_registered_again_while_unsubscribing_ends_up_subscribed);

/// Two locks on one channel share one subscription: it lives while either has a
/// waiter, and goes with the last one.
async fn locks_on_one_channel_share_one_subscription(t: &Topology) {
    let subscriber = bare_subscriber(t, None).await;
    let (plain_key, braced_key) = (t.name("shared"), format!("{{{}}}", t.name("shared")));
    let channel: Arc<str> = Arc::from(format!("redisson_lock__channel:{{{plain_key}}}"));
    let deadline = || tokio::time::Instant::now() + Duration::from_secs(5);
    let plain = subscriber.register_lock(&channel, &Arc::from(plain_key.as_str()));
    let braced = subscriber.register_lock(&channel, &Arc::from(braced_key.as_str()));
    assert!(plain.subscribed_by(deadline()).await && braced.subscribed_by(deadline()).await);
    assert!(plain.take_turn() && braced.take_turn(), "each is first in its own line");
    assert_eq!(subscriber.waiters(&channel), 2);
    assert_eq!(subscriber.lock_waiters(&channel, &plain_key), 1);
    assert_eq!(subscriber.lock_waiters(&channel, &braced_key), 1);
    assert_eq!(subscriber.stats().subscribe_calls, 1, "one SUBSCRIBE for both");
    drop(plain);
    assert_eq!(publish(t, &channel, "0"), Some(1), "still subscribed for {{shared}}");
    assert!(braced.wait_until(deadline()).await && braced.take_turn());
    assert_eq!(subscriber.active_channels(), vec![channel.to_string()]);
    drop(braced);
    assert!(wait_until(Duration::from_secs(5), || t.channels().is_empty()).await);
    assert!(wait_until(Duration::from_secs(5), || subscriber.active_channels().is_empty()).await);
    assert_eq!(subscriber.stats().unsubscribe_calls, 1);
}
both_topologies!(locks_on_one_channel_share_one_subscription);
