//! `leasehold elect` and `leasehold leader` run as an operator runs them: real
//! processes, a real redis-server, signals sent with `kill`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{alive, kill, leasehold, log_file, output, read, wait_for};
use leasehold_test_support::{wait_until, RedisServer};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

/// A CMD that logs `started-TAG TERM ELECTION OWNER VALUE` (its environment), logs
/// `TERM-TAG` when it gets SIGTERM and exits with `code`, and otherwise runs for up to
/// 20 s.
fn leading_child(log: &Path, tag: &str, code: u8) -> String {
    let log = log.display();
    format!(
        "trap 'echo TERM-{tag} >> {log}; exit {code}' TERM; \
         echo \"started-{tag} $LEASEHOLD_TERM $LEASEHOLD_ELECTION $LEASEHOLD_OWNER $LEASEHOLD_VALUE\" >> {log}; \
         i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"
    )
}

/// The fields of the log line `started-TAG ...`: term, election, owner, value.
fn started(log: &Path, tag: &str) -> Option<(u64, String, String, String)> {
    let logged = read(log);
    let line = logged.lines().find(|line| line.starts_with(&format!("started-{tag} ")))?;
    let mut fields = line.split(' ').skip(1);
    let term = fields.next()?.parse().ok()?;
    Some((term, fields.next()?.to_owned(), fields.next()?.to_owned(), fields.collect::<Vec<_>>().join(" ")))
}

/// Whether a candidate waits in the election's queue (as `status --election` shows
/// it), within 10 s.
async fn candidate_waits(url: &str, name: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (_, json) = output(url, &["status", "--election", name, "--json"]).await;
        if json.contains(r#""queue":"election""#) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The kernel's host name, as `elect` names its default value.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default()
}

/// Two candidates: the first leads and runs its CMD (with the lead in its
/// environment), the second waits (a waiting candidate in `status`); `leader` prints
/// the first; a SIGTERM to the first stops its CMD, which exits 0: it resigns and
/// exits 0, and the second leads at once with a larger term, runs, resigns. Then
/// nobody leads: `leader` exits 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_candidate_runs_the_other_waits_and_leads_after_the_resign() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("two");
    let mut first =
        leasehold(&url, &["elect", "sched", "--", "sh", "-c", &leading_child(&log, "a", 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "the first leads");
    let (term_a, election, owner_a, value_a) = started(&log, "a").expect("logged");
    assert_eq!(election, "sched");
    assert!(owner_a.len() > 37 && owner_a.contains(':'), "owner: {owner_a}");
    let pid_a = first.id().expect("running");
    assert_eq!(value_a, format!("{}/{pid_a}", host_name()), "the default value is HOST/PID");

    let second_script = format!(
        "echo \"started-b $LEASEHOLD_TERM $LEASEHOLD_ELECTION $LEASEHOLD_OWNER $LEASEHOLD_VALUE\" >> {}",
        log.display()
    );
    let mut second =
        leasehold(&url, &["elect", "sched", "--value", "the second one", "--", "sh", "-c", &second_script])
            .spawn()
            .expect("spawn");
    assert!(candidate_waits(&url, "sched").await, "the second candidate waits in the lead's queue");
    let (_, json) = output(&url, &["status", "--election", "sched", "--json"]).await;
    assert!(json.contains(r#""kind":"election","held":true,"#), "{json}");
    assert!(json.contains(&format!(r#""holders":[{{"owner":"{owner_a}","#)), "{json}");
    assert!(json.contains(&format!(r#""election":"sched","term":{term_a},"value":"{value_a}""#)), "{json}");
    assert!(json.contains(&format!(r#""last_token":{term_a}"#)), "the term counter: {json}");
    // The lead key by its name shows the same, as does `list`.
    let (_, by_key) = output(&url, &["status", "leasehold_election:{sched}", "--json"]).await;
    assert!(by_key.contains(r#""kind":"election""#) && by_key.contains(&owner_a), "{by_key}");
    // The election's other keys are derived keys of it.
    for key in ["leasehold_election_leader:{sched}", "leasehold_election_term:{sched}"] {
        let (_, text) = output(&url, &["status", key]).await;
        assert!(text.contains("not a lock") && text.contains("(see `leasehold status --election 'sched'`)"), "{text}");
        let (code, out) = output(&url, &["unlock", key, "--force"]).await;
        assert_eq!(code, Some(1), "left alone: {out}");
    }
    let (_, text) = output(&url, &["status", "--election", "sched"]).await;
    assert!(
        text.contains("kind:       election `sched` (led;") && text.contains(&format!("leader:     term={term_a} ")),
        "{text}"
    );
    let (_, list) = output(&url, &["list"]).await;
    assert!(list.starts_with("leasehold_election:{sched}\telection\tholders=1\t"), "{list}");
    assert!(started(&log, "b").is_none(), "the second does not lead while the first does");

    let (code, line) = output(&url, &["leader", "sched"]).await;
    assert_eq!(code, Some(0), "{line}");
    assert!(line.starts_with(&format!("term={term_a} owner={owner_a} by=")), "{line}");
    assert!(line.trim_end().ends_with(&format!(" value={value_a}")), "{line}");
    let (code, json) = output(&url, &["leader", "sched", "--json"]).await;
    assert_eq!(code, Some(0));
    assert!(
        json.starts_with(&format!(
            r#"{{"election":"sched","leader":true,"term":{term_a},"value":"{value_a}","owner":"{owner_a}","client_id":""#
        )),
        "{json}"
    );
    assert!(json.contains(&format!(r#""pid":{pid_a},"#)), "the leader's client: {json}");

    kill("-TERM", pid_a);
    let resigned = Instant::now();
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0), "CMD's code");
    assert!(read(&log).contains("TERM-a"), "its CMD got the SIGTERM");
    // Handed over at the resign, not at the lead's expiry (10 s): the second leads and
    // its CMD has started within a second (a few round trips, and a shell's start).
    assert!(
        wait_until(Duration::from_secs(1), || started(&log, "b").is_some()).await,
        "the resign handed over ({:?} since the SIGTERM)",
        resigned.elapsed()
    );
    assert_eq!(wait_for(&mut second, Duration::from_secs(5)).await.code(), Some(0));
    let (term_b, _, owner_b, value_b) = started(&log, "b").expect("the second led");
    assert!(term_b > term_a, "a larger term: {term_a} then {term_b}");
    assert_ne!(owner_b, owner_a);
    assert_eq!(value_b, "the second one");

    let (code, line) = output(&url, &["leader", "sched"]).await;
    assert_eq!((code, line.trim()), (Some(3), "no leader"));
    let (code, json) = output(&url, &["leader", "sched", "--json"]).await;
    assert_eq!(code, Some(3));
    assert_eq!(
        json.trim(),
        r#"{"election":"sched","leader":false,"term":null,"value":null,"owner":null,"client_id":null,"client":null}"#
    );
    let _ = std::fs::remove_file(&log);
}

/// `kill -9` of the leading `elect`: its CMD (and what CMD started) dies with it (the
/// parent-death signal and the guard), and the waiting candidate leads within the
/// lease (plus a margin), alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_leader_takes_its_command_along_and_the_next_leads_within_the_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("kill9");
    let pids = log_file("kill9-pids");
    let (log_path, pids_path) = (log.display().to_string(), pids.display().to_string());
    let first = format!("sleep 30 & echo \"$$ $!\" > {pids_path}; echo started-a >> {log_path}; wait");
    let mut leader =
        leasehold(&url, &["elect", "--lease", "1s", "crash", "--", "sh", "-c", &first]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || read(&log).contains("started-a")).await, "the first leads");
    let ids: Vec<u32> = read(&pids).split_whitespace().map(|p| p.parse().expect("a pid")).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    // The second logs any of the first's processes still running when it leads.
    let second = format!(
        "for p in $(cat {pids_path}); do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); \
         if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo \"overlap $p $s\" >> {log_path}; fi; done; \
         echo \"second $LEASEHOLD_TERM\" >> {log_path}"
    );
    let mut next =
        leasehold(&url, &["elect", "--lease", "1s", "crash", "--", "sh", "-c", &second]).spawn().expect("spawn");
    assert!(candidate_waits(&url, "crash").await, "the second candidate waits");

    kill("-KILL", leader.id().expect("running"));
    let killed = Instant::now();
    let status = wait_for(&mut leader, Duration::from_secs(5)).await;
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
    assert!(
        wait_until(Duration::from_secs(2), || ids.iter().all(|&pid| !alive(pid))).await,
        "the command and its group died with elect"
    );
    assert_eq!(wait_for(&mut next, Duration::from_secs(10)).await.code(), Some(0));
    let took_over = killed.elapsed();
    // The lead expires at most 1 s after its last renewal; a margin for the claim and
    // for starting a shell on a busy machine.
    assert!(took_over < Duration::from_millis(2500), "failover took {took_over:?}");
    let logged = read(&log);
    assert!(logged.contains("second "), "{logged}");
    assert!(!logged.contains("overlap"), "the second leader's command overlapped the first's: {logged}");
    for pid in ids {
        let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&pids);
}

/// A forced resign (`unlock --election NAME --force`, the library's `force_resign`)
/// is found at the next renewal: `elect` stops its CMD (SIGTERM) and exits 124.
#[tokio::test]
async fn a_forced_resign_stops_the_command_and_elect_exits_124() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("forced");
    // A 900 ms lease, renewed every 300 ms: the force is found quickly.
    let mut elect = leasehold(
        &url,
        &["elect", "--lease", "900ms", "--grace", "2s", "forced", "--", "sh", "-c", &leading_child(&log, "a", 0)],
    )
    .spawn()
    .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "it leads");
    let (term, _, owner, _) = started(&log, "a").expect("logged");
    // An election's lead is forced whole: not by owner.
    let (code, out) = output(&url, &["unlock", "leasehold_election:{forced}", "--force", "--owner", &owner]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(!read(&log).contains("TERM"));
    let (code, out) = output(&url, &["unlock", "--election", "forced", "--force"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&owner), "the leader is named: {out}");
    let forced = Instant::now();
    assert_eq!(wait_for(&mut elect, Duration::from_secs(5)).await.code(), Some(124), "a lost lead: 124");
    assert!(forced.elapsed() < Duration::from_secs(2), "stopped by SIGTERM within a renewal: {:?}", forced.elapsed());
    assert!(read(&log).contains("TERM-a"), "its CMD got SIGTERM");
    let (code, line) = output(&url, &["leader", "forced"]).await;
    assert_eq!((code, line.trim()), (Some(3), "no leader"), "after term {term}");
    let _ = std::fs::remove_file(&log);
}

/// `--again`: after CMD exits it campaigns again (a new term each round), after a
/// forced resign too (CMD stopped, a new lead), until SIGTERM, which ends the round's
/// CMD and `elect` with CMD's code.
#[tokio::test]
async fn again_campaigns_after_each_end_until_a_signal() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("again");
    let logged = log.display().to_string();
    // Rounds 1 and 2 end at once (exit 5); from round 3 on, CMD runs until SIGTERM.
    let script = format!(
        "echo \"round $LEASEHOLD_TERM\" >> {logged}; \
         if [ $(grep -c round {logged}) -lt 3 ]; then exit 5; fi; \
         trap 'echo TERM >> {logged}; exit 0' TERM; \
         i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let mut elect = leasehold(&url, &["elect", "--again", "--lease", "900ms", "again", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn");
    let rounds = || read(&log).lines().filter(|l| l.starts_with("round ")).count();
    assert!(wait_until(Duration::from_secs(15), || rounds() == 3).await, "three rounds: {}", read(&log));
    // A forced resign ends round 3 (CMD told to stop); `elect` leads again.
    let (code, out) = output(&url, &["unlock", "leasehold_election:{again}", "--force"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(wait_until(Duration::from_secs(10), || rounds() == 4).await, "a fourth round: {}", read(&log));
    assert!(read(&log).contains("TERM"), "round 3's CMD was stopped");
    let terms: Vec<u64> =
        read(&log).lines().filter_map(|l| l.strip_prefix("round ")).map(|t| t.parse().expect("a term")).collect();
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "a new, larger term each round: {terms:?}");
    let (code, line) = output(&url, &["leader", "again"]).await;
    assert_eq!(code, Some(0));
    assert!(line.starts_with(&format!("term={} ", terms[3])), "{line}");

    kill("-TERM", elect.id().expect("running"));
    assert_eq!(wait_for(&mut elect, Duration::from_secs(5)).await.code(), Some(0), "CMD's code, no further round");
    assert_eq!(rounds(), 4);
    let (code, _) = output(&url, &["leader", "again"]).await;
    assert_eq!(code, Some(3), "it resigned");
    let _ = std::fs::remove_file(&log);
}

/// The next line of `leader --watch` within 10 s.
async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("a line within 10 s")
        .expect("read")
        .expect("a line, not the end")
}

/// `leader --watch --json` prints the current state, then one line per change: a
/// leader, its resign, the next leader with a larger term; SIGTERM ends it with 0.
#[tokio::test]
async fn leader_watch_prints_each_change() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("watch");
    let mut watch = leasehold(&url, &["leader", "watched", "--watch", "--json"]).spawn().expect("spawn");
    let mut lines = BufReader::new(watch.stdout.take().expect("piped")).lines();
    assert!(next_line(&mut lines).await.starts_with(r#"{"election":"watched","leader":false,"#));

    let mut first =
        leasehold(&url, &["elect", "watched", "--value", "one", "--", "sh", "-c", &leading_child(&log, "a", 0)])
            .spawn()
            .expect("spawn");
    let line = next_line(&mut lines).await;
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await);
    let (term_a, _, owner_a, _) = started(&log, "a").expect("logged");
    assert!(
        line.starts_with(&format!(
            r#"{{"election":"watched","leader":true,"term":{term_a},"value":"one","owner":"{owner_a}","#
        )),
        "{line}"
    );
    kill("-TERM", first.id().expect("running"));
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0));
    assert!(next_line(&mut lines).await.starts_with(r#"{"election":"watched","leader":false,"#));

    // The second leader's CMD runs until the test saw its lead (a lead shorter than a
    // read could be seen as no change at all: the observer reports states).
    let go = log_file("watch-go");
    let until_go = format!("while [ ! -f {} ]; do sleep 0.02; done", go.display());
    let mut second =
        leasehold(&url, &["elect", "watched", "--value", "two", "--", "sh", "-c", &until_go]).spawn().expect("spawn");
    let line = next_line(&mut lines).await;
    std::fs::write(&go, "go").expect("write");
    assert_eq!(wait_for(&mut second, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&go);
    let term_b: u64 = line
        .split(r#""term":"#)
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|term| term.parse().ok())
        .unwrap_or_else(|| panic!("a term: {line}"));
    assert!(term_b > term_a && line.contains(r#""value":"two""#), "{line}");
    // Its resign.
    assert!(next_line(&mut lines).await.contains(r#""leader":false"#));

    kill("-TERM", watch.id().expect("running"));
    assert_eq!(wait_for(&mut watch, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// `--wait 0` on an election someone leads: 75 at once, CMD never started.
#[tokio::test]
async fn wait_zero_while_another_leads_exits_75() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("wait0");
    let mut first =
        leasehold(&url, &["elect", "busy", "--", "sh", "-c", &leading_child(&log, "a", 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await);
    let script = format!("echo started-b >> {}", log.display());
    let (code, _) = output(&url, &["elect", "--wait", "0", "busy", "--", "sh", "-c", &script]).await;
    assert_eq!(code, Some(75));
    assert!(!read(&log).contains("started-b"));
    kill("-TERM", first.id().expect("running"));
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// Bad input exits 64 before connecting: nothing listens at this URL (that would be
/// 69), so a 64 is the check's.
#[tokio::test]
async fn bad_input_exits_64_before_connecting() {
    let url = "redis://127.0.0.1:1";
    for args in [
        &["elect", "--lease", "0", "x", "--", "true"][..],
        &["elect", "--lease", "29ms", "x", "--", "true"][..],
        &["elect", "--lease", "400d", "x", "--", "true"][..],
        &["elect", "--lease", "20000h", "x", "--", "true"][..],
        &["elect", "", "--", "true"][..],
        &["elect", "x", "true"][..],
        &["elect", "x"][..],
        &["elect", "--again", "--wait", "1s", "x", "--", "true"][..],
        &["elect", "--grace", "5", "x", "--", "true"][..],
        &["leader", ""][..],
        &["leader"][..],
        &["status", "--election", ""][..],
        &["unlock", "--election", "x", "--force", "--owner", "0f8fad5b-d9cb-469f-a165-70867728950e:1"][..],
    ] {
        let started = Instant::now();
        assert_eq!(output(url, args).await.0, Some(64), "{args:?}");
        assert!(started.elapsed() < Duration::from_secs(3), "{args:?}: at once");
    }
    // The shortest lease is accepted: past the check, the connect fails (69).
    assert_eq!(output(url, &["elect", "--lease", "30ms", "x", "--", "true"]).await.0, Some(69));
    assert_eq!(output(url, &["leader", "x"]).await.0, Some(69));
}

/// A paused leader (`SIGSTOP` of `elect`, past its lease) is replaced by the waiting
/// candidate; on `SIGCONT` it finds its lead lost before anything else (its local
/// lease deadline has passed), stops its CMD and exits 124. Its CMD, in a process group
/// of its own, ran on meanwhile: the overlap the term fences (docs/cli.md, Limits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_stops_its_command_on_resume_and_exits_124() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("paused");
    let mut first =
        leasehold(&url, &["elect", "--lease", "600ms", "paused", "--", "sh", "-c", &leading_child(&log, "a", 0)])
            .spawn()
            .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "the first leads");
    let mut second =
        leasehold(&url, &["elect", "--lease", "600ms", "paused", "--", "sh", "-c", &leading_child(&log, "b", 0)])
            .spawn()
            .expect("spawn");
    assert!(candidate_waits(&url, "paused").await, "the second candidate waits");
    let pid = first.id().expect("running");
    kill("-STOP", pid);
    assert!(
        wait_until(Duration::from_secs(5), || started(&log, "b").is_some()).await,
        "the second leads once the paused leader's lead expired"
    );
    let (term_a, ..) = started(&log, "a").expect("logged");
    let (term_b, ..) = started(&log, "b").expect("logged");
    assert!(term_b > term_a);
    kill("-CONT", pid);
    let resumed = Instant::now();
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(124), "its lead was lost");
    assert!(resumed.elapsed() < Duration::from_secs(2), "stopped at once on resume: {:?}", resumed.elapsed());
    assert!(read(&log).contains("TERM-a"), "its CMD was told to stop");
    assert!(!read(&log).contains("TERM-b"), "the new leader's CMD runs on");
    let (code, line) = output(&url, &["leader", "paused"]).await;
    assert_eq!(code, Some(0));
    assert!(line.starts_with(&format!("term={term_b} ")), "{line}");
    kill("-TERM", second.id().expect("running"));
    assert_eq!(wait_for(&mut second, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// On a cluster: `elect` leads and hands over, `leader --watch` follows (the change
/// channel in the name's slot, sharded pub/sub where the client uses it), `status
/// --election` and `list` (every primary) show the election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_leader_and_status_on_a_cluster() {
    let cluster = leasehold_test_support::RedisCluster::shared();
    let url = cluster.url();
    let log = log_file("cluster");
    let name = format!("cli-elect-{}", std::process::id());
    let mut watch = leasehold(&url, &["leader", &name, "--watch"]).spawn().expect("spawn");
    let mut lines = BufReader::new(watch.stdout.take().expect("piped")).lines();
    assert_eq!(next_line(&mut lines).await, "no leader");
    let mut first =
        leasehold(&url, &["elect", &name, "--", "sh", "-c", &leading_child(&log, "a", 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "it leads");
    let (term_a, _, owner_a, _) = started(&log, "a").expect("logged");
    assert!(next_line(&mut lines).await.starts_with(&format!("term={term_a} owner={owner_a} ")));
    // The second's CMD runs until the test saw its lead in the watch.
    let go = log_file("cluster-go");
    let script = format!(
        "echo \"started-b $LEASEHOLD_TERM x x x\" >> {}; while [ ! -f {} ]; do sleep 0.02; done",
        log.display(),
        go.display()
    );
    let mut second = leasehold(&url, &["elect", &name, "--", "sh", "-c", &script]).spawn().expect("spawn");
    assert!(candidate_waits(&url, &name).await, "the second candidate waits");
    let (code, json) = output(&url, &["status", "--election", &name, "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert!(json.contains(&format!(r#""election":"{name}","term":{term_a},"#)), "{json}");
    let (_, list) = output(&url, &["list", "leasehold_election:*"]).await;
    assert!(list.contains(&format!("leasehold_election:{{{name}}}\telection\tholders=1\t")), "{list}");

    kill("-TERM", first.id().expect("running"));
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0));
    assert!(wait_until(Duration::from_secs(5), || started(&log, "b").is_some()).await, "the second leads");
    let (term_b, ..) = started(&log, "b").expect("the second led");
    assert!(term_b > term_a);
    // The watch sees the hand-over: nobody (unless the claim came first: one state),
    // then the second.
    let mut seen = vec![next_line(&mut lines).await];
    if seen[0] == "no leader" {
        seen.push(next_line(&mut lines).await);
    }
    assert!(seen.last().is_some_and(|line| line.starts_with(&format!("term={term_b} "))), "{seen:?}");
    std::fs::write(&go, "go").expect("write");
    assert_eq!(wait_for(&mut second, Duration::from_secs(5)).await.code(), Some(0));
    assert_eq!(next_line(&mut lines).await, "no leader");
    let _ = std::fs::remove_file(&go);
    kill("-TERM", watch.id().expect("running"));
    assert_eq!(wait_for(&mut watch, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// SIGTERM to an `elect --again` that waits to lead: it exits 143 at once, its CMD
/// never started, and it leaves the queue: when the leader resigns, the candidate
/// behind it leads at once, not after the dead entry's keep-alive (the 10 s lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_waiting_exits_143_and_leaves_the_queue() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("term-waiting");
    let mut first =
        leasehold(&url, &["elect", "queue", "--", "sh", "-c", &leading_child(&log, "a", 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "the first leads");
    let script = format!("echo started-b >> {}", log.display());
    let mut waiting =
        leasehold(&url, &["elect", "--again", "queue", "--", "sh", "-c", &script]).spawn().expect("spawn");
    assert!(candidate_waits(&url, "queue").await, "the --again candidate waits");
    kill("-TERM", waiting.id().expect("running"));
    assert_eq!(wait_for(&mut waiting, Duration::from_secs(3)).await.code(), Some(143), "128 + SIGTERM");
    let script = format!("echo started-c >> {}", log.display());
    let mut behind = leasehold(&url, &["elect", "queue", "--", "sh", "-c", &script]).spawn().expect("spawn");
    assert!(candidate_waits(&url, "queue").await, "the third candidate waits");
    kill("-TERM", first.id().expect("running"));
    let resigned = Instant::now();
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0));
    assert_eq!(wait_for(&mut behind, Duration::from_secs(5)).await.code(), Some(0));
    assert!(
        resigned.elapsed() < Duration::from_secs(3),
        "not held up by the departed candidate: {:?}",
        resigned.elapsed()
    );
    let logged = read(&log);
    assert!(!logged.contains("started-b"), "the signalled candidate never ran CMD: {logged}");
    assert!(logged.contains("started-c"), "{logged}");
    let _ = std::fs::remove_file(&log);
}

/// SIGINT (Ctrl-C) to an `elect` that waits to lead: it exits 130 at once, its CMD
/// never started, and its queue entry is gone when it has exited (`status` shows no
/// waiting candidate), so the leader's resign is not handed to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_waiting_exits_130_and_leaves_the_queue() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("int-waiting");
    let mut first =
        leasehold(&url, &["elect", "ctrl-c", "--", "sh", "-c", &leading_child(&log, "a", 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "the first leads");
    let script = format!("echo started-b >> {}", log.display());
    let mut waiting = leasehold(&url, &["elect", "ctrl-c", "--", "sh", "-c", &script]).spawn().expect("spawn");
    assert!(candidate_waits(&url, "ctrl-c").await, "the second candidate waits");
    kill("-INT", waiting.id().expect("running"));
    assert_eq!(wait_for(&mut waiting, Duration::from_secs(3)).await.code(), Some(130), "128 + SIGINT");
    let (_, json) = output(&url, &["status", "--election", "ctrl-c", "--json"]).await;
    assert!(!json.contains(r#""queue":"election""#), "no waiting candidate left: {json}");
    kill("-TERM", first.id().expect("running"));
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0));
    assert!(!read(&log).contains("started-b"), "the interrupted candidate never ran CMD");
    let _ = std::fs::remove_file(&log);
}

/// `leader --watch` across a server restart (no persistence): the leader it printed is
/// gone with the server; the watch reads again once reconnected and prints `no leader`
/// within seconds (not at the old lead's 10 s expiry), then the next leader, whose
/// term is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_watch_follows_across_a_server_restart() {
    let mut server = RedisServer::start();
    let url = server.url();
    let log = log_file("watch-restart");
    let mut watch = leasehold(&url, &["leader", "restarted", "--watch"]).spawn().expect("spawn");
    let mut lines = BufReader::new(watch.stdout.take().expect("piped")).lines();
    assert_eq!(next_line(&mut lines).await, "no leader");
    let mut first = leasehold(&url, &["elect", "restarted", "--", "sh", "-c", &leading_child(&log, "a", 0)])
        .spawn()
        .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "it leads");
    let (term_a, ..) = started(&log, "a").expect("logged");
    assert!(next_line(&mut lines).await.starts_with(&format!("term={term_a} ")));
    server.restart();
    let restarted = Instant::now();
    assert_eq!(next_line(&mut lines).await, "no leader");
    assert!(restarted.elapsed() < Duration::from_secs(6), "read again after the reconnect: {:?}", restarted.elapsed());
    // The first `elect` learns its lead is gone (exit 124).
    assert_eq!(wait_for(&mut first, Duration::from_secs(15)).await.code(), Some(124));
    let mut second = leasehold(&url, &["elect", "restarted", "--", "sh", "-c", &leading_child(&log, "b", 0)])
        .spawn()
        .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "b").is_some()).await, "the second leads");
    let (term_b, ..) = started(&log, "b").expect("logged");
    assert!(term_b > term_a, "terms never go back: {term_a} then {term_b}");
    assert!(next_line(&mut lines).await.starts_with(&format!("term={term_b} ")));
    kill("-TERM", second.id().expect("running"));
    assert_eq!(wait_for(&mut second, Duration::from_secs(5)).await.code(), Some(0));
    kill("-TERM", watch.id().expect("running"));
    assert_eq!(wait_for(&mut watch, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// `elect --wait` that runs out (exit 75) and an `elect` whose CMD cannot be found
/// (exit 127) leave nothing behind: no queue entry holding up the next hand-over, no
/// lead left to expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_runs_out_and_a_missing_command_leave_nothing_behind() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("leftovers");
    let (code, _) = output(&url, &["elect", "leftovers", "--", "/nonexistent/command"]).await;
    assert_eq!(code, Some(127));
    let (code, line) = output(&url, &["leader", "leftovers"]).await;
    assert_eq!((code, line.trim()), (Some(3), "no leader"), "the lead was given back, not left to expire");
    let mut first = leasehold(&url, &["elect", "leftovers", "--", "sh", "-c", &leading_child(&log, "a", 0)])
        .spawn()
        .expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "the first leads");
    let (code, _) = output(&url, &["elect", "--wait", "300ms", "leftovers", "--", "true"]).await;
    assert_eq!(code, Some(75));
    let script = format!("echo started-c >> {}", log.display());
    let mut behind = leasehold(&url, &["elect", "leftovers", "--", "sh", "-c", &script]).spawn().expect("spawn");
    assert!(candidate_waits(&url, "leftovers").await, "the next candidate waits");
    kill("-TERM", first.id().expect("running"));
    let resigned = Instant::now();
    assert_eq!(wait_for(&mut first, Duration::from_secs(5)).await.code(), Some(0));
    assert_eq!(wait_for(&mut behind, Duration::from_secs(15)).await.code(), Some(0));
    assert!(
        resigned.elapsed() < Duration::from_secs(3),
        "not held up by the entry of the candidate that gave up: {:?}",
        resigned.elapsed()
    );
    let _ = std::fs::remove_file(&log);
}

/// `list` shows an election as one entry, its lead, whatever its name (braces
/// included) and while a candidate waits (the lead's queue keys exist): never its term
/// counter, leader record or queue as locks. `leader` finds each by its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_each_election_once_whatever_its_name() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("list");
    let names = ["plain", "{x}", "a{b}", "}y{"];
    let mut leaders = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let child = leasehold(&url, &["elect", name, "--", "sh", "-c", &leading_child(&log, &format!("l{i}"), 0)])
            .spawn()
            .expect("spawn");
        assert!(wait_until(Duration::from_secs(10), || started(&log, &format!("l{i}")).is_some()).await, "{name}");
        leaders.push(child);
    }
    let mut waiter = leasehold(&url, &["elect", "a{b}", "--", "true"]).spawn().expect("spawn");
    assert!(candidate_waits(&url, "a{b}").await, "a candidate waits on a{{b}}");
    let (code, list) = output(&url, &["list"]).await;
    assert_eq!(code, Some(0), "{list}");
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), names.len(), "one line per election: {list}");
    assert!(
        lines.iter().all(|line| line.starts_with("leasehold_election:") && line.contains("\telection\t")),
        "{list}"
    );
    for name in names {
        let (code, line) = output(&url, &["leader", name]).await;
        assert_eq!(code, Some(0), "{name}: {line}");
    }
    for mut child in leaders {
        kill("-TERM", child.id().expect("running"));
        assert_eq!(wait_for(&mut child, Duration::from_secs(5)).await.code(), Some(0));
    }
    assert_eq!(wait_for(&mut waiter, Duration::from_secs(5)).await.code(), Some(0), "the waiter led and ran `true`");
    let _ = std::fs::remove_file(&log);
}

/// A key of the election of another type: `leader` exits 70 (not 0, 3 or a hang), and
/// so does `leader --watch` (an error the library does not retry ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_on_a_key_of_another_type_exits_70() {
    let server = RedisServer::start();
    let url = server.url();
    leasehold_test_support::raw(&server, &["SET", "leasehold_election_leader:{typed}", "x"]);
    leasehold_test_support::raw(&server, &["HSET", "leasehold_election:{typed}", "someone:1", "1"]);
    let (code, out) = output(&url, &["leader", "typed"]).await;
    assert_eq!(code, Some(70), "{out}");
    let mut watch = leasehold(&url, &["leader", "typed", "--watch"]).spawn().expect("spawn");
    assert_eq!(wait_for(&mut watch, Duration::from_secs(5)).await.code(), Some(70));
}

/// `elect --again` across a server restart: the lead is lost with the server (CMD is
/// stopped), and `elect` campaigns again on the fresh server: a new round, a larger
/// term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn again_leads_again_after_a_server_restart() {
    let mut server = RedisServer::start();
    let url = server.url();
    let log = log_file("again-restart");
    let logged = log.display().to_string();
    let script = format!(
        "echo \"round $LEASEHOLD_TERM\" >> {logged}; trap 'echo TERM >> {logged}; exit 0' TERM; \
         i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let mut elect =
        leasehold(&url, &["elect", "--again", "--lease", "900ms", "restarted-again", "--", "sh", "-c", &script])
            .spawn()
            .expect("spawn");
    let rounds = || read(&log).lines().filter(|l| l.starts_with("round ")).count();
    assert!(wait_until(Duration::from_secs(10), || rounds() == 1).await, "the first round: {}", read(&log));
    server.restart();
    assert!(wait_until(Duration::from_secs(15), || rounds() == 2).await, "a second round: {}", read(&log));
    assert!(read(&log).contains("TERM"), "the first round's CMD was stopped: {}", read(&log));
    let terms: Vec<u64> =
        read(&log).lines().filter_map(|l| l.strip_prefix("round ")).map(|t| t.parse().expect("a term")).collect();
    assert!(terms[1] > terms[0], "a larger term after the restart: {terms:?}");
    let (code, line) = output(&url, &["leader", "restarted-again"]).await;
    assert_eq!(code, Some(0), "{line}");
    assert!(line.starts_with(&format!("term={} ", terms[1])), "{line}");
    kill("-TERM", elect.id().expect("running"));
    assert_eq!(wait_for(&mut elect, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// `leader` prints values that are awkward in one line: `--json` escapes quotes,
/// backslashes and newlines and replaces bytes that are not UTF-8 (one valid JSON
/// line); the plain form keeps the value last on its one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_prints_awkward_values_on_one_line() {
    let server = RedisServer::start();
    let url = server.url();
    let log = log_file("awkward");
    let mut elect =
        leasehold(&url, &["elect", "awkward", "--", "sh", "-c", &leading_child(&log, "a", 0)]).spawn().expect("spawn");
    assert!(wait_until(Duration::from_secs(10), || started(&log, "a").is_some()).await, "it leads");
    // The leader record's value, written as a proclaim would (raw bytes included).
    let value: &[u8] = b"say \"hi\"\\ \nnext\xff";
    let addr = server.addr();
    leasehold_test_support::raw_command(&addr, &[b"HSET", b"leasehold_election_leader:{awkward}", b"value", value]);
    let (code, json) = output(&url, &["leader", "awkward", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json.lines().count(), 1, "one line: {json:?}");
    assert!(json.contains("\"value\":\"say \\\"hi\\\"\\\\ \\nnext\u{fffd}\""), "{json}");
    let (code, line) = output(&url, &["leader", "awkward"]).await;
    assert_eq!(code, Some(0), "{line}");
    assert_eq!(line.lines().count(), 1, "the plain form is one line too: {line:?}");
    assert!(line.trim_end().ends_with("value=say \"hi\"\\ \\nnext\u{fffd}"), "the line break escaped: {line:?}");
    kill("-TERM", elect.id().expect("running"));
    assert_eq!(wait_for(&mut elect, Duration::from_secs(5)).await.code(), Some(0));
    let _ = std::fs::remove_file(&log);
}

/// `leader --watch` ends with 0 on each of SIGINT, SIGTERM, SIGHUP and SIGQUIT, as
/// docs/cli.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_watch_ends_with_0_on_each_signal() {
    let server = RedisServer::start();
    let url = server.url();
    for sig in ["-INT", "-TERM", "-HUP", "-QUIT"] {
        let mut watch = leasehold(&url, &["leader", "signalled", "--watch"]).spawn().expect("spawn");
        let mut lines = BufReader::new(watch.stdout.take().expect("piped")).lines();
        assert_eq!(next_line(&mut lines).await, "no leader");
        kill(sig, watch.id().expect("running"));
        assert_eq!(wait_for(&mut watch, Duration::from_secs(5)).await.code(), Some(0), "{sig}");
    }
}
