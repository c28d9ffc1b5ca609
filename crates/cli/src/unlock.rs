//! `leasehold unlock NAME --force [--owner ID]`.

use leasehold::{Client, PubsubMode};
use lock_core::who::force_release_owner;
use lock_core::LockNames;

use crate::args::UnlockArgs;
use crate::exit;
use crate::status::{read_status, Channels};

/// Runs `leasehold unlock`; returns the exit code.
pub(crate) async fn unlock(client: &Client, args: &UnlockArgs) -> u8 {
    // `--election NAME` is its lead's key.
    let key = if args.election { lock_core::names::election_key(&args.name) } else { args.name.clone() };
    match force(client, args, &key).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("leasehold: unlock `{}`: {}", args.name, exit::describe(&error));
            exit::for_error(&error)
        }
    }
}

async fn force(client: &Client, args: &UnlockArgs, key: &str) -> leasehold::Result<u8> {
    // Read first to say who held it. Without --owner the delete that follows removes
    // whoever holds it then (a holder that changed in between is not named here).
    let status = read_status(client, key, Channels::Skip).await?;
    // force_release.lua deletes any type: never an application's key, a semaphore's or
    // latch's count, or a key of another lock's (a queue, a counter) by mistake.
    if let Some(reason) = status.refusal() {
        println!("`{key}` not unlocked: {reason}");
        return Ok(exit::NOTHING_DONE);
    }
    let deleted = match (&args.owner, &status.election) {
        // The election's own force (`election_force_release.lua`): the lead and the
        // leader record deleted, the waiting candidates woken, the followers told.
        (None, Some(election)) => client.election(election).force_resign().await?,
        (Some(_), Some(_)) => {
            println!("`{key}` not unlocked: an election's lead is forced whole: leave out --owner");
            return Ok(exit::NOTHING_DONE);
        }
        (None, None) if status.kind == "fair" => client.fair_lock(key).force_unlock().await?,
        // rw_force_release.lua: publishes on redisson_rwlock:{NAME}, waking every waiter.
        (None, None) if status.kind == "read_write" => client.read_write_lock(key).force_unlock().await?,
        // force_release.lua: deletes the key whatever its type, publishes the release.
        (None, None) => client.lock(key).force_unlock().await?,
        (Some(owner), None) => {
            let names = LockNames::new(key)?;
            let publish = match client.pubsub_mode() {
                PubsubMode::Sharded => "spublish",
                _ => "publish",
            };
            // Deleted only if `owner` holds it, and recorded in the lock's history as
            // forced by this command's connection (`leasehold history NAME`).
            let timeout = client.config().command_timeout;
            let by = Some(client.connection_name());
            force_release_owner(client.fred(), timeout, &names, owner, publish, by).await?
        }
    };
    if !deleted {
        match &args.owner {
            Some(owner) => println!("`{key}` not unlocked: {owner} does not hold it"),
            None => println!("`{key}` not unlocked: it was not held"),
        }
        return Ok(exit::NOTHING_DONE);
    }
    let holders: Vec<String> = match &args.owner {
        Some(owner) => vec![owner.clone()],
        None => status.holders.iter().map(|h| format!("{} (holds {})", h.owner, h.holds)).collect(),
    };
    if holders.is_empty() {
        println!("unlocked `{key}`");
    } else {
        println!("unlocked `{key}`, held by {}", holders.join(", "));
    }
    Ok(0)
}
