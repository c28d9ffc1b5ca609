//! [`SemaphoreShared`]: what a [`Semaphore`](crate::Semaphore) handle and the
//! [`SemaphorePermit`](crate::SemaphorePermit)s it hands out share, and the give-back
//! of a permit's permits. The front (`mod.rs`) and the permit import it from here.

use std::sync::Arc;

use lock_core::semaphore::{SemaphoreNames, SemaphoreOp};
use lock_core::{Error, Result};

use crate::client::shared::ClientShared;
use crate::semaphore::ops::ReleaseMode;

/// A semaphore's client and names, behind the handle's `Arc`.
pub(crate) struct SemaphoreShared {
    pub(crate) client: Arc<ClientShared>,
    pub(crate) key: String,
    /// `None` for an empty name, refused by every call before anything is sent.
    pub(crate) names: Option<SemaphoreNames>,
}

impl SemaphoreShared {
    pub(crate) fn new(client: Arc<ClientShared>, key: String) -> Self {
        let names = SemaphoreNames::new(&key).ok();
        SemaphoreShared { client, key, names }
    }

    /// The semaphore's Redis key.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The names, or the typed error every call gives for an empty name.
    pub(crate) fn names(&self) -> Result<&SemaphoreNames> {
        self.names.as_ref().ok_or_else(|| Error::invalid_argument("a semaphore name must not be empty"))
    }

    /// Gives back the permits the acquire `op` took (a [`SemaphorePermit`](crate::SemaphorePermit)'s release or
    /// drop), exactly once, retried as [`Semaphore::release`](crate::Semaphore::release) is,
    /// consuming the acquire's record or leaving a tombstone as `mode` decides.
    pub(crate) async fn give_back(&self, op: SemaphoreOp, permits: u32, mode: &ReleaseMode) -> Result<()> {
        let (names, client) = (self.names()?, &self.client);
        let (store, window) = (&client.store, client.config.replay_window);
        crate::semaphore::ops::release(store, window, names, i64::from(permits), op, mode.consume()).await.map(drop)
    }

    /// One attempt of [`SemaphoreShared::give_back`], for `Client::shutdown` (which bounds
    /// the wait and retries nothing).
    pub(crate) async fn give_back_once(&self, op: SemaphoreOp, permits: u32, mode: &ReleaseMode) -> Result<()> {
        let names = self.names()?;
        let consume = mode.consume();
        if consume.is_some_and(|last| tokio::time::Instant::now() >= last) {
            // Past the record's safe life: sending nothing leaves the permits taken
            // rather than risk counting them twice.
            return Err(crate::semaphore::ops::too_late(names, op));
        }
        self.client.store.semaphore_release(names, i64::from(permits), op, consume.is_some()).await.map(drop)
    }

    /// The client's live holds, where a [`SemaphorePermit`](crate::SemaphorePermit) enters.
    pub(crate) fn live(&self) -> &crate::client::live::LiveGuards {
        &self.client.live
    }
}
