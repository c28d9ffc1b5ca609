#!/usr/bin/env bash
# Writes the whole Lua scripts, assembled by crates/lock-core/build.rs from
# crates/lock-core/lua/templates/ and crates/lock-core/lua/fragments/ (where they are
# edited), to the checked-in copies that readers read: crates/lock-core/lua/*.lua and the
# workspace's lua/*.lua. crates/lock-core/tests/lua_copies.rs fails while they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q -p leasehold-lock-core --example sync_lua
