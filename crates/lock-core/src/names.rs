//! Key and channel names, exactly as Redisson derives them.
//!
//! The lock key is the name itself. Every other key of the lock is `PREFIX:{NAME}`, so
//! that in a cluster it hashes to the same slot as `NAME` (a key without braces hashes
//! whole; `{NAME}` hashes `NAME`). When `NAME` already contains `{`, the user chose the
//! hash tag, and the derived key is `PREFIX:NAME` (Redisson's `prefixName`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::owner::RequestId;

/// Prefix of the release channel: `redisson_lock__channel:{NAME}` (two underscores).
pub const CHANNEL_PREFIX: &str = "redisson_lock__channel";
/// Prefix of the fencing counter of a fenced lock: `redisson_lock_token:{NAME}`.
pub const TOKEN_PREFIX: &str = "redisson_lock_token";
/// Prefix of the unlock latch: `redisson_unlock_latch:{NAME}:REQUEST_ID`.
pub const UNLOCK_LATCH_PREFIX: &str = "redisson_unlock_latch";
/// Prefix of leasehold's acquire latch: `leasehold_acquire_latch:{NAME}:REQUEST_ID`.
/// Redisson has no such key; it makes a replayed acquire count once.
pub const ACQUIRE_LATCH_PREFIX: &str = "leasehold_acquire_latch";

/// Payload published on the release channel when a lock is released.
pub const UNLOCK_MESSAGE: &str = "0";
/// Payload published when a read lock is released: wakes every waiter.
pub const READ_UNLOCK_MESSAGE: &str = "1";

/// Builds `prefix:{name}`, or `prefix:name` when `name` already contains `{`.
pub fn derived_key(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The names of one lock: its key and the keys and channel derived from it.
///
/// Cheap to clone (shared strings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockNames {
    key: Arc<str>,
    channel: Arc<str>,
}

impl LockNames {
    /// Names for the lock key `key` (the full key, any client prefix included).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `key` is empty.
    pub fn new(key: &str) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::invalid_argument("a lock name must not be empty"));
        }
        Ok(LockNames { key: Arc::from(key), channel: Arc::from(derived_key(CHANNEL_PREFIX, key)) })
    }

    /// The lock key (a Hash for the reentrant lock, a String for the simple lock).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The lock key as a shared string.
    pub fn key_arc(&self) -> &Arc<str> {
        &self.key
    }

    /// The release channel, `redisson_lock__channel:{NAME}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The release channel as a shared string.
    pub fn channel_arc(&self) -> &Arc<str> {
        &self.channel
    }

    /// The fencing counter, `redisson_lock_token:{NAME}`.
    pub fn token_key(&self) -> String {
        derived_key(TOKEN_PREFIX, &self.key)
    }

    /// The unlock latch of one release request, `redisson_unlock_latch:{NAME}:REQUEST_ID`.
    pub fn unlock_latch(&self, request: &RequestId) -> String {
        format!("{}:{request}", derived_key(UNLOCK_LATCH_PREFIX, &self.key))
    }

    /// The acquire latch of one acquire request, `leasehold_acquire_latch:{NAME}:REQUEST_ID`.
    pub fn acquire_latch(&self, request: &RequestId) -> String {
        format!("{}:{request}", derived_key(ACQUIRE_LATCH_PREFIX, &self.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_get_a_hash_tag() {
        let names = LockNames::new("order:1001").expect("valid");
        assert_eq!(names.key(), "order:1001");
        assert_eq!(names.channel(), "redisson_lock__channel:{order:1001}");
        assert_eq!(names.token_key(), "redisson_lock_token:{order:1001}");
    }

    #[test]
    fn names_with_a_hash_tag_keep_it() {
        let names = LockNames::new("{user:7}:cart").expect("valid");
        assert_eq!(names.channel(), "redisson_lock__channel:{user:7}:cart");
        let request = RequestId::from_raw("r1");
        assert_eq!(names.unlock_latch(&request), "redisson_unlock_latch:{user:7}:cart:r1");
    }

    #[test]
    fn empty_names_are_rejected() {
        let err = LockNames::new("").expect_err("empty");
        assert!(err.is_invalid_argument());
    }

    #[test]
    fn latches_share_the_lock_hash_tag() {
        let names = LockNames::new("a").expect("valid");
        let request = RequestId::from_raw("r");
        assert_eq!(names.acquire_latch(&request), "leasehold_acquire_latch:{a}:r");
        assert_eq!(names.unlock_latch(&request), "redisson_unlock_latch:{a}:r");
    }
}
