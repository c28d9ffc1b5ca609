//! `leasehold elect NAME -- CMD`: campaign in the leader election `NAME` (the library's
//! `Election`), run CMD while leading (`supervise.rs`, as `run` runs it under a lock:
//! its own process group, dying with us, signals passed on), stop it when the lead is
//! lost, resign when it ends (the next candidate leads within a few round trips); with
//! `--again`, campaign again, until SIGINT or SIGTERM.

use std::ffi::OsStr;
use std::time::Duration;

use leasehold::{Client, Election, ElectionConfig, Leadership};
use tokio::time::Instant;

use crate::args::ElectArgs;
use crate::exit;
use crate::signals::Forwarded;
use crate::supervise::{self, StopOrder};

/// With `--again`, a round (campaign, CMD, resign) starts at most this often: a CMD
/// that fails at once must not turn `elect` into a loop of campaigns against Redis.
const MIN_ROUND: Duration = Duration::from_secs(1);

/// How one round of leading ended.
struct Round {
    /// The exit code it stands for.
    code: u8,
    /// No further round: we were asked to end (SIGINT or SIGTERM while CMD ran), or CMD
    /// could not be started at all.
    last: bool,
}

/// Runs `leasehold elect`; returns the exit code.
pub(crate) async fn elect(client: &Client, args: &ElectArgs) -> u8 {
    // Before the campaign, so that a signal while waiting to lead is ours to handle.
    let mut signals = match Forwarded::install_or_exit_code() {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    let config = ElectionConfig::default().with_lease(args.lease);
    let value = args.value_or_default();
    loop {
        let started = Instant::now();
        // A fresh candidate (a new owner id) every round: nothing of an earlier round's
        // lead (a release still in flight after a loss) can touch this one's.
        let election = client.election_with(&args.name, config);
        let leadership = match campaign_until_signal(&election, args, &value, &mut signals).await {
            Ok(leadership) => leadership,
            Err(code) => return code,
        };
        let round = lead(leadership, args, &mut signals).await;
        if !args.again || round.last {
            return round.code;
        }
        let next = started + MIN_ROUND;
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            sig = signals.next() => return 128 + sig as u8,
        }
    }
}

/// Campaigns (bounded by `--wait`), ending the wait on the first of the four signals:
/// the leadership, or the exit code (75 when `--wait` ran out, 128+N for signal N, an
/// error's code), the reason already on stderr.
///
/// # Cancel safety
/// Dropping the future leaves the candidates' queue (the library's cancel safety).
async fn campaign_until_signal(
    election: &Election,
    args: &ElectArgs,
    value: &str,
    signals: &mut Forwarded,
) -> Result<Leadership, u8> {
    let campaign = async {
        match args.wait {
            None => election.campaign(value).await.map(Some),
            Some(wait) => election.campaign_for(wait, value).await,
        }
    };
    let campaigned = tokio::select! {
        campaigned = campaign => campaigned,
        // Nothing to pass the signal on to yet: end as the signal would have ended us.
        sig = signals.next() => return Err(128 + sig as u8),
    };
    match campaigned {
        Ok(Some(leadership)) => Ok(leadership),
        Ok(None) => {
            let waited = args.wait.unwrap_or_default().as_millis();
            eprintln!("leasehold: not leading `{}` within {waited} ms", args.name);
            Err(exit::NOT_ACQUIRED)
        }
        Err(error) => {
            eprintln!("leasehold: campaign in `{}`: {}", args.name, exit::describe(&error));
            Err(exit::for_error(&error))
        }
    }
}

/// One lead: says so on stderr, runs CMD with the lead in its environment, stops it if
/// the lead is lost, resigns when it ended.
async fn lead(leadership: Leadership, args: &ElectArgs, signals: &mut Forwarded) -> Round {
    let name = args.name.as_str();
    let term = leadership.term().to_string();
    let value = leadership.value();
    // One line, as `hold` prints its hold (stderr here: stdout is CMD's).
    eprintln!(
        "leasehold: leading {name} term={term} owner={} value={}",
        leadership.owner(),
        crate::leader::one_line(&value)
    );
    let ran = {
        let env: [(&str, &OsStr); 4] = [
            ("LEASEHOLD_ELECTION", OsStr::new(name)),
            ("LEASEHOLD_TERM", OsStr::new(&term)),
            ("LEASEHOLD_OWNER", OsStr::new(leadership.owner())),
            ("LEASEHOLD_VALUE", OsStr::new(&value)),
        ];
        let leading = &leadership;
        let stops = supervise::once(async move {
            leading.lost().await;
            StopOrder::lost(format!("the lead of `{name}` (term {}) lost", leading.term()))
        });
        supervise::supervise(&args.cmd, &env, args.grace, signals, stops).await
    };
    let last = ran.terminated || !ran.started;
    if ran.lost || leadership.is_lost() {
        if !ran.lost {
            eprintln!("leasehold: the lead of `{name}` (term {term}) was lost while the command ran");
        }
        ran.kill_leftovers();
        // Nothing to hand over: the lead is gone (or another candidate leads).
        drop(leadership);
        return Round { code: exit::LOST, last };
    }
    match leadership.resign().await {
        Ok(()) => Round { code: ran.code, last },
        Err(error) if error.is_lock_lost() || error.is_not_owner() => {
            ran.kill_leftovers();
            eprintln!(
                "leasehold: `{name}` (term {term}) was no longer led when the command exited (taken away, or its lease ran out)"
            );
            Round { code: exit::LOST, last }
        }
        Err(error) => {
            eprintln!(
                "leasehold: resigning `{name}` failed: {} (the lead ends with its lease)",
                exit::describe(&error)
            );
            Round { code: ran.code, last }
        }
    }
}
