//! Faults that a server alone cannot make: lost replies, added latency, a stalled server.
//!
//! Standalone only, unlike the other suites (`docs/cluster.md` §4): every test here
//! puts a [`Proxy`] in front of one server, and a cluster client goes around it to the
//! node addresses `CLUSTER SLOTS` names.

use std::time::{Duration, Instant};

use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
use leasehold_test_support::{client_with, hgetall, pttl, wait_until, Monitor, Proxy, RedisServer};

const LEASE: Duration = Duration::from_secs(10);

async fn warm_scripts(client: &leasehold::Client) {
    // Load every script once so a lost reply hits the call under test, not SCRIPT LOAD.
    let guard = client.lock("warm-up").lock_with_lease(LEASE).await.expect("warm lock");
    guard.unlock().await.expect("warm unlock");
}

/// The reply to a release is lost after the server applied it; the retry sets the same
/// absolute hold count again: the hold count drops exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_release_reply_counts_once() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), Duration::from_secs(30)).await;
    warm_scripts(&client).await;
    let lock = client.lock("replayed-release");
    let first = lock.lock_with_lease(LEASE).await.expect("first");
    let second = lock.lock_with_lease(LEASE).await.expect("second");
    assert_eq!(hgetall(&server, "replayed-release")[0].1, "2");
    proxy.lose_next_reply();
    second.unlock().await.expect("unlock is retried with the same request id");
    assert_eq!(proxy.lost_replies(), 1, "the reply really was lost");
    assert_eq!(hgetall(&server, "replayed-release"), vec![(lock.owner().to_owned(), "1".to_owned())]);
    first.unlock().await.expect("last unlock");
    assert_eq!(pttl(&server, "replayed-release"), -2);
}

/// The reply to an acquire is lost: the caller gets a connection error and the hold the
/// server took is given back, so the key is not stuck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_acquire_reply_is_undone() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), Duration::from_secs(30)).await;
    warm_scripts(&client).await;
    let monitor = Monitor::start(&server.addr());
    proxy.lose_next_reply();
    let lock = client.lock("lost-acquire");
    // One attempt (zero wait): the error surfaces instead of being retried.
    let err = lock.try_lock_with(Duration::ZERO, LEASE).await.expect_err("the reply was lost");
    assert!(err.is_ambiguous(), "{err}");
    assert_eq!(proxy.lost_replies(), 1);
    assert!(wait_until(Duration::from_secs(5), || pttl(&server, "lost-acquire") == -2).await, "hold given back");
    assert!(monitor.lines().iter().any(|l| l.contains("\"hset\" \"lost-acquire\"")), "the acquire had applied");
    let guard = lock.lock_with_lease(LEASE).await.expect("acquire again");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    guard.unlock().await.expect("unlock");
    assert_eq!(pttl(&server, "lost-acquire"), -2, "one release frees it: not stuck at 2");
}

/// A waiting acquire whose reply is lost keeps waiting: the abandoned hold is undone,
/// the retry takes the lock, and the owner holds it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_survives_a_lost_acquire_reply() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), Duration::from_secs(30)).await;
    warm_scripts(&client).await;
    proxy.lose_next_reply();
    let lock = client.lock("lost-acquire-wait");
    let guard = tokio::time::timeout(Duration::from_secs(10), lock.lock_with_lease(LEASE))
        .await
        .expect("the wait ends")
        .expect("a lost reply does not end an unbounded wait");
    assert_eq!(proxy.lost_replies(), 1, "the reply really was lost");
    assert!(
        wait_until(Duration::from_secs(5), || hgetall(&server, "lost-acquire-wait")
            .first()
            .is_some_and(|(_, n)| n == "1"))
        .await,
        "held exactly once: {:?}",
        hgetall(&server, "lost-acquire-wait")
    );
    guard.unlock().await.expect("unlock");
    assert_eq!(pttl(&server, "lost-acquire-wait"), -2, "one release frees it");
}

/// With a fred client that replays in-flight commands after a reconnect (fred's default
/// `max_command_attempts = 3`), the replayed acquire sets the same absolute count again:
/// it counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_acquire_from_a_fred_client_counts_once() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let config = Config::from_url(&proxy.url()).expect("url");
    let mut builder = Builder::from_config(config);
    builder.set_policy(ReconnectPolicy::new_constant(0, 20));
    let fred = builder.build().expect("fred client");
    fred.init().await.expect("connect");
    let client = leasehold::Client::from_fred(fred, leasehold::ClientConfig::default()).await.expect("from_fred");
    warm_scripts(&client).await;
    proxy.lose_next_reply();
    let lock = client.lock("replayed-acquire");
    let guard = lock.lock_with_lease(LEASE).await.expect("fred replays the acquire");
    assert_eq!(proxy.lost_replies(), 1);
    assert_eq!(lock.hold_count().await.expect("count"), 1, "the replay did not count twice");
    guard.unlock().await.expect("unlock");
    assert_eq!(pttl(&server, "replayed-acquire"), -2);
}

/// With latency on the path, the local lease deadline is never later than the server's
/// real expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_deadline_is_never_after_the_server_expiry() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), Duration::from_secs(30)).await;
    warm_scripts(&client).await;
    proxy.set_latency(Duration::from_millis(100));
    let guard = client.lock("latency").lock_with_lease(Duration::from_millis(800)).await.expect("lock");
    let local_deadline = guard.lease_deadline();
    while pttl(&server, "latency") != -2 {
        assert!(Instant::now() < local_deadline + Duration::from_secs(2), "key never expired");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let gone_at = Instant::now();
    assert!(
        gone_at >= local_deadline,
        "server expired the key {:?} before the local deadline",
        local_deadline - gone_at
    );
    assert!(guard.is_lost());
}
