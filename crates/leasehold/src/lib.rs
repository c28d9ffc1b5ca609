//! **leasehold**: distributed locks on Redis for services, Redisson-grade and
//! Redisson-compatible.
//!
//! - **Reentrant**: a Hash per lock, field `CLIENT_UUID:N` = owner, value = hold count
//!   (Redisson's `RLock` layout, so Java and Rust services share one lock).
//! - **Leased and renewed**: `lock()` holds a 30 s lease that a per-client watchdog
//!   renews every 10 s, in batches, while the guard lives; an explicit lease is never
//!   renewed.
//! - **Woken, not polling**: waiters subscribe to the lock's release channel; an unlock
//!   wakes one local waiter, in FIFO order.
//! - **Told when lost**: [`LockGuard::lost`] resolves when a renewal finds the lock gone
//!   or the lease runs out.
//! - **Replay-safe**: acquire and release carry request ids, so a retried or replayed
//!   script counts once.
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
//! See `docs/architecture.md` for the data layout, the scripts and the state machines.

mod client;
mod config;
mod guard;
mod hold;
mod lock;
mod simple;
mod tls;
mod wait;

pub use client::Client;
pub use config::{
    ClientBuilder, ClientConfig, DEFAULT_COMMAND_TIMEOUT, DEFAULT_RENEW_BATCH, DEFAULT_REPLAY_WINDOW,
    DEFAULT_WATCHDOG_TIMEOUT,
};
pub use guard::LockGuard;
pub use lock::Lock;
pub use lock_core::{Error, ErrorKind, Result};
pub use simple::{SimpleGuard, SimpleLock};

/// The fred client crate leasehold is built on, for [`Client::from_fred`] and
/// [`ClientBuilder::fred_config`].
pub use fred;
