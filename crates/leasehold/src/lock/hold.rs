//! The local record of one owner's holds: which continuous hold is current, how many
//! guards share it, its watchdog entry, and its tracking (the check after reconnects).
//!
//! A *hold* starts when the server answers a fresh acquire (hold count 1) and ends when
//! the last hold is released, the hold is found lost, or the server says the owner no
//! longer holds the lock. Guards of a hold that has ended are *stale*: their unlock sends
//! nothing, so it can never give back a hold of a later acquire by the same owner.
//!
//! One owner can be shared by many tasks (an `Arc<Lock>`), so its acquires and releases
//! can be in flight at once. Their script round trips take turns ([`OwnerHolds::turn`]):
//! each is sent and its reply recorded before the next is sent, so replies are applied in
//! the order the server ran them. Each turn has a sequence number, and the record is kept
//! right even if replies were applied out of order (a unit test feeds them so).

use std::sync::Arc;
use std::time::Duration;

use lock_core::{LeaseState, Release};
use lock_watchdog::{LostReason, Renewal, Tracking};
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

#[derive(Debug)]
struct Counts {
    /// Guards alive (not yet unlocked or dropped).
    guards: u32,
    /// Guards detached whose release has not been sent and answered yet: their holds
    /// still count on the server, so every count sent meanwhile includes them.
    releasing: u32,
    watchdog_guards: u32,
    renewal: Option<Renewal>,
    /// The watchdog's check of this hold after every reconnect (every hold, fixed lease
    /// or not), while a guard of it is alive.
    tracking: Option<Tracking>,
    /// The earliest turn known to belong to this hold, and the hold count it saw.
    first_seq: u64,
    first_holds: u64,
}

impl Hold {
    fn new(expires_at: Instant, seq: u64, holds: u64) -> Self {
        Hold {
            lease: Arc::new(LeaseState::new(expires_at)),
            counts: Mutex::new(Counts {
                guards: 0,
                releasing: 0,
                watchdog_guards: 0,
                renewal: None,
                tracking: None,
                first_seq: seq,
                first_holds: holds,
            }),
        }
    }

    /// Whether a watchdog entry renews this hold now.
    pub(crate) fn is_renewed(&self) -> bool {
        self.counts.lock().renewal.as_ref().is_some_and(Renewal::is_active)
    }

    /// Whether a watchdog-mode guard of this hold is still alive.
    pub(crate) fn has_watchdog_guards(&self) -> bool {
        self.counts.lock().watchdog_guards > 0
    }

    /// Makes the hold checked after every reconnect (`track` makes the watchdog's
    /// [`Tracking`] with the owner recorded for it), unless it already is, it is known
    /// lost, or no guard of it is left. Called under the acquiring turn, right after
    /// [`OwnerHolds::acquired`].
    pub(crate) fn track(&self, track: impl FnOnce(&Arc<LeaseState>) -> Tracking) {
        if self.lease.is_marked_lost() {
            return;
        }
        let mut counts = self.counts.lock();
        if counts.tracking.is_none() && counts.guards > 0 {
            counts.tracking = Some(track(&self.lease));
        }
    }

    fn add_guard(&self, mode: LeaseMode, register: impl FnOnce(&Arc<LeaseState>) -> Renewal) {
        let mut counts = self.counts.lock();
        counts.guards += 1;
        if mode == LeaseMode::Watchdog {
            counts.watchdog_guards += 1;
            if counts.renewal.is_none() {
                counts.renewal = Some(register(&self.lease));
            }
        }
    }
}

/// A turn to send one script of this owner and record its reply. Held from before the
/// command is sent until its reply is recorded; dropping it lets the next one go.
pub(crate) struct Turn<'a> {
    pub(crate) seq: u64,
    _permit: tokio::sync::MutexGuard<'a, u64>,
}

/// The holds of one owner (one `Lock` handle).
#[derive(Debug, Default)]
pub(crate) struct OwnerHolds {
    current: Mutex<Option<Arc<Hold>>>,
    /// The latest end of a minimum hold asked by a guard of this owner
    /// (`LockGuard::unlock_after`): until then, every release of the owner that would
    /// give back its last hold keeps the key instead (`release_after.lua`), whichever
    /// guard, hold, undo or clean-up sends it.
    keep_until: Mutex<Option<Instant>>,
    /// The sequencer: the next turn's number.
    turns: tokio::sync::Mutex<u64>,
}

impl OwnerHolds {
    /// Asks every last release of this owner to keep the key until at least `until`
    /// (the latest of every ask wins: a minimum hold is never shortened).
    pub(crate) fn keep_until(&self, until: Instant) {
        let mut keep = self.keep_until.lock();
        *keep = Some(keep.map_or(until, |kept| kept.max(until)));
    }

    /// Until when a last release of this owner is still to keep the key, seen at `now`:
    /// `None` when no minimum hold was asked or it is over (the release then deletes the
    /// key as usual).
    pub(crate) fn kept_until(&self, now: Instant) -> Option<Instant> {
        (*self.keep_until.lock()).filter(|until| *until > now)
    }

    /// Waits for this owner's next turn (FIFO among the tasks that share the owner).
    ///
    /// Cancel safety: dropping the future gives up the place in line; nothing is sent.
    pub(crate) async fn turn(&self) -> Turn<'_> {
        // Uncontended (the usual case: one task per owner), take it without building
        // and polling the `lock()` future. `try_lock` fails whenever the turn is taken,
        // and a released turn goes to the first queued task before `try_lock` can see
        // it free, so this never overtakes a task that is waiting: the order stays FIFO.
        let mut next = match self.turns.try_lock() {
            Ok(next) => next,
            Err(_) => self.turns.lock().await,
        };
        *next += 1;
        Turn { seq: *next, _permit: next }
    }

    /// Records an acquire, sent in turn `seq`, that the server answered with `holds`
    /// (1 = fresh). `register` makes the watchdog entry when the hold needs one and has
    /// none. The deadline becomes `sent_at + lease` if that is later.
    pub(crate) fn acquired(
        &self,
        seq: u64,
        holds: u64,
        sent_at: Instant,
        lease: Duration,
        mode: LeaseMode,
        register: impl FnOnce(&Arc<LeaseState>) -> Renewal,
    ) -> Arc<Hold> {
        let mut current = self.current.lock();
        // `check_expiry`: a renewed hold whose deadline passed is lost (reported once),
        // not joined and revived by this acquire.
        if let Some(hold) = current.as_ref().filter(|hold| !hold.lease.check_expiry()) {
            let joins = {
                let mut counts = hold.counts.lock();
                if seq > counts.first_seq {
                    // In order: a count above 1 continues the hold; 1 means the server
                    // had forgotten the owner (expired, force-unlocked) and this is new.
                    holds > 1
                } else if counts.first_holds > 1 {
                    // Applied after a later turn of the same hold, which saw more than
                    // one hold: this acquire is an earlier part of that hold.
                    counts.first_seq = seq;
                    counts.first_holds = holds;
                    true
                } else {
                    // The current hold started fresh after this acquire ran, so the
                    // hold this acquire took had already ended: its guard is stale.
                    let stale = Arc::new(Hold::new(sent_at, seq, holds));
                    stale.lease.mark_lost();
                    stale.counts.lock().guards = 1;
                    return stale;
                }
            };
            if joins {
                hold.lease.extend(sent_at, lease);
                hold.add_guard(mode, register);
                return hold.clone();
            }
        }
        if let Some(stale) = current.take() {
            // The server says this is a fresh hold: whatever we had is gone (guards of
            // it still alive lose it now).
            end(&stale, Ended::Found);
        }
        let hold = Arc::new(Hold::new(lock_core::args::instant_after(sent_at, lease), seq, holds));
        hold.add_guard(mode, register);
        *current = Some(hold.clone());
        hold
    }

    /// How many holds the owner accounts for: the live guards of its current hold plus
    /// those whose release is still to be sent (0 when it has no current hold). Read
    /// under the owner's turn, this is the count the server should have; acquire sends
    /// it plus one, a release minus one, an undo as it is.
    pub(crate) fn accounted(&self) -> u64 {
        self.current.lock().as_ref().filter(|hold| !hold.lease.is_marked_lost()).map_or(0, |hold| {
            let counts = hold.counts.lock();
            u64::from(counts.guards) + u64::from(counts.releasing)
        })
    }

    /// `true` while this owner has a current hold (it holds the lock, as far as it knows).
    pub(crate) fn has_current(&self) -> bool {
        self.current.lock().as_ref().is_some_and(|hold| !hold.lease.is_marked_lost())
    }

    /// `true` while `hold` is this owner's current hold and not known lost.
    pub(crate) fn is_current(&self, hold: &Arc<Hold>) -> bool {
        self.current.lock().as_ref().is_some_and(|c| Arc::ptr_eq(c, hold)) && !hold.lease.is_marked_lost()
    }

    /// A guard of `hold` is gone (unlocked, dropped). Stops the renewal when no
    /// watchdog guard is left. With `will_release`, its hold keeps counting until
    /// [`OwnerHolds::released_sent`]; the hold stops being current when nothing of it is
    /// left.
    pub(crate) fn detach(&self, hold: &Arc<Hold>, mode: LeaseMode, will_release: bool) {
        let mut current = self.current.lock();
        let mut counts = hold.counts.lock();
        counts.guards = counts.guards.saturating_sub(1);
        if will_release {
            counts.releasing += 1;
        }
        if mode == LeaseMode::Watchdog {
            counts.watchdog_guards = counts.watchdog_guards.saturating_sub(1);
            if counts.watchdog_guards == 0 {
                // Dropping the Renewal deregisters it synchronously: no later round
                // renews this hold.
                counts.renewal = None;
            }
        }
        if counts.guards == 0 {
            // No guard left to tell: stop checking it (synchronously, as the renewal).
            counts.tracking = None;
        }
        let last = counts.guards == 0 && counts.releasing == 0;
        drop(counts);
        if last && current.as_ref().is_some_and(|c| Arc::ptr_eq(c, hold)) {
            *current = None;
        }
    }

    /// The release of a detached guard of `hold` was sent and answered, or given up:
    /// it no longer counts. The hold stops being current when nothing of it is left.
    pub(crate) fn released_sent(&self, hold: &Arc<Hold>) {
        let mut current = self.current.lock();
        let mut counts = hold.counts.lock();
        counts.releasing = counts.releasing.saturating_sub(1);
        let last = counts.guards == 0 && counts.releasing == 0;
        drop(counts);
        if last && current.as_ref().is_some_and(|c| Arc::ptr_eq(c, hold)) {
            *current = None;
        }
    }

    /// The server says the owner holds nothing now (its last hold was released, or it
    /// was not the owner): every hold this owner knew of has ended, and any guard of it
    /// still around no longer holds the lock, so it is marked lost for them (and, with
    /// [`Ended::Found`], that loss is reported once, `owner_gone`).
    pub(crate) fn server_holds_nothing(&self, also: Option<&Arc<Hold>>, how: Ended) {
        let stale = self.current.lock().take();
        if let Some(stale) = stale {
            end(&stale, how);
        }
        if let Some(hold) = also {
            end(hold, how);
        }
    }

    /// Records the server's answer to a release of `hold` whose first attempt was sent
    /// at `first_sent` asking for `need` (zero: the TTL was left as it was). The last
    /// hold, or "not owner", ends it; a remaining hold keeps a TTL of at least `need`.
    pub(crate) fn released(&self, hold: &Arc<Hold>, release: Release, first_sent: Instant, need: Duration) {
        match release {
            Release::Released | Release::NotOwner => self.server_holds_nothing(Some(hold), Ended::Found),
            Release::StillHeld { .. } if !need.is_zero() => hold.lease.extend(first_sent, need),
            Release::StillHeld { .. } => {}
        }
    }
}

/// How a hold ended, for [`OwnerHolds::server_holds_nothing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The server answered one of the owner's scripts that the owner holds nothing (a
    /// fresh acquire, a release, an upgrade check): guards of the hold still alive lost
    /// it while they held it, and that loss is reported (once, `owner_gone`, as a
    /// renewal that finds the owner gone reports it). With no guard left (the last
    /// release), nothing is reported.
    Found,
    /// Ended by the client itself (`Client::shutdown`): not a loss to report.
    Locally,
}

fn end(hold: &Hold, how: Ended) {
    let (renewal, tracking) = {
        let mut counts = hold.counts.lock();
        let alive = counts.guards > 0;
        let (renewal, tracking) = (counts.renewal.take(), counts.tracking.take());
        if how == Ended::Found && alive {
            if let Some(tracking) = &tracking {
                tracking.report_lost(LostReason::OwnerGone);
            }
        }
        (renewal, tracking)
    };
    // Deregistered (a renewed hold whose deadline had passed unseen is reported as
    // such first: it was lost before the server said so).
    drop(renewal);
    drop(tracking);
    hold.lease.mark_lost();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_watchdog(_: &Arc<LeaseState>) -> Renewal {
        unreachable!("fixed-lease holds are never registered")
    }

    const LEASE: Duration = Duration::from_secs(10);
    const FIXED: LeaseMode = LeaseMode::Fixed(LEASE);

    /// Two acquires through one shared owner: the server ran #1 (count 1) then #2
    /// (count 2), and the replies are applied the other way round. Both guards share
    /// one live hold; today's rule ("1 means fresh") would have ended the second one's.
    #[tokio::test(start_paused = true)]
    async fn replies_applied_out_of_order_keep_one_live_hold() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        let second = holds.acquired(2, 2, now, LEASE, FIXED, no_watchdog);
        let first = holds.acquired(1, 1, now, LEASE, FIXED, no_watchdog);
        assert!(Arc::ptr_eq(&first, &second), "one continuous hold");
        assert!(!first.lease.is_marked_lost() && holds.is_current(&first));
        holds.detach(&second, FIXED, false);
        assert!(holds.has_current(), "one guard is left");
        holds.detach(&first, FIXED, false);
        assert!(!holds.has_current());
    }

    /// In order, a count of 1 after a live hold means the server forgot the owner: the
    /// old hold ends (its guards are stale) and a new one starts.
    #[tokio::test(start_paused = true)]
    async fn a_fresh_count_in_order_ends_the_stale_hold() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        let old = holds.acquired(1, 1, now, LEASE, FIXED, no_watchdog);
        let new = holds.acquired(2, 1, now, LEASE, FIXED, no_watchdog);
        assert!(!Arc::ptr_eq(&old, &new));
        assert!(old.lease.is_marked_lost() && !holds.is_current(&old));
        assert!(holds.is_current(&new));
    }

    /// A late reply of an acquire that ran before the current hold started fresh: its
    /// hold had ended already, so its guard is stale and the live hold is untouched.
    #[tokio::test(start_paused = true)]
    async fn a_late_reply_from_an_ended_hold_is_stale() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        let live = holds.acquired(5, 1, now, LEASE, FIXED, no_watchdog);
        let late = holds.acquired(3, 1, now, LEASE, FIXED, no_watchdog);
        assert!(late.lease.is_marked_lost(), "the late guard is stale");
        assert!(holds.is_current(&live) && !live.lease.is_marked_lost());
    }

    /// A release answered "still held" keeps the hold; "released" ends it and any
    /// other guard of it.
    #[tokio::test(start_paused = true)]
    async fn releases_end_or_keep_the_hold() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        let a = holds.acquired(1, 1, now, LEASE, FIXED, no_watchdog);
        let b = holds.acquired(2, 2, now, LEASE, FIXED, no_watchdog);
        holds.detach(&b, FIXED, false);
        holds.released(&b, Release::StillHeld { holds: 1 }, now, Duration::ZERO);
        assert!(holds.is_current(&a));
        holds.released(&a, Release::Released, now, Duration::ZERO);
        assert!(a.lease.is_marked_lost() && !holds.has_current());
    }

    /// Two guards detach before either release is sent: the counts each release sends
    /// still include the other's hold, so the first leaves 1 and the second 0 (not 0
    /// then "not owner").
    #[tokio::test(start_paused = true)]
    async fn a_pending_release_still_counts_until_it_is_sent() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        let a = holds.acquired(1, 1, now, LEASE, FIXED, no_watchdog);
        let b = holds.acquired(2, 2, now, LEASE, FIXED, no_watchdog);
        holds.detach(&a, FIXED, true);
        holds.detach(&b, FIXED, true);
        assert_eq!(holds.accounted(), 2, "both holds still count on the server");
        assert_eq!(holds.accounted() - 1, 1, "the first release leaves one hold");
        holds.released_sent(&a);
        assert_eq!(holds.accounted() - 1, 0, "the second release gives back the last");
        holds.released_sent(&b);
        assert!(!holds.has_current());
    }

    /// The minimum hold kept by the owner's last release: the latest ask wins, and none
    /// is left once it is over.
    #[tokio::test(start_paused = true)]
    async fn the_latest_min_hold_wins_until_it_is_over() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        assert_eq!(holds.kept_until(now), None, "no minimum hold asked");
        let until = now + Duration::from_micros(1_500_500);
        holds.keep_until(until);
        holds.keep_until(now + Duration::from_millis(700));
        assert_eq!(holds.kept_until(now), Some(until), "the later ask");
        assert_eq!(holds.kept_until(now + Duration::from_millis(1500)), Some(until));
        assert_eq!(holds.kept_until(until), None, "over");
    }

    /// A shorter nested lease never moves the hold's deadline back.
    #[tokio::test(start_paused = true)]
    async fn a_shorter_nested_lease_keeps_the_outer_deadline() {
        let holds = OwnerHolds::default();
        let now = Instant::now();
        let outer = holds.acquired(1, 1, now, LEASE, FIXED, no_watchdog);
        let deadline = outer.lease.expires_at();
        let short = Duration::from_millis(100);
        let inner = holds.acquired(2, 2, now, short, LeaseMode::Fixed(short), no_watchdog);
        assert_eq!(inner.lease.expires_at(), deadline);
    }
}
