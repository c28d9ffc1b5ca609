//! An election candidate in its own process, for tests that kill (`SIGKILL`) or stop
//! (`SIGSTOP`) the leader.
//!
//! Usage: `candidate URL NAME LEASE_MS VALUE`. It campaigns in the election `NAME` with a
//! lease of `LEASE_MS` and prints `LEADING <term> <owner>` once it leads; then `LOST`
//! when its leadership learns the lead is lost. On a stdin line `ACT` (the leader about
//! to act on its lead) it checks the guard first and prints `ACT LOST` or
//! `ACT LEADING <term>`; on `RESIGN` it resigns and prints `RESIGN OK` or
//! `RESIGN ERR <kind>`, then exits; on `PROCLAIM VALUE` it prints `PROCLAIM OK` or
//! `PROCLAIM ERR <kind>`; on `WRITE RESOURCE VALUE` (a leader's write to a fenced
//! resource, with its term, whatever it believes of its lead) it prints `WRITE OK`,
//! `WRITE REJECTED <fence>` or `WRITE ERR <kind>`.

use std::io::Write;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, lease_ms, value] = args.as_slice() else {
        eprintln!("usage: candidate URL NAME LEASE_MS VALUE");
        std::process::exit(2);
    };
    let lease = Duration::from_millis(lease_ms.parse().expect("LEASE_MS is a number"));
    let client = leasehold::Client::builder()
        .url(url.as_str())
        .command_timeout(leasehold_test_support::command_timeout_for(lease))
        .connect()
        .await
        .expect("connect");
    let election = client.election_with(name, leasehold::ElectionConfig::default().with_lease(lease));
    say("CAMPAIGNING");
    let leadership = election.campaign(value.as_str()).await.expect("campaign");
    say(&format!("LEADING {} {}", leadership.term(), leadership.owner()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut reported_lost = false;
    loop {
        tokio::select! {
            () = leadership.lost(), if !reported_lost => {
                reported_lost = true;
                say("LOST");
            }
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { return };
                let line = line.trim();
                if line == "ACT" {
                    // What a leader does before acting on its lead.
                    if leadership.is_lost() {
                        say("ACT LOST");
                    } else {
                        say(&format!("ACT LEADING {}", leadership.term()));
                    }
                } else if let Some(value) = line.strip_prefix("PROCLAIM ") {
                    match leadership.proclaim(value).await {
                        Ok(()) => say("PROCLAIM OK"),
                        Err(error) => say(&format!("PROCLAIM ERR {}", error.kind())),
                    }
                } else if let Some(rest) = line.strip_prefix("WRITE ") {
                    let (resource, value) = rest.split_once(' ').unwrap_or((rest, ""));
                    match leasehold::fence::fenced_set(&client, resource, leadership.term(), value).await {
                        Ok(leasehold::fence::FencedWrite::Written) => say("WRITE OK"),
                        Ok(leasehold::fence::FencedWrite::Rejected { fence }) => say(&format!("WRITE REJECTED {fence}")),
                        Err(error) => say(&format!("WRITE ERR {}", error.kind())),
                    }
                } else if line == "RESIGN" {
                    break;
                }
            }
        }
    }
    match leadership.resign().await {
        Ok(()) => say("RESIGN OK"),
        Err(error) => say(&format!("RESIGN ERR {}", error.kind())),
    }
}
