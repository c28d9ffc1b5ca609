//! A permit-expirable semaphore in Redisson's `RPermitExpirableSemaphore` layout: the
//! String `NAME` holds the count of available permits (as `RSemaphore`'s), the `ZSet`
//! `{NAME}:timeout` maps each held permit's id (16 raw bytes) to its lease end in epoch
//! ms, and changes that free permits publish the count on `redisson_sc:{NAME}`. Each
//! call is one script (`lua/pes_*.lua`) on the server's clock (`TIME`, read only when a
//! lease is set or checked). Expired permits are reclaimed, at most [`RECLAIM_CHUNK`] a
//! call, by an acquire that finds no permit free and by the counting calls
//! (`available_permits`, `set_permits`), never on a release (issue 29: the common path
//! makes no more server calls than Redisson's scripts).

use std::sync::Arc;

use fred::types::{Key, Value};

use crate::error::{Error, Result};
use crate::names::{derived_key, hash_tag, key_slot, slot_tag, unique_key, SEMAPHORE_CHANNEL_PREFIX};
use crate::scripts;
use crate::store::LockStore;

/// How many expired permits one script reclaims at most. Removing a chunk is one
/// `ZREMRANGEBYRANK` of this many members (well under a millisecond), so no call runs
/// long however many permits expired; further expired permits count as available and
/// go in later calls' chunks.
pub const RECLAIM_CHUNK: i64 = 1000;

/// The score of a permit that never expires (Redisson's `NON_EXPIRABLE`).
pub const NON_EXPIRING: i64 = 922_337_203_685_477;

/// A permit's id: 16 random bytes, stored raw in the `ZSet` and shown as 32 lowercase hex
/// (Redisson's format since 3.17.0).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermitId([u8; 16]);

impl PermitId {
    /// A new random id. Two v4 UUIDs are mixed so that all 128 bits are random (a v4
    /// UUID fixes 6 of them).
    pub fn random() -> Self {
        let a = uuid::Uuid::new_v4().as_u128();
        let b = uuid::Uuid::new_v4().as_u128();
        PermitId((a ^ b.rotate_left(17)).to_be_bytes())
    }

    /// The id of the 32 hex digits `hex` (either case).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for anything
    /// but 32 hex digits.
    pub fn parse(hex: &str) -> Result<Self> {
        let bad = || Error::invalid_argument(format!("a permit id is 32 hex digits, got {hex:?}"));
        if hex.len() != 32 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(PermitId(bytes))
    }

    /// The raw 16 bytes (the `ZSet` member).
    pub fn bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The id from raw bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        PermitId(bytes)
    }
}

impl std::fmt::Display for PermitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::names::write_hex(&self.0, f)
    }
}

impl std::fmt::Debug for PermitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PermitId({self})")
    }
}

/// The keys and channel of one permit-expirable semaphore, made once per handle.
#[derive(Debug, Clone)]
pub struct PesNames {
    key: Arc<str>,
    channel: Arc<str>,
    timeout: Arc<str>,
    /// `leasehold_pes_queue:{NAME}`, `leasehold_pes_waiters:{NAME}`: the wait queue
    /// (`names::unique_key`), and the grants channel `leasehold_sem_grants:{NAME}`
    /// (shared with a `Semaphore` of the same name: grants name random ids).
    queue: Arc<str>,
    entries: Arc<str>,
    grants: Arc<str>,
}

impl PesNames {
    /// The names of the semaphore `key`: channel `redisson_sc:{NAME}` ([`derived_key`])
    /// and `ZSet` `{NAME}:timeout` (Redisson's `suffixName`: `NAME:timeout` when NAME has a
    /// valid hash tag; a name with braces but no valid tag gets `{T}:NAME:timeout`, T a
    /// slot tag, where Redisson's key would leave the name's slot).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    pub fn new(key: &str) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::invalid_argument("a semaphore name must not be empty"));
        }
        let timeout = if hash_tag(key.as_bytes()).is_some() {
            format!("{key}:timeout")
        } else if !key.contains(['{', '}']) {
            format!("{{{key}}}:timeout")
        } else {
            format!("{{{}}}:{key}:timeout", slot_tag(key_slot(key.as_bytes())))
        };
        Ok(PesNames {
            key: Arc::from(key),
            channel: Arc::from(derived_key(SEMAPHORE_CHANNEL_PREFIX, key)),
            timeout: Arc::from(timeout),
            queue: Arc::from(unique_key(PES_QUEUE_PREFIX, key)),
            entries: Arc::from(unique_key(PES_WAITERS_PREFIX, key)),
            grants: Arc::from(derived_key(crate::semaphore::SEMAPHORE_GRANTS_PREFIX, key)),
        })
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

    /// The permits' `ZSet`, `{NAME}:timeout`.
    pub fn timeout_key(&self) -> &str {
        &self.timeout
    }

    /// The wait queue, `leasehold_pes_queue:{NAME}` (a ZSET of the waiting acquires'
    /// permit ids in hex, by arrival).
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The grants channel, `leasehold_sem_grants:{NAME}`.
    pub fn grants(&self) -> &Arc<str> {
        &self.grants
    }

    fn keys(&self) -> Vec<Key> {
        vec![
            Key::from(&*self.key),
            Key::from(&*self.channel),
            Key::from(&*self.timeout),
            Key::from(&*self.queue),
            Key::from(&*self.entries),
            Key::from(&*self.grants),
        ]
    }
}

/// Prefix of a permit-expirable semaphore's wait queue, `leasehold_pes_queue:{NAME}`
/// (leasehold only): a ZSET of the waiting acquires' permit ids (hex) by arrival.
pub const PES_QUEUE_PREFIX: &str = "leasehold_pes_queue";

/// Prefix of its entries, `leasehold_pes_waiters:{NAME}`: a Hash hex id ->
/// `"LEASE_MS DEADLINE_MS"` (the lease its permit gets when granted, -1 for none; the
/// server time past which the entry is dead).
pub const PES_WAITERS_PREFIX: &str = "leasehold_pes_waiters";

/// What `pes_try_acquire.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PesAcquire {
    /// Taken; the lease ends at this epoch ms on the server's clock
    /// ([`NON_EXPIRING`] for a permit without a lease).
    Taken(i64),
    /// The id held a permit already when this (retried) call ran: taken by an earlier
    /// attempt of the same call, or granted by a release; its lease end as in `Taken`.
    Held(i64),
    /// None available; the earliest live lease ends in this many ms (`None`: no held
    /// permit will expire); for a waiting call, its place in the wait queue (0 = the
    /// head).
    Busy(Option<u64>, Option<u64>),
}

/// How a waiting `pes_try_acquire.lua` call queues ([`LockStore::pes_try_acquire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PesWait {
    /// The queue entry's keep-alive.
    pub keepalive: std::time::Duration,
    /// An earlier attempt of the same call was sent: the id may hold a permit already.
    pub retry: bool,
}

/// What `pes_release.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PesRelease {
    /// Released and published.
    Released,
    /// No such permit.
    Missing,
    /// The permit's lease had run out: it went back to the count as a reclaim would.
    Expired,
}

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// A grant message's `WAIT_MS` ([`crate::semaphore::GRANT_NEXT_WAIT`]).
fn grant_wait_ms() -> i64 {
    i64::try_from(crate::semaphore::GRANT_NEXT_WAIT.as_millis()).unwrap_or(i64::MAX)
}

fn id_arg(id: &PermitId) -> Value {
    Value::Bytes(fred::bytes::Bytes::copy_from_slice(id.bytes()))
}

impl LockStore {
    /// `pes_try_acquire.lua`: takes one permit with id `id` and a lease of `lease_ms`
    /// (-1: never expires); when none is free, it first reclaims a chunk of expired
    /// permits.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) for keys of other types;
    /// timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs, and
    /// only its answer is lost (a permit it took is then the caller's to release).
    ///
    /// `wait`: a waiting call (issue 29 item 4), which takes only when nobody is queued
    /// and otherwise keeps a place in the wait queue for `id` (a release may grant it the
    /// permit with that id); `None`: a single try, which never reads the queue.
    pub async fn pes_try_acquire(
        &self,
        names: &PesNames,
        id: &PermitId,
        lease_ms: i64,
        wait: Option<PesWait>,
    ) -> Result<PesAcquire> {
        let publish = self.call_settings().publish;
        let hex = id.to_string();
        let build = || {
            let keepalive = wait.map_or(0, |wait| i64::try_from(wait.keepalive.as_millis()).unwrap_or(i64::MAX));
            let retry = wait.is_some_and(|wait| wait.retry);
            let args = vec![
                int(lease_ms),
                id_arg(id),
                crate::call::static_arg(publish),
                int(RECLAIM_CHUNK),
                int(keepalive),
                Value::from(hex.as_str()),
                int(grant_wait_ms()),
                int(i64::from(retry)),
            ];
            (names.keys(), args)
        };
        let (reply, _): (Vec<i64>, _) = self.run_script(names.key(), &scripts::PES_TRY_ACQUIRE, build, None).await?;
        match reply.as_slice() {
            [1, expiry] => Ok(PesAcquire::Taken(*expiry)),
            [2, expiry] => Ok(PesAcquire::Held(*expiry)),
            [_, wait] => Ok(PesAcquire::Busy(u64::try_from(*wait).ok(), None)),
            [_, wait, place] => Ok(PesAcquire::Busy(u64::try_from(*wait).ok(), u64::try_from(*place).ok())),
            _ => Err(Error::new(crate::ErrorKind::Redis, "pes_try_acquire.lua answered an unexpected reply")),
        }
    }

    /// `pes_release.lua`: releases the permit `id`. `check_clock`: tell a permit whose
    /// lease had run out ([`PesRelease::Expired`]) by the server's clock (one `TIME`);
    /// without it such a permit answers [`PesRelease::Released`] (given back all the
    /// same), for a caller that tells by its own lease deadline (a `Permit` guard).
    ///
    /// # Errors
    /// As [`LockStore::pes_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::pes_try_acquire`].
    pub async fn pes_release(&self, names: &PesNames, id: &PermitId, check_clock: bool) -> Result<PesRelease> {
        let publish = self.call_settings().publish;
        let always = self.call_settings().always_read_queue;
        let build = || {
            let args = vec![
                id_arg(id),
                crate::call::static_arg(publish),
                int(i64::from(check_clock)),
                int(i64::from(always)),
                int(grant_wait_ms()),
            ];
            (names.keys(), args)
        };
        let (reply, _): (i64, _) = self
            .run_script(names.key(), &scripts::PES_RELEASE, build, None)
            .await
            .map_err(|e| e.counter_not_integer(crate::semaphore::NOT_A_COUNT))?;
        Ok(match reply {
            1 => PesRelease::Released,
            -1 => PesRelease::Expired,
            _ => PesRelease::Missing,
        })
    }

    /// `pes_cancel.lua`: undoes the waiting acquire of the permit `id` that ended without
    /// it: its queue entry goes, and a permit with that id (granted by a release, or
    /// taken by an attempt whose answer was lost) is released. `true` when one was.
    /// Replay-safe.
    ///
    /// # Errors
    /// As [`LockStore::pes_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::pes_try_acquire`]: retry it.
    pub async fn pes_cancel(&self, names: &PesNames, id: &PermitId) -> Result<bool> {
        let publish = self.call_settings().publish;
        let hex = id.to_string();
        let build = || {
            let args =
                vec![id_arg(id), Value::from(hex.as_str()), crate::call::static_arg(publish), int(grant_wait_ms())];
            (names.keys(), args)
        };
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::PES_CANCEL, build, None).await?;
        Ok(reply == 1)
    }

    /// `pes_update_lease.lua`: gives the live permit `id` a lease of `lease_ms` from now
    /// (-1: never expires). `Some(lease end in epoch ms)`, or `None` when no such live
    /// permit exists.
    ///
    /// # Errors
    /// As [`LockStore::pes_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::pes_try_acquire`].
    pub async fn pes_update_lease(&self, names: &PesNames, id: &PermitId, lease_ms: i64) -> Result<Option<i64>> {
        let publish = self.call_settings().publish;
        let build =
            || (names.keys(), vec![id_arg(id), int(lease_ms), crate::call::static_arg(publish), int(RECLAIM_CHUNK)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::PES_UPDATE_LEASE, build, None).await?;
        Ok((reply != 0).then_some(reply))
    }

    /// `pes_permits.lua`: `(available, acquired)` after a bounded reclaim (expired
    /// permits not yet reclaimed count as available).
    ///
    /// # Errors
    /// As [`LockStore::pes_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::pes_try_acquire`] (it may reclaim).
    pub async fn pes_permits(&self, names: &PesNames) -> Result<(i64, i64)> {
        let publish = self.call_settings().publish;
        let build = || (names.keys(), vec![crate::call::static_arg(publish), int(RECLAIM_CHUNK)]);
        let (reply, _): (Vec<i64>, _) = self.run_script(names.key(), &scripts::PES_PERMITS, build, None).await?;
        match reply.as_slice() {
            [available, acquired] => Ok((*available, *acquired)),
            _ => Err(Error::new(crate::ErrorKind::Redis, "pes_permits.lua answered an unexpected reply")),
        }
    }

    /// `pes_set_permits.lua`: makes the total (available plus held) `total`; returns the
    /// available count afterwards.
    ///
    /// # Errors
    /// As [`LockStore::pes_try_acquire`].
    ///
    /// # Cancel safety
    /// As [`LockStore::pes_try_acquire`].
    pub async fn pes_set_permits(&self, names: &PesNames, total: i64) -> Result<i64> {
        let publish = self.call_settings().publish;
        let build = || (names.keys(), vec![int(total), crate::call::static_arg(publish), int(RECLAIM_CHUNK)]);
        let (reply, _): (i64, _) = self.run_script(names.key(), &scripts::PES_SET_PERMITS, build, None).await?;
        Ok(reply)
    }
}

impl LockStore {
    /// `pes_renew_batch.lua`: extends watchdog-renewed permits, (timeout `ZSet` key,
    /// permit id as 32 hex digits) pairs, to `lease_ms` from now on the server's clock.
    /// Answers, per permit in order, `true` if it was listed and live (extended) and
    /// `false` if it is gone. In a cluster every key of one call must be in one slot
    /// (the watchdog groups by slot). Only the `ZSet`s are declared, and a slot migration
    /// is followed as by [`LockStore::renew_batch`].
    ///
    /// # Errors
    /// Timeouts and connection errors; then nothing is known about any permit of the
    /// batch. [`ErrorKind::Redis`](crate::ErrorKind::Redis) for an id that is not hex.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written it runs.
    pub async fn pes_renew_batch(&self, holds: &[(String, String)], lease_ms: u64) -> Result<Vec<bool>> {
        let Some((first_key, _)) = holds.first() else { return Ok(Vec::new()) };
        let batch = holds
            .iter()
            .map(|(key, hex)| PermitId::parse(hex).map(|id| (key.clone(), vec![id_arg(&id)])))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| Error::new(crate::ErrorKind::Redis, format!("a renewed permit's id: {e}")))?;
        let lease = i64::try_from(lease_ms).unwrap_or(i64::MAX);
        let budget = self.write_budget(first_key).await?;
        // Not `run_script`: a renewal follows a slot migration's ASK (and splits a batch
        // that straddles one) instead of waiting for the migration to end (`ask.rs`).
        let reply =
            crate::ask::run_hold_batch(self.client(), &scripts::PES_RENEW_BATCH, vec![int(lease)], batch, budget)
                .await?;
        if reply.len() != holds.len() {
            return Err(Error::new(
                crate::ErrorKind::Redis,
                format!("pes_renew_batch.lua answered {} results for {} permits", reply.len(), holds.len()),
            ));
        }
        Ok(reply.into_iter().map(|answer| answer == 1).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_as_32_lowercase_hex_and_parse_back() {
        let id = PermitId::random();
        let hex = id.to_string();
        assert_eq!(hex.len(), 32);
        assert!(hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(PermitId::parse(&hex).expect("parses"), id);
        assert!(PermitId::parse("xyz").is_err());
        assert!(PermitId::parse(&"g".repeat(32)).is_err());
    }

    #[test]
    fn names_follow_redissons_suffix_rule() {
        let plain = PesNames::new("exports").expect("names");
        assert_eq!(plain.timeout_key(), "{exports}:timeout");
        assert_eq!(&**plain.channel(), "redisson_sc:{exports}");
        let tagged = PesNames::new("a{t}b").expect("names");
        assert_eq!(tagged.timeout_key(), "a{t}b:timeout");
        assert!(PesNames::new("").is_err());
    }
}
