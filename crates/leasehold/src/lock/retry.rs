//! When a release (or the undo of an abandoned acquire) may be sent again.

use std::time::Duration;

use lock_core::Error;
use tokio::time::Instant;

use crate::client::config::ClientConfig;

/// How many times a release is sent in all when its outcome is unknown (timeout,
/// connection lost) or it was never sent.
const ATTEMPTS: u32 = 3;

/// The retry rule for releases, which are idempotent (each sets the owner's count to
/// an absolute value): retry ambiguous or unsent failures, a few times, and only while
/// the whole retry finishes within the replay window counted from the first send, so
/// an unlock never lingers long after its caller gave up on the lock.
pub(crate) struct ReplaySafeRetry {
    first_sent: Option<Instant>,
    attempts: u32,
    /// An attempt failed in a way that may have run on the server.
    ambiguous: bool,
}

impl ReplaySafeRetry {
    pub(crate) fn new() -> Self {
        ReplaySafeRetry { first_sent: None, attempts: 0, ambiguous: false }
    }

    /// `true` when an earlier attempt failed in a way that may have run on the server.
    pub(crate) fn may_have_applied(&self) -> bool {
        self.ambiguous
    }

    /// Call right before each send; returns when the first attempt was sent.
    pub(crate) fn sending(&mut self) -> Instant {
        self.attempts += 1;
        *self.first_sent.get_or_insert_with(Instant::now)
    }

    /// After a failed attempt: the back-off before the next one, or `None` to give up.
    pub(crate) fn after(&mut self, error: &Error, config: &ClientConfig) -> Option<Duration> {
        self.ambiguous |= error.is_ambiguous();
        if !(error.is_ambiguous() || error.is_not_sent()) || self.attempts >= ATTEMPTS {
            return None;
        }
        let backoff = Duration::from_millis(50 * u64::from(self.attempts));
        let first_sent = self.first_sent?;
        let retry_done_by = first_sent.elapsed() + backoff + config.command_timeout;
        (retry_done_by < config.replay_window).then_some(backoff)
    }
}
