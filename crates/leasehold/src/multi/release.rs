//! A multi-lock's release in one round trip per group: the members of one client and
//! slot given back by `multi_release.lua`, each as its own unlock would give it back
//! (`lock/guard.rs`'s `release`), under every member owner's turn.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use lock_core::multi::MultiReleaseMember;
use lock_core::{names::key_slot, Error, ErrorKind, Release, Result};

use crate::lock::guard::{LockGuard, PreparedRelease};
use crate::lock::retry::ReplaySafeRetry;

/// The groups of `guards` (canonical order) that one script releases: consecutive
/// guards of one client and, in a cluster, one hash slot (as the acquire grouped them).
pub(crate) fn groups(guards: &[LockGuard]) -> Vec<Range<usize>> {
    let mut groups: Vec<Range<usize>> = Vec::new();
    for (i, guard) in guards.iter().enumerate() {
        let joins = groups.last().is_some_and(|last| {
            let first = guards[last.start].shared();
            let lock = guard.shared();
            let clustered = fred::interfaces::ClientLike::is_clustered(lock.client.store.client());
            Arc::ptr_eq(&first.client, &lock.client)
                && (!clustered || key_slot(first.key().as_bytes()) == key_slot(lock.key().as_bytes()))
        });
        match groups.last_mut() {
            Some(last) if joins => last.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    groups
}

/// Gives back every guard of `guards` (canonical order), one script per group, the last
/// group first, and answers each guard's result as its own [`LockGuard::unlock`] would
/// (in `guards`' order). A group of one is that guard's own unlock.
///
/// Cancel safety: the guards of groups not yet sent are dropped, which releases each in
/// the background; a group's release already sent still applies.
pub(crate) async fn unlock_all(mut guards: Vec<LockGuard>) -> Vec<Result<()>> {
    let groups = groups(&guards);
    let mut results: Vec<Option<Result<()>>> = guards.iter().map(|_| None).collect();
    for group in groups.into_iter().rev() {
        let members: Vec<LockGuard> = guards.drain(group.clone()).collect();
        if let [_] = members.as_slice() {
            for guard in members {
                results[group.start] = Some(guard.unlock().await);
            }
            continue;
        }
        let mut prepared = Vec::with_capacity(members.len());
        let mut at = Vec::with_capacity(members.len());
        for (i, guard) in group.clone().zip(members) {
            match guard.prepare_unlock() {
                Ok(release) => {
                    prepared.push(release);
                    at.push(i);
                }
                Err(error) => results[i] = Some(Err(error)),
            }
        }
        let answers = {
            let releases: Vec<&PreparedRelease> = prepared.iter().collect();
            if tracing::enabled!(target: crate::telemetry::TARGET, tracing::Level::DEBUG) && !releases.is_empty() {
                // One `leasehold.release` span for the group's one round trip: its first
                // member's key, how many members, the first member error's outcome.
                use tracing::Instrument;
                let span = tracing::debug_span!(
                    target: crate::telemetry::TARGET,
                    "leasehold.release",
                    lock = %releases[0].lock().key(),
                    kind = releases[0].lock().telemetry_kind().as_str(),
                    members = releases.len(),
                    db.system.name = "redis",
                    outcome = tracing::field::Empty,
                );
                let answers = release_group(&releases).instrument(span.clone()).await;
                let outcome = match answers.iter().find_map(|answer| answer.as_ref().err()) {
                    None => "released",
                    Some(error) if error.is_lock_lost() => "lost",
                    Some(error) if error.is_not_owner() => "not_owner",
                    Some(_) => "error",
                };
                span.record("outcome", outcome);
                answers
            } else {
                release_group(&releases).await
            }
        };
        for ((i, release), result) in at.into_iter().zip(prepared).zip(answers) {
            release.finish(&result);
            results[i] = Some(result);
        }
    }
    results.into_iter().map(|result| result.unwrap_or(Ok(()))).collect()
}

/// Releases the guards of a dropped [`MultiGuard`](crate::MultiGuard) in the
/// background, one script per group (a group of one by its guard's own `Drop`). Never
/// blocks: each group is one spawned task on the runtime that acquired its guards.
pub(crate) fn drop_all(mut guards: Vec<LockGuard>) {
    for group in groups(&guards).into_iter().rev() {
        let members: Vec<LockGuard> = guards.drain(group).collect();
        if members.len() == 1 {
            // Its own `Drop` releases it in the background.
            drop(members);
            continue;
        }
        let mut runtime = None;
        let prepared: Vec<PreparedRelease> = members
            .into_iter()
            .filter_map(LockGuard::prepare_drop)
            .map(|(release, handle)| {
                runtime.get_or_insert(handle);
                release
            })
            .collect();
        let Some(runtime) = runtime else { continue };
        // A dead runtime drops the task (and the prepared releases with it): the leases
        // then expire on their own.
        drop(runtime.spawn(async move {
            let releases: Vec<&PreparedRelease> = prepared.iter().collect();
            for (release, result) in releases.iter().zip(release_group(&releases).await) {
                if let Err(error) = result {
                    tracing::warn!(
                        target: crate::telemetry::TARGET,
                        lock = %release.lock().key(),
                        %error,
                        "background release of a dropped multi-lock member failed; the lease will expire",
                    );
                }
            }
        }));
    }
}

/// Sends the release of one guard of each of `releases` (one client, one slot, each
/// detached and counted as releasing) in one `multi_release.lua` call, and records the
/// answers: per member, what `lock/guard.rs`'s `release` answers for one.
///
/// Each attempt takes every member owner's turn in canonical order (as the acquire
/// does, so no two callers wait on each other) and sets each owner's count to what it
/// accounts for then, less this guard's hold: a retry after an ambiguous failure or an
/// unsent command sets the same counts again, within the replay window (`retry.rs`).
async fn release_group(releases: &[&PreparedRelease]) -> Vec<Result<()>> {
    let mut results: Vec<Option<Result<()>>> = releases.iter().map(|_| None).collect();
    let Some(first) = releases.first() else { return Vec::new() };
    let client = &first.lock().client;
    let mut retry = ReplaySafeRetry::new();
    loop {
        let pending: Vec<usize> = (0..releases.len()).filter(|&i| results[i].is_none()).collect();
        let mut turns = Vec::with_capacity(pending.len());
        for &i in &pending {
            turns.push(releases[i].lock().holds.turn().await);
        }
        let mut members = Vec::with_capacity(pending.len());
        let mut sent = Vec::with_capacity(pending.len());
        for &i in &pending {
            let (lock, hold) = (releases[i].lock(), releases[i].hold());
            let names = match lock.names() {
                Ok(names) => names,
                Err(error) => {
                    results[i] = Some(Err(error));
                    continue;
                }
            };
            if hold.lease.is_marked_lost() {
                // As a single release: gone after an attempt that may have run is
                // released; gone before, lost.
                results[i] = Some(if retry.may_have_applied() {
                    Ok(())
                } else {
                    Err(Error::new(ErrorKind::LockLost, "the lock was lost before unlock").with_key(names.key()))
                });
                continue;
            }
            let target = lock.holds.accounted().saturating_sub(1);
            let need_ms = if target > 0 && hold.has_watchdog_guards() { client.watchdog_lease_ms } else { 0 };
            members.push(MultiReleaseMember { names, owner: &lock.owner, target, need_ms });
            sent.push(i);
        }
        if members.is_empty() {
            break;
        }
        let first_sent = retry.sending();
        match client.store.multi_release(&members).await {
            Ok(answers) => {
                for ((&i, member), answer) in sent.iter().zip(&members).zip(answers) {
                    let (lock, hold) = (releases[i].lock(), releases[i].hold());
                    let need = Duration::from_millis(member.need_ms);
                    results[i] = Some(match answer {
                        Ok(Release::NotOwner) if member.target == 0 && retry.may_have_applied() => {
                            tracing::debug!(
                                target: crate::telemetry::TARGET,
                                lock = %member.names.key(),
                                "multi-lock unlock retried after a lost reply: nothing left to release",
                            );
                            lock.holds.released(hold, Release::Released, first_sent, Duration::ZERO);
                            Ok(())
                        }
                        Ok(Release::NotOwner) => {
                            lock.holds.released(hold, Release::NotOwner, first_sent, need);
                            Err(Error::new(ErrorKind::NotOwner, "the lock is not held by this owner")
                                .with_key(member.names.key()))
                        }
                        Ok(answer) => {
                            lock.holds.released(hold, answer, first_sent, need);
                            Ok(())
                        }
                        Err(error) => Err(error),
                    });
                }
                break;
            }
            Err(error) => {
                drop(turns);
                if let Some(backoff) = retry.after(&error, &client.config) {
                    tokio::time::sleep(backoff).await;
                    continue;
                }
                // Every member sent shares the one failure: the first gets it, the
                // others its kind and text.
                let (kind, text) = (error.kind(), format!("the multi-lock group's release failed: {error}"));
                let mut error = Some(error);
                for (&i, member) in sent.iter().zip(&members) {
                    let own =
                        error.take().unwrap_or_else(|| Error::new(kind, text.clone()).with_key(member.names.key()));
                    results[i] = Some(Err(own));
                }
                break;
            }
        }
    }
    results.into_iter().map(|result| result.unwrap_or(Ok(()))).collect()
}
