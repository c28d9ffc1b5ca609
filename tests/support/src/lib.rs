//! Test harness for leasehold, against a real `redis-server`, never a mock.
//!
//! - [`RedisServer`]: a throwaway `redis-server` on a free port in a temp dir, without
//!   persistence, killed on drop; it can be restarted, stopped (`SIGSTOP`) and resumed,
//!   and can serve TLS next to plaintext ([`ServerOptions::tls`]).
//! - [`Proxy`]: a TCP proxy in front of a server that can add latency, drop replies and
//!   cut connections, for faults that a server alone cannot produce.
//! - [`PartitionedServer`]: a server in a network namespace of its own that a real
//!   partition (firewall rules dropping its packets both ways) cuts off and heals.
//! - [`TraceLog`]: a `tracing` subscriber recording spans and events, optionally behind
//!   a `RUST_LOG`-style filter.
//! - [`RedisServer::start_replica_of`]: a replica of a server, in sync before it returns;
//!   [`RedisServer::promote`] makes it a primary.
//! - [`RedisCluster`]: 3 primaries and 3 replicas; [`SentinelSet`]: a primary, a replica
//!   and 3 sentinels. Each is started once per test binary (once per run under nextest,
//!   shared by the test processes) or privately, and dies with the test process.
//! - [`Monitor`]: a `MONITOR` tap that records every command the server runs.
//! - [`raw_command`]: one command over a plain TCP connection, for tests that must not go
//!   through the client under test; [`raw`], [`pttl`], [`hgetall`] and
//!   [`pubsub_channels`] ask a [`RedisServer`] through it; [`lock_keys`] lists its keys
//!   but the clients' descriptions (`leasehold_client:{UUID}`, one per live client).
//! - [`client`](fn@client) and [`client_with`]: a leasehold `Client` with short timeouts for tests.
//! - [`Topology`] with [`both_topologies!`]: one test body on a standalone Redis, on
//!   Valkey and on a cluster; [`ServerKind`] with [`both_servers!`]: one standalone body
//!   on Redis and on Valkey.
//! - [`HolderProcess`], [`spawn_contenders`]: holders and contenders in child processes.
//! - [`Target`]: `REDIS_URL`, or a throwaway server, for the benchmark and demo programs.
//! - The Redisson script transcriptions (`redisson_*`) and a raw pub/sub [`Listener`] for
//!   the interop suites; [`expiring`] and [`semaphore_load`], scenarios several suites
//!   share.
//!
//! The one helper crate of the workspace: the integration tests (`tests/`), the CLI's
//! tests, the benches and the demo use it. It depends on `leasehold` (for the client
//! helpers); nothing below `leasehold` (lock-core, lock-watchdog, lock-pubsub) uses it, so
//! there is no cycle and no second copy of leasehold's types.

mod children;
mod client;
mod cluster;
pub mod commandstats;
pub mod expiring;
mod failover;
mod listener;
mod monitor;
mod partition;
mod proxy;
mod raw;
mod reaper;
pub mod redisson_java;
pub mod redisson_latch;
pub mod redisson_pes;
pub mod redisson_rwlock;
pub mod redisson_semaphore;
mod replica;
pub mod semaphore_load;
mod sentinel;
mod server;
mod server_kind;
mod shared;
mod target;
mod topology;
mod trace;

pub use children::{contenders_intervals, spawn_contenders, HolderProcess};
pub use client::{
    client, client_with, command_timeout_for, hgetall, is_client_description, lock_keys, pttl, pubsub_channels, raw,
};
pub use failover::assert_unreplicated_holders_told_and_no_waiter_stuck;
pub use listener::Listener;
pub use server_kind::{ServerKind, VALKEY_SERVER_VAR};
pub use topology::{Place, Topology};

pub use cluster::{RedisCluster, SlotMigration};
pub use sentinel::{SentinelSet, SERVICE as SENTINEL_SERVICE};

pub use monitor::Monitor;
pub use partition::PartitionedServer;
pub use proxy::Proxy;
pub use raw::{raw_command, raw_commands, RespValue};
pub use server::{RedisServer, ServerOptions, TlsFiles};
pub use target::Target;
pub use trace::{Seen, TraceLog};

use std::time::{Duration, Instant};

/// Polls `condition` every few milliseconds until it is true or `deadline` passes.
/// Returns whether it became true. For tests: wait on a condition, never sleep and hope.
/// Cancel safe (it only polls).
pub async fn wait_until(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
