//! Owner ids.
//!
//! An owner is `CLIENT_UUID:N`: the client's UUID in its 36-character hyphenated form
//! and a decimal counter, Redisson's field format. Redisson takes `N` from the Java
//! thread id; leasehold takes it from a per-client counter, one value per `Lock`
//! handle, because async tasks move between threads, `join!` branches share one task,
//! and tokio task ids are reused once a task ends. The owner is computed once, when the
//! handle is made, and carried by the handle and its guards; nothing recomputes it.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use uuid::Uuid;

/// The identity of one leasehold client (one per `Client`).
#[derive(Debug)]
pub struct ClientId {
    uuid: Uuid,
    /// The UUID's hyphenated text, formatted once (every owner id starts with it).
    text: String,
    next_owner: AtomicU64,
}

impl ClientId {
    /// A client id with a fresh random UUID.
    pub fn new_random() -> Self {
        Self::from_uuid(Uuid::new_v4())
    }

    /// A client id with the given UUID (tests, or a service that wants a stable one).
    pub fn from_uuid(uuid: Uuid) -> Self {
        ClientId { uuid, text: uuid.hyphenated().to_string(), next_owner: AtomicU64::new(1) }
    }

    /// The client's UUID.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// Allocates the next owner id, `UUID:N`, N counting from 1.
    pub fn next_owner(&self) -> OwnerId {
        self.owner_with(':')
    }

    /// Allocates the next owner value of the simple lock, `UUID-N` (a String value,
    /// not a Hash field).
    pub fn next_simple_owner(&self) -> OwnerId {
        self.owner_with('-')
    }

    /// `UUID` + `separator` + the next N. (A `Lock` handle is made per request on hot
    /// paths, so this avoids formatting the UUID each time.)
    fn owner_with(&self, separator: char) -> OwnerId {
        use std::fmt::Write as _;
        let n = self.next_owner.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(self.text.len() + 21);
        id.push_str(&self.text);
        id.push(separator);
        let _ = write!(id, "{n}");
        OwnerId(Arc::from(id))
    }
}

/// An owner: the Hash field of a reentrant lock, or the value of a simple lock.
///
/// Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerId(Arc<str>);

impl OwnerId {
    /// An owner id from its text (for tests and for interop with ids made elsewhere).
    pub fn from_raw(raw: &str) -> Self {
        OwnerId(Arc::from(raw))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_use_redisson_field_format_and_count_up() {
        let uuid = Uuid::parse_str("0f3c4b7e-9a43-4ff3-8a39-2a7a7d3c5e10").expect("uuid");
        let client = ClientId::from_uuid(uuid);
        assert_eq!(client.next_owner().as_str(), "0f3c4b7e-9a43-4ff3-8a39-2a7a7d3c5e10:1");
        assert_eq!(client.next_owner().as_str(), "0f3c4b7e-9a43-4ff3-8a39-2a7a7d3c5e10:2");
        assert_eq!(client.next_simple_owner().as_str(), "0f3c4b7e-9a43-4ff3-8a39-2a7a7d3c5e10-3");
    }
}
