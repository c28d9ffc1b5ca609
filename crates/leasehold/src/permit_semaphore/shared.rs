//! [`PesShared`]: what every handle of one permit-expirable semaphore and every
//! [`Permit`](crate::Permit) it hands out share. The front (`mod.rs`), the acquire path
//! (`attempt.rs`) and the permit import it from here; it imports none of them.

use std::sync::Arc;

use lock_core::pes::PesNames;
use lock_core::{Error, Result};

use crate::client::shared::ClientShared;

/// What every handle and permit of one semaphore share.
pub(crate) struct PesShared {
    pub(crate) client: Arc<ClientShared>,
    pub(crate) key: String,
    /// `None` for an empty name, refused by every call before anything is sent.
    pub(crate) names: Option<PesNames>,
}

impl PesShared {
    pub(crate) fn new(client: Arc<ClientShared>, key: String) -> Self {
        let names = PesNames::new(&key).ok();
        PesShared { client, key, names }
    }

    /// The names, or the typed error every call gives for an empty name.
    pub(crate) fn names(&self) -> Result<&PesNames> {
        self.names.as_ref().ok_or_else(|| Error::invalid_argument("a semaphore name must not be empty"))
    }
}
