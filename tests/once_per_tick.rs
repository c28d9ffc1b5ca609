//! Once-per-tick jobs (issue 31 item 2): `LockGuard::unlock_after(min_hold)` keeps the
//! lock, in Redisson's layout, until the minimum hold is over, so a fleet whose ticks
//! fire a little apart runs a job once per tick (`lockAtLeastFor` of Java's `ShedLock`).

use std::time::Duration;

use leasehold::ErrorKind;
use leasehold_test_support::{
    both_servers, client, client_with, hgetall, pttl, pubsub_channels, raw, wait_until, HolderProcess, Monitor, Proxy,
    RedisServer, RespValue, ServerKind,
};
use tokio::time::Instant;

/// The minimum hold of most tests: long enough to tell "kept" from "released" on a
/// loaded machine, short enough to keep the suite quick.
const MIN_HOLD: Duration = Duration::from_millis(1500);
/// How late after the minimum hold a waiter may take the lock ("not much after").
const SLACK: Duration = Duration::from_secs(1);

fn exists(server: &RedisServer, key: &str) -> bool {
    raw(server, &["EXISTS", key]).as_int() == Some(1)
}

/// The most a kept key's PTTL may be now: the minimum hold counted from `after` (an
/// instant taken once the acquire had answered, so no earlier than the guard's start),
/// plus the time `unlock_after` took (the time left is measured before the send, and the
/// server counts it from when the script runs: a release held up on its way, by a
/// reconnect before a retry say, keeps the key that much longer, never shorter), plus
/// 50 ms for the round trips.
fn time_left(after: Instant, call: Duration) -> i64 {
    let left = (after + MIN_HOLD).saturating_duration_since(Instant::now()) + call + Duration::from_millis(50);
    i64::try_from(left.as_millis()).expect("ms")
}

fn queue_len(server: &RedisServer, queue: &str) -> i64 {
    raw(server, &["LLEN", queue]).as_int().unwrap_or(-1)
}

/// Redisson's `RLock` acquire (`tryLockInnerAsync`, transcribed as in
/// `tests/lock_queue.rs`): `nil` when it took the lock, else the holder's PTTL.
const REDISSON_TRY_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or \
     (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
     redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
     return redis.call('pttl', KEYS[1]);";

/// A leasehold waiter on `name` in another client, queued on the server and subscribed
/// (so a release knows it waits), and settled: its catch-up call after the subscription
/// was confirmed has run (a fresh client's waiter makes one), so whatever it learns of
/// the lock after this comes from the release, not from a late call of its own that
/// would read the kept key's short TTL by chance. The task answers when it got the lock
/// (and the token, for a fenced lock).
async fn queued_waiter(
    server: &RedisServer,
    name: &'static str,
    fenced: bool,
) -> tokio::task::JoinHandle<Option<(Instant, Option<u64>)>> {
    let other = client(server).await;
    let monitor = Monitor::start(&server.addr());
    let (plain, fenced_lock) =
        if fenced { (None, Some(other.fenced_lock(name))) } else { (Some(other.lock(name)), None) };
    let owner = plain
        .as_ref()
        .map_or_else(|| fenced_lock.as_ref().map(|l| l.owner().to_owned()), |l| Some(l.owner().to_owned()));
    let owner = owner.expect("an owner");
    let waiting = tokio::spawn(async move {
        let _client = other;
        let wait = Duration::from_secs(20);
        if let Some(lock) = fenced_lock {
            let guard = lock.try_lock_for(wait).await.expect("wait")?;
            let got = (Instant::now(), Some(guard.token()));
            guard.unlock().await.expect("waiter's unlock");
            return Some(got);
        }
        let lock = plain.expect("a plain lock");
        let guard = lock.try_lock_for(wait).await.expect("wait")?;
        let got = (Instant::now(), None);
        guard.unlock().await.expect("waiter's unlock");
        Some(got)
    });
    let queue = format!("leasehold_lock_queue:{{{name}}}");
    let channel = format!("leasehold_lock__queue:{{{name}}}");
    assert!(wait_until(Duration::from_secs(5), || queue_len(server, &queue) == 1).await, "the waiter queued");
    assert!(
        wait_until(Duration::from_secs(5), || pubsub_channels(server).contains(&channel)).await,
        "the waiter's client subscribed"
    );
    let owner = format!("\"{owner}\"");
    let calls =
        || monitor.commands().iter().filter(|l| l.to_lowercase().contains("\"evalsha\"") && l.contains(&owner)).count();
    assert!(wait_until(Duration::from_secs(5), || calls() >= 2).await, "the waiter's catch-up call ran");
    waiting
}

/// The key stays (this owner's field, count 1, TTL cut from the 30 s watchdog lease to
/// the time left) and refuses a newcomer until the minimum hold is over; the queued
/// waiter of another client takes it then: not before, and not much after (it learns the
/// shorter TTL from the unlock message; without it, it would sleep until its entry's
/// refresh, 3.3 s later).
async fn a_kept_lock_goes_to_the_waiter_when_the_min_hold_ends(kind: ServerKind) {
    let server = kind.start();
    let name = "tick:kept";
    let holder = client(&server).await;
    let lock = holder.lock(name);
    let before = Instant::now();
    let guard = lock.lock().await.expect("lock");
    let after = Instant::now();
    let waiting = queued_waiter(&server, name, false).await;

    let call = Instant::now();
    guard.unlock_after(MIN_HOLD).await.expect("unlock_after");
    let call = call.elapsed();
    let fields = hgetall(&server, name);
    assert!(fields.contains(&(lock.owner().to_owned(), "1".to_owned())), "kept by its owner: {fields:?}");
    let left = time_left(after, call);
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= left, "the TTL is the time left of the minimum hold: {ttl} > {left}");
    let newcomer = client(&server).await;
    assert!(newcomer.lock(name).try_lock().await.expect("try").is_none(), "a newcomer is refused");

    let (got, _) = waiting.await.expect("waiter task").expect("the waiter got the lock");
    assert!(got >= before + MIN_HOLD, "not before the minimum hold: {:?}", got - before);
    assert!(got <= after + MIN_HOLD + SLACK, "not much after it: {:?}", got - after);
}
both_servers!(a_kept_lock_goes_to_the_waiter_when_the_min_hold_ends);

/// A `FencedLock` kept by a client built with `redisson_waiters(false)`: the release
/// publishes only for a flagged owner, and the queued fenced waiter flagged it, so it
/// still learns the shorter TTL and takes the lock when the minimum hold ends; its claim
/// draws a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_fenced_lock_goes_to_a_flagging_waiter_with_a_larger_token() {
    let server = RedisServer::start();
    let name = "tick:fenced";
    let holder = leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(2))
        .redisson_waiters(false)
        .connect()
        .await
        .expect("connect");
    let lock = holder.fenced_lock(name);
    let before = Instant::now();
    let guard = lock.lock().await.expect("lock");
    let (token, after) = (guard.token(), Instant::now());
    let waiting = queued_waiter(&server, name, true).await;

    guard.unlock_after(MIN_HOLD).await.expect("unlock_after");
    let fields = hgetall(&server, name);
    assert!(fields.contains(&(lock.owner().to_owned(), "1".to_owned())), "kept: {fields:?}");
    let (got, next_token) = waiting.await.expect("waiter task").expect("the waiter got the lock");
    let next_token = next_token.expect("a token");
    assert!(got >= before + MIN_HOLD, "not before the minimum hold: {:?}", got - before);
    assert!(got <= after + MIN_HOLD + SLACK, "not much after it: {:?}", got - after);
    assert!(next_token > token, "a larger token: {next_token} > {token}");
}

/// What a Redisson client sees: the lock's Hash with the owner's field (count 1) and a
/// PTTL no longer than the time left; Redisson's own acquire is refused with that PTTL
/// until the key expires, then succeeds.
async fn a_kept_lock_is_held_in_redissons_layout_until_it_expires(kind: ServerKind) {
    let server = kind.start();
    let name = "tick:redisson";
    let holder = client(&server).await;
    let lock = holder.lock(name);
    let before = Instant::now();
    let guard = lock.lock().await.expect("lock");
    assert!(pttl(&server, name) > 20_000, "a watchdog lease first");
    guard.unlock_after(MIN_HOLD).await.expect("unlock_after");
    assert_eq!(hgetall(&server, name), [(lock.owner().to_owned(), "1".to_owned())], "Redisson's layout");
    assert_eq!(raw(&server, &["TYPE", name]).as_str(), Some("hash"));
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= 1500, "PTTL {ttl}");

    let java = "5a1f2c3d-0000-4000-8000-00000000cafe:7";
    let redisson_try = || raw(&server, &["EVAL", REDISSON_TRY_LOCK, "1", name, "30000", java]);
    match redisson_try() {
        RespValue::Integer(left) => assert!(left > 0 && left <= 1500, "Redisson is told the time left: {left}"),
        other => panic!("Redisson took a kept lock: {other:?}"),
    }
    assert!(
        wait_until(MIN_HOLD + SLACK, || redisson_try() == RespValue::Nil).await,
        "Redisson takes the lock once it expired"
    );
    assert!(before.elapsed() >= MIN_HOLD, "not before the minimum hold: {:?}", before.elapsed());
    assert_eq!(hgetall(&server, name), [(java.to_owned(), "1".to_owned())]);
}
both_servers!(a_kept_lock_is_held_in_redissons_layout_until_it_expires);

/// A minimum hold already over is a plain unlock: the key is given back at once (here
/// handed to the queued waiter) and the waiter is woken at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_min_hold_already_over_is_an_unlock_that_wakes_the_waiter() {
    let server = RedisServer::start();
    let name = "tick:over";
    let holder = client(&server).await;
    let lock = holder.lock(name);
    let guard = lock.lock().await.expect("lock");
    let waiting = queued_waiter(&server, name, false).await;
    let min_hold = Duration::from_millis(300);
    tokio::time::sleep(min_hold).await; // the job ran longer than the minimum hold
    let released = Instant::now();
    guard.unlock_after(min_hold).await.expect("unlock_after");
    assert!(!hgetall(&server, name).iter().any(|(field, _)| field == lock.owner()), "the owner is gone at once");
    let (got, _) = waiting.await.expect("waiter task").expect("the waiter got the lock");
    assert!(got - released < SLACK, "woken at once: {:?}", got - released);
}

/// A re-entered hold: `unlock_after` of the inner guard gives back one hold (the key
/// keeps the watchdog lease for the outer one) and the minimum hold is remembered; the
/// outer guard's plain `unlock`, the last, keeps the key until it is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_entered_hold_keeps_the_key_from_its_last_release() {
    let server = RedisServer::start();
    let name = "tick:nested";
    let holder = client(&server).await;
    let lock = holder.lock(name);
    let outer = lock.lock().await.expect("outer");
    let before = Instant::now();
    let inner = lock.lock().await.expect("re-entry");
    inner.unlock_after(MIN_HOLD).await.expect("inner unlock_after");
    assert_eq!(hgetall(&server, name), [(lock.owner().to_owned(), "1".to_owned())], "one hold left");
    assert!(pttl(&server, name) > 20_000, "the outer hold keeps its watchdog lease");
    assert!(outer.is_renewed() && !outer.is_lost());

    outer.unlock().await.expect("outer unlock");
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= 1500, "the last release keeps the key for the time left: {ttl}");
    assert!(wait_until(MIN_HOLD + SLACK, || !exists(&server, name)).await, "then it expires");
    assert!(before.elapsed() >= MIN_HOLD, "not before the inner guard's minimum hold");
    assert!(lock.try_lock().await.expect("try").is_some(), "and the lock is free");
}

/// The minimum hold belongs to the owner (the handle): the same handle re-enters its
/// kept lock (the next tick of the instance that kept it), and giving that hold back
/// keeps the key again until the first minimum hold is over rather than deleting it;
/// so does an acquire's undo (here a `try_lock` cancelled at once, whose background undo
/// gives back whatever it took).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_handle_re_entering_a_kept_lock_keeps_the_min_hold() {
    let server = RedisServer::start();
    let name = "tick:again";
    let holder = client(&server).await;
    let lock = holder.lock(name);
    let before = Instant::now();
    lock.lock().await.expect("lock").unlock_after(MIN_HOLD).await.expect("unlock_after");
    let again = lock.try_lock().await.expect("try").expect("the same owner re-enters");
    assert!(pttl(&server, name) > 20_000, "the re-entry's watchdog lease");
    again.unlock().await.expect("unlock");
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= 1500, "kept again for the time left: {ttl}");
    assert_eq!(hgetall(&server, name), [(lock.owner().to_owned(), "1".to_owned())]);
    // A cancelled acquire's undo (a count of 0) keeps it as well.
    let cancelled = tokio::time::timeout(Duration::from_micros(1), lock.try_lock()).await;
    if let Ok(guard) = cancelled {
        drop(guard); // it finished first: its drop releases, which keeps the key too
    }
    let other = client(&server).await;
    assert!(other.lock(name).try_lock().await.expect("try").is_none(), "another owner is still refused");
    assert!(wait_until(MIN_HOLD + SLACK, || !exists(&server, name)).await, "then it expires");
    assert!(before.elapsed() >= MIN_HOLD, "not before the minimum hold: {:?}", before.elapsed());
}

/// Bad input is refused with `InvalidArgument` before the minimum hold is sent: under
/// 1 ms (zero included), over a year, and a fair lock's guard. The guard is dropped, so
/// its hold is given back in the background as any dropped guard's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_min_holds_are_refused() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let lock = holder.lock("tick:bad");
    for min_hold in [Duration::ZERO, Duration::from_micros(500), Duration::from_secs(366 * 24 * 3600), Duration::MAX] {
        let guard = lock.lock().await.expect("lock");
        let error = guard.unlock_after(min_hold).await.expect_err("refused");
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{min_hold:?}: {error}");
        assert!(
            wait_until(Duration::from_secs(5), || !exists(&server, "tick:bad")).await,
            "{min_hold:?}: the dropped guard is given back"
        );
    }
    let fair = holder.fair_lock("tick:fair");
    let guard = fair.lock().await.expect("fair lock");
    let error = guard.unlock_after(MIN_HOLD).await.expect_err("a fair lock keeps nothing");
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(wait_until(Duration::from_secs(5), || !exists(&server, "tick:fair")).await, "given back");
}

/// A fixed lease shorter than the minimum hold is lengthened: the key outlives the
/// lease and expires when the minimum hold is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_shorter_than_the_min_hold_is_lengthened() {
    let server = RedisServer::start();
    let name = "tick:fixed";
    let holder = client(&server).await;
    let lock = holder.lock(name);
    let before = Instant::now();
    let guard = lock.try_lock_with(Duration::ZERO, Duration::from_millis(500)).await.expect("try").expect("free");
    guard.unlock_after(MIN_HOLD).await.expect("unlock_after");
    assert!(pttl(&server, name) > 900, "longer than the 500 ms lease: {}", pttl(&server, name));
    assert!(wait_until(MIN_HOLD + SLACK, || !exists(&server, name)).await, "expires after the minimum hold");
    assert!(before.elapsed() >= MIN_HOLD, "not before it: {:?}", before.elapsed());
}

/// The release's reply is lost (the server ran it): the retry finds the key kept by the
/// owner and sets the time left again, the same end (later only by the time the retry
/// waited for the reconnect, within the call's duration); the call succeeds, and the key
/// expires at the minimum hold, neither before nor much after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_release_after_a_lost_reply_keeps_the_same_end() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr()).await;
    let holder = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let name = "tick:retried";
    let lock = holder.lock(name);
    let before = Instant::now();
    let guard = lock.lock().await.expect("lock");
    let after = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await; // the job
    proxy.lose_next_reply();
    let call = Instant::now();
    guard.unlock_after(MIN_HOLD).await.expect("retried, and answered");
    let call = call.elapsed();
    assert_eq!(proxy.lost_replies(), 1, "the first attempt's reply was lost");
    let left = time_left(after, call);
    let ttl = pttl(&server, name);
    assert!(ttl > 0 && ttl <= left, "the retry set the time left from the acquire, no more: {ttl} > {left}");
    assert!(wait_until(MIN_HOLD + SLACK, || !exists(&server, name)).await, "then it expires");
    assert!(before.elapsed() >= MIN_HOLD, "not before the minimum hold");
}

/// The script of a late replay (the key expired, another owner took the lock) writes
/// nothing: it checks the owner's field first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_replay_never_touches_the_next_owners_lock() {
    let server = RedisServer::start();
    let name = "tick:replay";
    let next = client(&server).await;
    let next_lock = next.lock(name);
    let _held = next_lock.lock().await.expect("the next owner holds it");
    let before = (hgetall(&server, name), pttl(&server, name));
    let script = include_str!("../crates/lock-core/lua/release_after.lua");
    let channel = "redisson_lock__channel:{tick:replay}";
    let reply = raw(&server, &["EVAL", script, "2", name, channel, "gone-owner:1", "60000", "0", "publish", "1"]);
    assert_eq!(reply, RespValue::Integer(-1), "not the owner");
    assert_eq!(hgetall(&server, name), before.0, "the next owner's field untouched");
    assert!(pttl(&server, name) <= before.1, "its TTL untouched (not lengthened to 60 s)");
}

/// Cancelled while the server is stopped (the release is written, not yet run): the
/// guard's renewal has stopped, and the release runs when the server resumes, keeping
/// the key for the time left (counted from before the stop, so at least the minimum
/// hold) before it expires; the owner's watchdog never renews it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_unlock_after_still_keeps_then_frees_the_key() {
    let mut server = RedisServer::start();
    let name = "tick:cancelled";
    let holder = client_with(&server.url(), Duration::from_secs(3)).await;
    let lock = holder.lock(name);
    let before = Instant::now();
    let guard = lock.lock().await.expect("lock");
    server.pause();
    let cancelled = tokio::time::timeout(Duration::from_millis(300), guard.unlock_after(MIN_HOLD)).await;
    assert!(cancelled.is_err(), "the call was cancelled while the server was stopped");
    server.resume();
    assert!(
        wait_until(Duration::from_secs(2), || (1..=1500).contains(&pttl(&server, name))).await,
        "the release ran on resume and kept the key for the time left"
    );
    assert!(wait_until(MIN_HOLD + SLACK, || !exists(&server, name)).await, "then it expires, never renewed");
    assert!(before.elapsed() >= MIN_HOLD, "not before the minimum hold");
}

/// The blocking guard's `unlock_after` keeps the key as the async one does.
#[test]
fn the_blocking_guard_keeps_the_key_too() {
    let server = RedisServer::start();
    let client = leasehold::blocking::Client::connect(&server.url()).expect("connect");
    let lock = client.lock("tick:blocking");
    let guard = lock.lock().expect("lock");
    guard.unlock_after(MIN_HOLD).expect("unlock_after");
    let ttl = pttl(&server, "tick:blocking");
    assert!(ttl > 0 && ttl <= 1500, "kept for the time left: {ttl}");
    let other = client.lock("tick:blocking");
    assert!(other.try_lock().expect("try").is_none(), "another owner is refused");
    let again = lock.try_lock().expect("try");
    assert!(again.is_some(), "the same owner re-enters its kept lock");
}

/// The fleet: three processes whose ticks fire 0, 100 and 200 ms apart run the job once
/// per tick, over four ticks (the job takes 50 ms, far less than the skew: without the
/// minimum hold a later instance takes the free lock and runs the tick again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_run_the_job_once_per_tick() {
    let server = RedisServer::start();
    let url = server.url();
    let ticks = 4;
    // The first tick in 3 s: time for the three processes to start and connect.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
    let start_ms = now.as_millis() + 3000;
    let start = start_ms.to_string();
    let mut fleet: Vec<HolderProcess> = ["0", "100", "200"]
        .iter()
        .map(|offset| {
            let args = [url.as_str(), "tick:fleet", start.as_str(), offset, "1500", "700", "4", "50"];
            HolderProcess::spawn(env!("CARGO_BIN_EXE_ticker"), &args)
        })
        .collect();
    let mut ran = vec![0_u32; ticks];
    for (index, process) in fleet.iter_mut().enumerate() {
        loop {
            let line = process.next_line(Duration::from_secs(20)).await;
            let line = line.unwrap_or_else(|| panic!("ticker {index} stopped before DONE"));
            let mut words = line.split(' ');
            match (words.next(), words.next().and_then(|tick| tick.parse::<usize>().ok())) {
                (Some("DONE"), _) => break,
                (Some("RAN"), Some(tick)) => ran[tick] += 1,
                (Some("SKIPPED"), Some(_)) => {}
                _ => panic!("ticker {index}: {line}"),
            }
        }
    }
    assert_eq!(ran, vec![1; ticks], "each tick ran exactly once across the fleet");
}

/// A kept `FencedLock` and the fence: the job wrote with its token, kept the lock with
/// `unlock_after`; the next holder (after the minimum hold) has a larger token and
/// writes; a late write of the first job, with its old token, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_fenced_lock_and_its_fence_refuse_the_late_write() {
    use leasehold::fence::{fenced_set, FencedWrite};
    let server = RedisServer::start();
    let name = "tick:fence";
    let holder = client(&server).await;
    let other = client(&server).await;
    let guard = holder.fenced_lock(name).lock().await.expect("lock");
    let token = guard.token();
    assert_eq!(fenced_set(&holder, "tick:report", token, "first").await.expect("write"), FencedWrite::Written);
    let kept = Instant::now();
    guard.unlock_after(MIN_HOLD).await.expect("unlock_after");
    let next = other.fenced_lock(name);
    assert!(next.try_lock().await.expect("try").is_none(), "kept: the next tick's holder is refused");
    let next_guard = next.try_lock_for(MIN_HOLD + SLACK).await.expect("wait").expect("free after the minimum hold");
    assert!(kept.elapsed() + Duration::from_millis(50) >= MIN_HOLD, "not before it: {:?}", kept.elapsed());
    assert!(next_guard.token() > token);
    assert_eq!(
        fenced_set(&other, "tick:report", next_guard.token(), "second").await.expect("write"),
        FencedWrite::Written
    );
    assert_eq!(
        fenced_set(&holder, "tick:report", token, "late").await.expect("write"),
        FencedWrite::Rejected { fence: next_guard.token() }
    );
    assert_eq!(raw(&server, &["GET", "tick:report"]).as_str(), Some("second"));
    next_guard.unlock().await.expect("unlock");
}

/// The server is gone (killed) when the job ends: `unlock_after` does not hang, it ends
/// with an error within its retries (and a call the caller bounds ends at that bound);
/// the guard is consumed, so nothing renews the lock afterwards: once a fresh server is
/// back, another client takes the lock and holds it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_after_with_the_server_down_ends_and_renews_nothing() {
    let mut server = RedisServer::start();
    let holder = client_with(&server.url(), Duration::from_secs(3)).await;
    let first = holder.lock("tick:down-a").lock().await.expect("lock");
    let second = holder.lock("tick:down-b").lock().await.expect("lock");
    server.kill();
    let asked = Instant::now();
    let bounded = tokio::time::timeout(Duration::from_millis(300), first.unlock_after(MIN_HOLD)).await;
    assert!(bounded.is_err() || bounded.as_ref().is_ok_and(Result::is_err), "{bounded:?}");
    assert!(asked.elapsed() < Duration::from_millis(600), "the caller's bound: {:?}", asked.elapsed());
    let asked = Instant::now();
    let unbounded = tokio::time::timeout(Duration::from_secs(15), second.unlock_after(MIN_HOLD))
        .await
        .expect("ends within its retries, never hangs");
    assert!(unbounded.is_err(), "the server is down: {unbounded:?}");
    eprintln!("unlock_after with the server down ended in {:?}: {unbounded:?}", asked.elapsed());
    server.restart();
    let other = client(&server).await;
    for name in ["tick:down-a", "tick:down-b"] {
        let guard = other.lock(name).try_lock().await.expect("try").expect("nothing kept on a fresh server");
        tokio::time::sleep(Duration::from_millis(1200)).await; // the old client's reconnect and its watchdog rounds
        assert_eq!(hgetall(&server, name).len(), 1, "{name}: only the new holder");
        guard.unlock().await.expect("unlock");
    }
}

/// A job longer than the lease and the period: the watchdog keeps the lock (the other
/// instances' ticks are skipped meanwhile, never run concurrently), and `unlock_after`
/// with the minimum hold long over deletes it at once for the next tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_longer_than_the_lease_skips_the_other_ticks_then_unlocks_at_once() {
    let server = RedisServer::start();
    let name = "tick:long";
    let holder = client_with(&server.url(), Duration::from_millis(900)).await;
    let other = client(&server).await;
    let guard = holder.lock(name).try_lock().await.expect("try").expect("free");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        assert!(other.lock(name).try_lock().await.expect("try").is_none(), "a tick meanwhile is skipped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!guard.is_lost(), "renewed past its 900 ms lease");
    guard.unlock_after(Duration::from_millis(500)).await.expect("unlock_after");
    assert!(!exists(&server, name), "the minimum hold is long over: deleted at once");
    let next = other.lock(name).try_lock().await.expect("try").expect("the next tick runs");
    next.unlock().await.expect("unlock");
}

/// The hold was taken away (forced) and another owner holds the lock: the old guard's
/// `unlock_after` fails (`NotOwner` or `LockLost`) and keeps nothing: the new owner's
/// field and TTL are untouched (never lengthened to the minimum hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_after_of_a_hold_taken_away_touches_nothing() {
    let server = RedisServer::start();
    let name = "tick:taken";
    let (old, new) = (client(&server).await, client(&server).await);
    let guard = old.lock(name).try_lock().await.expect("try").expect("free");
    assert!(new.lock(name).force_unlock().await.expect("force"));
    let lock = new.lock(name);
    let next = lock.try_lock_with(Duration::ZERO, Duration::from_millis(800)).await.expect("try").expect("free");
    let before = hgetall(&server, name);
    let error = guard.unlock_after(Duration::from_secs(60)).await.expect_err("not the owner any more");
    assert!(matches!(error.kind(), ErrorKind::NotOwner | ErrorKind::LockLost), "{error:?}");
    assert_eq!(hgetall(&server, name), before, "the new owner's field untouched");
    assert!(pttl(&server, name) <= 800, "its TTL not lengthened: {}", pttl(&server, name));
    next.unlock().await.expect("unlock");
}

/// The blocking `FencedGuard::unlock_after` keeps the key too, and the next holder's
/// token is larger.
#[test]
fn the_blocking_fenced_guard_keeps_the_key_too() {
    let server = RedisServer::start();
    let client = leasehold::blocking::Client::connect(&server.url()).expect("connect");
    let lock = client.fenced_lock("tick:blocking-fenced");
    let guard = lock.lock().expect("lock");
    let token = guard.token();
    guard.unlock_after(MIN_HOLD).expect("unlock_after");
    let ttl = pttl(&server, "tick:blocking-fenced");
    assert!(ttl > 0 && ttl <= 1500, "kept for the time left: {ttl}");
    let other = client.fenced_lock("tick:blocking-fenced");
    assert!(other.try_lock().expect("try").is_none(), "another owner is refused");
    let next = other.try_lock_for(MIN_HOLD + SLACK).expect("wait").expect("free after the minimum hold");
    assert!(next.token() > token);
    next.unlock().expect("unlock");
}
