//! The `leasehold` binary run as an operator runs it: real processes, a real
//! redis-server, signals sent with `kill`.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{alive, kill, leasehold, log_file, output, read, wait_for, BIN};
use leasehold_test_support::{wait_until, RedisServer};

/// A child script that logs `started`, logs `TERM` when it gets SIGTERM and exits
/// with `code`, and otherwise runs for up to 20 s.
fn trapping_child(log: &Path, code: u8) -> String {
    let log = log.display();
    format!(
        "trap 'echo TERM >> {log}; exit {code}' TERM; echo \"started $LEASEHOLD_OWNER\" >> {log}; \
         i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_on_one_name_never_overlap() {
    let server = RedisServer::start();
    let log = log_file("overlap");
    // Each child logs its interval (ns since the epoch) in one line when it ends.
    let script = format!("s=$(date +%s%N); sleep 0.3; e=$(date +%s%N); echo \"$s $e\" >> {}", log.display());
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(leasehold(&server.url(), &["run", "overlap", "--", "sh", "-c", &script]).spawn().expect("spawn"));
    }
    for run in &mut runs {
        assert_eq!(wait_for(run, Duration::from_secs(15)).await.code(), Some(0));
    }
    let mut intervals: Vec<(u128, u128)> = read(&log)
        .lines()
        .map(|line| {
            let (s, e) = line.split_once(' ').expect("two numbers");
            (s.parse().expect("start"), e.parse().expect("end"))
        })
        .collect();
    assert_eq!(intervals.len(), 3, "every child ran: {intervals:?}");
    intervals.sort_unstable();
    for pair in intervals.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two children held the lock at once: {intervals:?}");
    }
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn the_childs_exit_code_passes_through() {
    let server = RedisServer::start();
    let url = server.url();
    assert_eq!(output(&url, &["run", "codes", "--", "true"]).await.0, Some(0));
    assert_eq!(output(&url, &["run", "codes", "--", "sh", "-c", "exit 3"]).await.0, Some(3));
    // Killed by SIGINT (2): 128 + 2, as a shell says it.
    assert_eq!(output(&url, &["run", "codes", "--", "sh", "-c", "kill -INT $$"]).await.0, Some(130));
    assert_eq!(output(&url, &["run", "codes", "--", "/nonexistent/command"]).await.0, Some(127));
    // Released after each child: free again.
    let (code, json) = output(&url, &["status", "codes", "--json"]).await;
    assert_eq!(code, Some(0));
    assert!(json.contains(r#""held":false"#), "{json}");
}

#[tokio::test]
async fn the_child_sees_the_lock_in_its_environment() {
    let server = RedisServer::start();
    let url = server.url();
    let (code, out) = output(
        &url,
        &[
            "run",
            "--fenced",
            "env",
            "--",
            "sh",
            "-c",
            "echo \"$LEASEHOLD_LOCK_NAME|$LEASEHOLD_OWNER|$LEASEHOLD_FENCING_TOKEN\"",
        ],
    )
    .await;
    assert_eq!(code, Some(0));
    let fields: Vec<&str> = out.trim().split('|').collect();
    assert_eq!(fields[0], "env");
    assert!(fields[1].len() > 37 && fields[1].contains(':'), "owner: {out}");
    let token: u64 = fields[2].parse().expect("a fencing token");
    let (_, json) = output(&url, &["status", "env", "--json"]).await;
    assert!(json.contains(&format!(r#""last_token":{token}"#)), "{json}");
    let (_, plain) =
        output(&url, &["run", "plain", "--", "sh", "-c", "echo \"[${LEASEHOLD_FENCING_TOKEN-unset}]\""]).await;
    assert_eq!(plain.trim(), "[unset]");
}

#[tokio::test]
async fn a_forced_unlock_stops_the_child_and_run_exits_124() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("forced");
    // A short watchdog lease, renewed every 300 ms, so the loss is found quickly.
    let mut run = leasehold(
        &url,
        &["run", "--watchdog", "900ms", "--grace", "2s", "forced", "--", "sh", "-c", &trapping_child(&log, 0)],
    )
    .spawn()
    .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await, "the child started");
    let owner = read(&log).trim().trim_start_matches("started ").to_owned();

    let (code, json) = output(&url, &["status", "forced", "--json"]).await;
    assert_eq!(code, Some(0));
    assert!(json.contains(&format!(r#""holders":[{{"owner":"{owner}","holds":1,"mode":null,"pttl_ms":"#)), "{json}");
    let (_, list) = output(&url, &["list", "--json"]).await;
    assert!(list.contains(r#"{"name":"forced","kind":"lock","held":true,"#), "{list}");
    assert!(list.contains(&format!(r#""holders":[{{"owner":"{owner}","holds":1,"#)), "the same schema: {list}");

    // Another owner: refused, nothing changes.
    let (code, out) =
        output(&url, &["unlock", "forced", "--force", "--owner", "0f8fad5b-d9cb-469f-a165-70867728950e:1"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(!read(&log).contains("TERM"));
    let (code, out) = output(&url, &["unlock", "forced", "--force", "--owner", &owner]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&owner), "the holder is named: {out}");

    let started = Instant::now();
    let status = wait_for(&mut run, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(124), "lost lock: 124");
    assert!(started.elapsed() < Duration::from_secs(2), "stopped by SIGTERM, not by the SIGKILL after the grace");
    assert!(read(&log).contains("TERM"), "the child got SIGTERM");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("grace");
    let script = format!("trap '' TERM; echo started >> {}; exec sleep 20", log.display());
    // `exec sleep` after `trap ''`: the ignored disposition is inherited, so only
    // SIGKILL ends it. A fixed 1 s lease that runs out stands for the loss.
    let mut run = leasehold(&url, &["run", "--lease", "1s", "--grace", "500ms", "grace", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await);
    let status = wait_for(&mut run, Duration::from_secs(6)).await;
    assert_eq!(status.code(), Some(124));
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn sigterm_sent_to_run_reaches_the_child() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("sigterm");
    let mut run =
        leasehold(&url, &["run", "sigterm", "--", "sh", "-c", &trapping_child(&log, 7)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await, "the child started");
    let pid = run.id().expect("running").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(killed.success());
    let status = wait_for(&mut run, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(7), "run exits with the child's code");
    assert!(read(&log).contains("TERM"), "the child got the SIGTERM");
    let (_, json) = output(&url, &["status", "sigterm", "--json"]).await;
    assert!(json.contains(r#""held":false"#), "released after the child exited: {json}");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn wait_zero_on_a_held_lock_exits_75_at_once() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("wait0");
    let mut holder =
        leasehold(&url, &["run", "wait0", "--", "sh", "-c", &trapping_child(&log, 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await);
    let started = Instant::now();
    let (code, _) = output(&url, &["run", "--wait", "0", "wait0", "--", "true"]).await;
    assert_eq!(code, Some(75));
    assert!(started.elapsed() < Duration::from_secs(2), "at once: {:?}", started.elapsed());
    // A bounded wait runs out too.
    let (code, _) = output(&url, &["run", "--wait", "300ms", "--fair", "wait0", "--", "true"]).await;
    assert_eq!(code, Some(75));
    // SIGTERM, forwarded: the child ends too (a SIGKILL would orphan it).
    let pid = holder.id().expect("running").to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    assert_eq!(wait_for(&mut holder, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn an_unreachable_url_exits_69() {
    // A port nobody listens on: bound, then freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("redis://127.0.0.1:{port}");
    let started = Instant::now();
    for args in [&["--timeout", "1s", "run", "x", "--", "true"][..], &["--timeout", "1s", "status", "x"][..]] {
        assert_eq!(output(&url, args).await.0, Some(69), "{args:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(8));
}

/// Runs `leasehold` to completion with stderr captured: (exit code, stdout, stderr,
/// how long it took).
async fn output_with_stderr(url: &str, args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let out = leasehold(url, args).stderr(Stdio::piped()).output().await.expect("the leasehold binary runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr), started.elapsed())
}

/// A listener that accepts connections and never answers (the kernel completes the
/// handshake of connections queued in its backlog): Redis that hangs.
fn silent_listener() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://127.0.0.1:{}", listener.local_addr().expect("addr").port());
    (listener, url)
}

/// A listener that answers every connection with an HTTP error and closes it: a port
/// that is not Redis. Its thread runs until the test process ends.
fn http_listener() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://127.0.0.1:{}", listener.local_addr().expect("addr").port());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let mut request = [0u8; 512];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    url
}

/// `--timeout` bounds the whole connect: a server that accepts and never answers is
/// given up on after `--timeout` (not twice that: the QUIT of the half-made connection
/// is not waited for), exit 69, "timed out". The timeout is fractional, as operators
/// write it.
#[tokio::test]
async fn a_server_that_never_answers_is_given_up_on_within_the_timeout() {
    let (_listener, url) = silent_listener();
    for args in [&["--timeout", "1.5s", "status", "x"][..], &["--timeout", "1.5s", "run", "x", "--", "true"][..]] {
        let (code, _, stderr, took) = output_with_stderr(&url, args).await;
        assert_eq!(code, Some(69), "{args:?}: {stderr}");
        assert!(stderr.contains("timed out"), "{args:?}: {stderr}");
        assert!(took >= Duration::from_millis(1400), "{args:?}: it waited for the timeout: {took:?}");
        assert!(took < Duration::from_millis(2300), "{args:?}: within the timeout and a small margin: {took:?}");
    }
}

/// Each way a connect fails is said, with the server's words where there are any, and
/// exits 69: a closed port (refused), a port that answers HTTP (not Redis), a server
/// that wants a password (its NOAUTH) or refuses the one given (its WRONGPASS).
#[tokio::test]
async fn connect_failures_say_why_and_exit_69() {
    // A port nobody listens on: bound, then freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let (code, _, stderr, _) = output_with_stderr(&format!("redis://127.0.0.1:{port}"), &["status", "x"]).await;
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");

    let (code, _, stderr, took) = output_with_stderr(&http_listener(), &["--timeout", "3s", "status", "x"]).await;
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("not Redis") && stderr.contains("HTTP/1.1 400 Bad Request"), "{stderr}");
    assert!(!stderr.contains("see the source error"), "{stderr}");
    assert!(took < Duration::from_secs(3), "no wait for a timeout: {took:?}");

    let server = RedisServer::start_with(leasehold_test_support::ServerOptions::default().arg("requirepass", "s3cret"));
    let (code, _, stderr, _) = output_with_stderr(&server.url(), &["status", "x"]).await;
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("authentication failed") && stderr.contains("NOAUTH"), "{stderr}");
    let wrong = format!("redis://:wrong@127.0.0.1:{}", server.port());
    let (code, _, stderr, _) = output_with_stderr(&wrong, &["status", "x"]).await;
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("WRONGPASS"), "{stderr}");
    assert!(!stderr.contains("wrong@"), "the password is not printed: {stderr}");
    let right = format!("redis://:s3cret@127.0.0.1:{}", server.port());
    assert_eq!(output(&right, &["status", "x"]).await.0, Some(0));
}

#[tokio::test]
async fn usage_errors_exit_64() {
    let url = "redis://127.0.0.1:1";
    for args in [
        &["run", "x"][..],
        &["run", "x", "true"][..],
        &["run", "--wait", "5", "x", "--", "true"][..],
        &["run", "--wait", "1.5d", "x", "--", "true"][..],
        &["run", "--wait", ".5s", "x", "--", "true"][..],
        &["run", "--fenced", "--fair", "x", "--", "true"][..],
        &["run", "--lease", "1s", "--watchdog", "1s", "x", "--", "true"][..],
        &["unlock", "x"][..],
        &["frobnicate"][..],
        // --stop-margin needs a fixed lease, shorter than the margin.
        &["run", "--stop-margin", "1s", "x", "--", "true"][..],
        &["run", "--lease", "1s", "--stop-margin", "1s", "x", "--", "true"][..],
        &["run", "--permits", "0", "x", "--", "true"][..],
        &["run", "--permits", "2", "--fenced", "x", "--", "true"][..],
        &["hold"][..],
        &["hold", "--permits", "2", "--fair", "x"][..],
    ] {
        assert_eq!(output(url, args).await.0, Some(64), "{args:?}");
    }
    assert_eq!(output(url, &["--help"]).await.0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_status_and_unlock_on_a_cluster() {
    let cluster = leasehold_test_support::RedisCluster::shared();
    let url = cluster.url();
    let log = log_file("cluster");
    // Names on every primary (slots spread over the three).
    let names = ["cli-a", "cli-b", "cli-c", "cli-d", "cli-e", "cli-f"];
    let primaries: std::collections::HashSet<String> = names.iter().map(|n| cluster.primary_for(n)).collect();
    assert!(primaries.len() >= 2, "the names span primaries: {primaries:?}");
    let mut runs = Vec::new();
    for name in names {
        let script = trapping_child(&log, 0).replace("started", &format!("started-{name}"));
        let args = ["run", "--watchdog", "900ms", name, "--", "sh", "-c", &script];
        runs.push(leasehold(&url, &args).spawn().expect("spawn"));
    }
    assert!(
        wait_until(Duration::from_secs(15), || read(&log).lines().filter(|l| l.starts_with("started-")).count() == 6)
            .await,
        "every child started: {}",
        read(&log)
    );
    let (code, list) = output(&url, &["list", "cli-*", "--json"]).await;
    assert_eq!(code, Some(0));
    for name in names {
        assert!(list.contains(&format!(r#"{{"name":"{name}","kind":"lock","held":true,"#)), "{name} listed: {list}");
    }
    let (code, status) = output(&url, &["status", "cli-a", "--json"]).await;
    assert_eq!(code, Some(0));
    assert!(status.contains(r#""held":true"#), "{status}");
    // A forced unlock with the holder's id, through sharded pub/sub on this cluster.
    let owner = read(&log)
        .lines()
        .find_map(|l| l.strip_prefix("started-cli-a ").map(str::to_owned))
        .expect("cli-a's owner logged");
    let (code, out) = output(&url, &["unlock", "cli-a", "--force", "--owner", &owner]).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(wait_for(&mut runs[0], Duration::from_secs(5)).await.code(), Some(124));
    for run in &mut runs[1..] {
        let pid = run.id().expect("running").to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
        assert_eq!(wait_for(run, Duration::from_secs(5)).await.code(), Some(0));
    }
    let (_, list) = output(&url, &["list", "cli-*", "--json"]).await;
    assert_eq!(list.trim(), "[]", "all released");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn unlock_leaves_keys_that_are_not_locks() {
    use leasehold_test_support::{raw_command, RespValue};
    let server = RedisServer::start();
    let url = server.url();
    raw_command(&server.addr(), &[b"SET", b"app:key", b"value"]);
    raw_command(&server.addr(), &[b"HSET", b"app:hash", b"field", b"1"]);
    for key in ["app:key", "app:hash", "absent"] {
        let (code, out) = output(&url, &["unlock", key, "--force"]).await;
        assert_eq!(code, Some(1), "{key}: {out}");
    }
    let (_, list) = output(&url, &["list", "--json"]).await;
    assert_eq!(list.trim(), "[]", "neither is listed as a lock");
    let (_, json) = output(&url, &["status", "app:key", "--json"]).await;
    assert!(json.contains(r#""kind":"other""#), "{json}");
    let exists = raw_command(&server.addr(), &[b"EXISTS", b"app:key", b"app:hash"]);
    assert!(matches!(exists, RespValue::Integer(2)), "both keys are still there: {exists:?}");
}

/// While one `run` waits behind another, the lock's derived keys exist (its wait queue
/// and waiter entries; a fair lock's queue and deadlines): `list` shows the locks only,
/// `status` on a derived key says it is not a lock and whose key it is, `unlock
/// --force` leaves it, and `status` of the lock shows the waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_keys_are_never_shown_as_locks() {
    use leasehold_test_support::{raw, RespValue};
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("derived");
    let locks = [("rep", "--fenced"), ("fq", "--fair")];
    let mut holders = Vec::new();
    for (name, flag) in locks {
        let script = trapping_child(&log, 0).replace("started", &format!("started-{name}"));
        holders.push(leasehold(&url, &["run", flag, name, "--", "sh", "-c", &script]).spawn().expect("spawn"));
    }
    assert!(
        wait_until(Duration::from_secs(10), || read(&log).lines().filter(|l| l.starts_with("started-")).count() == 2)
            .await,
        "both holders started: {}",
        read(&log)
    );
    let mut waiters = Vec::new();
    for (name, flag) in locks {
        waiters.push(leasehold(&url, &["run", flag, name, "--", "true"]).spawn().expect("spawn"));
    }
    let exists = |key: &str| matches!(raw(&server, &["EXISTS", key]), RespValue::Integer(1));
    assert!(
        wait_until(Duration::from_secs(10), || exists("leasehold_lock_waiters:{rep}")
            && exists("redisson_lock_queue:{fq}"))
        .await,
        "both waiters queued"
    );

    let (code, list) = output(&url, &["list"]).await;
    assert_eq!(code, Some(0), "{list}");
    let names: Vec<&str> = list.lines().map(|line| line.split('\t').next().unwrap_or_default()).collect();
    assert_eq!(names, ["fq", "rep"], "only the locks: {list}");
    assert!(list.contains("waiters=1"), "{list}");
    let (_, json) = output(&url, &["list", "--json"]).await;
    assert_eq!(json.matches(r#""name":"#).count(), 2, "{json}");

    for (key, role, of) in [
        ("leasehold_lock_waiters:{rep}", "lock_waiters", "rep"),
        ("leasehold_lock_queue:{rep}", "lock_queue", "rep"),
        ("redisson_lock_token:{rep}", "fencing_counter", "rep"),
        ("redisson_lock_queue:{fq}", "fair_queue", "fq"),
        ("redisson_lock_timeout:{fq}", "fair_deadlines", "fq"),
    ] {
        assert!(exists(key), "{key} exists");
        let (code, text) = output(&url, &["status", key]).await;
        assert_eq!(code, Some(0), "{text}");
        assert!(text.contains("not a lock") && text.contains(&format!("`{of}`")), "{key}: {text}");
        assert!(!text.contains("holder:"), "{key}: {text}");
        let (_, json) = output(&url, &["status", key, "--json"]).await;
        assert!(json.contains(r#""kind":"derived","held":false,"#), "{key}: {json}");
        assert!(json.contains(&format!(r#""derived_from":"{of}","role":"{role}""#)), "{key}: {json}");
        let (code, out) = output(&url, &["unlock", key, "--force"]).await;
        assert_eq!(code, Some(1), "{key}: {out}");
        assert!(out.contains("not a lock"), "{key}: {out}");
        assert!(exists(key), "{key} is left alone");
    }
    // The locks themselves show their waiters, in their queues.
    let (_, json) = output(&url, &["status", "rep", "--json"]).await;
    assert!(json.contains(r#""kind":"fenced","held":true,"#) && json.contains(r#""queue":"lock""#), "{json}");
    let (_, json) = output(&url, &["status", "fq", "--json"]).await;
    assert!(json.contains(r#""kind":"fair","held":true,"#) && json.contains(r#""queue":"fair""#), "{json}");
    let (_, text) = output(&url, &["status", "rep"]).await;
    assert!(text.contains("waiters:    1") && text.contains("lock:"), "{text}");

    // The holders stop; each waiter gets its lock, runs and exits 0.
    for holder in &mut holders {
        let pid = holder.id().expect("running").to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
        assert_eq!(wait_for(holder, Duration::from_secs(5)).await.code(), Some(0));
    }
    for waiter in &mut waiters {
        assert_eq!(wait_for(waiter, Duration::from_secs(10)).await.code(), Some(0));
    }
    let (_, list) = output(&url, &["list", "--json"]).await;
    assert_eq!(list.trim(), "[]", "all released");
    let _ = std::fs::remove_file(&log);
}

/// `status` shows every kind's holders and waiters: a read/write lock's writer with its
/// waiting reader and writer, a semaphore's count and waiter, a permit semaphore's
/// takers with their leases, a latch's count and its waiting connection. `list` lists
/// the read/write lock and the permit semaphore (held), not the semaphore's or the
/// latch's count (any application's counter looks the same), nor any derived key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_every_kinds_holders_and_waiters() {
    use leasehold_test_support::{raw, RespValue};
    let server = RedisServer::start();
    let url = server.url();
    let client = leasehold::Client::connect(&url).await.expect("connect");

    let writer = client.read_write_lock("rwx").write().await.expect("the write hold");
    let waiting_reader = {
        let rw = client.read_write_lock("rwx");
        tokio::spawn(async move { rw.read().await.map(leasehold::ReadGuard::detach) })
    };
    let waiting_writer = {
        let rw = client.read_write_lock("rwx");
        tokio::spawn(async move { rw.write().await.map(leasehold::WriteGuard::detach) })
    };
    let sem = client.semaphore("sem");
    assert!(sem.try_set_permits(1).await.expect("set"));
    let taken = sem.acquire(1).await.expect("the permit");
    let waiting_taker = {
        let sem = client.semaphore("sem");
        tokio::spawn(async move { sem.acquire(1).await.map(leasehold::SemaphorePermit::detach) })
    };
    let pes = client.permit_expirable_semaphore("pes");
    assert!(pes.try_set_permits(2).await.expect("set"));
    let permit = pes.acquire_with_lease(Duration::from_secs(30)).await.expect("a permit");
    let latch = client.count_down_latch("latch");
    assert!(latch.try_set_count(3).await.expect("set"));
    let latch_waiter = {
        let latch = client.count_down_latch("latch");
        tokio::spawn(async move { latch.wait().await })
    };
    let exists = |key: &str| matches!(raw(&server, &["EXISTS", key]), RespValue::Integer(1));
    let subscribed = |channel: &str| client.subscribed_channels().iter().any(|c| c == channel);
    assert!(
        wait_until(Duration::from_secs(10), || {
            exists("leasehold_rwlock_readers:{rwx}")
                && exists("leasehold_rwlock_writers:{rwx}")
                && exists("leasehold_sem_queue:{sem}")
                && subscribed(latch.channel())
        })
        .await,
        "everyone waits"
    );

    let (code, json) = output(&url, &["status", "rwx", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert!(json.contains(r#""kind":"read_write","held":true,"#), "{json}");
    // The Hash field of a write hold is `OWNER:write`.
    let field = writer.owner().strip_suffix(":write").unwrap_or(writer.owner()).to_owned() + ":write";
    assert!(json.contains(&format!(r#""owner":"{field}","holds":1,"mode":"write","#)), "{json}");
    assert!(json.contains(r#""queue":"read""#) && json.contains(r#""queue":"write""#), "both waiters: {json}");

    let (_, json) = output(&url, &["status", "sem", "--json"]).await;
    assert!(json.contains(r#""kind":"semaphore","held":false,"#) && json.contains(r#""available":0,"#), "{json}");
    assert!(json.contains(r#""queue":"semaphore","permits":1,"#), "the waiter and what it asks: {json}");
    assert!(json.contains(r#""subscribers":1,"#), "{json}");

    let (_, json) = output(&url, &["status", "pes", "--json"]).await;
    assert!(json.contains(r#""kind":"permit_semaphore","held":true,"#) && json.contains(r#""available":1,"#), "{json}");
    let holder = format!(r#"{{"owner":"{}","holds":1,"mode":null,"pttl_ms":"#, permit.id());
    let lease_left: i64 = json
        .split_once(&holder)
        .and_then(|(_, rest)| rest.split(['}', ',']).next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("the permit and its lease: {json}"));
    assert!((20_000..=30_000).contains(&lease_left), "{lease_left} ms left of a 30 s lease: {json}");
    let (_, text) = output(&url, &["status", "pes"]).await;
    assert!(text.contains(&format!("permit:     {}", permit.id())), "{text}");

    let (_, json) = output(&url, &["status", "latch", "--json"]).await;
    assert!(json.contains(r#""kind":"latch","#) && json.contains(r#""count":3,"subscribers":1,"#), "{json}");
    let (_, text) = output(&url, &["status", "latch"]).await;
    assert!(text.contains("count:      3"), "{text}");

    let (_, list) = output(&url, &["list", "--json"]).await;
    assert_eq!(list.matches(r#""name":"#).count(), 2, "{list}");
    assert!(list.contains(r#"{"name":"pes","kind":"permit_semaphore","#), "{list}");
    assert!(list.contains(r#"{"name":"rwx","kind":"read_write","#), "{list}");

    for task in [waiting_reader, waiting_writer] {
        task.abort();
    }
    waiting_taker.abort();
    latch_waiter.abort();
    drop(taken);
    drop(permit);
    drop(writer);
    let _ = client.shutdown().await;
}

/// On a cluster the status script reads every derived key in the name's slot, the
/// read holds' timeout keys (not declared to the script) included, for names of every
/// form: plain, with a hash tag, with braces but no tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reads_holds_and_permits_on_a_cluster() {
    let cluster = leasehold_test_support::RedisCluster::shared();
    let url = cluster.url();
    let client = leasehold::Client::connect(&url).await.expect("connect");
    let mut reads = Vec::new();
    for name in ["inspect-rw", "{inspect}:rw", "inspect}rw"] {
        // Two readers: the key lives as long as the longer hold, the shorter reader's own
        // lease is its hold's timeout key's.
        let long = client.read_write_lock(name).read_with_lease(Duration::from_secs(60)).await.expect("a read");
        let short = client.read_write_lock(name).read_with_lease(Duration::from_secs(5)).await.expect("a read");
        let (code, json) = output(&url, &["status", name, "--json"]).await;
        assert_eq!(code, Some(0), "{name}: {json}");
        assert!(json.contains(r#""kind":"read_write","held":true,"#), "{name}: {json}");
        let lease_left = |owner: &str| -> i64 {
            let holder = format!(r#"{{"owner":"{owner}","holds":1,"mode":"read","pttl_ms":"#);
            json.split_once(&holder)
                .and_then(|(_, rest)| rest.split(['}', ',']).next())
                .and_then(|ms| ms.parse().ok())
                .unwrap_or_else(|| panic!("{name}: {owner} and its lease: {json}"))
        };
        assert!((50_000..=60_000).contains(&lease_left(long.owner())), "{name}: {json}");
        assert!((1..=5_000).contains(&lease_left(short.owner())), "{name}: its own hold's lease: {json}");
        reads.extend([long, short]);
    }
    let pes = client.permit_expirable_semaphore("{inspect}:pes");
    // False when an earlier run set it: the shared cluster keeps its keys.
    let _ = pes.try_set_permits(1).await.expect("set");
    let permit = pes.acquire_with_lease(Duration::from_secs(30)).await.expect("a permit");
    let (code, json) = output(&url, &["status", "{inspect}:pes", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert!(json.contains(r#""kind":"permit_semaphore","held":true,"#), "{json}");
    assert!(json.contains(permit.id()), "{json}");
    let (_, list) = output(&url, &["list", "{inspect}:*", "--json"]).await;
    assert!(list.contains(r#"{"name":"{inspect}:pes","kind":"permit_semaphore","#), "{list}");
    assert!(list.contains(r#"{"name":"{inspect}:rw","kind":"read_write","#), "{list}");
    assert!(!list.contains(r#""kind":"derived""#), "{list}");
    permit.release().await.expect("released");
    for read in reads {
        read.unlock().await.expect("unlocked");
    }
    let _ = client.shutdown().await;
}

/// A read/write lock (Redisson's `RReadWriteLock` layout, written here by hand) shows
/// as `read_write` with its reader and writer owners, and `unlock --force` deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_unlock_know_the_read_write_lock() {
    use leasehold_test_support::{raw_command, RespValue};
    let server = RedisServer::start();
    let url = server.url();
    let reader = b"7c9e6679-7425-40de-944b-e07fc1f90ae7:1";
    let writer = b"7c9e6679-7425-40de-944b-e07fc1f90ae7:1:write";
    raw_command(&server.addr(), &[b"HSET", b"rw", b"mode", b"write", writer, b"1", reader, b"2"]);
    raw_command(&server.addr(), &[b"PEXPIRE", b"rw", b"30000"]);
    let (code, json) = output(&url, &["status", "rw", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert!(json.contains(r#""kind":"read_write""#), "{json}");
    assert!(json.contains("e07fc1f90ae7:1:write"), "the writer is listed: {json}");
    let (code, out) = output(&url, &["unlock", "rw", "--force"]).await;
    assert_eq!(code, Some(0), "{out}");
    let exists = raw_command(&server.addr(), &[b"EXISTS", b"rw"]);
    assert!(matches!(exists, RespValue::Integer(0)), "deleted: {exists:?}");
}

/// A semaphore (Redisson's `RSemaphore` count, written here by hand) shows as
/// `semaphore` with its count; `unlock --force` leaves it; `list` does not list it.
#[tokio::test]
async fn status_knows_the_semaphore_and_unlock_leaves_it() {
    use leasehold_test_support::raw_command;
    let server = RedisServer::start();
    let url = server.url();
    raw_command(&server.addr(), &[b"SET", b"permits", b"3"]);
    let (code, json) = output(&url, &["status", "permits", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert!(json.contains(r#""kind":"semaphore""#) && json.contains(r#""available":3"#), "{json}");
    let (code, out) = output(&url, &["unlock", "permits", "--force"]).await;
    assert_eq!(code, Some(1), "{out}");
    let (_, list) = output(&url, &["list", "--json"]).await;
    assert_eq!(list.trim(), "[]");
    let left = raw_command(&server.addr(), &[b"GET", b"permits"]);
    assert_eq!(left.as_str(), Some("3"), "the count is untouched");
}

/// A semaphore whose key is gone (a flush, a restart without persistence) while
/// leasehold waiters wait on it shows as `missing_semaphore`, not as a free name.
#[tokio::test]
async fn status_says_a_waited_on_semaphore_is_missing() {
    let server = RedisServer::start();
    let url = server.url();
    let client = leasehold::Client::connect(&url).await.expect("connect");
    let sem = client.semaphore("orders");
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1).await.map(leasehold::SemaphorePermit::detach) })
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while client.subscribed_channels().iter().all(|c| c != sem.channel()) {
        assert!(tokio::time::Instant::now() < deadline, "the waiter subscribed");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (code, json) = output(&url, &["status", "orders", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert!(json.contains(r#""kind":"missing_semaphore""#) && json.contains(r#""subscribers":1"#), "{json}");
    let (_, text) = output(&url, &["status", "orders"]).await;
    assert!(text.contains("semaphore missing"), "{text}");
    let (_, free) = output(&url, &["status", "nobody-waits", "--json"]).await;
    assert!(free.contains(r#""kind":"none""#), "{free}");
    waiter.abort();
}

/// Whether `pid` is a running process (a zombie nobody reaped yet is not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_run_takes_the_child_and_its_group_along() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("kill9");
    let pids = log_file("kill9-pids");
    let (log_path, pids_path) = (log.display().to_string(), pids.display().to_string());
    // CMD is a shell whose work is a command it started (`sleep`): both must die with
    // `run` (the parent-death signal reaches the shell, the guard the whole group).
    let first = format!("sleep 30 & echo \"$$ $!\" > {pids_path}; echo started >> {log_path}; wait");
    let mut first_run =
        leasehold(&url, &["run", "--watchdog", "1s", "kill9", "--", "sh", "-c", &first]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await, "the child started");
    let ids: Vec<u32> = read(&pids).split_whitespace().map(|p| p.parse().expect("a pid")).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|&pid| alive(pid)), "the shell and its sleep run");
    // A second run waits; its CMD, once started, logs any of them still running.
    let second = format!(
        "for p in $(cat {pids_path}); do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); \
         if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo \"overlap $p $s\" >> {log_path}; fi; done; \
         echo second >> {log_path}"
    );
    let mut second_run = leasehold(&url, &["run", "kill9", "--", "sh", "-c", &second]).spawn().expect("spawn");

    kill("-KILL", first_run.id().expect("running"));
    let status = wait_for(&mut first_run, Duration::from_secs(5)).await;
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
    assert!(
        wait_until(Duration::from_secs(2), || ids.iter().all(|&pid| !alive(pid))).await,
        "the child and its group died with run: {:?}",
        ids.iter().map(|&pid| (pid, alive(pid))).collect::<Vec<_>>()
    );
    // The lock expires (1 s watchdog lease); the second run then starts, alone.
    assert_eq!(wait_for(&mut second_run, Duration::from_secs(15)).await.code(), Some(0));
    let logged = read(&log);
    assert!(logged.contains("second"), "{logged}");
    assert!(!logged.contains("overlap"), "the second run's child overlapped the first's: {logged}");
    for pid in ids {
        // Whatever the assertions found, leave nothing behind.
        let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&pids);
}

#[tokio::test]
async fn sigterm_to_run_kills_a_child_that_ignores_it_after_the_grace() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("term-grace");
    // `exec sleep` after `trap ''`: the ignored disposition is inherited.
    let script = format!("trap '' TERM; echo started >> {}; exec sleep 20", log.display());
    let mut run =
        leasehold(&url, &["run", "--grace", "500ms", "term-grace", "--", "sh", "-c", &script]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await);
    let started = Instant::now();
    kill("-TERM", run.id().expect("running"));
    let status = wait_for(&mut run, Duration::from_secs(5)).await;
    let elapsed = started.elapsed();
    assert_eq!(status.code(), Some(137), "the child was killed by SIGKILL (128+9)");
    assert!(elapsed >= Duration::from_millis(400), "the grace was given: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "SIGKILL after the grace: {elapsed:?}");
    let (_, json) = output(&url, &["status", "term-grace", "--json"]).await;
    assert!(json.contains(r#""held":false"#), "released: {json}");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_fixed_lease_stops_the_child_its_margin_before_the_end() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("margin");
    let log_path = log.display().to_string();
    // The child takes 500 ms to stop after SIGTERM: long enough to see the lock held.
    let script = format!(
        "trap 'echo TERM >> {log_path}; sleep 0.5; exit 0' TERM; echo started >> {log_path}; \
         i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let mut run =
        leasehold(&url, &["run", "--lease", "3s", "--stop-margin", "1500ms", "margin", "--", "sh", "-c", &script])
            .spawn()
            .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await);
    let started = Instant::now();
    assert!(wait_until(Duration::from_secs(5), || read(&log).contains("TERM")).await, "the child was told to stop");
    let told = started.elapsed();
    let (_, json) = output(&url, &["status", "margin", "--json"]).await;
    assert!(json.contains(r#""held":true"#), "told while the lease still ran: {json}");
    assert!(told < Duration::from_millis(2800), "about 1.5 s before the 3 s lease ended: {told:?}");
    assert_eq!(wait_for(&mut run, Duration::from_secs(5)).await.code(), Some(124));
    let (_, json) = output(&url, &["status", "margin", "--json"]).await;
    assert!(json.contains(r#""held":false"#), "given back early: {json}");

    // A child that ignores SIGTERM, with a grace longer than the margin: SIGKILL at the
    // lease's end, not a grace later.
    let script = format!("trap '' TERM; echo started-2 >> {log_path}; exec sleep 20");
    let mut run = leasehold(
        &url,
        &["run", "--lease", "2s", "--stop-margin", "1s", "--grace", "10s", "margin2", "--", "sh", "-c", &script],
    )
    .spawn()
    .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started-2")).await);
    let started = Instant::now();
    assert_eq!(wait_for(&mut run, Duration::from_secs(6)).await.code(), Some(124));
    // Not 1 s + the 10 s grace (nor the 2 s lease + the grace, as without a margin).
    assert!(started.elapsed() < Duration::from_secs(4), "killed by the lease's end: {:?}", started.elapsed());
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_lock_taken_away_exits_124_even_when_the_child_ends_before_the_renewal() {
    let server = RedisServer::start();
    let url = server.url();
    for by_owner in [false, true] {
        let name = if by_owner { "taken-owner" } else { "taken-force" };
        let log = log_file(name);
        let done = log_file(&format!("{name}-done"));
        // The default 30 s watchdog renews after 10 s: the child ends long before.
        let script = format!(
            "echo \"started $LEASEHOLD_OWNER\" >> {}; while [ ! -e {} ]; do sleep 0.05; done",
            log.display(),
            done.display()
        );
        let mut run = leasehold(&url, &["run", name, "--", "sh", "-c", &script]).spawn().expect("spawn");
        assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await);
        let owner = read(&log).trim().trim_start_matches("started ").to_owned();
        let (code, out) = if by_owner {
            output(&url, &["unlock", name, "--force", "--owner", &owner]).await
        } else {
            output(&url, &["unlock", name, "--force"]).await
        };
        assert_eq!(code, Some(0), "{out}");
        std::fs::write(&done, b"").expect("the marker");
        assert_eq!(wait_for(&mut run, Duration::from_secs(5)).await.code(), Some(124), "{name}");
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&done);
    }
}

#[tokio::test]
async fn a_fixed_lease_taken_away_stops_the_child_at_the_next_check() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("fixed-taken");
    // A 6 s lease is checked every 2 s; the stop margin (1 s) would stop it at 5 s.
    let mut run = leasehold(
        &url,
        &["run", "--lease", "6s", "--stop-margin", "1s", "fixed-taken", "--", "sh", "-c", &trapping_child(&log, 0)],
    )
    .spawn()
    .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started")).await);
    let started = Instant::now();
    let (code, out) = output(&url, &["unlock", "fixed-taken", "--force"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(wait_for(&mut run, Duration::from_secs(8)).await.code(), Some(124));
    assert!(read(&log).contains("TERM"), "the child was told");
    assert!(started.elapsed() < Duration::from_millis(3500), "at the 2 s check: {:?}", started.elapsed());
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn hold_holds_until_a_signal_and_exits_124_when_taken() {
    use tokio::io::AsyncBufReadExt;
    let server = RedisServer::start();
    let url = server.url();
    for taken in [false, true] {
        let mut hold = leasehold(&url, &["hold", "--watchdog", "900ms", "held"]).spawn().expect("spawn");
        let stdout = hold.stdout.take().expect("piped");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("it says it holds")
            .expect("read")
            .expect("a line");
        let owner = line.strip_prefix("holding held owner=").expect("the documented line").to_owned();
        assert!(owner.contains(':'), "{line}");
        assert_eq!(output(&url, &["run", "--wait", "0", "held", "--", "true"]).await.0, Some(75), "it holds");
        let (_, json) = output(&url, &["status", "held", "--json"]).await;
        assert!(json.contains(&owner), "{json}");
        if taken {
            let (code, out) = output(&url, &["unlock", "held", "--force", "--owner", &owner]).await;
            assert_eq!(code, Some(0), "{out}");
            assert_eq!(wait_for(&mut hold, Duration::from_secs(5)).await.code(), Some(124), "lost: 124");
        } else {
            kill("-TERM", hold.id().expect("running"));
            assert_eq!(wait_for(&mut hold, Duration::from_secs(5)).await.code(), Some(0), "released on SIGTERM");
            let (_, json) = output(&url, &["status", "held", "--json"]).await;
            assert!(json.contains(r#""held":false"#), "{json}");
        }
    }
    // A permit: its id (32 hex digits) instead of an owner.
    let mut hold = leasehold(&url, &["hold", "--permits", "1", "held-permit"]).spawn().expect("spawn");
    let mut lines = tokio::io::BufReader::new(hold.stdout.take().expect("piped")).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("it says it holds")
        .expect("read")
        .expect("a line");
    let id = line.strip_prefix("holding held-permit permit=").expect("the documented line");
    assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
    let (code, _) = output(&url, &["run", "--permits", "1", "--wait", "0", "held-permit", "--", "true"]).await;
    assert_eq!(code, Some(75), "its one permit is held");
    kill("-INT", hold.id().expect("running"));
    assert_eq!(wait_for(&mut hold, Duration::from_secs(5)).await.code(), Some(0), "released on SIGINT");
    let (code, _) = output(&url, &["run", "--permits", "1", "--wait", "0", "held-permit", "--", "true"]).await;
    assert_eq!(code, Some(0), "given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_let_n_runs_at_once_and_never_more() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("permits");
    let script = format!("s=$(date +%s%N); sleep 1; e=$(date +%s%N); echo \"$s $e\" >> {}", log.display());
    let mut runs = Vec::new();
    for _ in 0..3 {
        let args = ["run", "--permits", "2", "permits", "--", "sh", "-c", &script];
        runs.push(leasehold(&url, &args).spawn().expect("spawn"));
    }
    for run in &mut runs {
        assert_eq!(wait_for(run, Duration::from_secs(15)).await.code(), Some(0));
    }
    // +1 at each start, -1 at each end (an end before a start at the same instant).
    let mut events: Vec<(u128, i32)> = read(&log)
        .lines()
        .flat_map(|line| {
            let (s, e) = line.split_once(' ').expect("two numbers");
            [(s.parse().expect("start"), 1), (e.parse().expect("end"), -1)]
        })
        .collect();
    assert_eq!(events.len(), 6, "every child ran: {events:?}");
    events.sort_unstable();
    let (mut now, mut most) = (0, 0);
    for (_, delta) in &events {
        now += delta;
        most = most.max(now);
    }
    assert_eq!(most, 2, "two at once, never three: {events:?}");
    // Another N on the same name is refused.
    assert_eq!(output(&url, &["run", "--permits", "3", "permits", "--", "true"]).await.0, Some(64));

    // A run killed with -9 gives its permit back when its lease runs out.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let args = ["run", "--permits", "2", "--watchdog", "1s", "permits", "--", "sleep", "30"];
        holders.push(leasehold(&url, &args).spawn().expect("spawn"));
    }
    let busy = wait_until(Duration::from_secs(10), || {
        std::process::Command::new(BIN)
            .args(["--url", &url, "run", "--permits", "2", "--wait", "0", "permits", "--", "true"])
            .status()
            .is_ok_and(|status| status.code() == Some(75))
    })
    .await;
    assert!(busy, "both permits taken");
    kill("-KILL", holders[0].id().expect("running"));
    let (code, _) = output(&url, &["run", "--permits", "2", "--wait", "10s", "permits", "--", "true"]).await;
    assert_eq!(code, Some(0), "the killed run's permit came back");
    kill("-TERM", holders[1].id().expect("running"));
    assert_eq!(wait_for(&mut holders[1], Duration::from_secs(5)).await.code(), Some(143));
    let _ = std::fs::remove_file(&log);
}

/// `status` and `list` name the host, pid and service of every holder and waiter whose
/// client is alive (its `leasehold_client:{UUID}` description), and say "unknown (no
/// live client)" for an owner whose client left none (here: a hold written by hand).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_list_say_who_holds_and_waits() {
    use leasehold_test_support::raw;
    let server = RedisServer::start();
    let url = server.url();
    let client = leasehold::Client::builder().url(&url).service_name("who-test").connect().await.expect("connect");
    let pid = std::process::id();

    let guard = client.lock("who").lock().await.expect("the hold");
    let waiter = {
        let lock = client.lock("who");
        tokio::spawn(async move { lock.lock().await.map(leasehold::LockGuard::detach) })
    };
    let queued = || {
        matches!(
            raw(&server, &["EXISTS", "leasehold_lock_waiters:{who}"]),
            leasehold_test_support::RespValue::Integer(1)
        )
    };
    assert!(wait_until(Duration::from_secs(10), queued).await, "the second lock() queues");

    let (code, text) = output(&url, &["status", "who"]).await;
    assert_eq!(code, Some(0), "{text}");
    let described = format!("pid={pid} service=who-test");
    assert_eq!(text.matches(&described).count(), 2, "the holder and the waiter are described: {text}");
    let (code, json) = output(&url, &["status", "who", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    let client_id = client.id().hyphenated().to_string();
    assert!(json.contains(&format!("\"client_id\":\"{client_id}\"")), "{json}");
    assert!(json.contains(&format!("\"pid\":{pid}")) && json.contains("\"service\":\"who-test\""), "{json}");
    let (code, line) = output(&url, &["list"]).await;
    assert_eq!(code, Some(0), "{line}");
    assert!(line.contains("by=") && line.contains(&format!("/{pid}/who-test")), "{line}");

    // An owner whose client left no description: no live client to name.
    let stranger = "6f0d5d4e-3b1a-4c59-9a43-6f3f0e2b7a10:1";
    raw(&server, &["HSET", "orphan", stranger, "1"]);
    raw(&server, &["PEXPIRE", "orphan", "30000"]);
    let (code, text) = output(&url, &["status", "orphan"]).await;
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("client unknown (no live client)"), "{text}");
    let (_, json) = output(&url, &["status", "orphan", "--json"]).await;
    assert!(json.contains("\"client_id\":\"6f0d5d4e-3b1a-4c59-9a43-6f3f0e2b7a10\",\"client\":null"), "{json}");

    guard.unlock().await.expect("unlock");
    let second = tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("handed over").expect("join");
    second.expect("the waiter's hold");
    client.shutdown().await.expect("shutdown");
}
