//! What users need to move leasehold's types across tasks: every public handle, guard,
//! error and stats snapshot is `Send + Sync + 'static`, and every future a public async
//! method returns is `Send` (an axum handler, or anything given to `tokio::spawn`, must
//! compile). Checked by the compiler: the functions below are never called.

#![allow(dead_code)]

use std::time::Duration;

use leasehold::{
    Client, ClientBuilder, ClientConfig, ClientStats, Error, FairLock, FencedGuard, FencedLock, Lock, LockGuard,
    SimpleGuard, SimpleLock, SubscriberStats, WatchdogStats,
};

fn shared<T: Send + Sync + 'static>() {}

fn send<T: Send>(_: &T) {}

#[test]
fn public_types_are_send_sync_and_static() {
    shared::<Client>();
    shared::<ClientBuilder>();
    shared::<ClientConfig>();
    shared::<Lock>();
    shared::<LockGuard>();
    shared::<FencedLock>();
    shared::<FencedGuard>();
    shared::<FairLock>();
    shared::<SimpleLock>();
    shared::<SimpleGuard>();
    shared::<Error>();
    shared::<WatchdogStats>();
    shared::<ClientStats>();
    shared::<SubscriberStats>();
    shared::<leasehold::ReadWriteLock>();
    shared::<leasehold::ReadGuard>();
    shared::<leasehold::WriteGuard>();
    shared::<leasehold::MultiLock>();
    shared::<leasehold::MultiGuard>();
    shared::<leasehold::CountDownLatch>();
    shared::<leasehold::Semaphore>();
    shared::<leasehold::PermitExpirableSemaphore>();
    shared::<leasehold::Permit>();
    shared::<leasehold::SemaphorePermit>();
    shared::<leasehold::Health>();
    shared::<leasehold::ClientDescription>();
    shared::<leasehold::HistoryEntry>();
    shared::<leasehold::PubsubMode>();
    shared::<leasehold::ShardedSubscriptionMode>();
}

/// The futures of the kinds added after the lock: `Send` too (compile-time, never run).
// One argument per public type whose futures are checked.
#[allow(clippy::too_many_arguments)]
async fn family_futures_are_send(
    rw: leasehold::ReadWriteLock,
    read: leasehold::ReadGuard,
    write: leasehold::WriteGuard,
    multi: leasehold::MultiLock,
    multi_guard: leasehold::MultiGuard,
    latch: leasehold::CountDownLatch,
    semaphore: leasehold::Semaphore,
    pes: leasehold::PermitExpirableSemaphore,
    permit: leasehold::Permit,
    semaphore_permit: leasehold::SemaphorePermit,
) {
    let d = Duration::from_secs(1);
    send(&rw.read());
    send(&rw.read_with_lease(d));
    send(&rw.try_read());
    send(&rw.try_read_for(d));
    send(&rw.try_read_with(d, d));
    send(&rw.write());
    send(&rw.write_with_lease(d));
    send(&rw.try_write());
    send(&rw.try_write_for(d));
    send(&rw.try_write_with(d, d));
    send(&read.lost());
    send(&write.lost());
    send(&read.unlock());
    send(&write.unlock());
    send(&multi.lock());
    send(&multi.lock_with_lease(d));
    send(&multi.try_lock());
    send(&multi.try_lock_for(d));
    send(&multi.try_lock_with(d, d));
    send(&multi_guard.lost());
    send(&multi_guard.unlock());
    send(&latch.wait());
    send(&latch.try_wait_for(d));
    send(&latch.count_down());
    send(&semaphore.acquire(1));
    send(&semaphore.try_acquire(1));
    send(&semaphore.try_acquire_for(1, d));
    send(&semaphore.release(1));
    send(&pes.acquire());
    send(&pes.acquire_with_lease(d));
    send(&pes.try_acquire());
    send(&pes.try_acquire_for(d));
    send(&pes.try_acquire_with(d, d));
    send(&permit.lost());
    send(&permit.release());
    send(&semaphore_permit.lost());
    send(&semaphore_permit.release());
}

/// Every guard has the same names: `key` (`keys` for the multi-guard, which holds
/// several), `is_lost`, `lease_deadline` (not for a semaphore's permits, which have no
/// lease), `detach`; `unlock` / `release` and `lost` are checked above. A compile-time
/// check (never run).
// One argument per guard type.
#[allow(clippy::too_many_arguments)]
fn every_guard_has_the_grid(
    guard: LockGuard,
    fenced_guard: FencedGuard,
    simple_guard: SimpleGuard,
    read: leasehold::ReadGuard,
    write: leasehold::WriteGuard,
    multi_guard: leasehold::MultiGuard,
    permit: leasehold::Permit,
    semaphore_permit: leasehold::SemaphorePermit,
) {
    macro_rules! grid {
        ($($guard:ident),*) => {$(
            let _: &str = $guard.key();
            let _: bool = $guard.is_lost();
            let _: std::time::Instant = $guard.lease_deadline();
            $guard.detach();
        )*};
    }
    grid!(guard, fenced_guard, simple_guard, read, write, permit);
    let _: Vec<&str> = multi_guard.keys();
    let _: bool = multi_guard.is_lost();
    let _: std::time::Instant = multi_guard.lease_deadline();
    multi_guard.detach();
    let _: &str = semaphore_permit.key();
    let _: bool = semaphore_permit.is_lost();
    semaphore_permit.detach();
}

/// The blocking guards have the same names, `wait_lost(timeout)` for `lost()`.
#[cfg(feature = "blocking")]
// One argument per guard type.
#[allow(clippy::too_many_arguments)]
fn every_blocking_guard_has_the_grid(
    guard: leasehold::blocking::LockGuard,
    fenced_guard: leasehold::blocking::FencedGuard,
    simple_guard: leasehold::blocking::SimpleGuard,
    read: leasehold::blocking::ReadGuard,
    write: leasehold::blocking::WriteGuard,
    multi_guard: leasehold::blocking::MultiGuard,
    permit: leasehold::blocking::Permit,
    semaphore_permit: leasehold::blocking::SemaphorePermit,
) {
    let d = Duration::from_secs(1);
    macro_rules! grid {
        ($($guard:ident),*) => {$(
            let _: &str = $guard.key();
            let _: bool = $guard.is_lost();
            let _: leasehold::Result<bool> = $guard.wait_lost(d);
            let _: std::time::Instant = $guard.lease_deadline();
            $guard.detach();
        )*};
    }
    grid!(guard, fenced_guard, simple_guard, read, write, permit);
    let _: Vec<&str> = multi_guard.keys();
    let _: bool = multi_guard.is_lost();
    let _: leasehold::Result<bool> = multi_guard.wait_lost(d);
    let _: std::time::Instant = multi_guard.lease_deadline();
    multi_guard.detach();
    let _: &str = semaphore_permit.key();
    let _: bool = semaphore_permit.is_lost();
    let _: leasehold::Result<bool> = semaphore_permit.wait_lost(d);
    semaphore_permit.detach();
}

/// The blocking acquire forms mirror the async ones (compile-time, never run).
#[cfg(feature = "blocking")]
fn every_blocking_kind_has_the_grid(client: &leasehold::blocking::Client) {
    let d = Duration::from_secs(1);
    let rw = client.read_write_lock("rw");
    let _ = (rw.try_read_for(d), rw.try_write_for(d), rw.try_read_with(d, d), rw.try_write_with(d, d));
    let pes = client.permit_expirable_semaphore("pes");
    let _ = (
        pes.acquire(),
        pes.acquire_with_lease(d),
        pes.try_acquire(),
        pes.try_acquire_for(d),
        pes.try_acquire_with(d, d),
    );
    let simple = client.simple_lock("simple");
    let _ = (simple.lock_with_lease(d), simple.try_lock_with(d, d));
    let semaphore = client.semaphore("semaphore");
    let _ = (semaphore.acquire(1), semaphore.try_acquire(1), semaphore.try_acquire_for(1, d));
    let _ = client.count_down_latch("latch").try_wait_for(d);
}

/// Every public future is `Send`: a compile-time check (never run).
// One argument per public type whose futures are checked.
#[allow(clippy::too_many_arguments)]
async fn futures_are_send(
    client: Client,
    lock: Lock,
    fenced: FencedLock,
    fair: FairLock,
    simple: SimpleLock,
    guard: LockGuard,
    fenced_guard: FencedGuard,
    simple_guard: SimpleGuard,
) {
    let d = Duration::from_secs(1);
    send(&Client::connect("redis://127.0.0.1"));
    send(&Client::builder().connect());
    send(&client.shutdown());
    send(&client.lock_history("k"));
    send(&client.describe_owner("owner"));
    send(&lock.lock());
    send(&lock.lock_with_lease(d));
    send(&lock.try_lock());
    send(&lock.try_lock_for(d));
    send(&lock.try_lock_with(d, d));
    send(&lock.force_unlock());
    send(&lock.is_locked());
    send(&lock.hold_count());
    send(&fenced.lock());
    send(&fenced.try_lock_with(d, d));
    send(&fair.lock());
    send(&fair.try_lock_with(d, d));
    send(&simple.lock_with_lease(d));
    send(&simple.try_lock_with(d, d));
    send(&fenced.lock_with_lease(d));
    send(&fenced.try_lock());
    send(&fenced.try_lock_for(d));
    send(&fair.lock_with_lease(d));
    send(&fair.try_lock());
    send(&fair.try_lock_for(d));
    send(&guard.lost());
    send(&fenced_guard.lost());
    send(&simple_guard.lost());
    send(&fenced_guard.fenced_set("k", "v"));
    send(&guard.unlock());
    send(&fenced_guard.unlock());
    send(&simple_guard.unlock());
}

/// The blocking API's types move between threads as the async ones do.
#[cfg(feature = "blocking")]
#[test]
fn blocking_types_are_send_sync_and_static() {
    use leasehold::blocking;
    shared::<blocking::Client>();
    shared::<blocking::ClientBuilder>();
    shared::<blocking::Lock>();
    shared::<blocking::LockGuard>();
    shared::<blocking::FairLock>();
    shared::<blocking::FencedLock>();
    shared::<blocking::FencedGuard>();
    shared::<blocking::ReadWriteLock>();
    shared::<blocking::ReadGuard>();
    shared::<blocking::WriteGuard>();
    shared::<blocking::SimpleLock>();
    shared::<blocking::SimpleGuard>();
    shared::<blocking::CountDownLatch>();
    shared::<blocking::MultiLock>();
    shared::<blocking::MultiGuard>();
    shared::<blocking::Semaphore>();
    shared::<blocking::SemaphorePermit>();
    shared::<blocking::PermitExpirableSemaphore>();
    shared::<blocking::Permit>();
}
