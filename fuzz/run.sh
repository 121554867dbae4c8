#!/usr/bin/env bash
# Runs every fuzz target of ./fuzz for a short time each (go fuzzes one
# target per invocation). CI calls it; locally, FUZZTIME=5m for longer.
#   FUZZTIME      time per target (default 10s)
#   FUZZPARALLEL  fuzzing workers (default 2)
# A failing input is written to fuzz/testdata/fuzz/<target>/ and fails the
# run; commit it so that go test ./fuzz replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${FUZZTIME:-10s}"
parallel="${FUZZPARALLEL:-2}"

targets=$(go test ./fuzz -list '^Fuzz' | grep '^Fuzz' || true)
if [ -z "$targets" ]; then
  echo "fuzz/run.sh: no fuzz targets found" >&2
  exit 1
fi

for target in $targets; do
  echo "== fuzz $target ($fuzztime)"
  go test ./fuzz -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel "$parallel"
done
