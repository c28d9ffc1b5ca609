//! A `redis-server` that a real network partition can cut off: it runs in a network
//! namespace of its own, reached from the test over a veth pair, and
//! [`PartitionedServer::cut`] inserts firewall rules in that namespace that DROP its
//! port's packets both ways. The TCP connections stay open and silent (no reset, no
//! refusal), as behind a failed switch, until [`PartitionedServer::heal`] removes them.
//!
//! Needs root (`CAP_NET_ADMIN`), `ip` (iproute2) and `iptables`
//! ([`PartitionedServer::unavailable`] says which is missing; `scripts/test.sh` installs
//! iptables as root). The namespace holds every rule, so nothing of the host's firewall
//! changes, and deleting the namespace on drop removes the rules, the veth pair and the
//! server's network with it. A namespace left by a test process that died is deleted by
//! the next start.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The port the server listens on inside its namespace (the namespace is its own).
const PORT: u16 = 6379;

/// Names of this module's namespaces: `lhpart-PID-N`.
const PREFIX: &str = "lhpart-";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A `redis-server` in its own network namespace, killed (and the namespace deleted)
/// on drop. No persistence, as [`RedisServer`](crate::RedisServer).
#[derive(Debug)]
pub struct PartitionedServer {
    namespace: String,
    ip: Ipv4Addr,
    child: Option<Child>,
    dir: PathBuf,
    cut: bool,
}

impl PartitionedServer {
    /// Why a partition cannot be made on this machine (not root, no `ip`, no
    /// `iptables`, network namespaces refused), or `None` when it can.
    pub fn unavailable() -> Option<String> {
        let uid =
            Command::new("id").arg("-u").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        if uid.as_deref() != Some("0") {
            return Some(format!("not root (uid {uid:?}): network namespaces and firewall rules need CAP_NET_ADMIN"));
        }
        for tool in ["ip", "iptables"] {
            let found = Command::new(tool).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
            if !found {
                return Some(format!("`{tool}` is not installed (apt-get install -y iproute2 iptables)"));
            }
        }
        // Root in a container may still be refused both: try them once.
        let probe = format!("{PREFIX}{}-probe{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let refused = |args: &[&str]| {
            let output = Command::new(args[0]).args(&args[1..]).output().ok()?;
            (!output.status.success())
                .then(|| format!("`{}` refused: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
        };
        if let Some(why) = refused(&["ip", "netns", "add", &probe]) {
            return Some(why);
        }
        let why = refused(&["ip", "netns", "exec", &probe, "iptables", "-w", "-L", "INPUT", "-n"]);
        let _ = Command::new("ip").args(["netns", "del", &probe]).stderr(Stdio::null()).status();
        why
    }

    /// Starts a server in a new namespace.
    ///
    /// # Panics
    /// When the namespace, its link or the server cannot be set up (the message says
    /// which command failed), or the server does not answer within 10 s.
    pub fn start() -> Self {
        remove_stale_namespaces();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let namespace = format!("{PREFIX}{pid}-{n}");
        let (host_if, server_if) = (format!("lh{pid}h{n}"), format!("lh{pid}s{n}"));
        let (host_ip, ip) = free_subnet(pid, n);
        run(&["ip", "netns", "add", &namespace]);
        let mut server =
            PartitionedServer { namespace, ip, child: None, dir: crate::server::make_temp_dir(), cut: false };
        let ns = server.namespace.clone();
        run(&["ip", "link", "add", &host_if, "type", "veth", "peer", "name", &server_if]);
        run(&["ip", "link", "set", &server_if, "netns", &ns]);
        run(&["ip", "addr", "add", &format!("{host_ip}/30"), "dev", &host_if]);
        run(&["ip", "link", "set", &host_if, "up"]);
        run(&["ip", "netns", "exec", &ns, "ip", "addr", "add", &format!("{ip}/30"), "dev", &server_if]);
        run(&["ip", "netns", "exec", &ns, "ip", "link", "set", &server_if, "up"]);
        run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, "redis-server", "--port", &PORT.to_string(), "--bind", &ip.to_string()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no", "--logfile", "redis.log"])
            .current_dir(&server.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn redis-server in {ns}: {e}"));
        server.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.answers() {
            assert!(Instant::now() < deadline, "redis-server in {ns} did not answer PING within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// `redis://IP:6379`, the server's address in its namespace.
    pub fn url(&self) -> String {
        format!("redis://{}:{PORT}", self.ip)
    }

    /// Cuts the server off: every packet to or from its port is dropped (inside its
    /// namespace), so open connections fall silent and new ones time out.
    pub fn cut(&mut self) {
        if !self.cut {
            self.rules("-I");
            self.cut = true;
        }
    }

    /// Removes the rules of [`PartitionedServer::cut`].
    pub fn heal(&mut self) {
        if self.cut {
            self.rules("-D");
            self.cut = false;
        }
    }

    /// Whether the server answers `PING` now (false while cut).
    pub fn answers(&self) -> bool {
        let addr = SocketAddr::from((self.ip, PORT));
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(300)));
        let mut buf = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    fn rules(&self, action: &str) {
        let port = PORT.to_string();
        for (chain, direction) in [("INPUT", "--dport"), ("OUTPUT", "--sport")] {
            run(&[
                "ip",
                "netns",
                "exec",
                &self.namespace,
                "iptables",
                "-w",
                action,
                chain,
                "-p",
                "tcp",
                direction,
                &port,
                "-j",
                "DROP",
            ]);
        }
    }
}

impl Drop for PartitionedServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The namespace takes its rules, its end of the veth pair and (with it) ours.
        let _ = Command::new("ip").args(["netns", "del", &self.namespace]).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a setup command, panicking with its output if it fails.
fn run(args: &[&str]) {
    let output = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
    assert!(
        output.status.success(),
        "`{}` failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// A /30 in 10.231.0.0/16 that no interface of the host uses: (host end, server end).
fn free_subnet(pid: u32, n: u32) -> (Ipv4Addr, Ipv4Addr) {
    let used = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let start = pid.wrapping_mul(64).wrapping_add(n);
    for step in 0..16_384 {
        let k = start.wrapping_add(step) % 16_384;
        let (third, fourth) = (u8::try_from(k / 64).unwrap_or(0), u8::try_from((k % 64) * 4).unwrap_or(0));
        let host = Ipv4Addr::new(10, 231, third, fourth + 1);
        if !used.contains(&format!(" {host}/")) {
            return (host, Ipv4Addr::new(10, 231, third, fourth + 2));
        }
    }
    panic!("no free /30 in 10.231.0.0/16");
}

/// Deletes the namespaces of test processes that are gone (killed before their drop).
fn remove_stale_namespaces() {
    let Ok(output) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else { continue };
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|rest| rest.split('-').next()) else { continue };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
        }
    }
}
