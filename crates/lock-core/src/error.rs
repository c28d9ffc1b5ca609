//! The error type shared by every leasehold crate.

use std::borrow::Cow;
use std::fmt;

/// What went wrong, in a form a caller can match on.
///
/// New kinds may be added in minor releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument was rejected before anything was sent to Redis: an empty name,
    /// a zero or overflowing lease or wait, a bad URL or configuration.
    InvalidArgument,
    /// The server says this owner does not hold the lock: it was never acquired by
    /// this owner, was released already, or its lease ran out.
    NotOwner,
    /// The hold was already known to be lost (a renewal, or the check of every hold
    /// after a reconnect, found the owner gone, or renewals failed until the lease ran
    /// out). Nothing was sent.
    LockLost,
    /// The lock's key holds another Redis type (`WRONGTYPE`). The value is untouched.
    WrongType,
    /// A command did not answer within the configured command timeout. Whether it
    /// was applied is unknown; acquire and release are idempotent, so leasehold can
    /// retry or undo them safely.
    Timeout,
    /// The connection to Redis failed or was closed while the command was in flight.
    Connection,
    /// Fewer replicas than the client's `sync_replicas` acknowledged an acquire within
    /// the sync timeout (`WAIT`). The hold was given back: nothing is left held (if the
    /// give-back itself failed, it is retried in the background and otherwise expires
    /// with its lease). Not transient: waits end with it.
    ReplicaSync,
    /// Redis answered with an error leasehold does not classify (script errors,
    /// `OOM`, `READONLY`, `CLUSTERDOWN`, …). The message has the server's text, and
    /// [`Error::server_code`] its code.
    Redis,
    /// The client was shut down (`Client::shutdown`): nothing was sent. Not transient:
    /// waits end with it.
    Shutdown,
    /// The call would wait for its own owner forever: a write acquire of a read/write
    /// lock by an owner that holds only reads of it (an upgrade). Nothing was sent.
    WouldDeadlock,
    /// A call of the blocking API (`leasehold::blocking`, feature `blocking`) was made
    /// on a thread that runs asynchronous tasks: a tokio runtime's worker, or inside
    /// `block_on`. Blocking there would stall that runtime (and deadlock it when the
    /// lock's holder is one of its tasks), so the call is refused at once, nothing sent.
    /// Call it from `tokio::task::spawn_blocking` or a plain thread, or use the async
    /// API. Not transient.
    AsyncContext,
}

impl ErrorKind {
    /// A short lowercase name for the kind, as used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::NotOwner => "not owner",
            ErrorKind::LockLost => "lock lost",
            ErrorKind::WrongType => "wrong type",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connection => "connection",
            ErrorKind::ReplicaSync => "replica sync",
            ErrorKind::Redis => "redis error",
            ErrorKind::Shutdown => "shut down",
            ErrorKind::WouldDeadlock => "would deadlock",
            ErrorKind::AsyncContext => "blocking call in an async context",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every leasehold operation.
///
/// Match on [`Error::kind`] or use the `is_*` predicates; the underlying fred error,
/// where there is one, is available through [`std::error::Error::source`].
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    key: Option<String>,
    source: Option<fred::error::Error>,
    /// The command is known never to have been written to Redis.
    not_sent: bool,
}

/// `Result` with leasehold's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Error { kind, message: message.into(), key: None, source: None, not_sent: false }
    }

    /// An error of `kind` for a command that was never handed to the Redis client
    /// ([`Error::is_not_sent`]).
    pub fn unsent(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Error { not_sent: true, ..Self::new(kind, message) }
    }

    /// An [`ErrorKind::InvalidArgument`] error.
    pub fn invalid_argument(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// Attaches the Redis key the error is about (shown in `Display`).
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Classifies a fred error. `WRONGTYPE` replies become [`ErrorKind::WrongType`];
    /// I/O, cancellation, routing and back-pressure errors, and fred's "Failed to route
    /// command" and "Too many failed write attempts", [`ErrorKind::Connection`]; fred
    /// timeouts [`ErrorKind::Timeout`]; everything else from the server
    /// [`ErrorKind::Redis`].
    ///
    /// Errors fred raises before writing the command (no connection to route it to,
    /// back-pressure), and refusals the server answers before running it (a cluster
    /// redirect that fred did not follow, `TRYAGAIN`, `CLUSTERDOWN`: see
    /// [`refused_before_running`]), are marked [`Error::is_not_sent`], so they are not
    /// ambiguous. A redirect fred did not follow ("Too many redirections") is an
    /// [`ErrorKind::Connection`]; `TRYAGAIN` and `CLUSTERDOWN` stay [`ErrorKind::Redis`].
    pub fn from_fred(error: fred::error::Error) -> Self {
        use fred::error::ErrorKind as F;
        let details = error.details();
        let (kind, not_sent) = if details.contains("WRONGTYPE") {
            (ErrorKind::WrongType, false)
        } else if details.starts_with("Failed to route command") {
            // Raised while looking for a connection to write to: nothing was written.
            (ErrorKind::Connection, true)
        } else if details.starts_with("Too many redirections") || refused_before_running(&error) {
            // A MOVED or ASK reply (which leasehold's clients tell fred not to follow,
            // `max_redirections = 0`), TRYAGAIN or CLUSTERDOWN: the server refused the
            // command before running it.
            let kind =
                if details.starts_with("Too many redirections") { ErrorKind::Connection } else { ErrorKind::Redis };
            (kind, true)
        } else if details.starts_with("Too many failed write attempts") {
            // A re-send after a dropped connection or a redirect: the first write may
            // have run, so the outcome is unknown.
            (ErrorKind::Connection, false)
        } else {
            match error.kind() {
                F::Backpressure => (ErrorKind::Connection, true),
                F::IO | F::Canceled | F::Routing => (ErrorKind::Connection, false),
                F::Timeout => (ErrorKind::Timeout, false),
                F::Url | F::Config => (ErrorKind::InvalidArgument, true),
                _ => (ErrorKind::Redis, false),
            }
        };
        let message = match kind {
            ErrorKind::WrongType => "WRONGTYPE: the key holds a value of another Redis type",
            ErrorKind::Connection if not_sent => "not connected to Redis: the command was not sent",
            ErrorKind::Connection => "the connection to Redis failed",
            ErrorKind::Timeout => "Redis did not answer in time",
            ErrorKind::InvalidArgument => "invalid Redis configuration",
            _ => "Redis returned an error (see the source error)",
        };
        Error { kind, message: Cow::Borrowed(message), key: None, source: Some(error), not_sent }
    }

    /// The error of a script whose first write is `INCRBY`/`DECRBY`/`DECR` on a counter
    /// String (a semaphore's count, a latch's count): the server refuses a String that
    /// is not an integer with `ERR value is not an integer or out of range` before that
    /// command writes anything, so the script need not read the key's type first (one
    /// server call less). That refusal becomes the same [`ErrorKind::WrongType`] a key of
    /// another type gets, with `message`; every other error is returned as it is.
    pub(crate) fn counter_not_integer(self, message: &'static str) -> Self {
        let refused = self.kind == ErrorKind::Redis
            && self.source.as_ref().is_some_and(|source| source.details().contains("value is not an integer"));
        if !refused {
            return self;
        }
        Error { kind: ErrorKind::WrongType, message: Cow::Borrowed(message), ..self }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The Redis key this error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The underlying fred error, when the error came from the Redis client.
    pub fn fred_error(&self) -> Option<&fred::error::Error> {
        self.source.as_ref()
    }

    /// `true` for [`ErrorKind::InvalidArgument`].
    pub fn is_invalid_argument(&self) -> bool {
        self.kind == ErrorKind::InvalidArgument
    }

    /// `true` for [`ErrorKind::NotOwner`].
    pub fn is_not_owner(&self) -> bool {
        self.kind == ErrorKind::NotOwner
    }

    /// `true` for [`ErrorKind::LockLost`].
    pub fn is_lock_lost(&self) -> bool {
        self.kind == ErrorKind::LockLost
    }

    /// `true` for [`ErrorKind::WrongType`].
    pub fn is_wrong_type(&self) -> bool {
        self.kind == ErrorKind::WrongType
    }

    /// `true` for [`ErrorKind::Timeout`].
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// `true` for [`ErrorKind::ReplicaSync`]: too few replicas acknowledged an acquire,
    /// which was given back.
    pub fn is_replica_sync(&self) -> bool {
        self.kind == ErrorKind::ReplicaSync
    }

    /// `true` for [`ErrorKind::Connection`].
    pub fn is_connection(&self) -> bool {
        self.kind == ErrorKind::Connection
    }

    /// `true` for [`ErrorKind::Shutdown`]: the client was shut down, nothing was sent.
    pub fn is_shutdown(&self) -> bool {
        self.kind == ErrorKind::Shutdown
    }

    /// The code of the server's error reply, when the server answered with one: its
    /// first word, such as `WRONGTYPE`, `NOSCRIPT`, `BUSY`, `NOPERM`, `OOM`,
    /// `READONLY`, `LOADING` or `ERR` (as redis-rs's `RedisError::code`). `None` when
    /// the error did not come from a server reply (a timeout, a connection error, an
    /// argument leasehold refused, a shut-down client).
    ///
    /// ```
    /// # use lock_core::Error;
    /// let reply = fred::error::Error::new(
    ///     fred::error::ErrorKind::InvalidArgument,
    ///     "WRONGTYPE Operation against a key holding the wrong kind of value",
    /// );
    /// assert_eq!(Error::from_fred(reply).server_code(), Some("WRONGTYPE"));
    /// ```
    pub fn server_code(&self) -> Option<&str> {
        use fred::error::ErrorKind as F;
        let source = self.source.as_ref()?;
        // The kinds fred gives to a server's error reply (`pretty_error` in fred's
        // protocol code); its own errors (I/O, timeouts, routing,
        // back-pressure, cancellation) carry no server code.
        if !matches!(
            source.kind(),
            F::Unknown | F::InvalidArgument | F::Auth | F::Cluster | F::Config | F::InvalidCommand
        ) {
            return None;
        }
        let code = source.details().split_whitespace().next()?;
        // A server's code is an upper-case word (`ERR`, `WRONGTYPE`, `BUSYGROUP`);
        // fred's own messages ("Failed to route command.") are not.
        let is_code = code.len() >= 2
            && code.starts_with(|c: char| c.is_ascii_uppercase())
            && code.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-');
        is_code.then_some(code)
    }

    /// `true` when the command is known not to have run: fred had no connection to write
    /// it to, or the server refused it before running it (a cluster redirect, `TRYAGAIN`,
    /// `CLUSTERDOWN`). Nothing was applied, so any retry is safe.
    pub fn is_not_sent(&self) -> bool {
        self.not_sent
    }

    /// `true` when the outcome of the command is unknown (a timeout, or a connection
    /// lost after the command may have been written): retrying an idempotent command
    /// is safe. A connection error raised before writing ([`Error::is_not_sent`]) is not
    /// ambiguous.
    pub fn is_ambiguous(&self) -> bool {
        !self.not_sent && matches!(self.kind, ErrorKind::Timeout | ErrorKind::Connection)
    }

    /// `true` for errors that may pass by themselves: timeouts, connection errors, and
    /// the server's transient states (`LOADING`, `READONLY`, `MASTERDOWN`,
    /// `CLUSTERDOWN`, `TRYAGAIN`, `BUSY`, and a script refused a key of its own slot
    /// that a migration already moved: "Script attempted to access a non local key").
    /// Waits retry these; anything else (wrong type, invalid argument, a script or
    /// permission error) is definite.
    pub fn is_transient(&self) -> bool {
        match self.kind {
            ErrorKind::Timeout | ErrorKind::Connection => true,
            ErrorKind::Redis => self.source.as_ref().is_some_and(|source| {
                const TRANSIENT: [&str; 6] = ["LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY"];
                let details = source.details().trim_start_matches("ERR ").trim_start();
                // Every key a script touches shares its declared keys' hash tag, so a
                // non-local key is one of its own slot that a migration moved (or has
                // not moved yet): the slot settles, and the retry runs on one node. The
                // read/write scripts touch such keys before they write anything, and set
                // absolute counts, so a retry after a partial run counts once.
                TRANSIENT.iter().any(|prefix| details.starts_with(prefix))
                    || details.contains("Script attempted to access a non local key")
            }),
            _ => false,
        }
    }
}

/// `true` when the server refused the command before running it, so that sending it
/// again is safe and may succeed shortly: a cluster redirect that fred did not follow
/// ("Too many redirections": leasehold's clients set `max_redirections = 0`, see
/// `docs/cluster.md`), `TRYAGAIN` (a multi-key command while its slot's keys are split
/// between two nodes during a migration) or `CLUSTERDOWN` (a failover in progress).
pub fn refused_before_running(error: &fred::error::Error) -> bool {
    let details = error.details().trim_start_matches("ERR ").trim_start();
    ["Too many redirections", "TRYAGAIN", "CLUSTERDOWN"].iter().any(|prefix| details.starts_with(prefix))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if let Some(key) = &self.key {
            // Keys may be huge or binary-ish; show a bounded, escaped prefix.
            let shown: String = key.chars().take(120).collect();
            let more = if shown.len() < key.len() { "…" } else { "" };
            write!(f, " (key {shown:?}{more})")?;
        }
        // The fred error is the `source()`, not part of this text, so cause-chain printers
        // (anyhow's `{:#}`) show it once.
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("key", &self.key)
            .field("source", &self.source)
            .field("not_sent", &self.not_sent)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<fred::error::Error> for Error {
    fn from(error: fred::error::Error) -> Self {
        Self::from_fred(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrongtype_is_classified_from_the_server_text() {
        let fred = fred::error::Error::new(
            fred::error::ErrorKind::InvalidArgument,
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        );
        let err = Error::from_fred(fred).with_key("order:1");
        assert!(err.is_wrong_type());
        assert_eq!(err.key(), Some("order:1"));
        assert!(err.to_string().contains("WRONGTYPE"));
        let source = std::error::Error::source(&err).expect("fred error chained");
        assert!(source.to_string().contains("wrong kind of value"));
        assert!(!err.to_string().contains("wrong kind of value"), "the source is not repeated in Display");
    }

    #[test]
    fn io_errors_are_connection_errors_and_ambiguous() {
        let err = Error::from_fred(fred::error::Error::new(fred::error::ErrorKind::IO, "reset"));
        assert!(err.is_connection());
        assert!(err.is_ambiguous());
    }

    #[test]
    fn fred_route_failures_are_connection_errors_that_were_not_sent() {
        // fred 10.1 raises this (kind Unknown, or Routing with replicas) when it has no
        // connection to write the command to.
        let err =
            Error::from_fred(fred::error::Error::new(fred::error::ErrorKind::Unknown, "Failed to route command."));
        assert!(err.is_connection(), "{err}");
        assert!(err.is_not_sent() && !err.is_ambiguous() && err.is_transient());
        let routing =
            Error::from_fred(fred::error::Error::new(fred::error::ErrorKind::Routing, "Failed to route command."));
        assert!(routing.is_connection() && routing.is_not_sent());
    }

    #[test]
    fn a_resend_refused_by_fred_is_an_ambiguous_connection_error() {
        let err = Error::from_fred(fred::error::Error::new(
            fred::error::ErrorKind::Unknown,
            "Too many failed write attempts.",
        ));
        assert!(err.is_connection() && err.is_ambiguous());
    }

    #[test]
    fn refusals_before_running_are_not_sent() {
        // fred 10.1's answer to a MOVED or ASK it was not allowed to follow, and the
        // server's refusals during a migration or a failover: nothing ran.
        for (kind, text) in [
            (fred::error::ErrorKind::Routing, "Too many redirections."),
            (fred::error::ErrorKind::Unknown, "TRYAGAIN Multiple keys request during rehashing of slot"),
            (fred::error::ErrorKind::Unknown, "CLUSTERDOWN The cluster is down"),
        ] {
            let fred = fred::error::Error::new(kind, text);
            assert!(refused_before_running(&fred), "{text}");
            let err = Error::from_fred(fred);
            assert!(err.is_not_sent() && !err.is_ambiguous() && err.is_transient(), "{text}: {err:?}");
        }
        let redirect =
            Error::from_fred(fred::error::Error::new(fred::error::ErrorKind::Routing, "Too many redirections."));
        assert!(redirect.is_connection());
        for text in ["MOVED 3999 127.0.0.1:6381", "ERR user_script:1: boom", "Too many failed write attempts."] {
            assert!(!refused_before_running(&fred::error::Error::new(fred::error::ErrorKind::Unknown, text)), "{text}");
        }
    }

    #[test]
    fn transient_server_states_are_retried_definite_errors_are_not() {
        let loading = Error::from_fred(fred::error::Error::new(
            fred::error::ErrorKind::Unknown,
            "LOADING Redis is loading the dataset in memory",
        ));
        assert!(loading.kind() == ErrorKind::Redis && loading.is_transient());
        let script =
            Error::from_fred(fred::error::Error::new(fred::error::ErrorKind::Unknown, "ERR user_script:1: boom"));
        assert!(!script.is_transient());
        let moved_key = Error::from_fred(fred::error::Error::new(
            fred::error::ErrorKind::Unknown,
            "ERR user_script:9: Script attempted to access a non local key in a cluster node script: f_1, on @user_script:9.",
        ));
        assert!(moved_key.is_transient(), "a key its slot's migration moved");
        assert!(!Error::invalid_argument("x").is_transient());
        assert!(Error::new(ErrorKind::Timeout, "t").is_transient());
    }

    #[test]
    fn server_codes_come_from_server_replies_only() {
        use fred::error::ErrorKind as F;
        for (kind, text, code) in [
            (
                F::InvalidArgument,
                "WRONGTYPE Operation against a key holding the wrong kind of value",
                Some("WRONGTYPE"),
            ),
            (F::Unknown, "NOSCRIPT No matching script. Please use EVAL.", Some("NOSCRIPT")),
            (F::Unknown, "BUSY Redis is busy running a script.", Some("BUSY")),
            (F::Unknown, "ERR user_script:1: boom", Some("ERR")),
            (F::Cluster, "MOVED 3999 127.0.0.1:6381", Some("MOVED")),
            (F::Auth, "NOAUTH Authentication required.", Some("NOAUTH")),
            (F::Unknown, "Failed to route command.", None),
            (F::Routing, "Too many redirections.", None),
            (F::IO, "BROKEN pipe", None),
            (F::Timeout, "TIMEOUT", None),
            (F::Unknown, "", None),
        ] {
            assert_eq!(Error::from_fred(fred::error::Error::new(kind, text)).server_code(), code, "{text}");
        }
        assert_eq!(Error::new(ErrorKind::Redis, "no source").server_code(), None);
    }

    #[test]
    fn long_keys_are_shortened_in_messages() {
        let err = Error::new(ErrorKind::NotOwner, "x").with_key("k".repeat(10_000));
        assert!(err.to_string().len() < 300);
    }
}
