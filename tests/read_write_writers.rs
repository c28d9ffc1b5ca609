//! The read/write lock's waiting writers in order (issue 29 item 3): a free lock goes to
//! the earliest live waiting writer, whatever client it is on and whoever tries first
//! (`leasehold_rwlock_writers:order:{NAME}`, a List beside the writers' deadlines in
//! `leasehold_rwlock_writers:{NAME}`), and a waiting writer whose process died blocks
//! the writers behind it only until its entry's deadline (its keep-alive) passes.
//! Against real servers (`NAME::redis`, `NAME::valkey`); waits are bounded by deadlines.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_test_support::{both_servers, client, client_with, raw, wait_until, HolderProcess, Proxy, ServerKind};
use tokio::time::{timeout, Instant};

const LEASE: Duration = Duration::from_secs(10);

fn writers_key(name: &str) -> String {
    format!("leasehold_rwlock_writers:{{{name}}}")
}

fn order_key(name: &str) -> String {
    format!("leasehold_rwlock_writers:order:{{{name}}}")
}

fn waiting_writers(server: &leasehold_test_support::RedisServer, name: &str) -> i64 {
    raw(server, &["ZCARD", &writers_key(name)]).as_int().unwrap_or(0)
}

/// Three writers on three clients queue up, one after another, behind a read phase.
/// When it ends, the first has the slowest connection (200 ms each way through a proxy)
/// and the third the fastest (none): without an order among writers the third's attempt
/// arrives first and takes the free lock (then the second), so they would get in
/// backwards. With it, each gets in in the order it came: the faster ones are refused
/// while an earlier live writer waits, and each write release wakes them again.
async fn waiting_writers_get_in_in_the_order_they_came_across_clients(on: ServerKind) {
    let server = on.start();
    let (p1, p2) = (Proxy::start(&server.addr()).await, Proxy::start(&server.addr()).await);
    let reader_client = client(&server).await;
    let clients = [
        client_with(&p1.url(), Duration::from_secs(30)).await,
        client_with(&p2.url(), Duration::from_secs(30)).await,
        client(&server).await,
    ];
    let name = "rw:writerfifo";
    let phase = reader_client.read_write_lock(name).read().await.expect("read");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let rw = c.read_write_lock(name);
        let order = order.clone();
        writers.push(tokio::spawn(async move {
            let guard = rw.try_write_with(Duration::from_secs(30), LEASE).await.expect("wait").expect("in");
            order.lock().expect("order").push(i + 1);
            tokio::time::sleep(Duration::from_millis(50)).await;
            guard.unlock().await.expect("unlock");
        }));
        let queued = i as i64 + 1;
        assert!(
            wait_until(Duration::from_secs(10), || waiting_writers(&server, name) == queued).await,
            "writer {queued} waits"
        );
    }
    assert_eq!(raw(&server, &["LLEN", &order_key(name)]).as_int(), Some(3), "in the order List");
    p1.set_latency(Duration::from_millis(200));
    p2.set_latency(Duration::from_millis(100));
    phase.unlock().await.expect("unlock");
    for writer in writers {
        timeout(Duration::from_secs(20), writer).await.expect("every writer got in").expect("task");
    }
    assert_eq!(*order.lock().expect("order"), vec![1, 2, 3], "in the order they came");
    assert_eq!(waiting_writers(&server, name), 0);
    assert_eq!(raw(&server, &["EXISTS", &order_key(name), name]).as_int(), Some(0), "nothing left");
}
both_servers!(waiting_writers_get_in_in_the_order_they_came_across_clients);

/// A waiting writer whose process is killed (`SIGKILL`) stays first in the writers' order until
/// its entry's deadline (its keep-alive, 2 s, after its last refresh) passes: the
/// writer behind it is refused until then, retries at that deadline (the wait its reply
/// gave), drops the dead entry and gets in: never later than the keep-alive (+ slack for
/// a loaded machine) after the kill.
async fn a_killed_waiting_writer_blocks_later_writers_only_for_its_keepalive(on: ServerKind) {
    const KEEPALIVE_MS: u64 = 2_000;
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "rw:deadwriter";
    let phase = a.read_write_lock(name).read().await.expect("read");
    let mut child = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_fair_waiter"),
        &[&server.url(), name, "1", &KEEPALIVE_MS.to_string(), "0", "write"],
    );
    let line = child.next_line(Duration::from_secs(10)).await.expect("QUEUING line");
    let dead = line.strip_prefix("QUEUING ").expect("QUEUING <writer>").to_owned();
    assert!(wait_until(Duration::from_secs(10), || waiting_writers(&server, name) == 1).await, "it waits");
    child.signal("KILL");
    let killed = Instant::now();
    let writer = b.read_write_lock(name);
    let next = tokio::spawn(async move {
        let guard = writer.try_write_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        (Instant::now(), guard)
    });
    assert!(wait_until(Duration::from_secs(5), || waiting_writers(&server, name) == 2).await, "behind it");
    let head = raw(&server, &["LINDEX", &order_key(name), "0"]);
    assert_eq!(head.as_str(), Some(dead.as_str()), "the dead writer is first");
    phase.unlock().await.expect("unlock");
    let (at, guard) = timeout(Duration::from_secs(10), next).await.expect("the writer got in").expect("task");
    let after_kill = at.duration_since(killed);
    // Its last refresh was at most a third of the keep-alive before the kill.
    let earliest = Duration::from_millis(KEEPALIVE_MS * 2 / 3 - 200);
    assert!(after_kill >= earliest, "not in while the dead writer's entry was live: {after_kill:?}");
    assert!(after_kill < Duration::from_millis(KEEPALIVE_MS + 1_500), "in once its keep-alive ran out: {after_kill:?}");
    let score = raw(&server, &["ZSCORE", &writers_key(name), &dead]);
    assert!(score.as_str().is_none() && score.as_int().is_none(), "the dead entry was dropped: {score:?}");
    assert_eq!(raw(&server, &["LLEN", &order_key(name)]).as_int(), Some(0), "and its place");
    guard.unlock().await.expect("unlock");
}
both_servers!(a_killed_waiting_writer_blocks_later_writers_only_for_its_keepalive);

/// Two writers of one client whose order on the server is not their order in the
/// client's local line (two fast paths answered in another order than they were sent;
/// made here by moving the second to the front of the writers' order by hand). When the
/// read phase ends, the read-unlock `0` gives every writer of the line a turn, so the
/// server's first gets in at once; waking only the line's first (a `Lock`'s unlock) would
/// leave it asleep until its refresh, a third of the keep-alive (3.3 s) later.
async fn the_servers_first_writer_gets_in_when_its_client_line_is_in_another_order(on: ServerKind) {
    let server = on.start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "rw:writerlines";
    let phase = a.read_write_lock(name).read().await.expect("read");
    let (first, second) = (b.read_write_lock(name), b.read_write_lock(name));
    let second_field = format!("{}:write", second.owner());
    let first_task = tokio::spawn(async move {
        let guard = first.try_write_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        let at = Instant::now();
        guard.unlock().await.expect("unlock");
        at
    });
    assert!(wait_until(Duration::from_secs(5), || waiting_writers(&server, name) == 1).await, "the first waits");
    let second_task = tokio::spawn(async move {
        let guard = second.try_write_with(Duration::from_secs(20), LEASE).await.expect("wait").expect("in");
        let at = Instant::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        guard.unlock().await.expect("unlock");
        at
    });
    assert!(wait_until(Duration::from_secs(5), || waiting_writers(&server, name) == 2).await, "the second waits");
    raw(&server, &["LREM", &order_key(name), "0", &second_field]);
    raw(&server, &["LPUSH", &order_key(name), &second_field]);
    let released = Instant::now();
    phase.unlock().await.expect("unlock");
    let second_in = timeout(Duration::from_secs(10), second_task).await.expect("in").expect("task");
    let first_in = timeout(Duration::from_secs(10), first_task).await.expect("in").expect("task");
    let waited = second_in.duration_since(released);
    assert!(waited < Duration::from_millis(1_500), "the server's first got in at the phase's end: {waited:?}");
    assert!(first_in > second_in, "then the other");
}
both_servers!(the_servers_first_writer_gets_in_when_its_client_line_is_in_another_order);
