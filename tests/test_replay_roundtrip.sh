#!/bin/sh
# Round trip of scenario_from_events: each scenario is run (its aggregator
# writes its events file into the run folder), the events file is turned
# into a scenario, that scenario is run, and the outcomes of the two runs
# (task statuses in order, which learners left and why, learners reported
# failed, the final world size: scenario_from_events --outcomes) must be the
# same; the replay's own observed expectations must hold too.
# usage: test_replay_roundtrip.sh RUN_SCENARIOS SCENARIO_FROM_EVENTS OUT_DIR SCENARIO...
set -u
RUN=$1 SFE=$2 OUT=$3
shift 3
rm -rf "$OUT"
mkdir -p "$OUT"
pass=0 fail=0
for sc in "$@"; do
    name=$(basename "$sc" .json)
    if ! "$RUN" -q --out "$OUT/src-$name" "$sc" >"$OUT/$name.src.txt" 2>&1; then
        echo "FAIL $name: the source run failed (see $OUT/$name.src.txt)"
        fail=$((fail + 1))
        continue
    fi
    ev=$(ls "$OUT/src-$name"/runs/*/aggregator.events.jsonl 2>/dev/null | head -n 1)
    if [ -z "$ev" ]; then
        echo "FAIL $name: no aggregator.events.jsonl in $OUT/src-$name/runs/"
        fail=$((fail + 1))
        continue
    fi
    if ! "$SFE" "$ev" -o "$OUT/$name.replay.json" 2>"$OUT/$name.sfe.txt"; then
        echo "FAIL $name: scenario_from_events: $(cat "$OUT/$name.sfe.txt")"
        fail=$((fail + 1))
        continue
    fi
    if ! "$RUN" -q --out "$OUT/replay-$name" "$OUT/$name.replay.json" >"$OUT/$name.replay.txt" 2>&1; then
        echo "FAIL $name: the replay's observed expectations do not hold:"
        grep 'FAILED' "$OUT/$name.replay.txt" | head -n 5
        fail=$((fail + 1))
        continue
    fi
    ev2=$(ls "$OUT/replay-$name"/runs/*/aggregator.events.jsonl 2>/dev/null | head -n 1)
    "$SFE" --outcomes "$ev" >"$OUT/$name.outcomes.src.json" 2>&1
    "$SFE" --outcomes "$ev2" >"$OUT/$name.outcomes.replay.json" 2>&1
    if cmp -s "$OUT/$name.outcomes.src.json" "$OUT/$name.outcomes.replay.json"; then
        echo "ok   $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name: the outcomes differ:"
        diff "$OUT/$name.outcomes.src.json" "$OUT/$name.outcomes.replay.json" | head -n 10
        fail=$((fail + 1))
    fi
done
echo "round trip: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
