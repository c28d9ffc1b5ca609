//! `Client::stats()` and the spans: the counters move as the client works (acquires, a
//! wait that ran out, a hold lost after `force_unlock`, renewals), and the acquire,
//! wait and renew spans carry their fields, on a real redis-server.

use std::time::Duration;

use leasehold_test_support::{client, client_with, wait_until, RedisServer, Seen, TraceLog};

/// Acquires, re-entries, a busy `try_lock`, a wait that ran out and one that was woken
/// by a release: each counter and gauge moves by what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_acquires_waits_and_timeouts() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = client.clone();
    assert_eq!(client.stats(), leasehold::ClientStats::default(), "nothing yet");

    let lock = client.lock("stats:a");
    let guard = lock.lock().await.expect("lock");
    let inner = lock.try_lock().await.expect("re-enter").expect("re-entered");
    let stats = client.stats();
    assert_eq!((stats.acquired, stats.held, stats.watchdog_locks), (2, 2, 1), "{stats:?}");

    // Another owner: busy once, then a wait that runs out.
    let contender = other.lock("stats:a");
    assert!(contender.try_lock().await.expect("try").is_none());
    assert!(contender.try_lock_for(Duration::from_millis(150)).await.expect("wait").is_none());
    let stats = client.stats();
    assert_eq!((stats.busy, stats.timed_out, stats.waited, stats.waiters), (1, 1, 1, 0), "{stats:?}");

    // A waiter woken by the release.
    let waiter = tokio::spawn(async move {
        let guard = contender.try_lock_for(Duration::from_secs(5)).await.expect("wait").expect("acquired");
        guard.unlock().await.expect("unlock");
    });
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1).await, "{:?}", client.stats());
    inner.unlock().await.expect("unlock inner");
    guard.unlock().await.expect("unlock");
    waiter.await.expect("waiter");
    let stats = client.stats();
    assert_eq!((stats.acquired, stats.waited, stats.waiters, stats.held), (3, 2, 0, 0), "{stats:?}");
    assert!(stats.wake_ups >= 1, "the waiter woke to take the lock: {stats:?}");
    assert_eq!(stats.watchdog_locks, 0, "{stats:?}");
}

/// A watchdog hold with a short watchdog is renewed (counted per hold), and a
/// `force_unlock` behind its back is found at the next renewal: `lost` counts it, and
/// the guard is gone from the renewed holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_renewals_and_a_lost_hold() {
    let server = RedisServer::start();
    let client = client_with(&server.url(), Duration::from_millis(300)).await;
    let lock = client.lock("stats:lost");
    let guard = lock.lock().await.expect("lock");
    assert!(wait_until(Duration::from_secs(5), || client.stats().renewals >= 3).await, "{:?}", client.stats());
    assert_eq!(client.stats().lost, 0);
    assert!(client.lock("stats:lost").force_unlock().await.expect("force"));
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("lost() fires");
    let stats = client.stats();
    assert_eq!((stats.lost, stats.watchdog_locks, stats.held), (1, 0, 1), "{stats:?}");
    assert!(guard.unlock().await.expect_err("lost").is_lock_lost());
    assert_eq!(client.stats().held, 0);
}

/// The spans carry the lock name as a field (never in the span's name), the kind, the
/// mode, the attempts and the outcome; a fenced acquire its token; the renewals their
/// batch size; and a hold found lost is reported by a `leasehold.lost` event at WARN.
/// The subscriber is this test's thread's default, so the test runs on one thread.
#[tokio::test(flavor = "current_thread")]
async fn spans_and_the_lost_event_carry_their_fields() {
    let recorder = TraceLog::all();
    let _default = recorder.set_default();
    let server = RedisServer::start();
    let client = client_with(&server.url(), Duration::from_millis(300)).await;

    let guard = client.lock("span:a").lock().await.expect("lock");
    assert!(client.lock("span:a").try_lock().await.expect("try").is_none());
    assert!(client.lock("span:a").try_lock_for(Duration::from_millis(50)).await.expect("wait").is_none());
    let fenced = client.fenced_lock("span:f").lock().await.expect("fenced");
    let token = fenced.token();
    fenced.unlock().await.expect("unlock");

    let acquires = recorder.spans_named("leasehold.acquire");
    let find = |lock: &str, outcome: &str| {
        acquires
            .iter()
            .find(|s| {
                s.fields.get("lock").map(String::as_str) == Some(lock)
                    && s.fields.get("outcome").map(String::as_str) == Some(outcome)
            })
            .cloned()
    };
    let won = find("span:a", "acquired").expect("the acquire's span");
    assert_eq!(won.fields.get("kind").map(String::as_str), Some("lock"), "{won:?}");
    assert_eq!(won.fields.get("mode").map(String::as_str), Some("wait"), "{won:?}");
    assert_eq!(won.fields.get("attempts").map(String::as_str), Some("1"), "{won:?}");
    assert_eq!(won.fields.get("db.system.name").map(String::as_str), Some("redis"), "{won:?}");
    assert_eq!(won.fields.get("lease_ms").map(String::as_str), Some("300"), "{won:?}");
    let busy = find("span:a", "busy").expect("the try's span");
    assert_eq!(busy.fields.get("mode").map(String::as_str), Some("try"), "{busy:?}");
    let fenced_span = find("span:f", "acquired").expect("the fenced acquire's span");
    assert_eq!(fenced_span.fields.get("kind").map(String::as_str), Some("fenced"));
    assert_eq!(fenced_span.fields.get("token"), Some(&token.to_string()), "{fenced_span:?}");
    assert!(acquires.iter().all(|s| !s.name.contains("span:")), "names stay bounded");
    let timed_out = find("span:a", "timed_out").expect("the timed-out wait's span");
    assert_eq!(timed_out.fields.get("mode").map(String::as_str), Some("wait"), "{timed_out:?}");
    let waits = recorder.spans_named("leasehold.wait");
    assert_eq!(waits.len(), 1, "one call queued: {waits:?}");
    assert_eq!(waits[0].fields.get("lock").map(String::as_str), Some("span:a"), "{waits:?}");
    assert!(waits[0].fields.contains_key("wake_ups"), "{waits:?}");
    let releases = recorder.spans_named("leasehold.release");
    assert_eq!(releases.len(), 1, "{releases:?}");
    assert_eq!(releases[0].fields.get("kind").map(String::as_str), Some("fenced"), "{releases:?}");
    assert_eq!(releases[0].fields.get("outcome").map(String::as_str), Some("released"), "{releases:?}");

    assert!(
        wait_until(Duration::from_secs(5), || !recorder.spans_named("leasehold.renew").is_empty()).await,
        "a renewal span"
    );
    let renew = recorder.spans_named("leasehold.renew").remove(0);
    assert_eq!(renew.fields.get("batch").map(String::as_str), Some("1"), "{renew:?}");

    assert!(client.lock("span:a").force_unlock().await.expect("force"));
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("lost() fires");
    let events = recorder.events();
    let lost: Vec<&Seen> = events.iter().filter(|e| e.name == "leasehold.lost").collect();
    assert_eq!(lost.len(), 1, "one lost event: {events:?}");
    assert_eq!(lost[0].fields.get("lock").map(String::as_str), Some("span:a"), "{lost:?}");
    assert_eq!(lost[0].fields.get("kind").map(String::as_str), Some("lock"), "{lost:?}");
    assert_eq!(lost[0].fields.get("reason").map(String::as_str), Some("owner_gone"), "{lost:?}");
    drop(guard);
}

/// A multi-lock's group released by one script (issue 29 item 5) has one
/// `leasehold.release` span: its first member's key, the member count, the outcome.
#[tokio::test(flavor = "current_thread")]
async fn a_multi_lock_group_release_has_one_span() {
    let recorder = TraceLog::all();
    let _default = recorder.set_default();
    let server = RedisServer::start();
    let client = client_with(&server.url(), Duration::from_secs(30)).await;
    let guard = client.multi_lock(["span:m2", "span:m1", "span:m3"]).lock().await.expect("lock");
    guard.unlock().await.expect("unlock");
    let releases = recorder.spans_named("leasehold.release");
    assert_eq!(releases.len(), 1, "one span for the one script: {releases:?}");
    let field = |name: &str| releases[0].fields.get(name).map(String::as_str);
    assert_eq!(field("lock"), Some("span:m1"), "{releases:?}");
    assert_eq!(field("members"), Some("3"), "{releases:?}");
    assert_eq!(field("kind"), Some("lock"), "{releases:?}");
    assert_eq!(field("outcome"), Some("released"), "{releases:?}");
}

/// `RUST_LOG=leasehold=debug` shows everything leasehold emits (issue 30): behind that
/// filter (`tracing-subscriber`'s `Targets`, the same directive matching as
/// `EnvFilter`), the acquire and renew spans and the `leasehold.lost` WARN event (its
/// reason in the fields and the message) are all seen, and no callsite of the library
/// crates has a target outside `leasehold` (their module paths, `lock_core::…`,
/// `lock_watchdog::…`, `lock_pubsub::…`, were the targets before).
#[tokio::test(flavor = "current_thread")]
async fn leasehold_debug_shows_the_renew_spans_and_the_lost_event() {
    let log = TraceLog::filtered("leasehold=debug");
    let _default = log.set_default();
    let server = RedisServer::start();
    let client = client_with(&server.url(), Duration::from_millis(300)).await;
    let guard = client.lock("target:a").lock().await.expect("lock");
    let contender = client.lock("target:a");
    assert!(contender.try_lock_for(Duration::from_millis(50)).await.expect("wait").is_none());
    assert!(
        wait_until(Duration::from_secs(5), || !log.spans_named("leasehold.renew").is_empty()).await,
        "a renew span behind leasehold=debug"
    );
    assert!(client.lock("target:a").force_unlock().await.expect("force"));
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("lost() fires");
    drop(guard);

    let renew = log.spans_named("leasehold.renew").remove(0);
    assert_eq!(renew.target, "leasehold::watchdog", "{renew:?}");
    assert_eq!(renew.field("script"), Some("renew_batch"), "{renew:?}");
    let acquire = log.spans_named("leasehold.acquire");
    assert!(acquire.iter().any(|s| s.field("outcome") == Some("timed_out")), "{acquire:?}");
    assert!(acquire.iter().all(|s| s.target == "leasehold"), "{acquire:?}");
    assert!(!log.spans_named("leasehold.wait").is_empty(), "the wait span");
    let lost = log.events_named("leasehold.lost");
    assert_eq!(lost.len(), 1, "{:?}", log.events());
    assert_eq!(lost[0].level, tracing::Level::WARN);
    assert_eq!(lost[0].target, "leasehold::watchdog");
    assert_eq!((lost[0].field("lock"), lost[0].field("reason")), (Some("target:a"), Some("owner_gone")));
    let message = lost[0].field("message").unwrap_or_default();
    assert!(message.contains("owner gone"), "the line says why: {message}");
    let outside: Vec<&str> = log.targets_asked().into_iter().filter(|target| target.starts_with("lock_")).collect();
    assert!(outside.is_empty(), "callsites outside `leasehold`: {outside:?}");
}

/// Two guards of one hold (a re-entry through the same handle), the lock force-unlocked
/// behind their back, and the inner guard's unlock answered "not owner": the outer guard
/// loses the hold then, and that loss is counted and raised once (`owner_gone`) by the
/// time its `lost()` resolves (the unlock itself reports its own error, not an event).
#[tokio::test(flavor = "current_thread")]
async fn a_guard_losing_its_hold_to_a_sibling_unlock_is_counted_once() {
    let log = TraceLog::filtered("leasehold=warn");
    let _default = log.set_default();
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("sibling:a");
    let outer = lock.lock().await.expect("lock");
    let inner = lock.try_lock().await.expect("re-enter").expect("re-entered");
    assert!(client.lock("sibling:a").force_unlock().await.expect("force"));
    let error = inner.unlock().await.expect_err("the owner is gone");
    assert!(error.is_not_owner(), "{error}");
    tokio::time::timeout(Duration::from_secs(5), outer.lost()).await.expect("lost() fires");
    assert_eq!(client.stats().lost, 1, "{:?}", client.stats());
    let lost = log.events_named("leasehold.lost");
    assert_eq!(lost.len(), 1, "{:?}", log.events());
    assert_eq!((lost[0].field("lock"), lost[0].field("kind")), (Some("sibling:a"), Some("lock")));
    assert_eq!(lost[0].field("reason"), Some("owner_gone"));
    drop(outer);
    assert_eq!(client.stats().lost, 1, "the drop counts nothing more");
    assert_eq!(log.events_named("leasehold.lost").len(), 1);
}
