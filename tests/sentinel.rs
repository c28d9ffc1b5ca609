//! leasehold through Redis Sentinel: a primary, a replica and three sentinels.

use std::time::Duration;

use leasehold_tests::{client_with, RespValue, SentinelSet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connects_through_the_sentinels_to_the_primary() {
    let set = SentinelSet::shared();
    let client = client_with(&set.url(), Duration::from_secs(30)).await;
    let lock = client.lock("sentinel:first");
    let guard = lock.try_lock().await.expect("try_lock").expect("free");
    // The hold is on the primary the sentinels name, and replicated to the replica.
    let field = |addr: &str| match set.on(addr, &["HGET", "sentinel:first", lock.owner()]) {
        RespValue::Bulk(holds) => Some(holds),
        _ => None,
    };
    assert_eq!(field(&set.primary()).as_deref(), Some("1"));
    assert!(
        leasehold_tests::wait_until(Duration::from_secs(5), || field(&set.replica()).as_deref() == Some("1")).await,
        "replicated"
    );
    let other = client_with(&set.url(), Duration::from_secs(30)).await;
    assert!(other.lock("sentinel:first").try_lock().await.expect("try_lock").is_none(), "excluded");
    guard.unlock().await.expect("unlock");
    assert_eq!(set.on(&set.primary(), &["EXISTS", "sentinel:first"]).as_int(), Some(0));
}

#[tokio::test]
async fn bad_sentinel_and_cluster_urls_are_rejected_before_connecting() {
    // Port 1: nothing listens there, so only validation can answer this fast.
    for url in ["redis-sentinel://127.0.0.1:1", "redis-cluster://127.0.0.1:1?node=nonsense"] {
        let err = leasehold::Client::connect(url).await.expect_err("invalid");
        assert!(err.is_invalid_argument(), "{url}: {err:?}");
    }
}

/// A Sentinel failover is followed within a couple of seconds of the sentinels'
/// `+switch-master`, not when the old primary is finally demoted (about 10 s later
/// without the watch): every acquire from then on lands on the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_a_sentinel_failover_when_it_is_announced() {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface};
    let set = SentinelSet::start();
    let client = client_with(&set.url(), Duration::from_secs(30)).await;
    let warm = client.lock("sentinel:warm").try_lock().await.expect("try_lock").expect("free");
    warm.unlock().await.expect("unlock");

    // The test's own ear on the announcement.
    let sentinel = &set.sentinels()[0];
    let config = Config::from_url(&format!("redis://{sentinel}")).expect("url");
    let ear = Builder::from_config(config).build_subscriber_client().expect("build");
    ear.init().await.expect("connect");
    let mut messages = ear.message_rx();
    ear.subscribe("+switch-master").await.expect("subscribe");
    ear.ping::<()>(None).await.expect("subscribed");

    let new_primary = set.replica();
    assert_eq!(set.on(sentinel, &["SENTINEL", "FAILOVER", leasehold_tests::SENTINEL_SERVICE]).as_str(), Some("OK"));
    let message =
        tokio::time::timeout(Duration::from_secs(30), messages.recv()).await.expect("announced").expect("message");
    let announced = std::time::Instant::now();
    let payload = message.value.as_string().unwrap_or_default();
    assert!(payload.ends_with(new_primary.replace(':', " ").as_str()), "{payload}");

    let mut n = 0;
    let followed = loop {
        n += 1;
        let name = format!("sentinel:after:{n}");
        if let Ok(Some(guard)) = client.lock(&name).try_lock().await {
            let on_new = set.on(&new_primary, &["EXISTS", &name]).as_int() == Some(1);
            let _ = guard.unlock().await;
            if on_new {
                break announced.elapsed();
            }
        }
        assert!(announced.elapsed() < Duration::from_secs(15), "never followed the failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("followed {followed:?} after the announcement ({n} acquires)");
    assert!(followed < Duration::from_secs(2), "followed {followed:?} after the announcement");
    let _ = ear.quit().await;
}
