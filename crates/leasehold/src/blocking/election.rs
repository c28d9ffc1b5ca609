//! The blocking [`Election`], its [`Leadership`] and its [`Observer`]:
//! [`crate::Election`], [`crate::Leadership`] and [`crate::Observer`], each call run on
//! the client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, ErrorKind, Result};

use crate::blocking::held::{Guarded, Handle};
use crate::blocking::runtime::Runner;
use crate::blocking::shared::BlockingShared;
use crate::election::Leader;

/// The blocking form of [`crate::Election`]: one candidate of a leader election, and a
/// follower's view of it; the same methods and errors, each call blocking the calling
/// thread until it is answered. Not `Clone` (the handle is the candidate).
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let election = client.election("billing-scheduler");
/// let leadership = election.campaign("host-a")?;
/// // ... lead, writing with leadership.term() as a fence, checking is_lost() ...
/// leadership.resign()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Election {
    handle: Handle<crate::Election>,
}

impl Election {
    pub(crate) fn new(client: &Arc<BlockingShared>, election: crate::Election) -> Self {
        Election { handle: Handle::new(client, election) }
    }

    /// The election's name (as [`crate::Election::name`]).
    pub fn name(&self) -> &str {
        self.handle.get().name()
    }

    /// The lead's Redis key, `leasehold_election:{NAME}`.
    pub fn key(&self) -> &str {
        self.handle.get().key()
    }

    /// The change channel, `leasehold_election__channel:{NAME}` (as
    /// [`crate::Election::channel`]).
    ///
    /// # Errors
    /// As [`crate::Election::channel`].
    pub fn channel(&self) -> Result<String> {
        self.handle.get().channel()
    }

    /// This candidate's owner id, `CLIENT_UUID:N`.
    pub fn owner(&self) -> &str {
        self.handle.get().owner()
    }

    /// The election's settings.
    pub fn config(&self) -> &crate::ElectionConfig {
        self.handle.get().config()
    }

    fn lead(&self, leadership: crate::Leadership) -> Leadership {
        Leadership { held: Guarded::new(leadership, self.handle.runner().clone()) }
    }

    /// As [`crate::Election::campaign`]: blocks until this candidate leads.
    ///
    /// # Errors
    /// As [`crate::Election::campaign`];
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks (nothing sent).
    pub fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        let value = value.into();
        self.handle.call(move |e| async move { e.campaign(value).await }).map(|l| self.lead(l))
    }

    /// As [`crate::Election::try_campaign`]: one round trip.
    ///
    /// # Errors
    /// As [`Election::campaign`].
    pub fn try_campaign(&self, value: impl Into<String>) -> Result<Option<Leadership>> {
        let value = value.into();
        self.handle.call(move |e| async move { e.try_campaign(value).await }).map(|l| l.map(|l| self.lead(l)))
    }

    /// As [`crate::Election::campaign_for`]: blocks at most `wait`.
    ///
    /// # Errors
    /// As [`crate::Election::campaign_for`] (a wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), nothing sent).
    pub fn campaign_for(&self, wait: Duration, value: impl Into<String>) -> Result<Option<Leadership>> {
        let value = value.into();
        self.handle.call(move |e| async move { e.campaign_for(wait, value).await }).map(|l| l.map(|l| self.lead(l)))
    }

    /// As [`crate::Election::leader`]: who leads now (one round trip).
    ///
    /// # Errors
    /// As [`crate::Election::leader`] and [`Election::campaign`].
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.handle.call(|e| async move { e.leader().await })
    }

    /// As [`crate::Election::force_resign`].
    ///
    /// # Errors
    /// As [`crate::Election::force_resign`] and [`Election::campaign`].
    pub fn force_resign(&self) -> Result<bool> {
        self.handle.call(|e| async move { e.force_resign().await })
    }

    /// As [`crate::Election::observe`]: every change of leader or value, taken with
    /// [`Observer::next_change`] (bounded) or as an [`Iterator`] (blocking).
    pub fn observe(&self) -> Observer {
        let observer = self.handle.get().observe();
        Observer { inner: Arc::new(tokio::sync::Mutex::new(observer)), runner: self.handle.runner().clone() }
    }
}

/// The blocking form of [`crate::Leadership`]: this candidate leads. Dropping it resigns
/// in the background on the runtime thread; [`Leadership::resign`] waits for the answer.
#[must_use = "dropping the leadership resigns (in the background)"]
#[clippy::has_significant_drop]
pub struct Leadership {
    held: Guarded<crate::Leadership>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl Leadership {
    /// The lead's term (as [`crate::Leadership::term`]).
    pub fn term(&self) -> u64 {
        self.held.get().term()
    }

    /// What followers see of this leader (as [`crate::Leadership::value`]).
    pub fn value(&self) -> String {
        self.held.get().value()
    }

    /// The lead's Redis key.
    pub fn key(&self) -> &str {
        self.held.get().key()
    }

    /// The leading candidate's owner id.
    pub fn owner(&self) -> &str {
        self.held.get().owner()
    }

    /// `true` once the lead is known lost (as [`crate::Leadership::is_lost`]). Sends
    /// nothing and never blocks.
    pub fn is_lost(&self) -> bool {
        self.held.get().is_lost()
    }

    /// Blocks until the lead is lost or `timeout` passes: `true` when it is lost.
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks.
    pub fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        self.held.wait_lost(timeout)
    }

    /// The local lease deadline (as [`crate::Leadership::lease_deadline`]).
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.held.get().lease_deadline()
    }

    /// As [`crate::Leadership::proclaim`].
    ///
    /// # Errors
    /// As [`crate::Leadership::proclaim`];
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext);
    /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the runtime stopped.
    pub fn proclaim(&self, value: impl Into<String>) -> Result<()> {
        self.held.run(self.held.get().proclaim_owned(value.into()))
    }

    /// As [`crate::Leadership::resign`]: hands the lead over and waits for the answer.
    ///
    /// # Errors
    /// As [`crate::Leadership::resign`];
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) (the leadership is
    /// then dropped, which resigns in the background).
    pub fn resign(self) -> Result<()> {
        self.held.unlock()
    }
}

/// The blocking form of [`crate::Observer`]: every change of an election's leader or
/// value, with the same rules (the current state first, then each change in term
/// order, none missed silently). Take changes with [`Observer::next_change`] (bounded),
/// or iterate (each `next` blocks until the next change; the iterator ends after the
/// client's shutdown). Dropping it stops the observing task.
pub struct Observer {
    inner: Arc<tokio::sync::Mutex<crate::Observer>>,
    runner: Arc<Runner>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Observer").finish_non_exhaustive()
    }
}

impl Observer {
    /// Blocks at most `timeout` for the next change: `Some(state)` (a leader, or `None`
    /// when nobody leads now), or `None` when no change came in time.
    ///
    /// # Errors
    /// A read of the server that failed (the observer goes on);
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks; [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) after the
    /// client's shutdown.
    pub fn next_change(&mut self, timeout: Duration) -> Result<Option<Option<Leader>>> {
        let inner = self.inner.clone();
        let next = self.runner.run_infallible(async move {
            let mut observer = inner.lock().await;
            tokio::time::timeout(timeout, observer.next()).await
        })?;
        match next {
            Err(_elapsed) => Ok(None),
            Ok(Some(change)) => change.map(Some),
            Ok(None) => Err(Error::new(ErrorKind::Shutdown, "the client was shut down: no more changes")),
        }
    }
}

impl Iterator for Observer {
    type Item = Result<Option<Leader>>;

    /// Blocks until the next change; `None` after the client's shutdown. A call on a
    /// thread that runs async tasks yields one
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) error.
    fn next(&mut self) -> Option<Self::Item> {
        let inner = self.inner.clone();
        match self.runner.run_infallible(async move { inner.lock().await.next().await }) {
            Ok(next) => next,
            Err(error) if error.kind() == ErrorKind::Shutdown => None,
            Err(error) => Some(Err(error)),
        }
    }
}
