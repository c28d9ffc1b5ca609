//! The blocking API (`leasehold::blocking`, feature `blocking`) on a real redis-server,
//! called from plain threads: no `#[tokio::test]`, no runtime of the test's own except
//! where a test checks that a call made inside one is refused.
//!
//! Waits use deadlines ([`eventually`]), never a sleep that hopes; the one sleep is the
//! point of its test (the user thread sleeps while the runtime thread renews).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use leasehold::blocking::Client;
use leasehold::ErrorKind;
use leasehold_test_support::{command_timeout_for, raw, Proxy, RedisServer, RespValue};

/// A blocking client on `server` with `watchdog` as its lease, as the async tests'
/// `client_with` makes one.
fn client_with(server: &RedisServer, watchdog: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_timeout(watchdog)
        .command_timeout(command_timeout_for(watchdog))
        .connect()
        .unwrap_or_else(|error| panic!("connect {}: {error}", server.url()))
}

fn client(server: &RedisServer) -> Client {
    client_with(server, Duration::from_secs(30))
}

/// Polls `condition` every few milliseconds until it holds or `deadline` passes.
fn eventually(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn exists(server: &RedisServer, key: &str) -> bool {
    raw(server, &["EXISTS", key]) == RespValue::Integer(1)
}

/// The server's `connected_clients` (the raw connection that asks included).
fn connected_clients(server: &RedisServer) -> u64 {
    let RespValue::Bulk(info) = raw(server, &["INFO", "clients"]) else { panic!("INFO clients") };
    let line = info.lines().find_map(|l| l.strip_prefix("connected_clients:")).expect("connected_clients");
    line.trim().parse().expect("a number")
}

/// Threads with their own handles exclude each other: never two inside at once, and
/// every one of them gets its turns.
#[test]
fn threads_with_their_own_handles_exclude_each_other() {
    let server = RedisServer::start();
    let client = client(&server);
    let inside = Arc::new(AtomicBool::new(false));
    let entries = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (client, inside, entries) = (client.clone(), inside.clone(), entries.clone());
            std::thread::spawn(move || {
                let lock = client.lock("shared"); // its own owner
                for _ in 0..10 {
                    let guard = lock.lock().expect("lock");
                    assert!(!inside.swap(true, Ordering::SeqCst), "two threads inside at once");
                    std::thread::sleep(Duration::from_millis(1));
                    inside.store(false, Ordering::SeqCst);
                    entries.fetch_add(1, Ordering::SeqCst);
                    guard.unlock().expect("unlock");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a thread panicked");
    }
    assert_eq!(entries.load(Ordering::SeqCst), 40);
    assert!(!exists(&server, "shared"), "the last unlock deleted the key");
}

/// One handle re-enters, from its own thread or from another through an `Arc`; another
/// handle is another owner and is excluded until the last hold is released.
#[test]
fn a_handle_re_enters_and_another_is_excluded() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = Arc::new(client.lock("reentrant"));
    let other = client.lock("reentrant");
    let outer = lock.lock().expect("lock");
    let inner = lock.try_lock().expect("try_lock").expect("the owner re-enters");
    let shared = Arc::clone(&lock);
    let from_thread =
        std::thread::spawn(move || shared.try_lock().expect("try_lock").map(|g| g.unlock())).join().expect("thread");
    assert!(matches!(from_thread, Some(Ok(()))), "the same handle re-enters from another thread");
    assert_eq!(lock.hold_count().expect("count"), 2);
    assert!(other.try_lock().expect("other").is_none(), "another owner is excluded");
    assert!(other.try_lock_for(Duration::from_millis(100)).expect("other waits").is_none());
    inner.unlock().expect("unlock inner");
    assert!(lock.is_held().expect("held"), "the outer hold remains");
    outer.unlock().expect("unlock outer");
    assert!(!lock.is_locked().expect("locked"));
    let taken = other.try_lock().expect("other").expect("free now");
    taken.unlock().expect("unlock");
}

/// The runtime thread renews a watchdog hold while the user thread sleeps 3 lease
/// periods: the hold is never lost, the key keeps a TTL, and another client stays out.
#[test]
fn the_watchdog_renews_while_the_user_thread_sleeps() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = client_with(&server, watchdog);
    let rival = client_with(&server, watchdog);
    let guard = client.lock("renewed").lock().expect("lock");
    assert!(guard.is_watchdog());
    std::thread::sleep(watchdog * 3);
    assert!(!guard.is_lost(), "lost while the user thread slept");
    let ttl = raw(&server, &["PTTL", "renewed"]).as_int().expect("PTTL");
    assert!(ttl > 0, "the key's TTL was renewed (PTTL {ttl})");
    assert!(rival.lock("renewed").try_lock().expect("rival").is_none(), "another owner is kept out");
    assert!(!guard.wait_lost(Duration::from_millis(200)).expect("wait_lost"), "a renewed hold is not lost");
    guard.unlock().expect("unlock after 3 lease periods");
    assert!(!exists(&server, "renewed"));
}

/// A lock holder in another process (`tests/bin/holder.rs`), killed on drop.
struct Holder {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Holder {
    fn start(url: &str, name: &str, watchdog: Duration) -> Holder {
        let mut child = Command::new(env!("CARGO_BIN_EXE_holder"))
            .args([url, name, &watchdog.as_millis().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn holder");
        let stdin = child.stdin.take().expect("stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let line = lines.next().expect("a LOCKED line").expect("read");
        assert!(line.starts_with("LOCKED "), "unexpected line {line:?}");
        Holder { child, stdin, lines }
    }

    fn unlock(&mut self) {
        writeln!(self.stdin, "UNLOCK").expect("write to holder");
        self.stdin.flush().expect("flush");
        let line = self.lines.next().expect("an UNLOCK line").expect("read");
        assert_eq!(line, "UNLOCK OK");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking waiter is woken by a release in another process: it gets the lock within
/// a few seconds of the release, while the holder's 30 s watchdog lease would have kept
/// it out far longer (only the release message wakes it this fast).
#[test]
fn a_waiter_is_woken_by_a_release_in_another_process() {
    let server = RedisServer::start();
    let mut holder = Holder::start(&server.url(), "handed", Duration::from_secs(30));
    let client = client(&server);
    let (acquired_tx, acquired) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let guard = client.lock("handed").lock().expect("lock");
        acquired_tx.send(Instant::now()).expect("report");
        guard.unlock().expect("unlock");
    });
    assert!(acquired.recv_timeout(Duration::from_millis(300)).is_err(), "the waiter got in while the holder held");
    let released = Instant::now();
    holder.unlock();
    let got = acquired.recv_timeout(Duration::from_secs(10)).expect("the waiter was woken");
    let waited = got.saturating_duration_since(released);
    assert!(waited < Duration::from_secs(5), "woken {waited:?} after the release (the lease was 30 s)");
    waiter.join().expect("waiter thread");
}

/// A blocking call on a thread that runs async tasks is refused with `AsyncContext`,
/// nothing sent, on a worker and inside `block_on` of both flavours; inside
/// `spawn_blocking` it works, as tokio allows.
#[test]
fn a_call_inside_an_async_runtime_is_refused() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = Arc::new(client.lock("async"));
    let guard = lock.lock().expect("lock from a plain thread");
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    for runtime in [&current, &multi] {
        let refused = runtime.block_on(async {
            let in_block_on = lock.try_lock().expect_err("inside block_on");
            let url = server.url();
            let connect = Client::connect(&url).expect_err("connect inside block_on");
            let wait = guard.wait_lost(Duration::from_secs(1)).expect_err("wait_lost inside block_on");
            let shared = Arc::clone(&lock);
            let on_worker = tokio::spawn(async move { shared.hold_count().expect_err("on a worker") });
            [in_block_on, connect, wait, on_worker.await.expect("task")]
        });
        for error in refused {
            assert_eq!(error.kind(), ErrorKind::AsyncContext, "{error}");
            assert!(error.is_not_sent());
        }
        let shared = Arc::clone(&lock);
        let in_blocking = runtime.block_on(async { tokio::task::spawn_blocking(move || shared.hold_count()).await });
        assert_eq!(in_blocking.expect("task").expect("allowed in spawn_blocking"), 1);
    }
    // Still held, nothing was sent by the refused calls.
    assert_eq!(lock.hold_count().expect("count"), 1);
    guard.unlock().expect("unlock");
}

/// A dropped guard is released in the background; `wait_lost` answers when another
/// client force-unlocks a hold; every kind works through the blocking API.
#[test]
fn every_kind_guards_drop_and_lost_signal() {
    let server = RedisServer::start();
    // A short watchdog: a force-unlocked holder finds out at its next renewal (500 ms).
    let watchdog = Duration::from_millis(1500);
    let client = Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .watchdog_timeout(watchdog)
        .command_timeout(command_timeout_for(watchdog))
        .connect()
        .expect("connect");
    let admin = self::client(&server);

    drop(client.lock("dropped").lock().expect("lock"));
    assert!(eventually(Duration::from_secs(5), || !exists(&server, "app:dropped")), "a dropped guard was released");

    let guard = client.lock("forced").lock().expect("lock");
    assert!(admin.lock("app:forced").force_unlock().expect("force"));
    assert!(guard.wait_lost(Duration::from_secs(10)).expect("wait_lost"), "told it was lost");
    assert!(guard.is_lost());
    let error = guard.unlock().expect_err("lost");
    assert!(error.is_lock_lost() || error.is_not_owner(), "{error}");

    let fenced = client.fenced_lock("ledger");
    let first = fenced.lock().expect("fenced");
    let token = first.token();
    assert!(first.fenced_set("balance", "1").expect("write").is_written());
    first.unlock().expect("unlock");
    let second = fenced.try_lock().expect("fenced again").expect("free");
    assert!(second.token() > token, "a fresh hold has a larger token");
    second.unlock().expect("unlock");

    let fair = client.fair_lock("queue");
    let held = fair.lock().expect("fair");
    assert!(client.fair_lock("queue").try_lock_for(Duration::from_millis(50)).expect("fair wait").is_none());
    held.unlock().expect("unlock");
    // At its deadline, in the background.
    assert!(
        eventually(Duration::from_secs(5), || !exists(&server, "redisson_lock_queue:{app:queue}")),
        "the timed-out waiter left the queue"
    );

    let (a, b) = (client.read_write_lock("catalog"), client.read_write_lock("catalog"));
    let (read_a, read_b) = (a.read().expect("read a"), b.read().expect("read b: readers share"));
    assert!(a.is_read_locked().expect("read locked"));
    assert!(client.read_write_lock("catalog").try_write().expect("writer").is_none());
    assert_eq!(a.write().expect_err("an upgrade").kind(), ErrorKind::WouldDeadlock);
    read_a.unlock().expect("unlock a");
    read_b.unlock().expect("unlock b");
    let write = a.try_write_for(Duration::from_secs(5)).expect("write").expect("free");
    assert!(write.is_renewed(), "the bounded form is renewed");
    assert!(b.try_read_for(Duration::from_millis(50)).expect("read wait").is_none(), "the writer excludes");
    write.unlock().expect("unlock write");
    let read = b.try_read_for(Duration::from_secs(5)).expect("read").expect("free");
    assert!(read.is_renewed());
    read.unlock().expect("unlock read");

    let simple = client.simple_lock("job");
    let taken = simple.try_lock_with(Duration::ZERO, Duration::from_secs(10)).expect("simple").expect("free");
    assert!(simple.try_lock_with(Duration::ZERO, Duration::from_secs(10)).expect("again").is_none(), "not reentrant");
    assert!(!taken.is_lost());
    assert_eq!(taken.key(), "app:job");
    assert!(!taken.wait_lost(Duration::from_millis(10)).expect("wait lost"), "10 s lease");
    taken.unlock().expect("unlock simple");
    let short = simple.lock_with_lease(Duration::from_millis(200)).expect("simple");
    assert!(short.wait_lost(Duration::from_secs(5)).expect("wait lost"), "lost at its deadline");
    // The guard's deadline is never later than the server's: the key may outlive the
    // lost signal by a round trip, never by much.
    assert!(eventually(Duration::from_secs(2), || !exists(&server, "app:job")), "the key expired with its lease");
}

/// Dropping the last clone of the client (lock handles included) releases what it
/// still holds and ends its runtime, without blocking: a forgotten guard's lock, a guard
/// still alive (which then reports lost and whose unlock is `Shutdown`), and a guard
/// dropped just before (its background release finishes first).
#[test]
fn dropping_the_last_client_releases_what_it_still_holds() {
    let server = RedisServer::start();
    let idle = connected_clients(&server);
    let client = client(&server);
    let (forgotten, kept, dropped) = (client.lock("forgotten"), client.lock("kept"), client.lock("dropped"));
    std::mem::forget(forgotten.lock().expect("lock forgotten"));
    let alive = kept.lock().expect("lock kept");
    let last = dropped.lock().expect("lock dropped");
    assert!(connected_clients(&server) > idle);
    drop((forgotten, kept, dropped));
    drop(last);
    let dropping = Instant::now();
    drop(client);
    // A drop that waited on the server would wait up to a command timeout: it returns
    // faster than that by a factor (4), however loaded the machine.
    let bound = command_timeout_for(Duration::from_secs(30)) / 4;
    assert!(dropping.elapsed() < bound, "the last drop blocked {:?}", dropping.elapsed());
    for key in ["forgotten", "kept", "dropped"] {
        // The watchdog lease is 30 s: only the release at the drop removes them this fast.
        assert!(eventually(Duration::from_secs(5), || !exists(&server, key)), "{key} was not released");
    }
    assert!(eventually(Duration::from_secs(5), || connected_clients(&server) == idle), "the connections were quit");
    assert!(alive.is_lost(), "a guard that outlived its client holds nothing");
    assert!(alive.wait_lost(Duration::from_secs(1)).expect("wait_lost"));
    assert_eq!(alive.unlock().expect_err("shut down").kind(), ErrorKind::Shutdown);
}

/// `shutdown` releases every hold and waits; later calls are `Shutdown`, nothing sent.
#[test]
fn shutdown_releases_and_refuses_later_calls() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("job");
    let guard = lock.lock().expect("lock");
    client.shutdown().expect("shutdown");
    assert!(client.is_shut_down());
    assert!(!exists(&server, "job"), "released by the time shutdown returned");
    assert_eq!(lock.try_lock().expect_err("shut down").kind(), ErrorKind::Shutdown);
    assert_eq!(guard.unlock().expect_err("shut down").kind(), ErrorKind::Shutdown);
}

/// The last drop lets the releases of guards dropped just before it finish before it
/// shuts the client down: two guards of one hold dropped with 100 ms of latency, so the
/// second release waits for the first's answer (the owner's turn); the client dropped at
/// once. Without that wait the second release would find the client closed and the key
/// would stay for its 30 s lease.
#[test]
fn the_last_drop_lets_earlier_background_releases_finish() {
    let server = RedisServer::start();
    // The proxy's tasks need a runtime; the client under test never runs on it.
    let proxy_runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let proxy = proxy_runtime.block_on(Proxy::start(&server.addr()));
    let client = Client::builder().url(proxy.url()).command_timeout(Duration::from_secs(2)).connect().expect("connect");
    let lock = client.lock("nested");
    let (outer, inner) = (lock.lock().expect("lock"), lock.lock().expect("re-enter"));
    proxy.set_latency(Duration::from_millis(100));
    drop(inner);
    drop(outer);
    drop(lock);
    drop(client);
    assert!(eventually(Duration::from_secs(5), || !exists(&server, "nested")), "the second release did not land");
}

/// The blocking semaphore: two threads share one permit, a waiter blocked in `acquire`
/// is let in when another thread drops its permit guard, a forgotten permit stays taken,
/// and a call inside an async runtime is refused with nothing sent.
#[test]
fn a_blocking_semaphore_hands_its_permit_between_threads() {
    let server = RedisServer::start();
    let client = client(&server);
    let sem = client.semaphore("bsem:one");
    assert!(sem.try_set_permits(1).expect("set"));
    let held = sem.acquire(1).expect("acquire");
    assert_eq!(held.permits(), 1);
    assert!(sem.try_acquire(1).expect("try").is_none(), "the one permit is taken");
    let other = client.clone();
    let waiter = std::thread::spawn(move || {
        let sem = other.semaphore("bsem:one");
        sem.try_acquire_for(1, Duration::from_secs(10)).expect("wait").map(|permit| permit.detach())
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while client.stats().waiters == 0 {
        assert!(std::time::Instant::now() < deadline, "the other thread waits");
        std::thread::yield_now();
    }
    drop(held); // gives the permit back in the background
    assert!(waiter.join().expect("thread").is_some(), "the waiter got the dropped permit");
    assert_eq!(sem.available_permits().expect("count"), 0, "the waiter forgot its permit: still taken");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let refused = runtime.block_on(async { sem.release(1) }).expect_err("refused");
    assert_eq!(refused.kind(), ErrorKind::AsyncContext);
    assert_eq!(sem.available_permits().expect("count"), 0, "nothing sent");
    sem.release(1).expect("release the forgotten permit");
    sem.acquire(1).expect("acquire").release().expect("release");
    assert_eq!(sem.available_permits().expect("count"), 1);
}

/// A latch counted down by one thread releases the waiters of other threads (each with
/// its own handle), and not before the count reaches zero.
#[test]
fn a_latch_counted_down_by_one_thread_releases_waiters_on_others() {
    let server = RedisServer::start();
    let client = client(&server);
    let latch = client.count_down_latch("round");
    assert_eq!(latch.try_set_count(0).expect_err("a zero count").kind(), ErrorKind::InvalidArgument);
    assert!(latch.try_set_count(2).expect("set"));
    assert!(!latch.try_set_count(5).expect("set again"), "a live latch is not reset");
    let (opened, opened_rx) = mpsc::channel();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (latch, opened) = (client.count_down_latch("round"), opened.clone());
            std::thread::spawn(move || opened.send(latch.try_wait_for(Duration::from_secs(20))).expect("send"))
        })
        .collect();
    let counter = latch.clone();
    let counted = std::thread::spawn(move || {
        let left = counter.count_down().expect("count down");
        // Still closed at 1: no waiter may have returned (bounded look, not a proof).
        let early = opened_rx.recv_timeout(Duration::from_millis(200));
        assert!(early.is_err(), "a waiter returned at count {left}: {early:?}");
        assert_eq!(left, 1);
        assert_eq!(counter.count_down().expect("count down"), 0);
        opened_rx
    });
    let opened_rx = counted.join().expect("counter thread");
    let started = Instant::now();
    for _ in 0..3 {
        let answer = opened_rx.recv_timeout(Duration::from_secs(10)).expect("a waiter returned");
        assert!(answer.expect("wait"), "opened, not timed out");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "woken by the message: {:?}", started.elapsed());
    waiters.into_iter().for_each(|waiter| waiter.join().expect("waiter thread"));
    assert_eq!(latch.count().expect("count"), 0);
    assert!(!exists(&server, "round"), "the count down to zero deletes the key");
    latch.wait().expect("an open latch returns at once");
}

/// `try_wait_for` returns `false` at its bound when nobody counts down; `delete` opens
/// the latch for a waiter.
#[test]
fn a_latch_try_wait_for_returns_false_at_its_bound() {
    let server = RedisServer::start();
    let client = client(&server);
    let latch = client.count_down_latch("gate").with_recheck(Duration::from_millis(100));
    assert!(latch.try_set_count(1).expect("set"));
    let started = Instant::now();
    assert!(!latch.try_wait_for(Duration::from_millis(300)).expect("wait"), "nobody counted down");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(3), "{waited:?}");
    assert_eq!(latch.count().expect("count"), 1);
    let waiter = latch.clone();
    let waiting = std::thread::spawn(move || waiter.try_wait_for(Duration::from_secs(20)));
    assert!(latch.delete().expect("delete"), "there was a latch");
    assert!(waiting.join().expect("waiter thread").expect("wait"), "a deleted latch is open");
}

/// Threads taking overlapping multi-locks, named in opposite orders (and one made by
/// `MultiLock::new` over two clients' blocking locks), exclude each other and never
/// deadlock: every round of every thread gets its turn within a bound.
#[test]
fn multi_locks_on_overlapping_sets_exclude_each_other_in_both_orders() {
    let server = RedisServer::start();
    let (first, second) = (client(&server), client(&server));
    let inside = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let make: [Box<dyn Fn() -> leasehold::blocking::MultiLock + Send>; 3] = [
        Box::new({
            let client = first.clone();
            move || client.multi_lock(["m:a", "m:b", "m:c"])
        }),
        Box::new({
            let client = second.clone();
            move || client.multi_lock(["m:c", "m:b", "m:a"])
        }),
        Box::new({
            let (first, second) = (first.clone(), second);
            move || leasehold::blocking::MultiLock::new([second.lock("m:c"), first.lock("m:a")])
        }),
    ];
    let started = Instant::now();
    let threads: Vec<_> = make
        .into_iter()
        .map(|make| {
            let (inside, rounds) = (inside.clone(), rounds.clone());
            std::thread::spawn(move || {
                let multi = make();
                for round in 0..15 {
                    let guard = multi.try_lock_for(Duration::from_secs(10)).expect("multi").expect("no deadlock");
                    assert!(!inside.swap(true, Ordering::SeqCst), "two multi-locks inside at once");
                    std::thread::sleep(Duration::from_millis(2)); // a window for an intruder
                    inside.store(false, Ordering::SeqCst);
                    rounds.fetch_add(1, Ordering::SeqCst);
                    if round % 5 == 4 {
                        drop(guard); // released in the background; the others still get in
                    } else {
                        guard.unlock().expect("unlock");
                    }
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|thread| thread.join().expect("contender thread"));
    assert_eq!(rounds.load(Ordering::SeqCst), 45);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let multi = first.multi_lock(["m:b", "m:a"]);
    assert_eq!(multi.keys(), ["m:a", "m:b"], "canonical order");
    let empty = leasehold::blocking::MultiLock::new(Vec::new());
    assert_eq!(empty.try_lock().expect_err("no member").kind(), ErrorKind::InvalidArgument);
}

/// A multi-guard's `wait_lost` answers when another client force-unlocks one member.
#[test]
fn a_multi_guard_is_told_when_a_member_is_lost() {
    let server = RedisServer::start();
    let client = client_with(&server, Duration::from_millis(900));
    let guard = client.multi_lock(["w:a", "w:b"]).lock().expect("multi");
    assert!(!guard.wait_lost(Duration::from_millis(50)).expect("wait_lost"), "held and renewed");
    assert!(self::client(&server).lock("w:b").force_unlock().expect("force"));
    assert!(guard.wait_lost(Duration::from_secs(10)).expect("wait_lost"), "told it was lost");
    assert!(guard.is_lost());
    guard.unlock().expect_err("a member was lost");
    assert!(eventually(Duration::from_secs(5), || !exists(&server, "w:a")), "the other member was given back");
}

/// The latch and the multi-lock refuse a blocking call inside an async runtime with
/// `AsyncContext`, nothing sent.
#[test]
fn latch_and_multi_lock_calls_inside_an_async_runtime_are_refused() {
    let server = RedisServer::start();
    let client = client(&server);
    let latch = client.count_down_latch("async-latch");
    let multi = client.multi_lock(["async:a", "async:b"]);
    let guard = multi.lock().expect("multi from a plain thread");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let refused = runtime.block_on(async {
        let set = latch.try_set_count(1).expect_err("try_set_count inside block_on");
        let other = client.multi_lock(["async:b"]).try_lock().expect_err("try_lock inside block_on");
        let lost = guard.wait_lost(Duration::from_secs(1)).expect_err("wait_lost inside block_on");
        [set, other, lost]
    });
    for error in refused {
        assert_eq!(error.kind(), ErrorKind::AsyncContext, "{error}");
        assert!(error.is_not_sent());
    }
    assert!(!exists(&server, "async-latch"), "nothing was sent");
    assert_eq!(latch.count().expect("count from a plain thread"), 0);
    guard.unlock().expect("unlock");
}

/// The blocking permit-expirable semaphore: a permit taken on one thread keeps the
/// other thread out until it is released, by the permit or by its id; a dropped permit
/// is released in the background.
#[test]
fn a_blocking_permit_expirable_semaphore_hands_out_leased_permits() {
    let server = RedisServer::start();
    let client = client(&server);
    let sem = client.permit_expirable_semaphore("bpes:one");
    assert!(sem.try_set_permits(1).expect("set"));
    let permit = sem.acquire_with_lease(Duration::from_secs(30)).expect("acquire");
    assert_eq!(permit.id().len(), 32);
    assert!(permit.lease_deadline() > std::time::Instant::now() + Duration::from_secs(20));
    assert!(!permit.is_renewed());
    assert!(!permit.is_lost());
    let other = client.permit_expirable_semaphore("bpes:one");
    assert!(other.try_acquire().expect("try").is_none(), "the one permit is taken");
    assert_eq!(other.acquired_permits().expect("acquired"), 1);
    permit.release().expect("release");
    let renewed = other.try_acquire_for(Duration::from_secs(5)).expect("try").expect("free again");
    assert!(renewed.is_renewed(), "renewed by the watchdog");
    let id = renewed.id().to_owned();
    drop(renewed);
    assert!(
        eventually(Duration::from_secs(5), || sem.available_permits().expect("count") == 1),
        "the drop released it"
    );
    let by_id = sem.try_acquire_with(Duration::from_secs(1), Duration::from_secs(30)).expect("wait").expect("in");
    assert_ne!(by_id.id(), id);
    assert!(other.try_release(by_id.id()).expect("by id"), "released by its id through another handle");
    assert!(by_id.release().is_err(), "already released by id");
}
