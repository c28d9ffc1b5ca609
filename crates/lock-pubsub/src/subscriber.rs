//! The one subscriber connection of a client, and the task that owns it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::{ClientLike, EventInterface, PubsubInterface};
use fred::types::{Message, Value};
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tokio::time::Instant;

use crate::channel::{ChannelWaiters, Departure, QueueMessage};
use crate::waiter::Waiter;

/// How long a channel stays subscribed after its last waiter left.
pub const LINGER: Duration = Duration::from_secs(1);

/// Shares one subscriber connection among every waiter of a client.
///
/// Cheap to clone. The background task holds only a `Weak` reference to the waiter
/// registry and ends (sending `QUIT`) when the last `Subscriber` clone is dropped.
#[derive(Debug, Clone)]
pub struct Subscriber {
    pub(crate) shared: Arc<Shared>,
}

/// Counters for tests and benchmarks.
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
    /// Dropped with `Shared`: tells the task to stop.
    _shutdown: watch::Sender<()>,
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
}

impl Subscriber {
    /// Starts the subscriber task on the current tokio runtime. `client` should be
    /// connected (or connecting) with a reconnect policy; `command_timeout` bounds each
    /// (un)subscribe call.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(client: SubscriberClient, command_timeout: Duration) -> Self {
        let (shutdown_tx, shutdown_rx) = watch::channel(());
        let reconcile = Arc::new(Notify::new());
        let messages = client.message_rx();
        let reconnects = client.reconnect_rx();
        let shared = Arc::new(Shared {
            registry: Mutex::new(Registry::default()),
            active: Mutex::new(HashSet::new()),
            reconcile: reconcile.clone(),
            stats: Stats::default(),
            client: client.clone(),
            _shutdown: shutdown_tx,
        });
        let task = Task {
            shared: Arc::downgrade(&shared),
            client,
            command_timeout,
            retry_at: None,
            retry_delay: Duration::from_millis(50),
            wake_after_subscribe: false,
            failed: HashSet::new(),
            companion_of: HashMap::new(),
            linger_at: None,
        };
        tokio::spawn(task.run(messages, reconnects, shutdown_rx, reconcile));
        Subscriber { shared }
    }

    /// Joins the queue of the lock `lock_key` on its release channel `channel`
    /// (register-then-check; see the crate docs). Each lock on a channel has its own
    /// FIFO queue; the channel has one subscription, shared by all of them, requested
    /// now (for the first waiter on the channel) and confirmed asynchronously.
    pub fn register_lock(&self, channel: &Arc<str>, lock_key: &Arc<str>) -> Waiter {
        self.join(channel, None, |waiters, signal| waiters.join(lock_key, signal, None), lock_key)
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
            |waiters, signal| waiters.join_queued(lock_key, owner, position, sent_at, signal),
            lock_key,
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
                    Arc::new(ChannelWaiters::new(channel.clone(), companion.cloned()))
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

    /// How many local waiters are queued for the lock `lock_key` on `channel` now.
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
        }
    }

    /// The fred subscriber client (for fault-injection tests: its connection id, …).
    pub fn client(&self) -> &SubscriberClient {
        &self.shared.client
    }
}

impl Shared {
    /// Called by a departing waiter.
    pub(crate) fn leave(&self, waiters: &Arc<ChannelWaiters>, lock: &str, id: u64, held_until: Option<Instant>) {
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
            match QueueMessage::parse(&payload) {
                Some(queue_message) => waiters.queue_message(&queue_message),
                // Not ours to read: waking everyone costs at most a retry each.
                None => waiters.wake_all(),
            }
            return;
        }
        let unlock = message.value.as_str().is_some_and(|payload| payload == lock_core::names::UNLOCK_MESSAGE);
        if unlock {
            // The message does not say which of the channel's locks was released: the
            // first waiter of each gets a turn.
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
}

impl Task {
    async fn run(
        mut self,
        mut messages: broadcast::Receiver<Message>,
        mut reconnects: broadcast::Receiver<fred::types::config::Server>,
        mut shutdown: watch::Receiver<()>,
        reconcile: Arc<Notify>,
    ) {
        loop {
            // Wait without holding the registry: dropping the last `Subscriber` must be
            // able to free it, which drops the shutdown sender and ends this loop.
            let retry = self.retry_at;
            let linger = self.linger_at;
            // Messages come last: they can arrive in an unbounded flood, while each of
            // the other branches fires once per event (a reconnect, a batch of
            // registrations, a retry timer), so none of them can starve the messages,
            // and a flood of messages cannot delay a subscription.
            let event = tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                reconnect = reconnects.recv() => {
                    Event::Reconnect(!matches!(reconnect, Err(broadcast::error::RecvError::Closed)))
                }
                () = reconcile.notified() => Event::Reconcile,
                () = sleep_until_opt(retry) => Event::Retry,
                () = sleep_until_opt(linger) => Event::Linger,
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
                    tracing::debug!(missed, "subscriber lagged: waking every waiter");
                    shared.wake_all();
                    continue;
                }
                Event::Message(Err(broadcast::error::RecvError::Closed)) | Event::Reconnect(false) => break,
                Event::Reconnect(true) => {
                    tracing::debug!("subscriber reconnected: resubscribing");
                    // The server forgot our subscriptions with the old connection:
                    // every channel must be subscribed again, and confirmed again.
                    shared.active.lock().clear();
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
            }
            self.linger_at = shared.expire_idle();
            self.reconcile(&shared).await;
        }
        let _ = tokio::time::timeout(self.command_timeout, self.client.quit()).await;
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
                    for channel in &to_subscribe {
                        // Mark the entry waiting now (before it shows as active, so that
                        // whoever sees it active sees it confirmed). If it went
                        // meanwhile, its leave marked the channel dirty and the next
                        // reconcile unsubscribes; a newer entry is subscribed, since no
                        // UNSUBSCRIBE followed.
                        if let Some(waiters) = shared.desired(channel) {
                            waiters.set_subscribed(true);
                        }
                    }
                    let mut active = shared.active.lock();
                    for channel in &to_subscribe {
                        active.insert(channel.clone());
                        if let Some(companion) = self.companion_of.get(channel) {
                            active.insert(companion.clone());
                        }
                    }
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "SUBSCRIBE failed; will retry");
                    self.failed.extend(to_subscribe.iter().cloned());
                    failed = true;
                }
                Err(_) => {
                    tracing::debug!("SUBSCRIBE timed out; will retry");
                    self.failed.extend(to_subscribe.iter().cloned());
                    failed = true;
                }
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
            let mut names: Vec<String> = Vec::with_capacity(to_unsubscribe.len());
            for channel in &to_unsubscribe {
                names.push(channel.to_string());
                if let Some(companion) = self.companion_of.get(channel) {
                    names.push(companion.to_string());
                }
            }
            match tokio::time::timeout(self.command_timeout, self.client.unsubscribe(names)).await {
                Ok(Ok(())) => {
                    let mut active = shared.active.lock();
                    for channel in &to_unsubscribe {
                        active.remove(channel);
                        if let Some(companion) = self.companion_of.remove(channel) {
                            active.remove(&companion);
                        }
                    }
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "UNSUBSCRIBE failed; will retry");
                    self.failed.extend(to_unsubscribe.iter().cloned());
                    failed = true;
                }
                Err(_) => {
                    tracing::debug!("UNSUBSCRIBE timed out; will retry");
                    self.failed.extend(to_unsubscribe.iter().cloned());
                    failed = true;
                }
            }
        }

        if failed {
            self.retry_at = Some(Instant::now() + self.retry_delay);
            self.retry_delay = (self.retry_delay * 2).min(Duration::from_secs(1));
        } else if self.failed.is_empty() {
            self.retry_delay = Duration::from_millis(50);
        }
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
    /// `false` when the reconnect stream closed (the client is gone); a lagged stream
    /// still means at least one reconnect happened.
    Reconnect(bool),
    Reconcile,
    Retry,
    /// An idle channel's linger may be over.
    Linger,
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
