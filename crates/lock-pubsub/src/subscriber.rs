//! The one subscriber connection of a client, and the task that owns it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::{ClientLike, EventInterface, PubsubInterface};
use fred::types::Message;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tokio::time::Instant;

use crate::channel::{ChannelWaiters, Departure};
use crate::waiter::Waiter;

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
    channels: Mutex<HashMap<Arc<str>, Arc<ChannelWaiters>>>,
    /// Channels the server has confirmed. Written only by the task (which alone sends
    /// (un)subscribe commands); read by diagnostics.
    active: Mutex<HashSet<Arc<str>>>,
    reconcile: Arc<Notify>,
    stats: Stats,
    client: SubscriberClient,
    /// Dropped with `Shared`: tells the task to stop.
    _shutdown: watch::Sender<()>,
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
            channels: Mutex::new(HashMap::new()),
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
        };
        tokio::spawn(task.run(messages, reconnects, shutdown_rx, reconcile));
        Subscriber { shared }
    }

    /// Joins the queue of `channel` (register-then-check; see the crate docs). The
    /// subscription is requested now and confirmed asynchronously.
    pub fn register(&self, channel: &Arc<str>) -> Waiter {
        let signal = Arc::new(Notify::new());
        let (waiters, id, first_on_channel) = {
            let mut channels = self.shared.channels.lock();
            let mut first_on_channel = false;
            let waiters = channels
                .entry(channel.clone())
                .or_insert_with(|| {
                    first_on_channel = true;
                    Arc::new(ChannelWaiters::new(channel.clone()))
                })
                .clone();
            // Even when the channel is still subscribed for an earlier waiter, only the
            // task may confirm it: an UNSUBSCRIBE for it may be in flight right now.
            let id = waiters.join(signal.clone());
            (waiters, id, first_on_channel)
        };
        if first_on_channel {
            self.shared.reconcile.notify_one();
        }
        Waiter::new(self.shared.clone(), waiters, id, signal)
    }

    /// How many local waiters wait on `channel` now.
    pub fn waiters(&self, channel: &str) -> usize {
        self.shared.channels.lock().get(channel).map_or(0, |w| w.len())
    }

    /// The channels the server has confirmed, as the subscriber task last saw them.
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
    pub(crate) fn leave(&self, waiters: &Arc<ChannelWaiters>, id: u64, held_until: Option<Instant>) {
        let mut channels = self.channels.lock();
        if let Departure::Empty = waiters.leave(id, held_until) {
            // Remove the entry only if it is still this one (a new entry may have replaced it).
            if channels.get(&waiters.name).is_some_and(|current| Arc::ptr_eq(current, waiters)) {
                channels.remove(&waiters.name);
                drop(channels);
                self.reconcile.notify_one();
            }
        }
    }

    fn wake_all(&self) {
        self.stats.wake_alls.fetch_add(1, Ordering::Relaxed);
        let channels: Vec<Arc<ChannelWaiters>> = self.channels.lock().values().cloned().collect();
        for waiters in channels {
            waiters.wake_all();
        }
    }

    fn dispatch(&self, message: &Message) {
        self.stats.messages.fetch_add(1, Ordering::Relaxed);
        let Some(waiters) = self.channels.lock().get(&*message.channel).cloned() else { return };
        let unlock = message.value.as_str().is_some_and(|payload| payload == lock_core::names::UNLOCK_MESSAGE);
        if unlock {
            waiters.wake_one();
        } else {
            // Read-unlock ("1") frees the lock for every reader; anything unknown is
            // treated the same way, since waking too many only costs a retry.
            waiters.wake_all();
        }
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
            let event = tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                message = messages.recv() => Event::Message(message),
                reconnect = reconnects.recv() => {
                    Event::Reconnect(!matches!(reconnect, Err(broadcast::error::RecvError::Closed)))
                }
                () = reconcile.notified() => Event::Reconcile,
                () = sleep_until_opt(retry) => Event::Retry,
            };
            let Some(shared) = self.shared.upgrade() else { break };
            match event {
                Event::Message(Ok(message)) => shared.dispatch(&message),
                Event::Message(Err(broadcast::error::RecvError::Lagged(missed))) => {
                    tracing::debug!(missed, "subscriber lagged: waking every waiter");
                    shared.wake_all();
                }
                Event::Message(Err(broadcast::error::RecvError::Closed)) | Event::Reconnect(false) => break,
                Event::Reconnect(true) => {
                    tracing::debug!("subscriber reconnected: resubscribing");
                    // The server forgot our subscriptions with the old connection.
                    shared.active.lock().clear();
                    for waiters in shared.channels.lock().values() {
                        waiters.set_subscribed(false);
                    }
                    self.wake_after_subscribe = true;
                    self.retry_at = None;
                }
                Event::Reconcile => {}
                Event::Retry => self.retry_at = None,
            }
            self.reconcile(&shared).await;
        }
        let _ = tokio::time::timeout(self.command_timeout, self.client.quit()).await;
    }

    async fn reconcile(&mut self, shared: &Shared) {
        let desired: HashMap<Arc<str>, Arc<ChannelWaiters>> =
            shared.channels.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let (to_subscribe, to_unsubscribe) = {
            let active = shared.active.lock();
            let to_subscribe: Vec<Arc<str>> = desired.keys().filter(|c| !active.contains(*c)).cloned().collect();
            let to_unsubscribe: Vec<Arc<str>> = active.iter().filter(|c| !desired.contains_key(*c)).cloned().collect();
            (to_subscribe, to_unsubscribe)
        };
        let mut failed = false;

        if !to_subscribe.is_empty() {
            shared.stats.subscribe_calls.fetch_add(1, Ordering::Relaxed);
            let names: Vec<String> = to_subscribe.iter().map(|c| c.to_string()).collect();
            match tokio::time::timeout(self.command_timeout, self.client.subscribe(names)).await {
                Ok(Ok(())) => {
                    shared.active.lock().extend(to_subscribe.iter().cloned());
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "SUBSCRIBE failed; will retry");
                    failed = true;
                }
                Err(_) => {
                    tracing::debug!("SUBSCRIBE timed out; will retry");
                    failed = true;
                }
            }
        }
        // Mark every desired channel the server has confirmed (including channels still
        // subscribed for an earlier entry).
        let confirmed: Vec<&Arc<ChannelWaiters>> = {
            let active = shared.active.lock();
            desired.iter().filter(|(channel, _)| active.contains(*channel)).map(|(_, waiters)| waiters).collect()
        };
        for waiters in confirmed {
            if !waiters.is_subscribed() {
                waiters.set_subscribed(true);
            }
        }
        if !failed && self.wake_after_subscribe {
            self.wake_after_subscribe = false;
            shared.wake_all();
        }

        if !to_unsubscribe.is_empty() {
            shared.stats.unsubscribe_calls.fetch_add(1, Ordering::Relaxed);
            let names: Vec<String> = to_unsubscribe.iter().map(|c| c.to_string()).collect();
            match tokio::time::timeout(self.command_timeout, self.client.unsubscribe(names)).await {
                Ok(Ok(())) => {
                    let mut active = shared.active.lock();
                    for channel in &to_unsubscribe {
                        active.remove(channel);
                    }
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "UNSUBSCRIBE failed; will retry");
                    failed = true;
                }
                Err(_) => failed = true,
            }
        }

        if failed {
            self.retry_at = Some(Instant::now() + self.retry_delay);
            self.retry_delay = (self.retry_delay * 2).min(Duration::from_secs(1));
        } else {
            self.retry_delay = Duration::from_millis(50);
        }
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
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
