//! Lease renewal for leasehold: one scheduler per client, renewing every held lock in
//! batches, and telling holders when a lock is lost.
//!
//! **Internal to leasehold: no stability promise.** This crate is published only because
//! [`leasehold`](https://docs.rs/leasehold) depends on it; its API may change in any
//! release, and `leasehold` pins it to the exact version it was built with. Depend on
//! `leasehold` instead.
//!
//! - A held lock in watchdog mode is [`Watchdog::register`]ed on acquire; the returned
//!   [`Renewal`] deregisters it when dropped (unlock, dropped guard, cancelled acquire),
//!   synchronously, so no renewal can be scheduled for it afterwards.
//! - Every period (`timeout / 3`) the scheduler renews all registered holds with
//!   `renew_batch.lua`, `batch_size` keys per call, calls running concurrently (fred
//!   pipelines them on one connection).
//! - A renewal that finds the owner field gone marks the hold **lost** and drops it: it is
//!   never renewed again. A failed call (timeout, connection) is retried every
//!   `retry_interval` until the hold's local deadline, computed from when the last
//!   successful renewal was *sent*; past it, the hold is lost: reported once (counted,
//!   the `leasehold.lost` event) by whoever sees the deadline pass first (a holder's
//!   `lost()`, a deadline sweep of the scheduler, the hold's deregistration), before
//!   any `lost()` of it resolves, and never renewed again.
//! - Every held lock, fixed lease included, is also [`Watchdog::track`]ed: after each
//!   reconnect ([`Watchdog::renew_now`], [`Watchdog::renew_on_each`]) the owner fields of
//!   the tracked holds that the watchdog does not renew are checked with
//!   `verify_batch.lua`, read-only (a fixed lease is never extended), and a hold whose
//!   owner field is gone is marked lost.
//! - With [`WatchdogConfig::topology_check`] (a cluster), while anything is registered or
//!   tracked the scheduler asks [`Renewer::follow_topology`] every interval whether a
//!   slot's primary changed, which fred hears of by itself only at the next command on
//!   that shard; a change renews and checks every hold, as a reconnect does.
//! - In a cluster, a batch whose slot is migrating is still answered: [`LockStore`](lock_core::LockStore)
//!   follows the source's `ASK` to the target and splits a batch whose keys straddle
//!   the move, so a hand-over longer than the lease does not lose the holds (the
//!   scheduler just sees the answer).
//! - [`Watchdog::lag`] (how late the last round started) and
//!   [`Watchdog::soonest_deadline`] (the renewed holds' nearest deadline) feed
//!   leasehold's `Client::health`.
//! - The scheduler task holds only a `Weak` reference and ends when the `Watchdog` is
//!   dropped (bb8's reaper pattern).

/// The `tracing` target of everything the watchdog emits (the `leasehold.renew` spans,
/// the `leasehold.lost` event, failed renewals and checks): under `leasehold`, so
/// `RUST_LOG=leasehold=debug` shows it (see leasehold's `docs/observability.md`).
pub const TARGET: &str = "leasehold::watchdog";

mod observer;
mod renewer;
mod scheduler;

pub use observer::{LostReason, WatchdogObserver};
pub use renewer::Renewer;
pub use scheduler::{RenewSpec, Renewal, Tracking, Watchdog, WatchdogConfig, WatchdogStats};
