//! # The seckill workload with its lock metrics served to Prometheus
//!
//! leasehold's `metrics` feature records through the `metrics` facade; the application
//! picks the exporter. This example installs `metrics-exporter-prometheus` with its HTTP
//! listener, runs the flash-sale demo (`demo/src/seckill.rs`, the same flags), then
//! fetches its own `/metrics` page and prints the `leasehold_*` lines: what a Prometheus
//! scraping this process would have read at the end of the sale.
//!
//! ```text
//! cargo run --release -p leasehold-demo --example prometheus
//! cargo run --release -p leasehold-demo --example prometheus -- --users 500 --instances 2
//! ```
//!
//! Environment (besides the demo's `REDIS_URL`):
//! - `LEASEHOLD_METRICS_ADDR`: where `/metrics` is served (default `127.0.0.1:9464`);
//! - `LEASEHOLD_METRICS_LINGER`: seconds to keep serving after the sale, for a real
//!   Prometheus to scrape (default `0`);
//! - `LEASEHOLD_DEMO_LOSS=1`: after the sale, one more client (on `REDIS_URL`, or a
//!   throwaway server) takes a lock that another handle force-unlocks 3 s later, so its
//!   holder loses it: a real `leasehold_lost_total` increase for the alert rules to see.
//!   That client stays connected while the page lingers (stopping its server then shows
//!   `leasehold_connected` at 0). `scripts/prometheus-demo.sh` uses both.
//!
//! The printed page is in `docs/observability.md` ("Exporting to Prometheus").

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

#[path = "../src/seckill.rs"]
mod seckill;

type DynError = Box<dyn std::error::Error + Send + Sync>;

const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// Bucket bounds (seconds) for leasehold's three duration histograms: from a fast
/// `try_lock` on a local server (~100 µs) to a long wait or hold. Buckets rather than the
/// exporter's default summaries, because Prometheus can add buckets across a fleet's
/// instances (`sum by (le)`) and cannot add quantiles.
const DURATION_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

fn main() -> ExitCode {
    match serve_then_sell() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn serve_then_sell() -> Result<ExitCode, DynError> {
    let addr: SocketAddr = env_or("LEASEHOLD_METRICS_ADDR", DEFAULT_ADDR)
        .parse()
        .map_err(|error| format!("LEASEHOLD_METRICS_ADDR: {error}"))?;
    let linger = Duration::from_secs(
        env_or("LEASEHOLD_METRICS_LINGER", "0")
            .parse()
            .map_err(|error| format!("LEASEHOLD_METRICS_LINGER: {error}"))?,
    );

    // The exporter's HTTP listener is a future: it gets a runtime of its own on a thread,
    // because the demo builds and blocks on its own runtime.
    let exporter_runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (recorder, exporter) = {
        // `build` binds the listener, so it must run inside a runtime.
        let _entered = exporter_runtime.enter();
        PrometheusBuilder::new()
            .with_http_listener(addr)
            .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".to_owned()), &DURATION_BUCKETS)?
            .build()?
    };
    metrics::set_global_recorder(recorder).map_err(|_| "a metrics recorder was installed already")?;
    std::thread::spawn(move || {
        if let Err(error) = exporter_runtime.block_on(exporter) {
            eprintln!("error: the /metrics listener stopped: {error:?}");
        }
    });
    println!("serving leasehold's metrics on http://{addr}/metrics\n");

    let code = seckill::main();
    // Kept alive (with its runtime) until the page stops being served.
    let _loss = if env_or("LEASEHOLD_DEMO_LOSS", "0") == "1" { Some(lose_one_lock()?) } else { None };

    println!("\n# GET http://{addr}/metrics (the leasehold_* lines)\n");
    for line in scrape(addr)?.lines().filter(|line| line.contains("leasehold_")) {
        println!("{line}");
    }
    if !linger.is_zero() {
        println!("\nserving for {}s more (LEASEHOLD_METRICS_LINGER)", linger.as_secs());
        std::thread::sleep(linger);
    }
    Ok(code)
}

/// What `lose_one_lock` keeps alive: the client that lost its lock stays connected (its
/// runtime runs its connections), and a throwaway server when `REDIS_URL` is unset.
struct LossDemo {
    _client: leasehold::Client,
    _runtime: tokio::runtime::Runtime,
    _server: Option<leasehold_test_support::RedisServer>,
}

/// A real loss, as an operator would see it: a client holds `demo:lost` (renewed by its
/// watchdog) until another handle force-unlocks it; the watchdog's next renewal finds
/// the owner gone, the holder's `lost()` fires and `leasehold_lost_total{kind="lock",
/// reason="owner_gone"}` goes from 0 to 1.
fn lose_one_lock() -> Result<LossDemo, DynError> {
    let server = std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .is_none()
        .then(leasehold_test_support::RedisServer::start);
    let url = server.as_ref().map_or_else(|| env_or("REDIS_URL", ""), leasehold_test_support::RedisServer::url);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let client = runtime.block_on(async {
        // A short watchdog, so the renewal that finds the lock gone comes within a second.
        let client = leasehold::Client::builder()
            .url(url)
            .watchdog_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_millis(500))
            .connect()
            .await?;
        let guard = client.lock("demo:lost").lock().await?;
        // Held (and renewed) for a few seconds first, so that a scraper reads the lost
        // counter at 0 before the loss: an `increase()` needs both samples.
        tokio::time::sleep(Duration::from_secs(3)).await;
        client.lock("demo:lost").force_unlock().await?;
        tokio::time::timeout(Duration::from_secs(5), guard.lost()).await.map_err(|_| "lost() did not fire")?;
        println!("\nLEASEHOLD_DEMO_LOSS: demo:lost was force-unlocked under its holder; lost() fired");
        Ok::<_, DynError>(client)
    })?;
    Ok(LossDemo { _client: client, _runtime: runtime, _server: server })
}

/// One plain HTTP/1.0 `GET /metrics`: the page a Prometheus server would read.
fn scrape(addr: SocketAddr) -> Result<String, DynError> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let started = Instant::now();
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or("the /metrics reply has no body")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!("GET /metrics answered {:?} after {:?}", head.lines().next(), started.elapsed()).into());
    }
    Ok(body.to_owned())
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty()).unwrap_or_else(|| default.to_owned())
}
