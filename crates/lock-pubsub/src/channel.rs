//! The local waiters of one release channel: one FIFO queue of slots per lock, and the
//! waiters whose order the server keeps.
//!
//! Several locks can share a channel: `x` and `{x}` both publish on
//! `redisson_lock__channel:{x}` (Redisson's naming). Their waiters queue separately, so
//! a waiter on a free lock never waits behind a waiter on a held one. The strict FIFO
//! rules below hold within each lock's queue.
//!
//! A *server-queued* waiter (a `Lock` waiter: its place is in the lock's wait queue on
//! the server, `acquire.lua`) is not in a local line at all: the server's queue orders
//! every client's waiters, and releases hand the lock to its head. Such a waiter is
//! woken by a queue message naming its owner (the lock was handed to it, or it became
//! the head), and by an unlock message only while it is the head or not queued yet
//! (an unlock from a Redisson client, which hands nothing over).
//!
//! A *shared* waiter (a read/write lock's reader) excludes no other waiter of its kind:
//! it is in no line either. Every message on its channel wakes every shared waiter (a
//! write release lets all readers in at once), each keeps its own timers, and none
//! stands in front of anyone: a reader that a waiting writer keeps out (writer
//! preference) must not also keep that writer from its turn in the local line.

use std::collections::{HashMap, VecDeque};
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
    /// How many permits the waiter waits for (a semaphore's; 1 for a lock's waiter):
    /// a count message wakes waiters from the front while their permits fit in it.
    permits: u64,
}

/// A waiter whose place is kept by the server's wait queue.
#[derive(Debug)]
struct QueuedSlot {
    id: u64,
    lock: Arc<str>,
    /// The waiter's owner field: queue messages name owners.
    owner: Arc<str>,
    /// Its place in the server's queue as last reported (0 = head); `None` while not
    /// queued.
    position: Option<u64>,
    woken: bool,
    held_until: Option<Instant>,
    signal: Arc<Notify>,
    /// A semaphore's queued waiter: the permits it waits for (`None`: a lock's waiter).
    /// Its queue messages are grants, and count messages wake it only as the head.
    permits: Option<u64>,
    /// A grant message named it: the permits are its in Redis (a semaphore's waiter).
    granted: bool,
    /// An election's grant named it: the lead is its in Redis, with this term, until
    /// the waiter takes it over ([`ChannelWaiters::take_granted`]).
    lead: Option<Grant>,
}

impl QueuedSlot {
    fn wake(&mut self) {
        self.woken = true;
        self.signal.notify_one();
    }

    /// Applies a queue message that arrived at `at`.
    fn apply(&mut self, message: &QueueMessage<'_>, at: Instant) {
        if self.permits.is_some() {
            self.apply_grant(message, at);
            return;
        }
        if Some(&*self.owner) == message.granted {
            self.position = Some(0);
            if let Some((term, ticket)) = message.lead {
                // An election's one-step grant: the lead, its term and its TTL.
                self.lead = Some(Grant { lease_ms: message.wait_ms, ticket, term: Some(term) });
            }
            self.wake();
        } else if Some(&*self.owner) == message.next {
            self.position = Some(0);
            if message.wait_ms == 0 {
                self.wake();
            } else {
                let wait = std::time::Duration::from_millis(message.wait_ms);
                self.held_until = Some(at.checked_add(wait).unwrap_or(at));
                // Not a turn: it re-plans its wait as the head.
                self.signal.notify_one();
            }
        }
    }

    /// A semaphore's grant message (`sem_serve.lua`): the granted waiter owns its permits
    /// (no call needed); the new head gets a timer; a waiter that took itself for the
    /// head is not (the message names the head), and a turn a count message gave it just
    /// before (the count the same release published before serving) is taken back.
    fn apply_grant(&mut self, message: &QueueMessage<'_>, at: Instant) {
        if Some(&*self.owner) == message.granted {
            self.granted = true;
            self.woken = false;
            self.signal.notify_one();
        } else if Some(&*self.owner) == message.next {
            self.position = Some(0);
            self.woken = false;
            let wait = std::time::Duration::from_millis(message.wait_ms);
            self.held_until = Some(at.checked_add(wait).unwrap_or(at));
            self.signal.notify_one();
        } else if self.position == Some(0) {
            self.position = Some(1);
            self.woken = false;
        }
    }

    /// Whether a count message of `available` permits concerns it (a semaphore's
    /// waiter): only the head (or a waiter not queued yet) that the count covers. A
    /// leasehold release served the queue already; this is for a count nobody served
    /// (a Java release, `add_permits`).
    fn woken_by_count(&self, available: u64) -> bool {
        self.permits.is_some_and(|permits| permits <= available) && self.position.is_none_or(|p| p == 0)
    }

    /// Whether an unlock message concerns it: a Redisson client's unlock hands nothing
    /// over, so the head (or a waiter that is not queued yet) must try.
    fn woken_by_unlock(&self) -> bool {
        self.position.is_none_or(|position| position == 0)
    }
}

/// A waiter that shares what it waits for with the others of its kind (a reader).
#[derive(Debug)]
struct SharedSlot {
    id: u64,
    lock: Arc<str>,
    woken: bool,
    signal: Arc<Notify>,
    /// A reader registered on the server for a grant (see
    /// [`crate::Subscriber::register_reader`]): its owner field, which grant messages
    /// name. `None` for a shared waiter the server does not know.
    owner: Option<Arc<str>>,
    /// The read hold a grant message says the server gave `owner`, until the waiter
    /// takes it over.
    granted: Option<Grant>,
}

impl SharedSlot {
    fn wake(&mut self) {
        self.woken = true;
        self.signal.notify_one();
    }

    /// Applies a grant message: when it names this waiter's owner, the waiter is in.
    fn apply_grants(&mut self, payload: &str) {
        let Some(owner) = self.owner.as_deref() else { return };
        if let Some(grant) = grant_for(payload, owner) {
            self.granted = Some(grant);
            self.wake();
        }
    }

    /// Whether an unlock message (`0`, the last read release) concerns it. A reader
    /// registered for a grant is never let in by one: it is refused only while the lock
    /// is write-locked or a writer waits, and that writer takes the freed lock; its
    /// release (or its giving up) grants the reader, and the reader's own timers cover a
    /// writer that died.
    fn woken_by_unlock(&self) -> bool {
        self.owner.is_none()
    }
}

/// A hold the server granted a waiter in a release, which the waiter takes over
/// without a call: a read hold that a write release granted a registered reader (see
/// [`crate::Subscriber::register_reader`]), or the lead of an election that a resign
/// granted the first live waiting candidate (`election_release.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The hold's lease on the server, in ms (its TTL when granted).
    pub lease_ms: u64,
    /// The ticket of the call whose registration was granted (the owner's turn number
    /// it sent).
    pub ticket: u64,
    /// An election's grant: the term the release issued the new leader. `None` for a
    /// read hold.
    pub term: Option<u64>,
}

/// The grant a grant message (`OWNER:LEASE_MS:TICKET` entries separated by spaces)
/// gives `owner`, if it names it.
pub(crate) fn grant_for(payload: &str, owner: &str) -> Option<Grant> {
    payload.split(' ').find_map(|entry| {
        let mut parts = entry.rsplitn(3, ':');
        let ticket = parts.next()?.parse().ok()?;
        let lease_ms = parts.next()?.parse().ok()?;
        (parts.next()? == owner).then_some(Grant { lease_ms, ticket, term: None })
    })
}

/// A grant message kept for a reader that registers just after it arrived.
#[derive(Debug)]
struct RecentGrant {
    at: Instant,
    payload: Box<str>,
}

/// How many grant messages a channel keeps for late registrations (one per write
/// release that granted readers).
const RECENT_GRANTS: usize = 64;

/// A message on a lock's queue channel (`release.lua`): `"GRANTED NEXT WAIT_MS"`, or an
/// election's grant (`election_release.lua`): `"GRANTED NEXT TTL TERM TICKET"`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct QueueMessage<'a> {
    /// The owner the lock was handed to, if any.
    pub(crate) granted: Option<&'a str>,
    /// The owner now first in the queue, if any.
    pub(crate) next: Option<&'a str>,
    /// When `next` should try unprompted: 0 = now, else after this long (when the lock
    /// expires if nobody releases it).
    pub(crate) wait_ms: u64,
    /// An election's grant: the term issued to `granted` and the ticket of its queued
    /// call that the grant answers (`wait_ms` is then the lead's TTL).
    pub(crate) lead: Option<(u64, u64)>,
}

impl<'a> QueueMessage<'a> {
    /// Parses a queue message; `None` for anything else.
    pub(crate) fn parse(payload: &'a str) -> Option<Self> {
        let mut parts = payload.split(' ');
        let owner = |part: &'a str| (part != "-").then_some(part);
        let granted = owner(parts.next()?);
        let next = owner(parts.next()?);
        let wait_ms = parts.next()?.parse().ok()?;
        let lead = match parts.next() {
            None => None,
            Some(term) => {
                let ticket = parts.next()?.parse().ok()?;
                // An election's grant names the granted owner.
                granted?;
                Some((term.parse().ok()?, ticket))
            }
        };
        parts.next().is_none().then_some(QueueMessage { granted, next, wait_ms, lead })
    }
}

/// A queue message kept for a waiter that registers just after it arrived.
#[derive(Debug)]
struct RecentMessage {
    at: Instant,
    granted: Option<Box<str>>,
    next: Option<Box<str>>,
    wait_ms: u64,
    lead: Option<(u64, u64)>,
}

/// How many queue messages a channel keeps for late registrations. A waiter registers
/// one round trip after its first call was sent; this covers hundreds of hand-overs in
/// that time.
const RECENT_MESSAGES: usize = 256;

#[derive(Debug, Default)]
struct State {
    /// Lock key → its waiters in line. A lock's entry goes when its last waiter leaves.
    locks: HashMap<Arc<str>, VecDeque<Slot>>,
    /// Server-queued waiters, in no particular order.
    queued: Vec<QueuedSlot>,
    /// Shared waiters (readers), in no particular order.
    shared: Vec<SharedSlot>,
    /// The latest grant messages, oldest first (see [`ChannelWaiters::join_shared`]).
    recent_grants: VecDeque<RecentGrant>,
    /// The latest queue messages, oldest first, and when the latest unlock message
    /// came: a server-queued waiter's first call is answered before it registers here,
    /// and what arrived in between must not be lost (see [`ChannelWaiters::join_queued`]).
    recent: VecDeque<RecentMessage>,
    last_unlock: Option<Instant>,
    /// When the latest message of any kind came (a shared waiter's catch-up).
    last_message: Option<Instant>,
    /// When the latest message that wakes every waiter came (a write release, lost
    /// messages): a registered reader's catch-up.
    last_message_all: Option<Instant>,
    subscribed: bool,
    /// Since when the subscription has been confirmed without a break.
    subscribed_since: Option<Instant>,
    next_id: u64,
}

impl State {
    fn slot(&mut self, lock: &str, id: u64) -> Option<&mut Slot> {
        self.locks.get_mut(lock)?.iter_mut().find(|slot| slot.id == id)
    }

    fn queued_slot(&mut self, id: u64) -> Option<&mut QueuedSlot> {
        self.queued.iter_mut().find(|slot| slot.id == id)
    }

    fn shared_slot(&mut self, id: u64) -> Option<&mut SharedSlot> {
        self.shared.iter_mut().find(|slot| slot.id == id)
    }

    fn is_empty(&self) -> bool {
        self.locks.is_empty() && self.queued.is_empty() && self.shared.is_empty()
    }

    /// Whether the subscription was confirmed before `sent_at` without a break.
    fn heard_since(&self, sent_at: Instant) -> bool {
        self.subscribed && self.subscribed_since.is_some_and(|since| since <= sent_at)
    }
}

/// The waiters of one channel, queued per lock, and whether the server confirmed the
/// subscription (one per channel, shared by every lock on it).
#[derive(Debug)]
pub(crate) struct ChannelWaiters {
    pub(crate) name: Arc<str>,
    /// The lock's queue channel, subscribed and unsubscribed together with `name`
    /// (`None` for a channel without one, such as a fair lock waiter's own channel).
    pub(crate) companion: Option<Arc<str>>,
    /// Every message on the channel wakes every waiter (a count-down latch's channel,
    /// where any message may mean "open": see [`crate::Subscriber::register_broadcast`]).
    pub(crate) broadcast: bool,
    /// Whether the channel's messages are counts of available permits (a semaphore's
    /// `redisson_sc:{NAME}`), dispatched to [`ChannelWaiters::wake_permits`].
    pub(crate) counted: bool,
    /// Whether the companion's messages are a read/write lock's grants
    /// ([`ChannelWaiters::grant_message`]) rather than queue messages.
    pub(crate) grants: bool,
    state: Mutex<State>,
    subscribed_signal: Notify,
}

/// What a departing waiter leaves behind.
pub(crate) enum Departure {
    /// Others still wait on the channel (on this lock or another).
    Others,
    /// No waiter is left on the channel: it can be unsubscribed.
    Empty,
}

impl ChannelWaiters {
    pub(crate) fn new(name: Arc<str>, companion: Option<Arc<str>>) -> Self {
        ChannelWaiters {
            name,
            companion,
            broadcast: false,
            counted: false,
            grants: false,
            state: Mutex::new(State::default()),
            subscribed_signal: Notify::new(),
        }
    }

    /// A channel whose every message wakes every waiter (see [`ChannelWaiters::broadcast`]).
    pub(crate) fn new_broadcast(name: Arc<str>) -> Self {
        ChannelWaiters { broadcast: true, ..ChannelWaiters::new(name, None) }
    }

    /// The waiters of a read/write lock's channel, whose companion `grants` carries the
    /// grant messages of write releases.
    pub(crate) fn new_rwlock(name: Arc<str>, grants: Arc<str>) -> Self {
        ChannelWaiters { grants: true, ..ChannelWaiters::new(name, Some(grants)) }
    }

    /// The waiters of a semaphore's channel, whose messages are counts.
    pub(crate) fn new_counted(name: Arc<str>) -> Self {
        ChannelWaiters { counted: true, ..ChannelWaiters::new(name, None) }
    }

    /// The waiters of a semaphore's channel whose waiters queue on the server, with the
    /// grants channel `companion`.
    pub(crate) fn new_counted_queued(name: Arc<str>, companion: Arc<str>) -> Self {
        ChannelWaiters { counted: true, ..ChannelWaiters::new(name, Some(companion)) }
    }

    /// Joins the end of `lock`'s queue. The first in line starts woken: it may try at
    /// once (waiters on other locks of the channel do not count) — unless `sent_at`
    /// says when the caller's last attempt was sent and the channel has heard
    /// everything since, with no unlock message in that time: then nothing can have
    /// freed the lock unheard, and it waits for the next message.
    pub(crate) fn join(&self, lock: &Arc<str>, signal: Arc<Notify>, sent_at: Option<Instant>) -> u64 {
        self.join_for(lock, signal, sent_at, 1)
    }

    /// [`ChannelWaiters::join`] for a waiter of `permits` permits (a semaphore's), which
    /// [`ChannelWaiters::wake_permits`] weighs.
    pub(crate) fn join_for(&self, lock: &Arc<str>, signal: Arc<Notify>, sent_at: Option<Instant>, permits: u64) -> u64 {
        let mut state = self.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let quiet_since = sent_at.is_some_and(|sent_at| {
            state.subscribed
                && state.subscribed_since.is_some_and(|since| since <= sent_at)
                && state.last_unlock.is_none_or(|at| at < sent_at)
        });
        let queue = state.locks.entry(lock.clone()).or_default();
        let woken = queue.is_empty() && !quiet_since;
        queue.push_back(Slot { id, woken, held_until: None, signal, permits: permits.max(1) });
        id
    }

    /// Leaves `lock`'s queue. A departing first waiter hands the turn to the next one,
    /// so the turn is never lost (whether it timed out, was cancelled with an unused
    /// wake-up, or failed). One that leaves because it *acquired* the lock (`held_until`
    /// is the end of its lease) instead gives the next one a timer: that one waits for
    /// the release message, or the timer if the message is lost, rather than spend a
    /// round trip on a lock that was just taken. Other locks' queues are not touched.
    pub(crate) fn leave(&self, lock: &str, id: u64, held_until: Option<Instant>) -> Departure {
        let mut state = self.state.lock();
        let departure = |state: &State| if state.is_empty() { Departure::Empty } else { Departure::Others };
        if let Some(index) = state.queued.iter().position(|slot| slot.id == id) {
            // The server keeps the order: nothing to hand on locally.
            state.queued.swap_remove(index);
            return departure(&state);
        }
        if let Some(index) = state.shared.iter().position(|slot| slot.id == id) {
            // Nobody stands behind a shared waiter: nothing to hand on.
            state.shared.swap_remove(index);
            return departure(&state);
        }
        let Some(queue) = state.locks.get_mut(lock) else { return departure(&state) };
        let Some(index) = queue.iter().position(|slot| slot.id == id) else { return departure(&state) };
        let Some(slot) = queue.remove(index) else { return departure(&state) };
        if queue.is_empty() {
            state.locks.remove(lock);
            return departure(&state);
        }
        if index == 0 {
            match held_until {
                // An unused wake-up means a release came in meanwhile: hand on the turn.
                Some(until) if !slot.woken => {
                    if let Some(next) = queue.front_mut() {
                        next.held_until = Some(until);
                        // Not a turn: just makes it re-plan its wait as the first in line.
                        next.signal.notify_one();
                    }
                }
                _ => wake_first(queue),
            }
        }
        Departure::Others
    }

    /// Joins as a server-queued waiter of `lock` for `owner`, at `position` in the
    /// server's queue (`None`: not queued yet), as the call sent at `sent_at` reported.
    ///
    /// Messages that came after `sent_at` were for a waiter not registered yet: if the
    /// subscription was confirmed all that time, they are replayed from the channel's
    /// recent messages (a hand-over to `owner`, `owner` made the head, an unlock while
    /// it is the head). If it was not, a release may have handed the lock over or freed
    /// it unheard, so the waiter starts with a turn: one call catches up.
    pub(crate) fn join_queued(
        &self,
        lock: &Arc<str>,
        owner: &Arc<str>,
        position: Option<u64>,
        sent_at: Instant,
        signal: Arc<Notify>,
        permits: Option<u64>,
    ) -> u64 {
        let mut state = self.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let mut slot = QueuedSlot {
            id,
            lock: lock.clone(),
            owner: owner.clone(),
            position,
            woken: false,
            held_until: None,
            signal,
            permits,
            granted: false,
            lead: None,
        };
        let heard_everything = state.subscribed && state.subscribed_since.is_some_and(|since| since <= sent_at);
        if heard_everything {
            for message in state.recent.iter().filter(|message| message.at >= sent_at) {
                let message_ref = QueueMessage {
                    granted: message.granted.as_deref(),
                    next: message.next.as_deref(),
                    wait_ms: message.wait_ms,
                    lead: message.lead,
                };
                slot.apply(&message_ref, message.at);
            }
            if !slot.granted
                && (position.is_none()
                    || (slot.position == Some(0) && state.last_unlock.is_some_and(|at| at >= sent_at)))
            {
                slot.woken = true;
            }
        } else {
            // Its client was not listening all the time: a release may have handed it the
            // lock, or freed it, unheard. One call (sent once the subscription is
            // confirmed) catches up. Only waiters that register before their client's
            // subscription is confirmed pay it: the start of a contention period.
            slot.woken = true;
        }
        state.queued.push(slot);
        id
    }

    /// Joins as a shared waiter of `lock` (a reader): in no line, woken by every message
    /// on the channel. It starts with a turn unless `sent_at` says when its last attempt
    /// was sent and the channel has heard everything since, with no message in that
    /// time: then nothing can have let it in unheard.
    ///
    /// With `owner` (a reader registered on the server for a grant), grant messages
    /// naming it let it in ([`ChannelWaiters::take_granted`]); those that came after
    /// `sent_at` are replayed for it when the channel heard everything since (else it
    /// starts with a turn, and its attempt finds the grant on the server). Unlock
    /// messages (`0`) do not wake it (see `SharedSlot::woken_by_unlock`).
    pub(crate) fn join_shared(
        &self,
        lock: &Arc<str>,
        signal: Arc<Notify>,
        sent_at: Option<Instant>,
        owner: Option<&Arc<str>>,
    ) -> u64 {
        let mut state = self.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let heard = sent_at.is_some_and(|sent_at| state.heard_since(sent_at));
        let quiet_since = sent_at.is_some_and(|sent_at| {
            heard
                && if owner.is_some() {
                    // Only a write-release message can let a registered reader in.
                    state.last_message_all.is_none_or(|at| at < sent_at)
                } else {
                    state.last_message.is_none_or(|at| at < sent_at)
                }
        });
        let mut slot =
            SharedSlot { id, lock: lock.clone(), woken: !quiet_since, signal, owner: owner.cloned(), granted: None };
        if let (Some(sent_at), true) = (sent_at, heard) {
            for grant in state.recent_grants.iter().filter(|grant| grant.at >= sent_at) {
                slot.apply_grants(&grant.payload);
            }
        }
        state.shared.push(slot);
        id
    }

    /// A grant message (a write release let registered readers in): every shared waiter
    /// whose owner it names takes its hold over ([`ChannelWaiters::take_granted`]).
    pub(crate) fn grant_message(&self, payload: &str) {
        // Parsed once (a release may name hundreds of readers, and a client may wait
        // with as many): each waiter looks its owner up.
        let grants: HashMap<&str, Grant> = payload
            .split(' ')
            .filter_map(|entry| {
                let mut parts = entry.rsplitn(3, ':');
                let ticket = parts.next()?.parse().ok()?;
                let lease_ms = parts.next()?.parse().ok()?;
                Some((parts.next()?, Grant { lease_ms, ticket, term: None }))
            })
            .collect();
        let mut state = self.state.lock();
        let now = Instant::now();
        for slot in &mut state.shared {
            let Some(grant) = slot.owner.as_deref().and_then(|owner| grants.get(owner)) else { continue };
            slot.granted = Some(*grant);
            slot.wake();
        }
        if state.recent_grants.len() == RECENT_GRANTS {
            state.recent_grants.pop_front();
        }
        state.recent_grants.push_back(RecentGrant { at: now, payload: Box::from(payload) });
    }

    /// Takes the read hold (or an election's lead) a grant message gave this waiter, if
    /// one did.
    pub(crate) fn take_granted(&self, id: u64) -> Option<Grant> {
        let mut state = self.state.lock();
        if let Some(slot) = state.queued_slot(id) {
            return slot.lead.take();
        }
        state.shared_slot(id).and_then(|slot| slot.granted.take())
    }

    /// Records a server-queued waiter's place, as its last call reported it.
    pub(crate) fn set_position(&self, id: u64, position: Option<u64>) {
        if let Some(slot) = self.state.lock().queued_slot(id) {
            slot.position = position;
        }
    }

    /// A queue message: the granted owner's waiters get a turn (to claim the lock), the
    /// new head's become first, with a turn (`wait_ms` 0) or a timer.
    pub(crate) fn queue_message(&self, message: &QueueMessage<'_>) {
        let mut state = self.state.lock();
        let now = Instant::now();
        for slot in &mut state.queued {
            slot.apply(message, now);
        }
        if state.recent.len() == RECENT_MESSAGES {
            state.recent.pop_front();
        }
        state.recent.push_back(RecentMessage {
            at: now,
            granted: message.granted.map(Box::from),
            next: message.next.map(Box::from),
            wait_ms: message.wait_ms,
            lead: message.lead,
        });
    }

    /// Takes the timer a departing acquirer (or a queue message) left this waiter, if
    /// any.
    pub(crate) fn take_held_until(&self, lock: &str, id: u64) -> Option<Instant> {
        let mut state = self.state.lock();
        if let Some(slot) = state.queued_slot(id) {
            return slot.held_until.take();
        }
        state.slot(lock, id).and_then(|slot| slot.held_until.take())
    }

    /// Consumes this waiter's grant (a semaphore's queued waiter that a grant message
    /// named), if it has one.
    pub(crate) fn take_served(&self, id: u64) -> bool {
        self.state.lock().queued_slot(id).is_some_and(|slot| std::mem::take(&mut slot.granted))
    }

    /// Consumes this waiter's wake-up, if it has one.
    pub(crate) fn take_wake(&self, lock: &str, id: u64) -> bool {
        let mut state = self.state.lock();
        if let Some(slot) = state.queued_slot(id) {
            return std::mem::take(&mut slot.woken);
        }
        if let Some(slot) = state.shared_slot(id) {
            return std::mem::take(&mut slot.woken);
        }
        state.slot(lock, id).is_some_and(|slot| std::mem::take(&mut slot.woken))
    }

    /// `true` if this waiter holds a wake-up, without consuming it.
    pub(crate) fn has_wake(&self, lock: &str, id: u64) -> bool {
        let mut state = self.state.lock();
        if let Some(slot) = state.queued_slot(id) {
            return slot.woken;
        }
        if let Some(slot) = state.shared_slot(id) {
            return slot.woken;
        }
        state.slot(lock, id).is_some_and(|slot| slot.woken)
    }

    /// `true` while this waiter is first in its lock's line (for a server-queued one:
    /// the head of the server's queue, as last reported).
    pub(crate) fn is_first(&self, lock: &str, id: u64) -> bool {
        let mut state = self.state.lock();
        if let Some(slot) = state.queued_slot(id) {
            // Not queued yet counts as first: it retries on its timers.
            return slot.position.is_none_or(|position| position == 0);
        }
        if state.shared_slot(id).is_some() {
            // Nobody is ahead of a shared waiter: it keeps its own timers.
            return true;
        }
        state.locks.get(lock).and_then(VecDeque::front).is_some_and(|slot| slot.id == id)
    }

    /// An unlock message: wakes the first waiter in line of **every** lock on the
    /// channel, since the message does not say which lock was released. Only the first
    /// of each is woken, even when it already holds a wake-up: a mutex admits one
    /// holder, and waking anyone further back would let it overtake (a message can
    /// arrive after the next waiter already got in through its turn, so extra messages
    /// are normal). Waking the first waiter of a lock that is still held costs it one
    /// attempt, answered "held", and it keeps its place.
    ///
    /// Server-queued waiters are woken only while first in the server's queue or not
    /// queued yet: a leasehold release hands the lock over and names the new owner on
    /// the queue channel, so only an unlock that handed nothing over (a Redisson
    /// client's) concerns them.
    pub(crate) fn wake_one(&self) {
        let mut state = self.state.lock();
        let now = Instant::now();
        state.last_unlock = Some(now);
        state.last_message = Some(now);
        for queue in state.locks.values_mut() {
            wake_first(queue);
        }
        // A lock's release may let every reader of it in (not one registered for a
        // grant: see `SharedSlot::woken_by_unlock`).
        for slot in state.shared.iter_mut().filter(|slot| slot.woken_by_unlock()) {
            slot.wake();
        }
        for slot in state.queued.iter_mut().filter(|slot| slot.woken_by_unlock()) {
            slot.wake();
        }
    }

    /// A read/write lock's unlock message (`0`, its last read release): as
    /// [`ChannelWaiters::wake_one`], but every waiter of every line gets a turn, not
    /// only the first. The lines hold writers, whom the server orders among every
    /// client's (`leasehold_rwlock_writers:order:{NAME}`: the earliest live waiting
    /// writer takes the free lock, a writer behind it is refused): a client's local
    /// line may be in another order (two fast paths answered in another order than
    /// they were sent), and waking only its first would leave the server's first
    /// asleep until its refresh.
    pub(crate) fn wake_writers(&self) {
        let mut state = self.state.lock();
        let now = Instant::now();
        state.last_unlock = Some(now);
        state.last_message = Some(now);
        for slot in state.locks.values_mut().flatten() {
            slot.woken = true;
            slot.signal.notify_one();
        }
        for slot in state.shared.iter_mut().filter(|slot| slot.woken_by_unlock()) {
            slot.wake();
        }
        for slot in state.queued.iter_mut().filter(|slot| slot.woken_by_unlock()) {
            slot.wake();
        }
    }

    /// A count message on a semaphore's channel (`redisson_sc:{NAME}`: the count of
    /// available permits a release, `trySetPermits` or `addPermits` left): in the line
    /// of every key on the channel (the message does not say whose count it is), wakes
    /// waiters from the front while the permits they wait for, added up, fit in
    /// `available`, and the first in line in any case (its attempt settles whether it
    /// fits: the payload of a Java `RPermitExpirableSemaphore` may be a delta). So a
    /// release of k permits wakes at most k waiters of a line, and never one behind a
    /// first in line that waits for more than is there: FIFO per client, and a large
    /// request is not overtaken by the small ones behind it. `available` 0 (or less)
    /// wakes nobody: nothing was freed.
    pub(crate) fn wake_permits(&self, available: u64) {
        let mut state = self.state.lock();
        state.last_unlock = Some(Instant::now());
        if available == 0 {
            return;
        }
        for slot in state.queued.iter_mut().filter(|slot| slot.woken_by_count(available)) {
            slot.wake();
        }
        for queue in state.locks.values_mut() {
            let mut wanted: u64 = 0;
            for (index, slot) in queue.iter_mut().enumerate() {
                wanted = wanted.saturating_add(slot.permits);
                if index > 0 && wanted > available {
                    break;
                }
                slot.woken = true;
                slot.signal.notify_one();
            }
        }
    }

    /// Wakes every waiter of every lock (a read-unlock message, lost messages, a
    /// reconnect).
    pub(crate) fn wake_all(&self) {
        let mut state = self.state.lock();
        let now = Instant::now();
        state.last_message = Some(now);
        state.last_message_all = Some(now);
        for slot in &mut state.shared {
            slot.wake();
        }
        for slot in state.locks.values_mut().flatten() {
            slot.woken = true;
            slot.signal.notify_one();
        }
        for slot in &mut state.queued {
            slot.wake();
        }
    }

    /// Waiters on the channel, over all its locks.
    pub(crate) fn len(&self) -> usize {
        let state = self.state.lock();
        state.locks.values().map(VecDeque::len).sum::<usize>() + state.queued.len() + state.shared.len()
    }

    /// Waiters on `lock`.
    pub(crate) fn lock_len(&self, lock: &str) -> usize {
        let shared = self.state.lock().shared.iter().filter(|slot| &*slot.lock == lock).count();
        self.line_len(lock) + shared
    }

    /// Waiters on `lock` that a newcomer of its line would queue behind: its local line
    /// and its server-queued waiters, not its shared ones.
    pub(crate) fn line_len(&self, lock: &str) -> usize {
        let state = self.state.lock();
        state.locks.get(lock).map_or(0, VecDeque::len) + state.queued.iter().filter(|slot| &*slot.lock == lock).count()
    }

    /// Server-queued waiters of `owner`.
    pub(crate) fn owner_len(&self, owner: &str) -> usize {
        self.state.lock().queued.iter().filter(|slot| &*slot.owner == owner).count()
    }

    pub(crate) fn set_subscribed(&self, subscribed: bool) {
        let mut state = self.state.lock();
        state.subscribed = subscribed;
        if !subscribed {
            state.subscribed_since = None;
        } else if state.subscribed_since.is_none() {
            state.subscribed_since = Some(Instant::now());
        }
        drop(state);
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

    /// The queue of one lock on a channel, with the one-lock tests' calls.
    struct OneLock {
        channel: ChannelWaiters,
        lock: Arc<str>,
    }

    impl OneLock {
        fn join(&self, signal: Arc<Notify>) -> u64 {
            self.channel.join(&self.lock, signal, None)
        }
        fn leave(&self, id: u64, held_until: Option<Instant>) -> Departure {
            self.channel.leave(&self.lock, id, held_until)
        }
        fn take_wake(&self, id: u64) -> bool {
            self.channel.take_wake(&self.lock, id)
        }
        fn take_held_until(&self, id: u64) -> Option<Instant> {
            self.channel.take_held_until(&self.lock, id)
        }
        fn is_first(&self, id: u64) -> bool {
            self.channel.is_first(&self.lock, id)
        }
        fn wake_one(&self) {
            self.channel.wake_one();
        }
        fn wake_all(&self) {
            self.channel.wake_all();
        }
    }

    fn channel() -> OneLock {
        OneLock { channel: ChannelWaiters::new(Arc::from("c"), None), lock: Arc::from("x") }
    }

    fn join(ch: &ChannelWaiters, lock: &str) -> u64 {
        ch.join(&Arc::from(lock), Arc::new(Notify::new()), None)
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

    #[test]
    fn each_lock_on_a_channel_has_its_own_line() {
        let ch = ChannelWaiters::new(Arc::from("redisson_lock__channel:{x}"), None);
        let x1 = join(&ch, "x");
        let x2 = join(&ch, "x");
        let braced = join(&ch, "{x}");
        assert!(ch.is_first("x", x1) && !ch.is_first("x", x2));
        assert!(ch.is_first("{x}", braced), "a waiter on another lock is not behind x's waiters");
        assert!(ch.take_wake("{x}", braced), "and starts with a turn");
        assert!(ch.take_wake("x", x1) && !ch.take_wake("x", x2));
        assert_eq!((ch.len(), ch.lock_len("x"), ch.lock_len("{x}"), ch.lock_len("y")), (3, 2, 1, 0));
        // A waiter of one lock cannot be reached through another lock's key.
        assert!(!ch.is_first("{x}", x1) && !ch.take_wake("{x}", x2));
    }

    #[test]
    fn unlock_wakes_the_first_of_every_lock_and_nobody_further_back() {
        let ch = ChannelWaiters::new(Arc::from("redisson_lock__channel:{x}"), None);
        let x: Vec<u64> = (0..3).map(|_| join(&ch, "x")).collect();
        let braced: Vec<u64> = (0..2).map(|_| join(&ch, "{x}")).collect();
        assert!(ch.take_wake("x", x[0]) && ch.take_wake("{x}", braced[0]));
        ch.wake_one();
        ch.wake_one(); // redundant messages
        assert!(ch.take_wake("x", x[0]), "x's first in line is woken: the release may have been x's");
        assert!(ch.take_wake("{x}", braced[0]), "so is {{x}}'s: it may have been {{x}}'s");
        assert!(!ch.take_wake("x", x[0]) && !ch.take_wake("{x}", braced[0]), "two messages still make one turn");
        assert!(!ch.take_wake("x", x[1]) && !ch.take_wake("x", x[2]) && !ch.take_wake("{x}", braced[1]));
        ch.wake_all();
        assert!(x.iter().all(|&id| ch.take_wake("x", id)) && braced.iter().all(|&id| ch.take_wake("{x}", id)));
    }

    #[test]
    fn a_count_wakes_at_most_that_many_waiters_from_the_front() {
        let ch = ChannelWaiters::new_counted(Arc::from("redisson_sc:{s}"));
        let key: Arc<str> = Arc::from("s");
        let ids: Vec<u64> = (0..5).map(|_| ch.join_for(&key, Arc::new(Notify::new()), None, 1)).collect();
        assert!(ch.take_wake("s", ids[0]), "the first starts with a turn");
        ch.wake_permits(0);
        assert!(ids.iter().all(|&id| !ch.take_wake("s", id)), "a count of 0 wakes nobody");
        ch.wake_permits(2);
        let woken: Vec<bool> = ids.iter().map(|&id| ch.take_wake("s", id)).collect();
        assert_eq!(woken, [true, true, false, false, false], "2 permits wake the first 2, in line order");
        ch.wake_permits(100);
        assert!(ids.iter().all(|&id| ch.take_wake("s", id)), "more permits than waiters wake them all");
    }

    #[test]
    fn a_large_first_waiter_is_not_overtaken_by_small_ones_behind_it() {
        let ch = ChannelWaiters::new_counted(Arc::from("redisson_sc:{s}"));
        let key: Arc<str> = Arc::from("s");
        let big = ch.join_for(&key, Arc::new(Notify::new()), None, 5);
        let small: Vec<u64> = (0..3).map(|_| ch.join_for(&key, Arc::new(Notify::new()), None, 1)).collect();
        assert!(ch.take_wake("s", big));
        ch.wake_permits(3);
        assert!(ch.take_wake("s", big), "the first in line tries whatever the count");
        assert!(small.iter().all(|&id| !ch.take_wake("s", id)), "nobody behind it overtakes");
        ch.wake_permits(6);
        let woken: Vec<bool> = small.iter().map(|&id| ch.take_wake("s", id)).collect();
        assert_eq!((ch.take_wake("s", big), woken), (true, vec![true, false, false]), "5 + 1 permits fit in 6");
    }

    #[test]
    fn departures_hand_on_within_their_own_lock() {
        let ch = ChannelWaiters::new(Arc::from("redisson_lock__channel:{x}"), None);
        let x1 = join(&ch, "x");
        let x2 = join(&ch, "x");
        let b1 = join(&ch, "{x}");
        let b2 = join(&ch, "{x}");
        assert!(ch.take_wake("x", x1) && ch.take_wake("{x}", b1));
        // x's first acquires: x's next gets a timer, {x}'s line is untouched.
        let until = Instant::now() + std::time::Duration::from_secs(10);
        assert!(matches!(ch.leave("x", x1, Some(until)), Departure::Others));
        assert!(ch.is_first("x", x2) && !ch.take_wake("x", x2));
        assert_eq!(ch.take_held_until("x", x2), Some(until));
        assert!(!ch.take_wake("{x}", b2) && ch.take_held_until("{x}", b2).is_none());
        // {x}'s first times out: {x}'s next gets the turn, x's waiter does not.
        assert!(matches!(ch.leave("{x}", b1, None), Departure::Others));
        assert!(ch.take_wake("{x}", b2) && !ch.take_wake("x", x2));
        // The channel is empty only when every lock's line is.
        assert!(matches!(ch.leave("x", x2, None), Departure::Others));
        assert_eq!(ch.lock_len("x"), 0);
        assert!(matches!(ch.leave("{x}", b2, None), Departure::Empty));
        assert_eq!(ch.len(), 0);
        // A lock that emptied starts a fresh line: its next waiter is first, with a turn.
        let x3 = join(&ch, "x");
        assert!(ch.is_first("x", x3) && ch.take_wake("x", x3));
    }

    #[test]
    fn shared_waiters_are_all_woken_by_any_message_and_stand_before_nobody() {
        let ch = ChannelWaiters::new(Arc::from("c"), None);
        let lock: Arc<str> = Arc::from("x");
        let reader = ch.join_shared(&lock, Arc::new(Notify::new()), None, None);
        let other_reader = ch.join_shared(&lock, Arc::new(Notify::new()), None, None);
        let writer = ch.join(&lock, Arc::new(Notify::new()), None);
        // Readers joined first, yet the writer is first of its line, with the turn.
        assert!(ch.is_first(&lock, writer) && ch.take_wake(&lock, writer));
        assert!(ch.is_first(&lock, reader) && ch.is_first(&lock, other_reader), "each keeps its own timers");
        assert_eq!((ch.line_len(&lock), ch.lock_len(&lock)), (1, 3));
        assert!(ch.take_wake(&lock, reader) && ch.take_wake(&lock, other_reader), "they start with a turn");
        // An unlock message wakes the writer and every reader.
        ch.wake_one();
        assert!(ch.take_wake(&lock, writer));
        assert!(ch.take_wake(&lock, reader) && ch.take_wake(&lock, other_reader));
        // A departing reader hands nothing on.
        assert!(matches!(ch.leave(&lock, reader, Some(Instant::now())), Departure::Others));
        assert!(!ch.has_wake(&lock, writer) && !ch.has_wake(&lock, other_reader));
        ch.wake_all();
        assert!(ch.take_wake(&lock, other_reader));
        assert!(matches!(ch.leave(&lock, other_reader, None), Departure::Others));
        assert!(matches!(ch.leave(&lock, writer, None), Departure::Empty));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_waiter_after_a_quiet_channel_starts_without_a_turn() {
        let ch = ChannelWaiters::new(Arc::from("c"), None);
        let lock: Arc<str> = Arc::from("x");
        ch.set_subscribed(true);
        tokio::time::advance(std::time::Duration::from_millis(5)).await;
        let sent_at = Instant::now();
        let quiet = ch.join_shared(&lock, Arc::new(Notify::new()), Some(sent_at), None);
        assert!(!ch.take_wake(&lock, quiet), "nothing was heard since its attempt was sent");
        ch.wake_one();
        let late = ch.join_shared(&lock, Arc::new(Notify::new()), Some(sent_at), None);
        assert!(ch.take_wake(&lock, late), "a message came after its attempt was sent");
    }

    #[tokio::test(start_paused = true)]
    async fn a_grant_lets_in_only_the_reader_it_names_and_an_unlock_wakes_no_registered_reader() {
        let ch = ChannelWaiters::new_rwlock(Arc::from("c"), Arc::from("g"));
        let lock: Arc<str> = Arc::from("x");
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("u:1"), Arc::from("u:12"));
        ch.set_subscribed(true);
        tokio::time::advance(std::time::Duration::from_millis(5)).await;
        let sent_at = Instant::now();
        let ra = ch.join_shared(&lock, Arc::new(Notify::new()), Some(sent_at), Some(&a));
        let rb = ch.join_shared(&lock, Arc::new(Notify::new()), Some(sent_at), Some(&b));
        let plain = ch.join_shared(&lock, Arc::new(Notify::new()), Some(sent_at), None);
        assert!(!ch.has_wake(&lock, ra) && !ch.has_wake(&lock, rb), "nothing heard since their attempts");
        ch.wake_one();
        assert!(!ch.has_wake(&lock, ra) && !ch.has_wake(&lock, rb), "a read release lets no registered reader in");
        assert!(ch.take_wake(&lock, plain));
        ch.grant_message("u:12:30000:7 v:3:100:2");
        assert_eq!(ch.take_granted(ra), None, "u:1 is not u:12");
        assert_eq!(ch.take_granted(rb), Some(Grant { lease_ms: 30_000, ticket: 7, term: None }));
        assert!(ch.take_wake(&lock, rb) && !ch.has_wake(&lock, ra));
        assert_eq!(ch.take_granted(rb), None, "taken once");
        // A reader that registers after the grant came (its attempt was sent before)
        // gets it replayed; one whose attempt was sent after it does not.
        let late = ch.join_shared(&lock, Arc::new(Notify::new()), Some(sent_at), Some(&b));
        assert_eq!(ch.take_granted(late).map(|g| g.ticket), Some(7));
        tokio::time::advance(std::time::Duration::from_millis(5)).await;
        let later = ch.join_shared(&lock, Arc::new(Notify::new()), Some(Instant::now()), Some(&b));
        assert_eq!(ch.take_granted(later), None);
    }

    /// An election's one-step grant (`election_release.lua`): the granted candidate's
    /// waiter gets the lead (TTL, term, the ticket of its queued call) and a turn; the
    /// next one becomes the head with a timer; the message is replayed for a waiter that
    /// registers late; a plain hand-over grants nothing to take over.
    #[tokio::test(start_paused = true)]
    async fn an_election_grant_names_the_term_and_ticket_of_its_candidate() {
        assert_eq!(
            QueueMessage::parse("a b 900 1700000000000001 42"),
            Some(QueueMessage {
                granted: Some("a"),
                next: Some("b"),
                wait_ms: 900,
                lead: Some((1_700_000_000_000_001, 42))
            })
        );
        assert_eq!(QueueMessage::parse("a - 900").map(|m| m.lead), Some(None));
        for bad in ["- b 900 1 2", "a b 900 1", "a b 900 x 2", "a b 900 1 2 3"] {
            assert_eq!(QueueMessage::parse(bad), None, "{bad}");
        }
        let ch = ChannelWaiters::new(Arc::from("c"), Some(Arc::from("q")));
        let lock: Arc<str> = Arc::from("leasehold_election:{e}");
        ch.set_subscribed(true);
        let sent_at = Instant::now();
        let join = |owner: &str, position: u64| {
            ch.join_queued(&lock, &Arc::from(owner), Some(position), sent_at, Arc::new(Notify::new()), None)
        };
        let (a, b) = (join("a", 0), join("b", 1));
        ch.queue_message(&QueueMessage::parse("a b 900 77 5").expect("a grant"));
        assert_eq!(ch.take_granted(a), Some(Grant { lease_ms: 900, ticket: 5, term: Some(77) }));
        assert_eq!(ch.take_granted(a), None, "taken once");
        assert!(ch.take_wake(&lock, a), "a turn too: if the grant is not the wait's, it calls");
        assert_eq!(ch.take_granted(b), None);
        assert!(ch.is_first(&lock, b) && ch.take_held_until(&lock, b).is_some(), "b heads, with a timer");
        let late = join("a", 0);
        assert_eq!(ch.take_granted(late).map(|g| g.term), Some(Some(77)), "replayed");
        ch.queue_message(&QueueMessage::parse("b - 900").expect("a plain hand-over"));
        assert_eq!(ch.take_granted(b), None, "claimed with a call");
        assert!(ch.take_wake(&lock, b));
    }

    /// A semaphore's queued waiters (issue 29 item 4): a count wakes only the head it
    /// covers; the grant message that follows gives the named waiter its permits (no
    /// turn needed), makes NEXT the head with a timer, and takes back the turn the count
    /// gave a waiter that is no longer the head.
    #[test]
    fn a_grant_names_its_waiter_and_a_count_wakes_only_the_head_it_covers() {
        let ch = ChannelWaiters::new_counted_queued(Arc::from("redisson_sc:{s}"), Arc::from("grants"));
        let lock: Arc<str> = Arc::from("s");
        ch.set_subscribed(true);
        let sent_at = Instant::now();
        let join = |owner: &str, permits: u64, position: u64| {
            ch.join_queued(&lock, &Arc::from(owner), Some(position), sent_at, Arc::new(Notify::new()), Some(permits))
        };
        let (head, second, big) = (join("a", 1, 0), join("b", 1, 1), join("c", 5, 2));
        assert!(!ch.take_wake(&lock, head) && !ch.take_wake(&lock, second), "heard everything: no catch-up");
        ch.wake_permits(1);
        assert!(ch.has_wake(&lock, head), "the head is covered by 1");
        assert!(!ch.has_wake(&lock, second) && !ch.has_wake(&lock, big), "nobody behind the head");
        // The release that published that count granted the head; b is the head now.
        ch.queue_message(&QueueMessage { granted: Some("a"), next: Some("b"), wait_ms: 1000, lead: None });
        assert!(ch.take_served(head), "a has its permits");
        assert!(!ch.take_wake(&lock, head), "no call: the count's turn is taken back");
        assert!(!ch.take_served(head), "consumed");
        assert!(ch.is_first(&lock, second) && ch.take_held_until(&lock, second).is_some(), "b heads, with a timer");
        assert!(!ch.take_wake(&lock, second), "a timer, not a turn");
        ch.wake_permits(4);
        assert!(ch.take_wake(&lock, second), "b is covered by 4");
        // A grant to someone else with another head: b is not the head any more.
        ch.wake_permits(1);
        ch.queue_message(&QueueMessage { granted: Some("z"), next: Some("c"), wait_ms: 1000, lead: None });
        assert!(!ch.take_wake(&lock, second) && !ch.is_first(&lock, second), "b's turn taken back");
        ch.wake_permits(4);
        assert!(!ch.take_wake(&lock, big), "c heads but waits for 5");
        ch.wake_permits(5);
        assert!(ch.take_wake(&lock, big), "5 cover it");
    }
}
