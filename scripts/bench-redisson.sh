#!/usr/bin/env bash
# leasehold against the real Redisson client, on ONE throwaway redis-server, in one run
# (issue 28 item 3). Not part of CI: it prints figures and asserts nothing about speed.
#
# Runs, one after another, each after FLUSHALL + CONFIG RESETSTAT:
#   hotpath    --only leasehold-watchdog,leasehold-lease,scripts --held 2000
#   contention --mode leasehold --clients 1 --seconds 5          (64 tasks on one lock)
#   contention --mode leasehold --clients 2 --tasks 2 --seconds 5 (a hand-off between 2 clients)
#   semaphore                                                     (4 clients x 16 tasks, 8 permits)
#   rwlock     --seconds 3
#   java -cp <jar> leasehold.interop.Bench --flush --hold-us H     (Redisson 4.7, interop/redisson;
#                                                                  H = contention's hold p50)
# then prints a leasehold/Redisson ratio table (markdown). About 3 minutes after the builds.
#
# Needs: cargo, redis-server + redis-cli, python3 (a free port), Java 17 and Maven (the
# first build fetches Redisson into ~/.m2; later builds run offline).
# BENCH_OUT=dir keeps the raw outputs there (else a temporary directory, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-redis.sh

out="${BENCH_OUT:-$(mktemp -d -t bench-redisson.XXXXXX)}"
mkdir -p "$out"

echo "== building (cargo --release, maven)" >&2
cargo build --release --quiet -p leasehold-benches --bin hotpath --bin contention --bin semaphore --bin rwlock
bin="${CARGO_TARGET_DIR:-target}/release"
(cd interop/redisson && { mvn -q -o package 2>/dev/null || mvn -q package; })
# The jar holding Bench (the project's one shaded jar, whatever its name).
jar=""
for candidate in interop/redisson/target/*.jar; do
    case "$candidate" in */original-*) continue ;; esac
    if ! command -v unzip >/dev/null 2>&1 || unzip -l "$candidate" 'leasehold/interop/Bench.class' >/dev/null 2>&1; then
        jar="$candidate"
        break
    fi
done
[ -n "$jar" ] || { echo "error: no jar with leasehold/interop/Bench.class in interop/redisson/target" >&2; exit 1; }

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
dir="$(mktemp -d -t bench-redisson-server.XXXXXX)"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --protected-mode no \
    --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done
export REDIS_URL="redis://127.0.0.1:$port"
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '+uncommitted')"
echo "== one redis-server ($(redis-server --version | awk '{print $3}')) on $REDIS_URL; commit $commit; raw outputs in $out" >&2

step() {
    local name="$1"
    shift
    redis-cli -p "$port" flushall sync >/dev/null
    redis-cli -p "$port" config resetstat >/dev/null
    echo "== $name: $*" >&2
    local before
    before="$(cut -d' ' -f1 /proc/loadavg)"
    "$@" >"$out/$name.txt" 2>&1 || { echo "error: $name failed (see $out/$name.txt)" >&2; tail -5 "$out/$name.txt" >&2; exit 1; }
    # The 1-minute load average before and after. It counts runnable threads: a Rust bench
    # adds up to about 2 (tokio's 2 workers), the Java bench more (64 threads + netty's).
    loads+=("$name $before→$(cut -d' ' -f1 /proc/loadavg)")
}
loads=()

start=$(date +%s)
step hotpath "$bin/hotpath" --only leasehold-watchdog,leasehold-lease,scripts --held 2000
step contention "$bin/contention" --mode leasehold --clients 1 --seconds 5
step contention2 "$bin/contention" --mode leasehold --clients 2 --tasks 2 --seconds 5
step semaphore "$bin/semaphore"
step rwlock "$bin/rwlock" --seconds 3
# Both clients hold the lock equally long: leasehold's 1 ms tokio sleep lasts its timer's
# ticks (about 2.1 ms, contention's "hold p50"); the Java bench parks that long.
hold_us="$(awk -F'|' '$2 ~ /^ hold p50/ { gsub(/ /, "", $3); printf "%d\n", $3 * 1000; exit }' "$out/contention.txt")"
step redisson java -cp "$jar" leasehold.interop.Bench --flush --seconds 5 --contention-seconds 5 --warmup-seconds 2 \
    --hold-us "${hold_us:-1000}"
echo "== done in $(($(date +%s) - start)) s" >&2

# The cell of the row labelled $3 in column $2 of the table (first column "metric" or
# "contender") printed in file $1; the first number of "a / b" cells when $4 is "first",
# the second when "second".
cell() {
    awk -F'|' -v col="$2" -v row="$3" -v part="${4:-all}" '
        function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
        $0 ~ /^\|/ {
            first = trim($2)
            if (first == "metric" || first == "contender") {
                idx = 0
                for (i = 3; i < NF; i++) if (trim($i) == col) idx = i
                next
            }
            if (idx && first == row) {
                v = trim($idx)
                n = split(v, p, " / ")
                if (part == "first") v = p[1]
                else if (part == "second") v = p[2]
                print v
                exit
            }
        }' "$1"
}
# A Java figure.
jfig() { awk -v name="$1" '$1 == "figure" && $2 == name { print $3 }' "$out/redisson.txt"; }
# leasehold's top-level requests per pair in hotpath: the commands of contender $1's
# breakdown that no leasehold script calls (its own EVALSHAs).
hot_requests() {
    awk -v who="$1" '
        BEGIN {
            n = split("decr decrby del exists get hdel hexists hget hgetall hincrby hkeys hlen hset incr incrby lindex lpop lpos lrem pexpire pttl publish rpush set spublish strlen time type zadd zcard zcount zrange zrangebyscore zrem zremrangebyrank zremrangebyscore zscore", s, " ")
            for (i = 1; i <= n; i++) script[s[i]] = 1
        }
        /^commands per pair/ { inside = 1; next }
        inside && $1 == who {
            sum = 0
            for (i = 2; i <= NF; i++) { split($i, kv, "="); if (!(kv[1] in script)) sum += kv[2] }
            printf "%.2f\n", sum
            exit
        }' "$out/hotpath.txt"
}
# An "x / y" ratio of two cells, min/max per task.
minmax() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "?"; else printf "%.2f\n", a / b }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "?"; else printf "%.2f\n", a / b }'; }

rows=()
add() { # label, leasehold, redisson, better
    rows+=("| $1 | $2 | $3 | $(ratio "$2" "$3") | $4 |")
}
H="$out/hotpath.txt"
C="$out/contention.txt"
C2="$out/contention2.txt"
S="$out/semaphore.txt"
R="$out/rwlock.txt"

add "RLock \`try_lock\`+unlock pairs/s, 64 tasks, distinct keys, watchdog (\`tryLock()\`)" \
    "$(cell "$H" leasehold-watchdog 'pairs/s (64 tasks, 5 s)')" "$(jfig hotpath.watchdog.pairs_per_s)" higher
add "the same, fixed 10 s lease (\`tryLock(0, 10 s)\`)" \
    "$(cell "$H" leasehold-lease 'pairs/s (64 tasks, 5 s)')" "$(jfig hotpath.lease.pairs_per_s)" higher
add "pair p50 ms, 1 task, watchdog" \
    "$(cell "$H" leasehold-watchdog 'pair p50 / p99 (1 task, 2000)' first)" "$(jfig hotpath.watchdog.p50_ms)" lower
add "pair p50 ms, 1 task, fixed lease" \
    "$(cell "$H" leasehold-lease 'pair p50 / p99 (1 task, 2000)' first)" "$(jfig hotpath.lease.p50_ms)" lower
add "requests per pair (top-level), watchdog" "$(hot_requests leasehold-watchdog)" "$(jfig hotpath.watchdog.requests_per_pair)" lower
add "Redis commands per pair incl. in-script, watchdog" \
    "$(cell "$H" leasehold-watchdog 'redis commands / pair (all)')" "$(jfig hotpath.watchdog.commands_per_pair)" lower
add "Redis CPU µs per pair, 64 tasks, watchdog" \
    "$(cell "$H" leasehold-watchdog 'redis CPU µs / pair (64 tasks)')" "$(jfig hotpath.watchdog.redis_cpu_us_per_pair)" lower
add "client process CPU µs per pair, 64 tasks, watchdog" \
    "$(cell "$H" leasehold-watchdog 'bench process CPU µs / pair (64 tasks)')" "$(jfig hotpath.watchdog.process_cpu_us_per_pair)" lower
c1="leasehold 1×64"
add "one lock, 64 tasks of 1 client: hand-off to another task p50 ms" \
    "$(cell "$C" "$c1" 'handoff to another task p50 / p99' first)" "$(jfig contention.1x64.handoff_other_p50_ms)" lower
add "one lock, 64 tasks: per-task acquisitions min/max" \
    "$(minmax "$(cell "$C" "$c1" 'acquisitions per task min / max' first)" "$(cell "$C" "$c1" 'acquisitions per task min / max' second)")" \
    "$(jfig contention.1x64.task_min_max)" higher
add "one lock, 64 tasks: requests per acquisition" \
    "$(cell "$C" "$c1" 'client commands / acquisition')" "$(jfig contention.1x64.requests_per_acq)" lower
add "one lock, 64 tasks: acquisitions/s (the hold below)" \
    "$(cell "$C" "$c1" 'acquisitions/s')" "$(jfig contention.1x64.rate)" higher
hold_lh="$(cell "$C" "$c1" 'hold p50 (1 ms sleep)')"
rows+=("| one lock, 64 tasks: hold p50 ms (the same on purpose) | $hold_lh | $(jfig contention.1x64.hold_p50_ms) | – | – |")
beyond() { awk -v r="$1" -v h="$2" 'BEGIN { if (r + 0 == 0) print "?"; else printf "%.3f\n", 1000 / r - h }'; }
add "one lock, 64 tasks: ms per acquisition beyond the hold (1000/rate − hold p50)" \
    "$(beyond "$(cell "$C" "$c1" 'acquisitions/s')" "$hold_lh")" \
    "$(beyond "$(jfig contention.1x64.rate)" "$(jfig contention.1x64.hold_p50_ms)")" lower
add "one lock, 64 tasks: wait p99 ms" \
    "$(cell "$C" "$c1" 'wait p50 / p99 / max' second)" "$(jfig contention.1x64.wait_p99_ms)" lower
rewin_lh="$(cell "$C" "$c1" 're-win rate')"
rows+=("| one lock, 64 tasks: releasing task wins again | ${rewin_lh} | $(jfig contention.1x64.rewin_pct)% | – | lower |")
c2="leasehold 2×1"
add "one lock, 2 clients × 1 task: hand-off to the other client p50 ms" \
    "$(cell "$C2" "$c2" 'handoff to another task p50 / p99' first)" "$(jfig contention.2x1.handoff_other_p50_ms)" lower
add "one lock, 2 clients × 1 task: requests per acquisition" \
    "$(cell "$C2" "$c2" 'client commands / acquisition')" "$(jfig contention.2x1.requests_per_acq)" lower
add "semaphore, 4 clients × 16 tasks, 8 permits: acquisitions/s" \
    "$(cell "$S" 'per s' leasehold)" "$(jfig semaphore.rate)" higher
rows+=("| semaphore: per-task min/max | $(cell "$S" 'min/max' leasehold) | $(jfig semaphore.task_min_max) | $(ratio "$(cell "$S" 'min/max' leasehold)" "$(jfig semaphore.task_min_max)") | higher |")
add "semaphore: requests per acquisition" "$(cell "$S" 'requests/acq' leasehold)" "$(jfig semaphore.requests_per_acq)" lower
add "read/write lock read pairs/s, 8 tasks, distinct keys" \
    "$(cell "$R" leasehold-read 'pairs/s')" "$(jfig rwlock.read.pairs_per_s)" higher
add "read/write lock write pairs/s, 8 tasks" \
    "$(cell "$R" leasehold-write 'pairs/s')" "$(jfig rwlock.write.pairs_per_s)" higher
add "read pair p50 ms (8 tasks)" "$(cell "$R" leasehold-read 'pair p50 / p99 (ms)' first)" "$(jfig rwlock.read.p50_ms)" lower
add "write pair p50 ms (8 tasks)" "$(cell "$R" leasehold-write 'pair p50 / p99 (ms)' first)" "$(jfig rwlock.write.p50_ms)" lower
add "read pair: Redis commands incl. in-script" \
    "$(cell "$R" leasehold-read 'redis commands / pair (all)')" "$(jfig rwlock.read.commands_per_pair)" lower
add "write pair: Redis commands incl. in-script" \
    "$(cell "$R" leasehold-write 'redis commands / pair (all)')" "$(jfig rwlock.write.commands_per_pair)" lower
rw_handoff="$(awk '/^reader unlock\(\) returned -> writer.s guard: p50/ { print $8; exit }' "$R")"
add "reader releases → writer on another client in, p50 ms" "$rw_handoff" "$(jfig rwlock.handoff_p50_ms)" lower

echo
echo "## leasehold / Redisson 4.7 (the real client), one redis-server, commit $commit"
echo
echo "| figure | leasehold | Redisson 4.7 | leasehold/Redisson | better |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Server-work floor (no client library): Redisson's read/write scripts through bare fred"
echo "(rwlock): read $(cell "$R" redisson-read 'pairs/s') pairs/s, $(cell "$R" redisson-read 'redis commands / pair (all)') commands/pair;" \
    "write $(cell "$R" redisson-write 'pairs/s') pairs/s, $(cell "$R" redisson-write 'redis commands / pair (all)') commands/pair."
echo "leasehold's own lock scripts through bare fred (hotpath scripts): $(cell "$H" scripts 'pairs/s (64 tasks, 5 s)') pairs/s," \
    "p50 $(cell "$H" scripts 'pair p50 / p99 (1 task, 2000)' first) ms."
echo "Requests: leasehold's are the top-level commands by the benches' server-side rule; Redisson's are the"
echo "commands it wrote on its connections (its EVALSHAs, the unlock latch DEL, SUBSCRIBEs, PINGs)."
echo "1-minute load average before→after each step (nproc $(nproc)): ${loads[*]}"
echo "Raw outputs: $out"
