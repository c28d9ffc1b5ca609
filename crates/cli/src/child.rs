//! CMD's process, so that it never outlives `run` (or `elect`, which starts its CMD the
//! same way, through `supervise.rs`): `run` starts it through a trampoline
//! (`leasehold __exec`) that asks the kernel to kill it when `run` dies (Linux's
//! parent-death signal) and then becomes CMD, and starts a guard (`leasehold __guard`)
//! that kills CMD's whole process group when `run` dies. Both are this binary, run by
//! `run` itself: the workspace forbids `unsafe`, so no `pre_exec` hook can set the
//! signal between fork and exec.
//!
//! Why both: the parent-death signal reaches CMD alone, not what CMD started (a
//! script's commands); the guard kills the group, but only from when it runs, a moment
//! after CMD started, when the parent-death signal already covers CMD.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getppid, Pid};

use crate::exit;

/// The trampoline's subcommand: `leasehold __exec PARENT_PID CMD ARGS...`.
const EXEC: &str = "__exec";
/// The guard's subcommand: `leasehold __guard PGID`, its stdin a pipe from `run`.
const GUARD: &str = "__guard";

/// Runs the trampoline or the guard when this process is one (its first argument
/// says so), before clap and before any runtime: `Some(exit code)`, else `None`.
pub(crate) fn hidden_entry() -> Option<u8> {
    let mut args = std::env::args_os().skip(1);
    let first = args.next()?;
    if first == EXEC {
        Some(exec_main(args))
    } else if first == GUARD {
        Some(guard_main(args))
    } else {
        None
    }
}

/// A pid or group id given on the command line (`run` wrote it), at least `min`.
fn pid_arg(arg: Option<OsString>, min: i32) -> Option<Pid> {
    let pid: i32 = arg?.to_str()?.parse().ok()?;
    (pid >= min).then(|| Pid::from_raw(pid))
}

/// The trampoline: die with the parent, check the parent is still the one that started
/// us, then become CMD. Returns only when CMD could not be executed.
fn exec_main(mut args: impl Iterator<Item = OsString>) -> u8 {
    // 1: `run` may be a container's first process.
    let Some(parent) = pid_arg(args.next(), 1) else {
        eprintln!("leasehold: `{EXEC}` is leasehold's own; use `leasehold run`");
        return exit::USAGE;
    };
    if let Err(errno) = die_with_parent() {
        eprintln!("leasehold: cannot ask the kernel to stop the command with `leasehold`: {errno}");
        return exit::SOFTWARE;
    }
    // `run` may have died before the prctl, which then never fires: we were handed to
    // another parent (init or a subreaper). Start nothing.
    if getppid() != parent {
        eprintln!("leasehold: `leasehold` ended before the command started; not starting it");
        return exit::SOFTWARE;
    }
    let Some(program) = args.next() else {
        return exit::USAGE;
    };
    // Keeps the process group `run` gave us; std resets SIGPIPE and the signal mask.
    let error = std::process::Command::new(&program).args(args).exec();
    eprintln!("leasehold: cannot run {}: {error}", program.to_string_lossy());
    if error.kind() == std::io::ErrorKind::NotFound {
        exit::NOT_FOUND
    } else {
        exit::NOT_EXECUTABLE
    }
}

/// Asks for SIGKILL when the thread that started us ends: `run` spawns CMD from its
/// only runtime thread, the main thread, so that is when `run` ends, `kill -9`
/// included. The setting survives execve (cleared only for a set-user-ID, set-group-ID
/// or file-capability CMD: such a CMD is then covered by the guard alone).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn die_with_parent() -> nix::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
}

/// No parent-death signal on this system: the guard alone covers CMD.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn die_with_parent() -> nix::Result<()> {
    Ok(())
}

/// The guard: waits for its stdin (a pipe only `run` writes to) to close, which the
/// kernel does when `run` ends however it ends, then kills the group. `run` kills the
/// guard first when it is done with CMD, so a closed pipe means `run` died.
fn guard_main(mut args: impl Iterator<Item = OsString>) -> u8 {
    // Never a group of 0 or below (killpg's "my own group" and "every process" cases).
    let Some(group) = pid_arg(args.next(), 2) else {
        eprintln!("leasehold: `{GUARD}` is leasehold's own; use `leasehold run`");
        return exit::USAGE;
    };
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 64];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // ESRCH: the group is gone already.
    let _ = killpg(group, Signal::SIGKILL);
    0
}

/// This binary, for the trampoline and the guard: on Linux `/proc/self/exe`, which
/// still names it if the file was replaced or deleted since `run` started.
fn own_exe() -> std::io::Result<std::path::PathBuf> {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        Ok("/proc/self/exe".into())
    } else {
        std::env::current_exe()
    }
}

/// CMD, running in a process group of its own, and its guard.
pub(crate) struct Spawned {
    pub(crate) child: tokio::process::Child,
    /// CMD's process group (CMD leads it: its pid).
    pub(crate) group: Option<Pid>,
    pub(crate) guard: Option<Guard>,
}

/// The guard process and the pipe that keeps it waiting.
///
/// Dropped without [`Guard::disarm`], the pipe closes and the guard kills the group
/// (the fields drop in order: the process handle first, which does nothing).
pub(crate) struct Guard {
    process: tokio::process::Child,
    _pipe: Option<tokio::process::ChildStdin>,
}

impl Guard {
    /// Ends the guard without it killing the group: SIGKILL to it and reaped, before
    /// its pipe closes.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the pipe to close first: the guard then kills the
    /// group, which is the safe side.
    pub(crate) async fn disarm(mut self) {
        let _ = self.process.kill().await;
    }
}

/// Starts CMD (`cmd[0]` with the rest as arguments) through the trampoline, in a new
/// process group, with `env` added, then its guard. A guard that cannot be started
/// is reported and done without (the parent-death signal still covers CMD).
///
/// # Errors
/// The trampoline (this binary) could not be started. CMD that cannot be found or
/// executed is the trampoline's exit code 127 or 126, not an error here.
pub(crate) fn spawn(cmd: &[OsString], env: &[(&str, &OsStr)]) -> std::io::Result<Spawned> {
    let exe = own_exe()?;
    let mut command = tokio::process::Command::new(&exe);
    command.arg0("leasehold").arg(EXEC).arg(std::process::id().to_string()).args(cmd).process_group(0);
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command.spawn()?;
    // The child leads its own group (`process_group(0)`): its pid is the group id.
    let group = child.id().and_then(|pid| i32::try_from(pid).ok()).map(Pid::from_raw);
    let guard = group.and_then(|group| match start_guard(&exe, group) {
        Ok(guard) => Some(guard),
        Err(error) => {
            eprintln!("leasehold: cannot start the guard that stops the command if `leasehold` dies: {error}");
            None
        }
    });
    Ok(Spawned { child, group, guard })
}

/// Starts the guard of `group`: in a process group of its own (a Ctrl-C at the
/// terminal, meant for `run`, does not end it), stdin a pipe `run` holds.
fn start_guard(exe: &std::path::Path, group: Pid) -> std::io::Result<Guard> {
    let mut process = tokio::process::Command::new(exe)
        .arg0("leasehold")
        .arg(GUARD)
        .arg(group.as_raw().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pipe = process.stdin.take();
    Ok(Guard { process, _pipe: pipe })
}
