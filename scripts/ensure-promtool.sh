#!/usr/bin/env bash
# Makes sure `promtool` is there for tests/alert_rules.rs, which checks and unit-tests
# the alert rules in deploy/prometheus/ (and the Grafana dashboard's queries). Sourced
# by test.sh. promtool comes with Debian's `prometheus` package.
#
# Under CI (CI=true) a missing promtool is installed with apt-get as root, or this
# fails; elsewhere it prints why and goes on, and those tests skip with a printed
# reason. The package also brings the Prometheus server, which scripts/prometheus-demo.sh
# runs (on a port of its own, with its own data directory).
if ! command -v promtool >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
            echo "promtool not found: installing Debian's prometheus package..." >&2
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
        else
            echo "error: CI needs promtool (apt-get install prometheus) for tests/alert_rules.rs" >&2
            return 1 2>/dev/null || exit 1
        fi
    else
        echo "promtool not found: tests/alert_rules.rs will skip its promtool checks" >&2
        echo "    (install it: sudo apt-get install prometheus)" >&2
    fi
fi
if command -v promtool >/dev/null 2>&1; then
    promtool --version 2>&1 | head -1 >&2
fi
