//! CMD's life under a hold, shared by `run` (a lock or a permit) and `elect` (a lead):
//! start it in its own process group through `child.rs` (so that it dies with us),
//! pass signals on, stop it (SIGTERM, then SIGKILL `--grace` later) when we are told to
//! end or when the hold orders it (lost, taken away, a fixed lease's margin), reap it,
//! and end its guard. What the hold is, and what its end means for the exit code, is
//! the caller's.

use std::ffi::{OsStr, OsString};
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::time::{Instant, Sleep};

use crate::child;
use crate::exit;
use crate::signals::{is_termination, Forwarded};

/// Why the hold wants CMD stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopKind {
    /// The hold is gone: lost, found taken away, expired.
    Lost,
    /// A fixed lease is about to end (`run --stop-margin`): still held, for now.
    Margin,
}

/// One order from the hold to stop CMD.
pub(crate) struct StopOrder {
    pub(crate) kind: StopKind,
    /// What happened, for the line on stderr (`lock `x` lost`); the supervisor adds
    /// when SIGKILL follows.
    pub(crate) why: String,
    /// SIGKILL no later than this, even if `--grace` is longer (a fixed lease's end).
    pub(crate) kill_by: Option<Instant>,
}

impl StopOrder {
    /// The hold is gone: SIGTERM now, SIGKILL `--grace` later.
    pub(crate) fn lost(why: String) -> StopOrder {
        StopOrder { kind: StopKind::Lost, why, kill_by: None }
    }
}

/// The hold's stop orders, in the order they come (each kind is acted on once).
pub(crate) type Stops<'a> = futures_util::stream::SelectAll<futures_util::stream::LocalBoxStream<'a, StopOrder>>;

/// A stream of one order, when `order` resolves.
pub(crate) fn once<'a>(order: impl std::future::Future<Output = StopOrder> + 'a) -> Stops<'a> {
    futures_util::stream::select_all([futures_util::stream::once(order).boxed_local()])
}

/// How CMD's run ended.
pub(crate) struct Supervised {
    /// The exit code CMD's end stands for: its own code, 128+N for signal N, 70 when it
    /// could not be started or waited for.
    pub(crate) code: u8,
    /// CMD ran (the trampoline was started).
    pub(crate) started: bool,
    /// A [`StopKind::Lost`] order came while it ran.
    pub(crate) lost: bool,
    /// A [`StopKind::Margin`] order came while it ran.
    pub(crate) stopped: bool,
    /// We were asked to end (SIGINT or SIGTERM, passed on to CMD) while it ran.
    pub(crate) terminated: bool,
    /// CMD's process group.
    group: Option<Pid>,
}

impl Supervised {
    /// SIGKILL to what is left of CMD's process group: members CMD left behind would
    /// run on without the hold. ESRCH (none left) is fine.
    pub(crate) fn kill_leftovers(&self) {
        if let Some(group) = self.group {
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

/// Starts `cmd` (its program first) with `env` added, and waits for it: each of the
/// four signals is passed on to its process group; after SIGINT or SIGTERM, and after
/// each of the hold's `stops`, SIGTERM is sent and SIGKILL follows `grace` later (or at
/// the order's `kill_by`, if earlier) unless it has exited. Returns once it is reaped,
/// with its guard ended (so that members it left behind are not killed by it).
///
/// # Cancel safety
/// Not meant to be cancelled: dropping the future drops CMD's guard, which then kills
/// its process group (the safe side).
pub(crate) async fn supervise(
    cmd: &[OsString],
    env: &[(&str, &OsStr)],
    grace: Duration,
    signals: &mut Forwarded,
    mut stops: Stops<'_>,
) -> Supervised {
    let mut ran = Supervised {
        code: exit::SOFTWARE,
        started: false,
        lost: false,
        stopped: false,
        terminated: false,
        group: None,
    };
    let Some(program) = cmd.first() else {
        // clap requires CMD; kept as a usage error rather than a panic.
        ran.code = exit::USAGE;
        return ran;
    };
    let child::Spawned { mut child, group, guard } = match child::spawn(cmd, env) {
        Ok(spawned) => spawned,
        Err(error) => {
            eprintln!("leasehold: cannot start {}: {error}", program.to_string_lossy());
            return ran;
        }
    };
    ran.started = true;
    ran.group = group;
    let send = |sig: Signal| {
        if let Some(group) = group {
            // ESRCH: the group is gone already; nothing to do.
            let _ = killpg(group, sig);
        }
    };
    let kill = tokio::time::sleep_until(lock_core::args::far_future(Instant::now()));
    tokio::pin!(kill);
    let (mut kill_armed, mut killed, mut stops_done) = (false, false, false);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            sig = signals.next() => {
                send(sig);
                if is_termination(sig) {
                    ran.terminated = true;
                    arm(&mut kill_armed, kill.as_mut(), lock_core::args::instant_after(Instant::now(), grace));
                }
            }
            order = stops.next(), if !stops_done => {
                let Some(order) = order else {
                    stops_done = true;
                    continue;
                };
                let seen = match order.kind {
                    StopKind::Lost => std::mem::replace(&mut ran.lost, true),
                    StopKind::Margin => std::mem::replace(&mut ran.stopped, true),
                };
                if seen {
                    continue;
                }
                let now = Instant::now();
                let mut at = lock_core::args::instant_after(now, grace);
                if let Some(by) = order.kill_by {
                    at = at.min(by);
                }
                let at = arm(&mut kill_armed, kill.as_mut(), at);
                eprintln!(
                    "leasehold: {}: SIGTERM to the command, SIGKILL in {:?}",
                    order.why,
                    at.saturating_duration_since(now)
                );
                send(Signal::SIGTERM);
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
    ran.code = match status {
        Ok(status) => exit::for_child(status),
        Err(error) => {
            eprintln!("leasehold: waiting for the command failed: {error}");
            exit::SOFTWARE
        }
    };
    ran
}

/// Sets the SIGKILL timer to `at`, or keeps it if it is set earlier already; returns
/// when it fires.
fn arm(armed: &mut bool, mut kill: Pin<&mut Sleep>, at: Instant) -> Instant {
    if !*armed || at < kill.deadline() {
        kill.as_mut().reset(at);
    }
    *armed = true;
    kill.deadline()
}
