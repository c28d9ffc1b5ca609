//! The command line, as clap reads it.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration::parse_duration;

const EXIT_CODES: &str = "\
Exit codes:
  run:     the child's own code; 128+N when signal N killed it; 124 when the lock
           was lost and the child stopped; 75 when the lock was not acquired within
           --wait; 126/127 when CMD could not be executed / was not found
  unlock:  0 unlocked; 1 nothing unlocked (no lock, not a lock, or --owner
           did not hold it)
  all:     69 Redis unreachable or not answering; 64 usage error; 70 other errors
           (a key of another type, a permission or script error)";

/// Distributed locks on Redis (Redisson-compatible) from the shell: run a command
/// under a lock, see who holds what, force a lock free.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// Redis URL, as the leasehold library takes it: redis://, rediss:// (TLS),
    /// redis-cluster://, redis-sentinel://, with user:password@ for ACLs.
    #[arg(
        long,
        global = true,
        env = "LEASEHOLD_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379"
    )]
    pub(crate) url: String,

    /// Bound on connecting and on each Redis call [default: 5s, or a quarter of
    /// `run --watchdog` when that is shorter].
    #[arg(long, global = true, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Acquire NAME, run CMD while holding it, release it after CMD exits.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Show who holds NAME, its TTL, its waiters and its last fencing token.
    Status(StatusArgs),
    /// List the locks that exist (SCAN; every primary of a cluster).
    List(ListArgs),
    /// Delete NAME whoever holds it and wake its waiters.
    #[command(after_help = EXIT_CODES)]
    Unlock(UnlockArgs),
    /// Show the forced unlocks of NAME: when, by which client, which owners.
    History(crate::history::HistoryArgs),
}

/// `leasehold run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lock's name (its Redis key).
    pub(crate) name: String,
    /// Wait at most this long for the lock (0 = one try); default: as long as it takes.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) wait: Option<Duration>,
    /// Hold the lock for this fixed lease (never renewed); default: watchdog mode.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "watchdog")]
    pub(crate) lease: Option<Duration>,
    /// Watchdog mode's lease, renewed every third of it while CMD runs (default 30s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) watchdog: Option<Duration>,
    /// A fenced lock: CMD gets its token in `LEASEHOLD_FENCING_TOKEN`.
    #[arg(long, conflicts_with = "fair")]
    pub(crate) fenced: bool,
    /// A fair lock: granted in the order the waiters queued.
    #[arg(long)]
    pub(crate) fair: bool,
    /// When the lock is lost: time between SIGTERM and SIGKILL to CMD's process group.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
    pub(crate) grace: Duration,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<OsString>,
}

/// `leasehold status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The lock's name (its Redis key).
    pub(crate) name: String,
    /// One JSON object on stdout (fields in docs/cli.md).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `leasehold list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// A SCAN MATCH pattern for lock names (default: every key).
    #[arg(default_value = "*")]
    pub(crate) pattern: String,
    /// One JSON array on stdout (fields in docs/cli.md).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `leasehold unlock`.
#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    /// The lock's name (its Redis key).
    pub(crate) name: String,
    /// Required: say that you mean it (the holder is not asked).
    #[arg(long, required = true)]
    pub(crate) force: bool,
    /// Only if this owner (`UUID:N`, or `UUID-N` for a simple lock) holds it.
    #[arg(long, value_name = "ID")]
    pub(crate) owner: Option<String>,
}
