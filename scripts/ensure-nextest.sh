#!/usr/bin/env bash
# Makes sure `cargo nextest` is installed, for CI (.ci/run sources this before
# scripts/test.sh, which uses nextest when it is there and `cargo test` otherwise).
# Built from crates.io with `cargo install --locked` at a pinned version (no prebuilt
# binary is downloaded); takes a few minutes once per machine. Without self-update, so
# it needs nothing but crates.io.
NEXTEST_VERSION=0.9.151
if ! cargo nextest --version 2>/dev/null | grep -q "cargo-nextest $NEXTEST_VERSION"; then
    echo "cargo-nextest $NEXTEST_VERSION not found: installing it from crates.io..." >&2
    cargo install cargo-nextest --version "$NEXTEST_VERSION" --locked \
        --no-default-features --features default-no-update \
        || { return 1 2>/dev/null || exit 1; }
fi
cargo nextest --version >&2
