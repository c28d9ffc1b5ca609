//! A client's two connections (commands, subscriber), up or down and how often re-made,
//! as its watch (`watch.rs`) reads them from fred's events. Read by
//! [`Client::health`](crate::Client::health) (always) and recorded as
//! `leasehold_connected`, `leasehold_reconnects_total` and `leasehold_clients` (feature
//! `metrics`).

use crate::telemetry::labels::Role;

/// What one connection is known to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Link {
    /// Up as far as the events tell (every node's, in a cluster).
    pub(crate) connected: bool,
    /// Connections (re)made since the client was built (the first connect not counted).
    pub(crate) reconnects: u64,
}

/// The two connections of one client: written by its watch tasks, read by `health()`.
/// Behind one lock (events are rare and a read is a copy), which also keeps the
/// process-wide gauges in step with what it says.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    state: parking_lot::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// By [`Role::index`].
    links: [Link; 2],
    /// Counted in the process-wide gauges (`leasehold_clients`, and
    /// `leasehold_connected` for each link up): from [`Connections::open`] until
    /// [`Connections::retire`]. Events are ignored outside that time.
    live: bool,
}

impl Connections {
    /// The client is built with these connections up or not: from now on it counts in
    /// the gauges. Once: a second call does nothing.
    pub(crate) fn open(&self, commands: bool, subscriber: bool) {
        let mut state = self.state.lock();
        if state.live {
            return;
        }
        state.live = true;
        state.links[Role::Commands.index()].connected = commands;
        state.links[Role::Subscriber.index()].connected = subscriber;
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| {
            handles.clients.increment(1.0);
            for (role, up) in [(Role::Commands, commands), (Role::Subscriber, subscriber)] {
                if let (true, Some(gauge)) = (up, handles.connected(role)) {
                    gauge.increment(1.0);
                }
            }
        });
    }

    /// The connection of `role` went down or came up (without being re-made: see
    /// [`Connections::reconnected`]).
    pub(crate) fn set_connected(&self, role: Role, connected: bool) {
        let mut state = self.state.lock();
        if !state.live {
            return;
        }
        Self::move_link(&mut state.links[role.index()], role, connected);
    }

    /// A connection of `role` was re-made; `connected`: every one of them is up now (in
    /// a cluster another node's may still be down).
    pub(crate) fn reconnected(&self, role: Role, connected: bool) {
        let mut state = self.state.lock();
        if !state.live {
            return;
        }
        let link = &mut state.links[role.index()];
        link.reconnects += 1;
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| {
            if let Some(counter) = handles.reconnects(role) {
                counter.increment(1);
            }
        });
        Self::move_link(link, role, connected);
    }

    /// The client shut down or is gone: its connections count as down, and its share
    /// leaves the process-wide gauges. Once: a second call does nothing.
    pub(crate) fn retire(&self) {
        let mut state = self.state.lock();
        if !state.live {
            return;
        }
        for role in Role::ALL {
            Self::move_link(&mut state.links[role.index()], role, false);
        }
        state.live = false;
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| handles.clients.decrement(1.0));
    }

    /// What the connection of `role` is known to be now.
    pub(crate) fn link(&self, role: Role) -> Link {
        self.state.lock().links[role.index()]
    }

    /// Sets `link` to `connected`, moving the gauge by the change (under the lock).
    fn move_link(link: &mut Link, role: Role, connected: bool) {
        if link.connected == connected {
            return;
        }
        link.connected = connected;
        #[cfg(feature = "metrics")]
        crate::telemetry::handles::with(|handles| {
            if let Some(gauge) = handles.connected(role) {
                if connected {
                    gauge.increment(1.0);
                } else {
                    gauge.decrement(1.0);
                }
            }
        });
        #[cfg(not(feature = "metrics"))]
        let _ = role;
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        self.retire();
    }
}
