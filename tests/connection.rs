//! The client and its connection: settings and URLs refused before connecting, an
//! unreachable server, setups that fail (`from_fred`, a user without scripts), restarts
//! and reconnects reported to holders, and waits through a stalled server. Most began as
//! regression tests of the reliability audit (issue "Hardening"): each failed before its
//! fix. Real servers and real faults only.
//!
//! Every test with a server runs on Redis and on Valkey (`NAME::redis`, `NAME::valkey`,
//! see `both_servers!`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
use leasehold_test_support::{both_servers, client, client_with, pttl, raw, wait_until, RedisServer, ServerKind};

/// How many connections of `kind` (`normal`, `pubsub`) the server has.
fn connections(server: &RedisServer, kind: &str) -> usize {
    raw(server, &["CLIENT", "LIST", "TYPE", kind]).as_str().map_or(0, |list| list.lines().count())
}

// 6. Waits survive transient errors.

/// The server stalls while a waiter waits, so its attempts time out: an unbounded
/// `lock()` keeps retrying and acquires once the server answers again, where it used to
/// fail at the first timeout.
async fn an_unbounded_wait_survives_a_stalled_server(on: ServerKind) {
    let mut server = on.start();
    let holder = client(&server).await;
    let waiter_client = client_with(&server.url(), Duration::from_secs(3)).await;
    let held = holder.lock("stall-wait").lock_with_lease(Duration::from_millis(400)).await.expect("holder");
    let watched = waiter_client.clone();
    let waiter = tokio::spawn(async move { waiter_client.lock("stall-wait").lock().await.map(|g| g.is_lost()) });
    assert!(wait_until(Duration::from_secs(5), || watched.stats().waiters == 1).await, "the waiter queued");
    server.pause();
    // The waiter's retry on the holder's TTL (400 ms) runs into the stall and times out
    // (command timeout 999 ms) at least once.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    server.resume();
    let lost = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the wait ends")
        .expect("task")
        .expect("lock() retried the timeouts and acquired");
    assert!(!lost);
    drop(held);
}
both_servers!(an_unbounded_wait_survives_a_stalled_server);

/// A bounded wait retries until its deadline, then returns the last transient error
/// (each attempt times out after 400 ms; the wait lasts 1.5 s).
async fn a_bounded_wait_returns_the_last_error_at_its_deadline(on: ServerKind) {
    let mut server = on.start();
    let client = leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_millis(400))
        .connect()
        .await
        .expect("connect");
    server.pause();
    let started = Instant::now();
    let result = client.lock("stall-bounded").try_lock_for(Duration::from_millis(1_500)).await;
    server.resume();
    let err = result.expect_err("every attempt timed out");
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(1_500), "retried until the deadline");
}
both_servers!(a_bounded_wait_returns_the_last_error_at_its_deadline);

// 7. No overflow, no impossible config.

/// Settings that cannot work are refused before anything connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_settings_are_rejected_before_connecting() {
    let url = "redis://127.0.0.1:1"; // nothing listens: a connection attempt would fail
    let cases = [
        leasehold::Client::builder().url(url).command_timeout(Duration::MAX),
        leasehold::Client::builder()
            .url(url)
            .watchdog_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_secs(1)),
        leasehold::Client::builder()
            .url(url)
            .command_timeout(Duration::from_secs(2))
            .replay_window(Duration::from_secs(1)),
        leasehold::Client::builder().url(url).replay_window(Duration::MAX),
    ];
    for builder in cases {
        let err = builder.connect().await.expect_err("invalid");
        assert!(err.is_invalid_argument(), "{err}");
    }
}

/// A hostile holder that gives the key an absurd TTL cannot panic a waiter: the
/// bounded wait ends at its deadline.
async fn a_hostile_pttl_never_panics_a_waiter(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    raw(&server, &["HSET", "hostile", "someone:1", "1"]);
    raw(&server, &["PEXPIRE", "hostile", "9000000000000000000"]);
    assert!(pttl(&server, "hostile") > 1_000_000_000_000);
    let lock = client.lock("hostile");
    assert!(lock.try_lock_for(Duration::from_millis(300)).await.expect("no error").is_none());
    assert!(lock.try_lock().await.expect("no error").is_none());
}
both_servers!(a_hostile_pttl_never_panics_a_waiter);

// 8. Lost within a reconnect.

/// A restart without persistence loses every lock: with a 30 s watchdog, the holder is
/// told within a reconnect and a round trip, not at the next 10 s period.
async fn a_restart_is_reported_lost_within_a_reconnect(on: ServerKind) {
    let mut server = on.start();
    let client = client_with(&server.url(), Duration::from_secs(30)).await;
    let guard = client.lock("restarted").lock().await.expect("lock");
    let restarted = Instant::now();
    server.restart();
    tokio::time::timeout(Duration::from_secs(3), guard.lost()).await.expect("lost() within 3 s of the restart");
    assert!(restarted.elapsed() < Duration::from_secs(3));
    assert!(guard.is_lost());
    assert!(guard.unlock().await.expect_err("lost").is_lock_lost());
}
both_servers!(a_restart_is_reported_lost_within_a_reconnect);

/// The same for fixed-lease holders (`lock_with_lease`, `try_lock_with`), which nothing
/// renews: after the reconnect the client checks every hold it has, so they are told
/// within a reconnect too, not when their 30 s lease runs out.
async fn a_restart_is_reported_lost_to_fixed_lease_holders_within_a_reconnect(on: ServerKind) {
    let mut server = on.start();
    let client = client_with(&server.url(), Duration::from_secs(30)).await;
    let waited = client.lock("restarted:fixed:a").lock_with_lease(Duration::from_secs(30)).await.expect("lock");
    let tried = client
        .lock("restarted:fixed:b")
        .try_lock_with(Duration::ZERO, Duration::from_secs(30))
        .await
        .expect("try_lock_with")
        .expect("free");
    assert!(!waited.is_renewed() && !tried.is_renewed(), "fixed leases are not renewed");
    let restarted = Instant::now();
    server.restart();
    for guard in [&waited, &tried] {
        tokio::time::timeout(Duration::from_secs(3), guard.lost()).await.expect("lost() within 3 s of the restart");
    }
    eprintln!("both fixed-lease holders told {:?} after the restart", restarted.elapsed());
    assert!(restarted.elapsed() < Duration::from_secs(3));
    assert!(client.stats().watchdog.checks >= 1, "{:?}", client.stats().watchdog);
    assert!(waited.unlock().await.expect_err("lost").is_lock_lost());
    assert!(tried.unlock().await.expect_err("lost").is_lock_lost());
}
both_servers!(a_restart_is_reported_lost_to_fixed_lease_holders_within_a_reconnect);

/// The check after a reconnect only reads: a fixed lease that survived the reconnect (its
/// connection was killed, the server kept its data) is not extended by it, and is not
/// reported lost.
async fn the_check_after_a_reconnect_never_extends_a_fixed_lease(on: ServerKind) {
    let server = on.start();
    let client = client_with(&server.url(), Duration::from_secs(30)).await;
    let lease = Duration::from_secs(20);
    let guard = client.lock("reconnected:fixed").lock_with_lease(lease).await.expect("lock");
    let acquired = Instant::now();
    let before = client.stats().watchdog;
    assert_eq!(before.tracked, 1, "{before:?}");
    // Kill the client's connections (not this raw one): fred reconnects, the data stays.
    let killed = raw(&server, &["CLIENT", "KILL", "TYPE", "normal"]).as_int().expect("killed");
    assert!(killed >= 1);
    assert!(
        wait_until(Duration::from_secs(5), || client.stats().watchdog.checks > before.checks).await,
        "checked after the reconnect: {:?}",
        client.stats().watchdog
    );
    // A command sent after the check on the same connection is answered after it.
    assert!(client.lock("reconnected:fixed").is_locked().await.expect("is_locked"));
    assert_eq!(client.stats().watchdog.failed_checks, before.failed_checks, "the check was answered");
    // Read the clock before PTTL: the server's TTL started before `acquired`, so by the
    // time PTTL runs no more than `bound` is left (plus the server's 1 ms rounding).
    let bound = lease.saturating_sub(acquired.elapsed());
    let left = pttl(&server, "reconnected:fixed");
    let left_ms = u128::try_from(left).expect("the key has a TTL");
    assert!(left > 0 && left_ms <= bound.as_millis() + 1, "PTTL {left} ms > {bound:?}: the lease was extended");
    assert!(!guard.is_lost(), "the hold survived the reconnect");
    assert!(guard.lease_deadline() <= acquired + lease, "the local deadline was not moved either");
    guard.unlock().await.expect("unlock");
}
both_servers!(the_check_after_a_reconnect_never_extends_a_fixed_lease);

// 11. `from_fred` and error paths close only what leasehold made.

/// The caller's fred client survives the leasehold client made from it.
async fn from_fred_never_closes_the_callers_client(on: ServerKind) {
    let server = on.start();
    let mut builder = Builder::from_config(Config::from_url(&server.url()).expect("url"));
    builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    let fred = builder.build().expect("fred client");
    fred.init().await.expect("connect");
    let client =
        leasehold::Client::from_fred(fred.clone(), leasehold::ClientConfig::default()).await.expect("from_fred");
    client.lock("ff").lock().await.expect("lock").unlock().await.expect("unlock");
    drop(client);
    assert!(wait_until(Duration::from_secs(5), || connections(&server, "pubsub") == 0).await, "subscriber closed");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pong: String = fred.ping(None).await.expect("the caller's client still works");
    assert_eq!(pong, "PONG");
}
both_servers!(from_fred_never_closes_the_callers_client);

/// A user that may not run scripts: `from_fred` and `connect` fail with a clear
/// error, the caller's client keeps working, and no connection leasehold made is left.
async fn failed_setups_close_what_leasehold_opened(on: ServerKind) {
    let server = on.start();
    let acl = raw(&server, &["ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting"]);
    assert_eq!(acl.as_str(), Some("OK"));
    let url = format!("redis://noscript:pw@{}", server.addr());
    let mut builder = Builder::from_config(Config::from_url(&url).expect("url"));
    builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    let fred = builder.build().expect("fred client");
    fred.init().await.expect("connect");
    let baseline = connections(&server, "normal");
    let err = leasehold::Client::from_fred(fred.clone(), leasehold::ClientConfig::default())
        .await
        .expect_err("scripts are not allowed");
    assert_eq!(err.kind(), leasehold::ErrorKind::Redis, "{err}");
    assert!(wait_until(Duration::from_secs(5), || connections(&server, "pubsub") == 0).await, "subscriber left open");
    let pong: String = fred.ping(None).await.expect("the caller's client still works");
    assert_eq!(pong, "PONG");

    let err = leasehold::Client::builder()
        .url(&url)
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect_err("scripts are not allowed");
    assert_eq!(err.kind(), leasehold::ErrorKind::Redis, "{err}");
    assert!(
        wait_until(Duration::from_secs(5), || connections(&server, "pubsub") == 0
            && connections(&server, "normal") <= baseline)
        .await,
        "connections left open: {:?}",
        raw(&server, &["CLIENT", "LIST"])
    );
}
both_servers!(failed_setups_close_what_leasehold_opened);

// 13. The stall test, with a waiter that must not get in before the holder knows.

/// The server stalls (SIGSTOP) longer than the watchdog lease while another client
/// waits: the holder's `lost()` fires before the waiter acquires, so the two holds
/// never overlap.
async fn a_stalled_server_tells_the_holder_before_a_waiter_gets_in(on: ServerKind) {
    let mut server = on.start();
    let holder = client_with(&server.url(), Duration::from_millis(600)).await;
    let waiter_client = leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect("connect");
    let guard = holder.lock("stall-order").lock().await.expect("lock");
    let origin = Instant::now();
    let acquired_at = Arc::new(AtomicU64::new(u64::MAX));
    let waiter = {
        let acquired_at = acquired_at.clone();
        tokio::spawn(async move {
            let guard = waiter_client.lock("stall-order").lock().await.expect("waiter acquires after the stall");
            let at = u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX);
            acquired_at.store(at, Ordering::SeqCst);
            guard.unlock().await.expect("waiter unlock");
        })
    };
    assert!(wait_until(Duration::from_secs(5), || holder.stats().watchdog.calls >= 1).await);
    server.pause();
    tokio::time::timeout(Duration::from_secs(3), guard.lost()).await.expect("lost while the server is stalled");
    let lost_at = u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX);
    // Long enough that the waiter's attempts time out (500 ms) during the stall: the
    // wait must survive them.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    server.resume();
    tokio::time::timeout(Duration::from_secs(15), waiter).await.expect("waiter finishes").expect("task");
    let acquired_at = acquired_at.load(Ordering::SeqCst);
    assert!(acquired_at != u64::MAX, "the waiter acquired");
    assert!(
        lost_at < acquired_at,
        "the holder heard lost() at {lost_at} us, after the waiter got in at {acquired_at} us"
    );
    assert!(guard.unlock().await.expect_err("lost").is_lock_lost());
}
both_servers!(a_stalled_server_tells_the_holder_before_a_waiter_gets_in);

/// A bad URL is reported without the password in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_error_never_shows_the_password() {
    let err = leasehold::Client::connect("redis://user:hunter2@127.0.0.1:notaport/0").await.expect_err("bad port");
    assert!(err.is_invalid_argument(), "{err}");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

/// An unreachable server: a typed connection error (or timeout) within the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_typed_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let start = std::time::Instant::now();
    let result = leasehold::Client::builder()
        .url(format!("redis://127.0.0.1:{port}"))
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await;
    let err = result.expect_err("nothing listens there");
    assert!(err.is_connection() || err.is_timeout(), "{err}");
    assert!(start.elapsed() < Duration::from_secs(3), "bounded by the command timeout");
}

/// A server that accepts connections and never answers (the kernel completes the
/// handshake of connections queued in the listener's backlog): `connect` gives up after
/// one command timeout. The `QUIT` of the half-made connection goes to the background;
/// waited for, it took a second timeout (1.0 s here, not 0.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_given_up_on_after_one_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://127.0.0.1:{}", listener.local_addr().expect("addr").port());
    let start = std::time::Instant::now();
    let err = leasehold::Client::builder()
        .url(url)
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect_err("nothing answers");
    let took = start.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(took >= Duration::from_millis(450), "it waited for the timeout: {took:?}");
    assert!(took < Duration::from_millis(900), "one timeout, not two: {took:?}");
    drop(listener);
}
