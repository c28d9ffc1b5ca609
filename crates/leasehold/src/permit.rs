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
/// or [`try_acquire`](crate::PermitExpirableSemaphore::try_acquire) is renewed by the
/// client's watchdog while held, and is lost only when a renewal finds it gone or
/// renewals fail until its lease runs out. The local view knows only the lease this permit was
/// acquired with: a later
/// [`update_lease`](crate::PermitExpirableSemaphore::update_lease) by its id changes the
/// server's lease, not this view.
#[must_use = "dropping the permit releases it (in the background)"]
#[clippy::has_significant_drop]
pub struct Permit {
    shared: Arc<PesShared>,
    id: PermitId,
    hex: String,
    lease: Arc<LeaseState>,
    /// Whether the watchdog renews the permit (acquired without a lease).
    renewed: bool,
    /// Its registration with the client's watchdog; dropping it stops the renewal.
    renewal: Option<lock_watchdog::Renewal>,
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
    /// A permit taken with `lease` from `sent_at`; `renewed`: the watchdog renews it
    /// from now on (the lease is then the watchdog timeout).
    pub(crate) fn new(shared: Arc<PesShared>, id: PermitId, sent_at: Instant, lease: Duration, renewed: bool) -> Self {
        let lease = Arc::new(LeaseState::new(lock_core::args::instant_after(sent_at, lease)));
        let runtime = tokio::runtime::Handle::try_current().ok();
        let hex = id.to_string();
        let renewal = renewed.then(|| {
            let timeout_key = shared.names().map_or_else(|_| Arc::from(""), |names| Arc::from(names.timeout_key()));
            shared.client.watchdog.register_spec(
                timeout_key,
                lock_core::OwnerId::from_raw(&hex),
                &lease,
                "permit",
                lock_watchdog::RenewSpec::Permit,
            )
        });
        Permit { shared, id, hex, lease, renewed, renewal, runtime, done: false }
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

    /// What is left of the lease on the local clock: `None` for a permit the watchdog
    /// renews (it has no end while held), `Some(ZERO)` once it ran out.
    pub fn lease_remaining(&self) -> Option<Duration> {
        (!self.renewed).then(|| self.lease.expires_at().saturating_duration_since(Instant::now()))
    }

    /// `true` once the lease ran out (on the local clock), a renewal found the permit
    /// gone, or a release found it gone. Never for a renewed permit that is still held
    /// and whose renewals succeed.
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
        self.renewal = None; // no renewal after this point
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
        self.renewal = None;
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

#[cfg(feature = "blocking")]
impl Permit {
    /// [`Permit::lost`] as a future that owns what it watches, so that the blocking API
    /// can wait for it on its own runtime thread while the permit stays with the caller.
    pub(crate) fn lost_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let lease = self.lease.clone();
        async move { lease.lost().await }
    }
}
