//! `election`: leader election hand-over, crash and pause failover, and `observe()`
//! delivery (issue 31 item 5), with 3 candidates in 3 processes.
//!
//! Each candidate is this program re-run with `--candidate ID` (its own process, its own
//! `Client`, one `client.election_with(NAME, lease)` handle and one `observe()` stream on
//! the same name), so `SIGKILL` and `SIGSTOP` are real signals to a real process. The
//! parent only steers (a command a line on each child's stdin) and checks.
//!
//! ## Phases (rounds in parentheses: the defaults and their flags)
//!
//! 1. **hand-over** (20, `--rounds`), default lease (10 s): the leader proclaims a new
//!    value, then resigns; the next candidate in line leads. Measured: the leader's
//!    `resign()` call to the next leader's `campaign` returning, in ms and in round trips
//!    of a `PING`: measured by the parent in the same run (200 before the phase and 200
//!    after; the ratio uses their p50: the target's round trip, loopback and an idle
//!    process), and once a round by the leader through its own client just before the
//!    proclaim (a round trip as a busy candidate process sees one); the `resign()` call's
//!    own duration is printed beside them. Also the `observe()` delivery latency: from
//!    the proclaim's reply to the observers of the two other processes, and from the new
//!    leader's `campaign` returning to theirs seeing its term.
//! 2. **crash, short lease** (20, `--crash-rounds`), lease `--short-lease-ms` (1500):
//!    the leader's process gets `SIGKILL`; measured: the signal to the next leader's
//!    `campaign` returning, its excess over the lease (target: at most 100 ms), and the
//!    claim's delay after the lead actually expired (the parent reads the lead's `PTTL`
//!    just before the signal: expiry ≈ that reading's send time + `PTTL`, early by up to
//!    one round trip and 1 ms of the reply's rounding). The killed candidate is replaced
//!    by a new process, which queues behind the others.
//! 3. **crash, default lease** (3, `--long-rounds`), lease 10 s: as 2. Only 3 rounds by
//!    default so the whole program stays under about 3 minutes; the short lease is what
//!    makes 20 crash rounds fit (their failover is the same mechanism, lease-scaled).
//! 4. **pause** (20, `--pause-rounds`), the short lease: the leader gets `SIGSTOP`;
//!    measured: the signal to the next leader's `campaign` returning; then `SIGCONT`
//!    (100 ms after the next leader leads) and the time until the resumed one reports its
//!    lead lost. It must report lost before it acts: a candidate that leads checks
//!    `is_lost()` every 10 ms and "acts" (reports `ACT`) only when it is false; an `ACT`
//!    of the resumed one before its `LOST` is counted (must be 0).
//!
//! Each leader holds its lead for 100 ms plus a fraction of the renewal period (`lease /
//! 3`, varied by round) before the signal, so the signal falls anywhere between two
//! renewals: the failover spans `lease * 2/3` to `lease`, plus the claim.
//!
//! ## One clock
//!
//! Every time is a `CLOCK_MONOTONIC` reading (`clock_gettime`, through `nix`), taken by
//! the process where the event happens: the children stamp their own events (the
//! `resign()` call, `campaign` returning, an observer's item) and the parent stamps its
//! signals just before `kill(2)`. `CLOCK_MONOTONIC` is one clock for every process of a
//! machine (and the clock `std::time::Instant` reads on Linux), so differences across
//! processes are exact to the reading; the pipes that carry the readings to the parent
//! add nothing to them.
//!
//! ## Checks (exit 1 when one fails)
//!
//! - **Never two leaders at once.** A candidate's belief that it leads runs from its
//!   `campaign` returning to the last moment it acted on it: each `ACT` (stamped before
//!   its `is_lost()` check), the `resign()` call, a proclaim's reply. A killed or paused
//!   leader's belief is taken to last to its guard's lease deadline (as reported with its
//!   last `ACT`; `Leadership::lease_deadline`, the local deadline that is never later than
//!   the server's expiry), since a process that does not run ends its belief only there.
//!   Sorted by start, no interval may begin before the previous one ended.
//! - **Terms strictly increase** from one lead to the next, in time order.
//! - **A paused leader reports lost before acting** (above).
//!
//! ## Child protocol
//!
//! Parent → child, one a line: `GO` (start campaigning: at once, and again after every
//! resign or loss), `PING` (while leading: one `PING` through its client), `PROCLAIM VALUE`,
//! `RESIGN`; stdin closed: resign, shut down, exit.
//! Child → parent: `MONO_NS KIND ARGS`, with `KIND` one of `READY`, `CAMPAIGN`,
//! `LEAD TERM DEADLINE_NS`, `ACT TERM DEADLINE_NS ACTED_NS` (stamped before the
//! `is_lost()` check, and again after it), `PONG TERM RTT_NS`, `PROCLAIMED TERM VALUE`,
//! `RESIGN TERM` (stamped before the call), `RESIGNED TERM ok|ERROR`, `LOST TERM`,
//! `OBS TERM VALUE` or `OBS - -` (an observer item: a leader, or none), `ERROR MESSAGE`.
//!
//! Flags: `--rounds N` (20), `--crash-rounds N` (20), `--long-rounds N` (3),
//! `--pause-rounds N` (20), `--short-lease-ms N` (1500), `--observe 0|1` (1; 0: the
//! candidates run no observer, so no observer reads the leader beside a hand-over's
//! claim, and the `observe()` rows are empty). `REDIS_URL` selects a server;
//! without it a throwaway `redis-server` is started.

use std::collections::HashMap;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use fred::prelude::{ClientLike, KeysInterface};
use leasehold::{Client, ElectionConfig, Leadership};
use leasehold_benches::{
    check_flags, flag, percentile, ping_rtts, print_machine, print_table, rerun_command, BoxError, Target,
};
use nix::sys::signal::{kill, Signal};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

const FLAGS: &[&str] =
    &["--rounds", "--crash-rounds", "--long-rounds", "--pause-rounds", "--short-lease-ms", "--observe"];
const CHILD_FLAGS: &[&str] = &["--candidate", "--url", "--name", "--lease-ms", "--observe"];
/// How often a leading candidate checks `is_lost()` and acts.
const ACT_EVERY: Duration = Duration::from_millis(10);
/// How long a child may take to connect and say `READY`.
const STARTUP: Duration = Duration::from_secs(30);
/// The bound on any one awaited event, beyond the lease.
const SLACK: Duration = Duration::from_secs(10);
/// After a candidate starts its campaign: time for its first attempt to queue it.
const QUEUE_SETTLE: Duration = Duration::from_millis(50);
/// From the next leader leading to `SIGCONT` of the paused one.
const RESUME_AFTER: Duration = Duration::from_millis(100);
const CANDIDATES: usize = 3;

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of the machine.
fn mono_ns() -> i64 {
    // CLOCK_MONOTONIC cannot fail on Linux; 0 would show as an absurd figure.
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
}

/// `deadline` (an `Instant`: `CLOCK_MONOTONIC` on Linux) as a `mono_ns` reading.
fn instant_ns(deadline: std::time::Instant) -> i64 {
    let now = std::time::Instant::now();
    let base = mono_ns();
    match deadline.checked_duration_since(now) {
        Some(ahead) => base + i64::try_from(ahead.as_nanos()).unwrap_or(i64::MAX / 2),
        None => base - i64::try_from(now.duration_since(deadline).as_nanos()).unwrap_or(i64::MAX / 2),
    }
}

fn emit(kind: &str) {
    println!("{} {kind}", mono_ns());
}

// ---------------------------------------------------------------------------------
// The candidate process.

/// `--candidate ID`: one candidate (see the module docs for the protocol).
async fn candidate(args: &[String]) -> Result<(), BoxError> {
    check_flags(args, CHILD_FLAGS)?;
    let id: usize = flag(args, "--candidate")?.ok_or("--candidate needs an id")?;
    let url: String = flag(args, "--url")?.ok_or("--url missing")?;
    let name: String = flag(args, "--name")?.ok_or("--name missing")?;
    let lease = Duration::from_millis(flag(args, "--lease-ms")?.ok_or("--lease-ms missing")?);
    let client = Client::builder().url(&url).connect().await?;
    let election = client.election_with(&name, ElectionConfig::default().with_lease(lease));

    // The observer: its first item (the current state) comes after it subscribed.
    let observe = flag::<u8>(args, "--observe")?.ok_or("--observe missing")? == 1;
    let mut observer = observe.then(|| election.observe());
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Some(observer) = observer.as_mut() else {
            let _ = first_tx.send(());
            return;
        };
        let mut first_tx = Some(first_tx);
        while let Some(item) = observer.next().await {
            match item {
                Ok(Some(leader)) => emit(&format!("OBS {} {}", leader.term, leader.value)),
                Ok(None) => emit("OBS - -"),
                Err(error) => emit(&format!("OBSERR {error}")),
            }
            if let Some(tx) = first_tx.take() {
                let _ = tx.send(());
            }
        }
    });
    tokio::time::timeout(STARTUP, first_rx).await.map_err(|_| "observer: no first item")??;

    let (tx, mut commands) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    emit("READY");
    match commands.recv().await.as_deref() {
        Some("GO") => {}
        None => return Ok(()),
        Some(other) => return Err(format!("expected GO, got {other:?}").into()),
    }
    let value = format!("c{id}");
    loop {
        emit("CAMPAIGN");
        let leadership = tokio::select! {
            leadership = election.campaign(value.clone()) => leadership?,
            command = commands.recv() => match command {
                None => break,
                Some(other) => return Err(format!("{other:?} while not leading").into()),
            },
        };
        emit(&format!("LEAD {} {}", leadership.term(), instant_ns(leadership.lease_deadline())));
        if !lead(&client, leadership, &mut commands).await? {
            break;
        }
    }
    client.shutdown().await?;
    Ok(())
}

/// While `leadership` lives: act every [`ACT_EVERY`] while not lost, follow commands.
/// `false` when stdin closed (the program ends).
async fn lead(
    client: &Client,
    leadership: Leadership,
    commands: &mut mpsc::UnboundedReceiver<String>,
) -> Result<bool, BoxError> {
    let term = leadership.term();
    let mut tick = tokio::time::interval(ACT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            biased;
            () = leadership.lost() => {
                emit(&format!("LOST {term}"));
                return Ok(true);
            }
            command = commands.recv() => match command.as_deref() {
                Some("PING") => {
                    // A round trip through this process's client, as the resign's.
                    let start = std::time::Instant::now();
                    let _: String = client.fred().ping(None).await?;
                    emit(&format!("PONG {term} {}", start.elapsed().as_nanos()));
                }
                Some("RESIGN") => {
                    emit(&format!("RESIGN {term}"));
                    let outcome = leadership.resign().await;
                    let outcome = outcome.map_or_else(|e| format!("ERROR {e}").replace(' ', "_"), |()| "ok".to_owned());
                    emit(&format!("RESIGNED {term} {outcome}"));
                    return Ok(true);
                }
                Some(line) if line.starts_with("PROCLAIM ") => {
                    let value = line.trim_start_matches("PROCLAIM ").to_owned();
                    match leadership.proclaim(value.clone()).await {
                        Ok(()) => emit(&format!("PROCLAIMED {term} {value}")),
                        Err(error) => emit(&format!("PROCLAIMERR {term} {error}")),
                    }
                }
                None => {
                    let _ = leadership.resign().await;
                    return Ok(false);
                }
                Some(other) => return Err(format!("unknown command {other:?}").into()),
            },
            _ = tick.tick() => {
                // Stamped before the check: the belief's instant.
                let at = mono_ns();
                if leadership.is_lost() {
                    emit(&format!("LOST {term}"));
                    return Ok(true);
                }
                // The act: stamped again after the check (a paused process may resume
                // between the two stamps).
                println!("{at} ACT {term} {} {}", instant_ns(leadership.lease_deadline()), mono_ns());
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// The parent: children, events.

/// One line a child reported.
#[derive(Debug, Clone)]
struct Event {
    child: usize,
    at: i64,
    kind: String,
    args: Vec<String>,
}

impl Event {
    fn term(&self) -> Option<u64> {
        self.args.first().and_then(|t| t.parse().ok())
    }
}

struct Candidate {
    child: Child,
    stdin: ChildStdin,
}

/// The children of the run and every event they reported.
struct Hub {
    url: String,
    name: String,
    /// Whether the candidates run an observer (`--observe 0` leaves them out: the
    /// hand-over without the observers' reads beside it).
    observe: bool,
    exe: std::path::PathBuf,
    next_id: usize,
    live: HashMap<usize, Candidate>,
    tx: mpsc::UnboundedSender<Event>,
    rx: mpsc::UnboundedReceiver<Event>,
    log: Vec<Event>,
}

impl Hub {
    fn new(url: &str, name: &str, observe: bool) -> Result<Self, BoxError> {
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Hub {
            url: url.to_owned(),
            observe,
            name: name.to_owned(),
            exe: std::env::current_exe()?,
            next_id: 0,
            live: HashMap::new(),
            tx,
            rx,
            log: Vec::new(),
        })
    }

    /// Starts a candidate with `lease`, waits for its `READY`, tells it `GO` and waits
    /// until its campaign has had time to queue. Returns its id.
    async fn spawn(&mut self, lease: Duration) -> Result<usize, BoxError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut child = Command::new(&self.exe)
            .args(["--candidate", &id.to_string(), "--url", &self.url, "--name", &self.name])
            .args(["--lease-ms", &lease.as_millis().to_string()])
            .args(["--observe", if self.observe { "1" } else { "0" }])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("child without stdin")?;
        let stdout = child.stdout.take().ok_or("child without stdout")?;
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut parts = line.split_whitespace().map(str::to_owned);
                let at = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
                let kind = parts.next().unwrap_or_default();
                let event = Event { child: id, at, kind, args: parts.collect() };
                if tx.send(event).is_err() {
                    break;
                }
            }
            let _ = tx.send(Event { child: id, at: mono_ns(), kind: "EXIT".to_owned(), args: Vec::new() });
        });
        self.live.insert(id, Candidate { child, stdin });
        self.until(STARTUP, |e| e.child == id && e.kind == "READY").await?;
        self.send(id, "GO").await?;
        self.until(STARTUP, |e| e.child == id && e.kind == "CAMPAIGN").await?;
        tokio::time::sleep(QUEUE_SETTLE).await;
        Ok(id)
    }

    async fn send(&mut self, id: usize, line: &str) -> Result<(), BoxError> {
        let candidate = self.live.get_mut(&id).ok_or("no such candidate")?;
        candidate.stdin.write_all(format!("{line}\n").as_bytes()).await?;
        candidate.stdin.flush().await?;
        Ok(())
    }

    /// The first event, recorded already or still to come, that matches `wanted` (each
    /// caller's `wanted` matches one event of the run: a term, a value, a time after).
    async fn until(&mut self, within: Duration, wanted: impl Fn(&Event) -> bool) -> Result<Event, BoxError> {
        if let Some(event) = self.log.iter().find(|e| wanted(e)) {
            return Ok(event.clone());
        }
        self.next_new(within, wanted).await
    }

    /// Records events until a new one matches `wanted`, which it returns; an `ERROR` or
    /// an unexpected `EXIT` of a live child is an error, and so is `within` running out.
    async fn next_new(&mut self, within: Duration, wanted: impl Fn(&Event) -> bool) -> Result<Event, BoxError> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let event = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .map_err(|_| format!("no awaited event within {within:?}"))?
                .ok_or("event channel closed")?;
            self.log.push(event.clone());
            if event.kind == "ERROR" || event.kind == "OBSERR" || event.kind == "PROCLAIMERR" {
                return Err(format!("candidate {}: {} {}", event.child, event.kind, event.args.join(" ")).into());
            }
            if event.kind == "EXIT" && self.live.contains_key(&event.child) && !wanted(&event) {
                return Err(format!("candidate {} exited unexpectedly", event.child).into());
            }
            if wanted(&event) {
                return Ok(event);
            }
        }
    }

    /// Records whatever arrived so far, waiting `for_` at most.
    async fn drain(&mut self, for_: Duration) -> Result<(), BoxError> {
        match self.next_new(for_, |_| false).await {
            Err(error) if error.to_string().starts_with("no awaited event") => Ok(()),
            Err(error) => Err(error),
            Ok(_) => Ok(()),
        }
    }

    fn pid(&self, id: usize) -> Result<Pid, BoxError> {
        let pid = self.live.get(&id).and_then(|c| c.child.id()).ok_or("candidate without a pid")?;
        Ok(Pid::from_raw(i32::try_from(pid)?))
    }

    /// Sends `signal` to candidate `id`; the `mono_ns` reading just before.
    fn signal(&mut self, id: usize, signal: Signal) -> Result<i64, BoxError> {
        let pid = self.pid(id)?;
        let at = mono_ns();
        kill(pid, signal)?;
        self.log.push(Event { child: id, at, kind: format!("PARENT_{signal:?}"), args: Vec::new() });
        Ok(at)
    }

    /// `SIGKILL` already sent: reaps it.
    async fn reap(&mut self, id: usize) -> Result<(), BoxError> {
        let mut candidate = self.live.remove(&id).ok_or("no such candidate")?;
        candidate.child.wait().await?;
        Ok(())
    }

    /// Ends every live candidate: stdin closed (each resigns and shuts down).
    async fn stop_all(&mut self) -> Result<(), BoxError> {
        let ids: Vec<usize> = self.live.keys().copied().collect();
        for id in ids {
            if let Some(mut candidate) = self.live.remove(&id) {
                drop(candidate.stdin);
                match tokio::time::timeout(SLACK, candidate.child.wait()).await {
                    Ok(status) => {
                        let status = status?;
                        if !status.success() {
                            return Err(format!("candidate {id} ended with {status}").into());
                        }
                    }
                    Err(_) => {
                        candidate.child.kill().await?;
                        return Err(format!("candidate {id} did not exit").into());
                    }
                }
            }
        }
        self.drain(Duration::from_millis(100)).await
    }

    /// The current leader: the newest `LEAD` whose candidate is live.
    async fn leader(&mut self, within: Duration) -> Result<Event, BoxError> {
        let live: Vec<usize> = self.live.keys().copied().collect();
        if let Some(event) = self.log.iter().rev().find(|e| e.kind == "LEAD") {
            let ended = self.log.iter().any(|later| {
                later.child == event.child
                    && later.at >= event.at
                    && (later.kind == "RESIGN" || later.kind == "LOST")
                    && later.term() == event.term()
            });
            if live.contains(&event.child) && !ended {
                return Ok(event.clone());
            }
        }
        self.next_new(within, |e| e.kind == "LEAD" && live.contains(&e.child)).await
    }
}

// ---------------------------------------------------------------------------------
// Samples and the report.

#[derive(Default)]
struct Samples {
    handover_ns: Vec<i64>,
    /// The leader's `resign()` call, from the call to its return (one script round trip
    /// through the whole client).
    resign_call_ns: Vec<i64>,
    /// The leader's `resign()` returned -> the next leader's `campaign` returned.
    resigned_to_lead_ns: Vec<i64>,
    /// A `PING` through the leader's client, in its process, once a hand-over round.
    child_rtt_ns: Vec<i64>,
    proclaim_obs_ns: Vec<i64>,
    /// (phase, ns): an observer in a process other than the new leader's sees its term.
    lead_obs_ns: Vec<(&'static str, i64)>,
    crash_short_ns: Vec<i64>,
    crash_short_after_expiry_ns: Vec<i64>,
    crash_long_ns: Vec<i64>,
    crash_long_after_expiry_ns: Vec<i64>,
    pause_ns: Vec<i64>,
    pause_after_expiry_ns: Vec<i64>,
    resume_to_lost_ns: Vec<i64>,
    acted_before_lost: usize,
    /// (child, term): leaders that were killed or paused (belief to the lease deadline).
    stopped_leads: Vec<(usize, u64)>,
    rtt_us: Vec<u64>,
}

struct Settings {
    rounds: usize,
    crash_rounds: usize,
    long_rounds: usize,
    pause_rounds: usize,
    short_lease: Duration,
}

/// How long a leader leads before the signal: 100 ms plus a fraction of the renewal
/// period (`lease / 3`) that varies by round (the golden ratio's multiples, mod 1: spread
/// over the period even for 3 rounds), so the signal falls anywhere between two renewals
/// and the failover spans `lease * 2/3` to `lease` (plus the claim).
fn hold_for(round: usize, lease: Duration) -> Duration {
    let fraction = (round as f64 * 0.618_034).fract();
    Duration::from_millis(100) + (lease / 3).mul_f64(fraction)
}

/// Waits for the observers of every live process but those of `skip` (the leader's, a
/// stopped one's) to report `matches`; pushes each one's delay after `from`.
async fn observed(
    hub: &mut Hub,
    skip: &[usize],
    from: i64,
    matches: impl Fn(&Event) -> bool,
    into: &mut Vec<i64>,
) -> Result<(), BoxError> {
    if !hub.observe {
        return Ok(());
    }
    let others: Vec<usize> = hub.live.keys().copied().filter(|id| !skip.contains(id)).collect();
    for id in others {
        // Values and terms are unique in a run: an earlier match is this one.
        let seen = hub.log.iter().find(|e| e.child == id && e.kind == "OBS" && matches(e));
        let event = match seen {
            Some(event) => event.clone(),
            None => hub.until(SLACK, |e| e.child == id && e.kind == "OBS" && matches(e)).await?,
        };
        into.push(event.at - from);
    }
    Ok(())
}

async fn handover_phase(hub: &mut Hub, settings: &Settings, samples: &mut Samples) -> Result<(), BoxError> {
    for _ in 0..CANDIDATES {
        hub.spawn(ElectionConfig::DEFAULT_LEASE).await?;
    }
    for round in 0..settings.rounds {
        let lead = hub.leader(SLACK).await?;
        let term = lead.term().ok_or("LEAD without a term")?;
        // A PING through the leader's own client: its round trip, as the candidate
        // processes see one.
        hub.send(lead.child, "PING").await?;
        let pong = hub.until(SLACK, |e| e.child == lead.child && e.kind == "PONG" && e.term() == Some(term)).await?;
        samples.child_rtt_ns.push(pong.args.get(1).and_then(|n| n.parse().ok()).ok_or("PONG without a time")?);
        // A proclaim, then its delivery to the other processes' observers.
        let value = format!("c{}-r{round}", lead.child);
        hub.send(lead.child, &format!("PROCLAIM {value}")).await?;
        let proclaimed = hub
            .until(SLACK, |e| e.child == lead.child && e.kind == "PROCLAIMED" && e.args.get(1) == Some(&value))
            .await?;
        let mut delays = Vec::new();
        observed(hub, &[lead.child], proclaimed.at, |e| e.args.get(1) == Some(&value), &mut delays).await?;
        samples.proclaim_obs_ns.extend(delays);
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The hand-over.
        hub.send(lead.child, "RESIGN").await?;
        let resign =
            hub.until(SLACK, |e| e.child == lead.child && e.kind == "RESIGN" && e.term() == Some(term)).await?;
        let next = hub.until(SLACK, |e| e.kind == "LEAD" && e.at > resign.at).await?;
        samples.handover_ns.push(next.at - resign.at);
        let resigned =
            hub.until(SLACK, |e| e.child == lead.child && e.kind == "RESIGNED" && e.term() == Some(term)).await?;
        if resigned.args.get(1).map(String::as_str) != Some("ok") {
            return Err(format!("resign failed: {}", resigned.args.join(" ")).into());
        }
        samples.resign_call_ns.push(resigned.at - resign.at);
        samples.resigned_to_lead_ns.push(next.at - resigned.at);
        let next_term = next.term().ok_or("LEAD without a term")?;
        if next_term <= term {
            return Err(format!("term {next_term} after {term}").into());
        }
        let mut delays = Vec::new();
        observed(hub, &[next.child], next.at, |e| e.term() == Some(next_term), &mut delays).await?;
        samples.lead_obs_ns.extend(delays.into_iter().map(|d| ("hand-over", d)));
        // The resigned one campaigns again, at the back of the line.
        hub.until(SLACK, |e| e.child == lead.child && e.kind == "CAMPAIGN" && e.at > resign.at).await?;
        tokio::time::sleep(QUEUE_SETTLE).await;
    }
    hub.stop_all().await
}

/// `--crash-rounds` / `--long-rounds` (with `lease`) or `--pause-rounds` (`pause`).
async fn failover_phase(
    hub: &mut Hub,
    probe: &Client,
    lease: Duration,
    rounds: usize,
    pause: bool,
    samples: &mut Samples,
) -> Result<(Vec<i64>, Vec<i64>), BoxError> {
    let key = probe.election(&hub.name).key().to_owned();
    for _ in 0..CANDIDATES {
        hub.spawn(lease).await?;
    }
    let mut failovers = Vec::new();
    let mut after_expiry = Vec::new();
    let phase = if pause { "pause" } else { "crash" };
    for round in 0..rounds {
        let lead = hub.leader(lease + SLACK).await?;
        let term = lead.term().ok_or("LEAD without a term")?;
        tokio::time::sleep(hold_for(round, lease)).await;
        let pttl_sent = mono_ns();
        let pttl: i64 = probe.fred().pttl(&key).await?;
        let signal_at = hub.signal(lead.child, if pause { Signal::SIGSTOP } else { Signal::SIGKILL })?;
        samples.stopped_leads.push((lead.child, term));
        if !pause {
            hub.reap(lead.child).await?;
        }
        let next = hub.until(lease + SLACK, |e| e.kind == "LEAD" && e.at > signal_at).await?;
        failovers.push(next.at - signal_at);
        if pttl > 0 {
            after_expiry.push(next.at - (pttl_sent + pttl * 1_000_000));
        }
        let next_term = next.term().ok_or("LEAD without a term")?;
        if next_term <= term {
            return Err(format!("term {next_term} after {term}").into());
        }
        let mut delays = Vec::new();
        observed(hub, &[next.child, lead.child], next.at, |e| e.term() == Some(next_term), &mut delays).await?;
        samples.lead_obs_ns.extend(delays.into_iter().map(|d| (phase, d)));
        if pause {
            tokio::time::sleep(RESUME_AFTER).await;
            let resumed = hub.signal(lead.child, Signal::SIGCONT)?;
            let lost =
                hub.until(SLACK, |e| e.child == lead.child && e.kind == "LOST" && e.term() == Some(term)).await?;
            samples.resume_to_lost_ns.push(lost.at - resumed);
            let acted = hub
                .log
                .iter()
                .filter(|e| e.child == lead.child && e.kind == "ACT")
                .filter(|e| e.args.get(2).and_then(|a| a.parse::<i64>().ok()).is_some_and(|acted| acted >= resumed))
                .count();
            samples.acted_before_lost += acted;
            hub.until(SLACK, |e| e.child == lead.child && e.kind == "CAMPAIGN" && e.at > lost.at).await?;
            tokio::time::sleep(QUEUE_SETTLE).await;
        } else {
            hub.spawn(lease).await?;
        }
    }
    hub.stop_all().await?;
    Ok((failovers, after_expiry))
}

/// The intervals of belief (see the module docs) overlap nowhere, and terms rise.
/// Returns the problems found.
fn check(log: &[Event], stopped: &[(usize, u64)]) -> Vec<String> {
    let mut problems = Vec::new();
    // (start, end, child, term)
    let mut leads: Vec<(i64, i64, usize, u64)> = Vec::new();
    let mut index: HashMap<(usize, u64), usize> = HashMap::new();
    for event in log {
        let Some(term) = event.term() else { continue };
        let key = (event.child, term);
        match event.kind.as_str() {
            "LEAD" => {
                if index.contains_key(&key) {
                    problems.push(format!("candidate {} led term {term} twice", event.child));
                }
                index.insert(key, leads.len());
                leads.push((event.at, event.at, event.child, term));
            }
            "ACT" | "RESIGN" | "PROCLAIMED" => match index.get(&key) {
                Some(&i) => leads[i].1 = leads[i].1.max(event.at),
                None => problems.push(format!("candidate {} acted on term {term} it never led", event.child)),
            },
            _ => {}
        }
    }
    // A killed or paused leader believes until its last reported lease deadline.
    for &(child, term) in stopped {
        let deadline = log
            .iter()
            .filter(|e| e.child == child && e.term() == Some(term) && (e.kind == "ACT" || e.kind == "LEAD"))
            .filter_map(|e| e.args.get(1).and_then(|d| d.parse::<i64>().ok()))
            .next_back();
        if let (Some(deadline), Some(&i)) = (deadline, index.get(&(child, term))) {
            leads[i].1 = leads[i].1.max(deadline);
        }
    }
    leads.sort_by_key(|l| l.0);
    for pair in leads.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.0 <= a.1 {
            problems.push(format!(
                "OVERLAP: candidate {} (term {}) led from {} while candidate {} (term {}) believed until {} ({:.3} ms)",
                b.2,
                b.3,
                b.0,
                a.2,
                a.3,
                a.1,
                (a.1 - b.0) as f64 / 1e6
            ));
        }
        if b.3 <= a.3 {
            problems.push(format!("TERM: term {} led after term {}", b.3, a.3));
        }
    }
    problems
}

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// `n`, p50, p99, max of signed nanoseconds, in ms.
fn stats(values: &[i64]) -> (usize, i64, i64, i64) {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    (sorted.len(), percentile(&sorted, 50.0), percentile(&sorted, 99.0), sorted.last().copied().unwrap_or(0))
}

fn row(what: &str, values: &[i64], target: &str) -> Vec<String> {
    let (n, p50, p99, max) = stats(values);
    vec![what.to_owned(), n.to_string(), ms(p50), ms(p99), ms(max), target.to_owned()]
}

fn report(samples: &Samples, settings: &Settings) -> bool {
    let mut rtts = samples.rtt_us.clone();
    rtts.sort_unstable();
    let rtt_ns = i64::try_from(percentile(&rtts, 50.0)).unwrap_or(0) * 1000;
    let short = i64::try_from(settings.short_lease.as_nanos()).unwrap_or(0);
    let long = i64::try_from(ElectionConfig::DEFAULT_LEASE.as_nanos()).unwrap_or(0);
    let excess = |values: &[i64], lease: i64| values.iter().map(|v| v - lease).collect::<Vec<_>>();
    let obs =
        |phase: &str| samples.lead_obs_ns.iter().filter(|(p, _)| *p == phase).map(|(_, v)| *v).collect::<Vec<_>>();
    println!();
    println!("## results (ms; PING RTT p50 {} ms in this run, {} samples)", ms(rtt_ns), rtts.len());
    let header: Vec<String> = ["what", "n", "p50", "p99", "max", "target"].iter().map(|s| (*s).to_owned()).collect();
    let short_label = format!("{} ms", settings.short_lease.as_millis());
    let rows = vec![
        row("hand-over: resign() call -> next campaign returns", &samples.handover_ns, "5 RTT"),
        row("  of which the resign() call itself", &samples.resign_call_ns, ""),
        row("  resign() returned -> next campaign returns", &samples.resigned_to_lead_ns, ""),
        row(&format!("crash failover, lease {short_label}: SIGKILL -> next leader"), &samples.crash_short_ns, ""),
        row("  its excess over the lease", &excess(&samples.crash_short_ns, short), "<= 100 ms"),
        row("  claim after the lead expired (PTTL estimate)", &samples.crash_short_after_expiry_ns, ""),
        row("crash failover, lease 10 s: SIGKILL -> next leader", &samples.crash_long_ns, ""),
        row("  its excess over the lease", &excess(&samples.crash_long_ns, long), "<= 100 ms"),
        row("  claim after the lead expired (PTTL estimate)", &samples.crash_long_after_expiry_ns, ""),
        row(&format!("pause failover, lease {short_label}: SIGSTOP -> next leader"), &samples.pause_ns, ""),
        row("  its excess over the lease", &excess(&samples.pause_ns, short), ""),
        row("  claim after the lead expired (PTTL estimate)", &samples.pause_after_expiry_ns, ""),
        row("  SIGCONT -> the paused one reports lost", &samples.resume_to_lost_ns, ""),
        row("observe(): proclaim reply -> other processes' observers", &samples.proclaim_obs_ns, ""),
        row("observe(): hand-over, new leader's campaign returns -> observers", &obs("hand-over"), ""),
        row("observe(): crash, new leader's campaign returns -> observers", &obs("crash"), ""),
        row("observe(): pause, new leader's campaign returns -> observers", &obs("pause"), ""),
    ];
    print_table(&header, &rows);
    let mut met = true;
    if !samples.handover_ns.is_empty() && rtt_ns > 0 {
        let (_, p50, p99, max) = stats(&samples.handover_ns);
        let within = p99 <= 5 * rtt_ns;
        println!(
            "hand-over in round trips: p50 {:.1}, p99 {:.1}, max {:.1} (target 5: {})",
            p50 as f64 / rtt_ns as f64,
            p99 as f64 / rtt_ns as f64,
            max as f64 / rtt_ns as f64,
            if within { "met at p99" } else { "NOT met at p99" }
        );
        let (_, child_rtt, _, _) = stats(&samples.child_rtt_ns);
        if child_rtt > 0 {
            println!(
                "hand-over in round trips of a PING through the leader's own client (p50 {} ms): p50 {:.1}, p99 {:.1}",
                ms(child_rtt),
                p50 as f64 / child_rtt as f64,
                p99 as f64 / child_rtt as f64
            );
        }
        let (_, call50, _, _) = stats(&samples.resign_call_ns);
        if call50 > 0 {
            println!(
                "hand-over in resign() calls (a script round trip through the client, in the leader's process): \
                 p50 {:.1}, p99 {:.1}",
                p50 as f64 / call50 as f64,
                p99 as f64 / call50 as f64
            );
        }
        met &= within;
    }
    for (label, values, lease) in
        [(short_label.as_str(), &samples.crash_short_ns, short), ("10 s", &samples.crash_long_ns, long)]
    {
        if !values.is_empty() {
            let (_, _, _, max) = stats(values);
            let within = max - lease <= 100_000_000;
            println!(
                "crash failover, lease {label}: max excess over the lease {} ms (target <= 100: {})",
                ms(max - lease),
                if within { "met" } else { "NOT met" }
            );
            met &= within;
        }
    }
    println!(
        "paused leader acted after SIGCONT before reporting lost: {} times (must be 0)",
        samples.acted_before_lost
    );
    met
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--candidate") {
        if let Err(error) = candidate(&args).await {
            println!("{} ERROR {error}", mono_ns());
            // Not a return: a read of stdin may still be pending on a blocking thread.
            std::process::exit(1);
        }
        std::process::exit(0);
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: election [--rounds N] [--crash-rounds N] [--long-rounds N] [--pause-rounds N] [--short-lease-ms N] \
             [--observe 0|1]"
        );
        return Ok(ExitCode::SUCCESS);
    }
    check_flags(&args, FLAGS)?;
    let settings = Settings {
        rounds: flag(&args, "--rounds")?.unwrap_or(20),
        crash_rounds: flag(&args, "--crash-rounds")?.unwrap_or(20),
        long_rounds: flag(&args, "--long-rounds")?.unwrap_or(3),
        pause_rounds: flag(&args, "--pause-rounds")?.unwrap_or(20),
        short_lease: Duration::from_millis(flag(&args, "--short-lease-ms")?.unwrap_or(1500)),
    };
    println!("# election: 3 candidates in 3 processes; hand-over, crash and pause failover, observe() delivery");
    println!("rerun: {}", rerun_command("election"));
    let target = Target::from_env();
    let probe = Client::builder().url(target.url()).connect().await?;
    print_machine(probe.fred(), &target).await?;
    println!(
        "settings: {} hand-over rounds (lease 10 s), {} crash rounds (lease {:?}), {} crash rounds (lease 10 s), \
         {} pause rounds (lease {:?}); leaders hold 100 ms + 0..lease/3 before a signal; act check every {:?}",
        settings.rounds,
        settings.crash_rounds,
        settings.short_lease,
        settings.long_rounds,
        settings.pause_rounds,
        settings.short_lease,
        ACT_EVERY
    );
    let started = std::time::Instant::now();
    let name = format!("bench:election:{}:{}", std::process::id(), mono_ns() / 1_000_000);
    let observe = flag::<u8>(&args, "--observe")?.unwrap_or(1) == 1;
    let mut hub = Hub::new(target.url(), &name, observe)?;
    let mut samples = Samples::default();
    let outcome: Result<(), BoxError> = async {
        samples.rtt_us.extend(ping_rtts(probe.fred(), 200).await?);
        println!("phase: hand-over");
        handover_phase(&mut hub, &settings, &mut samples).await?;
        samples.rtt_us.extend(ping_rtts(probe.fred(), 200).await?);
        println!("phase: crash, lease {:?}", settings.short_lease);
        let (f, a) =
            failover_phase(&mut hub, &probe, settings.short_lease, settings.crash_rounds, false, &mut samples).await?;
        (samples.crash_short_ns, samples.crash_short_after_expiry_ns) = (f, a);
        println!("phase: crash, lease 10 s");
        let (f, a) =
            failover_phase(&mut hub, &probe, ElectionConfig::DEFAULT_LEASE, settings.long_rounds, false, &mut samples)
                .await?;
        (samples.crash_long_ns, samples.crash_long_after_expiry_ns) = (f, a);
        println!("phase: pause, lease {:?}", settings.short_lease);
        let (f, a) =
            failover_phase(&mut hub, &probe, settings.short_lease, settings.pause_rounds, true, &mut samples).await?;
        (samples.pause_ns, samples.pause_after_expiry_ns) = (f, a);
        Ok(())
    }
    .await;
    let mut failed = false;
    if let Err(error) = outcome {
        println!("RUN FAILED: {error}");
        println!("the last events but ACT (child, mono ns, kind, args):");
        let shown: Vec<&Event> = hub.log.iter().filter(|e| e.kind != "ACT").collect();
        for event in &shown[shown.len().saturating_sub(20)..] {
            println!("  {} {} {} {}", event.child, event.at, event.kind, event.args.join(" "));
        }
        failed = true;
        // Stopped children would outlive the run: let them go (kill_on_drop does the rest).
        let ids: Vec<usize> = hub.live.keys().copied().collect();
        for id in ids {
            let _ = hub.signal(id, Signal::SIGCONT);
        }
    }
    let met = report(&samples, &settings);
    let problems = check(&hub.log, &samples.stopped_leads);
    let leads = hub.log.iter().filter(|e| e.kind == "LEAD").count();
    println!("checked {leads} leads: overlaps and term order: {} problems", problems.len());
    for problem in &problems {
        println!("INVARIANT BROKEN: {problem}");
    }
    if samples.acted_before_lost > 0 {
        println!("INVARIANT BROKEN: a paused leader acted on its lead after resuming, before it reported lost");
    }
    println!("targets: {}", if met { "all met" } else { "some NOT met (above)" });
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
    failed |= !problems.is_empty() || samples.acted_before_lost > 0;
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
