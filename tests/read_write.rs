//! The read/write lock (issue 18 item 4): Redisson's `RReadWriteLock` layout through
//! `ReadWriteLock`, against real servers (`NAME::redis`, `NAME::valkey`, see
//! `both_servers!`). Waits are bounded by deadlines, never sleeps.

use std::time::Duration;

use leasehold::ErrorKind;
use leasehold_test_support::{
    both_servers, client, client_with, hgetall, pttl, raw, wait_until, RespValue, ServerKind,
};
use tokio::time::{timeout, Instant};

const LEASE: Duration = Duration::from_secs(10);

fn exists(server: &leasehold_test_support::RedisServer, key: &str) -> bool {
    raw(server, &["EXISTS", key]).as_int() == Some(1)
}

/// Readers of two clients share; a writer is excluded while they read, and excludes
/// readers and writers of both clients while it writes. The Hash, the timeout keys and
/// the owner fields are Redisson's, byte for byte.
async fn readers_share_and_a_writer_excludes_both_ways(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let (ra, rb) = (a.read_write_lock("rw:share"), b.read_write_lock("rw:share"));
    let read_a = ra.read().await.expect("read a");
    let read_b = rb.try_read().await.expect("try").expect("readers share");
    let mut fields = hgetall(&server, "rw:share");
    fields.sort();
    let mut want = vec![
        ("mode".to_owned(), "read".to_owned()),
        (ra.owner().to_owned(), "1".to_owned()),
        (rb.owner().to_owned(), "1".to_owned()),
    ];
    want.sort();
    assert_eq!(fields, want);
    let timeout_key = format!("{{rw:share}}:{}:rwlock_timeout:1", ra.owner());
    assert_eq!(raw(&server, &["GET", &timeout_key]).as_str(), Some("1"));
    assert!(pttl(&server, &timeout_key) > 20_000, "watchdog lease on the timeout key");
    assert!(ra.is_read_locked().await.expect("q") && !ra.is_write_locked().await.expect("q"));

    let writer = a.read_write_lock("rw:share");
    assert!(writer.try_write().await.expect("try").is_none(), "readers exclude a writer");
    read_a.unlock().await.expect("unlock a");
    assert!(!exists(&server, &timeout_key), "the released hold's timeout key is gone");
    assert!(writer.try_write().await.expect("try").is_none(), "one reader still excludes it");
    read_b.unlock().await.expect("unlock b");
    assert!(!exists(&server, "rw:share"), "the last release deletes the lock");

    let write = writer.try_write().await.expect("try").expect("free");
    assert_eq!(hgetall(&server, "rw:share").len(), 2);
    assert_eq!(raw(&server, &["HGET", "rw:share", &format!("{}:write", writer.owner())]).as_str(), Some("1"));
    assert!(rb.try_read().await.expect("try").is_none(), "a writer excludes another client's reader");
    assert!(ra.try_read().await.expect("try").is_none(), "and this client's other owners");
    assert!(rb.try_write().await.expect("try").is_none(), "and writers");
    assert!(writer.is_write_locked().await.expect("q"));
    write.unlock().await.expect("unlock");
    assert!(!exists(&server, "rw:share"));
}
both_servers!(readers_share_and_a_writer_excludes_both_ways);

/// Read in read, write in write and read in write re-enter; releasing the write keeps
/// the read (a downgrade), and a write while holding only reads is `WouldDeadlock`,
/// nothing sent.
async fn reentrancy_downgrade_and_upgrade(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let rw = client.read_write_lock("rw:reentry");
    let w1 = rw.write_with_lease(LEASE).await.expect("write");
    let w2 = rw.try_write().await.expect("try").expect("write in write");
    let r1 = rw.try_read().await.expect("try").expect("read in write");
    let writer_field = format!("{}:write", rw.owner());
    assert_eq!(raw(&server, &["HGET", "rw:reentry", &writer_field]).as_str(), Some("2"));
    assert_eq!(raw(&server, &["HGET", "rw:reentry", rw.owner()]).as_str(), Some("1"));
    assert!(rw.is_read_locked().await.expect("q"), "write mode with the writer's read");
    w2.unlock().await.expect("inner write");
    w1.unlock().await.expect("outer write");
    // The downgrade: read mode, the read remains; another reader may join.
    assert_eq!(raw(&server, &["HGET", "rw:reentry", "mode"]).as_str(), Some("read"));
    let other = client.read_write_lock("rw:reentry");
    let r_other = other.try_read().await.expect("try").expect("readers join after a downgrade");
    let r2 = rw.try_read().await.expect("try").expect("read in read");
    assert_eq!(raw(&server, &["HGET", "rw:reentry", rw.owner()]).as_str(), Some("2"));

    let before = hgetall(&server, "rw:reentry");
    let error = rw.try_write().await.expect_err("an upgrade");
    assert_eq!(error.kind(), ErrorKind::WouldDeadlock);
    assert!(error.is_not_sent());
    assert_eq!(rw.write().await.expect_err("an upgrade").kind(), ErrorKind::WouldDeadlock);
    assert_eq!(hgetall(&server, "rw:reentry"), before, "nothing written");
    for guard in [r2, r1, r_other] {
        guard.unlock().await.expect("unlock");
    }
    assert!(!exists(&server, "rw:reentry"));
}
both_servers!(reentrancy_downgrade_and_upgrade);

/// A write release wakes every waiting reader at once (one message, `1`), in two
/// clients; a downgrade does too.
async fn a_write_release_and_a_downgrade_wake_every_waiting_reader(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    for downgrade in [false, true] {
        let name = if downgrade { "rw:wake:downgrade" } else { "rw:wake" };
        let writer = a.read_write_lock(name);
        let write = writer.write().await.expect("write");
        let kept = if downgrade { Some(writer.try_read().await.expect("try").expect("read in write")) } else { None };
        let mut readers = Vec::new();
        for i in 0..6 {
            let c = if i % 2 == 0 { a.clone() } else { b.clone() };
            readers.push(tokio::spawn(async move {
                let rw = c.read_write_lock(name);
                let guard = rw.try_read_with(Duration::from_secs(60), LEASE).await.expect("wait").expect("read");
                (Instant::now(), guard)
            }));
        }
        // Both clients subscribed to the channel before the release (a reader that
        // starts later gets in on its first attempt, which the bound below allows too).
        let channel = format!("redisson_rwlock:{{{name}}}");
        let subscribed = wait_until(Duration::from_secs(5), || {
            matches!(raw(&server, &["PUBSUB", "NUMSUB", &channel]), RespValue::Array(ref v) if v.get(1).and_then(RespValue::as_int) == Some(2))
        })
        .await;
        assert!(subscribed, "both clients listen on {channel}");
        let released = Instant::now();
        write.unlock().await.expect("unlock");
        let mut guards = Vec::new();
        for reader in readers {
            let (at, guard) =
                timeout(Duration::from_secs(3), reader).await.expect("in within 3 s of the release").expect("join");
            assert!(at.duration_since(released) < Duration::from_secs(2), "woken by the release, not a timer");
            guards.push(guard);
        }
        assert_eq!(raw(&server, &["HGET", name, "mode"]).as_str(), Some("read"));
        for guard in guards {
            guard.unlock().await.expect("unlock");
        }
        if let Some(kept) = kept {
            kept.unlock().await.expect("unlock");
        }
        assert!(!exists(&server, name));
    }
}
both_servers!(a_write_release_and_a_downgrade_wake_every_waiting_reader);

/// The watchdog keeps read and write holds (timeout keys and Hash) past the lease, and
/// never renews another client's read hold: a fixed-lease reader of another client that
/// stops (detached) loses its timeout key, and a writer gets in once the live reader
/// releases, at most that reader's lease later.
async fn the_watchdog_renews_only_its_own_holds(on: ServerKind) {
    let server = on.start();
    let watchdog = Duration::from_millis(900);
    let (a, b) = (client_with(&server.url(), watchdog).await, client_with(&server.url(), watchdog).await);
    let ra = a.read_write_lock("rw:watchdog");
    let read = ra.read().await.expect("read");
    let dead = b.read_write_lock("rw:watchdog");
    dead.read_with_lease(Duration::from_millis(400)).await.expect("read").detach();
    let dead_key = format!("{{rw:watchdog}}:{}:rwlock_timeout:1", dead.owner());
    let own_key = format!("{{rw:watchdog}}:{}:rwlock_timeout:1", ra.owner());
    tokio::time::sleep(Duration::from_millis(2_000)).await; // more than twice the lease
    assert!(!read.is_lost() && exists(&server, &own_key), "own read hold renewed past its lease");
    assert!(!exists(&server, &dead_key), "another client's read hold is never renewed");
    let writer = b.read_write_lock("rw:watchdog");
    let waiting =
        tokio::spawn(async move { writer.try_write_with(Duration::from_secs(5), LEASE).await.map(|g| (g, writer)) });
    assert!(wait_until(Duration::from_secs(5), || b.stats().waiters == 1).await, "the writer waits");
    read.unlock().await.expect("unlock");
    let (write, writer) = waiting.await.expect("join").expect("wait");
    let write = write.expect("the dead reader's field was pruned: the writer is in");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(!write.is_lost(), "the write hold renewed past its lease");
    assert_eq!(raw(&server, &["HGET", "rw:watchdog", &format!("{}:write", writer.owner())]).as_str(), Some("1"));
    write.unlock().await.expect("unlock");
}
both_servers!(the_watchdog_renews_only_its_own_holds);

/// A reader whose process died (its timeout keys expired) while the Hash is kept alive
/// (as an older Java client's zombie renewal does) blocks a writer at most its lease:
/// the write acquire prunes it, and the writer retries when that lease ends.
async fn a_dead_reader_blocks_a_writer_at_most_its_lease(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let dead = client.read_write_lock("rw:dead");
    dead.read_with_lease(Duration::from_millis(500)).await.expect("read").detach();
    raw(&server, &["PEXPIRE", "rw:dead", "60000"]);
    let start = Instant::now();
    let writer = client.read_write_lock("rw:dead");
    let write = writer.try_write_with(Duration::from_secs(5), LEASE).await.expect("wait").expect("in");
    assert!(start.elapsed() < Duration::from_secs(3), "in after the dead reader's lease, not the Hash's TTL");
    assert!(hgetall(&server, "rw:dead").iter().all(|(f, _)| f != dead.owner()), "the dead reader's field pruned");
    write.unlock().await.expect("unlock");
}
both_servers!(a_dead_reader_blocks_a_writer_at_most_its_lease);

/// `force_unlock` deletes readers and writer; a watchdog holder's `lost()` resolves.
async fn lost_fires_after_force_unlock(on: ServerKind) {
    let server = on.start();
    let client = client_with(&server.url(), Duration::from_millis(900)).await;
    let rw = client.read_write_lock("rw:force");
    let write = rw.write().await.expect("write");
    assert!(client.read_write_lock("rw:force").force_unlock().await.expect("force"));
    timeout(Duration::from_secs(3), write.lost()).await.expect("lost within a renewal period");
    assert!(write.is_lost());
    let read = rw.read().await.expect("read");
    assert!(rw.force_unlock().await.expect("force"));
    timeout(Duration::from_secs(3), read.lost()).await.expect("read hold lost too");
    assert!(!rw.force_unlock().await.expect("force"), "nothing left to delete");
}
both_servers!(lost_fires_after_force_unlock);

/// A name that holds a plain lock (a Hash without `mode`) or another type is a typed
/// error, and nothing is written.
async fn bad_input_is_a_typed_error_and_writes_nothing(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let plain = client.lock("rw:bad").lock_with_lease(LEASE).await.expect("plain lock");
    let before = hgetall(&server, "rw:bad");
    let rw = client.read_write_lock("rw:bad");
    assert_eq!(rw.try_read().await.expect_err("plain").kind(), ErrorKind::WrongType);
    assert_eq!(rw.try_write().await.expect_err("plain").kind(), ErrorKind::WrongType);
    assert_eq!(rw.force_unlock().await.expect_err("plain").kind(), ErrorKind::WrongType);
    assert_eq!(rw.read().await.expect_err("plain").kind(), ErrorKind::WrongType, "a wait ends with it");
    assert_eq!(hgetall(&server, "rw:bad"), before, "nothing written");
    plain.unlock().await.expect("unlock");
    raw(&server, &["SET", "rw:string", "x"]);
    let rw = client.read_write_lock("rw:string");
    assert_eq!(rw.try_write().await.expect_err("string").kind(), ErrorKind::WrongType);
    assert_eq!(rw.try_read().await.expect_err("string").kind(), ErrorKind::WrongType);
    assert_eq!(raw(&server, &["GET", "rw:string"]).as_str(), Some("x"));
    assert_eq!(client.read_write_lock("").try_read().await.expect_err("empty").kind(), ErrorKind::InvalidArgument);
}
both_servers!(bad_input_is_a_typed_error_and_writes_nothing);

/// `try_read_for` and `try_write_for` wait at most their bound (`None` then, nothing
/// left behind), get the lock when it is released within it, and hold it in watchdog
/// mode (renewed while held, on the watchdog's lease).
async fn the_bounded_renewed_forms_wait_their_bound_and_renew(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "rw:bounded";
    let holder = a.read_write_lock(name);
    let write = holder.write().await.expect("write");
    let (reader, writer) = (b.read_write_lock(name), b.read_write_lock(name));
    let start = Instant::now();
    assert!(reader.try_read_for(Duration::from_millis(300)).await.expect("read wait").is_none());
    assert!(writer.try_write_for(Duration::from_millis(300)).await.expect("write wait").is_none());
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(600) && waited < Duration::from_secs(3), "both bounds kept: {waited:?}");
    assert_eq!(hgetall(&server, name).len(), 2, "only the holder's mode and write field");

    // Released within the bound: the waiting reader gets it, renewed.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        write.unlock().await
    });
    let read = reader.try_read_for(Duration::from_secs(10)).await.expect("read wait").expect("released within");
    release.await.expect("task").expect("unlock");
    assert!(read.is_renewed(), "watchdog mode");
    assert!(pttl(&server, name) > 20_000, "the watchdog's lease, not a fixed one");

    // A writer waits for the read to go, then holds the write, renewed.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        read.unlock().await
    });
    let write = holder.try_write_for(Duration::from_secs(10)).await.expect("write wait").expect("released within");
    release.await.expect("task").expect("unlock");
    assert!(write.is_renewed(), "watchdog mode");
    assert!(pttl(&server, name) > 20_000);
    write.unlock().await.expect("unlock");
    assert!(!exists(&server, name));
}
both_servers!(the_bounded_renewed_forms_wait_their_bound_and_renew);

/// The handle, its guards and its futures can cross tasks (an axum handler compiles).
#[test]
fn bounds() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    fn send<T: Send>(_: &T) {}
    // Type-checked, never run: every future of the handle is `Send`.
    #[allow(dead_code)]
    fn futures_are_send(rw: &leasehold::ReadWriteLock) {
        send(&rw.read());
        send(&rw.write());
        send(&rw.try_read_with(Duration::ZERO, LEASE));
        send(&rw.try_write_with(Duration::ZERO, LEASE));
        send(&rw.try_read_for(LEASE));
        send(&rw.try_write_for(LEASE));
        send(&rw.force_unlock());
    }
    send_sync_static::<leasehold::ReadWriteLock>();
    send_sync_static::<leasehold::ReadGuard>();
    send_sync_static::<leasehold::WriteGuard>();
}

/// Writer preference: while a leasehold writer waits, no new leasehold reader enters
/// (its entry in `leasehold_rwlock_writers:{NAME}`), a reader already holding re-enters,
/// and the writer gets in at the last release; a writer that gives up lets the readers
/// it held back in at once (its clean-up publishes `1`).
async fn a_waiting_writer_keeps_new_readers_out(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let first = a.read_write_lock("rw:pref");
    let read = first.read().await.expect("read");
    let writer = b.read_write_lock("rw:pref");
    let waiting = tokio::spawn(async move {
        let guard = writer.try_write_with(Duration::from_secs(10), LEASE).await;
        (Instant::now(), guard, writer)
    });
    let writers = "leasehold_rwlock_writers:{rw:pref}";
    assert!(
        wait_until(Duration::from_secs(5), || raw(&server, &["ZCARD", writers]).as_int() == Some(1)).await,
        "the waiting writer recorded itself"
    );
    let newcomer = a.read_write_lock("rw:pref");
    assert!(newcomer.try_read().await.expect("try").is_none(), "a new reader waits behind the writer");
    assert!(b.read_write_lock("rw:pref").try_read().await.expect("try").is_none(), "in every client");
    let again = first.try_read().await.expect("try").expect("a holding reader re-enters");
    again.unlock().await.expect("unlock");
    let released = Instant::now();
    read.unlock().await.expect("unlock");
    let (at, write, _writer) = timeout(Duration::from_secs(5), waiting).await.expect("in time").expect("task");
    let write = write.expect("wait").expect("the writer got in");
    assert!(at.duration_since(released) < Duration::from_secs(2), "woken by the last read release");
    assert_eq!(raw(&server, &["EXISTS", writers]).as_int(), Some(0), "its entry went when it acquired");
    write.unlock().await.expect("unlock");
    let read = newcomer.try_read().await.expect("try").expect("readers enter again");

    // A writer that gives up: the reader it held back enters at once.
    let writer = b.read_write_lock("rw:pref");
    let waiting =
        tokio::spawn(
            async move { writer.try_write_with(Duration::from_millis(800), LEASE).await.map(|g| g.is_none()) },
        );
    assert!(
        wait_until(Duration::from_secs(5), || raw(&server, &["ZCARD", writers]).as_int() == Some(1)).await,
        "recorded"
    );
    let held_back = a.read_write_lock("rw:pref");
    let reader = tokio::spawn(async move {
        let guard = held_back.try_read_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        (Instant::now(), guard)
    });
    assert!(waiting.await.expect("task").expect("wait"), "the writer timed out");
    let gave_up = Instant::now();
    let (at, guard) = timeout(Duration::from_secs(5), reader).await.expect("in time").expect("task");
    assert!(at.duration_since(gave_up) < Duration::from_secs(2), "woken when the writer left, not at its keep-alive");
    assert_eq!(raw(&server, &["EXISTS", writers]).as_int(), Some(0), "nothing left behind");
    guard.unlock().await.expect("unlock");
    read.unlock().await.expect("unlock");
}
both_servers!(a_waiting_writer_keeps_new_readers_out);

/// A writer whose process died while waiting (its entry not refreshed) keeps new
/// readers out at most its keep-alive.
async fn a_dead_waiting_writer_blocks_readers_at_most_its_keepalive(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let RespValue::Array(time) = raw(&server, &["TIME"]) else { panic!("TIME") };
    let now_ms = time[0].as_str().and_then(|s| s.parse::<u64>().ok()).expect("secs") * 1000
        + time[1].as_str().and_then(|s| s.parse::<u64>().ok()).expect("us") / 1000;
    let deadline = (now_ms + 700).to_string();
    raw(&server, &["ZADD", "leasehold_rwlock_writers:{rw:deadw}", &deadline, "dead:1:write"]);
    let rw = client.read_write_lock("rw:deadw");
    assert!(rw.try_read().await.expect("try").is_none(), "held back while the entry lives");
    let start = Instant::now();
    let read = rw.try_read_with(Duration::from_secs(5), LEASE).await.expect("wait").expect("in");
    assert!(start.elapsed() < Duration::from_secs(2), "in once the dead writer's entry expired");
    read.unlock().await.expect("unlock");
}
both_servers!(a_dead_waiting_writer_blocks_readers_at_most_its_keepalive);

/// Readers waiting behind a writer whose lease ran out (it died holding the lock: no
/// message) all get in soon after, not one per reader's lease: a read hold does not
/// make the next reader in line wait for it.
async fn readers_behind_an_expired_writer_enter_together(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let dead = client.read_write_lock("rw:expired");
    dead.write_with_lease(Duration::from_millis(600)).await.expect("write").detach();
    let start = Instant::now();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let rw = client.read_write_lock("rw:expired");
            tokio::spawn(
                async move { rw.try_read_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in") },
            )
        })
        .collect();
    let mut guards = Vec::new();
    for reader in readers {
        guards.push(timeout(Duration::from_secs(4), reader).await.expect("in soon after the lease").expect("task"));
    }
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
}
both_servers!(readers_behind_an_expired_writer_enter_together);

/// A reader that a waiting writer keeps out (writer preference) does not keep that
/// writer from its turn when both wait in one client: here the reader waits first (held
/// back by another client's writer, which then gives up), the writer of its client
/// waits behind it, and the last read release lets the writer in at once, not at its
/// next keep-alive refresh (a third of the 10 s keep-alive). Readers wait as shared
/// waiters, in no line (`QueueKind::Readers`).
async fn a_reader_held_back_by_a_writer_does_not_stall_it(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let read = a.read_write_lock("rw:stall").read().await.expect("read");
    let writers = "leasehold_rwlock_writers:{rw:stall}";
    let zcard = || raw(&server, &["ZCARD", writers]).as_int();
    let other_writer = a.read_write_lock("rw:stall");
    let gives_up = tokio::spawn(async move { other_writer.try_write_with(Duration::from_secs(20), LEASE).await });
    assert!(wait_until(Duration::from_secs(5), || zcard() == Some(1)).await, "the first writer recorded itself");
    let reader = b.read_write_lock("rw:stall");
    let held_back =
        tokio::spawn(async move { reader.try_read_with(Duration::from_secs(30), LEASE).await.map(|g| g.is_some()) });
    assert!(wait_until(Duration::from_secs(5), || b.stats().waiters == 1).await, "the reader waits first in client b");
    let writer = b.read_write_lock("rw:stall");
    let waiting = tokio::spawn(async move {
        let guard = writer.try_write_with(Duration::from_secs(30), LEASE).await;
        (Instant::now(), guard)
    });
    assert!(wait_until(Duration::from_secs(5), || zcard() == Some(2)).await, "the second writer recorded itself");
    gives_up.abort();
    assert!(wait_until(Duration::from_secs(5), || zcard() == Some(1)).await, "the first writer's entry went");
    let released = Instant::now();
    read.unlock().await.expect("unlock");
    let (at, write) = timeout(Duration::from_secs(10), waiting).await.expect("in time").expect("task");
    let write = write.expect("wait").expect("the writer got in");
    assert!(
        at.duration_since(released) < Duration::from_millis(1500),
        "woken by the last read release, not by its refresh: {:?}",
        at.duration_since(released)
    );
    write.unlock().await.expect("unlock");
    assert!(timeout(Duration::from_secs(5), held_back).await.expect("in time").expect("task").expect("wait"));
}
both_servers!(a_reader_held_back_by_a_writer_does_not_stall_it);

/// Another owner's `try_write` until it gets in (at most `within`): it must never get in
/// while `first` still believes it holds (`is_lost()` false before the attempt is sent).
/// Returns how long after `start` it got in.
async fn writer_never_overlaps(
    other: &leasehold::ReadWriteLock,
    first: &leasehold::ReadGuard,
    start: Instant,
    within: Duration,
) -> Duration {
    loop {
        let believed_held = !first.is_lost();
        if let Some(write) = other.try_write_with(Duration::ZERO, LEASE).await.expect("try") {
            let at = start.elapsed();
            assert!(!believed_held, "another owner's write got in at {at:?} while the first reader believed it held");
            write.unlock().await.expect("unlock");
            return at;
        }
        assert!(start.elapsed() < within, "the write never got in");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 26: a read re-entered with a lease later than the first hold's, then released,
/// leaves the first guard's deadline at the re-entry's end; the first hold's timeout key
/// must live that long too (the re-entry raises it). Before, it kept its own lease, the
/// writer pruned the reader as dead at ~400 ms and got in while the first guard believed
/// it held until ~700 ms.
async fn a_released_reentry_never_lets_a_writer_in_under_a_live_guard(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let rw = a.read_write_lock("rw:reenter-lease");
    let lease = Duration::from_millis(400);
    let start = Instant::now();
    let first = rw.read_with_lease(lease).await.expect("read");
    tokio::time::sleep_until(start + Duration::from_millis(300)).await;
    let second = rw.try_read_with(Duration::ZERO, lease).await.expect("try").expect("re-entry");
    assert!(first.lease_deadline() > (start + Duration::from_millis(650)).into_std(), "the deadline moved");
    second.unlock().await.expect("unlock the re-entry");
    let key = format!("{{rw:reenter-lease}}:{}:rwlock_timeout:1", rw.owner());
    let left = Duration::from_millis(u64::try_from(pttl(&server, &key)).expect("the first hold's key lives"));
    assert!(
        Instant::now() + left + Duration::from_millis(5) >= first.lease_deadline().into(),
        "the first hold's key expires ({left:?} from now) no earlier than its guard's deadline"
    );
    let other = b.read_write_lock("rw:reenter-lease");
    let at = writer_never_overlaps(&other, &first, start, Duration::from_secs(5)).await;
    assert!(at < Duration::from_millis(700 + 1_000), "the writer got in soon after the lease: {at:?}");
}
both_servers!(a_released_reentry_never_lets_a_writer_in_under_a_live_guard);

/// The same for a re-entry released first in the other order (the outer guard first),
/// and for a watchdog hold's fixed re-entry: no guard's deadline runs ahead of the
/// server's expiry of its owner's read holds.
async fn an_outer_release_keeps_the_inner_reads_expiry(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let rw = a.read_write_lock("rw:outer");
    let start = Instant::now();
    let outer = rw.read_with_lease(Duration::from_millis(400)).await.expect("read");
    tokio::time::sleep_until(start + Duration::from_millis(300)).await;
    let inner = rw.try_read_with(Duration::ZERO, Duration::from_millis(400)).await.expect("try").expect("re-entry");
    outer.unlock().await.expect("unlock the outer hold");
    let other = b.read_write_lock("rw:outer");
    writer_never_overlaps(&other, &inner, start, Duration::from_secs(5)).await;
}
both_servers!(an_outer_release_keeps_the_inner_reads_expiry);

/// A release that leaves a watchdog read hold moves the guards' deadline to the
/// watchdog lease from now: the owner's remaining timeout keys are raised with the Hash,
/// not only at the watchdog's next round.
async fn a_release_under_a_watchdog_read_raises_its_timeout_keys(on: ServerKind) {
    let server = on.start();
    let client = client_with(&server.url(), Duration::from_secs(3)).await;
    let rw = client.read_write_lock("rw:release-raise");
    let outer = rw.read().await.expect("watchdog read");
    // Half way to the first renewal round (a third of the 3 s lease).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let inner = rw.try_read_with(Duration::ZERO, Duration::from_millis(200)).await.expect("try").expect("re-entry");
    inner.unlock().await.expect("unlock the re-entry");
    let key = format!("{{rw:release-raise}}:{}:rwlock_timeout:1", rw.owner());
    let left = Duration::from_millis(u64::try_from(pttl(&server, &key)).expect("the first hold's key lives"));
    assert!(
        Instant::now() + left + Duration::from_millis(5) >= outer.lease_deadline().into(),
        "the first hold's key expires ({left:?} from now) no earlier than its guard's deadline ({:?} from now)",
        outer.lease_deadline().saturating_duration_since(std::time::Instant::now())
    );
    outer.unlock().await.expect("unlock");
}
both_servers!(a_release_under_a_watchdog_read_raises_its_timeout_keys);

/// A downgrade (a read inside the write, then the write released) keeps the read's
/// expiry at least its guard's deadline, whichever lease is longer.
async fn a_downgrade_never_lets_a_writer_in_under_a_live_read(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let rw = a.read_write_lock("rw:downgrade-lease");
    let start = Instant::now();
    let write = rw.write_with_lease(Duration::from_millis(400)).await.expect("write");
    tokio::time::sleep_until(start + Duration::from_millis(300)).await;
    let read = rw.try_read_with(Duration::ZERO, Duration::from_millis(400)).await.expect("try").expect("read in write");
    write.unlock().await.expect("the downgrade");
    let other = b.read_write_lock("rw:downgrade-lease");
    writer_never_overlaps(&other, &read, start, Duration::from_secs(5)).await;
}
both_servers!(a_downgrade_never_lets_a_writer_in_under_a_live_read);

/// Issue 26: after `force_unlock` removed this owner's read hold, its `write()` is not
/// refused as an upgrade from local state: the server holds no read of it, so the write
/// is taken at once (the watchdog has not noticed yet: 30 s lease).
async fn a_force_unlocked_readers_write_succeeds_at_once(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let rw = client.read_write_lock("rw:force-upgrade");
    let read = rw.read().await.expect("read");
    assert!(client.read_write_lock("rw:force-upgrade").force_unlock().await.expect("force"));
    let start = Instant::now();
    let write = timeout(Duration::from_secs(2), rw.write()).await.expect("at once").expect("no WouldDeadlock");
    assert!(start.elapsed() < Duration::from_millis(1_000), "{:?}", start.elapsed());
    assert!(read.is_lost(), "the read the server dropped is known lost");
    assert_eq!(raw(&server, &["HGET", "rw:force-upgrade", "mode"]).as_str(), Some("write"));
    write.unlock().await.expect("unlock");
    // A live read still refuses the upgrade, nothing written.
    let read = rw.read().await.expect("read");
    let refused = rw.try_write().await.expect_err("an upgrade");
    assert_eq!(refused.kind(), ErrorKind::WouldDeadlock);
    assert!(!read.is_lost());
    assert_eq!(raw(&server, &["HGET", "rw:force-upgrade", "mode"]).as_str(), Some("read"));
    read.unlock().await.expect("unlock");
}
both_servers!(a_force_unlocked_readers_write_succeeds_at_once);
