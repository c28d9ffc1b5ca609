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
}

/// The futures of the kinds added after the lock: `Send` too (compile-time, never run).
async fn family_futures_are_send(
    multi: leasehold::MultiLock,
    latch: leasehold::CountDownLatch,
    semaphore: leasehold::Semaphore,
    pes: leasehold::PermitExpirableSemaphore,
    permit: leasehold::Permit,
    semaphore_permit: leasehold::SemaphorePermit,
) {
    let d = Duration::from_secs(1);
    send(&multi.lock());
    send(&multi.try_lock_with(d, d));
    send(&latch.wait());
    send(&latch.wait_timeout(d));
    send(&latch.count_down());
    send(&semaphore.acquire(1));
    send(&semaphore.try_acquire_for(1, d));
    send(&semaphore.release(1));
    send(&pes.acquire());
    send(&pes.try_acquire_with(d, d));
    send(&permit.lost());
    send(&permit.release());
    send(&semaphore_permit.release());
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
    send(&simple.try_lock(d));
    send(&simple.try_lock_with(d, d));
    send(&guard.lost());
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
