//! Waiting for a lock without polling: one subscriber connection per client, shared by
//! every waiter, which wakes waiters when a release message arrives.
//!
//! **Internal to leasehold: no stability promise.** This crate is published only because
//! [`leasehold`](https://docs.rs/leasehold) depends on it; its API may change in any
//! release, and `leasehold` pins it to the exact version it was built with. Depend on
//! `leasehold` instead.
//!
//! The model is tokio's `Notified::enable`: register interest first, then check (try to
//! acquire), then wait. A [`Waiter`] joins its lock's FIFO queue when it is made, so a
//! release published after that cannot be missed:
//!
//! ```text
//! let waiter = subscriber.register_lock(channel, lock_key);  // join the queue (first in line: may try now)
//! waiter.subscribed_by(deadline).await;           // SUBSCRIBE confirmed by the server
//! loop {
//!     if waiter.take_turn() { try to acquire; on success return }
//!     waiter.wait_until(retry_at.min(deadline)).await;  // a message, or the holder's TTL
//! }
//! ```
//!
//! - **One queue per lock, one subscription per channel.** Locks can share a channel
//!   (`x` and `{x}` both use `redisson_lock__channel:{x}`), so a channel holds one FIFO
//!   queue per lock key, and its subscription is reference-counted over all of them: the
//!   first waiter on the channel makes the subscriber task `SUBSCRIBE`; once the last
//!   one has left, the channel lingers subscribed for [`LINGER`] (the next wait on it
//!   costs nothing extra) and is then `UNSUBSCRIBE`d. Only that task sends
//!   (un)subscribe commands, so they never race.
//! - **Wake one per lock**: an unlock message (`0`) cannot say which lock was released,
//!   so it wakes the first waiter in line of every lock on the channel, never one further
//!   back; a read-unlock message (`1`, or anything unknown) wakes all.
//! - **FIFO among local waiters of a lock**: only the first waiter in line (or one woken
//!   by a message) tries to acquire; a wake that finds the lock taken again keeps its
//!   place. When the first waiter leaves (acquired, timed out, cancelled), the next one is
//!   woken. A waiter on one lock never waits behind a waiter on another.
//! - **A message costs the same whatever the number of channels**: the task reconciles
//!   subscriptions only for the channels a registration or departure touched, and only
//!   on those events, never per message.
//! - **Lost messages are survived**: a broadcast lag or a reconnect (after the
//!   resubscribe is confirmed) wakes every waiter; a message that never comes is covered by
//!   the waiter's own timer on the holder's TTL.
//!
//! See `docs/architecture/waiting.md` for the state machine.

/// The `tracing` target of everything the waiting side emits (subscribe, unsubscribe,
/// resubscribe after a reconnect or a lag): under `leasehold`, so
/// `RUST_LOG=leasehold=debug` shows it (see leasehold's `docs/observability.md`).
pub const TARGET: &str = "leasehold::pubsub";

mod channel;
mod subscriber;
mod waiter;

pub use channel::Grant;
pub use subscriber::{PubsubMode, QueuedPermits, Subscriber, SubscriberStats, LINGER, TOPOLOGY_CHECK};
pub use waiter::Waiter;
