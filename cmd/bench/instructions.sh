#!/usr/bin/env bash
# cmd/bench/instructions.sh: the comparison's beats, counted in the server's
# instructions per beat instead of time.
#
#   bash cmd/bench/instructions.sh [compare flags...]
#
# Rates and CPU times depend on the host: the same code gave 1.34x
# Centrifuge's rate on one 2-core machine and 0.85x on another. An
# instruction count does not: it is the same for the same server binary,
# script and data, whatever the host's speed or load. This starts a
# redis-server (default configuration, no persistence) under valgrind's
# callgrind on a free 127.0.0.1 port, runs cmd/bench/compare's throughput rows
# against it with --callgrind-pid, prints the server's instructions per beat
# or read of each design, and stops the server. Under callgrind the server
# runs about fifty times slower, so the rates it prints mean nothing.
# Extra arguments go to cmd/bench/compare (--user-buckets 1, --concurrency 128).
# Needs valgrind (Debian: apt-get install valgrind); takes about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out="${BENCH_OUT:-$root/cmd/bench/out}"
mkdir -p "$out"

for tool in redis-server valgrind callgrind_control; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "cmd/bench/instructions.sh: $tool not installed (valgrind: apt-get install valgrind)" >&2
    exit 1
  fi
done

. cmd/bench/ports.sh
port=$(free_port)


valgrind --tool=callgrind --callgrind-out-file=/dev/null \
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$out/instructions-server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.2
done

# few users and small batches: every call is fifty times slower
(cd cmd/bench/compare && GOWORK=off go run . --redis "redis://127.0.0.1:$port" --callgrind-pid "$pid" --skip-memory --quiet \
  --users 2000 --batch 100 --duration 3s --markdown "$out/instructions.md" "$@" >/dev/null)
cat "$out/instructions.md"
