//! A raw `SUBSCRIBE` connection on one channel: the stand-in for a Java client's
//! pub/sub listener (`LockPubSub`, `SemaphorePubSub`) in the interop suites, which
//! reads what leasehold publishes byte for byte.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use crate::RedisServer;

/// A plain subscriber on one channel of a standalone server.
pub struct Listener {
    reader: BufReader<std::net::TcpStream>,
}

impl Listener {
    /// Subscribes to `channel` and waits for the confirmation.
    ///
    /// # Panics
    /// When the server cannot be reached or does not confirm within 5 s.
    pub fn start(server: &RedisServer, channel: &str) -> Self {
        let mut sub = std::net::TcpStream::connect(server.addr()).expect("connect");
        sub.write_all(format!("SUBSCRIBE {channel}\r\n").as_bytes()).expect("subscribe");
        sub.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut listener = Listener { reader: BufReader::new(sub) };
        let confirmation = listener.lines(6);
        assert_eq!(confirmation[2].to_lowercase(), "subscribe", "{confirmation:?}");
        listener
    }

    fn lines(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let mut line = String::new();
                self.reader.read_line(&mut line).expect("a line within 5 s");
                line.trim().to_owned()
            })
            .collect()
    }

    /// The payload of the next message (each line read within 5 s).
    ///
    /// # Panics
    /// When no message comes in time, or something else does.
    pub fn next_message(&mut self) -> String {
        let lines = self.lines(7);
        assert_eq!(lines[2], "message", "{lines:?}");
        lines[6].clone()
    }
}
