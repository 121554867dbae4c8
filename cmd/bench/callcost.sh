#!/usr/bin/env bash
# cmd/bench/callcost.sh: the server instructions of one kind of engine call,
# one call at a time.
#
#   bash cmd/bench/callcost.sh [callcost flags...]   # e.g. -workload sweep -n 5000
#
# Starts a redis-server (default configuration, no persistence) under
# valgrind's callgrind on a free 127.0.0.1 port, with instrumentation off;
# cmd/bench/callcost sets up its users, switches instrumentation on around
# its workload alone, and this prints the server's instructions per item
# (beat, or expired device swept). Sequential calls make the count exact
# under any load, where cmd/bench/instructions.sh's concurrent rows count
# whatever else the server did while the workload ran. A sweep's steps stop
# on a server-time budget, which callgrind's slowdown (about fifty times)
# reaches after a few users: its count holds far more steps, and their
# overhead, than a sweep at full speed (run cmd/bench/callcost without
# callgrind, -pid 0, for its server CPU time). Needs valgrind; takes 1 to 3
# minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

for tool in redis-server valgrind callgrind_control callgrind_annotate; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "cmd/bench/callcost.sh: $tool not installed (valgrind: apt-get install valgrind)" >&2
    exit 1
  fi
done

. cmd/bench/ports.sh
port=$(free_port)
dir=$(mktemp -d)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.%p" \
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.2
done

items=$(go run ./cmd/bench/callcost -redis "127.0.0.1:$port" -pid "$pid" "$@")
sleep 1
total=0
parts=()
i=1
while dump=$(ls "$dir"/cg.*."$i" 2>/dev/null | head -1) && [ -n "$dump" ]; do
  n=$(awk '/^totals:/ {print $2}' "$dump")
  total=$((total + n))
  parts+=("$((n / items))")
  i=$((i + 1))
done
if [ "$i" -eq 1 ]; then
  echo "cmd/bench/callcost.sh: callgrind wrote no dump" >&2
  exit 1
fi
# a sweep dumps once a visit: the devices found gone, then OFFLINE published
detail=""
if [ "${#parts[@]}" -gt 1 ]; then detail=" (visits: ${parts[*]})"; fi
echo "callcost $*: $total instructions for $items items, $((total / items)) an item$detail"
