//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`, permits with
//! ids and leases: a holder that dies gives its permit back when the lease runs out, and
//! a [`Permit`] may be renewed by the watchdog like a lock.
//!
//! Files: this one (the handle); `shared.rs` (what the handle and its permits share);
//! `permit.rs` ([`Permit`]); `attempt.rs` (an acquire, as the wait engine sees it).

mod attempt;
pub(crate) mod permit;
pub(crate) mod shared;

use std::sync::Arc;
use std::time::Duration;

use lock_core::pes::PermitId;
use lock_core::{args, Error, Result};
use tokio::time::Instant;

use crate::client::shared::ClientShared;
use crate::permit_semaphore::attempt::PermitAttempt;
use crate::permit_semaphore::permit::Permit;
use crate::permit_semaphore::shared::PesShared;
use crate::telemetry::{Kind, Outcome};

/// A handle on one permit-expirable semaphore, in Redisson 4.7's
/// `RPermitExpirableSemaphore` layout byte for byte: the String `NAME` holds the count of
/// available permits (the same key and format as [`Semaphore`](crate::Semaphore)'s),
/// the `ZSet` `{NAME}:timeout` lists each held permit's id (16 raw bytes) with its lease
/// end in epoch ms, and changes that free permits publish the count on
/// `redisson_sc:{NAME}`. Java services using Redisson share these semaphores: each side
/// lists and releases the other's permits by id, and wakes the other's waiters.
///
/// **Better than Redisson** (wire-compatible; `docs/architecture/semaphores.md`):
/// - leases end on the **server's clock** (`TIME` in the scripts), never a client's, so
///   clock skew between clients decides nothing (Java peers still score with their own
///   clocks, which these scripts honour);
/// - expired permits are reclaimed in **bounded chunks** (at most
///   [`RECLAIM_CHUNK`](lock_core::pes::RECLAIM_CHUNK) per call) without Redisson's
///   `unpack`, which fails past ~8,000 expired permits;
/// - waiters **queue on the server** in arrival order across clients (issue 29): a
///   release hands its permit to the first waiter in the same script and tells it on
///   `leasehold_sem_grants:{NAME}` (no further request), so a holder that releases and
///   at once acquires again queues behind the waiter it served; a waiter is also woken
///   at the earliest lease end, and re-checks every second (which keeps its place
///   alive: a place not refreshed for 3 s is dropped). `try_acquire` and Java's
///   acquirers ignore the queue and take free permits.
///
/// [`acquire`](Self::acquire), [`try_acquire`](Self::try_acquire) and
/// [`try_acquire_for`](Self::try_acquire_for) take a permit
/// **renewed by the client's watchdog** while held (lease = the watchdog timeout,
/// renewed every third of it): a live holder's permit never expires, and a crashed
/// holder's comes back within one watchdog timeout. Redisson's `acquire()` permit never
/// expires instead (scored 922337203685477), so a crashed Java holder keeps it for ever;
/// leasehold reads and releases such permits but never makes them.
///
/// Cheap to make (no I/O) and to clone.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// use std::time::Duration;
/// let partner = client.permit_expirable_semaphore("partner-calls");
/// partner.try_set_permits(3).await?;
/// let permit = partner.acquire_with_lease(Duration::from_secs(30)).await?;
/// // ... at most 3 calls at once; a crashed caller's permit is back within 30 s ...
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    shared: Arc<PesShared>,
}

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitExpirableSemaphore").field("key", &crate::debug::Bounded(&self.shared.key)).finish()
    }
}

/// A lease in ms as the scripts take it.
fn lease_ms(lease: Duration) -> Result<i64> {
    let ms = args::lease_millis(lease, "a permit's lease")?;
    i64::try_from(ms).map_err(|_| Error::invalid_argument("a permit's lease overflows"))
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: Arc<ClientShared>, key: String) -> Self {
        PermitExpirableSemaphore { shared: Arc::new(PesShared::new(client, key)) }
    }

    /// The semaphore's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The `ZSet` of held permits, `{NAME}:timeout` (empty for an empty name).
    pub fn timeout_key(&self) -> &str {
        self.shared.names.as_ref().map_or("", |names| names.timeout_key())
    }

    /// The channel its changes are published on, `redisson_sc:{NAME}`.
    pub fn channel(&self) -> &str {
        self.shared.names.as_ref().map_or("", |names| names.channel())
    }

    /// Takes a permit renewed by the watchdog while held, waiting as long as it takes
    /// (Redisson's `acquire()`, whose permit never expires instead: see the type's docs).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty
    /// name (nothing sent); [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) for
    /// keys of another type. Transient errors (timeouts, connection errors) are retried
    /// after a back-off.
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing behind: the waiter leaves the wait queue,
    /// and a permit an attempt in flight took, or a release granted it before it heard,
    /// is released in the background.
    pub async fn acquire(&self) -> Result<Permit> {
        self.take(None, None).await?.ok_or_else(|| self.unbounded_end())
    }

    /// Takes a permit with the lease `lease`, waiting as long as it takes (Redisson's
    /// `acquire(leaseTime)`). The permit comes back by itself when the lease runs out.
    ///
    /// # Errors
    /// As [`Self::acquire`]; a lease under 1 ms or over the maximum is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), nothing sent.
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        self.take(Some(lease), None).await?.ok_or_else(|| self.unbounded_end())
    }

    /// Takes a permit renewed by the watchdog while held, if one is available now, in
    /// one round trip (Redisson's `tryAcquire()`): `None` when none is.
    ///
    /// # Errors
    /// As [`Self::acquire`], and any error of its one attempt: nothing is retried.
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<Permit>> {
        self.take(None, Some(Duration::ZERO)).await
    }

    /// Waits up to `wait` to take a permit renewed by the watchdog while held (as
    /// [`Self::acquire`]): `None` when the wait ran out (a zero wait is one attempt, as
    /// [`Self::try_acquire`]). Redisson's `tryAcquire(waitTime)` takes a permit that never
    /// expires instead. The bound holds as in [`Self::try_acquire_with`].
    ///
    /// # Errors
    /// As [`Self::acquire`]; a wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<Permit>> {
        self.take(None, Some(wait)).await
    }

    /// Waits up to `wait` to take a permit with the lease `lease` (Redisson's
    /// `tryAcquire(waitTime, leaseTime)`): `None` when the wait ran out (a zero wait is
    /// one attempt). The bound holds whatever the server does (frozen, unreachable) and
    /// whatever the command timeout: a permit an attempt abandoned at the deadline takes
    /// late is released in the background.
    ///
    /// # Errors
    /// As [`Self::acquire_with_lease`]; a wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    ///
    /// # Cancel safety
    /// As [`Self::acquire`].
    pub async fn try_acquire_with(&self, wait: Duration, lease: Duration) -> Result<Option<Permit>> {
        self.take(Some(lease), Some(wait)).await
    }

    /// Releases the permit with the id `id` (32 hex digits), whoever took it, Java's
    /// permits included (Redisson's `tryRelease(id)`): `true` when it was released,
    /// `false` when no such permit was held (never taken, released already, or its lease
    /// had run out; an expired one's permit goes back to the count anyway).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an id that
    /// is not 32 hex digits or an empty name (nothing sent); otherwise as
    /// [`Self::acquire`], without the retries.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the call back once sent.
    pub async fn try_release(&self, id: &str) -> Result<bool> {
        let id = PermitId::parse(id)?;
        let names = self.shared.names()?;
        // A release by id knows no lease deadline: the server's clock tells.
        let released = self.shared.client.store.pes_release(names, &id, true).await?;
        Ok(released == lock_core::pes::PesRelease::Released)
    }

    /// Gives the held permit `id` a new lease of `lease` from now (Redisson's
    /// `updateLeaseTime`): `true` when it was held, `false` when it was not (an expired
    /// permit cannot be revived). The lease is on the server's clock.
    ///
    /// # Errors
    /// As [`Self::try_release`]; a lease under 1 ms or over the maximum is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), nothing sent.
    ///
    /// # Cancel safety
    /// As [`Self::try_release`].
    pub async fn update_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        let id = PermitId::parse(id)?;
        let lease = lease_ms(lease)?;
        let names = self.shared.names()?;
        Ok(self.shared.client.store.pes_update_lease(names, &id, lease).await?.is_some())
    }

    /// The count of available permits, expired ones included (Redisson's
    /// `availablePermits`). It reclaims up to one chunk of expired permits on the way.
    ///
    /// # Errors
    /// As [`Self::try_release`].
    ///
    /// # Cancel safety
    /// As [`Self::try_release`] (it may reclaim).
    pub async fn available_permits(&self) -> Result<i64> {
        let names = self.shared.names()?;
        Ok(self.shared.client.store.pes_permits(names).await?.0)
    }

    /// The count of permits held now, whose lease has not run out (Redisson's
    /// `acquiredPermits`).
    ///
    /// # Errors
    /// As [`Self::try_release`].
    ///
    /// # Cancel safety
    /// As [`Self::try_release`] (it may reclaim).
    pub async fn acquired_permits(&self) -> Result<i64> {
        let names = self.shared.names()?;
        Ok(self.shared.client.store.pes_permits(names).await?.1)
    }

    /// Makes the total of permits (available plus held) `permits` (Redisson's
    /// `setPermits`), whether or not it was set before, and publishes the available
    /// count (when above 0). With more permits held than the new total, the count goes
    /// below 0 until enough are released.
    ///
    /// # Errors
    /// As [`Self::try_release`].
    ///
    /// # Cancel safety
    /// As [`Self::try_release`].
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        let names = self.shared.names()?;
        self.shared.client.store.pes_set_permits(names, i64::from(permits)).await.map(drop)
    }

    /// Sets the count to `permits` if the semaphore was never set (no key), and
    /// publishes it (Redisson's `trySetPermits`): `true` when it was set.
    ///
    /// # Errors
    /// As [`Self::try_release`].
    ///
    /// # Cancel safety
    /// As [`Self::try_release`].
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let names = self.shared.names()?;
        let plain = lock_core::semaphore::SemaphoreNames::new(names.key())?;
        self.shared.client.store.semaphore_try_set_permits(&plain, i64::from(permits)).await
    }

    /// Adds `delta` to the count of available permits (negative takes them away; the
    /// count may go below 0), as Redisson's `addPermits`. A count above 0 afterwards is
    /// published.
    ///
    /// # Errors
    /// As [`Self::try_release`]; [`ErrorKind::Redis`](crate::ErrorKind::Redis) when the
    /// count would overflow.
    ///
    /// # Cancel safety
    /// As [`Self::try_release`].
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        let names = self.shared.names()?;
        let plain = lock_core::semaphore::SemaphoreNames::new(names.key())?;
        self.shared.client.store.semaphore_add_permits(&plain, delta).await.map(drop)
    }

    fn unbounded_end(&self) -> Error {
        Error::new(crate::ErrorKind::Timeout, "an unbounded semaphore wait ended").with_key(self.key())
    }

    /// Every acquire: `lease` `None` = renewed by the watchdog; `wait` `None` = unbounded,
    /// `Some(ZERO)` = one attempt.
    async fn take(&self, lease: Option<Duration>, wait: Option<Duration>) -> Result<Option<Permit>> {
        let start = Instant::now();
        let renewed = lease.is_none();
        let lease = lease.unwrap_or(self.shared.client.config.watchdog_timeout);
        let ms = lease_ms(lease)?;
        let names = self.shared.names()?.clone();
        let deadline = wait.map(|wait| args::wait_deadline(start, wait)).transpose()?;
        let client = &self.shared.client;
        let env = client.wait_env();
        let attempt = PermitAttempt::new(self.shared.clone(), lease, renewed, ms)?;
        let mut run = crate::wait::AcquireRun::default();
        let result = crate::wait::wait_for(&attempt, &env, deadline, &mut run).await;
        let waits = wait != Some(Duration::ZERO);
        client.telemetry.acquire_done(
            names.key(),
            Kind::Semaphore,
            waits,
            Outcome::of(&result, waits),
            start.elapsed(),
        );
        result
    }
}
