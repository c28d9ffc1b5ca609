//! What a readiness probe asks of the watchdog: how late its rounds run, and how close
//! the holds it renews are to their deadlines. Read-only views of the scheduler's state.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{Shared, Watchdog};

impl Shared {
    /// Records how late the round starting now is against its schedule.
    pub(super) fn record_lag(&self, lag: Duration) {
        let nanos = u64::try_from(lag.as_nanos()).unwrap_or(u64::MAX);
        self.round_lag_nanos.store(nanos, Ordering::Relaxed);
    }
}

impl Watchdog {
    /// How late the last renewal round started against its schedule: the time from
    /// when it was due (the period's tick, or a failed renewal's retry time) to when the
    /// scheduler task ran it. A few milliseconds at most on a healthy runtime; a runtime
    /// too busy or blocked to run the task on time shows here before any lease is at
    /// risk, and so does a round due while the one before was still waiting for its
    /// answers (a server slower than the period). Zero while nothing is renewed and for
    /// a round asked for at once (after a reconnect).
    pub fn lag(&self) -> Duration {
        Duration::from_nanos(self.shared.round_lag_nanos.load(Ordering::Relaxed))
    }

    /// The soonest local lease deadline of the holds renewed now: when the first of them
    /// would be lost if no renewal landed before it (`None`: nothing is renewed). With
    /// renewals answered it stays between two thirds of the watchdog timeout and the
    /// whole timeout ahead; it comes closer while renewals fail. One pass over the
    /// renewed holds, under the table's lock.
    pub fn soonest_deadline(&self) -> Option<Instant> {
        let entries = self.shared.entries.lock();
        entries.values().filter_map(|entry| entry.lease.upgrade()).map(|lease| lease.expires_at()).min()
    }
}
