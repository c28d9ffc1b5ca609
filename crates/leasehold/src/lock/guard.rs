//! The guard of one acquired hold.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, ErrorKind, LockNames, Release, Result};

use crate::lock::hold::{Hold, LeaseMode};
use crate::lock::retry::ReplaySafeRetry;
use crate::lock::shared::LockShared;
use crate::telemetry::HoldEnd;

/// One hold of a [`Lock`](crate::Lock). Release it with [`LockGuard::unlock`], which
/// reports errors.
///
/// Dropping a guard without `unlock` releases it in the background on the runtime that
/// acquired it; if that runtime is gone, the lease simply expires (a watchdog guard stops
/// being renewed the moment it is dropped). `Drop` never blocks and never panics.
///
/// A guard can learn that its lock was lost: [`LockGuard::is_lost`] and
/// [`LockGuard::lost`]. Work that must not outlive the lock should `select!` on
/// `lost()`. No client-side signal can stop a process that is paused past its lease;
/// only a check at the guarded resource (a fencing token) closes that gap.
///
/// To keep the lock past the guard without renewing it, use [`LockGuard::detach`]: it
/// stops the renewal and sends nothing, and the key expires with its lease.
/// `std::mem::forget(guard)` is not the same: `Drop` never runs, so a watchdog-mode
/// hold stays registered and **is renewed until the process exits** or
/// [`Client::shutdown`](crate::Client::shutdown) releases it (the forgotten guard keeps
/// its handle and the client alive, so dropping every `Client` clone does not stop the
/// renewal); a fixed-lease hold expires with its lease, as after `detach`. Either way
/// the forgotten guard still counts as a hold of its owner, so a later acquire through
/// the same handle re-enters instead of taking the lock fresh.
///
/// A guard that is not kept releases the lock at once, so the compiler warns about it
/// (here made an error):
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # async fn demo(lock: leasehold::Lock) -> leasehold::Result<()> {
/// lock.lock().await?; // acquired and released at once: refused
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock (in the background)"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    lock: Arc<LockShared>,
    hold: Arc<Hold>,
    mode: LeaseMode,
    runtime: Option<tokio::runtime::Handle>,
    /// The hold's fencing token (acquired through a [`FencedLock`](crate::FencedLock)).
    token: Option<u64>,
    /// This guard's entry in the client's live guards (for `Client::shutdown`).
    live: u64,
    /// Set once the guard was unlocked or detached; `Drop` then does nothing.
    done: bool,
    /// When the acquire answered: the start of the hold-duration metric.
    since: tokio::time::Instant,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mode, lease) = match self.mode {
            LeaseMode::Watchdog => ("watchdog", self.lock.watchdog_lease()),
            LeaseMode::Fixed(lease) => ("fixed", lease),
        };
        f.debug_struct("LockGuard")
            .field("key", &crate::debug::Bounded(self.lock.key()))
            .field("owner", &self.lock.owner.as_str())
            .field("mode", &mode)
            .field("lease", &lease)
            .field("deadline", &self.hold.lease.expires_at())
            .field("lost", &self.hold.lease.is_lost())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(lock: Arc<LockShared>, hold: Arc<Hold>, mode: LeaseMode) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let weak: std::sync::Weak<dyn crate::client::live::LiveHold> = Arc::downgrade(&lock) as _;
        let live = lock.client.live.insert(weak);
        lock.client.telemetry.guard_opened();
        let since = tokio::time::Instant::now();
        LockGuard { lock, hold, mode, runtime, token: None, live, done: false, since }
    }

    /// The guard with the fencing token its acquire answered.
    pub(crate) fn with_token(mut self, token: Option<u64>) -> Self {
        self.token = token;
        self
    }

    /// Whether this guard is a read hold of a read/write lock (shared: the waiter behind
    /// it may enter at once).
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.lock.kind, lock_core::LockKind::Read { .. })
    }

    /// The fencing token of a fenced acquire.
    pub(crate) fn token(&self) -> Option<u64> {
        self.token
    }

    /// The client the guard's lock belongs to.
    pub(crate) fn client(&self) -> &crate::client::shared::ClientShared {
        &self.lock.client
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// The owner id that holds this guard's hold, `CLIENT_UUID:N`.
    pub fn owner(&self) -> &str {
        self.lock.owner.as_str()
    }

    /// `true` when the lock is known lost: a renewal found the owner gone, the check
    /// the client makes of every hold after a reconnect or a failover (fixed leases
    /// included) found it gone, renewals failed until the lease ran out, another
    /// guard's unlock or the server said the hold ended, or the lease deadline passed.
    pub fn is_lost(&self) -> bool {
        self.hold.lease.is_lost()
    }

    /// Resolves when the lock is lost (see [`LockGuard::is_lost`]). Never resolves while
    /// the hold is alive and renewed.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.hold.lease.lost().await;
    }

    /// The local lease deadline on the monotonic clock: the server's expiry is never
    /// earlier (it is computed from when the command that set the TTL was sent, and no
    /// leasehold command shortens a live hold's TTL: [`LockGuard::unlock_after`] does so
    /// only at the owner's last release, once no guard is left). Watchdog renewals move
    /// it forward.
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.hold.lease.expires_at().into_std()
    }

    /// Whether this guard is in watchdog mode (renewed while held).
    pub fn is_watchdog(&self) -> bool {
        self.mode == LeaseMode::Watchdog
    }

    /// Whether the watchdog is renewing this guard's hold now. A fixed-lease guard
    /// nested in a watchdog hold of the same owner is renewed with it.
    pub fn is_renewed(&self) -> bool {
        self.hold.is_renewed()
    }

    /// Gives back this hold. The last hold of the owner deletes the key and publishes
    /// the unlock message, waking a waiter; otherwise the key keeps a TTL no shorter
    /// than the remaining holds need (the watchdog lease while a watchdog hold remains).
    ///
    /// # Errors
    /// - [`ErrorKind::LockLost`] when the hold was already known lost; nothing is sent.
    /// - [`ErrorKind::NotOwner`] when the server says this owner holds nothing (the lease
    ///   ran out, or it was force-unlocked); nothing is written or published. Also when
    ///   this guard's hold already ended (nothing is sent, so a later hold of the same
    ///   owner is never released by mistake).
    /// - Timeouts and connection errors, after retrying (releases are idempotent) within
    ///   the replay window; the hold is then no longer renewed and expires with its
    ///   lease. A retry that finds the owner gone after a lost reply counts as released.
    /// - [`ErrorKind::Shutdown`] after [`Client::shutdown`](crate::Client::shutdown),
    ///   which already released the hold (or, if it could not, left it to expire with its
    ///   lease); nothing is sent.
    ///
    /// # Cancel safety
    /// The guard is consumed: renewal for it stops before anything is sent, so dropping
    /// the future mid-way leaves no renewal behind; a release already sent still applies,
    /// and one never sent leaves the lock to expire with its lease.
    pub async fn unlock(mut self) -> Result<()> {
        self.done = true;
        let lock = self.lock.clone();
        lock.client.telemetry.guard_closed();
        let result = if tracing::enabled!(target: crate::telemetry::TARGET, tracing::Level::DEBUG) {
            use tracing::Instrument;
            let span = tracing::debug_span!(
                target: crate::telemetry::TARGET,
                "leasehold.release",
                lock = %lock.key(),
                kind = lock.telemetry_kind().as_str(),
                db.system.name = "redis",
                outcome = tracing::field::Empty,
            );
            let result = self.release_now(&lock).instrument(span.clone()).await;
            span.record("outcome", release_outcome(&result));
            result
        } else {
            self.release_now(&lock).await
        };
        let end = match &result {
            Err(error) if error.is_lock_lost() || error.is_not_owner() => HoldEnd::Lost,
            _ => HoldEnd::Released,
        };
        lock.client.telemetry.hold_ended(lock.key(), self.since, end);
        result
    }

    /// Gives back this hold, but keeps the lock taken until `min_hold` after it was
    /// acquired: `lockAtLeastFor` of Java's `ShedLock`, for a job that must run **once
    /// per tick** across instances whose schedulers fire a little apart. If this is the
    /// owner's last hold and the minimum hold is not over, the key stays, in Redisson's
    /// layout (this owner's field, count 1: a Redisson client sees it held), with its
    /// TTL set to the time left, and then expires by itself; the watchdog no longer
    /// renews it, and no other owner can take the lock before then. Waiters are told the new TTL
    /// (the unlock message, as a release publishes it), and the queue head takes the
    /// lock when it expires. If the minimum hold is already over, this is
    /// [`LockGuard::unlock`]: the key is deleted and a waiter is woken at once.
    ///
    /// **The start** is the instant this guard was made, when the acquire's reply had
    /// arrived: never earlier than the server ran the acquire. The time left is measured
    /// on the monotonic clock as the release's arguments are built, right before it is
    /// handed to the connection (after any wait for the owner's turn or the write
    /// gate), and the script sets it as the key's TTL when it runs, later still; so on
    /// the server's clock the key lives at least until the acquire + `min_hold`: never
    /// shorter, and longer only by the reply's and the release's time on the way
    /// (one-way trips; a release queued in the client while it reconnects, at most the
    /// command timeout). Reading the
    /// server's `TIME` in the script instead would need the acquire's server time
    /// recorded somewhere, in the key (not Redisson's layout) or in every acquire's
    /// reply; this costs nothing on the acquire path.
    ///
    /// **Re-entered holds.** If the owner still has other holds (re-entries through the
    /// same handle), this gives back one of them, as `unlock` does, and the minimum
    /// hold is remembered by the owner: until the latest one asked is over, whatever
    /// gives back the owner's last hold (`unlock`, `unlock_after`, a drop,
    /// [`Client::shutdown`](crate::Client::shutdown), the undo of an acquire whose reply
    /// was lost) keeps the key instead of deleting it.
    ///
    /// **After it.** The guard is consumed, so there is no `lost()` to watch: the kept key
    /// is no longer a hold of this owner's guards, only a marker that expires. (Forcing
    /// it away, `force_unlock`, ends the minimum hold early; nothing reports that.)
    ///
    /// **The owner is the handle.** The kept field is this handle's owner: an acquire
    /// through the same handle while the key is kept re-enters it (it is the same
    /// owner), and giving that hold back keeps the key again until the minimum hold is
    /// over; other handles, clients and processes are refused until it expires.
    ///
    /// **A fixed lease shorter than `min_hold`** is lengthened: the key is kept until the
    /// minimum hold is over, past the lease. A hold whose lease already ran out is lost
    /// ([`ErrorKind::LockLost`] or [`ErrorKind::NotOwner`]): nothing is kept.
    ///
    /// There is no acquire-side option (`try_lock_with` plus a minimum hold): the
    /// minimum hold matters only when the hold ends, and what it would add at acquire,
    /// a key that outlives a crash for at least `min_hold`, is a fixed lease of at least
    /// `min_hold` (`try_lock_with(Duration::ZERO, lease)`) followed by `unlock_after`.
    ///
    /// # Examples
    /// A job that runs once per minute across a fleet, whatever instance's tick comes
    /// first (each instance's ticks are aligned to the wall-clock minute, so ticks of
    /// different instances fire within their clock skew of each other). `min_hold` must
    /// exceed the largest skew between instances' ticks (plus a round trip), so that
    /// every late instance finds the key still there, and stay below the period minus
    /// that skew, so that the next tick finds it gone. A job that runs longer than the
    /// period holds the lock (renewed) until it ends: the ticks meanwhile are skipped by
    /// every instance, never run twice; `MissedTickBehavior::Skip` keeps this instance
    /// from running the missed ticks in a burst afterwards.
    ///
    /// ```no_run
    /// use std::time::{Duration, SystemTime, UNIX_EPOCH};
    /// use tokio::time::{interval_at, Instant, MissedTickBehavior};
    ///
    /// # async fn job() {}
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let period = Duration::from_secs(60);
    /// let min_hold = Duration::from_secs(10); // > the ticks' skew, < period - skew
    /// // The first tick at the next whole minute of the wall clock, as every instance's.
    /// let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    /// let into_period = Duration::from_nanos((since_epoch.as_nanos() % period.as_nanos()) as u64);
    /// let mut ticks = interval_at(Instant::now() + (period - into_period), period);
    /// ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    /// let lock = client.lock("jobs:nightly-report");
    /// loop {
    ///     ticks.tick().await;
    ///     let Some(guard) = lock.try_lock().await? else { continue }; // another instance has this tick
    ///     job().await;
    ///     guard.unlock_after(min_hold).await?; // kept until 10 s after the acquire
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    /// - [`ErrorKind::InvalidArgument`] for a `min_hold` under 1 ms (use `unlock`) or over
    ///   a year ([`lock_core::args::MAX_LEASE`]), or the guard of a
    ///   [`FairLock`](crate::FairLock) (its Redisson queue keeps its waiters' own
    ///   deadlines, which a kept key would not move); nothing is sent for the minimum
    ///   hold, and the guard is dropped: its hold is given back in the background, as
    ///   any dropped guard's.
    /// - Otherwise as [`LockGuard::unlock`]: [`ErrorKind::LockLost`],
    ///   [`ErrorKind::NotOwner`] (a retry that finds the owner gone after a lost reply
    ///   counts as done), [`ErrorKind::Shutdown`], timeouts and connection errors after
    ///   the release retries.
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`]: the guard is consumed and its renewal stops before
    /// anything is sent; a release already sent still applies (the key kept for the time
    /// left, or deleted if none was left), and one never sent leaves the lock to expire
    /// with its lease. A retry of the release sends the time left then, measured from
    /// the same start, so the kept key ends at the same point whichever attempt ran
    /// (later only by the time that attempt spent on its way, never earlier), and it
    /// writes nothing if the owner's field is gone (the key expired and another owner may
    /// hold it).
    pub async fn unlock_after(self, min_hold: Duration) -> Result<()> {
        if let Err(error) = self.keep_for(min_hold) {
            return Err(error.with_key(self.lock.key()));
        }
        self.unlock().await
    }

    /// Records `min_hold` (checked) as this guard's minimum hold on its hold.
    fn keep_for(&self, min_hold: Duration) -> Result<()> {
        lock_core::args::lease_millis(min_hold, "min_hold")?;
        if self.lock.kind.queue() != lock_core::QueueKind::Server {
            return Err(Error::invalid_argument(
                "unlock_after keeps only a Lock or a FencedLock (not a FairLock): use unlock",
            ));
        }
        let until = self
            .since
            .checked_add(min_hold)
            .ok_or_else(|| Error::invalid_argument(format!("min_hold of {min_hold:?} overflows the clock")))?;
        self.lock.holds.keep_until(until);
        Ok(())
    }

    /// The release of [`LockGuard::unlock`] (which accounts for the guard).
    async fn release_now(&self, lock: &Arc<LockShared>) -> Result<()> {
        let counted = self.begin_release(lock)?;
        let names = lock.names()?;
        match release(lock, names, &self.hold, counted).await? {
            Release::NotOwner => {
                Err(Error::new(ErrorKind::NotOwner, "the lock is not held by this owner").with_key(names.key()))
            }
            Release::Released | Release::StillHeld { .. } => Ok(()),
        }
    }

    /// What every unlock does before it sends: the guard leaves the client's live guards
    /// and is detached (renewal stops, synchronously: if the caller is dropped
    /// mid-release, renewal has already stopped for this guard), and is counted as
    /// releasing. The errors of an unlock that sends nothing come from here.
    fn begin_release(&self, lock: &Arc<LockShared>) -> Result<Releasing> {
        lock.client.live.remove(self.live);
        let names = lock.names()?;
        let lost = self.hold.lease.is_marked_lost();
        let current = lock.holds.is_current(&self.hold);
        lock.holds.detach(&self.hold, self.mode, current);
        let counted = current.then(|| Releasing { lock: lock.clone(), hold: self.hold.clone() });
        if lock.client.store.is_closed() {
            return Err(Error::new(ErrorKind::Shutdown, "the client was shut down: the shutdown released this hold")
                .with_key(names.key()));
        }
        if lost {
            return Err(Error::new(ErrorKind::LockLost, "the lock was lost before unlock").with_key(names.key()));
        }
        counted
            .ok_or_else(|| Error::new(ErrorKind::NotOwner, "this guard's hold has already ended").with_key(names.key()))
    }

    /// [`LockGuard::unlock`] up to the send, for a caller that sends the release itself
    /// with others (a multi-lock's group, `multi/release.rs`): the guard is consumed and
    /// accounted as `unlock` accounts it. `Err` is what `unlock` would answer without
    /// sending anything.
    pub(crate) fn prepare_unlock(mut self) -> Result<PreparedRelease> {
        self.done = true;
        let lock = self.lock.clone();
        lock.client.telemetry.guard_closed();
        match self.begin_release(&lock) {
            Ok(counted) => Ok(PreparedRelease { counted, since: Some(self.since) }),
            Err(error) => {
                let end = if error.is_lock_lost() || error.is_not_owner() { HoldEnd::Lost } else { HoldEnd::Released };
                lock.client.telemetry.hold_ended(lock.key(), self.since, end);
                Err(error)
            }
        }
    }

    /// What `Drop` does up to the background send, for a caller that sends the release
    /// itself with others (a dropped multi-lock guard): `None` when nothing is to be
    /// sent (the hold ended, the name was invalid, or there is no runtime), else the
    /// release and the runtime that acquired the guard.
    pub(crate) fn prepare_drop(mut self) -> Option<(PreparedRelease, tokio::runtime::Handle)> {
        self.done = true;
        self.lock.client.telemetry.guard_closed();
        self.lock.client.telemetry.hold_ended(self.lock.key(), self.since, HoldEnd::Dropped);
        self.lock.client.live.remove(self.live);
        let sends = self.lock.holds.is_current(&self.hold) && self.runtime.is_some() && self.lock.names().is_ok();
        self.lock.holds.detach(&self.hold, self.mode, sends);
        let runtime = self.runtime.clone().filter(|_| sends)?;
        let counted = Releasing { lock: self.lock.clone(), hold: self.hold.clone() };
        Some((PreparedRelease { counted, since: None }, runtime))
    }

    /// The lease of the guard's hold (an election's proclaim checks it).
    pub(crate) fn lease_state(&self) -> &Arc<lock_core::LeaseState> {
        &self.hold.lease
    }

    /// The guard's lock state (for a multi-lock's grouping of its guards).
    pub(crate) fn shared(&self) -> &Arc<LockShared> {
        &self.lock
    }
}

/// A guard detached for a release its caller sends ([`LockGuard::prepare_unlock`],
/// [`LockGuard::prepare_drop`]): its hold still counts on the server until this is
/// dropped, however the release ends.
pub(crate) struct PreparedRelease {
    counted: Releasing,
    /// When the acquire answered, for the hold-duration metric; `None` when it was
    /// already recorded (a dropped guard).
    since: Option<tokio::time::Instant>,
}

impl PreparedRelease {
    /// The lock released.
    pub(crate) fn lock(&self) -> &Arc<LockShared> {
        &self.counted.lock
    }

    /// The hold released (one guard of it).
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.counted.hold
    }

    /// Records how the release ended (as [`LockGuard::unlock`] does) and stops counting
    /// the guard.
    pub(crate) fn finish(self, result: &Result<()>) {
        if let Some(since) = self.since {
            let end = match result {
                Err(error) if error.is_lock_lost() || error.is_not_owner() => HoldEnd::Lost,
                _ => HoldEnd::Released,
            };
            let lock = &self.counted.lock;
            lock.client.telemetry.hold_ended(lock.key(), since, end);
        }
    }
}

impl LockGuard {
    /// Lets go of the guard without releasing the lock: its renewal stops at once
    /// (synchronously: no later watchdog round renews it), nothing is sent, and the key
    /// keeps the TTL it has and expires with it. For a hold that must outlive the
    /// guard's scope, e.g. a job handed to another process that checks the lock's TTL.
    ///
    /// Other guards of the same hold (re-entries through the same handle) are not
    /// affected: while a watchdog guard of it is alive the hold is still renewed, and
    /// their last unlock deletes the key, this guard's hold included (it is no longer
    /// counted). A detached hold is not released by
    /// [`Client::shutdown`](crate::Client::shutdown). Unlike `std::mem::forget(guard)`
    /// (see [`LockGuard`]), it stops the renewal.
    pub fn detach(mut self) {
        self.done = true;
        self.lock.client.telemetry.guard_closed();
        self.lock.client.telemetry.hold_ended(self.lock.key(), self.since, HoldEnd::Dropped);
        self.lock.client.live.remove(self.live);
        // `false`: no release will be sent, so the hold stops counting this guard now.
        self.lock.holds.detach(&self.hold, self.mode, false);
    }
}

/// The `outcome` field of a `leasehold.release` span.
pub(crate) fn release_outcome(result: &Result<()>) -> &'static str {
    match result {
        Ok(()) => "released",
        Err(error) if error.is_lock_lost() => "lost",
        Err(error) if error.is_not_owner() => "not_owner",
        Err(_) => "error",
    }
}

/// Sends the release of one guard of `hold` (already detached, counted as releasing)
/// and records the answer.
///
/// Each attempt takes the owner's turn and sets the owner's count to what it accounts
/// for then, less this guard's hold, so a retry after an ambiguous failure or an unsent
/// command is harmless: it sets the same count again (`retry.rs` bounds how long it
/// retries). However it ends (answered, failed, or dropped), the guard stops counting.
async fn release(lock: &LockShared, names: &LockNames, hold: &Arc<Hold>, counted: Releasing) -> Result<Release> {
    let _counted = counted;
    let client = &lock.client;
    let mut retry = ReplaySafeRetry::new();
    loop {
        let turn = lock.holds.turn().await;
        if hold.lease.is_marked_lost() {
            if retry.may_have_applied() {
                // The server said meanwhile that the owner holds nothing, after an
                // attempt of this release may have run: nothing is left to give back.
                return Ok(Release::Released);
            }
            // Ended while this release waited for its turn: nothing of this hold is
            // left to give back.
            return Err(Error::new(ErrorKind::LockLost, "the lock was lost before unlock").with_key(names.key()));
        }
        // Not lost, so `hold` is the current hold, and this guard is counted in it.
        let target = lock.holds.accounted().saturating_sub(1);
        // While a watchdog guard of the hold remains, the key must keep the watchdog
        // lease; fixed-lease holds already have theirs (no command shortens a TTL), so
        // the release leaves it as it is.
        let need_ms = if target > 0 && hold.has_watchdog_guards() { lock.watchdog_lease_ms() } else { 0 };
        let first_sent = retry.sending();
        // At 0, while the owner's minimum hold lasts, this keeps the key instead
        // (`set_holds`): each retry measures the time left again, from the same start.
        match lock.set_holds(names, target, need_ms, false).await {
            Ok(Release::NotOwner) if target == 0 && retry.may_have_applied() => {
                // An earlier attempt of this release may have run and removed the owner
                // (its reply was lost): the owner holds nothing, which is what was asked.
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    lock = %names.key(),
                    "unlock retried after a lost reply: nothing left to release",
                );
                lock.holds.released(hold, Release::Released, first_sent, Duration::ZERO);
                return Ok(Release::Released);
            }
            Ok(answer) => {
                lock.holds.released(hold, answer, first_sent, Duration::from_millis(need_ms));
                return Ok(answer);
            }
            Err(error) => {
                drop(turn);
                let Some(backoff) = retry.after(&error, &client.config) else { return Err(error) };
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// Keeps a detached guard counted in its hold while its release is on the way; made
/// by `detach(.., true)`'s caller and dropped however the release ends (answered,
/// failed, cancelled, or its task dropped by a runtime shutting down).
struct Releasing {
    lock: Arc<LockShared>,
    hold: Arc<Hold>,
}

impl Drop for Releasing {
    fn drop(&mut self) {
        self.lock.holds.released_sent(&self.hold);
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.lock.client.telemetry.guard_closed();
        self.lock.client.telemetry.hold_ended(self.lock.key(), self.since, HoldEnd::Dropped);
        self.lock.client.live.remove(self.live);
        let names = self.lock.names().ok().cloned();
        let sends = self.lock.holds.is_current(&self.hold) && self.runtime.is_some() && names.is_some();
        // Stop renewing at once, whatever happens to the release below.
        self.lock.holds.detach(&self.hold, self.mode, sends);
        let (true, Some(runtime), Some(names)) = (sends, self.runtime.as_ref(), names) else { return };
        let lock = self.lock.clone();
        let hold = self.hold.clone();
        let counted = Releasing { lock: lock.clone(), hold: hold.clone() };
        // A dead runtime drops the task (and `counted` with it): the lease then expires
        // on its own.
        drop(runtime.spawn(async move {
            if let Err(error) = release(&lock, &names, &hold, counted).await {
                tracing::warn!(
                    target: crate::telemetry::TARGET,
                    lock = %names.key(),
                    %error,
                    "background release of a dropped guard failed; the lease will expire",
                );
            }
        }));
    }
}

#[cfg(feature = "blocking")]
impl LockGuard {
    /// [`LockGuard::lost`] as a future that owns what it watches, so that the blocking
    /// API can wait for it on its own runtime thread while the guard stays with the
    /// caller.
    pub(crate) fn lost_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let hold = self.hold.clone();
        async move { hold.lease.lost().await }
    }

    /// The client state of this guard's lock (for the blocking fenced write).
    pub(crate) fn client_shared(&self) -> Arc<crate::client::shared::ClientShared> {
        self.lock.client.clone()
    }
}
