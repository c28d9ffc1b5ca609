//! `leasehold status` and `leasehold list`: what is in Redis for a name (read by
//! `status.rs`, one script per name, so each answer is one instant's), as text or JSON.

use futures_util::StreamExt;
use leasehold::fred::prelude::{Client as FredClient, ClientLike};
use leasehold::{Client, Error, ErrorKind};

use crate::args::{ListArgs, StatusArgs};
use crate::exit;
use crate::json::Json;
use crate::keys::derived;
use crate::owners::Owners;
use crate::status::{read_status, Channels, Status};

/// Runs `leasehold status`; returns the exit code.
pub(crate) async fn status(client: &Client, args: &StatusArgs) -> u8 {
    // `--election NAME` is its lead's key.
    let key = if args.election { lock_core::names::election_key(&args.name) } else { args.name.clone() };
    let read = async {
        let mut status = read_status(client, &key, Channels::Ask).await?;
        Owners::default().describe(client, &mut status).await?;
        Ok::<_, Error>(status)
    };
    match read.await {
        Ok(status) if args.json => {
            println!("{}", status.to_json());
            0
        }
        Ok(status) => {
            print_text(&status);
            0
        }
        Err(error) => {
            eprintln!("leasehold: status of `{}`: {}", args.name, exit::describe(&error));
            exit::for_error(&error)
        }
    }
}

/// Runs `leasehold list`; returns the exit code.
pub(crate) async fn list(client: &Client, args: &ListArgs) -> u8 {
    let keys = match scan(client.fred(), &args.pattern, client.config().command_timeout).await {
        Ok(keys) => keys,
        Err(error) => {
            eprintln!("leasehold: list: {}", exit::describe(&error));
            return exit::for_error(&error);
        }
    };
    let mut locks = Vec::new();
    let mut owners = Owners::default();
    for key in keys {
        // A derived key (a queue, waiter entries, a counter, ...) is never a lock; one
        // whose name alone does not say so is read, and told by its type. An
        // election's lead is read, and listed as its election.
        if derived(&key).is_some_and(|d| d.only_if_type.is_none() && d.role != "election_lead") {
            continue;
        }
        let read = async {
            let mut status = read_status(client, &key, Channels::Skip).await?;
            if status.is_listed() {
                owners.describe(client, &mut status).await?;
            }
            Ok::<_, Error>(status)
        };
        match read.await {
            Ok(status) if status.is_listed() => locks.push(status),
            // Gone since the SCAN, or not a lock.
            Ok(_) => {}
            Err(error) => {
                eprintln!("leasehold: list: reading `{key}`: {}", exit::describe(&error));
                return exit::for_error(&error);
            }
        }
    }
    locks.sort_by(|a, b| a.name.cmp(&b.name));
    if args.json {
        // The same objects as `status --json` prints: one schema per field name.
        println!("{}", Json::Arr(locks.iter().map(Status::to_json).collect()));
    } else {
        for s in &locks {
            let pttl = s.pttl_ms.map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms"));
            let clients: Vec<String> = s.holders.iter().filter_map(|h| h.who.short()).collect();
            let by = if clients.is_empty() { String::new() } else { format!("\tby={}", clients.join(",")) };
            println!(
                "{}\t{}\tholders={}\tpttl={pttl}\twaiters={}{by}",
                s.name,
                s.kind,
                s.holders.len(),
                s.waiters.len()
            );
        }
    }
    0
}

/// Every key matching `pattern`: one SCAN per primary on a cluster, else one SCAN.
async fn scan(fred: &FredClient, pattern: &str, timeout: std::time::Duration) -> leasehold::Result<Vec<String>> {
    let mut stream = if fred.is_clustered() {
        fred.scan_cluster_buffered(pattern.to_owned(), Some(500), None).boxed()
    } else {
        fred.scan_buffered(pattern.to_owned(), Some(500), None).boxed()
    };
    let mut keys = Vec::new();
    loop {
        let next = tokio::time::timeout(timeout, stream.next())
            .await
            .map_err(|_| Error::new(ErrorKind::Timeout, format!("SCAN did not answer within {timeout:?}")))?;
        match next {
            None => break,
            Some(Ok(key)) => {
                if let Some(key) = key.as_str() {
                    keys.push(key.to_owned());
                }
            }
            Some(Err(error)) => return Err(Error::from_fred(error)),
        }
    }
    // A key can be reported twice by SCAN (rehashing).
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// `status`'s text output (the JSON fields, for people).
fn print_text(status: &Status) {
    println!("name:       {}", status.name);
    if let Some(derived) = &status.derived {
        let form = if derived.channel { "a channel name" } else { "a key" };
        println!("kind:       not a lock: {form} of {} `{}`", derived.what, derived.of);
        if !derived.channel {
            println!("key type:   {}", status.redis_type);
        }
        if derived.role.starts_with("election_") {
            println!("            (see `leasehold status --election '{}'`)", derived.of);
        } else {
            println!("            (see `leasehold status '{}'`)", derived.of);
        }
        return;
    }
    if status.kind == "missing_semaphore" {
        let waiting = status.subscribers.unwrap_or(0);
        println!("kind:       semaphore missing (no key; {waiting} connection(s) wait on its channel)");
        println!("            its waiters wait until someone sets it: try_set_permits / trySetPermits");
        println!("            (a flush, or a restart without persistence, empties a semaphore)");
        return;
    }
    let state = if status.holders.is_empty() { "free" } else { "held" };
    match status.kind {
        "semaphore" => println!(
            "kind:       semaphore (a whole number: its available permits; a latch's count looks the same; key type {})",
            status.redis_type
        ),
        "latch" => println!("kind:       latch (a count-down latch; key type {})", status.redis_type),
        "election" => {
            let led = if status.holders.is_empty() { "nobody leads" } else { "led" };
            let name = status.election.as_deref().unwrap_or_default();
            println!("kind:       election `{name}` ({led}; key type {})", status.redis_type);
        }
        kind => println!("kind:       {kind} ({state}; key type {})", status.redis_type),
    }
    println!("pttl:       {}", millis(status.pttl_ms));
    if status.kind == "election" {
        match (status.term, &status.value) {
            (Some(term), Some(value)) => {
                println!("leader:     term={term} value={}", crate::leader::one_line(value));
            }
            _ => println!("leader:     none"),
        }
    }
    for holder in &status.holders {
        let label = if status.kind == "permit_semaphore" { "permit:" } else { "holder:" };
        let mode = holder.mode.map(|m| format!("{m}, ")).unwrap_or_default();
        let left = holder.pttl_ms.map_or_else(|| "no expiry".to_owned(), |ms| format!("{ms} ms left"));
        println!("{label:<11} {} ({mode}holds {}, {left}){}", holder.owner, holder.holds, holder.who.text());
    }
    println!("waiters:    {}", status.waiters.len());
    for waiter in &status.waiters {
        let permits = waiter.permits.map(|p| format!(", {p} permit(s)")).unwrap_or_default();
        let entry = millis(waiter.pttl_ms);
        let queue = format!("{}:", waiter.queue);
        println!("  {queue:<9} {} (entry {entry} left{permits}){}", waiter.owner, waiter.who.text());
    }
    let last = if status.kind == "election" { "last term: " } else { "last token:" };
    match status.last_token {
        Some(token) => println!("{last} {token}"),
        None => println!("{last} -"),
    }
    if let Some(available) = status.available {
        println!("available:  {available} permits");
    }
    if let Some(count) = status.count {
        println!("count:      {count}");
    }
    if let Some(subscribers) = status.subscribers {
        println!("listening:  {subscribers} connection(s) on its channel");
    }
}

/// `N ms`, or `-` for none.
fn millis(ms: Option<i64>) -> String {
    ms.map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms"))
}
