//! Leader election: [`Election`], one candidate of an election named by a string, whose
//! [`Election::campaign`] returns a [`Leadership`] while this candidate leads; and the
//! followers' side, [`Election::leader`] (one read) and [`Election::observe`] (every
//! change, as a `Stream`).
//!
//! The lead is a lock: a reentrant lock Hash on the leasehold-only key
//! `leasehold_election:{NAME}`, taken, waited for (in arrival order, through the lock's
//! server-side wait queue), renewed, lost, forced and released by the lock engine
//! (`lock/`), with a kind of its own ([`lock_core::LockKind::Election`]) whose scripts
//! also issue the term (a fencing token, `leasehold_election_term:{NAME}`), keep the
//! leader record (`leasehold_election_leader:{NAME}`: owner, term, value) and publish
//! every change on `leasehold_election__channel:{NAME}`. An election's lease is its own
//! ([`ElectionConfig`], default 10 s), renewed by a watchdog of that lease.
//! `docs/architecture/election.md` has the keys, the scripts, the state machine and
//! the comparison with etcd's and client-go's elections.
//!
//! Files: this one (the [`Leader`] a follower reads); `config.rs` ([`ElectionConfig`]);
//! `candidate.rs` ([`Election`]: campaign, leader, force); `leadership.rs` (the guard,
//! [`Leadership`]); `observe.rs` ([`Observer`], the stream of changes); `watchdogs.rs`
//! (one renewal scheduler per election lease).

pub(crate) mod candidate;
pub(crate) mod config;
pub(crate) mod leadership;
pub(crate) mod observe;
pub(crate) mod watchdogs;

use lock_core::election::LeaderRead;

/// Who leads an election: what a follower reads ([`Election::leader`]) or is told
/// ([`Election::observe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// What the leader proclaims (its campaign's value, or its last
    /// [`Leadership::proclaim`]). Bytes that are not UTF-8 are replaced with U+FFFD.
    pub value: String,
    /// The leader's term: larger than every earlier leader's of this election.
    pub term: u64,
    /// The leading candidate's owner id, `CLIENT_UUID:N` (see
    /// [`Client::describe_owner`](crate::Client::describe_owner) for its process).
    pub owner: String,
}

impl Leader {
    /// The leader of a server read, if any.
    pub(crate) fn of(read: &LeaderRead) -> Option<Leader> {
        read.leader.as_ref().map(|(term, value, owner)| Leader {
            value: String::from_utf8_lossy(value).into_owned(),
            term: *term,
            owner: owner.clone(),
        })
    }
}

pub use candidate::Election;
pub use config::ElectionConfig;
pub use leadership::Leadership;
pub use observe::Observer;
