#!/usr/bin/env bash
# Runs every fuzz target of ./fuzz for a short time each (go fuzzes one
# target per invocation). CI calls it; locally, FUZZTIME=5m for longer.
#   FUZZTIME      time per target (default 10s; 2m at the deep tier,
#                 PRESENCE_DEEP=1)
#   FUZZPARALLEL  fuzzing workers (default 2)
# A failing input is written to fuzz/testdata/fuzz/<target>/ and fails the
# run; commit it so that go test ./fuzz replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${PRESENCE_DEEP:-}" = 1 ]; then
  fuzztime="${FUZZTIME:-2m}"
else
  fuzztime="${FUZZTIME:-10s}"
fi
parallel="${FUZZPARALLEL:-2}"

targets=$(go test ./fuzz -list '^Fuzz' | grep '^Fuzz' || true)
if [ -z "$targets" ]; then
  echo "fuzz/run.sh: no fuzz targets found" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in $targets; do
  echo "== fuzz $target ($fuzztime)"
  if go test ./fuzz -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel "$parallel" 2>&1 | tee "$log"; then
    continue
  fi
  # The fuzzing engine itself sometimes ends a time-boxed run with "context
  # deadline exceeded" on a loaded machine (no input failed, nothing was
  # written): that is not a finding. Anything else is.
  if grep -q "Failing input written" "$log" || ! grep -q "context deadline exceeded" "$log"; then
    exit 1
  fi
  echo "fuzz/run.sh: $target: the fuzzing engine timed out at the end of its run, with no failing input; not a finding"
done
