//! Shared helpers of the leasehold benchmark programs (`contention`, `renewal`): where
//! Redis is, machine facts, `INFO` parsing, percentiles and formatting.
//!
//! The programs print figures and assert nothing about speed; they exit non-zero only
//! when a correctness invariant they check breaks.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use fred::prelude::{Client as FredClient, ClientLike};
use fred::types::{ClusterHash, CustomCommand, InfoKind};

/// The boxed error the programs return from `main`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The Redis server a program runs against (`REDIS_URL`, or a throwaway one): the test
/// support's, which the demo programs use too.
pub use leasehold_test_support::Target;

/// The exact command line to run the program `bin` again with the same arguments.
pub fn rerun_command(bin: &str) -> String {
    let mut line = String::new();
    if let Ok(url) = std::env::var("REDIS_URL") {
        if !url.is_empty() {
            let _ = write!(line, "REDIS_URL={url} ");
        }
    }
    let _ = write!(line, "cargo run --release -p leasehold-benches --bin {bin} --");
    for arg in std::env::args().skip(1) {
        line.push(' ');
        line.push_str(&arg);
    }
    line
}

/// What `nproc` prints: the CPUs this process may run on.
pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The CPU model from `/proc/cpuinfo`, if readable.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, model)| model.trim().to_owned())
}

/// The first three fields of `/proc/loadavg` (1, 5 and 15 minute load averages).
pub fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// This process's resident set size (`VmRSS` of `/proc/self/status`) in KiB.
pub fn vm_rss_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `INFO section` on `client` and returns the text.
///
/// # Errors
/// Connection errors.
pub async fn info(client: &FredClient, section: InfoKind) -> Result<String, BoxError> {
    Ok(client.info::<String>(Some(section)).await?)
}

/// The value of `name:value` in an `INFO` reply.
pub fn info_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

/// `DBSIZE`: the number of keys in the current database.
///
/// # Errors
/// Connection errors.
pub async fn dbsize(client: &FredClient) -> Result<u64, BoxError> {
    let command = CustomCommand::new_static("DBSIZE", ClusterHash::Random, false);
    Ok(client.custom::<u64, String>(command, Vec::new()).await?)
}

/// Prints the machine facts every program starts with: `nproc`, CPU, load, and the
/// Redis version and server.
///
/// # Errors
/// Connection errors (`INFO server`).
pub async fn print_machine(client: &FredClient, target: &Target) -> Result<(), BoxError> {
    let server = info(client, InfoKind::Server).await?;
    println!("machine:");
    println!("  nproc            {}", nproc());
    println!("  cpu              {}", cpu_model().unwrap_or_else(|| "unknown".to_owned()));
    println!("  load average     {} (1/5/15 min, at start)", load_average().unwrap_or_else(|| "unknown".to_owned()));
    println!("  redis_version    {}", info_field(&server, "redis_version").unwrap_or("unknown"));
    println!("  redis server     {}", target.describe());
    Ok(())
}

/// One `cmdstat_NAME` line of `INFO commandstats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdStat {
    /// `calls=`: times the command ran (commands run by scripts included).
    pub calls: u64,
    /// `usec=`: total server CPU time in microseconds.
    pub usec: u64,
}

/// Parsed `INFO commandstats`: command name (lower case, `script|load` style) to stats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStats(pub BTreeMap<String, CmdStat>);

impl CommandStats {
    /// Parses the text of `INFO commandstats`.
    pub fn parse(text: &str) -> Self {
        let mut stats = BTreeMap::new();
        for line in text.lines() {
            let Some((name, fields)) = line.trim().strip_prefix("cmdstat_").and_then(|l| l.split_once(':')) else {
                continue;
            };
            let mut stat = CmdStat::default();
            for field in fields.split(',') {
                match field.split_once('=') {
                    Some(("calls", value)) => stat.calls = value.parse().unwrap_or(0),
                    Some(("usec", value)) => stat.usec = value.parse().unwrap_or(0),
                    _ => {}
                }
            }
            stats.insert(name.to_owned(), stat);
        }
        CommandStats(stats)
    }

    /// Fetches and parses `INFO commandstats`.
    ///
    /// # Errors
    /// Connection errors.
    pub async fn fetch(client: &FredClient) -> Result<Self, BoxError> {
        Ok(Self::parse(&info(client, InfoKind::CommandStats).await?))
    }

    /// What ran between `before` and `self`, leaving out `INFO` (the measurement
    /// itself) and commands whose count did not change.
    pub fn since(&self, before: &CommandStats) -> CommandStats {
        let mut delta = BTreeMap::new();
        for (name, after) in &self.0 {
            if name == "info" {
                continue;
            }
            let prior = before.0.get(name).copied().unwrap_or_default();
            let calls = after.calls.saturating_sub(prior.calls);
            if calls > 0 {
                delta.insert(name.clone(), CmdStat { calls, usec: after.usec.saturating_sub(prior.usec) });
            }
        }
        CommandStats(delta)
    }

    /// Calls of one command (0 when absent).
    pub fn calls(&self, name: &str) -> u64 {
        self.0.get(name).map_or(0, |s| s.calls)
    }

    /// Server CPU microseconds of one command (0 when absent).
    pub fn usec(&self, name: &str) -> u64 {
        self.0.get(name).map_or(0, |s| s.usec)
    }

    /// Sum of `calls` over every command.
    pub fn total_calls(&self) -> u64 {
        self.0.values().map(|s| s.calls).sum()
    }

    /// Sum of `calls` over the commands a client sends itself (see [`is_sent_by_client`]).
    pub fn client_calls(&self) -> u64 {
        self.0.iter().filter(|(name, _)| is_sent_by_client(name)).map(|(_, s)| s.calls).sum()
    }

    /// `name=calls` for every command, most called first.
    pub fn breakdown(&self) -> String {
        let mut entries: Vec<(&String, &CmdStat)> = self.0.iter().collect();
        entries.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(b.0)));
        entries.iter().map(|(name, stat)| format!("{name}={}", stat.calls)).collect::<Vec<_>>().join(" ")
    }
}

/// The commands leasehold's Lua scripts call with `redis.call`. Redis counts those in
/// `INFO commandstats` too, so they are told apart from what clients send (the
/// benchmarks send none of these themselves while they count).
pub const SCRIPT_INTERNAL: &[&str] = SCRIPT_COMMANDS;

/// `true` for commands a leasehold client sends on its own (`EVALSHA`, `SUBSCRIBE`, …),
/// `false` for the commands its scripts run inside the server ([`SCRIPT_INTERNAL`]).
pub fn is_sent_by_client(name: &str) -> bool {
    !SCRIPT_INTERNAL.contains(&name)
}

/// Every command a leasehold Lua script (`crates/lock-core/lua/*.lua`, all lock kinds) calls with
/// `redis.call` or `redis.pcall` ([`SCRIPT_INTERNAL`] is the same list; `hincrby` is
/// kept for figures of the scripts before issue 9). The publishing scripts call the
/// command their last ARGV names: `publish`, or `spublish` on a cluster with sharded
/// pub/sub.
pub const SCRIPT_COMMANDS: &[&str] = &[
    "decr",
    "decrby",
    "del",
    "exists",
    "get",
    "hdel",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hkeys",
    "hlen",
    "hmget",
    "hset",
    "incr",
    "incrby",
    "lindex",
    "llen",
    "lpop",
    "lpos",
    "lpush",
    "lrem",
    "ltrim",
    "pexpire",
    "pttl",
    "publish",
    "rpush",
    "set",
    "spublish",
    "strlen",
    "time",
    "type",
    "zadd",
    "zcard",
    "zcount",
    "zrange",
    "zrank",
    "zrangebyscore",
    "zrem",
    "zremrangebyrank",
    "zremrangebyscore",
    "zscore",
];

impl CommandStats {
    /// Top-level requests: calls of the commands clients sent themselves (`evalsha`,
    /// `subscribe`, `script|load`, …), leaving out every command leasehold's scripts run
    /// inside the server ([`SCRIPT_COMMANDS`]) and the names in `own` (a program's own
    /// measurement commands). A client command that is also one a script runs (a plain
    /// `GET`, say) is left out too: leasehold's locks send none.
    pub fn top_level_calls(&self, own: &[&str]) -> u64 {
        self.0
            .iter()
            .filter(|(name, _)| !SCRIPT_COMMANDS.contains(&name.as_str()) && !own.contains(&name.as_str()))
            .map(|(_, s)| s.calls)
            .sum()
    }
}

/// Awaits every task, then answers their outputs in spawn order, or the first error
/// (one a task returned, or its panic): every task is awaited either way, so none is
/// left running behind an early return.
pub async fn join_all<T>(handles: Vec<tokio::task::JoinHandle<Result<T, BoxError>>>) -> Result<Vec<T>, BoxError> {
    let mut outputs = Vec::with_capacity(handles.len());
    let mut first_error: Option<BoxError> = None;
    for handle in handles {
        match handle.await {
            Ok(Ok(output)) => outputs.push(output),
            Ok(Err(error)) => {
                first_error.get_or_insert(error);
            }
            Err(join_error) => {
                first_error.get_or_insert_with(|| Box::new(join_error));
            }
        }
    }
    first_error.map_or(Ok(outputs), Err)
}

/// Nearest-rank percentile of already sorted values; 0 when empty. `p` in 0..=100.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Microseconds in a duration, saturating.
pub fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Signed nanoseconds from `earlier` to `later` (negative when `later` is earlier).
pub fn signed_nanos(earlier: Instant, later: Instant) -> i64 {
    match later.checked_duration_since(earlier) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => -i64::try_from(earlier.duration_since(later).as_nanos()).unwrap_or(i64::MAX),
    }
}

/// Milliseconds with three decimals, from microseconds.
pub fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// Milliseconds with three decimals, from signed nanoseconds.
pub fn ms_signed(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1_000_000.0)
}

/// Round-trip times of `count` sequential `PING`s on `client`, sorted, in microseconds.
///
/// # Errors
/// Connection errors.
pub async fn ping_rtts(client: &FredClient, count: usize) -> Result<Vec<u64>, BoxError> {
    let mut rtts = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        let _: String = client.ping(None).await?;
        rtts.push(micros(start.elapsed()));
    }
    rtts.sort_unstable();
    Ok(rtts)
}

/// Prints a table: a header row and rows of cells, columns padded to their widest cell
/// (the first column left-aligned, the others right-aligned).
pub fn print_table(header: &[String], rows: &[Vec<String>]) {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate().take(columns) {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i == 0 {
                let _ = write!(out, "| {cell}{} ", " ".repeat(pad));
            } else {
                let _ = write!(out, "| {}{cell} ", " ".repeat(pad));
            }
        }
        out.push('|');
        out
    };
    println!("{}", line(header));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("{}", line(&rule));
    for row in rows {
        println!("{}", line(row));
    }
}

/// Parses `--name value` flags: returns the value following `name`, parsed.
///
/// # Errors
/// A flag without a value, or a value that does not parse.
pub fn flag<T: std::str::FromStr>(args: &[String], name: &str) -> Result<Option<T>, BoxError> {
    let Some(index) = args.iter().position(|a| a == name) else { return Ok(None) };
    let value = args.get(index + 1).ok_or_else(|| format!("{name} needs a value"))?;
    value.parse().map(Some).map_err(|_| format!("{name}: cannot parse {value:?}").into())
}

/// Rejects arguments that are not among `known` flags (each followed by a value).
///
/// # Errors
/// An unknown argument.
pub fn check_flags(args: &[String], known: &[&str]) -> Result<(), BoxError> {
    let mut i = 0;
    while i < args.len() {
        if !known.contains(&args[i].as_str()) {
            return Err(format!("unknown argument {:?}; known flags: {}", args[i], known.join(" ")).into());
        }
        i += 2;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commandstats_and_subtracts() {
        let before = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_info:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n",
        );
        let after = CommandStats::parse(
            "cmdstat_evalsha:calls=14,usec=70,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_info:calls=2,usec=18,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_publish:calls=2,usec=4,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_script|load:calls=1,usec=4,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n",
        );
        let delta = after.since(&before);
        assert_eq!(delta.calls("evalsha"), 4);
        assert_eq!(delta.usec("evalsha"), 20);
        assert_eq!(delta.calls("info"), 0);
        assert_eq!(delta.total_calls(), 7);
        assert_eq!(delta.client_calls(), 5);
        assert_eq!(delta.breakdown(), "evalsha=4 publish=2 script|load=1");
    }

    #[test]
    fn top_level_calls_leave_out_script_commands_and_own() {
        let stats = CommandStats::parse(
            "cmdstat_evalsha:calls=10,usec=1\r\ncmdstat_hset:calls=5,usec=1\r\ncmdstat_hdel:calls=5,usec=1\r\n\
             cmdstat_subscribe:calls=2,usec=1\r\ncmdstat_quit:calls=3,usec=1\r\n",
        );
        assert_eq!(stats.top_level_calls(&[]), 15);
        assert_eq!(stats.top_level_calls(&["quit"]), 12);
    }

    /// Every command a script in `crates/lock-core/lua/` runs is in [`SCRIPT_COMMANDS`]: one missing is
    /// counted as a client request (`HKEYS`, the waiter flag's read, was, adding 1.0 to
    /// the fleet bench's top-level requests per acquisition).
    #[test]
    fn script_commands_cover_every_script() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/lock-core/lua");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).expect("crates/lock-core/lua/") {
            let path = entry.expect("entry").path();
            // The whole scripts only (not the templates/ and fragments/ they come from).
            if path.extension().is_none_or(|ext| ext != "lua") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("script");
            for call in text.split("redis.").skip(1) {
                let Some(rest) = call.strip_prefix("call('").or_else(|| call.strip_prefix("pcall('")) else { continue };
                let name = rest.split('\'').next().unwrap_or_default().to_lowercase();
                assert!(
                    SCRIPT_COMMANDS.contains(&name.as_str()),
                    "{}: {name} is not in SCRIPT_COMMANDS",
                    path.display()
                );
                checked += 1;
            }
        }
        assert!(checked > 50, "read the scripts ({checked} calls)");
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 99.0), 99);
        assert_eq!(percentile(&values, 100.0), 100);
        assert_eq!(percentile::<u64>(&[], 50.0), 0);
        assert_eq!(percentile(&[7_i64], 0.0), 7);
    }

    #[test]
    fn reads_info_fields_and_flags() {
        assert_eq!(info_field("# Server\r\nredis_version:7.0.15\r\n", "redis_version"), Some("7.0.15"));
        let args: Vec<String> = ["--seconds", "3"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(flag::<u64>(&args, "--seconds").expect("parses"), Some(3));
        assert_eq!(flag::<u64>(&args, "--clients").expect("absent"), None);
        assert!(check_flags(&args, &["--seconds"]).is_ok());
        assert!(check_flags(&args, &["--clients"]).is_err());
    }
}
