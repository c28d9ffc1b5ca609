//! Paused-time tests of the wait engine.
//!
//! The engine waits for a [`FakeAttempt`] that answers from a script the test writes
//! (acquired, held with a TTL, a transient or a definite error) and records when each
//! attempt was made and each clean-up ran, in a [`FakeLine`] whose only wake-up is the
//! one the test gives. Time is tokio's paused clock, so every instant asserted below is
//! exact and the tests are instant.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Error, ErrorKind, QueueKind, Result, WaitChannel};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::*;
use crate::telemetry::{Kind, Telemetry};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One answer of the fake attempt.
#[derive(Debug, Clone)]
enum Answer {
    Acquired,
    Held(Option<Duration>),
    Transient,
    Definite,
    /// Never answers (a frozen server, a command timeout far away).
    Hang,
}

#[derive(Debug, Default)]
struct AttemptState {
    /// Answers still to give, in order; once empty, "held, no TTL".
    answers: VecDeque<Answer>,
    /// When each attempt was made, and whether it was part of a wait.
    attempts: Vec<(Instant, bool)>,
    entered: usize,
    left: usize,
    leaves: usize,
    background_leaves: usize,
    /// Whether the inline clean-up succeeds.
    leave_fails: bool,
    /// Whether the inline clean-up never answers.
    leave_hangs: bool,
    /// Attempts dropped before they answered.
    cancelled: usize,
}

/// An in-memory [`Attempt`]; its plan is the test's.
struct FakeAttempt {
    plan: WaitPlan,
    state: Mutex<AttemptState>,
}

impl FakeAttempt {
    fn new(queue: QueueKind, keepalive: Duration, answers: impl IntoIterator<Item = Answer>) -> Self {
        let plan = WaitPlan {
            key: Arc::from("k"),
            channel: Arc::from("redisson_lock__channel:{k}"),
            channel_kind: WaitChannel::Lock,
            queue,
            keepalive,
            kind: Kind::Lock,
            grants: None,
            permits: None,
        };
        let state = AttemptState { answers: answers.into_iter().collect(), ..AttemptState::default() };
        FakeAttempt { plan, state: Mutex::new(state) }
    }

    /// The same with `change` made to its plan (another channel, a semaphore's permits).
    fn with_plan(mut self, change: impl FnOnce(&mut WaitPlan)) -> Self {
        change(&mut self.plan);
        self
    }

    /// Offsets from `t0`, in ms, of every attempt made.
    fn offsets(&self, t0: Instant) -> Vec<u64> {
        let state = self.state.lock();
        state.attempts.iter().map(|(at, _)| u64::try_from((*at - t0).as_millis()).expect("fits")).collect()
    }

    fn counts(&self) -> (usize, usize, usize, usize) {
        let s = self.state.lock();
        (s.entered, s.left, s.leaves, s.background_leaves)
    }
}

impl Attempt for FakeAttempt {
    type Acquired = Instant;

    fn plan(&self) -> &WaitPlan {
        &self.plan
    }

    fn server_queue(&self) -> ServerQueue {
        ServerQueue { channel: Arc::from("leasehold_lock__queue:{k}"), owner: Arc::from("u:1") }
    }

    async fn attempt(&self, waiting: bool) -> Result<std::result::Result<Instant, NotAcquired>> {
        let answer = {
            let mut state = self.state.lock();
            state.attempts.push((Instant::now(), waiting));
            state.answers.pop_front().unwrap_or(Answer::Held(None))
        };
        match answer {
            Answer::Acquired => Ok(Ok(Instant::now() + Duration::from_secs(30))),
            Answer::Held(pttl) => Ok(Err(NotAcquired { pttl, position: Some(1), ticket: None })),
            Answer::Transient => Err(Error::new(ErrorKind::Connection, "fake: connection refused")),
            Answer::Definite => Err(Error::new(ErrorKind::WrongType, "fake: WRONGTYPE")),
            Answer::Hang => {
                let _cancelled = Cancelled(&self.state);
                std::future::pending().await
            }
        }
    }

    fn held_until(until: &Instant) -> Instant {
        *until
    }

    fn holds_already(&self) -> bool {
        false
    }

    fn queue_entered(&self) {
        self.state.lock().entered += 1;
    }

    fn queue_left(&self) {
        self.state.lock().left += 1;
    }

    async fn leave(&self) -> bool {
        {
            let mut state = self.state.lock();
            state.leaves += 1;
            if !state.leave_hangs {
                return !state.leave_fails;
            }
        }
        std::future::pending().await
    }

    fn leave_in_background(&self) {
        self.state.lock().background_leaves += 1;
    }
}

/// Counts an attempt dropped before it answered (it only ever is: it never answers).
struct Cancelled<'a>(&'a Mutex<AttemptState>);

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        self.0.lock().cancelled += 1;
    }
}

/// The one local line of the tests: a single waiter, always first, subscribed at once,
/// woken only by [`FakeLine::wake`]. It records how each wait joined, and tells a
/// newcomer it would queue behind [`FakeLine::ahead`] local waiters (none by default).
#[derive(Default)]
struct FakeLine {
    turn: Arc<AtomicBool>,
    signal: Arc<Notify>,
    joins: AtomicUsize,
    /// What `local_waiters` answers.
    ahead: AtomicUsize,
    /// How each wait joined, in order.
    joined: Mutex<Vec<Join>>,
}

impl FakeLine {
    /// A release message: the waiter gets a turn.
    fn wake(&self) {
        self.turn.store(true, Ordering::Release);
        self.signal.notify_one();
    }
}

struct FakeSlot {
    turn: Arc<AtomicBool>,
    signal: Arc<Notify>,
}

impl Line for FakeLine {
    type Slot = FakeSlot;

    fn local_waiters(&self, _plan: &WaitPlan) -> usize {
        self.ahead.load(Ordering::Relaxed)
    }

    fn join(&self, _plan: &WaitPlan, how: Join) -> FakeSlot {
        self.joins.fetch_add(1, Ordering::Relaxed);
        self.joined.lock().push(how);
        // First in line: it starts with a turn, as lock-pubsub's first waiter does.
        self.turn.store(true, Ordering::Release);
        FakeSlot { turn: self.turn.clone(), signal: self.signal.clone() }
    }
}

impl Slot for FakeSlot {
    async fn subscribed_by(&self, _deadline: Instant) -> bool {
        true
    }

    fn take_turn(&self) -> bool {
        self.turn.swap(false, Ordering::AcqRel)
    }

    fn take_held_until(&self) -> Option<Instant> {
        None
    }

    fn is_first(&self) -> bool {
        true
    }

    fn set_position(&self, _position: Option<u64>) {}

    async fn wait_until(&self, deadline: Instant) -> bool {
        if self.turn.load(Ordering::Acquire) {
            return true;
        }
        tokio::select! {
            () = self.signal.notified() => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
        self.turn.load(Ordering::Acquire)
    }

    fn acquired(self, _held_until: Instant) {}
}

fn env<'a>(line: &'a FakeLine, telemetry: &'a Telemetry) -> WaitEnv<'a, FakeLine> {
    // A client that never shuts down, for as long as the test runs.
    let stopping: &'static Arc<Stopping> = Box::leak(Box::default());
    env_stopping(line, telemetry, stopping)
}

fn env_stopping<'a>(
    line: &'a FakeLine,
    telemetry: &'a Telemetry,
    stopping: &'a Arc<Stopping>,
) -> WaitEnv<'a, FakeLine> {
    WaitEnv { line, telemetry, subscribe_timeout: Duration::from_secs(5), redisson_waiters: true, stopping }
}

/// A wake-up (a release message) makes the waiter try at once, long before the
/// holder's TTL would have.
#[tokio::test(start_paused = true)]
async fn a_wake_up_retries_at_once() {
    let attempt = Arc::new(FakeAttempt::new(
        QueueKind::Local,
        Duration::ZERO,
        [Answer::Held(Some(Duration::from_secs(10))), Answer::Held(Some(Duration::from_secs(10))), Answer::Acquired],
    ));
    let line = Arc::new(FakeLine::default());
    let t0 = Instant::now();
    let waiter = tokio::spawn({
        let (attempt, line) = (attempt.clone(), line.clone());
        async move {
            let telemetry = Telemetry::default();
            wait_for(&*attempt, &env(&line, &telemetry), None, &mut AcquireRun::default()).await
        }
    });
    // The fast path, then the first-in-line turn the waiter registers with.
    tokio::time::sleep(ms(1_000)).await;
    assert_eq!(attempt.offsets(t0), [0, 0], "fast path and the first turn");
    line.wake();
    let acquired = waiter.await.expect("task").expect("no error");
    assert!(acquired.is_some());
    assert_eq!(attempt.offsets(t0), [0, 0, 1_000], "the wake-up retried at once, not at the TTL (10 s)");
}

/// A queued waiter refreshes its queue entry every third of the keep-alive, however
/// long the holder's TTL.
#[tokio::test(start_paused = true)]
async fn a_queued_wait_refreshes_at_a_third_of_the_keepalive() {
    let attempt =
        FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Held(Some(Duration::from_secs(60)))]);
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let result = wait_for(&attempt, &env(&line, &telemetry), Some(t0 + ms(10_000)), &mut AcquireRun::default()).await;
    assert!(matches!(result, Ok(None)), "timed out");
    assert_eq!(attempt.offsets(t0), [0, 0, 3_000, 6_000, 9_000], "fast path, first turn, then every 3 s");
    assert!(attempt.state.lock().attempts.iter().all(|(_, waiting)| *waiting), "every attempt of a wait queues");
}

/// A bounded wait that only meets transient errors returns at its deadline, with the
/// last error.
#[tokio::test(start_paused = true)]
async fn a_bounded_wait_returns_at_its_deadline_with_the_last_error() {
    let attempt = FakeAttempt::new(QueueKind::Local, Duration::ZERO, std::iter::repeat_n(Answer::Transient, 1_000));
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let result = wait_for(&attempt, &env(&line, &telemetry), Some(t0 + ms(2_000)), &mut AcquireRun::default()).await;
    let error = result.expect_err("the last error");
    assert!(error.is_connection(), "{error:?}");
    assert_eq!(t0.elapsed(), ms(2_000), "returned at the deadline, not before or after");
    assert!(attempt.offsets(t0).len() > 3, "kept retrying until then: {:?}", attempt.offsets(t0));
}

/// A transient error is retried after a back-off (50 ms doubling, from the upper half
/// of each), not at once and not on the TTL.
#[tokio::test(start_paused = true)]
async fn a_transient_error_backs_off() {
    let attempt = FakeAttempt::new(
        QueueKind::Local,
        Duration::ZERO,
        [Answer::Transient, Answer::Transient, Answer::Transient, Answer::Acquired],
    );
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let result = wait_for(&attempt, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect("acquired").is_some());
    let offsets = attempt.offsets(t0);
    assert_eq!(offsets.len(), 4, "{offsets:?}");
    let gaps: Vec<u64> = offsets.windows(2).map(|pair| pair[1] - pair[0]).collect();
    // The first turn after the failed fast path is spent: the back-off says when.
    assert!((25..=50).contains(&gaps[0]), "first back-off in [25, 50] ms: {gaps:?}");
    assert!((50..=100).contains(&gaps[1]), "then [50, 100] ms: {gaps:?}");
    assert!((100..=200).contains(&gaps[2]), "then [100, 200] ms: {gaps:?}");
}

/// Dropping a queued wait (cancellation) gives its queue place up once, in the
/// background, and never inline.
#[tokio::test(start_paused = true)]
async fn cancelling_a_queued_wait_leaves_once() {
    let attempt = FakeAttempt::new(QueueKind::Fair, Duration::from_secs(9), []);
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let (env, mut run) = (env(&line, &telemetry), AcquireRun::default());
    let wait = wait_for(&attempt, &env, None, &mut run);
    assert!(tokio::time::timeout(ms(5_000), wait).await.is_err(), "still waiting when dropped");
    assert_eq!(attempt.counts(), (1, 1, 0, 1), "entered, left, no inline leave, one background leave");
}

/// The client shuts down while waits wait: each ends with `Shutdown` at once, the
/// queued one removes its queue place inline (not in the background: the shutdown
/// closes the connection after it) and the shutdown's count of queued waits drains; a
/// wait that starts afterwards sends nothing.
#[tokio::test(start_paused = true)]
async fn a_shutdown_ends_every_wait_and_queued_ones_leave_inline() {
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let stopping = Arc::new(Stopping::default());
    let env = env_stopping(&line, &telemetry, &stopping);
    let queued = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Held(None)]);
    let local = FakeAttempt::new(QueueKind::Local, Duration::from_secs(9), [Answer::Held(None)]);
    let stopped_at = Instant::now() + ms(2_000);
    let (mut queued_run, mut local_run) = (AcquireRun::default(), AcquireRun::default());
    let (queued_result, local_result, drained) = tokio::join!(
        wait_for(&queued, &env, None, &mut queued_run),
        wait_for(&local, &env, None, &mut local_run),
        async {
            tokio::time::sleep_until(stopped_at).await;
            stopping.stop();
            stopping.drained(ms(1_000)).await
        },
    );
    assert_eq!(Instant::now(), stopped_at, "ended at the shutdown, not at a timer");
    assert!(queued_result.expect_err("shut down").is_shutdown());
    assert!(local_result.expect_err("shut down").is_shutdown());
    assert!(drained, "no queued wait left");
    assert_eq!(queued.counts(), (1, 1, 1, 0), "left inline, once");
    let attempts = queued.state.lock().attempts.clone();
    assert!(attempts.iter().all(|(at, _)| *at < stopped_at), "no attempt at the shutdown: {attempts:?}");
    let late = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), []);
    let result = wait_for(&late, &env, None, &mut AcquireRun::default()).await;
    assert!(result.expect_err("shut down").is_shutdown());
    assert!(late.state.lock().attempts.is_empty(), "nothing sent");
}

/// A wait that ends without the lock cleans up once: at its deadline in the
/// background (the answer is not held back); on an error inline, and if that fails,
/// in the background; one that acquires leaves nothing to clean up.
#[tokio::test(start_paused = true)]
async fn a_wait_that_ends_cleans_up_once() {
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let deadline = Some(Instant::now() + ms(1_000));
    let timed_out = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), []);
    let result = wait_for(&timed_out, &env(&line, &telemetry), deadline, &mut AcquireRun::default()).await;
    assert!(matches!(result, Ok(None)));
    assert_eq!(timed_out.counts(), (1, 1, 0, 1), "at the deadline: in the background");

    let failing = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Held(None), Answer::Definite]);
    failing.state.lock().leave_fails = true;
    let result = wait_for(&failing, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect_err("definite").is_wrong_type());
    assert_eq!(failing.counts(), (1, 1, 1, 1), "inline failed: then in the background");

    let acquired = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Held(None), Answer::Acquired]);
    let result = wait_for(&acquired, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect("acquired").is_some());
    assert_eq!(acquired.counts(), (1, 1, 0, 0), "nothing to clean up");
}

/// A single try (a deadline already passed) sends one attempt that does not queue, and
/// has no queue place to clean up.
#[tokio::test(start_paused = true)]
async fn a_single_try_neither_waits_nor_queues() {
    let attempt = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Held(Some(ms(500)))]);
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let result = wait_for(&attempt, &env(&line, &telemetry), Some(Instant::now()), &mut AcquireRun::default()).await;
    assert!(matches!(result, Ok(None)));
    assert_eq!(attempt.state.lock().attempts.iter().map(|(_, w)| *w).collect::<Vec<_>>(), [false]);
    assert_eq!(attempt.counts(), (0, 0, 0, 0));
    assert_eq!(line.joins.load(Ordering::Relaxed), 0, "never joined a line");
}

/// A bounded wait whose fast path never answers (a frozen server) answers `None` at its
/// deadline, not at the attempt's: the attempt is dropped, and the queue place is given
/// up once, in the background.
#[tokio::test(start_paused = true)]
async fn a_hung_fast_path_ends_at_the_deadline() {
    let attempt = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Hang]);
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let deadline = Some(t0 + ms(1_000));
    let (env, mut run) = (env(&line, &telemetry), AcquireRun::default());
    let wait = wait_for(&attempt, &env, deadline, &mut run);
    let result = tokio::time::timeout(ms(10_000), wait).await.expect("answered by the deadline");
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(Instant::now() - t0, ms(1_000), "exactly at the deadline");
    assert_eq!(attempt.state.lock().cancelled, 1, "the attempt was dropped");
    assert_eq!(attempt.counts(), (1, 1, 0, 1), "left in the background, never inline");
}

/// A bounded wait whose later attempt never answers ends at the deadline with the last
/// answer known (the transient error before it), and leaves the queue in the
/// background.
#[tokio::test(start_paused = true)]
async fn a_hung_attempt_ends_at_the_deadline_with_the_last_error() {
    let attempt = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Transient, Answer::Hang]);
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let (env, mut run) = (env(&line, &telemetry), AcquireRun::default());
    let wait = wait_for(&attempt, &env, Some(t0 + ms(1_000)), &mut run);
    let result = tokio::time::timeout(ms(10_000), wait).await.expect("answered by the deadline");
    assert!(result.expect_err("the last error").is_transient());
    assert_eq!(Instant::now() - t0, ms(1_000), "exactly at the deadline");
    assert_eq!(attempt.offsets(t0).len(), 2, "the fast path, then the attempt that hung");
    assert_eq!(attempt.state.lock().cancelled, 1);
    assert_eq!(attempt.counts(), (1, 1, 0, 1));
}

/// A definite error before the deadline cleans up inline, but only while the deadline
/// lasts: an inline clean-up that never answers is dropped at the deadline and goes to
/// the background, and the error is answered then.
#[tokio::test(start_paused = true)]
async fn a_hung_clean_up_ends_at_the_deadline() {
    let attempt = FakeAttempt::new(QueueKind::Server, Duration::from_secs(9), [Answer::Held(None), Answer::Definite]);
    attempt.state.lock().leave_hangs = true;
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let (env, mut run) = (env(&line, &telemetry), AcquireRun::default());
    let wait = wait_for(&attempt, &env, Some(t0 + ms(1_000)), &mut run);
    let waker = async {
        tokio::time::sleep(ms(100)).await;
        line.wake();
        std::future::pending::<()>().await;
    };
    let wait = tokio::time::timeout(ms(10_000), wait);
    let result =
        tokio::select! { result = wait => result.expect("answered by the deadline"), () = waker => unreachable!() };
    assert!(result.expect_err("definite").is_wrong_type());
    assert_eq!(Instant::now() - t0, ms(1_000), "answered at the deadline");
    assert_eq!(attempt.counts(), (1, 1, 1, 1), "the inline clean-up was dropped, then in the background");
}

/// An unbounded wait keeps waiting for an attempt that does not answer (the command
/// timeout ends it, not the engine).
#[tokio::test(start_paused = true)]
async fn an_unbounded_wait_awaits_its_attempt() {
    let attempt = FakeAttempt::new(QueueKind::Fair, Duration::from_secs(9), [Answer::Hang]);
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let (env, mut run) = (env(&line, &telemetry), AcquireRun::default());
    let wait = wait_for(&attempt, &env, None, &mut run);
    assert!(tokio::time::timeout(ms(60_000), wait).await.is_err(), "still waiting");
    assert_eq!(attempt.state.lock().cancelled, 1, "dropped by the test's timeout only");
}

// The modes a wait joins its line in: a semaphore's permits, a shared waiter (a reader),
// a waiter alone on its own channel. Which one the engine picks decides what wakes the
// waiter (lock-pubsub's side is tested there); these check the engine's half: the fast
// path it takes or skips, the join it asks for, and the timers it keeps.

/// A semaphore's plan: a line on its channel of counts, waiting for `permits`.
fn permits_plan(permits: u64) -> impl FnOnce(&mut WaitPlan) {
    move |plan| {
        plan.channel = Arc::from("redisson_sc:{k}");
        plan.kind = Kind::Semaphore;
        plan.permits = Some(permits);
    }
}

/// A permit waiter whose fast path found too few permits joins the line of counts with
/// its permits and that attempt's send time (so a count published since wakes it), and
/// with no message re-reads the count on the timer its attempt answered (the re-check),
/// never before.
#[tokio::test(start_paused = true)]
async fn a_permit_waiter_joins_with_its_permits_and_rechecks_on_its_timer() {
    let recheck = Some(ms(1_000));
    let attempt = FakeAttempt::new(
        QueueKind::Local,
        Duration::ZERO,
        [Answer::Held(recheck), Answer::Held(recheck), Answer::Held(recheck), Answer::Acquired],
    )
    .with_plan(permits_plan(3));
    let line = FakeLine::default();
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let result = wait_for(&attempt, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect("no error").is_some());
    assert!(
        matches!(line.joined.lock()[..], [Join::Permits { permits: 3, sent_at: Some(at) }] if at == t0),
        "joined the line of counts with the fast path's send time: {:?}",
        line.joined.lock()
    );
    assert_eq!(attempt.offsets(t0), [0, 0, 1_000, 2_000], "fast path, first turn, then one read per re-check");
    assert_eq!(attempt.counts(), (0, 0, 0, 0), "a semaphore's wait holds no queue place");
}

/// A permit waiter that finds local waiters ahead skips the fast path (it does not
/// overtake them) and joins with no send time: it has heard nothing yet.
#[tokio::test(start_paused = true)]
async fn a_permit_waiter_behind_local_waiters_skips_the_fast_path() {
    let attempt = FakeAttempt::new(QueueKind::Local, Duration::ZERO, [Answer::Acquired]).with_plan(permits_plan(2));
    let line = FakeLine::default();
    line.ahead.store(2, Ordering::Relaxed);
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let result = wait_for(&attempt, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect("no error").is_some());
    assert!(
        matches!(line.joined.lock()[..], [Join::Permits { permits: 2, sent_at: None }]),
        "{:?}",
        line.joined.lock()
    );
    assert_eq!(attempt.offsets(t0), [0], "no fast path: the one attempt is its turn in line");
    assert_eq!(attempt.state.lock().attempts.iter().map(|(_, w)| *w).collect::<Vec<_>>(), [true]);
}

/// A shared waiter (a reader) takes the fast path even with local waiters ahead (it
/// overtakes nobody), joins as shared with that attempt's send time, holds no queue
/// place, and keeps its own TTL timer.
#[tokio::test(start_paused = true)]
async fn a_shared_waiter_takes_the_fast_path_and_joins_as_shared() {
    let attempt = FakeAttempt::new(
        QueueKind::Shared,
        Duration::ZERO,
        [Answer::Held(Some(ms(700))), Answer::Held(Some(ms(700))), Answer::Acquired],
    )
    .with_plan(|plan| {
        plan.channel = Arc::from("redisson_rwlock:{k}");
        plan.channel_kind = WaitChannel::ReadWrite;
        plan.kind = Kind::Read;
    });
    let line = FakeLine::default();
    line.ahead.store(3, Ordering::Relaxed);
    let telemetry = Telemetry::default();
    let t0 = Instant::now();
    let result = wait_for(&attempt, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect("no error").is_some());
    assert!(matches!(line.joined.lock()[..], [Join::Shared(Some(at))] if at == t0), "{:?}", line.joined.lock());
    assert_eq!(attempt.offsets(t0), [0, 0, 700], "fast path past the line, first turn, then the TTL timer");
    assert_eq!(attempt.counts(), (0, 0, 0, 0), "no queue place to keep or clean up");
}

/// A waiter alone on its own channel whose fast path was answered "held" joins after
/// that attempt's send time (the channel's history says whether a release came since);
/// one that skipped the fast path joins plainly; and a waiter on the lock's shared
/// channel joins plainly whatever its fast path did (that channel's history is
/// everyone's).
#[tokio::test(start_paused = true)]
async fn an_own_channel_waiter_joins_after_its_fast_path() {
    let own = |plan: &mut WaitPlan| {
        plan.channel = Arc::from("redisson_lock__channel:{k}:u:1");
        plan.channel_kind = WaitChannel::Own;
    };
    let telemetry = Telemetry::default();
    let t0 = Instant::now();

    let held_first =
        FakeAttempt::new(QueueKind::Local, Duration::ZERO, [Answer::Held(Some(ms(10_000)))]).with_plan(own);
    let line = FakeLine::default();
    let result = wait_for(&held_first, &env(&line, &telemetry), Some(t0 + ms(100)), &mut AcquireRun::default()).await;
    assert!(matches!(result, Ok(None)), "timed out");
    assert!(matches!(line.joined.lock()[..], [Join::InLineAfter(at)] if at == t0), "{:?}", line.joined.lock());

    let behind = FakeAttempt::new(QueueKind::Local, Duration::ZERO, [Answer::Acquired]).with_plan(own);
    let line = FakeLine::default();
    line.ahead.store(1, Ordering::Relaxed);
    let result = wait_for(&behind, &env(&line, &telemetry), None, &mut AcquireRun::default()).await;
    assert!(result.expect("no error").is_some());
    assert!(matches!(line.joined.lock()[..], [Join::InLine]), "no fast path: {:?}", line.joined.lock());

    let shared_channel = FakeAttempt::new(QueueKind::Local, Duration::ZERO, [Answer::Held(Some(ms(10_000)))]);
    let line = FakeLine::default();
    let t1 = Instant::now();
    let result =
        wait_for(&shared_channel, &env(&line, &telemetry), Some(t1 + ms(100)), &mut AcquireRun::default()).await;
    assert!(matches!(result, Ok(None)), "timed out");
    assert!(matches!(line.joined.lock()[..], [Join::InLine]), "the lock's channel: {:?}", line.joined.lock());
}
