//! [`ElectionConfig`]: an election's lease, and why its default is shorter than a lock's.

use std::time::Duration;

use lock_core::{Error, Result};

/// The settings of one election ([`Client::election_with`](crate::Client::election_with)).
///
/// The lease bounds failover: a leader that crashes is replaced when its lead key
/// expires, at most `lease` after its last renewal, plus one round trip for the next
/// candidate's claim. A lock's watchdog lease (30 s, Redisson's) suits a critical section
/// whose holder should not lose it to a slow network; a leader is expected to be
/// replaced quickly, so the default is 10 s, renewed every third of it (3.3 s): a leader
/// survives two missed renewals in a row, as a lock does.
///
/// `#[non_exhaustive]`: make it with [`ElectionConfig::default`] and the `with_` setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionConfig {
    /// The leader's lease: the lead key's TTL, renewed every `lease / 3` while the
    /// [`Leadership`](crate::Leadership) lives; also the life of a waiting candidate's
    /// queue entry without a refresh (a candidate that died while waiting holds up a
    /// hand-over by at most this). Default: 10 s. At least 30 ms, at most a year.
    pub lease: Duration,
}

impl ElectionConfig {
    /// The default lease, 10 s.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);
    /// The shortest lease accepted, 30 ms (renewed every 10 ms).
    pub const MIN_LEASE: Duration = Duration::from_millis(30);

    /// This config with `lease` as the leader's lease.
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The renewal period, `lease / 3`.
    pub fn renew_every(&self) -> Duration {
        self.lease / 3
    }

    /// Checks the settings (before anything is sent).
    pub(crate) fn validate(&self) -> Result<u64> {
        if self.lease < Self::MIN_LEASE {
            return Err(Error::invalid_argument(format!(
                "an election lease is at least {:?}, got {:?}",
                Self::MIN_LEASE,
                self.lease
            )));
        }
        lock_core::args::lease_millis(self.lease, "election lease")
    }
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig { lease: Self::DEFAULT_LEASE }
    }
}
