//! The store calls of a multi-lock: several reentrant locks of one hash slot taken or
//! re-entered by one script, all or none (`multi_acquire.lua`), and released by one
//! script, each as `release.lua` releases it (`multi_release.lua`).

use std::time::Duration;

use fred::types::{Key, Value};

use crate::call::{int_arg, non_negative, release_from_reply, static_arg, unlock_message, Release};
use crate::error::{Error, ErrorKind, Result};
use crate::names::LockNames;
use crate::owner::OwnerId;
use crate::replicas::ReplicaSync;
use crate::scripts;
use crate::store::LockStore;

/// One member of a [`LockStore::multi_acquire`] call.
#[derive(Debug, Clone, Copy)]
pub struct MultiMember<'a> {
    /// The member's lock names (its key is a KEYS entry).
    pub names: &'a LockNames,
    /// The member's owner (its Hash field).
    pub owner: &'a OwnerId,
    /// The owner's hold count after the acquire: its live guards + 1.
    pub target: u64,
}

/// What `multi_acquire.lua` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiAcquire {
    /// Every member was taken; `holds[i]` is member `i`'s count (1 = fresh).
    Acquired {
        /// Per member, in the order given: its hold count now.
        holds: Vec<u64>,
    },
    /// Member `index` (the first, in the order given, that another owner holds) blocked
    /// the call; nothing was written.
    Held {
        /// The blocking member's position in the order given (from 0).
        index: usize,
        /// Its key's remaining TTL (`None`: no expiry).
        pttl: Option<Duration>,
    },
}

/// One member of a [`LockStore::multi_release`] call.
#[derive(Debug, Clone, Copy)]
pub struct MultiReleaseMember<'a> {
    /// The member's lock names.
    pub names: &'a LockNames,
    /// The member's owner (its Hash field).
    pub owner: &'a OwnerId,
    /// The owner's hold count after the release (0: give it all back).
    pub target: u64,
    /// The TTL in ms the remaining holds need, or 0 (as [`LockStore::release`]'s).
    pub need_ms: u64,
}

impl LockStore {
    /// Runs `multi_acquire.lua` for `members` (every key in one hash slot, no key twice,
    /// at least one), with `lease_ms`, and `WAIT` pipelined behind it when `sync` asks
    /// (its answer is returned, unchecked, as [`LockStore::acquire`] does).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty `members` (nothing sent);
    /// [`ErrorKind::WrongType`] when a key is not a Hash (nothing written); a reply of the
    /// wrong shape is [`ErrorKind::Redis`]; timeouts and connection errors (then the
    /// outcome is unknown: the caller undoes every member).
    ///
    /// # Cancel safety
    /// Dropping the future does not take the commands back: once written they run, and
    /// only their answers are lost.
    pub async fn multi_acquire(
        &self,
        members: &[MultiMember<'_>],
        lease_ms: u64,
        sync: Option<ReplicaSync>,
    ) -> Result<(MultiAcquire, Option<Result<u32>>)> {
        let Some(first) = members.first() else {
            return Err(Error::invalid_argument("a multi-lock acquire needs at least one member"));
        };
        let build = || {
            let keys: Vec<Key> = members.iter().map(|m| Key::from(m.names.key_arg())).collect();
            let mut args = Vec::with_capacity(1 + 2 * members.len());
            args.push(int_arg(lease_ms));
            for member in members {
                args.push(Value::Bytes(member.owner.arg()));
                args.push(int_arg(member.target.max(1)));
            }
            (keys, args)
        };
        let (reply, acknowledged): (Vec<i64>, _) =
            self.run_script(first.names.key(), &scripts::MULTI_ACQUIRE, build, sync).await?;
        Ok((parse_reply(&reply, members.len(), first.names)?, acknowledged))
    }
}

impl LockStore {
    /// Runs `multi_release.lua` for `members` (reentrant locks with leasehold's wait
    /// queue, every key in one hash slot, no key twice): for each, what
    /// [`LockStore::release`] does for an unlock, in one round trip. Returns, per member
    /// in order, its [`Release`], or [`ErrorKind::WrongType`] when its key is not a Hash
    /// (nothing written for that member; the others are released all the same).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty `members` (nothing sent); a reply of
    /// the wrong shape is [`ErrorKind::Redis`]; timeouts and connection errors (then the
    /// outcome of every member is unknown: the counts are absolute, so the caller may
    /// send the same call again).
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost.
    pub async fn multi_release(&self, members: &[MultiReleaseMember<'_>]) -> Result<Vec<Result<Release>>> {
        let Some(first) = members.first() else {
            return Err(Error::invalid_argument("a multi-lock release needs at least one member"));
        };
        let settings = self.call_settings();
        let build = || {
            let mut keys: Vec<Key> = Vec::with_capacity(5 * members.len());
            let mut args = Vec::with_capacity(4 + 3 * members.len());
            args.push(unlock_message());
            args.push(int_arg(u64::from(settings.always_read_queue)));
            args.push(static_arg(settings.publish));
            args.push(int_arg(u64::from(settings.redisson_waiters)));
            for member in members {
                keys.push(Key::from(member.names.key_arg()));
                keys.push(Key::from(member.names.channel_arg()));
                keys.extend(member.names.queue_args().iter().cloned().map(Key::from));
                args.push(Value::Bytes(member.owner.arg()));
                args.push(int_arg(member.target));
                args.push(int_arg(member.need_ms));
            }
            (keys, args)
        };
        let (reply, _): (Vec<i64>, _) =
            self.run_script(first.names.key(), &scripts::MULTI_RELEASE, build, None).await?;
        if reply.len() != members.len() {
            return Err(Error::new(ErrorKind::Redis, format!("multi_release.lua gave an unexpected reply {reply:?}"))
                .with_key(first.names.key()));
        }
        Ok(reply
            .into_iter()
            .zip(members)
            .map(|(answer, member)| match answer {
                -2 => Err(Error::new(ErrorKind::WrongType, "WRONGTYPE: the key holds a value of another Redis type")
                    .with_key(member.names.key())),
                answer => Ok(release_from_reply(answer)),
            })
            .collect())
    }
}

/// Maps `{1, holds_1, ..., holds_n}` and `{0, i, pttl}` (i from 1).
fn parse_reply(reply: &[i64], members: usize, names: &LockNames) -> Result<MultiAcquire> {
    match reply {
        [1, holds @ ..] if holds.len() == members => {
            Ok(MultiAcquire::Acquired { holds: holds.iter().copied().map(non_negative).collect() })
        }
        [0, index, pttl] if *index >= 1 && usize::try_from(*index).is_ok_and(|i| i <= members) => {
            Ok(MultiAcquire::Held {
                index: usize::try_from(*index - 1).unwrap_or(0),
                pttl: u64::try_from(*pttl).ok().map(Duration::from_millis),
            })
        }
        other => Err(Error::new(ErrorKind::Redis, format!("multi_acquire.lua gave an unexpected reply {other:?}"))
            .with_key(names.key())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_map_to_acquired_or_held() {
        let names = LockNames::new("a").expect("a valid name");
        assert_eq!(parse_reply(&[1, 1, 3], 2, &names).ok(), Some(MultiAcquire::Acquired { holds: vec![1, 3] }));
        assert_eq!(
            parse_reply(&[0, 2, 500], 2, &names).ok(),
            Some(MultiAcquire::Held { index: 1, pttl: Some(Duration::from_millis(500)) })
        );
        assert_eq!(parse_reply(&[0, 1, -1], 2, &names).ok(), Some(MultiAcquire::Held { index: 0, pttl: None }));
        for bad in [&[1, 1][..], &[0, 3, 5], &[0, 0, 5], &[2]] {
            assert!(parse_reply(bad, 2, &names).is_err(), "{bad:?}");
        }
    }
}
