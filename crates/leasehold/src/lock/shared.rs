//! [`LockShared`]: what a lock handle and its guards share (the client, the names, the
//! owner and its holds), and the calls that set the owner's count on the server. The
//! guard (`guard.rs`), the acquire path (`attempt.rs`) and the fronts import it from
//! here; it imports none of them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, LockKind, LockNames, OwnerId, Result};

use crate::client::shared::ClientShared;
use crate::lock::hold::OwnerHolds;
use crate::lock::retry::ReplaySafeRetry;

/// What a lock handle and its guards share: the client, the names, the owner and its
/// holds.
pub(crate) struct LockShared {
    pub(crate) client: Arc<ClientShared>,
    /// `Err` text when the name was invalid; reported by every operation.
    pub(crate) names: std::result::Result<LockNames, String>,
    pub(crate) owner: OwnerId,
    pub(crate) holds: OwnerHolds,
    /// The lock's kind: which scripts its acquires, releases, undos, wait clean-ups and
    /// force-releases run, whether its holds carry tokens, and how its waiters wait
    /// ([`LockKind::Reentrant`] for a [`Lock`], [`LockKind::Fenced`] for a
    /// [`FencedLock`](crate::FencedLock), [`LockKind::Fair`] for a
    /// [`FairLock`](crate::FairLock)). Every branch point asks it.
    pub(crate) kind: LockKind,
    /// The owner's waits that hold a place in a server queue (plain and fair locks), not
    /// yet ended: counted from before a wait's first call to the start of its clean-up.
    /// A clean-up (of a wait that ended, was cancelled, or of an acquire whose outcome is
    /// unknown) that finds, under the owner's turn, another such wait still live sends
    /// nothing: that wait's next call sets the owner's absolute hold count anyway, and
    /// its own end cleans up; removing the queue entry would take that wait's place.
    pub(crate) queued_waits: AtomicUsize,
    /// A leader election's candidate ([`LockKind::Election`]): its own lease, renewed by
    /// its own watchdog, and the value its next campaign proclaims. `None` for a lock.
    pub(crate) election: Option<ElectionHold>,
}

/// What sets an election candidate's lock apart from a lock's: a lease of its own
/// (shorter than the client's watchdog timeout: failover is bounded by it), renewed every
/// third of it by a watchdog of that lease (`election/watchdogs.rs`), and the value the
/// campaign script records with the lead.
pub(crate) struct ElectionHold {
    pub(crate) lease: Duration,
    pub(crate) watchdog: Arc<lock_watchdog::Watchdog>,
    pub(crate) value: parking_lot::Mutex<fred::bytes::Bytes>,
}

impl LockShared {
    /// The lock kind, for spans and metrics.
    pub(crate) fn telemetry_kind(&self) -> crate::telemetry::Kind {
        crate::telemetry::Kind::of(&self.kind)
    }

    /// How the watchdog renews this kind's holds: a read hold's own timeout keys with
    /// the Hash, every other kind's owner field's key.
    pub(crate) fn renew_spec(&self, names: &LockNames) -> lock_watchdog::RenewSpec {
        match self.kind {
            LockKind::Read { .. } => lock_watchdog::RenewSpec::ReadHold {
                timeout_prefix: Arc::from(names.rw_timeout_prefix(self.owner.as_str())),
            },
            _ => lock_watchdog::RenewSpec::Field,
        }
    }

    /// Whether a wait of this owner that holds a place in the server's queue is live
    /// (see [`LockShared::queued_waits`]). Read under the owner's turn.
    pub(crate) fn has_live_queued_wait(&self) -> bool {
        self.queued_waits.load(Ordering::Acquire) > 0
    }

    /// The life of a queue entry without a refresh (fair and server-queued waits), as
    /// the kind sends it to its scripts: the client's, or an election's own (its lease:
    /// a candidate that died while waiting delays a hand-over by at most one lease).
    pub(crate) fn queue_keepalive(&self) -> Duration {
        self.kind.queue_keepalive_ms().map_or(self.client.fair_keepalive, Duration::from_millis)
    }

    /// The watchdog that renews this owner's watchdog-mode holds: the client's, or an
    /// election's own.
    pub(crate) fn watchdog(&self) -> &lock_watchdog::Watchdog {
        self.election.as_ref().map_or(&self.client.watchdog, |election| &election.watchdog)
    }

    /// The lease of a watchdog-mode hold: the client's watchdog timeout, or an
    /// election's lease.
    pub(crate) fn watchdog_lease(&self) -> Duration {
        self.election.as_ref().map_or(self.client.config.watchdog_timeout, |election| election.lease)
    }

    /// [`LockShared::watchdog_lease`] in whole milliseconds (both validated at build).
    pub(crate) fn watchdog_lease_ms(&self) -> u64 {
        match &self.election {
            Some(election) => u64::try_from(election.lease.as_millis()).unwrap_or(u64::MAX),
            None => self.client.watchdog_lease_ms,
        }
    }

    /// The lock's Redis key (empty when the name was: the only invalid name).
    pub(crate) fn key(&self) -> &str {
        self.names.as_ref().map_or("", LockNames::key)
    }

    pub(crate) fn names(&self) -> Result<&LockNames> {
        self.names.as_ref().map_err(|message| Error::invalid_argument(message.clone()))
    }

    /// Sets the owner's hold count on the server to `target`, with the kind's release
    /// (`release.lua`, or `fair_release.lua` for a fair lock, which also removes the
    /// owner's queue entry and tells the queue head). With `leave_queue`, a plain lock's
    /// release also removes the owner's entry from the lock's wait queue (the kinds
    /// without one ignore it). Every release, undo and wait clean-up goes
    /// through here; the caller holds the owner's turn.
    ///
    /// While the owner's minimum hold lasts (`LockGuard::unlock_after`), a `target` of 0
    /// keeps the key for the time left instead (`release_after.lua`, measured as each
    /// send's arguments are built), whichever guard, undo or clean-up sends it: a retry
    /// measures again to the same end, and no later release of the same owner (a re-entry of
    /// the kept key, the undo of an acquire whose reply was lost) ends it early. When
    /// the owner's field is gone (`NotOwner`) and the queue entry must go, the ordinary
    /// release follows, to remove it.
    pub(crate) async fn set_holds(
        &self,
        names: &LockNames,
        target: u64,
        need_ms: u64,
        leave_queue: bool,
    ) -> Result<lock_core::Release> {
        let store = &self.client.store;
        if target == 0 {
            if let Some(until) = self.holds.kept_until(tokio::time::Instant::now()) {
                let kept = store.release_after(&self.kind, names, &self.owner, until).await?;
                if kept == lock_core::Release::Released || !leave_queue {
                    return Ok(kept);
                }
            }
        }
        store.release(&self.kind, names, &self.owner, target, need_ms, leave_queue).await
    }

    /// Sets the owner's count back to what it accounts for (no TTL raised) and, when the
    /// server answers that the owner holds nothing, ends its local hold: the undo of an
    /// acquire whose outcome nobody will use, and the clean-up of a fair wait. The caller
    /// holds the owner's turn.
    pub(crate) async fn reset_holds(&self, names: &LockNames) -> Result<lock_core::Release> {
        let result = self.set_holds(names, self.holds.accounted(), 0, true).await?;
        if result == lock_core::Release::Released {
            self.holds.server_holds_nothing(None, crate::lock::hold::Ended::Found);
        }
        Ok(result)
    }
}

/// The queue keep-alive of `client`'s locks in whole milliseconds (validated at build
/// time: 1 ms to a year).
pub(crate) fn keepalive_ms(client: &ClientShared) -> u64 {
    u64::try_from(client.fair_keepalive.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Sets the owner's count on the server back to what its live guards account for, in the
/// background on the current runtime (nothing is sent if there is none): the undo of an
/// abandoned acquire, and the clean-up of a cancelled fair wait (whose queue entry
/// `fair_release.lua` removes at the same time).
///
/// It takes the owner's next turn, so it runs after the acquire it undoes (same
/// connection, sent later). The count it sends gives back the abandoned hold if it was
/// taken and changes nothing if not; a retry sets the same count again, and retries are
/// bounded by the replay window.
pub(crate) fn spawn_set_holds(lock: Arc<LockShared>, names: LockNames, done: &'static str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    // Counted until it ends: a `Client::shutdown` that begins meanwhile waits for it
    // (bounded) before it closes the connection, so a wait cancelled just before the
    // shutdown (a CLI's campaign at Ctrl-C) still leaves its queue.
    let counted = lock.client.stopping.enter();
    drop(runtime.spawn(async move {
        let _counted = counted;
        let mut retry = ReplaySafeRetry::new();
        loop {
            let turn = lock.holds.turn().await;
            if lock.has_live_queued_wait() {
                // A live wait of this owner sets its absolute count with its next call
                // and cleans up at its own end; leaving the queue now would take its
                // place (a wait restarted at once after a cancelled one, or a refresh
                // whose reply was lost while the wait goes on).
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    lock = %names.key(),
                    "{done}: left to the owner's live wait",
                );
                return;
            }
            retry.sending();
            match lock.reset_holds(&names).await {
                Ok(result) => {
                    tracing::debug!(target: crate::telemetry::TARGET, lock = %names.key(), ?result, "{done}");
                    return;
                }
                Err(error) => {
                    drop(turn);
                    let Some(backoff) = retry.after(&error, &lock.client.config) else {
                        tracing::warn!(
                            target: crate::telemetry::TARGET,
                            lock = %names.key(),
                            %error,
                            "could not set the owner's holds back; its lease (and queue entry) will expire",
                        );
                        return;
                    };
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }));
}

/// A lock owner's holds, for [`Client::shutdown`](crate::Client::shutdown).
impl crate::client::live::LiveHold for LockShared {
    /// Sets the owner's hold count to 0, in its turn, if it holds the lock as far as it
    /// knows. A retry is never needed for safety: a release that did not land leaves the
    /// lock to expire with its lease (the watchdog is stopped next).
    fn release(&self) -> crate::client::live::BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let _turn = self.holds.turn().await;
            if !self.holds.has_current() {
                return Ok(());
            }
            let names = self.names()?;
            self.set_holds(names, 0, 0, false).await.map(drop)
        })
    }

    /// Every hold of the owner ends: its guards report lost, renewal and tracking stop.
    fn end_locally(&self) {
        self.holds.server_holds_nothing(None, crate::lock::hold::Ended::Locally);
    }
}
