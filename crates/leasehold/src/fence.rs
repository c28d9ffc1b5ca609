//! The resource side of fencing tokens.
//!
//! A [`FencedLock`](crate::FencedLock) hands every fresh hold a token larger than every
//! earlier one. The lock cannot stop a holder that was paused past its lease from writing
//! late, but the resource can: it keeps the largest token that wrote it (its *fence*) and
//! refuses writes with a smaller one. A write with the same token is accepted, so one
//! holder can write many times.
//!
//! # Resources in Redis
//!
//! [`fenced_set`] (or [`FencedGuard::fenced_set`](crate::FencedGuard::fenced_set)) writes a
//! String key with `crates/lock-core/lua/fenced_write.lua`: the fence lives next to it in
//! `leasehold_fence:{RESOURCE}` (same hash slot), with no TTL, since it must live as long
//! as the resource. Delete both together. For other Redis types, write a script of the
//! same shape: read the fence, compare, write the data and the fence in one script.
//!
//! # Resources elsewhere: a database
//!
//! Store the fence in the row and make the comparison part of the write, so that the check
//! and the write are one atomic statement:
//!
//! ```sql
//! -- once: ALTER TABLE accounts ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
//! UPDATE accounts
//!    SET balance = $2, fence = $1
//!  WHERE id = $3 AND fence <= $1;   -- $1 = guard.token()
//! -- 0 rows updated: a later holder wrote first; stop, do not retry with the same token.
//! ```
//!
//! Use `fence <= $1` to let one holder write several times, or `fence < $1` for "exactly one
//! write per hold". A read-then-write in two statements is not fenced: another holder can
//! write in between. Tokens fit in a signed 64-bit column (they are below 2^53).
//!
//! # Examples
//! ```no_run
//! # async fn demo(client: leasehold::Client, token_from_a_request: u64) -> leasehold::Result<()> {
//! use leasehold::fence::{fenced_set, FencedWrite};
//! // A worker that received a token with its job (it need not hold the lock itself):
//! match fenced_set(&client, "report:latest", token_from_a_request, "v2").await? {
//!     FencedWrite::Written => println!("stored"),
//!     FencedWrite::Rejected { fence } => println!("stale: fence is already {fence}"),
//! }
//! # Ok(()) }
//! ```

pub use lock_core::fence::{FencedWrite, MAX_TOKEN};

use crate::client::Client;

/// Sets the String `resource` to `value` if `token` is at least the resource's fence, and
/// makes `token` its fence; otherwise writes nothing and answers the fence. `resource` is
/// used as given (the client's key prefix is for lock names, not for resources).
///
/// # Errors
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty key or a
/// token of 0 or above [`MAX_TOKEN`], before anything is sent;
/// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the resource or its fence is
/// not a String (nothing written); timeouts and connection errors.
///
/// # Cancel safety
/// Once sent, the write happens (or is rejected) whether or not the future is polled
/// again. Sending it again is harmless: the same token writes the same value.
pub async fn fenced_set(
    client: &Client,
    resource: &str,
    token: u64,
    value: impl AsRef<[u8]>,
) -> crate::Result<FencedWrite> {
    client.inner.store.fenced_write(resource, token, value.as_ref()).await
}

/// The fence of `resource`: the largest token that wrote it through [`fenced_set`],
/// `None` if none has.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty key;
/// [`ErrorKind::Redis`](crate::ErrorKind::Redis) when the fence is not an integer;
/// timeouts and connection errors.
///
/// # Cancel safety
/// Cancel safe (read only).
pub async fn fence_of(client: &Client, resource: &str) -> crate::Result<Option<u64>> {
    client.inner.store.fence(resource).await
}

/// The key that holds the fence of `resource`, `leasehold_fence:{RESOURCE}`.
pub fn fence_key(resource: &str) -> String {
    lock_core::names::fence_key(resource)
}
