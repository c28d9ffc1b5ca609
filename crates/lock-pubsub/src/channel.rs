//! The local waiters of one release channel: a FIFO queue of slots.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One waiter's place in line.
#[derive(Debug)]
struct Slot {
    id: u64,
    /// Set when the waiter may try to acquire: a message woke it, or it became first.
    woken: bool,
    /// Set when it became first because the waiter ahead *acquired*: the lock is held
    /// until about this instant, so it waits for the release message (or this timer)
    /// instead of trying a lock that was just taken.
    held_until: Option<Instant>,
    signal: Arc<Notify>,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Slot>,
    subscribed: bool,
    next_id: u64,
}

/// The waiters of one channel, and whether the server confirmed the subscription.
#[derive(Debug)]
pub(crate) struct ChannelWaiters {
    pub(crate) name: Arc<str>,
    state: Mutex<State>,
    subscribed_signal: Notify,
}

/// What a departing waiter leaves behind.
pub(crate) enum Departure {
    /// Others still wait.
    Others,
    /// The queue is empty: the channel can be unsubscribed.
    Empty,
}

impl ChannelWaiters {
    pub(crate) fn new(name: Arc<str>) -> Self {
        ChannelWaiters { name, state: Mutex::new(State::default()), subscribed_signal: Notify::new() }
    }

    /// Joins the end of the queue. The first in line starts woken: it may try at once.
    pub(crate) fn join(&self, signal: Arc<Notify>) -> u64 {
        let mut state = self.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let woken = state.queue.is_empty();
        state.queue.push_back(Slot { id, woken, held_until: None, signal });
        id
    }

    /// Leaves the queue. A departing first waiter hands the turn to the next one, so
    /// the turn is never lost (whether it timed out, was cancelled with an unused
    /// wake-up, or failed). One that leaves because it *acquired* the lock (`held_until`
    /// is the end of its lease) instead gives the next one a timer: that one waits for
    /// the release message, or the timer if the message is lost, rather than spend a
    /// round trip on a lock that was just taken.
    pub(crate) fn leave(&self, id: u64, held_until: Option<Instant>) -> Departure {
        let mut state = self.state.lock();
        let Some(index) = state.queue.iter().position(|slot| slot.id == id) else {
            return if state.queue.is_empty() { Departure::Empty } else { Departure::Others };
        };
        let Some(slot) = state.queue.remove(index) else { return Departure::Others };
        if state.queue.is_empty() {
            return Departure::Empty;
        }
        if index == 0 {
            match held_until {
                // An unused wake-up means a release came in meanwhile: hand on the turn.
                Some(until) if !slot.woken => {
                    if let Some(next) = state.queue.front_mut() {
                        next.held_until = Some(until);
                        // Not a turn: just makes it re-plan its wait as the first in line.
                        next.signal.notify_one();
                    }
                }
                _ => wake_first(&mut state.queue),
            }
        }
        Departure::Others
    }

    /// Takes the timer a departing acquirer left this waiter, if any.
    pub(crate) fn take_held_until(&self, id: u64) -> Option<Instant> {
        let mut state = self.state.lock();
        state.queue.iter_mut().find(|slot| slot.id == id).and_then(|slot| slot.held_until.take())
    }

    /// Consumes this waiter's wake-up, if it has one.
    pub(crate) fn take_wake(&self, id: u64) -> bool {
        let mut state = self.state.lock();
        state.queue.iter_mut().find(|slot| slot.id == id).is_some_and(|slot| std::mem::take(&mut slot.woken))
    }

    /// `true` if this waiter holds a wake-up, without consuming it.
    pub(crate) fn has_wake(&self, id: u64) -> bool {
        self.state.lock().queue.iter().any(|slot| slot.id == id && slot.woken)
    }

    /// `true` while this waiter is first in line.
    pub(crate) fn is_first(&self, id: u64) -> bool {
        self.state.lock().queue.front().is_some_and(|slot| slot.id == id)
    }

    /// Wakes the first waiter in line (an unlock message). Only the first is woken,
    /// even when it already holds a wake-up: a mutex admits one holder, and waking
    /// anyone further back would let it overtake (a message can arrive after the next
    /// waiter already got in through its turn, so extra messages are normal).
    pub(crate) fn wake_one(&self) {
        wake_first(&mut self.state.lock().queue);
    }

    /// Wakes every waiter (a read-unlock message, lost messages, a reconnect).
    pub(crate) fn wake_all(&self) {
        let mut state = self.state.lock();
        for slot in &mut state.queue {
            slot.woken = true;
            slot.signal.notify_one();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    pub(crate) fn set_subscribed(&self, subscribed: bool) {
        self.state.lock().subscribed = subscribed;
        if subscribed {
            self.subscribed_signal.notify_waiters();
        }
    }

    pub(crate) fn is_subscribed(&self) -> bool {
        self.state.lock().subscribed
    }

    /// Resolves once the subscription is confirmed.
    pub(crate) async fn subscribed(&self) {
        loop {
            let notified = self.subscribed_signal.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_subscribed() {
                return;
            }
            notified.await;
        }
    }
}

fn wake_first(queue: &mut VecDeque<Slot>) {
    if let Some(slot) = queue.front_mut() {
        slot.woken = true;
        slot.signal.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel() -> ChannelWaiters {
        ChannelWaiters::new(Arc::from("c"))
    }

    #[test]
    fn first_in_line_starts_woken_others_wait() {
        let ch = channel();
        let a = ch.join(Arc::new(Notify::new()));
        let b = ch.join(Arc::new(Notify::new()));
        assert!(ch.take_wake(a));
        assert!(!ch.take_wake(a), "a wake-up is consumed once");
        assert!(!ch.take_wake(b));
        assert!(ch.is_first(a) && !ch.is_first(b));
    }

    #[test]
    fn unlock_wakes_only_the_first_in_line() {
        let ch = channel();
        let ids: Vec<u64> = (0..3).map(|_| ch.join(Arc::new(Notify::new()))).collect();
        assert!(ch.take_wake(ids[0]));
        ch.wake_one();
        ch.wake_one(); // a late, redundant message must not wake anyone further back
        assert!(!ch.take_wake(ids[1]) && !ch.take_wake(ids[2]));
        assert!(ch.take_wake(ids[0]), "the first in line gets the message");
        assert!(!ch.take_wake(ids[0]), "two messages before it ran still make one turn");
    }

    #[test]
    fn a_departing_first_waiter_hands_the_turn_on() {
        let ch = channel();
        let a = ch.join(Arc::new(Notify::new()));
        let b = ch.join(Arc::new(Notify::new()));
        let c = ch.join(Arc::new(Notify::new()));
        assert!(ch.take_wake(a));
        assert!(matches!(ch.leave(a, None), Departure::Others));
        assert!(ch.is_first(b) && ch.take_wake(b));
        assert!(!ch.take_wake(c));
        ch.wake_all();
        assert!(ch.take_wake(b) && ch.take_wake(c));
        assert!(matches!(ch.leave(c, None), Departure::Others));
        assert!(matches!(ch.leave(b, None), Departure::Empty));
    }

    #[test]
    fn an_acquirer_hands_on_a_timer_not_a_turn() {
        let ch = channel();
        let a = ch.join(Arc::new(Notify::new()));
        let b = ch.join(Arc::new(Notify::new()));
        assert!(ch.take_wake(a));
        let until = Instant::now() + std::time::Duration::from_secs(10);
        ch.leave(a, Some(until));
        assert!(ch.is_first(b));
        assert!(!ch.take_wake(b), "no turn: the lock was just taken");
        assert_eq!(ch.take_held_until(b), Some(until));
        assert_eq!(ch.take_held_until(b), None);
    }

    #[test]
    fn an_acquirer_with_an_unused_message_hands_on_the_turn() {
        let ch = channel();
        let a = ch.join(Arc::new(Notify::new()));
        let b = ch.join(Arc::new(Notify::new()));
        assert!(ch.take_wake(a));
        ch.wake_one(); // a release arrived while a was acquiring
        ch.leave(a, Some(Instant::now()));
        assert!(ch.take_wake(b), "the message is not lost");
    }

    #[test]
    fn a_cancelled_first_waiter_with_an_unused_wake_up_hands_it_on() {
        let ch = channel();
        let a = ch.join(Arc::new(Notify::new()));
        let b = ch.join(Arc::new(Notify::new()));
        let c = ch.join(Arc::new(Notify::new()));
        ch.wake_one(); // a holds a wake-up it never uses
        ch.leave(b, None); // a waiter further back leaving changes nobody's turn
        assert!(!ch.take_wake(c));
        ch.leave(a, None);
        assert!(ch.is_first(c) && ch.take_wake(c), "the turn moved on with the cancelled waiter");
    }
}
