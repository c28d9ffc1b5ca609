//! An election's one-step hand-over (issue 31 item 5, "hand-over within 5 round
//! trips"): a resign grants the lead to the first live waiting candidate in its own
//! script (term, leader record, `L`, and a grant message naming the candidate, its term
//! and the ticket of its queued call), and the candidate's client takes the lead over
//! without a call. Against real servers and real processes
//! (`tests/bin/candidate.rs`, killed with `SIGKILL`); what can go wrong at the grant:
//! a granted candidate that is dead, a campaign cancelled as the grant comes, a grant
//! message that never arrives.
//!
//! Every test checks that terms strictly increase.

#[path = "common/election.rs"]
mod election_common;

use std::time::{Duration, Instant};

use election_common::{queued, LEASE, MARGIN};
use leasehold::ElectionConfig;
use leasehold_test_support::commandstats::calls_during;
use leasehold_test_support::{client, client_with, raw, wait_until, HolderProcess, Proxy, RedisServer};

/// The number of subscribers of `channel` on `server`.
fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    match raw(server, &["PUBSUB", "NUMSUB", channel]) {
        leasehold_test_support::RespValue::Array(items) => items.get(1).and_then(|n| n.as_int()).unwrap_or(0),
        _ => 0,
    }
}

/// The leader record's `owner` and `term` of the election `name`.
fn record(server: &RedisServer, name: &str) -> (Option<String>, Option<u64>) {
    let key = format!("leasehold_election_leader:{{{name}}}");
    let field = |f: &str| raw(server, &["HGET", &key, f]).as_str().map(str::to_owned);
    (field("owner"), field("term").and_then(|t| t.parse().ok()))
}

/// A resign is the whole hand-over: one script on the server between `resign()` being
/// called and the waiting candidate's `campaign` returning (the old path took two: the
/// release, then the candidate's claim). The candidate leads with the term and value
/// the grant wrote, and its registration is gone.
///
/// Broken once on purpose: `grant_lead` answering `false` (the plain hand-over and a
/// claim) made this fail with two scripts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resign_grants_the_lead_in_one_script() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let first = a.election("grant:one").campaign("a").await.expect("a leads");
    let waiting = tokio::spawn(async move {
        let election = b.election("grant:one");
        let leadership = election.campaign("b value with spaces").await.expect("b leads");
        (leadership, election)
    });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits in the queue");
    // And listens: a grant published before its subscription is confirmed is caught up
    // by a call (that path is the lost-message tests').
    assert!(
        wait_until(Duration::from_secs(5), || subscribers(
            &server,
            "leasehold_lock__queue:leasehold_election:{grant:one}"
        ) == 1)
        .await,
        "b subscribed to the queue channel"
    );
    // Its subscription confirmed, the wait may still be registering its line: give it
    // a moment (a call it makes then would show in the count below).
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        raw(&server, &["HLEN", "leasehold_election_candidates:{grant:one}"]).as_int(),
        Some(1),
        "b registered its value"
    );
    let first_term = first.term();
    let mut led = None;
    let calls = calls_during(&server, async {
        first.resign().await.expect("resign");
        led = Some(tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("in time").expect("task"));
    })
    .await;
    let (second, election) = led.expect("b leads");
    let scripts = calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0);
    assert_eq!(scripts, 1, "the resign alone: {calls:?}");
    assert!(second.term() > first_term);
    assert_eq!(second.value(), "b value with spaces");
    assert_eq!(record(&server, "grant:one"), (Some(election.owner().to_owned()), Some(second.term())));
    let read = election.leader().await.expect("leader").expect("b leads");
    assert_eq!((read.term, read.value.as_str()), (second.term(), "b value with spaces"));
    assert_eq!(raw(&server, &["EXISTS", "leasehold_election_candidates:{grant:one}"]).as_int(), Some(0));
    // The granted lead is a lead like any: renewed past the grant's TTL, resigned.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!second.is_lost());
    second.resign().await.expect("resign");
    assert_eq!(election.leader().await.expect("leader"), None);
}

/// A candidate killed (`SIGKILL`) while queued is granted the lead by the resign (its
/// queue entry is still live), but holds it no longer than its entry's life (one lease
/// from its last refresh): the next live candidate leads within a lease of the resign,
/// with a larger term than the dead one's.
///
/// Broken once on purpose: the grant giving the lead ten times the TTL its entry had
/// left made the live candidate wait past the lease and this fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_queued_candidate_holds_a_granted_lead_at_most_one_lease() {
    let server = RedisServer::start();
    let config = ElectionConfig::default().with_lease(LEASE);
    let a = client(&server).await;
    let first = a.election_with("grant:dead", config).campaign("a").await.expect("a leads");
    let lease = LEASE.as_millis().to_string();
    let mut dead =
        HolderProcess::spawn(env!("CARGO_BIN_EXE_candidate"), &[&server.url(), "grant:dead", &lease, "dead"]);
    assert_eq!(dead.next_line(Duration::from_secs(10)).await.as_deref(), Some("CAMPAIGNING"));
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "the doomed one waits first");
    let c = client(&server).await;
    let live = c.election_with("grant:dead", config);
    let live_owner = live.owner().to_owned();
    let waiting = tokio::spawn(async move { (live.campaign("live").await.expect("live leads"), Instant::now()) });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 2).await, "the live one waits second");
    dead.signal("KILL");
    let first_term = first.term();
    let resigned = Instant::now();
    first.resign().await.expect("resign");
    let (owner, dead_term) = record(&server, "grant:dead");
    let (second, led_at) = tokio::time::timeout(LEASE * 3, waiting).await.expect("the live one leads").expect("task");
    let failover = led_at.duration_since(resigned);
    eprintln!("dead candidate skipped or expired: the live one led {failover:?} after the resign");
    assert!(failover <= LEASE + MARGIN, "{failover:?} after the resign (lease {LEASE:?})");
    if let (false, Some(dead_term)) = (owner.as_deref() == Some(live_owner.as_str()), dead_term) {
        // The dead one was granted (its entry was live): its term came before.
        assert!(dead_term > first_term && second.term() > dead_term, "{first_term} {dead_term} {}", second.term());
    }
    assert!(second.term() > first_term);
    drop(dead);
    second.resign().await.expect("resign");
}

/// A campaign dropped just as the resign grants it the lead gives the lead back: the
/// candidate queued behind it leads at once (not at the 10 s lease's end), whichever
/// side of the grant the drop fell on; no lead is left to nobody. Repeated with the
/// drop a little later each time.
///
/// Broken once on purpose: a dropped election wait leaving nothing in the background
/// (no give-back of a lead granted meanwhile) made the third candidate wait out the
/// lease and this fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_cancelled_at_the_grant_gives_the_lead_back() {
    let server = RedisServer::start();
    let (a, b, c) = (client(&server).await, client(&server).await, client(&server).await);
    let mut terms = Vec::new();
    for round in 0..6u64 {
        let name = "grant:cancel";
        let first = a.election(name).campaign("a").await.expect("a leads");
        terms.push(first.term());
        let cancelled = {
            let election = b.election(name);
            tokio::spawn(async move { election.campaign("b").await.map(|l| l.term()) })
        };
        assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits first");
        let third = c.election(name);
        let waiting = tokio::spawn(async move { third.campaign("c").await.expect("c leads") });
        assert!(wait_until(Duration::from_secs(5), || queued(&server) == 2).await, "c waits second");
        first.resign().await.expect("resign");
        // The grant is on the server now; its message may or may not have reached b.
        if round > 0 {
            tokio::time::sleep(Duration::from_micros(150 * round)).await;
        }
        cancelled.abort();
        let given_back = Instant::now();
        let last = tokio::time::timeout(Duration::from_secs(3), waiting)
            .await
            .unwrap_or_else(|_| panic!("round {round}: c does not lead: a lead left to nobody"))
            .expect("task");
        assert!(given_back.elapsed() < Duration::from_secs(2), "round {round}: {:?}", given_back.elapsed());
        if let Ok(Ok(b_term)) = cancelled.await {
            // b's campaign had returned before the abort: its dropped leadership resigned.
            terms.push(b_term);
        }
        terms.push(last.term());
        last.resign().await.expect("resign");
        assert!(wait_until(Duration::from_secs(2), || queued(&server) == 0).await, "round {round}: queue empty");
        assert_eq!(record(&server, name), (None, None), "round {round}: nobody leads");
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms strictly increase: {terms:?}");
}

/// A grant message the candidate never hears (its connections are down when the resign
/// grants it the lead): once they are back, the resubscribe wakes the wait, whose call
/// finds the lead its own and takes it with the term the grant issued (no second term),
/// long before its queue refresh or the lease.
///
/// Broken once on purpose: the claim issuing a new term instead of the granted one made
/// this fail on the term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_grant_message_still_ends_with_the_candidate_leading() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let a = client(&server).await;
    let b = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let first = a.election("grant:lost").campaign("a").await.expect("a leads");
    let election = b.election("grant:lost");
    let owner = election.owner().to_owned();
    let waiting = tokio::spawn(async move { (election.campaign("b").await.expect("b leads"), Instant::now()) });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits in the queue");
    // Down: new connections go nowhere, the open ones are cut.
    proxy.set_upstream("127.0.0.1:1");
    proxy.cut_connections();
    let first_term = first.term();
    first.resign().await.expect("resign");
    let (granted_to, granted_term) = record(&server, "grant:lost");
    assert_eq!(granted_to.as_deref(), Some(owner.as_str()), "granted to b while its connections are down");
    let granted_term = granted_term.expect("a term");
    tokio::time::sleep(Duration::from_millis(300)).await; // the point: the grant message is lost
    assert!(!waiting.is_finished(), "b cannot have heard the grant");
    proxy.set_upstream(&server.addr());
    let back = Instant::now();
    let (second, led_at) = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("b leads").expect("task");
    let took = led_at.duration_since(back);
    eprintln!("lost grant: b led {took:?} after its connections came back");
    assert!(took < Duration::from_secs(3), "{took:?}: before its refresh (lease / 3) or the lease");
    assert_eq!(second.term(), granted_term, "the granted term, not a second one");
    assert!(granted_term > first_term);
    assert_eq!(record(&server, "grant:lost").1, Some(granted_term));
    second.resign().await.expect("resign");
}

/// A grant to a subscriber killed on the server (`CLIENT KILL TYPE pubsub`) right
/// before the resign: whether the message was lost or not, the candidate leads, with
/// the granted term, well before the lease's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscriber_still_ends_with_the_candidate_leading() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    for round in 0..3 {
        let first = a.election("grant:kill").campaign("a").await.expect("a leads");
        let election = b.election("grant:kill");
        let waiting = tokio::spawn(async move { election.campaign("b").await.expect("b leads") });
        assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits in the queue");
        raw(&server, &["CLIENT", "KILL", "TYPE", "pubsub"]);
        let first_term = first.term();
        let resigned = Instant::now();
        first.resign().await.expect("resign");
        let granted_term = record(&server, "grant:kill").1.expect("granted");
        let second = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("b leads").expect("task");
        assert!(resigned.elapsed() < Duration::from_secs(3), "round {round}: {:?}", resigned.elapsed());
        assert_eq!(second.term(), granted_term, "round {round}");
        assert!(second.term() > first_term);
        second.resign().await.expect("resign");
    }
}

/// A grant whose candidate's last queued call was almost a refresh period (lease / 3)
/// old: the grant's TTL is the entry's life left and the guard's deadline counts from
/// that call, so only about a third of the lease is left locally. The new leader renews
/// at once (in the background) instead of waiting up to a period for the next round,
/// which could come after that deadline and tell a healthy leader it lost.
///
/// Broken once on purpose: without the early renewal the new leader's deadline stayed
/// about half a lease away and this failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_late_in_the_refresh_period_is_renewed_at_once() {
    let server = RedisServer::start();
    let config = ElectionConfig::default().with_lease(LEASE);
    let (a, b) = (client(&server).await, client(&server).await);
    let first = a.election_with("grant:late", config).campaign("a").await.expect("a leads");
    let waiting = tokio::spawn(async move { b.election_with("grant:late", config).campaign("b").await.expect("b") });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "b waits in the queue");
    // b's call is at most this old; its refresh comes a third of the lease after it.
    let queued_at = Instant::now();
    tokio::time::sleep(LEASE / 3 - Duration::from_millis(80)).await;
    first.resign().await.expect("resign");
    let second = tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("b leads").expect("task");
    let granted_left = second.lease_deadline().saturating_duration_since(Instant::now());
    eprintln!("granted {:?} after b queued; lease left locally {granted_left:?}", queued_at.elapsed());
    assert!(
        wait_until(Duration::from_millis(300), || {
            second.lease_deadline().saturating_duration_since(Instant::now()) > LEASE * 3 / 4
        })
        .await,
        "renewed at once: {:?} left",
        second.lease_deadline().saturating_duration_since(Instant::now())
    );
    assert!(!second.is_lost());
    second.resign().await.expect("resign");
}

/// A candidate killed while queued whose queue entry then expired: the resign skips it
/// and grants the live one behind it, and the dead one's registered value goes with its
/// queue place (no registration outlives its queue entry while others keep queueing).
///
/// Broken once on purpose: without the `forget` hooks (`hand_over.lua`,
/// `queue_purge.lua`) the dead one's value stayed in
/// `leasehold_election_candidates:{NAME}` and this failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_candidate_skipped_by_the_grant_leaves_no_registration() {
    let server = RedisServer::start();
    let config = ElectionConfig::default().with_lease(LEASE);
    let candidates = "leasehold_election_candidates:{grant:skip}";
    let a = client(&server).await;
    let first = a.election_with("grant:skip", config).campaign("a").await.expect("a leads");
    let lease = LEASE.as_millis().to_string();
    let mut dead =
        HolderProcess::spawn(env!("CARGO_BIN_EXE_candidate"), &[&server.url(), "grant:skip", &lease, "dead"]);
    assert_eq!(dead.next_line(Duration::from_secs(10)).await.as_deref(), Some("CAMPAIGNING"));
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 1).await, "the doomed one waits first");
    let c = client(&server).await;
    let live = c.election_with("grant:skip", config);
    let live_owner = live.owner().to_owned();
    let waiting = tokio::spawn(async move { live.campaign("live").await.expect("live leads") });
    assert!(wait_until(Duration::from_secs(5), || queued(&server) == 2).await, "the live one waits second");
    assert_eq!(raw(&server, &["HLEN", candidates]).as_int(), Some(2));
    dead.signal("KILL");
    // Its entry lives one lease (the keep-alive) from its last refresh.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    let first_term = first.term();
    first.resign().await.expect("resign");
    assert_eq!(record(&server, "grant:skip").0.as_deref(), Some(live_owner.as_str()), "the dead one was skipped");
    let second =
        tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("the live one leads").expect("task");
    assert!(second.term() > first_term);
    assert_eq!(raw(&server, &["EXISTS", candidates]).as_int(), Some(0), "no registration left");
    drop(dead);
    second.resign().await.expect("resign");
}
