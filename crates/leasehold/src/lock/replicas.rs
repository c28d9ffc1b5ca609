//! Replica acknowledgement of acquires: what `attempt()` does with `WAIT`'s answer.
//!
//! ```text
//!  acquire script ─┬─ WAIT n timeout  (pipelined on the same connection, docs/architecture/replicas.md)
//!                  ▼
//!   script: held ─────────────────▶ Held (WAIT's answer is ignored)
//!   script: acquired, WAIT ≥ n ───▶ Acquired (hold recorded, guard returned)
//!   script: acquired, WAIT < n, ──▶ undo now (release.lua), same turn ──▶ Err(ReplicaSync)
//!           or WAIT failed          (undo failed: retried in the background)   or WAIT's error
//!   script or pair failed / timed out ─▶ as without sync (ambiguous: undone in the background)
//! ```

use lock_core::{Error, LockNames, ReplicaSync, Result};

use crate::lock::shared::LockShared;

/// `Ok` unless replica sync is on and `WAIT` answered fewer than the replicas asked for
/// (then [`ErrorKind::ReplicaSync`](crate::ErrorKind::ReplicaSync)), or failed (then its
/// error: the outcome of replication is unknown, so the hold is given back all the same).
pub(crate) fn check(sync: Option<ReplicaSync>, acknowledged: Option<Result<u32>>, names: &LockNames) -> Result<()> {
    let Some(sync) = sync else { return Ok(()) };
    match acknowledged {
        Some(Ok(acknowledged)) => sync.check(acknowledged, names.key()),
        Some(Err(error)) => Err(error),
        None => {
            Err(Error::new(lock_core::ErrorKind::Redis, "the acquire was not followed by WAIT").with_key(names.key()))
        }
    }
}

/// Gives back the hold the acquire just took, now (one attempt; the caller holds the
/// owner's turn): sets the owner's count back to what its guards account for. Returns
/// `true` when the server answered, so nothing is left to undo.
pub(crate) async fn undo_now(lock: &LockShared, names: &LockNames) -> bool {
    match lock.reset_holds(names).await {
        Ok(result) => {
            tracing::debug!(
                target: crate::telemetry::TARGET,
                lock = %names.key(),
                ?result,
                "acquire not acknowledged by enough replicas; undone",
            );
            true
        }
        Err(error) => {
            tracing::warn!(
                target: crate::telemetry::TARGET,
                lock = %names.key(),
                %error,
                "could not give back an unreplicated acquire; retrying in the background",
            );
            false
        }
    }
}
