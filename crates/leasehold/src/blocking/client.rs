//! The blocking [`Client`] and its [`ClientBuilder`].

use std::sync::Arc;
use std::time::Duration;

use fred::prelude::{Config, ReconnectPolicy};
use lock_core::Result;

use super::runtime::{refuse_in_async_context, Runner};
use super::shared::BlockingShared;
use super::{FairLock, FencedLock, Lock, PermitExpirableSemaphore, ReadWriteLock, Semaphore, SimpleLock};
use crate::client::config::{ClientConfig, ShardedSubscriptionMode};

/// The blocking form of [`crate::Client`]: the same connections, watchdog and
/// subscriber, run by a tokio runtime on a thread of its own (`leasehold-blocking`) that
/// every blocking call hands its work to. Make one per process and share it: it is cheap
/// to clone (an `Arc` inside).
///
/// The runtime thread keeps running between calls, so renewals, pub/sub wake-ups and
/// fred's connection tasks never wait for the user's threads to call in.
///
/// # Dropping the last clone
/// The runtime thread lives as long as a clone of the client, or a lock handle made
/// from it, lives; guards do not keep it. When the last of those is dropped, the drop
/// (which never blocks) tells the thread to shut the client down in the background: it
/// lets the releases of guards dropped before finish, then gives back every hold still
/// held through the client's handles, guards alive or forgotten (`mem::forget`) alike
/// (not detached ones), as [`crate::Client::shutdown`] does, quits the connections and
/// ends. A guard that outlives its client is then lost: `is_lost()` is `true`,
/// `unlock()` fails with [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown), and
/// dropping it sends nothing. To be sure those releases are sent before the process
/// exits, call [`Client::shutdown`], which waits for them.
///
/// # Examples
/// ```no_run
/// # fn demo() -> leasehold::Result<()> {
/// let client = leasehold::blocking::Client::connect("redis://127.0.0.1:6379")?;
/// let worker = {
///     let client = client.clone();
///     std::thread::spawn(move || -> leasehold::Result<()> {
///         let guard = client.lock("order:1001").lock()?; // its own owner: excluded
///         guard.unlock()
///     })
/// };
/// let guard = client.lock("order:1001").lock()?;
/// guard.unlock()?;
/// worker.join().expect("worker thread")?;
/// client.shutdown()?; // every hold given back before the process exits
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<BlockingShared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.fmt(f)
    }
}

impl Client {
    /// Connects to `url` with the default settings, blocking until connected.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    pub fn connect(url: &str) -> Result<Client> {
        Client::builder().url(url).connect()
    }

    /// A builder for every setting: the async [`crate::ClientBuilder`]'s setters, ending
    /// in a blocking [`ClientBuilder::connect`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A handle on the reentrant lock `name` (as [`crate::Client::lock`]).
    pub fn lock(&self, name: impl AsRef<str>) -> Lock {
        Lock::new(&self.shared, self.shared.client.lock(name))
    }

    /// A new candidate of the leader election `name` (as [`crate::Client::election`]).
    pub fn election(&self, name: impl AsRef<str>) -> crate::blocking::Election {
        crate::blocking::Election::new(&self.shared, self.shared.client.election(name))
    }

    /// A new candidate of the election `name` with `config` (as
    /// [`crate::Client::election_with`]).
    pub fn election_with(&self, name: impl AsRef<str>, config: crate::ElectionConfig) -> crate::blocking::Election {
        crate::blocking::Election::new(&self.shared, self.shared.client.election_with(name, config))
    }

    /// A handle on the fenced lock `name` (as [`crate::Client::fenced_lock`]).
    pub fn fenced_lock(&self, name: impl AsRef<str>) -> FencedLock {
        FencedLock::new(&self.shared, self.shared.client.fenced_lock(name))
    }

    /// A handle on the fair lock `name` (as [`crate::Client::fair_lock`]).
    pub fn fair_lock(&self, name: impl AsRef<str>) -> FairLock {
        FairLock::new(&self.shared, self.shared.client.fair_lock(name))
    }

    /// A handle on the read/write lock `name` (as [`crate::Client::read_write_lock`]).
    pub fn read_write_lock(&self, name: impl AsRef<str>) -> ReadWriteLock {
        ReadWriteLock::new(&self.shared, self.shared.client.read_write_lock(name))
    }

    /// A handle on the semaphore `name` (as [`crate::Client::semaphore`]).
    pub fn semaphore(&self, name: impl AsRef<str>) -> Semaphore {
        Semaphore::new(&self.shared, self.shared.client.semaphore(name))
    }

    /// A handle on the permit-expirable semaphore `name` (as
    /// [`crate::Client::permit_expirable_semaphore`]).
    pub fn permit_expirable_semaphore(&self, name: impl AsRef<str>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(&self.shared, self.shared.client.permit_expirable_semaphore(name))
    }

    /// A handle on the minimal lock `name` (as [`crate::Client::simple_lock`]).
    pub fn simple_lock(&self, name: impl AsRef<str>) -> SimpleLock {
        SimpleLock::new(&self.shared, self.shared.client.simple_lock(name))
    }

    /// This client's UUID: the first part of every owner id it makes.
    pub fn id(&self) -> uuid::Uuid {
        self.shared.client.id()
    }

    /// The settings in force.
    pub fn config(&self) -> &ClientConfig {
        self.shared.client.config()
    }

    /// As [`crate::Client::stats`]: a snapshot of what the client did and holds. Never
    /// blocks.
    pub fn stats(&self) -> crate::ClientStats {
        self.shared.client.stats()
    }

    /// As [`crate::Client::health`]: the connections and renewals now, for a readiness
    /// probe. Never blocks and sends nothing.
    pub fn health(&self) -> crate::Health {
        self.shared.client.health()
    }

    /// The async client underneath, for async code in the same process: its locks share
    /// this client's connections and runtime tasks (their own calls run on the caller's
    /// runtime). It keeps the connections, not the runtime thread: keep a clone of this
    /// blocking client as long as it is used.
    pub fn as_async(&self) -> &crate::Client {
        &self.shared.client
    }

    /// As [`crate::Client::shutdown`], blocking until it is done: gives back every hold
    /// held through this client's handles, refuses later calls with
    /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown), stops the background tasks
    /// and quits the connections. The runtime thread itself ends when the last clone is
    /// dropped.
    ///
    /// # Errors
    /// As [`crate::Client::shutdown`]; [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext)
    /// on a thread that runs async tasks (nothing done).
    pub fn shutdown(&self) -> Result<()> {
        let client = self.shared.client.clone();
        self.shared.runner.run(async move { client.shutdown().await })
    }

    /// Whether [`Client::shutdown`] was called (on any clone).
    pub fn is_shut_down(&self) -> bool {
        self.shared.client.is_shut_down()
    }
}

/// The kinds wrapped after the first blocking release: the latch and the multi-lock.
impl Client {
    /// A handle on the count-down latch `name` (as [`crate::Client::count_down_latch`]).
    pub fn count_down_latch(&self, name: impl AsRef<str>) -> super::CountDownLatch {
        super::CountDownLatch::new(&self.shared, self.shared.client.count_down_latch(name))
    }

    /// A [`MultiLock`](super::MultiLock) over the reentrant locks `names` of this client
    /// (as [`crate::Client::multi_lock`]): one new owner per name, taken in one canonical
    /// order, all or none. Sends nothing.
    pub fn multi_lock<I>(&self, names: I) -> super::MultiLock
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        super::MultiLock::from_async(&self.shared, self.shared.client.multi_lock(names))
    }
}

/// Builds a blocking [`Client`]: every setter of the async [`crate::ClientBuilder`]
/// (each forwards to it), ending in a blocking [`ClientBuilder::connect`].
///
/// ```no_run
/// # fn demo() -> leasehold::Result<()> {
/// use std::time::Duration;
/// let client = leasehold::blocking::Client::builder()
///     .url("redis://127.0.0.1:6379")
///     .key_prefix("shop:")
///     .watchdog_timeout(Duration::from_secs(10))
///     .connect()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default, Debug)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    inner: crate::ClientBuilder,
}

impl From<crate::ClientBuilder> for ClientBuilder {
    fn from(inner: crate::ClientBuilder) -> Self {
        ClientBuilder { inner }
    }
}

/// Setters that forward to the async builder's setter of the same name.
macro_rules! forward_setters {
    ($(fn $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[doc = concat!("As [`crate::ClientBuilder::", stringify!($name), "`].")]
        pub fn $name(self, $($arg: $ty),*) -> Self {
            ClientBuilder { inner: self.inner.$name($($arg),*) }
        }
    )*};
}

impl ClientBuilder {
    forward_setters! {
        fn url(url: impl Into<String>);
        fn fred_config(config: Config);
        fn reconnect_policy(policy: ReconnectPolicy);
        fn key_prefix(prefix: impl Into<String>);
        fn watchdog_timeout(timeout: Duration);
        fn command_timeout(timeout: Duration);
        fn replay_window(window: Duration);
        fn renew_batch_size(size: usize);
        fn metric_label(label: fn(&str) -> Option<&'static str>);
        fn sync_replicas(replicas: u32, timeout: Duration);
        fn fence_token_ttl(ttl: Duration);
        fn queue_keepalive(keepalive: Duration);
        fn sharded_subscription_mode(mode: ShardedSubscriptionMode);
        fn redisson_waiters(wake: bool);
        fn service_name(name: impl Into<String>);
    }

    /// Applies any setters of the async builder at once (`|b| b.key_prefix("shop:")`),
    /// including ones added after this wrapper was written.
    pub fn configure(self, configure: impl FnOnce(crate::ClientBuilder) -> crate::ClientBuilder) -> Self {
        ClientBuilder { inner: configure(self.inner) }
    }

    /// Starts the client's runtime thread, then validates the settings and connects on
    /// it, blocking until connected (as [`crate::ClientBuilder::connect`]).
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::connect`];
    /// [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext) on a thread that runs
    /// async tasks (nothing started); [`ErrorKind::Connection`](crate::ErrorKind::Connection)
    /// when the runtime or its thread cannot be started.
    pub fn connect(self) -> Result<Client> {
        refuse_in_async_context()?;
        let (runner, stop) = Runner::start()?;
        let builder = self.inner;
        // On failure `stop` is dropped unsent, which ends the runtime thread.
        let client = runner.run(async move { builder.connect().await })?;
        Ok(Client { shared: Arc::new(BlockingShared { client, runner, stop: Some(stop) }) })
    }
}

#[cfg(test)]
mod tests {
    /// Every setter of the async builder has its forwarding
    /// setter here: a setter added to `config.rs` and not here fails this test.
    #[test]
    fn every_async_setter_is_forwarded() {
        let config = include_str!("../client/config.rs");
        let builder = config.split("impl ClientBuilder {").nth(1).expect("the async builder's impl");
        let mut missing = Vec::new();
        for line in builder.lines().map(str::trim) {
            let Some(rest) = line.strip_prefix("pub fn ").or_else(|| line.strip_prefix("pub async fn ")) else {
                continue;
            };
            let name = rest.split(['(', '<']).next().unwrap_or_default();
            if name != "connect" && !include_str!("client.rs").contains(&format!("fn {name}(")) {
                missing.push(name.to_owned());
            }
        }
        assert!(
            missing.is_empty(),
            "setters of crate::ClientBuilder not forwarded by blocking::ClientBuilder: {missing:?}"
        );
    }
}
