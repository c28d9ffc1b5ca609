//! The last release of a hold with a minimum hold (`release_after.lua`): the lock is kept
//! in Redisson's layout until the minimum hold is over, then expires by itself
//! (`lockAtLeastFor` of Java's `ShedLock`, for jobs that must run once per tick across a fleet).

use fred::types::Value;

use crate::call::{int_arg, static_arg, unlock_message};
use crate::error::{Error, ErrorKind, Result};
use crate::kind::{LockKind, QueueKind};
use crate::names::LockNames;
use crate::owner::OwnerId;
use crate::scripts;
use crate::store::{LockStore, Release};

impl LockStore {
    /// Ends `owner`'s holds on a plain or fenced lock but keeps the key `keep_ms` more
    /// milliseconds (`release_after.lua`): the owner's field stays with a count of 1, the
    /// key's TTL becomes `keep_ms` (shortened or lengthened), and the unlock message is
    /// published (always with the store's `redisson_waiters`, else only when a leasehold
    /// waiter flagged the owner) so that waiters learn the new TTL. Nothing is handed
    /// over: the key expires, and the queue head then takes the free lock.
    ///
    /// Answers [`Release::Released`] when the key is kept, [`Release::NotOwner`] when the
    /// owner holds nothing (nothing written or published, so a replay after the key
    /// expired never touches a later owner's lock). A replay with the time left then
    /// sets the same end again. Send [`LockStore::release`] with a target of 0 instead
    /// when no time is left.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for `keep_ms` = 0 (PEXPIRE 0 would delete the key
    /// without telling anyone) or a kind whose waiters would not learn the new TTL (a
    /// fair lock, whose queued waiters' deadlines are Redisson's own, or a read/write
    /// lock); nothing is sent. [`ErrorKind::WrongType`] when the key is not a Hash;
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn release_after(
        &self,
        kind: &LockKind,
        names: &LockNames,
        owner: &OwnerId,
        keep_ms: u64,
    ) -> Result<Release> {
        if kind.queue() != QueueKind::Server {
            return Err(Error::invalid_argument(
                "a minimum hold is only kept by a Lock or a FencedLock (not a fair or read/write lock)",
            ));
        }
        if keep_ms == 0 {
            return Err(Error::new(ErrorKind::InvalidArgument, "a kept lock needs at least 1 ms left"));
        }
        let settings = self.call_settings();
        let build = || {
            let keys = vec![names.key_arg().into(), names.channel_arg().into()];
            let args = vec![
                Value::Bytes(owner.arg()),
                int_arg(keep_ms),
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
