//! Who holds what: a client's description beside the locks, the name of its connections,
//! and a lock's history of forced unlocks. All leasehold-only keys, which Redisson ignores
//! (`docs/architecture/data-layout.md`, "Who holds what").
//!
//! - `leasehold_client:{UUID}` ([`client_key`]): a Hash `host`, `pid`, `service`,
//!   `started`, `version` ([`ClientDescription`]) that each client writes at connect and
//!   refreshes every watchdog period with one request ([`describe_client`],
//!   `client_describe.lua`), with a TTL of one watchdog timeout: the key disappears within
//!   one watchdog timeout of the client's death. Every owner id (`UUID:N`, `UUID:N:write`,
//!   a simple lock's `UUID-N`) starts with its client's UUID, so an owner leads to its
//!   client's description ([`describe_owner`]).
//! - `CLIENT SETNAME leasehold:<UUID>:<service>` ([`connection_name`],
//!   [`set_connection_name`]) on every connection leasehold makes.
//! - `leasehold_history:{NAME}` ([`LockNames::history_key`]): the force-release scripts'
//!   record of who removed which owners, newest first, bounded ([`lock_history`]).

use std::collections::HashMap;
use std::time::Duration;

use fred::clients::Client;
use fred::prelude::{ClientLike, ClusterInterface, HashesInterface, KeysInterface};
use fred::types::config::{Options, Server};
use fred::types::{ClusterHash, CustomCommand, Key, Value};

use crate::call::int_arg;
use crate::error::Result;
use crate::names::{LockNames, CLIENT_PREFIX};
use crate::script::bounded;
use crate::scripts;

/// The length of a UUID's hyphenated text, with which every owner id starts.
const UUID_LEN: usize = 36;

/// The most entries a lock's history keeps (`fragments/force_history.lua` trims to it).
pub const HISTORY_LIMIT: usize = 100;

/// A client's description, as written in `leasehold_client:{UUID}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientDescription {
    /// The host name of the machine (or container) the client runs on.
    pub host: String,
    /// The client's process id.
    pub pid: u32,
    /// The service name: the builder's, else `LEASEHOLD_SERVICE`, else the executable's
    /// file name.
    pub service: String,
    /// When the client started, in Unix ms **of the client's own clock**: for display
    /// only (clocks of different machines may be apart; nothing compares it).
    pub started_ms: u64,
    /// The leasehold version of the client.
    pub version: String,
}

impl ClientDescription {
    /// The Hash fields and values, in the order they are written.
    pub fn fields(&self) -> [(&'static str, String); 5] {
        [
            ("host", self.host.clone()),
            ("pid", self.pid.to_string()),
            ("service", self.service.clone()),
            ("started", self.started_ms.to_string()),
            ("version", self.version.clone()),
        ]
    }

    /// Reads a description from its Hash's fields; `None` when the Hash is empty (no
    /// live client). A missing or malformed field reads as empty or 0 rather than
    /// failing: the key is for people, and a newer client may add fields.
    pub fn from_fields(fields: &HashMap<String, String>) -> Option<Self> {
        if fields.is_empty() {
            return None;
        }
        let text = |name: &str| fields.get(name).cloned().unwrap_or_default();
        Some(ClientDescription {
            host: text("host"),
            pid: fields.get("pid").and_then(|pid| pid.parse().ok()).unwrap_or(0),
            service: text("service"),
            started_ms: fields.get("started").and_then(|ms| ms.parse().ok()).unwrap_or(0),
            version: text("version"),
        })
    }
}

/// The description key of the client `uuid`: `leasehold_client:{UUID}`.
pub fn client_key(uuid: &str) -> String {
    format!("{CLIENT_PREFIX}:{{{uuid}}}")
}

/// The client UUID an owner id starts with (`UUID:N`, `UUID:N:write`, a simple lock's
/// `UUID-N`); `None` when `owner` does not start with a UUID (a Redisson owner does,
/// with Redisson's client id, which has no description).
pub fn owner_client(owner: &str) -> Option<&str> {
    let uuid = owner.get(..UUID_LEN)?;
    uuid::Uuid::try_parse(uuid).ok()?;
    Some(uuid)
}

/// A connection's name, `leasehold:<UUID>:<service>`, with each character of the
/// service outside `[A-Za-z0-9._-]` replaced by `_` (a connection name cannot hold
/// spaces, and a plain set keeps `CLIENT LIST` easy to parse).
pub fn connection_name(uuid: &str, service: &str) -> String {
    let service: String = service
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    format!("leasehold:{uuid}:{service}")
}

/// Writes (or refreshes) the description of the client `uuid` and sets its TTL to
/// `ttl_ms`, in one request (`client_describe.lua`: `HSET` of every field, `PEXPIRE`).
///
/// # Errors
/// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key is not a Hash;
/// timeouts and connection errors.
///
/// # Cancel safety
/// Dropping the future does not take the command back; a write is idempotent.
pub async fn describe_client(
    client: &Client,
    timeout: Duration,
    uuid: &str,
    description: &ClientDescription,
    ttl_ms: u64,
) -> Result<()> {
    let key = client_key(uuid);
    let build = || {
        let mut args = Vec::with_capacity(11);
        args.push(int_arg(ttl_ms.max(1)));
        for (field, value) in description.fields() {
            args.push(Value::from(field));
            args.push(Value::from(value));
        }
        (vec![Key::from(key.as_str())], args)
    };
    let _: i64 = scripts::CLIENT_DESCRIBE.run_with(client, &key, timeout, build).await?;
    Ok(())
}

/// Deletes the description of the client `uuid` (at its shutdown).
///
/// # Errors
/// Timeouts and connection errors.
///
/// # Cancel safety
/// Dropping the future does not take the command back.
pub async fn forget_client(client: &Client, timeout: Duration, uuid: &str) -> Result<()> {
    let key = client_key(uuid);
    let _: i64 = bounded(timeout, "DEL of the client description", &key, client.del(key.as_str())).await?;
    Ok(())
}

/// The description of the client whose owner id is `owner` (`UUID:N` and the like):
/// `None` when the owner does not start with a UUID or its client has no live
/// description (it died more than a watchdog timeout ago, shut down, or is not a
/// leasehold client).
///
/// # Errors
/// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key is not a Hash;
/// timeouts and connection errors.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn describe_owner(client: &Client, timeout: Duration, owner: &str) -> Result<Option<ClientDescription>> {
    let Some(uuid) = owner_client(owner) else { return Ok(None) };
    let key = client_key(uuid);
    let fields: HashMap<String, String> =
        bounded(timeout, "HGETALL of the client description", &key, client.hgetall(key.as_str())).await?;
    Ok(ClientDescription::from_fields(&fields))
}

/// Names the connection of `client` to `server` (every connection when `server` is
/// `None`: one on a standalone server, one per primary of a cluster) with `CLIENT SETNAME
/// name`, each within `timeout`. A connection subscribed with RESP2 refuses it: name a
/// subscriber connection before it subscribes.
///
/// # Errors
/// The first refusal or timeout; the other connections are named anyway.
///
/// # Cancel safety
/// Dropping the future drops the calls not yet answered; a name is idempotent.
pub async fn set_connection_name<C: ClientLike + ClusterInterface>(
    client: &C,
    server: Option<&Server>,
    name: &str,
    timeout: Duration,
) -> Result<()> {
    // On a standalone or Sentinel-managed server there is one connection: no routing.
    // In a cluster, every primary of fred's slot map (not fred's `active_connections`,
    // which lists only connections whose `CLIENT ID` the ACL user may ask).
    let nodes: Vec<Option<Server>> = match server {
        _ if !client.is_clustered() => vec![None],
        Some(server) => vec![Some(server.clone())],
        None => client
            .cached_cluster_state()
            .map(|map| map.unique_primary_nodes())
            .unwrap_or_default()
            .into_iter()
            .map(Some)
            .collect(),
    };
    let mut first_error = None;
    for node in nodes {
        let options = Options { cluster_node: node, ..Options::default() };
        let command = CustomCommand::new_static("CLIENT", ClusterHash::Random, false);
        let routed = client.with_options(&options);
        let call = routed.custom::<Value, _>(command, vec!["SETNAME", name]);
        if let Err(error) = bounded(timeout, "CLIENT SETNAME", name, call).await {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `true` when a force-release script with a history was refused over the history
/// key, which it reads first, before writing anything: the ACL user may not touch it
/// (`NOPERM`, or a command or key refused inside the script), or, in a cluster slot
/// being migrated, the key is not on this node (it is not declared: see
/// `force_release.lua`), which Redis refuses as "a non local key".
pub(crate) fn history_refused(error: &crate::Error) -> bool {
    error.fred_error().is_some_and(|fred| {
        let details = fred.details();
        details.contains("NOPERM")
            || details.contains("The user executing the script can't")
            || details.contains("non local key")
    })
}

/// Whether a forced unlock that asked for a record (`by`) was refused it before anything
/// was written ([`history_refused`]): then it says so at WARN, and the caller sends the
/// unlock again without the record.
pub(crate) fn retry_without_history(by: Option<&str>, error: &crate::Error, key: &str) -> bool {
    let refused = by.is_some() && history_refused(error);
    if refused {
        tracing::warn!(
            target: crate::TARGET,
            key,
            %error,
            "the forced unlock could not be recorded (the ACL, see docs/deployment.md, or a slot migration); \
             unlocking without the record"
        );
    }
    refused
}

/// One forced unlock recorded in a lock's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// When, in Unix ms of the server's clock.
    pub at_ms: u64,
    /// What happened: `force-unlock`.
    pub action: String,
    /// Who did it: the forcing client's connection name (`leasehold:<UUID>:<service>`).
    pub by: String,
    /// The owner fields it removed (a simple lock's value), in no particular order.
    pub owners: Vec<String>,
    /// The entry as stored: `"<ms> force-unlock by=<who> owners=<a,b>"`.
    pub raw: String,
}

impl HistoryEntry {
    /// Reads an entry as the force-release scripts write it; a field it does not find
    /// stays empty (or 0), and `raw` keeps the whole text.
    pub fn parse(raw: &str) -> Self {
        let mut words = raw.split(' ');
        let at_ms = words.next().and_then(|ms| ms.parse().ok()).unwrap_or(0);
        let action = words.next().unwrap_or_default().to_owned();
        let mut by = String::new();
        let mut owners = Vec::new();
        for word in words {
            if let Some(who) = word.strip_prefix("by=") {
                who.clone_into(&mut by);
            } else if let Some(list) = word.strip_prefix("owners=") {
                owners = list.split(',').filter(|owner| !owner.is_empty()).map(str::to_owned).collect();
            }
        }
        HistoryEntry { at_ms, action, by, owners, raw: raw.to_owned() }
    }
}

/// The history of forced unlocks of the lock `names`, newest first (at most
/// [`HISTORY_LIMIT`] entries; empty when none was recorded in the last 7 days).
///
/// # Errors
/// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key is not a List;
/// timeouts and connection errors.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn lock_history(client: &Client, timeout: Duration, names: &LockNames) -> Result<Vec<HistoryEntry>> {
    let key = names.history_key();
    // `LRANGE` as a custom command: fred's list commands are a feature leasehold does
    // not otherwise need.
    let command = CustomCommand::new_static("LRANGE", ClusterHash::FirstKey, false);
    let call = client.custom::<Vec<String>, _>(command, vec![key.clone(), "0".to_owned(), "-1".to_owned()]);
    let entries = bounded(timeout, "LRANGE of the lock history", &key, call).await?;
    Ok(entries.iter().map(|entry| HistoryEntry::parse(entry)).collect())
}

/// Runs `force_release_owner.lua` (`leasehold unlock NAME --force --owner ID`): deletes
/// the lock `names` only if `owner` holds it, wakes its waiters, and, with `by` (who
/// forces it: the forcing client's connection name), records it in the lock's history.
/// `publish` is the publish command (`publish`, or `spublish` for sharded pub/sub). A
/// history the server refuses before anything is written (an ACL without
/// `~leasehold_history:*`, a migrating slot) is left out, with a warning, as by
/// [`LockStore::force_release`](crate::LockStore::force_release). `true` when it deleted.
///
/// # Errors
/// Timeouts and connection errors; script errors.
///
/// # Cancel safety
/// Dropping the future does not take the command back: once written, it runs.
pub async fn force_release_owner(
    client: &Client,
    timeout: Duration,
    names: &LockNames,
    owner: &str,
    publish: &str,
    by: Option<&str>,
) -> Result<bool> {
    let run = |by: Option<&str>| {
        let keys = vec![names.key().to_owned(), names.channel().to_owned(), names.queue_key()];
        let (history, by) = by.map_or((String::new(), String::new()), |by| (names.history_key(), by.to_owned()));
        let args = vec![owner.to_owned(), "0".to_owned(), publish.to_owned(), history, by];
        scripts::FORCE_RELEASE_OWNER.run::<i64, _, _>(client, names.key(), timeout, keys, args)
    };
    let reply = match run(by).await {
        Err(error) if retry_without_history(by, &error, names.key()) => run(None).await?,
        other => other?,
    };
    Ok(reply == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_name_keeps_only_plain_characters() {
        let uuid = "0b7e3f1c-59b2-4a43-9d6b-3f0b0b3c2a11";
        assert_eq!(connection_name(uuid, "billing api/v2"), format!("leasehold:{uuid}:billing_api_v2"));
        assert_eq!(connection_name(uuid, "a.b_c-D9"), format!("leasehold:{uuid}:a.b_c-D9"));
        assert_eq!(connection_name(uuid, "ü"), format!("leasehold:{uuid}:_"));
    }

    #[test]
    fn every_owner_form_leads_to_its_client() {
        let uuid = "0b7e3f1c-59b2-4a43-9d6b-3f0b0b3c2a11";
        for owner in [format!("{uuid}:7"), format!("{uuid}:7:write"), format!("{uuid}-7")] {
            assert_eq!(owner_client(&owner), Some(uuid), "{owner}");
        }
        assert_eq!(owner_client("not-a-uuid:1"), None);
        assert_eq!(owner_client(""), None);
        assert_eq!(client_key(uuid), format!("leasehold_client:{{{uuid}}}"));
    }

    #[test]
    fn a_history_entry_reads_back() {
        let entry = HistoryEntry::parse("1700000000123 force-unlock by=leasehold:u:svc owners=a:1,b:2:write");
        assert_eq!(entry.at_ms, 1_700_000_000_123);
        assert_eq!(entry.action, "force-unlock");
        assert_eq!(entry.by, "leasehold:u:svc");
        assert_eq!(entry.owners, ["a:1", "b:2:write"]);
        assert!(HistoryEntry::parse("1 force-unlock by=x owners=").owners.is_empty());
    }

    #[test]
    fn a_description_round_trips_through_its_fields() {
        let description = ClientDescription {
            host: "h".into(),
            pid: 42,
            service: "svc".into(),
            started_ms: 1_700_000_000_000,
            version: "0.1.0".into(),
        };
        let fields: HashMap<String, String> =
            description.fields().into_iter().map(|(field, value)| (field.to_owned(), value)).collect();
        assert_eq!(ClientDescription::from_fields(&fields), Some(description));
        assert_eq!(ClientDescription::from_fields(&HashMap::new()), None);
    }
}
