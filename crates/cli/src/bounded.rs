//! A fred call of the CLI's own (a script of its own, a description read) bounded by the
//! client's command timeout, as the library bounds its calls (fred ignores per-command
//! timeouts on scripts). A leaf: every command's module may use it.

use leasehold::{Client, Error, ErrorKind};

/// Bounds a fred call by the client's command timeout.
pub(crate) async fn bounded<T>(
    client: &Client,
    call: impl std::future::Future<Output = Result<T, leasehold::fred::error::Error>>,
) -> leasehold::Result<T> {
    let timeout = client.config().command_timeout;
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result.map_err(Error::from_fred),
        Err(_) => Err(Error::new(ErrorKind::Timeout, format!("Redis did not answer within {timeout:?}"))),
    }
}
