//! The command line, as clap reads it.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration::parse_duration;

const EXIT_CODES: &str = "\
Exit codes:
  run:     the child's own code; 128+N when signal N killed it; 124 when the lock
           was lost or taken away (or its fixed lease was about to end) and the child
           stopped; 75 when the lock was not acquired within --wait; 126/127 when CMD
           could not be executed / was not found
  hold:    0 released after a signal; 124 the lock was lost or taken away; 75 not
           acquired within --wait
  elect:   the child's own code (it exited while leading; the lead was handed
           over); 128+N as for run; 124 the lead was lost or taken away and the
           child stopped; 75 not leading within --wait; 126/127 as for run
  leader:  0 a leader (printed); 3 no leader; --watch: 0 after a signal
  unlock:  0 unlocked; 1 nothing unlocked (no lock, not a lock, or --owner
           did not hold it)
  all:     69 Redis unreachable or not answering; 64 usage error; 70 other errors
           (a key of another type, a permission or script error)";

/// Distributed locks on Redis (Redisson-compatible) from the shell: run a command
/// under a lock or while leading an election, see who holds or leads what, force a lock
/// free.
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

    /// Bound on the whole connect and on each Redis call after it (500ms, 1.5s, 2m)
    /// [default: 5s; each call a quarter of `run`'s or `hold`'s `--watchdog`, or of
    /// `elect`'s `--lease`, when that is shorter].
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
    /// Acquire NAME and hold it, with no command, until SIGTERM or SIGINT.
    #[command(after_help = EXIT_CODES)]
    Hold(HoldArgs),
    /// Show who holds NAME, its TTL, its waiters and its last fencing token.
    Status(StatusArgs),
    /// List the locks that exist (SCAN; every primary of a cluster).
    List(ListArgs),
    /// Delete NAME whoever holds it and wake its waiters.
    #[command(after_help = EXIT_CODES)]
    Unlock(UnlockArgs),
    /// Show the forced unlocks of NAME: when, by which client, which owners.
    History(crate::history::HistoryArgs),
    /// Campaign in the leader election NAME; run CMD while leading, resign when it ends.
    #[command(after_help = EXIT_CODES)]
    Elect(ElectArgs),
    /// Show who leads the election NAME (value, term, owner); --watch follows changes.
    #[command(after_help = EXIT_CODES)]
    Leader(LeaderArgs),
}

/// `leasehold elect`.
#[derive(Debug, Args)]
pub(crate) struct ElectArgs {
    /// The election's name (its keys are `leasehold_election:{NAME}` and siblings).
    pub(crate) name: String,
    /// What followers see of this leader (`leader` prints it) [default: HOST/PID of
    /// this `elect`].
    #[arg(long, value_name = "V")]
    pub(crate) value: Option<String>,
    /// The lead's lease, renewed every third of it while leading: a crashed leader is
    /// replaced within it (at least 30ms).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "10s")]
    pub(crate) lease: Duration,
    /// Wait at most this long to lead (0 = one try); default: as long as it takes.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "again")]
    pub(crate) wait: Option<Duration>,
    /// Campaign again after CMD ends or the lead is lost (queueing behind the other
    /// candidates), until SIGINT or SIGTERM.
    #[arg(long)]
    pub(crate) again: bool,
    /// When CMD is told to stop (the lead lost, SIGTERM or SIGINT to `elect`): time
    /// between SIGTERM and SIGKILL to CMD's process group.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
    pub(crate) grace: Duration,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<OsString>,
}

impl ElectArgs {
    /// The value to campaign with: `--value`, or `HOST/PID`.
    pub(crate) fn value_or_default(&self) -> String {
        self.value.clone().unwrap_or_else(|| format!("{}/{}", crate::host::host_name(), std::process::id()))
    }
}

/// `leasehold leader`.
#[derive(Debug, Args)]
pub(crate) struct LeaderArgs {
    /// The election's name.
    pub(crate) name: String,
    /// Follow every change (one line each, first the current state) until a signal.
    #[arg(long)]
    pub(crate) watch: bool,
    /// One JSON object per line (fields in docs/cli.md).
    #[arg(long)]
    pub(crate) json: bool,
}

/// The lock (or permit) `run` and `hold` take, and how: their shared flags.
#[derive(Debug, Args)]
pub(crate) struct LockFlags {
    /// The lock's name (its Redis key).
    pub(crate) name: String,
    /// Wait at most this long for the lock (0 = one try); default: as long as it takes.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) wait: Option<Duration>,
    /// Hold the lock for this fixed lease (never renewed; its end is a loss); default:
    /// watchdog mode.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, conflicts_with = "watchdog")]
    pub(crate) lease: Option<Duration>,
    /// Watchdog mode's lease, renewed every third of it while held (default 30s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) watchdog: Option<Duration>,
    /// A fenced lock: `run` gives CMD its token in `LEASEHOLD_FENCING_TOKEN`, `hold`
    /// prints it.
    #[arg(long, conflicts_with = "fair")]
    pub(crate) fenced: bool,
    /// A fair lock: granted in the order the waiters queued.
    #[arg(long)]
    pub(crate) fair: bool,
    /// A fleet-wide semaphore of N permits instead of a lock: at most N holders of NAME
    /// at once (a leased permit: a crashed holder's comes back when its lease ends).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with_all = ["fenced", "fair"])]
    pub(crate) permits: Option<u32>,
}

/// `leasehold run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The lock and how it is taken.
    #[command(flatten)]
    pub(crate) lock: LockFlags,
    /// When CMD is told to stop (the lock lost, SIGTERM or SIGINT to `run`, the stop
    /// margin reached): time between SIGTERM and SIGKILL to CMD's process group.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
    pub(crate) grace: Duration,
    /// With --lease: stop CMD this long before the lease ends (0 = when it ends)
    /// [default: a tenth of the lease, at least 1s and at most 1m, at most half of it].
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "lease")]
    pub(crate) stop_margin: Option<Duration>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<OsString>,
}

impl RunArgs {
    /// How long before a fixed lease ends CMD is told to stop: `--stop-margin`, or the
    /// default for `--lease`; `None` in watchdog mode (the lease is renewed).
    ///
    /// # Errors
    /// A margin not shorter than the lease (CMD could never start before it).
    pub(crate) fn stop_margin_or_default(&self) -> Result<Option<Duration>, String> {
        let Some(lease) = self.lock.lease else { return Ok(None) };
        match self.stop_margin {
            None => Ok(Some(default_stop_margin(lease))),
            Some(margin) if margin >= lease && !lease.is_zero() => Err(format!(
                "--stop-margin {} ms is not shorter than --lease {} ms",
                margin.as_millis(),
                lease.as_millis()
            )),
            Some(margin) => Ok(Some(margin)),
        }
    }
}

/// The default `--stop-margin` for a fixed `lease`: a tenth of it, at least 1 s (a
/// margin must outlast a Redis round trip and a scheduling delay), at most 1 min (a long
/// lease need not give up a tenth of its time), and never more than half the lease (a
/// short lease keeps half of itself for CMD). See docs/cli.md.
pub(crate) fn default_stop_margin(lease: Duration) -> Duration {
    (lease / 10).clamp(Duration::from_secs(1), Duration::from_secs(60)).min(lease / 2)
}

/// `leasehold hold`.
#[derive(Debug, Args)]
pub(crate) struct HoldArgs {
    /// The lock and how it is taken.
    #[command(flatten)]
    pub(crate) lock: LockFlags,
}

impl Command {
    /// The checks clap cannot make, before connecting: the usage error's message.
    pub(crate) fn check(&self) -> Result<(), String> {
        match self {
            Command::Run(run) => run.stop_margin_or_default().map(drop),
            Command::Elect(elect) => {
                check_election_name(&elect.name)?;
                check_election_lease(elect.lease)?;
                let value = elect.value_or_default();
                lock_core::election::check_value(value.as_bytes()).map_err(|error| error.to_string())
            }
            Command::Leader(leader) => check_election_name(&leader.name),
            Command::Status(status) if status.election => check_election_name(&status.name),
            Command::Unlock(unlock) if unlock.election => check_election_name(&unlock.name),
            _ => Ok(()),
        }
    }

    /// The lease a command's Redis calls must fit in (`--timeout` defaults to a quarter
    /// of it): `run`'s and `hold`'s `--watchdog`, `elect`'s `--lease`.
    pub(crate) fn lease_to_fit(&self) -> Option<Duration> {
        match self {
            Command::Elect(elect) => Some(elect.lease),
            _ => self.watchdog(),
        }
    }

    /// The watchdog lease `run` or `hold` asks for.
    pub(crate) fn watchdog(&self) -> Option<Duration> {
        match self {
            Command::Run(run) => run.lock.watchdog,
            Command::Hold(hold) => hold.lock.watchdog,
            _ => None,
        }
    }
}

/// An election's name is not empty (the library would refuse it, but only once
/// connected).
fn check_election_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an election's name is not empty".to_owned());
    }
    Ok(())
}

/// `elect --lease`: what the library accepts (at least 30 ms, at most a year), checked
/// before connecting.
fn check_election_lease(lease: Duration) -> Result<(), String> {
    let min = leasehold::ElectionConfig::MIN_LEASE;
    if lease < min {
        return Err(format!(
            "--lease {} ms: an election's lease is at least {} ms",
            lease.as_millis(),
            min.as_millis()
        ));
    }
    lock_core::args::lease_millis(lease, "--lease").map(drop).map_err(|error| error.to_string())
}

/// `leasehold status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The lock's name (its Redis key), or with --election the election's name.
    pub(crate) name: String,
    /// NAME is an election's: show its lead (`leasehold_election:{NAME}`), leader and
    /// waiting candidates.
    #[arg(long)]
    pub(crate) election: bool,
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
    /// The lock's name (its Redis key), or with --election the election's name.
    pub(crate) name: String,
    /// NAME is an election's: force its lead to end (`force_resign`: the leader's
    /// `elect` stops its command, followers are told).
    #[arg(long, conflicts_with = "owner")]
    pub(crate) election: bool,
    /// Required: say that you mean it (the holder is not asked).
    #[arg(long, required = true)]
    pub(crate) force: bool,
    /// Only if this owner (`UUID:N`, or `UUID-N` for a simple lock) holds it.
    #[arg(long, value_name = "ID")]
    pub(crate) owner: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::default_stop_margin;
    use std::time::Duration;

    #[test]
    fn the_default_stop_margin_is_a_bounded_tenth() {
        let s = Duration::from_secs;
        assert_eq!(default_stop_margin(s(30)), s(3));
        assert_eq!(default_stop_margin(s(5)), s(1), "at least 1 s");
        assert_eq!(default_stop_margin(s(1)), Duration::from_millis(500), "at most half the lease");
        assert_eq!(default_stop_margin(s(3600)), s(60), "at most 1 min");
    }
}
