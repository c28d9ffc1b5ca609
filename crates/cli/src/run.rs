//! `leasehold run`: acquire, run the child in its own process group, forward signals,
//! stop the child when the lock is lost, release after the child is reaped.

use leasehold::{Client, FencedGuard, LockGuard};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::signal::unix::{signal, Signal as Listener, SignalKind};

use crate::args::RunArgs;
use crate::exit;

/// The hold `run` keeps while the child runs.
enum Held {
    Plain(LockGuard),
    Fenced(FencedGuard),
}

impl Held {
    fn owner(&self) -> &str {
        match self {
            Held::Plain(guard) => guard.owner(),
            Held::Fenced(guard) => guard.owner(),
        }
    }

    fn token(&self) -> Option<u64> {
        match self {
            Held::Plain(_) => None,
            Held::Fenced(guard) => Some(guard.token()),
        }
    }

    async fn lost(&self) {
        match self {
            Held::Plain(guard) => guard.lost().await,
            Held::Fenced(guard) => guard.lost().await,
        }
    }

    async fn unlock(self) -> leasehold::Result<()> {
        match self {
            Held::Plain(guard) => guard.unlock().await,
            Held::Fenced(guard) => guard.unlock().await,
        }
    }
}

/// The four signals `run` passes on to the child's process group.
struct Forwarded {
    listeners: [(Listener, Signal); 4],
}

impl Forwarded {
    /// Installs the handlers: from here on these signals no longer end `run` itself.
    fn install() -> std::io::Result<Forwarded> {
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
    async fn next(&mut self) -> Signal {
        let [(a, sa), (b, sb), (c, sc), (d, sd)] = &mut self.listeners;
        tokio::select! {
            _ = a.recv() => *sa,
            _ = b.recv() => *sb,
            _ = c.recv() => *sc,
            _ = d.recv() => *sd,
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
    let acquired = tokio::select! {
        acquired = acquire(client, &args) => acquired,
        // Nothing to pass the signal on to yet: end as the signal would have ended us.
        // Dropping the acquire leaves the wait queue (the library's cancel safety).
        sig = signals.next() => return 128 + sig as u8,
    };
    let held = match acquired {
        Ok(Some(held)) => held,
        Ok(None) => {
            eprintln!(
                "leasehold: `{}` not acquired within {} ms",
                args.name,
                args.wait.unwrap_or_default().as_millis()
            );
            return exit::NOT_ACQUIRED;
        }
        Err(error) => {
            eprintln!("leasehold: cannot acquire `{}`: {error}", args.name);
            return exit::for_error(&error);
        }
    };
    let code = supervise(&held, &args, &mut signals).await;
    match code {
        Supervised::Lost => {
            // Nothing to give back: the lock is gone (or another owner has it).
            drop(held);
            exit::LOST
        }
        Supervised::Exited(code) => {
            if let Err(error) = held.unlock().await {
                eprintln!("leasehold: releasing `{}` failed: {error}", args.name);
            }
            code
        }
    }
}

/// How the child's run ended.
enum Supervised {
    /// The child was reaped while the lock was held; `run` exits with this code.
    Exited(u8),
    /// The lock was lost and the child stopped.
    Lost,
}

/// Acquires in the mode the flags ask for; `None` when `--wait` ran out.
async fn acquire(client: &Client, args: &RunArgs) -> leasehold::Result<Option<Held>> {
    if args.fenced {
        let lock = client.fenced_lock(&args.name);
        let guard = match (args.wait, args.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_with(wait, lease).await?,
        };
        return Ok(guard.map(Held::Fenced));
    }
    let guard = if args.fair {
        let lock = client.fair_lock(&args.name);
        match (args.wait, args.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_with(wait, lease).await?,
        }
    } else {
        let lock = client.lock(&args.name);
        match (args.wait, args.lease) {
            (None, None) => Some(lock.lock().await?),
            (None, Some(lease)) => Some(lock.lock_with_lease(lease).await?),
            (Some(wait), None) => lock.try_lock_for(wait).await?,
            (Some(wait), Some(lease)) => lock.try_lock_with(wait, lease).await?,
        }
    };
    Ok(guard.map(Held::Plain))
}

/// Spawns the child and waits for it, forwarding signals and stopping it on loss.
async fn supervise(held: &Held, args: &RunArgs, signals: &mut Forwarded) -> Supervised {
    let Some((program, rest)) = args.cmd.split_first() else {
        // clap requires CMD; kept as a usage error rather than a panic.
        return Supervised::Exited(exit::USAGE);
    };
    let mut command = tokio::process::Command::new(program);
    command.args(rest).process_group(0).env("LEASEHOLD_LOCK_NAME", &args.name).env("LEASEHOLD_OWNER", held.owner());
    if let Some(token) = held.token() {
        command.env("LEASEHOLD_FENCING_TOKEN", token.to_string());
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("leasehold: cannot run {}: {error}", program.to_string_lossy());
            let code =
                if error.kind() == std::io::ErrorKind::NotFound { exit::NOT_FOUND } else { exit::NOT_EXECUTABLE };
            return Supervised::Exited(code);
        }
    };
    // The child leads its own group (`process_group(0)`): its pid is the group id.
    let group = child.id().and_then(|pid| i32::try_from(pid).ok()).map(Pid::from_raw);
    let send = |sig: Signal| {
        if let Some(group) = group {
            // ESRCH: the group is gone already; nothing to do.
            let _ = killpg(group, sig);
        }
    };
    let mut lost = false;
    let kill_at = tokio::time::sleep_until(lock_core::args::far_future(tokio::time::Instant::now()));
    tokio::pin!(kill_at);
    let mut killed = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            sig = signals.next() => send(sig),
            () = held.lost(), if !lost => {
                lost = true;
                eprintln!("leasehold: lock `{}` lost: SIGTERM to the command, SIGKILL in {:?}", args.name, args.grace);
                send(Signal::SIGTERM);
                let at = lock_core::args::instant_after(tokio::time::Instant::now(), args.grace);
                kill_at.as_mut().reset(at);
            }
            () = &mut kill_at, if lost && !killed => {
                killed = true;
                send(Signal::SIGKILL);
            }
        }
    };
    if lost {
        // The child may have left members of its group behind; they run unlocked.
        send(Signal::SIGKILL);
        return Supervised::Lost;
    }
    match status {
        Ok(status) => Supervised::Exited(exit::for_child(status)),
        Err(error) => {
            eprintln!("leasehold: waiting for the command failed: {error}");
            Supervised::Exited(exit::SOFTWARE)
        }
    }
}
