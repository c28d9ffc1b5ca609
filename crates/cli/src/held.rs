//! What `run` and `hold` hold: a lock's guard or a semaphore's permit, acquired as the
//! flags ask, and how its end is told apart (released, or taken away).

use leasehold::fred::interfaces::HashesInterface;
use leasehold::{Client, FencedGuard, LockGuard, Permit};

use crate::args::LockFlags;
use crate::permits;

/// A hold `run` or `hold` keeps.
pub(crate) enum Held {
    Plain(LockGuard),
    Fenced(FencedGuard),
    Permit(Permit),
}

/// How giving back a hold ended.
pub(crate) enum Released {
    /// Given back (or, after an error that is not a loss, left to expire with its lease).
    Done,
    /// It was no longer held: lost, expired or taken away (a forced unlock).
    Lost,
}

impl Held {
    /// The environment variable and value that name this hold for CMD:
    /// `LEASEHOLD_OWNER` (a lock's owner id) or `LEASEHOLD_PERMIT_ID` (a permit's id).
    pub(crate) fn owner_var(&self) -> (&'static str, &str) {
        match self {
            Held::Plain(guard) => ("LEASEHOLD_OWNER", guard.owner()),
            Held::Fenced(guard) => ("LEASEHOLD_OWNER", guard.owner()),
            Held::Permit(permit) => ("LEASEHOLD_PERMIT_ID", permit.id()),
        }
    }

    /// The fencing token of a fenced hold.
    pub(crate) fn token(&self) -> Option<u64> {
        match self {
            Held::Fenced(guard) => Some(guard.token()),
            Held::Plain(_) | Held::Permit(_) => None,
        }
    }

    /// Resolves when the hold is known lost.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub(crate) async fn lost(&self) {
        match self {
            Held::Plain(guard) => guard.lost().await,
            Held::Fenced(guard) => guard.lost().await,
            Held::Permit(permit) => permit.lost().await,
        }
    }

    /// Whether the hold is known lost now.
    pub(crate) fn is_lost(&self) -> bool {
        match self {
            Held::Plain(guard) => guard.is_lost(),
            Held::Fenced(guard) => guard.is_lost(),
            Held::Permit(permit) => permit.is_lost(),
        }
    }

    /// The local lease deadline (never later than the server's expiry).
    pub(crate) fn lease_deadline(&self) -> std::time::Instant {
        match self {
            Held::Plain(guard) => guard.lease_deadline(),
            Held::Fenced(guard) => guard.lease_deadline(),
            Held::Permit(permit) => permit.lease_deadline(),
        }
    }

    /// Whether the server still lists this hold (`HEXISTS` of the owner in the lock's
    /// Hash), for a fixed lease that no renewal checks: `Some(false)` when it was taken
    /// away (a forced unlock), `None` when unknown (an error; a permit, not checked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub(crate) async fn still_held(&self, client: &Client) -> Option<bool> {
        let (key, owner) = match self {
            Held::Plain(guard) => (guard.key(), guard.owner()),
            Held::Fenced(guard) => (guard.key(), guard.owner()),
            Held::Permit(_) => return None,
        };
        let call = client.fred().hexists::<bool, _, _>(key.to_owned(), owner.to_owned());
        crate::bounded::bounded(client, call).await.ok()
    }

    /// Gives the hold back. A hold found gone (lost before, or the server says this
    /// owner no longer holds it: expired or force-unlocked) is [`Released::Lost`]; any
    /// other error is reported on stderr and the hold left to its lease.
    ///
    /// # Cancel safety
    /// As the library's `unlock`/`release`: a release already sent still applies.
    pub(crate) async fn release(self, name: &str) -> Released {
        let result = match self {
            Held::Plain(guard) => guard.unlock().await,
            Held::Fenced(guard) => guard.unlock().await,
            Held::Permit(permit) => permit.release().await,
        };
        match result {
            Ok(()) => Released::Done,
            Err(error) if error.is_lock_lost() || error.is_not_owner() => Released::Lost,
            Err(error) => {
                eprintln!("leasehold: releasing `{name}` failed: {error}");
                Released::Done
            }
        }
    }
}

/// Acquires in the mode the flags ask for; `None` when `--wait` ran out.
///
/// # Cancel safety
/// Dropping the future leaves the wait queue and gives back what an attempt in flight
/// took (the library's cancel safety).
pub(crate) async fn acquire(client: &Client, spec: &LockFlags) -> leasehold::Result<Option<Held>> {
    if let Some(permits) = spec.permits {
        return Ok(permits::acquire(client, &spec.name, spec.wait, spec.lease, permits).await?.map(Held::Permit));
    }
    if spec.fenced {
        let lock = client.fenced_lock(&spec.name);
        let guard = match (spec.wait, spec.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_with(wait, lease).await?,
        };
        return Ok(guard.map(Held::Fenced));
    }
    let guard = if spec.fair {
        let lock = client.fair_lock(&spec.name);
        match (spec.wait, spec.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_with(wait, lease).await?,
        }
    } else {
        let lock = client.lock(&spec.name);
        match (spec.wait, spec.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_with(wait, lease).await?,
        }
    };
    Ok(guard.map(Held::Plain))
}
