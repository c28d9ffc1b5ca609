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
        let n = self.next_owner.fetch_add(1, Ordering::Relaxed);
        // `N` in decimal, without the formatting machinery.
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = n;
        loop {
            at -= 1;
            // `rest % 10` is below 10: the cast cannot truncate.
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let mut sep = [0u8; 4];
        let sep: &str = separator.encode_utf8(&mut sep);
        // ASCII digits: always UTF-8.
        let n = std::str::from_utf8(&digits[at..]).unwrap_or("0");
        OwnerId::from_text(crate::names::concat_shared(&[&self.text, sep, n]))
    }
}

/// An owner: the Hash field of a reentrant lock, or the value of a simple lock.
///
/// Cheap to clone.
#[derive(Clone)]
pub struct OwnerId {
    text: Arc<str>,
    /// The same text as a fred byte string sharing `text`, made once: a script call
    /// clones it (a reference count) instead of copying it.
    arg: fred::bytes::Bytes,
}

impl OwnerId {
    /// An owner id from its text (for tests and for interop with ids made elsewhere).
    pub fn from_raw(raw: &str) -> Self {
        OwnerId::from_text(Arc::from(raw))
    }

    fn from_text(text: Arc<str>) -> Self {
        let arg = crate::names::shared_bytes(&text);
        OwnerId { text, arg }
    }

    /// The writer field of this reader owner on a read/write lock, `OWNER:write`
    /// (Redisson's write-lock owner).
    pub fn writer(&self) -> Self {
        OwnerId::from_text(crate::names::concat_shared(&[&self.text, ":write"]))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The id as a script argument (shared, not copied).
    pub(crate) fn arg(&self) -> fred::bytes::Bytes {
        self.arg.clone()
    }
}

impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OwnerId").field(&self.text).finish()
    }
}

impl PartialEq for OwnerId {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for OwnerId {}

impl std::hash::Hash for OwnerId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
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
        for (n, text) in [(10, "10"), (909, "909"), (u64::MAX, "18446744073709551615")] {
            client.next_owner.store(n, Ordering::Relaxed);
            let owner = client.next_owner();
            assert_eq!(owner.as_str(), format!("0f3c4b7e-9a43-4ff3-8a39-2a7a7d3c5e10:{text}"));
            assert_eq!(&owner.arg()[..], owner.as_str().as_bytes());
            assert_eq!(owner, OwnerId::from_raw(owner.as_str()));
        }
    }
}
