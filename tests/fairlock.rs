//! The fair lock (issue 10, part 2): `FairLock` against real servers and real child
//! processes: cross-process queue order, dead and departed waiters, Redisson's own
//! fair-lock scripts on the same name, and the `Lock` guarantees.
//!
//! Every test runs on Redis and on Valkey (`NAME::redis`, `NAME::valkey`, see
//! `both_servers!`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::fred::clients::SubscriberClient;
use leasehold::fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface};
use leasehold_test_support::{
    both_servers, client, client_with, hgetall, pttl, pubsub_channels, raw, wait_until, HolderProcess, RedisServer,
    ServerKind,
};

fn llen(server: &RedisServer, key: &str) -> i64 {
    raw(server, &["LLEN", key]).as_int().unwrap_or_else(|| panic!("LLEN {key}"))
}

fn zcard(server: &RedisServer, key: &str) -> i64 {
    raw(server, &["ZCARD", key]).as_int().unwrap_or_else(|| panic!("ZCARD {key}"))
}

fn lrange(server: &RedisServer, key: &str) -> Vec<String> {
    match raw(server, &["LRANGE", key, "0", "-1"]) {
        leasehold_test_support::RespValue::Array(items) => {
            items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        }
        other => panic!("LRANGE {key}: {other:?}"),
    }
}

/// A client whose queue keep-alive is `keepalive` (command timeout 1 s).
async fn fair_client(server: &RedisServer, keepalive: Duration) -> leasehold::Client {
    leasehold::Client::builder()
        .url(server.url())
        .command_timeout(Duration::from_secs(1))
        .queue_keepalive(keepalive)
        .connect()
        .await
        .expect("connect")
}

/// The lock types whose waiters queue on the server: `FairLock` (Redisson's `RFairLock`
/// queue), `Lock` (leasehold's own queue behind the `RLock` layout) and `FencedLock` (the
/// same queue as `Lock`; a hand-over's claim issues the token). The queue tests below run
/// for each.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Fair,
    Lock,
    Fenced,
}

/// One handle of any kind.
enum Handle {
    Fair(leasehold::FairLock),
    Lock(leasehold::Lock),
    Fenced(leasehold::FencedLock),
}

/// A guard of any kind.
enum Guard {
    Lock(leasehold::LockGuard),
    Fenced(leasehold::FencedGuard),
}

impl Guard {
    async fn unlock(self) -> leasehold::Result<()> {
        match self {
            Guard::Lock(guard) => guard.unlock().await,
            Guard::Fenced(guard) => guard.unlock().await,
        }
    }

    /// A fenced hold's token.
    fn token(&self) -> Option<u64> {
        match self {
            Guard::Lock(_) => None,
            Guard::Fenced(guard) => Some(guard.token()),
        }
    }
}

impl Handle {
    async fn lock_with_lease(&self, lease: Duration) -> leasehold::Result<Guard> {
        match self {
            Handle::Fair(lock) => lock.lock_with_lease(lease).await.map(Guard::Lock),
            Handle::Lock(lock) => lock.lock_with_lease(lease).await.map(Guard::Lock),
            Handle::Fenced(lock) => lock.lock_with_lease(lease).await.map(Guard::Fenced),
        }
    }

    async fn lock(&self) -> leasehold::Result<Guard> {
        match self {
            Handle::Fair(lock) => lock.lock().await.map(Guard::Lock),
            Handle::Lock(lock) => lock.lock().await.map(Guard::Lock),
            Handle::Fenced(lock) => lock.lock().await.map(Guard::Fenced),
        }
    }

    async fn try_lock(&self) -> leasehold::Result<Option<Guard>> {
        match self {
            Handle::Fair(lock) => lock.try_lock().await.map(|g| g.map(Guard::Lock)),
            Handle::Lock(lock) => lock.try_lock().await.map(|g| g.map(Guard::Lock)),
            Handle::Fenced(lock) => lock.try_lock().await.map(|g| g.map(Guard::Fenced)),
        }
    }

    async fn try_lock_for(&self, wait: Duration) -> leasehold::Result<Option<Guard>> {
        match self {
            Handle::Fair(lock) => lock.try_lock_for(wait).await.map(|g| g.map(Guard::Lock)),
            Handle::Lock(lock) => lock.try_lock_for(wait).await.map(|g| g.map(Guard::Lock)),
            Handle::Fenced(lock) => lock.try_lock_for(wait).await.map(|g| g.map(Guard::Fenced)),
        }
    }
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::Fair => "fair",
            Kind::Lock => "lock",
            Kind::Fenced => "fenced",
        }
    }

    fn handle(self, client: &leasehold::Client, name: &str) -> Handle {
        match self {
            Kind::Fair => Handle::Fair(client.fair_lock(name)),
            Kind::Lock => Handle::Lock(client.lock(name)),
            Kind::Fenced => Handle::Fenced(client.fenced_lock(name)),
        }
    }

    /// The wait queue of `name` (a List of owners, head first), for a brace-free name.
    fn queue(self, name: &str) -> String {
        match self {
            Kind::Fair => format!("redisson_lock_queue:{{{name}}}"),
            Kind::Lock | Kind::Fenced => format!("leasehold_lock_queue:{{{name}}}"),
        }
    }

    /// How many waiters have an entry (a deadline) besides their place in the queue.
    fn entries(self, server: &RedisServer, name: &str) -> i64 {
        match self {
            Kind::Fair => zcard(server, &format!("redisson_lock_timeout:{{{name}}}")),
            Kind::Lock | Kind::Fenced => hlen(server, &format!("leasehold_lock_waiters:{{{name}}}")),
        }
    }

    /// Whether a waiter of `name` is subscribed (a fair waiter to its own channel, a
    /// lock waiter to the release channel and the queue channel).
    fn waiter_subscribed(self, server: &RedisServer, name: &str) -> bool {
        let channels = pubsub_channels(server);
        match self {
            Kind::Fair => channels.iter().any(|c| c.starts_with(&format!("redisson_lock__channel:{{{name}}}:"))),
            Kind::Lock | Kind::Fenced => {
                channels.contains(&format!("redisson_lock__channel:{{{name}}}"))
                    && channels.contains(&format!("leasehold_lock__queue:{{{name}}}"))
            }
        }
    }
}

fn hlen(server: &RedisServer, key: &str) -> i64 {
    raw(server, &["HLEN", key]).as_int().unwrap_or_else(|| panic!("HLEN {key}"))
}

/// Starts a `fair_waiter` child of `kind` and waits for its `QUEUING` line; returns it
/// and its owner.
async fn queued_waiter(
    kind: Kind,
    server: &RedisServer,
    name: &str,
    id: &str,
    keepalive_ms: u64,
    hold_ms: u64,
) -> (HolderProcess, String) {
    let url = server.url();
    let args = [url.as_str(), name, id, &keepalive_ms.to_string(), &hold_ms.to_string(), kind.arg()];
    let mut child = HolderProcess::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args);
    let line = child.next_line(Duration::from_secs(10)).await.expect("QUEUING line");
    let owner = line.strip_prefix("QUEUING ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_owned();
    (child, owner)
}

/// Three waiters in three processes, queued in a known order while the lock is held,
/// acquire in that order (each records its id under the lock), and leave no queue.
async fn waiters_acquire_in_queue_order(on: ServerKind, kind: Kind, name: &str) {
    let server = on.start();
    let client = client(&server).await;
    let queue = kind.queue(name);
    let holder = kind.handle(&client, name);
    let guard = holder.lock().await.expect("held by the test");
    let holder_token = guard.token();
    let mut children = Vec::new();
    let mut owners = Vec::new();
    for id in ["1", "2", "3"] {
        let (child, owner) = queued_waiter(kind, &server, name, id, 10_000, 100).await;
        let queued = owners.len() + 1;
        assert!(
            wait_until(Duration::from_secs(10), || lrange(&server, &queue).len() == queued).await,
            "waiter {id} queued"
        );
        owners.push(owner);
        children.push(child);
    }
    assert_eq!(lrange(&server, &queue), owners, "the queue holds the owners in arrival order");
    assert_eq!(kind.entries(&server, name), 3);
    guard.unlock().await.expect("unlock");
    let order_key = format!("{name}:order");
    assert!(wait_until(Duration::from_secs(20), || lrange(&server, &order_key).len() == 3).await, "all three acquired");
    assert_eq!(lrange(&server, &order_key), ["1", "2", "3"], "acquired in queue order");
    if let Some(first) = holder_token {
        // Each fenced waiter was handed the lock and claimed it with a new token: in
        // queue order, each above every earlier one (the test's own included).
        let tokens_key = format!("{name}:tokens");
        // Each pushes its token right after its id.
        assert!(wait_until(Duration::from_secs(5), || lrange(&server, &tokens_key).len() == 3).await, "3 tokens");
        let tokens: Vec<u64> = lrange(&server, &tokens_key).iter().map(|t| t.parse().expect("a token")).collect();
        assert!(first < tokens[0] && tokens[0] < tokens[1] && tokens[1] < tokens[2], "{first} then {tokens:?}");
    }
    for child in &mut children {
        assert_eq!(child.next_line(Duration::from_secs(5)).await.as_deref(), Some("LOCKED"));
        assert_eq!(child.next_line(Duration::from_secs(5)).await.as_deref(), Some("UNLOCKED"));
    }
    assert_eq!((llen(&server, &queue), kind.entries(&server, name)), (0, 0));
    assert_eq!(raw(&server, &["EXISTS", name]).as_int(), Some(0));
}

async fn fair_lock_waiters_in_three_processes_acquire_in_queue_order(on: ServerKind) {
    let lock = leasehold_test_support::client(&on.start()).await.fair_lock("fair:order");
    assert_eq!(lock.queue_key().expect("name"), "redisson_lock_queue:{fair:order}");
    waiters_acquire_in_queue_order(on, Kind::Fair, "fair:order").await;
}
both_servers!(fair_lock_waiters_in_three_processes_acquire_in_queue_order);

async fn lock_waiters_in_three_processes_acquire_in_queue_order(on: ServerKind) {
    waiters_acquire_in_queue_order(on, Kind::Lock, "queue:order").await;
}
both_servers!(lock_waiters_in_three_processes_acquire_in_queue_order);

/// Issue 18 item 2: `FencedLock` waiters queue on the server as `Lock`'s do, so they are
/// served in queue order across processes, and each hand-over's claim issues a token
/// above every earlier one.
async fn fenced_lock_waiters_in_three_processes_acquire_in_queue_order_with_rising_tokens(on: ServerKind) {
    waiters_acquire_in_queue_order(on, Kind::Fenced, "fenced:order").await;
}
both_servers!(fenced_lock_waiters_in_three_processes_acquire_in_queue_order_with_rising_tokens);

/// A queued waiter killed with SIGKILL stops blocking the waiter behind it within its
/// keep-alive (plus the live waiter's refresh period), far sooner than its wait. For a
/// `Lock`, the release hands the lock to the dead head, cut to the life left in its
/// entry; the live waiter, told it is next, takes the lock when that runs out.
async fn a_killed_queued_waiter_stops_blocking(on: ServerKind, kind: Kind, name: &'static str) {
    const KEEPALIVE: Duration = Duration::from_millis(2_000);
    let server = on.start();
    let client = fair_client(&server, KEEPALIVE).await;
    let queue = kind.queue(name);
    let holder = kind.handle(&client, name);
    let guard = holder.lock_with_lease(Duration::from_secs(60)).await.expect("held");
    let (dead, dead_owner) = queued_waiter(kind, &server, name, "dead", 2_000, 100).await;
    assert!(wait_until(Duration::from_secs(10), || llen(&server, &queue) == 1).await, "the child queued");
    let live = fair_client(&server, KEEPALIVE).await;
    let waiting = tokio::spawn(async move {
        let lock = kind.handle(&live, name);
        let got = lock.try_lock_for(Duration::from_secs(30)).await;
        (got.map(|g| g.is_some()), tokio::time::Instant::now())
    });
    assert!(wait_until(Duration::from_secs(10), || llen(&server, &queue) == 2).await, "the live waiter queued behind");
    assert_eq!(lrange(&server, &queue)[0], dead_owner);
    dead.signal("KILL");
    let killed = tokio::time::Instant::now();
    // The release goes to the dead head first; the live waiter must not wait for it.
    guard.unlock().await.expect("unlock");
    let (acquired, at) = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("ended").expect("task");
    assert!(acquired.expect("no error"), "the live waiter acquired");
    let took = at - killed;
    // One keep-alive after the child's last refresh, plus the live waiter's refresh
    // period (a third of it), plus slack for a loaded machine.
    assert!(took <= KEEPALIVE + KEEPALIVE / 3 + Duration::from_millis(1_500), "took {took:?}");
    drop(dead);
}

async fn a_killed_queued_fair_lock_waiter_stops_blocking_the_queue_within_its_keepalive(on: ServerKind) {
    a_killed_queued_waiter_stops_blocking(on, Kind::Fair, "fair:dead").await;
}
both_servers!(a_killed_queued_fair_lock_waiter_stops_blocking_the_queue_within_its_keepalive);

async fn a_killed_queued_lock_waiter_stops_blocking_the_queue_within_its_keepalive(on: ServerKind) {
    a_killed_queued_waiter_stops_blocking(on, Kind::Lock, "queue:dead").await;
}
both_servers!(a_killed_queued_lock_waiter_stops_blocking_the_queue_within_its_keepalive);

async fn a_killed_queued_fenced_lock_waiter_stops_blocking_the_queue_within_its_keepalive(on: ServerKind) {
    a_killed_queued_waiter_stops_blocking(on, Kind::Fenced, "fenced:dead").await;
}
both_servers!(a_killed_queued_fenced_lock_waiter_stops_blocking_the_queue_within_its_keepalive);

/// A wait that times out removes its queue entry and deadline at its deadline (in the
/// background, so that a slow server cannot hold its answer back); a cancelled one
/// removes them in the background; neither leaves a subscription behind.
async fn a_departed_wait_leaves_nothing_behind(on: ServerKind, kind: Kind, name: &'static str) {
    let server = on.start();
    let client = client(&server).await;
    let queue = kind.queue(name);
    let holder = kind.handle(&client, name);
    let guard = holder.lock().await.expect("held");

    let other = client_with(&server.url(), Duration::from_secs(30)).await;
    let waiter = kind.handle(&other, name);
    assert!(waiter.try_lock_for(Duration::from_millis(400)).await.expect("wait").is_none(), "timed out");
    assert!(
        wait_until(Duration::from_secs(5), || (llen(&server, &queue), kind.entries(&server, name)) == (0, 0)).await,
        "the timed-out wait left no entry"
    );
    assert!(
        wait_until(Duration::from_secs(3), || pubsub_channels(&server).is_empty()).await,
        "nor a subscription: {:?}",
        pubsub_channels(&server)
    );

    // Cancelled while queued and subscribed.
    let task = {
        let other = other.clone();
        tokio::spawn(async move { kind.handle(&other, name).lock().await.map(drop) })
    };
    assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == 1).await, "queued");
    assert!(wait_until(Duration::from_secs(5), || kind.waiter_subscribed(&server, name)).await, "subscribed");
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());
    assert!(
        wait_until(Duration::from_secs(3), || llen(&server, &queue) == 0 && kind.entries(&server, name) == 0).await,
        "the cancelled wait's entry was removed (well before its 10 s keep-alive)"
    );
    assert!(
        wait_until(Duration::from_secs(3), || pubsub_channels(&server).is_empty()).await,
        "{:?}",
        pubsub_channels(&server)
    );
    // try_lock never queues.
    assert!(kind.handle(&other, name).try_lock().await.expect("try").is_none());
    assert_eq!(llen(&server, &queue), 0);
    guard.unlock().await.expect("unlock");
    // A fenced lock's counter is never deleted (Redisson's issue 6510); nothing else stays.
    let counter = usize::from(matches!(kind, Kind::Fenced));
    let left = leasehold_test_support::lock_keys(&server);
    assert_eq!(left.len(), counter, "no key left behind (but the clients' descriptions): {left:?}");
}

async fn a_timed_out_or_cancelled_fair_lock_wait_leaves_nothing_behind(on: ServerKind) {
    let server = on.start();
    let waiter = client(&server).await.fair_lock("fair:gone");
    let channel = waiter.waiter_channel().expect("name");
    assert_eq!(channel, format!("redisson_lock__channel:{{fair:gone}}:{}", waiter.owner()));
    a_departed_wait_leaves_nothing_behind(on, Kind::Fair, "fair:gone").await;
}
both_servers!(a_timed_out_or_cancelled_fair_lock_wait_leaves_nothing_behind);

async fn a_timed_out_or_cancelled_lock_wait_leaves_nothing_behind(on: ServerKind) {
    a_departed_wait_leaves_nothing_behind(on, Kind::Lock, "queue:gone").await;
}
both_servers!(a_timed_out_or_cancelled_lock_wait_leaves_nothing_behind);

async fn a_timed_out_or_cancelled_fenced_lock_wait_leaves_nothing_behind(on: ServerKind) {
    a_departed_wait_leaves_nothing_behind(on, Kind::Fenced, "fenced:gone").await;
}
both_servers!(a_timed_out_or_cancelled_fenced_lock_wait_leaves_nothing_behind);

// Redisson's RFairLock scripts, transcribed by hand from RedissonFairLock.java
// (tryLockInnerAsync with RedisCommands.EVAL_LONG, and unlockInnerAsync). KEYS and ARGV as
// Redisson passes them; "now" is the caller's wall clock, as in Redisson.
const REDISSON_TRY_LOCK: &str = r"
while true do
  local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
  if firstThreadId2 == false then break; end;
  local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
  if timeout <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], firstThreadId2);
    redis.call('lpop', KEYS[2]);
  else break; end;
end;
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2]);
  redis.call('zrem', KEYS[3], ARGV[2]);
  local keys = redis.call('zrange', KEYS[3], 0, -1);
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);
  end;
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
while true do
  local firstThreadId = redis.call('lindex', KEYS[2], 0);
  if (firstThreadId == false) or (firstThreadId == ARGV[2]) then break; end;
  local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId));
  if (timeout > tonumber(ARGV[4])) and (redis.call('exists', KEYS[1]) == 0) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], firstThreadId);
  else break; end;
end;
local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
  return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);
end;
local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
  ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;
";

const REDISSON_UNLOCK: &str = r"
while true do
  local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
  if firstThreadId2 == false then break; end;
  local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
  if timeout <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], firstThreadId2);
    redis.call('lpop', KEYS[2]);
  else break; end;
end;
if (redis.call('exists', KEYS[1]) == 0) then
  local nextThreadId = redis.call('lindex', KEYS[2], 0);
  if nextThreadId ~= false then
    redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
  end;
  return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
end;
redis.call('del', KEYS[1]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then
  redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
end;
return 1;
";

fn wall_ms() -> String {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis().to_string()
}

/// A hand-written Redisson `RFairLock` peer (its scripts, its owner field, its per-waiter
/// channel) and a leasehold `FairLock` on one name exclude each other and wake each other
/// through the queue, both ways.
async fn a_redisson_fair_lock_peer_excludes_and_wakes_both_ways(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let name = "fair:mixed";
    let keys = [name, "redisson_lock_queue:{fair:mixed}", "redisson_lock_timeout:{fair:mixed}"];
    let channel = "redisson_lock__channel:{fair:mixed}";
    let java = "5a1f2c3d-0000-4000-8000-00000000beef:77";
    let java_channel = format!("{channel}:{java}");
    let redisson_try = || {
        let now = wall_ms();
        raw(&server, &["EVAL", REDISSON_TRY_LOCK, "3", keys[0], keys[1], keys[2], "30000", java, "300000", &now])
    };
    let redisson_unlock = || {
        let now = wall_ms();
        raw(&server, &["EVAL", REDISSON_UNLOCK, "4", keys[0], keys[1], keys[2], channel, "0", "30000", java, &now])
    };

    // The Java side's subscription to its own waiter channel, as Redisson makes it.
    let subscriber: SubscriberClient =
        Builder::from_config(Config::from_url(&server.url()).expect("url")).build_subscriber_client().expect("build");
    subscriber.init().await.expect("connect");
    let mut messages = subscriber.message_rx();
    subscriber.subscribe(java_channel.as_str()).await.expect("subscribe");
    subscriber.ping::<()>(None).await.expect("subscribed");

    // leasehold holds; the Redisson peer is refused (a TTL, not nil) and queues.
    let lock = client.fair_lock(name);
    let guard = lock.lock().await.expect("leasehold holds");
    assert!(redisson_try().as_int().is_some_and(|ttl| ttl > 0), "Redisson is excluded");
    assert_eq!(lrange(&server, keys[1]), [java]);
    // leasehold's release publishes to the Redisson waiter's own channel.
    guard.unlock().await.expect("unlock");
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await.expect("woken").expect("message");
    assert_eq!((message.channel.to_string(), message.value.as_string()), (java_channel.clone(), Some("0".to_owned())));
    // And nothing on the release channel itself (Redisson's fair unlock does not either).
    assert_eq!(hgetall(&server, name), vec![], "released");
    assert!(matches!(redisson_try(), leasehold_test_support::RespValue::Nil), "the woken head acquires");
    assert_eq!(hgetall(&server, name), vec![(java.to_owned(), "1".to_owned())]);
    assert_eq!(llen(&server, keys[1]), 0, "Redisson popped itself");

    // Redisson holds: leasehold is excluded, queues, and Redisson's unlock wakes it at once
    // (the lock's 30 s TTL and the 10 s keep-alive's refresh are far later).
    assert!(lock.try_lock().await.expect("try").is_none(), "leasehold is excluded");
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            let lock = client.fair_lock(name);
            let guard = lock.try_lock_for(Duration::from_secs(20)).await;
            let at = tokio::time::Instant::now();
            (guard.map(|g| g.map(|g| (g.owner().to_owned(), g))), at)
        })
    };
    assert!(wait_until(Duration::from_secs(5), || llen(&server, keys[1]) == 1).await, "leasehold queued");
    let queued = lrange(&server, keys[1]).remove(0);
    let queued_channel = format!("{channel}:{queued}");
    assert!(wait_until(Duration::from_secs(5), || pubsub_channels(&server).contains(&queued_channel)).await);
    let released = tokio::time::Instant::now();
    assert_eq!(redisson_unlock().as_int(), Some(1), "Redisson released");
    let (got, at) = waiter.await.expect("task");
    let (owner, guard) = got.expect("no error").expect("acquired");
    assert_eq!(owner, queued);
    assert!(at - released < Duration::from_secs(2), "woken by Redisson's publish, after {:?}", at - released);
    // The Redisson peer is excluded again and queues behind nobody.
    assert!(redisson_try().as_int().is_some_and(|ttl| ttl > 0));
    guard.unlock().await.expect("unlock");
    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv()).await.expect("woken").expect("message");
    assert_eq!(message.channel.to_string(), java_channel);
    assert!(matches!(redisson_try(), leasehold_test_support::RespValue::Nil));
    assert_eq!(redisson_unlock().as_int(), Some(1));
    assert_eq!((llen(&server, keys[1]), zcard(&server, keys[2])), (0, 0));
    let _ = subscriber.quit().await;
}
both_servers!(a_redisson_fair_lock_peer_excludes_and_wakes_both_ways);

/// The `Lock` guarantees hold for a `FairLock`: reentrancy counts in the Redisson field,
/// watchdog renewal, and `lost()` after a force-unlock.
async fn a_fair_lock_keeps_the_lock_guarantees(on: ServerKind) {
    let server = on.start();
    let client = client_with(&server.url(), Duration::from_millis(600)).await;
    let lock = client.fair_lock("fair:basic");
    let outer = lock.lock().await.expect("outer");
    let second = lock.lock().await.expect("re-entry");
    let third = lock.lock_with_lease(Duration::from_secs(5)).await.expect("re-entry with a lease");
    assert_eq!(lock.hold_count().await.expect("count"), 3);
    assert_eq!(hgetall(&server, "fair:basic"), vec![(lock.owner().to_owned(), "3".to_owned())]);
    assert_eq!(llen(&server, "redisson_lock_queue:{fair:basic}"), 0, "a re-entry never queues");
    let other = client.fair_lock("fair:basic");
    assert!(other.try_lock().await.expect("try").is_none());
    third.unlock().await.expect("unlock 3");
    second.unlock().await.expect("unlock 2");
    assert_eq!(lock.hold_count().await.expect("count"), 1);
    assert!(other.try_lock().await.expect("try").is_none(), "still held after n-1 releases");

    // Renewed past several leases.
    let start = client.stats().watchdog.calls;
    assert!(wait_until(Duration::from_secs(10), || client.stats().watchdog.calls >= start + 6).await, "renewed");
    assert!(!outer.is_lost() && pttl(&server, "fair:basic") > 0);

    // Force-unlocked by another owner: the holder is told.
    assert!(other.force_unlock().await.expect("force"), "there was a key");
    tokio::time::timeout(Duration::from_secs(5), outer.lost()).await.expect("lost() fired");
    assert_eq!(outer.unlock().await.expect_err("lost").kind(), leasehold::ErrorKind::LockLost);
    let fresh = other.try_lock().await.expect("try").expect("free again");
    fresh.unlock().await.expect("unlock");
    assert_eq!(raw(&server, &["EXISTS", "fair:basic"]).as_int(), Some(0));
    // Bad input is refused before anything is sent.
    let err = client.fair_lock("").try_lock().await.expect_err("empty name");
    assert!(err.is_invalid_argument(), "{err}");
    let err = lock.try_lock_with(Duration::ZERO, Duration::ZERO).await.expect_err("zero lease");
    assert!(err.is_invalid_argument(), "{err}");
}
both_servers!(a_fair_lock_keeps_the_lock_guarantees);

/// Issue 17 (b): a wait cancelled (its future dropped, as `tokio::time::timeout` does)
/// and restarted at once on the same handle keeps its queue entry. The cancelled wait's
/// background clean-up used to run after the new wait's first call and remove the new
/// entry: the waiter, second in line, then slept until its next refresh, a third of the
/// keep-alive (3.3 s) after the waiter ahead of it had released.
async fn a_wait_restarted_after_a_cancelled_one_keeps_its_place(on: ServerKind, kind: Kind, name: &'static str) {
    let server = on.start();
    let holder_client = client(&server).await;
    let holder = kind.handle(&holder_client, name);
    let guard = holder.lock_with_lease(Duration::from_secs(30)).await.expect("held");
    let queue = kind.queue(name);
    // Two waiters ahead, each releasing as soon as it gets the lock: the restarted
    // waiter is third, so no hand-over message names it before its turn.
    let mut ahead = Vec::new();
    for queued in 1..=2 {
        let ahead_client = client(&server).await;
        ahead.push(tokio::spawn(async move {
            let lock = kind.handle(&ahead_client, name);
            let got = lock.try_lock_for(Duration::from_secs(20)).await;
            got.expect("no error").expect("acquired").unlock().await.expect("unlock");
        }));
        assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == queued).await, "{queued} queued");
    }

    let waiter_client = client(&server).await;
    let waiter = kind.handle(&waiter_client, name);
    let cancelled = tokio::time::timeout(Duration::from_millis(500), waiter.lock()).await;
    assert!(cancelled.is_err(), "the first wait was cancelled while queued");
    // Restarted at once: the cancelled wait's clean-up is still pending.
    let restarted = async {
        let got = waiter.try_lock_for(Duration::from_secs(20)).await;
        (got, tokio::time::Instant::now())
    };
    let release = async {
        assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == 3).await, "queued again");
        // Subscribed once the restarted wait registered; the cancelled wait's clean-up
        // had its turn right after the restarted wait's first call, before that.
        assert!(
            wait_until(Duration::from_secs(5), || !waiter_client.subscribed_channels().is_empty()).await,
            "subscribed"
        );
        guard.unlock().await.expect("unlock");
        tokio::time::Instant::now()
    };
    let ((got, acquired_at), released_at) = tokio::join!(restarted, release);
    let guard = got.expect("no error").expect("acquired");
    let took = acquired_at.saturating_duration_since(released_at);
    assert!(took < Duration::from_secs(2), "acquired {took:?} after the release (the refresh is 3.3 s)");
    for task in ahead {
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("ended").expect("task");
    }
    assert_eq!(llen(&server, &queue), 0);
    guard.unlock().await.expect("unlock");
}

async fn a_lock_wait_restarted_after_a_cancelled_one_keeps_its_place(on: ServerKind) {
    a_wait_restarted_after_a_cancelled_one_keeps_its_place(on, Kind::Lock, "queue:restart").await;
}
// On one thread the restarted wait's first call goes out before the spawned clean-up
// runs: the order that lost the entry.
both_servers!(a_lock_wait_restarted_after_a_cancelled_one_keeps_its_place, current_thread);

async fn a_fair_lock_wait_restarted_after_a_cancelled_one_keeps_its_place(on: ServerKind) {
    a_wait_restarted_after_a_cancelled_one_keeps_its_place(on, Kind::Fair, "fair:restart").await;
}
both_servers!(a_fair_lock_wait_restarted_after_a_cancelled_one_keeps_its_place, current_thread);

/// Issue 17 (c): a refresh whose outcome is unknown (here: every waiter's refresh timed
/// out in a server stall shorter than the keep-alive) used to trigger the background
/// undo, which removed the entry while the wait went on: the waiters came back in the
/// order their retries landed. Now the live wait keeps its entry (its next call sets its
/// hold count anyway), every waiter retries on its back-off wherever it stands, and the
/// queue keeps its order.
async fn a_server_stall_keeps_the_queue_order(on: ServerKind, kind: Kind, name: &'static str) {
    const WAITERS: usize = 4;
    const KEEPALIVE: Duration = Duration::from_secs(6);
    let mut server = on.start();
    let holder_client = client(&server).await;
    let holder = kind.handle(&holder_client, name);
    let guard = holder.lock_with_lease(Duration::from_secs(60)).await.expect("held");
    let queue = kind.queue(name);
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for id in 0..WAITERS {
        // A refresh every 2 s; each times out after 1 s.
        let waiter_client = fair_client(&server, KEEPALIVE).await;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let lock = kind.handle(&waiter_client, name);
            let got = lock.try_lock_for(Duration::from_secs(40)).await;
            let guard = got.expect("no error").expect("acquired");
            order.lock().expect("order").push(id);
            guard.unlock().await.expect("unlock");
        }));
        assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == id as i64 + 1).await, "{id} queued");
    }
    let before = lrange(&server, &queue);

    // 3 s without answers: every waiter's refresh (one every 2 s) times out at least once.
    server.pause();
    tokio::time::sleep(Duration::from_secs(3)).await;
    server.resume();
    // The retries (back-off from 50 ms) and any clean-up land within the next second.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(lrange(&server, &queue), before, "the stall kept every waiter's place");

    guard.unlock().await.expect("unlock");
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task).await.expect("ended").expect("task");
    }
    assert_eq!(*order.lock().expect("order"), (0..WAITERS).collect::<Vec<_>>(), "served in queue order");
}

async fn a_server_stall_keeps_the_lock_queue_order(on: ServerKind) {
    a_server_stall_keeps_the_queue_order(on, Kind::Lock, "queue:stall").await;
}
both_servers!(a_server_stall_keeps_the_lock_queue_order);

/// Issue 17 (c), one lost reply: the head waiter's refresh is answered but the reply
/// never arrives (the proxy drops it and cuts the connection). The wait goes on, so its
/// entry must stay at the head; it used to be removed by the undo, and the waiter queued
/// again behind the others.
async fn a_lost_refresh_reply_keeps_the_head_in_place(on: ServerKind, kind: Kind, name: &'static str) {
    const KEEPALIVE: Duration = Duration::from_secs(3);
    let server = on.start();
    let proxy = leasehold_test_support::Proxy::start(&server.addr()).await;
    let holder_client = client(&server).await;
    let holder = kind.handle(&holder_client, name);
    let guard = holder.lock_with_lease(Duration::from_secs(60)).await.expect("held");
    let queue = kind.queue(name);
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for id in 0..3_usize {
        // The head's client goes through the proxy; a refresh every second.
        let url = if id == 0 { proxy.url() } else { server.url() };
        let waiter_client = leasehold::Client::builder()
            .url(url)
            .command_timeout(Duration::from_secs(1))
            .queue_keepalive(KEEPALIVE)
            .connect()
            .await
            .expect("connect");
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let lock = kind.handle(&waiter_client, name);
            let guard = lock.try_lock_for(Duration::from_secs(30)).await.expect("no error").expect("acquired");
            order.lock().expect("order").push(id);
            guard.unlock().await.expect("unlock");
        }));
        assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == id as i64 + 1).await, "{id} queued");
    }
    let before = lrange(&server, &queue);
    proxy.lose_next_reply();
    assert!(wait_until(Duration::from_secs(5), || proxy.lost_replies() == 1).await, "a refresh reply was lost");
    // The reconnect, the waiter's retry and any clean-up land within this window (the
    // retry's back-off starts at 50 ms; the next refresh is 1 s later).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(lrange(&server, &queue), before, "the head kept its place");
    guard.unlock().await.expect("unlock");
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task).await.expect("ended").expect("task");
    }
    assert_eq!(*order.lock().expect("order"), [0, 1, 2], "served in queue order");
}

async fn a_lost_refresh_reply_keeps_the_lock_queue_head_in_place(on: ServerKind) {
    a_lost_refresh_reply_keeps_the_head_in_place(on, Kind::Lock, "queue:lost").await;
}
both_servers!(a_lost_refresh_reply_keeps_the_lock_queue_head_in_place);

async fn a_lost_refresh_reply_keeps_the_fair_lock_queue_head_in_place(on: ServerKind) {
    a_lost_refresh_reply_keeps_the_head_in_place(on, Kind::Fair, "fair:lost").await;
}
both_servers!(a_lost_refresh_reply_keeps_the_fair_lock_queue_head_in_place);

/// Issue 17 (d): every queueing call used to set the queue keys' TTL to its own
/// keep-alive, so one call of a client with a 3 s keep-alive expired the whole queue
/// after 3 s, and a waiter with a 60 s keep-alive (refreshing every 20 s) lost its place
/// to a newcomer. The keys now live as long as their longest-lived entry.
async fn a_short_keepalive_never_cuts_the_queue_of_a_longer_one(on: ServerKind) {
    let server = on.start();
    let name = "queue:keepalive";
    let queue = Kind::Lock.queue(name);
    let entries = format!("leasehold_lock_waiters:{{{name}}}");
    let holder_client = client(&server).await;
    let guard = holder_client.lock(name).lock_with_lease(Duration::from_secs(60)).await.expect("held");
    let patient_client = fair_client(&server, Duration::from_secs(60)).await;
    let patient = tokio::spawn(async move {
        let got = patient_client.lock(name).try_lock_for(Duration::from_secs(30)).await;
        got.expect("no error").expect("acquired").unlock().await.expect("unlock");
    });
    assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == 1).await, "the patient waiter queued");
    let patient_owner = lrange(&server, &queue).remove(0);

    let hasty = fair_client(&server, Duration::from_secs(3)).await;
    assert!(hasty.lock(name).try_lock_for(Duration::from_millis(300)).await.expect("wait").is_none());
    // The hasty waiter leaves at its deadline, in the background.
    assert!(
        wait_until(Duration::from_secs(5), || lrange(&server, &queue) == std::slice::from_ref(&patient_owner)).await,
        "the hasty waiter left, the patient one stays: {:?}",
        lrange(&server, &queue)
    );
    for key in [&queue, &entries] {
        let ttl = pttl(&server, key);
        assert!(ttl > 50_000, "{key} lives as long as the 60 s entry needs: PTTL {ttl}");
    }
    // Past the short keep-alive, the patient waiter still holds its place.
    let newcomer = client(&server).await;
    let newcomer_wait = tokio::spawn(async move {
        let lock = newcomer.lock(name);
        let got = lock.try_lock_for(Duration::from_secs(30)).await;
        got.expect("no error").expect("acquired").unlock().await.expect("unlock");
    });
    assert!(wait_until(Duration::from_secs(5), || llen(&server, &queue) == 2).await, "the newcomer queued");
    assert_eq!(lrange(&server, &queue)[0], patient_owner, "behind the patient waiter");
    guard.unlock().await.expect("unlock");
    tokio::time::timeout(Duration::from_secs(10), patient).await.expect("patient ended").expect("task");
    tokio::time::timeout(Duration::from_secs(10), newcomer_wait).await.expect("newcomer ended").expect("task");
}
both_servers!(a_short_keepalive_never_cuts_the_queue_of_a_longer_one);

/// Redisson's `testLeaseTimeout` (issue 26): eight owners 100 ms apart, each
/// `try_lock_with(10 s, 1 s)` and never unlocking, on eight handles of one client, all
/// acquire in arrival order, each as soon as the lease before it ran out (nothing is
/// published then: the next waiter must know when it ends). Before, a waiter behind the
/// head learned of the new holder only at its refresh (keep-alive / 3): gaps of 3.3 s.
async fn expiring_fair_holders_on_one_client_hand_off_in_order(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let acquired = leasehold_test_support::expiring::expiring_holders(8, |_| {
        let lock = client.fair_lock("fair:expiring-one");
        async move {
            let guard = lock.try_lock_with(Duration::from_secs(10), Duration::from_secs(1)).await.expect("wait");
            guard.map(leasehold::LockGuard::detach).is_some()
        }
    })
    .await;
    let (lease, slack) = (Duration::from_secs(1), Duration::from_millis(700));
    leasehold_test_support::expiring::assert_hand_offs(&acquired, lease, slack, Duration::from_secs(11));
}
both_servers!(expiring_fair_holders_on_one_client_hand_off_in_order);

/// The same with each owner on its own client (a waiter's local line holds only it).
async fn expiring_fair_holders_on_eight_clients_hand_off_in_order(on: ServerKind) {
    let server = on.start();
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(client(&server).await);
    }
    let acquired = leasehold_test_support::expiring::expiring_holders(8, |i| {
        let lock = clients[i].fair_lock("fair:expiring-eight");
        async move {
            let guard = lock.try_lock_with(Duration::from_secs(10), Duration::from_secs(1)).await.expect("wait");
            guard.map(leasehold::LockGuard::detach).is_some()
        }
    })
    .await;
    let (lease, slack) = (Duration::from_secs(1), Duration::from_millis(700));
    leasehold_test_support::expiring::assert_hand_offs(&acquired, lease, slack, Duration::from_secs(11));
}
both_servers!(expiring_fair_holders_on_eight_clients_hand_off_in_order);
