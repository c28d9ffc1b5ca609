//! The reaper: one `sh` process per topology whose process group holds every
//! `redis-server` of that topology, and which kills the whole group when the process it
//! watches goes away.
//!
//! Why not `Drop`: a topology shared by a test binary lives in a `static`, and statics
//! are never dropped. Why not `prctl(PR_SET_PDEATHSIG)`: it fires when the *thread* that
//! spawned the child exits, and `cargo test` runs each test on a thread of its own, so
//! the first test to finish would kill the servers every later test uses (and it needs
//! `unsafe`, which the workspace forbids). The reaper instead watches
//!
//! - its stdin, a pipe whose write end only this process holds (Rust opens pipes
//!   close-on-exec, so no other child inherits it): the kernel closes it when the test
//!   process exits in any way, `SIGKILL` included, and the reaper reads end of file; or
//! - a process id (the nextest runner, for a topology shared by many test processes),
//!   polled twice a second.
//!
//! Then it removes the topology's directory (and, for a shared one, the run's directory
//! once it is empty) and sends `SIGKILL` to its own process
//! group: every server, and itself.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

const SCRIPT: &str = r#"trap '' HUP INT TERM
if [ -n "$1" ]; then
  while kill -0 "$1" 2>/dev/null; do sleep 0.5; done
  rm -rf "$2"
  rmdir "${2%/*}" 2>/dev/null
else
  cat >/dev/null
  rm -rf "$2"
fi
kill -KILL 0
"#;

/// What the reaper waits for before it kills its group.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Watch {
    /// The end of this process (its stdin pipe closes), or an explicit [`Reaper::reap`].
    ThisProcess,
    /// The end of another process: the nextest runner, which outlives every test process.
    Process(u32),
}

/// A running reaper; its process id is the process group of the topology's servers.
#[derive(Debug)]
pub(crate) struct Reaper {
    child: Child,
    stdin: Option<ChildStdin>,
    dir: PathBuf,
}

impl Reaper {
    /// Starts a reaper for the servers that will run under `dir`.
    pub(crate) fn start(dir: &Path, watch: Watch) -> Result<Reaper, String> {
        let watched = match watch {
            Watch::ThisProcess => String::new(),
            Watch::Process(pid) => pid.to_string(),
        };
        let mut child = Command::new("sh")
            .args(["-c", SCRIPT, "leasehold-reaper", &watched])
            .arg(dir)
            .process_group(0)
            .stdin(Stdio::piped())
            // Never the test's stdout/stderr: nextest waits for them to close and flags
            // a test whose children keep them open as leaky.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn the reaper (sh): {e}"))?;
        let stdin = child.stdin.take();
        Ok(Reaper { child, stdin, dir: dir.to_path_buf() })
    }

    /// The process group to start the topology's servers in.
    pub(crate) fn group(&self) -> u32 {
        self.child.id()
    }

    /// The directory the reaper removes.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills the group now and waits for it.
    pub(crate) fn reap(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        // A reaper watching another process does not read its stdin: kill the group
        // directly (the reaper is its leader).
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.child.id())]).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.reap();
    }
}
