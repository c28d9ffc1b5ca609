//! The semaphore (issue 19 item 1): Redisson's `RSemaphore` layout through `Semaphore`,
//! against real servers (`NAME::redis`, `NAME::valkey`, see `both_servers!`). Waits are
//! bounded by deadlines, never sleeps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::ErrorKind;
use leasehold_test_support::{both_servers, client, raw, wait_until, Monitor, RespValue, ServerKind};

use tokio::time::{timeout, Instant};

fn get(server: &leasehold_test_support::RedisServer, key: &str) -> Option<String> {
    raw(server, &["GET", key]).as_str().map(str::to_owned)
}

/// The order the waiters got in so far.
fn seen(order: &Mutex<Vec<usize>>) -> Vec<usize> {
    order.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// The payloads the scripts published on `channel`, from MONITOR lines.
fn published(monitor: &Monitor, channel: &str) -> Vec<String> {
    let needle = format!("\"publish\" \"{channel}\" \"");
    monitor
        .commands()
        .iter()
        .filter_map(|line| line.split_once(&needle).map(|(_, rest)| rest.trim_end_matches('"').to_owned()))
        .collect()
}

/// Every call with Redisson's meaning and the String `NAME` written as Redisson writes
/// it; each change that frees permits publishes the count on `redisson_sc:{NAME}`,
/// never a count below 1.
async fn calls_keep_redissons_layout_and_payloads(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:basics");
    assert_eq!(sem.channel(), "redisson_sc:{sem:basics}");
    let monitor = Monitor::start(&server.addr());
    assert_eq!((sem.available_permits().await.expect("q"), sem.drain_permits().await.expect("drain")), (0, 0));
    assert_eq!(get(&server, "sem:basics"), None, "a drain of a missing key leaves it missing");
    assert!(sem.try_set_permits(3).await.expect("set"));
    assert!(!sem.try_set_permits(5).await.expect("set again"), "set only once");
    assert_eq!(get(&server, "sem:basics").as_deref(), Some("3"));
    let two = sem.try_acquire(2).await.expect("try").expect("3 free");
    assert_eq!(two.permits(), 2);
    assert!(sem.try_acquire(2).await.expect("try").is_none(), "1 left");
    assert_eq!(get(&server, "sem:basics").as_deref(), Some("1"));
    two.release().await.expect("release");
    assert_eq!(sem.available_permits().await.expect("q"), 3);
    sem.add_permits(-5).await.expect("take away");
    assert_eq!(sem.available_permits().await.expect("q"), -2, "the count may go below 0, as in Redisson");
    sem.release(1).await.expect("release below 0");
    sem.add_permits(3).await.expect("add");
    assert_eq!(get(&server, "sem:basics").as_deref(), Some("2"));
    assert_eq!(sem.drain_permits().await.expect("drain"), 2);
    assert_eq!(get(&server, "sem:basics").as_deref(), Some("0"));
    monitor.sync(&server.addr());
    assert_eq!(published(&monitor, "redisson_sc:{sem:basics}"), ["3", "3", "2"], "set 3, release to 3, add to 2");
}
both_servers!(calls_keep_redissons_layout_and_payloads);

/// Starts `n` waiters for `permits` each on `name`, one after the other (each in line
/// before the next starts); each records its index when it acquires.
async fn queue_waiters(client: &leasehold::Client, name: &str, permits: &[u32]) -> Arc<Mutex<Vec<usize>>> {
    let order = Arc::new(Mutex::new(Vec::new()));
    for (index, &n) in permits.iter().enumerate() {
        let (sem, order) = (client.semaphore(name), order.clone());
        drop(tokio::spawn(async move {
            sem.acquire(n).await.expect("acquire").detach();
            order.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(index);
        }));
        assert!(
            wait_until(Duration::from_secs(5), || client.semaphore(name).local_waiters() == index + 1).await,
            "in line"
        );
    }
    order
}

/// A release of k permits lets at most k of a client's waiters in, in the order they
/// came; a never-set semaphore's `acquire` waits until another client sets it.
async fn a_release_of_k_admits_k_waiters_in_order(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let order = queue_waiters(&a, "sem:fifo", &[1, 1, 1, 1, 1]).await;
    assert!(seen(&order).is_empty(), "a never-set semaphore has no permits: acquire waits");
    let monitor = Monitor::start(&server.addr());
    assert!(b.semaphore("sem:fifo").try_set_permits(2).await.expect("set"));
    assert!(wait_until(Duration::from_secs(5), || seen(&order).len() == 2).await, "2 permits, 2 in");
    let mut first_two = seen(&order);
    first_two.sort_unstable(); // woken together by one count: either may finish first
    assert_eq!(first_two, [0, 1], "first come, first served");
    b.semaphore("sem:fifo").release(1).await.expect("release");
    assert!(wait_until(Duration::from_secs(5), || seen(&order).len() == 3).await);
    assert_eq!(seen(&order)[2], 2);
    monitor.sync(&server.addr());
    let attempts = monitor.commands().iter().filter(|l| l.contains("EVALSHA") || l.contains("evalsha")).count();
    // 2 + 1 acquisitions and the two calls of b; a waiter further back is never woken
    // (a second of re-checks by the first in line may add one or two).
    assert!(attempts <= 8, "a release wakes only as many waiters as it frees: {attempts} calls");
    assert_eq!(a.semaphore("sem:fifo").available_permits().await.expect("q"), 0);
    b.semaphore("sem:fifo").release(2).await.expect("release the rest");
    assert!(wait_until(Duration::from_secs(5), || seen(&order).len() == 5).await);
    let mut all = seen(&order);
    all.sort_unstable();
    assert_eq!(all, [0, 1, 2, 3, 4]);
}
both_servers!(a_release_of_k_admits_k_waiters_in_order);

/// A waiter for 3 permits first in line is not overtaken by its client's smaller
/// requests behind it while the count is below 3.
async fn a_large_request_is_not_overtaken_by_small_ones(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let other = b.semaphore("sem:large");
    assert!(other.try_set_permits(0).await.expect("set 0"));
    let order = queue_waiters(&a, "sem:large", &[3, 1, 1]).await;
    other.release(1).await.expect("release");
    other.release(1).await.expect("release");
    // Two permits are there: the small waiters could take them, but wait their turn.
    assert!(wait_until(Duration::from_secs(3), || a.semaphore("sem:large").local_waiters() < 3)
        .await
        .then_some(())
        .is_none());
    assert_eq!(other.available_permits().await.expect("q"), 2, "nobody behind the large request took them");
    other.release(1).await.expect("release");
    assert!(wait_until(Duration::from_secs(5), || seen(&order).len() == 1).await);
    assert_eq!(seen(&order), [0], "the large request first");
    other.release(2).await.expect("release");
    assert!(wait_until(Duration::from_secs(5), || seen(&order).len() == 3).await);
}
both_servers!(a_large_request_is_not_overtaken_by_small_ones);

/// A count set by a command that publishes nothing (as a key that expires publishes
/// nothing) is found by the first waiter's re-check within about a second; a bounded
/// wait on a never-set semaphore returns `false` at its deadline.
async fn a_silent_change_is_found_and_a_bounded_wait_ends(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:silent");
    let started = Instant::now();
    assert!(sem.try_acquire_for(1, Duration::from_millis(300)).await.expect("wait").is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "returned at its deadline: {waited:?}"
    );
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(
            async move { sem.try_acquire_for(1, Duration::from_secs(10)).await.map(|p| p.map(|p| p.detach())) },
        )
    };
    assert!(wait_until(Duration::from_secs(5), || sem.local_waiters() == 1).await);
    assert_eq!(raw(&server, &["SET", "sem:silent", "1"]), RespValue::Simple("OK".into()));
    let taken = timeout(Duration::from_secs(4), waiter).await.expect("found by the re-check").expect("task");
    assert!(taken.expect("acquire").is_some());
    assert_eq!(get(&server, "sem:silent").as_deref(), Some("0"));
}
both_servers!(a_silent_change_is_found_and_a_bounded_wait_ends);

/// Acquires cancelled at every point of their call leave no permit taken: one that
/// took permits after its caller went away gives them back.
async fn cancelled_acquires_give_their_permits_back(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:cancel");
    assert!(sem.try_set_permits(1).await.expect("set"));
    for step in 0..40u64 {
        match timeout(Duration::from_micros(50 * step), sem.try_acquire(1)).await {
            Ok(Ok(Some(permit))) => permit.release().await.expect("release"),
            // The call cancelled before may have taken it, and is giving it back.
            Ok(Ok(None)) | Err(_) => {}
            Ok(Err(error)) => panic!("step {step}: {error}"),
        }
    }
    // Every cancelled call that took the permit gives it back: it is there, and stays.
    for _ in 0..3 {
        let back = wait_until(Duration::from_secs(3), || get(&server, "sem:cancel").as_deref() == Some("1")).await;
        assert!(back, "the permit came back");
        tokio::time::sleep(Duration::from_millis(50)).await; // a late give-back would show as "2"
    }
    let one = sem.try_acquire(1).await.expect("try");
    assert!(one.is_some() && sem.try_acquire(1).await.expect("try").is_none(), "exactly 1 permit");
}
both_servers!(cancelled_acquires_give_their_permits_back);

/// A request handler dropped between its acquire and its release (a client hanging up
/// on axum drops the handler's future) leaks nothing: the permit guard gives its permits
/// back in the background. Five such handlers on a 3-permit semaphore leave it whole,
/// and a later request gets in at once.
async fn handlers_cancelled_while_holding_permits_leak_nothing(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:handlers");
    assert!(sem.try_set_permits(3).await.expect("set"));
    let handler = |sem: leasehold::Semaphore| async move {
        let _permit = sem.acquire(1).await?;
        tokio::time::sleep(Duration::from_secs(3600)).await; // the slow critical section
        Ok::<_, leasehold::Error>(())
    };
    let mut requests = Vec::new();
    for _ in 0..5 {
        // `curl -m 0.08`: the request is given up, and its handler dropped, after 80 ms.
        requests.push(tokio::spawn(timeout(Duration::from_millis(80), handler(sem.clone()))));
    }
    for request in requests {
        assert!(request.await.expect("task").is_err(), "every handler was cut off");
    }
    let whole = wait_until(Duration::from_secs(5), || get(&server, "sem:handlers").as_deref() == Some("3")).await;
    assert!(whole, "every permit came back: {:?}", get(&server, "sem:handlers"));
    let next =
        timeout(Duration::from_secs(2), sem.acquire(3)).await.expect("a later request gets in").expect("acquire");
    assert_eq!(next.permits(), 3);
    next.release().await.expect("release");
    assert_eq!(get(&server, "sem:handlers").as_deref(), Some("3"));
}
both_servers!(handlers_cancelled_while_holding_permits_leak_nothing);

/// `forget` keeps the permits taken (nothing sent on drop), for a `release(n)` later;
/// `release` gives them back once.
async fn a_forgotten_permit_stays_taken(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:forget");
    assert!(sem.try_set_permits(2).await.expect("set"));
    let monitor = Monitor::start(&server.addr());
    sem.acquire(2).await.expect("acquire").detach();
    tokio::task::yield_now().await;
    assert!(sem.try_acquire(1).await.expect("try").is_none(), "still taken after the forget");
    assert_eq!(get(&server, "sem:forget").as_deref(), Some("0"));
    sem.release(2).await.expect("the plain release gives them back");
    let permit = sem.try_acquire(2).await.expect("try").expect("both free");
    permit.release().await.expect("release");
    assert_eq!(get(&server, "sem:forget").as_deref(), Some("2"));
    monitor.sync(&server.addr());
    let scripts = monitor.commands().iter().filter(|l| l.to_lowercase().contains("evalsha")).count();
    assert_eq!(scripts, 5, "acquire, try, release, try, release: no give-back of the forgotten permits");
}
both_servers!(a_forgotten_permit_stays_taken);

/// A wait on a semaphore that does not exist (never set, flushed, emptied by a restart
/// without persistence) is not silent: after `MISSING_WARN_AFTER` it is counted (and
/// logged at WARN) once; a wait on a semaphore that exists with no permit free is not.
async fn a_wait_on_a_missing_semaphore_is_reported_once(on: ServerKind) {
    let server = on.start();
    // One client per semaphore, so that each one's count says which wait it counted.
    let (a, b) = (client(&server).await, client(&server).await);
    let (missing, empty) = (a.semaphore("sem:missing"), b.semaphore("sem:empty"));
    assert!(empty.try_set_permits(0).await.expect("set 0"));
    let wait = |sem: leasehold::Semaphore| {
        tokio::spawn(async move { sem.try_acquire_for(1, Duration::from_secs(20)).await.map(|p| p.map(drop)) })
    };
    let (on_missing, on_empty) = (wait(missing.clone()), wait(empty.clone()));
    let after = leasehold::Semaphore::MISSING_WARN_AFTER + Duration::from_secs(3);
    let reported = |client: &leasehold::Client| client.stats().missing_semaphore_waits;
    assert!(wait_until(after, || reported(&a) == 1).await, "the missing semaphore's wait was reported");
    // The other wait's check came at the same time: give it a moment to (wrongly) count.
    assert!(!wait_until(Duration::from_millis(500), || reported(&b) > 0).await, "a set semaphore is not missing");
    missing.release(1).await.expect("release");
    empty.release(1).await.expect("release");
    for waiter in [on_missing, on_empty] {
        let taken = timeout(Duration::from_secs(5), waiter).await.expect("let in").expect("task");
        assert!(taken.expect("acquire").is_some());
    }
    assert_eq!((reported(&a), reported(&b)), (1, 0), "once per wait, for the missing one only");
}
both_servers!(a_wait_on_a_missing_semaphore_is_reported_once);

/// Bad input is refused with a typed error before anything is sent; a key of another
/// type (or a String that is not a count) is `WrongType`, nothing written.
async fn bad_input_is_refused_and_nothing_changes(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:bad");
    let monitor = Monitor::start(&server.addr());
    let invalid = |result: leasehold::Result<bool>| result.expect_err("refused").kind() == ErrorKind::InvalidArgument;
    let some = |taken: leasehold::Result<Option<leasehold::SemaphorePermit>>| taken.map(|p| p.is_some());
    assert!(invalid(some(sem.try_acquire(0).await)));
    assert!(invalid(some(sem.try_acquire_for(0, Duration::from_secs(1)).await)));
    assert!(invalid(some(sem.try_acquire_for(1, Duration::MAX).await)), "a wait that overflows the clock");
    assert!(invalid(sem.acquire(0).await.map(|_| true)));
    assert!(invalid(sem.release(0).await.map(|()| true)));
    assert!(invalid(some(client.semaphore("").try_acquire(1).await)));
    assert!(invalid(client.semaphore("").available_permits().await.map(|_| true)));
    monitor.sync(&server.addr());
    assert!(monitor.commands().is_empty(), "nothing sent: {:?}", monitor.commands());

    raw(&server, &["HSET", "sem:hash", "f", "1"]);
    raw(&server, &["SET", "sem:text", "ten"]);
    for name in ["sem:hash", "sem:text"] {
        let sem = client.semaphore(name);
        let wrong = |e: leasehold::Error| e.kind() == ErrorKind::WrongType;
        assert!(wrong(sem.try_acquire(1).await.expect_err("acquire")), "{name}");
        assert!(wrong(sem.try_acquire_for(1, Duration::from_secs(5)).await.expect_err("a definite error ends a wait")));
        assert!(wrong(sem.release(1).await.expect_err("release")));
        assert!(wrong(sem.add_permits(1).await.expect_err("add")));
        assert!(wrong(sem.try_set_permits(1).await.expect_err("set")));
        assert!(wrong(sem.drain_permits().await.expect_err("drain")));
        assert!(wrong(sem.available_permits().await.expect_err("count")));
    }
    assert_eq!(raw(&server, &["HGET", "sem:hash", "f"]).as_str(), Some("1"));
    assert_eq!(get(&server, "sem:text").as_deref(), Some("ten"));
}
both_servers!(bad_input_is_refused_and_nothing_changes);

#[test]
fn semaphore_is_send_sync_and_clone() {
    fn bounds<T: Send + Sync + Clone>() {}
    bounds::<leasehold::Semaphore>();
    fn guard<T: Send + Sync + 'static>() {}
    guard::<leasehold::SemaphorePermit>();
}

/// An uncontended `try_acquire(1)` + `release()` makes no more server calls than
/// Redisson's `tryAcquire(1)` + `release(1)` scripts (issue 29 item 1), but for the
/// two of the exactly-once record (issue 26: a SET NX on the acquire, a DEL on the
/// release, in the same script calls), and leaves no key behind: the release consumes
/// the acquire's record (the acquire answered on its one send) instead of writing a
/// `released` tombstone. Counted as the benches count (`INFO commandstats`, commands
/// inside scripts included).
async fn a_pair_makes_no_more_server_calls_than_redissons_scripts_and_its_record(on: ServerKind) {
    use leasehold_test_support::commandstats::{calls_during, total};
    use leasehold_test_support::redisson_semaphore::{REDISSON_SEM_RELEASE, REDISSON_SEM_TRY_ACQUIRE};
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:calls");
    assert!(sem.try_set_permits(1).await.expect("set"));
    raw(&server, &["SET", "sem:calls:redisson", "1"]);
    // One pair first: scripts loaded, connections up.
    sem.try_acquire(1).await.expect("try").expect("free").release().await.expect("release");
    let ours = calls_during(&server, async {
        sem.try_acquire(1).await.expect("try").expect("free").release().await.expect("release");
    })
    .await;
    let theirs = calls_during(&server, async {
        let taken = raw(&server, &["EVAL", REDISSON_SEM_TRY_ACQUIRE, "1", "sem:calls:redisson", "1"]);
        assert_eq!(taken.as_int(), Some(1));
        raw(
            &server,
            &[
                "EVAL",
                REDISSON_SEM_RELEASE,
                "2",
                "sem:calls:redisson",
                "redisson_sc:{sem:calls:redisson}",
                "1",
                "publish",
            ],
        );
    })
    .await;
    let record = 2; // SET NX on the acquire; DEL on the release
    assert!(total(&ours) <= total(&theirs) + record, "leasehold {ours:?} against Redisson {theirs:?}");
    assert_eq!(ours.get("type"), None, "no TYPE: {ours:?}");
    assert_eq!(ours.get("get"), Some(&1), "the count on the acquire only: {ours:?}");
    assert_eq!((ours.get("del"), ours.get("set")), (Some(&1), Some(&1)), "the record: SET NX, DEL: {ours:?}");
    assert_eq!(get(&server, "sem:calls").as_deref(), Some("1"), "both permits back");
    let left = raw(&server, &["KEYS", "leasehold_sem_op:*"]);
    assert_eq!(left, RespValue::Array(Vec::new()), "no record left behind");
}
both_servers!(a_pair_makes_no_more_server_calls_than_redissons_scripts_and_its_record);

/// A retried acquire (the same operation run twice: its record is there) takes nothing
/// the second time, whether or not permits are left, and leaves the count as it was:
/// the SET NX that finds the record undoes its DECRBY (issue 29 item 1 moved the record's
/// read behind the count's DECRBY).
async fn a_replayed_acquire_takes_once_with_permits_left(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:replay");
    assert!(sem.try_set_permits(5).await.expect("set"));
    let script = leasehold_test_support::raw(&server, &["SCRIPT", "LOAD", lock_core_sem_try_acquire()]);
    let sha = script.as_str().expect("sha").to_owned();
    let record = "leasehold_sem_op:{sem:replay}:00000000000000000000000000000001";
    // A single try (keep-alive 0): the queue keys are named but never read.
    let args = |sha: &str| -> Vec<String> {
        [sha, "5", "sem:replay", record, "q", "w", "g", "2", "300000", "0", "publish", "1", "p", "1000"]
            .iter()
            .map(|arg| (*arg).to_owned())
            .collect()
    };
    let eval = |args: Vec<String>| {
        let mut command = vec!["EVALSHA"];
        command.extend(args.iter().map(String::as_str));
        raw(&server, &command)
    };
    let run = || match eval(args(&sha)) {
        RespValue::Array(reply) => reply.first().and_then(RespValue::as_int),
        other => panic!("{other:?}"),
    };
    assert_eq!(run(), Some(1), "taken");
    assert_eq!(get(&server, "sem:replay").as_deref(), Some("3"));
    assert_eq!(run(), Some(1), "a replay answers from the record");
    assert_eq!(get(&server, "sem:replay").as_deref(), Some("3"), "and takes nothing: 3 left, not 1");
    assert_eq!(get(&server, record).as_deref(), Some("taken 2"));
    raw(&server, &["SET", record, "garbage"]);
    let refused = eval(args(&sha));
    assert!(matches!(refused, RespValue::Error(ref e) if e.contains("WRONGTYPE")), "{refused:?}");
    assert_eq!(get(&server, "sem:replay").as_deref(), Some("3"), "nothing written");
}
both_servers!(a_replayed_acquire_takes_once_with_permits_left);

/// A release that consumes its acquire's record (`sem_release.lua`, ARGV[4] = 1) gives
/// back once however often it is replayed (the record gone: `{count, 0}`, untouched), and
/// refuses a count that is not a whole number with nothing written: the record stays for
/// a retry (its INCRBY goes before the DEL).
async fn a_consuming_release_counts_once_and_writes_nothing_on_a_bad_count(on: ServerKind) {
    let server = on.start();
    let script = raw(&server, &["SCRIPT", "LOAD", include_str!("../crates/lock-core/lua/sem_release.lua")]);
    let sha = script.as_str().expect("sha").to_owned();
    let record = "leasehold_sem_op:{sem:consume}:00000000000000000000000000000002";
    let release = || {
        let keys = ["sem:consume", "redisson_sc:{sem:consume}", record];
        raw(&server, &[&["EVALSHA", &sha, "3"][..], &keys[..], &["2", "publish", "60000", "1"][..]].concat())
    };
    raw(&server, &["SET", "sem:consume", "1"]);
    raw(&server, &["SET", record, "taken 2", "PX", "300000"]);
    let int_pair = |reply: RespValue| match reply {
        RespValue::Array(items) => items.iter().map(RespValue::as_int).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(int_pair(release()), [Some(3), Some(1)], "given back, the record consumed");
    assert_eq!(get(&server, record), None, "no key left behind");
    assert_eq!(int_pair(release()), [Some(3), Some(0)], "a replay changes nothing");
    assert_eq!(get(&server, "sem:consume").as_deref(), Some("3"), "counted once");
    raw(&server, &["SET", record, "taken 2", "PX", "300000"]);
    raw(&server, &["SET", "sem:consume", "ten"]);
    let refused = release();
    assert!(matches!(refused, RespValue::Error(ref e) if e.contains("not an integer")), "{refused:?}");
    assert_eq!(get(&server, record).as_deref(), Some("taken 2"), "the record stays for a retry");
    assert_eq!(get(&server, "sem:consume").as_deref(), Some("ten"), "nothing written");
}
both_servers!(a_consuming_release_counts_once_and_writes_nothing_on_a_bad_count);

/// The script the client sends as `sem_try_acquire.lua`.
fn lock_core_sem_try_acquire() -> &'static str {
    include_str!("../crates/lock-core/lua/sem_try_acquire.lua")
}
