//! The renewal scheduler: one task per client, one entry per held lock; and the
//! read-only check of every tracked hold after a reconnect.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use lock_core::{ExpiryHook, LeaseState, OwnerId};
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::observer::{LostReason, WatchdogObserver};
use crate::renewer::Renewer;
use crate::TARGET;

/// Settings of a [`Watchdog`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WatchdogConfig {
    /// The lease given to watchdog-mode locks and set again by each renewal.
    /// Renewals run every `timeout / 3`. Default: 30 s (Redisson's).
    pub timeout: Duration,
    /// Most keys per `renew_batch.lua` call. Default: 100 (Redisson's).
    pub batch_size: usize,
    /// Group each batch by cluster hash slot (a script may only touch one slot).
    /// Default: `false` (standalone server).
    pub group_by_slot: bool,
    /// How often [`Renewer::follow_topology`] runs while any hold is registered or
    /// tracked; when it reports a change of primary, every hold is renewed and checked
    /// at once, as after a reconnect. For a cluster, where a shard's primary can change
    /// under a live connection (fred then hears of it only at the next command on that
    /// shard). Default: `None` (never).
    pub topology_check: Option<Duration>,
    /// Told of every renewal answered, every hold found lost and every change in the
    /// number of holds renewed. Default: `None`.
    pub observer: Option<Arc<dyn WatchdogObserver>>,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            timeout: Duration::from_secs(30),
            batch_size: 100,
            group_by_slot: false,
            topology_check: None,
            observer: None,
        }
    }
}

impl WatchdogConfig {
    /// The renewal period, `timeout / 3`.
    pub fn period(&self) -> Duration {
        self.timeout / 3
    }

    /// How soon a failed renewal is retried: `period / 5`, between 10 ms and 1 s.
    pub fn retry_interval(&self) -> Duration {
        (self.period() / 5).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

/// The watchdog's counters since it started (and the holds registered now): what
/// `leasehold::ClientStats::watchdog` shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogStats {
    /// Holds registered now.
    pub registered: usize,
    /// Renewal rounds run (periodic and retries).
    pub rounds: u64,
    /// `renew_batch` calls made.
    pub calls: u64,
    /// Calls that failed (timeout, connection).
    pub failed_calls: u64,
    /// Holds found lost (owner gone, or the lease deadline passed before a renewal
    /// succeeded), each once, by the time its `lost()` resolves.
    pub lost: u64,
    /// Holds tracked now ([`Watchdog::track`]): checked after each reconnect.
    pub tracked: usize,
    /// `verify_batch` calls made (the checks after reconnects).
    pub checks: u64,
    /// Check calls that failed (timeout, connection); their holds are checked again.
    pub failed_checks: u64,
    /// Changes of primary found by the periodic topology check
    /// ([`WatchdogConfig::topology_check`]), each followed by a renewal and a check.
    pub topology_changes: u64,
    /// Holds renewed (one per hold and successful renewal, not per call).
    pub renewed: u64,
}

/// One scheduler per client.
#[derive(Debug)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: WatchdogConfig,
    lease_ms: u64,
    entries: Mutex<HashMap<u64, Entry>>,
    /// The holds checked (never renewed) after each reconnect. Never locked while
    /// `entries` is.
    tracked: Mutex<HashMap<u64, Tracked>>,
    next_id: AtomicU64,
    /// In an `Arc` so the idle scheduler can wait on it without keeping `Shared` alive.
    registered: Arc<Notify>,
    /// Asks for a full round now (after a reconnect). In an `Arc` for the same reason.
    kick: Arc<Notify>,
    /// Asks for a check of every tracked hold now (after a reconnect).
    check_kick: Arc<Notify>,
    /// Wakes the sweep of lease deadlines ([`run_expiries`]) when the first hold is
    /// registered. In an `Arc` for the same reason.
    expiry_kick: Arc<Notify>,
    /// Kept so that every helper task can stop with the watchdog.
    shutdown_rx: watch::Receiver<()>,
    stats: Counters,
    /// How late the last renewal round started, in nanoseconds ([`Watchdog::lag`]).
    round_lag_nanos: AtomicU64,
    _shutdown: watch::Sender<()>,
}

#[derive(Debug, Default)]
struct Counters {
    rounds: AtomicU64,
    calls: AtomicU64,
    failed_calls: AtomicU64,
    lost: AtomicU64,
    checks: AtomicU64,
    failed_checks: AtomicU64,
    topology_changes: AtomicU64,
    renewed: AtomicU64,
}

impl Shared {
    /// Tells the observer how many holds are registered now (under the entries lock).
    fn registered_changed(&self, registered: usize) {
        if let Some(observer) = &self.config.observer {
            observer.registered(registered);
        }
    }

    /// A hold the watchdog answered for was found lost (the owner gone at a renewal or
    /// at a check after a reconnect): reported ([`Shared::report_lost`]) and marked
    /// lost in one step under the lease's lock, so that a holder woken by `lost()` finds
    /// it counted. A hold already lost (by its deadline, or another path) is neither
    /// counted nor reported again.
    fn found_lost(&self, lease: &LeaseState, key: &str, tag: &'static str, reason: LostReason) {
        lease.lose_with(|| self.report_lost(key, tag, reason));
    }

    /// The one place a loss is reported, once per hold: counted (`stats.lost`), the
    /// `leasehold.lost` event at WARN, and the observer (`leasehold_lost_total`). Called
    /// under the lease's lock, right before the hold is marked lost: by
    /// [`Shared::found_lost`], or by the lease itself when a renewed hold's deadline
    /// passed ([`ExpiryHook`]), whoever looked first (its `lost()`, `is_lost()`, the
    /// deadline sweep, a late answer, the hold's deregistration).
    fn report_lost(&self, key: &str, tag: &'static str, reason: LostReason) {
        self.stats.lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            name: "leasehold.lost",
            target: TARGET,
            lock = %key,
            kind = tag,
            reason = reason.as_str(),
            "lock lost: {}",
            reason.describe()
        );
        if let Some(observer) = &self.config.observer {
            observer.lost(key, tag, reason);
        }
    }

    /// A full renewal round now, and a check of every tracked hold ([`Watchdog::renew_now`]).
    fn kick_all(&self) {
        self.kick.notify_one();
        self.check_kick.notify_one();
    }

    /// The deadline sweep: every registered hold whose lease deadline has passed is
    /// reported lost (through its lease's hook, unless someone looked first) and leaves
    /// the entries, as do holds marked lost another way and holds whose lease is gone.
    /// Returns the earliest deadline still ahead. The leases are settled outside the
    /// entries lock.
    fn expire_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut due: Vec<(u64, Option<Arc<LeaseState>>)> = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, entry) in self.entries.lock().iter() {
            let Some(lease) = entry.lease.upgrade() else {
                due.push((*id, None));
                continue;
            };
            let deadline = lease.expires_at();
            if deadline <= now || lease.is_marked_lost() {
                due.push((*id, Some(lease)));
            } else {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
            }
        }
        if due.is_empty() {
            return next;
        }
        let mut gone = Vec::with_capacity(due.len());
        for (id, lease) in due {
            // `check_expiry` reports a passed deadline once (the hook); a lease extended
            // meanwhile (an answer landed) stays.
            if lease.is_none_or(|lease| lease.check_expiry()) {
                gone.push(id);
            }
        }
        let mut entries = self.entries.lock();
        for id in gone {
            entries.remove(&id);
        }
        self.registered_changed(entries.len());
        drop(entries);
        next
    }
}

/// A renewed hold's lease ran out on the local clock before a renewal succeeded (they
/// failed, or went unanswered: a partition): the loss, reported once by the lease.
impl ExpiryHook for Shared {
    fn expired(&self, key: &str, tag: &'static str) {
        self.report_lost(key, tag, LostReason::RenewalsFailed);
    }
}

/// How a registered hold is renewed: the renewal spec of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenewSpec {
    /// While the owner field exists on the lock key (a Hash), raise the key's TTL
    /// (`renew_batch.lua`: reentrant, fenced, fair locks and a read/write lock's write).
    Field,
    /// A read hold of a read/write lock (`read_renew_batch.lua`): while the owner's
    /// reader field exists, raise the TTL of its own timeout keys (this prefix + `:k`)
    /// and of the Hash; never another owner's.
    ReadHold {
        /// The owner's timeout-key prefix, `{NAME}:OWNER:rwlock_timeout`.
        timeout_prefix: Arc<str>,
    },
    /// A permit of a permit-expirable semaphore (`pes_renew_batch.lua`): the key is its
    /// `{NAME}:timeout` `ZSet` and the owner its id (32 hex digits); while the permit is
    /// listed and live, its score is raised to the lease from now (server clock).
    Permit,
}

#[derive(Debug)]
struct Entry {
    key: Arc<str>,
    owner: OwnerId,
    spec: RenewSpec,
    lease: Weak<LeaseState>,
    /// The caller's label for the hold, handed back to [`WatchdogObserver::lost`].
    tag: &'static str,
    /// The last renewal of this hold failed; it is retried before the next period.
    failing: bool,
}

/// A registered hold. Dropping it deregisters the hold at once: no renewal is scheduled
/// for it afterwards (one already sent may still land, and only extends a key whose
/// owner field exists).
#[derive(Debug)]
#[must_use = "the hold is deregistered as soon as the Renewal is dropped"]
pub struct Renewal {
    shared: Weak<Shared>,
    id: u64,
}

impl Drop for Renewal {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            let mut entries = shared.entries.lock();
            if let Some(entry) = entries.remove(&self.id) {
                shared.registered_changed(entries.len());
                // The hook goes with the registration. A deadline that passed before
                // anyone looked is reported now: the hold was lost while renewed
                // (a guard dropped right when its `lost()` fired finds it reported).
                if let Some(lease) = entry.lease.upgrade() {
                    lease.remove_expiry_hook(self.id);
                }
            }
        }
    }
}

impl Renewal {
    /// `true` while the scheduler still renews this hold (not lost, watchdog alive).
    pub fn is_active(&self) -> bool {
        self.shared.upgrade().is_some_and(|shared| {
            shared
                .entries
                .lock()
                .get(&self.id)
                .is_some_and(|entry| entry.lease.upgrade().is_some_and(|lease| !lease.is_marked_lost()))
        })
    }
}

#[derive(Debug)]
struct Tracked {
    key: Arc<str>,
    owner: OwnerId,
    lease: Weak<LeaseState>,
    /// The caller's label for the hold, handed back to [`WatchdogObserver::lost`].
    tag: &'static str,
    /// A check was asked for (a reconnect) and has not been answered yet.
    pending: bool,
}

/// A tracked hold ([`Watchdog::track`]): checked, read-only, after every reconnect.
/// Dropping it stops the tracking at once (a check already in flight may still land;
/// its answer is then ignored).
#[derive(Debug)]
#[must_use = "the hold is no longer tracked once the Tracking is dropped"]
pub struct Tracking {
    shared: Weak<Shared>,
    id: u64,
}

impl Drop for Tracking {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.tracked.lock().remove(&self.id);
        }
    }
}

impl Tracking {
    /// `true` while the watchdog tracks this hold (not found lost, watchdog alive).
    pub fn is_active(&self) -> bool {
        self.shared.upgrade().is_some_and(|shared| shared.tracked.lock().contains_key(&self.id))
    }

    /// Reports the tracked hold lost for `reason`, found by its owner rather than by the
    /// watchdog (the server answered an acquire or a release of the same owner that it
    /// no longer holds the lock, while guards of the hold were still alive): reported
    /// as the watchdog's own findings are (counted, the `leasehold.lost` event, the
    /// observer), once, under the lease's lock, and marked lost; tracking stops. A hold
    /// already lost is not reported again.
    pub fn report_lost(&self, reason: LostReason) {
        let Some(shared) = self.shared.upgrade() else { return };
        let mut tracked = shared.tracked.lock();
        let Some(entry) = tracked.remove(&self.id) else { return };
        if let Some(lease) = entry.lease.upgrade() {
            shared.found_lost(&lease, &entry.key, entry.tag, reason);
        }
    }
}

impl Watchdog {
    /// Starts the scheduler task on the current tokio runtime (one task: the renewal
    /// rounds, the checks after reconnects and, with `topology_check`, the topology
    /// reads run in it side by side).
    ///
    /// # Panics
    /// Outside a tokio runtime, or when `config.timeout` is under 3 ms (callers validate
    /// it first) or `batch_size` is 0.
    pub fn start<R: Renewer>(renewer: R, config: WatchdogConfig) -> Self {
        assert!(config.timeout >= Duration::from_millis(3), "watchdog timeout must be at least 3 ms");
        assert!(config.batch_size > 0, "batch size must be at least 1");
        let (shutdown_tx, shutdown_rx) = watch::channel(());
        let lease_ms = u64::try_from(config.timeout.as_millis()).unwrap_or(u64::MAX);
        let shared = Arc::new(Shared {
            config,
            lease_ms,
            entries: Mutex::new(HashMap::new()),
            tracked: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            registered: Arc::new(Notify::new()),
            kick: Arc::new(Notify::new()),
            check_kick: Arc::new(Notify::new()),
            expiry_kick: Arc::new(Notify::new()),
            shutdown_rx: shutdown_rx.clone(),
            stats: Counters::default(),
            round_lag_nanos: AtomicU64::new(0),
            _shutdown: shutdown_tx,
        });
        let weak = Arc::downgrade(&shared);
        tokio::spawn(async move {
            // One task and one renewer handle for every loop; each ends at shutdown.
            tokio::join!(
                run(weak.clone(), &renewer, shutdown_rx.clone()),
                run_checks(weak.clone(), &renewer, shutdown_rx.clone()),
                run_topology(weak.clone(), &renewer, shutdown_rx.clone()),
                run_expiries(weak, shutdown_rx),
            );
        });
        Watchdog { shared }
    }

    /// The configuration.
    pub fn config(&self) -> &WatchdogConfig {
        &self.shared.config
    }

    /// Registers a held lock: it is renewed every period until the returned [`Renewal`]
    /// is dropped or the hold is found lost (then `lease` is marked lost). Its lease
    /// gets the watchdog's [`ExpiryHook`]: if its deadline passes before a renewal
    /// succeeds, the loss is reported (`stats.lost`, the `leasehold.lost` event, the
    /// observer) by whoever sees it first, before any `lost()` of it resolves.
    pub fn register(&self, key: Arc<str>, owner: OwnerId, lease: &Arc<LeaseState>) -> Renewal {
        self.register_tagged(key, owner, lease, "")
    }

    /// [`Watchdog::register`], with a label handed back to [`WatchdogObserver::lost`]
    /// if the hold is found lost (leasehold passes the lock kind).
    pub fn register_tagged(
        &self,
        key: Arc<str>,
        owner: OwnerId,
        lease: &Arc<LeaseState>,
        tag: &'static str,
    ) -> Renewal {
        self.register_spec(key, owner, lease, tag, RenewSpec::Field)
    }

    /// [`Watchdog::register_tagged`] with the hold's renewal spec (how it is renewed;
    /// holds of one spec are batched together, per slot in a cluster).
    pub fn register_spec(
        &self,
        key: Arc<str>,
        owner: OwnerId,
        lease: &Arc<LeaseState>,
        tag: &'static str,
        spec: RenewSpec,
    ) -> Renewal {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        // Hooked before it is an entry, so no sweep sees it without its hook.
        let hook: Weak<dyn ExpiryHook> = Arc::downgrade(&self.shared) as Weak<dyn ExpiryHook>;
        lease.set_expiry_hook(hook, Arc::clone(&key), tag, id);
        let entry = Entry { key, owner, spec, lease: Arc::downgrade(lease), tag, failing: false };
        let was_empty = {
            let mut entries = self.shared.entries.lock();
            entries.insert(id, entry);
            self.shared.registered_changed(entries.len());
            entries.len() == 1
        };
        if was_empty {
            self.shared.registered.notify_one();
            self.shared.expiry_kick.notify_one();
        }
        Renewal { shared: Arc::downgrade(&self.shared), id }
    }

    /// Tracks a held lock that the watchdog does not renew (a fixed lease): nothing is
    /// sent for it periodically, but after every reconnect ([`Watchdog::renew_now`]) its
    /// owner field is checked, read-only (`verify_batch.lua`: its TTL is never
    /// touched), and if it is gone `lease` is marked lost. A hold both tracked and
    /// registered is checked by its renewal instead. Tracking stops when the returned
    /// [`Tracking`] is dropped or the hold is found lost.
    pub fn track(&self, key: Arc<str>, owner: OwnerId, lease: &Arc<LeaseState>) -> Tracking {
        self.track_tagged(key, owner, lease, "")
    }

    /// [`Watchdog::track`], with a label handed back to [`WatchdogObserver::lost`] if
    /// the hold is found lost (leasehold passes the lock kind).
    pub fn track_tagged(&self, key: Arc<str>, owner: OwnerId, lease: &Arc<LeaseState>, tag: &'static str) -> Tracking {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let tracked = Tracked { key, owner, lease: Arc::downgrade(lease), tag, pending: false };
        self.shared.tracked.lock().insert(id, tracked);
        Tracking { shared: Arc::downgrade(&self.shared), id }
    }

    /// Runs a full renewal round now rather than at the next period, and checks every
    /// tracked hold ([`Watchdog::track`]). Call it when the server may have lost locks
    /// (a reconnect, a failover): holders whose lock is gone hear `lost()` within a
    /// round trip. A check that fails (timeout, connection) is sent again every
    /// [`WatchdogConfig::retry_interval`] until it is answered or the hold's lease
    /// deadline passes. Does nothing while nothing is registered or tracked.
    pub fn renew_now(&self) {
        self.shared.kick_all();
    }

    /// Calls [`Watchdog::renew_now`] on every event of `events` (fred's
    /// `reconnect_rx()`, say), from a task that ends with the watchdog.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn renew_on_each<T: Clone + Send + 'static>(&self, mut events: broadcast::Receiver<T>) {
        let kick = Arc::clone(&self.shared.kick);
        let check_kick = Arc::clone(&self.shared.check_kick);
        let mut shutdown = self.shared.shutdown_rx.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    event = events.recv() => match event {
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                            kick.notify_one();
                            check_kick.notify_one();
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        });
    }

    /// Stops the scheduler task and the tasks of [`Watchdog::renew_on_each`] (each ends
    /// at its next wake-up), as dropping the last handle would: nothing is renewed or
    /// checked afterwards. Registrations stay, unused.
    pub fn stop(&self) {
        // Every loop selects on `shutdown.changed()`, which a send wakes as a drop does.
        self.shared._shutdown.send_replace(());
    }

    /// Counters since start.
    pub fn stats(&self) -> WatchdogStats {
        let c = &self.shared.stats;
        WatchdogStats {
            registered: self.shared.entries.lock().len(),
            rounds: c.rounds.load(Ordering::Relaxed),
            calls: c.calls.load(Ordering::Relaxed),
            failed_calls: c.failed_calls.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            tracked: self.shared.tracked.lock().len(),
            checks: c.checks.load(Ordering::Relaxed),
            failed_checks: c.failed_checks.load(Ordering::Relaxed),
            topology_changes: c.topology_changes.load(Ordering::Relaxed),
            renewed: c.renewed.load(Ordering::Relaxed),
        }
    }
}

/// One hold in one round: its entry id and what to send.
type Job = (u64, String, String);

async fn run<R: Renewer>(weak: Weak<Shared>, renewer: &R, mut shutdown: watch::Receiver<()>) {
    let Some((period, registered, kick)) =
        weak.upgrade().map(|s| (s.config.period(), Arc::clone(&s.registered), Arc::clone(&s.kick)))
    else {
        return;
    };
    let mut next_tick = Instant::now() + period;
    let mut retry_at: Option<Instant> = None;
    let mut force_round = false;
    loop {
        let wake_at = retry_at.map_or(next_tick, |r| r.min(next_tick));
        {
            let Some(shared) = weak.upgrade() else { return };
            let idle = shared.entries.lock().is_empty();
            if idle {
                // Nothing to renew: no round is late.
                shared.record_lag(Duration::ZERO);
            }
            // Not held while idle: dropping the `Watchdog` must drop `Shared` (and the
            // shutdown sender). A registration meanwhile leaves a `notify_one` permit.
            drop(shared);
            if idle {
                // Nothing to renew: sleep until something is registered.
                tokio::select! {
                    _ = shutdown.changed() => return,
                    () = registered.notified() => {}
                    () = kick.notified() => {
                        // A reconnect while idle: nothing to check, unless a hold
                        // registered in the meantime (then check it now).
                        force_round = weak.upgrade().is_some_and(|s| !s.entries.lock().is_empty());
                        continue;
                    }
                }
                next_tick = Instant::now() + period;
                retry_at = None;
                continue;
            }
        }
        let kicked = std::mem::take(&mut force_round)
            || tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep_until(wake_at) => false,
                () = kick.notified() => true,
            };
        let now = Instant::now();
        if kicked {
            // A full round now, and the rhythm restarts from it.
            next_tick = now;
        }
        let full_round = now >= next_tick;
        if full_round {
            next_tick += period;
            if next_tick <= now {
                // We fell far behind (a stalled runtime): restart the rhythm from now.
                next_tick = now + period;
            }
        }
        let Some(shared) = weak.upgrade() else { return };
        // How late the round starts against its schedule (the period's tick or the
        // retry's time); a round asked for (a reconnect) is on time.
        shared.record_lag(if kicked { Duration::ZERO } else { now.saturating_duration_since(wake_at) });
        let any_failing = round(&shared, renewer, full_round).await;
        retry_at = any_failing.then(|| Instant::now() + shared.config.retry_interval());
    }
}

/// Which batch script renews a batch (one per [`RenewSpec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Field,
    Read,
    Permit,
}

impl Script {
    /// The `script` field of a `leasehold.renew` span.
    fn as_str(self) -> &'static str {
        match self {
            Script::Field => "renew_batch",
            Script::Read => "read_renew_batch",
            Script::Permit => "pes_renew_batch",
        }
    }
}

/// Renews every hold (`full`) or only the failing ones. Returns whether any hold is
/// still failing afterwards.
async fn round<R: Renewer>(shared: &Arc<Shared>, renewer: &R, full: bool) -> bool {
    shared.stats.rounds.fetch_add(1, Ordering::Relaxed);
    let mut jobs: Vec<Job> = Vec::new();
    // Read holds go in batches of their own (another script); their prefixes by id.
    let mut read_jobs: Vec<Job> = Vec::new();
    let mut prefixes: HashMap<u64, Arc<str>> = HashMap::new();
    // Permits too (another script again).
    let mut permit_jobs: Vec<Job> = Vec::new();
    {
        let mut entries = shared.entries.lock();
        let before = entries.len();
        // A hold already lost (its deadline passed, found lost) is never renewed again,
        // even if the partition that lost it has healed: its holder was told.
        entries.retain(|_, e| e.lease.upgrade().is_some_and(|lease| !lease.is_marked_lost()));
        if entries.len() != before {
            shared.registered_changed(entries.len());
        }
        for (id, e) in entries.iter().filter(|(_, e)| full || e.failing) {
            let job = (*id, e.key.to_string(), e.owner.as_str().to_owned());
            match &e.spec {
                RenewSpec::Field => jobs.push(job),
                RenewSpec::ReadHold { timeout_prefix } => {
                    prefixes.insert(*id, Arc::clone(timeout_prefix));
                    read_jobs.push(job);
                }
                RenewSpec::Permit => permit_jobs.push(job),
            }
        }
    }
    let prefixes = Arc::new(prefixes);
    let mut calls = JoinSet::new();
    let field_batches = batches(jobs, &shared.config).into_iter().map(|b| (b, Script::Field));
    let read_batches = batches(read_jobs, &shared.config).into_iter().map(|b| (b, Script::Read));
    let permit_batches = batches(permit_jobs, &shared.config).into_iter().map(|b| (b, Script::Permit));
    for (batch, script) in field_batches.chain(read_batches).chain(permit_batches) {
        let renewer = renewer.clone();
        let lease_ms = shared.lease_ms;
        let prefixes = Arc::clone(&prefixes);
        shared.stats.calls.fetch_add(1, Ordering::Relaxed);
        calls.spawn(async move {
            let sent_at = Instant::now();
            let renew = async {
                if script == Script::Permit {
                    let holds: Vec<(String, String)> = batch.iter().map(|(_, k, o)| (k.clone(), o.clone())).collect();
                    renewer.renew_permits(holds, lease_ms).await
                } else if script == Script::Read {
                    let holds: Vec<(String, String, String)> = batch
                        .iter()
                        .map(|(id, k, o)| {
                            (k.clone(), o.clone(), prefixes.get(id).map(|p| p.to_string()).unwrap_or_default())
                        })
                        .collect();
                    renewer.renew_reads(holds, lease_ms).await
                } else {
                    let holds: Vec<(String, String)> = batch.iter().map(|(_, k, o)| (k.clone(), o.clone())).collect();
                    renewer.renew(holds, lease_ms).await
                }
            };
            let result = if tracing::enabled!(target: TARGET, tracing::Level::DEBUG) {
                use tracing::Instrument;
                let span = tracing::debug_span!(
                    target: TARGET,
                    "leasehold.renew",
                    batch = batch.len(),
                    script = script.as_str(),
                    db.system.name = "redis"
                );
                renew.instrument(span).await
            } else {
                // No span to fill: skip building it.
                renew.await
            };
            (batch, sent_at, result)
        });
    }
    while let Some(joined) = calls.join_next().await {
        let Ok((batch, sent_at, result)) = joined else { continue };
        apply(shared, &batch, sent_at, result);
    }
    shared.entries.lock().values().any(|e| e.failing)
}

fn apply(shared: &Shared, batch: &[Job], sent_at: Instant, result: lock_core::Result<Vec<bool>>) {
    let mut entries = shared.entries.lock();
    match result {
        Ok(renewed) => {
            for ((id, key, _), renewed) in batch.iter().zip(renewed) {
                // An entry deregistered meanwhile (unlocked) is left alone.
                let Some(entry) = entries.get_mut(id) else { continue };
                // Gone, lost meanwhile, or past its deadline: an answer after the
                // deadline revives nothing (the lease reports the loss, once).
                let Some(lease) = entry.lease.upgrade().filter(|lease| !lease.check_expiry()) else {
                    entries.remove(id);
                    continue;
                };
                if renewed {
                    shared.stats.renewed.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(observer) = &shared.config.observer {
                    observer.renewal(renewed);
                }
                if renewed {
                    entry.failing = false;
                    // Exactly the TTL that was sent (whole milliseconds, rounded down), so the
                    // local deadline is never after the server's expiry.
                    lease.extend(sent_at, Duration::from_millis(shared.lease_ms));
                } else {
                    let tag = entry.tag;
                    entries.remove(id);
                    shared.found_lost(&lease, key, tag, LostReason::OwnerGone);
                }
            }
        }
        Err(error) => {
            shared.stats.failed_calls.fetch_add(1, Ordering::Relaxed);
            if let Some(observer) = &shared.config.observer {
                observer.renewal_failed(batch.len());
            }
            tracing::debug!(
                target: TARGET,
                %error,
                holds = batch.len(),
                "renewal failed; will retry until the lease deadline"
            );
            for (id, _, _) in batch {
                let Some(entry) = entries.get_mut(id) else { continue };
                // Past its deadline, the hold is lost: `check_expiry` reports it (once,
                // unless its `lost()`, `is_lost()` or the sweep did already).
                if entry.lease.upgrade().is_none_or(|lease| lease.check_expiry()) {
                    entries.remove(id);
                } else {
                    entry.failing = true;
                }
            }
        }
    }
    // Holds found lost (or whose guards are gone) left the entries above.
    shared.registered_changed(entries.len());
}

/// The deadline sweep: wakes at the earliest lease deadline of the registered holds
/// and reports those that passed ([`Shared::expire_due`]), so a loss is counted at its
/// deadline even when nobody looks at the hold and its renewal call is still hanging
/// (a partition: the call fails only at the command timeout). Sleeps while nothing is
/// registered. Holds `Shared` only while it sweeps.
async fn run_expiries(weak: Weak<Shared>, mut shutdown: watch::Receiver<()>) {
    let Some(kick) = weak.upgrade().map(|s| Arc::clone(&s.expiry_kick)) else { return };
    loop {
        let next = {
            let Some(shared) = weak.upgrade() else { return };
            shared.expire_due()
        };
        match next {
            Some(at) => tokio::select! {
                _ = shutdown.changed() => return,
                () = kick.notified() => {}
                () = tokio::time::sleep_until(at) => {}
            },
            None => tokio::select! {
                _ = shutdown.changed() => return,
                () = kick.notified() => {}
            },
        }
    }
}

/// The checks of tracked holds: after each kick (a reconnect) every tracked hold is
/// checked once; checks that failed are sent again every `retry_interval` until answered
/// (or the hold's deadline passed). Holds only while it checks, never while it waits.
async fn run_checks<R: Renewer>(weak: Weak<Shared>, renewer: &R, mut shutdown: watch::Receiver<()>) {
    let Some((kick, retry_interval)) = weak.upgrade().map(|s| (Arc::clone(&s.check_kick), s.config.retry_interval()))
    else {
        return;
    };
    let mut kicked = false;
    loop {
        if !kicked {
            tokio::select! {
                _ = shutdown.changed() => return,
                () = kick.notified() => {}
            }
        }
        kicked = false;
        {
            let Some(shared) = weak.upgrade() else { return };
            for tracked in shared.tracked.lock().values_mut() {
                tracked.pending = true;
            }
        }
        loop {
            let Some(shared) = weak.upgrade() else { return };
            let pending = check_round(&shared, renewer).await;
            drop(shared);
            if !pending {
                break;
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep(retry_interval) => {}
                () = kick.notified() => {
                    // Another reconnect: check every tracked hold again.
                    kicked = true;
                    break;
                }
            }
        }
    }
}

/// Every `topology_check` while anything is registered or tracked, asks the renewer
/// whether a slot's primary changed; if so, kicks a renewal round and a check of every
/// tracked hold, as a reconnect does. Holds `Shared` only between the waits.
async fn run_topology<R: Renewer>(weak: Weak<Shared>, renewer: &R, mut shutdown: watch::Receiver<()>) {
    let Some(interval) = weak.upgrade().and_then(|s| s.config.topology_check) else { return };
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(interval) => {}
        }
        {
            let Some(shared) = weak.upgrade() else { return };
            if shared.entries.lock().is_empty() && shared.tracked.lock().is_empty() {
                continue;
            }
        }
        if renewer.follow_topology().await {
            let Some(shared) = weak.upgrade() else { return };
            shared.stats.topology_changes.fetch_add(1, Ordering::Relaxed);
            shared.kick_all();
        }
    }
}

/// Checks every pending tracked hold, in batches grouped as renewals are. Returns whether
/// any is still pending (its check failed).
async fn check_round<R: Renewer>(shared: &Arc<Shared>, renewer: &R) -> bool {
    // A hold the watchdog also renews is checked by the renewal round of the same kick.
    let renewed: HashSet<usize> = shared.entries.lock().values().map(|e| e.lease.as_ptr().addr()).collect();
    let jobs: Vec<Job> = {
        let mut tracked = shared.tracked.lock();
        tracked.retain(|_, t| t.lease.strong_count() > 0);
        tracked
            .iter_mut()
            .filter(|(_, t)| t.pending)
            .filter_map(|(id, t)| {
                let skip = renewed.contains(&t.lease.as_ptr().addr())
                    || t.lease.upgrade().is_none_or(|lease| lease.is_marked_lost());
                if skip {
                    t.pending = false;
                    return None;
                }
                Some((*id, t.key.to_string(), t.owner.as_str().to_owned()))
            })
            .collect()
    };
    if jobs.is_empty() {
        return false;
    }
    let mut calls = JoinSet::new();
    for batch in batches(jobs, &shared.config) {
        let renewer = renewer.clone();
        shared.stats.checks.fetch_add(1, Ordering::Relaxed);
        calls.spawn(async move {
            let holds: Vec<(String, String)> = batch.iter().map(|(_, k, o)| (k.clone(), o.clone())).collect();
            let result = renewer.verify(holds).await;
            (batch, result)
        });
    }
    while let Some(joined) = calls.join_next().await {
        let Ok((batch, result)) = joined else { continue };
        apply_checks(shared, &batch, result);
    }
    shared.tracked.lock().values().any(|t| t.pending)
}

fn apply_checks(shared: &Shared, batch: &[Job], result: lock_core::Result<Vec<bool>>) {
    let now = Instant::now();
    let mut tracked = shared.tracked.lock();
    match result {
        Ok(found) => {
            for ((id, key, _), found) in batch.iter().zip(found) {
                // Tracking stopped meanwhile (unlocked): left alone.
                let Some(entry) = tracked.get_mut(id) else { continue };
                let Some(lease) = entry.lease.upgrade() else {
                    tracked.remove(id);
                    continue;
                };
                if found {
                    // Nothing else: a check extends nothing, not even the local deadline.
                    entry.pending = false;
                } else {
                    let tag = entry.tag;
                    tracked.remove(id);
                    shared.found_lost(&lease, key, tag, LostReason::GoneAfterReconnect);
                }
            }
        }
        Err(error) => {
            shared.stats.failed_checks.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(target: TARGET, %error, holds = batch.len(), "check after a reconnect failed; will retry");
            for (id, _, _) in batch {
                let Some(entry) = tracked.get_mut(id) else { continue };
                // Past its deadline the hold's `lost()` has fired already: nothing to check.
                entry.pending = entry.lease.upgrade().is_some_and(|lease| now < lease.expires_at());
            }
        }
    }
}

/// Splits jobs into calls of at most `batch_size` keys, one hash slot per call when
/// `group_by_slot` is set.
fn batches(jobs: Vec<Job>, config: &WatchdogConfig) -> Vec<Vec<Job>> {
    if !config.group_by_slot {
        return chunk(jobs, config.batch_size);
    }
    let mut by_slot: BTreeMap<u16, Vec<Job>> = BTreeMap::new();
    for job in jobs {
        by_slot.entry(fred::util::redis_keyslot(job.1.as_bytes())).or_default().push(job);
    }
    by_slot.into_values().flat_map(|group| chunk(group, config.batch_size)).collect()
}

fn chunk(jobs: Vec<Job>, size: usize) -> Vec<Vec<Job>> {
    let mut out = Vec::with_capacity(jobs.len().div_ceil(size));
    let mut iter = jobs.into_iter().peekable();
    while iter.peek().is_some() {
        out.push(iter.by_ref().take(size).collect());
    }
    out
}

mod health;
#[cfg(test)]
mod tests;
