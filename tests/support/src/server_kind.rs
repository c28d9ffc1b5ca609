//! Which server a standalone test runs on: Redis (the `redis-server` on `PATH`) or
//! Valkey (the `valkey-server` that `LEASEHOLD_VALKEY_SERVER` names, which
//! `scripts/ensure-valkey.sh` fetches), with [`both_servers!`](crate::both_servers) to
//! run one test body on each.

use std::path::PathBuf;

use crate::{RedisServer, ServerOptions};

/// The variable that names the Valkey binary.
pub const VALKEY_SERVER_VAR: &str = "LEASEHOLD_VALKEY_SERVER";

/// A kind of server to start for a standalone test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `redis-server` on `PATH` (Redis 7.0 in CI).
    Redis,
    /// The `valkey-server` named by [`VALKEY_SERVER_VAR`] (Valkey 9.1 in CI).
    Valkey,
}

impl ServerKind {
    /// Whether a test of this kind can run here. Always for Redis. For Valkey, when
    /// [`VALKEY_SERVER_VAR`] is unset: under CI (`CI` set to anything but `false` or
    /// `0`) this panics, so a CI run never skips the Valkey tests silently; elsewhere it
    /// prints a note and returns `false` (the test passes without running).
    ///
    /// # Panics
    /// Under CI, when the Valkey binary is not set.
    pub fn available(self) -> bool {
        if self == ServerKind::Redis || std::env::var_os(VALKEY_SERVER_VAR).is_some() {
            return true;
        }
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "{VALKEY_SERVER_VAR} is not set, and the Valkey tests must run in CI: \
             run `bash scripts/test.sh`, or `source scripts/ensure-valkey.sh` first"
        );
        eprintln!(
            "note: this Valkey test did not run: {VALKEY_SERVER_VAR} is not set \
             (`source scripts/ensure-valkey.sh` sets it; `bash scripts/test.sh` does that)"
        );
        false
    }

    /// Options that start this kind of server: the defaults for Redis, the Valkey
    /// binary for Valkey.
    ///
    /// # Panics
    /// For Valkey, when [`VALKEY_SERVER_VAR`] is unset (check [`ServerKind::available`]
    /// first) or names a binary that is not a Valkey server.
    pub fn options(self) -> ServerOptions {
        match self {
            ServerKind::Redis => ServerOptions::default(),
            ServerKind::Valkey => ServerOptions::default().binary(valkey_binary()),
        }
    }

    /// Starts a server of this kind on a free port.
    ///
    /// # Panics
    /// As [`ServerKind::options`] and [`RedisServer::start_with`].
    pub fn start(self) -> RedisServer {
        RedisServer::start_with(self.options())
    }
}

/// The Valkey binary, checked once per process to be one: a variable pointing at a
/// redis-server would otherwise pass every Valkey test on Redis.
fn valkey_binary() -> PathBuf {
    static CHECKED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let binary = std::env::var_os(VALKEY_SERVER_VAR)
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("{VALKEY_SERVER_VAR} is not set: `source scripts/ensure-valkey.sh`"));
            let output = std::process::Command::new(&binary)
                .arg("--version")
                .output()
                .unwrap_or_else(|e| panic!("{VALKEY_SERVER_VAR}={}: cannot run it: {e}", binary.display()));
            let version = String::from_utf8_lossy(&output.stdout);
            assert!(
                version.starts_with("Valkey server"),
                "{VALKEY_SERVER_VAR}={} is not a Valkey server: `--version` printed {version:?}",
                binary.display()
            );
            binary
        })
        .clone()
}

/// Two `#[tokio::test]`s (multi-thread, 2 workers unless `worker_threads = N` follows
/// the name; one thread with `current_thread`) for the test body `async fn NAME(server: ServerKind)`, which starts its
/// servers with [`ServerKind::start`] or [`ServerKind::options`]: `NAME::redis` and
/// `NAME::valkey` (which runs only when [`ServerKind::available`] says so).
#[macro_export]
macro_rules! both_servers {
    ($name:ident) => {
        $crate::both_servers!($name, worker_threads = 2);
    };
    ($name:ident, current_thread) => {
        mod $name {
            #[tokio::test]
            async fn redis() {
                super::$name($crate::ServerKind::Redis).await;
            }

            #[tokio::test]
            async fn valkey() {
                if $crate::ServerKind::Valkey.available() {
                    super::$name($crate::ServerKind::Valkey).await;
                }
            }
        }
    };
    ($name:ident, worker_threads = $workers:literal) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = $workers)]
            async fn redis() {
                super::$name($crate::ServerKind::Redis).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = $workers)]
            async fn valkey() {
                if $crate::ServerKind::Valkey.available() {
                    super::$name($crate::ServerKind::Valkey).await;
                }
            }
        }
    };
}
