//! Replication: a replica of a [`RedisServer`], started on a free port in its own temp
//! dir and killed on drop like any other server.

use std::time::Duration;

use crate::cluster::poll;
use crate::raw::{raw_command, RespValue};
use crate::server::{RedisServer, ServerOptions};

impl RedisServer {
    /// Starts a replica of `primary` (`--replicaof 127.0.0.1 PORT`, no persistence) and
    /// waits until it is in sync: the replica reports `master_link_status:up` and the
    /// primary lists it as `state=online`.
    ///
    /// # Panics
    /// When it does not come up, or does not sync within 10 s.
    pub fn start_replica_of(primary: &RedisServer) -> RedisServer {
        Self::start_replica_via(primary, primary.port())
    }

    /// Starts a replica of `primary` that connects to it through `port` on 127.0.0.1 (a
    /// [`Proxy`](crate::Proxy) in front of the primary, whose latency then holds the
    /// replication stream back and whose `cut_connections` throws away what it held), and
    /// waits until it is in sync as [`RedisServer::start_replica_of`] does.
    ///
    /// # Panics
    /// As [`RedisServer::start_replica_of`].
    pub fn start_replica_via(primary: &RedisServer, port: u16) -> RedisServer {
        // Redis 7 waits 5 s before a diskless full sync, for more replicas to join.
        let _ = raw_command(&primary.addr(), &[b"CONFIG", b"SET", b"repl-diskless-sync-delay", b"0"]);
        let mut options = ServerOptions::default();
        options.extra_args.extend(["--replicaof".to_owned(), "127.0.0.1".to_owned(), port.to_string()]);
        let replica = RedisServer::start_with(options);
        let synced = poll(Duration::from_secs(10), || {
            replica.info("replication").contains("master_link_status:up")
                && primary.info("replication").lines().any(|l| {
                    l.starts_with("slave")
                        && l.contains(&format!("port={}", replica.port()))
                        && l.contains("state=online")
                })
        });
        assert!(
            synced,
            "replica on {} did not sync with {}: {}",
            replica.port(),
            primary.port(),
            replica.info("replication")
        );
        replica
    }

    /// `INFO section` as text (empty when the reply is not a string).
    ///
    /// # Panics
    /// When the server cannot be reached.
    pub fn info(&self, section: &str) -> String {
        match raw_command(&self.addr(), &[b"INFO", section.as_bytes()]) {
            RespValue::Bulk(text) => text,
            _ => String::new(),
        }
    }

    /// `REPLICAOF NO ONE`: the replica becomes a primary (a manual failover).
    ///
    /// # Panics
    /// When the server refuses.
    pub fn promote(&self) {
        let reply = raw_command(&self.addr(), &[b"REPLICAOF", b"NO", b"ONE"]);
        assert_eq!(reply, RespValue::Simple("OK".to_owned()), "REPLICAOF NO ONE");
    }

    /// The replication offset a replica has processed (`slave_repl_offset`), or a
    /// primary's (`master_repl_offset`).
    pub fn repl_offset(&self) -> i64 {
        let info = self.info("replication");
        let field =
            |name: &str| info.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<i64>().ok()));
        field("slave_repl_offset:").or_else(|| field("master_repl_offset:")).unwrap_or(-1)
    }
}

impl RedisServer {
    /// On a primary: `true` when every replica has acknowledged everything written so far
    /// (each `slaveN:…,offset=X` equals `master_repl_offset`). Replicas acknowledge about
    /// once a second on their own.
    pub fn replicas_acknowledged_all(&self) -> bool {
        let info = self.info("replication");
        let Some(offset) = info.lines().find_map(|l| l.strip_prefix("master_repl_offset:")) else { return false };
        let offset = offset.trim();
        let mut replicas = info.lines().filter(|l| l.starts_with("slave") && l.contains("ip=")).peekable();
        replicas.peek().is_some() && replicas.all(|l| l.split(',').any(|f| f.strip_prefix("offset=") == Some(offset)))
    }
}
