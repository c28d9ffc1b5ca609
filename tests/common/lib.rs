//! Helpers shared by the integration tests: a server, a client with short timeouts,
//! and raw commands that bypass the client under test.

use std::time::Duration;

pub use leasehold_test_support::{
    raw_command, wait_until, Monitor, Proxy, RedisCluster, RedisServer, RespValue, SentinelSet, ServerOptions,
    SlotMigration, TlsFiles, SENTINEL_SERVICE,
};

/// A client on `url` with a short watchdog timeout and command timeout for tests: 2 s,
/// or less when the renewal period (`watchdog / 3`) is shorter (the config requires the
/// command timeout to fit inside it).
///
/// # Panics
/// When the server cannot be reached.
pub async fn client_with(url: &str, watchdog: Duration) -> leasehold::Client {
    leasehold::Client::builder()
        .url(url)
        .watchdog_timeout(watchdog)
        .command_timeout(command_timeout_for(watchdog))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// The command timeout [`client_with`] uses for a watchdog timeout.
pub fn command_timeout_for(watchdog: Duration) -> Duration {
    Duration::from_secs(2).min((watchdog / 3).saturating_sub(Duration::from_millis(1)))
}

/// A client with a 30 s watchdog (the default) and a 2 s command timeout.
///
/// # Panics
/// When the server cannot be reached.
pub async fn client(server: &RedisServer) -> leasehold::Client {
    client_with(&server.url(), Duration::from_secs(30)).await
}

/// Runs one command on `server` over a separate raw connection.
pub fn raw(server: &RedisServer, args: &[&str]) -> RespValue {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw_command(&server.addr(), &bytes)
}

/// `PUBSUB CHANNELS *` on `server`, sorted.
pub fn pubsub_channels(server: &RedisServer) -> Vec<String> {
    match raw(server, &["PUBSUB", "CHANNELS", "*"]) {
        RespValue::Array(items) => {
            let mut names: Vec<String> = items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            names.sort();
            names
        }
        other => panic!("unexpected PUBSUB reply {other:?}"),
    }
}

/// The key's PTTL in ms (-2 absent, -1 no expiry).
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    raw(server, &["PTTL", key]).as_int().unwrap_or_else(|| panic!("PTTL {key}"))
}

/// `HGETALL key` as sorted (field, value) pairs.
pub fn hgetall(server: &RedisServer, key: &str) -> Vec<(String, String)> {
    match raw(server, &["HGETALL", key]) {
        RespValue::Array(items) => {
            let flat: Vec<String> = items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            let mut pairs: Vec<(String, String)> = flat.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
            pairs.sort();
            pairs
        }
        other => panic!("unexpected HGETALL reply {other:?}"),
    }
}

/// A lock holder in a child process (`tests/bin/holder.rs`), killed on drop.
pub struct HolderProcess {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl HolderProcess {
    /// Starts the holder binary `bin` (pass `env!("CARGO_BIN_EXE_holder")`) as
    /// `holder URL NAME WATCHDOG_MS` and waits for its `LOCKED` line.
    ///
    /// # Panics
    /// When the child cannot start or does not lock within 10 s.
    pub async fn start(bin: &str, url: &str, name: &str, watchdog: Duration) -> (Self, String) {
        Self::start_with(bin, &[url, name, &watchdog.as_millis().to_string()]).await
    }

    /// Starts the holder in fenced mode (`holder URL NAME WATCHDOG_MS fenced`): it holds a
    /// `FencedLock`. Returns the owner and the hold's token.
    ///
    /// # Panics
    /// As [`HolderProcess::start`], or when the `LOCKED` line has no token.
    pub async fn start_fenced(bin: &str, url: &str, name: &str, watchdog: Duration) -> (Self, String, u64) {
        let (holder, rest) = Self::start_with(bin, &[url, name, &watchdog.as_millis().to_string(), "fenced"]).await;
        let (owner, token) = rest.split_once(' ').unwrap_or_else(|| panic!("no token in {rest:?}"));
        let token = token.parse().unwrap_or_else(|_| panic!("bad token in {rest:?}"));
        (holder, owner.to_owned(), token)
    }

    async fn start_with(bin: &str, args: &[&str]) -> (Self, String) {
        let mut holder = Self::spawn(bin, args);
        let line = holder.next_line(Duration::from_secs(10)).await.expect("LOCKED line");
        let owner = line.strip_prefix("LOCKED ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_owned();
        (holder, owner)
    }

    /// Starts `bin` with `args` (stdin and stdout piped, killed on drop) without waiting
    /// for any line: for child processes other than the holder (`tests/bin/fair_waiter.rs`).
    ///
    /// # Panics
    /// When the child cannot start.
    pub fn spawn(bin: &str, args: &[&str]) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(bin)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn holder");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        HolderProcess { child, stdin, lines: tokio::io::BufReader::new(stdout).lines() }
    }

    /// The child's next stdout line, or `None` after `timeout`.
    pub async fn next_line(&mut self, timeout: Duration) -> Option<String> {
        match tokio::time::timeout(timeout, self.lines.next_line()).await {
            Ok(Ok(line)) => line,
            _ => None,
        }
    }

    /// Asks the child to unlock.
    pub async fn send_unlock(&mut self) {
        self.send_line("UNLOCK").await;
    }

    /// Sends one line (a command such as `WRITE KEY VALUE`) to the child.
    pub async fn send_line(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to holder");
        self.stdin.flush().await.expect("flush");
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends a signal (`KILL`, `STOP`, `CONT`) to the child.
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill").arg(format!("-{name}")).arg(self.pid().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{name} failed");
    }
}
