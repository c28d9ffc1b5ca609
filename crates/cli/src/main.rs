//! `leasehold`: distributed locks on Redis from the shell. `run` holds a lock while a
//! command runs; `elect` runs one while leading an election, `leader` shows who leads;
//! `status`, `list` and `unlock` inspect and steer locks. See `docs/cli.md`.

mod args;
mod bounded;
mod child;
mod connect;
mod duration;
mod elect;
mod election_status;
mod exit;
mod held;
mod history;
mod hold;
mod host;
mod inspect;
mod json;
mod keys;
mod leader;
mod owners;
mod permits;
mod run;
mod signals;
mod status;
mod supervise;
mod unlock;
mod who;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    // `run`'s trampoline and guard (child.rs): this binary started by itself.
    if let Some(code) = child::hidden_entry() {
        return ExitCode::from(code);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // `--help` and `--version` are "errors" that go to stdout and exit 0.
            let code = if error.use_stderr() { exit::USAGE } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    if let Err(message) = cli.command.check() {
        eprintln!("leasehold: {message}");
        return ExitCode::from(exit::USAGE);
    }
    // One thread is plenty for one lock and one child; the library's background tasks
    // (watchdog, subscriber) run while `block_on` runs, which is the whole program.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("leasehold: cannot start the runtime: {error}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let code = runtime.block_on(dispatch(cli));
    // Tasks a connect cut short left behind (a DNS lookup on a blocking thread) must
    // not hold the exit up: `--timeout` bounds the whole connect.
    runtime.shutdown_background();
    ExitCode::from(code)
}

/// The service the CLI's connections are named for (`leasehold:<UUID>:<service>`) when
/// `LEASEHOLD_SERVICE` is not set: `leasehold-cli.<user>.<host>`. A forced unlock's
/// history names the forcing connection, and the CLI's description (host, pid) expires
/// with the process, so the name itself keeps which operator, on which host, did it.
fn operator_service_name() -> String {
    let user = ["USER", "LOGNAME"].iter().find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()));
    let user = user.unwrap_or_else(|| "unknown".to_owned());
    format!("leasehold-cli.{user}.{}", host::host_name())
}

/// `--timeout` when not given.
const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects and runs the subcommand; returns the exit code.
async fn dispatch(cli: Cli) -> u8 {
    // `--timeout` bounds the whole connect and each call; without it the connect gets
    // the default and each call possibly less (below).
    let connect_budget = cli.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut timeout = connect_budget;
    let mut builder = leasehold::Client::builder().url(cli.url.as_str());
    if let Some(watchdog) = cli.command.watchdog() {
        builder = builder.watchdog_timeout(watchdog);
    }
    if let Some(lease) = cli.command.lease_to_fit() {
        // The library wants each call to end well within a renewal period (a
        // third of the lease); an explicit --timeout is left to it to judge.
        // Only the calls: a short lease must not squeeze the whole connect (two
        // connections, every primary named, the scripts) into a quarter of it.
        if cli.timeout.is_none() {
            timeout = timeout.min(lease / 4);
        }
    }
    let mut builder = builder.command_timeout(timeout);
    if std::env::var_os(leasehold::SERVICE_ENV).is_none_or(|service| service.is_empty()) {
        builder = builder.service_name(operator_service_name());
    }
    // The whole connect within the budget, and a failure said as refused, timed out,
    // not Redis, or the server's own words.
    let client = match connect::connect(builder, &cli.url, connect_budget).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("leasehold: cannot connect to {}: {error}", redacted(&cli.url));
            return error.exit_code();
        }
    };
    let code = match cli.command {
        Command::Run(args) => run::run(&client, args).await,
        Command::Hold(args) => hold::hold(&client, &args).await,
        Command::Status(args) => inspect::status(&client, &args).await,
        Command::List(args) => inspect::list(&client, &args).await,
        Command::Unlock(args) => unlock::unlock(&client, &args).await,
        Command::History(args) => history::history(&client, &args).await,
        Command::Elect(args) => elect::elect(&client, &args).await,
        Command::Leader(args) => leader::leader(&client, &args).await,
    };
    // Gives back anything still held and closes the connections (bounded by the
    // command timeout).
    let _ = client.shutdown().await;
    code
}

/// `url` without its password, for messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_printed() {
        assert_eq!(super::redacted("redis://u:secret@h:1/0"), "redis://***@h:1/0");
        assert_eq!(super::redacted("redis://h:1"), "redis://h:1");
    }
}
