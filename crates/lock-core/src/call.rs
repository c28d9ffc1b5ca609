//! The pieces every script call is made of, and what its reply is read into: the KEYS
//! and ARGV of one call ([`ScriptArgs`]), the store's settings a call may need
//! ([`CallSettings`]), the argument builders (`int_arg`, `static_arg`, `unlock_message`)
//! and the reply parsers ([`Acquire`], [`Release`]).
//!
//! A leaf: it imports nothing of this crate but `error` and `names`, so that the store
//! (which runs the calls), the lock kinds (which build them and read their replies),
//! replica sync and the modules of the newer kinds (semaphores, latches, fencing) can
//! all use it without importing one another in a loop. Its items are re-exported where
//! they are public: [`crate::Acquire`] and [`crate::Release`] (also as
//! `store::Acquire`, `store::Release`).

use std::time::Duration;

use fred::types::{Key, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::names::{LockNames, UNLOCK_MESSAGE};

/// The answer to an acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// The owner holds the lock; `holds` is its hold count now (1 = fresh).
    Acquired {
        /// The owner's hold count after this acquire.
        holds: u64,
    },
    /// Another owner holds the lock (or, for a waiting call, the lock is free but
    /// another live waiter is ahead in the queue).
    Held {
        /// How long to wait before trying again unprompted: the key's remaining TTL
        /// (`None` when the key has no expiry), or, when the lock is free but another
        /// waiter is first, the life left in that waiter's queue entry.
        pttl: Option<Duration>,
        /// A waiting call's place in the lock's wait queue (0 = head); `None` for a
        /// single try, which never queues.
        position: Option<u64>,
    },
}

/// The answer to a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The last hold was given back: the owner is removed and the unlock message published.
    Released,
    /// Holds remain; the key's TTL is at least what they need.
    StillHeld {
        /// How many holds remain.
        holds: u64,
    },
    /// The owner did not hold the lock; nothing was written or published.
    NotOwner,
}

/// The settings of a store that a script call of any kind may need.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSettings {
    /// `publish` or `spublish`.
    pub(crate) publish: &'static str,
    /// `release.lua`'s ARGV[5].
    pub(crate) always_read_queue: bool,
    /// `release.lua`'s ARGV[8].
    pub(crate) redisson_waiters: bool,
}

/// The KEYS and ARGV of one script call in fred's types (shared byte strings and
/// integers): made anew for each send by the store's entry point, so nothing is copied
/// for a retry that rarely happens.
pub(crate) type ScriptArgs = (Vec<Key>, Vec<Value>);

/// A whole number as a script argument: fred sends an integer as the bulk string of its
/// decimal digits (what `to_string` would send) without allocating one.
pub(crate) fn int_arg(n: u64) -> Value {
    i64::try_from(n).map_or_else(|_| Value::from(n.to_string()), Value::Integer)
}

/// A static string (a command name) as a script argument: nothing is allocated.
pub(crate) fn static_arg(text: &'static str) -> Value {
    Value::Bytes(fred::bytes::Bytes::from_static(text.as_bytes()))
}

/// [`UNLOCK_MESSAGE`] as a script argument (static: nothing is allocated).
pub(crate) fn unlock_message() -> Value {
    static_arg(UNLOCK_MESSAGE)
}

/// Maps the first two entries of an acquire script's reply (`{1, holds}`, `{0, pttl}`).
pub(crate) fn acquire_from_reply(script: &str, names: &LockNames, reply: &[i64]) -> Result<Acquire> {
    match reply {
        [1, holds, ..] => Ok(Acquire::Acquired { holds: non_negative(*holds) }),
        [0, pttl] => Ok(Acquire::Held { pttl: pttl_from_reply(*pttl), position: None }),
        [0, pttl, position] => {
            Ok(Acquire::Held { pttl: pttl_from_reply(*pttl), position: Some(non_negative(*position)) })
        }
        other => Err(unexpected(script, names, other)),
    }
}

/// Maps a release script's reply: 0 released, `n > 0` holds remain, negative not the owner.
pub(crate) fn release_from_reply(reply: i64) -> Release {
    match reply {
        0 => Release::Released,
        n if n > 0 => Release::StillHeld { holds: non_negative(n) },
        _ => Release::NotOwner,
    }
}

/// A count from a reply; a negative one (no count a script answers) reads as 0.
pub(crate) fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Redis answers -1 for "no expiry"; any other negative value is treated the same.
pub(crate) fn pttl_from_reply(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// The error of a script reply of an unexpected shape, about the lock of `names`.
pub(crate) fn unexpected<T: std::fmt::Debug>(script: &str, names: &LockNames, reply: &[T]) -> Error {
    Error::new(ErrorKind::Redis, format!("{script} gave an unexpected reply {reply:?}")).with_key(names.key())
}
