//! leasehold through Redis Sentinel: a primary, a replica and three sentinels.

use std::time::{Duration, Instant};

use leasehold_tests::{client_with, SentinelSet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connects_through_the_sentinels() {
    let started = Instant::now();
    let set = SentinelSet::shared();
    eprintln!("sentinels ready after {:?}: {}", started.elapsed(), set.url());
    let client = client_with(&set.url(), Duration::from_secs(30)).await;
    let guard = client.lock("sentinel:first").try_lock().await.expect("try_lock").expect("free");
    guard.unlock().await.expect("unlock");
}
