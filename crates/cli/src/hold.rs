//! `leasehold hold NAME`: holds a lock (or a permit) with no command until SIGTERM or
//! SIGINT, as `etcdctl lock NAME` does without a command: for maintenance, with the
//! shell script doing the work beside it.

use std::io::Write;

use leasehold::Client;

use crate::args::HoldArgs;
use crate::exit;
use crate::held::{Held, Released};
use crate::run::acquire_until_signal;
use crate::signals::Forwarded;

/// Runs `leasehold hold`; returns the exit code: 0 when a signal ended it and the lock
/// was given back, 124 when the lock was lost (or found gone at the release).
pub(crate) async fn hold(client: &Client, args: &HoldArgs) -> u8 {
    // Before the acquire, so that a signal during the wait is ours to handle.
    let mut signals = match Forwarded::install_or_exit_code() {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    let spec = &args.lock;
    let held = match acquire_until_signal(client, spec, &mut signals).await {
        Ok(held) => held,
        Err(code) => return code,
    };
    // One line, flushed, so that a script can `read` it (as etcdctl prints its key).
    // A closed stdout is no reason to let go of the lock.
    let _ = writeln!(std::io::stdout(), "{}", held_line(&args.lock.name, &held));
    let _ = std::io::stdout().flush();
    tokio::select! {
        // SIGHUP and SIGQUIT end the hold too: there is no command that could reload.
        _ = signals.next() => {}
        () = held.lost() => {
            eprintln!("leasehold: lock `{}` lost", args.lock.name);
            return exit::LOST;
        }
    }
    match held.release(&args.lock.name).await {
        Released::Done => 0,
        Released::Lost => {
            eprintln!(
                "leasehold: `{}` was no longer held at the release (taken away, or its lease ran out)",
                args.lock.name
            );
            exit::LOST
        }
    }
}

/// `holding NAME owner=ID [token=T]`, or `holding NAME permit=ID`.
fn held_line(name: &str, held: &Held) -> String {
    let (_, id) = held.owner_var();
    let key = if matches!(held, Held::Permit(_)) { "permit" } else { "owner" };
    match held.token() {
        Some(token) => format!("holding {name} {key}={id} token={token}"),
        None => format!("holding {name} {key}={id}"),
    }
}
