//! The local view of one hold's lease: when it runs out, and whether it is known lost.
//!
//! One `LeaseState` is shared by every guard of one continuous hold (the reentrant holds
//! of one owner) and by the watchdog entry that renews it. The deadline is on the
//! monotonic clock (`tokio::time::Instant`, which is `std::time::Instant` unless a test
//! pauses time) and computed from when the command that set the server's TTL was
//! *sent*: the server's real expiry is never earlier than the local deadline.
//!
//! A renewed hold (one the watchdog registered) carries an [`ExpiryHook`]: the first
//! look at it after its deadline passed (its `lost()` waking, `is_lost()`, the
//! watchdog's own sweep, a late renewal answer, or the watchdog letting go of it) tells
//! the hook, under the lease's lock, and then marks the hold lost for good. So the loss
//! is reported exactly once, and before any `lost()` of the hold resolves, whatever the
//! holder does with its guard afterwards. A hold found lost another way is reported
//! through [`LeaseState::lose_with`], with the same guarantee.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Told when a renewed hold's lease runs out on the local clock (the renewals did not
/// succeed in time): the watchdog implements it to count and report the loss.
pub trait ExpiryHook: Send + Sync {
    /// The lease of the hold of `key` (registered with the label `tag`) ran past its
    /// local deadline. Called at most once per hold, under the lease's lock, right
    /// before the hold is marked lost (so before any `lost()` of it resolves): it must
    /// be quick, must not block, and must not call back into the same `LeaseState`.
    fn expired(&self, key: &str, tag: &'static str);
}

/// A hold's lease deadline and its lost flag.
#[derive(Debug)]
pub struct LeaseState {
    inner: Mutex<Inner>,
    changed: Notify,
}

#[derive(Debug)]
struct Inner {
    expires_at: Instant,
    lost: bool,
    /// Set while a watchdog renews the hold: who is told when its deadline passes.
    hook: Option<Hook>,
}

/// An installed [`ExpiryHook`] and what it is told.
struct Hook {
    to: Weak<dyn ExpiryHook>,
    key: Arc<str>,
    tag: &'static str,
    /// The registration that installed it (only it removes it).
    id: u64,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook").field("key", &self.key).field("tag", &self.tag).field("id", &self.id).finish()
    }
}

impl Inner {
    /// `true` when the hold is lost: marked so, or past its deadline. A renewed hold
    /// past its deadline is reported to its hook and marked lost here, once.
    fn settle(&mut self, changed: &Notify) -> bool {
        if self.lost {
            return true;
        }
        if Instant::now() < self.expires_at {
            return false;
        }
        if let Some(hook) = self.hook.take() {
            if let Some(to) = hook.to.upgrade() {
                to.expired(&hook.key, hook.tag);
            }
            self.lost = true;
            changed.notify_waiters();
        }
        true
    }
}

impl LeaseState {
    /// A lease that runs out at `expires_at`.
    pub fn new(expires_at: Instant) -> Self {
        LeaseState { inner: Mutex::new(Inner { expires_at, lost: false, hook: None }), changed: Notify::new() }
    }

    /// Records that a command sent at `sent_at` made the server's TTL at least `lease`:
    /// the deadline moves to `sent_at + lease` if that is later. leasehold's scripts
    /// never shorten a lock's TTL, so a deadline never has to move back. Does nothing
    /// once the hold is lost: a lost hold is never revived. A renewed hold whose
    /// deadline has already passed is not revived either: it is reported lost (see
    /// [`ExpiryHook`]).
    pub fn extend(&self, sent_at: Instant, lease: Duration) {
        let until = crate::args::instant_after(sent_at, lease);
        let mut inner = self.inner.lock();
        if inner.lost || (inner.hook.is_some() && inner.settle(&self.changed)) {
            return;
        }
        if until > inner.expires_at {
            inner.expires_at = until;
            drop(inner);
            self.changed.notify_waiters();
        }
    }

    /// Installs the hook told if this hold's deadline passes (a watchdog registration
    /// `id` of the hold of `key`, labelled `tag`), replacing any other. Nothing is
    /// installed on a hold already lost.
    pub fn set_expiry_hook(&self, to: Weak<dyn ExpiryHook>, key: Arc<str>, tag: &'static str, id: u64) {
        let mut inner = self.inner.lock();
        if !inner.lost {
            inner.hook = Some(Hook { to, key, tag, id });
        }
    }

    /// Removes the hook installed by registration `id` (the watchdog lets go of the
    /// hold: unlocked, dropped, detached). If the deadline had passed meanwhile and
    /// nobody looked yet, the loss is reported first: it happened while renewed.
    pub fn remove_expiry_hook(&self, id: u64) {
        let mut inner = self.inner.lock();
        if inner.hook.as_ref().is_some_and(|hook| hook.id == id) {
            inner.settle(&self.changed);
            inner.hook = None;
        }
    }

    /// Marks the hold lost and wakes everyone waiting in [`LeaseState::lost`], without
    /// reporting it to the hook (an end the holder was told of another way: a release
    /// answered, a shutdown). Returns `true` if this call made the change.
    pub fn mark_lost(&self) -> bool {
        let mut inner = self.inner.lock();
        let first = !inner.lost;
        inner.lost = true;
        inner.hook = None;
        drop(inner);
        if first {
            // Once lost, a waiter registered later sees the flag before it sleeps: only
            // the change itself needs to wake anyone.
            self.changed.notify_waiters();
        }
        first
    }

    /// Marks the hold lost as [`LeaseState::mark_lost`] does, after calling `report`
    /// (under the lease's lock: before any `lost()` or `is_lost()` can see the change).
    /// A hold already lost is left alone and `report` is not called. Returns whether it
    /// was called. `report` must be quick and must not call back into this `LeaseState`.
    pub fn lose_with(&self, report: impl FnOnce()) -> bool {
        let mut inner = self.inner.lock();
        if inner.lost {
            return false;
        }
        report();
        inner.lost = true;
        inner.hook = None;
        drop(inner);
        self.changed.notify_waiters();
        true
    }

    /// `true` once the hold was marked lost (by a renewal or a check after a reconnect
    /// that found the owner gone, by a renewed hold's deadline passing, or by its
    /// owner's release or shutdown).
    pub fn is_marked_lost(&self) -> bool {
        self.inner.lock().lost
    }

    /// [`LeaseState::is_marked_lost`], after reporting and marking a renewed hold whose
    /// deadline has passed (see [`ExpiryHook`]). A hold that is not renewed (a fixed
    /// lease) is never marked by its deadline alone.
    pub fn check_expiry(&self) -> bool {
        let mut inner = self.inner.lock();
        if inner.hook.is_some() {
            inner.settle(&self.changed);
        }
        inner.lost
    }

    /// `true` when the hold is marked lost or its lease deadline has passed (a renewed
    /// hold's loss is reported first, see [`ExpiryHook`]).
    pub fn is_lost(&self) -> bool {
        self.inner.lock().settle(&self.changed)
    }

    /// The local lease deadline.
    pub fn expires_at(&self) -> Instant {
        self.inner.lock().expires_at
    }

    /// Resolves when the hold is lost: marked lost, or its deadline passed without
    /// being extended. A renewed hold's loss has been reported (counted, logged) by the
    /// time this resolves.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes (and reports a loss it is the first to see).
    pub async fn lost(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Register before reading the state, so no change is missed in between.
            notified.as_mut().enable();
            let expires_at = {
                let mut inner = self.inner.lock();
                if inner.settle(&self.changed) {
                    return;
                }
                inner.expires_at
            };
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(expires_at) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn lost_fires_at_the_deadline_unless_extended() {
        let start = Instant::now();
        let lease = LeaseState::new(start + Duration::from_secs(3));
        let waited = tokio::time::timeout(Duration::from_secs(2), lease.lost()).await;
        assert!(waited.is_err(), "not lost before the deadline");
        lease.extend(Instant::now(), Duration::from_secs(3));
        assert!(!lease.is_lost());
        let extended = lease.expires_at();
        lease.extend(Instant::now(), Duration::from_secs(1));
        assert_eq!(lease.expires_at(), extended, "a shorter lease never moves the deadline back");
        lease.lost().await;
        assert!(Instant::now() >= start + Duration::from_secs(5));
        assert!(lease.is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn mark_lost_wakes_waiters_and_cannot_be_undone() {
        let lease = std::sync::Arc::new(LeaseState::new(Instant::now() + Duration::from_secs(60)));
        let waiter = tokio::spawn({
            let lease = lease.clone();
            async move { lease.lost().await }
        });
        tokio::task::yield_now().await;
        assert!(lease.mark_lost());
        assert!(!lease.mark_lost());
        waiter.await.expect("waiter");
        lease.extend(Instant::now(), Duration::from_secs(60));
        assert!(lease.is_lost());
    }

    /// Counts what it is told, and checks it is told before the hold reads lost.
    #[derive(Default)]
    struct Counting {
        told: std::sync::atomic::AtomicU32,
    }

    impl ExpiryHook for Counting {
        fn expired(&self, key: &str, tag: &'static str) {
            assert_eq!((key, tag), ("k", "lock"));
            self.told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Counting {
        fn told(&self) -> u32 {
            self.told.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    fn hooked(expires_at: Instant) -> (std::sync::Arc<LeaseState>, std::sync::Arc<Counting>) {
        let lease = std::sync::Arc::new(LeaseState::new(expires_at));
        let hook = std::sync::Arc::new(Counting::default());
        let weak: std::sync::Weak<dyn ExpiryHook> = std::sync::Arc::downgrade(&hook) as _;
        lease.set_expiry_hook(weak, std::sync::Arc::from("k"), "lock", 7);
        (lease, hook)
    }

    /// A renewed hold whose deadline passes is reported once, by the first to look
    /// (here `lost()`), before `lost()` resolves; later looks, a late extension and
    /// the hook's removal report nothing more, and the hold stays lost.
    #[tokio::test(start_paused = true)]
    async fn a_renewed_hold_past_its_deadline_is_reported_once_before_lost_resolves() {
        let start = Instant::now();
        let (lease, hook) = hooked(start + Duration::from_secs(3));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let (lease, hook) = (lease.clone(), hook.clone());
                tokio::spawn(async move {
                    lease.lost().await;
                    hook.told()
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(hook.told(), 0);
        for waiter in waiters {
            assert_eq!(waiter.await.expect("waiter"), 1, "told before lost() resolved");
        }
        assert!(lease.is_marked_lost() && lease.is_lost() && lease.check_expiry());
        lease.extend(Instant::now(), Duration::from_secs(60));
        assert!(lease.is_lost(), "not revived by a late renewal");
        lease.remove_expiry_hook(7);
        assert!(!lease.lose_with(|| panic!("lost already: not reported again")));
        assert_eq!(hook.told(), 1);
    }

    /// Nobody waiting: `is_lost()`, a late renewal answer or the hook's removal is the
    /// first look, and reports it. A fixed lease (no hook) is never marked by its
    /// deadline, and a hold ended by `mark_lost` reports nothing.
    #[tokio::test(start_paused = true)]
    async fn the_first_look_after_the_deadline_reports_it() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let (by_is_lost, hook_a) = hooked(deadline);
        let (by_extend, hook_b) = hooked(deadline);
        let (by_removal, hook_c) = hooked(deadline);
        let (by_mark, hook_d) = hooked(deadline);
        let fixed = LeaseState::new(deadline);
        tokio::time::sleep(Duration::from_millis(999)).await;
        assert!(!by_is_lost.is_lost() && !by_extend.check_expiry());
        by_removal.remove_expiry_hook(8); // not its registration: stays
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(by_is_lost.is_lost());
        by_extend.extend(Instant::now(), Duration::from_secs(10));
        by_removal.remove_expiry_hook(7);
        by_mark.mark_lost();
        assert_eq!((hook_a.told(), hook_b.told(), hook_c.told(), hook_d.told()), (1, 1, 1, 0));
        assert!(by_extend.is_marked_lost() && by_removal.is_marked_lost());
        assert!(fixed.is_lost() && !fixed.check_expiry() && !fixed.is_marked_lost());
    }

    /// A hook removed before the deadline is never told; the hold then ends at its
    /// deadline as a fixed lease does. `lose_with` reports once and wins over the hook.
    #[tokio::test(start_paused = true)]
    async fn a_removed_hook_is_never_told_and_lose_with_reports_once() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let (released, hook_a) = hooked(deadline);
        released.remove_expiry_hook(7);
        let (found, hook_b) = hooked(deadline);
        let mut reports = 0;
        assert!(found.lose_with(|| reports += 1));
        assert!(!found.lose_with(|| reports += 1));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(released.is_lost() && !released.is_marked_lost());
        found.lost().await;
        assert_eq!((hook_a.told(), hook_b.told(), reports), (0, 0, 1));
    }
}
