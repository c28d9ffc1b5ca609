//! `Client::shutdown` gives back every kind of hold, permits included, leaves every
//! guard it outlives reporting `is_lost()` at once, and says nothing at WARN when
//! nothing went wrong. (`foundation.rs` covers the lock kinds' wake-ups, the refusals
//! afterwards and the background tasks.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_tests::{client, raw, RedisServer, RespValue};

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
    counted.acquire(1).await.expect("forgotten counted permit").forget();
    assert_eq!(raw(&server, &["GET", "sd:counted"]), RespValue::Bulk("2".into()), "3 of 5 taken");
    assert_eq!(raw(&server, &["GET", "sd:permits"]), RespValue::Bulk("1".into()), "3 of 4 taken");
    assert_eq!(raw(&server, &["ZCARD", "{sd:permits}:timeout"]), RespValue::Integer(3));
    assert!(holder.stats().watchdog.registered >= 4, "{:?}", holder.stats().watchdog);

    holder.shutdown().await.expect("shutdown");
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
