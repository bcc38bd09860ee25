#!/bin/sh
# run_scenarios end to end: a passing and a failing scenario side by side;
# the failure names file:line and what was seen, prints a replay command that
# reproduces it, keeps every process's log in the run folder, and lands in
# the JUnit report; an invalid file exits 2 with file:line before anything
# runs; --seed replaces the seed; a world-size window that starts after the
# run ended fails, saying so (not green while checking nothing).
set -u
RS=$1 SRC=$2 OUT=$3
rm -rf "$OUT" && mkdir -p "$OUT/sc"
fail() { echo "FAIL: $*"; echo "---- output:"; cat "$OUT/log" 2>/dev/null; exit 1; }

cp "$SRC/scenarios/happy_1.json" "$OUT/sc/pass_one.json"
cp "$SRC/tests/fixtures/wrong_gpu.json" "$OUT/sc/wrong_gpu.json"
"$RS" -j 2 --quiet --out "$OUT/o" --junit "$OUT/j.xml" "$OUT/sc" > "$OUT/log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, expected 1"
grep -q "^1 passed, 1 failed$" "$OUT/log" || fail "no closing line"
grep -q "wrong_gpu.json:7: FAILED resource #1: result.gpu == 2" "$OUT/log" || fail "no file:line failure"
grep -q "it is 1" "$OUT/log" || fail "the failure does not say what was seen"
for f in runner.log aggregator.log pool.log coordinator.log coordinator.out commands.txt result.json; do
  [ -s "$OUT/o/runs/wrong_gpu-1/$f" ] || fail "run folder lacks $f"
done
grep -q '<testcase classname="scenarios" name="wrong_gpu"' "$OUT/j.xml" || fail "junit lacks the testcase"
grep -q '<failure type="expectation" message="resource #1: result.gpu == 2' "$OUT/j.xml" || fail "junit lacks the failure"
grep -q 'tests="2" failures="1"' "$OUT/j.xml" || fail "junit counts"

# the replay command reproduces the failure
replay=$(sed -n 's/^ *replay: //p' "$OUT/log" | head -1)
[ -n "$replay" ] || fail "no replay command"
sh -c "$replay --quiet" > "$OUT/replay.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "replay exited $rc"
grep -q "FAILED resource #1: result.gpu == 2" "$OUT/replay.log" || fail "replay does not reproduce"

# --seed replaces the seed and names the run folder
"$RS" --quiet --seed 99 --out "$OUT/o" "$OUT/sc/pass_one.json" > "$OUT/seed.log" 2>&1 || fail "seeded run failed"
grep -q "^run_scenarios: 1 scenario, -j 1, seed 99$" "$OUT/seed.log" || fail "seed not printed: $(head -1 "$OUT/seed.log")"
[ -d "$OUT/o/runs/pass_one-99" ] || fail "no run folder for seed 99"

# an invalid file: exit 2, file:line, nothing run
printf '{\n  "description": "x",\n  "learners": [{"count": 0}],\n  "expect": {}\n}\n' > "$OUT/bad.json"
"$RS" --out "$OUT/o" "$OUT/bad.json" "$OUT/sc/pass_one.json" > "$OUT/bad.log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "invalid file: exit $rc, expected 2"
grep -q "bad.json:3: learners\[0\].count: must be between 1 and 4096, not 0" "$OUT/bad.log" || fail "no file:line for the invalid file: $(cat "$OUT/bad.log")"
grep -q "nothing was run" "$OUT/bad.log" || fail "did it run anyway?"
# a window after the end of the run
cp "$SRC/tests/fixtures/late_window.json" "$OUT/late_window.json"
"$RS" --quiet --out "$OUT/o" "$OUT/late_window.json" > "$OUT/win.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a window after the run: exit $rc, expected 1"
grep -Eq "late_window.json:7: FAILED world size never above 5 from 9000 ms on$" "$OUT/win.log" || fail "no failure for the late window"
grep -Eq "the run ended at [0-9]+ ms, before the window from 9000 ms" "$OUT/win.log" || fail "the late window is not explained"
grep -q "^1 scenario in " "$OUT/win.log" || fail "no '1 scenario in'"
echo "1 passed, 0 failed"
