//! One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).

use std::sync::Arc;
use std::time::Duration;

use lock_core::pes::{PermitId, PesRelease};
use lock_core::{Error, ErrorKind, LeaseState, Result};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::permit_semaphore::shared::PesShared;

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
/// server's own expiry). A permit of [`acquire`](crate::PermitExpirableSemaphore::acquire),
/// [`try_acquire`](crate::PermitExpirableSemaphore::try_acquire) or
/// [`try_acquire_for`](crate::PermitExpirableSemaphore::try_acquire_for) is renewed by the
/// client's watchdog while held, and is lost only when a renewal finds it gone or
/// renewals fail until its lease runs out. The local view knows only the lease this permit was
/// acquired with: a later
/// [`update_lease`](crate::PermitExpirableSemaphore::update_lease) by its id changes the
/// server's lease, not this view.
#[must_use = "dropping the permit releases it (in the background)"]
#[clippy::has_significant_drop]
pub struct Permit {
    /// What the client's live registry shares with this permit (for `Client::shutdown`).
    hold: Arc<PermitHold>,
    hex: String,
    /// Whether the watchdog renews the permit (acquired without a lease).
    renewed: bool,
    runtime: Option<tokio::runtime::Handle>,
    /// This permit's entry in the client's live holds.
    live: u64,
    /// Set once released; `Drop` then does nothing.
    done: bool,
}

/// One permit as [`Client::shutdown`](crate::Client::shutdown) sees it: enough to
/// release it and to end it locally, shared by the [`Permit`] and (weakly) the client's
/// live registry.
struct PermitHold {
    shared: Arc<PesShared>,
    id: PermitId,
    lease: Arc<LeaseState>,
    /// Its registration with the client's watchdog; taking it out stops the renewal.
    renewal: Mutex<Option<lock_watchdog::Renewal>>,
}

impl PermitHold {
    /// Stops the renewal, synchronously: no later watchdog round renews it.
    fn stop_renewal(&self) {
        drop(self.renewal.lock().take());
    }
}

impl crate::client::live::LiveHold for PermitHold {
    /// Releases the permit by its id (once; a permit already gone answers `Ok`).
    fn release(&self) -> crate::client::live::BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.stop_renewal();
            let names = self.shared.names()?;
            self.shared.client.store.pes_release(names, &self.id, false).await.map(drop)
        })
    }

    /// The permit reports lost from now on, and is no longer renewed.
    fn end_locally(&self) {
        self.stop_renewal();
        self.lease.mark_lost();
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("key", &crate::debug::Bounded(&self.hold.shared.key))
            .field("id", &self.hex)
            .field("lease_deadline", &self.hold.lease.expires_at())
            .field("renewed", &self.renewed)
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
        let hold = Arc::new(PermitHold { shared, id, lease, renewal: Mutex::new(renewal) });
        let weak: std::sync::Weak<dyn crate::client::live::LiveHold> = Arc::downgrade(&hold) as _;
        let live = hold.shared.client.live.insert(weak);
        Permit { hold, hex, renewed, runtime, live, done: false }
    }

    /// The permit's id: 32 lowercase hex digits (Redisson's format; Redis holds the 16
    /// raw bytes). Any handle on the semaphore, Java's included, can release it by this id.
    pub fn id(&self) -> &str {
        &self.hex
    }

    /// The semaphore's Redis key.
    pub fn key(&self) -> &str {
        &self.hold.shared.key
    }

    /// The local deadline of the lease.
    pub(crate) fn lease_end(&self) -> Instant {
        self.hold.lease.expires_at()
    }

    /// The local lease deadline on the monotonic clock, measured from when the acquire
    /// was sent, so the server's lease end is never earlier. Watchdog renewals of a
    /// renewed permit move it forward; a later
    /// [`update_lease`](crate::PermitExpirableSemaphore::update_lease) does not.
    pub fn lease_deadline(&self) -> std::time::Instant {
        self.hold.lease.expires_at().into_std()
    }

    /// Whether the watchdog renews this permit while held (it was taken without a
    /// lease: [`acquire`](crate::PermitExpirableSemaphore::acquire),
    /// [`try_acquire`](crate::PermitExpirableSemaphore::try_acquire),
    /// [`try_acquire_for`](crate::PermitExpirableSemaphore::try_acquire_for)), until it
    /// is released, detached or lost.
    pub fn is_renewed(&self) -> bool {
        self.renewed && self.hold.renewal.lock().is_some() && !self.is_lost()
    }

    /// Lets go of the permit without releasing it: its renewal stops at once, nothing
    /// is sent (now, on drop or at [`Client::shutdown`](crate::Client::shutdown)), and
    /// the permit stays listed until its lease runs out, or until someone releases it
    /// by its [`id`](Permit::id) with
    /// [`try_release`](crate::PermitExpirableSemaphore::try_release).
    pub fn detach(mut self) {
        // `Drop` stops the renewal too; stopped first here, so nothing renews it after
        // this call whatever `Drop` does.
        self.hold.stop_renewal();
        self.done = true;
        self.hold.shared.client.live.remove(self.live);
    }

    /// `true` once the lease ran out (on the local clock), a renewal found the permit
    /// gone, a release found it gone, or [`Client::shutdown`](crate::Client::shutdown)
    /// released it (or tried to). Never for a renewed permit that is still held
    /// and whose renewals succeed.
    pub fn is_lost(&self) -> bool {
        self.hold.lease.is_lost()
    }

    /// Resolves when the permit is lost (see [`Permit::is_lost`]); never while it is held.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.hold.lease.lost().await;
    }

    /// Releases the permit: the count goes up by one and is published, which wakes a
    /// waiter of each client.
    ///
    /// # Errors
    /// [`ErrorKind::NotOwner`] when the permit was no longer listed (released by its id
    /// elsewhere, or reclaimed after its lease) or its lease had run out (the count is
    /// given back anyway, as Redisson does): told by the permit's own
    /// [`lease_deadline`](Permit::lease_deadline), which is never later than the
    /// server's, when the answer comes (so a release answered just after that deadline
    /// reports it even if the server's lease had a few ms left; a lease shortened by
    /// [`update_lease`](crate::PermitExpirableSemaphore::update_lease) is not seen); timeouts and connection errors, after which
    /// it is unknown whether it was released (the lease ends it in any case).
    /// [`ErrorKind::Shutdown`] after [`Client::shutdown`](crate::Client::shutdown), which
    /// already released it (or, if it could not, left it to its lease); nothing is sent.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the release back once sent; if it was not sent
    /// yet, the permit's `Drop` releases it in the background.
    pub async fn release(mut self) -> Result<()> {
        self.hold.stop_renewal(); // no renewal after this point
        let shared = &self.hold.shared;
        let names = shared.names()?.clone();
        if shared.client.store.is_closed() {
            // Not `done` yet: `Drop` accounts for the registry entry and sends nothing.
            return Err(Error::new(ErrorKind::Shutdown, "the client was shut down: the shutdown released this permit")
                .with_key(names.key()));
        }
        // No server clock: whether the lease had run out is told by the permit's own
        // deadline (never later than the server's), read after the reply: a reply before
        // it proves the lease was live when the release ran.
        let answer = shared.client.store.pes_release(&names, &self.hold.id, false).await;
        self.done = true;
        shared.client.live.remove(self.live);
        match answer? {
            PesRelease::Released if self.hold.lease.is_lost() => {
                self.hold.lease.mark_lost();
                Err(Error::new(ErrorKind::NotOwner, "the permit's lease had run out").with_key(names.key()))
            }
            PesRelease::Released => Ok(()),
            PesRelease::Missing => {
                self.hold.lease.mark_lost();
                Err(Error::new(ErrorKind::NotOwner, "the permit was no longer held").with_key(names.key()))
            }
            PesRelease::Expired => {
                self.hold.lease.mark_lost();
                Err(Error::new(ErrorKind::NotOwner, "the permit's lease had run out").with_key(names.key()))
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.hold.stop_renewal();
        if self.done {
            return;
        }
        let client = &self.hold.shared.client;
        client.live.remove(self.live);
        if client.store.is_closed() {
            // Shut down: the shutdown released it (or left it to its lease); nothing can
            // be sent.
            return;
        }
        let Some(runtime) = self.runtime.take() else { return };
        let hold = self.hold.clone();
        drop(runtime.spawn(async move {
            let Ok(names) = hold.shared.names() else { return };
            if let Err(error) = hold.shared.client.store.pes_release(names, &hold.id, false).await {
                tracing::warn!(
                    target: crate::telemetry::TARGET,
                    semaphore = %names.key(),
                    %error,
                    permit = %hold.id,
                    "a dropped permit was not released",
                );
            }
        }));
    }
}

#[cfg(feature = "blocking")]
impl Permit {
    /// [`Permit::lost`] as a future that owns what it watches, so that the blocking API
    /// can wait for it on its own runtime thread while the permit stays with the caller.
    pub(crate) fn lost_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let lease = self.hold.lease.clone();
        async move { lease.lost().await }
    }
}
