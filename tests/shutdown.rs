//! `Client::shutdown` gives back every kind of hold, permits included, leaves every
//! guard it outlives reporting `is_lost()` at once, and says nothing at WARN when
//! nothing went wrong; for the lock kinds, that a waiter is woken at once, that everything
//! is refused afterwards and that the background tasks end.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_test_support::{both_servers, client, raw, wait_until, Monitor, RedisServer, RespValue, ServerKind};

const LEASE: Duration = Duration::from_secs(30);

/// A permit, a lock guard, a read guard, a multi-lock guard and a semaphore's permit
/// guard (and a fixed-lease permit and forgotten permits) left alive at shutdown: every key or entry is gone on
/// the server, the count of the permit semaphore is whole again, and every guard
/// reports lost the moment `shutdown` returns; the permits' `release` is refused
/// without sending anything, and nothing is renewed any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_every_kind_and_every_guard_reports_lost() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let semaphore = holder.permit_expirable_semaphore("sd:permits");
    assert!(semaphore.try_set_permits(4).await.expect("set"));
    let renewed = semaphore.acquire().await.expect("renewed permit");
    let fixed = semaphore.acquire_with_lease(LEASE).await.expect("fixed-lease permit");
    std::mem::forget(semaphore.acquire().await.expect("forgotten permit"));
    let lock = holder.lock("sd:lock").lock().await.expect("lock");
    let read = holder.read_write_lock("sd:rw").read().await.expect("read");
    let multi = holder.multi_lock(["sd:m1", "sd:m2"]).lock().await.expect("multi");
    let counted = holder.semaphore("sd:counted");
    assert!(counted.try_set_permits(5).await.expect("set"));
    let counted_permit = counted.acquire(2).await.expect("counted permits");
    counted.acquire(1).await.expect("forgotten counted permit").detach();
    assert_eq!(raw(&server, &["GET", "sd:counted"]), RespValue::Bulk("2".into()), "3 of 5 taken");
    assert_eq!(raw(&server, &["GET", "sd:permits"]), RespValue::Bulk("1".into()), "3 of 4 taken");
    assert_eq!(raw(&server, &["ZCARD", "{sd:permits}:timeout"]), RespValue::Integer(3));
    assert!(holder.stats().watchdog.registered >= 4, "{:?}", holder.stats().watchdog);
    assert!(!counted_permit.is_lost());

    // The semaphore permit guard's `lost()`, awaited while the shutdown runs, resolves.
    let (shutdown, ()) = tokio::join!(holder.shutdown(), async {
        tokio::time::timeout(Duration::from_secs(10), counted_permit.lost())
            .await
            .expect("lost() resolves at shutdown");
    });
    shutdown.expect("shutdown");
    // At once, with no wait: the shutdown ended them before it returned.
    assert!(renewed.is_lost(), "the renewed permit reports lost");
    assert!(fixed.is_lost(), "the fixed-lease permit reports lost");
    assert!(lock.is_lost() && read.is_lost() && multi.is_lost(), "every lock guard reports lost");
    assert!(counted_permit.is_lost(), "the semaphore permit guard reports lost");
    assert_eq!(holder.stats().watchdog.registered, 0, "nothing is renewed any more");

    assert_eq!(raw(&server, &["GET", "sd:permits"]), RespValue::Bulk("4".into()), "every permit given back");
    assert_eq!(raw(&server, &["EXISTS", "{sd:permits}:timeout"]), RespValue::Integer(0), "no permit listed");
    assert_eq!(
        raw(&server, &["GET", "sd:counted"]),
        RespValue::Bulk("4".into()),
        "the guard's 2 back, the forgotten 1 not"
    );
    for key in ["sd:lock", "sd:rw", "sd:m1", "sd:m2"] {
        assert_eq!(raw(&server, &["EXISTS", key]), RespValue::Integer(0), "{key} released");
    }
    let keys = raw(&server, &["KEYS", "*rwlock_timeout*"]);
    assert_eq!(keys, RespValue::Array(Vec::new()), "the read hold's timeout key is gone too");

    let refused = renewed.release().await.expect_err("shut down");
    assert!(refused.is_shutdown(), "{refused:?}");
    drop(fixed);
    assert!(counted_permit.release().await.expect_err("shut down").is_shutdown(), "nothing sent twice");
    assert_eq!(raw(&server, &["GET", "sd:counted"]), RespValue::Bulk("4".into()));
    assert!(lock.unlock().await.expect_err("shut down").is_shutdown());
    drop((read, multi));
}

/// The blocking client's `shutdown`, and its last drop, give back a `Permit` too: the
/// permit reports lost at once and its release is refused, nothing sent.
#[test]
fn the_blocking_client_releases_permits_at_shutdown_and_at_its_last_drop() {
    let server = RedisServer::start();
    for shut_down in [true, false] {
        let client = leasehold::blocking::Client::connect(&server.url()).expect("connect");
        let semaphore = client.permit_expirable_semaphore("sdb:permits");
        semaphore.set_permits(2).expect("set");
        let permit = semaphore.acquire().expect("permit");
        assert_eq!(raw(&server, &["GET", "sdb:permits"]), RespValue::Bulk("1".into()));
        if shut_down {
            client.shutdown().expect("shutdown");
            assert!(permit.is_lost(), "lost as soon as shutdown returned");
            assert_eq!(raw(&server, &["GET", "sdb:permits"]), RespValue::Bulk("2".into()), "given back");
        } else {
            // The last handle gone: the drop shuts the client down in the background.
            drop((semaphore, client));
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !permit.is_lost() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(permit.is_lost(), "lost after the last drop's shutdown");
            assert_eq!(raw(&server, &["GET", "sdb:permits"]), RespValue::Bulk("2".into()), "given back");
            assert_eq!(raw(&server, &["ZCARD", "{sdb:permits}:timeout"]), RespValue::Integer(0));
        }
        let refused = permit.release().expect_err("shut down");
        assert!(refused.is_shutdown(), "{refused:?}");
    }
}

/// Every WARN (or ERROR) event, with its target and fields, as text.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Text<'a>(&'a mut String);

impl tracing::field::Visit for Text<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = format!("{} {}:", event.metadata().level(), event.metadata().target());
        event.record(&mut Text(&mut text));
        self.0.lock().expect("warnings").push(text);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// fred logs through the `log` crate: every record at WARN or above, as text. Installed
/// once per process (this test binary's tests all see it).
struct FredWarnings(Arc<Mutex<Vec<String>>>);

impl log::Log for FredWarnings {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let text = format!("{} {}: {}", record.level(), record.target(), record.args());
            self.0.lock().expect("warnings").push(text);
        }
    }
    fn flush(&self) {}
}

/// A clean shutdown (holds given back, connections quit), then the last clone of the
/// client dropped: not one WARN event from leasehold (`tracing`) or record from fred
/// (`log`). The tracing subscriber is the runtime's only thread's default, so it sees
/// the background tasks too.
#[tokio::test(flavor = "current_thread")]
async fn a_clean_shutdown_logs_nothing_at_warn() {
    let warnings = Warnings::default();
    let _default = tracing::subscriber::set_default(warnings.clone());
    log::set_logger(Box::leak(Box::new(FredWarnings(warnings.0.clone())))).expect("the only logger");
    log::set_max_level(log::LevelFilter::Warn);
    let server = RedisServer::start();
    let holder = client(&server).await;
    let semaphore = holder.permit_expirable_semaphore("sdw:permits");
    assert!(semaphore.try_set_permits(2).await.expect("set"));
    let permit = semaphore.acquire().await.expect("permit");
    let guard = holder.lock("sdw:lock").lock().await.expect("lock");
    let read = holder.read_write_lock("sdw:rw").read().await.expect("read");

    holder.shutdown().await.expect("shutdown");
    drop((permit, guard, read, semaphore));
    drop(holder);
    // A client dropped without a shutdown quits each connection once too.
    let dropped = client(&server).await;
    dropped.lock("sdw:other").lock().await.expect("lock").unlock().await.expect("unlock");
    drop(dropped);
    // What the drops leave to the background (a QUIT of the last clone's drop, fred's
    // connection tasks ending) runs on this thread: give it time to run and to warn.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = warnings.0.lock().expect("warnings").clone();
    assert!(seen.is_empty(), "a clean shutdown warned: {seen:#?}");
}

/// `Client::shutdown` gives back every lock held through the client's handles (each
/// kind, a forgotten guard included), so a waiter on another client gets the lock at
/// once; stops the background tasks (the runtime's live tasks drop back to what they
/// were before the client connected, while the `Client` itself is still alive); and
/// refuses everything afterwards, sending nothing. Standalone: it counts the runtime's
/// tasks and watches every command.
async fn shutdown_releases_what_is_held_and_stops_the_background_tasks(on: ServerKind) {
    let server = on.start();
    let other = client(&server).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();
    let holder = client(&server).await;
    let keys = ["sd:plain", "sd:fair", "sd:fenced", "sd:simple", "sd:forgotten"];
    let (plain, fair, fenced) = (holder.lock(keys[0]), holder.fair_lock(keys[1]), holder.fenced_lock(keys[2]));
    let (simple, forgotten) = (holder.simple_lock(keys[3]), holder.lock(keys[4]));
    let plain_guard = plain.lock().await.expect("plain");
    let fair_guard = fair.lock_with_lease(LEASE).await.expect("fair");
    let fenced_guard = fenced.lock().await.expect("fenced");
    let simple_guard = simple.try_lock_with(Duration::ZERO, LEASE).await.expect("simple").expect("free");
    std::mem::forget(forgotten.lock().await.expect("forgotten"));
    assert!(holder.stats().watchdog.registered >= 3);
    for key in keys {
        assert_eq!(raw(&server, &["EXISTS", key]), RespValue::Integer(1), "{key} held");
    }

    let waiter = other.lock(keys[0]);
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock().await;
        (std::time::Instant::now(), guard)
    });
    assert!(wait_until(Duration::from_secs(5), || other.local_waiters(keys[0]) == 1).await, "the waiter waits");

    // Waits of the holder's own, on a lock and a fair lock another client holds: they
    // end at shutdown, and leave the server's queues before the connection closes.
    let busy = other.lock("sd:busy").lock_with_lease(LEASE).await.expect("busy");
    let own_waiter = holder.lock("sd:busy");
    let own_wait = tokio::spawn(async move { own_waiter.lock().await.map(drop) });
    let busy_fair = other.fair_lock("sd:busy-fair").lock_with_lease(LEASE).await.expect("busy fair");
    let own_fair_waiter = holder.fair_lock("sd:busy-fair");
    let own_fair_wait = tokio::spawn(async move { own_fair_waiter.lock().await.map(drop) });
    let queued = |queue: &str| raw(&server, &["LLEN", queue]).as_int().unwrap_or(0);
    let (queue, fair_queue) = ("leasehold_lock_queue:{sd:busy}", "redisson_lock_queue:{sd:busy-fair}");
    assert!(wait_until(Duration::from_secs(5), || queued(queue) == 1 && queued(fair_queue) == 1).await, "both wait");

    let started = std::time::Instant::now();
    holder.shutdown().await.expect("shutdown");
    assert_eq!(queued(queue), 0, "the lock's waiter left its queue before the shutdown returned");
    assert_eq!(queued(fair_queue), 0, "the fair lock's waiter too");
    assert_eq!(raw(&server, &["ZCARD", "redisson_lock_timeout:{sd:busy-fair}"]), RespValue::Integer(0));
    for wait in [own_wait, own_fair_wait] {
        let ended = tokio::time::timeout(Duration::from_secs(5), wait).await.expect("the wait ended").expect("task");
        assert!(ended.expect_err("no lock after shutdown").is_shutdown());
    }
    busy.unlock().await.expect("busy unlocks");
    busy_fair.unlock().await.expect("busy fair unlocks");
    assert!(holder.is_shut_down());
    // The waiter may have taken the plain lock already: the holder's field is gone.
    let held = raw(&server, &["HEXISTS", keys[0], plain.owner()]);
    assert_eq!(held, RespValue::Integer(0), "{} released", keys[0]);
    for key in &keys[1..] {
        assert_eq!(raw(&server, &["EXISTS", key]), RespValue::Integer(0), "{key} released");
    }
    let (got_at, got) = waiting.await.expect("waiter task");
    got.expect("the waiter got the lock").unlock().await.expect("waiter unlocks");
    let waited = got_at.duration_since(started);
    assert!(waited < Duration::from_secs(1), "woken by the release, not the 30 s lease: {waited:?}");

    // Afterwards: nothing is sent for the old guards, nothing new goes out.
    let monitor = Monitor::start(&server.addr());
    assert!(plain_guard.is_lost() && fair_guard.is_lost() && fenced_guard.is_lost());
    assert!(plain_guard.unlock().await.expect_err("shut down").is_shutdown());
    assert!(fenced_guard.unlock().await.expect_err("shut down").is_shutdown());
    assert!(simple_guard.unlock().await.expect_err("shut down").is_shutdown());
    drop(fair_guard);
    let after = holder.lock("sd:after").try_lock().await.expect_err("refused");
    assert!(after.is_shutdown() && after.is_not_sent(), "{after:?}");
    assert!(holder
        .simple_lock("sd:after")
        .try_lock_with(Duration::ZERO, LEASE)
        .await
        .expect_err("refused")
        .is_shutdown());
    holder.shutdown().await.expect("a second shutdown answers Ok");
    monitor.sync(&server.addr());
    let sent: Vec<String> = monitor.commands().into_iter().filter(|l| l.contains("\"sd:")).collect();
    assert!(sent.is_empty(), "sent after shutdown: {sent:?}");
    drop(monitor);

    // The watchdog, the subscriber and fred's connection tasks have ended, though the
    // `Client` (and a forgotten guard holding it) is still alive.
    let ended = wait_until(Duration::from_secs(5), || metrics.num_alive_tasks() <= tasks_before).await;
    assert!(ended, "background tasks left: {} alive, {tasks_before} before", metrics.num_alive_tasks());
    assert_eq!(holder.stats().watchdog.registered, 0, "nothing renewed");
    drop(holder);
}
both_servers!(shutdown_releases_what_is_held_and_stops_the_background_tasks);

/// A wait cancelled just before `shutdown` (what the CLI does at Ctrl-C: the campaign's
/// or lock's future is dropped, then the client shut down): its queue entry, left in
/// the background, is gone when `shutdown` returns, for a lock, a fair lock and an
/// election's campaign; the shutdown waited for those clean-ups before it closed the
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_cancelled_just_before_shutdown_still_leaves_its_queue() {
    let server = RedisServer::start();
    let other = client(&server).await;
    let holder = client(&server).await;
    let busy = other.lock("sdc:lock").lock_with_lease(LEASE).await.expect("busy");
    let busy_fair = other.fair_lock("sdc:fair").lock_with_lease(LEASE).await.expect("busy fair");
    let leader = other.election("sdc:elect").campaign("other").await.expect("leads");
    let (lock, fair, candidate) = (holder.lock("sdc:lock"), holder.fair_lock("sdc:fair"), holder.election("sdc:elect"));
    // Every queue on the server (an election's lead key has a queue of its own name).
    let queued = || {
        let mut waiting = 0;
        for pattern in ["leasehold_lock_queue:*", "redisson_lock_queue:*"] {
            let RespValue::Array(keys) = raw(&server, &["KEYS", pattern]) else { continue };
            for key in keys.iter().filter_map(|k| k.as_str()) {
                waiting += raw(&server, &["LLEN", key]).as_int().unwrap_or(0);
            }
        }
        waiting
    };
    {
        let waits = async { tokio::join!(lock.lock(), fair.lock(), candidate.campaign("mine")) };
        tokio::pin!(waits);
        let all_queued = async {
            while queued() < 3 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            _ = &mut waits => panic!("the waits cannot end while the locks are held"),
            queued_in_time = tokio::time::timeout(Duration::from_secs(5), all_queued) => {
                queued_in_time.expect("all three queue within 5 s");
            }
        }
        assert_eq!(queued(), 3, "all three wait");
        // Leaving this block drops the three waits: each leaves its queue in the
        // background, and the shutdown starts at once.
    }
    holder.shutdown().await.expect("shutdown");
    assert_eq!(queued(), 0, "every cancelled wait left its queue before the shutdown closed the connection");
    busy.unlock().await.expect("unlock");
    busy_fair.unlock().await.expect("unlock");
    leader.resign().await.expect("resign");
}
