//! The count-down latch (issue 19 item 3): Redisson's `RCountDownLatch` layout through
//! `CountDownLatch`, against real servers (`NAME::redis`, `NAME::valkey`, see
//! `both_servers!`). Waits are bounded by deadlines, never sleeps.

use std::time::Duration;

use leasehold::{CountDownLatch, ErrorKind};
use leasehold_test_support::{both_servers, client, raw, wait_until, Monitor, RespValue, ServerKind};
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};

/// Generous for a loaded machine: a message, or a short recheck, arrives well within it.
const WOKEN_WITHIN: Duration = Duration::from_secs(3);
/// A recheck long enough that only a message can wake a waiter within a test.
const NO_RECHECK: Duration = Duration::from_secs(120);

fn get(server: &leasehold_test_support::RedisServer, key: &str) -> Option<String> {
    raw(server, &["GET", key]).as_str().map(str::to_owned)
}

/// `n` unbounded waits on `latch`, each answering when it returned.
fn spawn_waiters(latch: &CountDownLatch, n: usize) -> Vec<JoinHandle<Instant>> {
    (0..n)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move {
                latch.wait().await.expect("wait");
                Instant::now()
            })
        })
        .collect()
}

/// Every waiter has returned within `within` (each its own `Ok`).
async fn all_return(waiters: Vec<JoinHandle<Instant>>, within: Duration) -> Vec<Instant> {
    timeout(within, async {
        let mut returned = Vec::with_capacity(waiters.len());
        for waiter in waiters {
            returned.push(waiter.await.expect("waiter task"));
        }
        returned
    })
    .await
    .expect("every waiter returned in time")
}

/// Until `client` waits for `name` with `n` local waiters (each past its first read).
async fn until_waiting(client: &leasehold::Client, latch: &CountDownLatch, n: usize) {
    let channel = latch.channel().to_owned();
    assert!(
        wait_until(Duration::from_secs(5), || client.stats().waiters >= n
            && client.subscribed_channels().contains(&channel))
        .await,
        "{n} waiters subscribed on {channel}"
    );
}

/// The layout, byte for byte: String NAME = the count, no expiry; a live latch is never
/// reset; the count down that reaches zero deletes the key; counting a missing latch
/// down writes nothing; a new round can start.
async fn counts_in_redissons_layout(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let latch = client.count_down_latch("latch:layout");
    assert_eq!(latch.channel(), "redisson_countdownlatch__channel__{latch:layout}");
    assert_eq!(latch.count().await.expect("count"), 0, "no latch reads 0");
    assert!(latch.try_set_count(3).await.expect("set"));
    assert_eq!(get(&server, "latch:layout").as_deref(), Some("3"));
    assert_eq!(raw(&server, &["TYPE", "latch:layout"]).as_str(), Some("string"));
    assert_eq!(raw(&server, &["PTTL", "latch:layout"]).as_int(), Some(-1), "no expiry, as Redisson");
    assert!(!latch.try_set_count(7).await.expect("set"), "a live latch is not reset");
    assert_eq!(get(&server, "latch:layout").as_deref(), Some("3"));
    let other = client.count_down_latch("latch:layout");
    assert_eq!(other.count_down().await.expect("down"), 2);
    assert_eq!(latch.count().await.expect("count"), 2);
    assert_eq!(latch.count_down().await.expect("down"), 1);
    assert!(!latch.try_wait_for(Duration::ZERO).await.expect("one read"), "closed at 1");
    assert_eq!(latch.count_down().await.expect("down"), 0);
    assert_eq!(raw(&server, &["EXISTS", "latch:layout"]).as_int(), Some(0), "zero deletes the key");
    assert!(latch.try_wait_for(Duration::ZERO).await.expect("one read"), "open at 0");
    latch.wait().await.expect("an open latch returns at once");
    assert_eq!(latch.count_down().await.expect("down"), 0, "a missing latch stays at 0");
    assert_eq!(raw(&server, &["EXISTS", "latch:layout"]).as_int(), Some(0), "and nothing was written");
    assert!(latch.try_set_count(2).await.expect("a new round"));
    assert!(latch.delete().await.expect("delete"));
    assert!(!latch.delete().await.expect("delete again"));
    assert_eq!(raw(&server, &["EXISTS", "latch:layout"]).as_int(), Some(0));
}
both_servers!(counts_in_redissons_layout);

/// Waiters of two clients all return on the last count down (not before), within a
/// second of it, through the `0` message alone (no recheck could fire in the test).
async fn the_last_count_down_wakes_every_waiter_of_every_client(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let la = a.count_down_latch("latch:wake").with_recheck(NO_RECHECK);
    let lb = b.count_down_latch("latch:wake").with_recheck(NO_RECHECK);
    assert!(la.try_set_count(2).await.expect("set"));
    let mut waiters = spawn_waiters(&la, 6);
    waiters.extend(spawn_waiters(&lb, 6));
    until_waiting(&a, &la, 6).await;
    until_waiting(&b, &lb, 6).await;
    let bounded = tokio::spawn({
        let lb = lb.clone();
        async move { lb.try_wait_for(Duration::from_secs(20)).await.expect("bounded wait") }
    });
    assert_eq!(lb.count_down().await.expect("down"), 1);
    // The count is 1: nobody returns (a wait that returned early would be finished by
    // the time a second read of the count answers).
    assert_eq!(la.count().await.expect("count"), 1);
    assert!(waiters.iter().all(|w| !w.is_finished()) && !bounded.is_finished(), "a waiter returned at count 1");
    let last = Instant::now();
    assert_eq!(la.count_down().await.expect("down"), 0);
    let returned = all_return(waiters, WOKEN_WITHIN).await;
    assert!(timeout(WOKEN_WITHIN, bounded).await.expect("in time").expect("task"), "the bounded wait saw it open");
    let slowest = returned.iter().map(|at| at.saturating_duration_since(last)).max().expect("waiters");
    assert!(slowest < Duration::from_secs(2), "the slowest waiter took {slowest:?}");
    assert!(wait_until(Duration::from_secs(5), || a.stats().waiters == 0 && b.stats().waiters == 0).await);
}
both_servers!(the_last_count_down_wakes_every_waiter_of_every_client);

/// A latch deleted under 20 waiters (two clients): every one returns, through the
/// delete's messages alone. The delete publishes Redisson's `1`, then `0`.
async fn a_latch_deleted_under_20_waiters_releases_them_all(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let la = a.count_down_latch("latch:deleted").with_recheck(NO_RECHECK);
    let lb = b.count_down_latch("latch:deleted").with_recheck(NO_RECHECK);
    assert!(la.try_set_count(5).await.expect("set"));
    let mut waiters = spawn_waiters(&la, 10);
    waiters.extend(spawn_waiters(&lb, 10));
    until_waiting(&a, &la, 10).await;
    until_waiting(&b, &lb, 10).await;
    let monitor = Monitor::start(&server.addr());
    assert!(lb.delete().await.expect("delete"));
    all_return(waiters, WOKEN_WITHIN).await;
    monitor.sync(&server.addr());
    let published: Vec<String> = monitor
        .commands()
        .into_iter()
        .filter(|line| line.contains("\"publish\" \"redisson_countdownlatch__channel__{latch:deleted}\""))
        .collect();
    assert_eq!(published.len(), 2, "{published:?}");
    assert!(published[0].ends_with("\"1\"") && published[1].ends_with("\"0\""), "{published:?}");
}
both_servers!(a_latch_deleted_under_20_waiters_releases_them_all);

/// The key expires under waiters (Redis publishes nothing): the recheck finds it gone.
async fn an_expired_latch_releases_its_waiters(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let la = a.count_down_latch("latch:expiry").with_recheck(Duration::from_millis(200));
    let lb = b.count_down_latch("latch:expiry").with_recheck(Duration::from_millis(200));
    assert!(la.try_set_count(4).await.expect("set"));
    let mut waiters = spawn_waiters(&la, 5);
    waiters.extend(spawn_waiters(&lb, 5));
    until_waiting(&a, &la, 5).await;
    until_waiting(&b, &lb, 5).await;
    assert_eq!(raw(&server, &["PEXPIRE", "latch:expiry", "300"]).as_int(), Some(1));
    all_return(waiters, WOKEN_WITHIN).await;
    assert_eq!(raw(&server, &["EXISTS", "latch:expiry"]).as_int(), Some(0));
}
both_servers!(an_expired_latch_releases_its_waiters);

/// The count set to 0 behind the latch's back (a raw SET, no message: a lost message
/// looks the same): the bounded recheck finds it, for every local waiter, and a bounded
/// wait on a latch that stays closed returns `false` at its deadline.
async fn a_lost_message_is_found_by_the_recheck(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let latch = client.count_down_latch("latch:lost").with_recheck(Duration::from_millis(300));
    assert!(latch.try_set_count(1).await.expect("set"));
    let started = Instant::now();
    assert!(!latch.try_wait_for(Duration::from_millis(400)).await.expect("bounded"), "still closed");
    assert!(started.elapsed() >= Duration::from_millis(400), "not before its deadline");
    let waiters = spawn_waiters(&latch, 8);
    until_waiting(&client, &latch, 8).await;
    assert_eq!(raw(&server, &["SET", "latch:lost", "0"]).as_str(), Some("OK"));
    all_return(waiters, WOKEN_WITHIN).await;
    assert_eq!(latch.count().await.expect("count"), 0);
}
both_servers!(a_lost_message_is_found_by_the_recheck);

/// Bad input is a typed error with nothing sent; a key of another type is `WrongType`
/// with nothing written, for every call.
async fn bad_input_is_refused(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let monitor = Monitor::start(&server.addr());
    let latch = client.count_down_latch("latch:bad");
    for refused in [latch.try_set_count(0).await, latch.try_set_count(u64::MAX).await] {
        assert_eq!(refused.expect_err("refused").kind(), ErrorKind::InvalidArgument);
    }
    let empty = client.count_down_latch("");
    assert_eq!(empty.count().await.expect_err("empty").kind(), ErrorKind::InvalidArgument);
    assert_eq!(empty.count_down().await.expect_err("empty").kind(), ErrorKind::InvalidArgument);
    assert_eq!(empty.wait().await.expect_err("empty").kind(), ErrorKind::InvalidArgument);
    let no_recheck = latch.with_recheck(Duration::ZERO);
    assert_eq!(
        no_recheck.try_wait_for(Duration::from_secs(1)).await.expect_err("zero").kind(),
        ErrorKind::InvalidArgument
    );
    monitor.sync(&server.addr());
    assert_eq!(monitor.commands(), Vec::<String>::new(), "nothing was sent");

    assert_eq!(raw(&server, &["HSET", "latch:bad", "f", "v"]).as_int(), Some(1));
    assert_eq!(latch.try_set_count(2).await.expect_err("hash").kind(), ErrorKind::WrongType);
    assert_eq!(latch.count_down().await.expect_err("hash").kind(), ErrorKind::WrongType);
    assert_eq!(latch.count().await.expect_err("hash").kind(), ErrorKind::WrongType);
    assert_eq!(latch.delete().await.expect_err("hash").kind(), ErrorKind::WrongType);
    assert_eq!(latch.wait().await.expect_err("hash").kind(), ErrorKind::WrongType);
    let RespValue::Array(fields) = raw(&server, &["HGETALL", "latch:bad"]) else { panic!("a hash") };
    assert_eq!(fields.len(), 2, "the hash is untouched");
    assert_eq!(raw(&server, &["SET", "latch:text", "ready"]).as_str(), Some("OK"));
    let text = client.count_down_latch("latch:text");
    assert_eq!(text.count_down().await.expect_err("text").kind(), ErrorKind::WrongType);
    assert_eq!(text.count().await.expect_err("text").kind(), ErrorKind::WrongType);
    assert_eq!(get(&server, "latch:text").as_deref(), Some("ready"), "untouched");
    // A count read from the reply's bytes: bytes that are not UTF-8 are not a count either.
    let set = leasehold_test_support::raw_command(&server.addr(), &[b"SET", b"latch:bytes", b"\xff7"]);
    assert_eq!(set.as_str(), Some("OK"));
    let bytes = client.count_down_latch("latch:bytes");
    assert_eq!(bytes.count().await.expect_err("bytes").kind(), ErrorKind::WrongType);
    assert_eq!(bytes.try_wait_for(Duration::ZERO).await.expect_err("bytes").kind(), ErrorKind::WrongType);
    // A count a Java client set below zero is open, and counting it down deletes it.
    assert_eq!(raw(&server, &["SET", "latch:negative", "-2"]).as_str(), Some("OK"));
    let negative = client.count_down_latch("latch:negative");
    assert!(negative.try_wait_for(Duration::ZERO).await.expect("read"));
    assert_eq!(negative.count_down().await.expect("down"), 0);
    assert_eq!(raw(&server, &["EXISTS", "latch:negative"]).as_int(), Some(0));
}
both_servers!(bad_input_is_refused);

/// `try_set_count(1)` + `count_down()` + `wait()` on the open latch make no more server
/// calls than Redisson's `trySetCount` and `countDown` scripts and its `GET` (issue 29
/// item 1): the count down reads nothing before its DECR (a String that is not an
/// integer is refused by the DECR itself: `bad_input_is_refused`). A count down of a
/// missing latch leaves nothing and publishes nothing.
async fn a_round_makes_no_more_server_calls_than_redissons_scripts(on: ServerKind) {
    use leasehold_test_support::commandstats::{calls_during, total};
    use leasehold_test_support::redisson_latch::{redisson_latch_channel, REDISSON_COUNT_DOWN, REDISSON_TRY_SET_COUNT};
    let server = on.start();
    let client = client(&server).await;
    let round = |name: &'static str| {
        let latch = client.count_down_latch(name);
        async move {
            assert!(latch.try_set_count(1).await.expect("set"));
            assert_eq!(latch.count_down().await.expect("down"), 0);
            latch.wait().await.expect("open");
        }
    };
    round("latch:calls:warm-up").await;
    let ours = calls_during(&server, round("latch:calls")).await;
    let channel = redisson_latch_channel("latch:calls:redisson");
    let theirs = calls_during(&server, async {
        let set =
            raw(&server, &["EVAL", REDISSON_TRY_SET_COUNT, "2", "latch:calls:redisson", &channel, "1", "1", "publish"]);
        assert_eq!(set.as_int(), Some(1));
        raw(&server, &["EVAL", REDISSON_COUNT_DOWN, "2", "latch:calls:redisson", &channel, "0", "publish"]);
        assert_eq!(raw(&server, &["GET", "latch:calls:redisson"]), RespValue::Nil);
    })
    .await;
    assert!(total(&ours) <= total(&theirs), "leasehold {ours:?} against Redisson {theirs:?}");
    assert_eq!(ours.get("type"), None, "no TYPE: {ours:?}");
    assert_eq!(ours.get("get"), Some(&1), "only the wait's read: {ours:?}");

    let missing = client.count_down_latch("latch:calls:missing");
    let spent = calls_during(&server, async {
        assert_eq!(missing.count_down().await.expect("down"), 0, "a missing latch is at 0");
    })
    .await;
    assert_eq!(spent.get("publish"), None, "nothing announced: {spent:?}");
    assert_eq!(raw(&server, &["EXISTS", "latch:calls:missing"]).as_int(), Some(0), "nothing left");
}
both_servers!(a_round_makes_no_more_server_calls_than_redissons_scripts);
