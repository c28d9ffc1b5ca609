//! Where a wait hears that it may try again: its place in a local line, woken by
//! release and queue messages. lock-pubsub's [`Subscriber`] and [`Waiter`] are the real
//! [`Line`] and [`Slot`]; the engine's unit tests use a fake.

use std::future::Future;
use std::sync::Arc;

use lock_pubsub::{Subscriber, Waiter};
use tokio::time::Instant;

use super::attempt::{ServerQueue, WaitPlan};

/// How a wait joins its line.
#[derive(Debug)]
pub(crate) enum Join {
    /// In the local line of its key on its channel (first in line starts with a turn).
    InLine,
    /// As [`Join::InLine`], for a waiter whose last attempt, sent then, was answered
    /// "held": no turn when nothing was heard since (a waiter alone on its own channel).
    InLineAfter(Instant),
    /// As a shared waiter (a reader; see [`Subscriber::register_shared`]): in no line,
    /// woken by every message. With the send time of its last attempt, answered
    /// "held": no turn when nothing was heard since.
    Shared(Option<Instant>),
    /// As a read/write lock's reader registered on the server for a grant (see
    /// [`Subscriber::register_reader`]): a shared waiter that grant messages naming
    /// `owner` let in.
    Reader {
        /// The reader's owner field.
        owner: Arc<str>,
        /// As [`Join::Shared`]'s.
        sent_at: Option<Instant>,
    },
    /// In the line of a semaphore's key, waiting for `permits` permits (see
    /// [`Subscriber::register_permits`]); `sent_at` as [`Join::InLineAfter`]'s, when the
    /// last attempt was answered "not enough".
    Permits {
        /// The permits waited for.
        permits: u64,
        /// When the last attempt, answered "not enough", was sent (if it was).
        sent_at: Option<Instant>,
    },
    /// As a waiter whose place a server queue keeps (see
    /// [`Subscriber::register_queued`]).
    Queued {
        /// The queue's channel and owner.
        queue: ServerQueue,
        /// Its place as the last call answered (`None`: not queued yet).
        position: Option<u64>,
        /// When that call was sent.
        sent_at: Instant,
    },
}

/// The registry of local lines (one per client).
pub(crate) trait Line: Sync {
    /// One wait's place.
    type Slot: Slot;

    /// How many local waiters a newcomer to the line of `plan`'s key on its channel
    /// would queue behind now (shared waiters stand in front of nobody).
    fn local_waiters(&self, plan: &WaitPlan) -> usize;

    /// Joins the line of `plan` (register before the next attempt: a release from now
    /// on is heard).
    fn join(&self, plan: &WaitPlan, how: Join) -> Self::Slot;
}

/// One wait's place in its line; dropping it leaves the line.
pub(crate) trait Slot: Send + Sync {
    /// Waits until the channel's subscription is confirmed or `deadline`; whether it is.
    fn subscribed_by(&self, deadline: Instant) -> impl Future<Output = bool> + Send;
    /// Whether the waiter may try now; consumes the turn.
    fn take_turn(&self) -> bool;
    /// Whether a grant message gave the waiter what it waits for (a semaphore's queued
    /// waiter: a release served it); consumes it.
    fn take_served(&self) -> bool {
        false
    }
    /// The lease end a waiter ahead left when it acquired, if any (taking it clears it).
    fn take_held_until(&self) -> Option<Instant>;
    /// Whether the waiter is first in line (only the first keeps the TTL timer).
    fn is_first(&self) -> bool;
    /// The waiter's place in the server queue, as its last call answered.
    fn set_position(&self, position: Option<u64>);
    /// Waits for a turn, a change of place, or `deadline`.
    fn wait_until(&self, deadline: Instant) -> impl Future<Output = bool> + Send;
    /// Leaves the line because the waiter acquired, holding until about `held_until`.
    fn acquired(self, held_until: Instant);
    /// The hold a grant message gave the waiter's owner, if one did (a registered
    /// reader's); taking it clears it. Default: none.
    fn take_granted(&self) -> Option<lock_pubsub::Grant> {
        None
    }
}

impl Line for Subscriber {
    type Slot = Waiter;

    fn local_waiters(&self, plan: &WaitPlan) -> usize {
        self.line_waiters(&plan.channel, &plan.key)
    }

    fn join(&self, plan: &WaitPlan, how: Join) -> Waiter {
        match how {
            // A latch's channel: every message wakes every waiter on it.
            Join::InLine if plan.channel_kind == lock_core::WaitChannel::Latch => {
                self.register_broadcast(&plan.channel, &plan.key)
            }
            // A read/write lock's writer: its line's channel has the grant channel beside.
            Join::InLine if plan.grants.is_some() => {
                let grants = plan.grants.as_ref().unwrap_or(&plan.channel);
                self.register_rw_writer(&plan.channel, grants, &plan.key, None)
            }
            Join::InLineAfter(sent_at) if plan.grants.is_some() => {
                let grants = plan.grants.as_ref().unwrap_or(&plan.channel);
                self.register_rw_writer(&plan.channel, grants, &plan.key, Some(sent_at))
            }
            Join::InLine => self.register_lock(&plan.channel, &plan.key),
            Join::InLineAfter(sent_at) => self.register_lock_after(&plan.channel, &plan.key, sent_at),
            Join::Shared(sent_at) => self.register_shared(&plan.channel, &plan.key, sent_at),
            Join::Reader { owner, sent_at } => match &plan.grants {
                Some(grants) => self.register_reader(&plan.channel, grants, &plan.key, &owner, sent_at),
                None => self.register_shared(&plan.channel, &plan.key, sent_at),
            },
            Join::Permits { permits, sent_at } => self.register_permits(&plan.channel, &plan.key, permits, sent_at),
            Join::Queued { queue, position, sent_at } if plan.permits.is_some() => {
                let place = lock_pubsub::QueuedPermits {
                    owner: queue.owner,
                    permits: plan.permits.unwrap_or(1),
                    position,
                    sent_at,
                };
                self.register_queued_permits(&plan.channel, &queue.channel, &plan.key, &place)
            }
            Join::Queued { queue, position, sent_at } => {
                self.register_queued(&plan.channel, &queue.channel, &plan.key, &queue.owner, position, sent_at)
            }
        }
    }
}

impl Slot for Waiter {
    fn subscribed_by(&self, deadline: Instant) -> impl Future<Output = bool> + Send {
        Waiter::subscribed_by(self, deadline)
    }

    fn take_turn(&self) -> bool {
        Waiter::take_turn(self)
    }

    fn take_served(&self) -> bool {
        Waiter::take_served(self)
    }

    fn take_held_until(&self) -> Option<Instant> {
        Waiter::take_held_until(self)
    }

    fn is_first(&self) -> bool {
        Waiter::is_first(self)
    }

    fn set_position(&self, position: Option<u64>) {
        Waiter::set_position(self, position);
    }

    fn wait_until(&self, deadline: Instant) -> impl Future<Output = bool> + Send {
        Waiter::wait_until(self, deadline)
    }

    fn acquired(self, held_until: Instant) {
        Waiter::acquired(self, held_until);
    }

    fn take_granted(&self) -> Option<lock_pubsub::Grant> {
        Waiter::take_granted(self)
    }
}
