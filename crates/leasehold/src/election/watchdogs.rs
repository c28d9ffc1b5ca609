//! The watchdogs of a client's elections: one per distinct election lease, started on
//! first use and stopped by [`Client::shutdown`](crate::Client::shutdown).
//!
//! The client's watchdog renews every hold with one lease (its timeout) every third of
//! it; an election wants a shorter lease (failover is bounded by it) renewed every third
//! of *that*. Rather than teach the scheduler a period per hold, each election lease gets
//! a scheduler of its own, configured as the client's (batch size, cluster grouping,
//! topology check, telemetry) but for that timeout, and renewing after every reconnect
//! as the client's does. A client with elections of one lease (the usual case) runs one
//! more scheduler task, idle while no candidate leads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::EventInterface;
use lock_core::LockStore;
use lock_watchdog::{Watchdog, WatchdogConfig};
use parking_lot::Mutex;

/// The election watchdogs of one client, by lease.
#[derive(Default)]
pub(crate) struct ElectionWatchdogs {
    by_lease: Mutex<HashMap<Duration, Arc<Watchdog>>>,
}

impl ElectionWatchdogs {
    /// The watchdog for holds of `lease`, started (on the current runtime) if none is.
    /// `like`: the client's watchdog, whose settings it copies.
    pub(crate) fn for_lease(
        &self,
        lease: Duration,
        store: &LockStore,
        like: &Watchdog,
        telemetry: &Arc<crate::telemetry::Telemetry>,
    ) -> Arc<Watchdog> {
        let mut by_lease = self.by_lease.lock();
        by_lease
            .entry(lease)
            .or_insert_with(|| {
                let mut config: WatchdogConfig = like.config().clone();
                config.timeout = lease;
                // The client's telemetry, with this watchdog's own share of the renewed
                // holds' gauge.
                let observer = crate::telemetry::ExtraWatchdog::new(telemetry.clone());
                config.observer = Some(Arc::new(observer));
                let watchdog = Watchdog::start(store.clone(), config);
                // As the client's: after a reconnect, renew and check at once.
                watchdog.renew_on_each(store.client().reconnect_rx());
                Arc::new(watchdog)
            })
            .clone()
    }

    /// The largest lag of the election watchdogs' last rounds (zero with none).
    pub(crate) fn lag(&self) -> Duration {
        self.by_lease.lock().values().map(|watchdog| watchdog.lag()).max().unwrap_or_default()
    }

    /// The soonest local lease deadline of the leads they renew.
    pub(crate) fn soonest_deadline(&self) -> Option<tokio::time::Instant> {
        self.by_lease.lock().values().filter_map(|watchdog| watchdog.soonest_deadline()).min()
    }

    /// Stops every election watchdog (after shutdown released the holds).
    pub(crate) fn stop(&self) {
        for watchdog in self.by_lease.lock().values() {
            watchdog.stop();
        }
    }
}
