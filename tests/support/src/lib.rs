//! Test harness for leasehold, against a real `redis-server`, never a mock.
//!
//! - [`RedisServer`]: a throwaway `redis-server` on a free port in a temp dir, without
//!   persistence, killed on drop; it can be restarted, stopped (`SIGSTOP`) and resumed,
//!   and can serve TLS next to plaintext ([`ServerOptions::tls`]).
//! - [`Proxy`]: a TCP proxy in front of a server that can add latency, drop replies and
//!   cut connections, for faults that a server alone cannot produce.
//! - [`RedisServer::start_replica_of`]: a replica of a server, in sync before it returns;
//!   [`RedisServer::promote`] makes it a primary.
//! - [`RedisCluster`]: 3 primaries and 3 replicas; [`SentinelSet`]: a primary, a replica
//!   and 3 sentinels. Each is started once per test binary (once per run under nextest,
//!   shared by the test processes) or privately, and dies with the test process.
//! - [`Monitor`]: a `MONITOR` tap that records every command the server runs.
//! - [`raw_command`]: one command over a plain TCP connection, for tests that must not go
//!   through the client under test.

mod cluster;
mod monitor;
mod proxy;
mod raw;
mod reaper;
pub mod redisson_latch;
pub mod redisson_pes;
pub mod redisson_rwlock;
pub mod redisson_semaphore;
mod replica;
mod sentinel;
mod server;
mod shared;

pub use cluster::{RedisCluster, SlotMigration};
pub use sentinel::{SentinelSet, SERVICE as SENTINEL_SERVICE};

pub use monitor::Monitor;
pub use proxy::Proxy;
pub use raw::{raw_command, raw_commands, RespValue};
pub use server::{RedisServer, ServerOptions, TlsFiles};

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
