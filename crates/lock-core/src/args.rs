//! Validation of the durations users pass, before anything reaches Redis.
//!
//! `PEXPIRE key 0` (or less) deletes the key at once, and Redis rejects expiry times that
//! overflow its clock, so a lease is checked here and turned into whole milliseconds.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// The longest lease accepted: about 292 thousand years would overflow Redis's
/// millisecond clock; one year is far past any sane lease and far from overflow.
pub const MAX_LEASE: Duration = Duration::from_secs(365 * 24 * 3600);

/// Checks a lease and returns it in milliseconds.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the lease is under
/// 1 ms (it would round to 0, which deletes the key) or over [`MAX_LEASE`].
pub fn lease_millis(lease: Duration, what: &'static str) -> Result<u64> {
    if lease < Duration::from_millis(1) {
        return Err(Error::invalid_argument(format!("{what} must be at least 1 ms, got {lease:?}")));
    }
    if lease > MAX_LEASE {
        return Err(Error::invalid_argument(format!("{what} must be at most {MAX_LEASE:?}, got {lease:?}")));
    }
    // Sub-millisecond remainders are rounded up: a lease is never shorter than asked.
    let millis = lease.as_millis() + u128::from(!lease.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis).map_err(|_| Error::invalid_argument(format!("{what} overflows")))
}

/// Checks a wait and returns the instant it ends.
///
/// A zero wait is valid (one attempt, no waiting).
///
/// # Errors
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `start + wait`
/// overflows the monotonic clock.
pub fn wait_deadline(start: Instant, wait: Duration) -> Result<Instant> {
    start.checked_add(wait).ok_or_else(|| Error::invalid_argument(format!("wait of {wait:?} overflows the clock")))
}

/// `start + by`, or a point about 30 years ahead of `start` when that overflows the
/// monotonic clock (a hostile PTTL, say): never a panic.
pub fn instant_after(start: Instant, by: Duration) -> Instant {
    start.checked_add(by).unwrap_or_else(|| far_future(start))
}

/// A point far enough ahead of `start` to stand for "never" (about 30 years, or less
/// when the clock cannot represent that).
pub fn far_future(start: Instant) -> Instant {
    let mut ahead = Duration::from_secs(30 * 365 * 24 * 3600);
    loop {
        if let Some(at) = start.checked_add(ahead) {
            return at;
        }
        ahead /= 2;
        if ahead.is_zero() {
            return start;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_sub_millisecond_leases_are_rejected() {
        assert!(lease_millis(Duration::ZERO, "lease").expect_err("zero").is_invalid_argument());
        assert!(lease_millis(Duration::from_micros(999), "lease").is_err());
    }

    #[test]
    fn huge_leases_are_rejected() {
        assert!(lease_millis(Duration::MAX, "lease").is_err());
        assert!(lease_millis(MAX_LEASE + Duration::from_secs(1), "lease").is_err());
    }

    #[test]
    fn leases_round_up_to_whole_milliseconds() {
        assert_eq!(lease_millis(Duration::from_millis(30_000), "lease").ok(), Some(30_000));
        assert_eq!(lease_millis(Duration::from_micros(1_500), "lease").ok(), Some(2));
    }

    #[test]
    fn instants_saturate_instead_of_overflowing() {
        let now = Instant::now();
        assert!(instant_after(now, Duration::MAX) > now + Duration::from_secs(365 * 24 * 3600));
        assert_eq!(instant_after(now, Duration::from_secs(1)), now + Duration::from_secs(1));
        // What a hostile holder can make the server answer: PTTL of i64::MAX ms.
        assert!(instant_after(now, Duration::from_millis(u64::MAX)) > now);
    }

    #[test]
    fn overflowing_waits_are_rejected() {
        assert!(wait_deadline(Instant::now(), Duration::MAX).is_err());
        assert!(wait_deadline(Instant::now(), Duration::ZERO).is_ok());
    }
}
