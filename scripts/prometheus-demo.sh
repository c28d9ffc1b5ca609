#!/usr/bin/env bash
# The shipped alert rules (deploy/prometheus/leasehold-alerts.yml), evaluated by a real
# Prometheus on the real series of the Prometheus example (docs/observability.md,
# "Alerts"):
#
# 1. starts a throwaway redis-server;
# 2. runs demo/examples/prometheus.rs on it: the flash sale, its /metrics page served,
#    then (LEASEHOLD_DEMO_LOSS=1) one lock force-unlocked under its holder, a real loss,
#    by a client that stays connected while the page is served;
# 3. with Prometheus (Debian's `prometheus` package, started first) scraping that page
#    and evaluating the rules every second, prints what it read and each rule's state:
#    LeaseholdLockLost fires on the loss;
# 4. stops the redis-server: the client's connections go down, LeaseholdDisconnected goes
#    pending, then fires after its `for: 1m`.
#
# Takes about two minutes (the last step waits out the minute). Needs redis-server,
# prometheus (promtool comes with it), python3 and curl; as root it installs the
# missing Debian packages, otherwise it prints the command and stops. Ports: Redis
# and Prometheus on free ports, the example's page on LEASEHOLD_METRICS_ADDR (default
# 127.0.0.1:9464). Everything it starts is stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing ${need[*]}..." >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        echo "error: missing ${need[*]}: sudo apt-get install ${need[*]}" >&2
        exit 1
    fi
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d /tmp/leasehold-prometheus-demo.XXXXXX)
metrics_addr=${LEASEHOLD_METRICS_ADDR:-127.0.0.1:9464}
redis_port=$(free_port)
prom_port=$(free_port)
prom="http://127.0.0.1:$prom_port"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "== building the example (cargo build -p leasehold-demo --example prometheus)"
cargo build --quiet -p leasehold-demo --example prometheus
example=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/examples/prometheus

echo "== redis-server on 127.0.0.1:$redis_port"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/deploy/prometheus/leasehold-alerts.yml
scrape_configs:
  - job_name: leasehold-demo
    static_configs:
      - targets: ["$metrics_addr"]
EOF
# Started first, so that it reads the counters at 0 before anything happens.
echo "== prometheus on $prom, scraping $metrics_addr every second"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=("$!")
for _ in $(seq 150); do curl -fsS "$prom/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done

echo "== the example: the sale, then a real loss; /metrics on $metrics_addr for 5 minutes"
REDIS_URL="redis://127.0.0.1:$redis_port" LEASEHOLD_METRICS_ADDR="$metrics_addr" \
    LEASEHOLD_METRICS_LINGER=300 LEASEHOLD_DEMO_LOSS=1 \
    "$example" --users 2000 --stock 500 >"$work/example.log" 2>&1 &
pids+=("$!")
for _ in $(seq 300); do grep -q "^# GET" "$work/example.log" && break; sleep 0.2; done
grep -E "LEASEHOLD_DEMO_LOSS|orders placed|duplicates (rejected|slipped)  " "$work/example.log" || true

query() { curl -fsS "$prom/api/v1/query" --data-urlencode "query=$1"; }
# The answers, read with python3: one series a line (`{labels} value`), the rules' states,
# or the number of series.
cat >"$work/show.py" <<'EOF'
import json, sys

answer = json.load(sys.stdin)["data"]
if sys.argv[1] == "vector":
    for series in answer["result"]:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(series["metric"].items()) if k not in ("__name__", "job", "instance"))
        print(f"    {{{labels}}} {series['value'][1]}")
elif sys.argv[1] == "count":
    print(len(answer["result"]))
else:
    for group in answer["groups"]:
        for rule in group["rules"]:
            alerts = ", ".join(
                "{" + ",".join(f"{k}={v}" for k, v in sorted(alert["labels"].items())
                               if k not in ("alertname", "severity", "job", "instance")) + "}"
                for alert in rule.get("alerts", []))
            print(f"    {rule['name']:26} health={rule['health']:3} state={rule['state']:8} {alerts}")
EOF
print_vector() { python3 "$work/show.py" vector; }
rules() { curl -fsS "$prom/api/v1/rules" | python3 "$work/show.py" rules; }
wait_for() { # wait_for SECONDS PROMQL: until the query returns a series
    for _ in $(seq "$(($1 * 2))"); do
        [ "$(query "$2" | python3 "$work/show.py" count)" != 0 ] && return 0
        sleep 0.5
    done
    echo "    (no result for $2 within $1 s)"
    return 1
}

wait_for 30 'ALERTS{alertname="LeaseholdLockLost",alertstate="firing"}' || true
echo "== what Prometheus read (job leasehold-demo)"
for q in 'leasehold_lost_total > 0' 'sum by (kind, reason) (increase(leasehold_lost_total[5m])) > 0' 'leasehold_renewals_total' 'leasehold_connected' 'leasehold_clients' \
    'leasehold_reconnects_total' 'sum by (outcome) (leasehold_acquire_duration_seconds_count)'; do
    echo "  $q"
    query "$q" | print_vector
done
echo "== the rules, evaluated by Prometheus"
rules

echo "== stopping redis-server: the example's client loses both connections"
kill "$redis_pid"
wait_for 15 'ALERTS{alertname="LeaseholdDisconnected",alertstate="pending"}' || true
echo "  leasehold_connected < ignoring(role) group_left leasehold_clients"
query 'leasehold_connected < ignoring(role) group_left leasehold_clients' | print_vector
rules
echo "== waiting out LeaseholdDisconnected's 'for: 1m'"
wait_for 90 'ALERTS{alertname="LeaseholdDisconnected",alertstate="firing"}' || true
rules
echo "== firing alerts"
query 'ALERTS{alertstate="firing"}' | print_vector
