#!/bin/sh
# Every run gets its own folder: a replay never overwrites the evidence of
# the run it replays; --repeat N and --seeds A..B run a scenario many times,
# each try in its own folder, and the summary gives the pass rate per
# scenario with the failing seeds.
set -u
RS=$1 SRC=$2 OUT=$3
rm -rf "$OUT" && mkdir -p "$OUT/sc"
fail() { echo "FAIL: $*"; echo "---- output:"; cat "$OUT/log" 2>/dev/null; exit 1; }
cp "$SRC/scenarios/happy_1.json" "$OUT/sc/pass_one.json"
cp "$SRC/tests/fixtures/wrong_gpu.json" "$OUT/sc/wrong_gpu.json"
# the failure, then its replay: two folders, the first one untouched
"$RS" --quiet --out "$OUT/o" --seed 5 "$OUT/sc/wrong_gpu.json" > "$OUT/log" 2>&1
[ $? -eq 1 ] || fail "exit $?, expected 1"
first="$OUT/o/runs/wrong_gpu-5"
[ -s "$first/result.json" ] || fail "no first run folder"
sum=$(cat "$first"/* | cksum)
replay=$(sed -n 's/^ *replay: //p' "$OUT/log" | head -1)
sh -c "$replay --quiet" > "$OUT/log" 2>&1
[ $? -eq 1 ] || fail "replay: exit $?, expected 1"
[ -s "$OUT/o/runs/wrong_gpu-5.2/result.json" ] || fail "the replay has no folder of its own"
[ "$(cat "$first"/* | cksum)" = "$sum" ] || fail "the replay changed the first run's folder"
grep -q "logs:   $OUT/o/runs/wrong_gpu-5.2/" "$OUT/log" || fail "the replay does not name its own folder"

# --repeat 3: three tries, three folders, a pass rate
"$RS" --quiet --out "$OUT/r" --repeat 3 "$OUT/sc/pass_one.json" > "$OUT/log" 2>&1
[ $? -eq 0 ] || fail "--repeat 3: exit $?"
[ "$(ls "$OUT/r/runs" | grep -c '^pass_one-1')" -eq 3 ] || fail "--repeat 3 made: $(ls "$OUT/r/runs")"
grep -q "^pass rate per scenario:$" "$OUT/log" || fail "no pass rates"
grep -Eq "^  pass_one +3/3 passed \(100%\)$" "$OUT/log" || fail "no pass rate for pass_one"
grep -q "^pass_one #3 " "$OUT/log" || fail "the tries are not numbered"

# --seeds 3..4 --repeat 2 of both, side by side: 8 runs, each in its folder
"$RS" --quiet -j 2 --out "$OUT/s" --seeds 3..4 --repeat 2 "$OUT/sc" > "$OUT/log" 2>&1
[ $? -eq 1 ] || fail "--seeds: exit $?, expected 1"
[ "$(ls "$OUT/s/runs" | wc -l)" -eq 8 ] || fail "--seeds 3..4 --repeat 2 made: $(ls "$OUT/s/runs")"
for d in pass_one-3 pass_one-3.2 pass_one-4 pass_one-4.2 wrong_gpu-3 wrong_gpu-3.2 wrong_gpu-4 wrong_gpu-4.2; do
  [ -s "$OUT/s/runs/$d/result.json" ] || fail "no run folder $d"
done
grep -Eq "^  pass_one +4/4 passed \(100%\)$" "$OUT/log" || fail "no pass rate for pass_one"
grep -Eq "^  wrong_gpu +0/4 passed \(0%\); failing seeds: 3 3 4 4$" "$OUT/log" || fail "no pass rate for wrong_gpu"
grep -q "^8 runs of 2 scenarios in " "$OUT/log" || fail "no count of runs"

# bad values
"$RS" --seeds 5..3 "$OUT/sc" > "$OUT/log" 2>&1
[ $? -eq 2 ] || fail "--seeds 5..3: exit $?, expected 2"
"$RS" --seed 1 --seeds 1..2 "$OUT/sc" > "$OUT/log" 2>&1
[ $? -eq 2 ] || fail "--seed with --seeds: exit $?, expected 2"
echo "1 passed, 0 failed"
