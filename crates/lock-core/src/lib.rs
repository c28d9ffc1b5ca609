//! The lowest layer of leasehold: everything that touches Redis directly.
//!
//! **Internal to leasehold: no stability promise.** This crate is published only because
//! [`leasehold`](https://docs.rs/leasehold) depends on it; its API may change in any
//! release, and `leasehold` pins it to the exact version it was built with. Depend on
//! `leasehold` instead.
//!
//! - [`names`]: the lock key and the keys and channel derived from it, exactly as
//!   Redisson names them, so Java and Rust services share one lock.
//! - [`owner`]: owner ids (`CLIENT_UUID:N`).
//! - [`scripts`]: the Lua scripts (this crate's `lua/*.lua`, assembled from
//!   `lua/templates/` and `lua/fragments/` by `bash scripts/sync-lua.sh`), each wrapped
//!   with its precomputed SHA1.
//! - [`store`]: typed async operations (acquire, release, renew, …) on a fred client.
//! - [`lease`]: the shared, monotonic-clock view of one hold's lease and its lost signal.
//! - [`gate`]: the write gate that holds lock writes back while a switch of primary is
//!   followed.
//! - [`semaphore`]: a semaphore's names and its scripts' calls on the store.
//! - [`pes`]: a permit-expirable semaphore's names, permit ids and its scripts' calls.
//! - [`fence`]: fencing tokens on the resource side (`fenced_write.lua`).
//! - [`kind`]: the lock kinds ([`LockKind`]): each one's scripts, KEYS and ARGV, reply
//!   and how its waiters wait; what an acquire is asked ([`AcquireSpec`]) and answers.
//! - [`replicas`]: replica acknowledgement (`WAIT` pipelined behind an acquire).
//! - [`args`]: validation of durations before anything is sent.
//! - [`latch`]: Redisson's `RCountDownLatch`: its key, its literal channel, its calls.
//! - [`who`]: who holds what: a client's description key, its connection name, a lock's
//!   history of forced unlocks.
//! - [`error`]: the one error type, with a [`ErrorKind`] and `is_*` predicates.
//!
//! Users depend on the `leasehold` crate; this crate is its building block.

/// The `tracing` target of what this crate emits (scripts sent again after a refusal,
/// `ASK` redirects followed, cluster topology reads): under `leasehold`, so
/// `RUST_LOG=leasehold=debug` shows it (see leasehold's `docs/observability.md`).
pub const TARGET: &str = "leasehold::redis";

pub mod args;
mod ask;
mod call;
pub mod election;
pub mod error;
pub mod fence;
pub mod gate;
pub mod kind;
pub mod latch;
pub mod lease;
pub mod multi;
pub mod names;
pub mod owner;
pub mod pes;
mod release_after;
pub mod replicas;
pub mod script;
pub mod scripts;
pub mod semaphore;
pub mod store;
pub mod topology;
pub mod who;

pub use error::{Error, ErrorKind, Result};
pub use gate::WriteGate;
pub use kind::{AcquireReply, AcquireSpec, LockKind, QueueKind, WaitChannel};
pub use latch::LatchNames;
pub use lease::{ExpiryHook, LeaseState};
pub use names::LockNames;
pub use owner::{ClientId, OwnerId};
pub use replicas::ReplicaSync;
pub use store::{Acquire, LockStore, Release};
