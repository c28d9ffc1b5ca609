//! [`Client`]: the facade that makes every kind of lock, semaphore and latch on one
//! Redis (or Valkey), and owns what they share: one command connection, one subscriber
//! connection, one renewal scheduler. Make one per process and clone it freely.
//!
//! Files: this one (the facade, its constructors, [`Client::shutdown`]); `shared.rs`
//! ([`ClientShared`], what every kind imports: kinds never import this facade, which
//! imports every kind); `config.rs` (the settings and the builder); `live.rs` (the holds
//! alive, released at shutdown, named by a trait object, not by kind); `stats.rs`
//! (snapshots); `health.rs` ([`Client::health`]); `sentinel.rs` and `tls.rs` (how it connects).

pub(crate) mod config;
pub(crate) mod health;
pub(crate) mod live;
pub(crate) mod sentinel;
pub(crate) mod shared;
pub(crate) mod stats;
mod tls;
pub(crate) mod who;
mod who_api;

use std::sync::Arc;
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::{Builder, Client as FredClient, ClientLike, Config, EventInterface, ReconnectPolicy};
use lock_core::{ClientId, Error, ErrorKind, LockStore, Result};
use lock_pubsub::{PubsubMode, Subscriber};
use lock_watchdog::{Watchdog, WatchdogConfig};

use crate::client::config::{default_reconnect_policy, ClientBuilder, ClientConfig, ShardedSubscriptionMode};
use crate::lock::fair::FairLock;
use crate::lock::fenced::FencedLock;
use crate::lock::Lock;
use crate::simple::SimpleLock;

use shared::ClientShared;

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
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientShared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("Client")
            .field("id", &inner.id.uuid())
            .field("key_prefix", &inner.config.key_prefix.as_deref().map(crate::debug::Bounded))
            .field("watchdog_timeout", &inner.config.watchdog_timeout)
            .field("command_timeout", &inner.config.command_timeout)
            .field("renewed_holds", &inner.watchdog.stats().registered)
            .finish_non_exhaustive()
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
    /// A subscriber connection is made from its configuration. leasehold never closes
    /// the client it is given (not on error, not when the last clone of the returned
    /// `Client` is dropped); it closes only the subscriber connection it made itself.
    /// Nor does it rename it: only the subscriber connection is named
    /// `leasehold:<UUID>:<service>` (the given client's connection is the application's,
    /// and so is its name); the client's description is written as for any client
    /// (`docs/observability.md`, "Who holds what").
    ///
    /// A client made elsewhere may replay in-flight commands after a reconnect
    /// (fred's `max_command_attempts`); leasehold's acquire and release set absolute
    /// counts, so a replay counts once. For a cluster client, set fred's
    /// `max_redirections` to 0 as leasehold's own clients do: fred 10.1 jams after an
    /// ASK redirect otherwise (`docs/cluster.md`); leasehold retries redirected commands
    /// itself.
    ///
    /// A client configured for Sentinel gets the same watch as leasehold's own: at each
    /// `+switch-master` of its service leasehold reconnects this client (and its own
    /// subscriber connection) to the announced primary and holds lock writes back until
    /// it is there (`docs/cluster.md` §7). fred alone would follow only when the old
    /// primary drops its connections, seconds later.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    ///
    /// # Cancel safety
    /// Dropping the future drops the half-made subscriber connection.
    pub async fn from_fred(client: FredClient, config: ClientConfig) -> Result<Client> {
        let config = config.resolved()?;
        if !client.has_reconnect_policy() {
            // fred's default: after a dropped connection every command fails (leasehold
            // bounds each call, so nothing hangs, but nothing recovers either).
            tracing::warn!(
                target: crate::telemetry::CLIENT_TARGET,
                "the fred client given to leasehold has no reconnect policy",
            );
        }
        if client.is_clustered() && client.connection_config().max_redirections > 0 {
            // leasehold resends redirected commands itself; fred 10.1 following an ASK
            // can end its router task (docs/cluster.md).
            tracing::warn!(
                target: crate::telemetry::CLIENT_TARGET,
                "the cluster fred client given to leasehold follows redirects (max_redirections > 0): \
                 fred 10.1 can stop answering after an ASK; set max_redirections = 0"
            );
        }
        let policy = client.client_reconnect_policy().unwrap_or_else(default_reconnect_policy);
        let fred_config = client.client_config();
        let subscriber = subscriber_client(fred_config.clone(), policy.clone())?;
        bounded_init(&subscriber, config.command_timeout).await?;
        if !client.is_connected() {
            // The caller's client: connect it if needed, but never QUIT it on failure.
            if let Err(error) = connect_only(&client, config.command_timeout).await {
                close_in_background(&subscriber, config.command_timeout);
                return Err(error);
            }
        }
        let mode = pubsub_mode(&client, &config).await;
        let sentinel =
            crate::client::sentinel::watch(&fred_config, &policy, &client, &subscriber, config.command_timeout);
        let client = Self::assemble(client, subscriber, config, false, mode, sentinel);
        client.inner.store.load_scripts().await?;
        // The application's connection keeps the application's name: not renamed.
        who::start(&client.inner.who, client.inner.store.client(), &client.inner.config, false).await;
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
            // an error and leasehold undoes or retries it (the scripts are idempotent).
            c.max_command_attempts = 1;
            // In a cluster fred must not follow MOVED/ASK itself: fred 10.1 sends the
            // command after an ASK to the old node again and, once out of attempts, ends
            // its router task, after which every command of the client hangs
            // (docs/cluster.md). With no redirections allowed it answers "Too many
            // redirections" instead (after refreshing its slot map on a MOVED), and
            // leasehold sends the command again: a redirect means it did not run.
            c.max_redirections = 0;
            c.connection_timeout = config.command_timeout;
        });
        let client = builder.build().map_err(Error::from_fred)?;
        let subscriber = subscriber_client(fred_config.clone(), policy.clone())?;
        bounded_init(&client, config.command_timeout).await?;
        if let Err(error) = bounded_init(&subscriber, config.command_timeout).await {
            close_in_background(&client, config.command_timeout);
            return Err(error);
        }
        let mode = pubsub_mode(&client, &config).await;
        let sentinel =
            crate::client::sentinel::watch(&fred_config, &policy, &client, &subscriber, config.command_timeout);
        let client = Self::assemble(client, subscriber, config, true, mode, sentinel);
        client.inner.store.load_scripts().await?;
        who::start(&client.inner.who, client.inner.store.client(), &client.inner.config, true).await;
        Ok(client)
    }

    fn assemble(
        client: FredClient,
        subscriber: SubscriberClient,
        config: ClientConfig,
        owns: bool,
        mode: PubsubMode,
        sentinel: Option<crate::client::sentinel::SentinelWatch>,
    ) -> Client {
        let group_by_slot = client.is_clustered();
        let sharded = mode == PubsubMode::Sharded;
        let reconnects = client.reconnect_rx();
        // In a cluster, classic PUBLISH counts only the subscribers of the node that ran
        // the script, so "nobody listened" says nothing there: every release reads the
        // wait queue (release.lua, ARGV[5]). SPUBLISH counts the subscribers of the
        // shard's primary, where every leasehold waiter's SSUBSCRIBE goes (fred routes
        // it by the channel's slot, to primaries only): its count is as good as
        // PUBLISH's on one server.
        let mut store = LockStore::new(client, config.command_timeout)
            .always_reading_queue(group_by_slot && !sharded)
            .sharded_pubsub(sharded)
            .redisson_waiters(config.redisson_waiters);
        if let Some(watch) = &sentinel {
            // Through Sentinel: lock writes wait while the watch follows a switch.
            store = store.with_write_gate(watch.gate().clone());
        }
        let mut watchdog_config = WatchdogConfig::default();
        watchdog_config.timeout = config.watchdog_timeout;
        watchdog_config.batch_size = config.renew_batch_size;
        watchdog_config.group_by_slot = group_by_slot;
        // In a cluster a shard's primary can change under a live connection (a
        // takeover; the old primary demoted, not killed): fred hears of it only at the
        // next command on that shard, which a fixed-lease holder may never send. Read
        // the slot map every second while holds are held, as Redisson's scanInterval.
        watchdog_config.topology_check = group_by_slot.then_some(lock_core::topology::TOPOLOGY_CHECK);
        let telemetry = Arc::new(crate::telemetry::Telemetry::new(config.metric_label));
        watchdog_config.observer = Some(telemetry.clone());
        // Up or down, and re-made, from fred's events (`Client::health`, the metrics).
        let connection_watch = crate::telemetry::ConnectionWatch::start(store.client(), &subscriber, &telemetry);
        let watchdog = Watchdog::start(store.clone(), watchdog_config);
        // After a reconnect (restart, failover, killed connection; in a cluster also the
        // connection to a newly promoted primary) the server may have lost locks: renew
        // at once, and check every other hold (fixed leases, read-only), so holders hear
        // `lost()` within a round trip of the reconnect instead of at the next period or
        // at the end of their lease.
        watchdog.renew_on_each(reconnects);
        let topology = sharded.then(|| store.client().clone());
        let id = ClientId::new_random();
        let who = who::Identity::new(&id, &config);
        // leasehold made the subscriber connection (from_fred too): it is always named.
        let name = Some(who.connection_name.clone());
        let subscriber = Subscriber::start_named(subscriber, config.command_timeout, mode, topology, name);
        // Validated: at most a year, so it fits.
        let watchdog_lease_ms = u64::try_from(config.watchdog_timeout.as_millis()).unwrap_or(u64::MAX);
        // Both validated by `ClientConfig::validate` (which builds the same ReplicaSync),
        // before any connection was made.
        let sync = config.replica_sync().ok().flatten();
        let fence_token_ttl_ms = lock_core::args::lease_millis(config.fence_token_ttl, "fence token TTL")
            .unwrap_or(crate::ClientConfig::DEFAULT_FENCE_TOKEN_TTL.as_secs() * 1000);
        let fair_keepalive = config.queue_keepalive();
        Client {
            inner: Arc::new(ClientShared {
                id,
                store,
                subscriber,
                watchdog,
                config,
                watchdog_lease_ms,
                sync,
                fence_token_ttl_ms,
                fair_keepalive,
                owns_connection: owns,
                telemetry,
                connection_watch,
                live: crate::client::live::LiveGuards::default(),
                shutdown: parking_lot::Mutex::new(None),
                _sentinel: sentinel,
                runtime: tokio::runtime::Handle::current(),
                election_watchdogs: crate::election::watchdogs::ElectionWatchdogs::default(),
                who,
                stopping: Arc::default(),
            }),
        }
    }

    /// A handle on the reentrant lock `name` (Redisson's `RLock` layout). Cheap: nothing
    /// is sent. Each call makes a new owner (see the crate docs, "Ownership and
    /// reentrancy"). An empty name is reported by the first operation, before anything
    /// is sent.
    pub fn lock(&self, name: impl AsRef<str>) -> Lock {
        Lock::new(self.inner.clone(), &self.full_key(name.as_ref()))
    }

    /// A new candidate of the leader election `name` with the default
    /// [`ElectionConfig`](crate::ElectionConfig) (a 10 s lease, renewed every third of it): see
    /// [`Election`](crate::Election). Cheap: nothing is sent. Each call makes a new
    /// candidate (a new owner), as [`Client::lock`] makes a new owner. An empty name is
    /// reported by the first operation, before anything is sent.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let election = client.election("report-builder");
    /// let leadership = election.campaign("pod-7").await?;
    /// assert!(leadership.term() > 0);
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl AsRef<str>) -> crate::Election {
        self.election_with(name, crate::ElectionConfig::default())
    }

    /// [`Client::election`] with `config` (its lease). An invalid config (a lease under
    /// 30 ms or over a year) is reported by the first operation, before anything is sent.
    pub fn election_with(&self, name: impl AsRef<str>, config: crate::ElectionConfig) -> crate::Election {
        crate::Election::new(self.inner.clone(), &self.full_key(name.as_ref()), config)
    }

    /// A handle on the fenced lock `name`: a reentrant [`Lock`] whose every fresh hold
    /// gets a fencing token, larger than every token issued before for `name` (by any
    /// client or process; see [`FencedLock`]). Cheap: nothing is sent. Each call makes a
    /// new owner, as [`Client::lock`] does.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let lock = client.fenced_lock("ledger:7");
    /// let guard = lock.lock().await?;
    /// // The resource accepts the write only if no later holder wrote already.
    /// let written = guard.fenced_set("ledger:7:balance", "120").await?;
    /// assert!(written.is_written());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_lock(&self, name: impl AsRef<str>) -> FencedLock {
        FencedLock::new(self.inner.clone(), &self.full_key(name.as_ref()))
    }

    /// A handle on the fair lock `name`: a reentrant lock granted strictly in the order
    /// its waiters queued, across every client and process (Redisson's `RFairLock`
    /// layout, so a Redisson fair lock on the same name shares the queue). Cheap:
    /// nothing is sent. Each call makes a new owner, as [`Client::lock`] does. See
    /// [`FairLock`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let lock = client.fair_lock("printer:3");
    /// // Queues behind everyone who asked first, in any process.
    /// if let Some(guard) = lock.try_lock_for(std::time::Duration::from_secs(5)).await? {
    ///     // critical section
    ///     guard.unlock().await?;
    /// } // a wait that ran out left no queue entry behind
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: impl AsRef<str>) -> FairLock {
        FairLock::new(self.inner.clone(), &self.full_key(name.as_ref()))
    }

    /// A handle on the read/write lock `name`, in Redisson's `RReadWriteLock` layout
    /// (see [`ReadWriteLock`](crate::ReadWriteLock)). Cheap: nothing is sent. Each call
    /// makes a new owner, as [`Client::lock`] does.
    pub fn read_write_lock(&self, name: impl AsRef<str>) -> crate::ReadWriteLock {
        crate::ReadWriteLock::new(self.inner.clone(), &self.full_key(name.as_ref()))
    }

    /// A handle on the minimal lock `name` (`SET NX PX` and compare-and-delete; not
    /// reentrant, not renewed). See [`SimpleLock`].
    pub fn simple_lock(&self, name: impl AsRef<str>) -> SimpleLock {
        SimpleLock::new(self.inner.clone(), self.full_key(name.as_ref()).into_owned())
    }

    /// A handle on the count-down latch `name`, in Redisson's `RCountDownLatch` layout
    /// (see [`CountDownLatch`](crate::CountDownLatch)). Cheap: nothing is sent. A latch
    /// handle is not an owner: every handle on `name` is the same latch. An empty name
    /// (and, in a cluster, a name whose channel would be in another slot) is reported
    /// by the first operation, before anything is sent.
    pub fn count_down_latch(&self, name: impl AsRef<str>) -> crate::CountDownLatch {
        crate::CountDownLatch::new(self.inner.clone(), &self.full_key(name.as_ref()))
    }

    /// A [`MultiLock`](crate::MultiLock) over the reentrant locks `names` of this client
    /// (one new owner per name, as [`Client::lock`] makes), in any order: they are taken
    /// in one canonical order, all or none. Cheap: nothing is sent; bad input (no name,
    /// a name twice, more than [`MultiLock::MAX_MEMBERS`](crate::MultiLock::MAX_MEMBERS),
    /// an empty name) is reported by the first operation, before anything is sent.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// // A transfer: the same two accounts in either order never deadlock.
    /// let accounts = client.multi_lock(["account:7", "account:3"]);
    /// let guard = accounts.lock().await?;
    /// // ... move the money ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock<I>(&self, names: I) -> crate::MultiLock
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        crate::MultiLock::new(names.into_iter().map(|name| self.lock(name)).collect::<Vec<_>>())
    }

    /// A handle on the semaphore `name`, in Redisson's `RSemaphore` layout (see
    /// [`Semaphore`](crate::Semaphore)). Cheap: nothing is sent. An empty name is
    /// reported by the first operation, before anything is sent.
    pub fn semaphore(&self, name: impl AsRef<str>) -> crate::Semaphore {
        crate::Semaphore::new(self.inner.clone(), self.full_key(name.as_ref()).into_owned())
    }

    /// A handle on the permit-expirable semaphore `name`, in Redisson's
    /// `RPermitExpirableSemaphore` layout (see
    /// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)). Cheap: nothing is
    /// sent. An empty name is reported by the first operation, before anything is sent.
    pub fn permit_expirable_semaphore(&self, name: impl AsRef<str>) -> crate::PermitExpirableSemaphore {
        crate::PermitExpirableSemaphore::new(self.inner.clone(), self.full_key(name.as_ref()).into_owned())
    }

    /// The lock key of `name`: borrowed when there is no prefix to prepend.
    fn full_key<'a>(&self, name: &'a str) -> std::borrow::Cow<'a, str> {
        match &self.inner.config.key_prefix {
            // An empty name stays empty so that it is rejected, prefix or not.
            Some(prefix) if !name.is_empty() => std::borrow::Cow::Owned(format!("{prefix}{name}")),
            _ => std::borrow::Cow::Borrowed(name),
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

    /// The fred client leasehold sends its lock commands on: for diagnostics and for
    /// commands that must share leasehold's connection (a `WATCH` of a lock key, say), not
    /// as the application's general Redis client.
    ///
    /// What it is, when leasehold made it (`connect`, `ClientBuilder::connect`):
    /// - **no command timeout** (fred's default is none): leasehold bounds each of its own
    ///   calls with `tokio::time::timeout`, but a command sent here during an outage waits
    ///   until the connection is back, however long that is. Wrap every call in
    ///   `tokio::time::timeout` or use fred's per-command options.
    /// - **one attempt** (`max_command_attempts = 1`): a command in flight when the
    ///   connection drops fails with an error instead of being sent again.
    /// - **no redirects** (`max_redirections = 0`): in a cluster, a `MOVED` or `ASK` is an
    ///   error ("Too many redirections"), not followed; send the command again yourself.
    /// - **one connection per node, shared with every lock call**: a blocking command
    ///   (`BLPOP`, `XREAD BLOCK`, `WAIT`) or a slow one (`KEYS`) holds up every lock and
    ///   unlock of the process behind it, renewals included.
    /// - Closed (`QUIT`) by [`Client::shutdown`] and when the last clone of the
    ///   `Client` is dropped: a clone of this fred client kept beyond that stops working.
    ///
    /// For the application's own keys, build a fred client of its own
    /// (`fred::prelude::Builder`) with a command timeout
    /// (`PerformanceConfig::default_command_timeout`), a reconnect policy and the retry and
    /// redirect settings it wants; or, to share one connection pool, build it first and
    /// hand it to [`Client::from_fred`], in which case this returns that client, with its
    /// own settings (docs/architecture/fred-settings.md says what leasehold needs of it).
    pub fn fred(&self) -> &FredClient {
        self.inner.store.client()
    }

    /// One snapshot of what this client (every clone of it) did and holds: acquires,
    /// waits, timeouts, losses, renewals and wake-ups since it was made; guards, waiters
    /// and renewed holds now. Cheap (atomic reads, and one short lock of the watchdog's
    /// table); see [`ClientStats`](crate::ClientStats) and `docs/observability.md`.
    ///
    /// The watchdog's and the subscriber's detailed counters are in it too
    /// ([`ClientStats::watchdog`](crate::ClientStats::watchdog),
    /// [`ClientStats::subscriber`](crate::ClientStats::subscriber)). Per-name
    /// diagnostics stay methods: [`Client::local_waiters`],
    /// [`Client::subscribed_channels`].
    pub fn stats(&self) -> crate::ClientStats {
        let mut stats = crate::ClientStats::default();
        self.inner.telemetry.fill(&mut stats);
        let watchdog = self.inner.watchdog.stats();
        stats.lost = watchdog.lost;
        stats.renewals = watchdog.renewed;
        stats.watchdog_locks = watchdog.registered;
        stats.watchdog = watchdog;
        stats.subscriber = self.inner.subscriber.stats();
        stats
    }

    /// How this client's waiters subscribe: [`PubsubMode::Sharded`] (`SSUBSCRIBE`, and
    /// the scripts `SPUBLISH`) in a cluster whose servers have sharded pub/sub (Redis
    /// 7.0 or later), else [`PubsubMode::Classic`].
    pub fn pubsub_mode(&self) -> PubsubMode {
        self.inner.subscriber.mode()
    }

    /// The channels the server has confirmed this client's subscription to, sorted: the
    /// release channels of the locks its tasks wait for, with their queue channels. A
    /// channel stays subscribed for a second after its last waiter left; empty when
    /// nobody has waited for that long.
    pub fn subscribed_channels(&self) -> Vec<String> {
        self.inner.subscriber.active_channels()
    }

    /// How many of this client's tasks are queued waiting for the lock `name` now (the
    /// client's key prefix is applied, as in [`Client::lock`]).
    pub fn local_waiters(&self, name: impl AsRef<str>) -> usize {
        match lock_core::LockNames::new(&self.full_key(name.as_ref())) {
            Ok(names) => self.inner.subscriber.lock_waiters(names.channel(), names.key()),
            Err(_) => 0,
        }
    }

    /// A graceful exit, for every clone of this client at once:
    ///
    /// 0. ends every wait in progress of this client's handles (a `lock()`, a
    ///    `campaign`, a semaphore's `acquire`...) with
    ///    [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown), and waits (within one
    ///    command timeout, alongside step 1) for those queued on the server to leave
    ///    their queue, so that no release hands the lock (an election's lead) to a
    ///    waiter that is gone;
    /// 1. gives back every hold taken through this client's handles (every live guard of a
    ///    [`Lock`], [`FencedLock`], [`FairLock`], [`SimpleLock`], a read/write lock's
    ///    either side, a multi-lock's members, and every live
    ///    [`Permit`](crate::Permit), forgotten ones included; not those
    ///    [detached](crate::LockGuard::detach)): each owner's holds set to 0, each simple
    ///    lock compare-and-deleted, each permit released by its id, concurrently and best
    ///    effort, all within one command timeout, so the keys are gone and waiters
    ///    elsewhere are woken by the usual unlock message;
    /// 2. refuses every later call of the client with
    ///    [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown), nothing sent;
    /// 3. stops the background tasks: the watchdog (no renewal or check is sent
    ///    afterwards), the subscriber (its waiters are woken once), the Sentinel watch;
    /// 4. quits the connections (`QUIT`, within one command timeout): the subscriber
    ///    connection, and the command connection if leasehold made it (a fred client
    ///    given to [`Client::from_fred`] is left open, as it always is).
    ///
    /// Guards still alive afterwards hold nothing: [`LockGuard::is_lost`](crate::LockGuard::is_lost)
    /// (and [`Permit::is_lost`](crate::Permit::is_lost)) is `true` as soon as this
    /// returns, their `unlock` (`release`) fails with `ErrorKind::Shutdown` without sending
    /// anything, and dropping them sends nothing. A lock whose release failed or did not
    /// answer in time is no longer renewed and expires with its lease. A wait whose
    /// queue entry could not be removed in that time (a server that does not answer)
    /// leaves it to expire with its keep-alive, as a waiter that died. A wait started
    /// after step 0 began fails at once, nothing sent; one whose first attempt was in
    /// flight as it began is not waited for (its queue entry, if that attempt queued,
    /// expires with its keep-alive). An acquire racing with the
    /// shutdown may
    /// take a lock after step 1: it is not renewed and expires with its lease. Calling it
    /// again, from any clone, waits for the first call to finish and answers `Ok`.
    ///
    /// # Errors
    /// The first release that failed, or [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
    /// when the releases did not all answer within the command timeout. The client is
    /// shut down either way.
    ///
    /// # Cancel safety
    /// The shutdown runs in a task of its own on the current runtime: dropping the
    /// future does not stop it (it completes in the background), and a later call
    /// waits for it.
    pub async fn shutdown(&self) -> Result<()> {
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        let earlier = {
            let mut state = self.inner.shutdown.lock();
            match state.as_ref() {
                Some(earlier) => Some(earlier.clone()),
                None => {
                    *state = Some(done_rx);
                    None
                }
            }
        };
        if let Some(mut earlier) = earlier {
            // The first call's task ends by sending `true`; a dropped sender (its task
            // cancelled by a runtime shutting down) ends the wait too.
            let _ = earlier.wait_for(|done| *done).await;
            return Ok(());
        }
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            let result = inner.shut_down().await;
            done_tx.send_replace(true);
            result
        });
        task.await.unwrap_or_else(|_| Err(Error::new(ErrorKind::Shutdown, "the shutdown task was cancelled")))
    }

    /// Whether [`Client::shutdown`] was called (on any clone).
    pub fn is_shut_down(&self) -> bool {
        self.inner.shutdown.lock().is_some()
    }
}

impl ClientBuilder {
    /// Validates the settings, connects both connections (commands and pub/sub) and
    /// starts the watchdog and subscriber tasks on the current runtime.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a bad URL or
    /// setting (nothing is sent); [`ErrorKind::Connection`](crate::ErrorKind::Connection)
    /// or [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) when Redis cannot be reached
    /// within the command timeout.
    ///
    /// # How long it takes
    /// Each step (the command connection, the subscriber connection, in a cluster the
    /// pub/sub mode, the scripts, the client's description) is bounded by the command
    /// timeout. A server that does not answer fails the step it hangs in after one
    /// command timeout, and what was made is closed in the background: the `QUIT` of a
    /// half-made connection never adds a second timeout. To bound the whole call by less,
    /// wrap it in `tokio::time::timeout` (dropping the future is safe, below).
    ///
    /// # Cancel safety
    /// Dropping the future drops the half-made connections.
    pub async fn connect(self) -> Result<Client> {
        let (fred_config, policy, config) = self.into_parts()?;
        Client::connect_with(fred_config, policy, config).await
    }
}

/// Redisson's `shardedSubscriptionMode`. AUTO: sharded pub/sub in a cluster whose
/// servers know `SPUBLISH` (`COMMAND INFO SPUBLISH` names it; when the user may not run
/// `COMMAND INFO`, the server version fred read at connect, 7.0 or later), classic
/// pub/sub otherwise. Always classic on a standalone or Sentinel-managed server (where
/// classic pub/sub reaches every subscriber anyway).
async fn pubsub_mode(client: &FredClient, config: &ClientConfig) -> PubsubMode {
    use fred::types::{ClusterHash, CustomCommand, Value};
    if !client.is_clustered() {
        return PubsubMode::Classic;
    }
    match config.sharded_subscription_mode {
        ShardedSubscriptionMode::Off => return PubsubMode::Classic,
        ShardedSubscriptionMode::On => return PubsubMode::Sharded,
        _ => {}
    }
    let timeout = config.command_timeout;
    let info = client.custom::<Value, &str>(
        CustomCommand::new_static("COMMAND", ClusterHash::Random, false),
        vec!["INFO", "SPUBLISH"],
    );
    let known = match tokio::time::timeout(timeout, info).await {
        // One entry per command named: nil for a command the server does not know.
        Ok(Ok(Value::Array(entries))) => Some(entries.first().is_some_and(|entry| !entry.is_null())),
        Ok(Ok(_)) => None,
        Ok(Err(error)) => {
            tracing::debug!(
                target: crate::telemetry::CLIENT_TARGET,
                %error,
                "COMMAND INFO SPUBLISH failed; going by the server version",
            );
            None
        }
        Err(_) => None,
    };
    let sharded = known.unwrap_or_else(|| client.server_version().is_some_and(|version| version.major >= 7));
    if sharded {
        PubsubMode::Sharded
    } else {
        PubsubMode::Classic
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

/// Connects a client leasehold made; on failure closes it (stopping its reconnects) in
/// the background, so the caller hears of the failure after one `timeout`, not two.
async fn bounded_init<C: ClientLike + Clone + 'static>(client: &C, timeout: Duration) -> Result<()> {
    let result = connect_only(client, timeout).await;
    if result.is_err() {
        close_in_background(client, timeout);
    }
    result
}

/// Connects `client` within `timeout`, closing nothing on failure.
async fn connect_only<C: ClientLike>(client: &C, timeout: Duration) -> Result<()> {
    match tokio::time::timeout(timeout, client.init()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(Error::from_fred(error)),
        Err(_) => Err(Error::new(ErrorKind::Timeout, format!("could not connect to Redis within {timeout:?}"))),
    }
}

/// Closes a client leasehold made: `QUIT`, bounded, which also ends its reconnect loop.
/// In a task of its own: a server that never answered the connect would hold the
/// `QUIT` for the whole `timeout` again, and the caller's bound is kept (clean-up goes
/// to the background).
fn close_in_background<C: ClientLike + Clone + 'static>(client: &C, timeout: Duration) {
    let client = client.clone();
    drop(tokio::spawn(async move {
        let _ = tokio::time::timeout(timeout, client.quit()).await;
    }));
}
