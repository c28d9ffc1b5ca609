#!/usr/bin/env bash
# The flash-sale ("seckill") demo. With REDIS_URL unset it starts a throwaway
# redis-server itself. Extra arguments go to the demo (try --help, --no-lock).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh
exec cargo run --release --quiet -p leasehold-demo --bin seckill -- "$@"
