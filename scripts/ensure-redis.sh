#!/usr/bin/env bash
# Makes sure what the tests and the demo need is installed: redis-server (they start
# their own throwaway servers; nothing needs to be running), built with TLS (Debian's
# is). Sourced by demo.sh and test.sh. The TLS tests make their certificates in Rust
# (rcgen), so no openssl CLI is needed.
#
# Installs with apt-get only when running as root (a fresh Debian/Ubuntu machine, CI).
# Otherwise it prints the command to run and fails: it never runs sudo by itself.
if ! command -v redis-server >/dev/null 2>&1; then
    install="apt-get update && apt-get install -y redis-server"
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "redis-server not found: installing it ($install)..." >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
        echo "error: redis-server is not installed. Install it, then run this again:" >&2
        echo "    sudo sh -c '$install'     # Debian/Ubuntu" >&2
        echo "    brew install redis                                          # macOS" >&2
        return 1 2>/dev/null || exit 1
    fi
fi
redis-server --version >&2
