//! **leasehold**: distributed locks on Redis for services, Redisson-grade and
//! Redisson-compatible.
//!
//! - **Reentrant**: a Hash per lock, field `CLIENT_UUID:N` = owner, value = hold count
//!   (Redisson's `RLock` layout, so Java and Rust services share one lock).
//! - **Leased and renewed**: `lock()` holds a 30 s lease that a per-client watchdog
//!   renews every 10 s, in batches, while the guard lives; an explicit lease is never
//!   renewed.
//! - **Woken, not polling**: a [`Lock`]'s waiters queue on the server and a release
//!   hands the lock to the first live one, across clients and processes; a
//!   [`FencedLock`]'s waiters are woken by the release message, in FIFO order among one
//!   client's waiters.
//! - **Told when lost**: [`LockGuard::lost`] resolves when a renewal finds the lock gone,
//!   when the check of every hold after a reconnect or a failover finds it gone (fixed
//!   leases included), or when the lease runs out.
//! - **Replay-safe**: acquire and release set the owner's absolute hold count, so a
//!   retried or replayed script counts once, and no latch key is left behind.
//! - **Fenced, if asked**: [`Client::fenced_lock`] gives every hold a fencing token that
//!   the guarded resource checks ([`fence`]), which stops a holder paused past its lease.
//! - **Fair, if asked**: [`Client::fair_lock`] grants the lock strictly in queue order
//!   across processes, in Redisson's `RFairLock` layout; a waiter that died or gave up
//!   leaves no entry that blocks the others.
//! - **Read/write, if asked**: [`Client::read_write_lock`] lets many readers share a lock
//!   that a writer holds alone, in Redisson's `RReadWriteLock` layout ([`ReadWriteLock`]).
//! - **Replicated, if asked**: [`ClientBuilder::sync_replicas`] makes every acquire wait
//!   for replica acknowledgements (`WAIT`) and gives it back when too few answered.
//! - **Blocking, if asked**: the feature `blocking` adds `leasehold::blocking`, the same
//!   locks for synchronous code, run by a runtime thread of the client's own.
//!
//! # Quick start
//!
//! One [`Client`] per process, kept in the application's state: it is cheap to clone
//! (an `Arc` inside), so every request handler gets its own copy. Each request makes
//! its own lock handle, because the handle is the owner (see "Ownership and
//! reentrancy" below). In axum, `AppState` is what `Router::with_state` takes and what
//! a handler receives as `State(state): State<AppState>`; here a plain `tokio::spawn`
//! stands in for the framework. The crate's README shows the same code.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! #[derive(Clone)]
//! struct AppState { locks: leasehold::Client }  // cloned into every handler
//!
//! async fn pay_order(state: AppState, order_id: u64) -> leasehold::Result<&'static str> {
//!     let lock = state.locks.lock(format!("order:{order_id}"));  // one lock per request
//!     let Some(guard) = lock.try_lock_for(Duration::from_secs(2)).await? else {
//!         return Ok("busy");  // another instance held it for 2 s (a 409, say)
//!     };
//!     // ... the critical section: held, and renewed, until unlock ...
//!     guard.unlock().await?;
//!     Ok("paid")
//! }
//!
//! #[tokio::main]
//! async fn main() -> leasehold::Result<()> {
//!     let state = AppState { locks: leasehold::Client::connect("redis://127.0.0.1:6379").await? };
//!     let reply = tokio::spawn(pay_order(state.clone(), 1001)).await.expect("handler")?;
//!     println!("{reply}");
//!     Ok(())
//! }
//! ```
//!
//! The other ways to take a lock:
//!
//! ```no_run
//! # async fn demo() -> leasehold::Result<()> {
//! use std::time::Duration;
//!
//! let client = leasehold::Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = client.lock("order:1001");
//!
//! // Wait as long as it takes; renewed while held.
//! let guard = lock.lock().await?;
//! guard.unlock().await?;
//!
//! // Fast fail: one round trip.
//! if let Some(guard) = lock.try_lock().await? {
//!     guard.unlock().await?;
//! }
//!
//! // Wait at most 2 s, hold for 10 s (never renewed).
//! if let Some(guard) = lock.try_lock_with(Duration::from_secs(2), Duration::from_secs(10)).await? {
//!     guard.unlock().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Ownership and reentrancy
//!
//! **The handle is the owner.** Each [`Client::lock`] call makes a new owner id
//! (`CLIENT_UUID:N`, the Hash field Redisson would write for a thread). Everything
//! acquired through one handle is one owner's: acquiring again while it holds the lock
//! *re-enters* (the hold count goes up, and each acquire returns its own guard); the
//! key is deleted when the last guard is released.
//!
//! - **Tasks that must exclude each other get their own handles.** Two handles for the
//!   same name are two owners, even in one task: they exclude each other as two
//!   processes would (a task that holds one and waits on the other waits for itself).
//!
//!   ```no_run
//!   # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
//!   let client2 = client.clone();
//!   let worker = tokio::spawn(async move {
//!       let lock = client2.lock("report"); // its own owner
//!       let guard = lock.lock().await?;
//!       guard.unlock().await
//!   });
//!   let guard = client.lock("report").lock().await?; // another owner: excluded
//!   guard.unlock().await?;
//!   # worker.await.expect("task")?; Ok(()) }
//!   ```
//!
//! - **Sharing one owner between tasks is explicit.** [`Lock`] is not `Clone`, because a
//!   clone moved into another task would silently re-enter instead of excluding. To share
//!   the owner on purpose (a hold that spans tasks), put the handle in an `Arc`: every
//!   task then acquires *as the same owner* and re-enters. Acquires and releases through
//!   one shared handle take turns on the wire, so the hold count and each guard's view of
//!   its hold stay right however the tasks interleave.
//!
//!   ```no_run
//!   # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
//!   use std::sync::Arc;
//!   let lock = Arc::new(client.lock("batch:7"));
//!   let outer = lock.lock().await?;
//!   let shared = Arc::clone(&lock);
//!   tokio::spawn(async move {
//!       // Same owner: re-enters at once, even though `outer` is held.
//!       if let Ok(inner) = shared.lock().await { let _ = inner.unlock().await; }
//!   });
//!   outer.unlock().await?;
//!   # Ok(()) }
//!   ```
//!
//! - **Leases nest.** A re-entry never shortens the key's TTL, and releasing a re-entry
//!   keeps at least what the remaining holds need (the watchdog lease while a watchdog
//!   guard remains).
//!
//! See `docs/architecture.md` in the repository (an index of topic documents) for the
//! data layout, the scripts and the state machines.

mod client;
mod config;
mod debug;
mod fair;
pub mod fence;
mod fenced;
mod guard;
mod hold;
mod latch;
mod live;
mod lock;
mod lock_wait;
#[cfg(feature = "metrics")]
mod metric_handles;
mod multi;
mod multi_guard;
mod multi_take;
mod permit;
mod permit_semaphore;
mod pes_wait;
mod read_write;
mod replicas;
mod retry;
mod rw_guard;
mod semaphore;
mod semaphore_ops;
mod semaphore_permit;
mod semaphore_wait;
mod sentinel;
mod simple;
mod stats;
mod telemetry;
mod tls;
mod wait;

pub use client::Client;
#[allow(deprecated)] // The old name stays exported for one release.
pub use config::DEFAULT_FAIR_LOCK_KEEPALIVE;
pub use config::{
    ClientBuilder, ClientConfig, ShardedSubscriptionMode, DEFAULT_COMMAND_TIMEOUT, DEFAULT_FENCE_TOKEN_TTL,
    DEFAULT_QUEUE_KEEPALIVE, DEFAULT_RENEW_BATCH, DEFAULT_REPLAY_WINDOW, DEFAULT_SYNC_TIMEOUT,
    DEFAULT_WATCHDOG_TIMEOUT,
};
pub use fair::FairLock;
pub use fenced::{FencedGuard, FencedLock};
pub use guard::LockGuard;
pub use latch::{CountDownLatch, DEFAULT_LATCH_RECHECK};
pub use lock::Lock;
pub use lock_core::{Error, ErrorKind, Result};
pub use lock_pubsub::{PubsubMode, SubscriberStats};
pub use lock_watchdog::WatchdogStats;
pub use multi::{MultiLock, MULTI_LOCK_MAX_MEMBERS};
pub use multi_guard::MultiGuard;
pub use permit::Permit;
pub use permit_semaphore::PermitExpirableSemaphore;
pub use read_write::ReadWriteLock;
pub use rw_guard::{ReadGuard, WriteGuard};
pub use semaphore::Semaphore;
pub use semaphore_permit::SemaphorePermit;
pub use simple::{SimpleGuard, SimpleLock};
pub use stats::ClientStats;

// The blocking API (feature `blocking`): the same locks without an async runtime.
#[cfg(feature = "blocking")]
pub mod blocking;

/// The fred client crate leasehold is built on, for [`Client::from_fred`] and
/// [`ClientBuilder::fred_config`].
pub use fred;

#[cfg(test)]
mod readme_quick_start {
    /// The rust lines of the first ```` ```no_run ```` example of the crate docs, without
    /// the `//! ` prefix and without hidden (`# `) lines.
    fn doc_example(lib: &str) -> Vec<String> {
        let docs: Vec<&str> =
            lib.lines().filter_map(|l| l.strip_prefix("//!")).map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
        let start = docs.iter().position(|l| *l == "```no_run").expect("a no_run example in the crate docs") + 1;
        docs[start..]
            .iter()
            .take_while(|l| **l != "```")
            .filter(|l| !l.starts_with("# "))
            .map(|l| (*l).to_owned())
            .collect()
    }

    /// The lines of the README's first ```` ```rust ```` block.
    fn readme_example(readme: &str) -> Vec<String> {
        let mut lines = readme.lines().skip_while(|l| *l != "```rust").skip(1);
        lines.by_ref().take_while(|l| *l != "```").map(str::to_owned).collect()
    }

    /// The README's quick start is the crate docs' first example, which `cargo test
    /// --doc` compiles: so the README cannot show code that no longer builds.
    #[test]
    fn the_readme_quick_start_is_the_compiled_doc_example() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).expect("the workspace README");
        let doc = doc_example(include_str!("lib.rs"));
        assert!(doc.len() > 10, "the doc example was found: {doc:?}");
        assert_eq!(readme_example(&readme), doc, "README.md's first rust block differs from the lib.rs quick start");
    }
}
