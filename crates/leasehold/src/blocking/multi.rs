//! The blocking [`MultiLock`] and its [`MultiGuard`]: [`crate::MultiLock`] and
//! [`crate::MultiGuard`], each call run on a client's runtime thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{Error, Result};

use super::held::{Guarded, Handle};
use super::runtime::{refuse_in_async_context, Runner};
use super::shared::BlockingShared;
use super::Lock;

/// The blocking form of [`crate::MultiLock`]: several reentrant locks, possibly of
/// several blocking [`Client`](crate::blocking::Client)s, held all or none; the same methods and errors, each
/// call blocking the calling thread until it is answered.
///
/// As the async one, it takes its members in one canonical order whatever order they
/// were given in, so threads naming overlapping sets in any order never deadlock; a
/// wait that fails or times out gives back every lock it took.
///
/// Made by [`Client::multi_lock`](crate::blocking::Client::multi_lock) from names, or by [`MultiLock::new`] from blocking
/// [`Lock`] handles (each member keeps its handle's owner). Its calls run on the runtime
/// thread of the first member's client; it keeps every member's client running.
/// Making it sends nothing; bad input is an
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) from its first
/// operation, before anything is sent.
///
/// # Examples
/// ```no_run
/// # fn demo(client: leasehold::blocking::Client) -> leasehold::Result<()> {
/// let accounts = client.multi_lock(["account:7", "account:3"]);
/// let guard = accounts.lock()?; // both, or wait
/// // ... move the money ...
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiLock {
    /// The async multi-lock on the first member's client; `None` when there is no
    /// member (every operation then refuses, as the async one does).
    handle: Option<Handle<crate::MultiLock>>,
    /// The members' other clients, kept so that their runtime threads keep serving
    /// their connections and renewals while the multi-lock lives.
    _keep_running: Vec<Arc<BlockingShared>>,
}

impl MultiLock {
    /// A multi-lock over `locks` (blocking [`Lock`] handles of one or several clients,
    /// in any order; each member keeps its handle's owner). Sends nothing; the input is
    /// checked by the first operation (as [`crate::MultiLock::new`]).
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> MultiLock {
        let mut first: Option<Arc<BlockingShared>> = None;
        let mut others: Vec<Arc<BlockingShared>> = Vec::new();
        let mut members = Vec::new();
        for lock in locks {
            let (member, client) = lock.into_async();
            members.push(member);
            let same = |known: &Arc<BlockingShared>| Arc::ptr_eq(&known.runner, &client.runner);
            match &first {
                None => first = Some(client),
                Some(known) if same(known) => {}
                Some(_) if others.iter().any(same) => {}
                Some(_) => others.push(client),
            }
        }
        let handle = first.map(|client| Handle::new(&client, crate::MultiLock::new(members)));
        MultiLock { handle, _keep_running: others }
    }

    pub(crate) fn from_async(client: &Arc<BlockingShared>, multi: crate::MultiLock) -> Self {
        MultiLock { handle: Some(Handle::new(client, multi)), _keep_running: Vec::new() }
    }

    /// The members' Redis keys, in the canonical order they are taken in (the async
    /// [`crate::MultiLock::locks`] gives the async handles, which the blocking API
    /// does not hand out).
    pub fn keys(&self) -> Vec<&str> {
        self.handle.as_ref().map_or_else(Vec::new, |handle| handle.get().locks().iter().map(crate::Lock::key).collect())
    }

    /// Runs `call` on the runtime thread of the first member's client.
    fn call<T, Fut>(&self, call: impl FnOnce(Arc<crate::MultiLock>) -> Fut) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        match &self.handle {
            Some(handle) => handle.call(call),
            None => {
                refuse_in_async_context()?;
                Err(Error::invalid_argument("a multi-lock needs at least one lock"))
            }
        }
    }

    fn guard(&self, guard: crate::MultiGuard) -> MultiGuard {
        // A guard exists only when a call ran, so there is a handle.
        let runner: Option<&Arc<Runner>> = self.handle.as_ref().map(Handle::runner);
        MultiGuard {
            held: Guarded::new(guard, runner.expect("a multi-lock that returned a guard has members").clone()),
        }
    }

    /// As [`crate::MultiLock::lock`]: waits as long as it takes for every member, in
    /// watchdog mode (renewed by the runtime threads while the guard lives).
    ///
    /// # Errors
    /// As [`crate::MultiLock::lock`] (bad input is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), nothing sent);
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks (nothing sent); [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown)
    /// after [`Client::shutdown`](crate::blocking::Client::shutdown).
    pub fn lock(&self) -> Result<MultiGuard> {
        self.call(|multi| async move { multi.lock().await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::MultiLock::lock_with_lease`]: waits as long as it takes, then holds
    /// every member for `lease` (never renewed).
    ///
    /// # Errors
    /// As [`crate::MultiLock::lock_with_lease`] and [`MultiLock::lock`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        self.call(move |multi| async move { multi.lock_with_lease(lease).await }).map(|guard| self.guard(guard))
    }

    /// As [`crate::MultiLock::try_lock`]: one attempt per group, no waiting.
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_lock`] and [`MultiLock::lock`].
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        Ok(self.call(|multi| async move { multi.try_lock().await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::MultiLock::try_lock_for`]: waits at most `wait` for the whole set (one
    /// bound for every member), watchdog mode.
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_lock_for`] and [`MultiLock::lock`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        Ok(self.call(move |multi| async move { multi.try_lock_for(wait).await })?.map(|guard| self.guard(guard)))
    }

    /// As [`crate::MultiLock::try_lock_with`]: waits at most `wait` for the whole set,
    /// then holds every member for `lease`.
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_lock_with`] and [`MultiLock::lock`].
    pub fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<MultiGuard>> {
        let acquired = self.call(move |multi| async move { multi.try_lock_with(wait, lease).await })?;
        Ok(acquired.map(|guard| self.guard(guard)))
    }
}

/// Every member of a blocking [`MultiLock`] held: the blocking form of
/// [`crate::MultiGuard`].
///
/// Release it with [`MultiGuard::unlock`], which reports errors. Dropping it releases
/// every member in the background on the runtime thread: `Drop` never blocks and never
/// panics. If the client's last clone is dropped first, that drop releases the holds;
/// the guard then reports [`MultiGuard::is_lost`] and its `unlock` fails with
/// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown).
#[must_use = "dropping the guard releases every member (in the background)"]
#[clippy::has_significant_drop]
pub struct MultiGuard {
    held: Guarded<crate::MultiGuard>,
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.get().fmt(f)
    }
}

impl MultiGuard {
    /// The members' Redis keys, in the canonical order they were taken.
    pub fn keys(&self) -> Vec<&str> {
        self.held.get().keys()
    }

    /// `true` when any member is known lost (as [`crate::MultiGuard::is_lost`]). Sends
    /// nothing and never blocks.
    pub fn is_lost(&self) -> bool {
        self.held.get().is_lost()
    }

    /// Blocks until any member is lost or `timeout` passes: `true` when one is lost (at
    /// once if one already is), `false` when the time ran out first. The blocking form
    /// of [`crate::MultiGuard::lost`].
    ///
    /// # Errors
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks. Once the client's last clone was dropped it answers `true` at once
    /// (that drop released the holds).
    pub fn wait_lost(&self, timeout: Duration) -> Result<bool> {
        self.held.wait_lost(timeout)
    }

    /// The earliest member's local lease deadline (as
    /// [`crate::MultiGuard::lease_deadline`]).
    pub fn lease_deadline(&self) -> Instant {
        self.held.get().lease_deadline()
    }

    /// Whether the watchdog is renewing every member now (as
    /// [`crate::MultiGuard::is_renewed`]).
    pub fn is_renewed(&self) -> bool {
        self.held.get().is_renewed()
    }

    /// Lets go of every member without releasing it (as [`crate::MultiGuard::detach`]):
    /// renewal stops, nothing is sent, and each key expires with its lease.
    pub fn detach(self) {
        self.held.detach(crate::MultiGuard::detach);
    }

    /// Gives back every member, last taken first, and waits for the answers, as
    /// [`crate::MultiGuard::unlock`]: every member is released even when one fails.
    ///
    /// # Errors
    /// As [`crate::MultiGuard::unlock`]: the first member's error
    /// ([`ErrorKind::LockLost`](crate::ErrorKind::LockLost),
    /// [`ErrorKind::NotOwner`](crate::ErrorKind::NotOwner), timeouts, connection errors).
    /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the client was shut down
    /// or its last clone dropped. [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks: the guard is then dropped, which releases
    /// every member in the background.
    pub fn unlock(self) -> Result<()> {
        self.held.unlock()
    }
}
