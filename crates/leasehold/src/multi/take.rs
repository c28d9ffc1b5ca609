//! A multi-lock group's one round trip: every member of one client and slot taken (or
//! re-entered) by `multi_acquire.lua`, all or none, under each member's owner's turn.

use std::sync::Arc;

use lock_core::multi::{MultiAcquire, MultiMember};
use lock_core::{args, LockNames, Result};
use tokio::time::Instant;

use crate::lock::guard::LockGuard;
use crate::lock::hold::LeaseMode;
use crate::lock::shared::{spawn_set_holds, LockShared};
use crate::lock::Lock;

/// Takes every lock of `locks` (one client, one slot, canonical order, at least two)
/// in one script: `Ok(Ok(guards))` in `locks`' order, or `Ok(Err(i))` when `locks[i]`
/// (the first so) is held by another owner and nothing was taken.
///
/// Cancel safety: the turns of every member are held from before the send to the
/// recording of the reply; if the future is dropped while the script is in flight, or
/// its outcome is unknown (a timeout, a lost connection), every member's count is set
/// back in the background (`spawn_set_holds`, after the turns), which gives back what
/// the script may have taken and changes nothing if it took nothing.
pub(crate) async fn take_together(
    locks: &[&Lock],
    mode: LeaseMode,
) -> Result<std::result::Result<Vec<LockGuard>, usize>> {
    let shareds: Vec<&Arc<LockShared>> = locks.iter().map(|lock| &lock.shared).collect();
    let names: Vec<&LockNames> = shareds.iter().map(|shared| shared.names()).collect::<Result<_>>()?;
    let Some(first) = shareds.first() else { return Ok(Ok(Vec::new())) };
    let client = &first.client;
    let lease = match mode {
        LeaseMode::Watchdog => client.config.watchdog_timeout,
        LeaseMode::Fixed(lease) => lease,
    };
    let lease_ms = args::lease_millis(lease, "lease")?;
    // The owners' turns in canonical order (every multi-lock takes them in this order,
    // and a lock's own calls take one at a time, so no two callers wait on each other).
    let mut turns = Vec::with_capacity(shareds.len());
    for shared in &shareds {
        turns.push(shared.holds.turn().await);
    }
    // Under the turns, each owner's accounted holds are what the server should count.
    let members: Vec<MultiMember<'_>> = shareds
        .iter()
        .zip(&names)
        .map(|(shared, names)| MultiMember { names, owner: &shared.owner, target: shared.holds.accounted() + 1 })
        .collect();
    let mut pending = PendingMulti { locks: &shareds, names: &names, armed: true };
    let sent_at = Instant::now();
    let reply = client.store.multi_acquire(&members, lease_ms, client.sync).await;
    match reply {
        Ok((MultiAcquire::Acquired { holds }, acknowledged)) => {
            if let Err(error) = crate::lock::replicas::check(client.sync, acknowledged, names[0]) {
                // Not replicated: give every hold back in these turns, before returning.
                // Any that fails stays for the background undo.
                let mut all_undone = true;
                for (shared, names) in shareds.iter().zip(&names) {
                    all_undone &= crate::lock::replicas::undo_now(shared, names).await;
                }
                pending.armed = !all_undone;
                return Err(error);
            }
            pending.armed = false;
            let guards = shareds
                .iter()
                .zip(&names)
                .zip(turns.iter().zip(holds))
                .map(|((shared, names), (turn, holds))| {
                    shared.record_acquired(names, turn.seq, holds, sent_at, lease, mode)
                })
                .collect();
            drop(turns);
            Ok(Ok(guards))
        }
        Ok((MultiAcquire::Held { index, .. }, _)) => {
            pending.armed = false;
            Ok(Err(index))
        }
        Err(error) => {
            // Definite errors (WRONGTYPE, a bad reply) and errors raised before sending
            // wrote nothing: no undo needed.
            pending.armed = error.is_ambiguous();
            Err(error)
        }
    }
}

/// Gives back, in the background, whatever a group's script may have taken when its
/// caller will never see the outcome.
struct PendingMulti<'a> {
    locks: &'a [&'a Arc<LockShared>],
    names: &'a [&'a LockNames],
    armed: bool,
}

impl Drop for PendingMulti<'_> {
    fn drop(&mut self) {
        if self.armed {
            for (lock, names) in self.locks.iter().zip(self.names) {
                spawn_set_holds(Arc::clone(lock), (*names).clone(), "abandoned multi-lock acquire undone");
            }
        }
    }
}
