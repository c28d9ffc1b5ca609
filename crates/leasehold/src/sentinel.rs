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

use std::time::Duration;

use fred::clients::{Client as FredClient, SubscriberClient};
use fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface, ReconnectPolicy, ServerConfig};
use fred::types::config::Server;

/// The sentinels' channel announcing a new primary:
/// `SERVICE OLD_IP OLD_PORT NEW_IP NEW_PORT`.
const SWITCH_MASTER: &str = "+switch-master";

/// The background watch of one client; it ends when this is dropped.
#[derive(Debug)]
pub(crate) struct SentinelWatch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SentinelWatch {
    fn drop(&mut self) {
        // Synchronous and non-blocking: the task stops at its next await.
        self.task.abort();
    }
}

/// Starts watching the sentinels of `config` for a switch of its service, if it is a
/// Sentinel configuration; `None` otherwise. On a switch, `client` and `subscriber`
/// reconnect (to the new primary).
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
    let task = tokio::spawn(async move {
        let mut next = 0usize;
        loop {
            let Some(host) = hosts.get(next % hosts.len().max(1)).cloned() else { return };
            next = next.wrapping_add(1);
            if let Err(error) =
                follow(&sentinel_config, &policy, host, &service, &client, &subscriber, command_timeout).await
            {
                tracing::debug!(%error, "sentinel watch: trying the next sentinel");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    Some(SentinelWatch { task })
}

/// Subscribes to one sentinel's `+switch-master` and reconnects both clients on each
/// switch of `service`; returns when that sentinel's connection fails.
async fn follow(
    config: &Config,
    policy: &ReconnectPolicy,
    host: Server,
    service: &str,
    client: &FredClient,
    subscriber: &SubscriberClient,
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
            if payload.split(' ').next() != Some(service) {
                continue;
            }
            tracing::info!(%payload, "sentinels switched the primary: reconnecting to it");
            let (a, b) = tokio::join!(client.force_reconnection(), subscriber.force_reconnection());
            if let Err(error) = a.and(b) {
                tracing::warn!(%error, "reconnecting after a primary switch failed; fred keeps retrying");
            }
        }
        Ok(())
    }
    .await;
    let _ = tokio::time::timeout(command_timeout, sentinel.quit()).await;
    result
}
