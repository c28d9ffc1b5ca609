//! A throwaway `redis-server` per test (or per test binary).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const INSTALL_HINT: &str = "redis-server was not found on PATH. Install it first: \
`sudo apt-get install -y redis-server` on Debian/Ubuntu, `brew install redis` on macOS \
(or run `bash scripts/test.sh`, which installs it when missing).";

/// How to start a [`RedisServer`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Extra `--name value` arguments for redis-server. Default: none.
    pub extra_args: Vec<String>,
    /// Serve on this port instead of a free one. Default: `None` (pick a free port).
    pub port: Option<u16>,
    /// Also serve TLS on a second free port (`--tls-port`) with these files. Default:
    /// `None` (plaintext only).
    pub tls: Option<TlsFiles>,
    /// The `redis-server` to run. Default: `None` (`redis-server` on `PATH`). A server
    /// before 7.0 is started without the options it lacks (`--enable-debug-command`).
    /// A `valkey-server` works too (its `--version` reads `Valkey server v=9.1.2 …`, and
    /// it takes every option Redis 7 takes).
    pub binary: Option<PathBuf>,
}

/// PEM files for a [`RedisServer`]'s TLS port (`--tls-cert-file`, `--tls-key-file`,
/// `--tls-ca-cert-file`). Clients are not asked for a certificate (`--tls-auth-clients no`).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// The server certificate's private key.
    pub key: PathBuf,
    /// The CA certificate (redis-server requires one even when clients do not authenticate).
    pub ca: PathBuf,
}

impl ServerOptions {
    /// Adds `--name value` to the command line.
    #[must_use]
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.extra_args.push(format!("--{name}"));
        self.extra_args.push(value.to_owned());
        self
    }

    /// Runs `binary` instead of the `redis-server` on `PATH`.
    #[must_use]
    pub fn binary(mut self, binary: impl Into<PathBuf>) -> Self {
        self.binary = Some(binary.into());
        self
    }

    /// The major version of the server these options run (`redis-server --version`).
    ///
    /// # Errors
    /// When the binary cannot be run or its version not read.
    pub fn major_version(&self) -> Result<u32, String> {
        major_version(self.binary.as_deref().unwrap_or(Path::new("redis-server")))
    }

    /// Also serves TLS with `files` on a second port ([`RedisServer::tls_port`]). The
    /// plaintext port stays open: the harness checks readiness and sends raw commands
    /// there.
    #[must_use]
    pub fn tls(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }
}

/// A `redis-server` child process on 127.0.0.1, killed (and its temp dir removed) on drop.
///
/// It runs with no persistence (`--save ""`, no AOF), so a restart loses every key, and
/// with `--enable-debug-command local` so tests can use `DEBUG SLEEP`.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    tls_port: Option<u16>,
    dir: PathBuf,
    options: ServerOptions,
    stopped: bool,
    /// The process group the server runs in (a topology's [`Reaper`](crate::reaper::Reaper)
    /// group), or `None` for the test's own.
    group: Option<u32>,
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl RedisServer {
    /// Starts a server on a free port.
    ///
    /// # Panics
    /// When `redis-server` is not installed (the message says how to install it) or
    /// does not come up within 10 s. This is test support: a panic fails the test.
    pub fn start() -> Self {
        Self::start_with(ServerOptions::default())
    }

    /// Starts a server with `options`.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub fn start_with(options: ServerOptions) -> Self {
        let dir = make_temp_dir();
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = options.port.unwrap_or_else(free_port);
            let tls_port = options.tls.as_ref().map(|_| free_port());
            match spawn(port, tls_port, &dir, &options, None) {
                Ok(child) => {
                    return RedisServer {
                        child: Some(child),
                        port,
                        tls_port,
                        dir,
                        options,
                        stopped: false,
                        group: None,
                    };
                }
                Err(error) => last_error = error,
            }
        }
        let binary = options.binary.as_deref().unwrap_or(Path::new("redis-server"));
        panic!("could not start {}: {last_error}", binary.display());
    }

    /// One attempt to start a server in `dir` on `options.port` (which must be set),
    /// in process group `group`: the topologies pick their ports (a cluster node needs
    /// two) and retry themselves.
    pub(crate) fn try_start_in(dir: PathBuf, options: ServerOptions, group: Option<u32>) -> Result<Self, String> {
        let port = options.port.ok_or("try_start_in needs a port")?;
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let child = spawn(port, None, &dir, &options, group)?;
        Ok(RedisServer { child: Some(child), port, tls_port: None, dir, options, stopped: false, group })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The TLS port, when started with [`ServerOptions::tls`].
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// `rediss://127.0.0.1:TLS_PORT`.
    ///
    /// # Panics
    /// When the server was started without [`ServerOptions::tls`].
    pub fn tls_url(&self) -> String {
        let port = self.tls_port.unwrap_or_else(|| panic!("this server was started without ServerOptions::tls"));
        format!("rediss://127.0.0.1:{port}")
    }

    /// Kills the server (`SIGKILL`) and starts a fresh one on the same port: every key
    /// is gone, as after a crash without persistence.
    ///
    /// # Panics
    /// When the new server does not come up.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match spawn(self.port, self.tls_port, &self.dir, &self.options, self.group) {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                Err(error) if Instant::now() > deadline => panic!("restart failed: {error}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Kills the server now (`SIGKILL`).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.stopped {
                signal(&child, "CONT");
                self.stopped = false;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server process (`SIGSTOP`): connections stay open, nothing answers,
    /// keys do not expire.
    pub fn pause(&mut self) {
        if let Some(child) = &self.child {
            signal(child, "STOP");
            self.stopped = true;
        }
    }

    /// Resumes a paused server (`SIGCONT`).
    pub fn resume(&mut self) {
        if let Some(child) = &self.child {
            signal(child, "CONT");
            self.stopped = false;
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn signal(child: &Child, name: &str) {
    let _ = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status();
}

pub(crate) fn make_temp_dir() -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("leasehold-redis-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

fn spawn(
    port: u16,
    tls_port: Option<u16>,
    dir: &Path,
    options: &ServerOptions,
    group: Option<u32>,
) -> Result<Child, String> {
    let binary = options.binary.as_deref().unwrap_or(Path::new("redis-server"));
    let mut command = Command::new(binary);
    if let Some(group) = group {
        use std::os::unix::process::CommandExt;
        // The reaper's group: killed as a whole when the reaper's watch ends.
        command.process_group(i32::try_from(group).map_err(|_| format!("bad process group {group}"))?);
    }
    command.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]).args([
        "--protected-mode",
        "no",
        "--logfile",
        "redis.log",
    ]);
    // `DEBUG` is refused by default from 7.0 on; before 7.0 it is always allowed and the
    // option does not exist.
    if options.binary.is_none() || major_version(binary)? >= 7 {
        command.args(["--enable-debug-command", "local"]);
    }
    if let (Some(tls_port), Some(files)) = (tls_port, &options.tls) {
        command.args(["--tls-port", &tls_port.to_string(), "--tls-auth-clients", "no"]);
        command.arg("--tls-cert-file").arg(&files.cert);
        command.arg("--tls-key-file").arg(&files.key);
        command.arg("--tls-ca-cert-file").arg(&files.ca);
    }
    command.args(&options.extra_args).current_dir(dir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
        Err(e) => return Err(format!("spawn redis-server: {e}")),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
            return Err(format!("redis-server exited with {status} on port {port}: {log}"));
        }
        if ping(port) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("redis-server on port {port} did not answer PING within 10 s"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The major version `binary --version` prints (`Redis server v=7.0.15 …`), read once
/// per binary.
fn major_version(binary: &Path) -> Result<u32, String> {
    static SEEN: std::sync::Mutex<Vec<(PathBuf, u32)>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, major)) = seen.iter().find(|(path, _)| path == binary) {
        return Ok(*major);
    }
    let output = match Command::new(binary).arg("--version").output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && binary == Path::new("redis-server") => {
            panic!("{INSTALL_HINT}")
        }
        Err(e) => return Err(format!("{} --version: {e}", binary.display())),
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let major = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .and_then(|version| version.split('.').next())
        .and_then(|major| major.parse().ok())
        .ok_or_else(|| format!("{} --version printed no version: {text}", binary.display()))?;
    seen.push((binary.to_owned(), major));
    Ok(major)
}

/// [`ping`] on `127.0.0.1:PORT` given as text.
pub(crate) fn ping_addr(addr: &str) -> bool {
    addr.rsplit(':').next().and_then(|p| p.parse().ok()).is_some_and(ping)
}

/// Whether the server answers on `port`: `+PONG`, or `-NOAUTH` from a server that
/// requires a password (`--requirepass`), which is up all the same.
pub(crate) fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).is_ok() && (&buf == b"+PONG\r\n" || &buf == b"-NOAUTH")
}
