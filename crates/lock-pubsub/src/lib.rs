//! Waiting for a lock without polling: one subscriber connection per client, shared by
//! every waiter, which wakes waiters when a release message arrives.
//!
//! The model is tokio's `Notified::enable`: register interest first, then check (try to
//! acquire), then wait. A [`Waiter`] joins its channel's FIFO queue when it is made, so a
//! release published after that cannot be missed:
//!
//! ```text
//! let waiter = subscriber.register(channel);     // join the queue (first in line: may try now)
//! waiter.subscribed_by(deadline).await;           // SUBSCRIBE confirmed by the server
//! loop {
//!     if waiter.take_turn() { try to acquire; on success return }
//!     waiter.wait_until(retry_at.min(deadline)).await;  // a message, or the holder's TTL
//! }
//! ```
//!
//! - **One subscription per channel**, reference-counted by the queue: the first waiter's
//!   registration makes the subscriber task `SUBSCRIBE`, the last one's departure makes it
//!   `UNSUBSCRIBE`. Only that task sends (un)subscribe commands, so they never race.
//! - **Wake one**: an unlock message (`0`) wakes the first waiter in line, never one
//!   further back; a read-unlock message (`1`, or anything unknown) wakes all.
//! - **FIFO among local waiters**: only the first waiter in line (or one woken by a
//!   message) tries to acquire; a wake that finds the lock taken again keeps its place.
//!   When the first waiter leaves (acquired, timed out, cancelled), the next one is woken.
//! - **Lost messages are survived**: a broadcast lag or a reconnect (after the
//!   resubscribe is confirmed) wakes every waiter; a message that never comes is covered by
//!   the waiter's own timer on the holder's TTL.
//!
//! See `docs/architecture.md` for the state machine.

mod channel;
mod subscriber;
mod waiter;

pub use subscriber::{Subscriber, SubscriberStats};
pub use waiter::Waiter;
