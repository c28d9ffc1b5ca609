//! The reentrant lock on a real redis-server: layout, reentrancy, leases, bad input.

use std::time::Duration;

use leasehold_tests::{client, hgetall, pttl, raw, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_writes_redisson_layout_and_unlock_deletes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("order:1001");
    let guard = lock.try_lock().await.expect("try_lock").expect("free lock is acquired");
    let fields = hgetall(&server, "order:1001");
    assert_eq!(fields, vec![(lock.owner().to_owned(), "1".to_owned())]);
    assert!(lock.owner().starts_with(&client.id().hyphenated().to_string()));
    let ttl = pttl(&server, "order:1001");
    assert!(ttl > 29_000 && ttl <= 30_000, "watchdog lease is 30 s, got {ttl}");
    guard.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["EXISTS", "order:1001"]).as_int(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owner_is_excluded() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let a = client.lock("l");
    let b = client.lock("l");
    let guard = a.try_lock().await.expect("a").expect("a acquires");
    assert!(b.try_lock().await.expect("b").is_none());
    assert!(b.try_lock_for(Duration::from_millis(100)).await.expect("b waits").is_none());
    guard.unlock().await.expect("unlock");
    let g = b.try_lock().await.expect("b").expect("b acquires after release");
    g.unlock().await.expect("unlock b");
}
