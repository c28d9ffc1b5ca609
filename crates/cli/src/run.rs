//! `leasehold run`: acquire, run the child under the hold (`supervise.rs`: its own
//! process group, so that it dies with `run`; signals passed on; stopped when `run` is
//! told to stop, before a fixed lease ends and when the lock is lost), release after
//! the child is reaped.

use std::ffi::OsStr;
use std::time::Duration;

use futures_util::StreamExt;
use leasehold::Client;
use tokio::time::Instant;

use crate::args::LockFlags;
use crate::args::RunArgs;
use crate::exit;
use crate::held::{self, Held, Released};
use crate::signals::Forwarded;
use crate::supervise::{self, StopKind, StopOrder, Supervised};

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
    let mut signals = match Forwarded::install_or_exit_code() {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    // Checked before connecting (`Command::check`); `None` again here is watchdog mode.
    let margin = args.stop_margin_or_default().unwrap_or_default();
    let spec = &args.lock;
    let held = match acquire_until_signal(client, spec, &mut signals).await {
        Ok(held) => held,
        Err(code) => return code,
    };
    let ran = {
        let token = held.token().map(|token| token.to_string());
        let (owner_var, owner) = held.owner_var();
        let mut env: Vec<(&str, &OsStr)> =
            vec![("LEASEHOLD_LOCK_NAME", OsStr::new(&args.lock.name)), (owner_var, OsStr::new(owner))];
        if let Some(token) = &token {
            env.push(("LEASEHOLD_FENCING_TOKEN", OsStr::new(token)));
        }
        let stops = stop_orders(client, &held, &args, margin);
        supervise::supervise(&args.cmd, &env, args.grace, &mut signals, stops).await
    };
    if !ran.started {
        // Nothing ran: give the lock back and report the failure to start.
        let _ = held.release(&args.lock.name).await;
        return ran.code;
    }
    if ran.lost || held.is_lost() {
        if !ran.lost {
            eprintln!("leasehold: lock `{}` lost while the command ran", args.lock.name);
        }
        ran.kill_leftovers();
        // Nothing to give back: the lock is gone (or another owner has it).
        drop(held);
        return exit::LOST;
    }
    if ran.stopped {
        ran.kill_leftovers();
        // Still held (the margin is before the lease's end): give it back early.
        let _ = held.release(&args.lock.name).await;
        return exit::LOST;
    }
    released(&held.release(&args.lock.name).await, &ran, &args.lock.name)
}

/// The exit code after CMD exited while the hold was held and it was given back: CMD's,
/// unless the release found the hold gone (124, after killing CMD's leftovers).
fn released(release: &Released, ran: &Supervised, name: &str) -> u8 {
    match release {
        Released::Done => ran.code,
        Released::Lost => {
            ran.kill_leftovers();
            eprintln!(
                "leasehold: `{name}` was no longer held when the command exited (taken away, or its lease ran out)"
            );
            exit::LOST
        }
    }
}

/// How often a fixed lease's hold is checked on the server (it has no renewal that
/// would find a forced unlock): as often as the default watchdog renews, or three
/// times per lease when that is shorter.
fn check_period(lease: Duration) -> Duration {
    (lease / 3).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// What stops CMD on the hold's side: the lock lost; with a fixed lease, `margin`
/// before its end (SIGKILL no later than the end), and, for a lock, found taken away
/// at a periodic check.
fn stop_orders<'a>(
    client: &'a Client,
    held: &'a Held,
    args: &'a RunArgs,
    margin: Option<Duration>,
) -> supervise::Stops<'a> {
    let name = args.lock.name.as_str();
    let mut stops = supervise::once(async move {
        held.lost().await;
        StopOrder::lost(format!("lock `{name}` lost"))
    });
    let now = Instant::now();
    if let Some(margin) = margin {
        // A fixed lease: SIGTERM `margin` before its end, SIGKILL no later than its end.
        let lease_end = Instant::from_std(held.lease_deadline());
        let stop_at = lease_end.checked_sub(margin).unwrap_or(now);
        stops.push(
            futures_util::stream::once(async move {
                tokio::time::sleep_until(stop_at).await;
                let left = lease_end.saturating_duration_since(Instant::now());
                StopOrder {
                    kind: StopKind::Margin,
                    why: format!("the lease of `{name}` ends in {left:?}"),
                    kill_by: Some(lease_end),
                }
            })
            .boxed_local(),
        );
    }
    // A fixed lease on a lock (a permit has no such check): `None` from the check is
    // unknown (an error), and the lease bounds the hold anyway.
    if let Some(lease) = args.lock.lease.filter(|_| args.lock.permits.is_none()) {
        stops.push(
            futures_util::stream::once(async move {
                let mut every = tokio::time::interval_at(now + check_period(lease), check_period(lease));
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    if held.still_held(client).await == Some(false) {
                        break;
                    }
                }
                StopOrder::lost(format!("lock `{name}` taken away (its owner no longer holds it: a forced unlock?)"))
            })
            .boxed_local(),
        );
    }
    stops
}
