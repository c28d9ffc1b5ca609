//! Clients with short timeouts for tests, and one-command questions to a server over a
//! raw connection that bypasses the client under test.

use std::time::Duration;

use crate::{raw_command, RedisServer, RespValue};

/// A client on `url` with a short watchdog timeout and command timeout for tests: 2 s,
/// or less when the renewal period (`watchdog / 3`) is shorter (the config requires the
/// command timeout to fit inside it).
///
/// # Panics
/// When the server cannot be reached.
pub async fn client_with(url: &str, watchdog: Duration) -> leasehold::Client {
    leasehold::Client::builder()
        .url(url)
        .watchdog_timeout(watchdog)
        .command_timeout(command_timeout_for(watchdog))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// The command timeout [`client_with`] uses for a watchdog timeout.
pub fn command_timeout_for(watchdog: Duration) -> Duration {
    Duration::from_secs(2).min((watchdog / 3).saturating_sub(Duration::from_millis(1)))
}

/// A client with a 30 s watchdog (the default) and a 2 s command timeout.
///
/// # Panics
/// When the server cannot be reached.
pub async fn client(server: &RedisServer) -> leasehold::Client {
    client_with(&server.url(), Duration::from_secs(30)).await
}

/// Every key of `server` but the clients' descriptions (`leasehold_client:{UUID}`, one
/// per live client, beside the locks: `docs/architecture/data-layout.md`), sorted.
pub fn lock_keys(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = match raw(server, &["KEYS", "*"]) {
        RespValue::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        other => panic!("unexpected KEYS reply {other:?}"),
    };
    keys.retain(|key| !is_client_description(key));
    keys.sort();
    keys
}

/// Whether `key` is a client's description, `leasehold_client:{UUID}`.
pub fn is_client_description(key: &str) -> bool {
    key.starts_with("leasehold_client:")
}

/// Runs one command on `server` over a separate raw connection.
pub fn raw(server: &RedisServer, args: &[&str]) -> RespValue {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw_command(&server.addr(), &bytes)
}

/// `PUBSUB CHANNELS *` on `server`, sorted.
pub fn pubsub_channels(server: &RedisServer) -> Vec<String> {
    match raw(server, &["PUBSUB", "CHANNELS", "*"]) {
        RespValue::Array(items) => {
            let mut names: Vec<String> = items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            names.sort();
            names
        }
        other => panic!("unexpected PUBSUB reply {other:?}"),
    }
}

/// The key's PTTL in ms (-2 absent, -1 no expiry).
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    raw(server, &["PTTL", key]).as_int().unwrap_or_else(|| panic!("PTTL {key}"))
}

/// `HGETALL key` as sorted (field, value) pairs.
pub fn hgetall(server: &RedisServer, key: &str) -> Vec<(String, String)> {
    match raw(server, &["HGETALL", key]) {
        RespValue::Array(items) => {
            let flat: Vec<String> = items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            let mut pairs: Vec<(String, String)> = flat.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
            pairs.sort();
            pairs
        }
        other => panic!("unexpected HGETALL reply {other:?}"),
    }
}
