#!/bin/sh
# The whole scenario library passes with every process's log level at off:
# the runner reads events, never logs. Skipped (77) while the aggregator
# writes no events (its --help lacks --events): the library's expectations
# on the aggregator need them.
set -u
RS=$1 SRC=$2 OUT=$3 AGG=$4
rm -rf "$OUT" && mkdir -p "$OUT"
if ! "$AGG" --help 2>&1 | grep -q -- "--events "; then
  echo "SKIP: $AGG writes no events (no --events in its --help)"
  exit 77
fi
"$RS" -j 1 --quiet --log-level off --out "$OUT/o" "$SRC/scenarios" > "$OUT/log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: the library at --log-level off exited $rc"; grep -A4 FAIL "$OUT/log" | head -60; exit 1; fi
# nothing was logged (but the runner's own "started again" separators): the
# runner had no log to read
for f in $(find "$OUT/o/runs" -name '*.log' ! -name runner.log -size +0); do
  if grep -qv '^---- run_scenarios: ' "$f"; then echo "FAIL: logged at --log-level off: $f: $(head -2 "$f")"; exit 1; fi
done
tail -1 "$OUT/log"
