//! `status` and `list` on an election: its lead `leasehold_election:{NAME}` is a lock
//! Hash (the leading candidate's owner field, its waiting candidates in the lock's
//! queue), shown as kind `election` with the leader's term and value
//! (`Election::leader`) and the term counter as its last token.

use leasehold::fred::interfaces::KeysInterface;
use leasehold::Client;
use lock_core::names::election_key;

use crate::bounded::bounded;
use crate::keys::derived;

/// The election whose lead `key` is (`leasehold_election:{NAME}` → `NAME`), if it is
/// one.
pub(crate) fn election_of(key: &str) -> Option<String> {
    let found = derived(key)?;
    // The name must give this very key back (`x` and `{x}` are two elections).
    (found.role == "election_lead" && election_key(&found.of) == key).then_some(found.of)
}

/// What the lock script does not read of an election: the leader's term and value
/// (`Election::leader`) and the term counter (the last term issued).
#[derive(Debug, Default)]
pub(crate) struct ElectionExtras {
    pub(crate) term: Option<u64>,
    pub(crate) value: Option<String>,
    pub(crate) last_token: Option<i64>,
}

/// Reads [`ElectionExtras`] of the election `name` (two more calls, not atomic with the
/// status script).
///
/// # Errors
/// Connection errors and timeouts; a key of the election of another type.
pub(crate) async fn read_extras(client: &Client, name: &str) -> leasehold::Result<ElectionExtras> {
    let mut extras = ElectionExtras::default();
    if let Some(leader) = client.election(name).leader().await? {
        extras.term = Some(leader.term);
        extras.value = Some(leader.value);
    }
    let names = lock_core::LockNames::new(&election_key(name))?;
    let counter: Option<String> = bounded(client, client.fred().get(names.election_term_key())).await?;
    extras.last_token = counter.and_then(|counter| counter.parse().ok());
    Ok(extras)
}

#[cfg(test)]
mod tests {
    use super::election_of;
    use lock_core::names::election_key;

    #[test]
    fn a_lead_key_names_its_election() {
        for name in ["sched", "a:b", "{x}", "a{t}b", "a{b", "}{"] {
            assert_eq!(election_of(&election_key(name)).as_deref(), Some(name), "{name:?}");
        }
        assert_eq!(election_of("sched"), None);
        assert_eq!(election_of("leasehold_election_term:{sched}"), None);
    }
}
