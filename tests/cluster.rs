//! leasehold on a local Redis Cluster (3 primaries + 3 replicas): locks on every shard,
//! waiters woken across nodes, renewal across slots, and unlocks that survive a failover.

use std::time::{Duration, Instant};

use leasehold::fred::prelude::ClientLike;
use leasehold_tests::{client_with, RedisCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_cluster_is_formed_and_a_client_connects() {
    let started = Instant::now();
    let cluster = RedisCluster::shared();
    eprintln!("cluster ready after {:?}: {}", started.elapsed(), cluster.url());
    assert_eq!(cluster.primaries().len(), 3);
    let client = client_with(&cluster.url(), Duration::from_secs(30)).await;
    assert!(client.fred().is_clustered());
    let guard = client.lock("cluster:first").try_lock().await.expect("try_lock").expect("free");
    guard.unlock().await.expect("unlock");
}
