//! Paused-time tests of the renewal scheduler.
//!
//! The scheduler talks to a [`FakeRenewer`] that records every call (when it was made,
//! which holds, which lease) and answers from switches the test flips: keys whose owner
//! is gone, calls failing with a connection error, a delay per call. Time is tokio's
//! paused clock, so every instant asserted below is exact and the tests are instant.

use std::collections::{BTreeSet, HashSet};

use lock_core::{Error, ErrorKind};
use tokio::time::{sleep, sleep_until};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Whole milliseconds from `t0` to `at`.
fn ms_since(t0: Instant, at: Instant) -> u64 {
    u64::try_from((at - t0).as_millis()).expect("test offsets fit in u64")
}

/// One `renew` call as the fake saw it.
#[derive(Debug, Clone)]
struct Call {
    at: Instant,
    holds: Vec<(String, String)>,
    lease_ms: u64,
    failed: bool,
}

impl Call {
    fn keys(&self) -> impl Iterator<Item = &str> {
        self.holds.iter().map(|(key, _)| key.as_str())
    }

    fn has(&self, key: &str) -> bool {
        self.keys().any(|k| k == key)
    }
}

#[derive(Debug, Default)]
struct FakeState {
    calls: Vec<Call>,
    /// The `verify` calls, apart from the renewals (`lease_ms` 0).
    checks: Vec<Call>,
    /// Keys whose owner field is "gone": answered `false`.
    gone: HashSet<String>,
    /// Calls fail with a connection error while set.
    fail: bool,
    /// How long each call takes to answer.
    delay: Duration,
    /// When `follow_topology` was called.
    topology_reads: Vec<Instant>,
    /// The next `follow_topology` answers "the primaries changed" while set.
    primaries_changed: bool,
}

/// An in-memory [`Renewer`]; clones share one state.
#[derive(Debug, Clone, Default)]
struct FakeRenewer {
    state: Arc<Mutex<FakeState>>,
}

impl FakeRenewer {
    fn calls(&self) -> Vec<Call> {
        self.state.lock().calls.clone()
    }

    fn call_count(&self) -> usize {
        self.state.lock().calls.len()
    }

    fn checks(&self) -> Vec<Call> {
        self.state.lock().checks.clone()
    }

    /// Offsets from `t0`, in ms, of every call made.
    fn offsets(&self, t0: Instant) -> Vec<u64> {
        self.state.lock().calls.iter().map(|c| ms_since(t0, c.at)).collect()
    }

    fn set_fail(&self, fail: bool) {
        self.state.lock().fail = fail;
    }

    fn set_gone(&self, key: &str) {
        self.state.lock().gone.insert(key.to_owned());
    }

    fn topology_reads(&self) -> Vec<Instant> {
        self.state.lock().topology_reads.clone()
    }

    fn set_primaries_changed(&self) {
        self.state.lock().primaries_changed = true;
    }

    fn set_delay(&self, delay: Duration) {
        self.state.lock().delay = delay;
    }

    /// How many handles on the shared state exist: the test's own, plus one while the
    /// scheduler task (which owns a clone) is alive.
    fn handles(&self) -> usize {
        Arc::strong_count(&self.state)
    }
}

impl Renewer for FakeRenewer {
    async fn renew(&self, holds: Vec<(String, String)>, lease_ms: u64) -> lock_core::Result<Vec<bool>> {
        let (delay, result) = {
            let mut state = self.state.lock();
            let failed = state.fail;
            let result = if failed {
                Err(Error::new(ErrorKind::Connection, "fake renewer: connection refused"))
            } else {
                Ok(holds.iter().map(|(key, _)| !state.gone.contains(key)).collect())
            };
            state.calls.push(Call { at: Instant::now(), holds, lease_ms, failed });
            (state.delay, result)
        };
        if !delay.is_zero() {
            sleep(delay).await;
        }
        result
    }

    async fn verify(&self, holds: Vec<(String, String)>) -> lock_core::Result<Vec<bool>> {
        let (delay, result) = {
            let mut state = self.state.lock();
            let failed = state.fail;
            let result = if failed {
                Err(Error::new(ErrorKind::Connection, "fake renewer: connection refused"))
            } else {
                Ok(holds.iter().map(|(key, _)| !state.gone.contains(key)).collect())
            };
            state.checks.push(Call { at: Instant::now(), holds, lease_ms: 0, failed });
            (state.delay, result)
        };
        if !delay.is_zero() {
            sleep(delay).await;
        }
        result
    }

    async fn follow_topology(&self) -> bool {
        let mut state = self.state.lock();
        state.topology_reads.push(Instant::now());
        std::mem::take(&mut state.primaries_changed)
    }
}

fn config(timeout: Duration, batch_size: usize) -> WatchdogConfig {
    WatchdogConfig { timeout, batch_size, group_by_slot: false, topology_check: None, observer: None }
}

fn owner_of(key: &str) -> String {
    format!("owner:{key}")
}

/// Registers `key` as freshly acquired: its lease runs out one timeout from now.
fn hold(watchdog: &Watchdog, key: &str) -> (Arc<LeaseState>, Renewal) {
    let lease = Arc::new(LeaseState::new(Instant::now() + watchdog.config().timeout));
    let renewal = watchdog.register(Arc::from(key), OwnerId::from_raw(&owner_of(key)), &lease);
    (lease, renewal)
}

// 1. Period.

/// Renewed every `timeout / 3`; each success sets the deadline to `sent_at + timeout`;
/// never lost over ten timeouts.
#[tokio::test(start_paused = true)]
async fn renews_every_period_and_extends_the_deadline_from_each_send() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease, _renewal) = hold(&watchdog, "lock-a");
    assert_eq!(lease.expires_at(), t0 + ms(300));

    // Sample every 10 ms (between renewals) for 10 × the timeout.
    for step in 0..300 {
        sleep_until(t0 + ms(step * 10 + 5)).await;
        assert!(!lease.is_lost(), "lost at {step}0+5 ms");
        let expected = fake.calls().last().map_or(t0 + ms(300), |last| last.at + ms(300));
        assert_eq!(lease.expires_at(), expected, "deadline is the last send + timeout at {step}0+5 ms");
    }

    let expected: Vec<u64> = (1..=29).map(|i| i * 100).collect();
    assert_eq!(fake.offsets(t0), expected, "one renewal per 100 ms");
    for call in fake.calls() {
        assert_eq!(call.lease_ms, 300);
        assert_eq!(call.holds, vec![("lock-a".to_owned(), owner_of("lock-a"))]);
    }
    let stats = watchdog.stats();
    assert_eq!((stats.registered, stats.rounds, stats.calls), (1, 29, 29));
    assert_eq!((stats.failed_calls, stats.lost), (0, 0));
}

/// The deadline counts from when a renewal was sent, not from when it was answered.
#[tokio::test(start_paused = true)]
async fn deadline_counts_from_the_send_of_a_slow_renewal() {
    let fake = FakeRenewer::default();
    fake.set_delay(ms(40));
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease, _renewal) = hold(&watchdog, "lock-a");

    sleep_until(t0 + ms(120)).await;
    assert_eq!(lease.expires_at(), t0 + ms(300), "not extended before the answer");
    sleep_until(t0 + ms(150)).await;
    assert_eq!(lease.expires_at(), t0 + ms(400), "sent at 100 ms, answered at 140 ms");
    sleep_until(t0 + ms(350)).await;
    assert_eq!(fake.offsets(t0), vec![100, 200, 300], "the period is kept despite the slow answers");
}

// 2. Batching.

/// 250 holds with batch size 100: three concurrent calls per round (100/100/50), every key once.
#[tokio::test(start_paused = true)]
async fn splits_each_round_into_concurrent_batches_of_batch_size() {
    let fake = FakeRenewer::default();
    fake.set_delay(ms(30));
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let keys: Vec<String> = (0..250).map(|i| format!("lock-{i:03}")).collect();
    let _holds: Vec<_> = keys.iter().map(|key| hold(&watchdog, key)).collect();

    sleep_until(t0 + ms(250)).await;
    let calls = fake.calls();
    assert_eq!(calls.len(), 6, "two rounds of three calls");
    for (round, at) in [(0, 100), (1, 200)] {
        let round_calls = &calls[round * 3..round * 3 + 3];
        assert!(
            round_calls.iter().all(|c| ms_since(t0, c.at) == at),
            "round {round}: all three calls sent at once at {at} ms, not one after another"
        );
        let mut sizes: Vec<usize> = round_calls.iter().map(|c| c.holds.len()).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, vec![50, 100, 100], "round {round}");
        let mut sent: Vec<&str> = round_calls.iter().flat_map(Call::keys).collect();
        sent.sort_unstable();
        assert_eq!(sent, keys.iter().map(String::as_str).collect::<Vec<_>>(), "round {round}: every key once");
        for call in round_calls {
            assert!(call.holds.iter().all(|(key, owner)| *owner == owner_of(key)), "owners travel with their keys");
        }
    }
    assert_eq!(watchdog.stats().calls, 6);
}

// 3. Owner gone.

/// A hold whose owner field is gone is marked lost within one period and never sent again;
/// the others keep being renewed.
#[tokio::test(start_paused = true)]
async fn owner_gone_marks_lost_once_and_stops_renewing_that_hold() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease_a, renewal_a) = hold(&watchdog, "lock-a");
    let (lease_b, renewal_b) = hold(&watchdog, "lock-b");
    let (lease_c, renewal_c) = hold(&watchdog, "lock-c");

    sleep_until(t0 + ms(250)).await;
    fake.set_gone("lock-b");
    sleep_until(t0 + ms(350)).await;
    assert!(lease_b.is_marked_lost(), "lost within one period of the owner going");
    assert!(!renewal_b.is_active());
    assert!(!lease_a.is_lost() && !lease_c.is_lost());
    assert!(renewal_a.is_active() && renewal_c.is_active());
    let stats = watchdog.stats();
    assert_eq!((stats.registered, stats.lost), (2, 1));

    sleep_until(t0 + ms(1050)).await;
    let calls = fake.calls();
    assert_eq!(calls.len(), 10, "one call per round for 10 rounds");
    for call in &calls {
        let at = ms_since(t0, call.at);
        assert_eq!(call.has("lock-b"), at <= 300, "lock-b is sent until it is found gone (call at {at} ms)");
        assert!(call.has("lock-a") && call.has("lock-c"), "the others are renewed at {at} ms");
    }
    assert_eq!(lease_a.expires_at(), t0 + ms(1300));
    assert_eq!(lease_c.expires_at(), t0 + ms(1300));
    assert_eq!(watchdog.stats().lost, 1, "marked lost once");
}

// 4. Retry until the deadline.

/// Failing calls are retried every `retry_interval` until the deadline set by the last
/// successful send; the hold is marked lost then (not before), and never sent again.
#[tokio::test(start_paused = true)]
async fn failing_renewals_retry_until_the_deadline_then_mark_lost() {
    let fake = FakeRenewer::default();
    let cfg = config(ms(300), 100);
    let (period, retry) = (cfg.period(), cfg.retry_interval());
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let t0 = Instant::now();
    let (lease, renewal) = hold(&watchdog, "lock-a");

    sleep_until(t0 + ms(250)).await;
    let deadline = lease.expires_at();
    assert_eq!(deadline, t0 + ms(500), "last success sent at 200 ms");
    fake.set_fail(true);

    sleep_until(deadline - ms(1)).await;
    assert!(!lease.is_lost() && !lease.is_marked_lost(), "still held just before the deadline");
    assert!(renewal.is_active());
    sleep_until(deadline + ms(1)).await;
    assert!(lease.is_marked_lost(), "marked lost at the deadline (the sweep), nobody looking");
    assert!(!renewal.is_active());

    let failed: Vec<Instant> = fake.calls().iter().filter(|c| c.failed).map(|c| c.at).collect();
    assert_eq!(failed.first().map(|at| ms_since(t0, *at)), Some(300), "first failure at the 300 ms round");
    for pair in failed.windows(2) {
        let gap = pair[1] - pair[0];
        assert_eq!(gap, retry, "retried every retry interval");
        assert!(gap < period, "retries are faster than the period");
    }
    let last = *failed.last().expect("there were failed calls");
    assert!(last <= deadline && deadline - last <= retry, "retried until the deadline, not after");
    let stats = watchdog.stats();
    assert_eq!((stats.registered, stats.lost), (0, 1));
    assert_eq!(stats.failed_calls, u64::try_from(failed.len()).expect("small"));

    // The scheduler keeps running for a new hold, but the lost one is never sent again.
    fake.set_fail(false);
    sleep_until(t0 + ms(650)).await;
    let (lease_b, _renewal_b) = hold(&watchdog, "lock-b");
    sleep_until(t0 + ms(1500)).await;
    let later: Vec<Call> = fake.calls().into_iter().filter(|c| c.at > last).collect();
    assert_eq!(later.len(), 8, "lock-b renewed every period from 750 ms");
    assert!(later.iter().all(|c| !c.has("lock-a")), "lock-a never sent after being lost");
    assert!(!lease_b.is_lost());
}

// 5. Transient failure.

/// Failing for less than the lease, then succeeding: not lost, the deadline moves on,
/// and retries stop (back to one call per period).
#[tokio::test(start_paused = true)]
async fn transient_failure_recovers_and_returns_to_the_period() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease, renewal) = hold(&watchdog, "lock-a");

    sleep_until(t0 + ms(250)).await;
    fake.set_fail(true);
    sleep_until(t0 + ms(330)).await;
    assert!(!lease.is_lost());
    assert_eq!(lease.expires_at(), t0 + ms(500), "failures do not extend");
    fake.set_fail(false);
    sleep_until(t0 + ms(350)).await;
    assert_eq!(lease.expires_at(), t0 + ms(640), "the retry at 340 ms succeeded");

    sleep_until(t0 + ms(1050)).await;
    assert_eq!(
        fake.offsets(t0),
        vec![100, 200, 300, 320, 340, 400, 500, 600, 700, 800, 900, 1000],
        "retries at 320/340 ms, then the period rhythm again"
    );
    let failed: Vec<u64> = fake.calls().iter().filter(|c| c.failed).map(|c| ms_since(t0, c.at)).collect();
    assert_eq!(failed, vec![300, 320]);
    assert!(!lease.is_lost() && !lease.is_marked_lost());
    assert!(renewal.is_active());
    assert_eq!(lease.expires_at(), t0 + ms(1300));
    let stats = watchdog.stats();
    assert_eq!((stats.failed_calls, stats.lost, stats.calls), (2, 0, 12));
}

// 6. Deregistration.

/// Dropping a `Renewal` removes the hold at once: it is never sent again, and once
/// nothing is registered the scheduler goes idle (no more rounds).
#[tokio::test(start_paused = true)]
async fn dropped_renewal_is_never_sent_again() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (_lease_a, renewal_a) = hold(&watchdog, "lock-a");
    let (lease_b, renewal_b) = hold(&watchdog, "lock-b");
    assert!(renewal_a.is_active() && renewal_b.is_active());
    assert_eq!(watchdog.stats().registered, 2);

    sleep_until(t0 + ms(250)).await;
    drop(renewal_b);
    assert_eq!(watchdog.stats().registered, 1, "deregistered synchronously");
    sleep_until(t0 + ms(1050)).await;
    for call in fake.calls() {
        let at = ms_since(t0, call.at);
        assert_eq!(call.has("lock-b"), at < 250, "lock-b only sent before its drop (call at {at} ms)");
        assert!(call.has("lock-a"));
    }
    assert_eq!(fake.call_count(), 10);
    assert_eq!(lease_b.expires_at(), t0 + ms(500), "not extended after the drop");
    assert!(!lease_b.is_marked_lost(), "deregistering is not losing");

    drop(renewal_a);
    assert_eq!(watchdog.stats().registered, 0);
    sleep_until(t0 + ms(1200)).await;
    let (calls, rounds) = (fake.call_count(), watchdog.stats().rounds);
    sleep_until(t0 + ms(5000)).await;
    assert_eq!(fake.call_count(), calls, "no calls with nothing registered");
    assert_eq!(watchdog.stats().rounds, rounds, "no empty rounds either: the scheduler idles");
}

/// A hold dropped while its renewal is in flight is left alone when the answer lands.
#[tokio::test(start_paused = true)]
async fn renewal_dropped_mid_call_is_not_extended() {
    let fake = FakeRenewer::default();
    fake.set_delay(ms(50));
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease, renewal) = hold(&watchdog, "lock-a");

    sleep_until(t0 + ms(120)).await;
    assert_eq!(fake.call_count(), 1, "a call is in flight");
    drop(renewal);
    sleep_until(t0 + ms(1000)).await;
    assert_eq!(lease.expires_at(), t0 + ms(300), "the late answer did not extend a deregistered hold");
    assert!(!lease.is_marked_lost());
    assert_eq!(fake.call_count(), 1);
    assert_eq!(watchdog.stats().registered, 0);
}

/// A hold whose `LeaseState` was dropped (without its `Renewal`) is removed at once: the
/// deadline sweep, woken by the first registration, finds its lease gone before the first
/// round (before issue 30 it was sent once, then removed at that round's answer).
#[tokio::test(start_paused = true)]
async fn hold_with_dropped_lease_is_removed() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease, renewal) = hold(&watchdog, "lock-a");
    drop(lease);
    sleep_until(t0 + ms(150)).await;
    assert!(!renewal.is_active());
    assert_eq!(watchdog.stats().registered, 0);
    sleep_until(t0 + ms(1000)).await;
    assert_eq!(fake.call_count(), 0, "never sent");
}

// 7. Shutdown.

/// Dropping the `Watchdog` stops renewals and ends the task.
#[tokio::test(start_paused = true)]
async fn dropping_the_watchdog_stops_renewals_and_ends_the_task() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (lease, renewal) = hold(&watchdog, "lock-a");

    sleep_until(t0 + ms(250)).await;
    assert_eq!(fake.call_count(), 2);
    assert_eq!(fake.handles(), 2, "the task holds a renewer");
    drop(watchdog);
    sleep_until(t0 + ms(2000)).await;
    assert_eq!(fake.call_count(), 2, "no calls after the drop");
    assert_eq!(fake.handles(), 1, "the task ended and dropped its renewer");
    assert!(!renewal.is_active());
    assert!(!lease.is_marked_lost(), "shutdown does not mark holds lost");
    drop(renewal);
}

/// Dropping the `Watchdog` while a round is in flight: the round finishes, then the task ends.
#[tokio::test(start_paused = true)]
async fn dropping_the_watchdog_mid_round_ends_the_task_after_the_round() {
    let fake = FakeRenewer::default();
    fake.set_delay(ms(50));
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (_lease, renewal) = hold(&watchdog, "lock-a");

    sleep_until(t0 + ms(120)).await;
    assert_eq!(fake.call_count(), 1, "a call is in flight");
    drop(watchdog);
    sleep_until(t0 + ms(2000)).await;
    assert_eq!(fake.call_count(), 1, "no calls after the drop");
    assert_eq!(fake.handles(), 1, "the task ended");
    assert!(!renewal.is_active());
}

/// Dropping an idle `Watchdog` (nothing registered) ends its task too.
#[tokio::test(start_paused = true)]
async fn dropping_an_idle_watchdog_ends_the_task() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    sleep_until(t0 + ms(1000)).await;
    assert_eq!(fake.handles(), 2, "the task is alive and idle");
    drop(watchdog);
    sleep_until(t0 + ms(2000)).await;
    assert_eq!(fake.handles(), 1, "the idle task ended");

    // Same after a hold came and went.
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let (_lease, renewal) = hold(&watchdog, "lock-a");
    sleep_until(t0 + ms(2150)).await;
    assert_eq!(fake.call_count(), 1);
    drop(renewal);
    sleep_until(t0 + ms(3000)).await;
    drop(watchdog);
    sleep_until(t0 + ms(4000)).await;
    assert_eq!(fake.handles(), 1, "the task idle after a deregistration ended");
}

// 8. Idle.

/// With nothing registered no calls or rounds happen; a hold registered after a long idle
/// time is renewed within one period.
#[tokio::test(start_paused = true)]
async fn idle_scheduler_makes_no_calls_and_wakes_on_register() {
    let fake = FakeRenewer::default();
    let cfg = config(ms(300), 100);
    let period = cfg.period();
    let watchdog = Watchdog::start(fake.clone(), cfg);
    sleep(Duration::from_secs(60)).await;
    assert_eq!(fake.call_count(), 0);
    assert_eq!(watchdog.stats().rounds, 0);

    let registered_at = Instant::now();
    let (lease, _renewal) = hold(&watchdog, "lock-a");
    sleep_until(registered_at + period + ms(1)).await;
    let calls = fake.calls();
    assert_eq!(calls.len(), 1, "renewed within one period of registering");
    assert!(calls[0].at > registered_at && calls[0].at <= registered_at + period);
    assert_eq!(lease.expires_at(), calls[0].at + ms(300));
    sleep_until(registered_at + ms(1050)).await;
    assert_eq!(fake.call_count(), 10, "then every period");
}

// 9. Grouping by hash slot.

/// With `group_by_slot`, each call holds keys of one slot: different tags go to separate
/// calls, keys sharing a `{tag}` share a call.
#[tokio::test(start_paused = true)]
async fn group_by_slot_sends_one_slot_per_call() {
    let slot = |key: &str| fred::util::redis_keyslot(key.as_bytes());
    let keys = ["{user:1}:lock", "{user:1}:other", "{user:2}:lock", "{order:9}:lock", "plain"];
    let slots: BTreeSet<u16> = keys.iter().map(|k| slot(k)).collect();
    assert_eq!(slots.len(), 4, "precondition: the four tags hash to four slots");
    assert_eq!(slot("{user:1}:lock"), slot("{user:1}:other"));

    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), WatchdogConfig { group_by_slot: true, ..config(ms(300), 100) });
    let t0 = Instant::now();
    let _holds: Vec<_> = keys.iter().map(|key| hold(&watchdog, key)).collect();

    sleep_until(t0 + ms(150)).await;
    let calls = fake.calls();
    assert_eq!(calls.len(), 4, "one call per slot");
    for call in &calls {
        let call_slots: BTreeSet<u16> = call.keys().map(slot).collect();
        assert_eq!(call_slots.len(), 1, "one slot per call: {:?}", call.holds);
    }
    let shared = calls.iter().find(|c| c.has("{user:1}:lock")).expect("{user:1}:lock was sent");
    assert!(shared.has("{user:1}:other"), "keys sharing a tag share a call");
    let mut sent: Vec<&str> = calls.iter().flat_map(Call::keys).collect();
    sent.sort_unstable();
    let mut expected = keys.to_vec();
    expected.sort_unstable();
    assert_eq!(sent, expected, "every key once");
}

/// With `group_by_slot`, a slot with more keys than `batch_size` is split, still one slot per call.
#[tokio::test(start_paused = true)]
async fn group_by_slot_still_splits_by_batch_size() {
    let slot = |key: &str| fred::util::redis_keyslot(key.as_bytes());
    let keys = ["{a}:1", "{a}:2", "{a}:3", "{b}:1"];
    assert_ne!(slot("{a}:1"), slot("{b}:1"), "precondition: two slots");

    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), WatchdogConfig { group_by_slot: true, ..config(ms(300), 2) });
    let t0 = Instant::now();
    let _holds: Vec<_> = keys.iter().map(|key| hold(&watchdog, key)).collect();

    sleep_until(t0 + ms(150)).await;
    let calls = fake.calls();
    let mut shape: Vec<(u16, usize)> = calls.iter().map(|c| (slot(&c.holds[0].0), c.holds.len())).collect();
    shape.sort_unstable();
    let mut expected = vec![(slot("{a}:1"), 1), (slot("{a}:1"), 2), (slot("{b}:1"), 1)];
    expected.sort_unstable();
    assert_eq!(shape, expected, "slot {{a}} split 2 + 1, slot {{b}} alone");
    for call in &calls {
        assert!(call.keys().all(|k| slot(k) == slot(&call.holds[0].0)), "one slot per call: {:?}", call.holds);
    }
}

// 10. Configuration.

/// `period` is `timeout / 3`; `retry_interval` is `period / 5` clamped to 10 ms ..= 1 s.
#[test]
fn period_and_retry_interval() {
    let secs30 = config(Duration::from_secs(30), 100);
    assert_eq!(secs30.period(), Duration::from_secs(10));
    assert_eq!(secs30.retry_interval(), Duration::from_secs(1), "2 s clamped to 1 s");

    let ms300 = config(ms(300), 100);
    assert_eq!(ms300.period(), ms(100));
    assert_eq!(ms300.retry_interval(), ms(20));

    let ms3 = config(ms(3), 100);
    assert_eq!(ms3.period(), ms(1));
    assert_eq!(ms3.retry_interval(), ms(10), "200 µs clamped to 10 ms");

    let default = WatchdogConfig::default();
    assert_eq!((default.timeout, default.batch_size, default.group_by_slot), (Duration::from_secs(30), 100, false));
}

/// A timeout under 3 ms (a zero period) is refused.
#[test]
#[should_panic(expected = "at least 3 ms")]
fn start_refuses_a_timeout_under_3_ms() {
    let _watchdog = Watchdog::start(FakeRenewer::default(), config(ms(2), 100));
}

/// A batch size of 0 is refused.
#[test]
#[should_panic(expected = "batch size must be at least 1")]
fn start_refuses_a_zero_batch_size() {
    let _watchdog = Watchdog::start(FakeRenewer::default(), config(ms(300), 0));
}

// Reconnects.

/// `renew_now` (what a reconnect triggers) runs a full round at once, so a hold whose
/// owner the server forgot is reported lost then, not at the next period; the rhythm
/// restarts from that round.
#[tokio::test(start_paused = true)]
async fn renew_now_runs_a_round_at_once_and_restarts_the_rhythm() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(30_000), 100));
    let t0 = Instant::now();
    let (lease, _renewal) = hold(&watchdog, "lock-a");
    sleep_until(t0 + ms(1_000)).await;
    assert_eq!(fake.call_count(), 0, "nothing before the first period");
    fake.set_gone("lock-a");
    watchdog.renew_now();
    sleep_until(t0 + ms(1_001)).await;
    assert!(lease.is_marked_lost(), "lost right after the kick, not at 10 s");
    assert_eq!(fake.offsets(t0), vec![1_000]);

    let (_lease_b, _renewal_b) = hold(&watchdog, "lock-b");
    watchdog.renew_now();
    sleep_until(t0 + ms(1_002)).await;
    sleep_until(t0 + ms(11_002)).await;
    assert_eq!(fake.offsets(t0), vec![1_000, 1_001, 11_001], "the period counts from the kicked round");
}

/// Reconnect events forwarded with `renew_on_each` kick a round; the forwarding task
/// ends with the watchdog.
#[tokio::test(start_paused = true)]
async fn renew_on_each_forwards_events_and_ends_with_the_watchdog() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(30_000), 100));
    let (events, receiver) = broadcast::channel::<()>(4);
    watchdog.renew_on_each(receiver);
    let t0 = Instant::now();
    let (_lease, _renewal) = hold(&watchdog, "lock-a");
    sleep_until(t0 + ms(500)).await;
    events.send(()).expect("the forwarder listens");
    sleep_until(t0 + ms(501)).await;
    assert_eq!(fake.offsets(t0), vec![500]);
    drop(_renewal);
    drop(watchdog);
    sleep_until(t0 + ms(600)).await;
    assert_eq!(events.receiver_count(), 0, "the forwarding task ended with the watchdog");
}

// Tracked holds (fixed leases): checked after reconnects, never renewed.

fn tracked(watchdog: &Watchdog, key: &str, lease: Duration) -> (Arc<LeaseState>, Tracking) {
    let lease = Arc::new(LeaseState::new(Instant::now() + lease));
    let tracking = watchdog.track(Arc::from(key), OwnerId::from_raw(&owner_of(key)), &lease);
    (lease, tracking)
}

/// A tracked hold is never sent periodically; `renew_now` checks it once (its deadline
/// untouched), and a hold whose owner is gone is marked lost at once.
#[tokio::test(start_paused = true)]
async fn tracked_holds_are_checked_once_per_kick_and_never_extended() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(300), 100));
    let t0 = Instant::now();
    let (kept, _kept_tracking) = tracked(&watchdog, "fixed-a", ms(5_000));
    let (gone, gone_tracking) = tracked(&watchdog, "fixed-b", ms(5_000));
    assert_eq!(watchdog.stats().tracked, 2);
    sleep_until(t0 + ms(1_000)).await;
    assert_eq!(fake.call_count(), 0, "no renewal for tracked holds");
    assert!(fake.checks().is_empty(), "no check without a reconnect");

    fake.set_gone("fixed-b");
    watchdog.renew_now();
    sleep_until(t0 + ms(1_001)).await;
    let checks = fake.checks();
    assert_eq!(checks.len(), 1, "one batch for both");
    assert!(checks[0].has("fixed-a") && checks[0].has("fixed-b"));
    assert!(gone.is_marked_lost(), "the gone hold is lost right after the kick");
    assert!(!gone_tracking.is_active());
    assert!(!kept.is_lost());
    assert_eq!(kept.expires_at(), t0 + ms(5_000), "a check never extends a fixed lease");
    sleep_until(t0 + ms(3_000)).await;
    assert_eq!(fake.checks().len(), 1, "checked once: no retries after an answer");
    let stats = watchdog.stats();
    assert_eq!((stats.tracked, stats.lost, stats.checks, stats.registered), (1, 1, 1, 0));
}

/// A failed check is sent again every retry interval until it is answered; once the
/// hold's deadline has passed it is no longer checked (its `lost()` fired on its own),
/// and it is not marked lost by the failures.
#[tokio::test(start_paused = true)]
async fn failed_checks_are_retried_until_answered_or_the_deadline() {
    let fake = FakeRenewer::default();
    let cfg = config(ms(300), 100);
    let retry = cfg.retry_interval();
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let t0 = Instant::now();
    let (lease, _tracking) = tracked(&watchdog, "fixed-a", ms(500));
    fake.set_fail(true);
    watchdog.renew_now();
    sleep_until(t0 + ms(200)).await;
    fake.set_fail(false);
    sleep_until(t0 + ms(200) + retry + ms(1)).await;
    let checks: Vec<u64> = fake.checks().iter().map(|c| ms_since(t0, c.at)).collect();
    assert!(checks.len() >= 3, "retried every {retry:?}: {checks:?}");
    assert!(checks.windows(2).all(|w| w[1] - w[0] == ms_since(t0, t0 + retry)), "{checks:?}");
    assert!(!fake.checks().last().expect("a check").failed, "the last one was answered");
    let answered = fake.checks().len();
    sleep_until(t0 + ms(400)).await;
    assert_eq!(fake.checks().len(), answered, "no more checks once answered");
    assert!(!lease.is_marked_lost());

    // Failing past the deadline: checks stop at the deadline, the hold is not marked lost.
    fake.set_fail(true);
    watchdog.renew_now();
    sleep_until(t0 + ms(2_000)).await;
    let last = fake.checks().last().map(|c| ms_since(t0, c.at)).expect("checks");
    assert!(last <= 500 + ms_since(t0, t0 + retry), "no check long after the deadline: {last} ms");
    assert!(lease.is_lost() && !lease.is_marked_lost());
    assert!(watchdog.stats().failed_checks >= 2);
}

/// A tracked hold that the watchdog also renews is checked by the renewal (one call per
/// kick, not two), and dropping a `Tracking` stops its checks.
#[tokio::test(start_paused = true)]
async fn renewed_holds_are_not_checked_twice_and_dropped_trackings_stop() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(30_000), 100));
    let t0 = Instant::now();
    let (lease, renewal) = hold(&watchdog, "both");
    let tracking = watchdog.track(Arc::from("both"), OwnerId::from_raw(&owner_of("both")), &lease);
    let (_other, other_tracking) = tracked(&watchdog, "fixed", ms(20_000));
    watchdog.renew_now();
    sleep_until(t0 + ms(1)).await;
    assert_eq!(fake.call_count(), 1, "the renewal round ran");
    assert!(fake.calls()[0].has("both"));
    let checks = fake.checks();
    assert_eq!(checks.len(), 1);
    assert!(checks[0].has("fixed") && !checks[0].has("both"), "{:?}", checks[0].holds);

    drop(other_tracking);
    drop(renewal);
    watchdog.renew_now();
    sleep_until(t0 + ms(2)).await;
    let checks = fake.checks();
    assert_eq!(checks.len(), 2, "the renewal gone, the tracked hold is checked itself");
    assert!(checks[1].has("both") && !checks[1].has("fixed"), "{:?}", checks[1].holds);
    drop(tracking);
    assert_eq!(watchdog.stats().tracked, 0);
    watchdog.renew_now();
    sleep_until(t0 + ms(3)).await;
    assert_eq!(fake.checks().len(), 2, "nothing tracked: nothing checked");
}

/// With `topology_check` set, the topology is read every interval while a hold is
/// registered or tracked, never while none is; a reported change of primary renews every
/// registered hold and checks every tracked one at once, as a reconnect does.
#[tokio::test(start_paused = true)]
async fn a_change_of_primary_found_by_the_topology_check_renews_and_checks_at_once() {
    let fake = FakeRenewer::default();
    let mut cfg = config(ms(30_000), 100);
    cfg.topology_check = Some(ms(1_000));
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let t0 = Instant::now();
    sleep_until(t0 + ms(3_500)).await;
    assert!(fake.topology_reads().is_empty(), "no read while nothing is held");

    let (fixed, _tracking) = tracked(&watchdog, "fixed-a", ms(300_000));
    let (renewed, _renewal) = hold(&watchdog, "renewed-a");
    sleep_until(t0 + ms(5_600)).await;
    let reads: Vec<u64> = fake.topology_reads().iter().map(|at| ms_since(t0, *at)).collect();
    assert_eq!(reads, [4_000, 5_000], "one read per interval while held");
    assert!(fake.checks().is_empty() && fake.calls().is_empty(), "unchanged: nothing sent");

    fake.set_gone("fixed-a");
    fake.set_gone("renewed-a");
    fake.set_primaries_changed();
    sleep_until(t0 + ms(6_001)).await;
    assert_eq!(fake.calls().len(), 1, "a renewal round at the change, not at the period (10 s)");
    assert_eq!(fake.checks().len(), 1, "a check of the tracked hold at the change");
    assert!(fixed.is_marked_lost() && renewed.is_marked_lost());
    let stats = watchdog.stats();
    assert_eq!((stats.topology_changes, stats.lost, stats.registered, stats.tracked), (1, 2, 0, 0));

    let read_so_far = fake.topology_reads().len();
    sleep_until(t0 + ms(9_500)).await;
    assert_eq!(fake.topology_reads().len(), read_so_far, "no reads once nothing is held");
}

/// Without `topology_check` (the default, a standalone server) the topology is never read.
#[tokio::test(start_paused = true)]
async fn no_topology_check_by_default() {
    let fake = FakeRenewer::default();
    let watchdog = Watchdog::start(fake.clone(), config(ms(3_000), 100));
    let (_lease, _renewal) = hold(&watchdog, "lock-a");
    sleep(ms(10_000)).await;
    assert!(fake.topology_reads().is_empty());
    assert!(fake.call_count() >= 9, "renewed meanwhile");
}

// 11. Losses reported once, at the deadline.

/// Records every loss the watchdog reports, and whether the hold read lost already
/// when it was told (it must not: reported before marked).
#[derive(Debug, Default)]
struct LossLog {
    lost: Mutex<Vec<(String, &'static str, LostReason)>>,
}

impl WatchdogObserver for LossLog {
    fn lost(&self, key: &str, tag: &'static str, reason: LostReason) {
        self.lost.lock().push((key.to_owned(), tag, reason));
    }
}

impl LossLog {
    fn reported(&self) -> Vec<(String, &'static str, LostReason)> {
        self.lost.lock().clone()
    }
}

fn observed(timeout: Duration) -> (WatchdogConfig, Arc<LossLog>) {
    let log = Arc::new(LossLog::default());
    let mut cfg = config(timeout, 100);
    cfg.observer = Some(Arc::clone(&log) as Arc<dyn WatchdogObserver>);
    (cfg, log)
}

/// A partition: every renewal hangs far past the lease (the command timeout is longer).
/// The hold is lost at its deadline, and by the time its `lost()` resolves the loss is
/// counted and reported once, with `renewals_failed`; dropping the renewal right then
/// (a guard dropped when `lost()` fires) and the hanging calls failing later count
/// nothing more.
#[tokio::test(start_paused = true)]
async fn a_partition_is_reported_once_by_the_time_lost_resolves() {
    let fake = FakeRenewer::default();
    let (cfg, log) = observed(ms(300));
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let t0 = Instant::now();
    let (lease, renewal) = hold_tagged(&watchdog, "lock-a", "read");
    sleep_until(t0 + ms(150)).await;
    assert_eq!(lease.expires_at(), t0 + ms(400), "renewed once at 100 ms");
    fake.set_delay(ms(5_000));
    fake.set_fail(true);

    lease.lost().await;
    assert_eq!(Instant::now(), t0 + ms(400), "lost() fires at the deadline");
    assert_eq!(watchdog.stats().lost, 1, "counted by the time lost() resolved");
    assert_eq!(log.reported(), vec![("lock-a".to_owned(), "read", LostReason::RenewalsFailed)]);
    drop(renewal);
    sleep_until(t0 + ms(12_000)).await;
    assert!(fake.calls().iter().any(|c| c.failed), "the hanging calls did fail, later");
    assert_eq!(watchdog.stats().lost, 1, "and counted nothing more");
    assert_eq!(log.reported().len(), 1);
}

/// Nobody looks at the hold (no `lost()`, no `is_lost()`) and its renewal hangs: the
/// watchdog's sweep reports it at the deadline, not when the call fails; the hold
/// leaves the renewed holds, is never sent again, and is reported once.
#[tokio::test(start_paused = true)]
async fn an_unwatched_hold_is_reported_at_its_deadline_by_the_sweep() {
    let fake = FakeRenewer::default();
    let (cfg, log) = observed(ms(300));
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let t0 = Instant::now();
    let (lease, renewal) = hold_tagged(&watchdog, "lock-a", "permit");
    let (other, _other_renewal) = hold_tagged(&watchdog, "lock-b", "lock");
    sleep_until(t0 + ms(150)).await;
    fake.set_delay(ms(2_000));
    fake.set_fail(true);
    sleep_until(t0 + ms(399)).await;
    assert_eq!(watchdog.stats().lost, 0);
    sleep_until(t0 + ms(401)).await;
    assert_eq!(watchdog.stats().lost, 2, "both reported at their deadline (400 ms)");
    assert!(lease.is_marked_lost() && other.is_marked_lost() && !renewal.is_active());
    assert_eq!(watchdog.stats().registered, 0);
    let reasons: BTreeSet<_> =
        log.reported().into_iter().map(|(key, tag, reason)| (key, tag, reason.as_str())).collect();
    assert_eq!(
        reasons,
        BTreeSet::from([
            ("lock-a".to_owned(), "permit", "renewals_failed"),
            ("lock-b".to_owned(), "lock", "renewals_failed")
        ])
    );
    // The partition heals: nothing of the lost holds is renewed again.
    fake.set_delay(ms(0));
    fake.set_fail(false);
    let sent = fake.call_count();
    sleep_until(t0 + ms(5_000)).await;
    assert_eq!(fake.call_count(), sent, "no renewal of a lost hold after the partition healed");
    assert_eq!(watchdog.stats().lost, 2);
}

/// The owner gone at a renewal, then the deadline passing, then the renewal dropped:
/// one report (`owner_gone`), not three.
#[tokio::test(start_paused = true)]
async fn a_hold_found_gone_is_not_reported_again_at_its_deadline() {
    let fake = FakeRenewer::default();
    let (cfg, log) = observed(ms(300));
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let t0 = Instant::now();
    let (lease, renewal) = hold_tagged(&watchdog, "lock-a", "write");
    fake.set_gone("lock-a");
    lease.lost().await;
    assert_eq!(Instant::now(), t0 + ms(100), "found gone at the first renewal");
    sleep_until(t0 + ms(1_000)).await;
    assert!(lease.is_lost());
    drop(renewal);
    assert_eq!(log.reported(), vec![("lock-a".to_owned(), "write", LostReason::OwnerGone)]);
    assert_eq!(watchdog.stats().lost, 1);
}

/// A renewal dropped before its deadline (unlocked in time) reports nothing, even when
/// the deadline passes later; one dropped after its deadline passed unseen reports it
/// (the guard was dropped before anyone looked).
#[tokio::test(start_paused = true)]
async fn a_renewal_dropped_in_time_reports_nothing_and_one_dropped_late_reports_once() {
    let fake = FakeRenewer::default();
    let (cfg, log) = observed(ms(3_000));
    let watchdog = Watchdog::start(fake.clone(), cfg);
    let (in_time, renewal) = hold_tagged(&watchdog, "lock-a", "lock");
    drop(renewal);
    sleep_until(Instant::now() + ms(5_000)).await;
    assert!(in_time.is_lost() && !in_time.is_marked_lost(), "ended at its deadline, as a fixed lease");
    assert!(log.reported().is_empty());

    // Renewals hang; the renewal is dropped at the deadline instant, racing the sweep:
    // whichever sees the deadline first reports it, once.
    fake.set_delay(ms(60_000));
    let (late, renewal) = hold_tagged(&watchdog, "lock-b", "lock");
    let deadline = late.expires_at();
    sleep_until(deadline).await;
    drop(renewal);
    assert!(late.is_marked_lost());
    sleep_until(deadline + ms(100)).await;
    assert_eq!(log.reported(), vec![("lock-b".to_owned(), "lock", LostReason::RenewalsFailed)]);
}

/// Registers `key` with a tag, as freshly acquired.
fn hold_tagged(watchdog: &Watchdog, key: &str, tag: &'static str) -> (Arc<LeaseState>, Renewal) {
    let lease = Arc::new(LeaseState::new(Instant::now() + watchdog.config().timeout));
    let renewal = watchdog.register_tagged(Arc::from(key), OwnerId::from_raw(&owner_of(key)), &lease, tag);
    (lease, renewal)
}
