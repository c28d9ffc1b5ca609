//! Counting what the client does, for [`Client::stats`](crate::Client::stats) (always)
//! and, with the `metrics` feature, for the `metrics` facade: one place that every
//! acquire, wait, guard and watchdog event goes through. Atomics only on the hot path, no
//! lock (the connections' state, `connection.rs`, moves only at connection events).

pub(crate) mod connection;
#[cfg(feature = "metrics")]
pub(crate) mod handles;
mod labels;
mod watch;

pub(crate) use labels::{HoldEnd, Kind, Outcome, Role};
pub(crate) use watch::ConnectionWatch;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_watchdog::{LostReason, WatchdogObserver};
use tokio::time::Instant;

/// The `tracing` target of the locks' spans (`leasehold.acquire`, `leasehold.wait`,
/// `leasehold.release`) and of every line the lock kinds, waits, semaphores and the
/// blocking API emit. Everything leasehold emits is under `leasehold`: this target, and
/// [`CLIENT_TARGET`], `lock_watchdog::TARGET` (`leasehold::watchdog`),
/// `lock_pubsub::TARGET` (`leasehold::pubsub`) and `lock_core::TARGET`
/// (`leasehold::redis`); `docs/observability.md` lists them.
pub(crate) const TARGET: &str = "leasehold";

/// The `tracing` target of the client's connection lines (a missing reconnect policy,
/// the Sentinel watch following a switch of primary, shutdown).
pub(crate) const CLIENT_TARGET: &str = "leasehold::client";

/// Maps a lock key to a bounded metric label ([`ClientBuilder::metric_label`](crate::ClientBuilder::metric_label)).
pub(crate) type LabelFn = fn(&str) -> Option<&'static str>;

/// One client's counters (shared with its watchdog, which reports into it).
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    acquired: AtomicU64,
    waited: AtomicU64,
    timed_out: AtomicU64,
    busy: AtomicU64,
    wake_ups: AtomicU64,
    missing_semaphore_waits: AtomicU64,
    held: AtomicUsize,
    waiters: AtomicUsize,
    /// The command and subscriber connections, as their events tell them.
    pub(crate) connections: connection::Connections,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    label: Option<LabelFn>,
    /// This client's share of the process-wide `leasehold_watchdog_locks` gauge, as last
    /// reported: the gauge moves by differences, because every client of the process
    /// reports into the same gauge (a `set` would keep only the last client's count).
    #[cfg(feature = "metrics")]
    watchdog_locks_reported: WatchdogShare,
}

/// This client's count in the `leasehold_watchdog_locks` gauge, taken back out when the
/// client is gone (a client that is gone renews nothing).
#[cfg(feature = "metrics")]
#[derive(Debug, Default)]
struct WatchdogShare(AtomicUsize);

impl Telemetry {
    pub(crate) fn new(label: Option<LabelFn>) -> Self {
        #[cfg(feature = "metrics")]
        {
            describe_metrics();
            register_up_front();
        }
        Telemetry { label, ..Telemetry::default() }
    }

    /// The counters and local gauges, into `stats` (the watchdog fills in the rest).
    pub(crate) fn fill(&self, stats: &mut crate::ClientStats) {
        stats.acquired = self.acquired.load(Ordering::Relaxed);
        stats.waited = self.waited.load(Ordering::Relaxed);
        stats.timed_out = self.timed_out.load(Ordering::Relaxed);
        stats.busy = self.busy.load(Ordering::Relaxed);
        stats.wake_ups = self.wake_ups.load(Ordering::Relaxed);
        stats.missing_semaphore_waits = self.missing_semaphore_waits.load(Ordering::Relaxed);
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
        crate::telemetry::handles::with(|handles| handles.waiters.increment(1.0));
        // Not entered (a span entered across `.await`s would be wrong): it spans the wait
        // from its creation to its close, inside the acquire's span.
        let span = if tracing::enabled!(target: crate::telemetry::TARGET, tracing::Level::DEBUG) {
            tracing::debug_span!(
                target: crate::telemetry::TARGET,
                "leasehold.wait",
                lock = %key,
                kind = kind.as_str(),
                wake_ups = tracing::field::Empty,
            )
        } else {
            tracing::Span::none()
        };
        WaitScope { telemetry: self, key, kind, started: Instant::now(), wake_ups: 0, span }
    }

    /// A wait for permits of the semaphore `key` found, after `waited`, that the
    /// semaphore does not exist (no key: never set, flushed, lost in a restart without
    /// persistence, or deleted): one WARN and one count per wait, since nothing will
    /// ever publish permits for it unless someone sets it.
    pub(crate) fn semaphore_missing(&self, key: &str, waited: Duration) {
        self.missing_semaphore_waits.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            target: crate::telemetry::TARGET,
            semaphore = %key,
            waited = ?waited,
            "waiting for permits of a semaphore that does not exist (no key): it waits until someone sets it \
             (try_set_permits) or releases permits; a flush or a restart without persistence empties it"
        );
    }

    /// A guard was handed out.
    pub(crate) fn guard_opened(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| handles.held.increment(1.0));
    }

    /// A guard let go (unlock called, dropped or detached): once per guard, synchronously,
    /// so that a cancelled unlock still leaves the gauge right.
    pub(crate) fn guard_closed(&self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| handles.held.decrement(1.0));
    }

    /// The hold of a guard of `key` handed out at `since` ended as `end` (once per guard
    /// whose end is known: not for an unlock cancelled before its answer).
    pub(crate) fn hold_ended(&self, key: &str, since: Instant, end: HoldEnd) {
        #[cfg(feature = "metrics")]
        {
            let seconds = since.elapsed().as_secs_f64();
            match self.lock_label(key) {
                Some(lock) => {
                    metrics::histogram!("leasehold_hold_duration_seconds", "end" => end.as_str(), "lock" => lock)
                        .record(seconds);
                }
                None => crate::telemetry::handles::with(|handles| {
                    if let Some(histogram) = handles.hold(end) {
                        histogram.record(seconds);
                    }
                }),
            }
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
            let seconds = elapsed.as_secs_f64();
            match self.lock_label(key) {
                Some(lock) => {
                    let mode = if waits { "wait" } else { "try" };
                    metrics::histogram!("leasehold_acquire_duration_seconds",
                        "kind" => kind.as_str(), "mode" => mode, "outcome" => outcome.as_str(), "lock" => lock)
                    .record(seconds);
                }
                None => crate::telemetry::handles::with(|handles| {
                    if let Some(histogram) = handles.acquire(kind, waits, outcome) {
                        histogram.record(seconds);
                    }
                }),
            }
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
            let seconds = self.started.elapsed().as_secs_f64();
            let lock = self.telemetry.lock_label(self.key);
            crate::telemetry::handles::with(|handles| {
                handles.waiters.decrement(1.0);
                if lock.is_none() {
                    if let Some(histogram) = handles.wait(self.kind) {
                        histogram.record(seconds);
                    }
                }
            });
            if let Some(lock) = lock {
                metrics::histogram!("leasehold_wait_duration_seconds", "kind" => self.kind.as_str(), "lock" => lock)
                    .record(seconds);
            }
        }
    }
}

/// The watchdog reports into the client's telemetry (its own counters feed
/// `Client::stats`; these calls only feed the metrics).
impl WatchdogObserver for Telemetry {
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn renewal(&self, renewed: bool) {
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| {
            let counter = if renewed { &handles.renewed } else { &handles.renewal_lost };
            counter.increment(1);
        });
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn renewal_failed(&self, holds: usize) {
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| {
            handles.renewal_failed.increment(u64::try_from(holds).unwrap_or(u64::MAX));
        });
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
        {
            // The watchdog calls this under its entries lock, so the swaps of one client
            // are in order and the gauge ends at the sum of every client's count.
            let before = self.watchdog_locks_reported.0.swap(registered, Ordering::Relaxed);
            crate::telemetry::handles::with(|handles| {
                if registered >= before {
                    handles.watchdog_locks.increment(count_as_f64(registered - before));
                } else {
                    handles.watchdog_locks.decrement(count_as_f64(before - registered));
                }
            });
        }
    }
}

/// A further watchdog of the same client (an election lease's, `election/watchdogs.rs`)
/// reporting into its telemetry: everything is forwarded, but the number of holds it
/// renews is its own share of the gauge (the client's watchdog reports an absolute count
/// of its holds, which would overwrite this one's in a shared share).
pub(crate) struct ExtraWatchdog {
    telemetry: Arc<Telemetry>,
    #[cfg(feature = "metrics")]
    reported: WatchdogShare,
}

impl ExtraWatchdog {
    pub(crate) fn new(telemetry: Arc<Telemetry>) -> Self {
        ExtraWatchdog {
            telemetry,
            #[cfg(feature = "metrics")]
            reported: WatchdogShare::default(),
        }
    }
}

impl std::fmt::Debug for ExtraWatchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtraWatchdog").finish_non_exhaustive()
    }
}

impl WatchdogObserver for ExtraWatchdog {
    fn renewal(&self, renewed: bool) {
        self.telemetry.renewal(renewed);
    }

    fn renewal_failed(&self, holds: usize) {
        self.telemetry.renewal_failed(holds);
    }

    fn lost(&self, key: &str, tag: &'static str, reason: LostReason) {
        self.telemetry.lost(key, tag, reason);
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn registered(&self, registered: usize) {
        #[cfg(feature = "metrics")]
        {
            let before = self.reported.0.swap(registered, Ordering::Relaxed);
            crate::telemetry::handles::with(|handles| {
                if registered >= before {
                    handles.watchdog_locks.increment(count_as_f64(registered - before));
                } else {
                    handles.watchdog_locks.decrement(count_as_f64(before - registered));
                }
            });
        }
    }
}

#[cfg(feature = "metrics")]
impl Drop for WatchdogShare {
    fn drop(&mut self) {
        let reported = self.0.swap(0, Ordering::Relaxed);
        if reported > 0 {
            crate::telemetry::handles::with(|handles| handles.watchdog_locks.decrement(count_as_f64(reported)));
        }
    }
}

#[cfg(feature = "metrics")]
fn count_as_f64(count: usize) -> f64 {
    f64::from(u32::try_from(count).unwrap_or(u32::MAX))
}

/// The `kind` of every hold the watchdog can report lost: the lock kinds it renews or
/// checks after a reconnect ([`Kind::of`]), and a `PermitExpirableSemaphore`'s renewed
/// permits (tagged `permit` in `permit_semaphore/permit.rs`), and an election's lead
/// (`election`, always renewed). A `SimpleLock` (neither
/// renewed nor checked), a `Semaphore`'s permits (no owner, no lease) and a latch are
/// never reported lost.
#[cfg(feature = "metrics")]
const LOST_KINDS: [&str; 7] = ["lock", "fenced", "fair", "read", "write", "permit", "election"];

/// Whether a hold of `kind` can be reported lost for `reason`: every pair but a permit
/// or an election's lead found gone after a reconnect, because only renewed permits are
/// followed (a fixed-lease permit is not checked after reconnects), a lead is always
/// renewed, and a renewed hold is checked by its renewal.
#[cfg(feature = "metrics")]
fn can_be_lost(kind: &str, reason: LostReason) -> bool {
    !(matches!(kind, "permit" | "election") && reason == LostReason::GoneAfterReconnect)
}

/// The series that exist from the start, at 0, in the recorder installed when a client
/// is built: the gauges, `leasehold_renewals_total` and `leasehold_reconnects_total` of
/// every label value, and `leasehold_lost_total` of every (kind, reason) that can occur.
/// An alert on `increase()` sees no increase in a series whose first sample is already
/// 1, so these must exist before their first event. (The histograms, and every series
/// with a `lock` label, appear with their first record.)
#[cfg(feature = "metrics")]
fn register_up_front() {
    crate::telemetry::handles::with(crate::telemetry::handles::Handles::touch);
    for kind in LOST_KINDS {
        for reason in LostReason::ALL.into_iter().filter(|reason| can_be_lost(kind, *reason)) {
            metrics::counter!("leasehold_lost_total", "kind" => kind, "reason" => reason.as_str()).increment(0);
        }
    }
}

/// Units and help texts for the exporter (`# HELP` lines in Prometheus). Sent to the
/// recorder installed when a client is built; a recorder installed later gets the
/// metrics without their descriptions.
#[cfg(feature = "metrics")]
fn describe_metrics() {
    use metrics::Unit;
    metrics::describe_histogram!(
        "leasehold_acquire_duration_seconds",
        Unit::Seconds,
        "Time an acquire call took, by lock kind, mode (try, wait) and outcome"
    );
    metrics::describe_histogram!(
        "leasehold_wait_duration_seconds",
        Unit::Seconds,
        "Time an acquire spent queued behind a holder, by lock kind"
    );
    metrics::describe_histogram!(
        "leasehold_hold_duration_seconds",
        Unit::Seconds,
        "Time a lock was held, by how the hold ended (released, lost, dropped)"
    );
    metrics::describe_counter!(
        "leasehold_renewals_total",
        "Watchdog renewals of held locks, by outcome (renewed, lost, failed)"
    );
    metrics::describe_counter!("leasehold_lost_total", "Held locks found lost, by lock kind and reason");
    metrics::describe_gauge!("leasehold_held", "Guards alive now (not unlocked, dropped or detached)");
    metrics::describe_gauge!("leasehold_waiters", "Acquire calls queued now");
    metrics::describe_gauge!("leasehold_watchdog_locks", "Holds the watchdog renews now");
    metrics::describe_gauge!(
        "leasehold_connected",
        "Clients whose connection of this role (commands, subscriber) is up now"
    );
    metrics::describe_counter!(
        "leasehold_reconnects_total",
        "Connections re-made after the client was built, by role (commands, subscriber)"
    );
    metrics::describe_gauge!("leasehold_clients", "Clients built and not shut down or dropped");
}
