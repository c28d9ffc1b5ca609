//! Replica acknowledgement (issue 11): `ClientBuilder::sync_replicas` on a real primary
//! with a real replica, stopped (`SIGSTOP`) or held back behind a proxy, and promoted.

use std::time::{Duration, Instant};

use leasehold::Client;
use leasehold_test_support::{client, raw, wait_until, Monitor, Proxy, RedisServer};

/// Long enough that a replica on a loaded 2-core machine acknowledges in time (acks
/// were seen to take over 300 ms under load), short enough to keep the tests quick.
const SYNC_TIMEOUT: Duration = Duration::from_millis(1_000);

async fn synced_client(url: &str) -> Client {
    Client::builder()
        .url(url)
        .command_timeout(Duration::from_secs(4))
        .sync_replicas(1, SYNC_TIMEOUT)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

fn exists(server: &RedisServer, key: &str) -> bool {
    raw(server, &["EXISTS", key]).as_int() == Some(1)
}

/// With the replica online, an acquire returns only once the replica has the lock. With
/// the replica stopped, every acquire entry point fails with `ReplicaSync` within about
/// the sync timeout, and the primary holds nothing; `lock()` does not retry it forever.
/// Once the replica is back, acquires succeed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_needs_the_replica_and_is_given_back_without_it() {
    let primary = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&primary);
    let client = synced_client(&primary.url()).await;

    let lock = client.lock("sync:order");
    let guard = lock.lock().await.expect("acquired with the replica online");
    assert!(exists(&replica, "sync:order"), "acknowledged: the replica has the lock when the acquire returns");
    guard.unlock().await.expect("unlock");
    let fenced = client.fenced_lock("sync:fenced");
    let guard = fenced.try_lock().await.expect("fenced").expect("free");
    assert!(exists(&replica, "sync:fenced"));
    let token = guard.token();
    guard.unlock().await.expect("unlock");

    replica.pause();
    let started = Instant::now();
    let err = lock.try_lock().await.expect_err("the replica is stopped");
    let took = started.elapsed();
    assert!(err.is_replica_sync(), "{err}");
    assert!(took >= SYNC_TIMEOUT && took < SYNC_TIMEOUT + Duration::from_secs(1), "failed after {took:?}");
    assert!(!exists(&primary, "sync:order"), "the hold was given back before the call returned");
    assert_eq!(lock.hold_count().await.expect("count"), 0);

    let err = tokio::time::timeout(Duration::from_secs(5), lock.lock()).await.expect("lock() ends").expect_err("no");
    assert!(err.is_replica_sync(), "lock() ends with ReplicaSync instead of retrying: {err}");
    let err = fenced.try_lock_for(Duration::from_secs(2)).await.expect_err("fenced, stopped replica");
    assert!(err.is_replica_sync(), "{err}");
    assert!(!exists(&primary, "sync:order") && !exists(&primary, "sync:fenced"));
    // Another client can take the lock at once (nothing was left held).
    let plain = client_for(&primary).await;
    let other = plain.lock("sync:order").try_lock().await.expect("try").expect("free");
    other.unlock().await.expect("unlock");

    replica.resume();
    let guard = fenced.lock().await.expect("acquired once the replica is back");
    assert!(guard.token() > token);
    assert!(exists(&replica, "sync:fenced"));
    guard.unlock().await.expect("unlock");
}

async fn client_for(server: &RedisServer) -> Client {
    client(server).await
}

/// `WAIT` goes right behind the script, without a round trip in between: through a proxy
/// that delays every chunk by 800 ms, a pipelined synced acquire takes about three
/// delays (request; script reply; `WAIT` reply, if it comes in a chunk of its own: about
/// 2.4 s, under 2.8 s with room for a slow acknowledgement), where sending `WAIT` after
/// the script's reply would take at least four (3.2 s). A client
/// without `sync_replicas` sends no `WAIT` at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_is_pipelined_behind_the_script_and_only_sent_when_asked() {
    let primary = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&primary);
    let proxy = Proxy::start(&primary.addr()).await;
    let monitor = Monitor::start(&primary.addr());
    let synced = synced_client(&proxy.url()).await;
    let plain = client_for(&primary).await;

    let guard = plain.lock("pipe:plain").lock().await.expect("plain");
    guard.unlock().await.expect("unlock");
    monitor.sync(&primary.addr());
    let commands = monitor.commands();
    assert!(!commands.iter().any(|c| c.to_lowercase().contains("\"wait\"")), "no WAIT without sync: {commands:#?}");

    proxy.set_latency(Duration::from_millis(800));
    let lock = synced.lock("pipe:synced");
    let started = Instant::now();
    let guard = lock.try_lock().await.expect("try").expect("free");
    let took = started.elapsed();
    proxy.set_latency(Duration::ZERO);
    assert!(took < Duration::from_millis(2_800), "script and WAIT took {took:?}: not pipelined");
    guard.unlock().await.expect("unlock");

    monitor.sync(&primary.addr());
    let commands = monitor.commands();
    let evalsha =
        commands.iter().position(|c| c.contains("\"EVALSHA\"") && c.contains("pipe:synced")).expect("evalsha");
    let wait = commands.iter().position(|c| c.contains("\"WAIT\"")).expect("a WAIT was sent");
    assert!(wait > evalsha, "the WAIT ran after the acquire script: {commands:#?}");
    let waits = commands.iter().filter(|c| c.contains("\"WAIT\"")).count();
    assert_eq!(waits, 1, "one WAIT for one acquire, none for the release: {commands:#?}");
}

/// Scenario 18: replica lag and promotion. The replica reaches the primary through a
/// proxy whose latency holds the replication stream back (a stopped replica would still
/// find the stream in its socket buffer and catch up when resumed). With sync on, the
/// acquire fails and leaves nothing; an unsynced holder gets a token the replica never
/// sees. The primary dies, the replica is promoted: it has no lock, and the next token it
/// issues is still larger than every token issued before, although its counter is behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_lagging_replica_has_no_lock_and_issues_larger_tokens() {
    let mut primary = RedisServer::start();
    let proxy = Proxy::start(&primary.addr()).await;
    let replica = RedisServer::start_replica_via(&primary, proxy.port());
    let synced = synced_client(&primary.url()).await;
    let plain = client_for(&primary).await;
    let counter = "redisson_lock_token:{acct:1}";

    let guard = synced.fenced_lock("acct:1").lock().await.expect("synced, replica in step");
    let first = guard.token();
    guard.unlock().await.expect("unlock");
    assert_eq!(raw(&replica, &["GET", counter]).as_str(), Some(first.to_string().as_str()));

    proxy.set_latency(Duration::from_secs(60));
    let err = synced.fenced_lock("acct:1").try_lock().await.expect_err("the replica lags");
    assert!(err.is_replica_sync(), "{err}");
    assert!(!exists(&primary, "acct:1"), "given back");
    // Without sync the acquire succeeds on the primary alone.
    let unsynced = plain.fenced_lock("acct:1").lock_with_lease(Duration::from_secs(30)).await.expect("unsynced");
    let second = unsynced.token();
    assert!(second > first);

    primary.kill();
    proxy.cut_connections(); // what the proxy held back is lost with the primary
    replica.promote();
    assert!(!exists(&replica, "acct:1"), "the promoted replica never saw the unsynced hold");
    let behind = raw(&replica, &["GET", counter]);
    assert_eq!(behind.as_str(), Some(first.to_string().as_str()), "its counter is behind the last token");

    let promoted = client_for(&replica).await;
    let guard = promoted.fenced_lock("acct:1").try_lock().await.expect("try").expect("no lock on the promoted replica");
    assert!(guard.token() > second, "{} > {second} > {first}", guard.token());
    guard.unlock().await.expect("unlock");
    drop(unsynced);
}

/// After the server forgot the scripts (`SCRIPT FLUSH`, as after a restart or a failover),
/// the script is loaded and sent again *with* a `WAIT` behind it: with the replica stopped
/// the acquire still fails. (Reloading after the first `WAIT`, as fred's
/// `evalsha_with_reload` would, leaves the retried script uncovered: that `WAIT` answered
/// for earlier writes only, and the acquire would succeed unreplicated.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_script_is_still_covered_by_a_wait() {
    let primary = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&primary);
    let client = synced_client(&primary.url()).await;
    let lock = client.fenced_lock("reload:1");
    let guard = lock.lock().await.expect("in step");
    guard.unlock().await.expect("unlock");
    assert_eq!(raw(&primary, &["SCRIPT", "FLUSH"]).as_str(), Some("OK"));
    // Every earlier write acknowledged, so a WAIT that does not cover the script answers 1.
    assert!(wait_until(Duration::from_secs(5), || primary.replicas_acknowledged_all()).await, "replica caught up");
    replica.pause();
    let err = lock.try_lock().await.expect_err("stopped replica, reloaded script");
    assert!(err.is_replica_sync(), "{err}");
    assert!(!exists(&primary, "reload:1"));
    replica.resume();
    assert_eq!(raw(&primary, &["SCRIPT", "FLUSH"]).as_str(), Some("OK"));
    let guard = lock.try_lock().await.expect("try").expect("reloaded and acknowledged");
    assert!(exists(&replica, "reload:1"));
    guard.unlock().await.expect("unlock");
}
