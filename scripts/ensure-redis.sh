#!/usr/bin/env bash
# Makes sure redis-server is installed (the tests and the demo start their own,
# throwaway servers; nothing needs to be running). Sourced by demo.sh and test.sh.
if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not found: installing it (Debian/Ubuntu apt-get)..." >&2
    if [ "$(id -u)" = "0" ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "error: install redis-server first (e.g. apt-get install -y redis-server, brew install redis)" >&2
        exit 1
    fi
    if command -v apt-get >/dev/null 2>&1; then
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
    else
        echo "error: no apt-get here; install redis-server with your package manager" >&2
        exit 1
    fi
fi
redis-server --version >&2
