//! The write gate: lock writes held back while the client switches to a new primary.
//!
//! When the sentinels announce a new primary (`+switch-master`), a write sent before the
//! client has reconnected may still reach the old, demoted primary, where it is lost
//! once that one is turned into a replica. The Sentinel watch closes the client's gate
//! when it hears the announcement and opens it once the command connection is on the
//! announced primary; every lock write of a [`LockStore`](crate::LockStore) with a gate
//! ([`LockStore::with_write_gate`](crate::LockStore::with_write_gate)) waits for it,
//! within its command timeout, before it is handed to fred.
//!
//! Each switch has an epoch: opening for an earlier switch leaves the gate closed when a
//! later one was announced meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// The epochs of the last switch announced and the last one followed.
#[derive(Debug, Clone, Copy, Default)]
struct Epochs {
    announced: u64,
    followed: u64,
}

impl Epochs {
    fn is_open(self) -> bool {
        self.followed >= self.announced
    }
}

/// A gate that lock writes wait at while a switch of primary is being followed. Cheap to
/// clone: clones share one gate. Open when made.
#[derive(Debug, Clone, Default)]
pub struct WriteGate {
    epochs: Arc<watch::Sender<Epochs>>,
}

impl WriteGate {
    /// An open gate.
    pub fn new() -> Self {
        WriteGate::default()
    }

    /// Closes the gate for a newly announced switch and returns its epoch, to pass to
    /// [`WriteGate::open`] once it is followed.
    pub fn close(&self) -> u64 {
        let mut epoch = 0;
        self.epochs.send_modify(|epochs| {
            epochs.announced += 1;
            epoch = epochs.announced;
        });
        epoch
    }

    /// The switch of `epoch` was followed: opens the gate, unless a later switch was
    /// announced meanwhile (that one opens it when it is followed).
    pub fn open(&self, epoch: u64) {
        self.epochs.send_if_modified(|epochs| {
            let opens = epochs.followed < epoch;
            if opens {
                epochs.followed = epoch;
            }
            opens && epochs.is_open()
        });
    }

    /// `true` when no announced switch is still being followed.
    pub fn is_open(&self) -> bool {
        self.epochs.borrow().is_open()
    }

    /// Waits until the gate is open, at most `within`. Returns whether it is.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn wait_open(&self, within: Duration) -> bool {
        if self.is_open() {
            return true;
        }
        let mut epochs = self.epochs.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail with a closed channel.
        let opened = tokio::time::timeout(within, epochs.wait_for(|e| e.is_open())).await.is_ok_and(|r| r.is_ok());
        opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_closed_gate_holds_writes_until_its_switch_is_followed() {
        let gate = WriteGate::new();
        assert!(gate.is_open() && gate.wait_open(Duration::ZERO).await);
        let epoch = gate.close();
        assert!(!gate.is_open());
        assert!(!gate.wait_open(Duration::from_millis(100)).await, "held for the whole bound");
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.wait_open(Duration::from_secs(10)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        gate.open(epoch);
        assert!(waiter.await.expect("waiter"), "released when the switch was followed");
        assert!(gate.is_open());
    }

    /// A store's writes wait at its gate, within the command timeout, and fail unsent
    /// when it stays closed; nothing is handed to the (unconnected) fred client.
    #[tokio::test(start_paused = true)]
    async fn a_store_waits_at_its_gate_within_the_command_timeout() {
        let timeout = Duration::from_secs(2);
        let gate = WriteGate::new();
        let store = crate::LockStore::new(fred::clients::Client::default(), timeout).with_write_gate(gate.clone());
        assert_eq!(store.write_budget("k").await.expect("open"), timeout);
        let epoch = gate.close();
        let started = tokio::time::Instant::now();
        let names = crate::LockNames::new("k").expect("name");
        let owner = crate::ClientId::new_random().next_owner();
        let kind = crate::LockKind::Reentrant { queue_keepalive_ms: 10_000 };
        let spec = crate::AcquireSpec { kind, waiting: false, registered: false, ticket: 0, sync: None, value: None };
        let error = store.acquire(&names, &owner, 1_000, 1, spec).await.expect_err("held at the gate");
        assert!(error.is_connection() && error.is_not_sent() && error.is_transient(), "{error:?}");
        assert_eq!(started.elapsed(), timeout, "waited the whole command timeout");
        let opener = tokio::spawn({
            let gate = gate.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                gate.open(epoch);
            }
        });
        let budget = store.write_budget("k").await.expect("opened in time");
        assert_eq!(budget, timeout - Duration::from_millis(500), "the wait counts in the timeout");
        opener.await.expect("opener");
    }

    #[tokio::test(start_paused = true)]
    async fn following_an_earlier_switch_leaves_a_later_one_closed() {
        let gate = WriteGate::new();
        let first = gate.close();
        let second = gate.close();
        gate.open(first);
        assert!(!gate.is_open(), "the second switch is not followed yet");
        gate.open(second);
        assert!(gate.is_open());
        gate.open(first);
        assert!(gate.is_open(), "a late open of an old epoch changes nothing");
    }
}
