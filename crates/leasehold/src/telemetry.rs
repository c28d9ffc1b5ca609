//! Counting what the client does, for [`Client::stats`](crate::Client::stats) (always)
//! and, with the `metrics` feature, for the `metrics` facade: one place that every
//! acquire, wait, guard and watchdog event goes through. Atomics only, no lock: it sits
//! on the hot path.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use lock_watchdog::{LostReason, WatchdogObserver};
use tokio::time::Instant;

/// Maps a lock key to a bounded metric label ([`ClientBuilder::metric_label`](crate::ClientBuilder::metric_label)).
pub(crate) type LabelFn = fn(&str) -> Option<&'static str>;

/// The lock kinds, as labels and span fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    Fenced,
    Fair,
    Simple,
}

impl Kind {
    /// The label of a lock of `kind`.
    pub(crate) fn of(kind: &lock_core::LockKind) -> Kind {
        match kind {
            lock_core::LockKind::Reentrant { .. } => Kind::Lock,
            lock_core::LockKind::Fenced { .. } => Kind::Fenced,
            lock_core::LockKind::Fair { .. } => Kind::Fair,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fenced => "fenced",
            Kind::Fair => "fair",
            Kind::Simple => "simple",
        }
    }
}

/// How an acquire ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// One attempt (zero wait) found the lock held.
    Busy,
    TimedOut,
    Error,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Busy => "busy",
            Outcome::TimedOut => "timed_out",
            Outcome::Error => "error",
        }
    }

    /// The outcome of an acquire that waited (`waits`) or tried once.
    pub(crate) fn of<T>(result: &lock_core::Result<Option<T>>, waits: bool) -> Outcome {
        match result {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) if waits => Outcome::TimedOut,
            Ok(None) => Outcome::Busy,
            Err(_) => Outcome::Error,
        }
    }
}

/// How a guard's hold ended, as the `end` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldEnd {
    Released,
    Lost,
    /// Dropped or detached without `unlock`.
    Dropped,
}

impl HoldEnd {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            HoldEnd::Released => "released",
            HoldEnd::Lost => "lost",
            HoldEnd::Dropped => "dropped",
        }
    }
}

/// One client's counters (shared with its watchdog, which reports into it).
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    acquired: AtomicU64,
    waited: AtomicU64,
    timed_out: AtomicU64,
    busy: AtomicU64,
    wake_ups: AtomicU64,
    held: AtomicUsize,
    waiters: AtomicUsize,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    label: Option<LabelFn>,
}

impl Telemetry {
    pub(crate) fn new(label: Option<LabelFn>) -> Self {
        Telemetry { label, ..Telemetry::default() }
    }

    /// The counters and local gauges, into `stats` (the watchdog fills in the rest).
    pub(crate) fn fill(&self, stats: &mut crate::ClientStats) {
        stats.acquired = self.acquired.load(Ordering::Relaxed);
        stats.waited = self.waited.load(Ordering::Relaxed);
        stats.timed_out = self.timed_out.load(Ordering::Relaxed);
        stats.busy = self.busy.load(Ordering::Relaxed);
        stats.wake_ups = self.wake_ups.load(Ordering::Relaxed);
        stats.held = self.held.load(Ordering::Relaxed);
        stats.waiters = self.waiters.load(Ordering::Relaxed);
    }

    /// An acquire of `key` ended after `elapsed`.
    pub(crate) fn acquire_done(&self, key: &str, kind: Kind, waits: bool, outcome: Outcome, elapsed: Duration) {
        let counter = match outcome {
            Outcome::Acquired => &self.acquired,
            Outcome::Busy => &self.busy,
            Outcome::TimedOut => &self.timed_out,
            Outcome::Error => return self.record_acquire(key, kind, waits, outcome, elapsed),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.record_acquire(key, kind, waits, outcome, elapsed);
    }

    /// A waiting acquire of `key` queued: counted until the returned scope is dropped
    /// (however the wait ends, cancelled included).
    pub(crate) fn wait_begin<'a>(&'a self, key: &'a str, kind: Kind) -> WaitScope<'a> {
        self.waited.fetch_add(1, Ordering::Relaxed);
        self.waiters.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::gauge!("leasehold_waiters").increment(1.0);
        // Not entered (a span entered across `.await`s would be wrong): it spans the wait
        // from its creation to its close, inside the acquire's span.
        let span = if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug_span!("leasehold.wait", lock = %key, kind = kind.as_str(), wake_ups = tracing::field::Empty)
        } else {
            tracing::Span::none()
        };
        WaitScope { telemetry: self, key, kind, started: Instant::now(), wake_ups: 0, span }
    }

    /// A guard was handed out.
    pub(crate) fn guard_opened(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::gauge!("leasehold_held").increment(1.0);
    }

    /// A guard let go (unlock called, dropped or detached): once per guard, synchronously,
    /// so that a cancelled unlock still leaves the gauge right.
    pub(crate) fn guard_closed(&self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::gauge!("leasehold_held").decrement(1.0);
    }

    /// The hold of a guard of `key` handed out at `since` ended as `end` (once per guard
    /// whose end is known: not for an unlock cancelled before its answer).
    pub(crate) fn hold_ended(&self, key: &str, since: Instant, end: HoldEnd) {
        #[cfg(feature = "metrics")]
        {
            let seconds = since.elapsed().as_secs_f64();
            let histogram = match self.lock_label(key) {
                Some(lock) => {
                    metrics::histogram!("leasehold_hold_duration_seconds", "end" => end.as_str(), "lock" => lock)
                }
                None => metrics::histogram!("leasehold_hold_duration_seconds", "end" => end.as_str()),
            };
            histogram.record(seconds);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (key, since, end);
    }

    #[cfg(feature = "metrics")]
    fn lock_label(&self, key: &str) -> Option<&'static str> {
        self.label.and_then(|label| label(key))
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn record_acquire(&self, key: &str, kind: Kind, waits: bool, outcome: Outcome, elapsed: Duration) {
        #[cfg(feature = "metrics")]
        {
            let mode = if waits { "wait" } else { "try" };
            let (kind, outcome, seconds) = (kind.as_str(), outcome.as_str(), elapsed.as_secs_f64());
            let histogram = match self.lock_label(key) {
                Some(lock) => metrics::histogram!("leasehold_acquire_duration_seconds",
                    "kind" => kind, "mode" => mode, "outcome" => outcome, "lock" => lock),
                None => metrics::histogram!("leasehold_acquire_duration_seconds",
                    "kind" => kind, "mode" => mode, "outcome" => outcome),
            };
            histogram.record(seconds);
        }
    }
}

/// A waiting acquire, counted in the waiters gauge while it lives.
pub(crate) struct WaitScope<'a> {
    telemetry: &'a Telemetry,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    key: &'a str,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    kind: Kind,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    started: Instant,
    wake_ups: u64,
    /// `leasehold.wait`, or a disabled span when DEBUG is off.
    span: tracing::Span,
}

impl WaitScope<'_> {
    /// The wait woke and tries again.
    pub(crate) fn wake_up(&mut self) {
        self.wake_ups += 1;
        self.telemetry.wake_ups.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for WaitScope<'_> {
    fn drop(&mut self) {
        self.span.record("wake_ups", self.wake_ups);
        self.telemetry.waiters.fetch_sub(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!("leasehold_waiters").decrement(1.0);
            let seconds = self.started.elapsed().as_secs_f64();
            let kind = self.kind.as_str();
            let histogram = match self.telemetry.lock_label(self.key) {
                Some(lock) => metrics::histogram!("leasehold_wait_duration_seconds", "kind" => kind, "lock" => lock),
                None => metrics::histogram!("leasehold_wait_duration_seconds", "kind" => kind),
            };
            histogram.record(seconds);
        }
    }
}

/// The watchdog reports into the client's telemetry (its own counters feed
/// `Client::stats`; these calls only feed the metrics).
impl WatchdogObserver for Telemetry {
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn renewal(&self, renewed: bool) {
        #[cfg(feature = "metrics")]
        metrics::counter!("leasehold_renewals_total", "outcome" => if renewed { "renewed" } else { "lost" })
            .increment(1);
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn renewal_failed(&self, holds: usize) {
        #[cfg(feature = "metrics")]
        metrics::counter!("leasehold_renewals_total", "outcome" => "failed")
            .increment(u64::try_from(holds).unwrap_or(u64::MAX));
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn lost(&self, key: &str, tag: &'static str, reason: LostReason) {
        #[cfg(feature = "metrics")]
        match self.lock_label(key) {
            Some(lock) => {
                metrics::counter!("leasehold_lost_total", "kind" => tag, "reason" => reason.as_str(), "lock" => lock)
                    .increment(1);
            }
            None => metrics::counter!("leasehold_lost_total", "kind" => tag, "reason" => reason.as_str()).increment(1),
        }
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn registered(&self, registered: usize) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("leasehold_watchdog_locks").set(f64::from(u32::try_from(registered).unwrap_or(u32::MAX)));
    }
}
