//! `subscriber`: what one release message costs the subscriber task, depending on how
//! many channels the client waits on.
//!
//! For each channel count N: a holder client holds N locks (fixed 10 min lease); a
//! second client (the one measured) has N tasks, each waiting in `lock()` on its own
//! held lock, so its subscriber has N channels subscribed. A raw fred client then
//! publishes unlock messages (`0`) on the channel of the first lock, by `EVAL` scripts
//! of `--batch` `PUBLISH`es each:
//!
//! - **paced**: `--messages` messages, never more than `--backlog` published but not yet
//!   processed (so fred's 4,096-message broadcast buffer cannot overflow). The time until
//!   the subscriber's `messages` counter has counted them all gives its cost per message
//!   (µs/message) and its throughput (messages/s). `wake_alls` should stay 0.
//! - **burst**: `--burst` messages in one script, as fast as the server sends them. A
//!   subscriber slower than the server falls behind, the broadcast buffer overflows,
//!   messages are lost and every waiter is woken: `wake_alls` counts those lags.
//!
//! Each message wakes the waiter of the first lock, which then tries its lock once
//! (`EVALSHA`, answered `Held`); wake-ups that arrive while it tries make one turn. Those
//! attempts run on the measured client's command connection and are reported.
//!
//! Flags: `--channels 1,100,3000`, `--messages N` (20000), `--batch N` (500),
//! `--backlog N` (2000), `--burst N` (20000). `REDIS_URL` selects a server; without it a
//! throwaway `redis-server` is started.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use fred::prelude::{Builder, Client as FredClient, ClientLike, Config, LuaInterface};
use leasehold::Client;
use leasehold_benches::{check_flags, flag, print_machine, print_table, rerun_command, BoxError, CommandStats, Target};

const FLAGS: &[&str] = &["--channels", "--messages", "--batch", "--backlog", "--burst"];
const HOLD: Duration = Duration::from_secs(600);
const PUBLISH: &str = "for i = 1, tonumber(ARGV[1]) do redis.call('publish', KEYS[1], ARGV[2]) end return 1";

#[derive(Debug, Clone)]
struct Settings {
    channels: Vec<usize>,
    messages: u64,
    batch: u64,
    backlog: u64,
    burst: u64,
}

impl Settings {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        check_flags(args, FLAGS)?;
        let channels = match flag::<String>(args, "--channels")? {
            Some(list) => list.split(',').map(|n| n.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>()?,
            None => vec![1, 100, 3000],
        };
        let settings = Settings {
            channels,
            messages: flag(args, "--messages")?.unwrap_or(20_000),
            batch: flag(args, "--batch")?.unwrap_or(500),
            backlog: flag(args, "--backlog")?.unwrap_or(2_000),
            burst: flag(args, "--burst")?.unwrap_or(20_000),
        };
        if settings.channels.contains(&0) || settings.batch == 0 || settings.backlog < settings.batch {
            return Err("--channels must be above 0, --batch above 0 and --backlog at least --batch".into());
        }
        Ok(settings)
    }
}

/// One channel count's figures.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    channels: usize,
    paced_messages: u64,
    paced_elapsed: Duration,
    paced_wake_alls: u64,
    paced_attempts: u64,
    burst_sent: u64,
    burst_processed: u64,
    burst_wake_alls: u64,
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: subscriber [--channels 1,100,3000] [--messages N] [--batch N] [--backlog N] [--burst N]");
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::from_args(&args)?;
    println!("# subscriber: cost per release message with N waited-on channels");
    println!("rerun: {}", rerun_command("subscriber"));
    let target = Target::from_env();
    let holder = Client::builder().url(target.url()).connect().await?;
    print_machine(holder.fred(), &target).await?;
    println!(
        "settings: channels {:?}, paced {} messages (batches of {}, backlog at most {}), burst {} messages",
        settings.channels, settings.messages, settings.batch, settings.backlog, settings.burst
    );
    let publisher = Builder::from_config(Config::from_url(target.url())?).build()?;
    publisher.init().await?;

    let mut outcomes = Vec::new();
    for &channels in &settings.channels {
        println!();
        println!("## {channels} waited-on channel(s)");
        outcomes.push(run(&settings, &holder, &publisher, target.url(), channels).await?);
    }

    println!();
    println!("## summary");
    let header: Vec<String> = [
        "channels",
        "paced msgs",
        "µs/msg",
        "msgs/s",
        "wake_alls (paced)",
        "attempts (paced)",
        "burst sent",
        "burst processed",
        "wake_alls (burst)",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let rows: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| {
            let secs = o.paced_elapsed.as_secs_f64();
            vec![
                o.channels.to_string(),
                o.paced_messages.to_string(),
                format!("{:.1}", secs * 1e6 / o.paced_messages.max(1) as f64),
                format!("{:.0}", o.paced_messages as f64 / secs.max(1e-9)),
                o.paced_wake_alls.to_string(),
                o.paced_attempts.to_string(),
                o.burst_sent.to_string(),
                o.burst_processed.to_string(),
                o.burst_wake_alls.to_string(),
            ]
        })
        .collect();
    print_table(&header, &rows);
    let _ = publisher.quit().await;
    Ok(ExitCode::SUCCESS)
}

async fn run(
    settings: &Settings,
    holder: &Client,
    publisher: &FredClient,
    url: &str,
    channels: usize,
) -> Result<Outcome, BoxError> {
    let names: Vec<String> = (0..channels).map(|i| format!("bench:sub:{channels}:{i}")).collect();
    let mut guards = Vec::with_capacity(channels);
    for name in &names {
        let guard = holder.lock(name).try_lock_with(Duration::ZERO, HOLD).await?;
        guards.push(guard.ok_or_else(|| format!("{name} is already held"))?);
    }
    let measured = Client::builder().url(url).connect().await?;
    let mut waiters = Vec::with_capacity(channels);
    for name in &names {
        let lock = measured.lock(name);
        waiters.push(tokio::spawn(async move { lock.lock().await.map(drop) }));
    }
    let settle = Instant::now() + Duration::from_secs(120);
    while measured.subscribed_channels().len() < channels {
        if Instant::now() > settle {
            return Err(
                format!("only {} of {channels} channels subscribed", measured.subscribed_channels().len()).into()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let channel = format!("redisson_lock__channel:{{{}}}", names[0]);
    println!("subscribed: {} channels in {} SUBSCRIBE call(s)", channels, measured.stats().subscriber.subscribe_calls);

    // Paced: keep at most `backlog` messages between the server and the subscriber.
    let before = measured.stats().subscriber;
    let commands_before = CommandStats::fetch(measured.fred()).await?;
    let start = Instant::now();
    let mut published = 0;
    let mut last_progress = (0, Instant::now());
    let paced_messages = loop {
        let processed = measured.stats().subscriber.messages - before.messages;
        if processed >= settings.messages {
            break processed;
        }
        if processed != last_progress.0 {
            last_progress = (processed, Instant::now());
        } else if last_progress.1.elapsed() > Duration::from_secs(10) {
            println!("paced: stalled at {processed} of {published} messages (lost to a lag?)");
            break processed;
        }
        let room = settings.backlog - (published - processed).min(settings.backlog);
        if published < settings.messages && room >= settings.batch {
            let count = settings.batch.min(settings.messages - published);
            publish(publisher, &channel, count).await?;
            published += count;
        } else {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    };
    let paced_elapsed = start.elapsed();
    let after = measured.stats().subscriber;
    let paced_wake_alls = after.wake_alls - before.wake_alls;
    let commands = CommandStats::fetch(measured.fred()).await?.since(&commands_before);
    println!(
        "paced: {paced_messages} messages in {:.3} s: {:.1} µs/message, {:.0} messages/s; wake_alls {}; \
         the woken waiter's attempts (EVALSHA) {}",
        paced_elapsed.as_secs_f64(),
        paced_elapsed.as_secs_f64() * 1e6 / paced_messages.max(1) as f64,
        paced_messages as f64 / paced_elapsed.as_secs_f64(),
        after.wake_alls - before.wake_alls,
        commands.calls("evalsha"),
    );

    // Burst: one script, no pacing.
    let before = measured.stats().subscriber;
    let start = Instant::now();
    publish(publisher, &channel, settings.burst).await?;
    let mut last = (0, Instant::now());
    let burst_processed = loop {
        let processed = measured.stats().subscriber.messages - before.messages;
        if processed >= settings.burst {
            break processed;
        }
        if processed != last.0 {
            last = (processed, Instant::now());
        } else if last.1.elapsed() > Duration::from_millis(500) {
            // Nothing new for 500 ms: the rest was lost to a lag.
            break processed;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    let burst_elapsed = last.1.duration_since(start);
    let after = measured.stats().subscriber;
    let burst_wake_alls = after.wake_alls - before.wake_alls;
    println!(
        "burst: {} sent, {burst_processed} processed in {:.3} s, {} lost; wake_alls {}",
        settings.burst,
        burst_elapsed.as_secs_f64(),
        settings.burst - burst_processed,
        burst_wake_alls,
    );

    for waiter in &waiters {
        waiter.abort();
    }
    for waiter in waiters {
        let _ = waiter.await;
    }
    for guard in guards {
        guard.unlock().await?;
    }
    let settle = Instant::now() + Duration::from_secs(30);
    while !measured.subscribed_channels().is_empty() && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "after the waiters left: {} channel(s) still subscribed; subscriber stats {:?}",
        measured.subscribed_channels().len(),
        measured.stats().subscriber
    );
    Ok(Outcome {
        channels,
        paced_messages,
        paced_elapsed,
        paced_wake_alls,
        paced_attempts: commands.calls("evalsha"),
        burst_sent: settings.burst,
        burst_processed,
        burst_wake_alls,
    })
}

async fn publish(publisher: &FredClient, channel: &str, count: u64) -> Result<(), BoxError> {
    let _: i64 = publisher.eval(PUBLISH, vec![channel.to_owned()], vec![count.to_string(), "0".to_owned()]).await?;
    Ok(())
}
