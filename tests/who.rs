//! Who holds what (issue 30 item 2), on real servers: each client's description key
//! `leasehold_client:{UUID}` (written at connect, refreshed once per watchdog period,
//! gone at shutdown, expiring after a `SIGKILL`), the names of its connections
//! (`CLIENT SETNAME leasehold:<UUID>:<service>`, again after a reconnect, on every node
//! of a cluster), and the history of forced unlocks `leasehold_history:{NAME}`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_test_support::commandstats::calls_during;
use leasehold_test_support::{client_with, command_timeout_for, raw, wait_until, RedisCluster, RedisServer, RespValue};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

async fn named_client(url: &str, watchdog: Duration, service: &str) -> leasehold::Client {
    leasehold::Client::builder()
        .url(url)
        .watchdog_timeout(watchdog)
        .command_timeout(command_timeout_for(watchdog))
        .service_name(service)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

fn client_key(client: &leasehold::Client) -> String {
    format!("leasehold_client:{{{}}}", client.id())
}

/// How many connections of the node's `CLIENT LIST` carry `name`.
fn named_connections(list: &RespValue, name: &str) -> usize {
    let text = list.as_str().unwrap_or_default();
    let field = format!(" name={name} ");
    text.lines().filter(|line| format!("{line} ").contains(&field)).count()
}

/// A client describes itself at connect (host, pid, service, start, version, with a TTL
/// of one watchdog timeout), names both of its connections, and answers for its owners;
/// after `shutdown` the description is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_describes_itself_and_names_its_connections() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(3);
    let before = now_ms();
    let client = named_client(&server.url(), watchdog, "billing api/v2").await;
    let name = format!("leasehold:{}:billing_api_v2", client.id());
    assert_eq!(client.connection_name(), name);

    // Written before `connect` returned.
    let key = client_key(&client);
    let fields: std::collections::HashMap<String, String> =
        leasehold_test_support::hgetall(&server, &key).into_iter().collect();
    assert_eq!(fields.get("pid"), Some(&std::process::id().to_string()), "{fields:?}");
    assert_eq!(fields.get("service").map(String::as_str), Some("billing api/v2"), "{fields:?}");
    assert_eq!(fields.get("version").map(String::as_str), Some(env!("CARGO_PKG_VERSION")), "{fields:?}");
    assert!(fields.get("host").is_some_and(|host| !host.is_empty() && host != "unknown"), "{fields:?}");
    let started: u64 = fields.get("started").and_then(|ms| ms.parse().ok()).expect("started");
    assert!(started >= before.saturating_sub(1_000) && started <= now_ms() + 1_000, "{started} vs {before}");
    let ttl = leasehold_test_support::pttl(&server, &key);
    assert!(ttl > 0 && ttl <= 3_000, "TTL of one watchdog timeout: {ttl}");

    // Both connections named (the subscriber names its own, from its task).
    let both =
        wait_until(Duration::from_secs(5), || named_connections(&raw(&server, &["CLIENT", "LIST"]), &name) == 2).await;
    assert!(both, "{:?}", raw(&server, &["CLIENT", "LIST"]));

    // An owner leads to its client, from any client.
    let lock = client.lock("who:a");
    let guard = lock.lock().await.expect("lock");
    let other = named_client(&server.url(), watchdog, "other").await;
    let described = other.describe_owner(guard.owner()).await.expect("describe").expect("a live client");
    assert_eq!((described.pid, described.service.as_str()), (std::process::id(), "billing api/v2"));
    assert_eq!(described.started_ms, started);
    let writer = client.read_write_lock("who:rw");
    let write = writer.write().await.expect("write lock");
    let fields = leasehold_test_support::hgetall(&server, "who:rw");
    let writer_field = fields.iter().map(|(f, _)| f.clone()).find(|f| f.ends_with(":write")).expect("writer field");
    assert!(other.describe_owner(&writer_field).await.expect("describe").is_some(), "{writer_field}");
    assert_eq!(other.describe_owner("not-a-client:1").await.expect("describe"), None);
    assert_eq!(other.describe_owner(&format!("{}:1", uuid_like())).await.expect("describe"), None);
    write.unlock().await.expect("unlock");
    guard.unlock().await.expect("unlock");

    client.shutdown().await.expect("shutdown");
    assert_eq!(raw(&server, &["EXISTS", &key]), RespValue::Integer(0), "deleted at shutdown");
    assert_eq!(other.describe_owner(lock.owner()).await.expect("describe"), None);
}

fn uuid_like() -> &'static str {
    "00000000-0000-4000-8000-000000000000"
}

/// After its connections are killed, a client names them again when they reconnect,
/// the subscriber's too while it has subscriptions to restore (a RESP2 connection
/// refuses `CLIENT SETNAME` once subscribed: it is named first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnected_connections_are_named_again() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(3);
    let holder = named_client(&server.url(), watchdog, "holder").await;
    let waiter = named_client(&server.url(), watchdog, "waiter").await;
    let name = waiter.connection_name().to_owned();
    let guard = holder.lock("who:busy").lock().await.expect("lock");
    let waiting = tokio::spawn({
        let lock = waiter.lock("who:busy");
        async move { lock.try_lock_for(Duration::from_secs(20)).await.map(|g| g.is_some()) }
    });
    assert!(wait_until(Duration::from_secs(5), || !waiter.subscribed_channels().is_empty()).await);
    assert!(
        wait_until(Duration::from_secs(5), || named_connections(&raw(&server, &["CLIENT", "LIST"]), &name) == 2).await
    );

    // Every client connection but the raw one asking.
    let _ = raw(&server, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    let _ = raw(&server, &["CLIENT", "KILL", "TYPE", "normal"]);
    let again = wait_until(Duration::from_secs(10), || {
        named_connections(&raw(&server, &["CLIENT", "LIST"]), &name) == 2
            && waiter.subscribed_channels().iter().any(|c| c.contains("who:busy"))
    })
    .await;
    assert!(again, "named again: {:?}", raw(&server, &["CLIENT", "LIST"]));
    guard.unlock().await.expect("unlock");
    assert!(waiting.await.expect("waiter").expect("acquired"), "the waiter got the lock");
}

/// The cost: an idle client sends one request per watchdog period (one `EVALSHA`, which
/// runs one `HSET` and one `PEXPIRE`), and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_description_costs_one_request_per_period() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let period = watchdog / 3;
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();
    let client = named_client(&server.url(), watchdog, "cost").await;
    let key = client_key(&client);
    // The measurement window: ten periods, idle.
    let calls = calls_during(&server, tokio::time::sleep(period * 10)).await;
    eprintln!("commands in 10 periods: {calls:?}");
    let evalsha = calls.get("evalsha").copied().unwrap_or(0);
    // 10 on an idle machine; on a loaded one the refresh may fall a period or two
    // behind, or the window's sleep overshoot by a period or two.
    assert!((7..=13).contains(&evalsha), "one request per period: {calls:?}");
    assert_eq!(calls.get("hset").copied(), Some(evalsha), "{calls:?}");
    assert_eq!(calls.get("pexpire").copied(), Some(evalsha), "{calls:?}");
    assert_eq!(calls.len(), 3, "nothing else: {calls:?}");
    let ttl = leasehold_test_support::pttl(&server, &key);
    assert!(ttl > 0 && ttl <= 600, "{ttl}");
    drop(client);
    // Dropped without shutdown: the refresh task ends with it (with every other task of
    // the client), and the key expires within one watchdog timeout.
    let ended = wait_until(Duration::from_secs(5), || metrics.num_alive_tasks() <= tasks_before).await;
    assert!(ended, "tasks left after the drop: {} alive, {tasks_before} before", metrics.num_alive_tasks());
    assert!(
        wait_until(Duration::from_secs(3), || raw(&server, &["EXISTS", &key]) == RespValue::Integer(0)).await,
        "the key expired after the client was dropped"
    );
}

/// A client killed with `SIGKILL` leaves its description behind for at most one
/// watchdog timeout; until then its holder's owner id leads to its pid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_clients_description_expires_within_a_watchdog_timeout() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(900);
    let (holder, owner) = leasehold_test_support::HolderProcess::start(
        env!("CARGO_BIN_EXE_holder"),
        &server.url(),
        "who:killed",
        watchdog,
    )
    .await;
    let observer = named_client(&server.url(), Duration::from_secs(3), "observer").await;
    let described = observer.describe_owner(&owner).await.expect("describe").expect("the holder is described");
    assert_eq!(described.pid, holder.pid());
    assert_eq!(described.service, "holder", "the executable's name by default");
    let uuid = &owner[..36];
    let key = format!("leasehold_client:{{{uuid}}}");
    // Still there after several periods: refreshed.
    tokio::time::sleep(watchdog * 2).await;
    assert!(leasehold_test_support::pttl(&server, &key) > 0, "refreshed while alive");
    holder.signal("KILL");
    let killed = std::time::Instant::now();
    let gone = wait_until(Duration::from_secs(5), || raw(&server, &["EXISTS", &key]) == RespValue::Integer(0)).await;
    let after = killed.elapsed();
    assert!(gone && after <= watchdog + Duration::from_millis(500), "gone {after:?} after the kill");
    assert_eq!(observer.describe_owner(&owner).await.expect("describe"), None, "unknown (no live client)");
}

/// A forced unlock of each kind records when, who (the forcing client's connection
/// name) and which owners it removed; a free lock records nothing; the history keeps
/// the newest 100 for 7 days.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_unlocks_are_recorded_in_a_bounded_history() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(3);
    let app = named_client(&server.url(), watchdog, "app").await;
    let ops = named_client(&server.url(), watchdog, "ops tool").await;
    let by = format!("leasehold:{}:ops_tool", ops.id());

    let plain = app.lock("hist:plain");
    let guard = plain.lock().await.expect("lock");
    let before = now_ms();
    assert!(ops.lock("hist:plain").force_unlock().await.expect("force"));
    let history = ops.lock_history("hist:plain").await.expect("history");
    assert_eq!(history.len(), 1, "{history:?}");
    let entry = &history[0];
    assert_eq!((entry.action.as_str(), entry.by.as_str()), ("force-unlock", by.as_str()), "{entry:?}");
    assert_eq!(entry.owners, [guard.owner().to_owned()], "the other client's owner: {entry:?}");
    assert!(entry.at_ms + 5_000 >= before && entry.at_ms <= now_ms() + 5_000, "server time: {entry:?}");
    let ttl = leasehold_test_support::pttl(&server, "leasehold_history:{hist:plain}");
    assert!(ttl > 6 * 24 * 3_600_000 && ttl <= 7 * 24 * 3_600_000, "7 days: {ttl}");
    drop(guard);
    // Nothing held: nothing deleted, nothing recorded.
    assert!(!ops.lock("hist:plain").force_unlock().await.expect("force"));
    assert_eq!(app.lock_history("hist:plain").await.expect("history").len(), 1);

    // A fair lock and a read/write lock (every reader removed is named).
    let fair = app.fair_lock("hist:fair");
    let fair_guard = fair.lock().await.expect("fair lock");
    assert!(ops.fair_lock("hist:fair").force_unlock().await.expect("force fair"));
    let history = ops.lock_history("hist:fair").await.expect("history");
    assert_eq!(history[0].owners, [fair_guard.owner().to_owned()], "{history:?}");
    let (r1, r2) = (app.read_write_lock("hist:rw"), app.read_write_lock("hist:rw"));
    let (g1, g2) = (r1.read().await.expect("read"), r2.read().await.expect("read"));
    assert!(ops.read_write_lock("hist:rw").force_unlock().await.expect("force rw"));
    let mut owners = ops.lock_history("hist:rw").await.expect("history")[0].owners.clone();
    owners.sort();
    let mut expected = vec![g1.owner().to_owned(), g2.owner().to_owned()];
    expected.sort();
    assert_eq!(owners, expected);
    drop((fair_guard, g1, g2));

    // Bounded: 105 forced unlocks keep the newest 100, newest first.
    let mut last = String::new();
    for _ in 0..105 {
        let guard = app.lock("hist:bound").try_lock().await.expect("try").expect("free");
        last = guard.owner().to_owned();
        assert!(ops.lock("hist:bound").force_unlock().await.expect("force"));
    }
    let history = app.lock_history("hist:bound").await.expect("history");
    assert_eq!(history.len(), 100);
    assert_eq!(history[0].owners, [last]);
    assert_eq!(raw(&server, &["LLEN", "leasehold_history:{hist:bound}"]), RespValue::Integer(100));

    // A history key of another type: refused before anything is written.
    let _ = raw(&server, &["SET", "leasehold_history:{hist:typed}", "x"]);
    let guard = app.lock("hist:typed").lock().await.expect("lock");
    let err = ops.lock("hist:typed").force_unlock().await.expect_err("WRONGTYPE");
    assert!(err.is_wrong_type(), "{err:?}");
    assert!(leasehold_test_support::pttl(&server, "hist:typed") > 0, "the lock is untouched");
    guard.unlock().await.expect("unlock");
}

/// In a cluster: every node the client connected to shows its name (command and
/// subscriber connections), and its description is readable through any client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_client_names_its_connection_on_every_node() {
    let cluster = RedisCluster::shared();
    let client = named_client(&cluster.url(), Duration::from_secs(3), "cluster svc").await;
    let name = client.connection_name().to_owned();
    let primaries = cluster.primaries();
    let named = wait_until(Duration::from_secs(10), || {
        primaries.iter().all(|node| named_connections(&cluster.on(node, &["CLIENT", "LIST"]), &name) >= 2)
    })
    .await;
    let lists: Vec<String> = primaries
        .iter()
        .map(|node| format!("{node}: {} named", named_connections(&cluster.on(node, &["CLIENT", "LIST"]), &name)))
        .collect();
    assert!(named, "command and subscriber connections named on every primary: {lists:?}");
    let guard = client.lock("who:cluster").lock().await.expect("lock");
    let other = client_with(&cluster.url(), Duration::from_secs(3)).await;
    let described = other.describe_owner(guard.owner()).await.expect("describe").expect("described");
    assert_eq!(described.service, "cluster svc");
    guard.unlock().await.expect("unlock");
    let key = client_key(&client);
    client.shutdown().await.expect("shutdown");
    assert_eq!(cluster.on_key(&key, &["EXISTS", &key]), RespValue::Integer(0));
}

/// A client made with `Client::from_fred` leaves the application's connection its own
/// name (the connection is the application's) and names only the subscriber connection
/// it made; it describes itself as any client does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_fred_names_only_its_own_subscriber_connection() {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
    let server = RedisServer::start();
    let mut builder = Builder::from_config(Config::from_url(&server.url()).expect("url"));
    builder.set_policy(ReconnectPolicy::new_constant(0, 50));
    // fred names the application's connection with its own id.
    builder.with_connection_config(|c| c.auto_client_setname = true);
    let fred = builder.build().expect("fred client");
    fred.init().await.expect("connect");
    let mut config = leasehold::ClientConfig::default();
    config.service_name = Some("app".to_owned());
    let client = leasehold::Client::from_fred(fred.clone(), config).await.expect("from_fred");
    let ours = client.connection_name().to_owned();
    let theirs = fred.id().to_owned();
    let named = wait_until(Duration::from_secs(5), || {
        let list = raw(&server, &["CLIENT", "LIST"]);
        named_connections(&list, &ours) == 1 && named_connections(&list, &theirs) == 1
    })
    .await;
    assert!(named, "{ours} (subscriber) and {theirs} (the app's): {:?}", raw(&server, &["CLIENT", "LIST"]));
    let fields = leasehold_test_support::hgetall(&server, &client_key(&client));
    assert!(fields.iter().any(|(field, value)| field == "service" && value == "app"), "{fields:?}");
    client.shutdown().await.expect("shutdown");
}
