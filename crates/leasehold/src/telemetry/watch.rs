//! The watch of a client's two connections (commands, subscriber): two tasks that read
//! fred's connection events into the client's
//! [`Connections`](crate::telemetry::connection::Connections).
//!
//! fred 10.1 has no "disconnected" event and its `is_connected()` still says `true`
//! after a connection dropped, until its reconnect loop starts (after the policy's first
//! delay). What it does raise: an error event naming the server when a connection's
//! reader ends (dropped, killed, closed by the server), an error event naming no server
//! when a (re)connect attempt fails, a reconnect event naming the server when a
//! connection is (re)made, and in a cluster a change event when a node leaves the slot
//! map. A QUIT raises none of them. So a connection is "down" from its error event to its
//! next reconnect event; in a cluster per node, and a node that left the slot map is
//! forgotten.

use std::collections::HashSet;
use std::sync::Arc;

use fred::prelude::EventInterface;
use fred::types::config::Server;
use fred::types::ClusterStateChange;
use tokio::sync::broadcast::error::RecvError;

use crate::telemetry::labels::Role;
use crate::telemetry::Telemetry;

/// The tasks that follow one client's connections; they end when this is dropped (or
/// [`ConnectionWatch::stop`]ped), and at once if fred closes its event streams (QUIT).
#[derive(Debug)]
pub(crate) struct ConnectionWatch {
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl ConnectionWatch {
    /// Starts following `commands` and `subscriber` (both connected by now) into
    /// `telemetry`'s [`Connections`](crate::telemetry::connection::Connections), which count in the gauges from now on.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn start<C, S>(commands: &C, subscriber: &S, telemetry: &Arc<Telemetry>) -> Self
    where
        C: EventInterface + Clone + Send + Sync + 'static,
        S: EventInterface + Clone + Send + Sync + 'static,
    {
        telemetry.connections.open(commands.is_connected(), subscriber.is_connected());
        ConnectionWatch {
            tasks: [
                follow(commands, Role::Commands, telemetry.clone()),
                follow(subscriber, Role::Subscriber, telemetry.clone()),
            ],
        }
    }

    /// Stops both tasks (at their next await).
    pub(crate) fn stop(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for ConnectionWatch {
    fn drop(&mut self) {
        // Synchronous and non-blocking: the tasks stop at their next await.
        self.stop();
    }
}

/// One connection event, as the tracker reads it.
#[derive(Debug)]
enum Event {
    /// A connection to this server was (re)made.
    Up(Server),
    /// The connection to this server dropped; `None`: a (re)connect attempt failed.
    Down(Option<Server>),
    /// The cluster's slot map changed.
    Changed(Vec<ClusterStateChange>),
}

/// Subscribes to `client`'s events now (so nothing after this call is missed) and
/// spawns the task that applies them.
fn follow<C>(client: &C, role: Role, telemetry: Arc<Telemetry>) -> tokio::task::JoinHandle<()>
where
    C: EventInterface + Clone + Send + Sync + 'static,
{
    let mut reconnects = client.reconnect_rx();
    let mut errors = client.error_rx();
    let mut changes = client.cluster_change_rx();
    let client = client.clone();
    tokio::spawn(async move {
        let mut tracker = Tracker::new(client.is_clustered());
        loop {
            // The events come through separate channels, so their order is lost when
            // several wait: errors first, because a drop and the reconnect that followed
            // it are the common pair. Two drops in a row could leave "up" after the
            // second; fred's next reconnect (or failed attempt) event corrects it.
            let event = tokio::select! {
                biased;
                event = errors.recv() => event.map(|(_, server)| Event::Down(server)),
                event = reconnects.recv() => event.map(Event::Up),
                event = changes.recv() => event.map(Event::Changed),
            };
            let connections = &telemetry.connections;
            match event {
                Ok(Event::Up(server)) => {
                    tracker.up(&server);
                    connections.reconnected(role, tracker.connected());
                }
                Ok(Event::Down(server)) => {
                    tracker.down(server);
                    connections.set_connected(role, false);
                }
                Ok(Event::Changed(changes)) => {
                    tracker.changed(changes);
                    connections.set_connected(role, tracker.connected());
                }
                Err(RecvError::Lagged(_)) => {
                    // Events were missed: start again from what fred says now.
                    tracker = Tracker::new(client.is_clustered());
                    connections.set_connected(role, client.is_connected());
                }
                // fred closes its event streams at QUIT: nothing more to follow.
                Err(RecvError::Closed) => return,
            }
        }
    })
}

/// Which of one client's connections are down, from its events.
#[derive(Debug)]
struct Tracker {
    /// A cluster client has a connection per node; any other client one connection (a
    /// reconnect through Sentinel may name another server than the one that dropped).
    clustered: bool,
    /// The servers whose connection dropped and was not re-made.
    down: HashSet<Server>,
    /// The last (re)connect attempt failed, and nothing connected since.
    failed: bool,
}

impl Tracker {
    fn new(clustered: bool) -> Self {
        Tracker { clustered, down: HashSet::new(), failed: false }
    }

    fn connected(&self) -> bool {
        self.down.is_empty() && !self.failed
    }

    fn up(&mut self, server: &Server) {
        self.failed = false;
        if self.clustered {
            self.down.remove(server);
        } else {
            self.down.clear();
        }
    }

    fn down(&mut self, server: Option<Server>) {
        match server {
            Some(server) => {
                self.down.insert(server);
            }
            None => self.failed = true,
        }
    }

    fn changed(&mut self, changes: Vec<ClusterStateChange>) {
        for change in changes {
            if let ClusterStateChange::Remove(server) = change {
                // A node that left the slot map has no connection to wait for.
                self.down.remove(&server);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(port: u16) -> Server {
        Server::new("127.0.0.1", port)
    }

    /// One connection: down from its error to the next reconnect, whichever server the
    /// reconnect names (Sentinel moves it); a failed attempt keeps it down.
    #[test]
    fn a_single_connection_is_down_until_it_is_made_again() {
        let mut tracker = Tracker::new(false);
        assert!(tracker.connected());
        tracker.down(Some(server(1)));
        assert!(!tracker.connected());
        tracker.down(None);
        assert!(!tracker.connected());
        tracker.up(&server(2));
        assert!(tracker.connected(), "a reconnect to another server (a new primary) is up");
    }

    /// A cluster: down while any node's connection is; a node that left the map is
    /// forgotten.
    #[test]
    fn a_cluster_is_up_when_every_node_is() {
        let mut tracker = Tracker::new(true);
        tracker.down(Some(server(1)));
        tracker.down(Some(server(2)));
        tracker.up(&server(1));
        assert!(!tracker.connected(), "node 2 still down");
        tracker.changed(vec![ClusterStateChange::Remove(server(2))]);
        assert!(tracker.connected(), "node 2 left the slot map");
        tracker.down(None);
        assert!(!tracker.connected());
        tracker.up(&server(3));
        assert!(tracker.connected());
    }
}
