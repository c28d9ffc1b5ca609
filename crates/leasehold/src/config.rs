//! Client configuration and its builder.

use std::time::Duration;

use fred::prelude::{Config, ReconnectPolicy};
use lock_core::{args, Error, Result};

use crate::client::Client;

/// Default watchdog timeout: the lease of watchdog-mode locks (Redisson's 30 s).
pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound on each Redis call.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time the server remembers a request id (acquire and unlock latches).
pub const DEFAULT_REPLAY_WINDOW: Duration = Duration::from_secs(10);
/// Default number of keys per renewal script call.
pub const DEFAULT_RENEW_BATCH: usize = 100;

/// How a [`Client`] behaves. Built with [`Client::builder`].
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
    /// leasehold applies its own). Default: 5 s.
    pub command_timeout: Duration,
    /// How long the server remembers each acquire and unlock request id, so that a
    /// replayed or retried call counts once. Default: 10 s.
    pub replay_window: Duration,
    /// Most keys per renewal call. Default: 100.
    pub renew_batch_size: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            key_prefix: None,
            watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            replay_window: DEFAULT_REPLAY_WINDOW,
            renew_batch_size: DEFAULT_RENEW_BATCH,
        }
    }
}

impl ClientConfig {
    /// Checks every setting; called by the builder before anything connects.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming the setting.
    pub fn validate(&self) -> Result<()> {
        args::lease_millis(self.watchdog_timeout, "watchdog timeout")?;
        if self.watchdog_timeout < Duration::from_millis(3) {
            return Err(Error::invalid_argument("watchdog timeout must be at least 3 ms"));
        }
        if self.command_timeout.is_zero() {
            return Err(Error::invalid_argument("command timeout must be above zero"));
        }
        args::lease_millis(self.replay_window, "replay window")?;
        if self.renew_batch_size == 0 {
            return Err(Error::invalid_argument("renew batch size must be at least 1"));
        }
        Ok(())
    }
}

/// Builds a [`Client`]: where Redis is, and how locks behave.
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
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    url: Option<String>,
    fred_config: Option<Config>,
    reconnect: Option<ReconnectPolicy>,
    config: ClientConfig,
}

impl ClientBuilder {
    /// The server's URL (`redis://[user:password@]host:port/db`, `rediss://…` (needs the
    /// `tls-rustls` or `tls-native-tls` feature), `redis-cluster://…`).
    /// Default: `redis://127.0.0.1:6379`.
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

    /// Bound on each Redis call. Default: 5 s.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self
    }

    /// How long request ids are remembered by the server. Default: 10 s.
    pub fn replay_window(mut self, window: Duration) -> Self {
        self.config.replay_window = window;
        self
    }

    /// Most keys per renewal call. Default: 100.
    pub fn renew_batch_size(mut self, size: usize) -> Self {
        self.config.renew_batch_size = size;
        self
    }

    /// Validates the settings, connects both connections (commands and pub/sub) and
    /// starts the watchdog and subscriber tasks on the current runtime.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a bad URL or
    /// setting (nothing is sent); [`ErrorKind::Connection`](crate::ErrorKind::Connection)
    /// or [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) when Redis cannot be reached
    /// within the command timeout.
    ///
    /// # Cancel safety
    /// Dropping the future drops the half-made connections.
    pub async fn connect(self) -> Result<Client> {
        self.config.validate()?;
        if let (None, Some(url)) = (&self.fred_config, &self.url) {
            crate::tls::require_tls_support(url, crate::tls::TLS_COMPILED)?;
        }
        let fred_config = match (self.fred_config, self.url) {
            (Some(config), _) => config,
            (None, Some(url)) => Config::from_url(&url)
                .map_err(|e| Error::invalid_argument(format!("bad Redis URL {url:?}: {}", e.details())))?,
            (None, None) => Config::default(),
        };
        let policy = self.reconnect.unwrap_or_else(default_reconnect_policy);
        Client::connect_with(fred_config, policy, self.config).await
    }
}

/// Exponential back-off from 50 ms to 2 s, forever.
pub(crate) fn default_reconnect_policy() -> ReconnectPolicy {
    ReconnectPolicy::new_exponential(0, 50, 2_000, 2)
}
