//! [`MultiLock`]: several reentrant locks taken all or none, in one canonical order.
//!
//! The members are sorted once, when the handle is made, by (server, slot, key): the
//! order is a property of the locks, not of the caller, so two callers that name the
//! same locks in opposite orders take them in the same order and can never hold one each
//! while waiting for the other's. Consecutive members of one client (and, in a cluster,
//! one hash slot) form a *group*, taken by one script in one round trip
//! (`take.rs`). A blocked group waits on the one lock that blocked it, through
//! that lock's own wait (pub/sub and its server queue), holding only locks ordered
//! before it. See `docs/architecture/multi-lock.md`.

pub(crate) mod guard;
mod release;
mod take;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{args, names::key_slot, Error, LockKind, Result};
use tokio::time::Instant;

use crate::client::shared::ClientShared;
use crate::lock::guard::LockGuard;
use crate::lock::hold::LeaseMode;
use crate::lock::Lock;
use crate::multi::guard::{release_all, MultiGuard};

/// Several reentrant locks, possibly of several [`Client`](crate::Client)s, held all or
/// none.
///
/// Made by [`MultiLock::new`] from owned [`Lock`] handles, or by
/// [`Client::multi_lock`](crate::Client::multi_lock) from names. Making it sends
/// nothing; bad input (no member, the same lock twice, more than
/// [`MultiLock::MAX_MEMBERS`], an invalid name) is an
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) from its first
/// operation, before anything is sent.
///
/// Unlike Redisson's `RedissonMultiLock`:
/// - the locks are taken in one canonical order, (server, slot, key), whatever order the
///   caller gave, so callers naming the same locks in any order never deadlock or
///   livelock;
/// - the members of one client in one hash slot (on a standalone server: all its
///   members) are taken by one script in one round trip, atomically;
/// - a wait that fails, times out or is cancelled gives back every lock it took, and
///   leaves no renewal registered.
///
/// Each member keeps its own owner (its handle's `CLIENT_UUID:N`) and Redisson's
/// `RLock` layout, so a Redisson holder of any member excludes the multi-lock and the
/// other way round. A member this handle's owner already holds (a guard of it is alive)
/// is re-entered, and comes back to its previous count when the multi-lock is released.
///
/// There is no `RedLock` (a quorum over independent servers): it does not make
/// exclusion safe against pauses and clock jumps; a
/// [`FencedLock`](crate::FencedLock) does, where the resource checks the token.
pub struct MultiLock {
    /// The members, in canonical order.
    members: Vec<Lock>,
    /// The groups (ranges of `members`) taken by one script each, or the text of the
    /// input error every operation reports.
    groups: std::result::Result<Vec<Range<usize>>, String>,
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("members", &self.members)
            .field("groups", &self.groups.as_ref().map(Vec::len))
            .finish()
    }
}

impl MultiLock {
    /// The most members one multi-lock may have: more is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) from its first
    /// operation. It bounds the script of a one-slot group (its KEYS and ARGV) and the
    /// locks one caller can keep others waiting for.
    pub const MAX_MEMBERS: usize = 64;

    /// A multi-lock over `locks` (one or several clients' [`Lock`] handles, in any
    /// order). Sends nothing; the input is checked by the first operation.
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> MultiLock {
        let mut members: Vec<Lock> = locks.into_iter().collect();
        let mut order: Vec<(OrderKey, Lock)> = members.drain(..).map(|lock| (OrderKey::of(&lock), lock)).collect();
        order.sort_by(|a, b| a.0.cmp(&b.0));
        let groups = plan(&order);
        MultiLock { members: order.into_iter().map(|(_, lock)| lock).collect(), groups }
    }

    /// The members, in the canonical order they are taken in.
    pub fn locks(&self) -> &[Lock] {
        &self.members
    }

    /// Waits as long as it takes for every member, in watchdog mode: each member's lease
    /// is its client's watchdog timeout, renewed while the guard lives.
    ///
    /// Waiting does not poll: a group that finds a member held waits on that lock alone
    /// ([`Lock::lock`]'s wait: its release message, its server queue), then takes the
    /// rest. Transient errors while waiting are retried as [`Lock::lock`] retries them.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for bad input
    /// (nothing sent); any member's definite error, as [`Lock::lock`]; every lock taken
    /// is then given back first.
    ///
    /// # Cancel safety
    /// Dropping the future at any point gives back every lock it took (in the
    /// background; an acquire in flight is undone once its reply is in), leaves every
    /// wait queue it joined, and leaves no renewal registered.
    pub async fn lock(&self) -> Result<MultiGuard> {
        let guard = self.acquire(None, LeaseMode::Watchdog).await?;
        guard.ok_or_else(|| Error::new(lock_core::ErrorKind::Timeout, "an unbounded wait ended without the locks"))
    }

    /// Waits as long as it takes, then holds every member for `lease` (never renewed).
    /// Each member's lease starts when that member is taken, so the first taken expires
    /// first ([`MultiGuard::lease_deadline`] is the earliest); a member whose lease ran
    /// out while later ones were awaited makes the whole set be given back and taken again.
    ///
    /// # Errors
    /// As [`MultiLock::lock`]; a zero, sub-millisecond or over-a-year lease is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) before anything
    /// is sent.
    ///
    /// # Cancel safety
    /// As [`MultiLock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        let guard = self.acquire(None, LeaseMode::Fixed(lease)).await?;
        guard.ok_or_else(|| Error::new(lock_core::ErrorKind::Timeout, "an unbounded wait ended without the locks"))
    }

    /// One attempt per group, no waiting, watchdog mode: `None` (with every lock it took
    /// given back) when another owner holds any member. A set on one client and slot
    /// costs one round trip.
    ///
    /// # Errors
    /// As [`MultiLock::lock`], and any error of its attempts: nothing is retried.
    ///
    /// # Cancel safety
    /// As [`MultiLock::lock`].
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.acquire(Some(Duration::ZERO), LeaseMode::Watchdog).await
    }

    /// Waits at most `wait` for the whole set (one bound, measured on the monotonic clock
    /// from the call, covers every member), then holds every member for `lease` (never
    /// renewed; as [`MultiLock::lock_with_lease`]). `None`, with every lock it took
    /// given back, when the wait ran out.
    ///
    /// The bound holds whatever a member's server does (frozen, unreachable): at the
    /// deadline a script still in flight is abandoned (undone in the background once
    /// its reply is in) and the locks taken are given back in the background.
    ///
    /// # Errors
    /// As [`MultiLock::lock_with_lease`]; when the last attempt before the deadline
    /// failed with a transient error, that error. A wait that overflows the clock is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    ///
    /// # Cancel safety
    /// As [`MultiLock::lock`].
    pub async fn try_lock_with(&self, wait: Duration, lease: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(Some(wait), LeaseMode::Fixed(lease)).await
    }

    /// Waits at most `wait` for the whole set, watchdog mode (as [`MultiLock::lock`]).
    ///
    /// # Errors
    /// As [`MultiLock::try_lock_with`].
    ///
    /// # Cancel safety
    /// As [`MultiLock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(Some(wait), LeaseMode::Watchdog).await
    }

    /// The acquire every form shares. `wait`: `None` = unbounded, `Some(ZERO)` = one
    /// attempt per group.
    async fn acquire(&self, wait: Option<Duration>, mode: LeaseMode) -> Result<Option<MultiGuard>> {
        let start = Instant::now();
        // Every check happens before anything is sent.
        let groups = self.groups.as_ref().map_err(|message| Error::invalid_argument(message.clone()))?;
        if let LeaseMode::Fixed(lease) = mode {
            args::lease_millis(lease, "lease")?;
        }
        let deadline = wait.map(|wait| args::wait_deadline(start, wait)).transpose()?;
        let single_try = wait == Some(Duration::ZERO);
        let bound = Bound { deadline, single_try };
        let take = async {
            loop {
                let mut taken: Vec<Option<LockGuard>> = self.members.iter().map(|_| None).collect();
                let outcome = self.take_all(groups, &mut taken, bound, mode).await;
                let guards: Vec<LockGuard> = taken.into_iter().flatten().collect();
                match outcome {
                    Ok(true) if !guards.iter().any(LockGuard::is_lost) => return Ok(Some(MultiGuard::new(guards))),
                    Ok(true) => {
                        // A fixed lease of an early member ran out (or a member was lost)
                        // while later ones were awaited: give every lock back, try again.
                        bound.give_back(guards).await;
                        if single_try || bound.remaining() == Some(Duration::ZERO) {
                            return Ok(None);
                        }
                    }
                    Ok(false) => {
                        bound.give_back(guards).await;
                        return Ok(None);
                    }
                    Err(error) => {
                        bound.give_back(guards).await;
                        return Err(error);
                    }
                }
            }
        };
        match bound.deadline.filter(|_| !single_try) {
            // A bounded wait answers by its deadline, whatever a member's server does
            // (frozen, unreachable): a group's script or a give-back still in flight
            // then is dropped. Each is cancel safe: a script in flight is undone once its
            // reply is in, every guard taken is released in the background.
            Some(deadline) => tokio::time::timeout_at(deadline, take).await.unwrap_or(Ok(None)),
            None => take.await,
        }
    }

    /// Takes every group in canonical order into `taken` (indexed as `members`): `false`
    /// when the bound ran out first. What is in `taken` is the caller's to give back.
    async fn take_all(
        &self,
        groups: &[Range<usize>],
        taken: &mut [Option<LockGuard>],
        bound: Bound,
        mode: LeaseMode,
    ) -> Result<bool> {
        for group in groups {
            if !self.take_group(group.clone(), taken, bound, mode).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes the members of `group` (one client, one slot): all by one script, or, when
    /// one is held by another owner, that one by its own wait and then the rest. While
    /// it waits for a member it holds only members ordered before it (those of earlier
    /// groups, and of this group before it), so waits never form a cycle.
    async fn take_group(
        &self,
        group: Range<usize>,
        taken: &mut [Option<LockGuard>],
        bound: Bound,
        mode: LeaseMode,
    ) -> Result<bool> {
        let mut backoff = crate::wait::Backoff::new();
        loop {
            let pending: Vec<usize> = group.clone().filter(|&i| taken[i].is_none()).collect();
            let waiting_for = match pending.as_slice() {
                [] => return Ok(true),
                [only] => *only,
                _ => {
                    let locks: Vec<&Lock> = pending.iter().map(|&i| &self.members[i]).collect();
                    let reply = match crate::multi::take::take_together(&locks, mode).await {
                        Err(error) if error.is_transient() && !bound.single_try => {
                            // As a lock's wait does: back off (jittered, 50 ms doubling
                            // to 1 s) and try again while the bound lasts.
                            let pause = backoff.next_delay();
                            if bound.remaining().is_some_and(|left| left <= pause) {
                                return Err(error);
                            }
                            tokio::time::sleep(pause).await;
                            continue;
                        }
                        other => other?,
                    };
                    match reply {
                        Ok(guards) => {
                            for (&i, guard) in pending.iter().zip(guards) {
                                taken[i] = Some(guard);
                            }
                            return Ok(true);
                        }
                        Err(_) if bound.single_try => return Ok(false),
                        Err(blocked) => pending[blocked],
                    }
                }
            };
            // Keep only the locks ordered before the one waited for.
            let later: Vec<LockGuard> = taken[waiting_for + 1..group.end].iter_mut().filter_map(Option::take).collect();
            release_all(later).await;
            match self.members[waiting_for].acquire(bound.remaining(), mode).await? {
                Some(guard) => taken[waiting_for] = Some(guard),
                None => return Ok(false),
            }
        }
    }
}

/// The one wait bound of a multi-lock acquire.
#[derive(Debug, Clone, Copy)]
struct Bound {
    deadline: Option<Instant>,
    single_try: bool,
}

impl Bound {
    /// What is left of the wait, as a member's `acquire` takes it: `None` unbounded,
    /// `Some(ZERO)` a single try (also once the deadline passed: one last try).
    fn remaining(self) -> Option<Duration> {
        if self.single_try {
            return Some(Duration::ZERO);
        }
        self.deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// Gives back the locks of an attempt that will not return them: inline (the call
    /// returns once they are released), except for a bounded wait whose deadline has
    /// passed, which drops them (each guard's `Drop` releases it in the background) so
    /// that the answer is not held back by a slow or frozen server.
    async fn give_back(self, guards: Vec<LockGuard>) {
        match self.deadline {
            Some(deadline) if !self.single_try && Instant::now() >= deadline => drop(guards),
            _ => release_all(guards).await,
        }
    }
}

/// Where a member sorts: its server, then its slot, then its key; the client's id last
/// (it only separates two clients of one server, which must not share a lock).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OrderKey {
    server: String,
    slot: u16,
    key: String,
    client: uuid::Uuid,
}

impl OrderKey {
    fn of(lock: &Lock) -> OrderKey {
        let client = &lock.shared.client;
        let key = lock.key().to_owned();
        OrderKey { server: server_identity(client), slot: key_slot(key.as_bytes()), key, client: client.id.uuid() }
    }
}

/// The server a client talks to, as its configuration names it: the same string in
/// every process configured alike, so that processes order their members alike.
fn server_identity(client: &ClientShared) -> String {
    use fred::interfaces::ClientLike;
    use fred::types::config::ServerConfig;
    match &client.store.client().client_config().server {
        ServerConfig::Centralized { server } => format!("{}:{}", server.host, server.port),
        ServerConfig::Clustered { hosts, .. } => {
            let mut hosts: Vec<String> = hosts.iter().map(|s| format!("{}:{}", s.host, s.port)).collect();
            hosts.sort();
            format!("cluster {}", hosts.join(","))
        }
        ServerConfig::Sentinel { service_name, .. } => format!("sentinel {service_name}"),
        #[allow(unreachable_patterns)]
        other => format!("{other:?}"),
    }
}

/// Checks the sorted members and splits them into groups, or says what is wrong.
fn plan(order: &[(OrderKey, Lock)]) -> std::result::Result<Vec<Range<usize>>, String> {
    if order.is_empty() {
        return Err("a multi-lock needs at least one lock".into());
    }
    if order.len() > MultiLock::MAX_MEMBERS {
        return Err(format!("a multi-lock takes at most {} locks, not {}", MultiLock::MAX_MEMBERS, order.len()));
    }
    for (_, lock) in order {
        lock.shared.names().map_err(|e| e.to_string())?;
        if !matches!(lock.shared.kind, LockKind::Reentrant { .. }) {
            return Err(format!("{}: a multi-lock member must be a plain reentrant lock", lock.key()));
        }
    }
    for pair in order.windows(2) {
        let (a, b) = (&pair[0].0, &pair[1].0);
        if a.server == b.server && a.key == b.key {
            // One lock twice: through one client it would count as a re-entry of two
            // owners' holds, through two it would wait for itself.
            return Err(format!("{}: the same lock twice in one multi-lock", a.key));
        }
    }
    let mut groups: Vec<Range<usize>> = Vec::new();
    for (i, (key, lock)) in order.iter().enumerate() {
        let joins = groups.last().is_some_and(|last| {
            let (first_key, first) = &order[last.start];
            let same_client = Arc::ptr_eq(&first.shared.client, &lock.shared.client);
            // On a standalone server every key of one client can go in one script.
            let clustered = fred::interfaces::ClientLike::is_clustered(lock.shared.client.store.client());
            same_client && last.end == i && (!clustered || first_key.slot == key.slot)
        });
        match groups.last_mut() {
            Some(last) if joins => last.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    //! The canonical order ([`OrderKey`]'s, which [`MultiLock::new`] sorts by): the same
    //! for every input order, server then slot then key, and one lock named twice always
    //! side by side, which `plan`'s duplicate check relies on.

    use super::*;

    fn key(server: &str, name: &str, client: u128) -> OrderKey {
        OrderKey {
            server: server.to_owned(),
            slot: key_slot(name.as_bytes()),
            key: name.to_owned(),
            client: uuid::Uuid::from_u128(client),
        }
    }

    /// `keys` sorted as `MultiLock::new` sorts its members.
    fn sorted(keys: &[OrderKey]) -> Vec<OrderKey> {
        let mut order: Vec<(OrderKey, ())> = keys.iter().cloned().map(|k| (k, ())).collect();
        order.sort_by(|a, b| a.0.cmp(&b.0));
        order.into_iter().map(|(k, ())| k).collect()
    }

    /// Every permutation of `items` (Heap's algorithm).
    fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
        fn heap<T: Clone>(k: usize, items: &mut Vec<T>, out: &mut Vec<Vec<T>>) {
            if k <= 1 {
                out.push(items.clone());
                return;
            }
            for i in 0..k {
                heap(k - 1, items, out);
                let j = if k.is_multiple_of(2) { i } else { 0 };
                items.swap(j, k - 1);
            }
        }
        let mut out = Vec::new();
        heap(items.len(), &mut items.to_vec(), &mut out);
        out
    }

    /// Whatever order the caller names the members in (all 720 orders of six), they are
    /// taken in one order: by server, then slot, then key, then client.
    #[test]
    fn the_order_is_the_same_whatever_the_input_order() {
        let (a, b) = ("10.0.0.1:6379", "10.0.0.2:6379");
        let members = [
            key(b, "{t}a", 1),
            key(a, "{t}b", 1),
            key(a, "{t}a", 1),
            key(a, "zzz", 2),
            key(b, "aaa", 1),
            key(a, "{t}a", 2),
        ];
        let expected = sorted(&members);
        for input in permutations(&members) {
            assert_eq!(sorted(&input), expected, "input {input:?}");
        }
        assert!(expected.windows(2).all(|pair| {
            let (x, y) = (&pair[0], &pair[1]);
            (&x.server, x.slot, &x.key, x.client) <= (&y.server, y.slot, &y.key, y.client)
        }));
        assert!(expected[..4].iter().all(|k| k.server == a) && expected[4..].iter().all(|k| k.server == b));
    }

    /// Within one server the slot comes before the name: two names sort by their hash
    /// slots, not alphabetically (so one slot's members are side by side, one group).
    #[test]
    fn the_slot_comes_before_the_name() {
        let server = "10.0.0.1:6379";
        let (x, y) = ("{x}z", "{y}a");
        let (sx, sy) = (key_slot(x.as_bytes()), key_slot(y.as_bytes()));
        assert_ne!(sx, sy, "the test needs two slots");
        let order: Vec<String> = sorted(&[key(server, y, 1), key(server, x, 1)]).into_iter().map(|k| k.key).collect();
        let expected = if sx < sy { [x, y] } else { [y, x] };
        assert_eq!(order, expected, "slots {sx} and {sy}");
        // Same slot: by name.
        let order: Vec<String> =
            sorted(&[key(server, "{t}b", 1), key(server, "{t}a", 1)]).into_iter().map(|k| k.key).collect();
        assert_eq!(order, ["{t}a", "{t}b"]);
    }

    /// One lock named twice (the same key on the same server, through one client or two)
    /// sorts side by side whatever lies between the two in the input, so the duplicate
    /// check on neighbours finds it.
    #[test]
    fn a_lock_named_twice_sorts_side_by_side() {
        let server = "10.0.0.1:6379";
        for (first, second) in [(1, 1), (1, 2), (2, 1)] {
            let members = [
                key(server, "{t}a", first),
                key(server, "{t}0", 1),
                key(server, "{t}b", 1),
                key(server, "{t}a", second),
            ];
            for input in permutations(&members) {
                let order = sorted(&input);
                let at: Vec<usize> =
                    order.iter().enumerate().filter(|(_, k)| k.key == "{t}a").map(|(i, _)| i).collect();
                assert_eq!(at.len(), 2);
                assert_eq!(at[1], at[0] + 1, "side by side: {order:?}");
            }
        }
        // The same name on two servers is two locks: the server orders them.
        let order = sorted(&[key("10.0.0.2:6379", "{t}a", 1), key(server, "{t}b", 1), key(server, "{t}a", 1)]);
        assert_eq!(
            order.iter().map(|k| (k.server.as_str(), k.key.as_str())).collect::<Vec<_>>(),
            [(server, "{t}a"), (server, "{t}b"), ("10.0.0.2:6379", "{t}a")]
        );
    }
}
