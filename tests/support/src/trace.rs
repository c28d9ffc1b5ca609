//! A `tracing` subscriber that records what leasehold emits, for the tests of its spans
//! and events, optionally behind a `RUST_LOG`-style filter (`tracing-subscriber`'s
//! `Targets`, whose `target=level` directives match a target and every target under it
//! as `EnvFilter`'s do).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Level, Metadata};
use tracing_subscriber::filter::Targets;

/// A span or an event as [`TraceLog`] saw it: its name, target, level and fields (as
/// text; fields recorded after a span was made included).
#[derive(Debug, Clone)]
pub struct Seen {
    /// The span's or event's name (`leasehold.renew`, `leasehold.lost`, …).
    pub name: &'static str,
    /// Its `tracing` target.
    pub target: &'static str,
    /// Its level.
    pub level: Level,
    /// Its fields, by name, as text (`Debug` for anything that is not a string).
    pub fields: HashMap<String, String>,
}

impl Seen {
    /// One field's text.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Records every span and event that passes its filter, and the target of every
/// callsite it is asked about (passed or not). Clones share one record. Install it for
/// the current thread with [`TraceLog::set_default`] (a `current_thread` runtime then
/// runs every task under it).
#[derive(Debug, Clone, Default)]
pub struct TraceLog {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    filter: Option<Targets>,
    spans: Mutex<HashMap<u64, Seen>>,
    events: Mutex<Vec<Seen>>,
    asked: Mutex<BTreeSet<&'static str>>,
    next: AtomicU64,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl TraceLog {
    /// Records everything, at every level.
    pub fn all() -> Self {
        TraceLog::default()
    }

    /// Records what `directives` lets through, in `RUST_LOG`'s `target=level,…` form
    /// (e.g. `leasehold=debug`).
    ///
    /// # Panics
    /// When `directives` does not parse.
    pub fn filtered(directives: &str) -> Self {
        let filter: Targets = directives.parse().unwrap_or_else(|e| panic!("bad directives {directives:?}: {e}"));
        TraceLog { inner: Arc::new(Inner { filter: Some(filter), ..Inner::default() }) }
    }

    /// Makes this the current thread's subscriber until the guard is dropped.
    pub fn set_default(&self) -> DefaultGuard {
        tracing::subscriber::set_default(self.clone())
    }

    /// The events recorded with this name, in order.
    pub fn events_named(&self, name: &str) -> Vec<Seen> {
        self.inner.events.lock().iter().filter(|e| e.name == name).cloned().collect()
    }

    /// Every event recorded, in order.
    pub fn events(&self) -> Vec<Seen> {
        self.inner.events.lock().clone()
    }

    /// The spans recorded with this name (in no particular order).
    pub fn spans_named(&self, name: &str) -> Vec<Seen> {
        self.inner.spans.lock().values().filter(|s| s.name == name).cloned().collect()
    }

    /// The target of every callsite this subscriber was asked about, whether its filter
    /// let it through or not.
    pub fn targets_asked(&self) -> BTreeSet<&'static str> {
        self.inner.asked.lock().clone()
    }

    fn passes(&self, metadata: &Metadata<'_>) -> bool {
        self.inner.filter.as_ref().is_none_or(|filter| filter.would_enable(metadata.target(), metadata.level()))
    }
}

impl tracing::Subscriber for TraceLog {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.inner.asked.lock().insert(metadata.target());
        // Asked again at every use: other threads may run other subscribers.
        Interest::sometimes()
    }
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.passes(metadata)
    }
    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let metadata = attrs.metadata();
        let mut seen =
            Seen { name: metadata.name(), target: metadata.target(), level: *metadata.level(), fields: HashMap::new() };
        attrs.record(&mut Fields(&mut seen.fields));
        self.inner.spans.lock().insert(id, seen);
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        if let Some(seen) = self.inner.spans.lock().get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let metadata = event.metadata();
        let mut seen =
            Seen { name: metadata.name(), target: metadata.target(), level: *metadata.level(), fields: HashMap::new() };
        event.record(&mut Fields(&mut seen.fields));
        self.inner.events.lock().push(seen);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
