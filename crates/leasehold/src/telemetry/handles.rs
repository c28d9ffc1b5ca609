//! The `metrics` handles of the series without a `lock` label, reused: a
//! `metrics::histogram!` with run-time label values builds its key (a label vector, a
//! hash) and looks it up in the recorder's registry on every record, which on the
//! try-lock hot path is several lookups per pair. A handle records without either (the
//! facade's advice for hot paths).
//!
//! Which series exist when (`docs/observability.md`, "Which series exist"): the
//! histograms are registered at their first record, so a scrape shows only the (kind,
//! mode, outcome) combinations that happened; the gauges and the alert-worthy counters
//! are registered up front ([`Handles::register`], run when a client is built), so that
//! they read 0 before anything happened and an `increase()` sees the first event.
//!
//! Kept per thread, keyed by the recorder's address: a thread reads its own copy with no
//! atomic read-modify-write (a lock shared by the runtime's threads would bounce its
//! cache line between cores on every record), and the handles of one series registered
//! on several threads are the same storage in the recorder. The facade's global
//! recorder is installed at most once, so a thread builds its copy again only when the
//! first recorder arrives (a record made before went to the facade's no-op recorder) or
//! under a thread-local recorder of a test.

use std::cell::{OnceCell, RefCell};

use metrics::{Counter, Gauge, Histogram, Recorder};

use crate::telemetry::labels::{HoldEnd, Kind, Outcome, Role};

/// The unlabelled series leasehold records, as handles of one recorder: the histograms
/// registered at their first record on this thread, the rest when the copy is made.
pub(crate) struct Handles {
    /// By [`acquire_index`]; each registered at its first record.
    acquire: Vec<OnceCell<Histogram>>,
    /// By [`Kind::index`]; each registered at its first record.
    wait: Vec<OnceCell<Histogram>>,
    /// By [`HoldEnd::index`]; each registered at its first record.
    hold: Vec<OnceCell<Histogram>>,
    pub(crate) held: Gauge,
    pub(crate) waiters: Gauge,
    pub(crate) watchdog_locks: Gauge,
    /// `leasehold_renewals_total` by outcome: renewed, lost, failed.
    pub(crate) renewed: Counter,
    pub(crate) renewal_lost: Counter,
    pub(crate) renewal_failed: Counter,
    /// `leasehold_connected` by [`Role::index`].
    connected: Vec<Gauge>,
    /// `leasehold_reconnects_total` by [`Role::index`].
    reconnects: Vec<Counter>,
    /// `leasehold_clients`.
    pub(crate) clients: Gauge,
}

thread_local! {
    /// This thread's handles and the address of the recorder they belong to.
    static CACHE: RefCell<Option<(usize, Handles)>> = const { RefCell::new(None) };
}

/// Runs `f` with the handles of the recorder in effect, making this thread's copy first
/// if it has none of that recorder yet.
pub(crate) fn with(f: impl Fn(&Handles)) {
    let recorder = metrics::with_recorder(|recorder| std::ptr::from_ref::<dyn Recorder>(recorder).cast::<()>().addr());
    let cached = CACHE.try_with(|cache| {
        // Never borrowed twice: `f` only records (and registers), it does not come back here.
        let Ok(mut cache) = cache.try_borrow_mut() else { return false };
        match &*cache {
            Some((owner, handles)) if *owner == recorder => f(handles),
            _ => f(&cache.insert((recorder, Handles::register())).1),
        }
        true
    });
    if cached != Ok(true) {
        // The thread is being torn down (its cache is gone) or the cache is in use: the
        // handles just for this record.
        f(&Handles::register());
    }
}

impl Handles {
    /// Registers the series that exist from the start (gauges and counters) and makes
    /// empty slots for the histograms.
    fn register() -> Self {
        let empty = |count: usize| (0..count).map(|_| OnceCell::new()).collect::<Vec<_>>();
        Handles {
            acquire: empty(Kind::ALL.len() * 2 * Outcome::ALL.len()),
            wait: empty(Kind::ALL.len()),
            hold: empty(HoldEnd::ALL.len()),
            held: metrics::gauge!("leasehold_held"),
            waiters: metrics::gauge!("leasehold_waiters"),
            watchdog_locks: metrics::gauge!("leasehold_watchdog_locks"),
            renewed: metrics::counter!("leasehold_renewals_total", "outcome" => "renewed"),
            renewal_lost: metrics::counter!("leasehold_renewals_total", "outcome" => "lost"),
            renewal_failed: metrics::counter!("leasehold_renewals_total", "outcome" => "failed"),
            connected: Role::ALL
                .iter()
                .map(|role| metrics::gauge!("leasehold_connected", "role" => role.as_str()))
                .collect(),
            reconnects: Role::ALL
                .iter()
                .map(|role| metrics::counter!("leasehold_reconnects_total", "role" => role.as_str()))
                .collect(),
            clients: metrics::gauge!("leasehold_clients"),
        }
    }

    /// Touches every series registered up front, so that a recorder that creates a
    /// series at its first update (not at its registration) shows them at 0 too.
    pub(crate) fn touch(&self) {
        for gauge in [&self.held, &self.waiters, &self.watchdog_locks, &self.clients].into_iter().chain(&self.connected)
        {
            gauge.increment(0.0);
        }
        for counter in [&self.renewed, &self.renewal_lost, &self.renewal_failed].into_iter().chain(&self.reconnects) {
            counter.increment(0);
        }
    }

    // The lookups below are `get`, not indexing: a kind added to `Kind` but left out of
    // `Kind::ALL` loses its records instead of panicking on the hot path (and a guard's
    // `Drop`). The unit tests below check that `ALL` has every variant.

    /// The acquire histogram of (kind, mode, outcome), registered at its first use.
    pub(crate) fn acquire(&self, kind: Kind, waits: bool, outcome: Outcome) -> Option<&Histogram> {
        let cell = self.acquire.get(acquire_index(kind, waits, outcome))?;
        Some(cell.get_or_init(|| {
            let mode = if waits { "wait" } else { "try" };
            metrics::histogram!("leasehold_acquire_duration_seconds",
                "kind" => kind.as_str(), "mode" => mode, "outcome" => outcome.as_str())
        }))
    }

    /// The wait histogram of `kind`, registered at its first use.
    pub(crate) fn wait(&self, kind: Kind) -> Option<&Histogram> {
        let cell = self.wait.get(kind.index())?;
        Some(cell.get_or_init(|| metrics::histogram!("leasehold_wait_duration_seconds", "kind" => kind.as_str())))
    }

    /// The hold histogram of `end`, registered at its first use.
    pub(crate) fn hold(&self, end: HoldEnd) -> Option<&Histogram> {
        let cell = self.hold.get(end.index())?;
        Some(cell.get_or_init(|| metrics::histogram!("leasehold_hold_duration_seconds", "end" => end.as_str())))
    }

    /// The `leasehold_connected` gauge of `role`.
    pub(crate) fn connected(&self, role: Role) -> Option<&Gauge> {
        self.connected.get(role.index())
    }

    /// The `leasehold_reconnects_total` counter of `role`.
    pub(crate) fn reconnects(&self, role: Role) -> Option<&Counter> {
        self.reconnects.get(role.index())
    }
}

/// The slot of a (kind, mode, outcome) series in [`Handles::acquire`].
fn acquire_index(kind: Kind, waits: bool, outcome: Outcome) -> usize {
    (kind.index() * 2 + usize::from(waits)) * Outcome::ALL.len() + outcome.index()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ALL` has every variant (the matches are exhaustive: a new variant fails to compile
    /// here until it is counted), and `index()` is the place in `ALL`.
    #[test]
    fn all_has_every_variant_and_indexes_follow_it() {
        let kinds = |kind: Kind| match kind {
            Kind::Lock
            | Kind::Fenced
            | Kind::Fair
            | Kind::Simple
            | Kind::Read
            | Kind::Write
            | Kind::Latch
            | Kind::Semaphore
            | Kind::Election => 9,
        };
        let outcomes = |outcome: Outcome| match outcome {
            Outcome::Acquired | Outcome::Busy | Outcome::TimedOut | Outcome::Error => 4,
        };
        let ends = |end: HoldEnd| match end {
            HoldEnd::Released | HoldEnd::Lost | HoldEnd::Dropped => 3,
        };
        assert_eq!(Kind::ALL.len(), kinds(Kind::Lock));
        assert_eq!(Outcome::ALL.len(), outcomes(Outcome::Busy));
        assert_eq!(HoldEnd::ALL.len(), ends(HoldEnd::Lost));
        assert!(Kind::ALL.iter().enumerate().all(|(i, kind)| kind.index() == i));
        assert!(Outcome::ALL.iter().enumerate().all(|(i, outcome)| outcome.index() == i));
        assert!(HoldEnd::ALL.iter().enumerate().all(|(i, end)| end.index() == i));
        let roles = |role: Role| match role {
            Role::Commands | Role::Subscriber => 2,
        };
        assert_eq!(Role::ALL.len(), roles(Role::Commands));
        assert!(Role::ALL.iter().enumerate().all(|(i, role)| role.index() == i));
    }

    /// Every (kind, mode, outcome) has its own slot, inside the vector `register` makes.
    #[test]
    fn acquire_indexes_are_distinct_and_in_range() {
        let mut seen = std::collections::HashSet::new();
        for kind in Kind::ALL {
            for waits in [false, true] {
                for outcome in Outcome::ALL {
                    let index = acquire_index(kind, waits, outcome);
                    assert!(index < Kind::ALL.len() * 2 * Outcome::ALL.len());
                    assert!(seen.insert(index), "{kind:?} {waits} {outcome:?} shares {index}");
                }
            }
        }
    }
}
