//! The Lua scripts, compiled into the crate: this crate's `lua/*.lua`, each wrapped
//! with its precomputed SHA1.
//!
//! Each file's header states its KEYS, ARGV and replies; `docs/architecture/scripts.md` walks
//! through them. The source is the templates in this crate's `lua/templates/` and the
//! shared steps in `lua/fragments/` (the `--#include` syntax is in
//! `docs/architecture/scripts.md`, "Fragments"); `lua/*.lua` is their one assembled,
//! checked-in copy, included here with `include_str!` (no build script), and written by
//! `bash scripts/sync-lua.sh` after a template or a fragment is edited.
//! `tests/lua_copies.rs` fails when a copy differs from the assembly of its template.

use std::sync::LazyLock;

use crate::script::LuaScript;

macro_rules! lua {
    ($file:literal) => {
        LazyLock::new(|| LuaScript::new($file, include_str!(concat!("../lua/", $file))))
    };
}

/// `acquire.lua`: take or re-enter the reentrant lock.
pub static ACQUIRE: LazyLock<LuaScript> = lua!("acquire.lua");
/// `release.lua`: set the owner's hold count to its remaining guards; at 0 remove it
/// and publish (also undoes an acquire whose caller went away).
pub static RELEASE: LazyLock<LuaScript> = lua!("release.lua");
/// `release_after.lua`: the last release of an owner that asked for a minimum hold
/// keeps the key (owner count 1) for the time left of it, and tells the waiters.
pub static RELEASE_AFTER: LazyLock<LuaScript> = lua!("release_after.lua");
/// `force_release.lua`: delete the lock whoever holds it, and publish.
pub static FORCE_RELEASE: LazyLock<LuaScript> = lua!("force_release.lua");
/// `renew_batch.lua`: extend many leases whose owner fields still exist.
pub static RENEW_BATCH: LazyLock<LuaScript> = lua!("renew_batch.lua");
/// `verify_batch.lua`: check, read-only, that many owner fields still exist.
pub static VERIFY_BATCH: LazyLock<LuaScript> = lua!("verify_batch.lua");
/// `simple_release.lua`: the minimal lock's compare-and-delete.
pub static SIMPLE_RELEASE: LazyLock<LuaScript> = lua!("simple_release.lua");
/// `fenced_acquire.lua`: `acquire.lua` plus a fencing token from `redisson_lock_token:{NAME}`.
pub static FENCED_ACQUIRE: LazyLock<LuaScript> = lua!("fenced_acquire.lua");
/// `fenced_write.lua`: write a String resource only with a token at least its fence.
pub static FENCED_WRITE: LazyLock<LuaScript> = lua!("fenced_write.lua");

/// `fair_acquire.lua`: take or re-enter the fair lock in queue order, or queue up
/// (Redisson's `RFairLock` queue and deadlines, on the server's clock).
pub static FAIR_ACQUIRE: LazyLock<LuaScript> = lua!("fair_acquire.lua");
/// `fair_release.lua`: `release.lua` for the fair lock: also leaves the queue, and
/// publishes to the queue head's own channel.
pub static FAIR_RELEASE: LazyLock<LuaScript> = lua!("fair_release.lua");
/// `force_release_owner.lua`: delete a lock only if the given owner holds it, wake its
/// waiters and record it in its history (`leasehold unlock --force --owner`).
pub static FORCE_RELEASE_OWNER: LazyLock<LuaScript> = lua!("force_release_owner.lua");
/// `fair_force_release.lua`: delete the fair lock whoever holds it, and tell the head.
pub static FAIR_FORCE_RELEASE: LazyLock<LuaScript> = lua!("fair_force_release.lua");

/// `read_acquire.lua`: take or re-enter a read hold of a read/write lock.
pub static READ_ACQUIRE: LazyLock<LuaScript> = lua!("read_acquire.lua");
/// `write_acquire.lua`: take or re-enter the write hold of a read/write lock.
pub static WRITE_ACQUIRE: LazyLock<LuaScript> = lua!("write_acquire.lua");
/// `read_release.lua`: set a reader's read hold count; at 0 remove it, and publish `0`
/// when no holder is left.
pub static READ_RELEASE: LazyLock<LuaScript> = lua!("read_release.lua");
/// `write_release.lua`: set the writer's hold count; at 0 remove it (a downgrade keeps
/// its reads) and publish `1`.
pub static WRITE_RELEASE: LazyLock<LuaScript> = lua!("write_release.lua");
/// `rw_force_release.lua`: delete a read/write lock whoever holds it, and publish `1`.
pub static RW_FORCE_RELEASE: LazyLock<LuaScript> = lua!("rw_force_release.lua");
/// `read_renew_batch.lua`: extend this client's own read holds (timeout keys and Hash).
pub static READ_RENEW_BATCH: LazyLock<LuaScript> = lua!("read_renew_batch.lua");
/// `read_renew_timeouts.lua`: extend read holds' timeout keys that
/// `read_renew_batch.lua` did not find next to their Hash (a slot migration).
pub static READ_RENEW_TIMEOUTS: LazyLock<LuaScript> = lua!("read_renew_timeouts.lua");

/// `latch_try_set_count.lua`: set a count-down latch's count when none exists, and
/// publish `1`.
pub static LATCH_TRY_SET_COUNT: LazyLock<LuaScript> = lua!("latch_try_set_count.lua");
/// `latch_count_down.lua`: count a latch down; at zero delete it and publish `0`.
pub static LATCH_COUNT_DOWN: LazyLock<LuaScript> = lua!("latch_count_down.lua");
/// `latch_delete.lua`: delete a latch whatever its count, and publish `1` then `0`.
pub static LATCH_DELETE: LazyLock<LuaScript> = lua!("latch_delete.lua");
/// `multi_acquire.lua`: take or re-enter several reentrant locks of one slot, all or none.
pub static MULTI_ACQUIRE: LazyLock<LuaScript> = lua!("multi_acquire.lua");
/// `multi_release.lua`: release.lua for several reentrant locks of one slot at once.
pub static MULTI_RELEASE: LazyLock<LuaScript> = lua!("multi_release.lua");
/// `sem_try_acquire.lua`: take permits of a semaphore if that many are available.
pub static SEM_TRY_ACQUIRE: LazyLock<LuaScript> = lua!("sem_try_acquire.lua");
/// `sem_release.lua`: give permits back to a semaphore and publish its count.
pub static SEM_RELEASE: LazyLock<LuaScript> = lua!("sem_release.lua");
/// `sem_cancel.lua`: undo a semaphore acquire whose outcome is unknown, once.
pub static SEM_CANCEL: LazyLock<LuaScript> = lua!("sem_cancel.lua");
/// `sem_try_set_permits.lua`: set a semaphore's count once, if it was never set.
pub static SEM_TRY_SET_PERMITS: LazyLock<LuaScript> = lua!("sem_try_set_permits.lua");
/// `sem_add_permits.lua`: add to (or take from) a semaphore's count.
pub static SEM_ADD_PERMITS: LazyLock<LuaScript> = lua!("sem_add_permits.lua");
/// `sem_drain.lua`: take every available permit of a semaphore.
pub static SEM_DRAIN: LazyLock<LuaScript> = lua!("sem_drain.lua");

/// `pes_try_acquire.lua`: take one leased permit of a permit-expirable semaphore.
pub static PES_TRY_ACQUIRE: LazyLock<LuaScript> = lua!("pes_try_acquire.lua");
/// `pes_release.lua`: release a permit of a permit-expirable semaphore by its id.
pub static PES_RELEASE: LazyLock<LuaScript> = lua!("pes_release.lua");
/// `pes_cancel.lua`: undo a permit-expirable semaphore's waiting acquire.
pub static PES_CANCEL: LazyLock<LuaScript> = lua!("pes_cancel.lua");
/// `pes_update_lease.lua`: give a live permit a new lease.
pub static PES_UPDATE_LEASE: LazyLock<LuaScript> = lua!("pes_update_lease.lua");
/// `pes_permits.lua`: available and acquired permits, after a bounded reclaim.
pub static PES_PERMITS: LazyLock<LuaScript> = lua!("pes_permits.lua");
/// `pes_set_permits.lua`: set a permit-expirable semaphore's total.
pub static PES_SET_PERMITS: LazyLock<LuaScript> = lua!("pes_set_permits.lua");
/// `pes_renew_batch.lua`: extend many live permits (the watchdog).
pub static PES_RENEW_BATCH: LazyLock<LuaScript> = lua!("pes_renew_batch.lua");

/// `election_acquire.lua`: a candidate takes the election's lead (`acquire.lua`'s steps),
/// and a fresh lead gets a term, its leader record and a change message.
pub static ELECTION_ACQUIRE: LazyLock<LuaScript> = lua!("election_acquire.lua");
/// `election_release.lua`: `release.lua` for an election's lead; a lead that ended
/// deletes its leader record and publishes `N <term>`, and its hand-over grants the
/// next candidate the lead (term, record, `L`, a grant message) in the same script.
pub static ELECTION_RELEASE: LazyLock<LuaScript> = lua!("election_release.lua");
/// `election_force_release.lua`: `force_release.lua` for an election's lead, telling
/// the followers.
pub static ELECTION_FORCE_RELEASE: LazyLock<LuaScript> = lua!("election_force_release.lua");
/// `election_proclaim.lua`: the leader changes its value, only while it leads.
pub static ELECTION_PROCLAIM: LazyLock<LuaScript> = lua!("election_proclaim.lua");
/// `election_leader.lua`: who leads now (read-only), and the lead's TTL.
pub static ELECTION_LEADER: LazyLock<LuaScript> = lua!("election_leader.lua");

/// `client_describe.lua`: write or refresh a client's description and its TTL
/// ([`crate::who`]).
pub static CLIENT_DESCRIBE: LazyLock<LuaScript> = lua!("client_describe.lua");

/// Every script, for tests and tooling.
pub fn all() -> [&'static LuaScript; 44] {
    [
        &ACQUIRE,
        &RELEASE,
        &RELEASE_AFTER,
        &FORCE_RELEASE,
        &FORCE_RELEASE_OWNER,
        &RENEW_BATCH,
        &VERIFY_BATCH,
        &SIMPLE_RELEASE,
        &FENCED_ACQUIRE,
        &FENCED_WRITE,
        &FAIR_ACQUIRE,
        &FAIR_RELEASE,
        &FAIR_FORCE_RELEASE,
        &READ_ACQUIRE,
        &WRITE_ACQUIRE,
        &READ_RELEASE,
        &WRITE_RELEASE,
        &RW_FORCE_RELEASE,
        &READ_RENEW_BATCH,
        &READ_RENEW_TIMEOUTS,
        &LATCH_TRY_SET_COUNT,
        &LATCH_COUNT_DOWN,
        &LATCH_DELETE,
        &MULTI_ACQUIRE,
        &MULTI_RELEASE,
        &SEM_TRY_ACQUIRE,
        &SEM_RELEASE,
        &SEM_CANCEL,
        &SEM_TRY_SET_PERMITS,
        &SEM_ADD_PERMITS,
        &SEM_DRAIN,
        &PES_TRY_ACQUIRE,
        &PES_RELEASE,
        &PES_CANCEL,
        &PES_UPDATE_LEASE,
        &PES_PERMITS,
        &PES_SET_PERMITS,
        &PES_RENEW_BATCH,
        &CLIENT_DESCRIBE,
        &ELECTION_ACQUIRE,
        &ELECTION_RELEASE,
        &ELECTION_FORCE_RELEASE,
        &ELECTION_PROCLAIM,
        &ELECTION_LEADER,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_documents_keys_argv_and_replies() {
        for script in all() {
            let src = script.source();
            for word in ["KEYS[", "ARGV[", "Replies"] {
                assert!(src.contains(word), "{} lacks {word} in its header", script.name());
            }
            assert_eq!(script.sha1().len(), 40);
        }
    }
}
