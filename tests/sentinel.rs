//! leasehold through Redis Sentinel: a primary, a replica and three sentinels.

use std::time::Duration;

use leasehold_test_support::{client_with, RespValue, SentinelSet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connects_through_the_sentinels_to_the_primary() {
    let set = SentinelSet::shared();
    let client = client_with(&set.url(), Duration::from_secs(30)).await;
    let lock = client.lock("sentinel:first");
    let guard = lock.try_lock().await.expect("try_lock").expect("free");
    // The hold is on the primary the sentinels name, and replicated to the replica.
    let field = |addr: &str| match set.on(addr, &["HGET", "sentinel:first", lock.owner()]) {
        RespValue::Bulk(holds) => Some(holds),
        _ => None,
    };
    assert_eq!(field(&set.primary()).as_deref(), Some("1"));
    assert!(
        leasehold_test_support::wait_until(Duration::from_secs(5), || field(&set.replica()).as_deref() == Some("1"))
            .await,
        "replicated"
    );
    let other = client_with(&set.url(), Duration::from_secs(30)).await;
    assert!(other.lock("sentinel:first").try_lock().await.expect("try_lock").is_none(), "excluded");
    guard.unlock().await.expect("unlock");
    assert_eq!(set.on(&set.primary(), &["EXISTS", "sentinel:first"]).as_int(), Some(0));
}

#[tokio::test]
async fn bad_sentinel_and_cluster_urls_are_rejected_before_connecting() {
    // Port 1: nothing listens there, so only validation can answer this fast.
    for url in ["redis-sentinel://127.0.0.1:1", "redis-cluster://127.0.0.1:1?node=nonsense"] {
        let err = leasehold::Client::connect(url).await.expect_err("invalid");
        assert!(err.is_invalid_argument(), "{url}: {err:?}");
    }
}

/// A Sentinel failover is followed within a couple of seconds of the sentinels'
/// `+switch-master`, not when the old primary is finally demoted (about 10 s later
/// without the watch): every acquire from then on lands on the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_a_sentinel_failover_when_it_is_announced() {
    let set = SentinelSet::start();
    let client = client_with(&set.url(), Duration::from_secs(30)).await;
    follows_a_failover_when_it_is_announced(&set, &client).await;
}

/// The same for a client made with `Client::from_fred` from the caller's own fred client
/// (a Sentinel configuration and a reconnect policy): leasehold watches the sentinels for
/// it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_from_fred_follows_a_sentinel_failover_when_it_is_announced() {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, ReconnectPolicy};
    let set = SentinelSet::start();
    let mut builder = Builder::from_config(Config::from_url(&set.url()).expect("url"));
    builder.set_policy(ReconnectPolicy::new_exponential(0, 50, 1_000, 2));
    builder.with_connection_config(|c| c.connection_timeout = Duration::from_secs(2));
    let fred = builder.build().expect("build");
    fred.init().await.expect("connect");
    let mut config = leasehold::ClientConfig::default();
    config.command_timeout = Duration::from_secs(2);
    let client = leasehold::Client::from_fred(fred.clone(), config).await.expect("from_fred");
    follows_a_failover_when_it_is_announced(&set, &client).await;
    drop(client);
    let _ = fred.quit().await;
}

async fn follows_a_failover_when_it_is_announced(set: &SentinelSet, client: &leasehold::Client) {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface};
    let warm = client.lock("sentinel:warm").try_lock().await.expect("try_lock").expect("free");
    warm.unlock().await.expect("unlock");

    // The test's own ear on the announcement.
    let sentinel = &set.sentinels()[0];
    let config = Config::from_url(&format!("redis://{sentinel}")).expect("url");
    let ear = Builder::from_config(config).build_subscriber_client().expect("build");
    ear.init().await.expect("connect");
    let mut messages = ear.message_rx();
    ear.subscribe("+switch-master").await.expect("subscribe");
    ear.ping::<()>(None).await.expect("subscribed");

    let new_primary = set.replica();
    assert_eq!(
        set.on(sentinel, &["SENTINEL", "FAILOVER", leasehold_test_support::SENTINEL_SERVICE]).as_str(),
        Some("OK")
    );
    let message =
        tokio::time::timeout(Duration::from_secs(30), messages.recv()).await.expect("announced").expect("message");
    let announced = std::time::Instant::now();
    let payload = message.value.as_string().unwrap_or_default();
    assert!(payload.ends_with(new_primary.replace(':', " ").as_str()), "{payload}");

    let mut n = 0;
    let followed = loop {
        n += 1;
        let name = format!("sentinel:after:{n}");
        if let Ok(Some(guard)) = client.lock(&name).try_lock().await {
            let on_new = set.on(&new_primary, &["EXISTS", &name]).as_int() == Some(1);
            let _ = guard.unlock().await;
            if on_new {
                break announced.elapsed();
            }
        }
        assert!(announced.elapsed() < Duration::from_secs(15), "never followed the failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("followed {followed:?} after the announcement ({n} acquires)");
    assert!(followed < Duration::from_secs(2), "followed {followed:?} after the announcement");
    let _ = ear.quit().await;
}

/// Issue 12: a Sentinel failover during contention. 8 tasks on 2 clients contend on three
/// locks, in watchdog and fixed-lease mode; the replica is cut off first (so the last
/// holds never reach it), then `SENTINEL FAILOVER` promotes it. No waiter is stuck (every
/// task does 5 more rounds within 20 s of the announcement), no two tasks are ever inside
/// one lock's section, every acquire sent after its client reconnected to the new primary
/// holds the lock there (none lands on the demoted primary, which stays writable for
/// about 10 s), and two holders whose locks never reached the replica, one renewed and
/// one with a fixed 300 s lease, are told `lost()` within 5 s of the announcement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_through_a_sentinel_failover_whose_last_holds_never_replicated() {
    use leasehold::fred::prelude::{Builder, ClientLike, Config, EventInterface, PubsubInterface};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;
    let set = SentinelSet::start();
    let (old_primary, new_primary) = (set.primary(), set.replica());
    let names: Vec<String> = (0..3).map(|i| format!("sentinel:busy:{i}")).collect();
    let lease = Duration::from_secs(6);
    let clients = [client_with(&set.url(), lease).await, client_with(&set.url(), lease).await];
    let holder = client_with(&set.url(), Duration::from_secs(30)).await;

    // Each client's command connection, once it is on the new primary.
    let new_port: u16 = new_primary.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
    let mut on_new = Vec::new();
    for client in &clients {
        let reconnected = Arc::new(AtomicBool::new(false));
        let mut events = client.fred().reconnect_rx();
        let flag = reconnected.clone();
        tokio::spawn(async move {
            while let Ok(server) = events.recv().await {
                if server.port == new_port {
                    flag.store(true, SeqCst);
                    return;
                }
            }
        });
        on_new.push(reconnected);
    }

    let inside: Arc<[AtomicBool; 3]> = Arc::default();
    let (overlaps, rounds_before, on_old, unlock_errors) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let switched = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..4 {
            let index = (c * 4 + t) % 3;
            let lock = client.lock(&names[index]);
            let fixed = t % 2 == 1;
            let (inside, overlaps, rounds_before, on_old, unlock_errors, switched) = (
                inside.clone(),
                overlaps.clone(),
                rounds_before.clone(),
                on_old.clone(),
                unlock_errors.clone(),
                switched.clone(),
            );
            let (reconnected, new_primary) = (on_new[c].clone(), new_primary.clone());
            tasks.push(tokio::spawn(async move {
                let mut after = 0;
                while after < 5 {
                    let followed = reconnected.load(SeqCst);
                    let guard =
                        if fixed { lock.lock_with_lease(Duration::from_secs(3)).await } else { lock.lock().await };
                    let guard = guard.expect("lock");
                    if inside[index].swap(true, SeqCst) {
                        overlaps.fetch_add(1, SeqCst);
                    }
                    if followed {
                        // Sent after the client was on the new primary: the hold is there.
                        let field = leasehold_test_support::raw_command(
                            &new_primary,
                            &[b"HEXISTS", lock.key().as_bytes(), lock.owner().as_bytes()],
                        );
                        if field.as_int() != Some(1) {
                            on_old.fetch_add(1, SeqCst);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside[index].store(false, SeqCst);
                    let counted_after = switched.load(SeqCst);
                    if guard.unlock().await.is_err() {
                        unlock_errors.fetch_add(1, SeqCst);
                    }
                    if counted_after {
                        after += 1;
                    } else {
                        rounds_before.fetch_add(1, SeqCst);
                    }
                }
            }));
        }
    }
    let before = |n: u64| {
        let rounds_before = rounds_before.clone();
        async move {
            let enough = || rounds_before.load(SeqCst) >= n;
            assert!(leasehold_test_support::wait_until(Duration::from_secs(10), enough).await, "{n} rounds");
        }
    };
    before(12).await;

    // Cut the replica off: it authenticates as a user that does not exist.
    set.cut_off_replica();
    let renewed = holder.lock("sentinel:held:renewed");
    let renewed_guard = renewed.lock().await.expect("lock");
    let fixed = holder.lock("sentinel:held:fixed");
    // Far longer than the test runs, so only a check can tell it lost (not its local expiry).
    let fixed_guard = fixed.lock_with_lease(Duration::from_secs(300)).await.expect("lock_with_lease");
    for lock in [&renewed, &fixed] {
        assert_eq!(set.on(&old_primary, &["HEXISTS", lock.key(), lock.owner()]).as_int(), Some(1));
        assert_eq!(set.on(&new_primary, &["HEXISTS", lock.key(), lock.owner()]).as_int(), Some(0));
    }
    let so_far = rounds_before.load(SeqCst);
    before(so_far + 6).await;

    // The test's own ear on the announcement.
    let sentinel = &set.sentinels()[0];
    let ear = Builder::from_config(Config::from_url(&format!("redis://{sentinel}")).expect("url"))
        .build_subscriber_client()
        .expect("build");
    ear.init().await.expect("connect");
    let mut messages = ear.message_rx();
    ear.subscribe("+switch-master").await.expect("subscribe");
    ear.ping::<()>(None).await.expect("subscribed");
    assert_eq!(
        set.on(sentinel, &["SENTINEL", "FAILOVER", leasehold_test_support::SENTINEL_SERVICE]).as_str(),
        Some("OK")
    );
    let message =
        tokio::time::timeout(Duration::from_secs(30), messages.recv()).await.expect("announced").expect("message");
    let announced = std::time::Instant::now();
    switched.store(true, SeqCst);
    let payload = message.value.as_string().unwrap_or_default();
    assert!(payload.ends_with(new_primary.replace(':', " ").as_str()), "{payload}");

    let guards = [("renewed", &renewed_guard), ("fixed-lease", &fixed_guard)];
    leasehold_test_support::assert_unreplicated_holders_told_and_no_waiter_stuck(
        announced,
        "announcement",
        &holder,
        guards,
        tasks,
    )
    .await;
    eprintln!(
        "every task did 5 rounds {:?} after the announcement; unlocks that failed: {}",
        announced.elapsed(),
        unlock_errors.load(SeqCst)
    );
    assert!(on_new.iter().all(|flag| flag.load(SeqCst)), "both clients reconnected to the new primary");
    assert_eq!(overlaps.load(SeqCst), 0, "never two holders inside one lock");
    assert_eq!(on_old.load(SeqCst), 0, "an acquire sent after the reconnect held the lock on the old primary");
    // An acquire whose reply the failover lost is undone in the background (the task
    // that sent it saw an error and tried again): give that undo a moment, well under
    // the shortest lease (3 s), so that only a release, not an expiry, frees the lock.
    for name in &names {
        let free = || set.on(&new_primary, &["EXISTS", name]).as_int() == Some(0);
        assert!(leasehold_test_support::wait_until(Duration::from_millis(1500), free).await, "{name} is free");
    }
    let _ = ear.quit().await;
}
