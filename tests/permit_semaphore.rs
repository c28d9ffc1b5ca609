//! The permit-expirable semaphore (issue 19 item 2): Redisson's
//! `RPermitExpirableSemaphore` layout through `PermitExpirableSemaphore`, against real
//! servers (`NAME::redis`, `NAME::valkey`, see `both_servers!`). Waits are bounded by
//! deadlines; leases are short (200-1000 ms) so that no test waits long.

use std::time::Duration;

use leasehold::ErrorKind;
use leasehold_test_support::{
    both_servers, client, client_with, raw, raw_command, wait_until, HolderProcess, RedisServer, RespValue, ServerKind,
};
use tokio::time::Instant;

/// How often a waiting acquire reads the semaphore again with no message (leasehold's
/// `RECHECK`): a wake-up much sooner than this came from a message or a lease's end.
const RECHECK: Duration = Duration::from_secs(1);

/// The 16 raw bytes of a 32-hex-digit permit id.
fn id_bytes(id: &str) -> Vec<u8> {
    assert_eq!(id.len(), 32, "32 hex digits: {id}");
    assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "lowercase hex: {id}");
    (0..16).map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

/// The server's clock in epoch ms.
fn server_ms(server: &RedisServer) -> i64 {
    match raw(server, &["TIME"]) {
        RespValue::Array(parts) => {
            let secs: i64 = parts[0].as_str().expect("secs").parse().expect("secs");
            let micros: i64 = parts[1].as_str().expect("micros").parse().expect("micros");
            secs * 1000 + micros / 1000
        }
        other => panic!("TIME answered {other:?}"),
    }
}

/// The score of the raw id `id` in `zset`.
fn score(server: &RedisServer, zset: &str, id: &[u8]) -> Option<i64> {
    raw_command(&server.addr(), &[b"ZSCORE", zset.as_bytes(), id])
        .as_str()
        .map(|s| s.parse::<f64>().expect("score") as i64)
}

fn get(server: &RedisServer, key: &str) -> Option<String> {
    raw(server, &["GET", key]).as_str().map(str::to_owned)
}

/// Redisson's layout byte for byte: the count String, the `{NAME}:timeout` `ZSet` of raw
/// ids scored with the lease end in epoch ms on the server's clock, non-expiring
/// permits at 922337203685477; releases by id, queries and admin calls.
async fn layout_is_redissons_and_calls_mean_what_redissons_do(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:layout");
    assert_eq!((sem.timeout_key(), sem.channel()), ("{pes:layout}:timeout", "redisson_sc:{pes:layout}"));
    assert!(sem.try_set_permits(2).await.expect("set"));
    assert!(!sem.try_set_permits(5).await.expect("set again"));
    let before = server_ms(&server);
    let leased = sem.acquire_with_lease(Duration::from_secs(60)).await.expect("leased");
    let after = server_ms(&server);
    let forever = sem.try_acquire().await.expect("try").expect("a second permit");
    assert!(sem.try_acquire().await.expect("try").is_none(), "2 permits only");
    assert_eq!(get(&server, "pes:layout").as_deref(), Some("0"));
    assert_eq!(raw(&server, &["TYPE", "{pes:layout}:timeout"]).as_str(), Some("zset"));
    assert_eq!(raw(&server, &["ZCARD", "{pes:layout}:timeout"]).as_int(), Some(2));
    let end = score(&server, "{pes:layout}:timeout", &id_bytes(leased.id())).expect("listed under its raw id");
    assert!(
        end >= before + 60_000 && end <= after + 60_000,
        "lease end {end} on the server clock [{before}, {after}] + 60 s"
    );
    let renewed = score(&server, "{pes:layout}:timeout", &id_bytes(forever.id())).expect("listed");
    assert!(renewed > after && renewed < 922_337_203_685_477, "a watchdog lease from the server clock: {renewed}");
    assert!(forever.is_renewed() && !leased.is_renewed());
    assert!(leased.lease_deadline() > std::time::Instant::now() + Duration::from_secs(50));
    assert_eq!((sem.available_permits().await.expect("q"), sem.acquired_permits().await.expect("q")), (0, 2));
    let id = forever.id().to_owned();
    assert!(sem.try_release(&id).await.expect("release by id"));
    assert!(!sem.try_release(&id).await.expect("again"), "released already");
    let second = forever.release().await.expect_err("released by id already");
    assert_eq!(second.kind(), ErrorKind::NotOwner);
    assert!(sem.update_lease(leased.id(), Duration::from_secs(120)).await.expect("update"));
    let updated = score(&server, "{pes:layout}:timeout", &id_bytes(leased.id())).expect("listed");
    assert!(updated >= end + 50_000, "new lease end {updated} from now + 120 s");
    leased.release().await.expect("release");
    assert_eq!((sem.available_permits().await.expect("q"), sem.acquired_permits().await.expect("q")), (2, 0));
    sem.set_permits(5).await.expect("set total");
    let held = sem.try_acquire().await.expect("try").expect("one");
    sem.set_permits(3).await.expect("lower the total");
    assert_eq!((sem.available_permits().await.expect("q"), sem.acquired_permits().await.expect("q")), (2, 1));
    sem.add_permits(-2).await.expect("take 2");
    assert_eq!(sem.available_permits().await.expect("q"), 0);
    held.release().await.expect("release");
    assert_eq!(get(&server, "pes:layout").as_deref(), Some("1"));
}
both_servers!(layout_is_redissons_and_calls_mean_what_redissons_do);

/// A lease runs out on the server's clock: a raw permit scored 60 s ahead of the server's
/// TIME is live, one scored 1 ms behind is reclaimed; a leased permit comes back after
/// its lease, and its `lost()` fires.
async fn leases_end_on_the_server_clock(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:clock");
    sem.set_permits(3).await.expect("set");
    let now = server_ms(&server);
    raw(&server, &["DECRBY", "pes:clock", "2"]);
    raw(
        &server,
        &[
            "ZADD",
            "{pes:clock}:timeout",
            &(now + 60_000).to_string(),
            "live-by-server-time",
            &(now - 1).to_string(),
            "expired-by-server-time",
        ],
    );
    assert_eq!((sem.available_permits().await.expect("q"), sem.acquired_permits().await.expect("q")), (2, 1));
    assert_eq!(raw(&server, &["ZSCORE", "{pes:clock}:timeout", "expired-by-server-time"]), RespValue::Nil, "reclaimed");
    let lease = Duration::from_millis(300);
    let permit = sem.acquire_with_lease(lease).await.expect("permit");
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), permit.lost()).await.expect("lost at the lease's end");
    // Told by the lease's own timer: well before a 1 s re-check (by a factor of 2) would.
    assert!(start.elapsed() < lease + RECHECK / 2, "lost after {:?}", start.elapsed());
    assert!(permit.is_lost());
    assert!(
        wait_until(Duration::from_secs(5), || raw(&server, &["ZCARD", "{pes:clock}:timeout"]).as_int() == Some(2))
            .await
    );
    assert_eq!(sem.available_permits().await.expect("q"), 2, "the expired permit counts as available again");
    let err = permit.release().await.expect_err("expired");
    assert_eq!(err.kind(), ErrorKind::NotOwner);
}
both_servers!(leases_end_on_the_server_clock);

/// A waiter wakes at the earliest lease's end (nothing is published then): with the one
/// permit held for 200 ms by a permit that is never released, a waiter gets it well
/// before the 1 s re-check would.
async fn a_waiter_wakes_at_the_earliest_lease_end(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:expiry-wake");
    sem.set_permits(1).await.expect("set");
    // The clock is read before the holder's acquire: its lease starts on the server after
    // this, so no waiter can be in before `start` + 200 ms (no slack needed below).
    let start = Instant::now();
    let held = sem.acquire_with_lease(Duration::from_millis(200)).await.expect("held");
    std::mem::forget(held); // never released: only its lease frees it
    let permit =
        sem.try_acquire_with(Duration::from_secs(5), Duration::from_secs(5)).await.expect("wait").expect("permit");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(200), "not before the lease's end: {waited:?}");
    assert!(waited < RECHECK * 85 / 100, "woken at the lease's end, not by the 1 s re-check: {waited:?}");
    permit.release().await.expect("release");
}
both_servers!(a_waiter_wakes_at_the_earliest_lease_end);

/// 20,000 expired permits (added raw with `ZADD` in batches): counted as available at once, and
/// reclaimed 1,000 per call (the chunk) without an error; no call is slow (SLOWLOG at
/// 25 ms stays empty). Redisson's reclaim `unpack`s them all and fails.
async fn twenty_thousand_expired_permits_reclaim_in_bounded_chunks(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:many");
    sem.set_permits(0).await.expect("set");
    for batch in 0..20 {
        let mut command: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), b"{pes:many}:timeout".to_vec()];
        for i in 0..1000u32 {
            command.push(b"1000".to_vec());
            command.push(format!("expired-{batch}-{i}").into_bytes());
        }
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        assert_eq!(raw_command(&server.addr(), &args).as_int(), Some(1000));
    }
    raw(&server, &["CONFIG", "SET", "slowlog-log-slower-than", "25000"]);
    raw(&server, &["SLOWLOG", "RESET"]);
    assert_eq!(sem.available_permits().await.expect("available"), 20_000, "expired permits count as available");
    assert_eq!(raw(&server, &["ZCARD", "{pes:many}:timeout"]).as_int(), Some(19_000), "one chunk of 1,000 reclaimed");
    let permit = sem.try_acquire().await.expect("try").expect("one of them");
    // 1,000 permits were free: the acquire reclaims nothing (issue 29: off the common path).
    assert_eq!(raw(&server, &["ZCARD", "{pes:many}:timeout"]).as_int(), Some(19_001));
    for _ in 0..20 {
        sem.acquired_permits().await.expect("reclaims a chunk");
    }
    assert_eq!(raw(&server, &["ZCARD", "{pes:many}:timeout"]).as_int(), Some(1), "all reclaimed but the held one");
    assert_eq!(get(&server, "pes:many").as_deref(), Some("19999"));
    assert_eq!(raw(&server, &["SLOWLOG", "LEN"]).as_int(), Some(0), "no script ran 25 ms or longer");
    permit.release().await.expect("release");
}
both_servers!(twenty_thousand_expired_permits_reclaim_in_bounded_chunks);

/// A permit whose lease ran out but that nothing reclaimed yet (no acquire came) is still
/// listed: its release gives it back (the count up by one, the id gone) and reports
/// `NotOwner`, told by the permit's own lease deadline (never later than the server's)
/// rather than the server's clock; a release by id (`try_release`) asks the server's
/// clock and says `false` the same. A permit released within its lease is `Ok`.
async fn a_release_after_the_lease_ran_out_is_not_owner_and_gives_the_permit_back(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:ran-out");
    sem.set_permits(2).await.expect("set");
    let live = sem.acquire_with_lease(Duration::from_secs(30)).await.expect("permit");
    live.release().await.expect("released within its lease");
    let lease = Duration::from_millis(200);
    let (a, b) =
        (sem.acquire_with_lease(lease).await.expect("permit"), sem.acquire_with_lease(lease).await.expect("permit"));
    let b_id = b.id().to_owned();
    b.detach();
    tokio::time::timeout(Duration::from_secs(5), a.lost()).await.expect("lost at the lease's end");
    let ran_out = || {
        let now = server_ms(&server);
        score(&server, "{pes:ran-out}:timeout", &id_bytes(&b_id)).is_some_and(|end| end <= now)
    };
    assert!(wait_until(Duration::from_secs(5), ran_out).await, "the server's lease ran out too");
    assert_eq!(get(&server, "pes:ran-out").as_deref(), Some("0"), "nothing reclaimed yet");
    let error = a.release().await.expect_err("the lease had run out");
    assert_eq!(error.kind(), ErrorKind::NotOwner, "{error}");
    assert_eq!(get(&server, "pes:ran-out").as_deref(), Some("1"), "given back all the same");
    assert!(!sem.try_release(&b_id).await.expect("release by id"), "by id: the server's clock says ran out");
    assert_eq!(get(&server, "pes:ran-out").as_deref(), Some("2"), "given back all the same");
    assert_eq!(raw(&server, &["ZCARD", "{pes:ran-out}:timeout"]).as_int(), Some(0));
}
both_servers!(a_release_after_the_lease_ran_out_is_not_owner_and_gives_the_permit_back);

/// A holder process killed (`SIGKILL`) while holding a 1 s permit: the permit is back within its
/// lease (plus slack), and a waiter in this process gets it.
async fn a_killed_holders_permit_comes_back_within_its_lease(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:killed");
    sem.set_permits(1).await.expect("set");
    let lease = Duration::from_millis(1000);
    let mut holder = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_holder"),
        &[&server.url(), "pes:killed", &lease.as_millis().to_string(), "permit"],
    );
    let line = holder.next_line(Duration::from_secs(10)).await.expect("LOCKED line");
    let id = line.strip_prefix("LOCKED ").expect("LOCKED <id>").to_owned();
    let taken_at = Instant::now();
    assert!(score(&server, "{pes:killed}:timeout", &id_bytes(&id)).is_some(), "the holder's permit is listed");
    holder.signal("KILL");
    let permit =
        sem.try_acquire_with(Duration::from_secs(5), Duration::from_secs(5)).await.expect("wait").expect("back");
    let back = taken_at.elapsed();
    assert!(back <= lease + Duration::from_millis(800), "back after {back:?}");
    assert_eq!(score(&server, "{pes:killed}:timeout", &id_bytes(&id)), None, "the dead holder's id reclaimed");
    permit.release().await.expect("release");
}
both_servers!(a_killed_holders_permit_comes_back_within_its_lease);

/// Dropping a permit releases it in the background; a dropped (cancelled) wait leaves
/// no permit taken.
async fn drop_releases_in_the_background(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:drop");
    sem.set_permits(1).await.expect("set");
    let permit = sem.acquire_with_lease(Duration::from_secs(60)).await.expect("permit");
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire_with_lease(Duration::from_secs(60)).await.map(|p| p.id().to_owned()) })
    };
    drop(permit);
    let id = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").expect("task").expect("permit");
    assert!(
        wait_until(Duration::from_secs(5), || raw(&server, &["ZCARD", "{pes:drop}:timeout"]).as_int() == Some(0)).await,
        "{id} dropped, released"
    );
    assert_eq!(get(&server, "pes:drop").as_deref(), Some("1"));
    let cancelled =
        tokio::time::timeout(Duration::from_millis(200), sem.acquire_with_lease(Duration::from_secs(60))).await;
    let permit = cancelled.expect("one free").expect("permit");
    let blocked = tokio::time::timeout(Duration::from_millis(200), sem.acquire()).await;
    assert!(blocked.is_err(), "none free: the wait is cancelled");
    drop(permit);
    assert!(
        wait_until(Duration::from_secs(5), || get(&server, "pes:drop").as_deref() == Some("1")).await,
        "nothing left taken"
    );
}
both_servers!(drop_releases_in_the_background);

/// Bad input is refused with a typed error before anything is sent; a key of another
/// type is `WrongType` with nothing changed.
async fn bad_input_is_typed(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:bad");
    let invalid = |e: leasehold::Error| assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    invalid(sem.acquire_with_lease(Duration::ZERO).await.expect_err("zero lease"));
    invalid(sem.try_acquire_with(Duration::from_secs(1), Duration::from_micros(10)).await.expect_err("sub-ms lease"));
    invalid(sem.try_acquire_with(Duration::MAX, Duration::from_secs(1)).await.expect_err("wait overflows"));
    invalid(sem.try_acquire_with(Duration::from_secs(1), Duration::MAX).await.expect_err("lease too long"));
    invalid(sem.try_release("not-hex").await.expect_err("bad id"));
    invalid(sem.update_lease(&"0".repeat(32), Duration::ZERO).await.expect_err("zero lease"));
    invalid(sem.update_lease("ZZ", Duration::from_secs(1)).await.expect_err("bad id"));
    invalid(client.permit_expirable_semaphore("").try_acquire().await.expect_err("empty name"));
    assert_eq!(raw(&server, &["EXISTS", "pes:bad", "{pes:bad}:timeout"]).as_int(), Some(0), "nothing sent");
    assert!(!sem.try_release(&"ab".repeat(16)).await.expect("a missing id"), "no such permit: false");
    raw(&server, &["HSET", "pes:bad", "f", "v"]);
    let wrong = sem.try_acquire().await.expect_err("a Hash");
    assert_eq!(wrong.kind(), ErrorKind::WrongType);
    raw(&server, &["DEL", "pes:bad"]);
    raw(&server, &["SET", "{pes:bad}:timeout", "x"]);
    let wrong = sem.available_permits().await.expect_err("a String timeout key");
    assert_eq!(wrong.kind(), ErrorKind::WrongType, "{wrong}");
    assert_eq!(get(&server, "{pes:bad}:timeout").as_deref(), Some("x"));
}
both_servers!(bad_input_is_typed);

/// `acquire()` permits are renewed by the watchdog: a live holder's permit outlives
/// several watchdog timeouts (500 ms) and is never lost.
async fn a_live_holders_watchdog_permit_never_expires(on: ServerKind) {
    let server = on.start();
    let watchdog = Duration::from_millis(500);
    let client = client_with(&server.url(), watchdog).await;
    let sem = client.permit_expirable_semaphore("pes:renewed");
    sem.set_permits(1).await.expect("set");
    let permit = sem.acquire().await.expect("permit");
    assert!(permit.is_renewed(), "renewed while held");
    let first = score(&server, "{pes:renewed}:timeout", &id_bytes(permit.id())).expect("listed");
    tokio::time::sleep(watchdog * 3).await; // three timeouts: renewals, not the first lease, keep it
    assert!(!permit.is_lost(), "renewed, never lost");
    let later = score(&server, "{pes:renewed}:timeout", &id_bytes(permit.id())).expect("still listed");
    assert!(later > first + 1000 && later > server_ms(&server), "renewed on the server clock: {first} -> {later}");
    assert_eq!(sem.acquired_permits().await.expect("q"), 1);
    assert!(sem.try_acquire().await.expect("try").is_none(), "still held");
    permit.release().await.expect("release");
    assert_eq!(client.stats().watchdog.registered, 0, "released: no longer renewed");
}
both_servers!(a_live_holders_watchdog_permit_never_expires);

/// `try_acquire_for(wait)` waits at most its bound (`None` then) and takes a permit the
/// watchdog renews; `detach` stops the renewal and sends nothing: the permit stays
/// listed until its lease runs out, and then comes back.
async fn try_acquire_for_is_bounded_and_renewed_and_detach_stops_the_renewal(on: ServerKind) {
    let server = on.start();
    let watchdog = Duration::from_millis(500);
    let client = client_with(&server.url(), watchdog).await;
    let sem = client.permit_expirable_semaphore("pes:for");
    sem.set_permits(1).await.expect("set");
    let held = sem.acquire_with_lease(Duration::from_secs(30)).await.expect("held");
    let start = Instant::now();
    assert!(sem.try_acquire_for(Duration::from_millis(300)).await.expect("wait").is_none(), "none free");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(2), "bound kept: {waited:?}");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        held.release().await
    });
    let permit = sem.try_acquire_for(Duration::from_secs(10)).await.expect("wait").expect("released within");
    release.await.expect("task").expect("release");
    assert!(permit.is_renewed(), "watchdog mode");
    let first = score(&server, "{pes:for}:timeout", &id_bytes(permit.id())).expect("listed");
    tokio::time::sleep(watchdog * 3).await; // three timeouts: only renewals keep it
    assert!(!permit.is_lost(), "renewed, never lost");
    let later = score(&server, "{pes:for}:timeout", &id_bytes(permit.id())).expect("still listed");
    assert!(later > first + 1000, "renewed: {first} -> {later}");

    let id = id_bytes(permit.id());
    permit.detach();
    assert_eq!(client.stats().watchdog.registered, 0, "detached: no longer renewed");
    assert!(score(&server, "{pes:for}:timeout", &id).is_some(), "detach sends nothing");
    // Still held a little later (its last renewal left it at least 2/3 of a lease).
    assert!(sem.try_acquire_for(Duration::from_millis(100)).await.expect("wait").is_none(), "not released");
    let start = Instant::now();
    let next = sem.try_acquire_for(Duration::from_secs(5)).await.expect("wait").expect("back after its lease");
    assert!(start.elapsed() < Duration::from_secs(2), "within one watchdog lease: {:?}", start.elapsed());
    assert!(score(&server, "{pes:for}:timeout", &id).is_none(), "the detached permit expired");
    next.release().await.expect("release");
}
both_servers!(try_acquire_for_is_bounded_and_renewed_and_detach_stops_the_renewal);

/// A holder process killed (`SIGKILL`) while holding an `acquire()` permit (watchdog 1 s,
/// renewed past its first lease): the permit is back within one watchdog timeout of the
/// kill.
async fn a_killed_watchdog_holders_permit_comes_back_within_one_timeout(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:killed-renewed");
    sem.set_permits(1).await.expect("set");
    let watchdog = Duration::from_millis(1000);
    let mut holder = HolderProcess::spawn(
        env!("CARGO_BIN_EXE_holder"),
        &[&server.url(), "pes:killed-renewed", &watchdog.as_millis().to_string(), "permit-watchdog"],
    );
    let line = holder.next_line(Duration::from_secs(10)).await.expect("LOCKED line");
    let id = line.strip_prefix("LOCKED ").expect("LOCKED <id>").to_owned();
    tokio::time::sleep(watchdog * 2).await; // renewed past its first lease
    assert!(
        score(&server, "{pes:killed-renewed}:timeout", &id_bytes(&id)).is_some_and(|end| end > server_ms(&server)),
        "renewed"
    );
    holder.signal("KILL");
    let killed_at = Instant::now();
    let permit =
        sem.try_acquire_with(Duration::from_secs(5), Duration::from_secs(5)).await.expect("wait").expect("back");
    let back = killed_at.elapsed();
    assert!(back <= watchdog + Duration::from_millis(800), "back after {back:?}");
    assert!(back >= watchdog / 3, "back too early ({back:?}): it was not renewed up to the kill");
    permit.release().await.expect("release");
}
both_servers!(a_killed_watchdog_holders_permit_comes_back_within_one_timeout);

/// An uncontended `try_acquire()` + `release()` (a watchdog-renewed, so leased, permit)
/// makes no more server calls than Redisson's `tryAcquire` (with a lease) + `tryRelease`
/// scripts (issue 29 item 1): no reclaim on either path while a permit is free, no read
/// of the count before the release's INCRBY, and one `TIME`, the acquire's (Redisson
/// passes its client's clock as an ARGV): the guard's release tells a lease that had run
/// out by its own deadline, not the server's clock.
async fn a_pair_makes_no_more_server_calls_than_redissons_scripts(on: ServerKind) {
    use leasehold_test_support::commandstats::{calls_during, total};
    use leasehold_test_support::redisson_pes::{REDISSON_PES_ACQUIRE, REDISSON_PES_TRY_RELEASE};
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:calls");
    sem.set_permits(1).await.expect("set");
    raw(&server, &["SET", "pes:calls:r", "1"]);
    sem.try_acquire().await.expect("try").expect("free").release().await.expect("release");
    let ours = calls_during(&server, async {
        sem.try_acquire().await.expect("try").expect("free").release().await.expect("release");
    })
    .await;
    let (count, timeout, channel) = ("pes:calls:r", "{pes:calls:r}:timeout", "redisson_sc:{pes:calls:r}");
    let now = server_ms(&server);
    let (expiry, now) = ((now + 30_000).to_string(), now.to_string());
    let theirs = calls_during(&server, async {
        let args = ["EVAL", REDISSON_PES_ACQUIRE, "3", count, timeout, channel, "1", &expiry, &now];
        let taken = raw(&server, &[&args[..], &["922337203685477", "publish", "permit-1"]].concat());
        assert_eq!(taken.as_str(), Some("OK"));
        let released = raw(
            &server,
            &["EVAL", REDISSON_PES_TRY_RELEASE, "3", count, channel, timeout, "permit-1", "1", &now, "publish"],
        );
        assert_eq!(released.as_int(), Some(1));
    })
    .await;
    assert!(total(&ours) <= total(&theirs), "leasehold {ours:?} against Redisson {theirs:?}");
    assert_eq!(ours.get("time"), Some(&1), "the acquire's clock only: {ours:?}");
    for absent in ["zcount", "zremrangebyrank", "zrangebyscore", "type"] {
        assert_eq!(ours.get(absent), None, "no {absent}: {ours:?}");
    }
    assert_eq!(ours.get("get"), Some(&1), "the acquire's read of the count only: {ours:?}");
}
both_servers!(a_pair_makes_no_more_server_calls_than_redissons_scripts);

/// A release whose count is not a whole number (a String another program wrote) is
/// `WrongType` and writes nothing: the permit stays listed, the count untouched. The
/// release no longer reads the count first (issue 29 item 1): its INCRBY, the first
/// write, refuses it.
async fn a_release_on_a_count_that_is_not_a_number_is_wrong_type_and_writes_nothing(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:text");
    sem.set_permits(1).await.expect("set");
    let permit = sem.acquire_with_lease(Duration::from_secs(60)).await.expect("permit");
    let id = permit.id().to_owned();
    raw(&server, &["SET", "pes:text", "ten"]);
    let wrong = sem.try_release(&id).await.expect_err("not a count");
    assert_eq!(wrong.kind(), ErrorKind::WrongType, "{wrong}");
    assert!(score(&server, "{pes:text}:timeout", &id_bytes(&id)).is_some(), "still listed: nothing written");
    assert_eq!(get(&server, "pes:text").as_deref(), Some("ten"));
    raw(&server, &["SET", "pes:text", "0"]);
    permit.release().await.expect("released once the count is one");
    assert_eq!(get(&server, "pes:text").as_deref(), Some("1"));
}
both_servers!(a_release_on_a_count_that_is_not_a_number_is_wrong_type_and_writes_nothing);

/// An acquire that finds no permit free reclaims the expired ones first and takes one;
/// one that finds a permit free reclaims nothing (the reclaim is off the common path,
/// issue 29 item 1), and a release never reclaims; a waiter is still served by an
/// expired permit.
async fn expired_permits_are_reclaimed_when_none_is_free(on: ServerKind) {
    let server = on.start();
    let client = client(&server).await;
    let sem = client.permit_expirable_semaphore("pes:reclaim");
    sem.set_permits(1).await.expect("set");
    let now = server_ms(&server);
    raw(&server, &["ZADD", "{pes:reclaim}:timeout", &(now - 1).to_string(), "expired-a"]);
    let free = sem.try_acquire().await.expect("try").expect("the free permit");
    assert!(score(&server, "{pes:reclaim}:timeout", b"expired-a").is_some(), "a permit was free: nothing reclaimed");
    free.release().await.expect("release");
    assert!(score(&server, "{pes:reclaim}:timeout", b"expired-a").is_some(), "a release reclaims nothing");
    raw(&server, &["SET", "pes:reclaim", "0"]);
    let reclaimed = sem.try_acquire().await.expect("try").expect("the expired permit, reclaimed");
    assert_eq!(score(&server, "{pes:reclaim}:timeout", b"expired-a"), None, "reclaimed when none was free");
    assert_eq!(get(&server, "pes:reclaim").as_deref(), Some("0"));
    reclaimed.release().await.expect("release");
}
both_servers!(expired_permits_are_reclaimed_when_none_is_free);
