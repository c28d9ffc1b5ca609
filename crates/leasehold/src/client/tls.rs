//! `rediss://` needs a TLS feature: without one, fred would connect in plaintext.

use lock_core::{Error, Result};

/// Whether this build can speak TLS (feature `tls-rustls` or `tls-native-tls`).
pub(crate) const TLS_COMPILED: bool = cfg!(any(feature = "tls-rustls", feature = "tls-native-tls"));

/// Refuses a TLS URL (`rediss://`, `valkeys://` and their `-cluster` and `-sentinel`
/// forms, as fred reads them) unless `tls_compiled`. fred itself would only log a
/// warning and connect in plaintext.
pub(crate) fn require_tls_support(url: &str, tls_compiled: bool) -> Result<()> {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme).trim().to_ascii_lowercase();
    let wants_tls = scheme.starts_with("rediss") || scheme.starts_with("valkeys");
    if wants_tls && !tls_compiled {
        return Err(Error::invalid_argument(format!(
            "a {scheme}:// URL needs TLS, but leasehold was built without a TLS feature \
             (enable `tls-rustls` or `tls-native-tls`); refusing to connect in plaintext"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_urls_are_refused_without_a_tls_feature() {
        for url in ["rediss://h:6380", "REDISS://h", " rediss-cluster://h:1", "rediss-sentinel://h", "valkeys://h"] {
            let err = require_tls_support(url, false).expect_err(url);
            assert!(err.is_invalid_argument(), "{url}: {err}");
            assert!(err.to_string().contains("tls-rustls"), "{err}");
            assert!(require_tls_support(url, true).is_ok(), "{url}");
        }
        for url in ["redis://h:6379", "redis-cluster://h", "redis://:pw@h/0", "not a url"] {
            assert!(require_tls_support(url, false).is_ok(), "{url}");
        }
    }
}
