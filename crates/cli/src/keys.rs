//! What a key's name says: whether it is one of the keys (or channels) the data layout
//! derives from an object's name (`docs/architecture/data-layout.md`), whose it is,
//! and whether a text is an owner id.
//!
//! Derived keys are never locks: a lock's waiter entries are a Hash whose fields are
//! owner ids, so going by the contents alone they pass for a lock. `status` and `list`
//! recognise them by name first.

use lock_core::latch::LATCH_CHANNEL_PREFIX;
use lock_core::names::{
    hash_tag, key_slot, CHANNEL_PREFIX, ELECTION_CANDIDATES_PREFIX, ELECTION_CHANNEL_PREFIX, ELECTION_PREFIX,
    ELECTION_RECORD_PREFIX, ELECTION_TERM_PREFIX, FENCE_PREFIX, LOCK_QUEUE_CHANNEL_PREFIX, LOCK_QUEUE_PREFIX,
    LOCK_WAITERS_PREFIX, QUEUE_PREFIX, RWLOCK_CHANNEL_PREFIX, RW_GRANTS_CHANNEL_PREFIX, RW_READERS_PREFIX,
    RW_WRITERS_ORDER_PREFIX, RW_WRITERS_PREFIX, SEMAPHORE_CHANNEL_PREFIX, TIMEOUT_PREFIX, TOKEN_PREFIX,
};
use lock_core::pes::{PES_QUEUE_PREFIX, PES_WAITERS_PREFIX};
use lock_core::semaphore::{
    SEMAPHORE_GRANTS_PREFIX, SEMAPHORE_OP_PREFIX, SEMAPHORE_QUEUE_PREFIX, SEMAPHORE_WAITERS_PREFIX,
};

/// Redisson's unlock latch, `redisson_unlock_latch:{NAME}:REQUEST_ID` (a String its
/// unlock keeps for a few seconds to answer a retried unlock; leasehold writes none).
const REDISSON_UNLOCK_LATCH_PREFIX: &str = "redisson_unlock_latch";

/// A key (or channel) derived from an object's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Derived {
    /// Which derived key, a stable word for `--json` (`lock_waiters`, `fair_queue`, ...).
    pub(crate) role: &'static str,
    /// What it is, for people.
    pub(crate) what: &'static str,
    /// The name of the object it belongs to, as far as the name tells (`x` and `{x}`
    /// share some derived names: `x` is given).
    pub(crate) of: String,
    /// A pub/sub channel name, never a key.
    pub(crate) channel: bool,
    /// The name alone is not conclusive (an application's key can end in `:timeout`):
    /// derived only when the key has this Redis type.
    pub(crate) only_if_type: Option<&'static str>,
}

/// How the part after `PREFIX:` ends.
#[derive(Clone, Copy)]
enum Tail {
    /// The derived name only.
    Name,
    /// The derived name, `:`, one more segment (an operation or request id).
    Segment,
    /// The derived name, maybe followed by `:OWNER` (the fair lock's waiter channels).
    MaybeOwner,
}

/// `(prefix, role, what, channel, tail)` of every name derived as `PREFIX:...` (the
/// latch's channel, `PREFIX{NAME}`, is checked apart). `leasehold_rwlock_writers:order`
/// comes before `leasehold_rwlock_writers`, whose keys it would otherwise match.
const PREFIXES: [(&str, &str, &str, bool, Tail); 26] = [
    (TOKEN_PREFIX, "fencing_counter", "the fencing counter of the lock", false, Tail::Name),
    (QUEUE_PREFIX, "fair_queue", "the wait queue of the fair lock", false, Tail::Name),
    (TIMEOUT_PREFIX, "fair_deadlines", "the waiter deadlines of the fair lock", false, Tail::Name),
    (LOCK_QUEUE_PREFIX, "lock_queue", "the wait queue of the lock", false, Tail::Name),
    (LOCK_WAITERS_PREFIX, "lock_waiters", "the waiter entries of the lock", false, Tail::Name),
    (FENCE_PREFIX, "resource_fence", "the fence of the fenced resource", false, Tail::Name),
    (
        RW_WRITERS_ORDER_PREFIX,
        "rw_writer_order",
        "the waiting writers' order of the read/write lock",
        false,
        Tail::Name,
    ),
    (RW_WRITERS_PREFIX, "rw_writers", "the waiting writers of the read/write lock", false, Tail::Name),
    (RW_READERS_PREFIX, "rw_readers", "the waiting readers of the read/write lock", false, Tail::Name),
    (SEMAPHORE_OP_PREFIX, "semaphore_operation", "an operation record of the semaphore", false, Tail::Segment),
    (SEMAPHORE_QUEUE_PREFIX, "semaphore_queue", "the wait queue of the semaphore", false, Tail::Name),
    (SEMAPHORE_WAITERS_PREFIX, "semaphore_waiters", "the waiter entries of the semaphore", false, Tail::Name),
    (PES_QUEUE_PREFIX, "permit_semaphore_queue", "the wait queue of the permit semaphore", false, Tail::Name),
    (PES_WAITERS_PREFIX, "permit_semaphore_waiters", "the waiter entries of the permit semaphore", false, Tail::Name),
    (
        REDISSON_UNLOCK_LATCH_PREFIX,
        "redisson_unlock_latch",
        "a Redisson unlock's replay record of the lock",
        false,
        Tail::Segment,
    ),
    (CHANNEL_PREFIX, "release_channel", "the release channel of the lock", true, Tail::MaybeOwner),
    (LOCK_QUEUE_CHANNEL_PREFIX, "queue_channel", "the queue channel of the lock", true, Tail::Name),
    (RW_GRANTS_CHANNEL_PREFIX, "rw_grants_channel", "the grants channel of the read/write lock", true, Tail::Name),
    (RWLOCK_CHANNEL_PREFIX, "rw_channel", "the channel of the read/write lock", true, Tail::Name),
    (SEMAPHORE_GRANTS_PREFIX, "semaphore_grants_channel", "the grants channel of the semaphore", true, Tail::Name),
    (SEMAPHORE_CHANNEL_PREFIX, "semaphore_channel", "the channel of the semaphore", true, Tail::Name),
    // A leader election's keys (leasehold only): the lead is a lock Hash, but of an
    // election: never a lock, shown by `status` and `list` as its election
    // (`election_status.rs`); the term counter, the leader record and the change
    // channel beside it are derived keys.
    (ELECTION_PREFIX, "election_lead", "the lead of the election", false, Tail::Name),
    (ELECTION_TERM_PREFIX, "election_term", "the term counter of the election", false, Tail::Name),
    (ELECTION_RECORD_PREFIX, "election_leader", "the leader record of the election", false, Tail::Name),
    (ELECTION_CANDIDATES_PREFIX, "election_candidates", "the waiting candidates of the election", false, Tail::Name),
    (ELECTION_CHANNEL_PREFIX, "election_channel", "the change channel of the election", true, Tail::Name),
];

/// The suffix of a read hold's timeout key, `{NAME}:OWNER:rwlock_timeout:K`.
const READ_HOLD_SUFFIX: &str = ":rwlock_timeout:";
/// The suffix of a permit semaphore's permits (a `ZSet`), `{NAME}:timeout`.
const PERMITS_SUFFIX: &str = ":timeout";

/// Whether `key` is a key or channel derived from an object's name, and whose.
pub(crate) fn derived(key: &str) -> Option<Derived> {
    let make = |role, what, of: String, channel| Derived { role, what, of, channel, only_if_type: None };
    if let Some(rest) = key.strip_prefix(LATCH_CHANNEL_PREFIX) {
        // `redisson_countdownlatch__channel__{NAME}`: braces added to any name.
        let of = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or(rest);
        return Some(make("latch_channel", "the channel of the count-down latch", of.to_owned(), true));
    }
    for (prefix, role, what, channel, tail) in PREFIXES {
        let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix(':')) else { continue };
        if rest.is_empty() {
            continue;
        }
        let rest = match tail {
            Tail::Name => rest,
            Tail::Segment => rest.rsplit_once(':').map_or(rest, |(name, _)| name),
            Tail::MaybeOwner => strip_owner(rest).unwrap_or(rest),
        };
        return Some(make(role, what, base_of_derived(rest), channel));
    }
    if let Some((before, hold)) = key.rsplit_once(READ_HOLD_SUFFIX) {
        if !hold.is_empty() && hold.bytes().all(|b| b.is_ascii_digit()) {
            if let Some(prefix) = strip_owner(before) {
                let what = "a read hold's timeout of the read/write lock";
                return Some(make("read_hold_timeout", what, base_of_suffixed(prefix), false));
            }
        }
    }
    if let Some(prefix) = key.strip_suffix(PERMITS_SUFFIX) {
        // Redisson's `suffixName`: `{NAME}:timeout`, or `NAME:timeout` for a NAME with a
        // hash tag. An application's `{user:7}:timeout` has that shape too: only a ZSet
        // (the permits' lease ends) is taken for one.
        if hash_tag(prefix.as_bytes()).is_some() {
            let what = "the held permits of the permit semaphore";
            let mut found = make("permit_semaphore_permits", what, base_of_suffixed(prefix), false);
            found.only_if_type = Some("zset");
            return Some(found);
        }
    }
    None
}

/// `text` without a trailing `:OWNER` (`UUID:N`), or `None` when it has none.
fn strip_owner(text: &str) -> Option<&str> {
    let (before_n, n) = text.rsplit_once(':')?;
    let (before, uuid) = before_n.rsplit_once(':')?;
    is_owner(&format!("{uuid}:{n}"), ':').then_some(before)
}

/// The object's name in the part after `PREFIX:` of a derived key (`names::derived_key`
/// or `names::unique_key`): `{NAME}`, `{T}:NAME` (T a decimal slot tag, for names with
/// braces), or `NAME` itself when it has its own hash tag.
fn base_of_derived(rest: &str) -> String {
    if let Some(inner) = rest.strip_prefix('{') {
        if let Some((tag, after)) = inner.split_once('}') {
            if after.is_empty() && !tag.is_empty() {
                return tag.to_owned();
            }
            if let Some(name) = after.strip_prefix(':').filter(|name| is_slot_tag_of(tag, name)) {
                return name.to_owned();
            }
        }
    }
    rest.to_owned()
}

/// The object's name in the prefix of a suffixed key (`{NAME}:OWNER:rwlock_timeout:K`,
/// `{NAME}:timeout`): `{NAME}`, `{T}:NAME`, or `NAME` with its own hash tag.
fn base_of_suffixed(prefix: &str) -> String {
    base_of_derived(prefix)
}

/// Whether `tag` is the decimal slot tag leasehold puts before a name with braces
/// (`{T}:NAME`): digits, hashing to `name`'s slot.
fn is_slot_tag_of(tag: &str, name: &str) -> bool {
    !tag.is_empty()
        && tag.bytes().all(|b| b.is_ascii_digit())
        && name.contains(['{', '}'])
        && key_slot(tag.as_bytes()) == key_slot(name.as_bytes())
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
    use super::{derived, is_owner};
    use lock_core::names::{derived_key, fence_key, unique_key};
    use lock_core::pes::PesNames;
    use lock_core::semaphore::SemaphoreNames;
    use lock_core::LockNames;

    const OWNER: &str = "0f8fad5b-d9cb-469f-a165-70867728950e:1";

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

    /// Every key and channel the library derives from a name is recognised, with the
    /// name it belongs to, for names of every form (plain, tagged, braces without a tag).
    #[test]
    fn every_derived_name_is_recognised() {
        for name in ["rep", "order:1001", "{user:7}:cart", "a{t}b", "a{b", "{}", "a}b", "}{"] {
            let lock = LockNames::new(name).expect("a name");
            let sem = SemaphoreNames::new(name).expect("a name");
            let pes = PesNames::new(name).expect("a name");
            let latch = lock_core::latch::LatchNames::new(name).expect("a name");
            let election = LockNames::new(&lock_core::names::election_key(name)).expect("a lead key");
            let op = sem.op_key(lock_core::semaphore::SemaphoreOp::random());
            let keys = [
                (lock.token_key(), "fencing_counter"),
                (lock.queue_key(), "fair_queue"),
                (lock.timeout_key(), "fair_deadlines"),
                (lock.lock_queue_key(), "lock_queue"),
                (lock.lock_waiters_key(), "lock_waiters"),
                (lock.rw_writers_key(), "rw_writers"),
                (lock.rw_writers_order_key(), "rw_writer_order"),
                (lock.rw_readers_key(), "rw_readers"),
                (format!("{}:3", lock.rw_timeout_prefix(OWNER)), "read_hold_timeout"),
                (fence_key(name), "resource_fence"),
                (op, "semaphore_operation"),
                (sem.queue().to_owned(), "semaphore_queue"),
                (sem.entries().to_owned(), "semaphore_waiters"),
                (pes.queue().to_owned(), "permit_semaphore_queue"),
                (unique_key(lock_core::pes::PES_WAITERS_PREFIX, name), "permit_semaphore_waiters"),
                (pes.timeout_key().to_owned(), "permit_semaphore_permits"),
                (format!("{}:42", derived_key("redisson_unlock_latch", name)), "redisson_unlock_latch"),
                (lock.channel().to_owned(), "release_channel"),
                (lock.waiter_channel(OWNER), "release_channel"),
                (lock.lock_queue_channel(), "queue_channel"),
                (lock.rwlock_channel(), "rw_channel"),
                (lock.rw_grants_channel(), "rw_grants_channel"),
                (sem.channel().to_string(), "semaphore_channel"),
                (sem.grants().to_string(), "semaphore_grants_channel"),
                (latch.channel().to_owned(), "latch_channel"),
                (lock_core::names::election_key(name), "election_lead"),
                (election.election_term_key(), "election_term"),
                (election.election_record_key(), "election_leader"),
                (election.election_candidates_key(), "election_candidates"),
                (election.election_channel(), "election_channel"),
            ];
            for (key, role) in keys {
                let found = derived(&key).unwrap_or_else(|| panic!("{key:?} (of {name:?}) not recognised"));
                assert_eq!(found.role, role, "{key:?}");
                // `x` and `{x}` share some derived names: the plain one is given.
                let plain = name.strip_prefix('{').and_then(|n| n.strip_suffix('}')).unwrap_or(name);
                assert!(found.of == name || found.of == plain, "{key:?}: of {:?}, not {name:?}", found.of);
            }
            assert_eq!(derived(name), None, "{name:?} itself is not derived");
        }
    }

    #[test]
    fn application_keys_are_not_derived() {
        for key in ["rep", "session:timeout", "leasehold_lock_queue", "redisson_lock_token:", "user:7:rwlock_timeout:1"]
        {
            assert_eq!(derived(key), None, "{key:?}");
        }
        // Shaped like a permit semaphore's ZSet: derived only if it is one.
        let found = derived("{user:7}:timeout").expect("the shape");
        assert_eq!(found.only_if_type, Some("zset"));
        // The permits of `user:7` (or of `{user:7}`: the two share the name).
        assert_eq!(found.of, "user:7");
    }
}
