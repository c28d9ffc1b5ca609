//! Which `leasehold_*` series a Prometheus scrape shows, and when
//! (`docs/observability.md`, "Which series exist"): read from the page of a real
//! `metrics-exporter-prometheus` recorder, as a scrape would. A client built shows the
//! gauges and the alert-worthy counters at 0 and no histogram; each acquire adds only
//! the series of what happened; connections killed by the server move the reconnect
//! counters; a client shut down leaves the connection gauges. The recorder is the
//! process's global one, so this binary holds a single test.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use leasehold_test_support::{client_with, raw, wait_until, RedisServer};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The histograms, whose `_bucket`, `_sum` and `_count` lines make one series.
const HISTOGRAMS: [&str; 3] =
    ["leasehold_acquire_duration_seconds", "leasehold_wait_duration_seconds", "leasehold_hold_duration_seconds"];

/// The `leasehold_*` series of a page, each with its value (a histogram's: its count),
/// named `name{label="value",...}` with the labels sorted (and without `le`).
fn series(page: &str) -> BTreeMap<String, f64> {
    let mut found = BTreeMap::new();
    for line in page.lines().filter(|line| line.starts_with("leasehold_")) {
        let (key, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let (name, labels) = key.split_once('{').map_or((key, ""), |(name, rest)| (name, rest.trim_end_matches('}')));
        let mut labels: Vec<&str> = labels.split(',').filter(|l| !l.is_empty() && !l.starts_with("le=")).collect();
        labels.sort_unstable();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a number: {line}"));
        let histogram = HISTOGRAMS.iter().find(|h| name.strip_prefix(**h).is_some_and(|rest| !rest.is_empty()));
        let name = match histogram {
            // Only the `_count` line carries the series' value.
            Some(base) if name.ends_with("_count") => *base,
            Some(base) => {
                found.entry(format!("{base}{{{}}}", labels.join(","))).or_insert(0.0);
                continue;
            }
            None => name,
        };
        found.insert(format!("{name}{{{}}}", labels.join(",")), value);
    }
    found
}

fn names(series: &BTreeMap<String, f64>) -> BTreeSet<String> {
    series.keys().cloned().collect()
}

/// What a client built shows, with nothing done yet: every value below.
fn at_start() -> BTreeMap<String, f64> {
    let mut want = BTreeMap::new();
    for gauge in ["leasehold_held", "leasehold_waiters", "leasehold_watchdog_locks"] {
        want.insert(format!("{gauge}{{}}"), 0.0);
    }
    want.insert("leasehold_clients{}".to_owned(), 1.0);
    for role in ["commands", "subscriber"] {
        want.insert(format!("leasehold_connected{{role=\"{role}\"}}"), 1.0);
        want.insert(format!("leasehold_reconnects_total{{role=\"{role}\"}}"), 0.0);
    }
    for outcome in ["failed", "lost", "renewed"] {
        want.insert(format!("leasehold_renewals_total{{outcome=\"{outcome}\"}}"), 0.0);
    }
    for kind in ["lock", "fenced", "fair", "read", "write", "permit", "election"] {
        for reason in ["owner_gone", "renewals_failed", "gone_after_reconnect"] {
            // A permit and an election's lead are renewed, never checked after a reconnect
            // (docs/observability.md).
            if (kind == "permit" || kind == "election") && reason == "gone_after_reconnect" {
                continue;
            }
            want.insert(format!("leasehold_lost_total{{kind=\"{kind}\",reason=\"{reason}\"}}"), 0.0);
        }
    }
    want
}

fn page(handle: &PrometheusHandle) -> BTreeMap<String, f64> {
    series(&handle.render())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_series_that_occurred_and_the_alert_counters_from_the_start() {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".to_owned()), &[0.001, 0.01, 0.1, 1.0])
        .expect("buckets")
        .install_recorder()
        .expect("the only recorder of this binary");
    let server = RedisServer::start();
    let client = client_with(&server.url(), Duration::from_secs(3)).await;

    // Built: the gauges and the alert-worthy counters, at their values; no histogram.
    let start = page(&handle);
    assert_eq!(start, at_start(), "a client built, nothing done");

    // One try_lock and its unlock: exactly one acquire series and one hold series more.
    let guard = client.lock("series:a").try_lock().await.expect("try").expect("free");
    guard.unlock().await.expect("unlock");
    let after = page(&handle);
    let added: BTreeSet<String> = names(&after).difference(&names(&start)).cloned().collect();
    let want: BTreeSet<String> = [
        r#"leasehold_acquire_duration_seconds{kind="lock",mode="try",outcome="acquired"}"#,
        r#"leasehold_hold_duration_seconds{end="released"}"#,
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(added, want, "only what happened");
    assert_eq!(after[r#"leasehold_acquire_duration_seconds{kind="lock",mode="try",outcome="acquired"}"#], 1.0);
    let page_lines = handle.render().lines().filter(|line| line.starts_with("leasehold_")).count();
    println!("leasehold_* lines after one try_lock: {page_lines}");
    assert!(page_lines < 80, "{page_lines} lines");

    // Both connections killed by the server (the subscriber, with no subscription, is a
    // `normal` connection too): each counted once, both up again.
    raw(&server, &["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(
        wait_until(Duration::from_secs(5), || {
            let now = page(&handle);
            ["commands", "subscriber"].iter().all(|role| {
                now[&format!("leasehold_reconnects_total{{role=\"{role}\"}}")] == 1.0
                    && now[&format!("leasehold_connected{{role=\"{role}\"}}")] == 1.0
            })
        })
        .await,
        "the reconnects counted: {:?}",
        page(&handle)
    );

    lint_with_promtool(&handle.render());

    // Shut down: out of the client and connection gauges.
    client.shutdown().await.expect("shutdown");
    let end = page(&handle);
    for gauge in
        ["leasehold_clients{}", r#"leasehold_connected{role="commands"}"#, r#"leasehold_connected{role="subscriber"}"#]
    {
        assert_eq!(end[gauge], 0.0, "{gauge} after shutdown");
    }
}

/// `promtool check metrics` on the page: Prometheus's own lint of names, types, units
/// and help texts. Skipped with a printed reason without promtool, except under
/// `CI=true` (scripts/test.sh installs it there).
fn lint_with_promtool(page: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "promtool is needed under CI (apt-get install prometheus)"
        );
        println!("skipped the lint: promtool is not installed (apt-get install prometheus)");
        return;
    };
    child.stdin.take().expect("stdin").write_all(page.as_bytes()).expect("write the page");
    let out = child.wait_with_output().expect("promtool");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.trim().is_empty(), "promtool check metrics:\n{text}");
}
