//! `leasehold history NAME [--json]`: the forced unlocks of NAME recorded in
//! `leasehold_history:{NAME}` (newest first; at most 100, kept 7 days), read with
//! `Client::lock_history`.

use clap::Args;
use leasehold::Client;

use crate::exit;
use crate::json::Json;

/// `leasehold history`.
#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The lock's name (its Redis key).
    pub(crate) name: String,
    /// One JSON array on stdout (fields in docs/cli.md).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `leasehold history`; returns the exit code (0, with or without entries).
pub(crate) async fn history(client: &Client, args: &HistoryArgs) -> u8 {
    let entries = match client.lock_history(&args.name).await {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("leasehold: history `{}`: {error}", args.name);
            return exit::for_error(&error);
        }
    };
    if args.json {
        let items = entries
            .iter()
            .map(|entry| {
                Json::Obj(vec![
                    ("at_ms", Json::Int(i64::try_from(entry.at_ms).unwrap_or(i64::MAX))),
                    ("action", Json::str(entry.action.as_str())),
                    ("by", Json::str(entry.by.as_str())),
                    ("owners", Json::Arr(entry.owners.iter().map(|owner| Json::str(owner.as_str())).collect())),
                ])
            })
            .collect();
        println!("{}", Json::Arr(items));
    } else if entries.is_empty() {
        println!("`{}`: no forced unlock recorded (in the last 7 days)", args.name);
    } else {
        for entry in &entries {
            let owners = if entry.owners.is_empty() { "-".to_owned() } else { entry.owners.join(",") };
            println!("{} {} by={} owners={owners}", entry.at_ms, entry.action, entry.by);
        }
    }
    0
}
