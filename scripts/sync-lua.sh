#!/usr/bin/env bash
# Copies the scripts of the top-level lua/ (where they are read and edited) into
# crates/lock-core/lua/, the copy that lock-core compiles in and that its published
# package carries. crates/lock-core/tests/lua_copies.rs fails while the two differ.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -f crates/lock-core/lua/*.lua
cp lua/*.lua crates/lock-core/lua/
echo "copied $(ls lua/*.lua | wc -l) scripts from lua/ to crates/lock-core/lua/"
