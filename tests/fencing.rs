//! Fencing tokens (issue 11): `FencedLock` and the resource side, against real servers,
//! with real pauses (`SIGSTOP`) and restarts.
//!
//! Every test runs on Redis and on Valkey (`NAME::redis`, `NAME::valkey`, see
//! `both_servers!`).

use std::sync::Arc;
use std::time::Duration;

use leasehold::fence::{fence_key, fence_of, fenced_set, FencedWrite};
use leasehold_test_support::{
    both_servers, client, hgetall, pttl, raw, wait_until, HolderProcess, RedisServer, RespValue, ServerKind,
};

const LEASE: Duration = Duration::from_secs(10);

fn get(server: &RedisServer, key: &str) -> Option<String> {
    raw(server, &["GET", key]).as_str().map(str::to_owned)
}

/// A fresh hold gets a token above the last; a re-entry answers the outer hold's token;
/// the token sits in the Hash only while held (the last release deletes the whole key),
/// and the counter is Redisson's `redisson_lock_token:{NAME}` with a TTL.
async fn a_re_entry_keeps_the_outer_token_and_a_new_hold_gets_a_larger_one(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let lock = client.fenced_lock("fenced:basic");
    assert_eq!(lock.token_key().expect("name"), "redisson_lock_token:{fenced:basic}");

    let outer = lock.lock().await.expect("outer");
    let inner = lock.lock_with_lease(Duration::from_millis(200)).await.expect("re-entry");
    assert_eq!(inner.token(), outer.token(), "a re-entry answers the outer hold's token");
    assert_eq!(lock.hold_count().await.expect("count"), 2);
    let fields = hgetall(&server, "fenced:basic");
    assert_eq!(fields, vec![(lock.owner().to_owned(), "2".to_owned())], "the Redisson owner field alone");
    assert_eq!(get(&server, "redisson_lock_token:{fenced:basic}"), Some(outer.token().to_string()));
    let counter_ttl = pttl(&server, "redisson_lock_token:{fenced:basic}");
    assert!(counter_ttl > 6 * 24 * 3600 * 1000, "the counter has the 7-day TTL, got {counter_ttl} ms");

    // Another owner, plain or fenced, is excluded.
    assert!(client.lock("fenced:basic").try_lock().await.expect("plain").is_none());
    assert!(client.fenced_lock("fenced:basic").try_lock().await.expect("fenced").is_none());

    inner.unlock().await.expect("inner unlock");
    let first = outer.token();
    outer.unlock().await.expect("outer unlock");
    assert_eq!(raw(&server, &["EXISTS", "fenced:basic"]).as_int(), Some(0), "no token field left behind");

    let other = client.fenced_lock("fenced:basic");
    let next = other.try_lock().await.expect("try").expect("free");
    assert!(next.token() > first, "{} > {first}", next.token());
    // Tokens are seeded from the server clock in microseconds.
    let RespValue::Array(time) = raw(&server, &["TIME"]) else { panic!("TIME") };
    let now_us: u64 = time[0].as_str().and_then(|s| s.parse::<u64>().ok()).expect("secs") * 1_000_000;
    assert!(next.token() > now_us - 60_000_000 && next.token() <= now_us + 2_000_000, "{} ~ {now_us}", next.token());
    next.unlock().await.expect("unlock");
}
both_servers!(a_re_entry_keeps_the_outer_token_and_a_new_hold_gets_a_larger_one);

/// Four clients with four tasks each contend for one fenced lock: in the order the holds
/// happened, tokens strictly increase (each token is recorded while its hold is held).
async fn tokens_strictly_increase_across_contending_clients(on: ServerKind) {
    let server = on.start();
    let seen = Arc::new(parking_lot_free::Log::default());
    let mut tasks = Vec::new();
    for c in 0..4 {
        let client = client(&server).await;
        for t in 0..4 {
            let client = client.clone();
            let seen = seen.clone();
            tasks.push(tokio::spawn(async move {
                let lock = client.fenced_lock("fenced:contended");
                for round in 0..10 {
                    let guard = if (c + t + round) % 2 == 0 {
                        lock.lock().await.expect("lock")
                    } else {
                        lock.try_lock_with(Duration::from_secs(30), LEASE).await.expect("try").expect("within 30 s")
                    };
                    seen.push((guard.token(), c));
                    tokio::task::yield_now().await;
                    guard.unlock().await.expect("unlock");
                }
            }));
        }
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task).await.expect("finished").expect("task");
    }
    let log = seen.take();
    assert_eq!(log.len(), 160);
    for pair in log.windows(2) {
        assert!(
            pair[1].0 > pair[0].0,
            "token {} (client {}) after {} (client {})",
            pair[1].0,
            pair[1].1,
            pair[0].0,
            pair[0].1
        );
    }
    let clients: std::collections::HashSet<_> = log.iter().map(|(_, c)| *c).collect();
    assert_eq!(clients.len(), 4, "every client held the lock");
}
both_servers!(tokens_strictly_increase_across_contending_clients, worker_threads = 4);

/// A tiny append-only log (a std `Mutex`: the tests crate has no `parking_lot`).
mod parking_lot_free {
    #[derive(Default)]
    pub(crate) struct Log(std::sync::Mutex<Vec<(u64, i32)>>);
    impl Log {
        pub(crate) fn push(&self, entry: (u64, i32)) {
            self.0.lock().expect("log").push(entry);
        }
        pub(crate) fn take(&self) -> Vec<(u64, i32)> {
            std::mem::take(&mut *self.0.lock().expect("log"))
        }
    }
}

/// Scenario 3 with tokens: a holder process is `SIGSTOP`ped past its lease; the next
/// holder gets a larger token and writes; the resumed holder's fenced write is rejected,
/// it is told it lost the lock, and its unlock leaves the new holder untouched.
async fn a_paused_holders_late_write_is_rejected_by_the_fence(on: ServerKind) {
    let server = on.start();
    let (mut holder, _owner, old_token) = HolderProcess::start_fenced(
        env!("CARGO_BIN_EXE_holder"),
        &server.url(),
        "fenced:paused",
        Duration::from_secs(1),
    )
    .await;
    holder.send_line("WRITE fenced:paused:data from-old-holder").await;
    assert_eq!(holder.next_line(Duration::from_secs(5)).await.as_deref(), Some("WRITE OK"));

    holder.signal("STOP");
    assert!(
        wait_until(Duration::from_secs(5), || raw(&server, &["EXISTS", "fenced:paused"]).as_int() == Some(0)).await,
        "the paused holder's lease ran out"
    );
    let client = client(&server).await;
    let lock = client.fenced_lock("fenced:paused");
    let guard = lock.try_lock().await.expect("try").expect("free after the lease ran out");
    assert!(guard.token() > old_token, "new token {} > old {old_token}", guard.token());
    assert_eq!(guard.fenced_set("fenced:paused:data", "from-new-holder").await.expect("write"), FencedWrite::Written);

    holder.signal("CONT");
    // Its late write, whenever it comes, is refused by the resource.
    holder.send_line("WRITE fenced:paused:data late-write").await;
    let mut lines = Vec::new();
    while let Some(line) = holder.next_line(Duration::from_secs(5)).await {
        let done = line.starts_with("WRITE");
        lines.push(line);
        if done {
            break;
        }
    }
    assert_eq!(
        lines.last().map(String::as_str),
        Some(format!("WRITE REJECTED {}", guard.token()).as_str()),
        "{lines:?}"
    );
    assert_eq!(get(&server, "fenced:paused:data").as_deref(), Some("from-new-holder"));
    assert_eq!(fence_of(&client, "fenced:paused:data").await.expect("fence"), Some(guard.token()));
    // It learns it lost the lock, and its unlock changes nothing.
    if !lines.iter().any(|l| l == "LOST") {
        assert_eq!(holder.next_line(Duration::from_secs(5)).await.as_deref(), Some("LOST"));
    }
    holder.send_unlock().await;
    let unlocked = holder.next_line(Duration::from_secs(5)).await.expect("unlock answer");
    assert!(unlocked.starts_with("UNLOCK ERR"), "{unlocked}");
    assert_eq!(lock.hold_count().await.expect("count"), 1, "the new holder still holds");
    assert!(!guard.is_lost());
    guard.unlock().await.expect("unlock");
}
both_servers!(a_paused_holders_late_write_is_rejected_by_the_fence);

/// Scenario 5 with tokens: a restart without persistence loses the counter, and the next
/// token is still larger than every earlier one (the counter restarts from the server's
/// clock). The same holds when the counter expired (a short `fence_token_ttl`).
async fn tokens_stay_above_earlier_ones_after_a_restart_and_after_the_counter_expired(on: ServerKind) {
    let mut server = on.start();
    let mut issued = Vec::new();
    {
        let client = client(&server).await;
        let lock = client.fenced_lock("fenced:restart");
        for _ in 0..3 {
            let guard = lock.lock_with_lease(LEASE).await.expect("lock");
            issued.push(guard.token());
            guard.unlock().await.expect("unlock");
        }
        // Another client's holds on the same name count too.
        let guard = client.fenced_lock("fenced:restart").lock().await.expect("lock");
        issued.push(guard.token());
        drop(guard);
    }
    let highest = *issued.iter().max().expect("tokens");
    server.restart();
    assert_eq!(raw(&server, &["EXISTS", "redisson_lock_token:{fenced:restart}"]).as_int(), Some(0), "counter lost");
    let client = client(&server).await;
    let lock = client.fenced_lock("fenced:restart");
    let after_restart = lock.try_lock().await.expect("try").expect("free after the restart");
    assert!(after_restart.token() > highest, "{} > {highest} ({issued:?})", after_restart.token());
    let after_restart = {
        let token = after_restart.token();
        after_restart.unlock().await.expect("unlock");
        token
    };

    // An expired counter: 50 ms TTL.
    let short = leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(2))
        .fence_token_ttl(Duration::from_millis(50))
        .connect()
        .await
        .expect("connect");
    let guard = short.fenced_lock("fenced:restart").lock().await.expect("lock");
    let before_expiry = guard.token();
    assert!(before_expiry > after_restart);
    assert!(pttl(&server, "redisson_lock_token:{fenced:restart}") <= 50);
    guard.unlock().await.expect("unlock");
    assert!(
        wait_until(Duration::from_secs(2), || raw(&server, &["EXISTS", "redisson_lock_token:{fenced:restart}"])
            .as_int()
            == Some(0))
        .await,
        "the counter expired"
    );
    let guard = short.fenced_lock("fenced:restart").lock().await.expect("lock");
    assert!(guard.token() > before_expiry, "{} > {before_expiry}", guard.token());
    guard.unlock().await.expect("unlock");
}
both_servers!(tokens_stay_above_earlier_ones_after_a_restart_and_after_the_counter_expired);

/// The resource side: an equal token writes again, a smaller one is rejected and writes
/// nothing, bad input is refused before anything is sent, a wrong-type resource is a
/// `WrongType` error that changes nothing.
async fn fenced_writes_accept_the_fence_or_later_and_nothing_else(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    assert_eq!(fence_key("res"), "leasehold_fence:{res}");
    assert_eq!(fence_of(&client, "res").await.expect("fence"), None);
    assert_eq!(fenced_set(&client, "res", 10, "a").await.expect("first"), FencedWrite::Written);
    assert_eq!(fenced_set(&client, "res", 10, "b").await.expect("same token"), FencedWrite::Written);
    assert_eq!(fenced_set(&client, "res", 9, "stale").await.expect("older"), FencedWrite::Rejected { fence: 10 });
    assert_eq!(get(&server, "res").as_deref(), Some("b"));
    assert_eq!(fenced_set(&client, "res", 11, vec![0u8, 255, 1]).await.expect("newer"), FencedWrite::Written);
    assert_eq!(fence_of(&client, "res").await.expect("fence"), Some(11));
    assert_eq!(pttl(&server, "leasehold_fence:{res}"), -1, "the fence lives as long as the resource");

    let keys_before = raw(&server, &["DBSIZE"]);
    for (key, token) in [("", 1), ("r2", 0), ("r2", leasehold::fence::MAX_TOKEN + 1)] {
        let err = fenced_set(&client, key, token, "x").await.expect_err("invalid");
        assert!(err.is_invalid_argument(), "{err}");
    }
    assert_eq!(raw(&server, &["DBSIZE"]), keys_before, "nothing was sent");

    raw(&server, &["HSET", "hash-res", "f", "v"]);
    let err = fenced_set(&client, "hash-res", 5, "x").await.expect_err("a Hash");
    assert!(err.is_wrong_type(), "{err}");
    assert_eq!(hgetall(&server, "hash-res"), vec![("f".to_owned(), "v".to_owned())]);
    assert_eq!(raw(&server, &["EXISTS", "leasehold_fence:{hash-res}"]).as_int(), Some(0));

    // A counter that is not an integer: a clear error, and no lock taken.
    raw(&server, &["SET", "redisson_lock_token:{fenced:bad}", "garbage"]);
    let err = client.fenced_lock("fenced:bad").try_lock().await.expect_err("bad counter");
    assert_eq!(err.kind(), leasehold::ErrorKind::Redis, "{err}");
    assert_eq!(raw(&server, &["EXISTS", "fenced:bad"]).as_int(), Some(0), "nothing written");
    assert_eq!(get(&server, "redisson_lock_token:{fenced:bad}").as_deref(), Some("garbage"));
}
both_servers!(fenced_writes_accept_the_fence_or_later_and_nothing_else);

/// Issue 17 (a): with `redisson_waiters(false)`, a release publishes only when a
/// leasehold waiter flagged its owner. A fenced lock's second local waiter never ran the
/// script while the first waited, and the first's acquire flags nothing: the first's
/// release then woke nobody, and the second slept through the first's whole lease. Then
/// the waiter made first by an acquirer flagged the new holder with one call; since
/// issue 18 fenced waiters queue on the server (every queued waiter's call flags the
/// holder, and the acquire that takes the lock from the queue flags its owner while
/// others wait), and the release wakes it at once either way.
async fn a_second_local_fenced_waiter_is_woken_without_redisson_waiters(on: ServerKind) {
    const LEASE: Duration = Duration::from_secs(8);
    let server = on.start();
    let name = "fenced:flagged";
    let holder_client = client(&server).await;
    let holder = holder_client.fenced_lock(name);
    let guard = holder.lock_with_lease(Duration::from_secs(30)).await.expect("held");
    let waiters = leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(2))
        .redisson_waiters(false)
        .connect()
        .await
        .expect("connect");

    // The first waiter holds for 8 s once it gets in, then unlocks at once.
    let first = {
        let client = waiters.clone();
        tokio::spawn(async move {
            let lock = client.fenced_lock(name);
            let guard = lock.try_lock_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("acquired");
            guard.unlock().await.expect("unlock");
            tokio::time::Instant::now()
        })
    };
    assert!(wait_until(Duration::from_secs(5), || waiters.local_waiters(name) == 1).await, "first waits");
    let second = {
        let client = waiters.clone();
        tokio::spawn(async move {
            let lock = client.fenced_lock(name);
            let got = lock.try_lock_with(Duration::from_secs(20), LEASE).await.expect("wait");
            let at = tokio::time::Instant::now();
            got.expect("acquired").unlock().await.expect("unlock");
            at
        })
    };
    assert!(wait_until(Duration::from_secs(5), || waiters.local_waiters(name) == 2).await, "second queues locally");

    guard.unlock().await.expect("unlock");
    let released = tokio::time::timeout(Duration::from_secs(20), first).await.expect("first ended").expect("task");
    let acquired = tokio::time::timeout(Duration::from_secs(20), second).await.expect("second ended").expect("task");
    let took = acquired.saturating_duration_since(released);
    assert!(took < Duration::from_secs(2), "the second waiter got the lock {took:?} after the first released");
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0));
}
both_servers!(a_second_local_fenced_waiter_is_woken_without_redisson_waiters);

fn lrange(server: &RedisServer, key: &str) -> Vec<String> {
    match raw(server, &["LRANGE", key, "0", "-1"]) {
        RespValue::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        other => panic!("LRANGE {key}: {other:?}"),
    }
}

/// A `FencedLock` waiter in its own process (`tests/bin/fair_waiter.rs`, kind `fenced`),
/// queued behind the holder and subscribed, then stopped (SIGSTOP) so that it cannot
/// claim a hand-over until the test lets it run; returns it and its owner.
async fn stopped_fenced_waiter(server: &RedisServer, name: &str, id: &str) -> (HolderProcess, String) {
    let queue = format!("leasehold_lock_queue:{{{name}}}");
    let url = server.url();
    let args = [url.as_str(), name, id, "10000", "100", "fenced"];
    let mut child = HolderProcess::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args);
    let line = child.next_line(Duration::from_secs(10)).await.expect("QUEUING line");
    let owner = line.strip_prefix("QUEUING ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_owned();
    assert!(wait_until(Duration::from_secs(10), || lrange(server, &queue) == [owner.clone()]).await, "queued");
    // Only once its client listens does a release know that someone waits.
    let queue_channel = format!("leasehold_lock__queue:{{{name}}}");
    assert!(
        wait_until(Duration::from_secs(5), || leasehold_test_support::pubsub_channels(server).contains(&queue_channel))
            .await
    );
    child.signal("STOP");
    (child, owner)
}

/// Issue 18 item 2: a `FencedLock` waiter queues in the server-side wait queue, and a
/// release hands it the lock: while it is stopped the lock is its own (a newcomer and
/// the releaser are refused), and its claim issues it a token above every earlier one.
/// The same holds when a plain `Lock`'s release on the same name hands the lock over
/// (the claim issues the token, whichever release handed over), and the third holder's
/// token is again above both.
async fn a_hand_over_to_a_queued_fenced_waiter_issues_it_a_larger_token(on: ServerKind) {
    let server = on.start();
    let name = "fenced:handover";
    let tokens_key = format!("{name}:tokens");
    let client = client(&server).await;
    let lock = client.fenced_lock(name);
    let guard = lock.lock_with_lease(Duration::from_secs(30)).await.expect("held");
    let first = guard.token();

    let (mut waiter, waiter_owner) = stopped_fenced_waiter(&server, name, "1").await;
    guard.unlock().await.expect("unlock");
    assert_eq!(hgetall(&server, name), vec![(waiter_owner, "1".to_owned())], "handed to the queued waiter");
    assert!(client.fenced_lock(name).try_lock().await.expect("try").is_none(), "a newcomer cannot barge in");
    assert!(lock.try_lock().await.expect("try").is_none(), "nor can the releaser take it back");
    waiter.signal("CONT");
    assert_eq!(waiter.next_line(Duration::from_secs(5)).await.as_deref(), Some("LOCKED"), "the waiter claims it");
    assert_eq!(waiter.next_line(Duration::from_secs(5)).await.as_deref(), Some("UNLOCKED"));
    let second: u64 = lrange(&server, &tokens_key)[0].parse().expect("a token");
    assert!(second > first, "the handed-over hold's token {second} > {first}");

    // A plain Lock's release hands the lock over too, without a counter to move.
    let plain = client.lock(name).lock_with_lease(Duration::from_secs(30)).await.expect("plain holder");
    let (mut waiter, waiter_owner) = stopped_fenced_waiter(&server, name, "2").await;
    plain.unlock().await.expect("unlock");
    assert_eq!(hgetall(&server, name), vec![(waiter_owner, "1".to_owned())], "handed to the queued waiter");
    waiter.signal("CONT");
    assert_eq!(waiter.next_line(Duration::from_secs(5)).await.as_deref(), Some("LOCKED"), "the waiter claims it");
    assert_eq!(waiter.next_line(Duration::from_secs(5)).await.as_deref(), Some("UNLOCKED"));
    let third: u64 = lrange(&server, &tokens_key)[1].parse().expect("a token");
    assert!(third > second, "the hold handed over by a plain release has token {third} > {second}");
    let next = lock.try_lock().await.expect("try").expect("free");
    assert!(next.token() > third, "{} > {third}", next.token());
    next.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["EXISTS", name, &format!("leasehold_lock_queue:{{{name}}}")]).as_int(), Some(0));
}
both_servers!(a_hand_over_to_a_queued_fenced_waiter_issues_it_a_larger_token);
