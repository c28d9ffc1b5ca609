//! The application's questions about who holds what (the other half, what a client
//! writes about itself, is `client/who.rs`): [`Client::connection_name`],
//! [`Client::describe_owner`], [`Client::lock_history`]. A file of its own so that
//! `client/who.rs`, which `ClientShared` holds, never names the facade.

use lock_core::who::{self, ClientDescription};

impl crate::Client {
    /// This client's connection name, `leasehold:<UUID>:<service>` (`CLIENT SETNAME` of
    /// every connection leasehold made for it; see `docs/observability.md`). A lock's
    /// history names the client that forced an unlock by it.
    pub fn connection_name(&self) -> &str {
        &self.inner.who.connection_name
    }

    /// The history of forced unlocks of the lock `name` (the client's key prefix is
    /// applied, as in [`Client::lock`](crate::Client::lock)), newest first: when (the
    /// server's clock), who (the forcing client's connection name) and which owners
    /// were removed. At most 100 entries, kept 7 days after the last one; empty when none
    /// was recorded. Every kind's `force_unlock` records one entry when it deleted a lock.
    ///
    /// # Errors
    /// An empty name; [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the
    /// history key is not a List; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn lock_history(&self, name: impl AsRef<str>) -> crate::Result<Vec<crate::HistoryEntry>> {
        let names = lock_core::LockNames::new(&self.full_key(name.as_ref()))?;
        who::lock_history(self.inner.store.client(), self.inner.config.command_timeout, &names).await
    }

    /// The description of the client that made the owner id `owner` (`UUID:N`, a
    /// writer's `UUID:N:write`, a simple lock's `UUID-N`): its host, pid, service, start
    /// time and leasehold version, as that client last wrote them. `None` when no live
    /// client describes it (it died or shut down more than a watchdog timeout ago, or
    /// the owner is not a leasehold client's).
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the description key
    /// is not a Hash; timeouts and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn describe_owner(&self, owner: &str) -> crate::Result<Option<ClientDescription>> {
        who::describe_owner(self.inner.store.client(), self.inner.config.command_timeout, owner).await
    }
}
