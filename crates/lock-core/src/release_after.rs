//! The last release of a hold with a minimum hold (`release_after.lua`): the lock is kept
//! in Redisson's layout until the minimum hold is over, then expires by itself
//! (`lockAtLeastFor` of Java's `ShedLock`, for jobs that must run once per tick across a fleet).

use fred::types::Value;
use tokio::time::Instant;

use crate::call::{int_arg, static_arg, unlock_message};
use crate::error::{Error, Result};
use crate::kind::{LockKind, QueueKind};
use crate::names::LockNames;
use crate::owner::OwnerId;
use crate::scripts;
use crate::store::{LockStore, Release};

impl LockStore {
    /// Ends `owner`'s holds on a plain or fenced lock but keeps the key until `until`, an
    /// instant of this client's monotonic clock (`release_after.lua`): the owner's field
    /// stays with a count of 1, the key's TTL becomes the time left (shortened or
    /// lengthened), and the unlock message is
    /// published (always with the store's `redisson_waiters`, else only when a leasehold
    /// waiter flagged the owner) so that waiters learn the new TTL. Nothing is handed
    /// over: the key expires, and the queue head then takes the free lock.
    ///
    /// The time left is measured in whole milliseconds, rounded up, each time the
    /// arguments are built: right before each send, after the write gate (and again for
    /// a resend after a redirect or `NOSCRIPT`), so time spent waiting before the send
    /// does not lengthen the kept time; it is at least 1 ms (`PEXPIRE 0` would delete the
    /// key without telling anyone). Send [`LockStore::release`] with a target of 0 instead
    /// when `until` has passed.
    ///
    /// Answers [`Release::Released`] when the key is kept, [`Release::NotOwner`] when the
    /// owner holds nothing (nothing written or published, so a replay after the key
    /// expired never touches a later owner's lock). A replay with the same `until` sets
    /// the same end again.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a kind whose waiters would not learn the new
    /// TTL (a fair lock, whose queued waiters' deadlines are Redisson's own, or a
    /// read/write lock); nothing is sent. [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key is not a
    /// Hash; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn release_after(
        &self,
        kind: &LockKind,
        names: &LockNames,
        owner: &OwnerId,
        until: Instant,
    ) -> Result<Release> {
        if kind.queue() != QueueKind::Server {
            return Err(Error::invalid_argument(
                "a minimum hold is only kept by a Lock or a FencedLock (not a fair or read/write lock)",
            ));
        }
        let settings = self.call_settings();
        let build = || {
            let keys = vec![names.key_arg().into(), names.channel_arg().into()];
            let args = vec![
                Value::Bytes(owner.arg()),
                int_arg(millis_left(until, Instant::now())),
                unlock_message(),
                static_arg(settings.publish),
                int_arg(u64::from(settings.redisson_waiters)),
            ];
            (keys, args)
        };
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::RELEASE_AFTER, build, None).await?;
        Ok(if reply == 0 { Release::Released } else { Release::NotOwner })
    }
}

/// The whole milliseconds from `now` to `until`, rounded up (never shorter than the time
/// left), and at least 1.
pub(crate) fn millis_left(until: Instant, now: Instant) -> u64 {
    let left = until.saturating_duration_since(now);
    let millis = left.as_millis() + u128::from(!left.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_time_left_is_rounded_up_and_at_least_a_millisecond() {
        let now = Instant::now();
        assert_eq!(millis_left(now + Duration::from_micros(1_500_500), now), 1501);
        assert_eq!(millis_left(now + Duration::from_millis(7), now), 7);
        assert_eq!(millis_left(now, now), 1, "never 0, which would delete the key");
        assert_eq!(millis_left(now, now + Duration::from_secs(1)), 1, "passed: still 1");
    }
}
