//! The holds alive of one client's handles, so that
//! [`Client::shutdown`](crate::Client::shutdown) knows what to give back.
//!
//! The registry names no kind: every kind of hold implements [`LiveHold`] (how to give
//! it back on the server, and how to end it locally) and its guard enters a `Weak` to it
//! when it is made ([`LiveGuards::insert`]) and leaves when it is released, dropped or
//! detached ([`LiveGuards::remove`]). A guard forgotten with `mem::forget` stays, so
//! shutdown releases its hold too. Implementations today: a lock owner's holds
//! (`LockShared`: [`Lock`](crate::Lock), [`FencedLock`](crate::FencedLock),
//! [`FairLock`](crate::FairLock), both sides of a
//! [`ReadWriteLock`](crate::ReadWriteLock), each member of a
//! [`MultiLock`](crate::MultiLock)), a [`SimpleLock`](crate::SimpleLock)'s hold, one
//! [`Permit`](crate::Permit), and the permits of one
//! [`SemaphorePermit`](crate::SemaphorePermit).
//!
//! To add a kind: put what its release needs (key, owner or id, the client) behind an
//! `Arc`, implement [`LiveHold`] for it, keep the `Arc` in the guard, `insert` a
//! `Arc::downgrade` of it when the guard is made and `remove` the id when the guard ends
//! (unlock, drop, detach). Several guards may register the same `Arc` (re-entries of one
//! owner): shutdown releases each `Arc` once.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use lock_core::{Error, ErrorKind, Result};
use parking_lot::Mutex;

/// A boxed, `Send` future borrowing the hold (what [`LiveHold::release`] answers).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One kind of hold, as [`Client::shutdown`](crate::Client::shutdown) sees it.
pub(crate) trait LiveHold: Send + Sync {
    /// Gives the hold back on the server, best effort, once (shutdown bounds the wait
    /// and abandons what did not answer: such a hold expires with its lease). Must not
    /// loop on failures, and must send nothing for a hold it knows already ended.
    fn release(&self) -> BoxFuture<'_, Result<()>>;

    /// Ends the hold locally, whether or not `release` reached the server: its guards
    /// report `is_lost()` (and `lost()` resolves) from now on, its renewal stops, and
    /// their unlock or drop sends nothing. Synchronous and non-blocking.
    fn end_locally(&self);
}

/// How many independently locked parts the registry has: every guard of every task
/// enters and leaves it (two locks per hold on the hot path), so the entries are
/// spread by id over several mutexes, and tasks on different threads seldom meet on one.
const SHARDS: usize = 8;

/// The ids are a counter: one multiplication spreads them over the hash (hashbrown uses
/// the top bits too), instead of `SipHash`'s rounds for a key nobody can choose.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` ids are hashed (`write_u64`); any other input is still hashed.
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Shard = Mutex<HashMap<u64, Weak<dyn LiveHold>, BuildHasherDefault<IdHasher>>>;

/// The registry, one per client.
#[derive(Default)]
pub(crate) struct LiveGuards {
    next: AtomicU64,
    shards: [Shard; SHARDS],
}

impl LiveGuards {
    fn shard(&self, id: u64) -> &Shard {
        // `SHARDS` divides 2^64, and the index is below it: the cast cannot truncate.
        &self.shards[(id % SHARDS as u64) as usize]
    }

    pub(crate) fn insert(&self, hold: Weak<dyn LiveHold>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.shard(id).lock().insert(id, hold);
        id
    }

    pub(crate) fn remove(&self, id: u64) {
        self.shard(id).lock().remove(&id);
    }

    fn take_all(&self) -> Vec<Arc<dyn LiveHold>> {
        let mut holds: Vec<Arc<dyn LiveHold>> = Vec::new();
        for shard in &self.shards {
            let entries = std::mem::take(&mut *shard.lock());
            holds.extend(entries.into_values().filter_map(|weak| weak.upgrade()));
        }
        // Many guards of one owner share one hold: one release gives back all of them.
        // Compared by data address only (a `dyn` pointer's vtable part may differ).
        let address = |hold: &Arc<dyn LiveHold>| Arc::as_ptr(hold).cast::<()>() as usize;
        holds.sort_by_key(address);
        holds.dedup_by(|a, b| address(a) == address(b));
        holds
    }

    /// Gives back, concurrently, every live hold, all within `timeout` (each kind as its
    /// [`LiveHold::release`] says: a lock owner's count set to 0, a simple lock
    /// compare-and-deleted, a permit released). Then every one of them is ended locally,
    /// released or not ([`LiveHold::end_locally`]).
    ///
    /// # Errors
    /// The first release that failed, or [`ErrorKind::Timeout`] when `timeout` ran out
    /// first (the releases not answered by then are abandoned: those holds expire with
    /// their leases).
    pub(crate) async fn release_all(&self, timeout: Duration) -> Result<()> {
        let holds = self.take_all();
        let mut releases = tokio::task::JoinSet::new();
        for hold in &holds {
            let hold = hold.clone();
            releases.spawn(async move { hold.release().await });
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
        for hold in &holds {
            hold.end_locally();
        }
        first_error.map_or(Ok(()), Err)
    }
}
