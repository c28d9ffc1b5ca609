//! The read/write lock's waiting readers admitted in one step and its phases (issue 29
//! items 2 and 3): a write release grants every registered waiting reader its hold in
//! the release script (`rw_admit.lua`), the readers' clients take the holds over
//! without a script, and phases alternate: readers waiting at a write release go before
//! the next writer, a waiting writer is not passed by readers that came after it.
//! Against real servers (`NAME::redis`, `NAME::valkey`); waits are bounded by
//! deadlines.

use std::time::Duration;

use leasehold_test_support::commandstats::{calls_during, total};
use leasehold_test_support::redisson_rwlock::REDISSON_READ_ACQUIRE;
use leasehold_test_support::{
    both_servers, client, hgetall, pttl, raw, wait_until, HolderProcess, RespValue, ServerKind,
};
use tokio::time::{timeout, Instant};

const LEASE: Duration = Duration::from_secs(10);

fn readers_key(name: &str) -> String {
    format!("leasehold_rwlock_readers:{{{name}}}")
}

fn registered(server: &leasehold_test_support::RedisServer, name: &str) -> i64 {
    raw(server, &["HLEN", &readers_key(name)]).as_int().unwrap_or(0)
}

/// Waits (at most 5 s) until `server` has run no script for 300 ms: the waiting readers'
/// calls are done. Whether it got there.
async fn quiet(server: &leasehold_test_support::RedisServer) -> bool {
    let scripts = || leasehold_test_support::commandstats::command_calls(server).get("evalsha").copied();
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut last, mut since) = (scripts(), Instant::now());
    while Instant::now() < deadline {
        let now = scripts();
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_millis(300) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn numsub(server: &leasehold_test_support::RedisServer, channel: &str) -> i64 {
    match raw(server, &["PUBSUB", "NUMSUB", channel]) {
        RespValue::Array(v) => v.get(1).and_then(RespValue::as_int).unwrap_or(0),
        _ => 0,
    }
}

/// 16 readers on 4 clients wait behind a writer; its release lets them all in with one
/// script (the release's own): no reader runs a script, and the server calls per
/// admitted reader (the release's `SET` of each timeout key, its fixed part shared)
/// stay at most 2 (Redisson's readers run their acquire script again after the
/// message: 7 calls each). Every hold is Redisson's layout with the reader's lease, and
/// each reader's guard counts one hold: unlocking them all leaves nothing.
async fn readers_waiting_at_a_write_release_get_in_in_one_step(on: ServerKind) {
    const READERS: usize = 16;
    let server = on.start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    let name = "rw:onestep";
    let write = clients[0].read_write_lock(name).write().await.expect("write");
    let mut readers = Vec::new();
    for i in 0..READERS {
        let rw = clients[i % 4].read_write_lock(name);
        readers.push(tokio::spawn(async move {
            let guard = rw.try_read_with(Duration::from_secs(30), LEASE).await.expect("wait").expect("read");
            (rw, guard)
        }));
    }
    assert!(
        wait_until(Duration::from_secs(10), || registered(&server, name) == READERS as i64).await,
        "every reader registered for a grant"
    );
    let grants = format!("leasehold_rwlock__grants:{{{name}}}");
    assert!(wait_until(Duration::from_secs(5), || numsub(&server, &grants) == 4).await, "every client listens");
    // A reader whose first call went out before its client's subscription was confirmed
    // makes one more call once it is (it may have missed a release meanwhile): wait until
    // those are done, so that the count below is the release's alone.
    assert!(quiet(&server).await, "the readers' calls settle");
    let mut admitted = Vec::new();
    let calls = calls_during(&server, async {
        write.unlock().await.expect("unlock");
        for reader in readers.drain(..) {
            admitted.push(timeout(Duration::from_secs(5), reader).await.expect("in at the release").expect("task"));
        }
    })
    .await;
    assert_eq!(calls.get("evalsha").copied().unwrap_or(0), 1, "only the release ran a script: {calls:?}");
    let per_reader = total(&calls) as f64 / READERS as f64;
    assert!(per_reader <= 2.0, "{per_reader:.2} server calls per admitted reader: {calls:?}");
    assert_eq!(raw(&server, &["HGET", name, "mode"]).as_str(), Some("read"));
    for (rw, guard) in &admitted {
        assert!(!guard.is_lost());
        assert_eq!(raw(&server, &["HGET", name, rw.owner()]).as_str(), Some("1"), "one hold each");
        let key = format!("{{{name}}}:{}:rwlock_timeout:1", rw.owner());
        let ttl = pttl(&server, &key);
        assert!(ttl > 8_000 && ttl <= 10_000, "the reader's own lease: {ttl}");
        assert!(guard.lease_deadline() <= std::time::Instant::now() + LEASE, "never later than the server's");
    }
    assert_eq!(registered(&server, name), 0, "the registrations went with the grant");
    for (_, guard) in admitted {
        guard.unlock().await.expect("unlock");
    }
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0), "each guard gave back exactly its hold");
}
both_servers!(readers_waiting_at_a_write_release_get_in_in_one_step);

/// A registered reader whose process was killed before the write release is granted
/// its hold all the same (its registration was live): the hold has the lease it asked
/// for and nobody renews it, so the next writer, waiting meanwhile, gets in once that
/// lease has run out, never before.
async fn a_granted_reader_whose_client_died_holds_only_its_lease(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "rw:deadgrant";
    let write = a.read_write_lock(name).write().await.expect("write");
    let mut child =
        HolderProcess::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &[&server.url(), name, "1", "10000", "0", "read:1500"]);
    let line = child.next_line(Duration::from_secs(10)).await.expect("QUEUING line");
    let owner = line.strip_prefix("QUEUING ").expect("QUEUING <owner>").to_owned();
    assert!(wait_until(Duration::from_secs(10), || registered(&server, name) == 1).await, "registered");
    child.signal("KILL");
    let writer = b.read_write_lock(name);
    let next = tokio::spawn(async move {
        let guard = writer.try_write_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        (Instant::now(), guard)
    });
    let writers = format!("leasehold_rwlock_writers:{{{name}}}");
    assert!(wait_until(Duration::from_secs(5), || raw(&server, &["ZCARD", &writers]).as_int() == Some(1)).await);
    let released = Instant::now();
    write.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["HGET", name, &owner]).as_str(), Some("1"), "the dead reader was granted");
    let key = format!("{{{name}}}:{owner}:rwlock_timeout:1");
    let ttl = pttl(&server, &key);
    assert!(ttl > 0 && ttl <= 1_500, "with the lease it asked for: {ttl}");
    let (at, guard) = timeout(Duration::from_secs(10), next).await.expect("the writer got in").expect("task");
    let waited = at.duration_since(released);
    assert!(waited >= Duration::from_millis(1_300), "never in under the granted read: {waited:?}");
    assert!(waited < Duration::from_millis(3_500), "in soon after the grant's lease: {waited:?}");
    assert!(hgetall(&server, name).iter().all(|(f, _)| f != &owner), "the dead reader pruned");
    assert_eq!(raw(&server, &["EXISTS", &key]).as_int(), Some(0), "its grant expired with its lease");
    guard.unlock().await.expect("unlock");
}
both_servers!(a_granted_reader_whose_client_died_holds_only_its_lease);

/// Phase order. A writer waiting behind a read phase is not passed by readers that came
/// after it (they register and wait); when the phase ends it gets in; the readers
/// waiting at its release get in before the next writer (waiting since before them),
/// which gets in when that read phase ends.
async fn phases_alternate_readers_at_a_write_release_go_before_the_next_writer(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "rw:phases";
    let writers = format!("leasehold_rwlock_writers:{{{name}}}");
    let zcard = || raw(&server, &["ZCARD", &writers]).as_int().unwrap_or(0);
    let first_phase = a.read_write_lock(name).read().await.expect("read");
    let w1 = b.read_write_lock(name);
    let w1_task = tokio::spawn(async move { w1.try_write_with(Duration::from_secs(20), LEASE).await });
    assert!(wait_until(Duration::from_secs(5), || zcard() == 1).await, "the first writer waits");
    // Readers after the waiting writer: they register, they do not get in.
    let mut late_readers = Vec::new();
    for i in 0..4 {
        let rw = if i % 2 == 0 { a.read_write_lock(name) } else { b.read_write_lock(name) };
        late_readers.push(tokio::spawn(async move {
            let guard = rw.try_read_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("read");
            (Instant::now(), guard)
        }));
    }
    assert!(wait_until(Duration::from_secs(5), || registered(&server, name) == 4).await, "they wait behind it");
    assert_eq!(hgetall(&server, name).len(), 2, "only the first phase's reader holds");
    first_phase.unlock().await.expect("unlock");
    let w1_guard = timeout(Duration::from_secs(5), w1_task).await.expect("in").expect("task").expect("wait");
    let w1_guard = w1_guard.expect("the first writer got in at the end of the read phase");
    assert!(late_readers.iter().all(|r| !r.is_finished()), "no later reader passed the writer");
    // A second writer waits while the first writes; then the first releases.
    let w2 = a.read_write_lock(name);
    let w2_task = tokio::spawn(async move {
        let guard = w2.try_write_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        (Instant::now(), guard)
    });
    assert!(wait_until(Duration::from_secs(5), || zcard() == 1).await, "the second writer waits");
    let released = Instant::now();
    w1_guard.unlock().await.expect("unlock");
    let mut guards = Vec::new();
    let mut last_in = released;
    for reader in late_readers {
        let (at, guard) = timeout(Duration::from_secs(5), reader).await.expect("in").expect("task");
        last_in = last_in.max(at);
        guards.push(guard);
    }
    assert!(last_in.duration_since(released) < Duration::from_secs(2), "in at the write release");
    assert!(!w2_task.is_finished(), "the readers waiting at the release went before the next writer");
    assert_eq!(raw(&server, &["HGET", name, "mode"]).as_str(), Some("read"));
    let phase_end = Instant::now();
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
    let (at, guard) = timeout(Duration::from_secs(5), w2_task).await.expect("in").expect("task");
    assert!(at >= phase_end, "the next writer got in after that read phase");
    guard.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0));
}
both_servers!(phases_alternate_readers_at_a_write_release_go_before_the_next_writer);

/// A grant whose message never arrives: the reader's wait finds it with its periodic
/// recheck (its registration's refresh, every third of the keep-alive), and counts
/// exactly one hold. Here the write is a Redisson-style hold set by hand and released by
/// hand as a write release grants (the reader's field, its timeout key with its lease,
/// the registration gone), publishing nothing on either channel.
async fn a_reader_whose_grant_message_is_lost_finds_its_grant(on: ServerKind) {
    let server = on.start();
    let keepalive = Duration::from_millis(1_500);
    let reader_client = leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_millis(500))
        .queue_keepalive(keepalive)
        .connect()
        .await
        .expect("connect");
    let name = "rw:lostgrant";
    raw(&server, &["HSET", name, "mode", "write", "java:1:write", "1"]);
    raw(&server, &["PEXPIRE", name, "60000"]);
    let rw = reader_client.read_write_lock(name);
    let owner = rw.owner().to_owned();
    let reader = tokio::spawn(async move {
        let guard = rw.try_read_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("read");
        (Instant::now(), guard, rw)
    });
    assert!(wait_until(Duration::from_secs(5), || registered(&server, name) == 1).await, "registered");
    let entry = raw(&server, &["HGET", &readers_key(name), &owner]).as_str().map(str::to_owned).expect("entry");
    assert!(entry.contains(":10000:"), "DEADLINE:LEASE:TICKET with the reader's lease: {entry}");
    // Its next call (the one after subscribing, or a refresh) re-registers with a new
    // ticket: grant right after it, so that only the periodic recheck can find the grant.
    let refreshed = wait_until(Duration::from_secs(3), || {
        raw(&server, &["HGET", &readers_key(name), &owner]).as_str().is_some_and(|now| now != entry)
    })
    .await;
    assert!(refreshed, "the waiting reader refreshes its registration");
    // The write release's grant, without its messages.
    raw(&server, &["HDEL", name, "java:1:write"]);
    raw(&server, &["HSET", name, "mode", "read", &owner, "1"]);
    let key = format!("{{{name}}}:{owner}:rwlock_timeout:1");
    raw(&server, &["SET", &key, "1", "PX", "10000"]);
    raw(&server, &["DEL", &readers_key(name)]);
    let granted = Instant::now();
    let (at, guard, rw) = timeout(Duration::from_secs(5), reader).await.expect("found its grant").expect("task");
    assert!(
        at.duration_since(granted) < keepalive,
        "found by the recheck (every {:?}), not a timer on the write's TTL: {:?}",
        keepalive / 3,
        at.duration_since(granted)
    );
    assert_eq!(raw(&server, &["HGET", name, &owner]).as_str(), Some("1"), "counted once");
    assert_eq!(raw(&server, &["EXISTS", &format!("{{{name}}}:{owner}:rwlock_timeout:2")]).as_int(), Some(0));
    guard.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0), "its one hold given back");
    drop(rw);
}
both_servers!(a_reader_whose_grant_message_is_lost_finds_its_grant);

/// What a Java (Redisson) reader does to a waiting leasehold writer: Redisson's read
/// acquire knows no queue, so it enters a read phase although a leasehold writer waits,
/// and the writer waits for that reader too (here: its release). leasehold readers that
/// came after the writer wait behind it.
async fn a_redisson_reader_passes_a_waiting_leasehold_writer(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "rw:java";
    let phase = a.read_write_lock(name).read().await.expect("read");
    let writer = b.read_write_lock(name);
    let waiting = tokio::spawn(async move { writer.try_write_with(Duration::from_secs(20), LEASE).await });
    let writers = format!("leasehold_rwlock_writers:{{{name}}}");
    assert!(wait_until(Duration::from_secs(5), || raw(&server, &["ZCARD", &writers]).as_int() == Some(1)).await);
    assert!(a.read_write_lock(name).try_read().await.expect("try").is_none(), "a leasehold reader waits");
    let java = "7c9e6679-7425-40de-944b-e07fc1f90ae7:1";
    let prefix = format!("{{{name}}}:{java}:rwlock_timeout");
    let reply =
        raw(&server, &["EVAL", REDISSON_READ_ACQUIRE, "2", name, &prefix, "10000", java, &format!("{java}:write")]);
    assert!(matches!(reply, RespValue::Nil), "the Java reader got in: {reply:?}");
    phase.unlock().await.expect("unlock");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the writer waits for the Java reader too");
    raw(&server, &["HDEL", name, java]);
    raw(&server, &["DEL", &format!("{prefix}:1")]);
    raw(&server, &["DEL", name]);
    raw(&server, &["PUBLISH", &format!("redisson_rwlock:{{{name}}}"), "0"]);
    let guard = timeout(Duration::from_secs(5), waiting).await.expect("in").expect("task").expect("wait");
    guard.expect("the writer got in after the Java reader left").unlock().await.expect("unlock");
}
both_servers!(a_redisson_reader_passes_a_waiting_leasehold_writer);
