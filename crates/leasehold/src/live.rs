//! The guards alive of one client's lock handles, so that
//! [`Client::shutdown`](crate::Client::shutdown) knows what to give back.
//!
//! A guard enters when it is made and leaves when it is unlocked, dropped or detached;
//! a guard forgotten with `mem::forget` stays, so shutdown releases its lock too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use lock_core::{Error, ErrorKind, Result};
use parking_lot::Mutex;

use crate::lock::LockShared;
use crate::simple::SimpleShared;

/// The handle a live guard belongs to. Weak: the registry must not keep a handle (and
/// its client) alive.
pub(crate) enum Live {
    /// A guard of a [`Lock`](crate::Lock), [`FencedLock`](crate::FencedLock) or
    /// [`FairLock`](crate::FairLock): its owner's hold.
    Lock(Weak<LockShared>),
    /// A [`SimpleGuard`](crate::SimpleGuard).
    Simple(Weak<SimpleShared>),
}

/// The registry, one per client.
#[derive(Default)]
pub(crate) struct LiveGuards {
    next: AtomicU64,
    entries: Mutex<HashMap<u64, Live>>,
}

impl LiveGuards {
    /// Enters a guard; the id is what [`LiveGuards::remove`] takes.
    pub(crate) fn insert(&self, live: Live) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.entries.lock().insert(id, live);
        id
    }

    /// A guard ended (unlocked, dropped, detached). Synchronous and non-blocking.
    pub(crate) fn remove(&self, id: u64) {
        self.entries.lock().remove(&id);
    }

    /// Every live guard's handle, once each, leaving the registry empty.
    fn take_all(&self) -> (Vec<Arc<LockShared>>, Vec<Arc<SimpleShared>>) {
        let entries = std::mem::take(&mut *self.entries.lock());
        let (mut locks, mut simples) = (Vec::new(), Vec::new());
        for live in entries.into_values() {
            match live {
                Live::Lock(weak) => locks.extend(weak.upgrade()),
                Live::Simple(weak) => simples.extend(weak.upgrade()),
            }
        }
        // Many guards of one owner: one release gives back all of its holds.
        locks.sort_by_key(|lock| Arc::as_ptr(lock) as usize);
        locks.dedup_by(|a, b| Arc::ptr_eq(a, b));
        simples.sort_by_key(|simple| Arc::as_ptr(simple) as usize);
        simples.dedup_by(|a, b| Arc::ptr_eq(a, b));
        (locks, simples)
    }

    /// Gives back, concurrently, every hold of every live guard, all within `timeout`:
    /// each owner's count is set to 0 (the key deleted and the unlock message published
    /// when no other owner holds it), each simple lock compare-and-deleted. Then every
    /// hold of those owners is ended locally, released or not: its guards report
    /// [`LockGuard::is_lost`](crate::LockGuard::is_lost), their renewal and tracking
    /// stop, and their unlock or drop sends nothing.
    ///
    /// # Errors
    /// The first release that failed, or [`ErrorKind::Timeout`] when `timeout` ran out
    /// first (the releases not answered by then are abandoned: those locks expire with
    /// their leases).
    pub(crate) async fn release_all(&self, timeout: Duration) -> Result<()> {
        let (locks, simples) = self.take_all();
        let mut releases = tokio::task::JoinSet::new();
        for lock in &locks {
            let lock = lock.clone();
            releases.spawn(async move { release_owner(&lock).await });
        }
        for simple in simples {
            releases
                .spawn(async move { simple.client.store.simple_release(&simple.key, &simple.owner).await.map(drop) });
        }
        let mut first_error = None;
        let all = async {
            while let Some(joined) = releases.join_next().await {
                if let Ok(Err(error)) = joined {
                    first_error.get_or_insert(error);
                }
            }
        };
        if tokio::time::timeout(timeout, all).await.is_err() {
            releases.abort_all();
            first_error.get_or_insert(Error::new(
                ErrorKind::Timeout,
                format!(
                    "shutdown: the releases did not all answer within {timeout:?}; the rest expire with their leases"
                ),
            ));
        }
        for lock in &locks {
            lock.holds.server_holds_nothing(None);
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Sets the owner's hold count to 0, in its turn, if it holds the lock as far as it
/// knows. A retry is never needed for safety: a release that did not land leaves the
/// lock to expire with its lease (the watchdog is stopped next).
async fn release_owner(lock: &LockShared) -> Result<()> {
    let _turn = lock.holds.turn().await;
    if !lock.holds.has_current() {
        return Ok(());
    }
    let names = lock.names()?;
    lock.set_holds(names, 0, 0, false).await.map(drop)
}
