//! `leasehold unlock NAME --force [--owner ID]`.

use leasehold::{Client, PubsubMode};
use lock_core::who::force_release_owner;
use lock_core::LockNames;

use crate::args::UnlockArgs;
use crate::exit;
use crate::status::{read_status, Channels};

/// Runs `leasehold unlock`; returns the exit code.
pub(crate) async fn unlock(client: &Client, args: &UnlockArgs) -> u8 {
    match force(client, args).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("leasehold: unlock `{}`: {}", args.name, exit::describe(&error));
            exit::for_error(&error)
        }
    }
}

async fn force(client: &Client, args: &UnlockArgs) -> leasehold::Result<u8> {
    // Read first to say who held it. Without --owner the delete that follows removes
    // whoever holds it then (a holder that changed in between is not named here).
    let status = read_status(client, &args.name, Channels::Skip).await?;
    // force_release.lua deletes any type: never an application's key, a semaphore's or
    // latch's count, or a key of another lock's (a queue, a counter) by mistake.
    if let Some(reason) = status.refusal() {
        println!("`{}` not unlocked: {reason}", args.name);
        return Ok(exit::NOTHING_DONE);
    }
    let deleted = match &args.owner {
        None if status.kind == "fair" => client.fair_lock(&args.name).force_unlock().await?,
        // rw_force_release.lua: publishes on redisson_rwlock:{NAME}, waking every waiter.
        None if status.kind == "read_write" => client.read_write_lock(&args.name).force_unlock().await?,
        // force_release.lua: deletes the key whatever its type, publishes the release.
        None => client.lock(&args.name).force_unlock().await?,
        Some(owner) => {
            let names = LockNames::new(&args.name)?;
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
            Some(owner) => println!("`{}` not unlocked: {owner} does not hold it", args.name),
            None => println!("`{}` not unlocked: it was not held", args.name),
        }
        return Ok(exit::NOTHING_DONE);
    }
    let holders: Vec<String> = match &args.owner {
        Some(owner) => vec![owner.clone()],
        None => status.holders.iter().map(|h| format!("{} (holds {})", h.owner, h.holds)).collect(),
    };
    if holders.is_empty() {
        println!("unlocked `{}`", args.name);
    } else {
        println!("unlocked `{}`, held by {}", args.name, holders.join(", "));
    }
    Ok(0)
}
