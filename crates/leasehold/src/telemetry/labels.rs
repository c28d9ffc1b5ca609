//! The closed sets of values that label metrics and fill span fields: lock kinds,
//! acquire outcomes, how holds end, connection roles. Kept apart from the counters (`mod.rs`) so that the
//! metric handles (`handles.rs`) can name them without importing the counters.

/// The lock kinds, as labels and span fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Lock,
    Fenced,
    Fair,
    Simple,
    Read,
    Write,
    /// A count-down latch's wait (no acquire, no hold).
    Latch,
    /// A semaphore's permits (`Semaphore`).
    Semaphore,
    /// A leader election's lead (`Election`: a campaign is an acquire, a lead a hold).
    Election,
}

impl Kind {
    /// Every kind, in [`Kind::index`] order.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [Kind; 9] = [
        Kind::Lock,
        Kind::Fenced,
        Kind::Fair,
        Kind::Simple,
        Kind::Read,
        Kind::Write,
        Kind::Latch,
        Kind::Semaphore,
        Kind::Election,
    ];

    /// The kind's place in [`Kind::ALL`].
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The label of a lock of `kind`.
    pub(crate) fn of(kind: &lock_core::LockKind) -> Kind {
        match kind {
            lock_core::LockKind::Reentrant { .. } => Kind::Lock,
            lock_core::LockKind::Fenced { .. } => Kind::Fenced,
            lock_core::LockKind::Fair { .. } => Kind::Fair,
            lock_core::LockKind::Read { .. } => Kind::Read,
            lock_core::LockKind::Write { .. } => Kind::Write,
            lock_core::LockKind::Election { .. } => Kind::Election,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fenced => "fenced",
            Kind::Fair => "fair",
            Kind::Simple => "simple",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Latch => "latch",
            Kind::Semaphore => "semaphore",
            Kind::Election => "election",
        }
    }
}

/// How an acquire ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// One attempt (zero wait) found the lock held.
    Busy,
    TimedOut,
    Error,
}

impl Outcome {
    /// Every outcome, in [`Outcome::index`] order.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [Outcome; 4] = [Outcome::Acquired, Outcome::Busy, Outcome::TimedOut, Outcome::Error];

    /// The outcome's place in [`Outcome::ALL`].
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Busy => "busy",
            Outcome::TimedOut => "timed_out",
            Outcome::Error => "error",
        }
    }

    /// The outcome of an acquire that waited (`waits`) or tried once.
    pub(crate) fn of<T>(result: &lock_core::Result<Option<T>>, waits: bool) -> Outcome {
        match result {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) if waits => Outcome::TimedOut,
            Ok(None) => Outcome::Busy,
            Err(_) => Outcome::Error,
        }
    }
}

/// How a guard's hold ended, as the `end` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldEnd {
    Released,
    Lost,
    /// Dropped or detached without `unlock`.
    Dropped,
}

impl HoldEnd {
    /// Every end, in [`HoldEnd::index`] order.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [HoldEnd; 3] = [HoldEnd::Released, HoldEnd::Lost, HoldEnd::Dropped];

    /// The end's place in [`HoldEnd::ALL`].
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HoldEnd::Released => "released",
            HoldEnd::Lost => "lost",
            HoldEnd::Dropped => "dropped",
        }
    }
}

/// Which of a client's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The command connection (every node's, in a cluster): acquires, releases, renewals.
    Commands,
    /// The pub/sub connection that waiters' wake-ups come through.
    Subscriber,
}

impl Role {
    /// Every role, in [`Role::index`] order.
    pub(crate) const ALL: [Role; 2] = [Role::Commands, Role::Subscriber];

    /// The role's place in [`Role::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The `role` label.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Commands => "commands",
            Role::Subscriber => "subscriber",
        }
    }
}
