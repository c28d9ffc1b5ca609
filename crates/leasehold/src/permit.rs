//! One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).

use std::sync::Arc;
use std::time::Duration;

use lock_core::pes::{PermitId, PesRelease};
use lock_core::{Error, ErrorKind, LeaseState, Result};
use tokio::time::Instant;

use crate::permit_semaphore::PesShared;

/// One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore),
/// listed in Redis under its [`id`](Permit::id) until it is released or its lease runs
/// out. Release it with [`Permit::release`], which reports errors.
///
/// Dropping a permit without `release` releases it in the background on the runtime
/// that acquired it (as a lock guard does); if that runtime is gone, the permit comes
/// back when its lease runs out. `Drop` never blocks and never panics.
///
/// [`Permit::lost`] and [`Permit::is_lost`] tell when the lease ran out on the local
/// monotonic clock (measured from when the acquire was sent, so never after the
/// server's own expiry). A permit of [`acquire`](crate::PermitExpirableSemaphore::acquire)
/// never expires and is never lost. The local view knows only the lease this permit was
/// acquired with: a later
/// [`update_lease`](crate::PermitExpirableSemaphore::update_lease) by its id changes the
/// server's lease, not this view.
#[must_use = "dropping the permit releases it (in the background)"]
#[clippy::has_significant_drop]
pub struct Permit {
    shared: Arc<PesShared>,
    id: PermitId,
    hex: String,
    lease: LeaseState,
    /// Whether the permit has a lease (`false`: it never expires).
    leased: bool,
    runtime: Option<tokio::runtime::Handle>,
    /// Set once released; `Drop` then does nothing.
    done: bool,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("key", &crate::debug::Bounded(&self.shared.key))
            .field("id", &self.hex)
            .field("lease_remaining", &self.lease_remaining())
            .finish()
    }
}

impl Permit {
    pub(crate) fn new(shared: Arc<PesShared>, id: PermitId, sent_at: Instant, lease: Option<Duration>) -> Self {
        let expires_at = match lease {
            Some(lease) => lock_core::args::instant_after(sent_at, lease),
            None => lock_core::args::far_future(sent_at),
        };
        let runtime = tokio::runtime::Handle::try_current().ok();
        let hex = id.to_string();
        Permit { shared, id, hex, lease: LeaseState::new(expires_at), leased: lease.is_some(), runtime, done: false }
    }

    /// The permit's id: 32 lowercase hex digits (Redisson's format; Redis holds the 16
    /// raw bytes). Any handle on the semaphore, Java's included, can release it by this id.
    pub fn id(&self) -> &str {
        &self.hex
    }

    /// The semaphore's Redis key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The local deadline of the lease.
    pub(crate) fn lease_end(&self) -> Instant {
        self.lease.expires_at()
    }

    /// What is left of the lease on the local clock: `None` for a permit that never
    /// expires, `Some(ZERO)` once it ran out.
    pub fn lease_remaining(&self) -> Option<Duration> {
        self.leased.then(|| self.lease.expires_at().saturating_duration_since(Instant::now()))
    }

    /// `true` once the lease ran out (on the local clock) or a release found the permit
    /// gone. Never for a permit without a lease that is still held.
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Resolves when the permit is lost (see [`Permit::is_lost`]); never while it is held.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.lease.lost().await;
    }

    /// Releases the permit: the count goes up by one and is published, which wakes a
    /// waiter of each client.
    ///
    /// # Errors
    /// [`ErrorKind::NotOwner`] when the permit was no longer listed (released by its id
    /// elsewhere, or reclaimed after its lease) or its lease had run out (the count is
    /// given back anyway, as Redisson does); timeouts and connection errors, after which
    /// it is unknown whether it was released (the lease ends it in any case).
    ///
    /// # Cancel safety
    /// Dropping the future does not take the release back once sent; if it was not sent
    /// yet, the permit's `Drop` releases it in the background.
    pub async fn release(mut self) -> Result<()> {
        let names = self.shared.names()?.clone();
        let answer = self.shared.client.store.pes_release(&names, &self.id).await;
        self.done = true;
        match answer? {
            PesRelease::Released => Ok(()),
            PesRelease::Missing => {
                self.lease.mark_lost();
                Err(Error::new(ErrorKind::NotOwner, "the permit was no longer held").with_key(names.key()))
            }
            PesRelease::Expired => {
                self.lease.mark_lost();
                Err(Error::new(ErrorKind::NotOwner, "the permit's lease had run out").with_key(names.key()))
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(runtime) = self.runtime.take() else { return };
        let (shared, id) = (self.shared.clone(), self.id);
        drop(runtime.spawn(async move {
            let Ok(names) = shared.names() else { return };
            if let Err(error) = shared.client.store.pes_release(names, &id).await {
                tracing::warn!(semaphore = %names.key(), %error, permit = %id, "a dropped permit was not released");
            }
        }));
    }
}
