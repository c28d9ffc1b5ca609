//! Fencing tokens, the resource side: a write that the guarded resource accepts only from
//! a holder whose token is at least the highest token it has seen (`lua/fenced_write.lua`).
//!
//! A lock alone cannot stop a holder that was paused past its lease (a GC pause, a
//! `SIGSTOP`) from writing after another owner took the lock. A fencing token can: every
//! fresh hold of a fenced lock gets a larger token, and the resource refuses writes whose
//! token is below the largest one that already wrote (Kleppmann's fencing).

use fred::bytes::Bytes;
use fred::prelude::KeysInterface;
use fred::types::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::names::fence_key;
use crate::scripts;
use crate::store::LockStore;

/// The largest token a fenced write accepts: 2^53, the largest integer Lua's numbers
/// (doubles) hold exactly. Tokens are microseconds since the epoch plus a count, about
/// 2^51 today, so no issued token comes near it.
pub const MAX_TOKEN: u64 = 1 << 53;

/// The answer to a fenced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedWrite {
    /// The value was stored and the resource's fence is now the writer's token.
    Written,
    /// A holder with a larger token wrote already: nothing was stored.
    Rejected {
        /// The resource's fence: the largest token that wrote it.
        fence: u64,
    },
}

impl FencedWrite {
    /// `true` for [`FencedWrite::Written`].
    pub fn is_written(&self) -> bool {
        matches!(self, FencedWrite::Written)
    }
}

/// Checks a token and a resource key before anything is sent.
fn check(resource: &str, token: u64) -> Result<()> {
    if resource.is_empty() {
        return Err(Error::invalid_argument("a resource key must not be empty"));
    }
    if token == 0 || token > MAX_TOKEN {
        return Err(Error::invalid_argument(format!("a fencing token is 1 to 2^53, got {token}")).with_key(resource));
    }
    Ok(())
}

impl LockStore {
    /// Runs `fenced_write.lua`: sets the String `resource` to `value` if `token` is at
    /// least the resource's fence (`leasehold_fence:{RESOURCE}`), and makes `token` the
    /// fence.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty key or a token of 0 or above
    /// [`MAX_TOKEN`] (nothing sent); [`ErrorKind::WrongType`] when the resource or its
    /// fence is not a String (nothing written); timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and only
    /// its answer is lost. A replay is harmless: the same token writes the same value.
    pub async fn fenced_write(&self, resource: &str, token: u64, value: &[u8]) -> Result<FencedWrite> {
        check(resource, token)?;
        let keys = vec![resource.to_owned(), fence_key(resource)];
        let args = vec![Value::from(token.to_string()), Value::Bytes(Bytes::copy_from_slice(value))];
        let budget = self.write_budget(resource).await?;
        let reply: Vec<i64> = scripts::FENCED_WRITE.run(self.client(), resource, budget, keys, args).await?;
        match reply.as_slice() {
            [1, _] => Ok(FencedWrite::Written),
            [0, fence] => Ok(FencedWrite::Rejected { fence: u64::try_from(*fence).unwrap_or(0) }),
            other => Err(Error::new(ErrorKind::Redis, format!("fenced_write.lua gave an unexpected reply {other:?}"))
                .with_key(resource)),
        }
    }

    /// `GET leasehold_fence:{RESOURCE}`: the largest token that wrote `resource` through
    /// [`LockStore::fenced_write`], `None` when none has.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty key; [`ErrorKind::Redis`] when the
    /// fence is not an integer; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn fence(&self, resource: &str) -> Result<Option<u64>> {
        if resource.is_empty() {
            return Err(Error::invalid_argument("a resource key must not be empty"));
        }
        let key = fence_key(resource);
        let value: Option<String> =
            crate::script::bounded_retry(self.command_timeout(), "GET", &key, || self.client().get(&key)).await?;
        value
            .map(|v| {
                v.parse().map_err(|_| {
                    Error::new(ErrorKind::Redis, format!("the fence holds {v:?}, not an integer")).with_key(&key)
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_tokens_and_keys_are_rejected_before_sending() {
        assert!(check("", 1).expect_err("empty").is_invalid_argument());
        assert!(check("r", 0).expect_err("zero").is_invalid_argument());
        assert!(check("r", MAX_TOKEN + 1).expect_err("too large").is_invalid_argument());
        assert!(check("r", MAX_TOKEN).is_ok());
    }
}
