//! Who the holders and waiters of `status` and `list` are: each owner id (`UUID:N`,
//! `UUID:N:write`, a simple lock's `UUID-N`) starts with its client's UUID, and a live
//! leasehold client describes itself in `leasehold_client:{UUID}` (host, pid, service;
//! `lock_core::who`). One `HGETALL` per distinct client, cached across the names of one
//! `list`.

use std::collections::HashMap;

use leasehold::Client;
use lock_core::who::{describe_owner, owner_client, ClientDescription};

use crate::json::Json;
use crate::status::Status;

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

/// The descriptions read so far, by client UUID (`None`: no live client).
#[derive(Default)]
pub(crate) struct Owners {
    known: HashMap<String, Option<ClientDescription>>,
}

impl Owners {
    /// Fills in who every holder and waiter of `status` is, reading each client's
    /// description once.
    ///
    /// # Errors
    /// The first failed or timed-out read.
    pub(crate) async fn describe(&mut self, client: &Client, status: &mut Status) -> leasehold::Result<()> {
        for holder in &mut status.holders {
            holder.who = self.who(client, &holder.owner).await?;
        }
        for waiter in &mut status.waiters {
            waiter.who = self.who(client, &waiter.owner).await?;
        }
        Ok(())
    }

    /// Who `owner` is: its client's description (read once per client), or why none.
    ///
    /// # Errors
    /// A failed or timed-out read.
    pub(crate) async fn who(&mut self, client: &Client, owner: &str) -> leasehold::Result<Who> {
        let Some(uuid) = owner_client(owner) else { return Ok(Who::NotAClient) };
        let description = match self.known.get(uuid) {
            Some(known) => known.clone(),
            None => {
                let timeout = client.config().command_timeout;
                let read = describe_owner(client.fred(), timeout, owner).await?;
                self.known.insert(uuid.to_owned(), read.clone());
                read
            }
        };
        let client_id = uuid.to_owned();
        Ok(match description {
            Some(description) => Who::Known { client_id, description },
            None => Who::Unknown { client_id },
        })
    }
}
