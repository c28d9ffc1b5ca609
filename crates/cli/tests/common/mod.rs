//! What the CLI's test suites (`cli.rs`, `elect.rs`) share: the binary run as an
//! operator runs it, its output, log files for its children, and signals.

// Each suite uses its own part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

/// The `leasehold` binary of this package.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

/// `leasehold --url URL ARGS...`, stdout piped, stderr inherited.
pub(crate) fn leasehold(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.arg("--url").arg(url).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).kill_on_drop(true);
    command
}

/// Runs `leasehold` to completion: (exit code, stdout).
pub(crate) async fn output(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = leasehold(url, args).output().await.expect("the leasehold binary runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A fresh, empty log file for the children of one test (named after the suite, so
/// that two suites' tests of one name never share one).
pub(crate) fn log_file(test: &str) -> PathBuf {
    let suite = env!("CARGO_CRATE_NAME");
    let path = std::env::temp_dir().join(format!("leasehold-{suite}-{test}-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// What a log file holds so far (empty if it does not exist yet).
pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits for `child` at most `deadline`.
pub(crate) async fn wait_for(child: &mut Child, deadline: Duration) -> ExitStatus {
    tokio::time::timeout(deadline, child.wait()).await.expect("leasehold exits in time").expect("wait")
}

/// `kill -SIG PID`.
pub(crate) fn kill(sig: &str, pid: u32) {
    let status = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill {sig} {pid}");
}

/// Whether process `pid` runs (exists and is not a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `PID (COMM) STATE ...`: the state follows the last `)`.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
