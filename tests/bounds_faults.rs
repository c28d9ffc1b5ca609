//! A bound is a bound (issue 26): every bounded call answers within its bound when the
//! server is frozen (`SIGSTOP`) or gone (killed), however long the command timeout, and
//! what it may have left behind (a late acquire, a queue entry) is cleaned up in the
//! background once the server is back.
//!
//! Every test here uses a 5 s command timeout and a 1 s bound: a call that awaited one
//! command to its timeout would take 5 s or more. Standalone only: each test freezes or
//! kills its own server.

use std::time::Duration;

use leasehold::{Client, MultiLock};
use leasehold_test_support::{raw_command, wait_until, RedisServer, RespValue};
use tokio::time::Instant;

/// The command timeout: far above the bound, so that only a bounded wait can answer in
/// time.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound every call is given.
const BOUND: Duration = Duration::from_secs(1);
/// What a loaded 2-core CI machine may add to the bound.
const SLACK: Duration = Duration::from_millis(300);
/// A lease long enough that "free again" can only be the background clean-up's work,
/// not the lease running out.
const LEASE: Duration = Duration::from_secs(30);
/// How long the clean-up may take once the server is back (well under [`LEASE`]).
const CLEANED_WITHIN: Duration = Duration::from_secs(10);
/// A semaphore's permits, and the permit semaphore's.
const PERMITS: u32 = 3;

async fn client(server: &RedisServer) -> Client {
    client_on(&server.url()).await
}

async fn client_on(url: &str) -> Client {
    Client::builder()
        .url(url)
        .watchdog_timeout(LEASE)
        .command_timeout(COMMAND_TIMEOUT)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// The bounded calls under test.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Lock,
    LockWithLease,
    Fenced,
    Fair,
    Read,
    Write,
    Semaphore,
    Permit,
    Latch,
}

const KINDS: [Kind; 9] = [
    Kind::Lock,
    Kind::LockWithLease,
    Kind::Fenced,
    Kind::Fair,
    Kind::Read,
    Kind::Write,
    Kind::Semaphore,
    Kind::Permit,
    Kind::Latch,
];

impl Kind {
    fn name(self) -> String {
        format!("bounds:{self:?}").to_lowercase()
    }

    /// Sets the kind up and runs every script it uses once, so that the frozen server
    /// holds up the call under test, not a script load.
    async fn prepare(self, client: &Client) {
        let name = self.name();
        match self {
            Kind::Lock | Kind::LockWithLease => {
                client.lock(&name).lock().await.expect("warm").unlock().await.expect("unlock");
            }
            Kind::Fenced => {
                client.fenced_lock(&name).lock().await.expect("warm").unlock().await.expect("unlock");
            }
            Kind::Fair => {
                client.fair_lock(&name).lock().await.expect("warm").unlock().await.expect("unlock");
            }
            Kind::Read | Kind::Write => {
                let rw = client.read_write_lock(&name);
                rw.read().await.expect("warm read").unlock().await.expect("unlock");
                rw.write().await.expect("warm write").unlock().await.expect("unlock");
            }
            Kind::Semaphore => {
                let semaphore = client.semaphore(&name);
                assert!(semaphore.try_set_permits(PERMITS).await.expect("set"));
                semaphore.try_acquire(1).await.expect("warm").expect("free").release().await.expect("release");
            }
            Kind::Permit => {
                let semaphore = client.permit_expirable_semaphore(&name);
                assert!(semaphore.try_set_permits(PERMITS).await.expect("set"));
                semaphore.try_acquire().await.expect("warm").expect("free").release().await.expect("release");
            }
            Kind::Latch => {
                let latch = client.count_down_latch(&name);
                assert!(latch.try_set_count(1).await.expect("set"));
                assert_eq!(latch.count().await.expect("count"), 1);
            }
        }
    }

    /// The bounded call: whether it acquired (it cannot, with the server frozen or
    /// gone). A transient error is a valid answer too (the last one before the
    /// deadline).
    async fn call(self, client: &Client) -> leasehold::Result<bool> {
        let name = self.name();
        Ok(match self {
            Kind::Lock => client.lock(&name).try_lock_for(BOUND).await?.is_some(),
            Kind::LockWithLease => client.lock(&name).try_lock_with(BOUND, LEASE).await?.is_some(),
            Kind::Fenced => client.fenced_lock(&name).try_lock_for(BOUND).await?.is_some(),
            Kind::Fair => client.fair_lock(&name).try_lock_for(BOUND).await?.is_some(),
            Kind::Read => client.read_write_lock(&name).try_read_with(BOUND, LEASE).await?.is_some(),
            Kind::Write => client.read_write_lock(&name).try_write_with(BOUND, LEASE).await?.is_some(),
            Kind::Semaphore => client.semaphore(&name).try_acquire_for(1, BOUND).await?.is_some(),
            Kind::Permit => client.permit_expirable_semaphore(&name).try_acquire_with(BOUND, LEASE).await?.is_some(),
            Kind::Latch => client.count_down_latch(&name).try_wait_for(BOUND).await?,
        })
    }

    /// What is still held on `addr` (empty: nothing): a lock's keys (its hash, queue,
    /// deadlines, read holds' timeouts; a fenced lock's token counter is not a hold), a
    /// semaphore's missing permits, a permit semaphore's taken permits.
    fn held(self, addr: &str) -> Vec<String> {
        let name = self.name();
        match self {
            Kind::Semaphore => {
                let count = get(addr, &name);
                if count == PERMITS.to_string() {
                    Vec::new()
                } else {
                    vec![format!("{name} = {count}")]
                }
            }
            Kind::Permit => {
                let count = get(addr, &name);
                let taken: Vec<String> =
                    keys_with(addr, &name).into_iter().filter(|key| key_type(addr, key) == "zset").collect();
                let mut held: Vec<String> = taken.into_iter().filter(|key| zcard(addr, key) > 0).collect();
                if count != PERMITS.to_string() {
                    held.push(format!("{name} = {count}"));
                }
                held
            }
            Kind::Latch => Vec::new(),
            _ => keys_with(addr, &name).into_iter().filter(|key| !key.starts_with("redisson_lock_token")).collect(),
        }
    }
}

fn raw(addr: &str, args: &[&str]) -> RespValue {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw_command(addr, &args)
}

fn get(addr: &str, key: &str) -> String {
    raw(addr, &["GET", key]).as_str().unwrap_or("(nil)").to_owned()
}

fn zcard(addr: &str, key: &str) -> i64 {
    raw(addr, &["ZCARD", key]).as_int().unwrap_or(0)
}

fn key_type(addr: &str, key: &str) -> String {
    raw(addr, &["TYPE", key]).as_str().unwrap_or("").to_owned()
}

/// Every key whose name contains `name`.
/// The keys on `addr` whose name contains `name`, but a semaphore's operation records
/// (`leasehold_sem_op:{NAME}:OP`: they outlive the operation by design, holding nothing).
fn keys_with(addr: &str, name: &str) -> Vec<String> {
    match raw(addr, &["KEYS", &format!("*{name}*")]) {
        RespValue::Array(keys) => keys
            .iter()
            .filter_map(|key| key.as_str().map(str::to_owned))
            .filter(|key| !key.starts_with(OP_RECORD_PREFIX))
            .collect(),
        other => panic!("KEYS: {other:?}"),
    }
}

/// `lock_core::semaphore::SEMAPHORE_OP_PREFIX` and its `:`, the operation records'.
const OP_RECORD_PREFIX: &str = "leasehold_sem_op:";

/// Runs `kind`'s bounded call: what is wrong with its answer (it came after the bound
/// plus slack, it acquired, or it is a definite error), if anything.
async fn bounded_call(kind: Kind, client: &Client, fault: &str) -> Option<String> {
    let started = Instant::now();
    let answer = kind.call(client).await;
    let took = started.elapsed();
    if took >= BOUND + SLACK {
        return Some(format!("{kind:?} with the server {fault}: answered after {took:?} (bound {BOUND:?})"));
    }
    match answer {
        Ok(true) => Some(format!("{kind:?}: acquired from a {fault} server")),
        Err(error) if !error.is_transient() => Some(format!("{kind:?}: {error}")),
        _ => None,
    }
}

/// Frozen server: every kind's bounded call answers within its bound; once the server
/// runs again, whatever the call left (its acquire, sent before the freeze and run
/// after it; its queue entry) is given back, long before the lease would end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_call_ends_on_time_with_the_server_frozen() {
    let mut wrong = Vec::new();
    for kind in KINDS {
        let mut server = RedisServer::start();
        let client = client(&server).await;
        kind.prepare(&client).await;
        server.pause();
        wrong.extend(bounded_call(kind, &client, "frozen").await);
        server.resume();
        let addr = server.addr();
        if !wait_until(CLEANED_WITHIN, || kind.held(&addr).is_empty()).await {
            wrong.push(format!("{kind:?}: still held after the server came back: {:?}", kind.held(&addr)));
        }
        // And the kind works again.
        if let Err(error) = kind.call(&client).await {
            wrong.push(format!("{kind:?} after the freeze: {error}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A write asked for by a handle that holds reads first checks with the server whether
/// those reads are still alive (an upgrade would wait for itself): with the server
/// frozen, that check is bounded too, and the write answers `None` by its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_check_ends_on_time_with_the_server_frozen() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let rw = client.read_write_lock("bounds:upgrade");
    let read = rw.read().await.expect("read");
    server.pause();
    let started = Instant::now();
    let answer = rw.try_write_with(BOUND, LEASE).await;
    let took = started.elapsed();
    server.resume();
    assert!(took < BOUND + SLACK, "the upgrade check answered after {took:?}");
    assert!(answer.map_or_else(|e| e.is_transient(), |guard| guard.is_none()));
    // With the server back, the check answers: this owner's read is alive, so an
    // upgrade is refused rather than waited for.
    let refused = rw.try_write_with(BOUND, LEASE).await.expect_err("an upgrade");
    assert_eq!(refused.kind(), leasehold::ErrorKind::WouldDeadlock);
    read.unlock().await.expect("unlock");
}

/// Killed server: every kind's bounded call answers within its bound; once a server is
/// back on the port, nothing the call sent while it was gone is left held there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_call_ends_on_time_with_the_server_killed() {
    let mut wrong = Vec::new();
    for kind in KINDS {
        let mut server = RedisServer::start();
        let client = client(&server).await;
        kind.prepare(&client).await;
        server.kill();
        wrong.extend(bounded_call(kind, &client, "killed").await);
        server.restart();
        let addr = server.addr();
        // Sent on the same connection after anything the call left queued.
        kind.prepare(&client).await;
        if !wait_until(CLEANED_WITHIN, || kind.held(&addr).is_empty()).await {
            wrong.push(format!("{kind:?}: held after the restart: {:?}", kind.held(&addr)));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A multi-lock over two servers with one frozen: first the server of two members
/// (taken by one script), then the server of the other one, so that the frozen member
/// is waited for once before and once after the healthy ones were taken (the members
/// are ordered by server). The bound holds, and every member is free once the server
/// runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_ends_on_time_with_one_server_frozen() {
    let mut servers = [RedisServer::start(), RedisServer::start()];
    let (one, two) = (client(&servers[0]).await, client(&servers[1]).await);
    let names = ["bounds:m1", "bounds:m2", "bounds:m3"];
    let multi = || MultiLock::new([one.lock(names[0]), two.lock(names[1]), two.lock(names[2])]);
    multi().lock().await.expect("warm").unlock().await.expect("unlock");
    for frozen in [1, 0] {
        servers[frozen].pause();
        for call in ["try_lock_with", "try_lock_for"] {
            let multi = multi();
            let started = Instant::now();
            let answer = match call {
                "try_lock_with" => multi.try_lock_with(BOUND, LEASE).await,
                _ => multi.try_lock_for(BOUND).await,
            };
            let took = started.elapsed();
            assert!(took < BOUND + SLACK, "{call} with server {frozen} frozen: answered after {took:?}");
            match answer {
                Ok(guard) => assert!(guard.is_none(), "{call}: acquired with a member's server frozen"),
                Err(error) => assert!(error.is_transient(), "{call}: {error}"),
            }
        }
        servers[frozen].resume();
        let addrs = [servers[0].addr(), servers[1].addr()];
        let held = || -> Vec<String> {
            addrs.iter().flat_map(|addr| names.iter().flat_map(move |name| keys_with(addr, name))).collect()
        };
        assert!(wait_until(CLEANED_WITHIN, || held().is_empty()).await, "members still held: {:?}", held());
    }
}

/// The blocking forms, from a plain thread: a lock's `try_lock_for` and a semaphore's
/// `try_acquire_with` answer within the bound with the server frozen, and the lock is
/// free once it runs again.
#[test]
fn blocking_bounded_calls_end_on_time_with_the_server_frozen() {
    let mut server = RedisServer::start();
    let client = leasehold::blocking::Client::builder()
        .url(server.url())
        .watchdog_timeout(LEASE)
        .command_timeout(COMMAND_TIMEOUT)
        .connect()
        .expect("connect");
    let lock = client.lock("bounds:blocking");
    lock.lock().expect("warm").unlock().expect("unlock");
    let semaphore = client.semaphore("bounds:blocking-semaphore");
    assert!(semaphore.try_set_permits(PERMITS).expect("set"));
    semaphore.try_acquire(1).expect("warm").expect("free").release().expect("release");
    server.pause();
    let started = std::time::Instant::now();
    let answer = lock.try_lock_for(BOUND);
    let took = started.elapsed();
    assert!(took < BOUND + SLACK, "blocking try_lock_for: answered after {took:?}");
    assert!(answer.map_or_else(|e| e.is_transient(), |guard| guard.is_none()));
    let started = std::time::Instant::now();
    let answer = semaphore.try_acquire_for(1, BOUND);
    let took = started.elapsed();
    assert!(took < BOUND + SLACK, "blocking try_acquire_for: answered after {took:?}");
    assert!(answer.map_or_else(|e| e.is_transient(), |taken| taken.is_none()));
    server.resume();
    let addr = server.addr();
    let deadline = std::time::Instant::now() + CLEANED_WITHIN;
    while !(keys_with(&addr, "bounds:blocking").iter().all(|k| k == "bounds:blocking-semaphore")
        && get(&addr, "bounds:blocking-semaphore") == PERMITS.to_string())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "held after the freeze: {:?}",
            keys_with(&addr, "bounds:blocking")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
