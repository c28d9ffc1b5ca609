//! Server calls counted the way the benches count them (`INFO commandstats`: every
//! command the server ran, those inside scripts included), for the tests that hold a
//! kind to "no more server calls than Redisson's scripts" (issue 29 item 1).

use std::collections::BTreeMap;

use crate::{raw, RedisServer};

/// `INFO commandstats` of `server`: command name (lower case, `config|resetstat` style)
/// to calls.
pub fn command_calls(server: &RedisServer) -> BTreeMap<String, u64> {
    let text = raw(server, &["INFO", "commandstats"]).as_str().map(str::to_owned).unwrap_or_default();
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
        let Some((name, stats)) = rest.split_once(':') else { continue };
        let count = stats
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        calls.insert(name.to_owned(), count);
    }
    calls
}

/// The commands `server` ran while `run` ran, by name (`INFO` and `CONFIG` left out:
/// the measurement itself). The server must be otherwise idle.
pub async fn calls_during<F: std::future::Future<Output = ()>>(server: &RedisServer, run: F) -> BTreeMap<String, u64> {
    let before = command_calls(server);
    run.await;
    let after = command_calls(server);
    after
        .into_iter()
        .filter(|(name, _)| name != "info" && !name.starts_with("config"))
        .filter_map(|(name, n)| {
            let spent = n.saturating_sub(before.get(&name).copied().unwrap_or(0));
            (spent > 0).then_some((name, spent))
        })
        .collect()
}

/// The sum of [`calls_during`]'s counts.
pub fn total(calls: &BTreeMap<String, u64>) -> u64 {
    calls.values().sum()
}
