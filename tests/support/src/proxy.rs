//! A TCP proxy in front of a redis-server, for faults a server alone cannot produce:
//! added latency, replies lost after the server ran the command, cut connections.
//!
//! (No toxiproxy or `tc netem` here; this is the small tokio proxy the reliability notes
//! call for.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug)]
struct Shared {
    /// Where new connections go ([`Proxy::set_upstream`] changes it).
    upstream: Mutex<String>,
    latency_us: AtomicU64,
    lose_next_reply: AtomicBool,
    lost_replies: AtomicU64,
    cut: watch::Sender<u64>,
    connections: AtomicU64,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// A proxy listening on 127.0.0.1:PORT, forwarding to an upstream server. Stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    shared: Arc<Shared>,
    port: u16,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (`host:port`). Needs a tokio runtime.
    ///
    /// # Panics
    /// When it cannot listen on a local port.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is listening until it returns.
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_else(|e| panic!("addr: {e}"));
        let (cut, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream.to_owned()),
            latency_us: AtomicU64::new(0),
            lose_next_reply: AtomicBool::new(false),
            lost_replies: AtomicU64::new(0),
            cut,
            connections: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Proxy { shared, port, accept }
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Delays every chunk in both directions by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.latency_us.store(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// The next reply the server sends (on any connection) is thrown away and that
    /// connection is cut: the server ran the command, the client never hears of it.
    pub fn lose_next_reply(&self) {
        self.shared.lose_next_reply.store(true, Ordering::SeqCst);
    }

    /// How many replies were thrown away so far.
    pub fn lost_replies(&self) -> u64 {
        self.shared.lost_replies.load(Ordering::SeqCst)
    }

    /// Sends every new connection to `upstream` (`host:port`) from now on, as a client
    /// that follows a failover would; open connections stay where they are until
    /// [`Proxy::cut_connections`].
    pub fn set_upstream(&self, upstream: &str) {
        *self.shared.upstream.lock() = upstream.to_owned();
    }

    /// Closes every open connection (new ones are still accepted).
    pub fn cut_connections(&self) {
        self.shared.cut.send_modify(|n| *n += 1);
    }

    /// How many client connections were accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.shared.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((client, _)) = listener.accept().await {
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let task = tokio::spawn(serve(client, shared.clone()));
        shared.tasks.lock().push(task);
    }
}

async fn serve(client: TcpStream, shared: Arc<Shared>) {
    let upstream = shared.upstream.lock().clone();
    let Ok(server) = TcpStream::connect(&upstream).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let mut cut = shared.cut.subscribe();
    cut.borrow_and_update();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            delay(&shared).await;
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if shared.lose_next_reply.swap(false, Ordering::SeqCst) {
                shared.lost_replies.fetch_add(1, Ordering::SeqCst);
                return; // drop the reply and the connection
            }
            delay(&shared).await;
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        _ = cut.changed() => {}
    }
}

async fn delay(shared: &Shared) {
    let us = shared.latency_us.load(Ordering::SeqCst);
    if us > 0 {
        tokio::time::sleep(Duration::from_micros(us)).await;
    }
}
