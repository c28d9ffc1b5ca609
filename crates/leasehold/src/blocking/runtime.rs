//! The blocking client's runtime: a current-thread tokio runtime on a thread of its own
//! (`leasehold-blocking`), which every blocking call hands its future to, and the check
//! that refuses a blocking call on a thread that runs async tasks.
//!
//! The thread runs between calls, so the watchdog's renewals, the subscriber's wake-ups
//! and fred's connection tasks never wait for the user's thread to call in. A call
//! spawns its future there and parks the calling thread until the task answers
//! (`reqwest::blocking`'s pattern; the task queue is the hand-over channel).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use lock_core::{Error, ErrorKind, Result};
use tokio::sync::{oneshot, Notify};

/// The name of the runtime thread.
pub(crate) const THREAD_NAME: &str = "leasehold-blocking";

/// A handle on the runtime thread, shared by a client, its lock handles and its guards.
/// It does not keep the thread running: the thread ends when the last
/// [`Client`](super::Client) is dropped (see [`Stop`]).
pub(crate) struct Runner {
    handle: tokio::runtime::Handle,
    /// Releases of dropped guards still running: the thread lets them finish before the
    /// client's shutdown closes it.
    releases: Releases,
}

/// Tells the runtime thread to shut its client down and end: sent by the last
/// [`Client`](super::Client)'s drop; dropping it unsent (a connect that failed) ends the
/// thread at once.
pub(crate) type Stop = oneshot::Sender<crate::Client>;

impl Runner {
    /// Starts the runtime thread. It waits for [`Stop`], then lets the releases of
    /// dropped guards finish (at most the replay window), shuts the client down
    /// ([`crate::Client::shutdown`]: every live guard's lock released, forgotten ones
    /// included, background tasks stopped, connections quit) and drops the runtime,
    /// which ends every task still on it.
    pub(crate) fn start() -> Result<(Arc<Runner>, Stop)> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| {
            Error::new(ErrorKind::Connection, format!("could not start the blocking client's runtime: {error}"))
        })?;
        let runner = Arc::new(Runner { handle: runtime.handle().clone(), releases: Releases::default() });
        let (stop, stopped) = oneshot::channel::<crate::Client>();
        let on_thread = runner.clone();
        std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(client) = stopped.await else { return };
                    on_thread.releases.settle(client.config().replay_window).await;
                    if let Err(error) = client.shutdown().await {
                        tracing::debug!(
                            target: crate::telemetry::TARGET,
                            %error,
                            "blocking client: the shutdown at its last drop did not release everything",
                        );
                    }
                });
                drop(runtime);
            })
            .map_err(|error| {
                Error::new(ErrorKind::Connection, format!("could not start the blocking client's thread: {error}"))
            })?;
        Ok((runner, stop))
    }

    /// Runs `work` on the runtime thread and waits for its answer.
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`] on a thread that runs async tasks (nothing is
    /// spawned); [`ErrorKind::Shutdown`] when the runtime has stopped (the last client
    /// was dropped); otherwise `work`'s own. A panic of `work` is resumed on the caller's
    /// thread, as awaiting the async call would have.
    pub(crate) fn run<T: Send + 'static>(&self, work: impl Future<Output = Result<T>> + Send + 'static) -> Result<T> {
        self.run_infallible(work)?
    }

    /// As [`Runner::run`], for work that cannot fail.
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`] and [`ErrorKind::Shutdown`], as [`Runner::run`].
    pub(crate) fn run_infallible<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        refuse_in_async_context()?;
        match park_on(self.handle.spawn(work)) {
            Ok(output) => Ok(output),
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(Error::unsent(
                ErrorKind::Shutdown,
                "the blocking client's runtime has stopped (its last Client was dropped)",
            )),
        }
    }

    /// Runs a dropped guard's release in the background, never blocking the caller.
    /// It counts until it ends, so that the runtime thread's last shutdown waits for it.
    pub(crate) fn spawn_release(self: &Arc<Self>, release: impl Future<Output = ()> + Send + 'static) {
        self.releases.pending.fetch_add(1, Ordering::AcqRel);
        let pending = PendingRelease(self.clone());
        // A stopped runtime drops the task at once, and `pending` with it.
        drop(self.handle.spawn(async move {
            let _pending = pending;
            release.await;
        }));
    }
}

/// The count of background releases running, and a wake-up when it drops to 0.
#[derive(Default)]
struct Releases {
    pending: AtomicUsize,
    idle: Notify,
}

impl Releases {
    /// Waits until no background release runs, at most `bound`.
    async fn settle(&self, bound: Duration) {
        let idle = async {
            loop {
                let notified = self.idle.notified();
                tokio::pin!(notified);
                // Registered before the count is read, so the last release's wake-up is
                // never missed.
                notified.as_mut().enable();
                if self.pending.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(bound, idle).await.is_err() {
            tracing::debug!(
                target: crate::telemetry::TARGET,
                "blocking client: releases of dropped guards still running after {bound:?}",
            );
        }
    }
}

/// One background release counted in [`Releases`]; uncounted when dropped, however the
/// task ends (done, or dropped by a stopped runtime).
struct PendingRelease(Arc<Runner>);

impl Drop for PendingRelease {
    fn drop(&mut self) {
        let releases = &self.0.releases;
        if releases.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            releases.idle.notify_waiters();
        }
    }
}

/// `Err(AsyncContext)` on a thread that runs async tasks; see [`in_async_context`].
pub(crate) fn refuse_in_async_context() -> Result<()> {
    if in_async_context() {
        return Err(Error::unsent(
            ErrorKind::AsyncContext,
            "a blocking leasehold call on a thread that runs async tasks (a tokio worker, or inside block_on) \
             would stall that runtime: use the async API, or call it from spawn_blocking or a plain thread",
        ));
    }
    Ok(())
}

/// Whether the current thread runs async tasks, where tokio forbids blocking (its
/// `block_on` would panic there): a runtime's worker polling a task, or a thread inside
/// `block_on` (`#[tokio::main]`, `#[tokio::test]`). `spawn_blocking` and
/// `block_in_place` are allowed, as tokio allows them; so is a plain thread.
///
/// tokio does not expose that state, so it is read from two public behaviours, each
/// pinned by a unit test below:
/// - A thread without a runtime context (`Handle::try_current` fails) is a plain thread.
/// - With a context but outside any task (`task::try_id()` is `None`), the thread is
///   inside `block_on` (or holds a `Handle::enter` guard, which is refused too: it cannot
///   be told apart).
/// - Inside a task, `yield_now` tells a scheduler from a blocking thread: on a scheduler
///   it hands the waker to the scheduler to wake later; in `spawn_blocking` (and in
///   `block_in_place`, which gives its worker's scheduler away) it wakes it at once.
fn in_async_context() -> bool {
    if tokio::runtime::Handle::try_current().is_err() {
        return false;
    }
    if tokio::task::try_id().is_none() {
        return true;
    }
    !yield_wakes_at_once()
}

/// Polls `tokio::task::yield_now()` once: whether it woke its waker at once (no
/// scheduler on this thread) rather than deferring it to a scheduler.
fn yield_wakes_at_once() -> bool {
    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::Release);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.store(true, Ordering::Release);
        }
    }
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut context = Context::from_waker(&waker);
    let mut probe = std::pin::pin!(tokio::task::yield_now());
    // The first poll is always pending: it has woken or deferred the waker. A deferred
    // waker is woken later by the scheduler, which only sets the flag.
    let _ = probe.as_mut().poll(&mut context);
    flag.0.load(Ordering::Acquire)
}

/// How long a caller keeps polling its call's task, yielding the CPU between polls,
/// before it parks until woken. Measured in `benches/src/bin/blocking.rs`
/// (docs/benchmarks.md): it takes the wake-up of a parked caller off most calls, at the
/// price of at most this much yielding per call.
const YIELD_BEFORE_PARK: Duration = Duration::from_micros(300);

/// Waits for `future` on the calling thread, yielding, then parking it between polls. Used only for a
/// task's `JoinHandle`, which needs no runtime of the caller's.
fn park_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let yield_until = std::time::Instant::now() + YIELD_BEFORE_PARK;
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        if std::time::Instant::now() < yield_until {
            // Most calls answer within a round trip or two: polling again after giving
            // the CPU away saves the wake-up of a parked thread (docs/blocking.md).
            std::thread::yield_now();
            continue;
        }
        // Returns at the unpark of the task's wake-up (or spuriously: polled again).
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tokio's rule, as the check reads it: refused on a worker, inside `block_on` of
    /// both flavours; allowed on a plain thread, in `spawn_blocking` and in
    /// `block_in_place`. If a tokio release changes the behaviours the check relies on,
    /// this test fails.
    #[test]
    fn the_async_context_check_follows_tokios_rule() {
        assert!(!in_async_context(), "a plain thread");

        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        assert!(current.block_on(async { in_async_context() }), "current-thread block_on");
        assert!(current.block_on(async { tokio::spawn(async { in_async_context() }).await.expect("task") }));
        let in_blocking = current.block_on(async { tokio::task::spawn_blocking(in_async_context).await });
        assert!(!in_blocking.expect("blocking task"), "spawn_blocking on a current-thread runtime");

        let multi =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        assert!(multi.block_on(async { in_async_context() }), "multi-thread block_on");
        assert!(multi.block_on(async { tokio::spawn(async { in_async_context() }).await.expect("task") }), "worker");
        let in_blocking = multi.block_on(async { tokio::task::spawn_blocking(in_async_context).await });
        assert!(!in_blocking.expect("blocking task"), "spawn_blocking");
        let in_place = multi.block_on(async {
            tokio::spawn(async { tokio::task::block_in_place(in_async_context) }).await.expect("task")
        });
        assert!(!in_place, "block_in_place");
        let error = multi.block_on(async { refuse_in_async_context() }).expect_err("refused");
        assert_eq!(error.kind(), ErrorKind::AsyncContext);
        assert!(error.is_not_sent());
    }
}
