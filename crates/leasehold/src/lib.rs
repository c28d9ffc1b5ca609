//! **leasehold**: distributed locks on Redis for Rust services, Redisson-grade and
//! Redisson-compatible. Many instances of a service share one lock through Redis, and a
//! Java service holding a Redisson `RLock` and a Rust service holding a leasehold
//! [`Lock`] exclude each other on the same name: leasehold keeps Redisson's data layout.
//! A lock is leased and renewed while held, its waiters are woken by the server rather
//! than polling (a [`Lock`]'s are handed it in arrival order, across processes), and a
//! guard is told when its lock is lost ([`LockGuard::lost`]).
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
//!     // On the way out, once the server takes no more requests: every hold still held is
//!     // given back, renewals and the subscriber stop, the connections close.
//!     state.locks.shutdown().await?;
//!     Ok(())
//! }
//! ```
//!
//! Shut down gracefully: stop taking requests, let the ones in flight finish, then call
//! [`Client::shutdown`], which gives back every lock and permit the process still holds
//! (rather than leaving them to expire with their leases), stops the renewals and closes
//! the connections. With axum:
//!
//! ```rust,ignore
//! let app = Router::new().route("/orders/{id}/pay", post(pay)).with_state(state.clone());
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! axum::serve(listener, app)
//!     .with_graceful_shutdown(async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;                      // returns once the last request has finished
//! state.locks.shutdown().await?;    // then give back what is still held
//! ```
//!
//! Kubernetes sends SIGTERM and waits `terminationGracePeriodSeconds` (30 s by default):
//! listen for SIGTERM too (`tokio::signal::unix::signal(SignalKind::terminate())`), and keep
//! the shutdown within the grace period (it takes at most two command timeouts, 10 s by
//! default: the releases, then the connections' `QUIT`).
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
//! Every lock kind has the same calls (`X` is `lock`, `read`, `write` or `acquire`):
//! `X()` waits as long as it takes and is renewed, `X_with_lease(lease)` holds a fixed
//! lease, `try_X()` is one round trip, `try_X_for(wait)` waits at most `wait` and is
//! renewed, `try_X_with(wait, lease)` both. A guard is given back by `unlock()` (a
//! permit by `release()`) or in the background when dropped.
//!
//! # Which kind do I want
//!
//! Use one kind per name: their keys are laid out differently.
//!
//! | you need | kind | Redisson equivalent |
//! |---|---|---|
//! | one holder at a time, waiters served in arrival order across processes | [`Lock`] ([`Client::lock`]) | `RLock` |
//! | a scheduled job run once per tick across a fleet | [`Lock`]: [`Lock::try_lock`] at each tick, then [`LockGuard::unlock_after`] | none (`lockAtLeastFor` of Java's `ShedLock`) |
//! | the resource to refuse a paused holder's late write (a fencing token) | [`FencedLock`] ([`Client::fenced_lock`], [`fence`]) | `RFencedLock` |
//! | queue order shared with Redisson fair-lock peers | [`FairLock`] ([`Client::fair_lock`]) | `RFairLock` |
//! | many readers or one writer | [`ReadWriteLock`] ([`Client::read_write_lock`]) | `RReadWriteLock` |
//! | several locks, all or none, without deadlock | [`MultiLock`] ([`Client::multi_lock`]) | `RedissonMultiLock` |
//! | at most N at once | [`Semaphore`] ([`Client::semaphore`]) | `RSemaphore` |
//! | at most N at once, and a crashed holder's permit comes back | [`PermitExpirableSemaphore`] ([`Client::permit_expirable_semaphore`]) | `RPermitExpirableSemaphore` |
//! | to wait until N others are done | [`CountDownLatch`] ([`Client::count_down_latch`]) | `RCountDownLatch` |
//! | one instance of a fleet to lead (run a task), the others to take over, everyone to know who leads | [`Election`] ([`Client::election`]: [`Leadership`], [`Observer`]) | none (leasehold's own keys) |
//! | the cheapest try-lock: one `SET NX PX` String, not reentrant, not renewed | [`SimpleLock`] ([`Client::simple_lock`]) | none (rslock's algorithm) |
//!
//! The feature `blocking` adds `leasehold::blocking`, the same kinds for synchronous
//! code; `metrics` records lock metrics through the `metrics` facade; `tls-rustls` or
//! `tls-native-tls` enables `rediss://` URLs.
//!
//! # Graceful shutdown
//!
//! A dropped guard is released in the background, and a crashed process's locks expire
//! with their lease. To leave at once, call [`Client::shutdown`] before the process
//! exits: it gives back every hold of every clone of the client (locks, permits,
//! read/write and multi-lock holds) within one command timeout, stops the watchdog and
//! the subscriber, and closes the connections; later calls fail with
//! [`ErrorKind::Shutdown`].
//!
//! ```no_run
//! async fn serve(client: leasehold::Client) -> leasehold::Result<()> {
//!     // ... serve until told to stop (a signal, say) ...
//!     client.shutdown().await // every hold given back; waiters elsewhere are woken
//! }
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
//! # How it works
//!
//! The guarantees and their limits, and how each kind is laid out in Redis, waits,
//! renews and recovers, are in the repository's documents:
//! [guarantees](https://github.com/leasehold-rs/leasehold/blob/main/docs/guarantees.md),
//! [how it works, in one page](https://github.com/leasehold-rs/leasehold/blob/main/docs/architecture/overview.md)
//! and [the architecture index](https://github.com/leasehold-rs/leasehold/blob/main/docs/architecture.md).

// docs.rs builds with `--cfg docsrs` (Cargo.toml): items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod debug;
mod election;
pub mod fence;
mod latch;
mod lock;
mod multi;
mod permit_semaphore;
mod rwlock;
mod semaphore;
mod simple;
mod telemetry;
mod wait;

pub use client::config::{ClientBuilder, ClientConfig, ShardedSubscriptionMode};
pub use client::health::Health;
pub use client::stats::ClientStats;
pub use client::who::SERVICE_ENV;
pub use client::Client;
pub use election::{Election, ElectionConfig, Leader, Leadership, Observer};
pub use latch::CountDownLatch;
pub use lock::fair::FairLock;
pub use lock::fenced::{FencedGuard, FencedLock};
pub use lock::guard::LockGuard;
pub use lock::Lock;
pub use lock_core::who::{ClientDescription, HistoryEntry};
pub use lock_core::{Error, ErrorKind, Result};
pub use lock_pubsub::{PubsubMode, SubscriberStats};
pub use lock_watchdog::WatchdogStats;
pub use multi::guard::MultiGuard;
pub use multi::MultiLock;
pub use permit_semaphore::permit::Permit;
pub use permit_semaphore::PermitExpirableSemaphore;
pub use rwlock::guard::{ReadGuard, WriteGuard};
pub use rwlock::ReadWriteLock;
pub use semaphore::permit::SemaphorePermit;
pub use semaphore::Semaphore;
pub use simple::{SimpleGuard, SimpleLock};

// The blocking API (feature `blocking`): the same locks without an async runtime.
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
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
