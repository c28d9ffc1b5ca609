//! The client: connections, the watchdog and the subscriber, shared by every lock.

use std::sync::Arc;
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::{Builder, Client as FredClient, ClientLike, Config, ReconnectPolicy};
use lock_core::{ClientId, Error, ErrorKind, LockStore, Result};
use lock_pubsub::Subscriber;
use lock_watchdog::{Watchdog, WatchdogConfig};

use crate::config::{default_reconnect_policy, ClientBuilder, ClientConfig};
use crate::lock::Lock;
use crate::simple::SimpleLock;

/// A connection to Redis for locks: one command connection, one subscriber
/// connection, one renewal scheduler. Make one per process (or per Redis) and share it;
/// it is cheap to clone.
///
/// # Examples
/// ```no_run
/// # async fn demo() -> leasehold::Result<()> {
/// let client = leasehold::Client::connect("redis://127.0.0.1:6379").await?;
/// let lock = client.lock("order:1001");
/// let guard = lock.lock().await?;      // waits; renewed while held
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

#[derive(Debug)]
pub(crate) struct ClientInner {
    pub(crate) id: ClientId,
    pub(crate) store: LockStore,
    pub(crate) subscriber: Subscriber,
    pub(crate) watchdog: Watchdog,
    pub(crate) config: ClientConfig,
    /// `true` when leasehold made the fred client and so may close it.
    owns_connection: bool,
    runtime: tokio::runtime::Handle,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        if self.owns_connection {
            let client = self.store.client().clone();
            // Never block in Drop: QUIT in the background; a dead runtime drops the task.
            drop(self.runtime.spawn(async move {
                let _ = client.quit().await;
            }));
        }
    }
}

impl Client {
    /// Connects to `url` with the default settings.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    ///
    /// # Cancel safety
    /// Dropping the future drops the half-made connections.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::builder().url(url).connect().await
    }

    /// A builder for every setting.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Uses an existing fred client for commands (it should have a reconnect policy).
    /// A subscriber connection is made from its configuration.
    ///
    /// A client made elsewhere may replay in-flight commands after a reconnect
    /// (fred's `max_command_attempts`); leasehold's acquire and release carry request
    /// ids, so a replay counts once within the replay window.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    ///
    /// # Cancel safety
    /// Dropping the future drops the half-made subscriber connection.
    pub async fn from_fred(client: FredClient, config: ClientConfig) -> Result<Client> {
        config.validate()?;
        if !client.has_reconnect_policy() {
            // fred's default: after a dropped connection every command fails (leasehold
            // bounds each call, so nothing hangs, but nothing recovers either).
            tracing::warn!("the fred client given to leasehold has no reconnect policy");
        }
        let policy = client.client_reconnect_policy().unwrap_or_else(default_reconnect_policy);
        let subscriber = subscriber_client(client.client_config(), policy)?;
        bounded_init(&subscriber, config.command_timeout).await?;
        if !client.is_connected() {
            bounded_init(&client, config.command_timeout).await?;
        }
        let client = Self::assemble(client, subscriber, config, false);
        client.inner.store.load_scripts().await?;
        Ok(client)
    }

    pub(crate) async fn connect_with(
        fred_config: Config,
        policy: ReconnectPolicy,
        config: ClientConfig,
    ) -> Result<Client> {
        let mut builder = Builder::from_config(fred_config.clone());
        builder.set_policy(policy.clone());
        builder.with_connection_config(|c| {
            // No silent replays of in-flight scripts: an ambiguous outcome surfaces as
            // an error and leasehold undoes or retries it by request id.
            c.max_command_attempts = 1;
            c.connection_timeout = config.command_timeout;
        });
        let client = builder.build().map_err(Error::from_fred)?;
        let subscriber = subscriber_client(fred_config, policy)?;
        bounded_init(&client, config.command_timeout).await?;
        if let Err(error) = bounded_init(&subscriber, config.command_timeout).await {
            let _ = client.quit().await;
            return Err(error);
        }
        let client = Self::assemble(client, subscriber, config, true);
        client.inner.store.load_scripts().await?;
        Ok(client)
    }

    fn assemble(client: FredClient, subscriber: SubscriberClient, config: ClientConfig, owns: bool) -> Client {
        let group_by_slot = client.is_clustered();
        let store = LockStore::new(client, config.command_timeout, config.replay_window);
        let mut watchdog_config = WatchdogConfig::default();
        watchdog_config.timeout = config.watchdog_timeout;
        watchdog_config.batch_size = config.renew_batch_size;
        watchdog_config.group_by_slot = group_by_slot;
        let watchdog = Watchdog::start(store.clone(), watchdog_config);
        let subscriber = Subscriber::start(subscriber, config.command_timeout);
        Client {
            inner: Arc::new(ClientInner {
                id: ClientId::new_random(),
                store,
                subscriber,
                watchdog,
                config,
                owns_connection: owns,
                runtime: tokio::runtime::Handle::current(),
            }),
        }
    }

    /// A handle on the reentrant lock `name` (Redisson's `RLock` layout). Cheap: nothing
    /// is sent. Each call makes a new owner; clones of the handle share it. An empty
    /// name is reported by the first operation, before anything is sent.
    pub fn lock(&self, name: impl AsRef<str>) -> Lock {
        Lock::new(self.clone(), self.full_key(name.as_ref()))
    }

    /// A handle on the minimal lock `name` (`SET NX PX` and compare-and-delete; not
    /// reentrant, not renewed). See [`SimpleLock`].
    pub fn simple_lock(&self, name: impl AsRef<str>) -> SimpleLock {
        SimpleLock::new(self.clone(), self.full_key(name.as_ref()))
    }

    fn full_key(&self, name: &str) -> String {
        match &self.inner.config.key_prefix {
            // An empty name stays empty so that it is rejected, prefix or not.
            Some(prefix) if !name.is_empty() => format!("{prefix}{name}"),
            _ => name.to_owned(),
        }
    }

    /// This client's UUID: the first part of every owner id it makes.
    pub fn id(&self) -> uuid::Uuid {
        self.inner.id.uuid()
    }

    /// The settings in force.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The fred client used for commands.
    pub fn fred(&self) -> &FredClient {
        self.inner.store.client()
    }

    /// The subscriber shared by this client's waiters (for diagnostics and tests).
    pub fn subscriber(&self) -> &Subscriber {
        &self.inner.subscriber
    }

    /// The renewal scheduler (for diagnostics and tests).
    pub fn watchdog(&self) -> &Watchdog {
        &self.inner.watchdog
    }
}

fn subscriber_client(config: Config, policy: ReconnectPolicy) -> Result<SubscriberClient> {
    let mut builder = Builder::from_config(config);
    builder.set_policy(policy);
    builder.with_performance_config(|p| {
        // A larger buffer makes a lag (every waiter woken) rarer; lag is handled anyway.
        p.broadcast_channel_capacity = 4096;
    });
    builder.build_subscriber_client().map_err(Error::from_fred)
}

async fn bounded_init<C: ClientLike>(client: &C, timeout: Duration) -> Result<()> {
    match tokio::time::timeout(timeout, client.init()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            let _ = tokio::time::timeout(timeout, client.quit()).await;
            Err(Error::from_fred(error))
        }
        Err(_) => {
            let _ = tokio::time::timeout(timeout, client.quit()).await;
            Err(Error::new(ErrorKind::Timeout, format!("could not connect to Redis within {timeout:?}")))
        }
    }
}
