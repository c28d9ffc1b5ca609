//! [`Semaphore`]: Redisson's `RSemaphore`, a fleet-wide count of permits without owners
//! or leases. Each acquire hands out a [`SemaphorePermit`] that gives its permits back
//! once, on release or drop, whatever is retried, lost or cancelled.
//!
//! Files: this one (the handle); `shared.rs` (what the handle and its permits share,
//! the give-back); `permit.rs` ([`SemaphorePermit`]); `attempt.rs` (an acquire, as the
//! wait engine sees it); `ops.rs` (releases and undos with operation ids).

pub(crate) mod attempt;
pub(crate) mod ops;
pub(crate) mod permit;
pub(crate) mod shared;

use std::sync::Arc;
use std::time::Duration;

use lock_core::semaphore::SemaphoreNames;
use lock_core::{args, Error, Result};
use tokio::time::Instant;

use crate::client::shared::ClientShared;
use crate::semaphore::attempt::PermitsAttempt;
use crate::semaphore::permit::SemaphorePermit;
use crate::semaphore::shared::SemaphoreShared;
use crate::telemetry::{Kind, Outcome};

/// A handle on one counting semaphore, in Redisson 4.7's `RSemaphore` layout byte for
/// byte: the String `NAME` holds the count of available permits (decimal), and every
/// change that frees permits publishes the new count on `redisson_sc:{NAME}`. A Java
/// service using Redisson's `RSemaphore` and a Rust service using leasehold share the
/// same semaphores, and each side's release wakes the other's waiters.
///
/// Permits have no owner and no lease, as in Redisson: any handle may release, and a
/// holder that crashes never gives its permits back. Use
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) where that matters.
///
/// Of the acquire forms every kind shares, a semaphore has
/// [`acquire(n)`](Semaphore::acquire), [`try_acquire(n)`](Semaphore::try_acquire) and
/// [`try_acquire_for(n, wait)`](Semaphore::try_acquire_for). Nothing is renewed, and
/// there is no `acquire_with_lease` or `try_acquire_with`: its permits have no lease to
/// set.
///
/// **A semaphore that was never set** (no key) has 0 permits, as in Redisson: an
/// [`acquire`](Semaphore::acquire) waits until someone sets or releases permits (a
/// Java service that calls `trySetPermits` later is honoured), and
/// [`try_acquire_for`](Semaphore::try_acquire_for) returns `None` at its deadline.
///
/// **Waiting** never polls and never wakes a herd: a waiting acquire that finds too few
/// permits, or waiters queued ahead of it, keeps a place in the semaphore's wait queue
/// on the server (`leasehold_sem_queue:{NAME}`), shared by every leasehold client. A
/// release serves that queue in arrival order while the count covers the head (a
/// waiter for many permits is never overtaken by smaller requests behind it), takes
/// the permits for each waiter it serves in the same script, and tells it on
/// `leasehold_sem_grants:{NAME}`: the waiter has its permits without another request
/// (two requests per contended acquisition: the acquire that queued, the release that
/// served it). A holder that releases and at once acquires again queues behind the
/// waiters its release served. The order is strict, as tokio's `acquire_many`: a waiter
/// for more permits than are free holds up the smaller requests behind it, so bound a
/// wait for more permits than the semaphore may ever have (`try_acquire_for`). Each waiter also looks again every second on its own,
/// which keeps its place alive (a place not refreshed for 3 s is dropped, so a waiter
/// whose process died stops blocking the queue) and covers a lost message, an expired
/// or deleted key, a count set by a script that publishes nothing, and permits freed by
/// a Java release (which serves no queue: the head is woken by its count).
///
/// [`try_acquire`](Semaphore::try_acquire) never queues and never reads the queue: like
/// Redisson's (and Java's acquirers, which ignore the queue), it takes permits that are
/// free even while leasehold waiters wait. A waiter whose process dies after a release
/// served it, before it heard, loses those permits, as a holder that dies does (its
/// place lives at most 3 s after its last refresh: `docs/architecture/semaphores.md`).
///
/// Cheap to make (no I/O) and to clone.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// let exports = client.semaphore("exports");
/// exports.try_set_permits(8).await?; // once, by whoever comes first
/// let permit = exports.acquire(1).await?;
/// // ... at most 8 of these run at once, fleet-wide ...
/// permit.release().await?; // or drop it: the permit goes back in the background
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    shared: Arc<SemaphoreShared>,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore").field("key", &crate::debug::Bounded(&self.shared.key)).finish()
    }
}

/// A count of permits as Redis takes it: 1 or more.
fn positive(permits: u32, what: &str) -> Result<i64> {
    if permits == 0 {
        return Err(Error::invalid_argument(format!("{what} needs at least 1 permit, got 0")));
    }
    Ok(i64::from(permits))
}

impl Semaphore {
    pub(crate) fn new(client: Arc<ClientShared>, key: String) -> Self {
        Semaphore { shared: Arc::new(SemaphoreShared::new(client, key)) }
    }

    /// The semaphore's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The channel its changes are published on, `redisson_sc:{NAME}`.
    pub fn channel(&self) -> &str {
        self.shared.names.as_ref().map_or("", |names| names.channel())
    }

    /// Diagnostic: how many of this client's waiters wait in this semaphore's line now.
    pub fn local_waiters(&self) -> usize {
        self.shared
            .names
            .as_ref()
            .map_or(0, |names| self.shared.client.subscriber.lock_waiters(names.channel(), names.key()))
    }

    /// Sets the count to `permits` if the semaphore was never set (no key), and
    /// publishes it (when above 0) so that waiters, Java's included, try. Redisson's
    /// `trySetPermits`: `true` when it was set, `false` when the key exists (untouched).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty
    /// name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key holds
    /// another type, or a String that is not a count (nothing written); timeouts and
    /// connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the call back: once sent it runs.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let names = self.shared.names()?;
        self.shared.client.store.semaphore_try_set_permits(names, i64::from(permits)).await
    }

    /// Adds `delta` permits to the count (a missing key counts as 0), or takes them
    /// away when `delta` is negative: the count may go below 0, as in Redisson's
    /// `addPermits`. A count above 0 afterwards is published.
    ///
    /// # Errors
    /// As [`Semaphore::try_set_permits`]; [`ErrorKind::Redis`](crate::ErrorKind::Redis)
    /// when the count would overflow a 64-bit integer.
    ///
    /// # Cancel safety
    /// As [`Semaphore::try_set_permits`].
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        let names = self.shared.names()?;
        self.shared.client.store.semaphore_add_permits(names, delta).await.map(drop)
    }

    /// The count of available permits (0 for a semaphore never set; below 0 after
    /// [`Semaphore::add_permits`] took more than there were). Redisson's
    /// `availablePermits`.
    ///
    /// # Errors
    /// As [`Semaphore::try_set_permits`].
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn available_permits(&self) -> Result<i64> {
        let names = self.shared.names()?;
        self.shared.client.store.semaphore_count(names).await
    }

    /// Takes every available permit and returns how many that was (the count is 0
    /// afterwards; a missing key stays missing). Redisson's `drainPermits`: nothing is
    /// published.
    ///
    /// # Errors
    /// As [`Semaphore::try_set_permits`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::try_set_permits`].
    pub async fn drain_permits(&self) -> Result<i64> {
        let names = self.shared.names()?;
        self.shared.client.store.semaphore_drain(names).await
    }

    /// Waits as long as it takes to take `permits` permits (Redisson's `acquire`),
    /// including for a semaphore that was never set (see the type's docs). The permits
    /// come as a [`SemaphorePermit`], which gives them back when released or dropped.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for 0 permits
    /// or an empty name (nothing sent); otherwise as [`Semaphore::try_set_permits`].
    /// Transient errors (timeouts, connection errors) are retried after a back-off,
    /// keeping the waiter's place in line.
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing behind: in the background, the waiter leaves
    /// the wait queue, and permits that an attempt in flight took, or that a release
    /// granted it before it heard, are given back (once: `sem_cancel.lua`).
    pub async fn acquire(&self, permits: u32) -> Result<SemaphorePermit> {
        match self.take(permits, None).await? {
            Some(permit) => Ok(permit),
            None => {
                Err(Error::new(crate::ErrorKind::Timeout, "an unbounded semaphore wait ended").with_key(self.key()))
            }
        }
    }

    /// Takes `permits` permits if that many are available now, in one round trip
    /// (Redisson's `tryAcquire`). `None`: fewer are available, nothing changed.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`], and any error of its one attempt: nothing is retried.
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire`].
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermit>> {
        self.take(permits, Some(Duration::ZERO)).await
    }

    /// Waits up to `wait` to take `permits` permits (Redisson's `tryAcquire(permits,
    /// waitTime)`): `None` when the wait ran out (a zero wait is one attempt). The bound
    /// holds whatever the server does (frozen, unreachable) and whatever the command
    /// timeout: an attempt abandoned at the deadline is undone in the background by its
    /// operation id, whether or not it ran.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`]; a wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument); when the last
    /// attempt before the deadline failed with a transient error, that error.
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire`].
    pub async fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<Option<SemaphorePermit>> {
        self.take(permits, Some(wait)).await
    }

    /// Gives `permits` permits back and publishes the new count (when above 0); when
    /// anyone listens, the release serves the wait queue with them (see the type's
    /// docs). Any handle may release, whether
    /// or not it acquired (Redisson's `release`: no owner, no upper bound): this is for
    /// permits taken elsewhere (a Java peer, another process, a
    /// [`SemaphorePermit::detach`]); permits taken here are given back by their
    /// [`SemaphorePermit`].
    ///
    /// Exactly once: the call has an operation id of its own, and timeouts, connection
    /// errors and the server's transient states (a failover) are retried with it after a
    /// back-off while they can finish within the client's replay window (at most 60 s);
    /// a retry of a release that did run finds its record and gives nothing back twice.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`]; a transient error when the retries ran out, which
    /// leaves it unknown whether the permits were given back (once at most).
    ///
    /// # Cancel safety
    /// Dropping the future stops the retries: a send in flight may still land (once).
    pub async fn release(&self, permits: u32) -> Result<()> {
        let permits = positive(permits, "release")?;
        let names = self.shared.names()?;
        // One operation id for the call and its retries: a replay gives nothing back twice.
        let (client, op) = (&self.shared.client, lock_core::semaphore::SemaphoreOp::random());
        crate::semaphore::ops::release(&client.store, client.config.replay_window, names, permits, op, None)
            .await
            .map(drop)
    }

    /// How long a wait for permits waits before it checks, once, whether the
    /// semaphore exists at all: a missing one (never set, flushed, emptied by a restart
    /// without persistence) is logged at WARN and counted in
    /// [`ClientStats::missing_semaphore_waits`](crate::ClientStats::missing_semaphore_waits).
    pub const MISSING_WARN_AFTER: Duration = Duration::from_secs(3);

    /// Once per wait, after [`Semaphore::MISSING_WARN_AFTER`]: tells whether the
    /// semaphore is missing. Never ends by itself, so the wait it runs beside decides.
    async fn watch_missing(&self, names: &SemaphoreNames, start: Instant) {
        tokio::time::sleep_until(lock_core::args::instant_after(start, Self::MISSING_WARN_AFTER)).await;
        // A failed check says nothing: the wait's own attempts report errors.
        if let Ok(false) = self.shared.client.store.semaphore_exists(names).await {
            self.shared.client.telemetry.semaphore_missing(names.key(), start.elapsed());
        }
    }

    /// The wait of every acquire: `None` = unbounded, `Some(ZERO)` = one attempt.
    async fn take(&self, permits: u32, wait: Option<Duration>) -> Result<Option<SemaphorePermit>> {
        let start = Instant::now();
        positive(permits, "acquire")?;
        let names = self.shared.names()?;
        let deadline = wait.map(|wait| args::wait_deadline(start, wait)).transpose()?;
        let client = &self.shared.client;
        let env = client.wait_env();
        let attempt = PermitsAttempt::new(client.store.clone(), names.clone(), permits);
        let mut run = crate::wait::AcquireRun::default();
        let waiting = crate::wait::wait_for(&attempt, &env, deadline, &mut run);
        // A wait that lasts is told, once, when the semaphore it waits on does not
        // exist: nothing would ever say so otherwise (issue 26 item 7).
        let watch = async {
            if deadline
                .is_none_or(|deadline| deadline > lock_core::args::instant_after(start, Self::MISSING_WARN_AFTER))
            {
                self.watch_missing(names, start).await;
            }
            std::future::pending::<std::convert::Infallible>().await
        };
        let result = tokio::select! {
            biased;
            result = waiting => result,
            never = watch => match never {},
        };
        let waits = wait != Some(Duration::ZERO);
        client.telemetry.acquire_done(
            names.key(),
            Kind::Semaphore,
            waits,
            Outcome::of(&result, waits),
            start.elapsed(),
        );
        // The permits are the guard's now: it gives them back with the acquire's id.
        Ok(result?.map(|taken| {
            let (op, permits, mode) = taken.keep();
            SemaphorePermit::new(self.shared.clone(), op, permits, mode)
        }))
    }
}
