//! A semaphore in Redisson's `RSemaphore` layout: the String `NAME` holds the count of
//! available permits (decimal; a missing key counts as 0), and releases publish the new
//! count on `redisson_sc:{NAME}`. Each call is one script (`lua/sem_*.lua`) through the
//! store's one entry point, so it waits at the write gate, reloads on `NOSCRIPT` and
//! follows redirects as a lock's calls do.

use std::sync::Arc;

use fred::prelude::KeysInterface;
use fred::types::{Key, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::names::{derived_key, SEMAPHORE_CHANNEL_PREFIX};
use crate::scripts;
use crate::store::LockStore;

/// The key and channel of one semaphore, made once per handle.
#[derive(Debug, Clone)]
pub struct SemaphoreNames {
    key: Arc<str>,
    channel: Arc<str>,
}

impl SemaphoreNames {
    /// The names of the semaphore `key`: its channel `redisson_sc:{NAME}` is derived as
    /// every lock channel is ([`derived_key`]: Redisson's rule, except for names with
    /// braces but no valid hash tag, whose channel is kept in the key's slot).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    pub fn new(key: &str) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::invalid_argument("a semaphore name must not be empty"));
        }
        Ok(SemaphoreNames { key: Arc::from(key), channel: Arc::from(derived_key(SEMAPHORE_CHANNEL_PREFIX, key)) })
    }

    /// The count's key, `NAME`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key as a shared string.
    pub fn key_arc(&self) -> &Arc<str> {
        &self.key
    }

    /// The channel, `redisson_sc:{NAME}`.
    pub fn channel(&self) -> &Arc<str> {
        &self.channel
    }

    fn key_only(&self) -> Vec<Key> {
        vec![Key::from(&*self.key)]
    }

    fn key_and_channel(&self) -> Vec<Key> {
        vec![Key::from(&*self.key), Key::from(&*self.channel)]
    }
}

fn int(n: i64) -> Value {
    Value::Integer(n)
}

impl LockStore {
    /// `sem_try_acquire.lua`: takes `permits` (1 or more) if that many are available.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a String holding a whole number;
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost (permits it took are then the caller's to give back).
    pub async fn semaphore_try_acquire(&self, names: &SemaphoreNames, permits: i64) -> Result<bool> {
        let build = || (names.key_only(), vec![int(permits)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_TRY_ACQUIRE, build, None).await?;
        Ok(reply == 1)
    }

    /// `sem_release.lua`: gives back `permits` (1 or more) and publishes the new count
    /// (when above 0). Returns the count after the release.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_release(&self, names: &SemaphoreNames, permits: i64) -> Result<i64> {
        let publish = self.call_settings().publish;
        let build = || (names.key_and_channel(), vec![int(permits), crate::store::static_arg(publish)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_RELEASE, build, None).await?;
        Ok(reply)
    }

    /// `sem_try_set_permits.lua`: sets the count to `permits` (0 or more) if the key is
    /// missing, and publishes it. `true` when it was set.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_try_set_permits(&self, names: &SemaphoreNames, permits: i64) -> Result<bool> {
        let publish = self.call_settings().publish;
        let build = || (names.key_and_channel(), vec![int(permits), crate::store::static_arg(publish)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_TRY_SET_PERMITS, build, None).await?;
        Ok(reply == 1)
    }

    /// `sem_add_permits.lua`: adds `delta` (which may be negative) to the count and
    /// publishes the result when above 0. Returns the count after the change.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_add_permits(&self, names: &SemaphoreNames, delta: i64) -> Result<i64> {
        let publish = self.call_settings().publish;
        let build = || (names.key_and_channel(), vec![int(delta), crate::store::static_arg(publish)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_ADD_PERMITS, build, None).await?;
        Ok(reply)
    }

    /// `sem_drain.lua`: takes every available permit; returns how many there were.
    ///
    /// # Errors
    /// As [`LockStore::semaphore_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::semaphore_try_acquire`].
    pub async fn semaphore_drain(&self, names: &SemaphoreNames) -> Result<i64> {
        let build = || (names.key_only(), Vec::new());
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::SEM_DRAIN, build, None).await?;
        Ok(reply)
    }

    /// `GET NAME`: the count of available permits (0 for a missing key).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a String holding a whole number;
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn semaphore_count(&self, names: &SemaphoreNames) -> Result<i64> {
        let key = names.key();
        let raw: Option<String> = self.bounded(key, || self.client().get(key)).await?;
        match raw {
            None => Ok(0),
            Some(text) => text.trim().parse::<i64>().map_err(|_| {
                Error::new(ErrorKind::WrongType, "the semaphore's key holds a String that is not a count").with_key(key)
            }),
        }
    }

    /// `EXISTS NAME`: whether the semaphore was ever set (its count key is there).
    ///
    /// # Errors
    /// Timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn semaphore_exists(&self, names: &SemaphoreNames) -> Result<bool> {
        let key = names.key();
        let count: i64 = self.bounded(key, || self.client().exists(key)).await?;
        Ok(count > 0)
    }
}
