//! The permits one acquire of a [`Semaphore`](crate::Semaphore) took, as a guard.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use lock_core::semaphore::SemaphoreOp;
use lock_core::{Error, ErrorKind, Result};

use crate::client::live::{BoxFuture, LiveHold};
use crate::semaphore::ops::ReleaseMode;
use crate::semaphore::shared::SemaphoreShared;

/// The permits one acquire of a [`Semaphore`](crate::Semaphore) took: tokio's
/// `SemaphorePermit`, across processes. Give them back with
/// [`SemaphorePermit::release`], which reports errors.
///
/// Dropping it without `release` gives the permits back in the background on the
/// runtime that acquired them (so a request handler cancelled between its acquire and
/// its release, a client hanging up on axum, leaks nothing); if that runtime is gone,
/// nothing can be sent and the permits stay taken. `Drop` never blocks and never panics.
/// [`SemaphorePermit::detach`] keeps them taken on purpose (to be given back later with
/// [`Semaphore::release`](crate::Semaphore::release), by this process or another).
///
/// The give-back carries the acquire's operation id, so however often it is retried or
/// replayed (a lost reply, a failover, a `release` cancelled and then the drop's
/// background give-back) the permits come back once
/// (`docs/architecture/semaphores.md`, "Exactly once").
///
/// The permits have no owner and no lease in Redis (Redisson's `RSemaphore` layout): a
/// process that dies holding them never gives them back. Use
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) where that matters.
/// [`Client::shutdown`](crate::Client::shutdown) gives back the permits of every
/// permit guard still alive (not the detached ones), and those guards report
/// [`is_lost`](SemaphorePermit::is_lost) from then on.
///
/// The permits have no lease, so the guard has no `lease_deadline` (nothing ends them
/// but a release or the shutdown).
#[must_use = "dropping the permit gives its permits back (in the background)"]
#[clippy::has_significant_drop]
pub struct SemaphorePermit {
    held: Arc<PermitsHeld>,
    /// Its entry in the client's live holds (for `Client::shutdown`).
    live: u64,
    runtime: Option<tokio::runtime::Handle>,
    /// Set once the permits were given back (or detached); `Drop` then sends nothing.
    done: bool,
}

/// What the client's live registry shares with a [`SemaphorePermit`].
struct PermitsHeld {
    semaphore: Arc<SemaphoreShared>,
    /// The acquire's operation id: the give-back's id too.
    op: SemaphoreOp,
    permits: u32,
    /// How the give-back treats the acquire's record (the same for every send).
    mode: ReleaseMode,
    /// Set by `Client::shutdown` (which gave the permits back, or tried to).
    ended: AtomicBool,
    /// Woken when `ended` is set, for [`SemaphorePermit::lost`].
    ended_signal: tokio::sync::Notify,
}

impl PermitsHeld {
    /// Resolves once `ended` is set.
    async fn ended(&self) {
        loop {
            let notified = self.ended_signal.notified();
            tokio::pin!(notified);
            // Registered before the check, so a `notify_waiters` after it is not missed.
            notified.as_mut().enable();
            if self.ended.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

impl LiveHold for PermitsHeld {
    fn release(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if self.ended.load(Ordering::Acquire) {
                return Ok(());
            }
            self.semaphore.give_back_once(self.op, self.permits, &self.mode).await
        })
    }

    fn end_locally(&self) {
        self.ended.store(true, Ordering::Release);
        self.ended_signal.notify_waiters();
    }
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("key", &crate::debug::Bounded(self.held.semaphore.key()))
            .field("permits", &self.held.permits)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl SemaphorePermit {
    /// The guard of `permits` permits just taken through `semaphore` by the acquire `op`.
    pub(crate) fn new(semaphore: Arc<SemaphoreShared>, op: SemaphoreOp, permits: u32, mode: ReleaseMode) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let held = Arc::new(PermitsHeld {
            semaphore,
            op,
            permits,
            mode,
            ended: AtomicBool::new(false),
            ended_signal: tokio::sync::Notify::new(),
        });
        let weak: std::sync::Weak<dyn LiveHold> = Arc::downgrade(&held) as _;
        let live = held.semaphore.live().insert(weak);
        SemaphorePermit { held, live, runtime, done: false }
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.held.permits
    }

    /// The semaphore's Redis key.
    pub fn key(&self) -> &str {
        self.held.semaphore.key()
    }

    /// `true` once [`Client::shutdown`](crate::Client::shutdown) gave the permits back
    /// (a semaphore's permits have no lease: nothing else ends them).
    pub fn is_lost(&self) -> bool {
        self.held.ended.load(Ordering::Acquire)
    }

    /// Resolves once [`Client::shutdown`](crate::Client::shutdown) gave the permits back
    /// (see [`SemaphorePermit::is_lost`]); never otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.held.ended().await;
    }

    /// Gives the permits back and publishes the new count, serving the semaphore's
    /// waiters in arrival order (see [`Semaphore`](crate::Semaphore)). Transient errors (timeouts, connection errors, a
    /// failover) are retried with the acquire's operation id, as
    /// [`Semaphore::release`](crate::Semaphore::release) retries: the permits come back
    /// once.
    ///
    /// # Errors
    /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) when the client was shut down
    /// (which gave the permits back; nothing sent);
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key now holds
    /// another type (nothing written); a transient error once the retries ran out, after
    /// which the give-back goes on in the background.
    ///
    /// # Cancel safety
    /// Dropping the future gives the permits back in the background, as dropping the
    /// guard does; a give-back already sent is not applied twice.
    pub async fn release(mut self) -> Result<()> {
        if self.is_lost() {
            self.done = true;
            return Err(Error::new(ErrorKind::Shutdown, "the client was shut down, which gave the permits back")
                .with_key(self.key()));
        }
        let result = self.held.semaphore.give_back(self.held.op, self.held.permits, &self.held.mode).await;
        if result.is_ok() {
            self.done = true;
        }
        result
    }

    /// Lets go of the guard and keeps the permits taken: nothing is sent, now, on drop
    /// or at shutdown. They stay taken until someone calls
    /// [`Semaphore::release`](crate::Semaphore::release).
    pub fn detach(mut self) {
        self.done = true;
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        self.held.semaphore.live().remove(self.live);
        if self.done || self.is_lost() {
            return;
        }
        let Some(runtime) = self.runtime.take() else {
            tracing::warn!(
                target: crate::telemetry::TARGET,
                semaphore = %self.held.semaphore.key(),
                permits = self.held.permits,
                "a permit guard dropped with no runtime left: its permits stay taken"
            );
            return;
        };
        let held = self.held.clone();
        drop(runtime.spawn(async move {
            if let Err(error) = held.semaphore.give_back(held.op, held.permits, &held.mode).await {
                tracing::warn!(
                    target: crate::telemetry::TARGET,
                    semaphore = %held.semaphore.key(), %error, permits = held.permits,
                    "the permits of a dropped permit guard were not given back"
                );
            }
        }));
    }
}

#[cfg(feature = "blocking")]
impl SemaphorePermit {
    /// [`SemaphorePermit::lost`] as a future that owns what it watches, for the blocking API.
    pub(crate) fn lost_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let held = self.held.clone();
        async move { held.ended().await }
    }
}
