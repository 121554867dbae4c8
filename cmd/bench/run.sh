#!/usr/bin/env bash
# cmd/bench/run.sh: run the benchmarks against a throwaway redis-server.
#
#   bash cmd/bench/run.sh --brief        CI: a few seconds per workload, checks they run
#   bash cmd/bench/run.sh                the full run behind docs/performance.md
#
# It starts redis-server with the default configuration (no persistence) on
# a free 127.0.0.1 port (never 6379), runs the core's and benchkit's Go
# benchmarks, "presence bench", and the comparison module (cmd/bench/compare,
# a module of its own), each against a fresh server, and stops every server
# it started by its pid. Reports go to $BENCH_OUT (default cmd/bench/out/).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

brief=""
if [ "${1:-}" = "--brief" ]; then
  brief="--brief"
  shift
fi
out="${BENCH_OUT:-$root/cmd/bench/out}"
mkdir -p "$out"

if ! command -v redis-server >/dev/null 2>&1; then
  echo "cmd/bench/run.sh: redis-server not installed" >&2
  exit 1
fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

. cmd/bench/ports.sh

# start_redis starts a fresh server and sets $url; its pid joins $pids. A
# server that cannot bind its port (taken meanwhile) is retried on another.
start_redis() {
  local port dir pid attempt
  for attempt in 1 2 3 4 5; do
    port=$(free_port) || return 1
    dir=$(mktemp -d)
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
      --daemonize no --dir "$dir" --logfile "$dir/redis.log" &
    pid=$!
    for _ in $(seq 1 100); do
      if redis-cli -p "$port" ping >/dev/null 2>&1; then
        pids+=("$pid")
        url="redis://127.0.0.1:$port"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "cmd/bench/run.sh: redis-server on port $port did not start (attempt $attempt):" >&2
    cat "$dir/redis.log" >&2
  done
  return 1
}

stop_redis() {
  local pid="${pids[-1]}"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset 'pids[-1]'
}

echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== go benchmarks (core, cmd/internal/benchkit)"
benchtime=1s
[ -n "$brief" ] && benchtime=200x
go test -run '^$' -bench . -benchmem -benchtime "$benchtime" ./core/ ./cmd/internal/benchkit/ | tee "$out/gobench.txt"

echo "== presence bench $brief"
start_redis
go run ./cmd/presence bench --redis "$url" $brief --quiet --json "$out/bench.json" --markdown "$out/bench.md" | tee "$out/bench.txt"
stop_redis

echo "== cmd/bench/compare: go vet (a module of its own: ./... of the root does not reach it)"
(cd cmd/bench/compare && GOWORK=off go vet ./...)

echo "== cmd/bench/compare $brief"
start_redis
(cd cmd/bench/compare && GOWORK=off go run . --redis "$url" $brief --quiet --json "$out/compare.json" --markdown "$out/compare.md") | tee "$out/compare.txt"
stop_redis

echo "== cmd/bench/compare $brief --concurrency 128 (a gateway's many connections, where package batcher merges beats)"
start_redis
(cd cmd/bench/compare && GOWORK=off go run . --redis "$url" $brief --concurrency 128 --quiet --json "$out/compare-128.json" --markdown "$out/compare-128.md") | tee "$out/compare-128.txt"
stop_redis

echo "== cmd/bench/compare $brief --user-buckets 1 (one user bucket, as on a single node: a batch is one script call)"
start_redis
(cd cmd/bench/compare && GOWORK=off go run . --redis "$url" $brief --user-buckets 1 --skip-memory --quiet --json "$out/compare-1bucket.json" --markdown "$out/compare-1bucket.md") | tee "$out/compare-1bucket.txt"
stop_redis

if [ -z "$brief" ]; then
  if command -v valgrind >/dev/null 2>&1; then
    echo "== cmd/bench/instructions.sh (the server's instructions per beat, under callgrind)"
    bash cmd/bench/instructions.sh | tee "$out/instructions.txt"
  else
    echo "== cmd/bench/instructions.sh skipped: valgrind not installed"
  fi
fi

echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cmd/bench/run.sh: reports in $out"
