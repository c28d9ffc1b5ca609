//! The back-off between attempts that failed with a transient error.

use std::time::Duration;

/// Jittered exponential back-off between attempts that failed with a transient error:
/// 50 ms doubling to 1 s, each delay drawn from its upper half so that many waiters
/// hit by one outage do not retry in step.
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(super) const FIRST: Duration = Duration::from_millis(50);
    pub(super) const MAX: Duration = Duration::from_secs(1);

    pub(crate) fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    pub(super) fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        use std::hash::{BuildHasher, Hasher};
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        // std's per-instance random hash keys are random enough for jitter.
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let half = delay / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_nanos(random % nanos)
    }
}
