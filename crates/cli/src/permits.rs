//! `run --permits N` and `hold --permits N`: one permit of a fleet-wide semaphore of N
//! permits, a [`PermitExpirableSemaphore`](leasehold::PermitExpirableSemaphore).
//!
//! Its permits are leased (renewed by the watchdog, or a fixed `--lease`), so the
//! permit of a `run` that crashed or was killed comes back when its lease runs out; a
//! plain `Semaphore`'s count would stay one short for ever (see docs/cli.md).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold::fred::types::scripts::Script;
use leasehold::{Client, Error, Permit};

use crate::bounded::bounded;

static PERMITS_TOTAL: LazyLock<Script> = LazyLock::new(|| Script::from_lua(include_str!("../lua/permits_total.lua")));

/// Sets the semaphore `name` up with `permits` if nobody did, refuses a semaphore set
/// up with another total, then takes one permit as `--wait` and `--lease` say; `None` when the
/// wait ran out.
///
/// # Errors
/// An invalid-argument error (exit 64) when the semaphore's total is not `permits`;
/// the library's errors otherwise.
///
/// # Cancel safety
/// As the library's acquires: dropping the future leaves the wait queue and gives back
/// a permit an attempt in flight took.
pub(crate) async fn acquire(
    client: &Client,
    name: &str,
    wait: Option<Duration>,
    lease: Option<Duration>,
    permits: u32,
) -> leasehold::Result<Option<Permit>> {
    let semaphore = client.permit_expirable_semaphore(name);
    if !semaphore.try_set_permits(permits).await? {
        let keys = vec![semaphore.key().to_owned(), semaphore.timeout_key().to_owned()];
        let total: i64 =
            bounded(client, PERMITS_TOTAL.evalsha_with_reload(client.fred(), keys, Vec::<String>::new())).await?;
        // -1: deleted since try_set_permits saw it; the acquire waits until it is set again.
        if total != i64::from(permits) && total != -1 {
            return Err(Error::invalid_argument(format!(
                "`{}` is a semaphore of {total} permits, not {permits}: every run of a name must give the same \
                 --permits (to change it, delete the keys `{}` and `{}` while nobody holds a permit)",
                name,
                semaphore.key(),
                semaphore.timeout_key()
            )));
        }
    }
    match (wait, lease) {
        (None, None) => semaphore.acquire().await.map(Some),
        (None, Some(lease)) => semaphore.acquire_with_lease(lease).await.map(Some),
        (Some(wait), None) => semaphore.try_acquire_for(wait).await,
        (Some(wait), Some(lease)) => semaphore.try_acquire_with(wait, lease).await,
    }
}
