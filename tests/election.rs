//! Leader election (issue 31): `Client::election`, against real servers and real
//! processes (`tests/bin/candidate.rs`, killed with `SIGKILL`, paused with `SIGSTOP`).
//!
//! Every test checks that terms strictly increase across the leaders it sees.

#[path = "common/election.rs"]
mod election_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use election_common::{assert_term_order, next_change, queued, short, start_candidate, until_change, LEASE, MARGIN};
use leasehold::ElectionConfig;
use leasehold_test_support::{
    both_servers, client, client_with, raw, wait_until, RedisCluster, RedisServer, ServerKind,
};

/// Three candidates (three clients): one leads at a time; each resign hands the lead to
/// a waiting candidate within a few round trips; terms strictly increase; `leader()`
/// names the leader with its value and term.
async fn one_leader_at_a_time_and_resign_hands_over(on: ServerKind) {
    let server = on.start();
    let leading = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(parking_lot_free::Terms::default());
    let mut tasks = Vec::new();
    for c in 0..3 {
        let client = client(&server).await;
        let (leading, terms) = (leading.clone(), terms.clone());
        tasks.push(tokio::spawn(async move {
            let election = client.election_with("elect:basic", short());
            let mut handovers = Vec::new();
            for round in 0..4 {
                let asked = Instant::now();
                let leadership = election.campaign(format!("c{c}:{round}")).await.expect("campaign");
                let waited = asked.elapsed();
                assert_eq!(leading.fetch_add(1, Ordering::SeqCst), 0, "one leader at a time");
                assert_eq!(leadership.value(), format!("c{c}:{round}"));
                let read = election.leader().await.expect("leader").expect("a leader");
                assert_eq!(
                    (read.term, read.value.as_str(), read.owner.as_str()),
                    (leadership.term(), leadership.value().as_str(), election.owner())
                );
                terms.push(leadership.term());
                tokio::time::sleep(Duration::from_millis(20)).await;
                leading.fetch_sub(1, Ordering::SeqCst);
                let resigned = Instant::now();
                leadership.resign().await.expect("resign");
                handovers.push((resigned, waited));
            }
            handovers
        }));
    }
    for task in tasks {
        task.await.expect("candidate");
    }
    let terms = terms.take();
    assert_eq!(terms.len(), 12);
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms strictly increase in lead order: {terms:?}");
    // Nobody leads at the end; the keys say so.
    let follower = client(&server).await.election("elect:basic");
    assert_eq!(follower.leader().await.expect("leader"), None);
    assert_eq!(raw(&server, &["EXISTS", "leasehold_election:{elect:basic}"]).as_int(), Some(0));
    assert_eq!(raw(&server, &["EXISTS", "leasehold_election_leader:{elect:basic}"]).as_int(), Some(0));
    assert_eq!(
        raw(&server, &["EXISTS", "leasehold_election_term:{elect:basic}"]).as_int(),
        Some(1),
        "the term counter stays"
    );
}
both_servers!(one_leader_at_a_time_and_resign_hands_over);

/// A resign wakes the waiting candidate at once: it leads within a few round trips,
/// not at the lease's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resign_hands_over_within_a_few_round_trips() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let first = a.election("elect:handover").campaign("a").await.expect("a leads");
    let waiting = tokio::spawn(async move {
        let election = b.election("elect:handover");
        let leadership = election.campaign("b").await.expect("b leads");
        (Instant::now(), leadership.term())
    });
    // b is queued on the server before a resigns.
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits in the queue");
    let first_term = first.term();
    let resigned = Instant::now();
    first.resign().await.expect("resign");
    let (led_at, term) = waiting.await.expect("b");
    let handover = led_at.duration_since(resigned);
    assert!(handover < Duration::from_millis(250), "handed over in {handover:?}, far below the 10 s lease");
    assert!(term > first_term);
}

/// SIGKILL of the leader's process: the next candidate leads within the lease (plus a
/// margin), with a larger term; an observer sees the crashed leader go at its expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_replaced_within_its_lease() {
    let server = RedisServer::start();
    let (leader, first_term) = start_candidate(&server, "elect:crash", "crashing").await;
    let client = client(&server).await;
    let election = client.election_with("elect:crash", short());
    let mut observer = election.observe();
    let seen = next_change(&mut observer, Duration::from_secs(5)).await;
    assert_eq!(seen.as_ref().map(|l| (l.term, l.value.as_str())), Some((first_term, "crashing")));
    let waiting = tokio::spawn(async move {
        let leadership = election.campaign("next").await.expect("campaign");
        (Instant::now(), leadership)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed = Instant::now();
    leader.signal("KILL");
    let (led_at, leadership) = waiting.await.expect("next");
    let failover = led_at.duration_since(killed);
    eprintln!("crash failover: {failover:?} (lease {LEASE:?})");
    assert!(failover <= LEASE + MARGIN, "failover took {failover:?} (lease {LEASE:?})");
    assert!(leadership.term() > first_term);
    let seen = until_change(&mut observer, LEASE + MARGIN, |l| l.as_ref().is_some_and(|l| l.value == "next")).await;
    assert_term_order(&seen);
    drop(leader);
    leadership.resign().await.expect("resign");
}

/// SIGKILL of the leader's process with no other candidate: an observer sees the lead
/// go at its expiry (it knows the TTL from its last read; no message comes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_seen_gone_at_its_expiry() {
    let server = RedisServer::start();
    let (leader, term) = start_candidate(&server, "elect:gone", "gone").await;
    let client = client(&server).await;
    let mut observer = client.election("elect:gone").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await.map(|l| l.term), Some(term));
    let killed = Instant::now();
    leader.signal("KILL");
    assert_eq!(next_change(&mut observer, LEASE + MARGIN).await, None, "nobody leads once the lead expired");
    assert!(killed.elapsed() <= LEASE + MARGIN);
    assert_eq!(client.election("elect:gone").leader().await.expect("leader"), None);
}

/// SIGSTOP of the leader's process: the next candidate leads within the lease; on
/// SIGCONT the paused leader reports its lead lost before it acts on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_learns_it_lost_before_it_acts() {
    let server = RedisServer::start();
    let (mut paused, first_term) = start_candidate(&server, "elect:pause", "pausing").await;
    let client = client(&server).await;
    let election = client.election_with("elect:pause", short());
    let waiting = tokio::spawn(async move {
        let leadership = election.campaign("next").await.expect("campaign");
        (Instant::now(), leadership)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopped = Instant::now();
    paused.signal("STOP");
    let (led_at, leadership) = waiting.await.expect("next");
    assert!(led_at.duration_since(stopped) <= LEASE + MARGIN, "failover took {:?}", led_at.duration_since(stopped));
    assert!(leadership.term() > first_term);
    // Resumed, it is asked to act at once: its guard says lost first.
    paused.signal("CONT");
    paused.send_line("ACT").await;
    let mut lines = Vec::new();
    while let Some(line) = paused.next_line(Duration::from_secs(5)).await {
        let act = line.starts_with("ACT");
        lines.push(line);
        if act {
            break;
        }
    }
    assert_eq!(lines.iter().find(|l| l.starts_with("ACT")).map(String::as_str), Some("ACT LOST"), "{lines:?}");
    // Its proclaim is refused, and the new leader still leads.
    paused.send_line("PROCLAIM late").await;
    let mut refusal = None;
    while let Some(line) = paused.next_line(Duration::from_secs(5)).await {
        if line.starts_with("PROCLAIM") {
            refusal = Some(line);
            break;
        }
    }
    assert_eq!(refusal.as_deref(), Some("PROCLAIM ERR lock lost"));
    assert!(!leadership.is_lost());
    assert_eq!(
        client.election("elect:pause").leader().await.expect("leader").map(|l| l.value),
        Some("next".to_owned())
    );
    leadership.resign().await.expect("resign");
}

/// A forced resign: the leader's `lost()` resolves within a renewal, its proclaim is
/// refused, the followers are told nobody leads, and a new campaign gets a larger term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_resign_is_lost_and_seen_by_followers() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let election = client.election_with("elect:force", short());
    let mut observer = client.election("elect:force").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None, "nobody leads yet");
    let leadership = election.campaign("v1").await.expect("campaign");
    let seen = next_change(&mut observer, Duration::from_secs(5)).await.expect("a leader");
    assert_eq!((seen.term, seen.value.as_str()), (leadership.term(), "v1"));

    let operator = client.election("elect:force");
    assert!(operator.force_resign().await.expect("force"));
    assert_eq!(next_change(&mut observer, Duration::from_millis(500)).await, None, "told at once, not at the expiry");
    tokio::time::timeout(LEASE / 3 + MARGIN, leadership.lost()).await.expect("lost within a renewal");
    assert!(leadership.is_lost());
    let refused = leadership.proclaim("v2").await.expect_err("refused");
    assert!(refused.is_lock_lost(), "{refused:?}");
    let leasehold_test_support::RespValue::Array(histories) = raw(&server, &["KEYS", "leasehold_history:*"]) else {
        panic!("KEYS")
    };
    let history: Vec<&str> = histories.iter().filter_map(|k| k.as_str()).collect();
    assert_eq!(history.len(), 1, "the forced resign is in the lead's history");
    assert!(history[0].ends_with(election.key()), "{history:?}");
    assert_eq!(raw(&server, &["LLEN", history[0]]).as_int(), Some(1));

    let again = client.election_with("elect:force", short()).try_campaign("v3").await.expect("try").expect("free");
    assert!(again.term() > leadership.term());
    drop(leadership);
    again.resign().await.expect("resign");
}

/// `proclaim` changes the value followers see, in the same term; `observe()` sees the
/// campaign, the proclaim and the resign, in term order.
async fn proclaim_is_seen_by_observe(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let mut observer = client.election("elect:proclaim").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let election = client.election("elect:proclaim");
    let leadership = election.campaign("first").await.expect("campaign");
    let term = leadership.term();
    let seen = next_change(&mut observer, Duration::from_secs(2)).await.expect("leader");
    assert_eq!((seen.term, seen.value.as_str(), seen.owner.as_str()), (term, "first", election.owner()));
    // The record lives as long as the lead, however long: no TTL (the lead has one).
    let record = "leasehold_election_leader:{elect:proclaim}";
    assert_eq!(raw(&server, &["PTTL", record]).as_int(), Some(-1), "the record has no TTL");
    assert!(raw(&server, &["PTTL", "leasehold_election:{elect:proclaim}"]).as_int() > Some(0), "the lead has one");
    leadership.proclaim("second").await.expect("proclaim");
    assert_eq!(leadership.value(), "second");
    let seen = next_change(&mut observer, Duration::from_secs(2)).await.expect("leader");
    assert_eq!((seen.term, seen.value.as_str()), (term, "second"), "same term, new value");
    assert_eq!(election.leader().await.expect("read").map(|l| (l.term, l.value)), Some((term, "second".to_owned())));
    leadership.resign().await.expect("resign");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await, None, "the resign is seen");
    // Bad input: refused before anything is sent.
    assert!(client.election("").leader().await.expect_err("empty").is_invalid_argument());
    let tiny = ElectionConfig::default().with_lease(Duration::from_millis(5));
    assert!(client
        .election_with("elect:proclaim", tiny)
        .try_campaign("x")
        .await
        .expect_err("tiny")
        .is_invalid_argument());
    let leading = election.try_campaign("again").await.expect("try").expect("free");
    assert!(election.try_campaign("twice").await.expect_err("leads already").is_invalid_argument());
    drop(leading);
}
both_servers!(proclaim_is_seen_by_observe);

/// The subscriber connection is killed and, while it is down, the leader changes
/// (messages lost): after the resubscribe the observer reads again and emits the
/// current leader, long before the lease would have made it look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_after_a_subscriber_reconnect_emits_the_current_state() {
    let server = RedisServer::start();
    let follower = client(&server).await;
    let mut observer = follower.election("elect:reconnect").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let candidates = client(&server).await;
    let a = candidates.election("elect:reconnect");
    let first = a.campaign("a").await.expect("a");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await.map(|l| l.value), Some("a".to_owned()));

    // Kill every subscriber connection, then change leader at once: the messages go
    // nowhere while the observer's connection is down.
    raw(&server, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    first.resign().await.expect("resign");
    let b = candidates.election("elect:reconnect");
    let second = b.try_campaign("b").await.expect("try").expect("free");
    let seen =
        until_change(&mut observer, Duration::from_secs(5), |l| l.as_ref().is_some_and(|l| l.value == "b")).await;
    assert_term_order(&seen);
    assert_eq!(seen.last().cloned().flatten().map(|l| l.term), Some(second.term()));
    second.resign().await.expect("resign");
}

/// The same through a proxy that keeps the follower's connections down while the leader
/// changes (so the change messages are surely lost to it): once the connections are
/// back, the resubscribe wakes the observer, which reads and emits the new leader, long
/// before the lead's expiry (10 s) would have made it look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_emits_the_change_it_missed_while_disconnected() {
    let server = RedisServer::start();
    let proxy = leasehold_test_support::Proxy::start(&server.addr()).await;
    let follower = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let mut observer = follower.election("elect:missed").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let candidates = client(&server).await;
    let first = candidates.election("elect:missed").campaign("a").await.expect("a");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await.map(|l| l.value), Some("a".to_owned()));

    // Down: new connections go nowhere, the open ones are cut.
    proxy.set_upstream("127.0.0.1:1");
    proxy.cut_connections();
    first.resign().await.expect("resign");
    let second = candidates.election("elect:missed").try_campaign("b").await.expect("try").expect("free");
    tokio::time::sleep(Duration::from_millis(300)).await; // the point: a window with no connection
    proxy.set_upstream(&server.addr());
    let back = Instant::now();
    let seen =
        until_change(&mut observer, Duration::from_secs(5), |l| l.as_ref().is_some_and(|l| l.value == "b")).await;
    assert!(back.elapsed() < Duration::from_secs(5), "seen {:?} after the connection came back", back.elapsed());
    assert_term_order(&seen);
    assert_eq!(seen.last().cloned().flatten().map(|l| l.term), Some(second.term()));
    second.resign().await.expect("resign");
}

/// A server restart without persistence loses the lead: the leader learns it
/// (`lost()`), a waiting candidate leads with a larger term (the term comes from the
/// server's clock when the counter is gone), and the observer follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_loses_the_lead_and_the_next_term_is_larger() {
    let mut server = RedisServer::start();
    let client_a = client_with(&server.url(), Duration::from_secs(3)).await;
    let client_b = client_with(&server.url(), Duration::from_secs(3)).await;
    let a = client_a.election_with("elect:restart", short());
    let first = a.campaign("a").await.expect("a leads");
    let mut observer = client_b.election("elect:restart").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await.map(|l| l.term), Some(first.term()));
    let b = client_b.election_with("elect:restart", short());
    server.restart();
    tokio::time::timeout(LEASE + MARGIN, first.lost()).await.expect("the restarted server lost the lead");
    let second =
        tokio::time::timeout(Duration::from_secs(10), b.campaign("b")).await.expect("in time").expect("b leads");
    assert!(second.term() > first.term(), "{} > {}", second.term(), first.term());
    let seen =
        until_change(&mut observer, Duration::from_secs(10), |l| l.as_ref().is_some_and(|l| l.value == "b")).await;
    assert_term_order(&seen);
    drop(first);
    second.resign().await.expect("resign");
}

/// On the local cluster (sharded pub/sub): every key of the election is in the name's
/// slot, one leader at a time, a resign hands over, and an observer follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_on_a_cluster() {
    let cluster = RedisCluster::shared();
    let a = client_with(&cluster.url(), Duration::from_secs(30)).await;
    let b = client_with(&cluster.url(), Duration::from_secs(30)).await;
    let mut observer = b.election("elect:cluster").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let first = a.election_with("elect:cluster", short()).campaign("a").await.expect("a leads");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await.map(|l| l.term), Some(first.term()));
    let candidate = b.election_with("elect:cluster", short());
    let waiting = tokio::spawn(async move { candidate.campaign("b").await.expect("b leads") });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first_term = first.term();
    first.resign().await.expect("resign");
    let second = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("handed over").expect("task");
    assert!(second.term() > first_term);
    let seen =
        until_change(&mut observer, Duration::from_secs(2), |l| l.as_ref().is_some_and(|l| l.value == "b")).await;
    assert_term_order(&seen);
    let slot = cluster.on_key("leasehold_election:{elect:cluster}", &["CLUSTER", "KEYSLOT", "elect:cluster"]).as_int();
    for key in [
        "leasehold_election:{elect:cluster}",
        "leasehold_election_leader:{elect:cluster}",
        "leasehold_election_term:{elect:cluster}",
    ] {
        assert_eq!(cluster.on_key(key, &["CLUSTER", "KEYSLOT", key]).as_int(), slot, "{key}");
        assert_eq!(cluster.on_key(key, &["EXISTS", key]).as_int(), Some(1), "{key} on its slot's primary");
    }
    second.resign().await.expect("resign");
}

/// The election's slot fails over (`CLUSTER FAILOVER` on its replica, in sync): the
/// leader keeps leading through it (its renewals follow the slot to the new primary;
/// `lost()` does not fire over two leases), the other client's subscriptions move to the
/// new primary, followers read the same leader and term from it, and the resign
/// afterwards hands the lead to the candidate that was waiting, with a larger term,
/// which the observer on that client sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_follows_a_failover_of_its_shard() {
    let cluster = RedisCluster::start();
    let a = client_with(&cluster.url(), Duration::from_secs(30)).await;
    let b = client_with(&cluster.url(), Duration::from_secs(30)).await;
    let lead_key = "leasehold_election:{elect:failover}";
    let old = cluster.primary_for(lead_key);
    let leadership = a.election_with("elect:failover", short()).campaign("a").await.expect("a leads");
    let mut observer = b.election("elect:failover").observe();
    let first = next_change(&mut observer, Duration::from_secs(5)).await;
    assert_eq!(first.map(|l| l.term), Some(leadership.term()));
    let candidate = b.election_with("elect:failover", short());
    let waiting = tokio::spawn(async move { candidate.campaign("b").await });
    let candidates = "leasehold_election_candidates:{elect:failover}";
    let registered = || cluster.on(&old, &["HLEN", candidates]).as_int() == Some(1);
    assert!(wait_until(Duration::from_secs(5), registered).await, "b waits");
    let replica = cluster.replica_of(&old);
    let digest = |addr: &str| cluster.on(addr, &["DEBUG", "DIGEST-VALUE", lead_key]);
    assert!(wait_until(Duration::from_secs(5), || digest(&replica) == digest(&old)).await, "the replica has the lead");

    let new = cluster.failover(&old);
    assert_ne!(new, old);
    // The follower's subscriptions (the change channel, the queue channel) move with
    // the slot to the new primary.
    let moved = || b.stats().subscriber.moved_channels >= 1;
    assert!(wait_until(Duration::from_secs(5), moved).await, "{:?}", b.stats().subscriber);
    let kept = tokio::time::timeout(LEASE * 2, leadership.lost()).await;
    assert!(kept.is_err() && !leadership.is_lost(), "the lead outlived two leases on the new primary");
    let seen = b.election("elect:failover").leader().await.expect("leader").expect("a leader");
    assert_eq!((seen.term, seen.value.as_str()), (leadership.term(), "a"));
    let first_term = leadership.term();
    leadership.resign().await.expect("resign on the new primary");
    let second = tokio::time::timeout(LEASE * 2, waiting).await.expect("handed over").expect("task").expect("campaign");
    assert!(second.term() > first_term, "{} > {first_term}", second.term());
    let seen =
        until_change(&mut observer, Duration::from_secs(5), |l| l.as_ref().is_some_and(|l| l.value == "b")).await;
    assert_term_order(&seen);
    second.resign().await.expect("resign");
}

/// A lock-free log of terms in the order they were pushed.
mod parking_lot_free {
    #[derive(Default)]
    pub(crate) struct Terms(std::sync::Mutex<Vec<u64>>);

    impl Terms {
        pub(crate) fn push(&self, term: u64) {
            self.0.lock().expect("terms").push(term);
        }

        pub(crate) fn take(&self) -> Vec<u64> {
            std::mem::take(&mut *self.0.lock().expect("terms"))
        }
    }
}

/// `campaign_for` keeps its bound when the server is frozen (SIGSTOP): it returns by
/// its deadline (plus a command's slack), as `try_lock_for` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_for_keeps_its_bound_when_the_server_is_frozen() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.election("elect:frozen").try_campaign("a").await.expect("try").expect("free");
    let election = client.election("elect:frozen");
    server.pause();
    let asked = Instant::now();
    let result = election.campaign_for(Duration::from_millis(300), "b").await;
    let took = asked.elapsed();
    server.resume();
    assert!(took < Duration::from_millis(800), "bounded: {took:?} ({result:?})");
    assert!(!matches!(result, Ok(Some(_))), "the lead is held");
    drop(holder);
}

/// The blocking API: a thread campaigns, another follows with `next_change`, the leader
/// proclaims and resigns.
#[test]
fn the_blocking_election_mirrors_the_async_one() {
    let server = RedisServer::start();
    let connect = || {
        leasehold::blocking::Client::builder().url(server.url()).connect().unwrap_or_else(|e| panic!("connect: {e}"))
    };
    let (a, b) = (connect(), connect());
    let mut observer = b.election("elect:blocking").observe();
    assert_eq!(observer.next_change(Duration::from_secs(5)).expect("read"), Some(None), "nobody leads");
    let election = a.election_with("elect:blocking", short());
    let leadership = election.campaign("one").expect("campaign");
    let seen = observer.next_change(Duration::from_secs(2)).expect("read").expect("a change").expect("a leader");
    assert_eq!((seen.term, seen.value.as_str()), (leadership.term(), "one"));
    leadership.proclaim("two").expect("proclaim");
    let seen = observer.next_change(Duration::from_secs(2)).expect("read").expect("a change").expect("a leader");
    assert_eq!(seen.value, "two");
    assert_eq!(observer.next_change(Duration::from_millis(100)).expect("read"), None, "no change meanwhile");
    assert_eq!(b.election("elect:blocking").leader().expect("leader").map(|l| l.value), Some("two".to_owned()));
    assert!(b.election("elect:blocking").try_campaign("x").expect("try").is_none());
    assert!(!leadership.wait_lost(Duration::from_millis(10)).expect("wait"));
    leadership.resign().expect("resign");
    assert_eq!(observer.next_change(Duration::from_secs(2)).expect("read"), Some(None));
    let next = b.election("elect:blocking").campaign_for(Duration::from_secs(1), "y").expect("campaign").expect("free");
    assert!(next.term() > seen.term);
    next.resign().expect("resign");
}

/// The handles, guards, observers and futures can cross tasks and threads.
#[test]
fn bounds() {
    fn send_sync_unpin<T: Send + Sync + Unpin + 'static>() {}
    fn send<T: Send>(_: &T) {}
    #[allow(dead_code)]
    fn futures_are_send(election: &leasehold::Election, leadership: &leasehold::Leadership) {
        send(&election.campaign("v"));
        send(&election.try_campaign("v"));
        send(&election.campaign_for(Duration::ZERO, "v"));
        send(&election.leader());
        send(&election.force_resign());
        send(&leadership.proclaim("v"));
        send(&leadership.lost());
    }
    send_sync_unpin::<leasehold::Election>();
    send_sync_unpin::<leasehold::Leadership>();
    send_sync_unpin::<leasehold::Observer>();
    send_sync_unpin::<leasehold::Leader>();
    send_sync_unpin::<leasehold::ElectionConfig>();
    send_sync_unpin::<leasehold::blocking::Election>();
    send_sync_unpin::<leasehold::blocking::Leadership>();
    send_sync_unpin::<leasehold::blocking::Observer>();
}

/// Dropping a `Leadership` resigns in the background, and `Client::shutdown` resigns
/// what the client still leads: either way the waiting candidate leads at once, not at
/// the lease's end (10 s), and followers are told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_and_shutdown_resign() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let mut observer = b.election("elect:drop").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let first = a.election("elect:drop").campaign("a").await.expect("a leads");
    let candidate = b.election("elect:drop");
    let waiting = tokio::spawn(async move {
        let leadership = candidate.campaign("b").await.expect("b leads");
        (leadership, candidate)
    });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits in the queue");
    let dropped = Instant::now();
    drop(first);
    let (second, candidate) =
        tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("in time").expect("task");
    assert!(dropped.elapsed() < Duration::from_secs(1), "handed over on drop in {:?}", dropped.elapsed());
    let seen =
        until_change(&mut observer, Duration::from_secs(2), |l| l.as_ref().is_some_and(|l| l.value == "b")).await;
    assert_term_order(&seen);

    // b's client shuts down while leading: a third candidate leads at once.
    let c = client(&server).await;
    let third = c.election("elect:drop");
    let waiting = tokio::spawn(async move { third.campaign("c").await.expect("c leads") });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "c waits in the queue");
    let shut = Instant::now();
    b.shutdown().await.expect("shutdown");
    let last = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("in time").expect("task");
    assert!(shut.elapsed() < Duration::from_secs(1), "handed over at shutdown in {:?}", shut.elapsed());
    assert!(second.is_lost(), "ended locally by the shutdown");
    assert!(last.term() > second.term());
    assert!(second.resign().await.expect_err("shut down").is_shutdown());
    drop(candidate);
    last.resign().await.expect("resign");
}
