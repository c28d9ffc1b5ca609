#!/usr/bin/env bash
# Packages every published crate and verifies each package by building it alone, in
# dependency order: lock-core, then lock-pubsub and lock-watchdog, then leasehold.
# cargo (1.95, the version this was run with) verifies each crate against the ones
# packaged before it (a temporary local registry under target/package/), so nothing has
# to be on crates.io first. Extra arguments go to cargo (e.g. --allow-dirty before committing).
set -euo pipefail
cd "$(dirname "$0")/.."
# cargo extracts the packages it verifies against into $CARGO_HOME/registry/src/-HASH/
# (HASH names the temporary registry's path) and reuses an extraction of the same name
# and version. A stale one from an earlier run in the same folder (same 0.1.0) would be
# built instead of the package just made, so drop leasehold's from those registries.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rm -rf "$cargo_home"/registry/src/-*/leasehold-* "$cargo_home"/registry/cache/-*/leasehold-*
# Registry crates count as immutable, so the verify builds' artifacts of an earlier run
# (same name, same version) would be reused too: start them afresh.
rm -rf target/package
cargo package --locked \
    -p leasehold-lock-core -p leasehold-lock-watchdog -p leasehold-lock-pubsub -p leasehold "$@"
# (Listings are read into variables first: `grep -q` closing a pipe early would make
# `tar` fail under pipefail.)
for crate in target/package/leasehold-lock-core-*.crate target/package/leasehold-lock-watchdog-*.crate \
    target/package/leasehold-lock-pubsub-*.crate target/package/leasehold-[0-9]*.crate; do
    listing=$(tar -tvzf "$crate")
    for file in LICENSE-MIT LICENSE-APACHE README.md; do
        # A regular file (mode "-rw…"), not a symlink.
        grep -q "^-.* [^/]*/$file\$" <<<"$listing" || { echo "error: $crate lacks $file" >&2; exit 1; }
    done
done
listing=$(tar -tzf target/package/leasehold-lock-core-*.crate)
grep -q '/lua/acquire.lua$' <<<"$listing" || { echo "error: the lock-core package lacks its lua/ scripts" >&2; exit 1; }
echo "packaged and verified: lock-core, lock-watchdog, lock-pubsub, leasehold (licenses, readme, scripts included)"
