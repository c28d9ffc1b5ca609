//! One topology for many test processes.
//!
//! `cargo test` runs every test of a binary in one process, so a `static` gives one
//! topology per test binary. `cargo nextest run` runs **each test in a process of its
//! own**, so a `static` alone would start a cluster per test (6 servers and a cluster
//! handshake each time). Under nextest (`NEXTEST_RUN_ID` is set) the first test process
//! that needs a topology starts it under `$TMPDIR/leasehold-shared-RUN_ID/KIND/` and
//! writes its ports there; every later process of the same run (any test binary) reads
//! them and checks the servers answer. An exclusive file lock (`File::lock`, held while
//! starting) makes concurrent processes wait for the first instead of racing it. The
//! servers' reaper watches the nextest runner (the test process's parent), so they live
//! until the run ends and then go, even when the run is interrupted.

use std::fs::{self, File};
use std::path::Path;

use crate::reaper::Watch;
use crate::server::{make_temp_dir, ping};

/// The ports of the topology `kind`, started with `start` unless another process of this
/// nextest run started it already. `start` gets the directory to use and what the
/// reaper must watch. Returns what `start` returned when this process started it.
///
/// # Panics
/// When `start` fails or the shared files cannot be used.
pub(crate) fn get_or_start<T>(
    kind: &str,
    start: impl FnOnce(&Path, Watch) -> Result<(Vec<u16>, T), String>,
) -> (Vec<u16>, Option<T>) {
    let run_id = std::env::var("NEXTEST_RUN_ID").unwrap_or_default();
    if run_id.is_empty() || run_id.contains(['/', '.']) {
        let dir = make_temp_dir();
        let (ports, owned) = start(&dir, Watch::ThisProcess).unwrap_or_else(|e| panic!("{kind}: {e}"));
        return (ports, Some(owned));
    }
    let dir = std::env::temp_dir().join(format!("leasehold-shared-{run_id}")).join(kind);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let lock = File::create(dir.join("lock")).unwrap_or_else(|e| panic!("create {kind} lock: {e}"));
    lock.lock().unwrap_or_else(|e| panic!("lock {kind}: {e}"));
    let ports_file = dir.join("ports");
    if let Ok(text) = fs::read_to_string(&ports_file) {
        let ports: Vec<u16> = text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        if !ports.is_empty() && ports.iter().all(|p| ping(*p)) {
            return (ports, None);
        }
    }
    let runner = std::os::unix::process::parent_id();
    let (ports, owned) = start(&dir, Watch::Process(runner)).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let text: Vec<String> = ports.iter().map(u16::to_string).collect();
    let tmp = dir.join("ports.tmp");
    fs::write(&tmp, text.join(" ")).and_then(|()| fs::rename(&tmp, &ports_file)).unwrap_or_else(|e| {
        panic!("write {}: {e}", ports_file.display());
    });
    drop(lock);
    (ports, Some(owned))
}
