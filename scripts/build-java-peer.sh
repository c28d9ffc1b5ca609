#!/usr/bin/env bash
# Builds the Java Redisson peer of the interop suite (tests/redisson_java.rs):
# interop/redisson/target/peer.jar, one runnable jar with redisson 4.7.0 and its
# dependencies. Skips the build when the jar is newer than pom.xml and every source.
# Maven runs offline (`-o`, from ~/.m2) when it can and fetches from Maven Central only
# the first time.
#
# Java 17 and Maven are needed for the tests only (not to use the crates). When they are
# missing: under CI (CI=true) they are installed with apt-get as root, or the script
# fails; locally it prints why and exits 0, and the Java suite then skips its tests
# (tests/support/src/redisson_java.rs, `JavaPeer::jar`).
set -euo pipefail
cd "$(dirname "$0")/../interop/redisson"
if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
            echo "java or mvn not found: installing openjdk-17-jdk-headless and maven..." >&2
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
        else
            echo "error: CI needs Java 17 and Maven for the Redisson interop suite" >&2
            exit 1
        fi
    else
        echo "java or mvn not found: the Redisson Java interop suite will skip its tests" >&2
        echo "    (install Java 17 and Maven: sudo apt-get install openjdk-17-jdk-headless maven)" >&2
        exit 0
    fi
fi
jar=target/peer.jar
if [ -f "$jar" ] && [ -z "$(find pom.xml src -newer "$jar" -print -quit)" ]; then
    echo "java peer: $jar is up to date" >&2
    exit 0
fi
echo "java peer: building $jar" >&2
if ! mvn -B -q -o package >/tmp/leasehold-java-peer-offline.log 2>&1; then
    echo "java peer: offline build failed (first build?): fetching from Maven Central" >&2
    mvn -B -q package
fi
test -f "$jar"
