//! Redisson's `RCountDownLatch` on the wire: the latch's key and channel, and the
//! store's four calls on it (set the count, count down, read it, delete it).
//!
//! The key is the name itself, a String holding the count (decimal). The channel is
//! built as Redisson builds it, literally `redisson_countdownlatch__channel__{NAME}`,
//! not by the prefix rule of [`crate::names`]: the braces are added even when `NAME`
//! has its own, so for a name such as `{a}b` or `a{b}c` the channel's hash tag is not
//! the key's. Redisson then fails with `CROSSSLOT` in a cluster; leasehold refuses such
//! a name there before anything is sent ([`LatchNames::check_cluster_slot`]).

use std::sync::Arc;

use fred::prelude::KeysInterface;
use fred::types::Key;

use crate::call::{int_arg, static_arg};
use crate::error::{Error, ErrorKind, Result};
use crate::names::{concat_shared, key_slot};
use crate::script::LuaScript;
use crate::scripts;
use crate::store::LockStore;

/// The prefix of a latch's channel: `redisson_countdownlatch__channel__{NAME}` (two
/// underscores on each side of `channel`, then the name in braces).
pub const LATCH_CHANNEL_PREFIX: &str = "redisson_countdownlatch__channel__";
/// Published when the count reached zero (Redisson's `ZERO_COUNT_MESSAGE`): the latch
/// is open.
pub const ZERO_COUNT_MESSAGE: &str = "0";
/// Published when a count was set, and when the latch was deleted (Redisson's
/// `NEW_COUNT_MESSAGE`).
pub const NEW_COUNT_MESSAGE: &str = "1";
/// The largest count a latch accepts: Redis integers are signed 64-bit.
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// The names of one count-down latch: its key and its channel. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatchNames {
    key: Arc<str>,
    channel: Arc<str>,
}

impl LatchNames {
    /// Names for the latch key `key` (the full key, any client prefix included).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `key` is empty.
    pub fn new(key: &str) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::invalid_argument("a latch name must not be empty"));
        }
        let channel = concat_shared(&[LATCH_CHANNEL_PREFIX, "{", key, "}"]);
        Ok(LatchNames { key: Arc::from(key), channel })
    }

    /// The latch key `NAME` (a String: the count).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The latch key as a shared string.
    pub fn key_arc(&self) -> &Arc<str> {
        &self.key
    }

    /// The channel, `redisson_countdownlatch__channel__{NAME}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The channel as a shared string.
    pub fn channel_arc(&self) -> &Arc<str> {
        &self.channel
    }

    /// Whether the channel hashes to the key's cluster slot (always so for a name
    /// without braces; not for most names with them, see the module docs).
    pub fn channel_in_key_slot(&self) -> bool {
        key_slot(self.key.as_bytes()) == key_slot(self.channel.as_bytes())
    }

    /// In a cluster a script may touch the keys of one slot only, and the latch's
    /// scripts name the key and the channel: a name whose channel is in another slot is
    /// refused.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when the channel is in another slot than the key.
    pub fn check_cluster_slot(&self) -> Result<()> {
        match self.cluster_slot_problem() {
            None => Ok(()),
            Some(problem) => Err(Error::invalid_argument(problem).with_key(self.key())),
        }
    }

    /// Why [`LatchNames::check_cluster_slot`] refuses this name, if it does.
    pub fn cluster_slot_problem(&self) -> Option<String> {
        if self.channel_in_key_slot() {
            return None;
        }
        Some(format!(
            "in a cluster the latch name's braces put its channel {} in slot {}, its key in slot {}: \
             Redisson builds that channel literally, so such a latch cannot work there; use a name \
             without braces",
            self.channel,
            key_slot(self.channel.as_bytes()),
            key_slot(self.key.as_bytes())
        ))
    }

    fn keys(&self) -> Vec<Key> {
        vec![Key::from(&*self.key), Key::from(&*self.channel)]
    }
}

/// A count as the latch stores it: decimal; at or below zero (a Java
/// `trySetCount(-k)`) counts as 0, an open latch.
fn parse_count(names: &LatchNames, text: &[u8]) -> Result<u64> {
    match std::str::from_utf8(text).ok().and_then(|text| text.parse::<i64>().ok()).ok_or(()) {
        Ok(count) => Ok(u64::try_from(count).unwrap_or(0)),
        Err(_) => Err(Error::new(
            ErrorKind::WrongType,
            format!("{} is not a count-down latch: not an integer count", names.key()),
        )
        .with_key(names.key())),
    }
}

impl LockStore {
    /// Runs one of the latch's write scripts as [`LockStore::run_script`] does (the write
    /// gate, then `EVALSHA` within the command timeout), with the call inline in the
    /// caller's future rather than boxed ([`LuaScript::run_with_inline`]): a latch call is
    /// awaited once and no waiting task keeps it, and the box's allocation and the copy of
    /// fred's future into it were about 1k instructions per call.
    async fn run_latch_script<R, B>(&self, key: &str, script: &'static LuaScript, build: B) -> Result<R>
    where
        R: fred::prelude::FromValue,
        B: Fn() -> (Vec<Key>, Vec<fred::types::Value>) + Send + Sync,
    {
        let budget = self.write_budget(key).await?;
        script.run_with_inline(self.client(), key, budget, build).await
    }

    /// Runs `latch_try_set_count.lua`: sets the count to `count` when no latch exists
    /// and publishes `1`. `false` when a latch exists (nothing changed).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for a count of 0 or over [`MAX_COUNT`] (nothing
    /// sent); [`ErrorKind::WrongType`] when the key holds another type; timeouts and
    /// connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs.
    pub async fn latch_try_set_count(&self, names: &LatchNames, count: u64) -> Result<bool> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::invalid_argument(format!(
                "a latch count must be 1 to {MAX_COUNT}, got {count} (a latch at 0 is open already)"
            ))
            .with_key(names.key()));
        }
        let publish = self.call_settings().publish;
        let build = || (names.keys(), vec![static_arg(NEW_COUNT_MESSAGE), int_arg(count), static_arg(publish)]);
        let reply: i64 = self.run_latch_script(names.key(), &scripts::LATCH_TRY_SET_COUNT, build).await?;
        Ok(reply == 1)
    }

    /// Runs `latch_count_down.lua`: counts down by one; at zero deletes the key and
    /// publishes `0`. Returns the count left (0 also when there was no latch).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type or a String that is not
    /// an integer (nothing written); timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs (and
    /// counts once; it is never sent again after it may have run).
    pub async fn latch_count_down(&self, names: &LatchNames) -> Result<u64> {
        let publish = self.call_settings().publish;
        let build = || (names.keys(), vec![static_arg(ZERO_COUNT_MESSAGE), static_arg(publish)]);
        let reply: i64 = self.run_latch_script(names.key(), &scripts::LATCH_COUNT_DOWN, build).await.map_err(|e| {
            e.counter_not_integer("WRONGTYPE: the latch's key holds a String that is not an integer count")
        })?;
        Ok(u64::try_from(reply).unwrap_or(0))
    }

    /// `GET NAME`: the count, 0 when there is no latch (or its count is at or below 0).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type or a String that is not
    /// an integer; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn latch_count(&self, names: &LatchNames) -> Result<u64> {
        let key = names.key();
        // The reply's bytes as fred holds them (a `String` would be a copy of them).
        let text: Option<fred::bytes::Bytes> = self.bounded(key, || self.client().get(key)).await?;
        text.map_or(Ok(0), |text| parse_count(names, &text))
    }

    /// Runs `latch_delete.lua`: deletes the latch whatever its count and publishes `1`
    /// (Redisson's message) then `0` (so that every waiter reads the count again).
    /// `false` when there was no latch.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type (nothing deleted);
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs.
    pub async fn latch_delete(&self, names: &LatchNames) -> Result<bool> {
        let publish = self.call_settings().publish;
        let build = || {
            let args = vec![static_arg(NEW_COUNT_MESSAGE), static_arg(ZERO_COUNT_MESSAGE), static_arg(publish)];
            (names.keys(), args)
        };
        let reply: i64 = self.run_latch_script(names.key(), &scripts::LATCH_DELETE, build).await?;
        Ok(reply == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_is_redissons_literal_form() {
        let plain = LatchNames::new("jobs:ready").expect("valid");
        assert_eq!(plain.channel(), "redisson_countdownlatch__channel__{jobs:ready}");
        assert!(plain.channel_in_key_slot() && plain.check_cluster_slot().is_ok());
        // The braces are added even when the name has its own (not the prefix rule).
        let braced = LatchNames::new("{a}b").expect("valid");
        assert_eq!(braced.channel(), "redisson_countdownlatch__channel__{{a}b}");
        assert!(!braced.channel_in_key_slot());
        let refused = braced.check_cluster_slot().expect_err("another slot");
        assert_eq!(refused.kind(), ErrorKind::InvalidArgument);
        assert!(LatchNames::new("a{b}c").expect("valid").check_cluster_slot().is_err());
        assert_eq!(LatchNames::new("").expect_err("empty").kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn counts_at_or_below_zero_read_as_open() {
        let names = LatchNames::new("l").expect("valid");
        assert_eq!(parse_count(&names, b"3").expect("count"), 3);
        assert_eq!(parse_count(&names, b"0").expect("count"), 0);
        assert_eq!(parse_count(&names, b"-4").expect("count"), 0);
        assert_eq!(parse_count(&names, b"x").expect_err("not a count").kind(), ErrorKind::WrongType);
        assert_eq!(parse_count(&names, b"\xff1").expect_err("not UTF-8").kind(), ErrorKind::WrongType);
    }
}
