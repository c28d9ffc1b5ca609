//! What the scheduler calls to renew one batch.

use std::future::Future;

use lock_core::{LockStore, Result};

/// Renews one batch of holds, or checks it: `(lock key, owner field)` pairs. Answers, per
/// hold in order, `true` if the owner field exists (and, for a renewal, the lease was
/// extended) and `false` if it is gone.
///
/// [`LockStore`] implements it with `renew_batch.lua` and `verify_batch.lua`; the
/// scheduler's unit tests use an in-memory one to check timing logic under paused time.
pub trait Renewer: Clone + Send + Sync + 'static {
    /// Renews `holds` to `lease_ms`.
    fn renew(&self, holds: Vec<(String, String)>, lease_ms: u64) -> impl Future<Output = Result<Vec<bool>>> + Send;

    /// Renews read holds of read/write locks to `lease_ms`: `(lock key, reader owner,
    /// its timeout-key prefix)` triples ([`RenewSpec::ReadHold`](crate::RenewSpec)).
    /// Default: [`Renewer::renew`] of the (key, owner) pairs (for fakes).
    fn renew_reads(
        &self,
        holds: Vec<(String, String, String)>,
        lease_ms: u64,
    ) -> impl Future<Output = Result<Vec<bool>>> + Send {
        self.renew(holds.into_iter().map(|(key, owner, _)| (key, owner)).collect(), lease_ms)
    }

    /// Renews permits of permit-expirable semaphores to `lease_ms`: (timeout `ZSet` key,
    /// permit id as hex) pairs ([`RenewSpec::Permit`](crate::RenewSpec)). Default:
    /// [`Renewer::renew`] of the same pairs (for fakes).
    fn renew_permits(
        &self,
        holds: Vec<(String, String)>,
        lease_ms: u64,
    ) -> impl Future<Output = Result<Vec<bool>>> + Send {
        self.renew(holds, lease_ms)
    }

    /// Checks that the owner field of each of `holds` still exists, writing nothing: a
    /// check must never extend a lease.
    fn verify(&self, holds: Vec<(String, String)>) -> impl Future<Output = Result<Vec<bool>>> + Send;

    /// Called every [`WatchdogConfig::topology_check`](crate::WatchdogConfig) while
    /// holds are registered or tracked: reads where the server's slots are and, when a
    /// slot's primary changed since the client last knew, brings the client up to date.
    /// Returns whether it changed (the scheduler then renews and checks every hold).
    /// Default: `false`, sending nothing.
    fn follow_topology(&self) -> impl Future<Output = bool> + Send {
        std::future::ready(false)
    }
}

impl Renewer for LockStore {
    async fn renew(&self, holds: Vec<(String, String)>, lease_ms: u64) -> Result<Vec<bool>> {
        let pairs: Vec<(&str, &str)> = holds.iter().map(|(k, o)| (k.as_str(), o.as_str())).collect();
        self.renew_batch(&pairs, lease_ms).await
    }

    async fn renew_reads(&self, holds: Vec<(String, String, String)>, lease_ms: u64) -> Result<Vec<bool>> {
        self.read_renew_batch(&holds, lease_ms).await
    }

    async fn renew_permits(&self, holds: Vec<(String, String)>, lease_ms: u64) -> Result<Vec<bool>> {
        self.pes_renew_batch(&holds, lease_ms).await
    }

    async fn verify(&self, holds: Vec<(String, String)>) -> Result<Vec<bool>> {
        let pairs: Vec<(&str, &str)> = holds.iter().map(|(k, o)| (k.as_str(), o.as_str())).collect();
        self.verify_batch(&pairs).await
    }

    async fn follow_topology(&self) -> bool {
        lock_core::topology::sync_if_primaries_changed(self.client(), self.command_timeout()).await
    }
}
