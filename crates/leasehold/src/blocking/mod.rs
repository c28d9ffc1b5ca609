//! A blocking API for synchronous Rust (feature `blocking`): CLI tools, batch jobs,
//! `std::thread` workers, code called from C.
//!
//! Every type here is the blocking form of the async type of the same name, with the
//! same methods, owner rules and errors: [`Client`] (and [`ClientBuilder`]), [`Lock`],
//! [`FairLock`], [`FencedLock`], [`ReadWriteLock`], [`SimpleLock`] and [`MultiLock`],
//! and their guards, [`CountDownLatch`], [`Semaphore`] and [`PermitExpirableSemaphore`]
//! (with its [`Permit`]), and [`Election`] (with its [`Leadership`] and [`Observer`]).
//!
//! - **A runtime thread of its own.** A [`Client`] starts a current-thread tokio runtime
//!   on a thread named `leasehold-blocking`, connects on it and keeps it running: the
//!   watchdog renews holds, waiters are woken and fred's connections are served while
//!   the application's threads are busy or asleep. Each blocking call hands its work to
//!   that thread and parks the caller until it is answered (`reqwest::blocking`'s
//!   pattern). No tokio runtime of the application's is needed.
//! - **Never inside an async runtime.** A blocking call made on a thread that runs async
//!   tasks (a tokio worker, or inside `block_on`) would stall that runtime, or deadlock
//!   it; where tokio would panic, leasehold refuses the call with
//!   [`ErrorKind::AsyncContext`](crate::ErrorKind::AsyncContext), nothing sent. From
//!   async code use the async API (or [`Client::as_async`]), or call the blocking API
//!   inside `tokio::task::spawn_blocking`, which is allowed, as tokio allows it.
//! - **Guards** release with `unlock()`, which reports errors; dropping one releases it
//!   in the background on the runtime thread, never blocking. `is_lost()` never blocks;
//!   `wait_lost(timeout)` blocks until the hold is lost or the time passed.
//! - **The last clone** of a client (lock handles count, guards do not) shuts it down
//!   in the background when dropped, releasing what it still holds, and ends the thread
//!   ([`Client`], "Dropping the last clone"). [`Client::shutdown`] does it and waits.
//! - A blocking call cannot be cancelled: bound a wait with `try_lock_for`.
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//!
//! fn main() -> leasehold::Result<()> {
//!     let client = leasehold::blocking::Client::connect("redis://127.0.0.1:6379")?;
//!     let lock = client.lock("nightly-report");
//!     let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? else {
//!         eprintln!("another instance runs the report");
//!         return Ok(());
//!     };
//!     // ... the critical section: renewed by the runtime thread while held ...
//!     if guard.wait_lost(Duration::from_millis(10))? {
//!         eprintln!("lock lost: stop writing");
//!     }
//!     guard.unlock()?;
//!     client.shutdown()
//! }
//! ```
//!
//! `docs/blocking.md` in the repository has the design, and how to wrap a new lock kind.

mod client;
mod election;
mod held;
mod latch;
mod lock;
mod multi;
mod permit_semaphore;
mod runtime;
mod rwlock;
mod semaphore;
mod shared;
mod simple;

pub use client::{Client, ClientBuilder};
pub use election::{Election, Leadership, Observer};
pub use latch::CountDownLatch;
pub use lock::fair::FairLock;
pub use lock::fenced::{FencedGuard, FencedLock};
pub use lock::{Lock, LockGuard};
pub use multi::{MultiGuard, MultiLock};
pub use permit_semaphore::{Permit, PermitExpirableSemaphore};
pub use rwlock::{ReadGuard, ReadWriteLock, WriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use simple::{SimpleGuard, SimpleLock};
