//! [`ClientStats`]: one snapshot of what a client did and holds, always available.

/// What a [`Client`](crate::Client) did since it was made (cumulative counters) and what
/// it holds now (gauges), read by [`Client::stats`](crate::Client::stats). Counters of
/// every lock kind made from the client ([`Lock`](crate::Lock),
/// [`FencedLock`](crate::FencedLock), [`FairLock`](crate::FairLock),
/// [`SimpleLock`](crate::SimpleLock)), shared by all its clones. Each field is read on
/// its own (relaxed atomics), so a snapshot taken while locks are busy need not add up
/// exactly. `docs/observability.md` has the same list with the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Acquires that returned a guard (fresh holds and re-entries).
    pub acquired: u64,
    /// Acquires that had to wait: the first attempt did not get the lock (or a local
    /// waiter was ahead) and the call had time left, so it queued.
    pub waited: u64,
    /// Acquires with a wait that ran out without the lock (`try_lock_for`,
    /// `try_lock_with` with a non-zero wait).
    pub timed_out: u64,
    /// Single attempts (`try_lock`, or a zero wait) that found the lock held.
    pub busy: u64,
    /// Holds lost while held, each counted once and by the time its guards' `lost()`
    /// resolves: a renewal or the check after a reconnect found the owner gone, or a
    /// renewed hold's lease ran out on the local clock before a renewal succeeded (they
    /// failed, or went unanswered: a partition). Moves with the `leasehold.lost` event.
    pub lost: u64,
    /// Holds renewed by the watchdog (one per hold and renewal, not per call).
    pub renewals: u64,
    /// Attempts a waiting acquire made after it had queued: woken by a release message,
    /// its turn in line, or its timer (the holder's TTL, a back-off, a queue refresh).
    pub wake_ups: u64,
    /// Semaphore waits that found their semaphore missing (no count key: never set,
    /// flushed, or lost in a restart without persistence) after waiting
    /// [`Semaphore::MISSING_WARN_AFTER`](crate::Semaphore::MISSING_WARN_AFTER); each also
    /// logged one WARN. Such a wait goes on until someone sets or releases permits.
    pub missing_semaphore_waits: u64,
    /// Guards alive now (not yet unlocked, dropped or detached), every kind.
    pub held: usize,
    /// Acquires waiting now (queued, past their first attempt).
    pub waiters: usize,
    /// Holds the watchdog renews now.
    pub watchdog_locks: usize,
    /// The watchdog's own counters in detail (rounds, renewal calls and their failures,
    /// checks after reconnects, topology changes); `lost`, `renewals` and
    /// `watchdog_locks` above are read from the same snapshot.
    pub watchdog: lock_watchdog::WatchdogStats,
    /// The waiting side's counters (subscribe and unsubscribe calls, release messages,
    /// wake-alls after messages may have been lost).
    pub subscriber: lock_pubsub::SubscriberStats,
}
