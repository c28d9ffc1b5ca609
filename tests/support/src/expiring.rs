//! Redisson's `testLeaseTimeout` shape for the server-queued kinds (issue 26): holders
//! that arrive 100 ms apart, each waiting with a short lease and never unlocking. Each
//! one's lease must hand the lock to the next waiter at once (not at the waiter's queue
//! refresh), in arrival order.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Starts `count` takers 100 ms apart (`take(i)` waits for the lock, detaches the guard
/// so it is never released, and answers whether it got the lock) and returns when each
/// acquired, measured from the first start, in arrival order. Panics when one did not
/// get the lock, or the order is not the arrival order.
pub async fn expiring_holders<F, Fut>(count: usize, take: F) -> Vec<Duration>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        tokio::time::sleep_until(start + Duration::from_millis(100 * i as u64)).await;
        let taking = take(i);
        tasks.push(tokio::spawn(async move { (taking.await, start.elapsed()) }));
    }
    let mut acquired = Vec::with_capacity(count);
    for (i, task) in tasks.into_iter().enumerate() {
        let (got, at) = task.await.expect("task");
        assert!(got, "holder {i} did not get the lock (gave up at {at:?})");
        acquired.push(at);
    }
    for i in 1..count {
        assert!(acquired[i] > acquired[i - 1], "arrival order: {acquired:?}");
    }
    acquired
}

/// Asserts that every hand-off came within `lease` + `slack` of the one before and the
/// last within `total`.
pub fn assert_hand_offs(acquired: &[Duration], lease: Duration, slack: Duration, total: Duration) {
    for pair in acquired.windows(2) {
        assert!(pair[1] - pair[0] <= lease + slack, "a hand-off took {:?}: {acquired:?}", pair[1] - pair[0]);
    }
    assert!(acquired.last().is_some_and(|last| *last <= total), "all in within {total:?}: {acquired:?}");
}
