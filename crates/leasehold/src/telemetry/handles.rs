//! The `metrics` handles of the series without a `lock` label, registered once per
//! recorder and reused: a `metrics::histogram!` with run-time label values builds its key
//! (a label vector, a hash) and looks it up in the recorder's registry on every record,
//! which on the try-lock hot path is several lookups per pair. A handle records without
//! either (the facade's advice for hot paths).
//!
//! Kept per thread, keyed by the recorder's address: a thread reads its own copy with no
//! atomic read-modify-write (a lock shared by the runtime's threads would bounce its
//! cache line between cores on every record), and the handles of one series registered
//! on several threads are the same storage in the recorder. The facade's global
//! recorder is installed at most once, so a thread builds its copy again only when the
//! first recorder arrives (a record made before went to the facade's no-op recorder) or
//! under a thread-local recorder of a test.

use std::cell::RefCell;

use metrics::{Gauge, Histogram, Recorder};

use crate::telemetry::labels::{HoldEnd, Kind, Outcome};

/// Every unlabelled series leasehold records, as handles of one recorder.
pub(crate) struct Handles {
    /// By [`acquire_index`].
    acquire: Vec<Histogram>,
    /// By [`Kind::index`].
    wait: Vec<Histogram>,
    /// By [`HoldEnd::index`].
    hold: Vec<Histogram>,
    pub(crate) held: Gauge,
    pub(crate) waiters: Gauge,
    pub(crate) watchdog_locks: Gauge,
}

thread_local! {
    /// This thread's handles and the address of the recorder they belong to.
    static CACHE: RefCell<Option<(usize, Handles)>> = const { RefCell::new(None) };
}

/// Runs `f` with the handles of the recorder in effect, registering them first if this
/// thread has none of that recorder yet.
pub(crate) fn with(f: impl Fn(&Handles)) {
    let recorder = metrics::with_recorder(|recorder| std::ptr::from_ref::<dyn Recorder>(recorder).cast::<()>().addr());
    let cached = CACHE.try_with(|cache| {
        // Never borrowed twice: `f` only records, it does not come back here.
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
    fn register() -> Self {
        let mut acquire = Vec::with_capacity(Kind::ALL.len() * 2 * Outcome::ALL.len());
        for kind in Kind::ALL {
            for mode in ["try", "wait"] {
                for outcome in Outcome::ALL {
                    acquire.push(metrics::histogram!("leasehold_acquire_duration_seconds",
                        "kind" => kind.as_str(), "mode" => mode, "outcome" => outcome.as_str()));
                }
            }
        }
        let wait = Kind::ALL
            .iter()
            .map(|kind| metrics::histogram!("leasehold_wait_duration_seconds", "kind" => kind.as_str()))
            .collect();
        let hold = HoldEnd::ALL
            .iter()
            .map(|end| metrics::histogram!("leasehold_hold_duration_seconds", "end" => end.as_str()))
            .collect();
        Handles {
            acquire,
            wait,
            hold,
            held: metrics::gauge!("leasehold_held"),
            waiters: metrics::gauge!("leasehold_waiters"),
            watchdog_locks: metrics::gauge!("leasehold_watchdog_locks"),
        }
    }

    // The three lookups below are `get`, not indexing: a kind added to `Kind` but left
    // out of `Kind::ALL` loses its records instead of panicking on the hot path (and a
    // guard's `Drop`). The unit tests below check that `ALL` has every variant.

    /// The acquire histogram of (kind, mode, outcome), which `record` records into.
    pub(crate) fn acquire(&self, kind: Kind, waits: bool, outcome: Outcome) -> Option<&Histogram> {
        self.acquire.get(acquire_index(kind, waits, outcome))
    }

    /// The wait histogram of `kind`.
    pub(crate) fn wait(&self, kind: Kind) -> Option<&Histogram> {
        self.wait.get(kind.index())
    }

    /// The hold histogram of `end`.
    pub(crate) fn hold(&self, end: HoldEnd) -> Option<&Histogram> {
        self.hold.get(end.index())
    }
}

/// The place of a (kind, mode, outcome) series in [`Handles::acquire`], in the order
/// `register` pushes them.
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
            | Kind::Semaphore => 8,
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
    }

    /// Every (kind, mode, outcome) has its own place, inside the vector `register` fills.
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
