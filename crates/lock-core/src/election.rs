//! A leader election on the wire: the follower's read (`election_leader.lua`) and the
//! leader's proclaim (`election_proclaim.lua`). The lead itself is a lock of
//! [`LockKind::Election`](crate::LockKind::Election): campaigns, resigns, renewals and
//! forced resigns run through the lock calls of [`LockStore`].
//!
//! Keys of the election `NAME` (leasehold only; Redisson ignores them), all in `NAME`'s
//! cluster slot ([`election_key`](crate::names::election_key)):
//!
//! | key | type | what |
//! |---|---|---|
//! | `leasehold_election:{NAME}` | Hash | the lead: a reentrant lock, field = leader's owner id |
//! | `leasehold_election_term:{NAME}` | String | the last term issued (a fencing token) |
//! | `leasehold_election_leader:{NAME}` | Hash | `owner`, `term`, `value` of the leader |
//! | `leasehold_election__channel:{NAME}` | channel | `L <term> <lease_ms> <value>`, `N <term>` |

use std::time::Duration;

use fred::bytes::Bytes;
use fred::types::{Key, Value};

use crate::call::{pttl_from_reply, static_arg, unexpected};
use crate::error::{Error, Result};
use crate::names::LockNames;
use crate::owner::OwnerId;
use crate::scripts;
use crate::store::LockStore;

/// The largest value a leader may proclaim: 1 MiB (it travels in every change message
/// and every follower's read).
pub const MAX_VALUE_LEN: usize = 1 << 20;

/// Who leads an election, as the server says: [`LockStore::election_leader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderRead {
    /// The leader's term, its value and its owner id; `None` when nobody leads.
    pub leader: Option<(u64, Bytes, String)>,
    /// The lead key's TTL when a lead is held (with or without a leader record): when a
    /// follower should look again if no message comes first. `None` when no lead exists.
    pub lead_ttl: Option<Duration>,
}

/// Checks a value before anything is sent.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `value` is
/// longer than [`MAX_VALUE_LEN`].
pub fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::invalid_argument(format!(
            "an election value is at most {MAX_VALUE_LEN} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

fn as_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Integer(n) => Some(*n),
        other => other.as_string().and_then(|s| s.parse().ok()),
    }
}

impl LockStore {
    /// Runs `election_leader.lua` (read-only) on the election whose lead is `names`.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when a key is of another
    /// type; [`ErrorKind::Redis`](crate::ErrorKind::Redis) for a reply of another shape;
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn election_leader(&self, names: &LockNames) -> Result<LeaderRead> {
        let key = names.key();
        self.check_open(key)?;
        let keys = vec![Key::from(key), Key::from(names.election_record_key())];
        let reply: Vec<Value> =
            scripts::ELECTION_LEADER.run(self.client(), key, self.command_timeout(), keys, Vec::<Value>::new()).await?;
        let script = scripts::ELECTION_LEADER.name();
        match reply.as_slice() {
            [flag, pttl] if as_i64(flag) == Some(0) => {
                let pttl = as_i64(pttl).ok_or_else(|| unexpected(script, names, &reply))?;
                Ok(LeaderRead { leader: None, lead_ttl: if pttl == -2 { None } else { pttl_from_reply(pttl) } })
            }
            [flag, pttl, term, value, owner] if as_i64(flag) == Some(1) => {
                let pttl = as_i64(pttl).ok_or_else(|| unexpected(script, names, &reply))?;
                let term = as_i64(term)
                    .and_then(|t| u64::try_from(t).ok())
                    .ok_or_else(|| unexpected(script, names, &reply))?;
                let value = match value {
                    Value::Bytes(bytes) => bytes.clone(),
                    Value::String(text) => Bytes::from(text.to_string()),
                    Value::Null => Bytes::new(),
                    _ => return Err(unexpected(script, names, &reply)),
                };
                let owner = owner.as_string().ok_or_else(|| unexpected(script, names, &reply))?;
                Ok(LeaderRead { leader: Some((term, value, owner)), lead_ttl: pttl_from_reply(pttl) })
            }
            _ => Err(unexpected(script, names, &reply)),
        }
    }

    /// Runs `election_proclaim.lua`: `owner`, leading in `term`, records `value` and
    /// tells the followers. `false` when it no longer leads in that term (nothing
    /// written).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a value over
    /// [`MAX_VALUE_LEN`] (nothing sent); [`ErrorKind::WrongType`](crate::ErrorKind::WrongType);
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Once sent, it applies whether or not the future is polled again; a replay writes
    /// the same value again.
    pub async fn election_proclaim(
        &self,
        names: &LockNames,
        owner: &OwnerId,
        term: u64,
        value: &Bytes,
    ) -> Result<bool> {
        check_value(value)?;
        let key = names.key();
        let keys = vec![Key::from(key), Key::from(names.election_record_key()), Key::from(names.election_channel())];
        let args = vec![
            Value::Bytes(owner.arg()),
            Value::from(term.to_string()),
            Value::Bytes(value.clone()),
            static_arg(self.call_settings().publish),
        ];
        let budget = self.write_budget(key).await?;
        let reply: i64 = scripts::ELECTION_PROCLAIM.run(self.client(), key, budget, keys, args).await?;
        Ok(reply == 1)
    }
}
