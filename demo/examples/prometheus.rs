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
//!   Prometheus to scrape (default `0`).
//!
//! The printed page is in `docs/observability.md` ("A scrape of the demo").

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
