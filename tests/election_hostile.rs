//! Leader election (issue 31) under hostile conditions, written from the docs alone
//! (`docs/architecture/election.md`, the `Election` / `Leadership` / `Observer` docs) as a
//! held-out suite would: server restarts, frozen servers, killed connections, cancelled
//! campaigns at every stage, many observers, names with braces on a cluster, a plain lock
//! of the same name, a paused leader's late write against a fenced resource, and bad
//! input that must be refused before anything is sent.

#[path = "common/election.rs"]
mod election_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use election_common::{assert_term_order, next_change, queued, short, start_candidate, until_change, LEASE, MARGIN};
use leasehold::fence::{fenced_set, FencedWrite};
use leasehold::{ElectionConfig, Leader};
use leasehold_test_support::commandstats::{calls_during, total};
use leasehold_test_support::{
    client, client_with, raw, wait_until, HolderProcess, Monitor, Proxy, RedisCluster, RedisServer, RespValue,
};

fn exists(server: &RedisServer, key: &str) -> bool {
    raw(server, &["EXISTS", key]).as_int() == Some(1)
}

/// The first line of `child` that starts with `prefix`, within 5 s.
async fn reply(child: &mut HolderProcess, prefix: &str) -> String {
    while let Some(line) = child.next_line(Duration::from_secs(5)).await {
        if line.starts_with(prefix) {
            return line;
        }
    }
    panic!("no {prefix} line")
}

/// A server restart (no persistence) with nobody else campaigning: the observer is
/// not left with the old leader until the old lead's TTL (10 s, the default lease)
/// would have run out; it reads again after its subscriber reconnects and emits "no
/// leader" within seconds; then a new leader, whose term is larger. Terms never go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_across_a_server_restart_reads_again_and_terms_never_go_back() {
    let mut server = RedisServer::start();
    let leader_client = client_with(&server.url(), Duration::from_secs(3)).await;
    let follower = client_with(&server.url(), Duration::from_secs(3)).await;
    let first = leader_client.election("hostile:restart").campaign("a").await.expect("a leads");
    let mut observer = follower.election("hostile:restart").observe();
    let seen = next_change(&mut observer, Duration::from_secs(5)).await.expect("a leader");
    assert_eq!((seen.term, seen.value.as_str()), (first.term(), "a"));

    server.restart();
    let restarted = Instant::now();
    let mut seen = vec![Some(seen)];
    seen.extend(until_change(&mut observer, Duration::from_secs(5), Option::is_none).await);
    assert!(
        restarted.elapsed() < Duration::from_secs(5),
        "the reconnect re-read, not the 10 s lease: {:?}",
        restarted.elapsed()
    );
    tokio::time::timeout(Duration::from_secs(10), first.lost()).await.expect("the leader learns the server lost it");
    let second = tokio::time::timeout(Duration::from_secs(10), follower.election("hostile:restart").campaign("b"))
        .await
        .expect("in time")
        .expect("b leads");
    assert!(second.term() > first.term(), "{} > {}", second.term(), first.term());
    seen.extend(
        until_change(&mut observer, Duration::from_secs(5), |l| l.as_ref().is_some_and(|l| l.value == "b")).await,
    );
    assert_term_order(&seen);
    assert_eq!(seen.last().cloned().flatten().map(|l| l.term), Some(second.term()));
    drop(first);
    second.resign().await.expect("resign");
}

/// Many observers, in two clients, on one election: every one sees every state; dropping
/// some (their tasks leave the channel) leaves the others subscribed and told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_observers_each_see_every_change_and_dropping_some_leaves_the_rest() {
    let server = RedisServer::start();
    let (x, y) = (client(&server).await, client(&server).await);
    let mut observers: Vec<leasehold::Observer> = (0..12)
        .map(|i| if i % 2 == 0 { x.election("hostile:many").observe() } else { y.election("hostile:many").observe() })
        .collect();
    for observer in &mut observers {
        assert_eq!(next_change(observer, Duration::from_secs(5)).await, None, "nobody leads yet");
    }
    let candidate = x.election("hostile:many");
    let leadership = candidate.campaign("one").await.expect("campaign");
    for observer in &mut observers {
        let seen = next_change(observer, Duration::from_secs(2)).await.expect("a leader");
        assert_eq!((seen.term, seen.value.as_str()), (leadership.term(), "one"));
    }
    // Drop every third observer of each client, then change the value and resign.
    let mut index = 0;
    observers.retain(|_| {
        index += 1;
        index % 3 != 0
    });
    assert_eq!(observers.len(), 8);
    leadership.proclaim("two").await.expect("proclaim");
    for observer in &mut observers {
        let seen = next_change(observer, Duration::from_secs(2)).await.expect("a leader");
        assert_eq!((seen.term, seen.value.as_str()), (leadership.term(), "two"));
    }
    leadership.resign().await.expect("resign");
    for observer in &mut observers {
        assert_eq!(next_change(observer, Duration::from_secs(2)).await, None, "the resign is seen by every observer");
    }
}

/// A campaign dropped at any point (queued behind a leader, or racing the leader's
/// resign, or taking a free lead) leaves no queue entry and no lead behind: after the
/// leader resigns, a third candidate leads at once, never after the 10 s lease of a
/// lead handed to (or taken by) the dropped campaign.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_dropped_at_any_stage_leaves_no_queue_entry_and_no_lead() {
    let server = RedisServer::start();
    let (a, b, c) = (client(&server).await, client(&server).await, client(&server).await);
    let name = "hostile:dropped";
    for round in 0..24_u64 {
        let delay = Duration::from_micros(round * 750);
        let leader = a.election(name).campaign("a").await.expect("a leads");
        let dropped = b.election(name);
        if round % 2 == 0 {
            // Dropped while queued (or on its way to the queue).
            let _ = tokio::time::timeout(delay, dropped.campaign("b")).await;
            leader.resign().await.expect("resign");
        } else {
            // Dropped while the leader resigns: the lead may be handed to it in flight.
            let campaign = tokio::spawn(async move {
                let _ = tokio::time::timeout(delay * 2, dropped.campaign("b")).await;
            });
            tokio::time::sleep(delay).await;
            leader.resign().await.expect("resign");
            campaign.await.expect("task");
        }
        let asked = Instant::now();
        let next = c.election(name).campaign_for(Duration::from_secs(3), "c").await.expect("campaign");
        let next =
            next.unwrap_or_else(|| panic!("round {round} ({delay:?}): the lead was left to the dropped campaign"));
        assert!(asked.elapsed() < Duration::from_secs(1), "round {round}: {:?}", asked.elapsed());
        next.resign().await.expect("resign");
        assert!(
            wait_until(Duration::from_secs(2), || queued(&server) == 0).await,
            "round {round} ({delay:?}): the dropped campaign left its queue entry"
        );
    }
    // Free lead, campaign dropped at every point of its one attempt: the lead it may
    // have taken is given back, in the background.
    for round in 0..12_u64 {
        let delay = Duration::from_micros(round * 250);
        let election = b.election(name);
        match tokio::time::timeout(delay, election.campaign("b")).await {
            Ok(Ok(leadership)) => leadership.resign().await.expect("resign"),
            Ok(Err(error)) => panic!("campaign: {error}"),
            Err(_) => {}
        }
        assert!(
            wait_until(Duration::from_secs(2), || !exists(&server, "leasehold_election:{hostile:dropped}")).await,
            "round {round} ({delay:?}): a lead taken in flight is given back"
        );
        assert_eq!(c.election(name).leader().await.expect("leader"), None);
    }
}

/// `campaign_for` keeps its bound through a proxy that holds every reply back (a
/// network that stopped answering), and the lead an attempt may have taken meanwhile is
/// given back once the replies flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_for_keeps_its_bound_when_replies_stop_coming() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let slow = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let election = slow.election("hostile:silent");
    let monitor = Monitor::start(&server.addr());
    proxy.set_latency(Duration::from_secs(3));
    let asked = Instant::now();
    let result = election.campaign_for(Duration::from_millis(300), "slow").await;
    let took = asked.elapsed();
    assert!(took < Duration::from_millis(800), "bounded: {took:?} ({result:?})");
    assert!(!matches!(result, Ok(Some(_))), "no lead within the bound");
    proxy.set_latency(Duration::ZERO);
    let owner = format!("\"{}\"", election.owner());
    let reached = || monitor.commands().iter().any(|l| l.contains("EVALSHA") && l.contains(&owner));
    assert!(wait_until(Duration::from_secs(5), reached).await, "the abandoned attempt reached the server");
    let other = client(&server).await;
    // The late attempt ran on the server (and may have taken the lead): given back, not
    // left for the 10 s lease.
    let next = other.election("hostile:silent").campaign_for(Duration::from_secs(8), "next").await.expect("campaign");
    let next = next.expect("the lead is not left to the abandoned attempt");
    assert!(asked.elapsed() < Duration::from_secs(9));
    next.resign().await.expect("resign");
}

/// Names with braces are elections of their own (`x`, `{x}`, `a{b}`, `}x{`, `{}`), on
/// a cluster: every script's keys in one slot (no CROSSSLOT), `leader()` and
/// `observe()` name the right one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_braces_are_elections_of_their_own_on_a_cluster() {
    let cluster = RedisCluster::shared();
    let client = client_with(&cluster.url(), Duration::from_secs(30)).await;
    let tag = std::process::id();
    let names: Vec<String> =
        ["x", "{x}", "a{b}", "}x{", "{}", "{x}y{z}"].iter().map(|n| format!("{n}-{tag}")).collect();
    let mut leaderships = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let election = client.election_with(name, short());
        let mut observer = election.observe();
        assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None, "{name}: nobody leads");
        let leadership = election.try_campaign(format!("v{i}")).await.expect(name).expect("free: its own election");
        let seen = next_change(&mut observer, Duration::from_secs(2)).await.expect("a leader");
        assert_eq!((seen.term, seen.value.clone()), (leadership.term(), format!("v{i}")), "{name}");
        leadership.proclaim(format!("w{i}")).await.expect("proclaim");
        assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await.map(|l| l.value), Some(format!("w{i}")));
        leaderships.push((election, leadership, observer));
    }
    for (i, name) in names.iter().enumerate() {
        let read = client.election(name).leader().await.expect(name).expect("a leader");
        assert_eq!(read.value, format!("w{i}"), "{name}");
    }
    for (election, leadership, mut observer) in leaderships {
        leadership.resign().await.expect("resign");
        assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await, None, "{}", election.name());
        assert!(election.force_resign().await.is_ok());
    }
}

/// A plain lock named `NAME` (leasehold's or Redisson's script) and the election
/// `NAME` do not interfere: both are held at once, a forced unlock of the lock leaves
/// the lead, the lock's messages are no change to an observer. A plain lock on the lead
/// key itself is no candidate: `leader()` says nobody leads, and a campaign waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_lock_of_the_same_name_does_not_interfere() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "hostile:same";
    let lock = client.lock(name);
    let guard = lock.lock().await.expect("the lock");
    let election = client.election(name);
    let mut observer = client.election(name).observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let leadership = election.try_campaign("leader").await.expect("try").expect("the lock is not the lead");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await.map(|l| l.term), Some(leadership.term()));
    // Redisson's own acquire of the lock NAME is refused (held), and leaves the lead alone.
    let redisson = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); \
                    redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
    assert!(raw(&server, &["EVAL", redisson, "1", name, "30000", "java:1"]).as_int().is_some(), "held");
    assert!(lock.force_unlock().await.expect("force"));
    drop(guard);
    assert!(raw(&server, &["EVAL", redisson, "1", name, "30000", "java:1"]) == RespValue::Nil, "Redisson takes it");
    assert!(!leadership.is_lost());
    assert_eq!(election.leader().await.expect("leader").map(|l| l.term), Some(leadership.term()));
    let quiet = tokio::time::timeout(Duration::from_millis(300), observer.next()).await;
    assert!(quiet.is_err(), "the lock's messages are no change of the election: {quiet:?}");
    leadership.resign().await.expect("resign");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await, None);
    assert_eq!(raw(&server, &["HGET", name, "java:1"]).as_str(), Some("1"), "the lock NAME untouched by the resign");

    // A plain lock on the lead key: a lead without a candidate's record.
    let squatter = client.lock(election.key());
    let squat = squatter.lock().await.expect("lock the lead key");
    assert_eq!(election.leader().await.expect("leader"), None, "a plain lock is no leader");
    assert!(client.election(name).try_campaign("c").await.expect("try").is_none(), "the lead is held");
    squat.unlock().await.expect("unlock");
    let next = client.election(name).try_campaign("c").await.expect("try").expect("free again");
    next.resign().await.expect("resign");
}

/// `try_campaign` while another candidate leads is one round trip: one script call,
/// nothing queued, no subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_campaign_while_another_leads_is_one_round_trip() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let leader = a.election("hostile:one-trip").campaign("a").await.expect("a leads");
    let election = b.election("hostile:one-trip");
    let monitor = Monitor::start(&server.addr());
    let calls = calls_during(&server, async {
        assert!(election.try_campaign("b").await.expect("try").is_none());
    })
    .await;
    monitor.sync(&server.addr());
    // Not the scripts' own commands, nor the INFO calls of the count itself.
    let sent: Vec<String> =
        monitor.commands().into_iter().filter(|l| !l.contains(" lua]") && !l.contains("\"INFO\"")).collect();
    let scripts = calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0);
    assert_eq!(scripts, 1, "one script call: {calls:?}");
    assert_eq!(sent.len(), 1, "one command on the wire: {sent:?}");
    assert!(calls.keys().all(|c| !c.contains("subscribe") && c != "rpush"), "nothing queued: {calls:?}");
    assert!(total(&calls) < 20, "{calls:?}");
    assert_eq!(queued(&server), 0);
    leader.resign().await.expect("resign");
}

/// A paused leader (`SIGSTOP`) is replaced; on resume it writes to a fenced resource
/// with its old term, whatever it believes: the write is refused, since the new leader
/// wrote with its larger term. The term is the fence the docs promise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leaders_late_write_is_refused_by_the_fence() {
    let server = RedisServer::start();
    let (mut paused, old_term) = start_candidate(&server, "hostile:fence", "old").await;
    paused.send_line("WRITE hostile:resource from-old").await;
    assert_eq!(reply(&mut paused, "WRITE").await, "WRITE OK");
    let client = client(&server).await;
    let election = client.election_with("hostile:fence", short());
    let waiting = tokio::spawn(async move { election.campaign("new").await.expect("campaign") });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "the new candidate waits");
    paused.signal("STOP");
    let leadership =
        tokio::time::timeout(LEASE + MARGIN + Duration::from_secs(1), waiting).await.expect("failover").expect("task");
    assert!(leadership.term() > old_term);
    assert_eq!(
        fenced_set(&client, "hostile:resource", leadership.term(), "from-new").await.expect("write"),
        FencedWrite::Written
    );
    paused.signal("CONT");
    paused.send_line("WRITE hostile:resource late").await;
    assert_eq!(reply(&mut paused, "WRITE").await, format!("WRITE REJECTED {}", leadership.term()));
    assert_eq!(raw(&server, &["GET", "hostile:resource"]).as_str(), Some("from-new"));
    paused.send_line("ACT").await;
    assert_eq!(reply(&mut paused, "ACT").await, "ACT LOST");
    leadership.resign().await.expect("resign");
}

/// The leader's connections are killed (`CLIENT KILL`, over and over for two leases)
/// while a candidate waits: the leader keeps the lead (renewed after each reconnect)
/// or reports it lost. Then its connection stays down (a proxy that goes nowhere) past
/// its lease: the waiting candidate leads, and by then the old leader's guard says lost.
/// Never does the candidate lead while the old leader's guard says it leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_connection_is_killed_keeps_the_lead_or_reports_it_lost() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let a = client_with(&proxy.url(), Duration::from_secs(3)).await;
    let b = client(&server).await;
    let leadership = Arc::new(a.election_with("hostile:killed", short()).campaign("a").await.expect("a leads"));
    let first_term = leadership.term();
    let overlap = Arc::new(AtomicBool::new(false));
    let candidate = b.election_with("hostile:killed", short());
    let waiting = {
        let (leadership, overlap) = (leadership.clone(), overlap.clone());
        tokio::spawn(async move {
            let led = candidate.campaign_for(LEASE * 8, "b").await.expect("campaign");
            if led.is_some() && !leadership.is_lost() {
                overlap.store(true, Ordering::SeqCst);
            }
            (led, Instant::now())
        })
    };
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits");
    let end = Instant::now() + LEASE * 2;
    while Instant::now() < end && !waiting.is_finished() {
        raw(&server, &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let kept = !leadership.is_lost();
    if kept {
        // Still leading: cut it off for good; its lead expires and b takes it.
        proxy.set_upstream("127.0.0.1:1");
        proxy.cut_connections();
    }
    let (led, led_at) = tokio::time::timeout(LEASE * 8, waiting).await.expect("b's campaign ends").expect("task");
    assert!(!overlap.load(Ordering::SeqCst), "b led while a's guard said it leads");
    let next = led.expect("b leads once a's lead is gone");
    assert!(leadership.is_lost(), "a knows it lost");
    assert!(next.term() > first_term);
    eprintln!("a kept the lead through the kills: {kept}; b led at {:?}", led_at.elapsed());
    proxy.set_upstream(&server.addr());
    next.resign().await.expect("resign");
}

/// A frozen server (`SIGSTOP`): the leader's renewals fail, and its `lost()` resolves
/// by its lease deadline (the local clock, never later than the server's expiry), not
/// at some later command timeout. Resumed, the server has no leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_learns_lost_by_its_lease_when_the_server_freezes() {
    let mut server = RedisServer::start();
    let a = client_with(&server.url(), Duration::from_secs(3)).await;
    let leadership = a.election_with("hostile:frozen", short()).campaign("a").await.expect("a leads");
    // Three renewal periods first: the lead lives on renewals, not on its first lease.
    let first_deadline = leadership.lease_deadline();
    tokio::time::sleep(LEASE).await;
    assert!(!leadership.is_lost(), "renewed every third of the lease");
    let deadline = leadership.lease_deadline();
    assert!(deadline > first_deadline, "renewals move the local deadline");
    server.pause();
    let paused = Instant::now();
    tokio::time::timeout(LEASE + Duration::from_millis(300), leadership.lost()).await.expect("lost by the lease");
    assert!(leadership.is_lost());
    assert!(Instant::now() + Duration::from_millis(50) >= deadline, "not before the local deadline");
    assert!(paused.elapsed() <= LEASE + Duration::from_millis(300), "{:?}", paused.elapsed());
    server.resume();
    let b = client(&server).await;
    let next = b.election_with("hostile:frozen", short()).campaign_for(Duration::from_secs(3), "b").await;
    let next = next.expect("campaign").expect("the lost lead is not renewed again");
    assert!(next.term() > leadership.term());
    next.resign().await.expect("resign");
}

/// `proclaim` racing a forced resign: whichever runs first, the end state is "nobody
/// leads", with no leader record left, and the observer's last state is "no leader".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proclaim_racing_a_forced_resign_leaves_no_leader() {
    let server = RedisServer::start();
    let (a, operator) = (client(&server).await, client(&server).await);
    let mut observer = operator.election("hostile:race").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    for round in 0..10 {
        let leadership = a.election("hostile:race").campaign(format!("r{round}")).await.expect("campaign");
        // Seen first (two changes within a round trip may be seen as one, the latest).
        let term = leadership.term();
        let seen = until_change(&mut observer, Duration::from_secs(2), |l| l.as_ref().is_some_and(|l| l.term == term));
        assert_term_order(&seen.await);
        let force = operator.election("hostile:race");
        let (proclaimed, forced) = tokio::join!(leadership.proclaim(format!("p{round}")), force.force_resign());
        assert!(forced.expect("force"), "round {round}: a lead existed");
        if let Err(error) = proclaimed {
            assert!(error.is_lock_lost(), "round {round}: {error:?}");
        }
        assert_eq!(operator.election("hostile:race").leader().await.expect("leader"), None);
        assert!(!exists(&server, "leasehold_election_leader:{hostile:race}"), "round {round}: record left");
        let seen = until_change(&mut observer, Duration::from_secs(2), Option::is_none).await;
        assert_term_order(&seen);
        assert!(seen.iter().flatten().all(|l| l.term == leadership.term()), "round {round}: {seen:?}");
        drop(leadership);
    }
}

/// The defaults: a 10 s lease, shorter than a lock's 30 s, renewed every third; the
/// lead's TTL is the election's lease (not the client's watchdog lease), and two
/// elections of different short leases in one client are both renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lead_has_the_elections_lease_and_is_renewed_every_third() {
    let config = ElectionConfig::default();
    assert_eq!(config.lease, Duration::from_secs(10));
    assert_eq!(config.renew_every(), config.lease / 3);
    let server = RedisServer::start();
    let client = client(&server).await;
    let default = client.election("hostile:ttl-default").campaign("d").await.expect("campaign");
    let ttl = raw(&server, &["PTTL", "leasehold_election:{hostile:ttl-default}"]).as_int().unwrap_or(-1);
    assert!((9000..=10_000).contains(&ttl), "the lead's TTL is the 10 s lease: {ttl}");
    let fast = ElectionConfig::default().with_lease(Duration::from_millis(300));
    let slow = ElectionConfig::default().with_lease(Duration::from_millis(900));
    let one = client.election_with("hostile:ttl-300", fast).campaign("a").await.expect("campaign");
    let two = client.election_with("hostile:ttl-900", slow).campaign("b").await.expect("campaign");
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        let ttl_one = raw(&server, &["PTTL", "leasehold_election:{hostile:ttl-300}"]).as_int().unwrap_or(-2);
        let ttl_two = raw(&server, &["PTTL", "leasehold_election:{hostile:ttl-900}"]).as_int().unwrap_or(-2);
        assert!((1..=300).contains(&ttl_one), "the 300 ms lead is renewed every 100 ms: {ttl_one}");
        assert!((1..=900).contains(&ttl_two), "the 900 ms lead is renewed every 300 ms: {ttl_two}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!one.is_lost() && !two.is_lost() && !default.is_lost());
    one.resign().await.expect("resign");
    two.resign().await.expect("resign");
    default.resign().await.expect("resign");
}

/// A waiting candidate that died (`SIGKILL` of its process) holds up the hand-over by
/// at most one lease (its queue entry's life without a refresh): the candidate behind
/// it leads within that, after the leader resigned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiting_candidate_holds_up_the_hand_over_by_at_most_a_lease() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let leader = client.election_with("hostile:dead-waiter", short()).campaign("a").await.expect("a leads");
    let lease = LEASE.as_millis().to_string();
    let mut dead =
        HolderProcess::spawn(env!("CARGO_BIN_EXE_candidate"), &[&server.url(), "hostile:dead-waiter", &lease, "dead"]);
    assert_eq!(dead.next_line(Duration::from_secs(10)).await.as_deref(), Some("CAMPAIGNING"));
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "the doomed candidate waits");
    let behind = client.election_with("hostile:dead-waiter", short());
    let waiting = tokio::spawn(async move { behind.campaign("c").await.expect("campaign") });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 2).await, "c waits behind it");
    dead.signal("KILL");
    let killed = Instant::now();
    leader.resign().await.expect("resign");
    let next = tokio::time::timeout(LEASE * 2 + MARGIN, waiting).await.expect("not held up forever").expect("task");
    assert!(killed.elapsed() <= LEASE + MARGIN, "held up {:?} (lease {LEASE:?})", killed.elapsed());
    assert_eq!(next.value(), "c");
    next.resign().await.expect("resign");
}

/// Bad input to every public election call is a typed error (`InvalidArgument`) before
/// anything is sent: MONITOR sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let leading = client.election("hostile:bad");
    let leadership = leading.campaign("ok").await.expect("campaign");
    let monitor = Monitor::start(&server.addr());
    let huge = "x".repeat((1 << 20) + 1);
    let invalid = |result: leasehold::Result<()>, what: &str| {
        let error = result.expect_err(what);
        assert!(error.is_invalid_argument(), "{what}: {error:?}");
    };
    let empty = client.election("");
    invalid(empty.campaign("v").await.map(drop), "empty: campaign");
    invalid(empty.try_campaign("v").await.map(drop), "empty: try_campaign");
    invalid(empty.campaign_for(Duration::from_secs(1), "v").await.map(drop), "empty: campaign_for");
    invalid(empty.leader().await.map(drop), "empty: leader");
    invalid(empty.force_resign().await.map(drop), "empty: force_resign");
    invalid(empty.channel().map(drop), "empty: channel");
    let mut observer = empty.observe();
    let first = tokio::time::timeout(Duration::from_secs(2), observer.next()).await.expect("an item");
    invalid(first.expect("an item").map(drop), "empty: observe");
    for lease in [Duration::ZERO, Duration::from_millis(29), Duration::from_secs(400 * 24 * 3600), Duration::MAX] {
        let election = client.election_with("hostile:bad-config", ElectionConfig::default().with_lease(lease));
        invalid(election.campaign("v").await.map(drop), &format!("lease {lease:?}: campaign"));
        invalid(election.try_campaign("v").await.map(drop), &format!("lease {lease:?}: try_campaign"));
        invalid(election.campaign_for(Duration::ZERO, "v").await.map(drop), &format!("lease {lease:?}: campaign_for"));
    }
    let other = client.election("hostile:bad-value");
    invalid(other.campaign(huge.clone()).await.map(drop), "value over 1 MiB: campaign");
    invalid(other.try_campaign(huge.clone()).await.map(drop), "value over 1 MiB: try_campaign");
    invalid(other.campaign_for(Duration::ZERO, huge.clone()).await.map(drop), "value over 1 MiB: campaign_for");
    invalid(leadership.proclaim(huge.clone()).await, "value over 1 MiB: proclaim");
    invalid(leading.campaign("again").await.map(drop), "leads already: campaign");
    invalid(leading.campaign_for(Duration::from_secs(1), "again").await.map(drop), "leads already: campaign_for");
    monitor.sync(&server.addr());
    let sent = monitor.commands();
    assert!(sent.is_empty(), "nothing is sent for bad input: {sent:?}");
    assert_eq!(leadership.value(), "ok", "a refused proclaim changes nothing");
    leadership.resign().await.expect("resign");
}

/// A wait of `Duration::MAX` overflows the monotonic clock: a typed error
/// (`InvalidArgument`, as every other kind's bounded wait), not a panic, and nothing is
/// sent; a long wait that fits (a year) is accepted and leads a free election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_for_a_wait_that_overflows_is_refused_before_sending() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let election = client.election("hostile:max");
    let monitor = Monitor::start(&server.addr());
    let error = election.campaign_for(Duration::MAX, "v").await.expect_err("overflows the clock");
    assert!(error.is_invalid_argument(), "{error:?}");
    monitor.sync(&server.addr());
    assert!(monitor.commands().is_empty(), "nothing sent: {:?}", monitor.commands());
    let year = Duration::from_secs(365 * 24 * 3600);
    let leadership = election.campaign_for(year, "v").await.expect("campaign").expect("free");
    leadership.resign().await.expect("resign");
}

/// The blocking API mirrors the async one under a frozen server too: `campaign_for`
/// keeps its bound, `force_resign` and `config`/`channel` are there.
#[test]
fn the_blocking_election_keeps_its_bounds() {
    let mut server = RedisServer::start();
    let client = leasehold::blocking::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(1))
        .connect()
        .expect("connect");
    let a = client.election_with("hostile:blocking", short());
    assert_eq!(a.config().lease, LEASE);
    assert_eq!(a.channel().expect("channel"), "leasehold_election__channel:{hostile:blocking}");
    let leadership = a.try_campaign("a").expect("try").expect("free");
    let b = client.election_with("hostile:blocking", short());
    server.pause();
    let asked = Instant::now();
    let result = b.campaign_for(Duration::from_millis(300), "b");
    let took = asked.elapsed();
    server.resume();
    assert!(took < Duration::from_millis(800), "bounded: {took:?} ({result:?})");
    assert!(!matches!(result, Ok(Some(_))));
    assert!(b.force_resign().expect("force"));
    assert!(leadership.wait_lost(LEASE).expect("wait"), "the forced leader learns it within a renewal");
    assert!(leadership.resign().is_err(), "nothing to resign");
}

/// A candidate whose lead was lost (forced) campaigns again through the same handle
/// while its lost `Leadership` is still in scope (the natural loop: wait for `lost()`,
/// campaign again): the new campaign is not refused as "leads already", and leads with
/// a larger term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_whose_lead_was_lost_campaigns_again_through_the_same_handle() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let election = client.election_with("hostile:again", short());
    let first = election.campaign("one").await.expect("campaign");
    assert!(client.election("hostile:again").force_resign().await.expect("force"));
    tokio::time::timeout(LEASE / 3 + MARGIN, first.lost()).await.expect("lost within a renewal");
    let second = election.campaign_for(Duration::from_secs(2), "two").await.expect("campaign again").expect("free");
    assert!(second.term() > first.term());
    assert_eq!(election.leader().await.expect("leader").map(|l| l.value), Some("two".to_owned()));
    assert!(!second.is_lost());
    drop(first);
    // Dropping the old, lost leadership resigns nothing of the new lead.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!second.is_lost());
    assert_eq!(election.leader().await.expect("leader").map(|l| l.term), Some(second.term()));
    second.resign().await.expect("resign");
}

/// `Client::shutdown` while a campaign waits and an observer follows: the campaign
/// ends with `Shutdown` (not a hang), the observer's stream ends (`None`), and the
/// campaign left the lead's queue (and its registered value) before the shutdown
/// returned: the leader's resign hands over to the next live candidate at once, not to
/// the gone one (which would hold it up for its keep-alive, one lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_waiting_campaign_and_the_observers() {
    let server = RedisServer::start();
    let (a, b, c) = (client(&server).await, client(&server).await, client(&server).await);
    let leader = a.election_with("hostile:shutdown", short()).campaign("a").await.expect("a leads");
    let mut observer = b.election("hostile:shutdown").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await.map(|l| l.term), Some(leader.term()));
    let candidate = b.election_with("hostile:shutdown", short());
    let waiting = tokio::spawn(async move { candidate.campaign("b").await.map(|l| l.term()) });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits");
    tokio::time::timeout(Duration::from_secs(5), b.shutdown()).await.expect("shutdown in time").expect("shutdown");
    assert_eq!(queued(&server), 0, "the waiting campaign left the queue");
    assert!(!exists(&server, "leasehold_election_candidates:{hostile:shutdown}"), "and its registered value");
    let ended = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("the campaign ends").expect("task");
    assert!(ended.as_ref().is_err_and(leasehold::Error::is_shutdown), "{ended:?}");
    let end = tokio::time::timeout(Duration::from_secs(2), observer.next()).await.expect("the stream ends");
    assert!(end.is_none(), "{end:?}");
    assert!(!leader.is_lost());
    let next = c.election_with("hostile:shutdown", short());
    let next = tokio::spawn(async move { next.campaign("c").await });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "c waits");
    let resigned = Instant::now();
    leader.resign().await.expect("resign");
    let next = tokio::time::timeout(LEASE * 3, next).await.expect("c leads").expect("task").expect("campaign");
    assert!(resigned.elapsed() < LEASE / 3, "handed over at once: {:?} (lease {LEASE:?})", resigned.elapsed());
    next.resign().await.expect("resign");
}

/// An observer nobody polls while leaders come and go: when polled at last, it gives
/// what was buffered and then the newest state, in term order, without waiting for
/// another change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_observer_catches_up_with_the_newest_state() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut observer = client.election("hostile:slow").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    let mut last_term = 0;
    for round in 0..5 {
        let leadership = client.election("hostile:slow").campaign(format!("r{round}")).await.expect("campaign");
        last_term = leadership.term();
        leadership.resign().await.expect("resign");
    }
    let current = client.election("hostile:slow").campaign("current").await.expect("campaign");
    assert!(current.term() > last_term);
    let seen = until_change(&mut observer, Duration::from_secs(2), |l| {
        l.as_ref().is_some_and(|l| l.term == current.term() && l.value == "current")
    })
    .await;
    assert!(seen.len() <= 3, "the newest state, after at most what was buffered: {seen:?}");
    assert_term_order(&seen);
    current.resign().await.expect("resign");
}

/// Keys of another type: a campaign fails `WrongType` and writes nothing (no lead left
/// behind to block the others); an observer emits the error as an item and goes on,
/// following the election once the key is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_another_type_are_typed_errors_that_write_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for key in ["leasehold_election_leader:{hostile:type}", "leasehold_election_term:{hostile:type}"] {
        raw(&server, &["RPUSH", key, "not-an-election"]);
        let error = client.election("hostile:type").try_campaign("v").await.expect_err(key);
        assert_eq!(error.kind(), leasehold::ErrorKind::WrongType, "{key}: {error:?}");
        assert!(!exists(&server, "leasehold_election:{hostile:type}"), "{key}: no lead written");
        raw(&server, &["DEL", key]);
    }
    raw(&server, &["RPUSH", "leasehold_election_leader:{hostile:type}", "x"]);
    raw(&server, &["HSET", "leasehold_election:{hostile:type}", "someone:1", "1"]);
    let mut observer = client.election("hostile:type").observe();
    let first = tokio::time::timeout(Duration::from_secs(5), observer.next()).await.expect("an item").expect("item");
    assert_eq!(first.expect_err("WRONGTYPE is an item").kind(), leasehold::ErrorKind::WrongType);
    raw(&server, &["DEL", "leasehold_election_leader:{hostile:type}", "leasehold_election:{hostile:type}"]);
    let leadership = client.election("hostile:type").campaign("v").await.expect("campaign");
    let seen = until_change(&mut observer, Duration::from_secs(5), |item| {
        item.as_ref().is_some_and(|l| l.term == leadership.term())
    })
    .await;
    assert_term_order(&seen);
    leadership.resign().await.expect("resign");
}

/// Values with spaces, newlines, an empty value and a client key prefix round-trip
/// through `leader()` and `observe()`; `force_resign` with nobody leading is `false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_values_and_a_key_prefix_round_trip() {
    let server = RedisServer::start();
    let prefixed = leasehold::Client::builder().url(server.url()).key_prefix("app:").connect().await.expect("connect");
    let plain = client(&server).await;
    let election = prefixed.election("odd");
    assert_eq!(election.name(), "app:odd");
    assert_eq!(election.key(), "leasehold_election:{app:odd}");
    let mut observer = plain.election("app:odd").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
    assert!(!plain.election("app:odd").force_resign().await.expect("force"), "nobody leads");
    let leadership = election.campaign("").await.expect("campaign");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await.map(|l| l.value), Some(String::new()));
    for value in ["a b  c", "line\nbreak", "L 1 2 3", "N 5", "ünï", ""] {
        leadership.proclaim(value).await.expect("proclaim");
        let seen = until_change(&mut observer, Duration::from_secs(2), |l| {
            l.as_ref().is_some_and(|l| l.value == value && l.term == leadership.term())
        })
        .await;
        assert_term_order(&seen);
        assert_eq!(plain.election("app:odd").leader().await.expect("leader").map(|l| l.value), Some(value.to_owned()));
    }
    leadership.resign().await.expect("resign");
    assert_eq!(next_change(&mut observer, Duration::from_secs(2)).await, None);
}

/// A `Leadership` dropped on a thread with no tokio runtime (never block or panic in
/// `Drop`): it resigns in the background on the client's runtime, and the waiting
/// candidate leads at once. The `Election` handle dropped first changes nothing: the
/// leadership lives on, renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leadership_dropped_off_the_runtime_resigns_and_outlives_its_handle() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let election = a.election_with("hostile:off-runtime", short());
    let leadership = election.campaign("a").await.expect("a leads");
    drop(election);
    tokio::time::sleep(LEASE + LEASE / 3).await;
    assert!(!leadership.is_lost(), "renewed past its first lease without its handle");
    let candidate = b.election_with("hostile:off-runtime", short());
    let waiting = tokio::spawn(async move { candidate.campaign("b").await.expect("campaign") });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits");
    let dropped = Instant::now();
    std::thread::spawn(move || drop(leadership)).join().expect("dropped without a panic");
    let next = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("handed over").expect("task");
    assert!(dropped.elapsed() < Duration::from_secs(1), "at once, not at the lease: {:?}", dropped.elapsed());
    next.resign().await.expect("resign");
}

/// Two tasks sharing one candidate (`Arc<Election>`) that campaign at once, with
/// different values: one leads, the other is refused (`InvalidArgument`) whatever the
/// timing (in flight, or after the first leads), so two leaderships of one candidate
/// never exist and the leader's `value()` is what followers see. Once the lead is
/// resigned, the candidate campaigns again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_candidate_runs_one_campaign_at_a_time() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = client.election_with("hostile:shared", short());
    let blocker = other.campaign("blocker").await.expect("the other candidate leads");
    let election = Arc::new(client.election_with("hostile:shared", short()));
    // The first campaign waits in the queue: the second is refused while it is in flight.
    let first = tokio::spawn({
        let election = election.clone();
        async move { election.campaign("one").await }
    });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "the first campaign waits");
    let second = tokio::time::timeout(Duration::from_secs(2), election.campaign("two")).await;
    let error = second.expect("refused at once").expect_err("a second campaign of one candidate");
    assert!(error.is_invalid_argument(), "{error:?}");
    let second = tokio::time::timeout(Duration::from_secs(2), election.try_campaign("two")).await;
    let error = second.expect("refused at once").expect_err("a second campaign of one candidate");
    assert!(error.is_invalid_argument(), "{error:?}");
    blocker.resign().await.expect("resign");
    let one =
        tokio::time::timeout(Duration::from_secs(5), first).await.expect("leads").expect("task").expect("campaign");
    assert_eq!(one.value(), "one");
    // Both at once, on a free election after the first resigns: exactly one leads.
    one.resign().await.expect("resign");
    let (a, b) = tokio::join!(election.campaign("a"), election.campaign("b"));
    let (leading, refused) = match (a, b) {
        (Ok(leading), Err(refused)) | (Err(refused), Ok(leading)) => (leading, refused),
        (a, b) => panic!("exactly one of two campaigns of one candidate leads: {a:?} {b:?}"),
    };
    assert!(refused.is_invalid_argument(), "{refused:?}");
    let seen = client.election("hostile:shared").leader().await.expect("leader").expect("a leader");
    assert_eq!(seen.value, leading.value(), "followers see the one leadership's value");
    assert_eq!(seen.term, leading.term());
    leading.resign().await.expect("resign");
}

/// An observer started while the server does not answer (`SIGSTOP`): its reads fail
/// (time out) and are retried, never emitted as a state; once the server answers, the
/// first state is the current leader, then the changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_started_while_the_server_is_down_reports_once_it_is_back() {
    let mut server = RedisServer::start();
    let leader_client = client(&server).await;
    let leadership = leader_client.election("hostile:down").campaign("v").await.expect("campaign");
    let follower = client_with(&server.url(), Duration::from_secs(3)).await;
    server.pause();
    let mut observer = follower.election("hostile:down").observe();
    // Past the subscription's wait and a read's command timeout (1 s each here): at
    // least one read has failed meanwhile.
    let early = tokio::time::timeout(Duration::from_millis(3000), observer.next()).await;
    assert!(!matches!(early, Ok(Some(Ok(_)))), "no state read from a server that does not answer: {early:?}");
    server.resume();
    let first = loop {
        let item = tokio::time::timeout(Duration::from_secs(10), observer.next()).await.expect("an item").expect("on");
        if let Ok(state) = item {
            break state;
        }
    };
    assert_eq!(first.map(|l| l.term), Some(leadership.term()), "the current state once it answers: the leader");
    leadership.resign().await.expect("resign");
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
}

/// Dropped observers leave their channel: after fifty observers of fifty elections
/// are dropped, the client subscribes to none of their change channels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_observers_leave_their_channels() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut observers = Vec::new();
    for i in 0..50 {
        let mut observer = client.election(format!("hostile:leak:{i}")).observe();
        assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await, None);
        observers.push(observer);
    }
    let subscribed = || {
        leasehold_test_support::pubsub_channels(&server)
            .iter()
            .filter(|c| c.starts_with("leasehold_election__channel:"))
            .count()
    };
    assert_eq!(subscribed(), 50);
    drop(observers);
    assert!(wait_until(Duration::from_secs(5), || subscribed() == 0).await, "still subscribed: {}", subscribed());
}

/// A burst of proclaims: the observer's states are in proclaim order (never an older
/// value after a newer one), and the last is the last proclaimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_proclaims_is_seen_in_order_ending_with_the_last() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let leadership = client.election("hostile:burst").campaign("p0").await.expect("campaign");
    let mut observer = client.election("hostile:burst").observe();
    assert_eq!(next_change(&mut observer, Duration::from_secs(5)).await.map(|l| l.value), Some("p0".to_owned()));
    for i in 1..50 {
        leadership.proclaim(format!("p{i}")).await.expect("proclaim");
    }
    let seen =
        until_change(&mut observer, Duration::from_secs(5), |l| l.as_ref().is_some_and(|l| l.value == "p49")).await;
    let order: Vec<u32> = seen
        .iter()
        .map(|l| l.as_ref().expect("a leader").value.trim_start_matches('p').parse().expect("a number"))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "in proclaim order: {order:?}");
    assert!(seen.iter().flatten().all(|l| l.term == leadership.term()));
    let quiet = tokio::time::timeout(Duration::from_millis(200), observer.next()).await;
    assert!(quiet.is_err(), "nothing after the last state: {quiet:?}");
    leadership.resign().await.expect("resign");
}

/// An unbounded `campaign` rides out a server that stops answering and one that is
/// restarted: transient errors do not end the wait; it leads once the server is back.
/// `try_campaign` and `leader()` meanwhile fail within the command timeout, typed as
/// transient (never a hang).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbounded_campaign_rides_out_a_frozen_and_a_restarted_server() {
    let mut server = RedisServer::start();
    let candidate_client = client_with(&server.url(), Duration::from_secs(3)).await;
    let other = client_with(&server.url(), Duration::from_secs(3)).await;
    for restart in [false, true] {
        let name = if restart { "hostile:ride-restart" } else { "hostile:ride-frozen" };
        if restart {
            server.kill();
        } else {
            server.pause();
        }
        let election = candidate_client.election(name);
        let waiting = tokio::spawn(async move { election.campaign("v").await.map(|l| (l.term(), l)) });
        let asked = Instant::now();
        let tried = other.election(name).try_campaign("w").await;
        assert!(tried.as_ref().is_err_and(leasehold::Error::is_transient), "{tried:?}");
        let read = other.election(name).leader().await;
        assert!(read.as_ref().is_err_and(leasehold::Error::is_transient), "{read:?}");
        assert!(asked.elapsed() < Duration::from_secs(4), "within the command timeouts: {:?}", asked.elapsed());
        // By now the campaign's first attempt has failed too (one command timeout).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "restart {restart}: the campaign still waits");
        if restart {
            server.restart();
        } else {
            server.resume();
        }
        let (term, leadership) = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("leads once the server is back")
            .expect("task")
            .expect("no error ends an unbounded campaign");
        assert_eq!(other.election(name).leader().await.expect("leader").map(|l| l.term), Some(term));
        leadership.resign().await.expect("resign");
    }
}

/// A paused leader's `lost()` itself (not only `is_lost()`) resolves on resume, at
/// once and unprompted: its local lease deadline passed while it was stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leaders_lost_resolves_on_resume_unprompted() {
    let server = RedisServer::start();
    let (mut paused, _) = start_candidate(&server, "hostile:resume", "old").await;
    paused.signal("STOP");
    // Past its lease on the local clock, whoever leads now.
    tokio::time::sleep(LEASE + Duration::from_millis(200)).await;
    paused.signal("CONT");
    let resumed = Instant::now();
    assert_eq!(paused.next_line(Duration::from_secs(2)).await.as_deref(), Some("LOST"));
    assert!(resumed.elapsed() < Duration::from_millis(500), "at once on resume: {:?}", resumed.elapsed());
}

/// The names `k` and `{k}` are two elections (docs: "never share an election"), and a
/// leadership is in `Client::health()`: its lease left is the election's (1.5 s), not
/// the client's 30 s watchdog lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_and_braced_k_are_two_elections_and_health_sees_the_lead() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let plain = client.election_with("k", short()).try_campaign("plain").await.expect("try").expect("free");
    let braced = client.election_with("{k}", short()).try_campaign("braced").await.expect("try").expect("its own");
    assert_eq!(client.election("k").leader().await.expect("leader").map(|l| l.value), Some("plain".to_owned()));
    assert_eq!(client.election("{k}").leader().await.expect("leader").map(|l| l.value), Some("braced".to_owned()));
    assert_ne!(plain.key(), braced.key());
    let health = client.health();
    let left = health.lease_left.expect("a hold's lease left");
    assert!(left <= LEASE, "the election's lease, not the lock's: {left:?}");
    plain.resign().await.expect("resign");
    braced.resign().await.expect("resign");
}

/// The next item through the `Stream` trait.
async fn poll(observer: &mut leasehold::Observer) -> Option<leasehold::Result<Option<Leader>>> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *observer).poll_next(cx)).await
}

/// `Observer` is a `futures_core::Stream` of the same items as `next()`, and ends
/// (`None`) after `Client::shutdown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_is_a_stream_that_ends_at_shutdown() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let mut observer = b.election("hostile:stream").observe();
    let first = tokio::time::timeout(Duration::from_secs(5), poll(&mut observer)).await.expect("an item");
    assert_eq!(first.expect("on").expect("a read"), None);
    let leadership = a.election("hostile:stream").campaign("v").await.expect("campaign");
    let seen = tokio::time::timeout(Duration::from_secs(2), poll(&mut observer)).await.expect("an item");
    assert_eq!(seen.expect("on").expect("a read").map(|l| l.term), Some(leadership.term()));
    b.shutdown().await.expect("shutdown");
    let end = tokio::time::timeout(Duration::from_secs(2), poll(&mut observer)).await.expect("the stream ends");
    assert!(end.is_none(), "{end:?}");
    leadership.resign().await.expect("resign");
}

/// `campaign_for` whose deadline comes just as the leader resigns (the lead may be
/// handed to it at the last moment): whichever way it ends, no lead is left behind
/// for the third candidate to wait out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_racing_the_hand_over_leaves_no_lead_behind() {
    let server = RedisServer::start();
    let (a, b, c) = (client(&server).await, client(&server).await, client(&server).await);
    let name = "hostile:deadline";
    for round in 0..16_u64 {
        let leader = a.election(name).campaign("a").await.expect("a leads");
        let candidate = b.election(name);
        let wait = Duration::from_millis(40);
        let racing = tokio::spawn(async move { candidate.campaign_for(wait, "b").await.map(|l| l.map(drop)) });
        tokio::time::sleep(Duration::from_millis(34) + Duration::from_micros(round * 750)).await;
        leader.resign().await.expect("resign");
        let _ = racing.await.expect("task");
        let asked = Instant::now();
        let next = c.election(name).campaign_for(Duration::from_secs(3), "c").await.expect("campaign");
        let next = next.unwrap_or_else(|| panic!("round {round}: a lead was left behind"));
        assert!(asked.elapsed() < Duration::from_secs(1), "round {round}: {:?}", asked.elapsed());
        next.resign().await.expect("resign");
    }
}

/// `proclaim` while the server does not answer: a timeout within the command timeout,
/// the leadership not marked lost; once it answers, proclaim again records the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proclaim_that_times_out_can_be_sent_again() {
    let mut server = RedisServer::start();
    let leader_client = client_with(&server.url(), Duration::from_secs(3)).await;
    let leadership = leader_client.election("hostile:proclaim-timeout").campaign("one").await.expect("campaign");
    server.pause();
    let asked = Instant::now();
    let error = leadership.proclaim("two").await.expect_err("no answer");
    assert!(error.is_transient(), "{error:?}");
    assert!(asked.elapsed() < Duration::from_secs(3), "bounded: {:?}", asked.elapsed());
    server.resume();
    assert!(!leadership.is_lost(), "a timeout is no loss");
    leadership.proclaim("three").await.expect("proclaim again");
    assert_eq!(leadership.value(), "three");
    let read = leader_client.election("hostile:proclaim-timeout").leader().await.expect("leader");
    assert_eq!(read.map(|l| l.value), Some("three".to_owned()));
    leadership.resign().await.expect("resign");
}
