//! `MultiLock` (issue 20) on real servers: all or nothing, one canonical order, one
//! script per client and slot, waiting on the lock that blocked, cancellation at any
//! point, the watchdog over every member, and exclusion with Redisson holders (its
//! `RLock` scripts run by hand, as `tests/lock.rs` does).
//!
//! Tests with `both_topologies!` run on a private Redis, a private Valkey and the shared
//! cluster (`NAME::standalone`, `NAME::valkey`, `NAME::cluster`); the standalone-only
//! ones (a proxy, MONITOR of every command) on Redis and Valkey (`both_servers!`).
//! Every wait is bounded by a deadline.

use std::time::Duration;

use leasehold::{ErrorKind, MultiLock};
use leasehold_test_support::{
    both_servers, both_topologies, client, client_with, wait_until, Listener, Monitor, Proxy, RespValue, ServerKind,
    Topology,
};
use tokio::time::timeout;

/// Redisson 4.x `RedissonLock.tryLockInnerAsync` (KEYS: the lock; ARGV: lease, owner):
/// nil when acquired, else the PTTL.
const REDISSON_ACQUIRE: &str =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
     redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
     return redis.call('pttl', KEYS[1]);";

/// Redisson 4.x `RedissonBaseLock.unlockInnerAsync` with its latch (KEYS: the lock, its
/// channel, the latch; ARGV: the unlock message, lease, owner, publish command, latch
/// timeout).
const REDISSON_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; \
     if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
     local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
     if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; \
     else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; \
     return nil;";

const JAVA_OWNER: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7:1";

fn redisson_acquire(t: &Topology, name: &str) -> RespValue {
    t.on_key(name, &["EVAL", REDISSON_ACQUIRE, "1", name, "30000", JAVA_OWNER])
}

fn redisson_unlock(t: &Topology, name: &str) -> RespValue {
    // Redisson's prefixName: `p:N` when N contains `{`, else `p:{N}`.
    let tagged = if name.contains('{') { name.to_owned() } else { format!("{{{name}}}") };
    let channel = format!("redisson_lock__channel:{tagged}");
    let latch = format!("redisson_unlock_latch:{tagged}:0123456789abcdef0123456789abcdef");
    let reply = t.on_key(
        name,
        &["EVAL", REDISSON_UNLOCK, "3", name, &channel, &latch, "0", "30000", JAVA_OWNER, t.publish_command(), "20000"],
    );
    t.on_key(name, &["DEL", &latch]);
    reply
}

/// The EVALSHA lines of `monitor` that name any of `keys`.
fn scripts_on(monitor: &Monitor, keys: &[String]) -> usize {
    let quoted: Vec<String> = keys.iter().map(|key| format!("\"{key}\"")).collect();
    monitor
        .commands()
        .iter()
        .filter(|l| l.to_lowercase().contains("\"evalsha\"") && quoted.iter().any(|q| l.contains(q.as_str())))
        .count()
}

/// The EVALSHA lines of `monitor` that name every one of `keys` (a group's script; a
/// single lock's script names one lock key).
fn scripts_on_all(monitor: &Monitor, keys: &[String]) -> usize {
    let quoted: Vec<String> = keys.iter().map(|key| format!("\"{key}\"")).collect();
    monitor
        .commands()
        .iter()
        .filter(|l| l.to_lowercase().contains("\"evalsha\"") && quoted.iter().all(|q| l.contains(q.as_str())))
        .count()
}

/// A same-slot set is one script, in Redisson's `RLock` layout for every member (owner
/// field = 1, the watchdog lease); a release gives every member back.
async fn a_same_slot_set_is_one_script_in_redissons_layout(t: &Topology) {
    let client = t.client().await;
    let names = [t.name("{acct}:2"), t.name("{acct}:1"), t.name("{acct}:3")];
    let multi = client.multi_lock(&names);
    let monitor = Monitor::start(&t.node_for(&names[0]));
    let guard = multi.try_lock().await.expect("try_lock").expect("a free set is taken");
    monitor.sync(&t.node_for(&names[0]));
    assert_eq!(scripts_on(&monitor, &names), 1, "one script took the whole set: {:?}", monitor.commands());
    for (lock, name) in multi.locks().iter().zip([&names[1], &names[0], &names[2]]) {
        assert_eq!(lock.key(), name.as_str(), "canonical order is by key within a slot");
        assert_eq!(t.hgetall(name), vec![(lock.owner().to_owned(), "1".to_owned())]);
        let ttl = t.pttl(name);
        assert!(ttl > 25_000 && ttl <= 30_000, "watchdog lease, got {ttl}");
    }
    assert_eq!(guard.guards().len(), 3);
    guard.unlock().await.expect("unlock");
    for name in &names {
        assert!(!t.exists(name), "{name} released");
    }
    // A second acquire through the same handle is one script again.
    let monitor = Monitor::start(&t.node_for(&names[0]));
    let guard = multi.lock().await.expect("lock");
    monitor.sync(&t.node_for(&names[0]));
    assert_eq!(scripts_on(&monitor, &names), 1, "{:?}", monitor.commands());
    guard.unlock().await.expect("unlock");
}
both_topologies!(a_same_slot_set_is_one_script_in_redissons_layout);

/// Two callers naming the same locks in opposite orders never deadlock: every round of
/// both completes. Each caller's set spans two clients, so that it is taken in more
/// than one round trip even on a standalone server (one client's set there is one
/// atomic script, which cannot deadlock whatever the order).
async fn opposite_order_callers_never_deadlock(t: &Topology) {
    let (a1, a2, b1, b2) = (t.client().await, t.client().await, t.client().await, t.client().await);
    let (x, y, z) = (t.name("fork-x"), t.name("fork-y"), t.name("fork-z"));
    let forward = MultiLock::new([a1.lock(&x), a2.lock(&y), a1.lock(&z)]);
    let backward = MultiLock::new([b1.lock(&z), b2.lock(&y), b2.lock(&x)]);
    let rounds = 25;
    let run = |multi: MultiLock| async move {
        for _ in 0..rounds {
            let guard = multi.lock().await.expect("lock");
            tokio::task::yield_now().await;
            guard.unlock().await.expect("unlock");
        }
    };
    let both = async { tokio::join!(tokio::spawn(run(forward)), tokio::spawn(run(backward))) };
    let (f, g) = timeout(Duration::from_secs(20), both).await.expect("no deadlock: both callers finish");
    f.expect("forward task");
    g.expect("backward task");
    for name in [&x, &y, &z] {
        assert!(!t.exists(name));
    }
}
both_topologies!(opposite_order_callers_never_deadlock);

/// A Redisson holder of any member excludes the set (and nothing else is left held);
/// its release (Redisson's unlock script, which publishes `0`) wakes a waiting set at
/// once; while the set is held, Redisson's acquire of every member gets a PTTL.
async fn redisson_holders_of_any_member_exclude_the_set(t: &Topology) {
    let client = t.client().await;
    let names = [t.name("{order}:a"), t.name("{order}:b"), t.name("stock")];
    for blocked in &names {
        assert_eq!(redisson_acquire(t, blocked), RespValue::Nil, "Java takes {blocked}");
        let multi = client.multi_lock(&names);
        assert!(multi.try_lock().await.expect("try").is_none(), "Java's hold of {blocked} excludes the set");
        for name in names.iter().filter(|n| *n != blocked) {
            assert!(!t.exists(name), "{name} was given back");
        }
        let waiting = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let guard = multi.try_lock_for(Duration::from_secs(10)).await.expect("wait").expect("taken");
            (started.elapsed(), guard, multi)
        });
        assert!(
            wait_until(Duration::from_secs(5), || t.hgetall(blocked).len() == 2).await,
            "the waiter flagged the holder"
        );
        assert_eq!(redisson_unlock(t, blocked), RespValue::Integer(1));
        let (waited, guard, multi) = timeout(Duration::from_secs(5), waiting).await.expect("woken").expect("task");
        assert!(waited < Duration::from_secs(5), "woken by the release, not the 30 s lease: {waited:?}");
        for (lock, name) in multi.locks().iter().map(|l| (l, l.key().to_owned())) {
            assert_eq!(t.hgetall(&name), vec![(lock.owner().to_owned(), "1".to_owned())]);
            let reply = redisson_acquire(t, &name);
            assert!(reply.as_int().is_some_and(|ttl| ttl > 0), "Java is excluded from {name}: {reply:?}");
        }
        guard.unlock().await.expect("unlock");
        for name in &names {
            assert!(!t.exists(name));
        }
    }
}
both_topologies!(redisson_holders_of_any_member_exclude_the_set);

/// A member the caller holds already is re-entered and comes back to its count, on
/// success and on failure; a failed try leaves nothing else held.
async fn a_held_member_comes_back_to_its_count(t: &Topology) {
    let client = t.client().await;
    let (x, y) = (t.name("held-x"), t.name("held-y"));
    let mine = client.lock(&x);
    let outer = mine.lock().await.expect("outer hold of x");
    let owner = mine.owner().to_owned();
    let blocker = client.lock(&y).try_lock().await.expect("try").expect("another owner takes y");
    let multi = MultiLock::new([client.lock(&y), mine]);
    assert!(multi.try_lock().await.expect("try").is_none());
    let started = tokio::time::Instant::now();
    assert!(multi.try_lock_for(Duration::from_millis(300)).await.expect("bounded").is_none(), "the wait ran out");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290) && waited < Duration::from_secs(3),
        "one bound for the set: {waited:?}"
    );
    // Given back at the deadline, in the background.
    assert!(
        wait_until(Duration::from_secs(5), || t.hgetall(&x) == vec![(owner.clone(), "1".to_owned())]).await,
        "x back to its one hold: {:?}",
        t.hgetall(&x)
    );
    blocker.unlock().await.expect("unlock blocker");
    let guard = multi.try_lock().await.expect("try").expect("taken");
    assert_eq!(t.hgetall(&x), vec![(owner.clone(), "2".to_owned())], "x re-entered");
    guard.unlock().await.expect("unlock");
    assert_eq!(t.hgetall(&x), vec![(owner, "1".to_owned())], "x back to the outer hold");
    assert!(!t.exists(&y));
    outer.unlock().await.expect("outer unlock");
    assert!(!t.exists(&x));
}
both_topologies!(a_held_member_comes_back_to_its_count);

/// The watchdog renews every member past its lease; forcing one member away fires
/// `lost()` and `is_lost()`; a fixed lease is never renewed.
async fn the_watchdog_renews_every_member_and_lost_fires(on: ServerKind) {
    let server = on.start();
    let watchdog = Duration::from_millis(900);
    let client = client_with(&server.url(), watchdog).await;
    let b = client_with(&server.url(), watchdog).await;
    let multi = MultiLock::new([client.lock("wd-a"), b.lock("wd-b"), client.lock("wd-c")]);
    let guard = multi.lock().await.expect("lock");
    let held_since = tokio::time::Instant::now();
    // Past two leases: every member is still there, renewed.
    while held_since.elapsed() < watchdog * 2 {
        for name in ["wd-a", "wd-b", "wd-c"] {
            assert!(leasehold_test_support::pttl(&server, name) > 0, "{name} renewed");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!guard.is_lost());
    assert!(client.lock("wd-b").force_unlock().await.expect("force"));
    timeout(Duration::from_secs(5), guard.lost()).await.expect("lost() fires when one member is lost");
    assert!(guard.is_lost());
    let err = guard.unlock().await.expect_err("a lost member");
    assert!(err.is_lock_lost() || err.is_not_owner(), "{err}");
    for name in ["wd-a", "wd-b", "wd-c"] {
        assert_eq!(leasehold_test_support::pttl(&server, name), -2, "{name} gone");
    }
    assert!(
        wait_until(Duration::from_secs(3), || client.stats().watchdog.registered == 0
            && b.stats().watchdog.registered == 0)
        .await
    );

    let fixed = multi.try_lock_with(Duration::ZERO, Duration::from_millis(600)).await.expect("try").expect("taken");
    for name in ["wd-a", "wd-b", "wd-c"] {
        let ttl = leasehold_test_support::pttl(&server, name);
        assert!(ttl > 0 && ttl <= 600, "{name}: fixed lease, got {ttl}");
    }
    assert_eq!(client.stats().watchdog.registered, 0, "a fixed lease is not renewed");
    assert_eq!(fixed.keys(), ["wd-a", "wd-b", "wd-c"], "canonical order");
    assert!(fixed.lease_deadline() <= std::time::Instant::now() + Duration::from_millis(600));
    assert!(wait_until(Duration::from_secs(5), || fixed.is_lost()).await, "the lease runs out");

    // `detach` stops every member's renewal and sends nothing: the keys expire.
    let detached = multi.lock().await.expect("lock");
    assert!(detached.is_renewed() && client.stats().watchdog.registered > 0);
    detached.detach();
    assert_eq!(client.stats().watchdog.registered + b.stats().watchdog.registered, 0, "no member renewed");
    for name in ["wd-a", "wd-b", "wd-c"] {
        assert!(leasehold_test_support::pttl(&server, name) > 0, "{name} still held: nothing sent");
    }
    let gone = || ["wd-a", "wd-b", "wd-c"].iter().all(|name| leasehold_test_support::pttl(&server, name) == -2);
    assert!(wait_until(Duration::from_secs(5), gone).await, "every member expires with its lease");
}
both_servers!(the_watchdog_renews_every_member_and_lost_fires);

/// Dropping the acquire future at any point (every 15 ms step of a sequence of slow
/// round trips: scripts in flight, a wait for a held member, its claim, the next
/// client's group) leaves no member held and no renewal registered.
async fn cancellation_at_any_point_releases_all(on: ServerKind) {
    let server = on.start();
    let proxy_a = Proxy::start(&server.addr()).await;
    let proxy_b = Proxy::start(&server.addr()).await;
    let a = client_with(&proxy_a.url(), Duration::from_secs(30)).await;
    let b = client_with(&proxy_b.url(), Duration::from_secs(30)).await;
    let direct = client(&server).await;
    proxy_a.set_latency(Duration::from_millis(20));
    proxy_b.set_latency(Duration::from_millis(20));
    let multi = MultiLock::new([a.lock("c-1"), a.lock("c-2"), b.lock("c-3"), b.lock("c-4")]);
    let owners: Vec<String> = multi.locks().iter().map(|l| l.owner().to_owned()).collect();
    let mut completed = 0;
    for step in 0..30u64 {
        // Another owner holds c-2 for a short lease, so the set waits for it. It may
        // itself wait: an acquire of the last step still on its way through the proxy
        // can land after the checks below, and its undo then gives c-2 back.
        let blocker = direct.lock("c-2").try_lock_with(Duration::from_secs(5), Duration::from_millis(150)).await;
        let blocker = blocker.expect("blocker").expect("c-2 given back between steps");
        if let Ok(guard) = timeout(Duration::from_millis(step * 15), multi.lock()).await {
            completed += 1;
            drop(guard.expect("lock"));
        }
        let released = wait_until(Duration::from_secs(5), || {
            let held = ["c-1", "c-2", "c-3", "c-4"].iter().any(|name| {
                leasehold_test_support::hgetall(&server, name)
                    .iter()
                    .any(|(field, _)| owners.iter().any(|o| field.starts_with(o)))
            });
            !held && a.stats().watchdog.registered == 0 && b.stats().watchdog.registered == 0
        })
        .await;
        assert!(released, "step {step}: every member given back and no renewal left");
        drop(blocker);
        // A write of ours still on its way through the proxy would show here: c-2 kept.
        let c2_free = wait_until(Duration::from_secs(3), || leasehold_test_support::pttl(&server, "c-2") == -2).await;
        assert!(c2_free, "step {step}: c-2 free again, no late acquire of ours kept it");
    }
    for name in ["c-1", "c-2", "c-3", "c-4"] {
        assert_eq!(leasehold_test_support::pttl(&server, name), -2, "{name} left held");
    }
    assert!(completed > 0, "the later steps complete the acquire");
}
both_servers!(cancellation_at_any_point_releases_all);

/// Bad input is a typed `InvalidArgument` from the first operation, before anything
/// is sent: no member, the same name twice (one client, or two clients of one server),
/// too many members, an empty name, a bad lease.
async fn bad_input_is_rejected_before_anything_is_sent(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let other = leasehold_test_support::client(&server).await;
    let monitor = Monitor::start(&server.addr());
    let too_many: Vec<String> = (0..=MultiLock::MAX_MEMBERS).map(|i| format!("m{i}")).collect();
    let cases: Vec<(&str, MultiLock)> = vec![
        ("no member", MultiLock::new(Vec::new())),
        ("no name", client.multi_lock(Vec::<String>::new())),
        ("a name twice", client.multi_lock(["a", "b", "a"])),
        ("a lock twice through two clients", MultiLock::new([client.lock("a"), other.lock("a")])),
        ("too many", client.multi_lock(&too_many)),
        ("an empty name", client.multi_lock(["a", ""])),
    ];
    for (what, multi) in &cases {
        for err in [
            multi.try_lock().await.expect_err(what),
            multi.lock().await.expect_err(what),
            multi.try_lock_with(Duration::from_secs(1), Duration::from_secs(1)).await.expect_err(what),
        ] {
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: {err}");
        }
    }
    let fine = client.multi_lock(["a", "b"]);
    assert!(fine.lock_with_lease(Duration::ZERO).await.expect_err("zero lease").is_invalid_argument());
    assert!(fine
        .try_lock_with(Duration::MAX, Duration::from_secs(1))
        .await
        .expect_err("overflow")
        .is_invalid_argument());
    let max: Vec<String> = (0..MultiLock::MAX_MEMBERS).map(|i| format!("m{i}")).collect();
    monitor.sync(&server.addr());
    assert_eq!(monitor.commands(), Vec::<String>::new(), "no command reached the server");
    let guard = client.multi_lock(&max).try_lock().await.expect("the maximum is allowed").expect("taken");
    guard.unlock().await.expect("unlock");
}
both_servers!(bad_input_is_rejected_before_anything_is_sent);

/// A same-slot set is given back by one script (issue 29 item 5), as it was taken: one
/// EVALSHA names every member, and no member is released by a script of its own. That
/// one script wakes the waiters of every member: each member's leasehold waiter (queued,
/// another client) is handed its lock and gets it well within the 30 s lease.
async fn unlock_is_one_script_that_wakes_every_members_waiter(t: &Topology) {
    let (holder, waiters) = (t.client().await, t.client().await);
    let names = [t.name("{rel}:a"), t.name("{rel}:b"), t.name("{rel}:c")];
    let guard = holder.multi_lock(&names).lock().await.expect("lock");
    let mut waiting = Vec::new();
    for name in &names {
        let lock = waiters.lock(name);
        waiting.push(tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let guard = lock.try_lock_for(Duration::from_secs(20)).await.expect("wait").expect("handed the lock");
            (started.elapsed(), guard)
        }));
    }
    for name in &names {
        assert!(
            wait_until(Duration::from_secs(5), || t.hgetall(name).len() == 2).await,
            "the waiter of {name} flagged the holder: {:?}",
            t.hgetall(name)
        );
    }
    let monitor = Monitor::start(&t.node_for(&names[0]));
    guard.unlock().await.expect("unlock");
    for task in waiting {
        let (waited, guard) = timeout(Duration::from_secs(10), task).await.expect("woken").expect("task");
        assert!(waited < Duration::from_secs(10), "woken by the release, not the lease: {waited:?}");
        guard.unlock().await.expect("waiter unlock");
    }
    monitor.sync(&t.node_for(&names[0]));
    assert_eq!(scripts_on_all(&monitor, &names), 1, "one script released the set: {:?}", monitor.commands());
    for name in &names {
        assert!(!t.exists(name), "{name} free");
    }
}
both_topologies!(unlock_is_one_script_that_wakes_every_members_waiter);

/// The group release publishes Redisson's unlock message (`0`) on every member's own
/// channel, so Java waiters of each member wake (`Listener` stands in for Java's
/// `LockPubSub`); dropping the guard releases the group by one script too.
async fn a_group_release_publishes_on_every_members_channel(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let names: Vec<String> = ["pub-a", "pub-b", "pub-c"].map(str::to_owned).to_vec();
    let mut listeners: Vec<Listener> =
        names.iter().map(|name| Listener::start(&server, &format!("redisson_lock__channel:{{{name}}}"))).collect();
    let multi = client.multi_lock(&names);
    let monitor = Monitor::start(&server.addr());
    multi.lock().await.expect("lock").unlock().await.expect("unlock");
    for listener in &mut listeners {
        assert_eq!(listener.next_message(), "0", "Redisson's unlock message");
    }
    // Dropped: released in the background, by one script as well.
    drop(multi.lock_with_lease(Duration::from_secs(30)).await.expect("lock"));
    for listener in &mut listeners {
        assert_eq!(listener.next_message(), "0", "the background release publishes too");
    }
    assert!(names.iter().all(|name| leasehold_test_support::pttl(&server, name) == -2), "every member free");
    monitor.sync(&server.addr());
    assert_eq!(scripts_on_all(&monitor, &names), 4, "two acquires, two releases: {:?}", monitor.commands());
    assert_eq!(scripts_on(&monitor, &names), 4, "no member on its own: {:?}", monitor.commands());
}
both_servers!(a_group_release_publishes_on_every_members_channel);

/// The reply to a group release is lost after the server ran it: the retry sends the
/// same absolute counts, so each member's count drops exactly once (a re-entered member
/// back to its outer hold, the others free), and the unlock succeeds.
async fn a_lost_group_release_reply_counts_once(on: ServerKind) {
    let server = on.start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let mine = client.lock("replay-x");
    let outer = mine.lock().await.expect("outer hold of x");
    let owner = mine.owner().to_owned();
    let multi = MultiLock::new([mine, client.lock("replay-y"), client.lock("replay-z")]);
    let guard = multi.lock().await.expect("lock");
    assert_eq!(leasehold_test_support::hgetall(&server, "replay-x"), vec![(owner.clone(), "2".to_owned())]);
    let monitor = Monitor::start(&server.addr());
    proxy.lose_next_reply();
    guard.unlock().await.expect("the lost reply is retried with the same counts");
    assert_eq!(proxy.lost_replies(), 1, "the reply really was lost");
    monitor.sync(&server.addr());
    let names = ["replay-x", "replay-y", "replay-z"].map(str::to_owned);
    assert_eq!(scripts_on_all(&monitor, &names), 2, "sent, then retried once: {:?}", monitor.commands());
    assert_eq!(leasehold_test_support::hgetall(&server, "replay-x"), vec![(owner, "1".to_owned())], "x once");
    for name in ["replay-y", "replay-z"] {
        assert_eq!(leasehold_test_support::pttl(&server, name), -2, "{name} released");
    }
    outer.unlock().await.expect("outer unlock");
    assert_eq!(leasehold_test_support::pttl(&server, "replay-x"), -2);
}
both_servers!(a_lost_group_release_reply_counts_once);

/// Each member answers for itself, as its own unlock would: a member whose key was
/// deleted behind the set's back is `NotOwner` (its key named), and the others are
/// released all the same, in the one script.
async fn each_member_reports_its_own_unlock_error(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let names = ["own-a", "own-b", "own-c"].map(str::to_owned);
    let guard = client.multi_lock(&names).lock_with_lease(Duration::from_secs(30)).await.expect("lock");
    assert_eq!(leasehold_test_support::raw(&server, &["DEL", "own-b"]), RespValue::Integer(1));
    let error = guard.unlock().await.expect_err("own-b is no longer held");
    assert_eq!(error.kind(), ErrorKind::NotOwner, "{error}");
    assert_eq!(error.key(), Some("own-b"), "{error}");
    for name in ["own-a", "own-c"] {
        assert_eq!(leasehold_test_support::pttl(&server, name), -2, "{name} released all the same");
    }
}
both_servers!(each_member_reports_its_own_unlock_error);
