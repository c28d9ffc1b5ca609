//! `leasehold run`: acquire, run the child in its own process group (so that it dies
//! with `run`: `child.rs`), forward signals, stop the child when `run` is told to stop,
//! before a fixed lease ends and when the lock is lost, release after the child is
//! reaped.

use std::ffi::OsStr;
use std::time::Duration;

use leasehold::Client;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::signal::unix::{signal, Signal as Listener, SignalKind};
use tokio::time::Instant;

use crate::args::LockFlags;
use crate::args::RunArgs;
use crate::child;
use crate::exit;
use crate::held::{self, Held, Released};

/// The four signals `run` passes on to the child's process group (`hold` takes them
/// as its end).
pub(crate) struct Forwarded {
    listeners: [(Listener, Signal); 4],
}

impl Forwarded {
    /// Installs the handlers: from here on these signals no longer end `run` itself.
    pub(crate) fn install() -> std::io::Result<Forwarded> {
        Ok(Forwarded {
            listeners: [
                (signal(SignalKind::interrupt())?, Signal::SIGINT),
                (signal(SignalKind::terminate())?, Signal::SIGTERM),
                (signal(SignalKind::hangup())?, Signal::SIGHUP),
                (signal(SignalKind::quit())?, Signal::SIGQUIT),
            ],
        })
    }

    /// The next of the four signals to arrive.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal not yet taken stays pending in its listener.
    pub(crate) async fn next(&mut self) -> Signal {
        let [(a, sa), (b, sb), (c, sc), (d, sd)] = &mut self.listeners;
        tokio::select! {
            _ = a.recv() => *sa,
            _ = b.recv() => *sb,
            _ = c.recv() => *sc,
            _ = d.recv() => *sd,
        }
    }
}

/// Acquires as `spec` says, ending the wait on the first forwarded signal: the hold, or
/// the exit code (75 when `--wait` ran out, 128+N for signal N, an error's code), the
/// reason already on stderr.
///
/// # Cancel safety
/// Dropping the future leaves the wait queue (the library's cancel safety).
pub(crate) async fn acquire_until_signal(
    client: &Client,
    spec: &LockFlags,
    signals: &mut Forwarded,
) -> Result<Held, u8> {
    let acquired = tokio::select! {
        acquired = held::acquire(client, spec) => acquired,
        // Nothing to pass the signal on to yet: end as the signal would have ended us.
        // Dropping the acquire leaves the wait queue (the library's cancel safety).
        sig = signals.next() => return Err(128 + sig as u8),
    };
    match acquired {
        Ok(Some(held)) => Ok(held),
        Ok(None) => {
            eprintln!(
                "leasehold: `{}` not acquired within {} ms",
                spec.name,
                spec.wait.unwrap_or_default().as_millis()
            );
            Err(exit::NOT_ACQUIRED)
        }
        Err(error) => {
            eprintln!("leasehold: cannot acquire `{}`: {error}", spec.name);
            Err(exit::for_error(&error))
        }
    }
}

/// Runs `leasehold run`; returns the exit code.
pub(crate) async fn run(client: &Client, args: RunArgs) -> u8 {
    // Before anything else, so that a signal during the wait is ours to handle.
    let mut signals = match Forwarded::install() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("leasehold: cannot install signal handlers: {error}");
            return exit::SOFTWARE;
        }
    };
    // Checked before connecting (`Command::check`); `None` again here is watchdog mode.
    let margin = args.stop_margin_or_default().unwrap_or_default();
    let spec = &args.lock;
    let held = match acquire_until_signal(client, spec, &mut signals).await {
        Ok(held) => held,
        Err(code) => return code,
    };
    let (supervised, group) = supervise(client, &held, &args, margin, &mut signals).await;
    let kill_leftovers = || {
        if let Some(group) = group {
            // Members CMD left behind would run on unlocked. ESRCH: none.
            let _ = killpg(group, Signal::SIGKILL);
        }
    };
    match supervised {
        Supervised::Lost => {
            kill_leftovers();
            // Nothing to give back: the lock is gone (or another owner has it).
            drop(held);
            exit::LOST
        }
        Supervised::Stopped => {
            kill_leftovers();
            // Still held (the margin is before the lease's end): give it back early.
            let _ = held.release(&args.lock.name).await;
            exit::LOST
        }
        Supervised::Exited(code) => match held.release(&args.lock.name).await {
            Released::Done => code,
            Released::Lost => {
                kill_leftovers();
                eprintln!(
                    "leasehold: `{}` was no longer held when the command exited (taken away, or its lease ran out)",
                    args.lock.name
                );
                exit::LOST
            }
        },
    }
}

/// How the child's run ended.
enum Supervised {
    /// The child was reaped while the lock was held; `run` exits with this code unless
    /// the release finds the lock gone.
    Exited(u8),
    /// The child was stopped because the fixed lease was about to end (`--stop-margin`).
    Stopped,
    /// The lock was lost and the child stopped.
    Lost,
}

/// How often a fixed lease's hold is checked on the server (it has no renewal that
/// would find a forced unlock): as often as the default watchdog renews, or three
/// times per lease when that is shorter.
fn check_period(lease: Duration) -> Duration {
    (lease / 3).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// Spawns the child and waits for it, forwarding signals, stopping it (SIGTERM, then
/// SIGKILL `--grace` later) when `run` gets SIGINT or SIGTERM, when the fixed lease is
/// `margin` from its end, and when the lock is lost or, with a fixed lease, found taken
/// away. Returns how it ended and the child's process group.
async fn supervise(
    client: &Client,
    held: &Held,
    args: &RunArgs,
    margin: Option<Duration>,
    signals: &mut Forwarded,
) -> (Supervised, Option<Pid>) {
    let Some(program) = args.cmd.first() else {
        // clap requires CMD; kept as a usage error rather than a panic.
        return (Supervised::Exited(exit::USAGE), None);
    };
    let token = held.token().map(|token| token.to_string());
    let (owner_var, owner) = held.owner_var();
    let mut env: Vec<(&str, &OsStr)> =
        vec![("LEASEHOLD_LOCK_NAME", OsStr::new(&args.lock.name)), (owner_var, OsStr::new(owner))];
    if let Some(token) = &token {
        env.push(("LEASEHOLD_FENCING_TOKEN", OsStr::new(token)));
    }
    let child::Spawned { mut child, group, guard } = match child::spawn(&args.cmd, &env) {
        Ok(spawned) => spawned,
        Err(error) => {
            eprintln!("leasehold: cannot start {}: {error}", program.to_string_lossy());
            return (Supervised::Exited(exit::SOFTWARE), None);
        }
    };
    let send = |sig: Signal| {
        if let Some(group) = group {
            // ESRCH: the group is gone already; nothing to do.
            let _ = killpg(group, sig);
        }
    };
    let now = Instant::now();
    let never = lock_core::args::far_future(now);
    // A fixed lease: SIGTERM `margin` before its end, SIGKILL no later than its end.
    let lease_end = Instant::from_std(held.lease_deadline());
    let stop_at = margin.map(|margin| lease_end.checked_sub(margin).unwrap_or(now));
    let stop = tokio::time::sleep_until(stop_at.unwrap_or(never));
    let kill = tokio::time::sleep_until(never);
    // A fixed lease on a lock (a permit has no such check): `None` from the check is
    // unknown (an error), and the lease bounds the hold anyway.
    let taken = async {
        let Some(lease) = args.lock.lease.filter(|_| args.lock.permits.is_none()) else {
            return std::future::pending().await;
        };
        let mut every = tokio::time::interval_at(now + check_period(lease), check_period(lease));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if held.still_held(client).await == Some(false) {
                return;
            }
        }
    };
    tokio::pin!(stop, kill, taken);
    let (mut lost, mut stopped, mut kill_armed, mut killed) = (false, false, false, false);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            sig = signals.next() => {
                send(sig);
                if matches!(sig, Signal::SIGINT | Signal::SIGTERM) {
                    arm(&mut kill_armed, kill.as_mut(), lock_core::args::instant_after(Instant::now(), args.grace));
                }
            }
            () = held.lost(), if !lost => {
                lost = true;
                send(Signal::SIGTERM);
                let now = Instant::now();
                let at = arm(&mut kill_armed, kill.as_mut(), lock_core::args::instant_after(now, args.grace));
                eprintln!(
                    "leasehold: lock `{}` lost: SIGTERM to the command, SIGKILL in {:?}",
                    args.lock.name,
                    at.saturating_duration_since(now)
                );
            }
            () = &mut taken, if !lost => {
                lost = true;
                send(Signal::SIGTERM);
                let now = Instant::now();
                let at = arm(&mut kill_armed, kill.as_mut(), lock_core::args::instant_after(now, args.grace));
                eprintln!(
                    "leasehold: lock `{}` taken away (its owner no longer holds it: a forced unlock?): \
                     SIGTERM to the command, SIGKILL in {:?}",
                    args.lock.name,
                    at.saturating_duration_since(now)
                );
            }
            () = &mut stop, if stop_at.is_some() && !stopped => {
                stopped = true;
                let now = Instant::now();
                let at = lock_core::args::instant_after(now, args.grace).min(lease_end);
                eprintln!(
                    "leasehold: the lease of `{}` ends in {:?}: SIGTERM to the command, SIGKILL in {:?}",
                    args.lock.name,
                    lease_end.saturating_duration_since(now),
                    at.saturating_duration_since(now)
                );
                send(Signal::SIGTERM);
                arm(&mut kill_armed, kill.as_mut(), at);
            }
            () = &mut kill, if kill_armed && !killed => {
                killed = true;
                send(Signal::SIGKILL);
            }
        }
    };
    if let Some(guard) = guard {
        guard.disarm().await;
    }
    if lost || held.is_lost() {
        if !lost {
            eprintln!("leasehold: lock `{}` lost while the command ran", args.lock.name);
        }
        return (Supervised::Lost, group);
    }
    if stopped {
        return (Supervised::Stopped, group);
    }
    let code = match status {
        Ok(status) => exit::for_child(status),
        Err(error) => {
            eprintln!("leasehold: waiting for the command failed: {error}");
            exit::SOFTWARE
        }
    };
    (Supervised::Exited(code), group)
}

/// Sets the SIGKILL timer to `at`, or keeps it if it is set earlier already; returns
/// when it fires.
fn arm(armed: &mut bool, mut kill: std::pin::Pin<&mut tokio::time::Sleep>, at: Instant) -> Instant {
    if !*armed || at < kill.deadline() {
        kill.as_mut().reset(at);
    }
    *armed = true;
    kill.deadline()
}
