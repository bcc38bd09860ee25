#!/bin/sh
# No process the runner started survives it: not after kill -9 of the runner
# (PR_SET_PDEATHSIG in every child), not after SIGTERM (the runner kills every
# process group and exits).
set -u
RS=$1 SRC=$2 OUT=$3
rm -rf "$OUT" && mkdir -p "$OUT/sc"
fail() { echo "FAIL: $*"; exit 1; }
cat > "$OUT/sc/long.json" <<'J'
{
  "description": "learners and an aggregator that just run for a while",
  "time_scale": 0.01,
  "timeout_ms": 60000,
  "min_run_ms": 50000,
  "learners": [{"name": "a", "count": 2}, {"name": "b", "count": 1}],
  "coordinator": {"absent": true},
  "expect": {"aggregator_alive": true}
}
J
alive() { # a pid that exists and is not a zombie
  [ -e "/proc/$1" ] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null
}
run_and_signal() { # $1: signal
  rm -rf "$OUT/o"
  "$RS" --quiet --out "$OUT/o" "$OUT/sc/long.json" > "$OUT/log-$1" 2>&1 &
  rs=$!
  log="$OUT/o/runs/long-1/runner.log"
  i=0
  until grep -q "aggregator is ready" "$log" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 200 ] || { kill -9 $rs; fail "the run never got ready"; }
    sleep 0.05
  done
  pids=$(sed -n 's/.*started [a-z]* (pid \([0-9]*\)).*/\1/p' "$log")
  [ "$(echo "$pids" | wc -w)" -eq 3 ] || fail "expected 3 children, got: $pids"
  for p in $pids; do alive "$p" || fail "child $p is not running"; done
  kill -"$1" $rs
  wait $rs 2>/dev/null
  i=0
  while :; do
    left=""
    for p in $pids; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && break
    i=$((i + 1)); [ $i -lt 100 ] || fail "after kill -$1 of the runner these children survive:$left"
    sleep 0.05
  done
  echo "kill -$1 of the runner: all of $(echo $pids) are gone"
}
run_and_signal KILL
run_and_signal TERM
echo "1 passed, 0 failed"
