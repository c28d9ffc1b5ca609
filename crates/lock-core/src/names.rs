//! Key and channel names, as Redisson derives them wherever that keeps every key of a
//! lock in the lock key's cluster hash slot.
//!
//! The lock key is the name itself. Every other key of the lock, and its channel, is
//! derived from it so that it hashes to the same slot as `NAME` (a Redis Cluster script
//! may only touch keys of one slot, and sharded pub/sub needs the channel there too):
//!
//! | `NAME` | derived | why |
//! |---|---|---|
//! | has a hash tag (`{user:7}:cart`) | `PREFIX:NAME` | Redisson's rule: the user's tag decides the slot |
//! | no `{`, no `}` (`order:1`) | `PREFIX:{NAME}` | Redisson's rule: `{NAME}` hashes like `NAME` |
//! | braces but no valid tag, no `}` (`a{b`, `{`) | `PREFIX:{NAME}` | deviation: Redisson's `PREFIX:NAME` hashes to another slot |
//! | braces but no valid tag, with `}` (`{}`, `}{`, `a}b`) | `PREFIX:{T}:NAME` | deviation: `T` is a short decimal "slot tag" that hashes to `NAME`'s slot |
//!
//! A valid hash tag is Redis's: the text between the first `{` and the first `}` after
//! it, when not empty. `PREFIX` never contains a brace, so the first `{` of a derived
//! key is either `NAME`'s own (first row) or the one added here.

use std::sync::Arc;

use fred::bytes::Bytes;

use crate::error::{Error, Result};

/// Prefix of the release channel: `redisson_lock__channel:{NAME}` (two underscores).
pub const CHANNEL_PREFIX: &str = "redisson_lock__channel";
/// Prefix of the fencing counter of a fenced lock: `redisson_lock_token:{NAME}`.
pub const TOKEN_PREFIX: &str = "redisson_lock_token";

/// Prefix of a fair lock's wait queue: `redisson_lock_queue:{NAME}` (Redisson's
/// `RFairLock`), a List of waiting owner fields, head first.
pub const QUEUE_PREFIX: &str = "redisson_lock_queue";
/// Prefix of a fair lock's waiter deadlines: `redisson_lock_timeout:{NAME}` (Redisson's
/// `RFairLock`), a sorted set owner field -> deadline in ms since the epoch.
pub const TIMEOUT_PREFIX: &str = "redisson_lock_timeout";

/// Prefix of a reentrant lock's wait queue (leasehold only; Redisson ignores it):
/// `leasehold_lock_queue:{NAME}`, a List of waiting owner fields, head first.
pub const LOCK_QUEUE_PREFIX: &str = "leasehold_lock_queue";
/// Prefix of a lock's waiter entries (leasehold only): `leasehold_lock_waiters:{NAME}`,
/// a Hash owner field -> `"DEADLINE LEASE"` (server time in ms until which the entry
/// lives without a refresh; the lease a hand-over gives that waiter).
pub const LOCK_WAITERS_PREFIX: &str = "leasehold_lock_waiters";
/// Prefix of a lock's queue channel (leasehold only): `leasehold_lock__queue:{NAME}`,
/// where releases announce hand-overs and new queue heads (`"GRANTED NEXT WAIT_MS"`).
pub const LOCK_QUEUE_CHANNEL_PREFIX: &str = "leasehold_lock__queue";

/// Prefix of a lock's history of forced unlocks (leasehold only; Redisson ignores it):
/// `leasehold_history:{NAME}`, a List of `"<server TIME ms> force-unlock by=<who>
/// owners=<a,b>"`, newest first, at most 100 entries, expiring 7 days after the last.
pub const HISTORY_PREFIX: &str = "leasehold_history";

/// Prefix of a client's description (leasehold only; Redisson ignores it):
/// `leasehold_client:{UUID}`, a Hash `host`, `pid`, `service`, `started`, `version`,
/// refreshed every watchdog period and expiring one watchdog timeout after the last
/// refresh (see [`crate::who`]).
pub const CLIENT_PREFIX: &str = "leasehold_client";

/// Prefix of a fenced resource's fence: `leasehold_fence:{RESOURCE}` (leasehold only;
/// see `lua/fenced_write.lua`).
pub const FENCE_PREFIX: &str = "leasehold_fence";

/// The fence of the resource key `resource`, `leasehold_fence:{RESOURCE}`, in the
/// resource's hash slot (derived like every lock key's names, [`derived_key`]).
pub fn fence_key(resource: &str) -> String {
    derived_key(FENCE_PREFIX, resource)
}

/// Prefix of an election's lead (leasehold only; Redisson ignores it):
/// `leasehold_election:{NAME}`, a reentrant lock Hash (field = the leading candidate's
/// owner id, value = its hold count) whose TTL is the leader's lease.
pub const ELECTION_PREFIX: &str = "leasehold_election";
/// Prefix of an election's term counter (leasehold only): `leasehold_election_term:{NAME}`,
/// a String integer, the last term issued (a fencing token; see `fragments/token.lua`).
pub const ELECTION_TERM_PREFIX: &str = "leasehold_election_term";
/// Prefix of an election's leader record (leasehold only):
/// `leasehold_election_leader:{NAME}`, a Hash `owner`, `term`, `value`: who leads, in
/// which term, and what it proclaims. Valid only while `owner` holds the lead.
pub const ELECTION_RECORD_PREFIX: &str = "leasehold_election_leader";
/// Prefix of an election's waiting candidates (leasehold only):
/// `leasehold_election_candidates:{NAME}`, a Hash owner -> `TICKET VALUE`: the value each
/// queued campaign leads with, so that a resign grants the first live one the lead in
/// one step (`election_release.lua`). An entry goes when its candidate leads, leaves
/// the queue, or is purged from it as dead (the queue purge's and the hand-over's
/// `forget` hook); the Hash's TTL is the longest keep-alive of a queued call.
pub const ELECTION_CANDIDATES_PREFIX: &str = "leasehold_election_candidates";
/// Prefix of an election's change channel (leasehold only):
/// `leasehold_election__channel:{NAME}`, carrying `L <term> <lease_ms> <value>` (a
/// leader took the lead or proclaimed a value) and `N <term>` (the lead of that term
/// ended: resigned or forced).
pub const ELECTION_CHANNEL_PREFIX: &str = "leasehold_election__channel";

/// The lead key of the election `name` (the full name, any client prefix included),
/// `leasehold_election:{NAME}`: [`unique_key`], so every key of the election is in
/// `name`'s slot and two names (`x`, `{x}`) never share an election.
pub fn election_key(name: &str) -> String {
    unique_key(ELECTION_PREFIX, name)
}

/// Payload published on the release channel when a lock is released.
pub const UNLOCK_MESSAGE: &str = "0";
/// The prefix of a read/write lock's waiting writers, `leasehold_rwlock_writers:{NAME}`
/// (a sorted set writer -> deadline, leasehold's writer preference; Redisson ignores it).
pub const RW_WRITERS_PREFIX: &str = "leasehold_rwlock_writers";
/// The prefix of the order of a read/write lock's waiting writers,
/// `leasehold_rwlock_writers:order:{NAME}` (a List of writers, first come first: a
/// free lock goes to the earliest live one). Under [`RW_WRITERS_PREFIX`]'s ACL pattern
/// (`leasehold_rwlock_writers:*`), and never a writers key (those go on with `{`).
pub const RW_WRITERS_ORDER_PREFIX: &str = "leasehold_rwlock_writers:order";
/// The prefix of a read/write lock's waiting readers, `leasehold_rwlock_readers:{NAME}`
/// (a Hash reader owner -> `DEADLINE_MS:LEASE_MS:TICKET`, which a write release grants in one
/// step; Redisson ignores it).
pub const RW_READERS_PREFIX: &str = "leasehold_rwlock_readers";
/// The prefix of a read/write lock's grant channel, `leasehold_rwlock__grants:{NAME}`:
/// a write release that granted waiting readers their holds names them there
/// (`OWNER:LEASE_MS:TICKET` separated by spaces), beside Redisson's channel.
pub const RW_GRANTS_CHANNEL_PREFIX: &str = "leasehold_rwlock__grants";
/// The prefix of a read/write lock's channel, `redisson_rwlock:{NAME}` (Redisson's
/// `RReadWriteLock`; readers and writers share it).
pub const RWLOCK_CHANNEL_PREFIX: &str = "redisson_rwlock";
/// Payload published when a read lock is released: wakes every waiter.
pub const READ_UNLOCK_MESSAGE: &str = "1";
/// The prefix of a semaphore's channel, `redisson_sc:{NAME}` (Redisson's `RSemaphore`
/// and `RPermitExpirableSemaphore`): its messages are the count of available permits.
pub const SEMAPHORE_CHANNEL_PREFIX: &str = "redisson_sc";

/// Redis's hash tag of `key`: the text between the first `{` and the first `}` after
/// it, when that is not empty.
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// The cluster hash slot of `key` (CRC16 of its hash tag, or of the whole key).
pub fn key_slot(key: &[u8]) -> u16 {
    fred::util::redis_keyslot(key)
}

/// The shortest decimal string that hashes to `slot` (0..16384), used as a hash tag
/// for names whose own braces make Redisson's derivation leave the slot.
pub(crate) fn slot_tag(slot: u16) -> u32 {
    static TAGS: std::sync::LazyLock<Vec<u32>> = std::sync::LazyLock::new(|| {
        // About 170,000 CRC16s of short strings, once per process: a few milliseconds.
        let mut tags = vec![u32::MAX; 16384];
        let mut missing = tags.len();
        let mut n: u32 = 0;
        while missing > 0 {
            let slot = usize::from(key_slot(n.to_string().as_bytes()));
            if tags[slot] == u32::MAX {
                tags[slot] = n;
                missing -= 1;
            }
            n += 1;
        }
        tags
    });
    TAGS[usize::from(slot) % 16384]
}

/// Builds the key or channel `prefix` derives from the lock key `name`, in `name`'s hash
/// slot (see the module docs for the rule and where it departs from Redisson's).
pub fn derived_key(prefix: &str, name: &str) -> String {
    // Built with `push_str` rather than `format!`: every lock handle derives its
    // channel, and on a hot path handles are made per request.
    let mut key = String::with_capacity(prefix.len() + name.len() + 3);
    key.push_str(prefix);
    key.push(':');
    if hash_tag(name.as_bytes()).is_some() {
        key.push_str(name);
    } else if !name.contains('}') {
        // No `}` inside, so the one added here closes the tag: `{NAME}` hashes as NAME.
        key.push('{');
        key.push_str(name);
        key.push('}');
    } else {
        use std::fmt::Write as _;
        let _ = write!(key, "{{{}}}:{name}", slot_tag(key_slot(name.as_bytes())));
    }
    key
}

/// Builds a leasehold-only key of the lock key `name` (no Redisson layout to follow), in
/// `name`'s hash slot and distinct for every distinct `name`: `PREFIX:{NAME}` for a name
/// without braces, else `PREFIX:{T}:NAME` with `T` a decimal slot tag. Unlike
/// [`derived_key`], `x` and `{x}` (two locks) get two keys: the first `}` ends the
/// brace-free form, while the other form goes on after its tag.
pub fn unique_key(prefix: &str, name: &str) -> String {
    if name.contains(['{', '}']) {
        format!("{prefix}:{{{}}}:{name}", slot_tag(key_slot(name.as_bytes())))
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `true` when [`derived_key`] follows Redisson's naming for the lock key `name`
/// (`false` for names with braces but no valid hash tag, where Redisson's names would
/// leave the lock's slot).
pub fn is_redisson_derivation(name: &str) -> bool {
    hash_tag(name.as_bytes()).is_some() || !name.contains(['{', '}'])
}

/// The names of one lock: its key and the keys and channel derived from it.
///
/// Cheap to clone (shared strings).
#[derive(Clone)]
pub struct LockNames {
    key: Arc<str>,
    channel: Arc<str>,
    /// The same two strings as fred byte strings sharing the `Arc`s, made once: a
    /// script call clones them (a reference count) instead of copying them.
    key_arg: Bytes,
    channel_arg: Bytes,
    /// The wait queue, waiter entries and queue channel as script arguments, made on
    /// first use (every release names them; a single try does not).
    queue_args: std::sync::OnceLock<[Bytes; 3]>,
}

impl std::fmt::Debug for LockNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockNames").field("key", &self.key).field("channel", &self.channel).finish()
    }
}

impl PartialEq for LockNames {
    fn eq(&self, other: &Self) -> bool {
        // The channel and the byte strings are derived from the key.
        self.key == other.key
    }
}

impl Eq for LockNames {}

impl std::hash::Hash for LockNames {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

/// `parts` joined into one shared string: through a buffer on the stack when short (one
/// allocation, the `Arc`'s), else through a `String`.
pub(crate) fn concat_shared(parts: &[&str]) -> Arc<str> {
    let mut buffer = [0u8; 160];
    let len: usize = parts.iter().map(|part| part.len()).sum();
    if len <= buffer.len() {
        let mut at = 0;
        for part in parts {
            buffer[at..at + part.len()].copy_from_slice(part.as_bytes());
            at += part.len();
        }
        // Whole `str`s joined: always UTF-8.
        if let Ok(text) = std::str::from_utf8(&buffer[..len]) {
            return Arc::from(text);
        }
    }
    Arc::from(parts.concat())
}

/// An `Arc<str>` seen as bytes, so that a [`Bytes`] can share it instead of copying it.
struct SharedText(Arc<str>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A [`Bytes`] that shares `text` (one small allocation, no copy); its clones only
/// count references.
pub(crate) fn shared_bytes(text: &Arc<str>) -> Bytes {
    Bytes::from_owner(SharedText(Arc::clone(text)))
}

impl LockNames {
    /// Names for the lock key `key` (the full key, any client prefix included).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `key` is empty.
    pub fn new(key: &str) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::invalid_argument("a lock name must not be empty"));
        }
        let key: Arc<str> = Arc::from(key);
        let channel = match (hash_tag(key.as_bytes()).is_some(), key.contains('}')) {
            // `derived_key`'s two usual cases, straight into the shared string.
            (true, _) => concat_shared(&[CHANNEL_PREFIX, ":", &key]),
            (false, false) => concat_shared(&[CHANNEL_PREFIX, ":{", &key, "}"]),
            (false, true) => Arc::from(derived_key(CHANNEL_PREFIX, &key)),
        };
        let (key_arg, channel_arg) = (shared_bytes(&key), shared_bytes(&channel));
        Ok(LockNames { key, channel, key_arg, channel_arg, queue_args: std::sync::OnceLock::new() })
    }

    /// [`LockNames::lock_queue_key`], [`LockNames::lock_waiters_key`] and
    /// [`LockNames::lock_queue_channel`] as script arguments (made once per `LockNames`).
    pub(crate) fn queue_args(&self) -> &[Bytes; 3] {
        self.queue_args.get_or_init(|| {
            [
                Bytes::from(self.lock_queue_key()),
                Bytes::from(self.lock_waiters_key()),
                Bytes::from(self.lock_queue_channel()),
            ]
        })
    }

    /// The lock key as a script argument (shared, not copied).
    pub(crate) fn key_arg(&self) -> Bytes {
        self.key_arg.clone()
    }

    /// The release channel as a script argument (shared, not copied).
    pub(crate) fn channel_arg(&self) -> Bytes {
        self.channel_arg.clone()
    }

    /// The lock key (a Hash for the reentrant lock, a String for the simple lock).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The lock key as a shared string.
    pub fn key_arc(&self) -> &Arc<str> {
        &self.key
    }

    /// The release channel, `redisson_lock__channel:{NAME}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The release channel as a shared string.
    pub fn channel_arc(&self) -> &Arc<str> {
        &self.channel
    }

    /// The lock's wait queue, `leasehold_lock_queue:{NAME}` (see [`LOCK_QUEUE_PREFIX`];
    /// one per lock key, [`unique_key`]: `x` and `{x}` queue apart).
    pub fn lock_queue_key(&self) -> String {
        unique_key(LOCK_QUEUE_PREFIX, &self.key)
    }

    /// The lock's waiter entries, `leasehold_lock_waiters:{NAME}` (see
    /// [`LOCK_WAITERS_PREFIX`]; one per lock key, as the queue).
    pub fn lock_waiters_key(&self) -> String {
        unique_key(LOCK_WAITERS_PREFIX, &self.key)
    }

    /// The lock's queue channel, `leasehold_lock__queue:{NAME}` (see
    /// [`LOCK_QUEUE_CHANNEL_PREFIX`]). Derived like the release channel, so locks that
    /// share a release channel (`x` and `{x}`) share it too: its messages name owners,
    /// and an owner belongs to one lock.
    pub fn lock_queue_channel(&self) -> String {
        derived_key(LOCK_QUEUE_CHANNEL_PREFIX, &self.key)
    }

    /// The lock's history of forced unlocks, `leasehold_history:{NAME}` (see
    /// [`HISTORY_PREFIX`]; one per lock key, as the wait queue).
    pub fn history_key(&self) -> String {
        unique_key(HISTORY_PREFIX, &self.key)
    }

    /// The fencing counter, `redisson_lock_token:{NAME}`.
    pub fn token_key(&self) -> String {
        derived_key(TOKEN_PREFIX, &self.key)
    }

    /// The fair lock's wait queue, `redisson_lock_queue:{NAME}`.
    pub fn queue_key(&self) -> String {
        derived_key(QUEUE_PREFIX, &self.key)
    }

    /// The fair lock's waiter deadlines, `redisson_lock_timeout:{NAME}`.
    pub fn timeout_key(&self) -> String {
        derived_key(TIMEOUT_PREFIX, &self.key)
    }

    /// The fair lock's channel for one waiter, `redisson_lock__channel:{NAME}:OWNER`
    /// (Redisson's `RFairLock`: the release channel, a colon and the owner field). The
    /// release publishes on the queue head's channel only. It keeps the release
    /// channel's hash tag, so it stays in the lock key's slot.
    pub fn waiter_channel(&self, owner: &str) -> String {
        format!("{}:{owner}", self.channel)
    }

    /// The read/write lock's channel, `redisson_rwlock:{NAME}` (derived like the
    /// release channel: in the lock key's slot).
    pub fn rwlock_channel(&self) -> String {
        derived_key(RWLOCK_CHANNEL_PREFIX, &self.key)
    }

    /// The prefix of every read hold's timeout key of the read/write lock: `{NAME}`, or
    /// NAME when it has a valid hash tag (Redisson's `suffixName`: NAME when it contains
    /// `{`). A name with braces but no valid tag gets `{T}:NAME` (T a slot tag, as
    /// [`derived_key`] does), where Redisson's keys would leave the lock's slot.
    pub fn rw_key_prefix(&self) -> String {
        if hash_tag(self.key.as_bytes()).is_some() {
            self.key.to_string()
        } else if !self.key.contains(['{', '}']) {
            format!("{{{}}}", self.key)
        } else {
            format!("{{{}}}:{}", slot_tag(key_slot(self.key.as_bytes())), self.key)
        }
    }

    /// The read/write lock's waiting writers, `leasehold_rwlock_writers:{NAME}` (see
    /// [`RW_WRITERS_PREFIX`]; one per lock key, [`unique_key`]).
    pub fn rw_writers_key(&self) -> String {
        unique_key(RW_WRITERS_PREFIX, &self.key)
    }

    /// The order of the read/write lock's waiting writers,
    /// `leasehold_rwlock_writers:order:{NAME}` (see [`RW_WRITERS_ORDER_PREFIX`]; one per
    /// lock key, [`unique_key`]).
    pub fn rw_writers_order_key(&self) -> String {
        unique_key(RW_WRITERS_ORDER_PREFIX, &self.key)
    }

    /// The read/write lock's waiting readers, `leasehold_rwlock_readers:{NAME}` (see
    /// [`RW_READERS_PREFIX`]; one per lock key, [`unique_key`]).
    pub fn rw_readers_key(&self) -> String {
        unique_key(RW_READERS_PREFIX, &self.key)
    }

    /// The read/write lock's grant channel, `leasehold_rwlock__grants:{NAME}` (see
    /// [`RW_GRANTS_CHANNEL_PREFIX`]). Derived like the lock's channel, so locks that
    /// share `redisson_rwlock:{NAME}` (`x` and `{x}`) share it too: it is that
    /// channel's companion in the subscriber.
    pub fn rw_grants_channel(&self) -> String {
        derived_key(RW_GRANTS_CHANNEL_PREFIX, &self.key)
    }

    /// The election key `PREFIX:SUFFIX` beside this lead key `leasehold_election:SUFFIX`
    /// (in its slot); any other key: [`derived_key`] of it.
    fn election_sibling(&self, prefix: &str) -> String {
        match self.key.strip_prefix(ELECTION_PREFIX).and_then(|rest| rest.strip_prefix(':')) {
            Some(suffix) => concat_shared(&[prefix, ":", suffix]).to_string(),
            None => derived_key(prefix, &self.key),
        }
    }

    /// The term counter of the election whose lead is this key,
    /// `leasehold_election_term:{NAME}` (see [`ELECTION_TERM_PREFIX`]).
    pub fn election_term_key(&self) -> String {
        self.election_sibling(ELECTION_TERM_PREFIX)
    }

    /// The leader record of the election whose lead is this key,
    /// `leasehold_election_leader:{NAME}` (see [`ELECTION_RECORD_PREFIX`]).
    pub fn election_record_key(&self) -> String {
        self.election_sibling(ELECTION_RECORD_PREFIX)
    }

    /// The waiting candidates of the election whose lead is this key,
    /// `leasehold_election_candidates:{NAME}` (see [`ELECTION_CANDIDATES_PREFIX`]).
    pub fn election_candidates_key(&self) -> String {
        self.election_sibling(ELECTION_CANDIDATES_PREFIX)
    }

    /// The change channel of the election whose lead is this key,
    /// `leasehold_election__channel:{NAME}` (see [`ELECTION_CHANNEL_PREFIX`]).
    pub fn election_channel(&self) -> String {
        self.election_sibling(ELECTION_CHANNEL_PREFIX)
    }

    /// One reader owner's timeout-key prefix, `{NAME}:OWNER:rwlock_timeout` (the read
    /// hold `k`'s key is this + `:k`).
    pub fn rw_timeout_prefix(&self, owner: &str) -> String {
        format!("{}:{owner}:rwlock_timeout", self.rw_key_prefix())
    }
}

/// Writes `bytes` as lowercase hex, two digits a byte: how the 16-byte ids (a permit's,
/// a semaphore operation's) are shown and put in key names.
pub(crate) fn write_hex(bytes: &[u8], f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    bytes.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_get_a_hash_tag() {
        let names = LockNames::new("order:1001").expect("valid");
        assert_eq!(names.key(), "order:1001");
        assert_eq!(names.channel(), "redisson_lock__channel:{order:1001}");
        assert_eq!(names.token_key(), "redisson_lock_token:{order:1001}");
        assert_eq!(names.queue_key(), "redisson_lock_queue:{order:1001}");
        assert_eq!(names.timeout_key(), "redisson_lock_timeout:{order:1001}");
        assert_eq!(names.waiter_channel("u:1"), "redisson_lock__channel:{order:1001}:u:1");
    }

    #[test]
    fn names_with_a_hash_tag_keep_it() {
        let names = LockNames::new("{user:7}:cart").expect("valid");
        assert_eq!(names.channel(), "redisson_lock__channel:{user:7}:cart");
        assert_eq!(names.token_key(), "redisson_lock_token:{user:7}:cart");
    }

    #[test]
    fn empty_names_are_rejected() {
        let err = LockNames::new("").expect_err("empty");
        assert!(err.is_invalid_argument());
    }

    /// Every derived key and the channel hash to the lock key's slot, for every name,
    /// hostile ones included.
    #[test]
    fn every_derived_name_is_in_the_lock_keys_slot() {
        let names = [
            "x",
            "{x}",
            "{user:7}:cart",
            "a}b{c}",
            "}{",
            "{}",
            "{",
            "}",
            "a{b",
            "a{}b",
            "{}x}",
            "}{x}",
            "a}b",
            "{{}}",
            "{}{x}",
            "x{",
            "x}",
            "}}}",
            "{{{",
            "\u{0}{\u{1}}",
            "\n{}\t",
            "日本{語",
        ];
        for name in names {
            let lock = LockNames::new(name).expect("valid");
            let slot = key_slot(name.as_bytes());
            // Any further key a feature derives (`PREFIX:{NAME}` + a suffix) stays too.
            let derived_names = [
                lock.channel().to_owned(),
                lock.token_key(),
                lock.queue_key(),
                lock.timeout_key(),
                lock.lock_queue_key(),
                lock.lock_waiters_key(),
                lock.lock_queue_channel(),
                lock.waiter_channel("00000000-0000-0000-0000-000000000000:1"),
                format!("{}:r1", derived_key("p", name)),
            ];
            assert_eq!(lock.channel(), derived_key(CHANNEL_PREFIX, name), "{name:?}");
            assert_eq!((&lock.key_arg()[..], &lock.channel_arg()[..]), (name.as_bytes(), lock.channel().as_bytes()));
            for derived in derived_names {
                assert_eq!(key_slot(derived.as_bytes()), slot, "{derived:?} is not in the slot of {name:?}");
            }
        }
    }

    #[test]
    fn each_lock_key_gets_its_own_queue() {
        let names = ["x", "{x}", "{x}x", "x}", "{", "}", "{}", "a{b", "{x}:x", "order:1"];
        let queues: std::collections::HashSet<String> =
            names.iter().map(|name| LockNames::new(name).expect("valid").lock_queue_key()).collect();
        assert_eq!(queues.len(), names.len(), "{queues:?}");
        assert_eq!(LockNames::new("order:1").expect("valid").lock_queue_key(), "leasehold_lock_queue:{order:1}");
    }

    #[test]
    fn redisson_names_are_kept_where_they_stay_in_the_slot() {
        assert!(is_redisson_derivation("order:1") && is_redisson_derivation("{user:7}:cart"));
        assert!(!is_redisson_derivation("a{b") && !is_redisson_derivation("{}") && !is_redisson_derivation("a}b"));
        assert_eq!(derived_key("p", "a{b"), "p:{a{b}");
        assert_eq!(derived_key("p", "}{").split(':').count(), 3);
    }

    #[test]
    fn slot_tags_cover_every_slot() {
        for slot in [0u16, 1, 5000, 16383] {
            assert_eq!(key_slot(slot_tag(slot).to_string().as_bytes()), slot);
        }
    }
}
