//! `Client::health()`: the connections as fred's events report them (a server stopped
//! and started again, a connection killed with `CLIENT KILL`), the watchdog's lag under
//! a blocked runtime, the time left on renewed holds while a frozen server lets renewals
//! fail, a cluster's per-node connections, and the snapshot after `shutdown` and through
//! the blocking API. Real servers, real faults.
//!
//! The tests with a server of their own run on Redis and on Valkey (`NAME::redis`,
//! `NAME::valkey`, see `both_servers!`).

use std::time::Duration;

use leasehold_test_support::{
    both_servers, client, client_with, raw, wait_until, RedisCluster, RedisServer, ServerKind,
};

/// A server stopped (killed) and started again on its port: both connections are down
/// while it is gone (not ready), up again after, each counted as re-made once or more.
async fn health_follows_a_server_stopped_and_started_again(on: ServerKind) {
    let mut server = on.start();
    let client = client_with(&server.url(), Duration::from_secs(3)).await;
    let health = client.health();
    assert!(health.connected && health.subscriber_connected && health.is_ready(), "{health:?}");
    assert_eq!((health.reconnects, health.subscriber_reconnects), (0, 0), "the first connect is not a reconnect");
    assert_eq!(health.lease_left, None, "nothing renewed");
    assert_eq!(health.watchdog_lag, Duration::ZERO, "nothing renewed, nothing late");

    server.kill();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let health = client.health();
            !health.connected && !health.subscriber_connected
        })
        .await,
        "both connections seen down: {:?}",
        client.health()
    );
    assert!(!client.health().is_ready());

    server.restart();
    assert!(
        wait_until(Duration::from_secs(10), || client.health().is_ready()).await,
        "both connections up again: {:?}",
        client.health()
    );
    let health = client.health();
    assert!(health.reconnects >= 1 && health.subscriber_reconnects >= 1, "{health:?}");
    // And the client works on the new server.
    let guard = client.lock("health:after").try_lock().await.expect("try").expect("free");
    guard.unlock().await.expect("unlock");
}
both_servers!(health_follows_a_server_stopped_and_started_again);

/// Connections killed by the server (`CLIENT KILL`) are made again and counted on their
/// own side. The subscriber connection counts as `pubsub` only while it has a
/// subscription, so a waiter keeps one: `TYPE normal` then kills the command
/// connections (not the subscriber), and `TYPE pubsub` the subscriber alone.
async fn a_killed_connection_is_counted_on_its_own_side(on: ServerKind) {
    let server = on.start();
    let holder = client(&server).await;
    let client = client(&server).await;
    let held = holder.lock("health:kill").lock().await.expect("hold");
    let waiting = client.clone();
    let waiter = tokio::spawn(async move { waiting.lock("health:kill").lock().await });
    assert!(
        wait_until(Duration::from_secs(5), || !client.subscribed_channels().is_empty()).await,
        "the waiter's channel is subscribed"
    );

    raw(&server, &["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(
        wait_until(Duration::from_secs(5), || {
            let health = client.health();
            health.reconnects == 1 && health.connected
        })
        .await,
        "the command connection made again: {:?}",
        client.health()
    );
    assert_eq!(client.health().subscriber_reconnects, 0, "the subscriber was not touched: {:?}", client.health());

    raw(&server, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(
        wait_until(Duration::from_secs(5), || {
            let health = client.health();
            health.subscriber_reconnects == 1 && health.subscriber_connected
        })
        .await,
        "the subscriber connection made again: {:?}",
        client.health()
    );
    let health = client.health();
    assert_eq!(health.reconnects, 1, "the command connection was not touched again: {health:?}");
    assert!(health.is_ready(), "{health:?}");

    // The waiter got through both: it takes the lock once it is released.
    held.unlock().await.expect("unlock");
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter acquires")
        .expect("task")
        .expect("lock");
    guard.unlock().await.expect("unlock");
}
both_servers!(a_killed_connection_is_counted_on_its_own_side);

/// A cluster client has a command connection per primary: ready once every one is up,
/// and after the connections of every node are killed, ready again once each is made
/// again. A private cluster: killing connections on the shared one would hit other
/// tests' clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_on_a_cluster_follows_every_node() {
    let cluster = RedisCluster::start();
    let client = client_with(&cluster.url(), Duration::from_secs(3)).await;
    assert!(client.health().is_ready(), "{:?}", client.health());
    for primary in cluster.primaries() {
        cluster.on(&primary, &["CLIENT", "KILL", "TYPE", "normal"]);
    }
    assert!(
        wait_until(Duration::from_secs(10), || {
            let health = client.health();
            health.reconnects >= 1 && health.is_ready()
        })
        .await,
        "every node's connection made again: {:?}",
        client.health()
    );
    let guard = client.lock("health:cluster").try_lock().await.expect("try").expect("free");
    guard.unlock().await.expect("unlock");
}

/// A runtime blocked past a renewal's time (a blocking call on the only worker thread)
/// shows as the watchdog's lag once the round runs, and the lag falls back once rounds
/// run on time again.
#[tokio::test(flavor = "current_thread")]
async fn the_watchdog_lag_shows_a_blocked_runtime() {
    let server = RedisServer::start();
    // Renewals every 500 ms; a 1 s block, started just after one, delays the next by
    // about 500 ms, and ends before the 1.5 s lease.
    let client = client_with(&server.url(), Duration::from_millis(1_500)).await;
    let guard = client.lock("health:lag").lock().await.expect("lock");
    assert!(wait_until(Duration::from_secs(3), || client.stats().renewals >= 1).await, "renewed once");
    assert!(client.health().watchdog_lag < Duration::from_millis(100), "on time: {:?}", client.health());

    // Blocks the runtime's only thread, as a blocking call in async code would.
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(
        wait_until(Duration::from_secs(2), || client.health().watchdog_lag >= Duration::from_millis(300)).await,
        "the late round is seen: {:?}",
        client.health()
    );
    assert!(
        wait_until(Duration::from_secs(3), || client.health().watchdog_lag < Duration::from_millis(100)).await,
        "back on time: {:?}",
        client.health()
    );
    assert!(!guard.is_lost());
    guard.unlock().await.expect("unlock");
    // The scheduler finds itself idle at its next wake-up (the round that was due).
    assert!(
        wait_until(Duration::from_secs(2), || client.health().watchdog_lag == Duration::ZERO).await,
        "nothing renewed any more: {:?}",
        client.health()
    );
}

/// While the server is frozen (`SIGSTOP`) the connection stays open, so `connected`
/// stays true, but renewals fail and the time left on the renewed hold shrinks below a
/// third of the watchdog timeout; with renewals answered it stays above two thirds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_left_shrinks_while_renewals_fail() {
    let mut server = RedisServer::start();
    let watchdog = Duration::from_millis(1_500);
    let client = client_with(&server.url(), watchdog).await;
    let guard = client.lock("health:lease").lock().await.expect("lock");
    for _ in 0..20 {
        let left = client.health().lease_left.expect("one hold renewed");
        // Two thirds, less a little for the renewal's round trip and the scheduler.
        assert!(left > watchdog * 2 / 3 - Duration::from_millis(100) && left <= watchdog, "{left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.pause();
    let shrunk =
        wait_until(Duration::from_secs(3), || client.health().lease_left.is_some_and(|left| left < watchdog / 3)).await;
    let health = client.health();
    server.resume();
    assert!(shrunk, "renewals failing: {health:?}");
    assert!(health.connected, "a frozen server keeps its connections open: {health:?}");
    drop(guard);
}

/// After `shutdown` the snapshot says so: not connected, not ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_after_shutdown_is_not_ready() {
    let server = RedisServer::start();
    let client = client(&server).await;
    client.shutdown().await.expect("shutdown");
    let health = client.health();
    assert!(health.shut_down && !health.connected && !health.subscriber_connected && !health.is_ready(), "{health:?}");
}

/// The blocking client has it too, and it never blocks.
#[test]
fn the_blocking_client_reports_its_health() {
    let server = RedisServer::start();
    let client = leasehold::blocking::Client::connect(&server.url()).expect("connect");
    let health = client.health();
    assert!(health.is_ready() && health.lease_left.is_none(), "{health:?}");
    let guard = client.lock("health:blocking").lock().expect("lock");
    assert!(client.health().lease_left.is_some(), "the hold is renewed");
    guard.unlock().expect("unlock");
}
