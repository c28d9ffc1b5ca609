//! [`ClientShared`]: what every clone of a [`Client`](crate::Client), and every lock,
//! guard and permit made from it, shares. Every kind imports it from here, never from the
//! facade (`client/mod.rs`), which imports every kind.

use std::sync::Arc;
use std::time::Duration;

use fred::prelude::ClientLike;
use lock_core::{ClientId, LockStore, ReplicaSync, Result};
use lock_pubsub::Subscriber;
use lock_watchdog::Watchdog;

use crate::client::config::ClientConfig;

/// What every clone of a client, and every lock and guard made from it, shares.
pub(crate) struct ClientShared {
    pub(crate) id: ClientId,
    pub(crate) store: LockStore,
    pub(crate) subscriber: Subscriber,
    pub(crate) watchdog: Watchdog,
    pub(crate) config: ClientConfig,
    /// The watchdog lease in whole milliseconds (validated at build time).
    pub(crate) watchdog_lease_ms: u64,
    /// The `WAIT` behind every acquire, when `sync_replicas > 0`.
    pub(crate) sync: Option<ReplicaSync>,
    /// The fencing counters' TTL in whole milliseconds (validated at build time).
    pub(crate) fence_token_ttl_ms: u64,
    /// The queue keep-alive (validated at build time).
    pub(crate) fair_keepalive: Duration,
    /// `true` when leasehold made the fred client and so may close it.
    pub(super) owns_connection: bool,
    /// The counters behind [`Client::stats`] and the metrics, shared with the watchdog.
    pub(crate) telemetry: Arc<crate::telemetry::Telemetry>,
    /// The tasks that follow both connections' events into `telemetry` (stopped with it).
    pub(super) connection_watch: crate::telemetry::ConnectionWatch,
    /// Every guard alive of this client's handles ([`Client::shutdown`] releases them).
    pub(crate) live: crate::client::live::LiveGuards,
    /// `true` once a [`Client::shutdown`] started; the sender tells later calls it ended.
    pub(super) shutdown: parking_lot::Mutex<Option<tokio::sync::watch::Receiver<bool>>>,
    /// Through Sentinel: the watch that reconnects at a switch of primary.
    pub(super) _sentinel: Option<crate::client::sentinel::SentinelWatch>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// The renewal schedulers of this client's elections, one per election lease.
    pub(crate) election_watchdogs: crate::election::watchdogs::ElectionWatchdogs,
    /// Its description key and connection name (`client/who.rs`).
    pub(crate) who: crate::client::who::Identity,
    /// Ends every wait at shutdown, after it left its queue (`wait/stopping.rs`).
    pub(crate) stopping: Arc<crate::wait::Stopping>,
}

impl Drop for ClientShared {
    fn drop(&mut self) {
        // Out of the process-wide connection gauges now, not when the last task lets go
        // of the telemetry.
        self.telemetry.connections.retire();
        // After `shutdown` (the store is closed then) the connection was quit already:
        // a second QUIT only makes fred warn.
        if self.owns_connection && !self.store.is_closed() {
            let client = self.store.client().clone();
            // Never block in Drop: QUIT in the background; a dead runtime drops the task.
            drop(self.runtime.spawn(async move {
                let _ = client.quit().await;
            }));
        }
    }
}

impl ClientShared {
    /// What every wait of this client's handles waits with.
    pub(crate) fn wait_env(&self) -> crate::wait::WaitEnv<'_, Subscriber> {
        crate::wait::WaitEnv {
            line: &self.subscriber,
            telemetry: &self.telemetry,
            subscribe_timeout: self.config.command_timeout,
            redisson_waiters: self.config.redisson_waiters,
            stopping: &self.stopping,
        }
    }

    /// The steps of [`Client::shutdown`], in order.
    pub(super) async fn shut_down(&self) -> Result<()> {
        let timeout = self.config.command_timeout;
        // Every wait ends, and those queued on the server leave their queue while the
        // connection is open: a queue entry left behind would be handed the lock (an
        // election's lead) by the next release, and the next waiter would wait for its
        // keep-alive. The holds are released meanwhile, and the description goes with
        // them (its refresh stopped first): all three at once, each within one command
        // timeout (a server that does not answer leaves what is left to expire).
        self.stopping.stop();
        let drained = async {
            if !self.stopping.drained(timeout).await {
                tracing::debug!(
                    target: crate::telemetry::CLIENT_TARGET,
                    "shutdown: waits still leaving their queue after {timeout:?}",
                );
            }
        };
        let forget = self.who.forget(self.store.client(), timeout);
        let (released, (), ()) = tokio::join!(self.live.release_all(timeout), forget, drained);
        self.store.close();
        self.watchdog.stop();
        self.election_watchdogs.stop();
        // The connections are quit below: no longer followed, and counted as down.
        self.connection_watch.stop();
        self.telemetry.connections.retire();
        self.subscriber.stop();
        if let Some(watch) = &self._sentinel {
            watch.stop();
        }
        // Each connection is quit once: the command connection here (and not again by
        // `Drop`, which sees the store closed), the subscriber's by its task as it ends
        // (`Subscriber::stop`), which this waits for. fred warns at a second QUIT.
        let command = self.owns_connection.then(|| self.store.client().clone());
        let subscriber = &self.subscriber;
        let quits = async move {
            if let Some(command) = command {
                let _ = command.quit().await;
            }
            subscriber.ended().await;
        };
        if tokio::time::timeout(timeout, quits).await.is_err() {
            tracing::debug!(
                target: crate::telemetry::CLIENT_TARGET,
                "shutdown: QUIT did not answer within {timeout:?}",
            );
        }
        released
    }
}
