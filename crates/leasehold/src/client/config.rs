//! Client configuration and its builder.

use std::time::Duration;

use fred::prelude::{Config, ReconnectPolicy};
use lock_core::{args, Error, Result};

/// Whether waiters use sharded pub/sub in a cluster (Redisson's
/// `shardedSubscriptionMode`; `docs/cluster.md` §5). On a standalone or
/// Sentinel-managed server waiters always use classic pub/sub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ShardedSubscriptionMode {
    /// Sharded in a cluster whose servers have it (`COMMAND INFO SPUBLISH`, else the
    /// server version: 7.0 or later), classic otherwise. The default.
    #[default]
    Auto,
    /// Sharded in any cluster (`SSUBSCRIBE` fails on a server before 7.0: waits then
    /// degrade to the TTL timers).
    On,
    /// Classic (`SUBSCRIBE`, `PUBLISH`) everywhere, e.g. to share releases with peers
    /// that use classic pub/sub on a 7.0 cluster.
    Off,
}

/// How a [`Client`](crate::Client) behaves. Built with [`Client::builder`](crate::Client::builder).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Prepended to every lock name to form its key. Default: none. Derived keys keep
    /// Redisson's shape and so do not *start* with it: the channel of `PREFIX` + `NAME`
    /// is `redisson_lock__channel:{PREFIXNAME}` (match `*PREFIX*` when scanning).
    pub key_prefix: Option<String>,
    /// The lease of locks taken without an explicit lease, renewed every third of it.
    /// Default: 30 s.
    pub watchdog_timeout: Duration,
    /// Bound on each Redis call (fred ignores per-command timeouts on scripts, so
    /// leasehold applies its own). Must be shorter than `watchdog_timeout / 3`.
    /// Default: 5 s, or, when a shortened `watchdog_timeout` leaves no room for 5 s,
    /// derived from it ([`ClientConfig::resolved`]): `watchdog_timeout / 6` (half a
    /// renewal period). A value set with [`ClientBuilder::command_timeout`], or any
    /// value other than 5 s written here, is explicit and is never changed: an invalid
    /// pair is refused.
    pub command_timeout: Duration,
    /// How long after its first send an unlock (or the undo of an abandoned acquire)
    /// whose outcome is unknown may still be retried. Releases are idempotent (each
    /// sets the owner's hold count to an absolute value), so a retry is always safe; the
    /// window only keeps a failing unlock from lingering. At least `command_timeout`.
    /// Default: 10 s.
    pub replay_window: Duration,
    /// Most keys per renewal call. Default: 100.
    pub renew_batch_size: usize,
    /// Replicas that must acknowledge every [`Lock`](crate::Lock) and
    /// [`FencedLock`](crate::FencedLock) acquire (`WAIT`, pipelined behind the acquire
    /// script); fewer within `sync_timeout` give the hold back and fail with
    /// [`ErrorKind::ReplicaSync`](crate::ErrorKind::ReplicaSync). Default: 0 (nothing extra
    /// is sent). Releases and renewals never wait.
    pub sync_replicas: u32,
    /// How long an acquire waits for `sync_replicas` acknowledgements: at least 1 ms and
    /// shorter than `command_timeout` (checked only when `sync_replicas > 0`). Default: 1 s.
    pub sync_timeout: Duration,
    /// TTL of a fenced lock's token counter, set again whenever a token is issued (see
    /// [`ClientConfig::DEFAULT_FENCE_TOKEN_TTL`] for why tokens stay monotonic when it expires). 1 ms to
    /// 1 year. Default: 7 days.
    pub fence_token_ttl: Duration,
    /// How long a queued waiter's entry lives without a refresh (live waiters refresh it
    /// every third of this): a [`FairLock`](crate::FairLock)'s, and a waiting
    /// [`Lock`](crate::Lock)'s (whose hand-over to a waiter that died is also cut to
    /// what is left of it). More than 1.5 × the command
    /// timeout, at most 1 year. Default (`None`): 10 s ([`ClientConfig::DEFAULT_QUEUE_KEEPALIVE`]),
    /// or twice the command timeout when that is longer
    /// ([`ClientConfig::queue_keepalive`]).
    pub queue_keepalive: Option<Duration>,
    /// Whether waiters use sharded pub/sub in a cluster. Default:
    /// [`ShardedSubscriptionMode::Auto`].
    pub sharded_subscription_mode: ShardedSubscriptionMode,
    /// Whether Redisson (Java) clients may wait on the same lock names. `true`: every
    /// last release publishes Redisson's unlock message, as Redisson's own unlock does,
    /// so a Redisson waiter wakes at once. `false`: a release publishes only when a
    /// leasehold waiter is waiting for it (leasehold waiters flag the holder they wait
    /// for, `docs/architecture/wait-queue.md`, "The waiter flag"), which saves one command per uncontended
    /// release; a Redisson waiter then sleeps until the TTL it was told runs out.
    /// Exclusion with Redisson holds either way. Default: `true`.
    pub redisson_waiters: bool,
    /// Maps a lock's key to a bounded `lock` label of the metrics (feature `metrics`);
    /// `None` (the default), or an answer of `None`, adds no `lock` label. Set with
    /// [`ClientBuilder::metric_label`].
    pub metric_label: Option<fn(&str) -> Option<&'static str>>,
    /// The service this client works for, shown beside its holds
    /// (`leasehold_client:{UUID}`) and in its connections' names. Default (`None`): the
    /// environment variable `LEASEHOLD_SERVICE`, else the executable's file name. Set
    /// with [`ClientBuilder::service_name`].
    pub service_name: Option<String>,
    /// Set by [`ClientBuilder::command_timeout`]: the command timeout is explicit even
    /// when it is the default value, so it is never derived.
    explicit_command_timeout: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            key_prefix: None,
            watchdog_timeout: ClientConfig::DEFAULT_WATCHDOG_TIMEOUT,
            command_timeout: ClientConfig::DEFAULT_COMMAND_TIMEOUT,
            replay_window: ClientConfig::DEFAULT_REPLAY_WINDOW,
            renew_batch_size: ClientConfig::DEFAULT_RENEW_BATCH,
            sync_replicas: 0,
            sync_timeout: ClientConfig::DEFAULT_SYNC_TIMEOUT,
            fence_token_ttl: ClientConfig::DEFAULT_FENCE_TOKEN_TTL,
            queue_keepalive: None,
            sharded_subscription_mode: ShardedSubscriptionMode::Auto,
            redisson_waiters: true,
            metric_label: None,
            service_name: None,
            explicit_command_timeout: false,
        }
    }
}

impl ClientConfig {
    /// Default watchdog timeout: the lease of watchdog-mode locks (Redisson's 30 s).
    pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default bound on each Redis call.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default time within which an unlock whose outcome is unknown may be retried.
    pub const DEFAULT_REPLAY_WINDOW: Duration = Duration::from_secs(10);
    /// Default number of keys per renewal script call.
    pub const DEFAULT_RENEW_BATCH: usize = 100;
    /// Default time an acquire waits for replica acknowledgements when
    /// [`ClientBuilder::sync_replicas`] asks for some (Redisson's `slavesSyncTimeout`).
    pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(1);
    /// Default TTL of a fenced lock's token counter `redisson_lock_token:{NAME}`, set again
    /// whenever a token is issued: 7 days. The TTL only bounds memory (one small key per name
    /// fenced in the last 7 days, not one per name ever used: Redisson's counters never
    /// expire, its issue 6510). Tokens stay monotonic when a counter expires, because a
    /// missing counter restarts from the server's clock; while it exists it also covers a
    /// server clock stepped back, and 7 days is far longer than any clock correction.
    pub const DEFAULT_FENCE_TOKEN_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

    /// Default keep-alive of a waiter's queue entry (a [`FairLock`](crate::FairLock)'s, and
    /// a waiting [`Lock`](crate::Lock)'s): 10 s. A live waiter refreshes its entry at least
    /// every third of it; a waiter that died (a killed process, a lost connection) stops
    /// blocking the queue once its entry is that old. It must exceed 1.5 × the command
    /// timeout, so that a refresh sent a third of the keep-alive after the last one lands in
    /// time even when it takes the whole command timeout: 10 s is the round value that fits
    /// the default 5 s command timeout (5 s would not). Redisson's `RFairLock` keeps a
    /// queued entry 5 minutes.
    pub const DEFAULT_QUEUE_KEEPALIVE: Duration = Duration::from_secs(10);

    /// Checks every setting; called by the builder before anything connects.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming the setting.
    ///
    /// The rules: every duration is at least 1 ms and at most a year
    /// ([`MAX_LEASE`](lock_core::args::MAX_LEASE)), so no deadline can overflow the
    /// clock; the watchdog timeout is at least 3 ms; the command timeout is shorter than
    /// a renewal period (`watchdog_timeout / 3`), so a renewal that times out can still be
    /// retried before the lease runs out; the replay window is at least the command
    /// timeout, so an unlock that timed out can be retried at least once; the renew
    /// batch size is at least 1; with `sync_replicas > 0` the sync timeout is at least
    /// 1 ms and shorter than the command timeout (the acquire script and its `WAIT` are
    /// bounded together by the command timeout); the fence token TTL is 1 ms to 1 year;
    /// the queue keep-alive is more than 1.5 × the command timeout, so a waiter's
    /// refresh lands before its queue entry expires.
    ///
    /// The rules apply to the settings in effect ([`ClientConfig::resolved`]): a
    /// default command timeout that a shortened watchdog timeout leaves no room for is
    /// derived, not refused.
    pub fn validate(&self) -> Result<()> {
        self.clone().resolved().map(drop)
    }

    /// The settings in effect, validated: the command timeout, when it was not set
    /// explicitly (it is still the default 5 s and was not set through
    /// [`ClientBuilder::command_timeout`]) and does not fit a renewal period, becomes
    /// `watchdog_timeout / 6` (half a renewal period, at least 1 ms); everything else is
    /// as given. [`Client::config`](crate::Client::config) shows the result.
    ///
    /// # Errors
    /// As [`ClientConfig::validate`].
    pub fn resolved(mut self) -> Result<Self> {
        if !self.explicit_command_timeout
            && self.command_timeout == ClientConfig::DEFAULT_COMMAND_TIMEOUT
            && self.command_timeout >= self.watchdog_timeout / 3
        {
            self.command_timeout = (self.watchdog_timeout / 6).max(Duration::from_millis(1));
        }
        self.check()?;
        Ok(self)
    }

    /// The rules of [`ClientConfig::validate`], on the settings exactly as they are.
    fn check(&self) -> Result<()> {
        args::lease_millis(self.watchdog_timeout, "watchdog timeout")?;
        if self.watchdog_timeout < Duration::from_millis(3) {
            return Err(Error::invalid_argument("watchdog timeout must be at least 3 ms"));
        }
        args::lease_millis(self.command_timeout, "command timeout")?;
        let period = self.watchdog_timeout / 3;
        if self.command_timeout >= period {
            return Err(Error::invalid_argument(format!(
                "command timeout ({:?}) must be shorter than the renewal period (watchdog timeout / 3 = {period:?})",
                self.command_timeout
            )));
        }
        args::lease_millis(self.replay_window, "replay window")?;
        if self.replay_window < self.command_timeout {
            return Err(Error::invalid_argument(format!(
                "replay window ({:?}) must be at least the command timeout ({:?})",
                self.replay_window, self.command_timeout
            )));
        }
        if self.renew_batch_size == 0 {
            return Err(Error::invalid_argument("renew batch size must be at least 1"));
        }
        if self.sync_replicas > 0 {
            args::lease_millis(self.sync_timeout, "replica sync timeout")?;
            if self.sync_timeout >= self.command_timeout {
                return Err(Error::invalid_argument(format!(
                    "replica sync timeout ({:?}) must be shorter than the command timeout ({:?})",
                    self.sync_timeout, self.command_timeout
                )));
            }
        }
        args::lease_millis(self.fence_token_ttl, "fence token TTL")?;
        let keepalive = self.queue_keepalive();
        args::lease_millis(keepalive, "queue keep-alive")?;
        // A refresh goes out a third of the keep-alive after the last one and may take
        // the whole command timeout: it must still land before the entry expires.
        if self.command_timeout.saturating_mul(3) >= keepalive.saturating_mul(2) {
            return Err(Error::invalid_argument(format!(
                "queue keep-alive ({keepalive:?}) must be more than 1.5 x the command timeout ({:?})",
                self.command_timeout
            )));
        }
        self.replica_sync()?;
        Ok(())
    }

    /// The queue keep-alive in effect: `queue_keepalive`, else 10 s
    /// ([`ClientConfig::DEFAULT_QUEUE_KEEPALIVE`]) or twice the command timeout, whichever is longer.
    pub fn queue_keepalive(&self) -> Duration {
        self.queue_keepalive
            .unwrap_or_else(|| ClientConfig::DEFAULT_QUEUE_KEEPALIVE.max(self.command_timeout.saturating_mul(2)))
    }

    /// The replica acknowledgement every acquire asks for, `None` when `sync_replicas`
    /// is 0. Valid once [`ClientConfig::validate`] passed.
    pub(crate) fn replica_sync(&self) -> Result<Option<lock_core::ReplicaSync>> {
        if self.sync_replicas == 0 {
            return Ok(None);
        }
        lock_core::ReplicaSync::new(self.sync_replicas, self.sync_timeout).map(Some)
    }
}

/// Builds a [`Client`](crate::Client): where Redis is, and how locks behave.
///
/// ```no_run
/// # async fn demo() -> leasehold::Result<()> {
/// use std::time::Duration;
/// let client = leasehold::Client::builder()
///     .url("redis://127.0.0.1:6379")
///     .key_prefix("shop:")
///     .watchdog_timeout(Duration::from_secs(10))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    url: Option<String>,
    fred_config: Option<Config>,
    reconnect: Option<ReconnectPolicy>,
    config: ClientConfig,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials: the URL's user info is masked, and a fred `Config`
        // (which holds the password) is only said to be there.
        f.debug_struct("ClientBuilder")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("fred_config", &self.fred_config.as_ref().map(|_| "…"))
            .field("reconnect", &self.reconnect)
            .field("config", &self.config)
            .finish()
    }
}

/// `url` with any `user:password@` replaced by `***@`, for messages and `Debug`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    // The authority ends at the first '/', '?' or '#'; credentials end at its last '@'.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

impl ClientBuilder {
    /// The server's URL (`redis://[user:password@]host:port/db`, `rediss://…` (needs the
    /// `tls-rustls` or `tls-native-tls` feature), a cluster as
    /// `redis-cluster://host:port?node=host:port&…` (any reachable nodes), or a primary
    /// found through Sentinel as
    /// `redis-sentinel://sentinel:port?sentinelServiceName=NAME&node=sentinel:port&…`;
    /// see `docs/cluster.md`). Default: `redis://127.0.0.1:6379`.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// A complete fred configuration (takes precedence over [`ClientBuilder::url`]).
    pub fn fred_config(mut self, config: Config) -> Self {
        self.fred_config = Some(config);
        self
    }

    /// The reconnect policy of both connections. Default: exponential back-off from
    /// 50 ms to 2 s, retrying forever (fred's own default is *no* reconnect).
    pub fn reconnect_policy(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = Some(policy);
        self
    }

    /// Prefix prepended to every lock name. Default: none.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = Some(prefix.into());
        self
    }

    /// Lease of watchdog-mode locks, renewed every third of it. Default: 30 s.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// Bound on each Redis call; shorter than `watchdog_timeout / 3`. Default: 5 s, or
    /// `watchdog_timeout / 6` when a shortened watchdog timeout leaves no room for 5 s
    /// ([`ClientConfig::resolved`]). A timeout set here is never derived: one that does
    /// not fit the watchdog timeout is refused by [`ClientBuilder::connect`].
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self.config.explicit_command_timeout = true;
        self
    }

    /// How long an unlock whose outcome is unknown keeps being retried; at least the
    /// command timeout. Default: 10 s.
    pub fn replay_window(mut self, window: Duration) -> Self {
        self.config.replay_window = window;
        self
    }

    /// Most keys per renewal call. Default: 100.
    pub fn renew_batch_size(mut self, size: usize) -> Self {
        self.config.renew_batch_size = size;
        self
    }

    /// Gives the metrics (feature `metrics`) a `lock` label for the locks `label` names:
    /// it is called with the lock's key (the client's key prefix included) at each
    /// recorded event and answers a label from a small fixed set, or `None` for no `lock`
    /// label. Without it no metric has a `lock` label: lock names are unbounded (one per
    /// order id, say), and every label value is a time series to the metrics backend.
    ///
    /// ```
    /// let builder = leasehold::Client::builder()
    ///     .metric_label(|key| key.starts_with("report:").then_some("report"));
    /// ```
    pub fn metric_label(mut self, label: fn(&str) -> Option<&'static str>) -> Self {
        self.config.metric_label = Some(label);
        self
    }

    /// The service this client works for: written in its description beside its holds
    /// (`leasehold_client:{UUID}`, which `leasehold status` shows) and in its connections'
    /// names (`CLIENT SETNAME leasehold:<UUID>:<service>`, each character outside
    /// `[A-Za-z0-9._-]` replaced by `_`). Default: the environment variable
    /// `LEASEHOLD_SERVICE`, else the executable's file name.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.config.service_name = Some(name.into());
        self
    }

    /// Replicas that must acknowledge every acquire of a [`Lock`](crate::Lock) or
    /// [`FencedLock`](crate::FencedLock), and how long the primary may wait for them.
    /// After each acquire script the client sends `WAIT replicas timeout` on the same
    /// connection, pipelined behind it; when fewer replicas acknowledged, the hold is given
    /// back and the call fails with [`ErrorKind::ReplicaSync`](crate::ErrorKind::ReplicaSync).
    /// `replicas = 0` (the default) sends nothing extra. `timeout` must be at least 1 ms
    /// and shorter than the command timeout (checked by [`ClientBuilder::connect`]).
    ///
    /// `WAIT` holds up the client's command connection while it waits: with a lagging
    /// replica, other commands of the client (renewals included) queue behind it. Releases
    /// never wait (a release that did not replicate only makes the lock look held longer
    /// on a promoted replica). [`SimpleLock`](crate::SimpleLock) never waits.
    pub fn sync_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.config.sync_replicas = replicas;
        self.config.sync_timeout = timeout;
        self
    }

    /// TTL of fenced locks' token counters, set again whenever a token is issued.
    /// Default: 7 days ([`ClientConfig::DEFAULT_FENCE_TOKEN_TTL`]).
    pub fn fence_token_ttl(mut self, ttl: Duration) -> Self {
        self.config.fence_token_ttl = ttl;
        self
    }

    /// How long a queued waiter's entry ([`FairLock`](crate::FairLock) and waiting
    /// [`Lock`](crate::Lock)) lives without a refresh: a waiter that died stops blocking
    /// the queue after this. Live waiters
    /// refresh every third of it. More than 1.5 × the command timeout (checked by
    /// [`ClientBuilder::connect`]). Default: 10 s ([`ClientConfig::DEFAULT_QUEUE_KEEPALIVE`]).
    pub fn queue_keepalive(mut self, keepalive: Duration) -> Self {
        self.config.queue_keepalive = Some(keepalive);
        self
    }

    /// Whether waiters use sharded pub/sub (`SSUBSCRIBE`, and the scripts `SPUBLISH`)
    /// in a cluster. Default: [`ShardedSubscriptionMode::Auto`].
    pub fn sharded_subscription_mode(mut self, mode: ShardedSubscriptionMode) -> Self {
        self.config.sharded_subscription_mode = mode;
        self
    }

    /// Whether Redisson clients may wait on the same lock names: `false` makes an
    /// uncontended release one command cheaper (no `PUBLISH`) at the price of Redisson
    /// waiters waking only when their lease estimate runs out
    /// ([`ClientConfig::redisson_waiters`]). leasehold waiters of every client are woken
    /// either way. Default: `true`.
    pub fn redisson_waiters(mut self, wake: bool) -> Self {
        self.config.redisson_waiters = wake;
        self
    }

    /// Validates the settings and resolves the connection settings, sending nothing:
    /// the first half of [`ClientBuilder::connect`] (which lives beside the facade in
    /// `client/mod.rs`, so that this file does not import the client it configures).
    pub(crate) fn into_parts(self) -> Result<(Config, ReconnectPolicy, ClientConfig)> {
        let config = self.config.resolved()?;
        if let (None, Some(url)) = (&self.fred_config, &self.url) {
            crate::client::tls::require_tls_support(url, crate::client::tls::TLS_COMPILED)?;
        }
        let fred_config = match (self.fred_config, self.url) {
            (Some(config), _) => config,
            (None, Some(url)) => Config::from_url(&url).map_err(|e| {
                // fred's details may quote the URL: mask credentials there too.
                let details = e.details().replace(url.as_str(), &redact_url(&url));
                Error::invalid_argument(format!("bad Redis URL {:?}: {details}", redact_url(&url)))
            })?,
            (None, None) => Config::default(),
        };
        let policy = self.reconnect.unwrap_or_else(default_reconnect_policy);
        Ok((fred_config, policy, config))
    }
}

/// Exponential back-off from 50 ms to 2 s, forever.
pub(crate) fn default_reconnect_policy() -> ReconnectPolicy {
    ReconnectPolicy::new_exponential(0, 50, 2_000, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(watchdog_ms: u64, command_ms: u64, replay_ms: u64) -> ClientConfig {
        ClientConfig {
            watchdog_timeout: Duration::from_millis(watchdog_ms),
            command_timeout: Duration::from_millis(command_ms),
            replay_window: Duration::from_millis(replay_ms),
            ..ClientConfig::default()
        }
    }

    #[test]
    fn credentials_never_reach_messages_or_debug() {
        assert_eq!(redact_url("redis://user:s3cret@host:6379/0"), "redis://***@host:6379/0");
        assert_eq!(redact_url("rediss://:s3cret@host"), "rediss://***@host");
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        let builder = ClientBuilder::default().url("redis://user:s3cret@host:6379");
        assert!(!format!("{builder:?}").contains("s3cret"));
    }

    #[test]
    fn the_defaults_are_valid() {
        assert!(ClientConfig::default().validate().is_ok());
    }

    #[test]
    fn a_command_timeout_must_fit_in_a_renewal_period() {
        assert!(config(30_000, 9_999, 10_000).validate().is_ok());
        let err = config(30_000, 10_000, 10_000).validate().expect_err("period is 10 s");
        assert!(err.is_invalid_argument() && err.to_string().contains("renewal period"), "{err}");
    }

    #[test]
    fn a_queue_keepalive_must_outlast_a_refresh() {
        let keepalive = |command_ms, keepalive_ms| ClientConfig {
            command_timeout: Duration::from_millis(command_ms),
            queue_keepalive: Some(Duration::from_millis(keepalive_ms)),
            ..ClientConfig::default()
        };
        assert!(keepalive(2_000, 3_001).validate().is_ok());
        for (command_ms, keepalive_ms) in [(2_000, 3_000), (5_000, 5_000), (5_000, 0)] {
            let err = keepalive(command_ms, keepalive_ms).validate().expect_err("too short");
            assert!(err.is_invalid_argument() && err.to_string().contains("keep-alive"), "{err}");
        }
        // The default follows a long command timeout, so it never fails on its own.
        assert_eq!(config(30_000, 9_999, 10_000).queue_keepalive(), Duration::from_millis(19_998));
        assert_eq!(ClientConfig::default().queue_keepalive(), ClientConfig::DEFAULT_QUEUE_KEEPALIVE);
    }

    /// A shortened watchdog timeout with the command timeout left at its default derives
    /// one that fits (half a renewal period); an explicit pair that does not fit is still
    /// refused, whether set through the builder (even at the default value) or written
    /// into the field.
    #[test]
    fn a_shortened_watchdog_derives_the_command_timeout_unless_one_was_set() {
        let watchdog = |ms| ClientConfig { watchdog_timeout: Duration::from_millis(ms), ..ClientConfig::default() };
        for (watchdog_ms, derived_ms) in [(3_000, 500), (15_000, 2_500), (300, 50), (6, 1)] {
            let config = watchdog(watchdog_ms);
            assert!(config.validate().is_ok(), "{watchdog_ms} ms watchdog");
            let resolved = config.resolved().expect("derived");
            assert_eq!(resolved.command_timeout, Duration::from_millis(derived_ms), "{watchdog_ms} ms watchdog");
            assert!(resolved.command_timeout < resolved.watchdog_timeout / 3);
        }
        // Room for the default: it stays.
        assert_eq!(watchdog(15_001).resolved().expect("fits").command_timeout, ClientConfig::DEFAULT_COMMAND_TIMEOUT);
        assert_eq!(
            ClientConfig::default().resolved().expect("default").command_timeout,
            ClientConfig::DEFAULT_COMMAND_TIMEOUT
        );
        // Explicit through the builder, even at the default value: refused.
        for command in [ClientConfig::DEFAULT_COMMAND_TIMEOUT, Duration::from_secs(2)] {
            let builder = ClientBuilder::default().watchdog_timeout(Duration::from_secs(3)).command_timeout(command);
            let err = builder.config.resolved().expect_err("explicit");
            assert!(err.is_invalid_argument() && err.to_string().contains("renewal period"), "{err}");
        }
        // A value other than the default written into the field is explicit too.
        let err = config(3_000, 2_000, 10_000).validate().expect_err("explicit pair");
        assert!(err.to_string().contains("renewal period"), "{err}");
        // The other rules still hold against the derived timeout: a replica sync timeout
        // must stay shorter than it.
        let sync = ClientConfig { sync_replicas: 1, ..watchdog(3_000) };
        let err = sync.validate().expect_err("sync timeout 1 s >= derived 500 ms");
        assert!(err.to_string().contains("sync timeout"), "{err}");
    }

    #[test]
    fn a_replay_window_shorter_than_the_command_timeout_is_rejected() {
        let err = config(30_000, 5_000, 4_999).validate().expect_err("window < timeout");
        assert!(err.to_string().contains("replay window"), "{err}");
    }

    #[test]
    fn a_replica_sync_timeout_must_wait_and_fit_in_the_command_timeout() {
        let sync = |replicas, timeout_ms| ClientConfig {
            sync_replicas: replicas,
            sync_timeout: Duration::from_millis(timeout_ms),
            ..ClientConfig::default()
        };
        assert!(sync(1, 1_000).validate().is_ok());
        assert!(sync(0, 0).validate().is_ok(), "no replicas: the timeout is not used");
        for (replicas, timeout_ms) in [(1, 0), (1, 5_000), (2, 60_000)] {
            let err = sync(replicas, timeout_ms).validate().expect_err("invalid");
            assert!(err.is_invalid_argument() && err.to_string().contains("sync timeout"), "{err}");
        }
        let ttl = ClientConfig { fence_token_ttl: Duration::ZERO, ..ClientConfig::default() };
        assert!(ttl.validate().expect_err("zero TTL").is_invalid_argument());
    }

    #[test]
    fn durations_that_overflow_the_clock_are_rejected() {
        let cases = [
            ClientConfig { command_timeout: Duration::MAX, ..ClientConfig::default() },
            ClientConfig { replay_window: Duration::MAX, ..ClientConfig::default() },
            ClientConfig { watchdog_timeout: Duration::MAX, ..ClientConfig::default() },
            ClientConfig { command_timeout: Duration::ZERO, ..ClientConfig::default() },
        ];
        for config in cases {
            assert!(config.validate().expect_err("invalid").is_invalid_argument(), "{config:?}");
        }
    }
}
