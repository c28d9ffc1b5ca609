//! What is in Redis for one name, read with one read-only script (`lua/status.lua`),
//! so each answer is one instant's, and interpreted: which kind of object it is, who
//! holds it, who waits for it. Printed by `status` and `list` (`inspect.rs`).

use std::collections::HashMap;
use std::sync::LazyLock;

use leasehold::fred::prelude::PubsubInterface;
use leasehold::fred::types::scripts::Script;
use leasehold::fred::types::Value;
use leasehold::{Client, PubsubMode};
use lock_core::latch::LatchNames;
use lock_core::names::unique_key;
use lock_core::pes::{PesNames, NON_EXPIRING, PES_WAITERS_PREFIX};
use lock_core::semaphore::SemaphoreNames;
use lock_core::LockNames;

use crate::bounded::bounded;
use crate::json::Json;
use crate::keys::{derived, is_owner, Derived};
use crate::who::Who;

static STATUS: LazyLock<Script> = LazyLock::new(|| Script::from_lua(include_str!("../lua/status.lua")));

/// One holder: of a lock, a read/write lock, or a permit of a permit semaphore.
pub(crate) struct Holder {
    /// The Hash field (`UUID:N`; a writer's `UUID:N:write`), a simple lock's String
    /// value (`UUID-N`), or a permit's id (32 hex digits).
    pub(crate) owner: String,
    /// Its hold count (1 for a simple lock and a permit).
    pub(crate) holds: i64,
    /// `read` or `write` for a read/write lock's holders, else `None`.
    pub(crate) mode: Option<&'static str>,
    /// Its lease's remaining time in ms: the key's PTTL for a lock, the longest read
    /// hold's for a reader, the permit's own; `None` for none (no expiry).
    pub(crate) pttl_ms: Option<i64>,
    /// Its client (host, pid, service), filled in by [`crate::owners::Owners`].
    pub(crate) who: Who,
}

/// One waiter, in one of the queues the data layout keeps.
pub(crate) struct Waiter {
    /// The waiting owner (`UUID:N`; a writer's `UUID:N:write`), or the semaphore
    /// operation's or permit's id.
    pub(crate) owner: String,
    /// Which queue: `lock` (a `Lock`'s or `FencedLock`'s), `fair`, `write`, `read`,
    /// `semaphore`, `permit_semaphore`.
    pub(crate) queue: &'static str,
    /// The permits it asks for (the semaphores), else `None`.
    pub(crate) permits: Option<i64>,
    /// Its queue entry's remaining life in ms (its waiter refreshes it while it
    /// waits), `None` when the entry has no deadline.
    pub(crate) pttl_ms: Option<i64>,
    /// Its client (host, pid, service), filled in by [`crate::owners::Owners`].
    pub(crate) who: Who,
}

/// What the script read for one name, interpreted.
pub(crate) struct Status {
    pub(crate) name: String,
    /// The Redis type of the key `name` (`none` when there is none).
    pub(crate) redis_type: String,
    /// `lock`, `fenced`, `fair`, `read_write`, `simple`, `permit_semaphore`,
    /// `semaphore`, `latch`, `missing_semaphore`, `derived` (a key or channel of
    /// another object), `none` (no key) or `other` (not one of leasehold's or
    /// Redisson's objects). See docs/cli.md.
    pub(crate) kind: &'static str,
    /// The key's remaining TTL in ms, `None` without a key or an expiry.
    pub(crate) pttl_ms: Option<i64>,
    pub(crate) holders: Vec<Holder>,
    /// Every queue's waiters, each queue head first.
    pub(crate) waiters: Vec<Waiter>,
    /// The fencing counter: the last token issued for the name.
    pub(crate) last_token: Option<i64>,
    /// A semaphore's or permit semaphore's available permits.
    pub(crate) available: Option<i64>,
    /// A latch's count.
    pub(crate) count: Option<i64>,
    /// Connections subscribed to the object's channel (a semaphore's `redisson_sc:{NAME}`,
    /// a latch's channel), when it was asked (`status`, for those kinds).
    pub(crate) subscribers: Option<i64>,
    /// Kind `derived`: whose key it is.
    pub(crate) derived: Option<Derived>,
    /// Kind `election` (the lead key `leasehold_election:{NAME}`): the election's name.
    pub(crate) election: Option<String>,
    /// Kind `election`: the leader's term, when someone leads (`leasehold leader`).
    pub(crate) term: Option<u64>,
    /// Kind `election`: the leader's value, when someone leads.
    pub(crate) value: Option<String>,
}

/// Whether `read_status` asks the server who listens on the name's channels (`PUBSUB
/// NUMSUB`): how a missing semaphore and a latch are told. `list` does not (it lists
/// neither).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Channels {
    /// Ask (`status`).
    Ask,
    /// Do not (`list`, `unlock`): a count shows as `semaphore`, a missing key as `none`.
    Skip,
}

/// The kinds `list` lists: the objects someone holds.
const LISTED: [&str; 7] = ["lock", "fenced", "fair", "read_write", "simple", "permit_semaphore", "election"];

impl Status {
    /// Whether `list` shows it: a lock of any kind, or a permit semaphore whose permits
    /// are held (a semaphore's or latch's String count could be any application's
    /// counter).
    pub(crate) fn is_listed(&self) -> bool {
        LISTED.contains(&self.kind)
    }

    /// Why `unlock --force` must leave it, or `None` when it may go ahead.
    pub(crate) fn refusal(&self) -> Option<String> {
        match self.kind {
            "derived" => self.derived.as_ref().map(|d| format!("it is not a lock: it is {} `{}`", d.what, d.of)),
            "other" => Some(format!("it is not a lock (a {} of another shape)", self.redis_type)),
            "semaphore" | "missing_semaphore" => Some("it is a semaphore's count (permits have no holder)".to_owned()),
            "permit_semaphore" => {
                Some("it is a permit semaphore's count (its permits are released by id, or expire)".to_owned())
            }
            "latch" => Some("it is a latch's count (it opens when counted down)".to_owned()),
            _ => None,
        }
    }

    /// The `--json` object: the same fields, of the same types, in `status` and `list`.
    pub(crate) fn to_json(&self) -> Json {
        let holders = self
            .holders
            .iter()
            .map(|h| {
                let mut fields = vec![
                    ("owner", Json::str(&h.owner)),
                    ("holds", Json::Int(h.holds)),
                    ("mode", Json::opt_str(h.mode)),
                    ("pttl_ms", Json::opt_int(h.pttl_ms)),
                ];
                fields.extend(h.who.json_fields());
                Json::Obj(fields)
            })
            .collect();
        let waiters = self
            .waiters
            .iter()
            .map(|w| {
                let mut fields = vec![
                    ("owner", Json::str(&w.owner)),
                    ("queue", Json::str(w.queue)),
                    ("permits", Json::opt_int(w.permits)),
                    ("pttl_ms", Json::opt_int(w.pttl_ms)),
                ];
                fields.extend(w.who.json_fields());
                Json::Obj(fields)
            })
            .collect();
        Json::Obj(vec![
            ("name", Json::str(&self.name)),
            ("kind", Json::str(self.kind)),
            ("held", Json::Bool(!self.holders.is_empty())),
            ("redis_type", Json::str(&self.redis_type)),
            ("pttl_ms", Json::opt_int(self.pttl_ms)),
            ("holders", Json::Arr(holders)),
            ("waiters", Json::Arr(waiters)),
            ("last_token", Json::opt_int(self.last_token)),
            ("available", Json::opt_int(self.available)),
            ("count", Json::opt_int(self.count)),
            ("subscribers", Json::opt_int(self.subscribers)),
            ("derived_from", Json::opt_str(self.derived.as_ref().map(|d| d.of.as_str()))),
            ("role", Json::opt_str(self.derived.as_ref().map(|d| d.role))),
            ("election", Json::opt_str(self.election.as_deref())),
            ("term", Json::opt_int(self.term.map(|t| i64::try_from(t).unwrap_or(i64::MAX)))),
            ("value", Json::opt_str(self.value.as_deref())),
        ])
    }
}

/// Reads the status of `name` (its full key) in one script call, plus, with
/// [`Channels::Ask`], one `PUBSUB NUMSUB` per channel that tells a kind apart.
///
/// # Errors
/// An empty name ([`leasehold::ErrorKind::InvalidArgument`], nothing sent); connection
/// errors and timeouts; script errors.
pub(crate) async fn read_status(client: &Client, name: &str, channels: Channels) -> leasehold::Result<Status> {
    let lock = LockNames::new(name)?;
    let sem = SemaphoreNames::new(name)?;
    let pes = PesNames::new(name)?;
    let keys = vec![
        lock.key().to_owned(),
        lock.token_key(),
        lock.lock_queue_key(),
        lock.lock_waiters_key(),
        lock.queue_key(),
        lock.timeout_key(),
        lock.rw_writers_key(),
        lock.rw_writers_order_key(),
        lock.rw_readers_key(),
        pes.timeout_key().to_owned(),
        pes.queue().to_owned(),
        unique_key(PES_WAITERS_PREFIX, name),
        sem.queue().to_owned(),
        sem.entries().to_owned(),
    ];
    let argv = vec![lock.rw_key_prefix(), NON_EXPIRING.to_string()];
    let reply: Value = bounded(client, STATUS.evalsha_with_reload(client.fred(), keys, argv)).await?;
    let mut status = interpret(name, &reply.into_array());
    if let Some(election) = status.election.clone() {
        let extras = crate::election_status::read_extras(client, &election).await?;
        status.term = extras.term;
        status.value = extras.value;
        status.last_token = extras.last_token;
    } else if channels == Channels::Ask {
        ask_channels(client, &mut status).await?;
    }
    Ok(status)
}

/// The script's reply as a [`Status`] (no server call).
fn interpret(name: &str, parts: &[Value]) -> Status {
    let text = |i: usize| parts.get(i).and_then(Value::as_string).unwrap_or_default();
    let array = |i: usize| parts.get(i).map(|v| v.clone().into_array()).unwrap_or_default();
    let redis_type = text(0);
    let pttl = parts.get(1).and_then(Value::as_i64).unwrap_or(-2);
    let pttl_ms = (pttl >= 0).then_some(pttl);
    let body: Vec<String> = array(2).iter().filter_map(Value::as_string).collect();
    let last_token = text(3).parse::<i64>().ok();
    let waiters: Vec<Waiter> = array(4)
        .chunks(4)
        .filter_map(|w| {
            Some(Waiter {
                queue: queue_name(&w.first()?.as_string()?)?,
                owner: w.get(1)?.as_string()?,
                pttl_ms: w.get(2).and_then(Value::as_i64),
                permits: w.get(3).and_then(Value::as_i64),
                who: Who::NotAClient,
            })
        })
        .collect();
    let reads: HashMap<String, Option<i64>> =
        array(5).chunks(2).filter_map(|r| Some((r.first()?.as_string()?, r.get(1).and_then(Value::as_i64)))).collect();
    let permits: Vec<Holder> = array(6)
        .chunks(2)
        .filter_map(|p| {
            let owner = p.first()?.as_string()?;
            Some(Holder {
                owner,
                holds: 1,
                mode: None,
                pttl_ms: p.get(1).and_then(Value::as_i64),
                who: Who::NotAClient,
            })
        })
        .collect();
    let mut status = Status {
        name: name.to_owned(),
        redis_type,
        kind: "none",
        pttl_ms,
        holders: Vec::new(),
        waiters,
        last_token,
        available: None,
        count: None,
        subscribers: None,
        derived: None,
        election: None,
        term: None,
        value: None,
    };
    if let Some(election) = crate::election_status::election_of(name) {
        // An election's lead: a lock Hash, shown as its election (its leader, its
        // waiting candidates), never as a lock.
        let redis_type = status.redis_type.clone();
        status.kind = match redis_type.as_str() {
            "none" => "election",
            // Owner fields and waiter flags only (a lead handed over and not yet
            // claimed has no holder).
            "hash" if body.chunks(2).all(|pair| is_lock_field(&pair[0])) => {
                let _ = hash_kind(&mut status, &body, &reads);
                "election"
            }
            _ => "other",
        };
        if status.kind == "election" {
            status.election = Some(election);
            for waiter in &mut status.waiters {
                waiter.queue = "election";
            }
        } else {
            status.holders.clear();
        }
        return status;
    }
    if let Some(found) = derived(name) {
        if found.only_if_type.is_none_or(|wanted| wanted == status.redis_type) {
            // Its own "derived" keys are nonsense names: nothing of them is shown.
            status.kind = "derived";
            status.waiters.clear();
            status.last_token = None;
            status.derived = Some(found);
            return status;
        }
    }
    let redis_type = status.redis_type.clone();
    status.kind = match redis_type.as_str() {
        "none" => "none",
        "hash" => hash_kind(&mut status, &body, &reads),
        "string" => match body.first() {
            Some(owner) if is_owner(owner, '-') => {
                status.holders.push(Holder {
                    owner: owner.clone(),
                    holds: 1,
                    mode: None,
                    pttl_ms,
                    who: Who::NotAClient,
                });
                "simple"
            }
            Some(count) => match count.parse::<i64>() {
                Ok(count) => {
                    status.available = Some(count);
                    let pes_waits = status.waiters.iter().any(|w| w.queue == "permit_semaphore");
                    if !permits.is_empty() || pes_waits {
                        status.holders = permits;
                        "permit_semaphore"
                    } else {
                        // Or a latch: told apart by its channel, when asked.
                        "semaphore"
                    }
                }
                Err(_) => "other",
            },
            None => "other",
        },
        _ => "other",
    };
    if status.kind == "other" {
        status.holders.clear();
    }
    status
}

/// The holders and kind of a Hash: a lock's (owner fields and waiter flags), a
/// read/write lock's (`mode`, readers, writers), or `other`.
fn hash_kind(status: &mut Status, body: &[String], reads: &HashMap<String, Option<i64>>) -> &'static str {
    let mut owners_only = true;
    let mut rw_mode = false;
    for pair in body.chunks(2) {
        let (field, value) = (&pair[0], pair.get(1).map(String::as_str).unwrap_or_default());
        let holds = value.parse().unwrap_or(0);
        if field == "mode" && matches!(value, "read" | "write") {
            rw_mode = true;
        } else if is_owner(field, ':') {
            let read = reads.get(field).copied();
            // A reader's own lease is its longest read hold's; a lock owner's the key's.
            let pttl_ms = read.flatten().or(status.pttl_ms);
            status.holders.push(Holder {
                owner: field.clone(),
                holds,
                mode: read.map(|_| "read"),
                pttl_ms,
                who: Who::NotAClient,
            });
        } else if field.strip_suffix(":write").is_some_and(|owner| is_owner(owner, ':')) {
            let pttl_ms = status.pttl_ms;
            status.holders.push(Holder {
                owner: field.clone(),
                holds,
                mode: Some("write"),
                pttl_ms,
                who: Who::NotAClient,
            });
        } else if !field.strip_suffix(":w").is_some_and(|owner| is_owner(owner, ':')) {
            // Neither an owner nor a leasehold waiter flag: not a lock's Hash.
            owners_only = false;
        }
    }
    if !owners_only {
        return "other";
    }
    if rw_mode {
        for holder in &mut status.holders {
            holder.mode.get_or_insert("read");
        }
        return "read_write";
    }
    for holder in &mut status.holders {
        // Not a read/write lock: an owner field is a plain hold.
        holder.mode = None;
        holder.pttl_ms = status.pttl_ms;
    }
    if status.holders.iter().any(|h| h.owner.ends_with(":write")) || status.holders.is_empty() {
        // A writer field without `mode`, or only waiter flags: no lock's shape.
        return "other";
    }
    if status.waiters.iter().any(|w| w.queue == "fair") {
        "fair"
    } else if status.last_token.is_some() {
        "fenced"
    } else {
        "lock"
    }
}

/// Whether a Hash field is a lock's: an owner (`UUID:N`) or its waiter flag (`UUID:N:w`).
fn is_lock_field(field: &str) -> bool {
    is_owner(field, ':') || field.strip_suffix(":w").is_some_and(|owner| is_owner(owner, ':'))
}

/// The script's queue word as a `'static` one.
fn queue_name(queue: &str) -> Option<&'static str> {
    ["lock", "fair", "write", "read", "semaphore", "permit_semaphore"].into_iter().find(|q| *q == queue)
}

/// For a count with no sign of its kind, and for a missing key: who listens on the
/// semaphore's channel and on the latch's. A count waited on only through the latch's
/// channel is a latch; a missing key waited on through the semaphore's is a semaphore
/// that was flushed or lost in a restart.
async fn ask_channels(client: &Client, status: &mut Status) -> leasehold::Result<()> {
    match status.kind {
        "none" => {
            let waiting = subscribers(client, SemaphoreNames::new(&status.name)?.channel()).await?;
            if waiting > 0 {
                status.kind = "missing_semaphore";
                status.subscribers = Some(waiting);
            }
        }
        "semaphore" => {
            let on_semaphore = subscribers(client, SemaphoreNames::new(&status.name)?.channel()).await?;
            let latch = LatchNames::new(&status.name)?;
            let on_latch = subscribers(client, latch.channel()).await?;
            if on_latch > 0 && on_semaphore == 0 {
                status.kind = "latch";
                status.count = status.available.take();
                status.subscribers = Some(on_latch);
            } else {
                status.subscribers = Some(on_semaphore);
            }
        }
        "permit_semaphore" => {
            status.subscribers = Some(subscribers(client, PesNames::new(&status.name)?.channel()).await?);
        }
        _ => {}
    }
    Ok(())
}

/// How many connections listen on `channel` (`PUBSUB SHARDNUMSUB` when the client uses
/// sharded pub/sub on a cluster, as its waiters then do; else `PUBSUB NUMSUB`).
async fn subscribers(client: &Client, channel: &str) -> leasehold::Result<i64> {
    let fred = client.fred();
    let channel = channel.to_owned();
    let reply: Value = if matches!(client.pubsub_mode(), PubsubMode::Sharded) {
        bounded(client, fred.pubsub_shardnumsub(channel)).await?
    } else {
        bounded(client, fred.pubsub_numsub(channel)).await?
    };
    // [channel, count]
    Ok(reply.into_array().get(1).and_then(Value::as_i64).unwrap_or(0))
}
