//! [`Election`]: one candidate of an election, and the followers' reads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::bytes::Bytes;
use lock_core::{Error, ErrorKind, LockKind, Result};

use crate::client::shared::ClientShared;
use crate::election::config::ElectionConfig;
use crate::election::leadership::Leadership;
use crate::election::observe::Observer;
use crate::election::Leader;
use crate::lock::hold::LeaseMode;
use crate::lock::shared::ElectionHold;
use crate::lock::Lock;

/// One candidate of the leader election `NAME`
/// ([`Client::election`](crate::Client::election)), and a follower's view of it.
///
/// The handle *is* the candidate, as a [`Lock`] handle is the owner: each
/// `client.election(name)` call makes a new owner id, and two handles on one name, in
/// this process or any other, never lead at once. [`Election::campaign`] waits until
/// this candidate leads and returns its [`Leadership`]; candidates that wait are served
/// in arrival order (the lead's wait queue on the server), and the next one leads within
/// a few round trips of a [`Leadership::resign`], or when the leader's lease expires
/// after it crashed ([`ElectionConfig::lease`], default 10 s, renewed every third of it
/// while the leadership lives).
///
/// Followers (any handle; no campaign needed) read the leader with
/// [`Election::leader`] and follow every change with [`Election::observe`].
///
/// Every key and channel of an election is leasehold's own (Redisson has no election):
/// the lead `leasehold_election:{NAME}` (a lock Hash), its term counter, its leader
/// record and its change channel, all in `NAME`'s cluster slot
/// (`docs/architecture/election.md`).
///
/// Not `Clone`, as [`Lock`]: a clone would be the same candidate. Share one candidate
/// between tasks with an `Arc` (one campaigns, others observe or read the leader). A
/// candidate runs one campaign at a time and leads once: a campaign while another of
/// the same candidate is in flight, or while it leads, is refused
/// ([`ErrorKind::InvalidArgument`], nothing sent), so two tasks never both hold a
/// [`Leadership`] of one candidate. Tasks that compete for the lead each make their own
/// candidate.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// let election = client.election("billing-scheduler");
/// let leadership = election.campaign("host-a:8080").await?;
/// let term = leadership.term(); // hand it to what the leader writes, as a fence
/// tokio::select! {
///     () = leadership.lost() => eprintln!("no longer the leader: stop at once"),
///     () = async { /* the leader's work, writing with `term` */ } => {}
/// }
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
pub struct Election {
    pub(crate) lock: Lock,
    name: String,
    config: ElectionConfig,
    /// The config's error, reported by every operation (nothing sent).
    invalid: Option<String>,
    /// A campaign of this candidate is in flight (from its checks until it returns or
    /// is dropped): a second one is refused, so that two tasks sharing the candidate
    /// never re-enter one lead as two leaderships.
    campaigning: AtomicBool,
}

/// One campaign's claim on its candidate ([`Election::campaigning`]), given back when
/// the campaign returns or its future is dropped.
struct Campaigning<'a>(&'a AtomicBool);

impl Drop for Campaigning<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &crate::debug::Bounded(&self.name))
            .field("owner", &self.lock.owner())
            .field("lease", &self.config.lease)
            .field("leading", &self.lock.shared.holds.has_current())
            .finish()
    }
}

impl Election {
    /// A new candidate of the election `name` (the full name, any client prefix
    /// included), with `config`. Starts the watchdog of the config's lease on the
    /// client's runtime if none runs yet.
    pub(crate) fn new(client: Arc<ClientShared>, name: &str, config: ElectionConfig) -> Self {
        let (lease_ms, invalid) = match config.validate() {
            Ok(ms) => (ms, None),
            Err(error) => {
                (u64::try_from(ElectionConfig::DEFAULT_LEASE.as_millis()).unwrap_or(10_000), Some(error.to_string()))
            }
        };
        // Whole milliseconds, as the server's TTL and the watchdog's renewals have it.
        let lease = Duration::from_millis(lease_ms);
        let watchdog = {
            let _runtime = client.runtime.enter();
            client.election_watchdogs.for_lease(lease, &client.store, &client.watchdog, &client.telemetry)
        };
        let kind = LockKind::Election { counter_ttl_ms: client.fence_token_ttl_ms, queue_keepalive_ms: lease_ms };
        let hold = ElectionHold { lease, watchdog, value: parking_lot::Mutex::new(Bytes::new()) };
        let key = if name.is_empty() { String::new() } else { lock_core::names::election_key(name) };
        let lock = Lock::for_election(client, &key, kind, hold);
        Election { lock, name: name.to_owned(), config, invalid, campaigning: AtomicBool::new(false) }
    }

    /// The election's name (with the client's key prefix, if any).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lead's Redis key, `leasehold_election:{NAME}`.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// The change channel, `leasehold_election__channel:{NAME}`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    pub fn channel(&self) -> Result<String> {
        Ok(self.lock.shared.names()?.election_channel())
    }

    /// This candidate's owner id, `CLIENT_UUID:N`: the lead Hash's field while it leads.
    pub fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// The election's settings.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Every check before a campaign sends anything; records the value it proclaims.
    /// The campaign holds the returned claim until it returns.
    fn prepare(&self, value: String) -> Result<(String, Campaigning<'_>)> {
        if let Some(invalid) = &self.invalid {
            return Err(Error::invalid_argument(invalid.clone()));
        }
        self.lock.shared.names()?;
        lock_core::election::check_value(value.as_bytes())?;
        if self.campaigning.swap(true, Ordering::AcqRel) {
            return Err(Error::invalid_argument(
                "this candidate campaigns already: one campaign at a time per candidate (make another \
                 candidate with Client::election for another task)",
            )
            .with_key(self.key()));
        }
        let claim = Campaigning(&self.campaigning);
        // Checked under the claim: a campaign that leads records its hold before it
        // returns (and gives the claim back), so no second campaign slips in between.
        if self.lock.shared.holds.has_current() {
            return Err(Error::invalid_argument(
                "this candidate leads already: proclaim a new value through its Leadership",
            )
            .with_key(self.key()));
        }
        if let Some(election) = &self.lock.shared.election {
            *election.value.lock() = Bytes::from(value.clone());
        }
        Ok((value, claim))
    }

    fn lead(&self, guard: crate::LockGuard, value: String) -> Result<Leadership> {
        Leadership::new(guard, value)
    }

    /// Waits as long as it takes for this candidate to lead, then returns its
    /// [`Leadership`], whose [`Leadership::term`] is larger than every earlier leader's.
    /// `value` is what followers see of this leader ([`Leader::value`]), recorded and
    /// published with the lead in one script.
    ///
    /// Waiting does not poll: a waiting candidate queues in the lead's wait queue on
    /// the server (with `value`), a resign grants the lead to the first live waiter in
    /// its own script (the new term and record written there; the waiter's client takes
    /// the lead over on the grant message, without a call), and a lead that expires (its
    /// leader crashed) is retried at the moment it expires.
    /// Transient errors do not end the wait (retried with back-off, keeping the place
    /// in line), as for [`Lock::lock`](crate::Lock::lock).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] (nothing sent) for an empty name, an invalid
    /// [`ElectionConfig`], a value over 1 MiB, a candidate that leads already, or one
    /// whose other campaign is in flight (another task's, sharing the candidate);
    /// [`ErrorKind::WrongType`] when a key of the election holds another type;
    /// [`ErrorKind::Redis`] for a script or permission error;
    /// [`ErrorKind::Shutdown`] after (or when a waiting campaign is ended by)
    /// [`Client::shutdown`](crate::Client::shutdown), which removes its place in the
    /// queue first.
    ///
    /// # Cancel safety
    /// As [`Lock::lock`](crate::Lock::lock): dropping the future leaves the wait queue,
    /// and a lead the campaign may have taken in flight (or a resign granted it as it
    /// was dropped) is given back in the background (followers are told it ended).
    pub async fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        let (value, _campaigning) = self.prepare(value.into())?;
        let guard = self.lock.acquire(None, LeaseMode::Watchdog).await?;
        let guard =
            guard.ok_or_else(|| Error::new(ErrorKind::Timeout, "an unbounded campaign ended without the lead"))?;
        self.lead(guard, value)
    }

    /// One attempt, one round trip: the [`Leadership`] when nobody led, `None` when
    /// another candidate leads. Never queues.
    ///
    /// # Errors
    /// As [`Election::campaign`], and any error of its one attempt.
    ///
    /// # Cancel safety
    /// As [`Election::campaign`].
    pub async fn try_campaign(&self, value: impl Into<String>) -> Result<Option<Leadership>> {
        let (value, _campaigning) = self.prepare(value.into())?;
        let guard = self.lock.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await?;
        guard.map(|guard| self.lead(guard, value)).transpose()
    }

    /// Waits at most `wait` (on the monotonic clock, from the call) to lead; `None` when
    /// the wait ran out. The bound holds whatever the server does (down, frozen): at the
    /// deadline an attempt in flight is abandoned and any lead it took is given back in
    /// the background, as [`Lock::try_lock_for`](crate::Lock::try_lock_for).
    ///
    /// # Errors
    /// As [`Election::campaign`]; when the last attempt before the deadline failed with a
    /// transient error, that error. A wait that overflows the clock (`Duration::MAX`) is
    /// [`ErrorKind::InvalidArgument`] (nothing sent), as every kind's bounded wait.
    ///
    /// # Cancel safety
    /// As [`Election::campaign`].
    pub async fn campaign_for(&self, wait: Duration, value: impl Into<String>) -> Result<Option<Leadership>> {
        let (value, _campaigning) = self.prepare(value.into())?;
        let guard = self.lock.acquire(Some(wait), LeaseMode::Watchdog).await?;
        guard.map(|guard| self.lead(guard, value)).transpose()
    }

    /// Who leads now, read from the server (one round trip): the leader's value, term
    /// and owner, or `None` when nobody leads (no lead, or a lead handed over and not
    /// claimed yet). Any handle can ask; it need not campaign.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name; [`ErrorKind::WrongType`];
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn leader(&self) -> Result<Option<Leader>> {
        let names = self.lock.shared.names()?;
        let read = self.lock.shared.client.store.election_leader(names).await?;
        Ok(Leader::of(&read))
    }

    /// Every change of leader or value from now on, as a `Stream` (see [`Observer`]):
    /// first the current state, then each change, in term order. Starts a task on the
    /// client's runtime, which subscribes and reads at once, and ends when the observer
    /// is dropped (or the client shut down).
    pub fn observe(&self) -> Observer {
        Observer::start(self.lock.shared.clone())
    }

    /// Ends the lead whoever holds it (an operator's forced resign, as
    /// [`Lock::force_unlock`](crate::Lock::force_unlock)): deletes the lead and the
    /// leader record, wakes the waiting candidates, tells the followers, and records it
    /// in the lead's history. The leader learns it at its next renewal (within a third
    /// of the lease): its [`Leadership::lost`] resolves. `true` if a lead existed.
    ///
    /// # Errors
    /// Empty name; connection errors and timeouts.
    ///
    /// # Cancel safety
    /// Once sent, it applies whether or not the future is polled again.
    pub async fn force_resign(&self) -> Result<bool> {
        self.lock.force_unlock().await
    }
}
