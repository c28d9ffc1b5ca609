#!/usr/bin/env bash
# Packages every published crate and verifies each package by building it alone, in
# dependency order: lock-core, then lock-pubsub and lock-watchdog, then leasehold.
# cargo (1.95, the version this was run with) verifies each crate against the ones
# packaged before it (a temporary local registry under target/package-check/package/),
# so nothing has to be on crates.io first. Extra arguments go to cargo (e.g.
# --allow-dirty before committing).
set -euo pipefail
cd "$(dirname "$0")/.."
# Packages and their verify builds go to a target dir of their own. The published crates
# are registry crates there (name 0.1.0 from a temporary registry), and cargo treats
# registry crates as immutable: it would reuse an earlier run's extraction
# ($CARGO_HOME/registry/src/-HASH/) and build artifacts of the same name and version
# instead of the packages just made. So both are dropped first (third-party builds stay).
out=target/package-check
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rm -rf "$cargo_home"/registry/src/-*/leasehold-* "$cargo_home"/registry/cache/-*/leasehold-*
rm -rf "$out"/package "$out"/debug/.fingerprint/leasehold-*
CARGO_TARGET_DIR="$out" cargo package --locked \
    -p leasehold-lock-core -p leasehold-lock-watchdog -p leasehold-lock-pubsub -p leasehold "$@"
# (Listings are read into variables first: `grep -q` closing a pipe early would make
# `tar` fail under pipefail.)
for crate in $out/package/leasehold-lock-core-*.crate $out/package/leasehold-lock-watchdog-*.crate \
    $out/package/leasehold-lock-pubsub-*.crate $out/package/leasehold-[0-9]*.crate; do
    listing=$(tar -tvzf "$crate")
    for file in LICENSE-MIT LICENSE-APACHE README.md; do
        # A regular file (mode "-rw…"), not a symlink.
        grep -q "^-.* [^/]*/$file\$" <<<"$listing" || { echo "error: $crate lacks $file" >&2; exit 1; }
    done
done
listing=$(tar -tzf "$out"/package/leasehold-lock-core-*.crate)
# The compiled-in copy, and what tests/lua_copies.rs needs to check it in the package:
# the templates, the fragments and the assembler.
for file in lua/acquire.lua lua/templates/acquire.lua lua/fragments/time.lua tools/assemble.rs tests/lua_copies.rs; do
    grep -q "^[^/]*/$file\$" <<<"$listing" || { echo "error: the lock-core package lacks $file" >&2; exit 1; }
done
echo "packaged and verified: lock-core, lock-watchdog, lock-pubsub, leasehold (licenses, readme, scripts included)"
