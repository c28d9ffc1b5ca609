//! The four signals `run` and `elect` pass on to their child's process group, and that
//! end `hold` and `leader --watch`: SIGINT, SIGTERM, SIGHUP, SIGQUIT.

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, Signal as Listener, SignalKind};

/// Handlers for the four signals, installed once per process: from then on they no
/// longer end it by default; each is taken with [`Forwarded::next`].
pub(crate) struct Forwarded {
    listeners: [(Listener, Signal); 4],
}

impl Forwarded {
    /// Installs the handlers: from here on these signals no longer end the process.
    /// On failure, says why on stderr and gives the exit code.
    pub(crate) fn install_or_exit_code() -> Result<Forwarded, u8> {
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|error| {
                eprintln!("leasehold: cannot install signal handlers: {error}");
                crate::exit::SOFTWARE
            })
        };
        Ok(Forwarded {
            listeners: [
                (listen(SignalKind::interrupt())?, Signal::SIGINT),
                (listen(SignalKind::terminate())?, Signal::SIGTERM),
                (listen(SignalKind::hangup())?, Signal::SIGHUP),
                (listen(SignalKind::quit())?, Signal::SIGQUIT),
            ],
        })
    }

    /// The next of the four signals to arrive.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal not yet taken stays pending in its listener.
    pub(crate) async fn next(&mut self) -> Signal {
        let [(a, sa), (b, sb), (c, sc), (d, sd)] = &mut self.listeners;
        tokio::select! {
            _ = a.recv() => *sa,
            _ = b.recv() => *sb,
            _ = c.recv() => *sc,
            _ = d.recv() => *sd,
        }
    }
}

/// Whether `sig` asks the process to end (SIGINT, SIGTERM), as opposed to SIGHUP and
/// SIGQUIT, which are only passed on to a child (it may reload on SIGHUP).
pub(crate) fn is_termination(sig: Signal) -> bool {
    matches!(sig, Signal::SIGINT | Signal::SIGTERM)
}
