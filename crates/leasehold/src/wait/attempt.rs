//! What the wait engine waits for: an [`Attempt`] (one try, the plan of the wait, and
//! the clean-up of its queue place), whatever takes it (a lock today; a semaphore
//! permit or a latch later, none of which needs a `LockShared`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{QueueKind, Result, WaitChannel};
use tokio::time::Instant;

use crate::telemetry::Kind;

/// Why an attempt did not acquire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NotAcquired {
    /// When to try again unprompted (see [`lock_core::Acquire::Held`]).
    pub(crate) pttl: Option<Duration>,
    /// The owner's place in the server's wait queue, for a queued call.
    pub(crate) position: Option<u64>,
    /// A waiting reader's call: its ticket (the owner's turn number it sent, which its
    /// registration keeps and a grant names back) and when it was sent.
    pub(crate) ticket: Option<(u64, Instant)>,
}

/// How one wait waits: what it is for, where it hears a release, and what orders it.
/// Made once per call by [`Attempt::plan`].
#[derive(Debug, Clone)]
pub(crate) struct WaitPlan {
    /// The key waited for (its local line, in spans and metrics).
    pub(crate) key: Arc<str>,
    /// The channel a release is heard on.
    pub(crate) channel: Arc<str>,
    /// Whether that channel is the lock's, shared by every waiter, or this waiter's own.
    pub(crate) channel_kind: WaitChannel,
    /// What orders the waiters.
    pub(crate) queue: QueueKind,
    /// The life of a queue entry without a refresh ([`QueueKind::Server`] and
    /// [`QueueKind::Fair`]): a queued wait attempts again at least every third of it.
    pub(crate) keepalive: Duration,
    /// The kind, for spans and metrics.
    pub(crate) kind: Kind,
    /// A read/write lock's grant channel (`leasehold_rwlock__grants:{NAME}`), subscribed
    /// with its channel by its readers and writers; `None` for other kinds.
    pub(crate) grants: Option<Arc<str>>,
    /// A semaphore's waiter: the permits it waits for. Its line is on a channel of
    /// counts (`redisson_sc:{NAME}`), which wakes as many waiters as the count covers
    /// ([`lock_pubsub::Subscriber::register_permits`]). `None` for a lock's waiter.
    pub(crate) permits: Option<u64>,
}

impl WaitPlan {
    /// Whether the waiter holds a place in a queue on the server (which its clean-up
    /// must remove unless it acquired, and its attempts must keep alive).
    pub(crate) fn is_queued(&self) -> bool {
        !matches!(self.queue, QueueKind::Local | QueueKind::Shared)
    }
}

/// The names a waiter in a server queue ([`QueueKind::Server`]) registers with: the
/// queue's channel and the owner its messages name. Asked for only when the wait goes
/// past its fast path.
#[derive(Debug, Clone)]
pub(crate) struct ServerQueue {
    /// The queue channel, `leasehold_lock__queue:{NAME}`.
    pub(crate) channel: Arc<str>,
    /// The owner field the queue holds.
    pub(crate) owner: Arc<str>,
}

/// One thing a wait can take, tried as often as the wait engine decides.
///
/// The engine owns the waiting (the fast path, the local line and its turns, timers on
/// the holder's TTL and on the queue keep-alive, back-off after transient errors, the
/// deadline); the attempt owns what is tried and what a queue place costs to give up.
pub(crate) trait Attempt: Sync {
    /// What a successful attempt hands out (a guard).
    type Acquired: Send;

    /// How this wait waits.
    fn plan(&self) -> &WaitPlan;

    /// The names of the server queue ([`QueueKind::Server`] only).
    fn server_queue(&self) -> ServerQueue;

    /// One attempt. `waiting`: part of a wait (queue up or refresh the queue entry, flag
    /// the holder), not a single try. `Ok(Err(..))`: not acquired.
    ///
    /// Cancel safety: dropping the future must leave nothing behind that the attempt
    /// does not give back itself (a lock's attempt undoes a hold it may have taken).
    fn attempt(
        &self,
        waiting: bool,
    ) -> impl Future<Output = Result<std::result::Result<Self::Acquired, NotAcquired>>> + Send;

    /// What a grant message handed this wait (a semaphore's queued waiter, whose
    /// permits a release took for it in Redis): the acquired hold, without a call.
    /// `None` (the default) for a kind whose hand-over is claimed by an attempt.
    fn granted(&self) -> Option<Self::Acquired> {
        None
    }

    /// The lease end of what an attempt acquired: the next local waiter in line waits
    /// for the release until about then instead of trying at once.
    fn held_until(acquired: &Self::Acquired) -> Instant;

    /// Whether the owner holds already: its re-entry never queues behind local waiters
    /// who are waiting for it.
    fn holds_already(&self) -> bool;

    /// Takes over a hold the server granted this waiter ([`QueueKind::Readers`]: a
    /// write release granted the registered reader its read hold, and a grant message
    /// named it), without a call to the server. `None` when the grant is not this
    /// wait's to take (another call of the owner registered later, or this wait's
    /// later call was refused: the grant was gone by then) or the owner's holds
    /// changed: the wait then makes an attempt, which finds out. Default: never.
    fn claim(&self, grant: lock_pubsub::Grant) -> impl Future<Output = Option<Self::Acquired>> + Send {
        let _ = grant;
        std::future::ready(None)
    }

    /// A wait that holds a place in a server queue begins; it counts until
    /// [`Attempt::queue_left`], so that no clean-up of the same owner removes the place
    /// under it. The default, for a kind that holds no queue place (a semaphore, a
    /// latch), counts nothing.
    fn queue_entered(&self) {}

    /// That wait ended (acquired) or its clean-up begins. Default: nothing to count.
    fn queue_left(&self) {}

    /// Removes the wait's queue entry now (the wait ended without acquiring), unless
    /// another live wait of the same owner keeps it. `true` when nothing is left to
    /// clean up; `false` sends the clean-up to [`Attempt::leave_in_background`]. The
    /// default, for a kind without a queue entry, has nothing to remove.
    fn leave(&self) -> impl Future<Output = bool> + Send {
        std::future::ready(true)
    }

    /// [`Attempt::leave`] in the background: for a wait that was cancelled, or whose
    /// inline clean-up failed. Synchronous, never blocks (it runs in `Drop`). Default:
    /// nothing to remove.
    fn leave_in_background(&self) {}
}
