#!/usr/bin/env bash
# Runs every test against real redis-servers (and valkey-servers) the tests start
# themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh
source scripts/ensure-redis6.sh
# The standalone suites' `::valkey` tests: the same bodies on a valkey-server.
source scripts/ensure-valkey.sh
# The partition tests (tests/partition.rs): iproute2 and iptables, installed as root.
source scripts/ensure-iptables.sh
# promtool for the alert rules' checks and unit tests (tests/alert_rules.rs): installed
# under CI=true when missing; elsewhere those checks skip with a printed reason.
source scripts/ensure-promtool.sh
# The Java Redisson peer of tests/redisson_java.rs (Java 17 + Maven; built once, offline
# from ~/.m2 after the first fetch). Under CI=true it must build (Java installed if
# missing); elsewhere without Java the Java suite skips its tests with a printed reason.
bash scripts/build-java-peer.sh
# Doc examples first, so the run ends on the main suite's summary.
cargo test --workspace --doc
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
else
    cargo test --workspace --no-fail-fast --lib --bins --tests
fi
