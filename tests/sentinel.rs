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
