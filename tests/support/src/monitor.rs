//! A `MONITOR` tap: records every command the server runs, on a thread of its own.

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::raw::{encode, read_line};

/// Records the commands a server runs while it lives (`MONITOR`). Lines look like
/// `1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "…"`.
#[derive(Debug)]
pub struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    stream: TcpStream,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    /// Starts monitoring `addr` and returns once the server confirmed (`+OK`).
    ///
    /// # Panics
    /// When the server cannot be reached.
    pub fn start(addr: &str) -> Self {
        let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.write_all(&encode(&[b"MONITOR"])).unwrap_or_else(|e| panic!("write: {e}"));
        let reader_stream = stream.try_clone().unwrap_or_else(|e| panic!("clone: {e}"));
        let mut reader = BufReader::new(reader_stream);
        let ok = read_line(&mut reader);
        assert_eq!(ok.as_deref(), Some("+OK"), "MONITOR was not accepted");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let thread = std::thread::spawn(move || {
            while let Some(line) = read_line(&mut reader) {
                sink.lock().push(line);
            }
        });
        Monitor { lines, stream, thread: Some(thread) }
    }

    /// Every line recorded so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// Lines that are not this harness's own marker `PING`s.
    pub fn commands(&self) -> Vec<String> {
        self.lines().into_iter().filter(|l| !l.contains("\"leasehold-monitor-marker\"")).collect()
    }

    /// Sends a marker command through another connection and waits until the monitor
    /// has seen it: everything sent before the call has been recorded after it returns.
    ///
    /// # Panics
    /// When the marker is not seen within 5 s.
    pub fn sync(&self, addr: &str) {
        let _ = crate::raw_command(addr, &[b"ECHO", b"leasehold-monitor-marker"]);
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if self.lines.lock().iter().any(|l| l.contains("\"leasehold-monitor-marker\"")) {
                self.lines.lock().retain(|l| !l.contains("\"leasehold-monitor-marker\""));
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("MONITOR did not see the marker");
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
