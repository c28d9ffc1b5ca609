//! `leasehold leader NAME [--watch] [--json]`: who leads the election `NAME` (the
//! library's `Election::leader`), with the leading owner's client as `status` shows a
//! holder's; `--watch` follows every change (`Election::observe`) until a signal.

use std::io::Write;

use leasehold::{Client, Leader};

use crate::args::LeaderArgs;
use crate::exit;
use crate::json::Json;
use crate::owners::Owners;
use crate::signals::Forwarded;
use crate::who::Who;

/// Runs `leasehold leader`; returns the exit code: 0 with a leader, 3 without; with
/// `--watch`, 0 once a signal ends it.
pub(crate) async fn leader(client: &Client, args: &LeaderArgs) -> u8 {
    let election = client.election(&args.name);
    if !args.watch {
        let read = async {
            let leader = election.leader().await?;
            let who = who(client, leader.as_ref()).await?;
            Ok::<_, leasehold::Error>((leader, who))
        };
        return match read.await {
            Ok((leader, who)) => {
                print_line(&args.name, leader.as_ref(), &who, args.json);
                if leader.is_some() {
                    0
                } else {
                    exit::NO_LEADER
                }
            }
            Err(error) => {
                eprintln!("leasehold: leader of `{}`: {}", args.name, exit::describe(&error));
                exit::for_error(&error)
            }
        };
    }
    let mut signals = match Forwarded::install_or_exit_code() {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    let mut observer = election.observe();
    loop {
        let change = tokio::select! {
            _ = signals.next() => return 0,
            change = observer.next() => change,
        };
        match change {
            Some(Ok(leader)) => {
                // Its client as it is now (not cached: a crashed leader's client
                // description expires); a failed read leaves the client out.
                let who = match who(client, leader.as_ref()).await {
                    Ok(who) => who,
                    Err(error) => {
                        eprintln!("leasehold: leader of `{}`: its client: {}", args.name, exit::describe(&error));
                        Who::NotAClient
                    }
                };
                print_line(&args.name, leader.as_ref(), &who, args.json);
            }
            // Errors the observer does not retry by itself (a key of another type, a
            // permission or script error) would come back at every read.
            Some(Err(error)) => {
                eprintln!("leasehold: leader of `{}`: {}", args.name, exit::describe(&error));
                return exit::for_error(&error);
            }
            None => {
                eprintln!("leasehold: leader of `{}`: the client shut down", args.name);
                return exit::SOFTWARE;
            }
        }
    }
}

/// The leading owner's client, if any leads.
async fn who(client: &Client, leader: Option<&Leader>) -> leasehold::Result<Who> {
    match leader {
        Some(leader) => Owners::default().who(client, &leader.owner).await,
        None => Ok(Who::NotAClient),
    }
}

/// One line on stdout, flushed (a `--watch` reader sees each change at once).
fn print_line(name: &str, leader: Option<&Leader>, who: &Who, json: bool) {
    let line = if json { to_json(name, leader, who).to_string() } else { text(leader, who) };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `term=T owner=ID by=HOST/PID/SERVICE value=V` (the value last: it may hold
/// spaces; `by=unknown` without a live client), or `no leader`.
pub(crate) fn text(leader: Option<&Leader>, who: &Who) -> String {
    match leader {
        None => "no leader".to_owned(),
        Some(leader) => {
            let by = who.short().map(|by| format!(" by={by}")).unwrap_or_default();
            format!("term={} owner={}{by} value={}", leader.term, leader.owner, one_line(&leader.value))
        }
    }
}

/// `value` with its control characters escaped as Rust writes them (a line break as
/// `\n`), so that a value printed last on a line keeps it one line: a `--watch` reader
/// reads one line per state. Other characters, spaces and backslashes included, are
/// printed as they are (the `--json` form has the value exactly).
pub(crate) fn one_line(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut line = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if c.is_control() {
            line.extend(c.escape_debug());
        } else {
            line.push(c);
        }
    }
    std::borrow::Cow::Owned(line)
}

/// The `--json` object (docs/cli.md): `election`, `leader`, `term`, `value`, `owner`,
/// `client_id`, `client`.
pub(crate) fn to_json(name: &str, leader: Option<&Leader>, who: &Who) -> Json {
    let mut fields = vec![
        ("election", Json::str(name)),
        ("leader", Json::Bool(leader.is_some())),
        ("term", Json::opt_int(leader.map(|l| i64::try_from(l.term).unwrap_or(i64::MAX)))),
        ("value", Json::opt_str(leader.map(|l| l.value.as_str()))),
        ("owner", Json::opt_str(leader.map(|l| l.owner.as_str()))),
    ];
    fields.extend(who.json_fields());
    Json::Obj(fields)
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_value_is_printed_on_one_line() {
        assert_eq!(one_line("web-1/4242 a b"), "web-1/4242 a b");
        assert_eq!(one_line("a\nb\r\tc\u{1}"), "a\\nb\\r\\tc\\u{1}");
        assert_eq!(one_line("ünï \\ \""), "ünï \\ \"", "only control characters are escaped");
    }
}
