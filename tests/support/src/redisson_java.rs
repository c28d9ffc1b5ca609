//! The real Redisson client as a test peer: [`JavaPeer`] runs
//! `interop/redisson/target/peer.jar` (`leasehold.interop.Peer`, Redisson 4.7.0; built by
//! `scripts/build-java-peer.sh`, which `scripts/test.sh` runs) and scripts it over
//! stdin/stdout, so a test sets both sides, Java and Rust, step by step.
//!
//! The protocol (documented in full at the top of `Peer.java`): one line per command,
//! `HANDLE VERB ARGS...`; one reply line per command, `HANDLE ok [RESULT]` or
//! `HANDLE err EXCEPTION_CLASS MESSAGE`; and `event begin HANDLE VERB` when a command
//! starts on its handle's thread. Each handle is ONE Java thread, so a lock a handle
//! takes is owned by that thread (Redisson's owner field `CLIENT_ID:THREAD_ID`) and the
//! handle's `unlock` releases it with Redisson's reentrancy counting. Commands of one
//! handle run in order; different handles run at once (a blocked `lock` blocks only its
//! handle).
//!
//! Verbs: `connect single|cluster URL[,URL..] [watchdog=MS] [fairwait=MS]`, `id`,
//! `owner`; on `KIND NAME` (KIND = lock, fair, fenced, spin, read, write): `lock`,
//! `trylock WAIT [LEASE]` (WAIT -1 = one attempt), `unlock`, `forceunlock`, `islocked`,
//! `held`, `holdcount`, `ttl`; `token NAME`; `sem.set|acquire|try|release|available`,
//! `pes.set|acquire|try|release|tryrelease|available`, `latch.set|down|await|count`,
//! `multi.lock|trylock|unlock NAME,NAME,..`. Times in ms; lease -1 = watchdog mode.
//!
//! The peer process dies with the [`JavaPeer`] (kill on drop, and it exits when its
//! stdin closes); [`JavaPeer::kill`] SIGKILLs it for "a Java client died" scenarios.
//!
//! Without Java or the jar: under `CI=true` every start panics (CI must run the suite);
//! elsewhere [`JavaPeer::start`] prints why and returns `None`, and the test returns.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::Notify;

/// How long [`JavaPeer::reply`] waits for a command's reply before panicking.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A Java exception the peer answered with (`HANDLE err CLASS MESSAGE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaError {
    /// The exception's class name, e.g. `java.lang.IllegalMonitorStateException`.
    pub class: String,
    /// Its message.
    pub message: String,
}

/// One reply: the text after `ok` (empty when none), or the exception.
pub type Reply = Result<String, JavaError>;

#[derive(Default)]
struct Inbox {
    replies: HashMap<String, VecDeque<Reply>>,
    events: VecDeque<String>,
    closed: bool,
}

/// One Java process with one `RedissonClient` (after [`JavaPeer::connect`]).
pub struct JavaPeer {
    child: Child,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    inbox: Arc<(Mutex<Inbox>, Notify)>,
}

/// The peer's jar, when built. Under `CI=true` a missing jar panics.
///
/// # Panics
/// Under `CI=true` when the jar or `java` is missing.
pub fn jar() -> Option<PathBuf> {
    let mut dir = Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let mut found = None;
    while let Some(d) = dir {
        let candidate = d.join("interop/redisson/target/peer.jar");
        if d.join("interop/redisson/pom.xml").exists() {
            found = Some(candidate);
            break;
        }
        dir = d.parent().map(PathBuf::from);
    }
    let java = std::process::Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success());
    let reason = match &found {
        None => Some("interop/redisson not found".to_owned()),
        Some(_) if !java => Some("java not found".to_owned()),
        Some(path) if !path.exists() => Some(format!("{} not built (bash scripts/build-java-peer.sh)", path.display())),
        Some(_) => None,
    };
    match reason {
        None => found,
        Some(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("the Redisson Java suite must run under CI: {reason}")
        }
        Some(reason) => {
            eprintln!("SKIPPED: the Redisson Java peer is not available: {reason}");
            None
        }
    }
}

impl JavaPeer {
    /// Starts a peer (not connected yet), or `None` when Java or the jar is missing
    /// outside CI (see [`jar`]).
    ///
    /// # Panics
    /// When the process cannot be spawned, or under CI when the jar is missing.
    pub fn start() -> Option<Self> {
        let jar = jar()?;
        let mut child = Command::new("java")
            .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-jar"])
            .arg(&jar)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn java -jar {}: {e}", jar.display()));
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let inbox: Arc<(Mutex<Inbox>, Notify)> = Arc::default();
        let reader_inbox = Arc::clone(&inbox);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let (inbox, notify) = &*reader_inbox;
                {
                    let mut inbox = inbox.lock();
                    if let Some(event) = line.strip_prefix("event ") {
                        inbox.events.push_back(event.to_owned());
                    } else if let Some((handle, reply)) = parse_reply(&line) {
                        inbox.replies.entry(handle).or_default().push_back(reply);
                    } else {
                        eprintln!("java peer: unexpected line {line:?}");
                    }
                }
                notify.notify_waiters();
            }
            reader_inbox.0.lock().closed = true;
            reader_inbox.1.notify_waiters();
        });
        Some(JavaPeer { child, stdin: tokio::sync::Mutex::new(stdin), inbox })
    }

    /// Starts a peer connected to a standalone server at `url` (`redis://host:port`) with
    /// Redisson's `lockWatchdogTimeout` set to `watchdog`.
    ///
    /// # Panics
    /// When the peer cannot start or connect.
    pub async fn single(url: &str, watchdog: Duration) -> Option<Self> {
        let peer = Self::start()?;
        peer.connect(&format!("single {url} watchdog={}", watchdog.as_millis())).await;
        Some(peer)
    }

    /// Starts a peer connected to a cluster through `nodes` (`redis://host:port` each).
    ///
    /// # Panics
    /// When the peer cannot start or connect.
    pub async fn cluster(nodes: &[String], watchdog: Duration) -> Option<Self> {
        let peer = Self::start()?;
        peer.connect(&format!("cluster {} watchdog={}", nodes.join(","), watchdog.as_millis())).await;
        Some(peer)
    }

    /// Sends `connect ARGS` on handle `connect` and waits for the client; returns its id.
    ///
    /// # Panics
    /// When Redisson fails to connect.
    pub async fn connect(&self, args: &str) -> String {
        self.ok("connect", &format!("connect {args}")).await
    }

    /// Sends `HANDLE COMMAND` without waiting for the reply (read it with
    /// [`JavaPeer::reply`]).
    ///
    /// # Panics
    /// When the peer's stdin is closed.
    pub async fn send(&self, handle: &str, command: &str) {
        assert!(!handle.contains(' ') && handle != "event", "bad handle {handle:?}");
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().expect("java peer: stdin closed");
        stdin.write_all(format!("{handle} {command}\n").as_bytes()).await.expect("java peer: write");
        stdin.flush().await.expect("java peer: flush");
    }

    /// The next reply of `handle`, waiting at most `within`; `None` when none came.
    ///
    /// # Panics
    /// When the peer exited with no reply queued.
    pub async fn reply_within(&self, handle: &str, within: Duration) -> Option<Reply> {
        let deadline = tokio::time::Instant::now() + within;
        let (inbox, notify) = &*self.inbox;
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut inbox = inbox.lock();
                if let Some(reply) = inbox.replies.get_mut(handle).and_then(VecDeque::pop_front) {
                    return Some(reply);
                }
                assert!(!inbox.closed, "java peer exited before replying on {handle}");
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// Whether `handle` has a reply queued (without taking it).
    pub fn has_reply(&self, handle: &str) -> bool {
        self.inbox.0.lock().replies.get(handle).is_some_and(|q| !q.is_empty())
    }

    /// The next reply of `handle`.
    ///
    /// # Panics
    /// When none comes within [`REPLY_TIMEOUT`].
    pub async fn reply(&self, handle: &str) -> Reply {
        self.reply_within(handle, REPLY_TIMEOUT)
            .await
            .unwrap_or_else(|| panic!("java peer: no reply on {handle} within {REPLY_TIMEOUT:?}"))
    }

    /// Sends `HANDLE COMMAND` and waits for its reply.
    ///
    /// # Panics
    /// When no reply comes within [`REPLY_TIMEOUT`].
    pub async fn call(&self, handle: &str, command: &str) -> Reply {
        self.send(handle, command).await;
        self.reply(handle).await
    }

    /// [`JavaPeer::call`] that expects `ok`; returns the result text.
    ///
    /// # Panics
    /// On an `err` reply or none within [`REPLY_TIMEOUT`].
    pub async fn ok(&self, handle: &str, command: &str) -> String {
        match self.call(handle, command).await {
            Ok(result) => result,
            Err(e) => panic!("java peer: `{handle} {command}` failed: {e:?}"),
        }
    }

    /// [`JavaPeer::ok`] parsed as a bool (`true`/`false`).
    ///
    /// # Panics
    /// As [`JavaPeer::ok`], or when the result is no bool.
    pub async fn ok_bool(&self, handle: &str, command: &str) -> bool {
        let result = self.ok(handle, command).await;
        result.parse().unwrap_or_else(|_| panic!("`{handle} {command}`: not a bool: {result:?}"))
    }

    /// [`JavaPeer::ok`] parsed as an integer.
    ///
    /// # Panics
    /// As [`JavaPeer::ok`], or when the result is no integer.
    pub async fn ok_int(&self, handle: &str, command: &str) -> i64 {
        let result = self.ok(handle, command).await;
        result.parse().unwrap_or_else(|_| panic!("`{handle} {command}`: not an integer: {result:?}"))
    }

    /// The owner field (`CLIENT_ID:THREAD_ID`) of `handle`'s thread, as Redisson writes it.
    ///
    /// # Panics
    /// As [`JavaPeer::ok`].
    pub async fn owner(&self, handle: &str) -> String {
        self.ok(handle, "owner").await
    }

    /// Waits until `handle` has started a command (`event begin HANDLE ...`), consuming
    /// the events before it. Returns whether it came within `within`.
    pub async fn wait_begin(&self, handle: &str, within: Duration) -> bool {
        let prefix = format!("begin {handle} ");
        self.wait_event(within, |event| event.starts_with(&prefix)).await
    }

    /// Waits until an event line matching `matches` arrives, consuming the events up to
    /// it. Returns whether one came within `within`.
    pub async fn wait_event(&self, within: Duration, mut matches: impl FnMut(&str) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        let (inbox, notify) = &*self.inbox;
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut inbox = inbox.lock();
                while let Some(event) = inbox.events.pop_front() {
                    if matches(&event) {
                        return true;
                    }
                }
                if inbox.closed {
                    return false;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }

    /// SIGKILLs the Java process (no unlock, no clean-up: a crashed client) and waits for
    /// it to be gone.
    ///
    /// # Panics
    /// When the process cannot be killed.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill java peer");
        self.stdin.lock().await.take();
    }
}

/// `HANDLE ok [RESULT]` or `HANDLE err CLASS MESSAGE`.
fn parse_reply(line: &str) -> Option<(String, Reply)> {
    let (handle, rest) = line.split_once(' ')?;
    let reply = if rest == "ok" {
        Ok(String::new())
    } else if let Some(result) = rest.strip_prefix("ok ") {
        Ok(result.to_owned())
    } else {
        let error = rest.strip_prefix("err ")?;
        let (class, message) = error.split_once(' ').unwrap_or((error, ""));
        Err(JavaError { class: class.to_owned(), message: message.to_owned() })
    };
    Some((handle.to_owned(), reply))
}
