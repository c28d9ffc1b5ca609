//! What the watchdog tells its owner as it works: renewals answered, holds found lost,
//! the number of holds it renews. leasehold counts them (`Client::stats`) and turns them
//! into metrics; the watchdog itself knows nothing of either.

use std::fmt::Debug;

/// Why a hold was found lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal found the owner field gone (expired, force-unlocked, overwritten).
    OwnerGone,
    /// No renewal succeeded before the hold's local lease deadline: they failed
    /// (timeouts, connection errors) or went unanswered (a partition, a frozen server).
    RenewalsFailed,
    /// The check after a reconnect or a failover found the owner field gone.
    GoneAfterReconnect,
}

impl LostReason {
    /// Every reason, so that a metrics layer can register each reason's series before
    /// the first loss (an alert on a counter's increase misses a series born at 1).
    pub const ALL: [LostReason; 3] =
        [LostReason::OwnerGone, LostReason::RenewalsFailed, LostReason::GoneAfterReconnect];

    /// A short, stable label: `owner_gone`, `renewals_failed`, `gone_after_reconnect`.
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::OwnerGone => "owner_gone",
            LostReason::RenewalsFailed => "renewals_failed",
            LostReason::GoneAfterReconnect => "gone_after_reconnect",
        }
    }

    /// Why, in words, for the `leasehold.lost` event's message.
    pub fn describe(self) -> &'static str {
        match self {
            LostReason::OwnerGone => {
                "a renewal found the owner gone (the lease expired on the server, or the lock was force-unlocked)"
            }
            LostReason::RenewalsFailed => {
                "the lease ran out on the local clock before a renewal succeeded (renewals failed or went unanswered)"
            }
            LostReason::GoneAfterReconnect => {
                "the check after a reconnect or a failover found the owner gone (the server lost the lock)"
            }
        }
    }
}

/// Called by the scheduler, synchronously, from its task (or from the thread that
/// registers or drops a [`Renewal`](crate::Renewal), or, for a lease that ran out, from
/// whoever noticed it first: see [`WatchdogObserver::lost`]). Implementations must be
/// cheap and must not block: they run under the watchdog's entry lock or a hold's lease
/// lock.
pub trait WatchdogObserver: Debug + Send + Sync + 'static {
    /// One hold's renewal was answered: `renewed` (its lease set again) or not (its
    /// owner field was gone: [`WatchdogObserver::lost`] follows).
    fn renewal(&self, renewed: bool) {
        let _ = renewed;
    }

    /// A renewal call for `holds` holds failed (timeout, connection); they are retried.
    fn renewal_failed(&self, holds: usize) {
        let _ = holds;
    }

    /// A hold of lock `key`, registered or tracked with `tag`, was found lost: called
    /// once per hold, under the hold's lease lock, right before it is marked lost (so
    /// before any of its holders' `lost()` resolves). For a renewed hold whose lease
    /// deadline passed, it may run on the thread of whoever noticed first (a task
    /// awaiting `lost()`, a call to `is_lost()`, a guard's drop) rather than the
    /// watchdog's.
    fn lost(&self, key: &str, tag: &'static str, reason: LostReason) {
        let _ = (key, tag, reason);
    }

    /// The number of holds registered for renewal changed to `registered`.
    fn registered(&self, registered: usize) {
        let _ = registered;
    }
}

#[cfg(test)]
mod tests {
    use super::LostReason;

    /// `ALL` has every reason: the match is exhaustive, so a reason added to the enum
    /// fails to compile here until it is counted (and added to `ALL`).
    #[test]
    fn all_has_every_reason() {
        let counted = |reason: LostReason| match reason {
            LostReason::OwnerGone | LostReason::RenewalsFailed | LostReason::GoneAfterReconnect => 3,
        };
        assert_eq!(LostReason::ALL.len(), counted(LostReason::OwnerGone));
        let labels: std::collections::HashSet<&str> = LostReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), LostReason::ALL.len(), "every reason has its own label");
    }
}
