//! The blocking [`CountDownLatch`]: [`crate::CountDownLatch`], each call run on the
//! client's runtime thread.

use std::sync::Arc;

use std::time::Duration;

use lock_core::Result;

use super::held::Handle;
use super::shared::BlockingShared;

/// The blocking form of [`crate::CountDownLatch`]: threads (of any process, Java ones on
/// Redisson included) wait until a count, set once, has been counted down to zero, in
/// Redisson's `RCountDownLatch` layout; the same methods and errors, each call blocking
/// the calling thread until it is answered.
///
/// A latch handle is not an owner: clone it, or make another with
/// [`Client::count_down_latch`](crate::blocking::Client::count_down_latch); every handle on a name is the same latch. A handle
/// keeps its client's runtime thread running.
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let ready = client.count_down_latch("workers:ready");
/// ready.try_set_count(4)?; // once, by whoever starts the round
/// // ... each of 4 worker threads, when it is ready:
/// ready.count_down()?;
/// // ... and whoever needs all 4:
/// if ready.try_wait_for(std::time::Duration::from_secs(30))? {
///     // all 4 are ready
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CountDownLatch {
    handle: Handle<crate::CountDownLatch>,
}

impl CountDownLatch {
    pub(crate) fn new(client: &Arc<BlockingShared>, latch: crate::CountDownLatch) -> Self {
        CountDownLatch { handle: Handle::new(client, latch) }
    }

    /// The same latch, whose waits read the count again every `every` when no message
    /// came (as [`crate::CountDownLatch::with_recheck`]). Sends nothing.
    #[must_use]
    pub fn with_recheck(&self, every: Duration) -> CountDownLatch {
        CountDownLatch { handle: self.handle.with_inner(self.handle.get().with_recheck(every)) }
    }

    /// The latch's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// The latch's channel, `redisson_countdownlatch__channel__{NAME}` (as
    /// [`crate::CountDownLatch::channel`]).
    pub fn channel(&self) -> &str {
        self.handle.get().channel()
    }

    /// As [`crate::CountDownLatch::try_set_count`]: sets the count if no latch exists;
    /// `false` when one does (its count is left as it is).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::try_set_count`] (a count of 0 is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), nothing sent);
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks (nothing sent); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown)
    /// after [`Client::shutdown`](crate::blocking::Client::shutdown).
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.handle.call(move |latch| async move { latch.try_set_count(count).await })
    }

    /// As [`crate::CountDownLatch::count_down`]: counts down by one and returns the
    /// count left; the count down that reaches zero opens the latch for every waiter.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count_down`] and [`CountDownLatch::try_set_count`].
    pub fn count_down(&self) -> Result<u64> {
        self.handle.call(|latch| async move { latch.count_down().await })
    }

    /// As [`crate::CountDownLatch::count`]: the count now (0 when there is no latch).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count`] and [`CountDownLatch::try_set_count`].
    pub fn count(&self) -> Result<u64> {
        self.handle.call(|latch| async move { latch.count().await })
    }

    /// As [`crate::CountDownLatch::delete`]: deletes the latch whatever its count and
    /// wakes every waiter; `true` if there was one.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::delete`] and [`CountDownLatch::try_set_count`].
    pub fn delete(&self) -> Result<bool> {
        self.handle.call(|latch| async move { latch.delete().await })
    }

    /// As [`crate::CountDownLatch::wait`]: blocks as long as it takes for the latch to
    /// open (the count is zero or the key is gone). It cannot be interrupted: bound it
    /// with [`CountDownLatch::try_wait_for`].
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait`] and [`CountDownLatch::try_set_count`].
    pub fn wait(&self) -> Result<()> {
        self.handle.call(|latch| async move { latch.wait().await })
    }

    /// As [`crate::CountDownLatch::try_wait_for`]: blocks at most `wait` for the latch to
    /// open: `true` when it did, `false` when the time ran out.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::try_wait_for`] and [`CountDownLatch::try_set_count`].
    pub fn try_wait_for(&self, wait: Duration) -> Result<bool> {
        self.handle.call(move |latch| async move { latch.try_wait_for(wait).await })
    }
}
