//! This machine's name, as the library's client description gives it: for `elect`'s
//! default value and the CLI's connection names.

/// The host name: the kernel's (`/proc/sys/kernel/hostname`, Linux), else `HOSTNAME`,
/// else `unknown` (as the library's client description names it).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|name| !name.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}
