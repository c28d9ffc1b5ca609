//! What every blocking handle and guard is made of: the async handle or guard it wraps,
//! and the runtime thread its calls run on. Each blocking type is a thin layer over one
//! of these, so wrapping a new lock kind is mechanical (see `docs/blocking.md`,
//! "Adding a kind").

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{ErrorKind, Result};

use super::runtime::{refuse_in_async_context, Runner};
use super::shared::BlockingShared;

/// A blocking lock handle: the async handle (shared with the tasks its calls spawn) and
/// a clone of the client, which keeps the runtime thread running while the handle lives.
pub(crate) struct Handle<L> {
    inner: Arc<L>,
    client: Arc<BlockingShared>,
}

impl<L: std::fmt::Debug> std::fmt::Debug for Handle<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

/// A clone shares the async handle: only for kinds whose handle is not an owner (a
/// latch); a lock's blocking handle is not `Clone`, as the async one is not.
impl<L> Clone for Handle<L> {
    fn clone(&self) -> Self {
        Handle { inner: self.inner.clone(), client: self.client.clone() }
    }
}

impl<L: Send + Sync + 'static> Handle<L> {
    pub(crate) fn new(client: &Arc<BlockingShared>, inner: L) -> Self {
        Handle { inner: Arc::new(inner), client: client.clone() }
    }

    /// The async handle, for the calls that send nothing (`key`, `owner`, …).
    pub(crate) fn get(&self) -> &L {
        &self.inner
    }

    /// Another handle on the same client around `inner` (a derived async handle, such
    /// as a latch's `with_recheck`).
    pub(crate) fn with_inner(&self, inner: L) -> Self {
        Handle::new(&self.client, inner)
    }

    /// The client this handle's calls run on.
    pub(crate) fn client(&self) -> &Arc<BlockingShared> {
        &self.client
    }

    /// The runtime thread (for the guards a call returns).
    pub(crate) fn runner(&self) -> &Arc<Runner> {
        &self.client.runner
    }

    /// Runs `call` (given the async handle) on the runtime thread and waits for it.
    ///
    /// # Errors
    /// As [`Runner::run`].
    pub(crate) fn call<T, Fut>(&self, call: impl FnOnce(Arc<L>) -> Fut) -> Result<T>
    where
        Fut: Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.client.runner.run(call(self.inner.clone()))
    }
}

/// An async guard the blocking API wraps: how it is released.
pub(crate) trait AsyncGuard: Send + Sized + 'static {
    /// The guard's `unlock`, as a future that owns it.
    fn release(self) -> impl Future<Output = Result<()>> + Send + 'static;
}

/// An async guard that can be lost (its lease ran out, or the shutdown ended it).
pub(crate) trait LeasedGuard: AsyncGuard {
    /// The guard's `is_lost`.
    fn is_lost(&self) -> bool;
    /// The guard's `lost()`, as a future that owns what it watches.
    fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static;
}

/// A blocking guard: the async guard (taken by `unlock`, `detach` or `drop`) and the
/// runtime thread. It does not keep the thread running: after the last
/// [`Client`](crate::blocking::Client) was dropped, its calls fail with [`ErrorKind::Shutdown`] (the client's
/// drop released its hold).
pub(crate) struct Guarded<G: AsyncGuard> {
    guard: Option<G>,
    runner: Arc<Runner>,
}

impl<G: AsyncGuard> Guarded<G> {
    pub(crate) fn new(guard: G, runner: Arc<Runner>) -> Self {
        Guarded { guard: Some(guard), runner }
    }

    /// The async guard.
    pub(crate) fn get(&self) -> &G {
        // Only `unlock`, `detach` and `drop` take it, and each consumes the guard.
        self.guard.as_ref().expect("a blocking guard's async guard is taken only when the guard is consumed")
    }

    /// Releases the hold on the runtime thread and waits for the answer. In an async
    /// context it fails with [`ErrorKind::AsyncContext`] and the guard is dropped, which
    /// releases the hold in the background.
    ///
    /// # Errors
    /// As the async guard's `unlock`; [`ErrorKind::AsyncContext`];
    /// [`ErrorKind::Shutdown`] once the runtime stopped.
    pub(crate) fn unlock(self) -> Result<()> {
        self.unlock_with(G::release)
    }

    /// As [`Guarded::unlock`], with the release `release` makes of the async guard
    /// (`unlock_after`).
    ///
    /// # Errors
    /// As that release; [`ErrorKind::AsyncContext`]; [`ErrorKind::Shutdown`] once the
    /// runtime stopped.
    pub(crate) fn unlock_with<F>(mut self, release: impl FnOnce(G) -> F) -> Result<()>
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        refuse_in_async_context()?;
        let Some(guard) = self.guard.take() else { return Ok(()) };
        self.runner.run(release(guard))
    }

    /// Runs `work` on the runtime thread and waits for it (a call of the guard's own).
    ///
    /// # Errors
    /// As [`Runner::run`].
    pub(crate) fn run<T: Send + 'static>(&self, work: impl Future<Output = Result<T>> + Send + 'static) -> Result<T> {
        self.runner.run(work)
    }

    /// Hands the async guard to `detach` (which lets go of it without a release).
    pub(crate) fn detach(mut self, detach: impl FnOnce(G)) {
        if let Some(guard) = self.guard.take() {
            detach(guard);
        }
    }
}

impl<G: LeasedGuard> Guarded<G> {
    /// Waits at most `timeout` for the hold to be lost: `true` when it is (at once if it
    /// already was), `false` when the time ran out first.
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`] only. After the runtime stopped it answers whether the
    /// hold is lost (it is: the client's last drop released it).
    pub(crate) fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        refuse_in_async_context()?;
        let guard = self.get();
        if guard.is_lost() {
            return Ok(true);
        }
        let lost = guard.lost_owned();
        match self.runner.run_infallible(async move { tokio::time::timeout(timeout, lost).await.is_ok() }) {
            Err(error) if error.kind() == ErrorKind::Shutdown => Ok(guard.is_lost()),
            other => other,
        }
    }
}

impl<G: AsyncGuard> Drop for Guarded<G> {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else { return };
        // Creating the future runs nothing; the release runs on the runtime thread.
        let release = guard.release();
        self.runner.spawn_release(async move {
            if let Err(error) = release.await {
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    %error,
                    "the background release of a dropped blocking guard failed",
                );
            }
        });
    }
}

/// `impl AsyncGuard` (and `LeasedGuard`) for async guard types whose `unlock(self)`,
/// `is_lost()` and lost signal are reached through `$lease` (an expression of `self`
/// giving the [`crate::LockGuard`] of the hold).
macro_rules! leased_async_guard {
    ($($guard:ty => |$this:ident| $lease:expr;)*) => {$(
        impl AsyncGuard for $guard {
            fn release(self) -> impl Future<Output = Result<()>> + Send + 'static {
                self.unlock()
            }
        }

        impl LeasedGuard for $guard {
            fn is_lost(&self) -> bool {
                let $this = self;
                $lease.is_lost()
            }

            fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static {
                let $this = self;
                $lease.lost_owned()
            }
        }
    )*};
}

leased_async_guard! {
    crate::LockGuard => |guard| guard;
    crate::FencedGuard => |guard| &**guard;
    crate::ReadGuard => |guard| guard.lock_guard();
    crate::WriteGuard => |guard| guard.lock_guard();
}

impl AsyncGuard for crate::Leadership {
    fn release(self) -> impl Future<Output = Result<()>> + Send + 'static {
        self.resign()
    }
}

impl LeasedGuard for crate::Leadership {
    fn is_lost(&self) -> bool {
        crate::Leadership::is_lost(self)
    }

    fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        crate::Leadership::lost_owned(self)
    }
}

impl AsyncGuard for crate::MultiGuard {
    fn release(self) -> impl Future<Output = Result<()>> + Send + 'static {
        self.unlock()
    }
}

impl LeasedGuard for crate::MultiGuard {
    fn is_lost(&self) -> bool {
        crate::MultiGuard::is_lost(self)
    }

    /// Any member's lost signal (as [`crate::MultiGuard::lost`], owning what it watches).
    fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut each: Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> =
            self.guards().iter().map(|guard| Box::pin(guard.lost_owned()) as std::pin::Pin<Box<_>>).collect();
        // Polls every member's signal each time (each registers its waker) until one fires.
        std::future::poll_fn(move |cx| {
            if each.iter_mut().any(|lost| lost.as_mut().poll(cx).is_ready()) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }
}

impl AsyncGuard for crate::Permit {
    fn release(self) -> impl Future<Output = Result<()>> + Send + 'static {
        crate::Permit::release(self)
    }
}

impl LeasedGuard for crate::Permit {
    fn is_lost(&self) -> bool {
        crate::Permit::is_lost(self)
    }

    fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        crate::Permit::lost_owned(self)
    }
}

impl AsyncGuard for crate::SemaphorePermit {
    fn release(self) -> impl Future<Output = Result<()>> + Send + 'static {
        crate::SemaphorePermit::release(self)
    }
}

impl LeasedGuard for crate::SemaphorePermit {
    fn is_lost(&self) -> bool {
        crate::SemaphorePermit::is_lost(self)
    }

    fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        crate::SemaphorePermit::lost_owned(self)
    }
}

impl AsyncGuard for crate::SimpleGuard {
    fn release(self) -> impl Future<Output = Result<()>> + Send + 'static {
        self.unlock()
    }
}

impl LeasedGuard for crate::SimpleGuard {
    fn is_lost(&self) -> bool {
        crate::SimpleGuard::is_lost(self)
    }

    fn lost_owned(&self) -> impl Future<Output = ()> + Send + 'static {
        crate::SimpleGuard::lost_owned(self)
    }
}

/// The methods every blocking guard with a lease has, each as its async guard's
/// (`$async` names that type for the docs): `key`, `owner`, `is_lost`, `wait_lost`,
/// `lease_deadline`, `is_renewed`, `unlock`, `detach`. The guard's field `held` is its
/// [`Guarded`].
macro_rules! leased_guard_methods {
    ($async:literal) => {
        #[doc = concat!("The lock's Redis key (as [`", $async, "::key`]).")]
        pub fn key(&self) -> &str {
            self.held.get().key()
        }

        #[doc = concat!("The owner id this hold counts in (as [`", $async, "::owner`]).")]
        pub fn owner(&self) -> &str {
            self.held.get().owner()
        }

        #[doc = concat!("`true` when the hold is known lost (as [`", $async, "::is_lost`]). Sends nothing and never blocks.")]
        pub fn is_lost(&self) -> bool {
            self.held.get().is_lost()
        }

        /// Blocks until the hold is lost or `timeout` passes: `true` when it is lost (at
        /// once if it already is), `false` when the time ran out first. The blocking
        /// form of the async guard's `lost()`; a renewed hold is never lost while the
        /// watchdog renews it.
        ///
        /// # Errors
        /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread
        /// that runs async tasks. Once the client's last clone was dropped it answers
        /// `true` at once (that drop released the hold).
        pub fn wait_lost(&self, timeout: std::time::Duration) -> crate::Result<bool> {
            self.held.wait_lost(timeout)
        }

        #[doc = concat!("The local lease deadline (as [`", $async, "::lease_deadline`]).")]
        pub fn lease_deadline(&self) -> std::time::Instant {
            self.held.get().lease_deadline()
        }

        #[doc = concat!("Whether the watchdog is renewing this hold now (as [`", $async, "::is_renewed`]).")]
        pub fn is_renewed(&self) -> bool {
            self.held.get().is_renewed()
        }

        /// Gives back this hold and waits for the server's answer, as the async
        /// guard's `unlock`.
        ///
        /// # Errors
        #[doc = concat!("As [`", $async, "::unlock`]: [`ErrorKind::LockLost`](crate::ErrorKind::LockLost), [`ErrorKind::NotOwner`](crate::ErrorKind::NotOwner), timeouts and connection errors after retries.")]
        /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the client was shut
        /// down or its last clone dropped (either released the hold).
        /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that
        /// runs async tasks: the guard is then dropped, which releases the hold in the
        /// background.
        pub fn unlock(self) -> crate::Result<()> {
            self.held.unlock()
        }

        #[doc = concat!("Lets go of the guard without releasing the hold (as [`", $async, "::detach`]): renewal stops, nothing is sent, and the key expires with its lease. The client's last drop does not release a detached hold.")]
        pub fn detach(self) {
            self.held.detach(|guard| guard.detach());
        }
    };
}
pub(crate) use leased_guard_methods;
