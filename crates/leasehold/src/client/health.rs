//! [`Health`]: a client's connections and renewals now, for a readiness probe.

use std::time::Duration;

use crate::client::Client;
use crate::telemetry::Role;

/// What a [`Client`] can do now, read by [`Client::health`]: whether its connections
/// are up, how often they were re-made, how late its renewals run and how close its
/// renewed holds are to their deadlines. Made from what the client knows already
/// (nothing is sent), so a probe can ask as often as it likes.
///
/// "Connected" follows fred's connection events: down from the moment a connection
/// drops (server stopped, restarted or killed the connection, network error) until it is
/// made again. A server that stops answering without closing the connection (frozen,
/// or a network path that drops packets) shows as renewals failing instead: in
/// [`Health::lease_left`] shrinking, and in `stats().watchdog.failed_calls`.
///
/// # Examples
/// ```no_run
/// # fn demo(client: &leasehold::Client) {
/// let health = client.health();
/// // A readiness probe: 200 when ready, 503 otherwise.
/// let status = if health.is_ready() { 200 } else { 503 };
/// // Renewals running late (a blocked runtime) put every hold at risk first.
/// if health.watchdog_lag > std::time::Duration::from_secs(1) {
///     eprintln!("renewals ran {:?} late", health.watchdog_lag);
/// }
/// # let _ = status; }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// The command connection is up (in a cluster, the connection to every node of the
    /// slot map): acquires, releases and renewals can be sent. `false` after
    /// [`Client::shutdown`].
    pub connected: bool,
    /// The subscriber connection is up: waiters hear release messages (while it is
    /// down they wake on their timers, later). `false` after [`Client::shutdown`].
    pub subscriber_connected: bool,
    /// Command connections made again since the client was built (a restarted or
    /// failed-over server, a killed connection, a new node in a cluster).
    pub reconnects: u64,
    /// Subscriber connections made again since the client was built; each is followed
    /// by a resubscription and a wake-up of every waiter.
    pub subscriber_reconnects: u64,
    /// How late the watchdog's last renewal round started against its schedule, from
    /// when it was due to when it ran (the latest of the client's watchdog and its
    /// elections', one per election lease): a few milliseconds on a
    /// healthy runtime; zero while nothing is renewed. A runtime blocked or starved
    /// (a blocking call on a worker thread) shows here before any lease runs out, and so
    /// does a server slower to answer a round than the renewal period: a lag near a
    /// third of the watchdog timeout puts renewed holds at risk.
    pub watchdog_lag: Duration,
    /// The time left until the soonest local lease deadline of the holds the watchdog
    /// renews (an election's lead included): when the first of them would be lost if no
    /// renewal landed before it.
    /// `None` while nothing is renewed. With renewals answered it stays above two thirds
    /// of the watchdog timeout (less the renewal's round trip); it shrinks while
    /// renewals fail (a frozen or unreachable server).
    pub lease_left: Option<Duration>,
    /// [`Client::shutdown`] was called (on any clone).
    pub shut_down: bool,
}

impl Health {
    /// Ready to take and renew locks: both connections up and not shut down. A probe
    /// that also wants renewals on time can add a bound on
    /// [`watchdog_lag`](Health::watchdog_lag) or [`lease_left`](Health::lease_left).
    pub fn is_ready(&self) -> bool {
        self.connected && self.subscriber_connected && !self.shut_down
    }
}

impl Client {
    /// A snapshot of this client's connections and renewals, for a readiness or
    /// liveness probe: see [`Health`]. Cheap: a few atomic reads, one short lock of the
    /// connection state, and one pass over the renewed holds under the watchdog's lock.
    /// Nothing is sent to Redis.
    pub fn health(&self) -> Health {
        let inner = &self.inner;
        let shut_down = self.is_shut_down();
        let commands = inner.telemetry.connections.link(Role::Commands);
        let subscriber = inner.telemetry.connections.link(Role::Subscriber);
        let now = tokio::time::Instant::now();
        Health {
            connected: commands.connected && !shut_down,
            subscriber_connected: subscriber.connected && !shut_down,
            reconnects: commands.reconnects,
            subscriber_reconnects: subscriber.reconnects,
            // The client's watchdog and its elections' (one per election lease).
            watchdog_lag: inner.watchdog.lag().max(inner.election_watchdogs.lag()),
            lease_left: [inner.watchdog.soonest_deadline(), inner.election_watchdogs.soonest_deadline()]
                .into_iter()
                .flatten()
                .min()
                .map(|deadline| deadline.saturating_duration_since(now)),
            shut_down,
        }
    }
}
