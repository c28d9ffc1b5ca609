//! [`BlockingShared`]: what every clone of a blocking [`Client`](crate::blocking::Client)
//! and every blocking handle made from it share (the async client and the runtime
//! thread). The handles import it from here, never from the client (`client.rs`), which
//! imports every handle.

use std::sync::Arc;

use super::runtime::{Runner, Stop};

/// What every clone of a blocking client shares.
pub(crate) struct BlockingShared {
    pub(crate) client: crate::Client,
    pub(crate) runner: Arc<Runner>,
    /// Sent, with the async client, by the last clone's drop.
    pub(crate) stop: Option<Stop>,
}

impl Drop for BlockingShared {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // Never blocks: the runtime thread shuts the client down and ends.
            let _ = stop.send(self.client.clone());
        }
    }
}

impl std::fmt::Debug for BlockingShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Client").field(&self.client).finish()
    }
}
