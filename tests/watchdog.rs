//! Watchdog mode: leases renewed while held, never after; the holder told when lost.
//!
//! Every test that can runs three times (`NAME::standalone`, `NAME::valkey`,
//! `NAME::cluster`, see `both_topologies!`): on a private Redis server, on a private
//! Valkey server, and on the shared cluster, where every name has the test's prefix.
//! The tests that restart the server or put a proxy in front of it run on standalone
//! servers only, Redis and Valkey (`NAME::redis`, `NAME::valkey`, see `both_servers!`).

use std::time::{Duration, Instant};

use leasehold::ErrorKind;
use leasehold_test_support::{
    both_servers, both_topologies, client_with, pttl, wait_until, HolderProcess, Monitor, Proxy, RespValue, ServerKind,
    Topology,
};

const WATCHDOG: Duration = Duration::from_millis(300);
const PERIOD: Duration = Duration::from_millis(100);

/// Held for ten watchdog timeouts: still held and exclusive all along; after unlock the
/// key is gone and stays gone.
async fn renewed_for_ten_timeouts_then_gone_for_good(t: &Topology) {
    let client = t.client_with(WATCHDOG).await;
    let name = t.name("renewed");
    let lock = client.lock(&name);
    let guard = lock.lock().await.expect("lock");
    assert!(guard.is_watchdog() && guard.is_renewed());
    let other = client.lock(&name);
    let start = Instant::now();
    while start.elapsed() < WATCHDOG * 10 {
        assert!(other.try_lock().await.expect("other").is_none(), "other owner got in at {:?}", start.elapsed());
        let ttl = t.pttl(&name);
        assert!(ttl > 0, "key expired at {:?}", start.elapsed());
        assert!(!guard.is_lost());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(client.stats().watchdog.calls >= 20, "renewed every period: {:?}", client.stats().watchdog);
    guard.unlock().await.expect("unlock");
    assert_eq!(client.stats().watchdog.registered, 0);
    let node = t.node_for(&name);
    let monitor = Monitor::start(&node);
    // Three periods without any renewal touching the key. (The PTTLs straight to the
    // node: on a cluster, finding the node asks for the key's slot, which the monitor
    // would see.)
    let pttl = || leasehold_test_support::raw_command(&node, &[b"PTTL", name.as_bytes()]);
    let quiet = Instant::now();
    while quiet.elapsed() < PERIOD * 3 {
        assert_eq!(pttl(), RespValue::Integer(-2));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    monitor.sync(&node);
    let quoted = format!("\"{name}\"");
    let touched: Vec<String> =
        monitor.commands().into_iter().filter(|l| l.contains(&quoted) && !l.contains("\"PTTL\"")).collect();
    assert!(touched.is_empty(), "something touched the key after unlock: {touched:?}");
}
both_topologies!(renewed_for_ten_timeouts_then_gone_for_good);

/// The key is deleted behind the holder's back: `lost()` fires within one period, and
/// no renewal recreates it; unlock reports the loss.
async fn deleted_key_is_reported_lost_within_a_period(t: &Topology) {
    let client = t.client_with(WATCHDOG).await;
    let name = t.name("deleted");
    let guard = client.lock(&name).lock().await.expect("lock");
    t.on_key(&name, &["DEL", &name]);
    let start = Instant::now();
    // One period plus generous slack for a loaded CI machine.
    tokio::time::timeout(PERIOD + Duration::from_millis(400), guard.lost()).await.expect("lost within one period");
    assert!(guard.is_lost());
    assert!(start.elapsed() <= PERIOD + Duration::from_millis(400));
    assert_eq!(client.stats().watchdog.registered, 0, "a lost hold is never renewed again");
    tokio::time::sleep(PERIOD * 3).await;
    assert_eq!(t.pttl(&name), -2, "nothing recreated the key");
    let err = guard.unlock().await.expect_err("lost");
    assert_eq!(err.kind(), ErrorKind::LockLost);
}
both_topologies!(deleted_key_is_reported_lost_within_a_period);

/// Force-unlocked by another client: the holder learns it.
async fn force_unlock_by_another_client_is_reported_lost(t: &Topology) {
    let holder = t.client_with(WATCHDOG).await;
    let other = t.client().await;
    let name = t.name("forced");
    let guard = holder.lock(&name).lock().await.expect("lock");
    assert!(other.lock(&name).force_unlock().await.expect("force"));
    tokio::time::timeout(PERIOD + Duration::from_millis(400), guard.lost()).await.expect("lost");
    let newer = other.lock(&name).try_lock().await.expect("try").expect("free after force unlock");
    tokio::time::sleep(PERIOD * 2).await;
    assert!(guard.unlock().await.expect_err("lost").is_lock_lost());
    assert!(other.lock(&name).is_locked().await.expect("locked"), "new holder untouched");
    newer.unlock().await.expect("unlock");
}
both_topologies!(force_unlock_by_another_client_is_reported_lost);

/// Redis restarts without persistence while the lock is held: `lost()` fires and
/// others can acquire. Standalone only (a restart on the shared cluster would take
/// every other test's locks).
async fn server_restart_is_reported_lost(on: ServerKind) {
    let mut server = on.start();
    let client = client_with(&server.url(), Duration::from_millis(600)).await;
    let guard = client.lock("restart").lock().await.expect("lock");
    server.restart();
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("lost after restart");
    let other = client_with(&server.url(), Duration::from_millis(600)).await;
    let newer = other.lock("restart").try_lock_for(Duration::from_secs(5)).await.expect("try").expect("acquired");
    assert!(guard.unlock().await.is_err());
    assert!(other.lock("restart").is_locked().await.expect("locked"), "new holder untouched");
    newer.unlock().await.expect("unlock");
}
both_servers!(server_restart_is_reported_lost);

/// A holder process killed with SIGKILL: the lock frees within the lease plus slack.
async fn killed_holder_frees_the_lock_within_its_lease(t: &Topology) {
    let lease = Duration::from_millis(1_000);
    let name = t.name("killed");
    let (holder, owner) = HolderProcess::start(env!("CARGO_BIN_EXE_holder"), &t.url(), &name, lease).await;
    assert_eq!(t.on_key(&name, &["HEXISTS", &name, &owner]).as_int(), Some(1));
    let client = t.client().await;
    // Let a few renewals happen, proving the lock outlives its first lease.
    tokio::time::sleep(lease * 2).await;
    assert_eq!(t.on_key(&name, &["HEXISTS", &name, &owner]).as_int(), Some(1), "renewed past its first lease");
    holder.signal("KILL");
    let killed_at = Instant::now();
    let guard = client.lock(&name).lock_with_lease(Duration::from_secs(10)).await.expect("lock");
    let freed = killed_at.elapsed();
    assert!(freed <= lease + Duration::from_millis(800), "freed after {freed:?}");
    assert!(freed >= lease / 3, "freed too early ({freed:?}): the lease was not renewed up to the kill");
    guard.unlock().await.expect("unlock");
}
both_topologies!(killed_holder_frees_the_lock_within_its_lease);

/// A holder stopped past its lease (SIGSTOP), then resumed: another owner got the lock
/// meanwhile; the resumed holder is told it is lost, and its unlock fails without
/// touching the new holder.
async fn stopped_holder_resumes_lost_and_cannot_unlock_the_new_holder(t: &Topology) {
    let lease = Duration::from_millis(600);
    let name = t.name("stopped");
    let (mut holder, _) = HolderProcess::start(env!("CARGO_BIN_EXE_holder"), &t.url(), &name, lease).await;
    let client = t.client().await;
    holder.signal("STOP");
    let lock = client.lock(&name);
    let guard =
        lock.try_lock_with(Duration::from_secs(5), Duration::from_secs(30)).await.expect("try").expect("got it");
    let before = t.hgetall(&name);
    holder.signal("CONT");
    assert_eq!(holder.next_line(Duration::from_secs(5)).await.as_deref(), Some("LOST"));
    holder.send_unlock().await;
    let answer = holder.next_line(Duration::from_secs(5)).await.expect("unlock answer");
    assert!(answer == "UNLOCK ERR lock lost" || answer == "UNLOCK ERR not owner", "{answer}");
    assert_eq!(t.hgetall(&name), before, "new holder untouched");
    assert!(lock.is_held().await.expect("held"));
    guard.unlock().await.expect("unlock");
}
both_topologies!(stopped_holder_resumes_lost_and_cannot_unlock_the_new_holder);

/// A `lock()` cancelled mid-wait leaves no renewal entry and no held key.
async fn lock_cancelled_mid_wait_leaves_nothing(t: &Topology) {
    let client = t.client_with(WATCHDOG).await;
    let name = t.name("cancel");
    let holder = client.lock(&name).lock_with_lease(Duration::from_secs(30)).await.expect("holder");
    let waiter = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move { client.lock(&name).lock().await.map(drop) }
    });
    assert!(wait_until(Duration::from_secs(5), || client.local_waiters(&name) == 1).await);
    waiter.abort();
    assert!(waiter.await.expect_err("aborted").is_cancelled());
    assert_eq!(client.local_waiters(&name), 0);
    holder.unlock().await.expect("unlock");
    tokio::time::sleep(PERIOD * 3).await;
    assert_eq!(client.stats().watchdog.registered, 0);
    assert_eq!(t.pttl(&name), -2);
}
both_topologies!(lock_cancelled_mid_wait_leaves_nothing);

/// A `lock()` cancelled while its acquire is in flight (slowed by a proxy): the hold it
/// took on the server is given back; no renewal entry remains. Standalone only: the
/// proxy stands in front of one server, and a cluster client would go around it to the
/// addresses `CLUSTER SLOTS` names.
async fn lock_cancelled_while_acquiring_gives_the_hold_back(on: ServerKind) {
    let server = on.start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), WATCHDOG).await;
    // Load the scripts first so the in-flight call is the acquire itself.
    client.lock("warm").try_lock().await.expect("warm").expect("warm lock").unlock().await.expect("unlock");
    proxy.set_latency(Duration::from_millis(150));
    let monitor = Monitor::start(&server.addr());
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.lock("inflight").lock().await.map(drop) }
    });
    // The request reaches the server after ~150 ms; the reply would arrive ~150 ms after
    // the server ran it: cancel in between, once the server has taken the lock.
    assert!(
        wait_until(Duration::from_secs(5), || { monitor.lines().iter().any(|l| l.contains("\"hset\" \"inflight\"")) })
            .await,
        "the acquire did reach the server"
    );
    task.abort();
    let _ = task.await;
    assert!(wait_until(Duration::from_secs(5), || pttl(&server, "inflight") == -2).await, "the hold was given back");
    assert_eq!(client.stats().watchdog.registered, 0);
}
both_servers!(lock_cancelled_while_acquiring_gives_the_hold_back);

/// Reentrant holds share one renewal: lock, lock, unlock → still renewed; unlock →
/// renewal stops.
async fn reentrant_holds_share_one_renewal(t: &Topology) {
    let client = t.client_with(WATCHDOG).await;
    let name = t.name("shared-renewal");
    let lock = client.lock(&name);
    let first = lock.lock().await.expect("first");
    let second = lock.lock().await.expect("second");
    assert_eq!(client.stats().watchdog.registered, 1, "one entry for both holds");
    second.unlock().await.expect("unlock second");
    assert!(first.is_renewed());
    tokio::time::sleep(WATCHDOG * 3).await;
    assert!(lock.is_held().await.expect("held"), "still renewed after three timeouts");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    first.unlock().await.expect("unlock first");
    assert_eq!(client.stats().watchdog.registered, 0);
    assert_eq!(t.pttl(&name), -2);
}
both_topologies!(reentrant_holds_share_one_renewal);

/// An explicit lease is never renewed.
async fn explicit_lease_is_never_renewed(t: &Topology) {
    let client = t.client_with(WATCHDOG).await;
    let name = t.name("fixed");
    let guard = client.lock(&name).lock_with_lease(Duration::from_millis(400)).await.expect("lock");
    assert_eq!(client.stats().watchdog.registered, 0);
    assert!(!guard.is_renewed());
    tokio::time::timeout(Duration::from_secs(2), guard.lost()).await.expect("lost at the lease deadline");
    assert!(wait_until(Duration::from_secs(2), || t.pttl(&name) == -2).await);
}
both_topologies!(explicit_lease_is_never_renewed);

/// An `unlock()` cancelled mid-flight (slowed by a proxy) stops the renewal at once;
/// the release already sent still applies. Standalone only (the proxy, as above).
async fn cancelled_unlock_leaves_no_renewal(on: ServerKind) {
    let server = on.start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), WATCHDOG).await;
    let lock = client.lock("cancel-unlock");
    let guard = lock.lock().await.expect("lock");
    lock.try_lock().await.expect("re-enter").expect("re-entered").unlock().await.expect("warm release");
    proxy.set_latency(Duration::from_millis(200));
    assert_eq!(client.stats().watchdog.registered, 1);
    let cancelled = tokio::time::timeout(Duration::from_millis(50), guard.unlock()).await;
    assert!(cancelled.is_err(), "the unlock was cancelled mid-flight");
    assert_eq!(client.stats().watchdog.registered, 0, "renewal stopped before the release was answered");
    assert!(wait_until(Duration::from_secs(5), || pttl(&server, "cancel-unlock") == -2).await);
}
both_servers!(cancelled_unlock_leaves_no_renewal);

/// `detach` deregisters the hold from the watchdog at once and sends nothing: the TTL
/// runs down and the key expires with its lease, and no renewal (nor release) touches
/// it after the detach. A detached fenced guard behaves the same.
async fn a_detached_guard_is_not_renewed_and_expires_with_its_lease(t: &Topology) {
    let client = t.client_with(WATCHDOG).await;
    for fenced in [false, true] {
        let name = t.name(if fenced { "detached-fenced" } else { "detached" });
        let node = t.node_for(&name);
        let calls = client.stats().watchdog.calls;
        let (lock, fenced_lock) = (client.lock(&name), client.fenced_lock(&name));
        let guard = if fenced { None } else { Some(lock.lock().await.expect("lock")) };
        let fenced_guard = if fenced { Some(fenced_lock.lock().await.expect("fenced lock")) } else { None };
        // Renewed while attached: the key outlives its first lease.
        assert!(
            wait_until(Duration::from_secs(5), || client.stats().watchdog.calls >= calls + 2).await,
            "renewed while attached: {:?}",
            client.stats().watchdog
        );
        let monitor = Monitor::start(&node);
        // A renewal scheduled before the detach may still be on its way (the monitor
        // starts a few ms earlier): it is allowed; one scheduled after it is not.
        let scheduled = client.stats().watchdog.calls;
        let detached_at = Instant::now();
        match (guard, fenced_guard) {
            (Some(guard), _) => guard.detach(),
            (_, Some(guard)) => guard.detach(),
            _ => unreachable!(),
        }
        assert_eq!(client.stats().watchdog.registered, 0, "deregistered synchronously");
        let pttl = || match leasehold_test_support::raw_command(&node, &[b"PTTL", name.as_bytes()]) {
            RespValue::Integer(ms) => ms,
            other => panic!("PTTL answered {other:?}"),
        };
        let first = pttl();
        assert!(first > 0 && first <= WATCHDOG.as_millis() as i64, "still held after detach: {first}");
        assert!(wait_until(Duration::from_secs(2), || pttl() == -2).await, "the key expires with its lease");
        let expired_after = detached_at.elapsed();
        // That nothing was renewed after the detach is asserted exactly below (the stats and
        // the monitor); this only bounds the expiry loosely (within two leases, where a
        // continued renewal would keep the key for good).
        assert!(expired_after < WATCHDOG * 2, "not renewed: gone after {expired_after:?}");
        assert_eq!(client.stats().watchdog.calls, scheduled, "no renewal scheduled after the detach");
        monitor.sync(&node);
        let quoted = format!("\"{name}\"");
        let touched: Vec<String> =
            monitor.commands().into_iter().filter(|l| l.contains(&quoted) && !l.contains("\"PTTL\"")).collect();
        // At most the one renewal that was in flight (EVALSHA, then HEXISTS PTTL PEXPIRE
        // inside it); nothing else (no release).
        let released = touched.iter().any(|l| l.contains("\"hdel\"") || l.to_lowercase().contains("\"del\""));
        let calls = touched.iter().filter(|l| l.to_lowercase().contains("\"evalsha\"")).count();
        assert!(!released && calls <= 1, "sent for the key after detach: {touched:?}");
    }
}
both_topologies!(a_detached_guard_is_not_renewed_and_expires_with_its_lease);
