//! What `status` and `list` say of the client behind a holder or waiter ([`Who`]),
//! and how it is printed. A leaf: `status.rs` keeps one per holder and waiter, and
//! `owners.rs` fills them in.

use lock_core::who::ClientDescription;

use crate::json::Json;

/// What is known of the client behind one owner id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    /// Not a client's owner id: a permit's id, a semaphore operation's id, or an owner
    /// that does not start with a UUID.
    NotAClient,
    /// A client's owner id whose client has no description: no live leasehold client
    /// (it died more than a watchdog timeout ago, or it is a Redisson client, whose
    /// owner ids start with its own id).
    Unknown { client_id: String },
    /// The live client's description.
    Known { client_id: String, description: ClientDescription },
}

impl Who {
    /// The text after a holder or waiter in `status`.
    pub(crate) fn text(&self) -> String {
        match self {
            Who::NotAClient => String::new(),
            Who::Unknown { .. } => "  client unknown (no live client)".to_owned(),
            Who::Known { description: d, .. } => format!("  host={} pid={} service={}", d.host, d.pid, d.service),
        }
    }

    /// `host/pid/service` (or `unknown`) for `list`'s one line per name; `None` when
    /// the owner is not a client's.
    pub(crate) fn short(&self) -> Option<String> {
        match self {
            Who::NotAClient => None,
            Who::Unknown { .. } => Some("unknown".to_owned()),
            Who::Known { description: d, .. } => Some(format!("{}/{}/{}", d.host, d.pid, d.service)),
        }
    }

    /// The `client_id` and `client` fields of a holder's or waiter's JSON object.
    pub(crate) fn json_fields(&self) -> [(&'static str, Json); 2] {
        match self {
            Who::NotAClient => [("client_id", Json::Null), ("client", Json::Null)],
            Who::Unknown { client_id } => [("client_id", Json::str(client_id)), ("client", Json::Null)],
            Who::Known { client_id, description: d } => [
                ("client_id", Json::str(client_id)),
                (
                    "client",
                    Json::Obj(vec![
                        ("host", Json::str(&d.host)),
                        ("pid", Json::Int(i64::from(d.pid))),
                        ("service", Json::str(&d.service)),
                        ("started_ms", Json::Int(i64::try_from(d.started_ms).unwrap_or(i64::MAX))),
                        ("version", Json::str(&d.version)),
                    ]),
                ),
            ],
        }
    }
}
