//! The local record of one owner's holds: which continuous hold is current, how many
//! guards share it, and its watchdog entry.
//!
//! A *hold* starts when the server answers a fresh acquire (hold count 1) and ends when
//! the last hold is released, the hold is found lost, or the server says the owner no
//! longer holds the lock. Guards of a hold that has ended are *stale*: their unlock sends
//! nothing, so it can never give back a hold of a later acquire by the same owner.

use std::sync::Arc;
use std::time::Duration;

use lock_core::{LeaseState, Release};
use lock_watchdog::Renewal;
use parking_lot::Mutex;
use tokio::time::Instant;

/// How a guard's lease is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMode {
    /// The client's watchdog timeout, renewed while held.
    Watchdog,
    /// An explicit lease, never renewed (Redisson's rule).
    Fixed(Duration),
}

/// One continuous hold of one owner, shared by its guards.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) lease: Arc<LeaseState>,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    guards: u32,
    watchdog_guards: u32,
    renewal: Option<Renewal>,
}

impl Hold {
    fn new(expires_at: Instant) -> Self {
        Hold { lease: Arc::new(LeaseState::new(expires_at)), counts: Mutex::new(Counts::default()) }
    }

    /// Whether a watchdog entry renews this hold now.
    pub(crate) fn is_renewed(&self) -> bool {
        self.counts.lock().renewal.as_ref().is_some_and(Renewal::is_active)
    }
}

/// The holds of one owner (one `Lock` handle and its clones).
#[derive(Debug, Default)]
pub(crate) struct OwnerHolds {
    current: Mutex<Option<Arc<Hold>>>,
}

impl OwnerHolds {
    /// Records an acquire the server answered with `holds` (1 = fresh). `register`
    /// makes the watchdog entry when the hold needs one and has none.
    pub(crate) fn acquired(
        &self,
        holds: u64,
        sent_at: Instant,
        lease: Duration,
        mode: LeaseMode,
        register: impl FnOnce(&Arc<LeaseState>) -> Renewal,
    ) -> Arc<Hold> {
        let mut current = self.current.lock();
        let hold = match current.as_ref() {
            Some(hold) if holds > 1 && !hold.lease.is_marked_lost() => hold.clone(),
            _ => {
                if let Some(stale) = current.take() {
                    // The server says this is a fresh hold: whatever we had is gone.
                    end(&stale);
                }
                let hold = Arc::new(Hold::new(sent_at + lease));
                *current = Some(hold.clone());
                hold
            }
        };
        hold.lease.extend(sent_at, lease);
        let mut counts = hold.counts.lock();
        counts.guards += 1;
        if mode == LeaseMode::Watchdog {
            counts.watchdog_guards += 1;
            if counts.renewal.is_none() {
                counts.renewal = Some(register(&hold.lease));
            }
        }
        drop(counts);
        hold
    }

    /// `true` while this owner has a current hold (it holds the lock, as far as it knows).
    pub(crate) fn has_current(&self) -> bool {
        self.current.lock().as_ref().is_some_and(|hold| !hold.lease.is_marked_lost())
    }

    /// `true` while `hold` is this owner's current hold.
    pub(crate) fn is_current(&self, hold: &Arc<Hold>) -> bool {
        self.current.lock().as_ref().is_some_and(|c| Arc::ptr_eq(c, hold))
    }

    /// A guard of `hold` is gone (unlocked, dropped). Stops the renewal when no
    /// watchdog guard is left, and ends the hold when no guard is left.
    pub(crate) fn detach(&self, hold: &Arc<Hold>, mode: LeaseMode) {
        let mut current = self.current.lock();
        let mut counts = hold.counts.lock();
        counts.guards = counts.guards.saturating_sub(1);
        if mode == LeaseMode::Watchdog {
            counts.watchdog_guards = counts.watchdog_guards.saturating_sub(1);
            if counts.watchdog_guards == 0 {
                // Dropping the Renewal deregisters it synchronously: no later round
                // renews this hold.
                counts.renewal = None;
            }
        }
        let last = counts.guards == 0;
        drop(counts);
        if last && current.as_ref().is_some_and(|c| Arc::ptr_eq(c, hold)) {
            *current = None;
        }
    }

    /// The server says the owner holds nothing now (released, or not owner): end
    /// `hold`. Any guard of it still around no longer holds the lock, so it is marked
    /// lost for them.
    pub(crate) fn ended(&self, hold: &Arc<Hold>) {
        let mut current = self.current.lock();
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, hold)) {
            *current = None;
        }
        drop(current);
        end(hold);
    }

    /// Records the server's answer to a release of `hold` sent at `sent_at` with
    /// `lease`: the last hold ends it, a remaining hold moves its deadline (the script
    /// set the TTL again), and "not owner" ends it too (the owner holds nothing).
    pub(crate) fn released(&self, hold: &Arc<Hold>, release: Release, sent_at: Instant, lease: Duration) {
        match release {
            Release::Released | Release::NotOwner => self.ended(hold),
            Release::StillHeld { .. } => hold.lease.extend(sent_at, lease),
        }
    }
}

fn end(hold: &Hold) {
    hold.counts.lock().renewal = None;
    hold.lease.mark_lost();
}
