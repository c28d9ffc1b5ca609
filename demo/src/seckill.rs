//! # Flash sale ("seckill"): one order per user, enforced by a distributed lock
//!
//! A voucher with limited stock goes on sale and every user may buy it once. Several
//! service instances (each its own [`leasehold::Client`], with its own connections and
//! lock owners, as separate processes would have) serve many users at once. Some users
//! double-click: they send 2–3 concurrent orders, which the load balancer spreads over
//! *different* instances, so no process-local mutex could catch them.
//!
//! Every order request runs:
//!
//! 1. `try_lock()` on `lock:order:<user id>`: one round trip, fast fail. When another
//!    request of the same user holds it, this one is a duplicate and is rejected;
//! 2. "has this user ordered already?" (`HEXISTS`), then 1–3 ms of business logic (a
//!    `sleep` standing in for pricing, risk checks, a database round trip), then take one
//!    unit of stock (sold out: rejected) and record the order (`HINCRBY orders <user id> 1`);
//! 3. unlock.
//!
//! Step 2 is check-then-act on purpose, not atomic: the lock is what keeps "one order per
//! user" true. The stock is safe without the lock (a Lua script takes a unit only while
//! one is left), so "never oversold" is an invariant of its own.
//!
//! At the end the demo audits Redis and prints the orders placed, the duplicates rejected,
//! the duplicate orders that slipped through (users holding more than one order), the
//! units oversold, the throughput and the `try_lock()` latency (p50, p99).
//!
//! ## Running it
//!
//! ```text
//! bash scripts/demo.sh              # with the lock: 0 duplicates slipped, 0 oversold
//! bash scripts/demo.sh --no-lock    # without it: users end up with 2 or 3 orders
//! bash scripts/demo.sh --help       # every flag
//! ```
//!
//! `scripts/demo.sh` runs `cargo run --release --quiet -p leasehold-demo --bin seckill`.
//!
//! With `REDIS_URL` unset the demo starts a throwaway `redis-server` of its own (killed
//! at exit). With `REDIS_URL` set it uses that server: every key of the run sits under a
//! fresh prefix `seckill:<run id>:`, so runs never collide, and the run's keys are deleted
//! at the end.
//!
//! ## Exit status
//!
//! - With the lock: 1 when an invariant breaks (a user with two orders, overselling,
//!   stock that does not add up) or a request failed, printed with the reason; else 0.
//! - With `--no-lock`: duplicate orders are the expected outcome, so they are printed
//!   prominently and the exit status stays 0. Overselling and failed requests still exit
//!   with 1, because the stock guard does not depend on the order lock.

use std::collections::HashMap;
use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::fred::prelude::{HashesInterface, KeysInterface, LuaInterface};
use leasehold_test_support::Target;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

type DynError = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "\
Flash-sale demo: one order per user, guarded by leasehold's try_lock().

Usage: seckill [OPTIONS]
       bash scripts/demo.sh [OPTIONS]

Options:
  --no-lock          skip the order lock and watch duplicate orders slip through
  --instances N      service instances, each its own leasehold::Client (default 4)
  --users N          users in the sale (default 2000)
  --stock N          vouchers for sale (default 500)
  --dup-rate F       fraction of users who send 2-3 concurrent orders (default 0.3)
  --concurrency N    users shopping at the same moment (default 8)
  -h, --help         this text
  (--flag=value works too)

Environment:
  REDIS_URL          use this Redis (keys under a per-run prefix, deleted at the end);
                     unset: start a throwaway redis-server
";

/// The voucher on sale.
const VOUCHER: &str = "voucher:1001";

/// Takes one unit of stock while any is left: 1 = taken, 0 = sold out. One script, so two
/// buyers can never both take the last unit, with or without the order lock.
const TAKE_ONE_UNIT: &str = r"
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left <= 0 then
  return 0
end
redis.call('DECR', KEYS[1])
return 1
";

/// Often enough that the default run, about a second long, shows a few lines.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// A fixed seed: the same flags pick the same double-clicking users on every run.
const SEED: u64 = 0x5EC_1111;

// What each pseudo-random roll of a user decides.
const ROLL_DUPLICATES: u64 = 1;
const ROLL_COPIES: u64 = 2;
const ROLL_WORK: u64 = 3;

// ---------------------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Options {
    use_lock: bool,
    instances: usize,
    users: usize,
    stock: u32,
    dup_rate: f64,
    concurrency: usize,
}

impl Default for Options {
    fn default() -> Self {
        // 500 units for 2000 users: the stock runs out, most users get nothing, and the
        // duplicates of the early users race for real stock.
        Options { use_lock: true, instances: 4, users: 2000, stock: 500, dup_rate: 0.3, concurrency: 8 }
    }
}

enum Command {
    Run(Options),
    Help,
}

/// Parses `--flag value` and `--flag=value` by hand: an example should not need a
/// command-line parser dependency.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
    let mut options = Options::default();
    while let Some(arg) = args.next() {
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = || inline_value.clone().or_else(|| args.next());
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--no-lock" if inline_value.is_some() => return Err("--no-lock takes no value".to_owned()),
            "--no-lock" => options.use_lock = false,
            "--instances" => options.instances = parse_value(&flag, value())?,
            "--users" => options.users = parse_value(&flag, value())?,
            "--stock" => options.stock = parse_value(&flag, value())?,
            "--dup-rate" => options.dup_rate = parse_value(&flag, value())?,
            "--concurrency" => options.concurrency = parse_value(&flag, value())?,
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    validate(&options)?;
    Ok(Command::Run(options))
}

fn parse_value<T>(flag: &str, value: Option<String>) -> Result<T, String>
where
    T: FromStr,
    T::Err: Display,
{
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    value.parse().map_err(|error| format!("{flag} {value:?}: {error}"))
}

fn validate(options: &Options) -> Result<(), String> {
    if options.instances == 0 || options.users == 0 || options.concurrency == 0 {
        return Err("--instances, --users and --concurrency must be at least 1".to_owned());
    }
    // `contains` is false for NaN too.
    if !(0.0..=1.0).contains(&options.dup_rate) {
        return Err(format!("--dup-rate must be between 0 and 1, not {}", options.dup_rate));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The users
// ---------------------------------------------------------------------------------------

/// One user and how many concurrent orders they send (1, or 2–3 for a double-click).
#[derive(Debug, Clone, Copy)]
struct Shopper {
    id: usize,
    requests: usize,
}

fn plan_shoppers(options: &Options) -> Vec<Shopper> {
    (1..=options.users)
        .map(|id| {
            let double_clicks = unit_interval(roll(id, ROLL_DUPLICATES)) < options.dup_rate;
            let requests = if double_clicks { 2 + usize::from(roll(id, ROLL_COPIES) % 2 == 1) } else { 1 };
            Shopper { id, requests }
        })
        .collect()
}

/// The business logic time of one request: 1–3 ms.
fn business_logic_time(user: usize, copy: usize) -> Duration {
    Duration::from_millis(1 + roll(user, ROLL_WORK + copy as u64) % 3)
}

/// Which instance serves a user's `copy`-th request: a user's concurrent requests land on
/// different instances, as a load balancer would spread them.
fn route(user: usize, copy: usize, instances: usize) -> usize {
    (user + copy) % instances
}

/// A deterministic pseudo-random number for `user` and `purpose` (no `rand` dependency).
fn roll(user: usize, purpose: u64) -> u64 {
    splitmix64(splitmix64(SEED ^ user as u64) ^ purpose)
}

/// `SplitMix64`'s output function: a tiny, well-mixed 64-bit hash.
fn splitmix64(seed: u64) -> u64 {
    let mut x = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Maps 53 random bits to `[0, 1)`.
fn unit_interval(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

// ---------------------------------------------------------------------------------------
// Redis: the run's keys (where Redis is: `Target`, `REDIS_URL` or a throwaway server)
// ---------------------------------------------------------------------------------------

/// Every key of one run sits under `seckill:<run id>:`, so runs on a shared server never
/// see each other's orders or locks.
struct Keys {
    prefix: String,
    stock: String,
    orders: String,
}

impl Keys {
    fn for_new_run() -> Self {
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let prefix = format!("seckill:{}:", &run_id[..8]);
        Keys { stock: format!("{prefix}stock:{VOUCHER}"), orders: format!("{prefix}orders:{VOUCHER}"), prefix }
    }
}

/// The lock that makes "one order per user" hold, across every instance.
fn order_lock_name(user: usize) -> String {
    format!("lock:order:{user}")
}

// ---------------------------------------------------------------------------------------
// The order service
// ---------------------------------------------------------------------------------------

/// One instance of the order service: its own leasehold client (connections, watchdog,
/// lock owners), as if it ran in a process of its own.
struct OrderService {
    redis: leasehold::Client,
    keys: Arc<Keys>,
    use_lock: bool,
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Placed,
    /// `try_lock()` found another request of the same user in flight.
    LockBusy,
    /// The user already had an order when this request checked.
    AlreadyOrdered,
    SoldOut,
}

struct RequestReport {
    outcome: Result<Outcome, DynError>,
    /// How long `try_lock()` took; `None` when no lock was tried.
    try_lock_latency: Option<Duration>,
}

impl RequestReport {
    fn without_lock(outcome: Result<Outcome, DynError>) -> Self {
        RequestReport { outcome, try_lock_latency: None }
    }
}

impl OrderService {
    async fn connect(url: &str, keys: Arc<Keys>, use_lock: bool) -> Result<Self, DynError> {
        // The prefix applies to lock names; the data keys carry it already.
        let redis = leasehold::Client::builder().url(url).key_prefix(keys.prefix.as_str()).connect().await?;
        Ok(OrderService { redis, keys, use_lock })
    }

    async fn place_order(&self, user: usize, business_logic: Duration) -> RequestReport {
        if !self.use_lock {
            return RequestReport::without_lock(self.create_order(user, business_logic).await);
        }
        let lock = self.redis.lock(order_lock_name(user));
        let started = Instant::now();
        let acquired = lock.try_lock().await;
        let try_lock_latency = Some(started.elapsed());
        let outcome = match acquired {
            Ok(Some(guard)) => {
                let created = self.create_order(user, business_logic).await;
                // Unlock even when creating failed, or the user stays locked out for the lease.
                let released = guard.unlock().await;
                released.map_err(DynError::from).and(created)
            }
            // Fast fail: another request of this user is being served right now.
            Ok(None) => Ok(Outcome::LockBusy),
            Err(error) => Err(error.into()),
        };
        RequestReport { outcome, try_lock_latency }
    }

    /// Check, think, then act: not atomic, so two concurrent requests of one user both
    /// pass the check unless the order lock keeps them apart.
    async fn create_order(&self, user: usize, business_logic: Duration) -> Result<Outcome, DynError> {
        let redis = self.redis.fred();
        let user = user.to_string();
        let already_ordered: bool = redis.hexists(&self.keys.orders, user.as_str()).await?;
        if already_ordered {
            return Ok(Outcome::AlreadyOrdered);
        }
        // The window a concurrent duplicate slips through when nothing holds it back.
        tokio::time::sleep(business_logic).await;
        let taken: i64 = redis.eval(TAKE_ONE_UNIT, &self.keys.stock, ()).await?;
        if taken == 0 {
            return Ok(Outcome::SoldOut);
        }
        // A count per user, not a set: a duplicate order must show up, not be absorbed.
        let _orders_of_user: i64 = redis.hincrby(&self.keys.orders, user.as_str(), 1).await?;
        Ok(Outcome::Placed)
    }
}

// ---------------------------------------------------------------------------------------
// Running the sale
// ---------------------------------------------------------------------------------------

/// Counters the progress line reads while the sale runs.
#[derive(Default)]
struct LiveCounters {
    requests: AtomicU64,
    placed: AtomicU64,
    duplicates_rejected: AtomicU64,
}

impl LiveCounters {
    fn count(&self, outcome: &Result<Outcome, DynError>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let counter = match outcome {
            Ok(Outcome::Placed) => &self.placed,
            Ok(Outcome::LockBusy | Outcome::AlreadyOrdered) => &self.duplicates_rejected,
            Ok(Outcome::SoldOut) | Err(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the requests said, added up once the sale is over.
#[derive(Default)]
struct Tally {
    requests: u64,
    lock_busy: u64,
    already_ordered: u64,
    sold_out: u64,
    failures: u64,
    first_failure: Option<String>,
    try_lock_latencies: Vec<Duration>,
}

impl Tally {
    fn record(&mut self, report: RequestReport) {
        self.requests += 1;
        self.try_lock_latencies.extend(report.try_lock_latency);
        match report.outcome {
            Ok(Outcome::Placed) => {} // counted from Redis by the audit
            Ok(Outcome::LockBusy) => self.lock_busy += 1,
            Ok(Outcome::AlreadyOrdered) => self.already_ordered += 1,
            Ok(Outcome::SoldOut) => self.sold_out += 1,
            Err(error) => self.record_failure(&error),
        }
    }

    fn record_failure(&mut self, error: &dyn Display) {
        self.failures += 1;
        self.first_failure.get_or_insert_with(|| error.to_string());
    }
}

/// Lets `concurrency` users shop at once; each user's requests start together.
async fn run_sale(
    services: &Arc<Vec<OrderService>>,
    shoppers: &[Shopper],
    concurrency: usize,
    live: &Arc<LiveCounters>,
) -> Tally {
    let gate = Arc::new(Semaphore::new(concurrency));
    let mut requests = JoinSet::new();
    for &shopper in shoppers {
        // The gate is never closed, so `acquire_owned` cannot fail.
        let Ok(permit) = Arc::clone(&gate).acquire_owned().await else { break };
        // Shared by the user's requests: the next user comes in once all of them are done.
        let permit = Arc::new(permit);
        for copy in 0..shopper.requests {
            let services = Arc::clone(services);
            let live = Arc::clone(live);
            let permit = Arc::clone(&permit);
            requests.spawn(async move {
                let service = &services[route(shopper.id, copy, services.len())];
                let report = service.place_order(shopper.id, business_logic_time(shopper.id, copy)).await;
                live.count(&report.outcome);
                drop(permit);
                report
            });
        }
    }
    let mut tally = Tally::default();
    while let Some(joined) = requests.join_next().await {
        match joined {
            Ok(report) => tally.record(report),
            Err(panicked) => tally.record_failure(&panicked),
        }
    }
    tally
}

/// Prints a line every [`PROGRESS_EVERY`] until aborted.
fn spawn_progress(live: Arc<LiveCounters>, total_requests: usize, started: Instant) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(PROGRESS_EVERY);
        ticks.tick().await; // the first tick is immediate
        loop {
            ticks.tick().await;
            println!(
                "  {:>5.2} s  {:>6}/{total_requests} requests  {:>5} orders  {:>5} duplicates rejected",
                started.elapsed().as_secs_f64(),
                live.requests.load(Ordering::Relaxed),
                live.placed.load(Ordering::Relaxed),
                live.duplicates_rejected.load(Ordering::Relaxed),
            );
        }
    })
}

// ---------------------------------------------------------------------------------------
// Checking the result in Redis
// ---------------------------------------------------------------------------------------

/// What Redis holds after the sale: the truth the invariants are checked against.
struct Audit {
    initial_stock: i64,
    stock_left: i64,
    /// Orders per user, for the users who have any.
    orders_by_user: HashMap<String, i64>,
}

impl Audit {
    async fn read(redis: &leasehold::Client, keys: &Keys, initial_stock: u32) -> Result<Self, DynError> {
        let redis = redis.fred();
        let orders_by_user: HashMap<String, i64> = redis.hgetall(&keys.orders).await?;
        let stock_left: Option<i64> = redis.get(&keys.stock).await?;
        Ok(Audit { initial_stock: i64::from(initial_stock), stock_left: stock_left.unwrap_or(0), orders_by_user })
    }

    fn orders(&self) -> i64 {
        self.orders_by_user.values().sum()
    }

    /// Users with more than one order, and how many, by user id.
    fn repeat_buyers(&self) -> Vec<(usize, i64)> {
        let mut repeat: Vec<(usize, i64)> = self
            .orders_by_user
            .iter()
            .filter(|&(_, &count)| count > 1)
            .map(|(user, &count)| (user.parse().unwrap_or(usize::MAX), count))
            .collect();
        repeat.sort_unstable();
        repeat
    }

    fn extra_orders(&self) -> i64 {
        self.orders_by_user.values().map(|count| count - 1).filter(|&extra| extra > 0).sum()
    }

    fn oversold(&self) -> i64 {
        (self.orders() - self.initial_stock).max(0)
    }
}

/// Deletes every key of this run from a shared server (the prefix is matched anywhere in
/// the name, so derived keys such as `…:{<lock key>}` go too).
async fn delete_run_keys(redis: &leasehold::Client, prefix: &str) -> Result<u64, DynError> {
    let redis = redis.fred();
    let pattern = format!("*{prefix}*");
    let mut cursor = "0".to_owned();
    let mut deleted = 0;
    loop {
        let (next, keys): (String, Vec<String>) = redis.scan_page(cursor, pattern.as_str(), Some(1000), None).await?;
        if !keys.is_empty() {
            deleted += redis.del::<u64, _>(keys).await?;
        }
        if next == "0" {
            return Ok(deleted);
        }
        cursor = next;
    }
}

// ---------------------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------------------

fn print_plan(options: &Options, shoppers: &[Shopper], target: &Target, keys: &Keys) {
    let double_clickers = shoppers.iter().filter(|s| s.requests > 1).count();
    let duplicate_requests: usize = shoppers.iter().map(|s| s.requests - 1).sum();
    let lock = if options.use_lock { "ON (try_lock() on lock:order:<user id>)" } else { "OFF (--no-lock)" };
    println!("seckill: {} users want {VOUCHER}, {} in stock, one per user", options.users, options.stock);
    println!("  {double_clickers} users double-click: {duplicate_requests} duplicate requests, sent concurrently");
    println!(
        "  service instances: {}, users at a time: {}, order lock: {lock}",
        options.instances, options.concurrency
    );
    if target.is_own() {
        println!("  redis: started a throwaway redis-server at {} (set REDIS_URL to use yours)", target.url());
    } else {
        println!("  redis: the server in REDIS_URL; this run's keys: {}* (deleted at the end)", keys.prefix);
    }
    println!();
}

fn print_results(options: &Options, tally: &Tally, audit: &Audit, elapsed: Duration) {
    let seconds = elapsed.as_secs_f64();
    let repeat_buyers = audit.repeat_buyers();
    println!();
    println!("results");
    println!(
        "  requests              {} in {seconds:.2} s: {:.0} requests/s",
        tally.requests,
        tally.requests as f64 / seconds
    );
    println!("  orders placed         {} (stock {}, {} left)", audit.orders(), audit.initial_stock, audit.stock_left);
    println!("  sold out              {} requests turned away", tally.sold_out);
    println!(
        "  duplicates rejected   {} ({} by the lock, {} by the order check)",
        tally.lock_busy + tally.already_ordered,
        tally.lock_busy,
        tally.already_ordered,
    );
    println!(
        "  duplicates slipped    {} users with more than one order ({} extra orders)",
        repeat_buyers.len(),
        audit.extra_orders(),
    );
    println!("  oversold              {}", audit.oversold());
    println!("  try_lock latency      {}", latency_summary(options, &tally.try_lock_latencies));
    if let Some(first) = &tally.first_failure {
        println!("  failed requests       {} (first: {first})", tally.failures);
    }
    println!();
}

fn latency_summary(options: &Options, latencies: &[Duration]) -> String {
    if !options.use_lock {
        return "n/a (--no-lock takes no lock)".to_owned();
    }
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    match (percentile(&sorted, 50), percentile(&sorted, 99)) {
        (Some(p50), Some(p99)) => format!("p50 {}  p99 {}  ({} calls)", millis(p50), millis(p99), sorted.len()),
        _ => "no calls".to_owned(),
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], percent: usize) -> Option<Duration> {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// Checks the invariants, prints the verdict, and says whether the run passed.
fn verdict(options: &Options, tally: &Tally, audit: &Audit) -> bool {
    let mut broken = Vec::new();
    if audit.oversold() > 0 {
        broken.push(format!("OVERSOLD: {} orders for {} vouchers", audit.orders(), audit.initial_stock));
    }
    if audit.stock_left < 0 {
        broken.push(format!("stock went below zero: {}", audit.stock_left));
    }
    if audit.orders() + audit.stock_left != audit.initial_stock {
        broken.push(format!(
            "stock does not add up: {} sold + {} left != {} at the start",
            audit.orders(),
            audit.stock_left,
            audit.initial_stock,
        ));
    }
    if let Some(first) = &tally.first_failure {
        broken.push(format!("{} requests failed; the first: {first}", tally.failures));
    }

    let repeat_buyers = audit.repeat_buyers();
    if !repeat_buyers.is_empty() {
        let message = format!(
            "DUPLICATE ORDERS: {} users got more than one order ({} extra orders), e.g. {}",
            repeat_buyers.len(),
            audit.extra_orders(),
            sample(&repeat_buyers),
        );
        if options.use_lock {
            broken.push(message);
        } else {
            println!("!! {message}");
            println!("!! Without the lock, a user's concurrent requests all pass the \"already ordered?\" check");
            println!("!! before any of them records its order. Expected with --no-lock; run without it to compare.");
        }
    } else if !options.use_lock {
        println!("No duplicate slipped through this time: the race depends on timing. Rerun, or raise --dup-rate.");
    }

    if broken.is_empty() {
        if options.use_lock {
            println!("OK: no user has more than one order, and nothing was oversold.");
        } else {
            println!("OK: nothing oversold (the stock script needs no lock); exit status 0 in --no-lock mode.");
        }
        return true;
    }
    for problem in &broken {
        eprintln!("FAILED: {problem}");
    }
    false
}

fn sample(repeat_buyers: &[(usize, i64)]) -> String {
    let shown: Vec<String> =
        repeat_buyers.iter().take(5).map(|(user, count)| format!("user {user}: {count} orders")).collect();
    shown.join(", ")
}

// ---------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------

async fn run(options: &Options, target: &Target) -> Result<bool, DynError> {
    let keys = Arc::new(Keys::for_new_run());
    let shoppers = plan_shoppers(options);
    print_plan(options, &shoppers, target, &keys);

    let url = target.url();
    let mut services = Vec::with_capacity(options.instances);
    for _ in 0..options.instances {
        services.push(OrderService::connect(url, Arc::clone(&keys), options.use_lock).await?);
    }
    let services = Arc::new(services);
    let admin = &services[0].redis;
    admin.fred().set::<(), _, _>(&keys.stock, options.stock, None, None, false).await?;

    let total_requests = shoppers.iter().map(|s| s.requests).sum();
    let live = Arc::new(LiveCounters::default());
    let started = Instant::now();
    let progress = spawn_progress(Arc::clone(&live), total_requests, started);
    let tally = run_sale(&services, &shoppers, options.concurrency, &live).await;
    let elapsed = started.elapsed();
    progress.abort();
    // Wait for the abort, so that no progress line lands in the middle of the results.
    let _ = progress.await;

    let audit = Audit::read(admin, &keys, options.stock).await?;
    print_results(options, &tally, &audit, elapsed);
    let passed = verdict(options, &tally, &audit);

    if !target.is_own() {
        match delete_run_keys(admin, &keys.prefix).await {
            Ok(deleted) => println!("cleanup: deleted {deleted} keys under {}", keys.prefix),
            Err(error) => {
                eprintln!("warning: could not delete this run's keys ({}*): {error}", keys.prefix);
            }
        }
    }
    Ok(passed)
}

/// Runs the sale with the flags of the command line; also the body of the `prometheus`
/// example (`demo/examples/prometheus.rs`), which serves the lock metrics meanwhile.
pub(crate) fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(options)) => options,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Before the runtime: starting a server blocks until it answers PING.
    let target = Target::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("start the tokio runtime");
    let result = runtime.block_on(run(&options, &target));
    // Returning (rather than `process::exit`) lets the throwaway redis-server be killed on drop.
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            // leasehold's errors include fred's details in their message.
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
