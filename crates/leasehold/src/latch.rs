//! The count-down latch handle: Redisson's `RCountDownLatch`, and its wait as the wait
//! engine (`wait/`) sees it.

use std::sync::Arc;
use std::time::Duration;

use lock_core::latch::LatchNames;
use lock_core::{args, Error, QueueKind, Result, WaitChannel};
use tokio::time::Instant;

use crate::client::shared::ClientShared;
use crate::telemetry::Kind;
use crate::wait::{Attempt, NotAcquired, ServerQueue, WaitPlan};

/// A handle on one count-down latch: tasks wait until the count, set once, has been
/// counted down to zero by others (in any process, Java ones on Redisson included).
///
/// The data in Redis is Redisson 4.7's `RCountDownLatch` layout: the String `NAME`
/// holds the count (decimal, no expiry), and the channel is literally
/// `redisson_countdownlatch__channel__{NAME}` (Redisson builds it so, braces added even
/// when the name has its own). [`CountDownLatch::try_set_count`] publishes `1` there, the
/// count down that reaches zero deletes the key and publishes `0`, and
/// [`CountDownLatch::delete`] publishes `1` (Redisson's message) then `0`.
///
/// A wait returns when the count is zero **or the key is gone** (counted down, deleted,
/// expired or evicted: a missing latch is open, as Redisson's `getCount` reads it). It
/// hears every message on the channel (each wakes every local waiter of this client),
/// and also reads the count again every [`CountDownLatch::DEFAULT_RECHECK`] (or
/// [`CountDownLatch::with_recheck`]) while it waits, so a wait never hangs on a message
/// that did not come (Redisson's untimed `await` can: a delete publishes only `1`,
/// an expiry nothing).
///
/// Unlike a lock handle, a latch handle is not an owner: clone it, or make another with
/// [`Client::count_down_latch`](crate::Client::count_down_latch); every handle on a name
/// is the same latch. Making one sends nothing.
///
/// Of the acquire forms every kind shares, a latch has [`wait`](CountDownLatch::wait)
/// and [`try_wait_for(wait)`](CountDownLatch::try_wait_for) (a zero wait reads the count
/// once, the `try_wait` form). A wait takes nothing, so there is no guard, no lease and
/// no `_with_lease` form.
///
/// In a cluster, a name whose braces put the channel in another hash slot than the key
/// (`{a}b`, `a{b}c`: the channel's hash tag is then not the key's) would fail in every
/// script; each call refuses it with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
/// before anything is sent. A name without braces is always fine.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// let ready = client.count_down_latch("workers:ready");
/// ready.try_set_count(4).await?;      // once, by whoever starts the round
/// // ... each of 4 workers, when it is ready:
/// ready.count_down().await?;
/// // ... and whoever needs all 4:
/// if ready.try_wait_for(std::time::Duration::from_secs(30)).await? {
///     // all 4 are ready
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    shared: Arc<LatchShared>,
}

/// What the clones of one latch handle share.
struct LatchShared {
    client: Arc<ClientShared>,
    /// The latch key as given (with the client's prefix), for errors and `Debug`: the
    /// names' own copy when the name is valid (one allocation per handle, not two).
    key: Arc<str>,
    /// The names, or why they are refused (an empty name; in a cluster, a name whose
    /// channel is in another slot): reported by every call, nothing sent.
    names: std::result::Result<LatchNames, String>,
    recheck: Duration,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("key", &crate::debug::Bounded(&self.shared.key))
            .field("recheck", &self.shared.recheck)
            .finish()
    }
}

impl CountDownLatch {
    /// How often a waiting latch reads the count even when no message came, by default:
    /// Redisson publishes nothing when the key expires or is evicted, and a message can
    /// be lost; this bounds how late a wait returns then.
    /// [`with_recheck`](CountDownLatch::with_recheck) sets another interval.
    pub const DEFAULT_RECHECK: Duration = Duration::from_secs(1);

    pub(crate) fn new(client: Arc<ClientShared>, key: &str) -> Self {
        let clustered = fred::prelude::ClientLike::is_clustered(client.store.client());
        let names = match LatchNames::new(key) {
            Err(_) => Err("a latch name must not be empty".to_owned()),
            Ok(names) => match clustered.then(|| names.cluster_slot_problem()).flatten() {
                Some(problem) => Err(problem),
                None => Ok(names),
            },
        };
        let key = names.as_ref().map_or_else(|_| Arc::from(key), |names| names.key_arc().clone());
        let shared = LatchShared { client, key, names, recheck: CountDownLatch::DEFAULT_RECHECK };
        CountDownLatch { shared: Arc::new(shared) }
    }

    /// The same latch, whose waits read the count again every `every` when no message
    /// came (default [`CountDownLatch::DEFAULT_RECHECK`]). A shorter interval finds an expired or
    /// evicted latch, or a lost message, sooner, for one `GET` per interval per waiting
    /// client. A zero or sub-millisecond interval, or one over a year, fails every wait
    /// with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    #[must_use]
    pub fn with_recheck(&self, every: Duration) -> CountDownLatch {
        let shared = &self.shared;
        let copy = LatchShared {
            client: shared.client.clone(),
            key: shared.key.clone(),
            names: shared.names.clone(),
            recheck: every,
        };
        CountDownLatch { shared: Arc::new(copy) }
    }

    /// The latch's Redis key (the name with the client's key prefix, if any).
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The latch's channel, `redisson_countdownlatch__channel__{NAME}` (empty for an
    /// empty name).
    pub fn channel(&self) -> &str {
        self.shared.names.as_ref().map_or("", LatchNames::channel)
    }

    fn names(&self) -> Result<&LatchNames> {
        self.shared.names.as_ref().map_err(|message| Error::invalid_argument(message.clone()).with_key(self.key()))
    }

    /// Sets the count to `count` if no latch exists (none was set, or it was counted
    /// down to zero, deleted or expired), and publishes `1`, as Redisson's
    /// `trySetCount`: `false` when a latch exists (its count is left as it is: a live
    /// latch is never reset). The key has no expiry.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), nothing sent:
    /// a count of 0 (Redisson accepts it and stores `0`, an open latch that still blocks
    /// every later `trySetCount` until deleted; refused here), a count over `i64::MAX`
    /// (Redis integers), a refused name. [`ErrorKind::WrongType`](crate::ErrorKind::WrongType)
    /// when the key holds another type (nothing written); connection errors, timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the script runs whether or not the future is polled again.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        let names = self.names()?;
        self.shared.client.store.latch_try_set_count(names, count).await
    }

    /// Counts the latch down by one; the count down that reaches zero deletes the key
    /// and publishes `0`, which wakes every waiter. Returns the count left (0 when it
    /// reached zero, and when there is no latch: nothing is written then, as with
    /// Redisson).
    ///
    /// # Errors
    /// A refused name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the
    /// key holds another type or a String that is not an integer (nothing written);
    /// connection errors and timeouts (a count down that timed out may have counted:
    /// it is never sent twice).
    ///
    /// # Cancel safety
    /// Once sent, the count down happens whether or not the future is polled again.
    pub async fn count_down(&self) -> Result<u64> {
        let names = self.names()?;
        self.shared.client.store.latch_count_down(names).await
    }

    /// The count now: 0 when there is no latch (never set, counted down, deleted,
    /// expired); a count a Java client set below zero reads as 0 too.
    ///
    /// # Errors
    /// A refused name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the
    /// key holds another type or a String that is not an integer; connection errors and
    /// timeouts.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn count(&self) -> Result<u64> {
        let names = self.names()?;
        self.shared.client.store.latch_count(names).await
    }

    /// Deletes the latch whatever its count, and wakes every waiter (they return: a
    /// missing latch is open). `true` if there was a latch. It publishes `1`, as
    /// Redisson's `delete` does, then `0`, on which Redisson's waiters return too
    /// (Redisson's `1` alone leaves an untimed Java `await` hanging).
    ///
    /// # Errors
    /// A refused name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the
    /// key holds another type (nothing deleted); connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, the delete happens whether or not the future is polled again.
    pub async fn delete(&self) -> Result<bool> {
        let names = self.names()?;
        self.shared.client.store.latch_delete(names).await
    }

    /// Waits as long as it takes for the latch to open: the count is zero or the key is
    /// gone. One `GET` when it is open already; otherwise it subscribes to the channel,
    /// reads the count again, and then again on every message and every recheck
    /// interval.
    ///
    /// # Errors
    /// A refused name or recheck interval (nothing sent);
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key holds another
    /// type; [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the client is shut
    /// down. Transient errors (a reconnect, a timeout) are retried with a back-off while
    /// it waits.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves the local line and writes nothing.
    pub async fn wait(&self) -> Result<()> {
        let opened = self.wait_until(None).await?;
        debug_assert!(opened, "an unbounded wait returns only when open");
        Ok(())
    }

    /// Waits at most `wait` for the latch to open: `true` when it did (the count is
    /// zero or the key is gone), `false` when the time ran out. A zero wait reads the
    /// count once. The bound holds whatever the server does (frozen, unreachable) and
    /// whatever the command timeout: a read still in flight at the deadline is dropped.
    ///
    /// # Errors
    /// As [`CountDownLatch::wait`]; a wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument). When the last
    /// read before the deadline failed with a transient error, that error.
    ///
    /// # Cancel safety
    /// As [`CountDownLatch::wait`].
    pub async fn try_wait_for(&self, wait: Duration) -> Result<bool> {
        let deadline = args::wait_deadline(Instant::now(), wait)?;
        self.wait_until(Some(deadline)).await
    }

    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let names = self.names()?;
        let recheck = self.shared.recheck;
        args::lease_millis(recheck, "a latch's recheck interval")?;
        let client = &self.shared.client;
        let env = client.wait_env();
        let attempt = LatchAttempt::new(client, names, recheck);
        let mut run = crate::wait::AcquireRun::default();
        Ok(crate::wait::wait_for(&attempt, &env, deadline, &mut run).await?.is_some())
    }
}

/// One wait of a latch: each attempt reads the count; "acquired" means open.
struct LatchAttempt<'a> {
    client: &'a ClientShared,
    names: &'a LatchNames,
    recheck: Duration,
    plan: WaitPlan,
}

impl<'a> LatchAttempt<'a> {
    fn new(client: &'a ClientShared, names: &'a LatchNames, recheck: Duration) -> Self {
        let plan = WaitPlan {
            key: names.key_arc().clone(),
            channel: names.channel_arc().clone(),
            channel_kind: WaitChannel::Latch,
            queue: QueueKind::Local,
            keepalive: Duration::ZERO,
            kind: Kind::Latch,
            grants: None,
            permits: None,
        };
        LatchAttempt { client, names, recheck, plan }
    }
}

impl Attempt for LatchAttempt<'_> {
    type Acquired = ();

    fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    /// Never asked: a latch has no server queue ([`QueueKind::Local`]).
    fn server_queue(&self) -> ServerQueue {
        ServerQueue { channel: self.plan.channel.clone(), owner: Arc::from("") }
    }

    async fn attempt(&self, waiting: bool) -> Result<std::result::Result<(), NotAcquired>> {
        if self.client.store.latch_count(self.names).await? == 0 {
            if waiting {
                // Found open, perhaps without a message (an expiry, a lost message): the
                // other local waiters read the count now rather than at their turn.
                self.client.subscriber.wake_channel(self.names.channel());
            }
            return Ok(Ok(()));
        }
        // Read again after the recheck interval (the first in line keeps this timer).
        Ok(Err(NotAcquired { pttl: Some(self.recheck), position: None, ticket: None }))
    }

    /// An open latch excludes nobody: the next in line reads the count at once.
    fn held_until(_: &()) -> Instant {
        Instant::now()
    }

    /// Always: a latch wait never lines up behind local waiters for its first read
    /// (there is no order to keep among them).
    fn holds_already(&self) -> bool {
        true
    }

    // No queue place: the trait's default clean-up (nothing to remove).
}
