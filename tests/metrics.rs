//! The `metrics` feature: every metric of `docs/observability.md` is recorded with its
//! labels, read back from `metrics-util`'s debugging recorder. The recorder is the
//! process's global one (the async code runs on runtime threads, which a thread-local
//! recorder would not reach), so this binary holds a single test.

use std::time::Duration;

use leasehold_test_support::{client_with, wait_until, RedisServer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

/// Every metric's value since the snapshot before: the debugging recorder's snapshot
/// drains every metric (counters and gauges swapped to 0, histograms emptied), so each
/// holds what was recorded in between. The gauges move by increments (every client of
/// the process reports into the same gauge), so they are summed over the snapshots into
/// `held`, `waiters` and `watchdog_locks`.
struct Snap {
    values: Vec<(CompositeKey, DebugValue)>,
    held: f64,
    waiters: f64,
    watchdog_locks: f64,
}

/// The snapshots of one recorder, with the running sums of the gauges.
struct Recorded {
    snapshotter: Snapshotter,
    held: f64,
    waiters: f64,
    watchdog_locks: f64,
}

impl Recorded {
    fn snap(&mut self) -> Snap {
        let values: Vec<(CompositeKey, DebugValue)> =
            self.snapshotter.snapshot().into_vec().into_iter().map(|(key, _, _, value)| (key, value)).collect();
        let mut snap = Snap { values, held: 0.0, waiters: 0.0, watchdog_locks: 0.0 };
        self.held += gauge(&snap, "leasehold_held").unwrap_or(0.0);
        self.waiters += gauge(&snap, "leasehold_waiters").unwrap_or(0.0);
        self.watchdog_locks += gauge(&snap, "leasehold_watchdog_locks").unwrap_or(0.0);
        (snap.held, snap.waiters, snap.watchdog_locks) = (self.held, self.waiters, self.watchdog_locks);
        snap
    }
}

/// One metric's value, by name and labels (sorted `key=value` pairs).
fn find<'a>(snapshot: &'a Snap, kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> Option<&'a DebugValue> {
    let mut want: Vec<(String, String)> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    want.sort();
    snapshot.values.iter().find_map(|(key, value)| {
        let mut have: Vec<(String, String)> =
            key.key().labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
        have.sort();
        (key.kind() == kind && key.key().name() == name && have == want).then_some(value)
    })
}

fn counter(s: &Snap, name: &str, labels: &[(&str, &str)]) -> u64 {
    match find(s, MetricKind::Counter, name, labels) {
        Some(DebugValue::Counter(n)) => *n,
        _ => 0,
    }
}

fn gauge(s: &Snap, name: &str) -> Option<f64> {
    match find(s, MetricKind::Gauge, name, &[]) {
        Some(DebugValue::Gauge(v)) => Some(v.into_inner()),
        _ => None,
    }
}

/// How many values the histogram has in `s` (recorded since the snapshot before).
fn histogram(s: &Snap, name: &str, labels: &[(&str, &str)]) -> usize {
    match find(s, MetricKind::Histogram, name, labels) {
        Some(DebugValue::Histogram(values)) => values.len(),
        _ => 0,
    }
}

/// Acquire, wait and hold durations with their labels; the gauges; renewals; a hold
/// lost after `force_unlock`; and the `lock` label only for names the hook maps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_is_recorded_with_its_labels() {
    let server = RedisServer::start();
    let plain = client_with(&server.url(), Duration::from_millis(300)).await;
    // Records before any recorder is installed go to the facade's no-op recorder (and
    // leasehold caches its handles of that one): the recorder installed next must still
    // get everything after it.
    plain.lock("m:early").try_lock().await.expect("try").expect("free").unlock().await.expect("unlock");
    let recorder = DebuggingRecorder::new();
    let mut s = {
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder of this binary");
        Recorded { snapshotter, held: 0.0, waiters: 0.0, watchdog_locks: 0.0 }
    };
    let labelled = leasehold::Client::builder()
        .url(server.url())
        .watchdog_timeout(Duration::from_millis(300))
        .command_timeout(leasehold_test_support::command_timeout_for(Duration::from_millis(300)))
        .metric_label(|key| key.starts_with("report:").then_some("report"))
        .connect()
        .await
        .expect("connect");

    // Acquired (wait mode), busy (try), timed out (a wait that ran out).
    let guard = plain.lock("m:a").lock().await.expect("lock");
    assert!(plain.lock("m:a").try_lock().await.expect("try").is_none());
    assert!(plain.lock("m:a").try_lock_for(Duration::from_millis(60)).await.expect("wait").is_none());
    let acquire = "leasehold_acquire_duration_seconds";
    let now = s.snap();
    assert_eq!(histogram(&now, acquire, &[("kind", "lock"), ("mode", "wait"), ("outcome", "acquired")]), 1);
    assert_eq!(histogram(&now, acquire, &[("kind", "lock"), ("mode", "try"), ("outcome", "busy")]), 1);
    assert_eq!(histogram(&now, acquire, &[("kind", "lock"), ("mode", "wait"), ("outcome", "timed_out")]), 1);
    assert_eq!(histogram(&now, "leasehold_wait_duration_seconds", &[("kind", "lock")]), 1);
    assert_eq!(now.held, 1.0);
    assert_eq!(now.waiters, 0.0);
    assert_eq!(now.watchdog_locks, 1.0);

    // Renewed by the watchdog, then lost behind its back.
    // Waits on the stats (a snapshot would drain the counter), then reads the renewals.
    assert!(wait_until(Duration::from_secs(5), || plain.stats().renewals >= 2).await, "renewed");
    let now = s.snap();
    assert!(counter(&now, "leasehold_renewals_total", &[("outcome", "renewed")]) >= 2, "renewals counted");
    assert_eq!(now.watchdog_locks, 1.0, "unchanged by the renewal rounds");
    // An election's lead is renewed by a watchdog of its own lease: its hold adds to the
    // gauge beside the lock's, and leaves it when it resigns.
    let lead = plain
        .election_with("m:e", leasehold::ElectionConfig::default().with_lease(Duration::from_millis(300)))
        .campaign("v")
        .await
        .expect("campaign");
    let election_renewals = plain.stats().renewals;
    assert!(wait_until(Duration::from_secs(5), || plain.stats().renewals >= election_renewals + 2).await);
    let now = s.snap();
    assert_eq!(now.watchdog_locks, 2.0, "the lock's and the lead's");
    assert_eq!(histogram(&now, acquire, &[("kind", "election"), ("mode", "wait"), ("outcome", "acquired")]), 1);
    lead.resign().await.expect("resign");
    assert!(wait_until(Duration::from_secs(5), || s.snap().watchdog_locks == 1.0).await, "the lead left the gauge");
    // A lead forced away: its loss is counted once, under its own kind, when `lost()`
    // resolves; its renewal counts as lost.
    let forced = plain
        .election_with("m:e2", leasehold::ElectionConfig::default().with_lease(Duration::from_millis(300)))
        .campaign("v")
        .await
        .expect("campaign");
    assert!(plain.election("m:e2").force_resign().await.expect("force"));
    tokio::time::timeout(Duration::from_secs(5), forced.lost()).await.expect("the leader learns it");
    let now = s.snap();
    assert_eq!(counter(&now, "leasehold_lost_total", &[("kind", "election"), ("reason", "owner_gone")]), 1);
    assert_eq!(counter(&now, "leasehold_lost_total", &[("kind", "lock"), ("reason", "owner_gone")]), 0);
    assert_eq!(counter(&now, "leasehold_renewals_total", &[("outcome", "lost")]), 1);
    drop(forced);
    assert!(
        wait_until(Duration::from_secs(5), || s.snap().watchdog_locks == 1.0).await,
        "the lost lead left the gauge"
    );
    assert!(plain.lock("m:a").force_unlock().await.expect("force"));
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("lost() fires");
    assert!(guard.unlock().await.expect_err("lost").is_lock_lost());
    let now = s.snap();
    assert_eq!(counter(&now, "leasehold_lost_total", &[("kind", "lock"), ("reason", "owner_gone")]), 1);
    assert_eq!(counter(&now, "leasehold_renewals_total", &[("outcome", "lost")]), 1);
    assert_eq!(now.watchdog_locks, 0.0);
    assert_eq!(histogram(&now, "leasehold_hold_duration_seconds", &[("end", "lost")]), 1);
    assert_eq!(now.held, 0.0);

    // A fenced lock released, a fair one dropped: their kinds and ends.
    let fenced = plain.fenced_lock("m:f").lock().await.expect("fenced");
    fenced.unlock().await.expect("unlock");
    drop(plain.fair_lock("m:q").try_lock().await.expect("fair").expect("free"));
    let now = s.snap();
    assert_eq!(histogram(&now, acquire, &[("kind", "fenced"), ("mode", "wait"), ("outcome", "acquired")]), 1);
    assert_eq!(histogram(&now, "leasehold_hold_duration_seconds", &[("end", "released")]), 1);
    assert_eq!(histogram(&now, acquire, &[("kind", "fair"), ("mode", "try"), ("outcome", "acquired")]), 1);
    assert_eq!(histogram(&now, "leasehold_hold_duration_seconds", &[("end", "dropped")]), 1);

    // The hook: a `lock` label for the names it maps, none for the others.
    let report = labelled.lock("report:daily").try_lock().await.expect("try").expect("free");
    let other = labelled.lock("order:7").try_lock().await.expect("try").expect("free");
    let try_acquired = [("kind", "lock"), ("mode", "try"), ("outcome", "acquired")];
    let mut with_label = try_acquired.to_vec();
    with_label.push(("lock", "report"));
    let now = s.snap();
    assert_eq!(histogram(&now, acquire, &with_label), 1, "the mapped name has its label");
    assert_eq!(histogram(&now, acquire, &try_acquired), 1, "the other name has none");
    report.unlock().await.expect("unlock");
    other.unlock().await.expect("unlock");

    // Two clients of one process hold a watchdog lock each: the gauge is their sum, and
    // a client shut down takes its share out.
    let first = plain.lock("m:w1").lock().await.expect("lock");
    let second = labelled.lock("m:w2").lock().await.expect("lock");
    assert_eq!(s.snap().watchdog_locks, 2.0, "one gauge for every client of the process");
    drop(second);
    labelled.shutdown().await.expect("shutdown");
    drop(labelled);
    assert!(
        wait_until(Duration::from_secs(5), || s.snap().watchdog_locks == 1.0).await,
        "the shut-down client's hold is out of the gauge"
    );
    first.unlock().await.expect("unlock");
    assert_eq!(s.snap().watchdog_locks, 0.0);
}
