//! The semaphore's wait queue (issue 29 item 4): a waiting `acquire` that finds too few
//! permits queues on the server (`leasehold_sem_queue:{NAME}`), a release serves the
//! queue head-first, and the waiter learns of its grant from a message without a request.
//! Against real servers (`NAME::redis`, `NAME::valkey`); waits are bounded by deadlines.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_test_support::commandstats::calls_during;
use leasehold_test_support::redisson_semaphore::{REDISSON_SEM_RELEASE, REDISSON_SEM_TRY_ACQUIRE};
use leasehold_test_support::{
    both_servers, client, client_with, raw, wait_until, HolderProcess, Listener, Proxy, RedisServer, RespValue,
    ServerKind,
};
use tokio::time::{timeout, Instant};

fn count(server: &RedisServer, name: &str) -> Option<i64> {
    raw(server, &["GET", name]).as_str().and_then(|text| text.parse().ok())
}

fn queued(server: &RedisServer, name: &str) -> i64 {
    raw(server, &["ZCARD", &format!("leasehold_sem_queue:{{{name}}}")]).as_int().unwrap_or(-1)
}

fn records(server: &RedisServer, name: &str) -> Vec<String> {
    let RespValue::Array(keys) = raw(server, &["KEYS", &format!("leasehold_sem_op:{{{name}}}:*")]) else {
        panic!("KEYS")
    };
    keys.iter()
        .filter_map(RespValue::as_str)
        .filter_map(|key| raw(server, &["GET", key]).as_str().map(str::to_owned))
        .collect()
}

/// Whether `clients` leasehold clients listen on the semaphore's count channel (a
/// waiter's client subscribes just after its first call queued it; a release serves the
/// queue when its count message reaches someone).
fn listening(server: &RedisServer, name: &str, clients: i64) -> bool {
    let channel = format!("redisson_sc:{{{name}}}");
    match raw(server, &["PUBSUB", "NUMSUB", &channel]) {
        RespValue::Array(reply) => reply.get(1).and_then(RespValue::as_int).is_some_and(|n| n >= clients),
        _ => false,
    }
}

/// The commands a client sent itself, out of a `calls_during` map: every command but
/// those leasehold's scripts run inside the server.
fn requests(calls: &std::collections::BTreeMap<String, u64>) -> u64 {
    const INSIDE: &[&str] = &[
        "decrby",
        "del",
        "exists",
        "get",
        "hdel",
        "hget",
        "hset",
        "incrby",
        "pexpire",
        "pttl",
        "publish",
        "set",
        "spublish",
        "time",
        "zadd",
        "zrange",
        "zrank",
        "zrem",
        "zcard",
        "zscore",
        "zcount",
        "zrangebyscore",
        "zremrangebyrank",
    ];
    calls.iter().filter(|(name, _)| !INSIDE.contains(&name.as_str())).map(|(_, n)| n).sum()
}

/// 4 clients x 16 tasks on 8 permits (the `semaphore` bench's shape) cost at most 2.5
/// requests per acquisition (floor 2: the acquire that queues, the release that grants),
/// and every task is served. It was 5.2: each client woke as many of its waiters as a
/// count covered, so up to 4x the freed permits tried.
async fn contended_acquisitions_cost_at_most_two_and_a_half_requests_each(on: ServerKind) {
    let server = on.start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    assert!(clients[0].semaphore("sem:busy").try_set_permits(8).await.expect("set"));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicBool::new(false));
    let per_task = Arc::new(Mutex::new(Vec::new()));
    let calls = calls_during(&server, async {
        let end = Instant::now() + Duration::from_millis(1_500);
        let mut tasks = Vec::new();
        for client in &clients {
            for _ in 0..16 {
                let (sem, inside, overlap, per_task) =
                    (client.semaphore("sem:busy"), inside.clone(), overlap.clone(), per_task.clone());
                tasks.push(tokio::spawn(async move {
                    let mut acquisitions = 0u64;
                    while Instant::now() < end {
                        let permit =
                            timeout(Duration::from_secs(20), sem.acquire(1)).await.expect("served").expect("ok");
                        if inside.fetch_add(1, Ordering::SeqCst) >= 8 {
                            overlap.store(true, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        inside.fetch_sub(1, Ordering::SeqCst);
                        permit.release().await.expect("release");
                        acquisitions += 1;
                    }
                    per_task.lock().expect("lock").push(acquisitions);
                }));
            }
        }
        for task in tasks {
            task.await.expect("task");
        }
    })
    .await;
    assert!(!overlap.load(Ordering::SeqCst), "never more holders than permits");
    assert_eq!(count(&server, "sem:busy"), Some(8), "every permit back");
    let per_task = per_task.lock().expect("lock").clone();
    let total: u64 = per_task.iter().sum();
    let (min, max) = (per_task.iter().min().copied().unwrap_or(0), per_task.iter().max().copied().unwrap_or(0));
    let per_acquisition = requests(&calls) as f64 / total as f64;
    assert!(per_acquisition <= 2.5, "{per_acquisition:.2} requests per acquisition ({total} acquisitions): {calls:?}");
    assert!(min > 0 && min as f64 / max as f64 >= 0.25, "every task served: min {min}, max {max}");
    assert_eq!(queued(&server, "sem:busy"), 0, "nobody left queued");
}
both_servers!(contended_acquisitions_cost_at_most_two_and_a_half_requests_each);

/// Waiters of three clients are served in arrival order, and a holder that releases and
/// at once acquires again queues behind the waiters its release served first. A
/// waiting acquire never takes a permit a queued waiter waits for: with 1 of 2 permits
/// free and the head waiting for 2, a newcomer for 1 waits behind it (no barging).
async fn waiters_are_served_in_arrival_order_without_barging(on: ServerKind) {
    let server = on.start();
    let (a, b, c) = (client(&server).await, client(&server).await, client(&server).await);
    let sem = a.semaphore("sem:fifo");
    assert!(sem.try_set_permits(1).await.expect("set"));
    let held = sem.acquire(1).await.expect("free");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for (id, client) in [(1, &b), (2, &c), (3, &b)] {
        let (sem, order) = (client.semaphore("sem:fifo"), order.clone());
        waiters.push(tokio::spawn(async move {
            let permit = sem.acquire(1).await.expect("acquire");
            order.lock().expect("lock").push(id);
            tokio::time::sleep(Duration::from_millis(20)).await;
            permit.release().await.expect("release");
        }));
        assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:fifo") == id).await, "waiter {id} queued");
        let clients = if id == 1 { 1 } else { 2 };
        assert!(wait_until(Duration::from_secs(10), || listening(&server, "sem:fifo", clients)).await, "subscribed");
    }
    held.release().await.expect("release");
    // The releaser's own next acquire comes last.
    let again = sem.acquire(1).await.expect("again");
    order.lock().expect("lock").push(0);
    assert_eq!(*order.lock().expect("lock"), [1, 2, 3, 0], "arrival order, the releaser last");
    again.release().await.expect("release");
    for waiter in waiters {
        waiter.await.expect("waiter");
    }
    // No barging: the head waits for 2, 1 is free, a newcomer for 1 waits behind it.
    let sem = a.semaphore("sem:fifo2");
    assert!(sem.try_set_permits(2).await.expect("set"));
    let (one, two) = (sem.acquire(1).await.expect("1"), sem.acquire(1).await.expect("2"));
    let big = tokio::spawn({
        let sem = b.semaphore("sem:fifo2");
        async move { sem.acquire(2).await.expect("2 permits") }
    });
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:fifo2") == 1).await);
    one.release().await.expect("release");
    assert_eq!(count(&server, "sem:fifo2"), Some(1), "1 free, the head waits for 2");
    let small = c.semaphore("sem:fifo2").try_acquire_for(1, Duration::from_millis(300)).await.expect("wait");
    assert!(small.is_none(), "a waiting newcomer does not take the permit the head waits for");
    two.release().await.expect("release");
    let big = timeout(Duration::from_secs(10), big).await.expect("the head is served").expect("task");
    assert_eq!(big.permits(), 2);
    big.release().await.expect("release");
    assert!(wait_until(Duration::from_secs(5), || count(&server, "sem:fifo2") == Some(2)).await);
    assert_eq!(queued(&server, "sem:fifo2"), 0);
}
both_servers!(waiters_are_served_in_arrival_order_without_barging);

/// A waiter whose grant comes after it gave up (its client hears the grant late: every
/// reply to it is delayed) gives the granted permits back exactly once, and leaves the
/// queue: the count is whole again, nothing stays queued.
async fn a_grant_to_a_cancelled_waiter_is_given_back(on: ServerKind) {
    let server = on.start();
    let proxy = Proxy::start(&server.addr()).await;
    let direct = client(&server).await;
    let slow = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let sem = direct.semaphore("sem:cancel");
    assert!(sem.try_set_permits(1).await.expect("set"));
    let held = sem.acquire(1).await.expect("free");
    let waiter = tokio::spawn({
        let sem = slow.semaphore("sem:cancel");
        async move { sem.acquire(1).await }
    });
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:cancel") == 1).await, "queued");
    assert!(wait_until(Duration::from_secs(10), || listening(&server, "sem:cancel", 1)).await, "subscribed");
    proxy.set_latency(Duration::from_millis(1_500));
    held.release().await.expect("release");
    assert_eq!(count(&server, "sem:cancel"), Some(0), "granted to the waiter in Redis");
    assert_eq!(records(&server, "sem:cancel"), ["taken 1"], "the grant's record");
    waiter.abort();
    assert!(waiter.await.is_err_and(|e| e.is_cancelled()), "cancelled before it heard of the grant");
    proxy.set_latency(Duration::ZERO);
    assert!(
        wait_until(Duration::from_secs(15), || count(&server, "sem:cancel") == Some(1)).await,
        "the grant given back: {:?}",
        count(&server, "sem:cancel")
    );
    assert_eq!(records(&server, "sem:cancel"), ["cancelled 1"]);
    assert_eq!(queued(&server, "sem:cancel"), 0);
    let one = sem.try_acquire(1).await.expect("try");
    assert!(one.is_some() && sem.try_acquire(1).await.expect("try").is_none(), "exactly 1");
}
both_servers!(a_grant_to_a_cancelled_waiter_is_given_back);

/// A waiter whose grant message is lost (the release published it where nobody
/// listens) finds its grant by its periodic recheck, which reads its record: within
/// about a second, and the count stays exact. (The waiter queues after its client's
/// subscription was confirmed, so it has no catch-up turn: only the recheck finds it.)
async fn a_lost_grant_message_is_found_by_the_recheck(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:lost");
    assert!(sem.try_set_permits(2).await.expect("set"));
    let held = sem.try_acquire(2).await.expect("try").expect("free");
    let wait = |sem: leasehold::Semaphore| {
        tokio::spawn(async move { sem.acquire(1).await.map(|permit| (permit, Instant::now())) })
    };
    let first = wait(client.semaphore("sem:lost"));
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:lost") == 1).await, "queued");
    assert!(wait_until(Duration::from_secs(10), || listening(&server, "sem:lost", 1)).await, "subscribed");
    let second = wait(client.semaphore("sem:lost"));
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:lost") == 2).await, "queued");
    held.detach();
    // The release of those 2 permits, sent as leasehold sends it but with the grants
    // channel renamed: both grants are written, their messages lost.
    let released = Instant::now();
    let script = include_str!("../crates/lock-core/lua/sem_release.lua");
    let reply = raw(
        &server,
        &[
            "EVAL",
            script,
            "6",
            "sem:lost",
            "redisson_sc:{sem:lost}",
            "leasehold_sem_op:{sem:lost}:00000000000000000000000000000009",
            "leasehold_sem_queue:{sem:lost}",
            "leasehold_sem_waiters:{sem:lost}",
            "{sem:lost}:nowhere",
            "2",
            "publish",
            "60000",
            "0",
            "1",
            "leasehold_sem_op:{sem:lost}:",
            "300000",
            "1000",
        ],
    );
    assert_eq!(reply, RespValue::Array(vec![RespValue::Integer(2), RespValue::Integer(1)]));
    assert_eq!(count(&server, "sem:lost"), Some(0), "granted in Redis");
    assert_eq!(queued(&server, "sem:lost"), 0, "both served");
    let (permit, at) = timeout(Duration::from_secs(10), second).await.expect("served").expect("task").expect("ok");
    let took = at - released;
    assert!(took <= Duration::from_millis(1_000 + 1_500), "found by the recheck within its period: {took:?}");
    permit.release().await.expect("release");
    let (permit, _) = timeout(Duration::from_secs(10), first).await.expect("served").expect("task").expect("ok");
    permit.release().await.expect("release");
    assert_eq!(count(&server, "sem:lost"), Some(2), "exact");
}
both_servers!(a_lost_grant_message_is_found_by_the_recheck);

/// A waiting process killed with SIGKILL stops blocking the queue once its entry's
/// deadline (server TIME, 3 s after its last refresh) has passed: the next release
/// purges it unserved and grants the live waiter behind it. (A release before that
/// deadline would grant the dead waiter, whose permit is then lost as a dead holder's
/// is: docs/architecture/semaphores.md.)
async fn a_killed_waiting_process_does_not_block_the_queue_past_its_deadline(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:dead");
    assert!(sem.try_set_permits(1).await.expect("set"));
    let held = sem.acquire(1).await.expect("free");
    let args = [server.url(), "sem:dead".to_owned(), "dead".to_owned(), "3000".to_owned(), "0".to_owned()];
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.push("semaphore");
    let mut dead = HolderProcess::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args);
    assert_eq!(dead.next_line(Duration::from_secs(10)).await.as_deref(), Some("QUEUING -"));
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:dead") == 1).await, "the child queued");
    let live = tokio::spawn({
        let sem = client.semaphore("sem:dead");
        async move { sem.acquire(1).await }
    });
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:dead") == 2).await, "the live one behind");
    dead.signal("KILL");
    // Wait (on the server's clock) until the dead entry's deadline has passed.
    let RespValue::Array(entries) = raw(&server, &["HGETALL", "leasehold_sem_waiters:{sem:dead}"]) else {
        panic!("HGETALL")
    };
    let head = raw(&server, &["ZRANGE", "leasehold_sem_queue:{sem:dead}", "0", "0"]);
    let RespValue::Array(head) = head else { panic!("ZRANGE") };
    let head = head.first().and_then(RespValue::as_str).expect("a head").to_owned();
    let entry = entries
        .chunks(2)
        .find(|pair| pair[0].as_str() == Some(head.as_str()))
        .and_then(|pair| pair[1].as_str())
        .expect("the head's entry")
        .to_owned();
    let deadline: u64 = entry.split(' ').nth(1).and_then(|d| d.parse().ok()).expect("a deadline");
    let server_ms = || match raw(&server, &["TIME"]) {
        RespValue::Array(t) => {
            let secs: u64 = t[0].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
            let micros: u64 = t[1].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
            secs * 1000 + micros / 1000
        }
        _ => 0,
    };
    assert!(wait_until(Duration::from_secs(10), || server_ms() > deadline).await, "the deadline passed");
    held.release().await.expect("release");
    let permit = timeout(Duration::from_secs(3), live).await.expect("the live waiter is served").expect("task");
    permit.expect("ok").release().await.expect("release");
    assert_eq!(count(&server, "sem:dead"), Some(1), "exact: nothing went to the dead waiter");
    assert_eq!(queued(&server, "sem:dead"), 0, "the dead entry was purged");
    drop(dead);
}
both_servers!(a_killed_waiting_process_does_not_block_the_queue_past_its_deadline);

/// Java (Redisson's scripts and its count channel) and leasehold waiters on one
/// semaphore: a leasehold release with a leasehold waiter queued grants it (a Java
/// waiter woken by the count finds nothing left and waits on); a leasehold release with
/// nobody queued leaves the permit to the Java waiter; a Java release wakes the
/// leasehold head at once (its count covers it), before its recheck.
async fn java_and_leasehold_waiters_mixed(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.semaphore("sem:mixed");
    assert!(sem.try_set_permits(1).await.expect("set"));
    let java_try = || raw(&server, &["EVAL", REDISSON_SEM_TRY_ACQUIRE, "1", "sem:mixed", "1"]).as_int() == Some(1);
    let java_release =
        || raw(&server, &["EVAL", REDISSON_SEM_RELEASE, "2", "sem:mixed", "redisson_sc:{sem:mixed}", "1", "publish"]);
    let mut java = Listener::start(&server, "redisson_sc:{sem:mixed}");
    let held = sem.acquire(1).await.expect("free");
    assert!(!java_try(), "Java waits");
    let waiter = tokio::spawn({
        let sem = client.semaphore("sem:mixed");
        async move { sem.acquire(1).await }
    });
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:mixed") == 1).await, "queued");
    assert!(wait_until(Duration::from_secs(10), || listening(&server, "sem:mixed", 2)).await, "subscribed");
    held.release().await.expect("release");
    assert_eq!(java.next_message(), "1", "Java is told the count");
    assert!(!java_try(), "the queued leasehold waiter was granted it");
    let permit = timeout(Duration::from_secs(5), waiter).await.expect("served").expect("task").expect("ok");
    permit.release().await.expect("release");
    assert_eq!(java.next_message(), "1");
    assert!(java_try(), "nobody queued: the Java waiter gets in");
    // A Java release wakes the queued leasehold head at once.
    let waiter = tokio::spawn({
        let sem = client.semaphore("sem:mixed");
        async move { sem.acquire(1).await.map(|permit| (permit, Instant::now())) }
    });
    assert!(wait_until(Duration::from_secs(10), || queued(&server, "sem:mixed") == 1).await, "queued");
    let released = Instant::now();
    java_release();
    let (permit, at) = timeout(Duration::from_secs(5), waiter).await.expect("served").expect("task").expect("ok");
    assert!(at - released < Duration::from_millis(700), "woken by the count, not its recheck: {:?}", at - released);
    permit.release().await.expect("release");
    assert_eq!(count(&server, "sem:mixed"), Some(1), "exact");
}
both_servers!(java_and_leasehold_waiters_mixed);

/// `x` and `{x}` are two semaphores (two counts) sharing one count channel: they keep
/// two wait queues, so a release of one never serves the other's waiter with its count.
async fn two_names_on_one_channel_keep_two_queues(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let (plain, braced) = (client.semaphore("qx"), client.semaphore("{qx}"));
    assert!(plain.try_set_permits(1).await.expect("set") && braced.try_set_permits(1).await.expect("set"));
    let (held_plain, held_braced) = (plain.acquire(1).await.expect("free"), braced.acquire(1).await.expect("free"));
    let waiter = tokio::spawn({
        let sem = client.semaphore("{qx}");
        async move { sem.acquire(1).await }
    });
    assert!(wait_until(Duration::from_secs(10), || listening(&server, "qx", 1)).await, "subscribed");
    assert!(wait_until(Duration::from_secs(10), || braced.local_waiters() == 1).await, "waiting");
    held_plain.release().await.expect("release");
    assert_eq!(count(&server, "qx"), Some(1), "the plain count is not given to the braced name's waiter");
    assert_eq!(count(&server, "{qx}"), Some(0));
    assert!(!waiter.is_finished(), "still waiting");
    held_braced.release().await.expect("release");
    let permit = timeout(Duration::from_secs(5), waiter).await.expect("served").expect("task").expect("ok");
    permit.release().await.expect("release");
    assert_eq!((count(&server, "qx"), count(&server, "{qx}")), (Some(1), Some(1)), "both exact");
}
both_servers!(two_names_on_one_channel_keep_two_queues);

fn pes_queued(server: &RedisServer, name: &str) -> i64 {
    raw(server, &["ZCARD", &format!("leasehold_pes_queue:{{{name}}}")]).as_int().unwrap_or(-1)
}

fn pes_held(server: &RedisServer, name: &str) -> i64 {
    raw(server, &["ZCARD", &format!("{{{name}}}:timeout")]).as_int().unwrap_or(-1)
}

/// The permit semaphore's waiters queue on the server too: two holders that release
/// and at once acquire again, in a loop, no longer keep a third client's waiter out
/// (it waited 38 s for a permit of 2 before the queue): once it is queued, the next
/// release serves it and the releaser's next acquire queues behind it, so the holders
/// take no permit between its queueing and its grant (2 allowed: an acquisition counted
/// just after the test read the count, and slack).
async fn a_permit_semaphore_waiter_is_not_overtaken_by_holders_that_cycle(on: ServerKind) {
    let server = on.start();
    let (a, b, c) = (client(&server).await, client(&server).await, client(&server).await);
    a.permit_expirable_semaphore("pes:cycle").set_permits(2).await.expect("set");
    let stop = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(AtomicUsize::new(0));
    let mut cyclers = Vec::new();
    for client in [&a, &b] {
        let (sem, stop, taken) = (client.permit_expirable_semaphore("pes:cycle"), stop.clone(), taken.clone());
        cyclers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let permit = sem.acquire_with_lease(Duration::from_secs(30)).await.expect("acquire");
                taken.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                permit.release().await.expect("release");
            }
        }));
    }
    assert!(wait_until(Duration::from_secs(10), || taken.load(Ordering::SeqCst) >= 20).await, "both cycling");
    let waiter = tokio::spawn({
        let sem = c.permit_expirable_semaphore("pes:cycle");
        async move { sem.acquire_with_lease(Duration::from_secs(30)).await.map(|permit| (permit, Instant::now())) }
    });
    assert!(wait_until(Duration::from_secs(10), || pes_queued(&server, "pes:cycle") >= 1).await, "queued");
    let (queued_at, before) = (Instant::now(), taken.load(Ordering::SeqCst));
    let got = timeout(Duration::from_secs(5), waiter).await;
    let overtaken = taken.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::SeqCst);
    let (permit, at) = got.expect("the waiter got in while the others cycled").expect("task").expect("acquire");
    assert!(overtaken <= 2, "overtaken {overtaken} times in {:?}", at - queued_at);
    permit.release().await.expect("release");
    for cycler in cyclers {
        cycler.await.expect("cycler");
    }
    assert!(wait_until(Duration::from_secs(5), || pes_held(&server, "pes:cycle") == 0).await);
    assert_eq!(count(&server, "pes:cycle"), Some(2), "exact");
    assert_eq!(pes_queued(&server, "pes:cycle"), 0);
}
both_servers!(a_permit_semaphore_waiter_is_not_overtaken_by_holders_that_cycle);

/// 4 clients x 16 tasks on 8 leased permits cost at most 2.5 requests per acquisition,
/// every task served.
async fn contended_permit_acquisitions_cost_at_most_two_and_a_half_requests_each(on: ServerKind) {
    let server = on.start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    clients[0].permit_expirable_semaphore("pes:busy").set_permits(8).await.expect("set");
    let per_task = Arc::new(Mutex::new(Vec::new()));
    let calls = calls_during(&server, async {
        let end = Instant::now() + Duration::from_millis(1_500);
        let mut tasks = Vec::new();
        for client in &clients {
            for _ in 0..16 {
                let (sem, per_task) = (client.permit_expirable_semaphore("pes:busy"), per_task.clone());
                tasks.push(tokio::spawn(async move {
                    let mut acquisitions = 0u64;
                    while Instant::now() < end {
                        let permit = timeout(Duration::from_secs(20), sem.acquire_with_lease(Duration::from_secs(30)))
                            .await
                            .expect("served")
                            .expect("ok");
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        permit.release().await.expect("release");
                        acquisitions += 1;
                    }
                    per_task.lock().expect("lock").push(acquisitions);
                }));
            }
        }
        for task in tasks {
            task.await.expect("task");
        }
    })
    .await;
    assert_eq!(count(&server, "pes:busy"), Some(8), "every permit back");
    let per_task = per_task.lock().expect("lock").clone();
    let total: u64 = per_task.iter().sum();
    let (min, max) = (per_task.iter().min().copied().unwrap_or(0), per_task.iter().max().copied().unwrap_or(0));
    let per_acquisition = requests(&calls) as f64 / total as f64;
    assert!(per_acquisition <= 2.5, "{per_acquisition:.2} requests per acquisition ({total} acquisitions): {calls:?}");
    assert!(min > 0 && min as f64 / max as f64 >= 0.25, "every task served: min {min}, max {max}");
    assert_eq!(pes_queued(&server, "pes:busy"), 0, "nobody left queued");
}
both_servers!(contended_permit_acquisitions_cost_at_most_two_and_a_half_requests_each);

/// A permit-semaphore waiter whose grant comes after it gave up releases the granted
/// permit (by its id) and leaves the queue: the count is whole again.
async fn a_permit_granted_to_a_cancelled_waiter_is_released(on: ServerKind) {
    let server = on.start();
    let proxy = Proxy::start(&server.addr()).await;
    let direct = client(&server).await;
    let slow = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let sem = direct.permit_expirable_semaphore("pes:cancel");
    sem.set_permits(1).await.expect("set");
    let held = sem.acquire_with_lease(Duration::from_secs(60)).await.expect("free");
    let waiter = tokio::spawn({
        let sem = slow.permit_expirable_semaphore("pes:cancel");
        async move { sem.acquire_with_lease(Duration::from_secs(60)).await }
    });
    assert!(wait_until(Duration::from_secs(10), || pes_queued(&server, "pes:cancel") == 1).await, "queued");
    assert!(wait_until(Duration::from_secs(10), || listening(&server, "pes:cancel", 1)).await, "subscribed");
    proxy.set_latency(Duration::from_millis(1_500));
    held.release().await.expect("release");
    assert_eq!(pes_held(&server, "pes:cancel"), 1, "granted to the waiter in Redis");
    assert_eq!(count(&server, "pes:cancel"), Some(0));
    waiter.abort();
    assert!(waiter.await.is_err_and(|e| e.is_cancelled()), "cancelled before it heard of the grant");
    proxy.set_latency(Duration::ZERO);
    assert!(
        wait_until(Duration::from_secs(15), || count(&server, "pes:cancel") == Some(1)).await,
        "the granted permit released: {:?}",
        count(&server, "pes:cancel")
    );
    assert_eq!(pes_held(&server, "pes:cancel"), 0);
    assert_eq!(pes_queued(&server, "pes:cancel"), 0);
}
both_servers!(a_permit_granted_to_a_cancelled_waiter_is_released);
