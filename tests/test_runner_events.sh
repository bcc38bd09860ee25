#!/bin/sh
# The runner reads events, not logs (docs/events.md): a learner group that
# crashes at its first learn shows that fault on the HTML timeline, in the
# report's table and in result.json, from its fault_fired event; a
# configured fault that never fires fails the scenario (unless optional);
# expect.events counts events; a bad event line fails the run with its
# file:line; every process of a run has its events file.
set -u
RS=$1 SRC=$2 OUT=$3 ML=$4
rm -rf "$OUT" && mkdir -p "$OUT/sc" "$OUT/bad"
fail() { echo "FAIL: $*"; echo "---- output:"; cat "$OUT/log" 2>/dev/null; exit 1; }

scenario() { # name, the fault of group b, extra expectations
cat > "$OUT/sc/$1.json" <<J
{
  "description": "group b crashes at its first learn",
  "time_scale": 0.01,
  "learners": [
    {"name": "pool", "count": 2, "batch_size": 4},
    {"name": "b", "count": 1, "batch_size": 4,
     "faults": [$2]}
  ],
  "coordinator": {"rounds": 1},
  "expect": {
    $3
  }
}
J
}
crashes='"exits": [{"process": "b", "code": 3}]'
scenario crash_first_learn '{"kind": "crash", "task": "learner_learn_task", "at": 1}' "$crashes"',
    "events": [{"process": "b", "event": "fault_fired", "learner": "learner2", "where": {"kind": "crash", "count": 1}, "min": 1, "max": 1},
               {"process": "pool", "event": "master_connected", "learner": "learner1"},
               {"process": "coordinator", "event": "task_done", "where": {"name": "learner_learn_task", "status": "failed"}, "contains": {"message": "learner2"}}]'
"$RS" --quiet --log-level off --out "$OUT/o" --html "$OUT/report.html" "$OUT/sc/crash_first_learn.json" > "$OUT/log" 2>&1 ||
  fail "crash_first_learn failed"
run="$OUT/o/runs/crash_first_learn-1"
for p in pool b coordinator; do
  [ -s "$run/$p.events.jsonl" ] || fail "no $p.events.jsonl in the run folder"
done
# logs at off: the runner needed none of them
[ ! -s "$run/pool.log" ] || fail "pool logged at --log-level off: $(head -3 "$run/pool.log")"
grep -q '"event": "fault_fired".*"label": "b-learner0".*"kind": "crash"' "$run/b.events.jsonl" || fail "no fault_fired in b's events"
label='fault crash on learner_learn_task fired on learner2 (b-learner0)'
python3 - "$run/result.json" "$label" <<'P' || fail "result.json lacks the fault mark"
import json, sys
j = json.load(open(sys.argv[1]))
assert any(m["kind"] == "injected" and m["label"] == sys.argv[2] and m["learner"] == 2 for m in j["marks"]), j["marks"]
assert any(c["ok"] and c["what"].startswith("fault crash on learner_learn_task #1 of group b fires") for c in j["checks"]), j["checks"]
P
# the timeline (an SVG mark on learner2's row, titled) and the table
grep -q "<title>[0-9]* ms: $label</title></path>" "$OUT/report.html" || fail "the timeline lacks the fault"
grep -q "<td>$label</td>" "$OUT/report.html" || fail "the table lacks the fault"

# a fault that never fires fails the scenario; optional, it does not
scenario never_fires '{"kind": "crash", "task": "learner_learn_task", "at": 5}' '"coordinator_ok": true'
scenario never_fires_optional '{"kind": "crash", "task": "learner_learn_task", "at": 5, "optional": true}' \
  '"coordinator_ok": true'
"$RS" -j 2 --quiet --out "$OUT/o" "$OUT/sc/never_fires.json" "$OUT/sc/never_fires_optional.json" > "$OUT/log" 2>&1
grep -q "^1 passed, 1 failed$" "$OUT/log" || fail "never_fires: expected 1 passed, 1 failed"
grep -q "fault crash on learner_learn_task #5 of group b never fired" "$OUT/log" || fail "no 'never fired' failure"
grep -q "^never_fires_optional  *PASS" "$OUT/log" || fail "the optional fault failed its scenario"
grep -q "^never_fires  *FAIL" "$OUT/log" || fail "the fault that never fired passed its scenario"

# the operator's faults too: one for a path nobody asks for never fires
for opt in "" ', "optional": true'; do
  n=op_never${opt:+_optional}
  cat > "$OUT/sc/$n.json" <<J
{
  "description": "an operator fault that never fires",
  "time_scale": 0.01,
  "learners": [{"name": "pool", "count": 2, "batch_size": 4}],
  "aggregator": {"k8s": true},
  "operator": {"faults": [{"kind": "error_status", "path": "/nobody/asks"$opt}]},
  "coordinator": {"rounds": 1, "expect_learners": 2},
  "expect": {"coordinator_ok": true}
}
J
done
"$RS" -j 2 --quiet --out "$OUT/o" "$OUT/sc/op_never.json" "$OUT/sc/op_never_optional.json" > "$OUT/log" 2>&1
grep -q "^op_never_optional  *PASS" "$OUT/log" || fail "the optional operator fault failed its scenario"
grep -q "fault error_status of the operator (operator.faults\[0\]) never fired" "$OUT/log" || fail "no 'never fired' for the operator"
rm "$OUT/sc/op_never.json" "$OUT/sc/op_never_optional.json"

# expect.events that does not hold
scenario events_fail '{"kind": "crash", "task": "learner_learn_task", "at": 1}' "$crashes"',
    "events": [{"process": "pool", "event": "fault_fired"}]'
"$RS" --quiet --out "$OUT/o" "$OUT/sc/events_fail.json" > "$OUT/log" 2>&1 && fail "events_fail passed"
grep -q "FAILED pool writes fault_fired at least 1 time" "$OUT/log" || fail "no expect.events failure"
grep -q "0 such lines in .*pool.events.jsonl" "$OUT/log" || fail "the failure does not say what was seen"

# an unknown event name is a validation error with file:line
scenario bad_name '{"kind": "crash", "task": "learner_learn_task", "at": 1}' "$crashes"',
    "events": [{"process": "pool", "event": "fault_fird"}]'
"$RS" --check "$OUT/sc/bad_name.json" > "$OUT/log" 2>&1 && fail "bad_name validated"
grep -q "bad_name.json:[0-9]*: expect.events\[0\].event: no event 'fault_fird'" "$OUT/log" || fail "no file:line for the unknown event"

# the log trigger is gone: --check says so, with file:line
cat > "$OUT/sc/log_trigger.json" <<'J'
{
  "description": "an action on a log line",
  "learners": [{"name": "pool", "count": 1}],
  "actions": [{"on": {"event": "log", "process": "aggregator", "contains": "joined"}, "do": "kill", "target": "pool"}],
  "expect": {"coordinator_ok": true}
}
J
"$RS" --check "$OUT/sc/log_trigger.json" > "$OUT/log" 2>&1 && fail "the log trigger validated"
grep -q "log_trigger.json:4: actions\[0\].on: the log event is no longer a trigger" "$OUT/log" || fail "no file:line for the log trigger"
rm "$OUT/sc/log_trigger.json"

# a bad event line: the run is red, with the file and line
cat > "$OUT/bad/mock_learner" <<S
#!/bin/sh
# the real mock learner, whose events file is rewritten on its way: the
# first task_received becomes an event no program knows
ev=; prev=
for a in "\$@"; do [ "\$prev" = --events ] && ev=\$a; prev=\$a; done
: > "\$ev.real"
tail -n +1 -f "\$ev.real" | sed -u '0,/"task_received"/s//"task_recieved"/' > "\$ev" &
t=\$!
for a in "\$@"; do [ "\$a" = "\$ev" ] && a="\$ev.real"; set -- "\$@" "\$a"; shift; done
"$ML" "\$@"
rc=\$?
kill \$t
exit \$rc
S
chmod +x "$OUT/bad/mock_learner"
"$RS" --quiet --mock-learner "$OUT/bad/mock_learner" --out "$OUT/o2" "$OUT/sc/crash_first_learn.json" > "$OUT/log" 2>&1 &&
  fail "a run with a bad event line passed"
grep -q "events.jsonl:[0-9]*: unknown event \"task_recieved\"" "$OUT/log" || fail "the bad line is not named with file:line"
# a process that ends in the middle of a line: red, with the file and line
cat > "$OUT/bad/cut_learner" <<S
#!/bin/sh
ev=; prev=
for a in "\$@"; do [ "\$prev" = --events ] && ev=\$a; prev=\$a; done
"$ML" "\$@"
rc=\$?
printf '{"event": "task_rec' >> "\$ev"
exit \$rc
S
chmod +x "$OUT/bad/cut_learner"
"$RS" --quiet --mock-learner "$OUT/bad/cut_learner" --out "$OUT/o3" "$OUT/sc/crash_first_learn.json" > "$OUT/log" 2>&1 &&
  fail "a run with a cut-short event line passed"
grep -q "b.events.jsonl:[0-9]*: the last line is cut short" "$OUT/log" || fail "the cut-short line is not named with file:line"
echo "1 passed, 0 failed"
