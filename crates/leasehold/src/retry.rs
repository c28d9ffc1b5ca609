//! When a request that carries a request id may be sent again.

use std::time::Duration;

use lock_core::Error;
use tokio::time::Instant;

use crate::config::ClientConfig;

/// How many times a request is sent in all when its outcome is unknown (timeout,
/// connection lost) or it was never sent. The same request id is used each time, so it
/// is applied at most once.
const ATTEMPTS: u32 = 3;

/// The retry rule for requests the server deduplicates by request id (release,
/// undo): retry ambiguous or unsent failures, a few times, and only while a retry is
/// sure to run before the server forgets the request (its latch lives for the replay
/// window, counted from the first send).
pub(crate) struct ReplaySafeRetry {
    first_sent: Option<Instant>,
    attempts: u32,
}

impl ReplaySafeRetry {
    pub(crate) fn new() -> Self {
        ReplaySafeRetry { first_sent: None, attempts: 0 }
    }

    /// Call right before each send; returns when the first attempt was sent.
    pub(crate) fn sending(&mut self) -> Instant {
        self.attempts += 1;
        *self.first_sent.get_or_insert_with(Instant::now)
    }

    /// After a failed attempt: the back-off before the next one, or `None` to give up.
    pub(crate) fn after(&self, error: &Error, config: &ClientConfig) -> Option<Duration> {
        if !(error.is_ambiguous() || error.is_not_sent()) || self.attempts >= ATTEMPTS {
            return None;
        }
        let backoff = Duration::from_millis(50 * u64::from(self.attempts));
        let first_sent = self.first_sent?;
        let retry_done_by = first_sent.elapsed() + backoff + config.command_timeout;
        (retry_done_by < config.replay_window).then_some(backoff)
    }
}
