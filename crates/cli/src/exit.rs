//! The exit codes of the command (documented in `--help` and `docs/cli.md`).
//!
//! sysexits(3) values where one fits, `timeout(1)`'s for a stopped child, so that none
//! of them is 1, the code a failing child most often uses.

/// `run`: the lock was lost or taken away, or its fixed lease was about to end, and the
/// child stopped (as `timeout(1)` when it stops a child); `hold`: the lock was lost;
/// `elect`: the lead was lost or taken away and the child stopped.
pub(crate) const LOST: u8 = 124;
/// `run`: the command was found but could not be executed (as a shell).
pub(crate) const NOT_EXECUTABLE: u8 = 126;
/// `run`: the command was not found (as a shell).
pub(crate) const NOT_FOUND: u8 = 127;
/// Usage error: bad flags or arguments (`EX_USAGE`).
pub(crate) const USAGE: u8 = 64;
/// Redis could not be reached, or stopped answering (`EX_UNAVAILABLE`).
pub(crate) const UNAVAILABLE: u8 = 69;
/// Any other error from Redis or from this program (`EX_SOFTWARE`): a key of another
/// type (`WRONGTYPE`), a permission error (`NOPERM`), a script error.
pub(crate) const SOFTWARE: u8 = 70;
/// `run`, `hold`: the lock was not acquired within `--wait`; `elect`: not leading
/// within `--wait` (`EX_TEMPFAIL`: try again later).
pub(crate) const NOT_ACQUIRED: u8 = 75;
/// `leader`: nobody leads the election (as `systemctl is-active` and an LSB init
/// script's `status` say 3 for "not running"; never 1, a generic failure's code).
pub(crate) const NO_LEADER: u8 = 3;
/// `unlock`: nothing was unlocked (no such lock, or `--owner` did not hold it).
pub(crate) const NOTHING_DONE: u8 = 1;

/// The code for a library error: 69 when Redis could not be reached or did not answer,
/// 64 for a refused argument, else 70.
pub(crate) fn for_error(error: &leasehold::Error) -> u8 {
    if error.is_connection() || error.is_timeout() {
        UNAVAILABLE
    } else if error.is_invalid_argument() {
        USAGE
    } else {
        SOFTWARE
    }
}

/// `error` in words, with the server's or fred's own words under it when there are any
/// (the library's message leaves them to `source()`, which a plain `{error}` drops:
/// "Redis returned an error (see the source error)").
pub(crate) fn describe(error: &leasehold::Error) -> String {
    match error.fred_error().map(|source| source.details()) {
        Some(details) if !details.is_empty() => format!("{error}: {details}"),
        _ => error.to_string(),
    }
}

/// The code `run` exits with for a child that ended with `status`: its own code, or
/// 128 + N when signal N killed it (as a shell reports it).
pub(crate) fn for_child(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        // An exit code is 0..=255 on Unix; anything else cannot happen, but is not 0.
        (Some(code), _) => u8::try_from(code).unwrap_or(SOFTWARE),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(SOFTWARE),
        (None, None) => SOFTWARE,
    }
}
