//! Permits a release hands straight to a waiter of the same client (no round trip):
//! every other release of a semaphore whose local line has waiters puts its permits
//! here instead of sending `sem_release.lua`, and wakes that many waiters of the line;
//! their next attempt takes them from here. The permits stay taken in Redis meanwhile.
//! What nobody took within [`FLUSH_AFTER`] is given back to Redis.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// How long handed-over permits wait for a local waiter before they go back to Redis.
pub(crate) const FLUSH_AFTER: Duration = Duration::from_millis(20);

/// One client's handed-over permits, per semaphore key.
#[derive(Debug, Default)]
pub(crate) struct PermitPool {
    keys: Mutex<HashMap<Arc<str>, Spare>>,
}

#[derive(Debug, Default)]
struct Spare {
    permits: i64,
    /// Releases seen while local waiters waited: every other one is handed over, so
    /// that the other ones reach Redis and the other clients' waiters.
    releases: u64,
}

impl PermitPool {
    /// A release of `permits` of `key` while local waiters wait: `true` when it is handed
    /// over (the permits are now here), `false` when it must go to Redis.
    pub(crate) fn offer(&self, key: &Arc<str>, permits: i64) -> bool {
        let mut keys = self.keys.lock();
        let spare = keys.entry(key.clone()).or_default();
        spare.releases = spare.releases.wrapping_add(1);
        if spare.releases.is_multiple_of(2) {
            return false;
        }
        spare.permits = spare.permits.saturating_add(permits);
        true
    }

    /// Takes `permits` handed-over permits of `key`, if that many are here.
    pub(crate) fn take(&self, key: &str, permits: i64) -> bool {
        let mut keys = self.keys.lock();
        match keys.get_mut(key) {
            Some(spare) if spare.permits >= permits => {
                spare.permits -= permits;
                true
            }
            _ => false,
        }
    }

    /// Takes every handed-over permit of `key` nobody took (to give back to Redis).
    pub(crate) fn drain(&self, key: &str) -> i64 {
        let mut keys = self.keys.lock();
        let Some(spare) = keys.get_mut(key) else { return 0 };
        let left = std::mem::take(&mut spare.permits);
        if spare.releases.is_multiple_of(2) {
            keys.remove(key);
        }
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_release_is_handed_over_and_taken_once() {
        let pool = PermitPool::default();
        let key: Arc<str> = Arc::from("s");
        assert!(pool.offer(&key, 1), "the first is handed over");
        assert!(!pool.offer(&key, 1), "the second goes to Redis");
        assert!(!pool.take("s", 2) && pool.take("s", 1) && !pool.take("s", 1));
        assert!(pool.offer(&key, 2));
        assert_eq!(pool.drain("s"), 2);
        assert_eq!(pool.drain("s"), 0);
        assert!(!pool.take("s", 1));
    }
}
