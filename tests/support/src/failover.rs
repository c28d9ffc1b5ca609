//! The end shared by the failover-during-contention tests of `tests/cluster.rs` and
//! `tests/sentinel.rs`.

use std::time::Duration;

use crate::wait_until;

/// The end of a failover-during-contention test (`tests/cluster.rs`, `tests/sentinel.rs`):
/// two holders of `holder` whose locks never reached the promoted replica, one renewed and
/// one with a fixed lease, are told `lost()` within 5 s of `since` (the promotion or the
/// announcement, named `event` in messages), the fixed lease by the watchdog's check
/// after the reconnect; then every contending task finishes within 20 s.
///
/// # Panics
/// When any of that does not happen.
pub async fn assert_unreplicated_holders_told_and_no_waiter_stuck<T>(
    since: std::time::Instant,
    event: &str,
    holder: &leasehold::Client,
    guards: [(&str, &leasehold::LockGuard); 2],
    tasks: Vec<tokio::task::JoinHandle<T>>,
) {
    for (what, guard) in guards {
        tokio::time::timeout_at((since + Duration::from_secs(5)).into(), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("the {what} holder was not told lost() within 5 s of the {event}"));
        eprintln!("the {what} holder was told lost() {:?} after the {event}", since.elapsed());
    }
    // The watchdog counts a loss before it marks the hold; the wait only covers the
    // stats' relaxed ordering, never a check still to come.
    let counted = |s: &leasehold::WatchdogStats| s.checks >= 1 && s.lost >= 2;
    wait_until(Duration::from_secs(1), || counted(&holder.stats().watchdog)).await;
    let stats = holder.stats().watchdog;
    assert!(counted(&stats), "the fixed lease was found gone by a check: {stats:?}");
    tokio::time::timeout(Duration::from_secs(20), async {
        for task in tasks {
            task.await.expect("task");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("a waiter is stuck after the {event}"));
}
