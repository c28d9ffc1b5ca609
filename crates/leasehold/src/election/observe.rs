//! [`Observer`]: a follower's stream of every change of an election's leader or value.
//!
//! The task behind it registers on the election's change channel *before* it reads
//! (tokio's `Notified::enable` model, as every waiter of `lock-pubsub`), so a change
//! published after the read always wakes it. Each wake-up (a change message; the
//! subscriber's reconnect or lag, after its resubscribe is confirmed: messages may have
//! been lost) reads the leader again (`election_leader.lua`) and emits it if it differs
//! from what was last emitted. A leader that crashed publishes nothing: its lead expires
//! at the TTL the last read returned, so the task reads again at that moment and emits
//! "no leader" (or the next leader).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lock_core::Result;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::election::Leader;
use crate::lock::shared::LockShared;
use crate::wait::Backoff;

/// Every change of an election's leader or value ([`Election::observe`](crate::Election::observe)):
/// a [`futures_core::Stream`] of `Result<Option<Leader>>` (or call
/// [`Observer::next`] without a stream library).
///
/// - The first item is the current state (`None`: nobody leads).
/// - Then one item per change, as read from the server after each change message:
///   another leader, the same leader's new value ([`Leadership::proclaim`](crate::Leadership::proclaim)),
///   or `None` (the leader resigned, was forced, or its lease expired after a crash: the
///   observer reads again at the lead's expiry, which it knows from its last read).
/// - In term order: an item's term is never below an earlier item's.
/// - No change goes unseen silently: the observer subscribes before it reads; after a
///   reconnect of the subscriber connection (when messages may have been lost) it reads
///   again and emits the current state if it changed. Changes closer together than a
///   round trip may be seen as one (the latest): an observer reports states, each
///   newer than the last, not every message.
/// - A read that failed is retried (jittered back-off, 50 ms doubling to 1 s) and the
///   stream goes on. A
///   transient failure (a timeout, a dropped connection: [`Error::is_transient`](crate::Error::is_transient))
///   is only retried; any other (a key of another type, a refused permission) is also
///   an item (`Err`). It ends (`None`) after [`Client::shutdown`](crate::Client::shutdown).
///
/// Dropping the observer stops its task and leaves the channel.
#[derive(Debug)]
pub struct Observer {
    changes: mpsc::Receiver<Result<Option<Leader>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A process-wide count that makes each observer's line on the channel its own, so that
/// every message wakes every observer.
static OBSERVERS: AtomicU64 = AtomicU64::new(0);

impl Observer {
    pub(crate) fn start(lock: Arc<LockShared>) -> Observer {
        // One item buffered: a slow consumer holds the task back, and the next read
        // after it takes an item is the newest state.
        let (tx, changes) = mpsc::channel(1);
        let runtime = lock.client.runtime.clone();
        let task = runtime.spawn(async move { run(lock, tx).await });
        Observer { changes, task }
    }

    /// The next change (see [`Observer`]); `None` once the client was shut down.
    ///
    /// # Cancel safety
    /// Cancel safe: a change not yet taken stays for the next call.
    pub async fn next(&mut self) -> Option<Result<Option<Leader>>> {
        self.changes.recv().await
    }
}

impl futures_core::Stream for Observer {
    type Item = Result<Option<Leader>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.changes.poll_recv(cx)
    }
}

/// The observer's task: register, read, emit what changed, wait for a message or the
/// lead's expiry; again.
async fn run(lock: Arc<LockShared>, tx: mpsc::Sender<Result<Option<Leader>>>) {
    let names = match lock.names() {
        Ok(names) => names.clone(),
        Err(error) => {
            let _ = tx.send(Err(error)).await;
            return;
        }
    };
    let client = &lock.client;
    let channel: Arc<str> = Arc::from(names.election_channel());
    let line: Arc<str> = Arc::from(format!("observer:{}", OBSERVERS.fetch_add(1, Ordering::Relaxed)));
    let waiter = client.subscriber.register_broadcast(&channel, &line);
    // Not confirmed in time (the server unreachable): read anyway; the subscriber wakes
    // every waiter once its subscription is confirmed.
    waiter.subscribed_by(Instant::now() + client.config.command_timeout).await;
    let mut last: Option<Option<Leader>> = None;
    let mut backoff = Backoff::new();
    loop {
        // Consumed before the read: a message that comes during it wakes the next wait.
        let _ = waiter.take_turn();
        let sent_at = Instant::now();
        let next_look = match client.store.election_leader(&names).await {
            Ok(read) => {
                backoff = Backoff::new();
                let now = Leader::of(&read);
                if is_news(last.as_ref(), now.as_ref()) {
                    last = Some(now.clone());
                    if tx.send(Ok(now)).await.is_err() {
                        return;
                    }
                }
                // A crashed leader tells nobody: look again when its lead expires.
                read.lead_ttl.map(|ttl| (sent_at + ttl).max(Instant::now() + Duration::from_millis(1)))
            }
            Err(error) if error.is_shutdown() => return,
            Err(error) => {
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    election = %names.key(),
                    %error,
                    "observer: reading the leader failed; retrying",
                );
                if !error.is_transient() && tx.send(Err(error)).await.is_err() {
                    return;
                }
                Some(Instant::now() + backoff.next_delay())
            }
        };
        let deadline = next_look.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = waiter.wait_until(deadline) => {}
            () = tx.closed() => return,
        }
    }
}

/// Whether `now` is to be emitted after `last` (`None`: nothing emitted yet): a change
/// of leader or value, never a term below the last one emitted.
fn is_news(last: Option<&Option<Leader>>, now: Option<&Leader>) -> bool {
    let Some(last) = last else { return true };
    match (last, now) {
        (None, None) => false,
        (None, Some(_)) | (Some(_), None) => true,
        (Some(old), Some(new)) => new.term > old.term || (new.term == old.term && new.value != old.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(term: u64, value: &str) -> Leader {
        Leader { value: value.to_owned(), term, owner: "o".to_owned() }
    }

    #[test]
    fn news_is_a_change_in_term_order() {
        assert!(is_news(None, None), "the first state is always emitted");
        assert!(!is_news(Some(&None), None));
        assert!(is_news(Some(&None), Some(&leader(5, "a"))));
        assert!(is_news(Some(&Some(leader(5, "a"))), None));
        assert!(!is_news(Some(&Some(leader(5, "a"))), Some(&leader(5, "a"))));
        assert!(is_news(Some(&Some(leader(5, "a"))), Some(&leader(5, "b"))), "a proclaim");
        assert!(is_news(Some(&Some(leader(5, "a"))), Some(&leader(6, "a"))), "a new leader");
        assert!(!is_news(Some(&Some(leader(6, "a"))), Some(&leader(5, "b"))), "never back in terms");
    }
}
