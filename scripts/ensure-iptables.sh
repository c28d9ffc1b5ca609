#!/usr/bin/env bash
# Makes sure the partition tests (tests/partition.rs) can cut a server off with a real
# firewall rule: `ip` (iproute2) for the network namespace and `iptables` for the rule.
# Sourced by test.sh. They need root as well; without it (or without the tools) the
# partition tests print why and pass, except under CI=true, where they must run.
#
# Installs with apt-get only when running as root (a fresh Debian/Ubuntu machine, CI).
# Otherwise it prints the command to run and carries on: it never runs sudo by itself.
missing=""
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
command -v iptables >/dev/null 2>&1 || missing="$missing iptables"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing$missing for the partition tests (apt-get install -y$missing)..." >&2
        apt-get update -qq
        # shellcheck disable=SC2086 # one word per package
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    elif [ "${CI:-}" = "true" ]; then
        echo "error: the partition tests need$missing and root; install them (apt-get install -y$missing)" >&2
        return 1 2>/dev/null || exit 1
    else
        echo "note: the partition tests will be skipped: install$missing and run as root to run them" >&2
    fi
fi
