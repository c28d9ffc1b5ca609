//! The shipped Prometheus alert rules and Grafana dashboard (`deploy/`): the rules pass
//! `promtool check rules` and their unit tests (`promtool test rules`, series in, alerts
//! out), every dashboard query is a valid Prometheus query (checked by `promtool` as recording
//! rules), and every `leasehold_*` metric they read is one `docs/observability.md`
//! lists. `promtool` comes with Debian's `prometheus` package: without it these tests
//! print why and pass, except under `CI=true`, where scripts/test.sh installs it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rules() -> PathBuf {
    root().join("deploy/prometheus/leasehold-alerts.yml")
}

fn dashboard() -> PathBuf {
    root().join("deploy/grafana/leasehold-dashboard.json")
}

/// Whether `tool --version` runs; when it does not, under `CI=true` the test fails, and
/// elsewhere it prints the reason (the caller then skips).
fn have(tool: &str, install: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok_and(|out| out.status.success()) {
        return true;
    }
    assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{tool} is needed under CI ({install})");
    println!("skipped: {tool} is not installed ({install})");
    false
}

fn have_promtool() -> bool {
    have("promtool", "apt-get install prometheus")
}

/// Runs `promtool ARGS` in `dir`, failing the test with its output when it fails.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool").args(args).current_dir(dir).output().expect("run promtool");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn the_alert_rules_pass_promtool_check() {
    if !have_promtool() {
        return;
    }
    let text = promtool(&root(), &["check", "rules", &rules().display().to_string()]);
    assert!(text.contains("SUCCESS: 5 rules found"), "{text}");
}

#[test]
fn the_alert_rules_pass_their_unit_tests() {
    if !have_promtool() {
        return;
    }
    let dir = root().join("deploy/prometheus");
    let text = promtool(&dir, &["test", "rules", "leasehold-alerts.test.yml"]);
    assert!(text.contains("SUCCESS"), "{text}");
}

/// The dashboard's queries, read with python3's `json` (which also checks that the file
/// is JSON): `None` when python3 is missing outside CI.
fn dashboard_queries() -> Option<Vec<String>> {
    if !have("python3", "the tests need python3 anyway: scripts/test.sh") {
        return None;
    }
    let script = "import json, sys\n\
                  board = json.load(open(sys.argv[1]))\n\
                  queries = [t['expr'] for p in board['panels'] for t in p.get('targets', [])]\n\
                  queries += [v['query']['query'] for v in board['templating']['list'] if v['type'] == 'query']\n\
                  assert all('\\n' not in q for q in queries), 'a query on several lines'\n\
                  print('\\n'.join(queries))";
    let out = Command::new("python3").arg("-c").arg(script).arg(dashboard()).output().expect("run python3");
    assert!(out.status.success(), "the dashboard is not JSON: {}", String::from_utf8_lossy(&out.stderr));
    // One query a line.
    let text = String::from_utf8(out.stdout).expect("utf-8");
    Some(text.lines().map(str::to_owned).collect())
}

#[test]
fn every_dashboard_query_is_valid_promql() {
    if !have_promtool() {
        return;
    }
    let Some(queries) = dashboard_queries() else { return };
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, query) in queries.iter().enumerate() {
        // Grafana's variables: `label_values(...)` is Grafana's, not PromQL; the range
        // variables become plain ranges; `$job` and `$instance` sit in regexes already.
        let query = query.strip_prefix("label_values(").map_or_else(
            || query.replace("$__rate_interval", "1m").replace("$__range", "1h"),
            |rest| format!("count by ({}) ({})", label_of(rest), metric_of(rest)),
        );
        let quoted = query.replace('\\', "\\\\").replace('"', "\\\"");
        file.push_str(&format!("      - record: leasehold_dashboard_query_{i}\n        expr: \"{quoted}\"\n"));
    }
    let dir = std::env::temp_dir().join(format!("leasehold-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("queries.yml"), &file).expect("write");
    let text = promtool(&dir, &["check", "rules", "queries.yml"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(text.contains(&format!("SUCCESS: {} rules found", queries.len())), "{text}");
}

/// `label_values(METRIC, LABEL)`: the label.
fn label_of(args: &str) -> String {
    args.trim_end_matches(')').rsplit(',').next().unwrap_or_default().trim().to_owned()
}

/// `label_values(METRIC, LABEL)`: the metric (with its selector).
fn metric_of(args: &str) -> String {
    args.trim_end_matches(')').rsplit_once(',').map_or(args, |(metric, _)| metric).trim().to_owned()
}

/// The `leasehold_*` metric names in `text`, without a histogram's `_bucket`, `_sum` or
/// `_count` suffix.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("leasehold_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix).filter(|base| base.ends_with("_seconds")))
            .unwrap_or(name);
        names.insert(base.to_owned());
        rest = &tail[end..];
    }
    names
}

/// Every metric the rules, their tests and the dashboard read is one the docs list.
#[test]
fn the_rules_and_dashboard_read_only_documented_metrics() {
    let docs = std::fs::read_to_string(root().join("docs/observability.md")).expect("docs");
    let table: String = docs.lines().filter(|line| line.starts_with("| `leasehold_")).collect::<Vec<_>>().join("\n");
    let documented = metric_names(&table);
    for file in [rules(), root().join("deploy/prometheus/leasehold-alerts.test.yml"), dashboard()] {
        let text = std::fs::read_to_string(&file).expect("read");
        let used = metric_names(&text);
        assert!(!used.is_empty(), "{} reads no metric", file.display());
        let unknown: Vec<&String> = used.difference(&documented).collect();
        assert!(unknown.is_empty(), "{} reads metrics the docs do not list: {unknown:?}", file.display());
    }
}
