//! The reentrant lock (and the minimal `SimpleLock`) on a real redis-server: layout,
//! reentrancy, leases (nested ones too), ownership (one owner shared by tasks), interop
//! with Redisson's layout, hostile names, bounded `Debug` output, and bad input rejected
//! before anything is sent.
//!
//! Every test that can runs three times (`NAME::standalone`, `NAME::valkey`,
//! `NAME::cluster`, see `both_topologies!`): on a private Redis server, on a private
//! Valkey server, and on the shared cluster, where every name has the test's prefix and
//! assertions look at the test's own names only. Standalone-only tests run on Redis and
//! on Valkey (`NAME::redis`, `NAME::valkey`, see `both_servers!`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::ErrorKind;
use leasehold_test_support::{
    both_servers, both_topologies, client, client_with, hgetall, pttl, raw, wait_until, Monitor, Proxy, RedisServer,
    RespValue, ServerKind, Topology,
};

const LEASE: Duration = Duration::from_secs(10);

/// The publish commands the scripts ran on `channel` (`[0 lua] "publish" "channel" …`,
/// not the EVALSHAs whose last ARGV names the publish command), from `monitor`'s lines.
fn publishes(t: &Topology, monitor: &Monitor, channel: &str) -> Vec<String> {
    let command = format!("] \"{}\" \"{channel}\"", t.publish_command());
    monitor.commands().into_iter().filter(|l| l.to_lowercase().contains(&command.to_lowercase())).collect()
}

/// The release channel of a lock name without braces.
fn channel_of(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

async fn try_lock_writes_redisson_layout_and_unlock_deletes(t: &Topology) {
    let client = t.client().await;
    let name = t.name("order:1001");
    let lock = client.lock(&name);
    let guard = lock.try_lock().await.expect("try_lock").expect("free lock is acquired");
    assert_eq!(t.hgetall(&name), vec![(lock.owner().to_owned(), "1".to_owned())]);
    let uuid = client.id().hyphenated().to_string();
    assert!(lock.owner().starts_with(&format!("{uuid}:")), "owner {} is UUID:N", lock.owner());
    let ttl = t.pttl(&name);
    assert!(ttl > 29_000 && ttl <= 30_000, "watchdog lease is 30 s, got {ttl}");
    assert_eq!(t.keys(), std::slice::from_ref(&name), "the lock is its Hash alone: no latch or other key");
    guard.unlock().await.expect("unlock");
    assert!(!t.exists(&name));
    assert_eq!(t.keys(), Vec::<String>::new(), "nothing is left behind");
}
both_topologies!(try_lock_writes_redisson_layout_and_unlock_deletes);

async fn each_handle_is_an_owner_and_an_arc_shares_it(t: &Topology) {
    let client = t.client().await;
    let name = t.name("l");
    let a = std::sync::Arc::new(client.lock(&name));
    let a2 = std::sync::Arc::clone(&a);
    let b = client.lock(&name);
    assert_eq!(a.owner(), a2.owner());
    assert_ne!(a.owner(), b.owner());
    let g1 = a.try_lock().await.expect("a").expect("a acquires");
    let g2 = a2.try_lock().await.expect("a2").expect("the shared handle re-enters");
    assert_eq!(a.hold_count().await.expect("count"), 2);
    assert!(b.try_lock().await.expect("b").is_none());
    assert!(b.try_lock_for(Duration::from_millis(100)).await.expect("b waits").is_none());
    g2.unlock().await.expect("unlock 2");
    g1.unlock().await.expect("unlock 1");
    let g = b.try_lock().await.expect("b").expect("b acquires after release");
    g.unlock().await.expect("unlock b");
}
both_topologies!(each_handle_is_an_owner_and_an_arc_shares_it);

/// Acquire N times, release N-1: still held, others excluded, the TTL kept on each
/// partial release; the Nth release deletes the key and publishes once.
async fn reentrancy_counts_holds_and_publishes_once(t: &Topology) {
    let client = t.client().await;
    let name = t.name("re");
    let lock = client.lock(&name);
    let other = client.lock(&name);
    let mut guards = Vec::new();
    for n in 1..=5 {
        guards.push(lock.lock_with_lease(Duration::from_secs(5)).await.expect("re-enter"));
        assert_eq!(lock.hold_count().await.expect("count"), n);
    }
    let node = t.node_for(&name);
    let monitor = Monitor::start(&node);
    while guards.len() > 1 {
        let before = t.pttl(&name);
        guards.pop().expect("guard").unlock().await.expect("partial unlock");
        assert!(lock.is_held().await.expect("held"));
        let ttl = t.pttl(&name);
        // Fixed leases: each acquire made the TTL at least its lease, and a partial
        // release never shortens it (nor stretches it past what the holds asked for).
        assert!(ttl > before - 1_000 && ttl <= 5_000, "a partial release keeps the TTL: {before} -> {ttl}");
        assert!(other.try_lock().await.expect("other").is_none());
    }
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    guards.pop().expect("last").unlock().await.expect("last unlock");
    assert!(!t.exists(&name));
    monitor.sync(&node);
    let channel = channel_of(&name);
    let publishes = publishes(t, &monitor, &channel);
    assert_eq!(publishes.len(), 1, "one publish for five holds: {publishes:?}");
    assert!(publishes[0].ends_with(&format!("\"{channel}\" \"0\"")), "{publishes:?}");
}
both_topologies!(reentrancy_counts_holds_and_publishes_once);

/// What the hot path sends, argument by argument (integers as their decimal digits, the
/// key, channel and owner as given), and that a server which forgot the scripts
/// (`SCRIPT FLUSH`, as after a restart) gets them loaded and the same call sent again.
/// The flush only on the standalone server: on the shared cluster it would take the
/// scripts from under every other test on the node.
async fn script_arguments_are_exact_and_forgotten_scripts_are_reloaded(t: &Topology) {
    let client = t.client().await;
    let name = t.name("args:1");
    let flushes: &[bool] = if t.is_cluster() { &[false] } else { &[false, true] };
    for &flush in flushes {
        let node = t.node_for(&name);
        if flush {
            assert_eq!(t.on_key(&name, &["SCRIPT", "FLUSH"]).as_str(), Some("OK"));
        }
        let lock = client.lock(&name);
        let owner = lock.owner().to_owned();
        let monitor = Monitor::start(&node);
        let guard = lock.try_lock_with(Duration::ZERO, Duration::from_micros(12_345_001)).await.expect("try");
        guard.expect("free lock is acquired").unlock().await.expect("unlock");
        monitor.sync(&node);
        // This lock's calls (the key is their first KEYS argument).
        let own = format!("\" \"{name}\" ");
        let evalshas: Vec<String> = monitor
            .commands()
            .into_iter()
            .filter(|l| l.to_lowercase().contains("\"evalsha\"") && l.contains(&own))
            .collect();
        let tail =
            |line: &str| line.split("\" \"").skip(2).collect::<Vec<_>>().join(" ").trim_end_matches('"').to_owned();
        let sent: Vec<String> = evalshas.iter().map(|l| tail(l)).collect();
        // A single try names the lock key alone and no keep-alive (it never queues); the
        // release names the wait queue too (it may hand the lock over) and its two flags.
        let acquire = format!("1 {name} 12346 {owner} 1 0");
        let release = format!(
            "5 {name} redisson_lock__channel:{{{name}}} leasehold_lock_queue:{{{name}}} \
             leasehold_lock_waiters:{{{name}}} leasehold_lock__queue:{{{name}}} {owner} 0 0 0 0 0 {} 1",
            t.publish_command()
        );
        // After a flush each script is answered NOSCRIPT once, loaded, and sent again as it was.
        let expected =
            if flush { vec![acquire.clone(), acquire, release.clone(), release] } else { vec![acquire, release] };
        assert_eq!(sent, expected, "{evalshas:?}");
        assert!(!t.exists(&name));
    }
}
both_topologies!(script_arguments_are_exact_and_forgotten_scripts_are_reloaded);

/// The release publishes `0` on `redisson_lock__channel:{name}` (seen by a plain
/// subscriber: `SUBSCRIBE`, or on a cluster `SSUBSCRIBE` on the channel's primary).
async fn release_publishes_zero_on_the_redisson_channel(t: &Topology) {
    use std::io::{BufRead, BufReader, Write};
    let client = t.client().await;
    let name = t.name("pub:1");
    let channel = channel_of(&name);
    let (subscribe, message_kind) = if t.is_cluster() { ("SSUBSCRIBE", "smessage") } else { ("SUBSCRIBE", "message") };
    let mut sub = std::net::TcpStream::connect(t.node_for(&channel)).expect("connect");
    sub.write_all(format!("{subscribe} {channel}\r\n").as_bytes()).expect("subscribe");
    sub.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut reader = BufReader::new(sub);
    let mut lines = Vec::new();
    for _ in 0..6 {
        let mut line = String::new();
        reader.read_line(&mut line).expect("confirmation");
        lines.push(line.trim().to_owned());
    }
    assert_eq!(lines[2].to_uppercase(), subscribe, "{lines:?}");
    let guard = client.lock(&name).try_lock().await.expect("lock").expect("acquired");
    guard.unlock().await.expect("unlock");
    let mut message = Vec::new();
    for _ in 0..7 {
        let mut line = String::new();
        reader.read_line(&mut line).expect("message");
        message.push(line.trim().to_owned());
    }
    let expected = [
        "*3".to_owned(),
        format!("${}", message_kind.len()),
        message_kind.to_owned(),
        format!("${}", channel.len()),
        channel,
        "$1".to_owned(),
        "0".to_owned(),
    ];
    assert_eq!(message, expected);
}
both_topologies!(release_publishes_zero_on_the_redisson_channel);

/// The lease runs out: another owner gets in; the old owner's unlock is `NotOwner`
/// and leaves the new holder untouched, with nothing published.
async fn expired_lease_lets_another_owner_in_and_old_unlock_is_not_owner(t: &Topology) {
    let client = t.client().await;
    let name = t.name("exp");
    let old = client.lock(&name).try_lock_with(Duration::ZERO, Duration::from_millis(200)).await.expect("old");
    let old = old.expect("acquired");
    let newer = client.lock(&name);
    let new_guard = newer.try_lock_with(Duration::from_secs(5), LEASE).await.expect("new").expect("after expiry");
    assert!(old.is_lost(), "an explicit lease past its deadline reports lost");
    let before = t.hgetall(&name);
    let node = t.node_for(&name);
    let monitor = Monitor::start(&node);
    let err = old.unlock().await.expect_err("old owner");
    assert_eq!(err.kind(), ErrorKind::NotOwner, "{err}");
    monitor.sync(&node);
    // Nothing published on the lock's channels (the release and the queue channel).
    let published: Vec<String> = monitor
        .commands()
        .into_iter()
        .filter(|l| l.to_lowercase().contains(&format!("] \"{}\"", t.publish_command())) && l.contains(&name))
        .collect();
    assert!(published.is_empty(), "nothing published: {published:?}");
    assert_eq!(t.hgetall(&name), before, "new holder untouched");
    assert!(newer.is_held().await.expect("held"));
    new_guard.unlock().await.expect("unlock");
}
both_topologies!(expired_lease_lets_another_owner_in_and_old_unlock_is_not_owner);

/// Unlock after a force unlock: `NotOwner`, nothing written or published. Force unlock
/// publishes so waiters wake.
async fn unlock_after_force_unlock_is_not_owner(t: &Topology) {
    let client = t.client().await;
    let name = t.name("forced");
    let lock = client.lock(&name);
    let guard = lock.lock_with_lease(LEASE).await.expect("lock");
    let node = t.node_for(&name);
    let monitor = Monitor::start(&node);
    assert!(client.lock(&name).force_unlock().await.expect("force"));
    assert!(!lock.is_locked().await.expect("is_locked"));
    assert!(!client.lock(&name).force_unlock().await.expect("force again"), "nothing left to delete");
    let err = guard.unlock().await.expect_err("unlock after force");
    assert!(err.is_not_owner(), "{err}");
    monitor.sync(&node);
    let publishes = monitor
        .commands()
        .into_iter()
        .filter(|l| l.to_lowercase().contains(&format!("] \"{}\"", t.publish_command())) && l.contains(&name))
        .count();
    assert_eq!(publishes, 1, "only the force unlock published");
}
both_topologies!(unlock_after_force_unlock_is_not_owner);

/// A second, independent handle on a lock it never held: `NotOwner` via the server.
async fn a_guard_whose_hold_ended_sends_nothing(t: &Topology) {
    let client = t.client().await;
    let name = t.name("stale");
    let lock = client.lock(&name);
    let first = lock.lock_with_lease(Duration::from_millis(150)).await.expect("first");
    // The lease runs out, then the same owner acquires again: a new hold.
    assert!(wait_until(Duration::from_secs(5), || t.pttl(&name) == -2).await);
    let second = lock.lock_with_lease(LEASE).await.expect("second");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    let err = first.unlock().await.expect_err("stale guard");
    assert!(err.is_not_owner() || err.is_lock_lost(), "{err}");
    assert_eq!(lock.hold_count().await.expect("count"), 1, "the stale guard did not release the new hold");
    second.unlock().await.expect("unlock");
}
both_topologies!(a_guard_whose_hold_ended_sends_nothing);

/// A foreign client writing Redisson's layout by hand excludes leasehold, and leasehold
/// excludes it (Redisson's own acquire script answers with the PTTL).
async fn redisson_layout_interop_both_ways(t: &Topology) {
    let client = t.client().await;
    let name = t.name("shared");
    let java_owner = "4f0c8d9e-1111-4222-8333-944455556666:1";
    t.on_key(&name, &["HINCRBY", &name, java_owner, "1"]);
    t.on_key(&name, &["PEXPIRE", &name, "30000"]);
    let lock = client.lock(&name);
    assert!(lock.try_lock().await.expect("try").is_none(), "Redisson's hold excludes leasehold");
    assert!(lock.is_locked().await.expect("locked"));
    t.on_key(&name, &["DEL", &name]);

    let guard = lock.try_lock().await.expect("try").expect("acquired");
    // Redisson's RLock tryLockInnerAsync script, verbatim in shape.
    let redisson_acquire =
        "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
         redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
         return redis.call('pttl', KEYS[1]);";
    let reply = t.on_key(&name, &["EVAL", redisson_acquire, "1", &name, "30000", java_owner]);
    let ttl = reply.as_int().expect("Redisson sees the lock held and gets a PTTL");
    assert!(ttl > 0 && ttl <= 30_000);
    guard.unlock().await.expect("unlock");
    assert_eq!(t.on_key(&name, &["EVAL", redisson_acquire, "1", &name, "30000", java_owner]), RespValue::Nil);
    assert_eq!(t.hgetall(&name), vec![(java_owner.to_owned(), "1".to_owned())]);
}
both_topologies!(redisson_layout_interop_both_ways);

/// Bad input: a typed `InvalidArgument` before any command reaches Redis. Standalone
/// only: it asserts that no command at all reached the server, which the shared
/// cluster's other tests make impossible to see (and the empty name leaves nothing to
/// filter on).
async fn bad_input_is_rejected_before_anything_is_sent(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let monitor = Monitor::start(&server.addr());
    let empty = client.lock("");
    let named = client.lock("valid");
    let checks: Vec<(&str, leasehold::Error)> = vec![
        ("empty name try_lock", empty.try_lock().await.expect_err("empty")),
        ("empty name lock_with_lease", empty.lock_with_lease(LEASE).await.expect_err("empty")),
        ("empty name force_unlock", empty.force_unlock().await.expect_err("empty")),
        ("empty name is_locked", empty.is_locked().await.expect_err("empty")),
        ("empty name hold_count", empty.hold_count().await.expect_err("empty")),
        ("zero lease", named.lock_with_lease(Duration::ZERO).await.expect_err("zero")),
        ("sub-ms lease", named.try_lock_with(Duration::ZERO, Duration::from_micros(500)).await.expect_err("sub-ms")),
        ("huge lease", named.try_lock_with(Duration::ZERO, Duration::MAX).await.expect_err("huge")),
        ("overflowing wait", named.try_lock_for(Duration::MAX).await.expect_err("overflow")),
        ("simple empty", client.simple_lock("").try_lock_with(Duration::ZERO, LEASE).await.expect_err("empty")),
        (
            "simple zero lease",
            client.simple_lock("s").try_lock_with(Duration::ZERO, Duration::ZERO).await.expect_err("zero"),
        ),
    ];
    for (what, err) in &checks {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: {err}");
    }
    let bad_config = leasehold::Client::builder().url(server.url()).watchdog_timeout(Duration::ZERO).connect().await;
    assert!(bad_config.expect_err("zero watchdog").is_invalid_argument());
    let bad_url = leasehold::Client::builder().url("not a url").connect().await;
    assert!(bad_url.expect_err("bad url").is_invalid_argument());
    monitor.sync(&server.addr());
    assert_eq!(monitor.commands(), Vec::<String>::new(), "no command reached Redis");
}
both_servers!(bad_input_is_rejected_before_anything_is_sent);

/// A name holding another type: `WrongType` naming the key; the value is untouched.
async fn wrong_type_is_reported_and_the_value_untouched(t: &Topology) {
    let client = t.client().await;
    let name = t.name("typed");
    t.on_key(&name, &["SET", &name, "a string"]);
    let lock = client.lock(&name);
    for err in [
        lock.try_lock().await.expect_err("try_lock"),
        lock.try_lock_for(Duration::from_millis(50)).await.expect_err("try_lock_for"),
        lock.hold_count().await.expect_err("hold_count"),
    ] {
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert_eq!(err.key(), Some(name.as_str()));
        assert!(err.to_string().contains("WRONGTYPE"), "{err}");
        assert_eq!(err.server_code(), Some("WRONGTYPE"), "the server's own code: {err:?}");
    }
    assert_eq!(t.on_key(&name, &["GET", &name]).as_str(), Some("a string"));
    assert_eq!(t.pttl(&name), -1, "no expiry was set");
}
both_topologies!(wrong_type_is_reported_and_the_value_untouched);

/// Dropping a guard without unlock releases it in the background, promptly.
async fn dropped_guard_is_released_in_the_background(t: &Topology) {
    let client = t.client().await;
    let name = t.name("dropped-guard");
    let lock = client.lock(&name);
    let guard = lock.lock().await.expect("lock");
    assert_eq!(client.stats().watchdog.registered, 1);
    drop(guard);
    assert_eq!(client.stats().watchdog.registered, 0, "renewal stops at once");
    assert!(wait_until(Duration::from_secs(2), || t.pttl(&name) == -2).await);
}
both_topologies!(dropped_guard_is_released_in_the_background);

/// Guards dropped after their runtime is gone: no panic, no block; the lease expires.
fn guard_outliving_its_runtime_expires_with_its_lease(t: &Topology) {
    let name = t.name("orphan");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let guard = runtime.block_on(async {
        let client = t.client_with(Duration::from_secs(30)).await;
        client.lock(&name).try_lock_with(Duration::ZERO, Duration::from_millis(300)).await.expect("lock")
    });
    let guard = guard.expect("acquired");
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(guard); // must neither panic nor block
    let start = std::time::Instant::now();
    while t.pttl(&name) != -2 {
        assert!(start.elapsed() < Duration::from_secs(3), "the lease expires on its own");
        std::thread::sleep(Duration::from_millis(20));
    }
}
both_topologies!(sync guard_outliving_its_runtime_expires_with_its_lease);

/// Hostile names: long, binary-ish, with braces: they work, with derived names right.
async fn hostile_names_work_with_correct_derived_names(t: &Topology) {
    // A 1 MiB name goes out five times with each release (the key, its channel and its
    // queue's names): give a loaded machine time for that.
    let client = leasehold::Client::builder()
        .url(t.url())
        .command_timeout(Duration::from_secs(8))
        .connect()
        .await
        .expect("connect");
    let long = "x".repeat(1 << 20);
    for base in [long.as_str(), "\u{0}\u{1}\u{7f}ü€😀 \r\n", "{}", "a{b}c", "{order}:1", "*?[]"] {
        let name = t.name(base);
        let lock = client.lock(&name);
        let guard = lock.try_lock().await.expect("try").expect("acquired");
        assert!(client.lock(&name).try_lock().await.expect("other").is_none());
        assert_eq!(lock.hold_count().await.expect("count"), 1);
        guard.unlock().await.expect("unlock");
        assert!(!lock.is_locked().await.expect("locked"));
    }
}
both_topologies!(hostile_names_work_with_correct_derived_names);

/// A key prefix is part of the key; derived names follow the full key.
async fn key_prefix_is_applied(t: &Topology) {
    let prefix = t.name("shop:");
    let client = leasehold::Client::builder().url(t.url()).key_prefix(&prefix).connect().await.expect("connect");
    let lock = client.lock("cart:7");
    let key = format!("{prefix}cart:7");
    assert_eq!(lock.key(), key);
    let guard = lock.try_lock().await.expect("try").expect("acquired");
    assert!(t.exists(&key));
    guard.unlock().await.expect("unlock");
}
both_topologies!(key_prefix_is_applied);

/// The minimal lock: SET NX PX, owner value, compare-and-delete; not reentrant.
async fn simple_lock_is_the_minimal_variant(t: &Topology) {
    let client = t.client().await;
    let name = t.name("simple");
    let a = client.simple_lock(&name);
    let b = client.simple_lock(&name);
    let guard = a.try_lock_with(Duration::ZERO, Duration::from_millis(300)).await.expect("a").expect("acquired");
    assert_eq!(t.on_key(&name, &["GET", &name]).as_str(), Some(a.owner()));
    assert!(a.owner().contains('-') && !a.owner().contains(':'), "value is UUID-N");
    assert!(a.try_lock_with(Duration::ZERO, LEASE).await.expect("again").is_none(), "not reentrant");
    assert!(b.try_lock_with(Duration::ZERO, LEASE).await.expect("b").is_none());
    let start = std::time::Instant::now();
    let b_guard = b.try_lock_with(Duration::from_secs(3), LEASE).await.expect("b waits").expect("after expiry");
    assert!(start.elapsed() < Duration::from_secs(1), "retried on the holder's TTL");
    let err = guard.unlock().await.expect_err("expired");
    assert!(err.is_not_owner());
    assert_eq!(t.on_key(&name, &["GET", &name]).as_str(), Some(b.owner()), "b untouched");
    b_guard.unlock().await.expect("unlock b");
    assert!(!t.exists(&name));

    // The guard knows its own lease only: lost once its deadline passed; a detached
    // guard sends nothing and the key expires with its lease; `lock_with_lease` waits
    // for that expiry (on the holder's TTL) however long it takes.
    let start = std::time::Instant::now();
    let short = a.try_lock_with(Duration::ZERO, Duration::from_millis(300)).await.expect("a").expect("free");
    assert_eq!(short.key(), name);
    assert_eq!(short.owner(), a.owner());
    assert!(!short.is_lost());
    let deadline = short.lease_deadline();
    assert!(
        deadline >= start + Duration::from_millis(300)
            && deadline <= std::time::Instant::now() + Duration::from_millis(300)
    );
    tokio::time::timeout(Duration::from_secs(2), short.lost()).await.expect("lost at its deadline");
    assert!(short.is_lost());
    // The guard's deadline is never later than the server's expiry, so the key may still
    // be there for a round trip: wait for it on its TTL rather than one attempt.
    let detached =
        a.try_lock_with(Duration::from_secs(1), Duration::from_millis(300)).await.expect("a").expect("expired");
    detached.detach();
    assert_eq!(t.on_key(&name, &["GET", &name]).as_str(), Some(a.owner()), "detach sends nothing");
    let waited = b.lock_with_lease(LEASE).await.expect("b waits for the expiry");
    assert_eq!(t.on_key(&name, &["GET", &name]).as_str(), Some(b.owner()));
    waited.unlock().await.expect("unlock b");
}
both_topologies!(simple_lock_is_the_minimal_variant);

/// The commands `monitor` saw that name `key` (as a command's or a script's argument).
fn on_key(monitor: &Monitor, key: &str) -> Vec<String> {
    let quoted = format!("\"{key}\"");
    monitor.commands().into_iter().filter(|l| l.contains(&quoted)).collect()
}

/// The command name of a `MONITOR` line, lower case (`set`, `evalsha`, `get` in a script).
fn command_of(line: &str) -> String {
    line.split("] \"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("").to_lowercase()
}

/// The simple lock's acquire is one `SET NX PX` (no script), its release one `EVALSHA`
/// running `GET` + `DEL`: 4 server calls per uncontended pair, as rslock. A try on a held
/// key is one `SET` too; a wait on a held key reads the holder's `PTTL` and tries again
/// when it runs out.
async fn simple_lock_acquires_with_one_set_and_waits_on_the_pttl(t: &Topology) {
    let client = t.client().await;
    let name = t.name("simple-set");
    let node = t.node_for(&name);
    let a = client.simple_lock(&name);
    let b = client.simple_lock(&name);

    let monitor = Monitor::start(&node);
    let guard = a.try_lock_with(Duration::ZERO, LEASE).await.expect("a").expect("free: acquired");
    monitor.sync(&node);
    let acquire = on_key(&monitor, &name);
    assert_eq!(acquire.iter().map(|l| command_of(l)).collect::<Vec<_>>(), ["set"], "one SET: {acquire:?}");
    assert!(acquire[0].contains(&format!("\"{}\"", a.owner())), "{acquire:?}");
    for word in ["\"NX\"", "\"PX\"", "\"10000\""] {
        assert!(acquire[0].to_uppercase().contains(word), "{word} in {acquire:?}");
    }
    drop(monitor);

    let monitor = Monitor::start(&node);
    assert!(b.try_lock_with(Duration::ZERO, LEASE).await.expect("b").is_none(), "held");
    monitor.sync(&node);
    let held = on_key(&monitor, &name);
    assert_eq!(held.iter().map(|l| command_of(l)).collect::<Vec<_>>(), ["set"], "a try is one SET: {held:?}");
    drop(monitor);

    let monitor = Monitor::start(&node);
    guard.unlock().await.expect("unlock");
    monitor.sync(&node);
    let release = on_key(&monitor, &name);
    assert_eq!(
        release.iter().map(|l| command_of(l)).collect::<Vec<_>>(),
        ["evalsha", "get", "del"],
        "compare-and-delete: {release:?}"
    );
    drop(monitor);

    // A held key reports its PTTL to the wait, which tries again when it runs out.
    // The clock is read before the 300 ms hold starts: a slow reply or monitor start
    // cannot eat the lower bound below.
    let start = std::time::Instant::now();
    let short = a.try_lock_with(Duration::ZERO, Duration::from_millis(300)).await.expect("a").expect("acquired");
    let monitor = Monitor::start(&node);
    let waited = b.try_lock_with(Duration::from_secs(3), LEASE).await.expect("b waits").expect("after expiry");
    let elapsed = start.elapsed();
    monitor.sync(&node);
    assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(1), "slept on the TTL: {elapsed:?}");
    let wait = on_key(&monitor, &name);
    let commands: Vec<String> = wait.iter().map(|l| command_of(l)).collect();
    assert_eq!(commands.first().map(String::as_str), Some("set"), "{wait:?}");
    assert_eq!(commands.get(1).map(String::as_str), Some("pttl"), "the held key's TTL is read: {wait:?}");
    assert_eq!(commands.last().map(String::as_str), Some("set"), "{wait:?}");
    assert!(commands.len() <= 6, "no polling: {wait:?}");
    assert!(short.unlock().await.expect_err("expired").is_not_owner());
    waited.unlock().await.expect("unlock b");
    assert!(!t.exists(&name));
}
both_topologies!(simple_lock_acquires_with_one_set_and_waits_on_the_pttl);

/// A server that forgot the scripts (`SCRIPT FLUSH`, as after a restart) answers the
/// simple lock's compare-and-delete `NOSCRIPT` once: the unlock loads it, sends the same
/// call again and releases (its release call is not boxed, unlike the other kinds').
async fn a_simple_unlock_reloads_a_forgotten_script(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let lock = client.simple_lock("simple-reload");
    let guard = lock.try_lock_with(Duration::ZERO, LEASE).await.expect("try").expect("free: acquired");
    assert_eq!(raw(&server, &["SCRIPT", "FLUSH"]).as_str(), Some("OK"));
    let monitor = Monitor::start(&server.addr());
    guard.unlock().await.expect("unlock after the flush");
    monitor.sync(&server.addr());
    let calls: Vec<String> = on_key(&monitor, "simple-reload").iter().map(|l| command_of(l)).collect();
    assert_eq!(calls, ["evalsha", "evalsha", "get", "del"], "NOSCRIPT, loaded, sent again: {calls:?}");
    assert_eq!(raw(&server, &["EXISTS", "simple-reload"]).as_int(), Some(0));
}
both_servers!(a_simple_unlock_reloads_a_forgotten_script);

/// Read-only queries.
async fn queries_report_the_server_state(t: &Topology) {
    let client = t.client().await;
    let name = t.name("q");
    let lock = client.lock(&name);
    assert!(!lock.is_locked().await.expect("locked"));
    assert!(!lock.is_held().await.expect("held"));
    assert_eq!(lock.remaining_ttl().await.expect("ttl"), None);
    let guard = lock.lock_with_lease(LEASE).await.expect("lock");
    assert!(lock.is_locked().await.expect("locked"));
    assert!(lock.is_held().await.expect("held"));
    assert!(!client.lock(&name).is_held().await.expect("other not held"));
    let ttl = lock.remaining_ttl().await.expect("ttl").expect("has ttl");
    assert!(ttl > Duration::from_secs(9) && ttl <= LEASE);
    assert!(!guard.is_watchdog() && !guard.is_renewed());
    guard.unlock().await.expect("unlock");
}
both_topologies!(queries_report_the_server_state);

// One owner shared by tasks, nested leases, hostile names waited on, bounded `Debug`
// output.

fn slot(key: &str) -> u16 {
    leasehold::fred::util::redis_keyslot(key.as_bytes())
}

/// Every key on the server, sorted.
fn all_keys(server: &RedisServer) -> Vec<String> {
    // The clients' descriptions are in their own UUID's slot, not a lock's.
    leasehold_test_support::lock_keys(server)
}

// 1. Ownership: one owner shared through an `Arc`.

/// Four tasks acquire and release 50 times each through one shared handle (one
/// owner, so they re-enter each other's holds): every unlock is `Ok`, no guard is told
/// its lock was lost, and the key is gone at the end (no phantom hold).
async fn one_owner_shared_by_four_tasks_keeps_its_books_straight(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let lock = Arc::new(client.lock("shared-owner"));
    let mut tasks = Vec::new();
    for t in 0..4u32 {
        let lock = Arc::clone(&lock);
        tasks.push(tokio::spawn(async move {
            for round in 0..50u32 {
                let guard = if (t + round) % 2 == 0 {
                    lock.lock().await.expect("watchdog acquire")
                } else {
                    lock.lock_with_lease(LEASE).await.expect("fixed acquire")
                };
                tokio::task::yield_now().await;
                assert!(!guard.is_lost(), "task {t} round {round}: a live hold was reported lost");
                guard.unlock().await.unwrap_or_else(|e| panic!("task {t} round {round}: unlock failed: {e}"));
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task).await.expect("tasks finish").expect("task");
    }
    assert_eq!(raw(&server, &["EXISTS", "shared-owner"]).as_int(), Some(0), "{:?}", hgetall(&server, "shared-owner"));
    assert_eq!(client.stats().watchdog.registered, 0);
}
both_servers!(one_owner_shared_by_four_tasks_keeps_its_books_straight, worker_threads = 4);

// 3. The local deadline is never later than the server's expiry.

/// A partial unlock whose reply is lost is retried: the deadline it extends counts from
/// the *first* attempt's send (when the TTL may have been set), not the retry's.
async fn a_partial_unlock_answered_from_its_latch_counts_from_the_first_send(on: ServerKind) {
    let server = on.start();
    let proxy = Proxy::start(&server.addr()).await;
    let client = client_with(&proxy.url(), Duration::from_secs(30)).await;
    let lock = client.lock("latched-partial");
    let outer = lock.lock().await.expect("outer");
    let inner = lock.lock().await.expect("inner");
    proxy.lose_next_reply();
    inner.unlock().await.expect("retried");
    assert_eq!(proxy.lost_replies(), 1);
    // The server's expiry lies within [before + PTTL, after + PTTL], where `after` is
    // taken once PTTL's reply is in: the later the read, the later the bound (an
    // `after` taken before the read made the bound too early by however long the read
    // took, 2.2 ms once on a loaded machine).
    let ttl = u64::try_from(pttl(&server, "latched-partial")).expect("the key has a TTL");
    let after = Instant::now();
    let server_expiry_at_most = after + Duration::from_millis(ttl + 1);
    let deadline = outer.lease_deadline();
    assert!(
        deadline <= server_expiry_at_most,
        "local deadline {:?} after the server's expiry",
        deadline.duration_since(server_expiry_at_most)
    );
    outer.unlock().await.expect("unlock");
}
both_servers!(a_partial_unlock_answered_from_its_latch_counts_from_the_first_send);

/// A re-entry with a shorter lease never cuts the outer hold short: the key keeps the
/// outer lease, so another owner stays excluded after the short lease has passed, and
/// the outer guard's deadline stays within the server's expiry.
async fn a_shorter_nested_lease_never_shortens_the_outer_hold(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let lock = client.lock("nested");
    let other = client.lock("nested");
    let outer = lock.lock_with_lease(LEASE).await.expect("outer");
    let inner =
        lock.try_lock_with(Duration::ZERO, Duration::from_millis(100)).await.expect("inner").expect("re-enters");
    assert!(pttl(&server, "nested") > 9_000, "the re-entry kept the outer TTL");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(other.try_lock().await.expect("other").is_none(), "still held after the inner lease passed");
    assert!(!outer.is_lost());
    // The clock is read after PTTL's reply: the server's expiry is at most that reply's
    // arrival + PTTL (+ 1 ms of rounding). Reading it before would undercount by the
    // PTTL round trip, which a loaded machine stretches.
    let ttl = u64::try_from(pttl(&server, "nested")).expect("ttl");
    let server_expiry_at_most = Instant::now() + Duration::from_millis(ttl + 1);
    assert!(outer.lease_deadline() <= server_expiry_at_most);
    inner.unlock().await.expect("inner unlock");
    assert!(pttl(&server, "nested") > 9_000, "releasing the re-entry kept the outer TTL");
    outer.unlock().await.expect("outer unlock");
    assert_eq!(pttl(&server, "nested"), -2);
}
both_servers!(a_shorter_nested_lease_never_shortens_the_outer_hold);

// 4. Nested leases and the watchdog.

/// A fixed-lease re-entry inside a watchdog hold: its release keeps the watchdog lease
/// on the key, the watchdog keeps renewing, and `is_renewed()` says so.
async fn releasing_a_short_re_entry_keeps_the_watchdog_lease(on: ServerKind) {
    let server = on.start();
    let client = client_with(&server.url(), Duration::from_secs(3)).await;
    let lock = client.lock("wd-nested");
    let other = client.lock("wd-nested");
    let outer = lock.lock().await.expect("outer");
    let inner = lock.lock_with_lease(Duration::from_millis(50)).await.expect("inner");
    assert!(pttl(&server, "wd-nested") > 2_500, "the short re-entry did not cut the watchdog lease");
    inner.unlock().await.expect("inner unlock");
    assert!(pttl(&server, "wd-nested") > 2_500, "the release kept the watchdog lease");
    assert!(outer.is_renewed(), "the watchdog still renews the outer hold");
    // Two renewal periods later it is still held and renewed.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert!(other.try_lock().await.expect("other").is_none());
    assert!(outer.is_renewed() && !outer.is_lost());
    outer.unlock().await.expect("outer unlock");
}
both_servers!(releasing_a_short_re_entry_keeps_the_watchdog_lease);

// 10 and 13. Hostile names, waited on.

/// Names whose braces defeat Redisson's naming: each is waited on and woken by the
/// release message (the lease is far longer than the wait), and every key the lock
/// leaves behind is in the lock key's hash slot.
async fn hostile_names_are_waited_on_and_keep_every_key_in_their_slot(on: ServerKind) {
    let server = on.start();
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let long = "n".repeat(64 * 1024);
    let names = ["{}", "{", "}", "}{", "a{b", "a{}b", "a}b{c}", "{}x}", "a}b", "{x}", "\u{0}\u{1}{\u{7f}", &long];
    for name in names {
        let shown: String = name.chars().take(20).collect();
        let held = holder_client.lock(name).lock_with_lease(Duration::from_secs(30)).await.expect("holder");
        let waiter = {
            let client = waiter_client.clone();
            let name = name.to_owned();
            tokio::spawn(async move {
                let lock = client.lock(&name);
                let guard = lock.lock().await.expect("waiter");
                guard.unlock().await.expect("waiter unlock");
            })
        };
        assert!(
            wait_until(Duration::from_secs(5), || waiter_client.local_waiters(name) == 1).await,
            "{shown:?}: the waiter queued"
        );
        held.unlock().await.expect("holder unlock");
        tokio::time::timeout(Duration::from_secs(3), waiter)
            .await
            .unwrap_or_else(|_| panic!("{shown:?}: the waiter was not woken by the release"))
            .expect("task");
        let lock_slot = slot(name);
        for key in all_keys(&server) {
            assert_eq!(
                slot(&key),
                lock_slot,
                "{shown:?}: {:?} is in another slot",
                key.chars().take(60).collect::<String>()
            );
        }
        raw(&server, &["FLUSHALL"]);
    }
    assert!(wait_until(Duration::from_secs(5), || leasehold_test_support::pubsub_channels(&server).is_empty()).await);
}
both_servers!(hostile_names_are_waited_on_and_keep_every_key_in_their_slot);

// 12. Small, bounded Debug.

/// With 200 other locks held, a guard prints a few hundred bytes, and a huge name is
/// cut.
async fn debug_output_is_small_and_bounded(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let mut guards = Vec::new();
    for i in 0..200 {
        guards.push(client.lock(format!("many:{i}")).lock().await.expect("lock"));
    }
    let huge = client.lock("h".repeat(1 << 20));
    let guard = huge.lock().await.expect("lock");
    for shown in [format!("{guard:?}"), format!("{huge:?}"), format!("{client:?}"), format!("{:?}", guards[0])] {
        assert!(shown.len() < 512, "{} bytes: {}", shown.len(), &shown[..200.min(shown.len())]);
    }
    guard.unlock().await.expect("unlock");
}
both_servers!(debug_output_is_small_and_bounded);
