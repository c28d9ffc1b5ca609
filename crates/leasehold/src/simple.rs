//! The minimal lock: `SET key owner NX PX lease`, released by an atomic
//! compare-and-delete.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, Error, ErrorKind, OwnerId, Result};
use tokio::time::Instant;

use crate::client::shared::ClientShared;

/// How often an unbounded wait retries a key without a TTL (one a simple lock never
/// writes, so no expiry tells when to try again).
const NO_TTL_RECHECK: Duration = Duration::from_secs(1);

/// The classic minimal Redis lock, kept as the baseline leasehold improves on.
///
/// - Mutual exclusion with a lease: `SET key owner NX PX lease`, so a crashed holder
///   cannot block others longer than the lease.
/// - The value is the owner (`CLIENT_UUID-N`), and release is a Lua compare-and-delete,
///   so nobody deletes another owner's lock.
///
/// Known limits, each solved by [`Lock`](crate::Lock): not reentrant (a second
/// acquire by the same owner fails); no renewal (work longer than the lease runs
/// unprotected); waiting retries on the holder's TTL instead of being woken by a
/// release; no lost-lock signal from the server (its guard knows only its own lease
/// deadline). Its String key is not compatible with Redisson's Hash layout: do not use
/// one name for both kinds.
///
/// Of the acquire forms every kind shares, a simple lock has the two that take a lease:
/// [`lock_with_lease`](SimpleLock::lock_with_lease) and
/// [`try_lock_with(wait, lease)`](SimpleLock::try_lock_with) (a zero `wait` is one
/// `SET NX PX`). `lock()`, `try_lock()` and `try_lock_for(wait)` hold a lock renewed by
/// the watchdog, which a simple lock does not have, so it has no lease to default to.
///
/// Like [`Lock`](crate::Lock), the handle is the owner and is not `Clone`.
pub struct SimpleLock {
    shared: Arc<SimpleShared>,
}

/// What a simple lock handle and its guards share.
pub(crate) struct SimpleShared {
    pub(crate) client: Arc<ClientShared>,
    pub(crate) key: String,
    pub(crate) owner: OwnerId,
}

impl std::fmt::Debug for SimpleLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleLock")
            .field("key", &crate::debug::Bounded(&self.shared.key))
            .field("owner", &self.shared.owner.as_str())
            .finish()
    }
}

/// The guard of a [`SimpleLock`]. Dropping it without [`SimpleGuard::unlock`] releases it
/// in the background on the runtime that acquired it (never blocking); if that runtime
/// is gone, or the client was shut down ([`Client::shutdown`](crate::Client::shutdown),
/// which released it), nothing is sent.
#[must_use = "dropping the guard releases the lock (in the background)"]
#[clippy::has_significant_drop]
pub struct SimpleGuard {
    lock: Arc<SimpleShared>,
    deadline: Instant,
    runtime: Option<tokio::runtime::Handle>,
    /// This guard's entry in the client's live guards (for `Client::shutdown`).
    live: u64,
    done: bool,
    /// When the acquire answered: the start of the hold-duration metric.
    since: Instant,
}

impl SimpleLock {
    pub(crate) fn new(client: Arc<ClientShared>, key: String) -> Self {
        let owner = client.id.next_simple_owner();
        SimpleLock { shared: Arc::new(SimpleShared { client, key, owner }) }
    }

    /// The Redis key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The owner value this handle writes, `CLIENT_UUID-N`.
    pub fn owner(&self) -> &str {
        self.shared.owner.as_str()
    }

    fn check_name(&self) -> Result<()> {
        if self.shared.key.is_empty() {
            return Err(Error::invalid_argument("a lock name must not be empty"));
        }
        Ok(())
    }

    /// Waits as long as it takes, then holds the lock for `lease` (never renewed): what
    /// [`Lock::lock_with_lease`](crate::Lock::lock_with_lease) means. Waiting retries
    /// when the holder's TTL runs out, as [`SimpleLock::try_lock_with`] does (a key
    /// without a TTL, which a simple lock never writes, is retried every second).
    ///
    /// # Errors
    /// As [`SimpleLock::try_lock_with`].
    ///
    /// # Cancel safety
    /// As [`SimpleLock::try_lock_with`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<SimpleGuard> {
        self.acquire_within(Instant::now(), None, lease).await?.ok_or_else(|| {
            Error::new(ErrorKind::Timeout, "an unbounded wait ended without the lock").with_key(self.shared.key.clone())
        })
    }

    /// Tries until acquired or `wait` has passed, then holds the lock for `lease`: what
    /// [`Lock::try_lock_with(wait, lease)`](crate::Lock::try_lock_with) means. Each try
    /// is one `SET key owner NX PX lease`; when the key is held and time is left, one
    /// `PTTL` reads the holder's remaining TTL, and the next try comes when it runs out
    /// (no fixed-interval polling, but no wake-up on release either). A zero `wait` is
    /// one `SET NX PX` (one server call): `None` when the key is taken (by anyone, this
    /// owner included).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name, a lease under 1 ms or over a
    /// year, or a wait that overflows the clock (nothing sent); connection errors and
    /// timeouts.
    ///
    /// # Cancel safety
    /// If dropped while in flight, the lock may be taken and then expires with its lease.
    pub async fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<SimpleGuard>> {
        let start = Instant::now();
        let deadline = args::wait_deadline(start, wait)?;
        self.acquire_within(start, Some(deadline), lease).await
    }

    /// [`SimpleLock::try_lock_with`] with its deadline, `None` = unbounded; telemetry.
    async fn acquire_within(
        &self,
        start: Instant,
        deadline: Option<Instant>,
        lease: Duration,
    ) -> Result<Option<SimpleGuard>> {
        use crate::telemetry::{Kind, Outcome};
        self.check_name()?;
        let lease_ms = args::lease_millis(lease, "lease")?;
        let waits = deadline.is_none_or(|deadline| deadline > start);
        let telemetry = &self.shared.client.telemetry;
        let result = if tracing::enabled!(target: crate::telemetry::TARGET, tracing::Level::DEBUG) {
            use tracing::Instrument;
            let span = tracing::debug_span!(
                target: crate::telemetry::TARGET,
                "leasehold.acquire",
                lock = %self.shared.key,
                kind = "simple",
                mode = if waits { "wait" } else { "try" },
                lease_ms,
                db.system.name = "redis",
                outcome = tracing::field::Empty,
            );
            let result = self.acquire(start, deadline, lease, lease_ms).instrument(span.clone()).await;
            span.record("outcome", Outcome::of(&result, waits).as_str());
            result
        } else {
            self.acquire(start, deadline, lease, lease_ms).await
        };
        telemetry.acquire_done(&self.shared.key, Kind::Simple, waits, Outcome::of(&result, waits), start.elapsed());
        result
    }

    /// The tries of [`SimpleLock::try_lock_with`], arguments checked.
    async fn acquire(
        &self,
        start: Instant,
        deadline: Option<Instant>,
        lease: Duration,
        lease_ms: u64,
    ) -> Result<Option<SimpleGuard>> {
        // The first send's time is the call's start (a clock read saved on the hot path;
        // earlier, so the lease deadline it gives is, if anything, sooner).
        let mut first_send = Some(start);
        let store = &self.shared.client.store;
        // Counted as waiting from the first "held" with time left.
        let mut waiting = None;
        loop {
            if let Some(waiting) = waiting.as_mut() {
                crate::telemetry::WaitScope::wake_up(waiting);
            }
            let sent_at = first_send.take().unwrap_or_else(Instant::now);
            if store.simple_acquire(&self.shared.key, &self.shared.owner, lease_ms).await? {
                return Ok(Some(SimpleGuard::new(self.shared.clone(), args::instant_after(sent_at, lease))));
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(None);
            }
            if waiting.is_none() {
                waiting =
                    Some(self.shared.client.telemetry.wait_begin(&self.shared.key, crate::telemetry::Kind::Simple));
            }
            // Held: the second call, only now. `None`: the key went away meanwhile, so
            // try again at once; `Some(None)`: no expiry (not a simple lock's key), so
            // retry at the deadline, or every second without one.
            let retry = match store.pttl(&self.shared.key).await? {
                None => continue,
                Some(pttl) => {
                    let now = Instant::now();
                    let next =
                        args::instant_after(now, pttl.map_or(NO_TTL_RECHECK, |p| p.max(Duration::from_millis(1))));
                    match deadline {
                        Some(deadline) if pttl.is_none() => deadline,
                        Some(deadline) => next.min(deadline),
                        None => next,
                    }
                }
            };
            tokio::time::sleep_until(retry).await;
        }
    }
}

impl std::fmt::Debug for SimpleGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleGuard")
            .field("key", &crate::debug::Bounded(&self.lock.key))
            .field("owner", &self.lock.owner.as_str())
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl SimpleGuard {
    fn new(lock: Arc<SimpleShared>, deadline: Instant) -> Self {
        let weak: std::sync::Weak<dyn crate::client::live::LiveHold> = Arc::downgrade(&lock) as _;
        let live = lock.client.live.insert(weak);
        lock.client.telemetry.guard_opened();
        let runtime = tokio::runtime::Handle::try_current().ok();
        SimpleGuard { lock, deadline, runtime, live, done: false, since: Instant::now() }
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        &self.lock.key
    }

    /// The owner value this guard's lock holds, `CLIENT_UUID-N`.
    pub fn owner(&self) -> &str {
        self.lock.owner.as_str()
    }

    /// `true` once the lease deadline has passed (the key may be gone or another
    /// owner's). A simple lock is never renewed and the server sends no signal, so the
    /// local deadline is all a simple guard knows.
    pub fn is_lost(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Resolves when the lease deadline passes (see [`SimpleGuard::is_lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        tokio::time::sleep_until(self.deadline).await;
    }

    /// The local lease deadline on the monotonic clock, measured from when the `SET`
    /// was sent, so the server's expiry is never earlier.
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.deadline.into_std()
    }

    /// Lets go of the guard without releasing the lock: nothing is sent, now, on drop
    /// or at [`Client::shutdown`](crate::Client::shutdown), and the key expires with
    /// its lease.
    pub fn detach(mut self) {
        self.done = true;
        self.lock.client.live.remove(self.live);
        self.lock.client.telemetry.guard_closed();
        self.lock.client.telemetry.hold_ended(&self.lock.key, self.since, crate::telemetry::HoldEnd::Dropped);
    }

    /// Deletes the key if it still holds this owner.
    ///
    /// # Errors
    /// [`ErrorKind::NotOwner`] when the key is gone or holds another owner (nothing
    /// deleted); [`ErrorKind::WrongType`]; [`ErrorKind::Shutdown`] after
    /// [`Client::shutdown`](crate::Client::shutdown) (nothing sent: the shutdown
    /// released it); connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the compare-and-delete applies.
    pub async fn unlock(mut self) -> Result<()> {
        use crate::telemetry::HoldEnd;
        self.done = true;
        self.lock.client.live.remove(self.live);
        let telemetry = &self.lock.client.telemetry;
        telemetry.guard_closed();
        let release = async {
            match self.lock.client.store.simple_release(&self.lock.key, &self.lock.owner).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(Error::new(ErrorKind::NotOwner, "the lock is not held by this owner")
                    .with_key(self.lock.key.clone())),
                Err(error) => Err(error),
            }
        };
        let result = if tracing::enabled!(target: crate::telemetry::TARGET, tracing::Level::DEBUG) {
            use tracing::Instrument;
            let span = tracing::debug_span!(
                target: crate::telemetry::TARGET,
                "leasehold.release",
                lock = %self.lock.key,
                kind = "simple",
                db.system.name = "redis",
                outcome = tracing::field::Empty,
            );
            let result = release.instrument(span.clone()).await;
            span.record("outcome", crate::lock::guard::release_outcome(&result));
            result
        } else {
            release.await
        };
        let end = if result.as_ref().is_err_and(Error::is_not_owner) { HoldEnd::Lost } else { HoldEnd::Released };
        telemetry.hold_ended(&self.lock.key, self.since, end);
        result
    }
}

impl Drop for SimpleGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.lock.client.telemetry.guard_closed();
        self.lock.client.telemetry.hold_ended(&self.lock.key, self.since, crate::telemetry::HoldEnd::Dropped);
        self.lock.client.live.remove(self.live);
        if self.lock.client.store.is_closed() {
            // Shut down: the shutdown released it, and nothing can be sent.
            return;
        }
        let Some(runtime) = self.runtime.as_ref() else { return };
        let lock = self.lock.clone();
        drop(runtime.spawn(async move {
            let _ = lock.client.store.simple_release(&lock.key, &lock.owner).await;
        }));
    }
}

/// A simple lock's hold, for [`Client::shutdown`](crate::Client::shutdown).
impl crate::client::live::LiveHold for SimpleShared {
    /// Compare-and-deletes the key (nothing happens if another owner holds it).
    fn release(&self) -> crate::client::live::BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.client.store.simple_release(&self.key, &self.owner).await.map(drop) })
    }

    /// Nothing to end: a simple guard keeps no local state but its deadline, and its
    /// unlock and drop check the closed client themselves.
    fn end_locally(&self) {}
}

#[cfg(feature = "blocking")]
impl SimpleGuard {
    /// [`SimpleGuard::lost`] as a future that owns what it watches, for the blocking API.
    pub(crate) fn lost_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        // The timer is made when the future first runs, on the runtime thread: the
        // blocking caller's thread has no runtime.
        let deadline = self.deadline;
        async move { tokio::time::sleep_until(deadline).await }
    }
}
