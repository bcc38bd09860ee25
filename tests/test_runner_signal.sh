#!/bin/sh
# SIGINT and SIGTERM with -j 2 and a scenario still queued: the runner kills
# every process at once and exits 128 + the signal (no hang waiting for the
# queued one), leaves no process behind, and writes the reports anyway: the
# two running scenarios as <error type="interrupted">, the queued one as
# <skipped>; an old JUnit file at the same path is gone.
set -u
RS=$1 SRC=$2 OUT=$3
rm -rf "$OUT" && mkdir -p "$OUT/sc"
fail() { echo "FAIL: $*"; echo "---- output:"; cat "$OUT/log" 2>/dev/null; exit 1; }
for n in a b c; do
  cat > "$OUT/sc/long_$n.json" <<'J'
{
  "description": "learners and an aggregator that just run for a while",
  "time_scale": 0.01,
  "timeout_ms": 60000,
  "min_run_ms": 50000,
  "learners": [{"name": "a", "count": 2}],
  "coordinator": {"absent": true},
  "expect": {"aggregator_alive": true}
}
J
done
alive() { [ -e "/proc/$1" ] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
run_and_signal() { # $1: signal name, $2: its number
  rm -rf "$OUT/o" && mkdir -p "$OUT/o"
  echo "stale report of an earlier run" > "$OUT/o/j.xml"
  "$RS" -j 2 --quiet --out "$OUT/o" --junit "$OUT/o/j.xml" --html "$OUT/o/r.html" "$OUT/sc" > "$OUT/log" 2>&1 &
  rs=$!
  i=0
  until [ "$(cat "$OUT"/o/runs/*/runner.log 2>/dev/null | grep -c 'aggregator is ready')" -ge 2 ]; do
    i=$((i + 1)); [ $i -lt 400 ] || { kill -9 $rs; fail "the two runs never got ready"; }
    sleep 0.05
  done
  pids=$(sed -n 's/.*started [a-z]* (pid \([0-9]*\)).*/\1/p' "$OUT"/o/runs/*/runner.log)
  [ "$(echo "$pids" | wc -w)" -eq 4 ] || fail "expected 4 children, got: $pids"
  kill -"$1" $rs
  # a bound against a hang, not a timing assertion
  i=0
  while kill -0 $rs 2>/dev/null && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.05; done
  if kill -0 $rs 2>/dev/null; then
    kill -9 $rs
    fail "the runner still runs 30 s after SIG$1 (hang)"
  fi
  wait $rs
  rc=$?
  [ $rc -eq $((128 + $2)) ] || fail "exit $rc after SIG$1, expected $((128 + $2))"
  for p in $pids; do alive "$p" && fail "child $p survives SIG$1 of the runner"; done
  grep -q "stale report" "$OUT/o/j.xml" && fail "the old JUnit file is still there"
  if command -v xmllint > /dev/null; then
    xmllint --noout --schema "$SRC/tests/junit.xsd" "$OUT/o/j.xml" > "$OUT/xmllint.log" 2>&1 ||
      fail "the JUnit report does not validate: $(cat "$OUT/xmllint.log")"
  fi
  [ -s "$OUT/o/r.html" ] || fail "no HTML report after SIG$1"
  grep -q 'tests="3" failures="0" errors="2" skipped="1"' "$OUT/o/j.xml" || fail "JUnit counts: $(head -3 "$OUT/o/j.xml")"
  [ "$(grep -c "<error type=\"interrupted\" message=\"the runner was interrupted by SIG$1" "$OUT/o/j.xml")" -eq 2 ] ||
    fail "the running scenarios are not errors 'interrupted by SIG$1'"
  grep -q "<skipped message=\"not run: the runner was interrupted by SIG$1 before it started\"/>" "$OUT/o/j.xml" ||
    fail "the queued scenario is not skipped"
  grep -q "no exit within the grace period" "$OUT/log" && fail "a grace period is claimed though SIGKILL was sent at once"
  grep -q "^0 passed, 0 failed, 2 errors, 1 not run$" "$OUT/log" || fail "no closing line"
  echo "SIG$1 with -j 2: exit $rc, every child gone, reports written"
}
run_and_signal INT 2
run_and_signal TERM 15
echo "1 passed, 0 failed"
