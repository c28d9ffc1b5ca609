//! Who holds what, the client's side: its description key `leasehold_client:{UUID}`,
//! written at connect and refreshed every watchdog period by a task of its own, and the
//! name of its command connections (`CLIENT SETNAME leasehold:<UUID>:<service>`, at
//! connect and after every reconnect). The subscriber connection names itself
//! ([`lock_pubsub::Subscriber::start_named`]), since only the task that subscribes can
//! name it before it subscribes. The keys and their format: [`lock_core::who`].
//!
//! Nothing here affects locks: a failed write or name is logged at debug and tried
//! again at the next period (or reconnect). What the application asks
//! ([`Client::describe_owner`](crate::Client::describe_owner),
//! [`Client::lock_history`](crate::Client::lock_history)) is in `client/who_api.rs`.

use std::time::Duration;

use fred::prelude::{Client as FredClient, EventInterface};
use lock_core::who::{self, ClientDescription};
use lock_core::ClientId;
use tokio::task::AbortHandle;

use crate::client::config::ClientConfig;

/// The environment variable naming the service when the builder does not
/// ([`ClientBuilder::service_name`](crate::ClientBuilder::service_name)).
pub const SERVICE_ENV: &str = "LEASEHOLD_SERVICE";

/// A client's identity on the server: what it writes and how it names its connections.
pub(crate) struct Identity {
    /// The client's UUID, hyphenated.
    uuid: String,
    /// `leasehold:<UUID>:<service>`: its connections' name, and who it says forced an
    /// unlock in a lock's history.
    pub(crate) connection_name: String,
    description: ClientDescription,
    /// The refresh task, aborted at shutdown and when the client's shared state is
    /// dropped (the task holds no strong reference to it, only clones of the fred
    /// client and of these values).
    task: parking_lot::Mutex<Option<AbortHandle>>,
}

impl Drop for Identity {
    fn drop(&mut self) {
        // Non-blocking: the task ends at its next await.
        if let Some(task) = self.task.get_mut().take() {
            task.abort();
        }
    }
}

impl Identity {
    /// The identity of the client `id` with `config` (its service name, or the
    /// environment's): reads the host name and the clock now.
    pub(crate) fn new(id: &ClientId, config: &ClientConfig) -> Self {
        let uuid = id.uuid().hyphenated().to_string();
        let service = service_name(config);
        let description = ClientDescription {
            host: host_name(),
            pid: std::process::id(),
            service: service.clone(),
            // The client's clock, for display only.
            started_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX)),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let connection_name = who::connection_name(&uuid, &service);
        Identity { uuid, connection_name, description, task: parking_lot::Mutex::new(None) }
    }

    /// Stops the refresh task and deletes the description (at [`Client::shutdown`](crate::Client::shutdown)),
    /// within `timeout`; a failure is logged at debug (the key then expires within one
    /// watchdog timeout).
    pub(crate) async fn forget(&self, client: &FredClient, timeout: Duration) {
        if let Some(task) = self.task.lock().take() {
            // A refresh already written goes before the DEL on the same connection.
            task.abort();
        }
        if let Err(error) = who::forget_client(client, timeout, &self.uuid).await {
            tracing::debug!(target: crate::telemetry::CLIENT_TARGET, %error, "could not delete the client description at shutdown");
        }
    }
}

/// Writes the description (and, with `rename`, names the command connections) once,
/// awaited so that a client that returns from `connect` is described, then starts the
/// refresh task: the description every watchdog period, and the name of each command
/// connection that reconnects. `rename` is `false` for a fred client given to
/// [`Client::from_fred`](crate::Client::from_fred): its connections are the
/// application's, named by it.
///
/// Takes the client's pieces, not its shared state: this file is below
/// `client/shared.rs`, which holds the [`Identity`].
pub(crate) async fn start(identity: &Identity, client: &FredClient, config: &ClientConfig, rename: bool) {
    let client = client.clone();
    let timeout = config.command_timeout;
    let ttl = config.watchdog_timeout;
    // Taken before the first names go out: a reconnect after this is named again.
    let mut reconnects = rename.then(|| client.reconnect_rx());
    if rename {
        name(&client, None, &identity.connection_name, timeout).await;
    }
    describe(&client, timeout, identity, ttl).await;
    let name_text = identity.connection_name.clone();
    let uuid = identity.uuid.clone();
    let description = identity.description.clone();
    let period = ttl / 3;
    let task = tokio::spawn(async move {
        let refresh = Refresh { client, timeout, ttl, uuid, description };
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => refresh.describe().await,
                reconnect = recv(&mut reconnects) => match reconnect {
                    Some(server) => name(&refresh.client, server.as_ref(), &name_text, timeout).await,
                    // The client is gone: nothing left to name.
                    None => reconnects = None,
                },
            }
        }
    });
    *identity.task.lock() = Some(task.abort_handle());
}

/// What the refresh task writes.
struct Refresh {
    client: FredClient,
    timeout: Duration,
    ttl: Duration,
    uuid: String,
    description: ClientDescription,
}

impl Refresh {
    async fn describe(&self) {
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        if let Err(error) =
            who::describe_client(&self.client, self.timeout, &self.uuid, &self.description, ttl_ms).await
        {
            tracing::debug!(target: crate::telemetry::CLIENT_TARGET, %error, "could not refresh the client description; trying again next period");
        }
    }
}

async fn describe(client: &FredClient, timeout: Duration, identity: &Identity, ttl: Duration) {
    let refresh = Refresh {
        client: client.clone(),
        timeout,
        ttl,
        uuid: identity.uuid.clone(),
        description: identity.description.clone(),
    };
    refresh.describe().await;
}

async fn name(client: &FredClient, server: Option<&fred::types::config::Server>, name: &str, timeout: Duration) {
    if let Err(error) = who::set_connection_name(client, server, name, timeout).await {
        tracing::debug!(target: crate::telemetry::CLIENT_TARGET, %error, ?server, "CLIENT SETNAME of the command connection failed");
    }
}

/// The next reconnect: `Some(Some(server))`, `Some(None)` after a lag (a reconnect of a
/// node not known: every connection is named), `None` once the stream closed; pending
/// forever without a stream.
async fn recv(
    reconnects: &mut Option<tokio::sync::broadcast::Receiver<fred::types::config::Server>>,
) -> Option<Option<fred::types::config::Server>> {
    use tokio::sync::broadcast::error::RecvError;
    match reconnects {
        Some(rx) => match rx.recv().await {
            Ok(server) => Some(Some(server)),
            Err(RecvError::Lagged(_)) => Some(None),
            Err(RecvError::Closed) => None,
        },
        None => std::future::pending().await,
    }
}

/// The service name: the builder's, else [`SERVICE_ENV`], else the executable's file
/// name, else `unknown`.
fn service_name(config: &ClientConfig) -> String {
    if let Some(service) = config.service_name.as_deref().filter(|s| !s.is_empty()) {
        return service.to_owned();
    }
    if let Some(service) = std::env::var(SERVICE_ENV).ok().filter(|s| !s.is_empty()) {
        return service;
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_name().map(|name| name.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The host name: the kernel's (`/proc/sys/kernel/hostname`, Linux), else `HOSTNAME`,
/// else `unknown`. No new dependency for a `gethostname`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|name| !name.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}
