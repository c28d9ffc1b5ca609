//! `leasehold status` and `leasehold list`: what is in Redis for a lock, read with
//! one read-only script per lock (`lua/status.lua`), so each answer is one instant's.

use std::sync::LazyLock;

use futures_util::StreamExt;
use leasehold::fred::prelude::{Client as FredClient, ClientLike, PubsubInterface};
use leasehold::fred::types::scripts::Script;
use leasehold::fred::types::Value;
use leasehold::{Client, Error, ErrorKind};
use lock_core::semaphore::SemaphoreNames;
use lock_core::LockNames;

use crate::args::{ListArgs, StatusArgs};
use crate::exit;
use crate::json::Json;

static STATUS: LazyLock<Script> = LazyLock::new(|| Script::from_lua(include_str!("../lua/status.lua")));

/// One holder of a lock.
pub(crate) struct Holder {
    /// The Hash field (`UUID:N`) or the simple lock's String value (`UUID-N`).
    pub(crate) owner: String,
    /// Its hold count (1 for a simple lock).
    pub(crate) holds: i64,
}

/// What `status.lua` read for one lock, interpreted.
pub(crate) struct Status {
    pub(crate) name: String,
    /// The Redis type of the lock key (`none` when free).
    pub(crate) redis_type: String,
    /// `lock`, `fenced`, `fair`, `read_write`, `simple`, `semaphore` (a String holding a
    /// whole number: Redisson's `RSemaphore` count, or any such counter),
    /// `missing_semaphore` (no key, but clients wait on its semaphore channel), `none`
    /// (no key) or `other` (not a lock).
    pub(crate) kind: &'static str,
    /// For `missing_semaphore`: how many connections wait on `redisson_sc:{NAME}`.
    pub(crate) semaphore_subscribers: Option<i64>,
    /// A semaphore's count of available permits.
    pub(crate) available: Option<i64>,
    /// The key's remaining TTL in ms, `None` without a key or an expiry.
    pub(crate) pttl_ms: Option<i64>,
    pub(crate) holders: Vec<Holder>,
    /// Owners waiting in leasehold's queue (a `Lock`'s), head first.
    pub(crate) waiters: Vec<String>,
    /// Owners waiting in the fair queue (`FairLock`), head first.
    pub(crate) fair_queue: Vec<String>,
    /// The fencing counter: the last token issued for the name.
    pub(crate) last_token: Option<i64>,
}

impl Status {
    /// Whether it looks like a lock made by leasehold or Redisson: the key is absent,
    /// a Hash of owner fields, or a String holding a simple-lock owner.
    /// A semaphore is not listed: any String counter of an application would look like
    /// one.
    fn is_lock(&self) -> bool {
        !matches!(self.kind, "other" | "none" | "semaphore" | "missing_semaphore")
    }

    fn to_json(&self) -> Json {
        let holders = self
            .holders
            .iter()
            .map(|h| Json::Obj(vec![("owner", Json::str(&h.owner)), ("holds", Json::Int(h.holds))]))
            .collect();
        let owners = |list: &[String]| Json::Arr(list.iter().map(Json::str).collect());
        Json::Obj(vec![
            ("name", Json::str(&self.name)),
            ("kind", Json::str(self.kind)),
            ("held", Json::Bool(!self.holders.is_empty())),
            ("redis_type", Json::str(&self.redis_type)),
            ("pttl_ms", Json::opt_int(self.pttl_ms)),
            ("holders", Json::Arr(holders)),
            ("waiters", owners(&self.waiters)),
            ("fair_queue", owners(&self.fair_queue)),
            ("last_token", Json::opt_int(self.last_token)),
            ("available", Json::opt_int(self.available)),
            ("semaphore_subscribers", Json::opt_int(self.semaphore_subscribers)),
        ])
    }

    fn print_text(&self) {
        let state = if self.holders.is_empty() { "free" } else { "held" };
        println!("name:       {}", self.name);
        if let Some(waiting) = self.semaphore_subscribers.filter(|_| self.kind == "missing_semaphore") {
            println!("kind:       semaphore missing (no key; {waiting} connection(s) wait on its channel)");
            println!("            its waiters wait until someone sets it: try_set_permits / trySetPermits");
            println!("            (a flush, or a restart without persistence, empties a semaphore)");
            return;
        }
        println!("kind:       {} ({state}; key type {})", self.kind, self.redis_type);
        match self.pttl_ms {
            Some(ms) => println!("pttl:       {ms} ms"),
            None => println!("pttl:       -"),
        }
        for holder in &self.holders {
            println!("holder:     {} (holds {})", holder.owner, holder.holds);
        }
        println!("waiters:    {}", self.waiters.len());
        for owner in &self.waiters {
            println!("  waiting:  {owner}");
        }
        if !self.fair_queue.is_empty() {
            println!("fair queue: {}", self.fair_queue.len());
            for owner in &self.fair_queue {
                println!("  queued:   {owner}");
            }
        }
        match self.last_token {
            Some(token) => println!("last token: {token}"),
            None => println!("last token: -"),
        }
        if let Some(available) = self.available {
            println!("available:  {available} permits");
        }
    }
}

/// Reads the status of lock `name` (its full key) in one script call.
///
/// # Errors
/// An empty name ([`ErrorKind::InvalidArgument`], nothing sent); connection errors and
/// timeouts; script errors.
pub(crate) async fn read_status(client: &Client, name: &str) -> leasehold::Result<Status> {
    let names = LockNames::new(name)?;
    let keys = vec![names.key().to_owned(), names.token_key(), names.lock_queue_key(), names.queue_key()];
    let reply: Value = bounded(client, STATUS.evalsha_with_reload(client.fred(), keys, Vec::<String>::new())).await?;
    let parts = reply.into_array();
    let text = |i: usize| parts.get(i).and_then(Value::as_string).unwrap_or_default();
    let list = |i: usize| -> Vec<String> {
        parts.get(i).map(|v| v.clone().into_array().iter().filter_map(Value::as_string).collect()).unwrap_or_default()
    };
    let redis_type = text(0);
    let pttl = parts.get(1).and_then(Value::as_i64).unwrap_or(-2);
    let body = list(2);
    let last_token = text(3).parse::<i64>().ok();
    let (waiters, fair_queue) = (list(4), list(5));
    let mut holders = Vec::new();
    let mut available = None;
    let kind = match redis_type.as_str() {
        "none" => "none",
        "hash" => {
            let mut owners_only = true;
            // A read/write lock (Redisson's `RReadWriteLock`): `mode`, reader owners,
            // writer owners `OWNER:write`.
            let mut rw_mode = false;
            for pair in body.chunks(2) {
                let (field, value) = (&pair[0], pair.get(1).map(String::as_str).unwrap_or_default());
                if field == "mode" && matches!(value, "read" | "write") {
                    rw_mode = true;
                } else if is_owner(field, ':') || field.strip_suffix(":write").is_some_and(|owner| is_owner(owner, ':'))
                {
                    holders.push(Holder { owner: field.clone(), holds: value.parse().unwrap_or(0) });
                } else if !field.strip_suffix(":w").is_some_and(|owner| is_owner(owner, ':')) {
                    // Neither an owner nor a leasehold waiter flag: not a lock's Hash.
                    owners_only = false;
                }
            }
            if rw_mode && owners_only {
                "read_write"
            } else if !owners_only || holders.is_empty() {
                holders.clear();
                "other"
            } else if !fair_queue.is_empty() {
                "fair"
            } else if last_token.is_some() {
                "fenced"
            } else {
                "lock"
            }
        }
        "string" => match body.first() {
            Some(owner) if is_owner(owner, '-') => {
                holders.push(Holder { owner: owner.clone(), holds: 1 });
                "simple"
            }
            Some(count) if count.parse::<i64>().is_ok() => {
                available = count.parse::<i64>().ok();
                "semaphore"
            }
            _ => "other",
        },
        _ => "other",
    };
    // No key: a semaphore whose waiters listen on its channel is missing, not free
    // (flushed, or lost in a restart without persistence; nobody will publish for it).
    let semaphore_subscribers = if kind == "none" { semaphore_subscribers(client, name).await? } else { None };
    let kind = if semaphore_subscribers.is_some() { "missing_semaphore" } else { kind };
    Ok(Status {
        name: name.to_owned(),
        redis_type,
        kind,
        semaphore_subscribers,
        pttl_ms: (pttl >= 0).then_some(pttl),
        holders,
        waiters,
        fair_queue,
        last_token,
        available,
    })
}

/// How many connections listen on the semaphore channel `redisson_sc:{NAME}` (sharded
/// on a cluster, where leasehold subscribes with `SSUBSCRIBE`), `None` for none.
async fn semaphore_subscribers(client: &Client, name: &str) -> leasehold::Result<Option<i64>> {
    let names = SemaphoreNames::new(name)?;
    let channel = names.channel().to_string();
    let fred = client.fred();
    let reply: Value = if fred.is_clustered() {
        bounded(client, fred.pubsub_shardnumsub(channel)).await?
    } else {
        bounded(client, fred.pubsub_numsub(channel)).await?
    };
    // [channel, count]
    let count = reply.into_array().get(1).and_then(Value::as_i64).unwrap_or(0);
    Ok((count > 0).then_some(count))
}

/// Runs `leasehold status`; returns the exit code.
pub(crate) async fn status(client: &Client, args: &StatusArgs) -> u8 {
    match read_status(client, &args.name).await {
        Ok(status) if args.json => {
            println!("{}", status.to_json());
            0
        }
        Ok(status) => {
            status.print_text();
            0
        }
        Err(error) => {
            eprintln!("leasehold: status of `{}`: {error}", args.name);
            exit::for_error(&error)
        }
    }
}

/// Runs `leasehold list`; returns the exit code.
pub(crate) async fn list(client: &Client, args: &ListArgs) -> u8 {
    let keys = match scan(client.fred(), &args.pattern, client.config().command_timeout).await {
        Ok(keys) => keys,
        Err(error) => {
            eprintln!("leasehold: list: {error}");
            return exit::for_error(&error);
        }
    };
    let mut locks = Vec::new();
    for key in keys {
        match read_status(client, &key).await {
            Ok(status) if status.is_lock() => locks.push(status),
            // Gone since the SCAN, or not a lock.
            Ok(_) => {}
            Err(error) => {
                eprintln!("leasehold: list: reading `{key}`: {error}");
                return exit::for_error(&error);
            }
        }
    }
    locks.sort_by(|a, b| a.name.cmp(&b.name));
    if args.json {
        let items = locks
            .iter()
            .map(|s| {
                Json::Obj(vec![
                    ("name", Json::str(&s.name)),
                    ("kind", Json::str(s.kind)),
                    ("holders", Json::Int(i64::try_from(s.holders.len()).unwrap_or(i64::MAX))),
                    ("pttl_ms", Json::opt_int(s.pttl_ms)),
                    ("waiters", Json::Int(i64::try_from(s.waiters.len() + s.fair_queue.len()).unwrap_or(i64::MAX))),
                ])
            })
            .collect();
        println!("{}", Json::Arr(items));
    } else {
        for s in &locks {
            let pttl = s.pttl_ms.map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms"));
            let waiting = s.waiters.len() + s.fair_queue.len();
            println!("{}\t{}\tholders={}\tpttl={pttl}\twaiters={waiting}", s.name, s.kind, s.holders.len());
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

/// Bounds a fred call by the client's command timeout.
pub(crate) async fn bounded<T>(
    client: &Client,
    call: impl std::future::Future<Output = Result<T, leasehold::fred::error::Error>>,
) -> leasehold::Result<T> {
    let timeout = client.config().command_timeout;
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result.map_err(Error::from_fred),
        Err(_) => Err(Error::new(ErrorKind::Timeout, format!("Redis did not answer within {timeout:?}"))),
    }
}

/// Whether `text` is `UUID` `sep` digits: a Redisson/leasehold owner (`:`) or a
/// leasehold simple-lock owner (`-`).
pub(crate) fn is_owner(text: &str, sep: char) -> bool {
    let Some((uuid, n)) = text.rsplit_once(sep) else { return false };
    let uuid_shape = uuid.len() == 36
        && uuid
            .char_indices()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() });
    uuid_shape && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::is_owner;

    #[test]
    fn owner_shapes() {
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert!(is_owner(&format!("{uuid}:1"), ':'));
        assert!(is_owner(&format!("{uuid}-12"), '-'));
        assert!(!is_owner(&format!("{uuid}:1:w"), ':'));
        assert!(!is_owner(&format!("{uuid}:"), ':'));
        assert!(!is_owner("name:1", ':'));
        assert!(!is_owner("7", '-'));
    }
}
