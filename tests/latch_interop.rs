//! Interop of `CountDownLatch` with Redisson's `RCountDownLatch` without a JVM (issue 19
//! item 4): copies of Redisson 4.7's latch scripts and its `await` loop
//! (`tests/support/src/redisson_latch.rs`) run against leasehold's latch and the other
//! way round, on Redis and on Valkey (`both_servers!`): each side's count down wakes
//! the other side's waiters, and each side reads the counts the other wrote. Waits are
//! bounded by deadlines.

use std::time::Duration;

use leasehold_test_support::redisson_latch::{java_await, redisson_latch_channel, JavaAwait, JavaLatch};
use leasehold_test_support::{both_servers, client, raw, wait_until, ServerKind};
use tokio::time::{timeout, Instant};

/// Long enough that only a message can wake a leasehold waiter within a test.
const NO_RECHECK: Duration = Duration::from_secs(120);
const WITHIN: Duration = Duration::from_secs(5);

/// A Redisson `await` on a blocking thread; resolves once it is subscribed.
async fn spawn_java_await(java: &JavaLatch) -> tokio::task::JoinHandle<JavaAwait> {
    let (subscribed_tx, subscribed_rx) = tokio::sync::oneshot::channel();
    let java = java.clone();
    let task = tokio::task::spawn_blocking(move || {
        java_await(&java, WITHIN, move || {
            let _ = subscribed_tx.send(());
        })
    });
    timeout(WITHIN, subscribed_rx).await.expect("subscribed in time").expect("subscribed");
    task
}

/// Redisson sets the count and counts down: leasehold reads every count and its waiters
/// (two clients) return on Redisson's last count down, not before.
async fn redissons_count_down_wakes_leaseholds_waiters(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let java = JavaLatch::new(&server.addr(), "li:java-down");
    assert!(java.try_set_count(3));
    let (la, lb) = (a.count_down_latch("li:java-down"), b.count_down_latch("li:java-down"));
    assert_eq!(la.channel(), redisson_latch_channel("li:java-down"));
    assert_eq!(la.count().await.expect("count"), 3);
    assert!(!la.try_set_count(9).await.expect("set"), "Redisson's latch is live: not reset");
    let waiters: Vec<_> = [la.with_recheck(NO_RECHECK), lb.with_recheck(NO_RECHECK)]
        .into_iter()
        .flat_map(|latch| (0..3).map(move |_| latch.clone()))
        .map(|latch| tokio::spawn(async move { latch.try_wait_for(Duration::from_secs(30)).await.expect("wait") }))
        .collect();
    let channel = la.channel().to_owned();
    for client in [&a, &b] {
        assert!(
            wait_until(WITHIN, || client.stats().waiters >= 3 && client.subscribed_channels().contains(&channel)).await
        );
    }
    java.count_down();
    assert_eq!(lb.count().await.expect("count"), 2);
    java.count_down();
    assert_eq!(la.count().await.expect("count"), 1);
    assert!(waiters.iter().all(|w| !w.is_finished()), "a waiter returned before zero");
    let last = Instant::now();
    java.count_down();
    for waiter in waiters {
        assert!(timeout(WITHIN, waiter).await.expect("in time").expect("task"), "open");
    }
    assert!(last.elapsed() < Duration::from_secs(3), "woken by Redisson's 0, {:?}", last.elapsed());
    assert_eq!(la.count().await.expect("count"), 0);
    assert_eq!(raw(&server, &["EXISTS", "li:java-down"]).as_int(), Some(0));
}
both_servers!(redissons_count_down_wakes_leaseholds_waiters);

/// leasehold sets the count and counts down: Redisson reads every count, and its
/// `await` (which only a `0` opens) returns on leasehold's last count down, having heard
/// exactly what Redisson's own calls publish.
async fn leaseholds_count_down_wakes_redissons_waiter(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let latch = client.count_down_latch("li:rust-down");
    let java = JavaLatch::new(&server.addr(), "li:rust-down");
    let before_set = spawn_java_await(&java).await;
    assert!(before_set.await.expect("task").returned, "no latch: Redisson's await returns at once");
    assert!(latch.try_set_count(2).await.expect("set"));
    assert_eq!(java.count(), 2);
    assert!(!java.try_set_count(5), "leasehold's latch is live for Redisson too");
    let waiter = spawn_java_await(&java).await;
    assert_eq!(latch.count_down().await.expect("down"), 1);
    assert_eq!(java.count(), 1);
    assert!(!waiter.is_finished());
    assert_eq!(latch.count_down().await.expect("down"), 0);
    let heard = waiter.await.expect("task");
    assert!(heard.returned, "{heard:?}");
    assert_eq!(heard.messages, ["0"], "only the last count down published");
}
both_servers!(leaseholds_count_down_wakes_redissons_waiter);

/// Both sides count one latch down; both sides' waiters return at zero, and the count
/// each reads after every step is the same.
async fn mixed_count_downs_keep_the_count(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let latch = client.count_down_latch("li:mixed");
    let java = JavaLatch::new(&server.addr(), "li:mixed");
    assert!(latch.try_set_count(4).await.expect("set"));
    let java_waiter = spawn_java_await(&java).await;
    let rust_waiter = tokio::spawn({
        let latch = latch.with_recheck(NO_RECHECK);
        async move { latch.try_wait_for(Duration::from_secs(30)).await.expect("wait") }
    });
    java.count_down();
    assert_eq!((latch.count().await.expect("count"), java.count()), (3, 3));
    assert_eq!(latch.count_down().await.expect("down"), 2);
    java.count_down();
    assert_eq!((latch.count().await.expect("count"), java.count()), (1, 1));
    assert!(!rust_waiter.is_finished() && !java_waiter.is_finished());
    assert_eq!(latch.count_down().await.expect("down"), 0);
    assert!(timeout(WITHIN, rust_waiter).await.expect("in time").expect("task"));
    assert!(java_waiter.await.expect("task").returned);
    java.count_down();
    assert_eq!(latch.count().await.expect("count"), 0, "Redisson's count down of a missing latch leaves none");
    assert_eq!(raw(&server, &["EXISTS", "li:mixed"]).as_int(), Some(0));
}
both_servers!(mixed_count_downs_keep_the_count);

/// A delete: Redisson's publishes only `1`, which wakes leasehold's waiter (any message
/// does) but not a Redisson waiter; leasehold's publishes `1` then `0`, which makes a
/// Redisson waiter return too.
async fn deletes_release_the_other_sides_waiters(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let latch = client.count_down_latch("li:delete").with_recheck(NO_RECHECK);
    let java = JavaLatch::new(&server.addr(), "li:delete");
    assert!(java.try_set_count(3));
    let waiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.try_wait_for(Duration::from_secs(30)).await.expect("wait") }
    });
    let channel = latch.channel().to_owned();
    assert!(
        wait_until(WITHIN, || client.stats().waiters >= 1 && client.subscribed_channels().contains(&channel)).await
    );
    assert!(java.delete());
    assert!(timeout(WITHIN, waiter).await.expect("in time").expect("task"), "Redisson's delete opened it");

    assert!(latch.try_set_count(3).await.expect("set"));
    let java_waiter = spawn_java_await(&java).await;
    assert!(latch.delete().await.expect("delete"));
    let heard = java_waiter.await.expect("task");
    assert!(heard.returned, "{heard:?}");
    assert_eq!(heard.messages, ["1", "0"]);
}
both_servers!(deletes_release_the_other_sides_waiters);
