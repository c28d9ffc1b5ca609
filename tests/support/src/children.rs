//! Child processes of the integration tests: a lock holder (`tests/bin/holder.rs`) and
//! contenders (`tests/bin/contender.rs`) in processes of their own, so a test can kill,
//! stop or outlive them.

use std::time::Duration;

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

/// Starts `processes` `contender` processes (`bin`, the test's
/// `env!("CARGO_BIN_EXE_contender")`: `tests/bin/contender.rs`) on the lock `name` at
/// `url`, each with `tasks` tasks taking it `iterations` times, with `extra` arguments
/// (`--resource PREFIX`, `--fenced`). Killed when dropped.
///
/// # Panics
/// When a process cannot be started.
pub fn spawn_contenders(
    bin: &str,
    url: &str,
    name: &str,
    processes: usize,
    (tasks, iterations): (usize, usize),
    extra: &[&str],
) -> Vec<tokio::process::Child> {
    (0..processes)
        .map(|_| {
            tokio::process::Command::new(bin)
                .args([url, name, &tasks.to_string(), &iterations.to_string()])
                .args(extra)
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("spawn contender")
        })
        .collect()
}

/// Waits (within `deadline` in all) for every contender to print `DONE` and exit 0, and
/// returns every logged hold `(start µs, end µs, token)`, sorted by start.
///
/// # Panics
/// When one fails (its output is in the message) or the deadline passes.
pub async fn contenders_intervals(children: Vec<tokio::process::Child>, deadline: Duration) -> Vec<(u64, u64, u64)> {
    let until = tokio::time::Instant::now() + deadline;
    let mut intervals = Vec::new();
    for child in children {
        let output = tokio::time::timeout_at(until, child.wait_with_output())
            .await
            .expect("contender finishes in time")
            .expect("contender output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains("DONE"), "contender failed: {stdout}");
        for line in stdout.lines().filter_map(|l| l.strip_prefix("INTERVAL ")) {
            let fields: Vec<u64> = line.split(' ').map(|f| f.parse().expect("INTERVAL START END TOKEN")).collect();
            let [start, end, token] = fields[..] else { panic!("INTERVAL START END TOKEN: {line}") };
            intervals.push((start, end, token));
        }
    }
    intervals.sort_unstable();
    intervals
}
