#!/usr/bin/env bash
# Writes the one checked-in copy of the Lua scripts, crates/lock-core/lua/*.lua (which
# lock-core compiles in with include_str!), assembled by crates/lock-core/tools/assemble.rs
# from crates/lock-core/lua/templates/ and crates/lock-core/lua/fragments/ (the source:
# edit those, then run this). crates/lock-core/tests/lua_copies.rs fails while they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q -p leasehold-lock-core --example sync_lua
