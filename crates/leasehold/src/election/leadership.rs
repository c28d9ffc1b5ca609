//! [`Leadership`]: the guard of one lead, with its term.

use std::sync::Arc;

use fred::bytes::Bytes;
use lock_core::{Error, ErrorKind, Result};

use crate::lock::guard::LockGuard;
use crate::lock::hold::Ended;

/// This candidate leads: the guard [`Election::campaign`](crate::Election::campaign)
/// returns. The lead is renewed (every third of the election's lease) while the guard
/// lives.
///
/// - [`Leadership::term`]: a fencing token, larger than every earlier leader's term of
///   this election. Hand it to what the leader writes, so that a deposed leader's late
///   write is refused there ([`crate::fence`]).
/// - [`Leadership::lost`] / [`Leadership::is_lost`]: the lead ended without
///   [`Leadership::resign`]: a renewal found it gone (forced, expired, the server lost
///   it), renewals failed until the lease ran out, or the lease deadline passed (a
///   process paused past its lease learns it on resume: the local deadline is counted
///   from before the campaign was sent, so it is never later than the server's).
///   Stop leading at once.
/// - [`Leadership::resign`] hands the lead over now: the first waiting candidate is
///   woken and leads within a few round trips. Dropping the guard resigns too, in the
///   background (never blocking in `Drop`); so does
///   [`Client::shutdown`](crate::Client::shutdown).
#[must_use = "dropping the leadership resigns (in the background)"]
#[clippy::has_significant_drop]
pub struct Leadership {
    guard: LockGuard,
    term: u64,
    /// What followers see: the campaign's value, then each proclaimed one.
    value: Arc<parking_lot::Mutex<String>>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("term", &self.term)
            .field("value", &crate::debug::Bounded(&self.value.lock()))
            .field("guard", &self.guard)
            .finish()
    }
}

impl Leadership {
    pub(crate) fn new(guard: LockGuard, value: String) -> Result<Self> {
        match guard.token() {
            Some(term) => {
                let value = Arc::new(parking_lot::Mutex::new(value));
                Ok(Leadership { guard, term, value })
            }
            // election_acquire.lua always answers a term; a reply without one is
            // refused (the guard is dropped, which resigns in the background).
            None => Err(Error::new(ErrorKind::Redis, "a campaign answered no term").with_key(guard.key())),
        }
    }

    /// This lead's term: larger than every term issued before for this election (a
    /// fencing token: `docs/architecture/election.md` says what it guarantees).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// What followers see of this leader: the campaign's value, or the last one
    /// [`Leadership::proclaim`] recorded.
    pub fn value(&self) -> String {
        self.value.lock().clone()
    }

    /// The lead's Redis key, `leasehold_election:{NAME}`.
    pub fn key(&self) -> &str {
        self.guard.key()
    }

    /// The leading candidate's owner id, `CLIENT_UUID:N`.
    pub fn owner(&self) -> &str {
        self.guard.owner()
    }

    /// `true` once the lead is known lost (see [`Leadership`]); checks the local lease
    /// deadline too, so a process that was paused past its lease sees `true` on resume.
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Resolves when the lead is lost (see [`Leadership`]). Never resolves while the
    /// lead is held and renewed, nor after [`Leadership::resign`] (which consumes it).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.guard.lost().await;
    }

    /// The local lease deadline (monotonic clock): the server's expiry of the lead is
    /// never earlier. Renewals move it forward.
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.guard.lease_deadline()
    }

    /// Changes what followers see of this leader, keeping the lead and its term: the
    /// leader record gets `value` and the followers are told (one round trip), only
    /// while this candidate still leads in this term.
    ///
    /// # Errors
    /// - [`ErrorKind::LockLost`] when the lead is known lost (nothing sent), or the
    ///   server says this candidate no longer leads in this term (nothing written; the
    ///   leadership is then lost: [`Leadership::lost`] resolves).
    /// - [`ErrorKind::InvalidArgument`] for a value over 1 MiB (nothing sent).
    /// - Timeouts and connection errors (the value may or may not be recorded: proclaim
    ///   again).
    ///
    /// # Cancel safety
    /// Once sent, it applies whether or not the future is polled again.
    pub async fn proclaim(&self, value: impl Into<String>) -> Result<()> {
        self.proclaim_owned(value.into()).await
    }

    /// [`Leadership::proclaim`] as a future that owns what it needs (for the blocking
    /// API, which runs it on its runtime thread).
    pub(crate) fn proclaim_owned(
        &self,
        value: String,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        let shared = self.guard.shared().clone();
        let lease = self.guard.lease_state().clone();
        let (term, cell) = (self.term, self.value.clone());
        async move {
            lock_core::election::check_value(value.as_bytes())?;
            let names = shared.names()?;
            if lease.is_lost() {
                return Err(Error::new(ErrorKind::LockLost, "the lead was lost before proclaim").with_key(names.key()));
            }
            let bytes = Bytes::from(value.clone());
            let store = &shared.client.store;
            let recorded = store.election_proclaim(names, &shared.owner, term, &bytes).await?;
            if !recorded {
                // The server says this candidate does not lead in this term: the lead
                // ended without a resign, which its guard reports as lost.
                let _turn = shared.holds.turn().await;
                if !lease.is_lost() {
                    shared.holds.server_holds_nothing(None, Ended::Found);
                }
                return Err(Error::new(ErrorKind::LockLost, "this candidate no longer leads: nothing proclaimed")
                    .with_key(names.key()));
            }
            if let Some(election) = &shared.election {
                *election.value.lock() = bytes;
            }
            *cell.lock() = value;
            Ok(())
        }
    }

    /// Hands the lead over now: the lead and the leader record are deleted, followers
    /// are told nobody leads, and the first waiting candidate is woken to lead (within a
    /// few round trips). Renewal stops before anything is sent.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`]: [`ErrorKind::LockLost`] or [`ErrorKind::NotOwner`] when
    /// the lead had already ended (nothing to hand over); timeouts and connection errors
    /// after retries (the lead then expires with its lease);
    /// [`ErrorKind::Shutdown`] after [`Client::shutdown`](crate::Client::shutdown) (which
    /// resigned already).
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`]: the guard is consumed, renewal stops at once, a resign
    /// already sent applies.
    pub async fn resign(self) -> Result<()> {
        self.guard.unlock().await
    }
}

#[cfg(feature = "blocking")]
impl Leadership {
    /// [`Leadership::lost`] as a future owning what it watches (for the blocking API).
    pub(crate) fn lost_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.guard.lost_owned()
    }
}
