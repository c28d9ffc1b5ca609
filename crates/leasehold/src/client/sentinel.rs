//! Following a Sentinel failover as soon as the sentinels announce it.
//!
//! fred, connected through Sentinel, asks the sentinels for the primary only when it
//! (re)connects: after a failover it keeps writing to the old primary until that one is
//! demoted and drops the connection, which took about 10 s in a local set-up. Locks
//! taken there in between are lost with the old primary's data, while their holders
//! believe they hold them. So each `Client` made from a `redis-sentinel://` URL watches
//! the sentinels' `+switch-master` channel and, when the switch names its service,
//! reconnects both of its connections at once. fred's reconnect asks the sentinels for
//! the new primary, and the watchdog's renewal round and check of every other hold after
//! every reconnect (`Watchdog::renew_on_each`) tell the holders whose locks did not reach
//! the new primary, fixed leases included, that they lost them.
//!
//! From the moment the watch hears the announcement until the command connection is on
//! the announced primary, the client's write gate ([`lock_core::WriteGate`]) is closed:
//! lock writes issued meanwhile wait (within their command timeout) instead of going to
//! the old primary. fred's reconnect asks one sentinel, which may not know of the switch
//! yet and name the old primary (still a writable primary until the sentinels demote
//! it), so the watch checks where fred connected and reconnects again until it is the
//! announced primary. What the gate cannot hold back: writes handed to fred before the
//! watch heard the announcement (in flight), and writes sent between the promotion of
//! the replica and the announcement (`docs/cluster.md` §7).

use std::time::Duration;

use fred::clients::{Client as FredClient, SubscriberClient};
use fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface, ReconnectPolicy, ServerConfig};
use fred::types::config::Server;
use lock_core::WriteGate;

/// The sentinels' channel announcing a new primary:
/// `SERVICE OLD_IP OLD_PORT NEW_IP NEW_PORT`.
const SWITCH_MASTER: &str = "+switch-master";

/// How long the watch keeps reconnecting the command client until it is on the
/// announced primary; then it opens the write gate anyway (fred goes on reconnecting by
/// its own policy) rather than hold every write back for good.
const FOLLOW_LIMIT: Duration = Duration::from_secs(10);

/// The pause between two reconnects that did not land on the announced primary.
const FOLLOW_PAUSE: Duration = Duration::from_millis(100);

/// The background watch of one client; it ends when this is dropped.
#[derive(Debug)]
pub(crate) struct SentinelWatch {
    task: tokio::task::JoinHandle<()>,
    /// Closed while a switch is followed; the client's lock writes wait at it.
    gate: WriteGate,
}

impl SentinelWatch {
    /// The gate this watch closes and opens, for the client's `LockStore`.
    pub(crate) fn gate(&self) -> &WriteGate {
        &self.gate
    }

    /// Stops the watch task (at its next await), as dropping the watch does.
    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for SentinelWatch {
    fn drop(&mut self) {
        // Synchronous and non-blocking: the task stops at its next await.
        self.task.abort();
    }
}

/// Starts watching the sentinels of `config` for a switch of its service, if it is a
/// Sentinel configuration; `None` otherwise. On a switch, the watch's gate
/// ([`SentinelWatch::gate`]) is closed, `client` and `subscriber` reconnect (to the new
/// primary), and the gate opens again once `client` is on the announced primary.
pub(crate) fn watch(
    config: &Config,
    policy: &ReconnectPolicy,
    client: &FredClient,
    subscriber: &SubscriberClient,
    command_timeout: Duration,
) -> Option<SentinelWatch> {
    let ServerConfig::Sentinel { hosts, service_name, .. } = &config.server else { return None };
    let hosts = hosts.clone();
    let service = service_name.clone();
    let mut sentinel_config = config.clone();
    // The sentinels themselves, not the data nodes: no database, no data-node password.
    sentinel_config.database = None;
    sentinel_config.username = None;
    sentinel_config.password = None;
    let policy = policy.clone();
    let (client, subscriber) = (client.clone(), subscriber.clone());
    let watch_gate = WriteGate::new();
    let gate = watch_gate.clone();
    let task = tokio::spawn(async move {
        let mut next = 0usize;
        loop {
            let Some(host) = hosts.get(next % hosts.len().max(1)).cloned() else { return };
            next = next.wrapping_add(1);
            let clients = (&client, &subscriber, &gate);
            if let Err(error) = follow(&sentinel_config, &policy, host, &service, clients, command_timeout).await {
                tracing::debug!(
                    target: crate::telemetry::CLIENT_TARGET,
                    %error,
                    "sentinel watch: trying the next sentinel",
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    Some(SentinelWatch { task, gate: watch_gate })
}

/// Subscribes to one sentinel's `+switch-master` and, on each switch of `service`,
/// closes the gate, reconnects both clients and opens the gate once the command client
/// is on the new primary; returns when that sentinel's connection fails.
async fn follow(
    config: &Config,
    policy: &ReconnectPolicy,
    host: Server,
    service: &str,
    (client, subscriber, gate): (&FredClient, &SubscriberClient, &WriteGate),
    command_timeout: Duration,
) -> Result<(), fred::error::Error> {
    let mut config = config.clone();
    config.server = ServerConfig::Centralized { server: host };
    let mut builder = Builder::from_config(config);
    builder.set_policy(policy.clone());
    let sentinel = builder.build_subscriber_client()?;
    let mut messages = sentinel.message_rx();
    let result = async {
        match tokio::time::timeout(command_timeout, sentinel.init()).await {
            Ok(connected) => drop(connected?),
            Err(_) => return Err(fred::error::Error::new(fred::error::ErrorKind::Timeout, "sentinel connect")),
        }
        // Resubscribed by fred after a reconnect of this connection.
        let _manager = sentinel.manage_subscriptions();
        sentinel.subscribe(SWITCH_MASTER).await?;
        while let Ok(message) = messages.recv().await {
            let Some(payload) = message.value.as_string() else { continue };
            let fields: Vec<&str> = payload.split(' ').collect();
            if fields.first() != Some(&service) {
                continue;
            }
            // Closed before anything else: no lock write is handed to fred from now on
            // until the command connection is on the new primary.
            let epoch = gate.close();
            tracing::info!(
                target: crate::telemetry::CLIENT_TARGET,
                %payload,
                "sentinels switched the primary: reconnecting to it",
            );
            let new_primary = match fields.as_slice() {
                [_, _, _, ip, port] => port.parse::<u16>().ok().map(|port| ((*ip).to_owned(), port)),
                _ => None,
            };
            let commands = async {
                follow_switch(client, new_primary.as_ref()).await;
                gate.open(epoch);
            };
            let subscriptions = async {
                if let Err(error) = subscriber.force_reconnection().await {
                    tracing::warn!(
                        target: crate::telemetry::CLIENT_TARGET,
                        %error,
                        "reconnecting the subscriber after a primary switch failed; fred keeps retrying",
                    );
                }
            };
            tokio::join!(commands, subscriptions);
        }
        Ok(())
    }
    .await;
    let _ = tokio::time::timeout(command_timeout, sentinel.quit()).await;
    result
}

/// Reconnects `client` until its connection is to `new_primary` (when the announcement
/// named one), for at most [`FOLLOW_LIMIT`]. fred's reconnect asks one sentinel for the
/// primary; one that has not learned of the switch yet names the old primary, which
/// still answers as a primary, and fred connects there again.
async fn follow_switch(client: &FredClient, new_primary: Option<&(String, u16)>) {
    let on_new_primary = || {
        new_primary.is_none_or(|(host, port)| {
            client.active_connections().iter().any(|server| server.port == *port && *server.host == **host)
        })
    };
    let followed = tokio::time::timeout(FOLLOW_LIMIT, async {
        loop {
            if let Err(error) = client.force_reconnection().await {
                tracing::warn!(
                    target: crate::telemetry::CLIENT_TARGET,
                    %error,
                    "reconnecting after a primary switch failed; trying again",
                );
            } else if on_new_primary() {
                return;
            } else {
                tracing::info!(
                    target: crate::telemetry::CLIENT_TARGET,
                    connected = ?client.active_connections(),
                    "reconnected, but not to the announced primary (a sentinel had not learned of the switch yet); \
                     reconnecting again"
                );
            }
            tokio::time::sleep(FOLLOW_PAUSE).await;
        }
    })
    .await;
    if followed.is_err() {
        tracing::warn!(
            target: crate::telemetry::CLIENT_TARGET,
            ?new_primary,
            connected = ?client.active_connections(),
            "not on the announced primary within {FOLLOW_LIMIT:?}; lock writes go on (fred keeps reconnecting)"
        );
    }
}
