//! `leasehold history NAME [--json]`, run as an operator runs it: a lock held by a
//! library client, forced free by `leasehold unlock --force`, and its history printed.

use std::process::Stdio;

use leasehold_test_support::{client, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

/// Runs `leasehold --url URL ARGS...` to completion: (exit code, stdout).
async fn output(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(BIN)
        .env("USER", "operator-7")
        .env_remove(leasehold::SERVICE_ENV)
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("the leasehold binary runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_prints_who_forced_which_owner() {
    let server = RedisServer::start();
    let url = server.url();
    let (code, out) = output(&url, &["history", "hist:cli"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no forced unlock recorded"), "{out}");

    let app = client(&server).await;
    let guard = app.lock("hist:cli").lock().await.expect("lock");
    let (code, out) = output(&url, &["unlock", "hist:cli", "--force"]).await;
    assert_eq!(code, Some(0), "{out}");

    let (code, out) = output(&url, &["history", "hist:cli"]).await;
    assert_eq!(code, Some(0), "{out}");
    let line = out.lines().next().unwrap_or_default();
    // "<ms> force-unlock by=leasehold:<UUID>:leasehold-cli.<user>.<host> owners=<the app's owner>"
    assert!(line.contains(" force-unlock by=leasehold:") && line.contains(":leasehold-cli.operator-7."), "{out}");
    assert!(line.ends_with(&format!("owners={}", guard.owner())), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");

    let (code, out) = output(&url, &["history", "hist:cli", "--json"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("[{\"at_ms\":") && out.contains("\"action\":\"force-unlock\""), "{out}");
    assert!(out.contains(&format!("\"owners\":[\"{}\"]", guard.owner())), "{out}");
}

/// `unlock --force --owner ID` is recorded too, with every owner it removed; an `--owner`
/// that does not hold the lock deletes and records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_by_owner_is_recorded_and_a_wrong_owner_is_not() {
    let server = RedisServer::start();
    let url = server.url();
    let app = client(&server).await;
    let guard = app.lock("hist:owner").lock().await.expect("lock");
    let stranger = "6f0d5d4e-3b1a-4c59-9a43-6f3f0e2b7a10:1";
    let (code, out) = output(&url, &["unlock", "hist:owner", "--force", "--owner", stranger]).await;
    assert_eq!(code, Some(1), "a wrong owner deletes nothing: {out}");
    let (_, out) = output(&url, &["history", "hist:owner"]).await;
    assert!(out.contains("no forced unlock recorded"), "and records nothing: {out}");

    let owner = guard.owner().to_string();
    let (code, out) = output(&url, &["unlock", "hist:owner", "--force", "--owner", &owner]).await;
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = output(&url, &["history", "hist:owner"]).await;
    assert_eq!(code, Some(0), "{out}");
    let line = out.lines().next().unwrap_or_default();
    assert!(line.contains(" force-unlock by=leasehold:"), "{out}");
    assert!(line.ends_with(&format!("owners={owner}")), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}
