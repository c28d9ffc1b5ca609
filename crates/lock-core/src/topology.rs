//! Where a cluster's slots are now: a fresh `CLUSTER SLOTS`, read apart from fred's
//! cached slot map. fred 10.1 refreshes its map only when a command meets a `MOVED` or
//! a connection breaks, so a change on a shard the client sends nothing to (a failover
//! under a live connection, the server dropping a moved slot's shard subscriptions)
//! goes unseen until the client reads the map itself.

use std::time::Duration;

use fred::clients::Client;
use fred::prelude::{ClientLike, ClusterInterface};
use fred::types::cluster::ClusterRouting;
use fred::types::Value;

/// How often a client's background tasks read the slot map while it matters (shard
/// channels subscribed, holds to tell of a failover): Redisson's `scanInterval`.
pub const TOPOLOGY_CHECK: Duration = Duration::from_secs(1);

/// `CLUSTER SLOTS` through `client` (on whichever node fred sends a keyless command
/// to), bounded by `timeout`, as a slot map. `None` when it fails, times out or cannot
/// be read (logged at debug level): the caller tries again at its next check.
///
/// # Cancel safety
/// Dropping the future drops the reply; the command reads nothing and changes nothing.
pub async fn read_slot_map(client: &Client, timeout: Duration) -> Option<ClusterRouting> {
    let value = match tokio::time::timeout(timeout, client.cluster_slots::<Value>()).await {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => {
            tracing::debug!(target: crate::TARGET, %error, "CLUSTER SLOTS failed");
            return None;
        }
        Err(_) => {
            tracing::debug!(target: crate::TARGET, "CLUSTER SLOTS timed out");
            return None;
        }
    };
    // The host for nodes the reply names without one (fred does the same).
    let host = client.client_config().server.hosts().first().map(|server| server.host.clone())?;
    ClusterRouting::from_cluster_slots(value, host)
        .map_err(|error| tracing::debug!(target: crate::TARGET, %error, "unreadable CLUSTER SLOTS"))
        .ok()
}

/// `true` when `fresh` gives some slot to another primary than `cached` does (or either
/// leaves a slot unserved that the other serves).
pub fn primaries_differ(cached: &ClusterRouting, fresh: &ClusterRouting) -> bool {
    let ranges = |map: &ClusterRouting| {
        let mut ranges: Vec<(u16, u16, String)> =
            map.slots().iter().map(|r| (r.start, r.end, r.primary.to_string())).collect();
        ranges.sort();
        ranges
    };
    ranges(cached) != ranges(fresh)
}

/// Brings `client`'s slot map up to date when the cluster's has changed: reads
/// `CLUSTER SLOTS` ([`read_slot_map`]) and, when a slot has another primary than fred's
/// cached map says, has fred sync its map and connections (`sync_cluster`, which
/// connects to the new primaries). Returns whether that changed a slot's primary in
/// fred's map (the server may then have lost holds that never replicated). A failed
/// sync changes nothing and is tried again at the next call; a difference the sync
/// cannot remove (a reply fred reads otherwise) costs a sync per call and reports
/// nothing. Each step is bounded by `timeout`; a standalone client sends nothing.
///
/// # Cancel safety
/// Dropping the future may leave a sync half-way, as fred's own syncs after a `MOVED`
/// can be; fred finishes or redoes it on its next redirection.
pub async fn sync_if_primaries_changed(client: &Client, timeout: Duration) -> bool {
    if !client.is_clustered() {
        return false;
    }
    let Some(fresh) = read_slot_map(client, timeout).await else { return false };
    let Some(before) = client.cached_cluster_state() else { return false };
    if !primaries_differ(&before, &fresh) {
        return false;
    }
    tracing::debug!(target: crate::TARGET, "the cluster's primaries changed: syncing the slot map");
    match tokio::time::timeout(timeout, client.sync_cluster()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(target: crate::TARGET, %error, "cluster sync failed"),
        Err(_) => tracing::debug!(target: crate::TARGET, "cluster sync timed out"),
    }
    client.cached_cluster_state().is_some_and(|after| primaries_differ(&before, &after))
}
