//! The one subscriber connection of a client, and the task that owns it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::clients::{Client, SubscriberClient};
use fred::prelude::{ClientLike, ClusterInterface, EventInterface, PubsubInterface};
use fred::types::cluster::ClusterRouting;
use fred::types::config::Server;
use fred::types::{ClusterStateChange, Message, Value};
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tokio::time::Instant;

use crate::channel::{ChannelWaiters, Departure, QueueMessage};
use crate::waiter::{Departures, Waiter};

/// How long a channel stays subscribed after its last waiter left.
pub const LINGER: Duration = Duration::from_secs(1);

/// With sharded pub/sub, how often the subscriber task reads the slot map (one
/// `CLUSTER SLOTS` on the command client) while it has shard channels subscribed, to
/// find channels whose slot moved: the server drops a moved slot's subscriptions with a
/// `sunsubscribe` push that fred 10.1 does not pass on.
pub use lock_core::topology::TOPOLOGY_CHECK;

/// How the subscriber subscribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PubsubMode {
    /// `SUBSCRIBE`/`UNSUBSCRIBE` (and the scripts `PUBLISH`): a standalone server, or a
    /// cluster without sharded pub/sub, where the subscription is on one node and every
    /// `PUBLISH` is broadcast to all of them.
    #[default]
    Classic,
    /// `SSUBSCRIBE`/`SUNSUBSCRIBE` (and the scripts `SPUBLISH`), in a cluster on Redis
    /// 7.0 or later: each channel is subscribed on the primary of its slot, which the
    /// task follows when the slot moves.
    Sharded,
}

/// A semaphore waiter's place in its server queue, for
/// [`Subscriber::register_queued_permits`].
#[derive(Debug, Clone)]
pub struct QueuedPermits {
    /// The waiting operation (its queue member): grant messages name it.
    pub owner: Arc<str>,
    /// The permits it waits for.
    pub permits: u64,
    /// Its place as its last call answered (0 = the head; `None`: not queued yet).
    pub position: Option<u64>,
    /// When that call was sent.
    pub sent_at: Instant,
}

/// Shares one subscriber connection among every waiter of a client.
///
/// Cheap to clone. The background task holds only a `Weak` reference to the waiter
/// registry and ends (sending `QUIT`) when the last `Subscriber` clone is dropped.
#[derive(Debug, Clone)]
pub struct Subscriber {
    pub(crate) shared: Arc<Shared>,
}

/// The subscriber's counters since it started: what `leasehold::ClientStats::subscriber`
/// shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriberStats {
    /// `SUBSCRIBE` commands sent (one may name many channels).
    pub subscribe_calls: u64,
    /// `UNSUBSCRIBE` commands sent.
    pub unsubscribe_calls: u64,
    /// Release messages received.
    pub messages: u64,
    /// Times every waiter was woken because messages may have been lost (lag, reconnect).
    pub wake_alls: u64,
    /// Sharded pub/sub: channels found on a node that no longer serves their slot (a
    /// slot migration, a failover) and subscribed again on the new one.
    pub moved_channels: u64,
}

#[derive(Debug)]
pub(crate) struct Shared {
    registry: Mutex<Registry>,
    /// Channels the server has confirmed. Written only by the task (which alone sends
    /// (un)subscribe commands); read by diagnostics.
    active: Mutex<HashSet<Arc<str>>>,
    reconcile: Arc<Notify>,
    stats: Stats,
    client: SubscriberClient,
    mode: PubsubMode,
    /// Dropped with `Shared`: tells the task to stop.
    _shutdown: watch::Sender<()>,
    /// `true` once the task ended (after its `QUIT`); a dropped sender (the task dropped
    /// by a runtime shutting down) ends a wait too.
    ended: watch::Receiver<bool>,
}

/// The channels waiters want, and which of them changed since the task last looked.
#[derive(Debug, Default)]
struct Registry {
    /// *Desired*: channel → its waiters, present while at least one waiter is queued on
    /// it (on any of its locks).
    channels: HashMap<Arc<str>, Arc<ChannelWaiters>>,
    /// Queue channel → the entry of the release channel it belongs to (subscribed with
    /// it; see [`Subscriber::register_queued`]).
    companions: HashMap<Arc<str>, Arc<ChannelWaiters>>,
    /// Channels with no waiter left, and since when: they stay subscribed for
    /// [`LINGER`], so that the next wait on them (the same owner waiting again, the next
    /// burst of contention) finds the subscription confirmed and costs no
    /// `SUBSCRIBE`/`PING`/`UNSUBSCRIBE`.
    idle: HashMap<Arc<str>, Instant>,
    /// Channels whose entry appeared or went since the task last took this set: the
    /// only ones a reconcile has to look at, so that its cost (and, since it runs on
    /// the task that dispatches messages, the cost of a message) does not grow with the
    /// number of channels waited on.
    dirty: HashSet<Arc<str>>,
}

#[derive(Debug, Default)]
struct Stats {
    subscribe_calls: AtomicU64,
    unsubscribe_calls: AtomicU64,
    messages: AtomicU64,
    wake_alls: AtomicU64,
    moved_channels: AtomicU64,
}

impl Subscriber {
    /// Starts the subscriber task on the current tokio runtime. `client` should be
    /// connected (or connecting) with a reconnect policy; `command_timeout` bounds each
    /// (un)subscribe call.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(client: SubscriberClient, command_timeout: Duration) -> Self {
        Self::start_with(client, command_timeout, PubsubMode::Classic, None)
    }

    /// [`Subscriber::start`] in `mode`. With [`PubsubMode::Sharded`] (`client` must be a
    /// cluster client) the task also follows slot moves, watching the subscriber's own
    /// cluster change events and, through `topology` (the command client, connected to
    /// the same cluster), that client's cluster change events (it meets a `MOVED`
    /// first) and its `CLUSTER SLOTS`, read every [`TOPOLOGY_CHECK`] while shard
    /// channels are subscribed.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start_with(
        client: SubscriberClient,
        command_timeout: Duration,
        mode: PubsubMode,
        topology: Option<Client>,
    ) -> Self {
        Self::start_named(client, command_timeout, mode, topology, None)
    }

    /// [`Subscriber::start_with`], naming the subscriber connection `name` (`CLIENT
    /// SETNAME`, [`lock_core::who::set_connection_name`]): every connection as the task
    /// starts, and each reconnected one before the task subscribes again on it (a
    /// connection subscribed with RESP2 refuses `CLIENT SETNAME`, so the task that
    /// subscribes names first). A refused or timed-out name is logged at debug and
    /// changes nothing else.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start_named(
        client: SubscriberClient,
        command_timeout: Duration,
        mode: PubsubMode,
        topology: Option<Client>,
        name: Option<String>,
    ) -> Self {
        let (shutdown_tx, shutdown_rx) = watch::channel(());
        let (ended_tx, ended_rx) = watch::channel(false);
        let reconcile = Arc::new(Notify::new());
        let messages = client.message_rx();
        let reconnects = client.reconnect_rx();
        let sharded = mode == PubsubMode::Sharded;
        let own_changes = sharded.then(|| client.cluster_change_rx());
        let topology = topology.filter(|_| sharded);
        let command_changes = topology.as_ref().map(EventInterface::cluster_change_rx);
        let shared = Arc::new(Shared {
            registry: Mutex::new(Registry::default()),
            active: Mutex::new(HashSet::new()),
            reconcile: reconcile.clone(),
            stats: Stats::default(),
            client: client.clone(),
            mode,
            _shutdown: shutdown_tx,
            ended: ended_rx,
        });
        let task = Task {
            shared: Arc::downgrade(&shared),
            client,
            command_timeout,
            sharded,
            retry_at: None,
            retry_delay: Duration::from_millis(50),
            wake_after_subscribe: false,
            failed: HashSet::new(),
            companion_of: HashMap::new(),
            linger_at: None,
            nodes: HashMap::new(),
            moved: HashSet::new(),
            topology_at: None,
            topology,
            ended: ended_tx,
            name,
        };
        let changes = Changes { own: own_changes, command: command_changes };
        tokio::spawn(task.run(messages, reconnects, changes, shutdown_rx, reconcile));
        Subscriber { shared }
    }

    /// Stops the subscriber task, as dropping the last handle would, after waking every
    /// waiter once (so that each looks at the lock again instead of waiting for a
    /// message that will not come). The task quits the subscriber connection on its way
    /// out (`QUIT`, within the command timeout): its owner must not quit it too (fred
    /// warns at a second `QUIT`); [`Subscriber::ended`] waits for it.
    pub fn stop(&self) {
        self.shared.wake_all();
        self.shared._shutdown.send_replace(());
    }

    /// Resolves when the subscriber task has ended, its connection quit (after
    /// [`Subscriber::stop`], or when the connection closed under it), or was dropped by
    /// its runtime shutting down.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn ended(&self) {
        let mut ended = self.shared.ended.clone();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// How this subscriber subscribes.
    pub fn mode(&self) -> PubsubMode {
        self.shared.mode
    }

    /// Joins the queue of the lock `lock_key` on its release channel `channel`
    /// (register-then-check; see the crate docs). Each lock on a channel has its own
    /// FIFO queue; the channel has one subscription, shared by all of them, requested
    /// now (for the first waiter on the channel) and confirmed asynchronously.
    pub fn register_lock(&self, channel: &Arc<str>, lock_key: &Arc<str>) -> Waiter {
        self.join(channel, None, |waiters, signal| waiters.join(lock_key, signal, None), lock_key)
    }

    /// Joins the line of `key` on `channel`, a channel whose every message wakes every
    /// local waiter on it (a count-down latch's: its `0` opens the latch for all of
    /// them, and its `1` may be a delete, which opens it too). The line keeps the other
    /// rules of [`Subscriber::register_lock`] (the first starts with a turn; a waiter
    /// that leaves hands its turn on). Every registration on one channel must be made
    /// this way.
    pub fn register_broadcast(&self, channel: &Arc<str>, key: &Arc<str>) -> Waiter {
        self.join_with(
            channel,
            || ChannelWaiters::new_broadcast(channel.clone()),
            |waiters, signal| waiters.join(key, signal, None),
            key,
        )
    }

    /// Gives every local waiter on `channel` a turn now, as a message would (a latch
    /// waiter that found the latch open without a message tells the others).
    pub fn wake_channel(&self, channel: &str) {
        let waiters = self.shared.registry.lock().channels.get(channel).cloned();
        if let Some(waiters) = waiters {
            waiters.wake_all();
        }
    }

    /// Joins the line of the semaphore `key` on its channel `channel`
    /// (`redisson_sc:{NAME}`, whose messages are counts of available permits) as a
    /// waiter for `permits` permits: a message of count k wakes waiters from the front
    /// of the line while their permits, added up, fit in k (the first in line in any
    /// case), so a release of k permits wakes at most k local waiters, in line order.
    /// `sent_at`, as in [`Subscriber::register_lock_after`]: the last attempt's send
    /// time when it was answered "not enough permits".
    ///
    /// A channel's first registration decides how its messages are read: register a
    /// semaphore's channel only through this method.
    pub fn register_permits(
        &self,
        channel: &Arc<str>,
        key: &Arc<str>,
        permits: u64,
        sent_at: Option<Instant>,
    ) -> Waiter {
        self.join_with(
            channel,
            || ChannelWaiters::new_counted(channel.clone()),
            |waiters, signal| waiters.join_for(key, signal, sent_at, permits),
            key,
        )
    }

    /// [`Subscriber::register_lock`] for a caller whose last attempt, sent at
    /// `sent_at`, was answered "held": if the channel's subscription was confirmed
    /// before then and no unlock message came since, the first in line does not start
    /// with a turn (nothing can have freed the lock unheard); it waits for the message.
    /// For a waiter alone on its own channel (a fair lock's), this saves the attempt a
    /// new subscription needs.
    pub fn register_lock_after(&self, channel: &Arc<str>, lock_key: &Arc<str>, sent_at: Instant) -> Waiter {
        self.join(channel, None, |waiters, signal| waiters.join(lock_key, signal, Some(sent_at)), lock_key)
    }

    /// Joins as a *shared* waiter of `lock_key` on `channel`: one that excludes no other
    /// waiter of its kind (a read/write lock's reader). It is in no line: every message
    /// on the channel wakes every shared waiter, each keeps its own timers
    /// ([`Waiter::is_first`] is always `true`), and it stands in front of nobody. With
    /// `sent_at` (its last attempt, answered "held", was sent then) it starts without a
    /// turn if the channel has heard everything since and no message came.
    pub fn register_shared(&self, channel: &Arc<str>, lock_key: &Arc<str>, sent_at: Option<Instant>) -> Waiter {
        self.join(channel, None, |waiters, signal| waiters.join_shared(lock_key, signal, sent_at, None), lock_key)
    }

    /// Joins as a read/write lock's reader that the server registered for a grant
    /// (`owner` in `leasehold_rwlock_readers:{NAME}`): a shared waiter (as
    /// [`Subscriber::register_shared`]) on the lock's channel `channel`, whose grant
    /// channel `grants` is subscribed with it. A grant message on `grants` naming
    /// `owner` gives it a turn and the granted lease ([`Waiter::take_granted`]): the
    /// write release took the hold for it, and it takes the hold over without a
    /// script. Grant messages that came after `sent_at` (its last attempt's send time)
    /// are replayed for it when the channel heard everything since. An unlock message
    /// (`0`) does not wake it; a write-release message (`1`), lost messages and its own
    /// timers do.
    ///
    /// Every registration on a read/write lock's channel names its grant channel: the
    /// writers' through [`Subscriber::register_rw_writer`].
    pub fn register_reader(
        &self,
        channel: &Arc<str>,
        grants: &Arc<str>,
        lock_key: &Arc<str>,
        owner: &Arc<str>,
        sent_at: Option<Instant>,
    ) -> Waiter {
        self.join_with(
            channel,
            || ChannelWaiters::new_rwlock(channel.clone(), grants.clone()),
            |waiters, signal| waiters.join_shared(lock_key, signal, sent_at, Some(owner)),
            lock_key,
        )
    }

    /// Joins the local line of a read/write lock's writer (as
    /// [`Subscriber::register_lock`], or [`Subscriber::register_lock_after`] with
    /// `sent_at`) on the lock's channel, whose grant channel `grants` is subscribed with
    /// it (see [`Subscriber::register_reader`]).
    pub fn register_rw_writer(
        &self,
        channel: &Arc<str>,
        grants: &Arc<str>,
        lock_key: &Arc<str>,
        sent_at: Option<Instant>,
    ) -> Waiter {
        self.join_with(
            channel,
            || ChannelWaiters::new_rwlock(channel.clone(), grants.clone()),
            |waiters, signal| waiters.join(lock_key, signal, sent_at),
            lock_key,
        )
    }

    /// Joins as a waiter whose place the server's wait queue keeps (a `Lock` waiter:
    /// `acquire.lua` queued `owner` at `position`, or `None` when not queued yet, in
    /// reply to the call sent at `sent_at`: queue messages received since then are
    /// replayed for it, or, if the subscription was not confirmed all that time, it
    /// starts with a turn to catch up), on
    /// the lock's release channel `channel` and its queue channel `queue_channel`, which
    /// is subscribed with it. Such a waiter is not in a local line: it gets a turn when a
    /// queue message hands the lock to `owner` or makes it the head (or, with a timer,
    /// the head of a held lock), and when an unlock message arrives while it is the
    /// head or not queued (a Redisson client's unlock hands nothing over). Report its
    /// place after every call with [`Waiter::set_position`].
    ///
    /// Every registration on one release channel must name the same queue channel (or,
    /// through [`Subscriber::register_lock`], none, for a channel that has no queue).
    pub fn register_queued(
        &self,
        channel: &Arc<str>,
        queue_channel: &Arc<str>,
        lock_key: &Arc<str>,
        owner: &Arc<str>,
        position: Option<u64>,
        sent_at: Instant,
    ) -> Waiter {
        self.join(
            channel,
            Some(queue_channel),
            |waiters, signal| waiters.join_queued(lock_key, owner, position, sent_at, signal, None),
            lock_key,
        )
    }

    /// Joins as a semaphore's waiter whose place the server's wait queue keeps
    /// (`sem_try_acquire.lua` queued the operation `place.owner` at `place.position`, in
    /// reply to the call sent at `place.sent_at`), waiting for `place.permits` permits,
    /// on the count channel `channel` (`redisson_sc:{NAME}`) and the grants channel
    /// `grants_channel`, which is subscribed with it. A grant message naming the owner
    /// gives it its permits ([`Waiter::take_served`]: no call needed); a count message
    /// gives it a turn only while it heads the queue and the count covers it (a count no
    /// leasehold release served: a Java release, `addPermits`); otherwise as
    /// [`Subscriber::register_queued`]. Register a semaphore's channel only this way
    /// (its first registration decides how messages are read).
    pub fn register_queued_permits(
        &self,
        channel: &Arc<str>,
        grants_channel: &Arc<str>,
        key: &Arc<str>,
        place: &QueuedPermits,
    ) -> Waiter {
        self.join_with(
            channel,
            || ChannelWaiters::new_counted_queued(channel.clone(), grants_channel.clone()),
            |waiters, signal| {
                waiters.join_queued(key, &place.owner, place.position, place.sent_at, signal, Some(place.permits))
            },
            key,
        )
    }

    /// Registers on `channel` (creating its entry, with `companion`, for the first
    /// waiter) and joins it with `join`.
    fn join(
        &self,
        channel: &Arc<str>,
        companion: Option<&Arc<str>>,
        join: impl FnOnce(&ChannelWaiters, Arc<Notify>) -> u64,
        lock_key: &Arc<str>,
    ) -> Waiter {
        self.join_with(channel, || ChannelWaiters::new(channel.clone(), companion.cloned()), join, lock_key)
    }

    /// Registers on `channel` (creating its entry with `make` for the first waiter) and
    /// joins it with `join`.
    fn join_with(
        &self,
        channel: &Arc<str>,
        make: impl FnOnce() -> ChannelWaiters,
        join: impl FnOnce(&ChannelWaiters, Arc<Notify>) -> u64,
        lock_key: &Arc<str>,
    ) -> Waiter {
        let signal = Arc::new(Notify::new());
        let (waiters, id, first_on_channel) = {
            let mut registry = self.shared.registry.lock();
            let registry = &mut *registry;
            let mut first_on_channel = false;
            let waiters = registry
                .channels
                .entry(channel.clone())
                .or_insert_with(|| {
                    first_on_channel = true;
                    Arc::new(make())
                })
                .clone();
            if first_on_channel {
                if let Some(companion) = &waiters.companion {
                    registry.companions.insert(companion.clone(), waiters.clone());
                }
                // Even when the channel is still subscribed for an earlier entry, only
                // the task may confirm it: an UNSUBSCRIBE for it may be in flight now.
                registry.dirty.insert(channel.clone());
            }
            let id = join(&waiters, signal.clone());
            (waiters, id, first_on_channel)
        };
        if first_on_channel {
            self.shared.reconcile.notify_one();
        }
        Waiter::new(self.shared.clone(), waiters, lock_key.clone(), id, signal)
    }

    /// Joins a queue of `channel` for a caller with one lock per channel: the same as
    /// [`Subscriber::register_lock`] with the channel name as the lock key (no real
    /// lock key on a channel equals the channel's own name).
    pub fn register(&self, channel: &Arc<str>) -> Waiter {
        self.register_lock(channel, channel)
    }

    /// How many local waiters wait on `channel` now, over all its locks.
    pub fn waiters(&self, channel: &str) -> usize {
        self.shared.registry.lock().channels.get(channel).map_or(0, |w| w.len())
    }

    /// How many local waiters a newcomer to the line of `lock_key` on `channel` would
    /// queue behind now: its local line and its server-queued waiters, not its shared
    /// waiters ([`Subscriber::register_shared`]), who stand in front of nobody.
    pub fn line_waiters(&self, channel: &str, lock_key: &str) -> usize {
        self.shared.registry.lock().channels.get(channel).map_or(0, |w| w.line_len(lock_key))
    }

    /// How many local waiters wait for the lock `lock_key` on `channel` now (its line,
    /// its server-queued and its shared waiters).
    pub fn lock_waiters(&self, channel: &str, lock_key: &str) -> usize {
        self.shared.registry.lock().channels.get(channel).map_or(0, |w| w.lock_len(lock_key))
    }

    /// How many server-queued waiters of `owner` wait on `channel` now (see
    /// [`Subscriber::register_queued`]).
    pub fn owner_waiters(&self, channel: &str, owner: &str) -> usize {
        self.shared.registry.lock().channels.get(channel).map_or(0, |w| w.owner_len(owner))
    }

    /// The channels the server has confirmed, as the subscriber task last saw them
    /// (queue channels included).
    pub fn active_channels(&self) -> Vec<String> {
        let mut channels: Vec<String> = self.shared.active.lock().iter().map(|c| c.to_string()).collect();
        channels.sort();
        channels
    }

    /// Counters since start.
    pub fn stats(&self) -> SubscriberStats {
        let s = &self.shared.stats;
        SubscriberStats {
            subscribe_calls: s.subscribe_calls.load(Ordering::Relaxed),
            unsubscribe_calls: s.unsubscribe_calls.load(Ordering::Relaxed),
            messages: s.messages.load(Ordering::Relaxed),
            wake_alls: s.wake_alls.load(Ordering::Relaxed),
            moved_channels: s.moved_channels.load(Ordering::Relaxed),
        }
    }

    /// The fred subscriber client (for fault-injection tests: its connection id, …).
    pub fn client(&self) -> &SubscriberClient {
        &self.shared.client
    }
}

impl Departures for Shared {
    fn leave(&self, waiters: &Arc<ChannelWaiters>, lock: &str, id: u64, held_until: Option<Instant>) {
        let mut registry = self.registry.lock();
        if let Departure::Empty = waiters.leave(lock, id, held_until) {
            // Only if the entry is still this one (a new entry may have replaced it).
            if registry.channels.get(&waiters.name).is_some_and(|current| Arc::ptr_eq(current, waiters)) {
                // It lingers, subscribed: the task unsubscribes it after LINGER unless a
                // waiter came back.
                registry.idle.insert(waiters.name.clone(), Instant::now());
                drop(registry);
                self.reconcile.notify_one();
            }
        }
    }
}

impl Shared {
    /// Removes the entries of channels idle for [`LINGER`] (marking them dirty, so the
    /// reconcile unsubscribes them); returns when the next idle one is due.
    fn expire_idle(&self) -> Option<Instant> {
        let mut registry = self.registry.lock();
        let registry = &mut *registry;
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut expired = Vec::new();
        registry.idle.retain(|channel, since| {
            let Some(waiters) = registry.channels.get(channel) else { return false };
            if waiters.len() > 0 {
                return false; // in use again
            }
            let due = since.checked_add(LINGER).unwrap_or(now);
            if due <= now {
                expired.push(channel.clone());
                return false;
            }
            next = Some(next.map_or(due, |n| n.min(due)));
            true
        });
        for channel in expired {
            if let Some(waiters) = registry.channels.remove(&channel) {
                if let Some(companion) = &waiters.companion {
                    registry.companions.remove(companion);
                }
            }
            registry.dirty.insert(channel);
        }
        next
    }

    fn wake_all(&self) {
        self.stats.wake_alls.fetch_add(1, Ordering::Relaxed);
        let channels: Vec<Arc<ChannelWaiters>> = self.registry.lock().channels.values().cloned().collect();
        for waiters in channels {
            waiters.wake_all();
        }
    }

    fn dispatch(&self, message: &Message) {
        self.stats.messages.fetch_add(1, Ordering::Relaxed);
        let (waiters, queue) = {
            let registry = self.registry.lock();
            match registry.channels.get(&*message.channel) {
                Some(waiters) => (waiters.clone(), None),
                None => match registry.companions.get(&*message.channel) {
                    Some(waiters) => (waiters.clone(), message.value.as_str()),
                    None => return,
                },
            }
        };
        if let Some(payload) = queue {
            if waiters.grants {
                // A read/write lock's grants: the readers named are in.
                waiters.grant_message(&payload);
                return;
            }
            match QueueMessage::parse(&payload) {
                Some(queue_message) => waiters.queue_message(&queue_message),
                // Not ours to read: waking everyone costs at most a retry each.
                None => waiters.wake_all(),
            }
            return;
        }
        if waiters.broadcast {
            // A latch's channel: `0` opens it for every waiter, and `1` may be a delete.
            waiters.wake_all();
            return;
        }
        if waiters.counted {
            // A semaphore's count of available permits: wake as many as it covers. A
            // payload that is not a number wakes everyone (a retry each, at worst).
            match message.value.as_str().and_then(|payload| payload.trim().parse::<i64>().ok()) {
                Some(available) => waiters.wake_permits(u64::try_from(available).unwrap_or(0)),
                None => waiters.wake_all(),
            }
            return;
        }
        let unlock = message.value.as_str().is_some_and(|payload| payload == lock_core::names::UNLOCK_MESSAGE);
        if unlock && waiters.grants {
            // A read/write lock's last read release: the server orders its waiting
            // writers (the earliest live one takes the free lock), and a client's local
            // line may not be in that order, so every writer of every line tries.
            waiters.wake_writers();
        } else if unlock {
            // The message does not say which of the channel's locks was released: the
            // first waiter of each gets a turn (and every shared waiter: readers share).
            waiters.wake_one();
        } else {
            // Read-unlock ("1") frees the lock for every reader; anything unknown is
            // treated the same way, since waking too many only costs a retry.
            waiters.wake_all();
        }
    }

    /// The current entry of `channel`, if any waiter wants it.
    fn desired(&self, channel: &str) -> Option<Arc<ChannelWaiters>> {
        self.registry.lock().channels.get(channel).cloned()
    }
}

/// The task that owns the subscriber connection: it alone sends (un)subscribe commands.
struct Task {
    shared: Weak<Shared>,
    client: SubscriberClient,
    command_timeout: Duration,
    /// [`PubsubMode::Sharded`]: `SSUBSCRIBE`/`SUNSUBSCRIBE`, and slot moves followed.
    sharded: bool,
    retry_at: Option<Instant>,
    retry_delay: Duration,
    /// Set by a reconnect: messages may have been lost, so wake everyone once the
    /// resubscribe is confirmed.
    wake_after_subscribe: bool,
    /// Channels whose last (un)subscribe failed or timed out, looked at again on the
    /// next retry (or reconnect). The server may or may not have run a command that
    /// timed out, so such a channel counts as possibly subscribed: if no waiter wants
    /// it any more, it is unsubscribed even though it was never confirmed.
    failed: HashSet<Arc<str>>,
    /// Release channel → the queue channel subscribed with it, kept until both are
    /// unsubscribed (the entry that named the companion may be gone by then).
    companion_of: HashMap<Arc<str>, Arc<str>>,
    /// When the next idle channel's linger ends.
    linger_at: Option<Instant>,
    /// Sharded: each subscribed release channel (its companion shares its slot) → the
    /// node that served its slot when its `SSUBSCRIBE` was answered, per the
    /// subscriber's slot map (`None` if the map had no owner).
    nodes: HashMap<Arc<str>, Option<Server>>,
    /// Sharded: channels resubscribed because their slot moved: their waiters are woken
    /// once the new `SSUBSCRIBE` is answered (messages may have been lost meanwhile).
    moved: HashSet<Arc<str>>,
    /// Sharded: when the slot map is next read (while shard channels are subscribed).
    topology_at: Option<Instant>,
    /// Sharded: the command client, whose slot map and `CLUSTER SLOTS` say where slots
    /// are (the subscriber's connections are in subscribed mode).
    topology: Option<Client>,
    /// Set once the task ended ([`Subscriber::ended`]).
    ended: watch::Sender<bool>,
    /// The connection name ([`Subscriber::start_named`]).
    name: Option<String>,
}

/// The cluster change streams a sharded subscriber watches.
struct Changes {
    /// The subscriber client's own (it syncs its slot map after a `MOVED` or a
    /// reconnect, and on the task's periodic refresh).
    own: Option<broadcast::Receiver<Vec<ClusterStateChange>>>,
    /// The command client's: it meets a `MOVED` first (a release, a renewal).
    command: Option<broadcast::Receiver<Vec<ClusterStateChange>>>,
}

impl Task {
    /// Names the connection to `server` (every connection when `None`), when the
    /// subscriber has a name; a failure is logged at debug, never fatal.
    async fn name_connection(&self, server: Option<&Server>) {
        let Some(name) = &self.name else { return };
        if let Err(error) = lock_core::who::set_connection_name(&self.client, server, name, self.command_timeout).await
        {
            tracing::debug!(target: crate::TARGET, %error, ?server, "CLIENT SETNAME of the subscriber connection failed");
        }
    }

    async fn run(
        mut self,
        mut messages: broadcast::Receiver<Message>,
        mut reconnects: broadcast::Receiver<Server>,
        mut changes: Changes,
        mut shutdown: watch::Receiver<()>,
        reconcile: Arc<Notify>,
    ) {
        // Before any subscription: a subscribed RESP2 connection refuses CLIENT SETNAME.
        self.name_connection(None).await;
        loop {
            // Wait without holding the registry: dropping the last `Subscriber` must be
            // able to free it, which drops the shutdown sender and ends this loop.
            let retry = self.retry_at;
            let linger = self.linger_at;
            let topology = self.topology_at;
            // Messages come last: they can arrive in an unbounded flood, while each of
            // the other branches fires once per event (a reconnect, a batch of
            // registrations, a retry timer), so none of them can starve the messages,
            // and a flood of messages cannot delay a subscription.
            let event = tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                reconnect = reconnects.recv() => match reconnect {
                    Ok(server) => Event::Reconnect(Some(Some(server))),
                    // Lagged: at least one reconnect happened, on a node not known.
                    Err(broadcast::error::RecvError::Lagged(_)) => Event::Reconnect(Some(None)),
                    Err(broadcast::error::RecvError::Closed) => Event::Reconnect(None),
                },
                () = reconcile.notified() => Event::Reconcile,
                () = sleep_until_opt(retry) => Event::Retry,
                () = sleep_until_opt(linger) => Event::Linger,
                open = recv_change(&mut changes.own) => {
                    if !open { changes.own = None; }
                    Event::SlotMap(MapSource::Own)
                }
                open = recv_change(&mut changes.command) => {
                    if !open { changes.command = None; }
                    Event::SlotMap(MapSource::Command)
                }
                () = sleep_until_opt(topology) => Event::SlotMap(MapSource::Check),
                message = messages.recv() => Event::Message(message),
            };
            let Some(shared) = self.shared.upgrade() else { break };
            match event {
                // A message changes no subscription: nothing to reconcile, so its cost
                // does not depend on how many channels are subscribed.
                Event::Message(Ok(message)) => {
                    shared.dispatch(&message);
                    continue;
                }
                Event::Message(Err(broadcast::error::RecvError::Lagged(missed))) => {
                    tracing::debug!(target: crate::TARGET, missed, "subscriber lagged: waking every waiter");
                    shared.wake_all();
                    continue;
                }
                Event::Message(Err(broadcast::error::RecvError::Closed)) | Event::Reconnect(None) => break,
                Event::Reconnect(Some(server)) => {
                    tracing::debug!(target: crate::TARGET, "subscriber reconnected: resubscribing");
                    // Named before the reconcile below subscribes again on it.
                    self.name_connection(server.as_ref()).await;
                    // The server forgot our subscriptions with the old connection:
                    // every channel must be subscribed again, and confirmed again.
                    shared.active.lock().clear();
                    self.nodes.clear();
                    {
                        let mut registry = shared.registry.lock();
                        let registry = &mut *registry;
                        for (channel, waiters) in &registry.channels {
                            waiters.set_subscribed(false);
                            registry.dirty.insert(channel.clone());
                        }
                        registry.dirty.extend(self.failed.drain());
                    }
                    self.wake_after_subscribe = true;
                    self.retry_at = None;
                }
                Event::Reconcile | Event::Linger => {}
                Event::Retry => {
                    self.retry_at = None;
                    shared.registry.lock().dirty.extend(self.failed.drain());
                }
                Event::SlotMap(source) => {
                    if source == MapSource::Check {
                        self.topology_at = None;
                    }
                    self.follow_slot_moves(&shared, source).await;
                }
            }
            self.linger_at = shared.expire_idle();
            self.reconcile(&shared).await;
            if self.sharded && self.topology_at.is_none() && !self.nodes.is_empty() {
                self.topology_at = Some(Instant::now() + TOPOLOGY_CHECK);
            }
        }
        // The one `QUIT` of this connection (its owner waits for it: `ended`).
        let _ = tokio::time::timeout(self.command_timeout, self.client.quit()).await;
        self.ended.send_replace(true);
    }

    /// Brings the subscriptions of the dirty channels in line with what waiters want.
    /// Channels nobody touched since the last reconcile are not looked at.
    async fn reconcile(&mut self, shared: &Shared) {
        let dirty = std::mem::take(&mut shared.registry.lock().dirty);
        let mut to_subscribe = Vec::new();
        let mut to_unsubscribe = Vec::new();
        {
            let active = shared.active.lock();
            for channel in dirty {
                let was_failed = self.failed.remove(&channel);
                match shared.desired(&channel) {
                    Some(_) if !active.contains(&channel) => to_subscribe.push(channel),
                    // Still subscribed for an earlier entry, and no UNSUBSCRIBE is in
                    // flight (only this task sends one, and it is not sending now):
                    // the new entry is subscribed.
                    Some(waiters) => waiters.set_subscribed(true),
                    None if active.contains(&channel) || was_failed => to_unsubscribe.push(channel),
                    None => {}
                }
            }
        }
        let mut failed = false;

        if !to_subscribe.is_empty() {
            shared.stats.subscribe_calls.fetch_add(1, Ordering::Relaxed);
            let mut names: Vec<String> = Vec::with_capacity(to_subscribe.len());
            for channel in &to_subscribe {
                names.push(channel.to_string());
                let companion = shared.desired(channel).and_then(|waiters| waiters.companion.clone());
                if let Some(companion) = companion {
                    names.push(companion.to_string());
                    self.companion_of.insert(channel.clone(), companion);
                }
            }
            if self.sharded {
                failed |= self.shard_subscribe(shared, &to_subscribe).await;
            } else {
                failed |= self.subscribe(shared, &to_subscribe, names).await;
            }
        }
        if self.wake_after_subscribe && self.resubscribed(shared) {
            self.wake_after_subscribe = false;
            shared.wake_all();
        }

        // A channel registered again while the SUBSCRIBE above was in flight is wanted
        // after all: keep it (the new entry is dirty, and the next reconcile marks it).
        to_unsubscribe.retain(|channel| shared.desired(channel).is_none());
        if !to_unsubscribe.is_empty() {
            shared.stats.unsubscribe_calls.fetch_add(1, Ordering::Relaxed);
            if self.sharded {
                failed |= self.shard_unsubscribe(shared, &to_unsubscribe).await;
            } else {
                failed |= self.unsubscribe(shared, &to_unsubscribe).await;
            }
        }

        if failed {
            self.retry_at = Some(Instant::now() + self.retry_delay);
            self.retry_delay = (self.retry_delay * 2).min(Duration::from_secs(1));
        } else if self.failed.is_empty() {
            self.retry_delay = Duration::from_millis(50);
        }
    }

    /// Classic: one `SUBSCRIBE` for `to_subscribe` (and their companions, `names`),
    /// confirmed by a `PING`. Returns whether it failed.
    async fn subscribe(&mut self, shared: &Shared, to_subscribe: &[Arc<str>], names: Vec<String>) -> bool {
        let confirm = async {
            self.client.subscribe(names).await?;
            // fred 10.1 resolves SUBSCRIBE as soon as it is written (it answers the
            // caller at once and drops the server's confirmations), so its `Ok`
            // says nothing about the server. A PING on the same connection is
            // answered only after the server has run everything sent before it, so
            // its reply is the confirmation.
            self.client.ping::<Value>(None).await.map(drop)
        };
        match tokio::time::timeout(self.command_timeout, confirm).await {
            Ok(Ok(())) => {
                self.confirmed(shared, to_subscribe);
                false
            }
            Ok(Err(error)) => {
                tracing::debug!(target: crate::TARGET, %error, "SUBSCRIBE failed; will retry");
                self.failed.extend(to_subscribe.iter().cloned());
                true
            }
            Err(_) => {
                tracing::debug!(target: crate::TARGET, "SUBSCRIBE timed out; will retry");
                self.failed.extend(to_subscribe.iter().cloned());
                true
            }
        }
    }

    /// The server has `channels` (and their companions): mark them active and their
    /// entries subscribed.
    fn confirmed(&self, shared: &Shared, channels: &[Arc<str>]) {
        for channel in channels {
            // Mark the entry waiting now, before it shows as active, so that whoever
            // sees it active sees it confirmed. If it went meanwhile, its leave marked
            // the channel dirty and the next reconcile unsubscribes; a newer entry is
            // subscribed, since no UNSUBSCRIBE followed.
            if let Some(waiters) = shared.desired(channel) {
                waiters.set_subscribed(true);
            }
        }
        let mut active = shared.active.lock();
        for channel in channels {
            active.insert(channel.clone());
            if let Some(companion) = self.companion_of.get(channel) {
                active.insert(companion.clone());
            }
        }
    }

    /// Sharded: one `SSUBSCRIBE` per channel (and one for its companion), each bounded
    /// by the command timeout. Returns whether any failed.
    ///
    /// fred 10.1 waits for the server's answer to `SSUBSCRIBE` (unlike `SUBSCRIBE`: it
    /// must be able to follow a `MOVED`), so its `Ok` is the confirmation, from the node
    /// that serves the channel's slot. It pairs that answer with the command as with any
    /// reply, which is why each `SSUBSCRIBE` names one channel: the server answers a
    /// command naming n channels with n replies, and the others would be taken for the
    /// replies of the commands after it.
    async fn shard_subscribe(&mut self, shared: &Shared, to_subscribe: &[Arc<str>]) -> bool {
        let mut failed = false;
        for (i, channel) in to_subscribe.iter().enumerate() {
            let mut names = vec![channel.to_string()];
            if let Some(companion) = self.companion_of.get(channel) {
                names.push(companion.to_string());
            }
            let subscribe = async {
                for name in names {
                    self.client.ssubscribe(name).await?;
                }
                Ok::<(), fred::error::Error>(())
            };
            match tokio::time::timeout(self.command_timeout, subscribe).await {
                Ok(Ok(())) => {
                    let slot = lock_core::names::key_slot(channel.as_bytes());
                    let node = self.client.cached_cluster_state().and_then(|map| map.get_server(slot).cloned());
                    self.nodes.insert(channel.clone(), node);
                    self.confirmed(shared, std::slice::from_ref(channel));
                    if self.moved.remove(channel) {
                        if let Some(waiters) = shared.desired(channel) {
                            // Subscribed again after a slot move: what was published on
                            // the new node before now was not heard.
                            shared.stats.wake_alls.fetch_add(1, Ordering::Relaxed);
                            waiters.wake_all();
                        }
                    }
                }
                Ok(Err(error)) => {
                    tracing::debug!(target: crate::TARGET, %error, %channel, "SSUBSCRIBE failed; will retry");
                    self.failed.insert(channel.clone());
                    failed = true;
                }
                Err(_) => {
                    // The connection is probably down: the others would time out too.
                    tracing::debug!(target: crate::TARGET, %channel, "SSUBSCRIBE timed out; will retry");
                    self.failed.extend(to_subscribe[i..].iter().cloned());
                    return true;
                }
            }
        }
        failed
    }

    /// Classic: one `UNSUBSCRIBE` for `to_unsubscribe` and their companions. Returns
    /// whether it failed.
    async fn unsubscribe(&mut self, shared: &Shared, to_unsubscribe: &[Arc<str>]) -> bool {
        let mut names: Vec<String> = Vec::with_capacity(to_unsubscribe.len());
        for channel in to_unsubscribe {
            names.push(channel.to_string());
            if let Some(companion) = self.companion_of.get(channel) {
                names.push(companion.to_string());
            }
        }
        match tokio::time::timeout(self.command_timeout, self.client.unsubscribe(names)).await {
            Ok(Ok(())) => {
                self.unsubscribed(shared, to_unsubscribe);
                false
            }
            Ok(Err(error)) => {
                tracing::debug!(target: crate::TARGET, %error, "UNSUBSCRIBE failed; will retry");
                self.failed.extend(to_unsubscribe.iter().cloned());
                true
            }
            Err(_) => {
                tracing::debug!(target: crate::TARGET, "UNSUBSCRIBE timed out; will retry");
                self.failed.extend(to_unsubscribe.iter().cloned());
                true
            }
        }
    }

    /// `channels` (and their companions) are no longer subscribed.
    fn unsubscribed(&mut self, shared: &Shared, channels: &[Arc<str>]) {
        let mut active = shared.active.lock();
        for channel in channels {
            active.remove(channel);
            self.nodes.remove(channel);
            self.moved.remove(channel);
            if let Some(companion) = self.companion_of.remove(channel) {
                active.remove(&companion);
            }
        }
    }

    /// Sharded: one `SUNSUBSCRIBE` per channel with its companion (the two share a slot;
    /// the server refuses channels of two slots in one command). fred resolves it when
    /// written, as `UNSUBSCRIBE`. A channel whose slot left the node it was subscribed
    /// on is not sent: that node dropped the subscription with the slot, and the new
    /// owner would answer `MOVED`, a reply fred would pair with the next command on
    /// that connection. Returns whether any failed.
    async fn shard_unsubscribe(&mut self, shared: &Shared, to_unsubscribe: &[Arc<str>]) -> bool {
        let map = self.client.cached_cluster_state();
        let mut failed = false;
        for channel in to_unsubscribe {
            let slot = lock_core::names::key_slot(channel.as_bytes());
            let owner = map.as_ref().and_then(|map| map.get_server(slot));
            let still_there = match self.nodes.get(channel) {
                Some(node) => node.as_ref() == owner,
                // Never confirmed (a failed SSUBSCRIBE that may have run): try anyway.
                None => true,
            };
            if still_there {
                let mut names = vec![channel.to_string()];
                if let Some(companion) = self.companion_of.get(channel) {
                    names.push(companion.to_string());
                }
                match tokio::time::timeout(self.command_timeout, self.client.sunsubscribe(names)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::debug!(target: crate::TARGET, %error, %channel, "SUNSUBSCRIBE failed; will retry");
                        self.failed.insert(channel.clone());
                        failed = true;
                        continue;
                    }
                    Err(_) => {
                        tracing::debug!(target: crate::TARGET, %channel, "SUNSUBSCRIBE timed out; will retry");
                        self.failed.insert(channel.clone());
                        failed = true;
                        continue;
                    }
                }
            }
            self.unsubscribed(shared, std::slice::from_ref(channel));
        }
        failed
    }

    /// Sharded: looks for subscribed channels whose slot left the node they were
    /// subscribed on, in the slot map `source` names: the subscriber's own (it synced
    /// after a `MOVED` or a reconnect), the command client's (it synced after a
    /// `MOVED`), or a fresh `CLUSTER SLOTS` (the periodic check). When the map is not
    /// the subscriber's and something moved, the subscriber's map is synced first, so
    /// that the new `SSUBSCRIBE`s go to the new owners (one that still went to the old
    /// owner would be answered `MOVED`, which fred follows).
    async fn follow_slot_moves(&mut self, shared: &Shared, source: MapSource) {
        if self.nodes.is_empty() {
            return;
        }
        let map = match source {
            MapSource::Own => self.client.cached_cluster_state(),
            MapSource::Command => self.topology.as_ref().and_then(ClusterInterface::cached_cluster_state),
            MapSource::Check => self.read_slot_map().await,
        };
        let Some(map) = map else { return };
        if source != MapSource::Own && self.moved_channels(&map).is_empty() {
            return;
        }
        if source != MapSource::Own {
            match tokio::time::timeout(self.command_timeout, self.client.sync_cluster()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::debug!(target: crate::TARGET, %error, "subscriber's cluster sync failed"),
                Err(_) => tracing::debug!(target: crate::TARGET, "subscriber's cluster sync timed out"),
            }
        }
        let moved = self.moved_channels(&map);
        if moved.is_empty() {
            return;
        }
        tracing::debug!(
            target: crate::TARGET,
            channels = moved.len(),
            "shard channels' slots moved: subscribing again",
        );
        shared.stats.moved_channels.fetch_add(moved.len() as u64, Ordering::Relaxed);
        let mut active = shared.active.lock();
        let mut registry = shared.registry.lock();
        for channel in moved {
            // The old node dropped the subscription with the slot (a `sunsubscribe`
            // push, which fred drops): subscribe again, on the new owner, and wake the
            // channel's waiters once that is confirmed.
            self.nodes.remove(&channel);
            active.remove(&channel);
            if let Some(companion) = self.companion_of.get(&channel) {
                active.remove(companion);
            }
            if let Some(waiters) = registry.channels.get(&channel) {
                waiters.set_subscribed(false);
                self.moved.insert(channel.clone());
            }
            registry.dirty.insert(channel);
        }
    }

    /// The subscribed channels whose slot `map` gives to another node than the one they
    /// were subscribed on.
    fn moved_channels(&self, map: &ClusterRouting) -> Vec<Arc<str>> {
        self.nodes
            .iter()
            .filter(|(channel, node)| {
                let slot = lock_core::names::key_slot(channel.as_bytes());
                map.get_server(slot) != node.as_ref()
            })
            .map(|(channel, _)| channel.clone())
            .collect()
    }

    /// `CLUSTER SLOTS` through the command client (bounded), as a slot map.
    async fn read_slot_map(&self) -> Option<ClusterRouting> {
        lock_core::topology::read_slot_map(self.topology.as_ref()?, self.command_timeout).await
    }

    /// `true` once no channel that waiters want is still waiting for its resubscribe
    /// (a failed SUBSCRIBE) after a reconnect. A reconnect makes every channel dirty, so
    /// the first reconcile after it subscribes them all; only the failed ones are left.
    /// Channels registered since are not waited for: their waiters registered after the
    /// reconnect, and a brand-new registration must not hold the wake-all back.
    fn resubscribed(&self, shared: &Shared) -> bool {
        let active = shared.active.lock();
        !self.failed.iter().any(|channel| !active.contains(channel) && shared.desired(channel).is_some())
    }
}

/// What woke the subscriber task.
enum Event {
    Message(Result<Message, broadcast::error::RecvError>),
    /// `None` when the reconnect stream closed (the client is gone); else the node that
    /// reconnected, `Some(None)` when not known (a lagged stream still means at least
    /// one reconnect happened).
    Reconnect(Option<Option<Server>>),
    Reconcile,
    Retry,
    /// An idle channel's linger may be over.
    Linger,
    /// Sharded: the slot map may have changed; where to read it.
    SlotMap(MapSource),
}

/// Which slot map a sharded subscriber compares its subscriptions with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapSource {
    /// The subscriber client's own (it just synced).
    Own,
    /// The command client's (it just synced, after a `MOVED`).
    Command,
    /// A fresh `CLUSTER SLOTS` (the periodic check).
    Check,
}

/// Waits for the next cluster change event on `changes` (forever when `None`).
/// Returns `false` once the stream is closed; a lag counts as a change.
async fn recv_change(changes: &mut Option<broadcast::Receiver<Vec<ClusterStateChange>>>) -> bool {
    match changes {
        Some(rx) => !matches!(rx.recv().await, Err(broadcast::error::RecvError::Closed)),
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
