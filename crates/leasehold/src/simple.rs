//! The minimal lock: `SET key owner NX PX lease`, released by an atomic
//! compare-and-delete.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, Error, ErrorKind, OwnerId, Result};
use tokio::time::Instant;

use crate::client::ClientShared;

/// The classic minimal Redis lock, kept as the baseline leasehold improves on.
///
/// - Mutual exclusion with a lease: `SET key owner NX PX lease`, so a crashed holder
///   cannot block others longer than the lease.
/// - The value is the owner (`CLIENT_UUID-N`), and release is a Lua compare-and-delete,
///   so nobody deletes another owner's lock.
///
/// Known limits, each solved by [`Lock`](crate::Lock): not reentrant (a second
/// `try_lock` by the same owner fails); no renewal (work longer than the lease runs
/// unprotected); waiting retries on the holder's TTL instead of being woken by a
/// release; no lost-lock signal. Its String key is not compatible with Redisson's Hash
/// layout: do not use one name for both kinds.
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

    /// One `SET key owner NX PX lease` (one server call): `None` when the key is taken
    /// (by anyone, this owner included).
    ///
    /// It takes a lease, unlike [`Lock::try_lock`](crate::Lock::try_lock) (watchdog
    /// mode): a simple lock is never renewed, so it has no lease to default to.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name or a lease under 1 ms or over a
    /// year (nothing sent); connection errors and timeouts.
    ///
    /// # Cancel safety
    /// If dropped while in flight, the lock may be taken and then expires with its lease.
    pub async fn try_lock(&self, lease: Duration) -> Result<Option<SimpleGuard>> {
        self.try_lock_with(Duration::ZERO, lease).await
    }

    /// Tries until acquired or `wait` has passed, then holds the lock for `lease`: what
    /// [`Lock::try_lock_with(wait, lease)`](crate::Lock::try_lock_with) means. Each try
    /// is one `SET NX PX`; when the key is held and time is left, one `PTTL` reads the
    /// holder's remaining TTL, and the next try comes when it runs out (no
    /// fixed-interval polling, but no wake-up on release either).
    ///
    /// # Errors
    /// As [`SimpleLock::try_lock`]; an overflowing wait is [`ErrorKind::InvalidArgument`].
    ///
    /// # Cancel safety
    /// As [`SimpleLock::try_lock`].
    pub async fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<SimpleGuard>> {
        use crate::telemetry::{Kind, Outcome};
        let start = Instant::now();
        self.check_name()?;
        let lease_ms = args::lease_millis(lease, "lease")?;
        let deadline = args::wait_deadline(start, wait)?;
        let waits = !wait.is_zero();
        let telemetry = &self.shared.client.telemetry;
        let result = if tracing::enabled!(tracing::Level::DEBUG) {
            use tracing::Instrument;
            let span = tracing::debug_span!(
                "leasehold.acquire",
                lock = %self.shared.key,
                kind = "simple",
                mode = if waits { "wait" } else { "try" },
                lease_ms,
                db.system.name = "redis",
                outcome = tracing::field::Empty,
            );
            let result = self.acquire(deadline, lease, lease_ms).instrument(span.clone()).await;
            span.record("outcome", Outcome::of(&result, waits).as_str());
            result
        } else {
            self.acquire(deadline, lease, lease_ms).await
        };
        telemetry.acquire_done(&self.shared.key, Kind::Simple, waits, Outcome::of(&result, waits), start.elapsed());
        result
    }

    /// The tries of [`SimpleLock::try_lock_with`], arguments checked.
    async fn acquire(&self, deadline: Instant, lease: Duration, lease_ms: u64) -> Result<Option<SimpleGuard>> {
        let store = &self.shared.client.store;
        // Counted as waiting from the first "held" with time left.
        let mut waiting = None;
        loop {
            if let Some(waiting) = waiting.as_mut() {
                crate::telemetry::WaitScope::wake_up(waiting);
            }
            let sent_at = Instant::now();
            if store.simple_acquire(&self.shared.key, &self.shared.owner, lease_ms).await? {
                return Ok(Some(SimpleGuard::new(self.shared.clone(), args::instant_after(sent_at, lease))));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            if waiting.is_none() {
                waiting =
                    Some(self.shared.client.telemetry.wait_begin(&self.shared.key, crate::telemetry::Kind::Simple));
            }
            // Held: the second call, only now. `None`: the key went away meanwhile, so
            // try again at once; `Some(None)`: no expiry, so retry at the deadline only.
            let retry = match store.pttl(&self.shared.key).await? {
                None => continue,
                Some(pttl) => {
                    let now = Instant::now();
                    pttl.map_or(deadline, |p| args::instant_after(now, p.max(Duration::from_millis(1))).min(deadline))
                }
            };
            tokio::time::sleep_until(retry).await;
        }
    }

    /// The old name of [`SimpleLock::try_lock_with`] (same arguments, same meaning).
    ///
    /// # Errors
    /// As [`SimpleLock::try_lock_with`].
    ///
    /// # Cancel safety
    /// As [`SimpleLock::try_lock_with`].
    #[deprecated(
        since = "0.2.0",
        note = "renamed `try_lock_with(wait, lease)`, as `Lock::try_lock_with`; `try_lock_for` is removed in the next release"
    )]
    pub async fn try_lock_for(&self, wait: Duration, lease: Duration) -> Result<Option<SimpleGuard>> {
        self.try_lock_with(wait, lease).await
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
        let weak: std::sync::Weak<dyn crate::live::LiveHold> = Arc::downgrade(&lock) as _;
        let live = lock.client.live.insert(weak);
        lock.client.telemetry.guard_opened();
        let runtime = tokio::runtime::Handle::try_current().ok();
        SimpleGuard { lock, deadline, runtime, live, done: false, since: Instant::now() }
    }

    /// Whether the lease deadline has passed (the key may be gone or someone else's).
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.deadline
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
        let result = if tracing::enabled!(tracing::Level::DEBUG) {
            use tracing::Instrument;
            let span = tracing::debug_span!(
                "leasehold.release",
                lock = %self.lock.key,
                kind = "simple",
                db.system.name = "redis",
                outcome = tracing::field::Empty,
            );
            let result = release.instrument(span.clone()).await;
            span.record("outcome", crate::guard::release_outcome(&result));
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
impl crate::live::LiveHold for SimpleShared {
    /// Compare-and-deletes the key (nothing happens if another owner holds it).
    fn release(&self) -> crate::live::BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.client.store.simple_release(&self.key, &self.owner).await.map(drop) })
    }

    /// Nothing to end: a simple guard keeps no local state but its deadline, and its
    /// unlock and drop check the closed client themselves.
    fn end_locally(&self) {}
}
