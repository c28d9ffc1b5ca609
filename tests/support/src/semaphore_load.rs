//! A load on a semaphore for the fault tests (`tests/semaphore_faults.rs` on standalone
//! servers, `tests/cluster.rs` on a cluster): tasks that acquire one permit in each of
//! the guard API's ways, hold it a moment and release it, counting who is inside.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

/// What the load tasks saw.
#[derive(Default)]
pub struct Load {
    /// Set to end the tasks after their current cycle.
    pub stop: AtomicBool,
    /// Tasks holding a permit now.
    pub inside: AtomicI64,
    /// The most tasks that held a permit at once.
    pub most_inside: AtomicI64,
    /// Cycles completed (acquired, held, released).
    pub cycles: AtomicU64,
}

/// One task of the load: acquires one permit (an unbounded wait, a single try, a bounded
/// wait, or a single try cancelled by a short timeout, in turn), holds it a moment and releases it, until told
/// to stop. Every release must succeed (it is retried through the stall).
pub async fn cycle(sem: leasehold::Semaphore, load: Arc<Load>, permits: i64, first_turn: u64) {
    // Each task starts at another turn, so that at any moment they are spread over them.
    let mut turn = first_turn;
    while !load.stop.load(Ordering::SeqCst) {
        turn += 1;
        let held = match turn % 4 {
            0 => Some(sem.acquire(1).await.expect("an unbounded acquire retries transient errors")),
            // A single try is always sent, even behind waiters: in flight when the server
            // freezes, it fails in doubt.
            1 => sem.try_acquire(1).await.unwrap_or(None),
            2 => sem.try_acquire_for(1, Duration::from_millis(200)).await.unwrap_or(None),
            _ => timeout(Duration::from_millis(150), sem.try_acquire(1)).await.ok().and_then(Result::ok).flatten(),
        };
        if let Some(permit) = held {
            let now = load.inside.fetch_add(1, Ordering::SeqCst) + 1;
            load.most_inside.fetch_max(now, Ordering::SeqCst);
            assert!(now <= permits, "{now} holders of {permits} permits");
            tokio::time::sleep(Duration::from_millis(1)).await;
            load.inside.fetch_sub(1, Ordering::SeqCst);
            permit.release().await.expect("a release is retried through the stall");
            load.cycles.fetch_add(1, Ordering::SeqCst);
        }
        // Idle a moment, so that when the server freezes some tasks are between calls and
        // their next acquire is the one in flight (not only releases).
        tokio::time::sleep(Duration::from_millis(4 + turn % 5)).await;
    }
}
