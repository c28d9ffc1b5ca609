//! What the election suites (`election.rs`, `election_grant.rs`, `election_hostile.rs`)
//! share: a short lease, reading an `Observer` with deadlines, the servers' wait queues,
//! and a candidate process (`tests/bin/candidate.rs`). Included by each with `#[path]`.

// Each suite uses its own part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use leasehold::{ElectionConfig, Leader};
use leasehold_test_support::{raw, HolderProcess, RedisServer, RespValue};

/// A short lease, so that crash and pause failovers (and a dead candidate's granted
/// lead) finish quickly.
pub(crate) const LEASE: Duration = Duration::from_millis(1500);
/// What a failover may take beyond the lease: the next candidate's retry, its claim,
/// and a loaded CI machine.
pub(crate) const MARGIN: Duration = Duration::from_millis(700);

/// An election config with [`LEASE`].
pub(crate) fn short() -> ElectionConfig {
    ElectionConfig::default().with_lease(LEASE)
}

/// The next item of `observer` within `within`.
pub(crate) async fn next_change(observer: &mut leasehold::Observer, within: Duration) -> Option<Leader> {
    tokio::time::timeout(within, observer.next())
        .await
        .unwrap_or_else(|_| panic!("no change within {within:?}"))
        .expect("the stream goes on")
        .expect("a read")
}

/// Items until one satisfies `wanted` (within `within` in all); the skipped ones are
/// returned too, in order.
pub(crate) async fn until_change(
    observer: &mut leasehold::Observer,
    within: Duration,
    wanted: impl Fn(&Option<Leader>) -> bool,
) -> Vec<Option<Leader>> {
    let end = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let item = next_change(observer, left).await;
        let done = wanted(&item);
        seen.push(item);
        if done {
            return seen;
        }
    }
}

/// Terms never go back in what an observer emitted.
pub(crate) fn assert_term_order(seen: &[Option<Leader>]) {
    let terms: Vec<u64> = seen.iter().flatten().map(|l| l.term).collect();
    assert!(terms.windows(2).all(|w| w[0] <= w[1]), "terms in order: {terms:?}");
}

/// Entries in every lock wait queue of `server`, summed (an election's queue is its
/// lead's).
pub(crate) fn queued(server: &RedisServer) -> i64 {
    let RespValue::Array(keys) = raw(server, &["KEYS", "leasehold_lock_queue:*"]) else { return 0 };
    keys.iter().filter_map(|k| k.as_str()).map(|k| raw(server, &["LLEN", k]).as_int().unwrap_or(0)).sum()
}

/// Starts a candidate process on `name` (lease [`LEASE`]) and waits until it leads: the
/// process and its term.
pub(crate) async fn start_candidate(server: &RedisServer, name: &str, value: &str) -> (HolderProcess, u64) {
    let lease = LEASE.as_millis().to_string();
    let mut child = HolderProcess::spawn(env!("CARGO_BIN_EXE_candidate"), &[&server.url(), name, &lease, value]);
    assert_eq!(child.next_line(Duration::from_secs(10)).await.as_deref(), Some("CAMPAIGNING"));
    let line = child.next_line(Duration::from_secs(10)).await.expect("LEADING line");
    let term = line
        .strip_prefix("LEADING ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("unexpected line {line:?}"));
    (child, term)
}
