//! A semaphore's releases and undos, retried until the server answers: each carries an
//! operation id ([`SemaphoreOp`]) whose record on the server makes every retry, replay
//! or late run count once (`docs/architecture/semaphores.md`, "Exactly once").

use std::time::Duration;

use lock_core::semaphore::{
    SemaphoreNames, SemaphoreOp, SemaphoreRelease, CONSUME_LAST_SEND, CONSUME_WITHIN, OP_DONE_TTL, OP_TAKEN_TTL,
};
use lock_core::{args, LockStore, Result};
use tokio::time::Instant;

use crate::wait::Backoff;

/// Gives back `permits` as the operation `op` (a plain release: a fresh `op`; the
/// release of one acquire's permits: that acquire's `op`), retrying timeouts, connection
/// errors and the server's transient states with the same `op` after a back-off (50 ms
/// doubling to 1 s), so a release in flight during a failover lands exactly once on the
/// new primary. The retries end when the next one could not finish within
/// `min(replay_window, OP_DONE_TTL)` of the first send: within that window a replay
/// finds the first run's record (or, consuming, its absence) and changes nothing.
///
/// `consume`: `Some(last)` consumes the acquire's `taken` record (the acquire answered on
/// its one send: [`ReleaseMode`]) and sends nothing after `last`, past which the record
/// could have expired; `None` leaves a `released` tombstone.
///
/// # Errors
/// A definite error at once; a transient one when the window runs out (then it is
/// unknown whether the permits were given back).
///
/// # Cancel safety
/// Dropping the future stops the retries: a send in flight may still land (once).
pub(crate) async fn release(
    store: &LockStore,
    replay_window: Duration,
    names: &SemaphoreNames,
    permits: i64,
    op: SemaphoreOp,
    consume: Option<Instant>,
) -> Result<SemaphoreRelease> {
    let window = replay_window.min(OP_DONE_TTL);
    let first_sent = Instant::now();
    if consume.is_some_and(|last| first_sent >= last) {
        return Err(too_late(names, op));
    }
    let mut backoff = Backoff::new();
    loop {
        match store.semaphore_release(names, permits, op, consume.is_some()).await {
            Err(error) if error.is_transient() => {
                let delay = backoff.next_delay();
                if first_sent.elapsed() + delay + store.command_timeout() >= window
                    || consume.is_some_and(|last| Instant::now() + delay >= last)
                {
                    return Err(error);
                }
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    semaphore = %names.key(),
                    %op,
                    %error,
                    "semaphore release failed; retrying",
                );
                tokio::time::sleep(delay).await;
            }
            done => return done,
        }
    }
}

/// The error of a consuming release that could no longer be sent before its record
/// might expire ([`ReleaseMode`]): the permits stay taken (never given back twice).
pub(crate) fn too_late(names: &SemaphoreNames, op: SemaphoreOp) -> lock_core::Error {
    lock_core::Error::new(
        lock_core::ErrorKind::Timeout,
        format!("the release of semaphore operation {op} could not be sent before its record may expire"),
    )
    .with_key(names.key())
}

/// How the release of one acquire's permits treats the acquire's record, decided once per
/// acquire (at its first release, give-back or shutdown) so that every send of it uses
/// the same script mode: a consuming send that found a tombstone would delete it and give
/// the permits back again.
#[derive(Debug)]
pub(crate) struct ReleaseMode {
    /// `Some(until)`: the acquire answered on its one send (no copy of it can run again
    /// and write its record anew), and a release decided before `until` consumes the
    /// record; `None`: always a tombstone.
    consume_until: Option<Instant>,
    /// The last moment a consuming send goes out.
    last_send: Instant,
    decided: std::sync::OnceLock<Option<Instant>>,
}

impl ReleaseMode {
    /// The mode of the release of an acquire first sent at `first_sent`; `clean`: it
    /// answered on one send of a client that never resends by itself.
    pub(crate) fn new(first_sent: Instant, clean: bool) -> Self {
        ReleaseMode {
            consume_until: clean.then(|| args::instant_after(first_sent, CONSUME_WITHIN)),
            last_send: args::instant_after(first_sent, CONSUME_LAST_SEND),
            decided: std::sync::OnceLock::new(),
        }
    }

    /// `Some(last send)` to consume the record, `None` for a tombstone: decided at the
    /// first call, the same answer afterwards.
    pub(crate) fn consume(&self) -> Option<Instant> {
        *self.decided.get_or_init(|| {
            let now = Instant::now();
            self.consume_until.filter(|until| now < *until).map(|_| self.last_send)
        })
    }
}

/// Undoes the acquire `op` (first sent at `since`) in a task of its own: `sem_cancel.lua`
/// gives back what it took, or refuses it if it runs later; retried after a back-off
/// (50 ms doubling to 1 s) until the server answers. Never blocks; does nothing but log
/// when there is no runtime to run on.
///
/// The retries end when the next one could not land before the operation's record
/// expires (`OP_TAKEN_TTL` after `since`, less the command timeout): past that, an undo
/// could no longer tell whether the acquire took, and the permits it may have taken stay
/// taken (logged at WARN).
pub(crate) fn cancel_in_background(store: LockStore, names: SemaphoreNames, op: SemaphoreOp, since: Instant) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            target: crate::telemetry::TARGET,
            semaphore = %names.key(),
            %op,
            "no runtime to undo an acquire whose outcome is unknown on",
        );
        return;
    };
    drop(runtime.spawn(async move { cancel(&store, &names, op, since).await }));
}

async fn cancel(store: &LockStore, names: &SemaphoreNames, op: SemaphoreOp, since: Instant) {
    let give_up_at = args::instant_after(since, OP_TAKEN_TTL.saturating_sub(store.command_timeout()));
    let mut backoff = Backoff::new();
    loop {
        match store.semaphore_cancel(names, op).await {
            Ok(given_back) => {
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    semaphore = %names.key(),
                    %op,
                    given_back,
                    "acquire with an unknown outcome undone",
                );
                return;
            }
            Err(error) if error.is_transient() => {
                let delay = backoff.next_delay();
                if Instant::now() + delay >= give_up_at {
                    tracing::warn!(
                        target: crate::telemetry::TARGET,
                        semaphore = %names.key(), %op, %error,
                        "an acquire whose outcome is unknown could not be undone before its record expires: \
                         the permits it may have taken stay taken"
                    );
                    return;
                }
                tracing::debug!(
                    target: crate::telemetry::TARGET,
                    semaphore = %names.key(),
                    %op,
                    %error,
                    "undo of an acquire failed; retrying",
                );
                tokio::time::sleep(delay).await;
            }
            Err(error) => {
                tracing::warn!(
                    target: crate::telemetry::TARGET,
                    semaphore = %names.key(), %op, %error,
                    "an acquire whose outcome is unknown was not undone: the permits it may have taken stay taken"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lock_core::semaphore::{CONSUME_LAST_SEND, CONSUME_WITHIN};
    use tokio::time::Instant;

    use super::ReleaseMode;

    /// A clean acquire's release decided within `CONSUME_WITHIN` consumes the record and
    /// stops sending at `CONSUME_LAST_SEND`; later, or after an acquire in doubt, it
    /// leaves a tombstone; the first decision stands for every later send.
    #[tokio::test(start_paused = true)]
    async fn the_release_mode_is_decided_once_by_the_acquires_send_and_age() {
        let sent = Instant::now();
        let early = ReleaseMode::new(sent, true);
        tokio::time::advance(CONSUME_WITHIN - Duration::from_secs(1)).await;
        assert_eq!(early.consume(), Some(sent + CONSUME_LAST_SEND));
        let late = ReleaseMode::new(sent, true);
        let in_doubt = ReleaseMode::new(sent, false);
        assert_eq!(in_doubt.consume(), None, "an acquire in doubt never consumes");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(late.consume(), None, "past CONSUME_WITHIN: a tombstone");
        assert_eq!(early.consume(), Some(sent + CONSUME_LAST_SEND), "decided once");
        assert!(CONSUME_WITHIN + 2 * lock_core::semaphore::OP_DONE_TTL <= CONSUME_LAST_SEND);
    }
}
