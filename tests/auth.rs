//! Passwords and ACL users, against a real redis-server.
//!
//! `leasehold_acl_rules` is the one copy of the ACL rules that docs/deployment.md gives
//! ("ACL rules for a leasehold client"): keep the two the same.

use std::time::Duration;

use leasehold::{Client, ErrorKind};
use leasehold_test_support::{pttl, raw, wait_until, RedisCluster, RedisServer, RespValue, ServerOptions};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
const USER: &str = "locker";
const PASSWORD: &str = "s3cret-pass";

/// The ACL rules a leasehold client needs, for lock names (full keys, after any
/// `key_prefix`) matching the glob `lock_keys`. As in docs/deployment.md.
fn leasehold_acl_rules(lock_keys: &str) -> Vec<String> {
    let mut rules: Vec<String> = [
        "resetkeys",
        "resetchannels",
        "-@all",
        // Sent by the client.
        "+evalsha",
        "+script|load",
        "+exists",
        "+hget",
        "+pttl",
        "+subscribe",
        "+unsubscribe",
        // Confirms each SUBSCRIBE (lock-pubsub sends it behind the subscribe).
        "+ping",
        // Run inside the scripts (crates/lock-core/lua/*.lua), checked against the same user.
        "+hexists",
        "+hset",
        "+hdel",
        "+pexpire",
        "+del",
        // The scripts' publish command on a standalone server (their last ARGV). A
        // cluster with sharded pub/sub needs +spublish, +ssubscribe and +sunsubscribe
        // instead (docs/deployment.md §3, cluster only): unneeded here.
        "+publish",
        // The server clock of the wait queues (acquire.lua, release.lua, the fair-lock
        // scripts), FencedLock's token seed (fenced_acquire.lua).
        "+time",
        // Only for FencedLock (fenced_acquire.lua) and fenced writes (fenced_write.lua).
        "+incr",
        "+get",
        "+set",
        "+strlen",
        // Only with ClientBuilder::sync_replicas (sent by the client behind each acquire).
        "+wait",
        // The wait queues: a Lock's and FencedLock's (acquire.lua, fenced_acquire.lua,
        // release.lua) and FairLock's (its scripts), Lists of waiting owners.
        "+lindex",
        "+lpop",
        "+rpush",
        "+lrem",
        // Only for the wait queue of a Lock and a FencedLock (acquire.lua,
        // fenced_acquire.lua: a waiter's place).
        "+lpos",
        // A waiting Lock or FencedLock flags the holder it waits for (acquire.lua,
        // fenced_acquire.lua: the holder's field, found with HKEYS).
        "+hkeys",
        // Only for FairLock (fair_acquire.lua, fair_release.lua, fair_force_release.lua).
        "+zscore",
        "+zadd",
        "+zrem",
        "+zcard",
        // Keys: the lock keys, and the channel derived from them. The release channel is
        // also a key argument of the scripts, so it needs a key pattern too.
        "~redisson_lock__channel:*",
        // FencedLock's token counters and the fences of resources written with fenced_set.
        "~redisson_lock_token:*",
        "~leasehold_fence:*",
        // FairLock's wait queues and waiter deadlines.
        "~redisson_lock_queue:*",
        "~redisson_lock_timeout:*",
        // A Lock's wait queue, its waiter entries, and its queue channel (also a key
        // argument of the scripts).
        "~leasehold_lock_queue:*",
        "~leasehold_lock_waiters:*",
        "~leasehold_lock__queue:*",
        "&redisson_lock__channel:*",
        "&leasehold_lock__queue:*",
        // Only for ReadWriteLock: its scripts read whole Hashes (HGETALL: the readers to
        // prune, HLEN: holders left) and the waiting writers (a sorted set: ZRANGE, and
        // ZREMRANGEBYSCORE purges dead writers; ZADD and ZREM as FairLock's).
        "+hgetall",
        "+hlen",
        "+zrange",
        "+zremrangebyscore",
        // The read holds' timeout keys ({NAME}:OWNER:rwlock_timeout:k, and their prefix
        // without the :k, passed as KEYS[2]; the scripts
        // also build for other holders), the waiting writers, and the channel (a key
        // argument of the scripts too).
        "~*:rwlock_timeout*",
        "~leasehold_rwlock_writers:*",
        "~redisson_rwlock:*",
        "&redisson_rwlock:*",
        // The waiting readers (a Hash a refused waiting read registers in, which a write
        // release grants and empties) and the grant channel (the write release names the
        // readers it granted there; in ARGV, not a key).
        "~leasehold_rwlock_readers:*",
        "&leasehold_rwlock__grants:*",
        // Only for CountDownLatch: latch_count_down.lua counts down (DECR), every latch
        // script checks the key is a String (TYPE); its channel is built literally by
        // Redisson, redisson_countdownlatch__channel__{NAME}, and is a key argument too.
        "+decr",
        "+type",
        "~redisson_countdownlatch__channel__*",
        "&redisson_countdownlatch__channel__*",
        // Who holds what: every connection's name (CLIENT SETNAME), the client's
        // description (client_describe.lua: HSET, PEXPIRE; DEL at shutdown), and the
        // history of forced unlocks (the force-release scripts: LLEN checks its type,
        // LPUSH, LTRIM, PEXPIRE; TYPE, HKEYS and TIME as above).
        "+client|setname",
        "~leasehold_client:*",
        "+llen",
        "+lpush",
        "+ltrim",
        "~leasehold_history:*",
    ]
    .iter()
    .map(|r| (*r).to_owned())
    .collect();
    rules.push(format!("~{lock_keys}"));
    rules
}

/// What fred asks on every new connection and does without when refused (docs:
/// "optional").
const FRED_CONNECT_EXTRAS: [&str; 2] = ["+client|id", "+info"];

/// `ACL SETUSER name on >password rules…` on `server`, as the default user.
fn set_user(server: &RedisServer, name: &str, rules: &[String]) {
    let password = format!(">{PASSWORD}");
    let mut args = vec!["ACL", "SETUSER", name, "reset", "on", password.as_str()];
    args.extend(rules.iter().map(String::as_str));
    assert_eq!(raw(server, &args), RespValue::Simple("OK".to_owned()), "ACL SETUSER {args:?}");
}

fn user_url(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:{PASSWORD}@127.0.0.1:{}", server.port())
}

/// A client whose acquires wait for one replica (`WAIT`).
async fn connect_synced(url: &str) -> leasehold::Result<Client> {
    Client::builder()
        .url(url)
        .command_timeout(COMMAND_TIMEOUT)
        .sync_replicas(1, Duration::from_millis(1_000))
        .connect()
        .await
}

async fn connect(url: &str, watchdog: Duration) -> leasehold::Result<Client> {
    // The command timeout must fit in a renewal period (watchdog / 3).
    let command_timeout = leasehold_test_support::command_timeout_for(watchdog).min(COMMAND_TIMEOUT);
    Client::builder().url(url).watchdog_timeout(watchdog).command_timeout(command_timeout).connect().await
}

/// The number of entries in `ACL LOG` (denied commands, keys, channels, failed AUTHs).
fn acl_denials(server: &RedisServer) -> Vec<RespValue> {
    match raw(server, &["ACL", "LOG"]) {
        RespValue::Array(entries) => entries,
        other => panic!("ACL LOG: {other:?}"),
    }
}

/// How many of the server's connections are authenticated as `user`.
fn connections_of(server: &RedisServer, user: &str) -> usize {
    let RespValue::Bulk(list) = raw(server, &["CLIENT", "LIST"]) else { panic!("CLIENT LIST") };
    list.lines().filter(|line| line.split(' ').any(|f| f == format!("user={user}"))).count()
}

fn fred_details(err: &leasehold::Error) -> String {
    err.fred_error().map(|e| e.details().to_owned()).unwrap_or_default()
}

/// Locks `name` on `holder` with a 30 s lease, lets `waiter` wait for it, and releases:
/// the waiter must get the lock through the release message (within 10 s, long before
/// the lease would run out), over its own subscriber connection.
async fn waiter_is_woken_by_the_release(holder: &Client, waiter: &Client, name: &str) {
    let guard = holder.lock(name).lock_with_lease(Duration::from_secs(30)).await.expect("lock");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let messages_before = waiter.stats().subscriber.messages;
    let waiting = {
        let waiter = waiter.clone();
        let name = name.to_owned();
        tokio::spawn(async move { waiter.lock(name).try_lock_for(Duration::from_secs(20)).await })
    };
    assert!(
        wait_until(Duration::from_secs(5), || waiter.subscribed_channels().contains(&channel)).await,
        "the server confirmed the waiter's SUBSCRIBE"
    );
    guard.unlock().await.expect("unlock");
    let woken = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("woken in time").expect("task");
    woken.expect("wait").expect("the waiter got the lock").unlock().await.expect("unlock");
    assert!(waiter.stats().subscriber.messages > messages_before, "woken by a release message");
}

/// `redis://:password@` (the default user's password, `requirepass`): both connections
/// authenticate; a wrong or missing password is a prompt error, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_url_authenticates_both_connections() {
    let server = RedisServer::start_with(ServerOptions::default().arg("requirepass", PASSWORD));
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port());
    let first = connect(&url, Duration::from_secs(30)).await.expect("connect with the password");
    let second = connect(&url, Duration::from_secs(30)).await.expect("connect with the password");
    waiter_is_woken_by_the_release(&first, &second, "auth:order").await;

    for (what, bad) in [
        ("wrong password", format!("redis://:wrong@127.0.0.1:{}", server.port())),
        ("no password", format!("redis://127.0.0.1:{}", server.port())),
    ] {
        let started = std::time::Instant::now();
        let err = connect(&bad, Duration::from_secs(30)).await.expect_err(what);
        eprintln!("{what}: {err} / {}", fred_details(&err));
        assert!(started.elapsed() < COMMAND_TIMEOUT, "{what}: refused promptly");
        assert_eq!(err.kind(), ErrorKind::Redis, "{what}: {err} / {}", fred_details(&err));
    }
}

/// A user with exactly the documented rules (`redis://user:password@`): lock, a second
/// client waits and is woken, the watchdog renews, and another client force-unlocks —
/// and the server denied nothing (`ACL LOG` stays empty).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_user_can_do_everything_a_client_does() {
    let server = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&server);
    set_user(&server, USER, &leasehold_acl_rules("app:*"));
    let url = user_url(&server, USER);
    let first = connect(&url, Duration::from_millis(900)).await.expect("connect as the ACL user");
    let second = connect(&url, Duration::from_millis(900)).await.expect("connect as the ACL user");
    assert_eq!(connections_of(&server, USER), 4, "both clients' command and subscriber connections are the user");

    waiter_is_woken_by_the_release(&first, &second, "app:order:1").await;

    // Watchdog renewal: a 900 ms lease renewed every 300 ms, held for 5 leases.
    let lock = first.lock("app:order:2");
    let guard = lock.lock().await.expect("lock in watchdog mode");
    let renewals_before = first.stats().watchdog.calls;
    assert!(
        wait_until(Duration::from_secs(15), || first.stats().watchdog.calls >= renewals_before + 15).await,
        "the watchdog kept renewing"
    );
    assert!(!guard.is_lost(), "renewals succeeded");
    assert_eq!(first.stats().watchdog.failed_calls, 0);
    assert!(pttl(&server, "app:order:2") > 0, "the key outlived 5 leases");

    // Force-unlock from the other client: the holder learns it lost the lock.
    assert!(second.lock("app:order:2").force_unlock().await.expect("force unlock"), "the key existed");
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("the holder was told");
    assert_eq!(pttl(&server, "app:order:2"), -2);
    assert!(guard.unlock().await.expect_err("lost").is_lock_lost());

    // A fenced lock and a fenced write; an acquire acknowledged by the replica.
    fenced_and_synced(&url, "app:order:4").await.expect("fenced lock, fenced write, synced acquire");

    // fred asks every new connection for `CLIENT ID` and `INFO server`, and carries on
    // when they are refused: the only denials are those, until the user is allowed them.
    assert!(!denied_objects(&server).is_empty(), "fred's connect-time questions were refused");
    assert!(denied_objects(&server).iter().all(|o| FRED_CONNECT_EXTRAS.contains(&format!("+{o}").as_str())));
    let mut quiet = leasehold_acl_rules("app:*");
    quiet.extend(FRED_CONNECT_EXTRAS.iter().map(|r| (*r).to_owned()));
    set_user(&server, "quiet-locker", &quiet);
    raw(&server, &["ACL", "LOG", "RESET"]);
    let third = connect(&user_url(&server, "quiet-locker"), Duration::from_millis(600)).await.expect("connect");
    waiter_is_woken_by_the_release(&third, &first, "app:order:3").await;
    assert_eq!(acl_denials(&server), Vec::new(), "with the two extras the server denies nothing");
}

/// The `object` (command, key or channel) of every `ACL LOG` entry.
fn denied_objects(server: &RedisServer) -> Vec<String> {
    acl_denials(server)
        .iter()
        .filter_map(|entry| match entry {
            RespValue::Array(fields) => fields
                .chunks(2)
                .find(|pair| pair[0].as_str() == Some("object"))
                .and_then(|pair| pair[1].as_str().map(str::to_owned)),
            _ => None,
        })
        .collect()
}

/// A user missing one right gets a prompt `ErrorKind::Redis` whose fred error is the
/// server's `NOPERM`, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_right_is_a_prompt_noperm_error_and_writes_nothing() {
    let server = RedisServer::start();
    let without =
        |rule: &str| -> Vec<String> { leasehold_acl_rules("app:*").into_iter().filter(|r| r != rule).collect() };

    // No EVALSHA: connecting works (SCRIPT LOAD is allowed), every lock call is refused.
    set_user(&server, "no-evalsha", &without("+evalsha"));
    let client = connect(&user_url(&server, "no-evalsha"), Duration::from_secs(30)).await.expect("connect");
    let started = std::time::Instant::now();
    let err = client.lock("app:order:1").try_lock().await.expect_err("no EVALSHA");
    eprintln!("no EVALSHA: {err} / {}", fred_details(&err));
    assert!(started.elapsed() < COMMAND_TIMEOUT, "refused promptly");
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert!(fred_details(&err).starts_with("NOPERM"), "{}", fred_details(&err));
    let err = client.lock("app:order:1").lock().await.expect_err("no EVALSHA, waiting");
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    drop(client);

    // A lock name outside the user's key pattern.
    set_user(&server, "app-only", &leasehold_acl_rules("app:*"));
    let client = connect(&user_url(&server, "app-only"), Duration::from_secs(30)).await.expect("connect");
    let err = client.lock("other:order:1").try_lock().await.expect_err("outside the key pattern");
    eprintln!("outside the key pattern: {err} / {}", fred_details(&err));
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert!(fred_details(&err).starts_with("NOPERM"), "{}", fred_details(&err));
    drop(client);

    // No SCRIPT LOAD: refused when connecting (scripts are loaded then).
    set_user(&server, "no-script-load", &without("+script|load"));
    let err = connect(&user_url(&server, "no-script-load"), Duration::from_secs(30)).await.expect_err("no SCRIPT LOAD");
    eprintln!("no SCRIPT LOAD: {err} / {}", fred_details(&err));
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert!(fred_details(&err).starts_with("NOPERM"), "{}", fred_details(&err));

    // Nothing but the description of the one client allowed to write it (`app-only`).
    let written = leasehold_test_support::lock_keys(&server);
    assert_eq!(written, Vec::<String>::new(), "nothing was written");
    assert!(!acl_denials(&server).is_empty(), "the server logged the denials");
}

/// Every documented rule is used: with any one of them removed, some step of a client's
/// life fails or the server logs a denial (so the rules are minimal, not just enough).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_rule_is_needed() {
    let server = RedisServer::start();
    // For the `+wait` rule: a synced acquire needs a replica to acknowledge it.
    let _replica = RedisServer::start_replica_of(&server);
    let all = leasehold_acl_rules("app:*");
    // With every rule the whole life succeeds, so a failure below is the removed rule's.
    raw(&server, &["ACL", "LOG", "RESET"]);
    set_user(&server, "probe-all", &all);
    let baseline = life_of_a_client(&user_url(&server, "probe-all"), "app:probe:all").await;
    assert_eq!(baseline, Ok(()), "the full rule set");
    let extra: Vec<String> = denied_objects(&server);
    assert!(extra.iter().all(|o| FRED_CONNECT_EXTRAS.contains(&format!("+{o}").as_str())), "denied: {extra:?}");
    let mut unneeded = Vec::new();
    for (i, removed) in all.iter().enumerate().filter(|(_, r)| !r.starts_with("reset") && *r != "-@all") {
        raw(&server, &["ACL", "LOG", "RESET"]);
        let user = format!("probe-{i}");
        let rules: Vec<String> = all.iter().filter(|r| *r != removed).cloned().collect();
        set_user(&server, &user, &rules);
        let ok = life_of_a_client(&user_url(&server, &user), &format!("app:probe:{i}")).await;
        let denials = denied_objects(&server);
        let denials: Vec<&String> =
            denials.iter().filter(|o| !FRED_CONNECT_EXTRAS.contains(&format!("+{o}").as_str())).collect();
        eprintln!("without {removed}: {ok:?}, denials {denials:?}");
        if ok.is_ok() && denials.is_empty() {
            unneeded.push(removed.clone());
        }
    }
    assert_eq!(unneeded, Vec::<String>::new(), "rules nothing needed");
}

/// Connect two clients, lock with the watchdog, let the other wait and be woken,
/// ask `is_locked`, `hold_count` and `remaining_ttl`, renew, force-unlock: the first
/// error, if any.
async fn life_of_a_client(url: &str, name: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: leasehold::Error| format!("{what}: {e} / {}", fred_details(&e));
    // A 900 ms watchdog: renewals every 300 ms, each with a 299 ms command timeout,
    // which holds on a loaded 2-core machine (300 ms did not: 99 ms timeouts fired).
    let first = connect(url, Duration::from_millis(900)).await.map_err(step("connect"))?;
    let second = connect(url, Duration::from_millis(900)).await.map_err(step("connect"))?;
    // Its connections are named (`+client|setname`: a refusal is not in `ACL LOG`, so
    // the name itself is looked for, as the default user, over a raw connection).
    let addr = url.rsplit('@').next().unwrap_or(url);
    let name_field = format!("name={} ", first.connection_name());
    let named = || {
        let list = leasehold_test_support::raw_command(addr, &[b"CLIENT", b"LIST"]);
        list.as_str().is_some_and(|text| text.contains(&name_field))
    };
    if !wait_until(Duration::from_secs(2), named).await {
        let list = leasehold_test_support::raw_command(addr, &[b"CLIENT", b"LIST"]);
        return Err(format!("the client's connections are not named {name_field:?}: {list:?}"));
    }
    let guard = first.lock(name).lock_with_lease(Duration::from_secs(30)).await.map_err(step("lock"))?;
    let waiting = {
        let second = second.clone();
        let name = name.to_owned();
        tokio::spawn(async move { second.lock(name).try_lock_for(Duration::from_secs(3)).await })
    };
    let channel = format!("redisson_lock__channel:{{{name}}}");
    wait_until(Duration::from_secs(2), || second.subscribed_channels().contains(&channel)).await;
    guard.unlock().await.map_err(step("unlock"))?;
    let woken = waiting.await.map_err(|e| format!("task: {e}"))?.map_err(step("wait"))?;
    woken.ok_or("not woken within 3 s")?.unlock().await.map_err(step("unlock woken"))?;
    // The channel lingers subscribed (lock_pubsub::LINGER), then is unsubscribed.
    if !wait_until(Duration::from_secs(5), || second.subscribed_channels().is_empty()).await {
        return Err(format!("still subscribed after the linger: {:?}", second.subscribed_channels()));
    }
    let lock = first.lock(name);
    let held = lock.lock().await.map_err(step("watchdog lock"))?;
    // The plain commands: EXISTS, HGET, PTTL.
    lock.is_locked().await.map_err(step("is_locked"))?;
    lock.hold_count().await.map_err(step("hold_count"))?;
    lock.remaining_ttl().await.map_err(step("remaining_ttl"))?;
    let calls = first.stats().watchdog.calls;
    wait_until(Duration::from_secs(3), || first.stats().watchdog.calls >= calls + 2).await;
    if held.is_lost() || first.stats().watchdog.failed_calls > 0 {
        return Err("renewal failed".into());
    }
    second.lock(name).force_unlock().await.map_err(step("force unlock"))?;
    fenced_and_synced(url, name).await
}

/// A fenced lock (`fenced_acquire.lua`) and a fenced write (`fenced_write.lua`) on
/// `NAME:res`, then an acquire acknowledged by a replica (`WAIT`): the first error, if any.
async fn fenced_and_synced(url: &str, name: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: leasehold::Error| format!("{what}: {e} / {}", fred_details(&e));
    let client = connect(url, Duration::from_secs(30)).await.map_err(step("connect"))?;
    let fenced = client.fenced_lock(format!("{name}:fenced"));
    let guard = fenced.lock_with_lease(Duration::from_secs(30)).await.map_err(step("fenced lock"))?;
    let written = guard.fenced_set(&format!("{name}:res"), "v").await.map_err(step("fenced write"))?;
    if !written.is_written() {
        return Err(format!("fenced write rejected: {written:?}"));
    }
    guard.unlock().await.map_err(step("fenced unlock"))?;
    let synced = connect_synced(url).await.map_err(step("connect synced"))?;
    let held = synced.lock(format!("{name}:synced")).try_lock().await.map_err(step("synced acquire"))?;
    held.ok_or("the synced lock was held")?.unlock().await.map_err(step("synced unlock"))?;
    fair(url, name).await
}

/// A fair lock on `NAME:fair`: a wait that times out (and removes its queue entry), a
/// queued waiter woken on its own channel by the release, a force-unlock: the first error.
async fn fair(url: &str, name: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: leasehold::Error| format!("{what}: {e} / {}", fred_details(&e));
    let first = connect(url, Duration::from_secs(30)).await.map_err(step("connect"))?;
    let second = connect(url, Duration::from_secs(30)).await.map_err(step("connect"))?;
    let name = format!("{name}:fair");
    let guard = first.fair_lock(&name).lock_with_lease(Duration::from_secs(30)).await.map_err(step("fair lock"))?;
    let timed_out =
        second.fair_lock(&name).try_lock_for(Duration::from_millis(200)).await.map_err(step("fair wait"))?;
    if timed_out.is_some() {
        return Err("the held fair lock was acquired".into());
    }
    let lock = second.fair_lock(&name);
    let channel = lock.waiter_channel().map_err(step("waiter channel"))?;
    let waiting = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(3)).await });
    wait_until(Duration::from_secs(2), || second.subscribed_channels().contains(&channel)).await;
    guard.unlock().await.map_err(step("fair unlock"))?;
    let woken = waiting.await.map_err(|e| format!("task: {e}"))?.map_err(step("fair queued wait"))?;
    woken.ok_or("the fair waiter was not woken within 3 s")?.unlock().await.map_err(step("fair unlock woken"))?;
    let _held = first.fair_lock(&name).lock_with_lease(Duration::from_secs(30)).await.map_err(step("fair relock"))?;
    second.fair_lock(&name).force_unlock().await.map_err(step("fair force unlock"))?;
    read_write(&first, &second, &name).await?;
    latch(&first, &second, &name).await
}

/// A read/write lock on `NAME:rw`: readers of two clients share, a writer of the second
/// waits (recorded among the waiting writers), a fresh reader is kept out by it, the
/// last read release wakes the writer, a reader waits behind the write and its release
/// lets it in; `is_read_locked`, then a
/// force-unlock: the first error.
async fn read_write(first: &Client, second: &Client, name: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: leasehold::Error| format!("{what}: {e} / {}", fred_details(&e));
    let name = format!("{name}:rw");
    let lease = Duration::from_secs(30);
    let read_a = first.read_write_lock(&name).read_with_lease(lease).await.map_err(step("read"))?;
    let read_b = second.read_write_lock(&name).try_read().await.map_err(step("shared read"))?.ok_or("not shared")?;
    let writer = second.read_write_lock(&name);
    let writing = tokio::spawn(async move {
        let guard = writer.try_write_with(Duration::from_secs(3), lease).await?;
        Ok::<_, leasehold::Error>(guard.map(|guard| (guard, writer)))
    });
    let channel = format!("redisson_rwlock:{{{name}}}");
    wait_until(Duration::from_secs(2), || {
        second.subscribed_channels().contains(&channel) && second.stats().waiters >= 1
    })
    .await;
    // A fresh reader while the writer waits: the waiting writers are read (and purged).
    if first.read_write_lock(&name).try_read().await.map_err(step("read behind a waiting writer"))?.is_some() {
        return Err("a fresh reader entered ahead of the waiting writer".into());
    }
    read_b.unlock().await.map_err(step("read unlock"))?;
    read_a.unlock().await.map_err(step("last read unlock"))?;
    let (write, writer) = writing
        .await
        .map_err(|e| format!("task: {e}"))?
        .map_err(step("write wait"))?
        .ok_or("the writer was not woken")?;
    if !writer.is_write_locked().await.map_err(step("is_write_locked"))? {
        return Err("the write is not held".into());
    }
    let reader = first.read_write_lock(&name);
    let reading = tokio::spawn(async move { reader.try_read_with(Duration::from_secs(3), lease).await });
    // The reader registered for a grant and listens on the grant channel: the release
    // grants it its hold.
    let grants = format!("leasehold_rwlock__grants:{{{name}}}");
    wait_until(Duration::from_secs(2), || first.subscribed_channels().contains(&grants) && first.stats().waiters >= 1)
        .await;
    write.unlock().await.map_err(step("write unlock"))?;
    let read = reading
        .await
        .map_err(|e| format!("task: {e}"))?
        .map_err(step("read wait"))?
        .ok_or("the reader was not woken")?;
    if !first.read_write_lock(&name).is_read_locked().await.map_err(step("is_read_locked"))? {
        return Err("the read is not held".into());
    }
    second.read_write_lock(&name).force_unlock().await.map_err(step("rw force unlock"))?;
    drop(read);
    Ok(())
}

/// A count-down latch on `NAME:latch`: set, a waiter of the second client woken by the
/// count down to zero (its recheck cannot fire first), set again, read, delete: the
/// first error.
async fn latch(first: &Client, second: &Client, name: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: leasehold::Error| format!("{what}: {e} / {}", fred_details(&e));
    let latch = first.count_down_latch(format!("{name}:latch"));
    if !latch.try_set_count(1).await.map_err(step("latch set"))? {
        return Err("the latch existed".into());
    }
    let waiting = second.count_down_latch(format!("{name}:latch")).with_recheck(Duration::from_secs(60));
    let channel = waiting.channel().to_owned();
    let wait = tokio::spawn(async move { waiting.try_wait_for(Duration::from_secs(3)).await });
    wait_until(Duration::from_secs(2), || {
        second.subscribed_channels().contains(&channel) && second.stats().waiters >= 1
    })
    .await;
    latch.count_down().await.map_err(step("count down"))?;
    if !wait.await.map_err(|e| format!("task: {e}"))?.map_err(step("latch wait"))? {
        return Err("the latch waiter was not woken".into());
    }
    latch.try_set_count(2).await.map_err(step("latch set again"))?;
    if latch.count().await.map_err(step("latch count"))? != 2 {
        return Err("the latch count is not 2".into());
    }
    if !latch.delete().await.map_err(step("latch delete"))? {
        return Err("the latch was not deleted".into());
    }
    Ok(())
}

/// The rules a cluster client needs on top of [`leasehold_acl_rules`] (docs/deployment.md
/// §3, "Cluster only"): sharded pub/sub, the `COMMAND INFO SPUBLISH` question at connect,
/// and the slot map.
const CLUSTER_EXTRAS: [&str; 6] =
    ["+ssubscribe", "+sunsubscribe", "+spublish", "+command|info", "+cluster|slots", "+cluster|info"];

/// The `object` of every `ACL LOG` entry of `user` on the node `addr`.
fn denied_objects_on(cluster: &RedisCluster, addr: &str, user: &str) -> Vec<String> {
    let RespValue::Array(entries) = cluster.on(addr, &["ACL", "LOG"]) else { panic!("ACL LOG on {addr}") };
    let field = |fields: &[RespValue], name: &str| {
        fields
            .chunks(2)
            .find(|pair| pair[0].as_str() == Some(name))
            .and_then(|pair| pair[1].as_str().map(str::to_owned))
    };
    entries
        .iter()
        .filter_map(|entry| match entry {
            RespValue::Array(fields) if field(fields, "username").as_deref() == Some(user) => field(fields, "object"),
            _ => None,
        })
        .collect()
}

/// On a cluster (sharded pub/sub), a user with the documented rules plus the cluster-only
/// ones (`CLUSTER_EXTRAS`): a waiter on another client is woken by the release, the
/// watchdog renews, a force-unlock tells the holder, a fenced lock, fenced write, synced
/// acquire and fair lock work, and the nodes deny nothing but fred's optional
/// connect-time questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_user_works_on_a_cluster_with_the_cluster_rules() {
    let cluster = RedisCluster::shared();
    let user = format!("locker-c{}", std::process::id());
    let prefix = format!("aclc{}:", std::process::id());
    let mut rules = leasehold_acl_rules(&format!("{prefix}*"));
    rules.extend(CLUSTER_EXTRAS.iter().map(|r| (*r).to_owned()));
    let password = format!(">{PASSWORD}");
    for addr in cluster.addrs() {
        let mut args = vec!["ACL", "SETUSER", user.as_str(), "reset", "on", password.as_str()];
        args.extend(rules.iter().map(String::as_str));
        assert_eq!(cluster.on(&addr, &args), RespValue::Simple("OK".to_owned()), "ACL SETUSER on {addr}");
    }
    let url = cluster.url().replacen("redis-cluster://", &format!("redis-cluster://{user}:{PASSWORD}@"), 1);
    let first = connect(&url, Duration::from_millis(900)).await.expect("connect as the ACL user");
    let second = connect(&url, Duration::from_millis(900)).await.expect("connect as the ACL user");

    waiter_is_woken_by_the_release(&first, &second, &format!("{prefix}order:1")).await;

    let name = format!("{prefix}order:2");
    let guard = first.lock(&name).lock().await.expect("lock in watchdog mode");
    let renewals_before = first.stats().watchdog.calls;
    assert!(
        wait_until(Duration::from_secs(15), || first.stats().watchdog.calls >= renewals_before + 10).await,
        "the watchdog kept renewing"
    );
    assert!(!guard.is_lost(), "renewals succeeded");
    assert_eq!(first.stats().watchdog.failed_calls, 0);
    assert!(second.lock(&name).force_unlock().await.expect("force unlock"), "the key existed");
    tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.expect("the holder was told");

    fenced_and_synced(&url, &format!("{prefix}order:4")).await.expect("fenced lock, fenced write, synced acquire");

    for addr in cluster.addrs() {
        let denied = denied_objects_on(cluster, &addr, &user);
        assert!(
            denied.iter().all(|o| FRED_CONNECT_EXTRAS.contains(&format!("+{o}").as_str())),
            "{addr} denied {denied:?}"
        );
    }
}

/// One waiter woken by a release on the cluster, as `user`: the first error, if any.
async fn cluster_wake_up(url: &str, name: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: leasehold::Error| format!("{what}: {e} / {}", fred_details(&e));
    let holder = connect(url, Duration::from_secs(30)).await.map_err(step("connect"))?;
    let waiter = connect(url, Duration::from_secs(30)).await.map_err(step("connect"))?;
    let guard = holder.lock(name).lock_with_lease(Duration::from_secs(30)).await.map_err(step("lock"))?;
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let waiting = {
        let (waiter, name) = (waiter.clone(), name.to_owned());
        tokio::spawn(async move { waiter.lock(name).try_lock_for(Duration::from_secs(6)).await })
    };
    if !wait_until(Duration::from_secs(3), || waiter.subscribed_channels().contains(&channel)).await {
        return Err("the waiter's subscription was not confirmed".into());
    }
    guard.unlock().await.map_err(step("unlock"))?;
    let woken = tokio::time::timeout(Duration::from_secs(3), waiting).await.map_err(|_| "not woken in 3 s")?;
    let guard = woken.map_err(|e| e.to_string())?.map_err(step("wait"))?.ok_or("the waiter timed out")?;
    guard.unlock().await.map_err(step("unlock"))?;
    // Let the channel's linger run out, so its SUNSUBSCRIBE is sent too.
    let unsubscribed = wait_until(Duration::from_secs(3), || waiter.subscribed_channels().is_empty()).await;
    unsubscribed.then_some(()).ok_or_else(|| "the waiter's channel stayed subscribed".to_owned())
}

/// Each cluster-only rule is needed: without it, the wake-up above fails or a node logs
/// a denial of that command for the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cluster_rule_is_needed() {
    let cluster = RedisCluster::shared();
    let password = format!(">{PASSWORD}");
    for (n, missing) in CLUSTER_EXTRAS.iter().enumerate() {
        let user = format!("locker-c{}-{n}", std::process::id());
        let prefix = format!("aclc{}-{n}:", std::process::id());
        let mut rules = leasehold_acl_rules(&format!("{prefix}*"));
        rules.extend(CLUSTER_EXTRAS.iter().filter(|r| *r != missing).map(|r| (*r).to_owned()));
        for addr in cluster.addrs() {
            let mut args = vec!["ACL", "SETUSER", user.as_str(), "reset", "on", password.as_str()];
            args.extend(rules.iter().map(String::as_str));
            assert_eq!(cluster.on(&addr, &args), RespValue::Simple("OK".to_owned()), "ACL SETUSER on {addr}");
        }
        let url = cluster.url().replacen("redis-cluster://", &format!("redis-cluster://{user}:{PASSWORD}@"), 1);
        let outcome = cluster_wake_up(&url, &format!("{prefix}order")).await;
        let object = missing.trim_start_matches('+');
        let denied =
            cluster.addrs().iter().any(|addr| denied_objects_on(cluster, addr, &user).iter().any(|o| o == object));
        eprintln!("without {missing}: {outcome:?}, denied: {denied}");
        assert!(outcome.is_err() || denied, "{missing} looks unneeded: the wake-up worked and nothing was denied");
    }
}

/// The rights docs/deployment.md gives an `Election` on top of a `Lock`'s: the election's
/// keys and change channel and `+hmget`. A campaign, a follower's `observe()`, a proclaim,
/// a waiting candidate and a resign that hands the lead over run with nothing denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_election_rights_are_enough() {
    let server = RedisServer::start();
    let mut rules = leasehold_acl_rules("app:*");
    rules.extend(FRED_CONNECT_EXTRAS.iter().map(|r| (*r).to_owned()));
    rules.extend(
        [
            "+hmget",
            "~leasehold_election:*",
            "~leasehold_election_term:*",
            "~leasehold_election_leader:*",
            "~leasehold_election_candidates:*",
            "~leasehold_election__channel:*",
            "&leasehold_election__channel:*",
        ]
        .iter()
        .map(|r| (*r).to_owned()),
    );
    set_user(&server, USER, &rules);
    raw(&server, &["ACL", "LOG", "RESET"]);
    let url = user_url(&server, USER);
    let first = connect(&url, Duration::from_millis(900)).await.expect("connect as the ACL user");
    let second = connect(&url, Duration::from_millis(900)).await.expect("connect as the ACL user");

    let leading = first.election("jobs").campaign("a").await.expect("campaign");
    let follower = second.election("jobs");
    let mut changes = follower.observe();
    let now = tokio::time::timeout(Duration::from_secs(5), changes.next()).await.expect("a first state");
    let now = now.expect("a state").expect("read").expect("a leader");
    assert_eq!((now.value.as_str(), now.term), ("a", leading.term()));
    leading.proclaim("a2").await.expect("proclaim");
    let seen = tokio::time::timeout(Duration::from_secs(5), changes.next()).await.expect("the proclaim");
    assert_eq!(seen.expect("a state").expect("read").expect("a leader").value, "a2");

    let waiting = tokio::spawn(async move { follower.campaign("b").await });
    assert!(
        wait_until(Duration::from_secs(5), || {
            // The lead's wait queue, `leasehold_lock_queue:{T}:leasehold_election:{jobs}`.
            matches!(raw(&server, &["KEYS", "leasehold_lock_queue:*"]), RespValue::Array(keys) if keys.len() == 1)
        })
        .await,
        "the second candidate queued: denied {:?}, keys {:?}",
        denied_objects(&server),
        raw(&server, &["KEYS", "*"])
    );
    let term = leading.term();
    leading.resign().await.expect("resign");
    let next = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("handed over").expect("task");
    let next = next.expect("campaign");
    assert!(next.term() > term, "a larger term");
    next.resign().await.expect("resign");
    assert_eq!(acl_denials(&server), Vec::new(), "the server denied nothing");
}
