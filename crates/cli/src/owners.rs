//! Who the holders and waiters of `status` and `list` are: each owner id (`UUID:N`,
//! `UUID:N:write`, a simple lock's `UUID-N`) starts with its client's UUID, and a live
//! leasehold client describes itself in `leasehold_client:{UUID}` (host, pid, service;
//! `lock_core::who`). One `HGETALL` per distinct client, cached across the names of one
//! `list`.

use std::collections::HashMap;

use leasehold::Client;
use lock_core::who::{describe_owner, owner_client, ClientDescription};

use crate::status::Status;
use crate::who::Who;

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
