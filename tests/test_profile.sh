#!/bin/sh
# Aggregator profiles (run_scenarios --aggregator-profile) without DI-engine:
# our own aggregator started through profiles/ours-config.json (its config
# file, no /metrics, no events) passes a part of the library with every
# metrics expectation reported skipped (console, JUnit <skipped>, HTML); a run
# whose only expectation is skipped is SKIP and not green; readiness by the
# slave port answering; invalid profiles and a missing required variable
# exit 2 with FILE:LINE and did-you-mean; a learner given by command (our
# mock_learner as a plain executable) is killed by an action and judged from
# the protocol, with the built-in aggregator and through the profile; protocol
# faults on such a learner are refused at validation time.
# usage: test_profile.sh RUN_SCENARIOS SOURCE_DIR OUT_DIR
set -u
RS=$1 S=$2 OUT=$3
rm -rf "$OUT"; mkdir -p "$OUT"
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks: $2"; }

# 1. ours through a metrics-free profile: passes, metrics skipped
"$RS" -q --aggregator-profile "$S/profiles/ours-config.json" --out "$OUT/lib" --junit "$OUT/lib.xml" \
    --html "$OUT/lib.html" "$S/scenarios/happy_4.json" "$S/scenarios/heartbeat_loss.json" \
    "$S/scenarios/crash_learn.json" "$S/scenarios/k8s_happy.json" "$S/scenarios/restart_learner.json" \
    >"$OUT/lib.txt" 2>&1
rc=$?
cat "$OUT/lib.txt"
[ $rc -eq 0 ] || fail "the library through ours-config exited $rc"
has "$OUT/lib.txt" "5 passed, 0 failed"
has "$OUT/lib.txt" "happy_4.json:25: SKIPPED metric dilearn_tasks_total"
has "$OUT/lib.txt" "needs the aggregator's /metrics, which profile ours-config does not offer"
has "$OUT/lib.txt" "SKIPPED aggregator writes heartbeat_lost about learner2 exactly 1 time: the aggregator under test writes no events"
has "$OUT/lib.xml" '<testcase classname="scenarios.expectations" name="happy_4: metric dilearn_tasks_total'
has "$OUT/lib.xml" '<skipped message="needs the aggregator&#39;s /metrics'
has "$OUT/lib.html" '<td class="skipped">skipped</td>'
grep -q 'dilearn_tasks_total' "$OUT"/lib/runs/happy_4-*/result.json || fail "result.json lacks the check"
grep -q '"skipped":[[:space:]]*true' "$OUT"/lib/runs/happy_4-*/result.json || fail "result.json does not mark skipped"
# the built-in profile judges the same expectations
"$RS" -q --out "$OUT/own" "$S/scenarios/happy_4.json" >"$OUT/own.txt" 2>&1 || fail "happy_4 built in failed"
grep -q SKIPPED "$OUT/own.txt" && fail "the built-in profile skipped something"

# 1b. no action waits for a log line (the runner reads events, never logs):
# the log trigger is refused before anything runs, with or without a profile
"$RS" --check --aggregator-profile "$S/profiles/ours-config.json" "$S/tests/fixtures/aggregator_log_action.json" \
    >"$OUT/la.txt" 2>&1 && { cat "$OUT/la.txt"; fail "the log trigger validated"; }
has "$OUT/la.txt" "the log event is no longer a trigger"

# 2. only skipped expectations: not green
"$RS" -q --aggregator-profile "$S/profiles/ours-config.json" --out "$OUT/only" --junit "$OUT/only.xml" \
    "$S/tests/fixtures/metrics_only.json" >"$OUT/only.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a run of only skipped checks exited $rc, not 1"
has "$OUT/only.txt" "SKIP  metrics_only"
has "$OUT/only.txt" "every expectation was skipped"
has "$OUT/only.xml" '<skipped message="every expectation was skipped'

# 3. readiness by the slave port
"$RS" -q --aggregator-profile "$S/tests/fixtures/profiles/port-ready.json" --out "$OUT/port" \
    "$S/scenarios/happy_4.json" >"$OUT/port.txt" 2>&1 || { cat "$OUT/port.txt"; fail "port readiness"; }
grep -q "aggregator is ready" "$OUT"/port/runs/happy_4-*/runner.log || fail "no readiness in runner.log"

# 4. invalid profiles
"$RS" -q --aggregator-profile "$S/tests/fixtures/profiles/typos.json" "$S/scenarios/happy_1.json" \
    >"$OUT/typos.txt" 2>&1
rc=$?
cat "$OUT/typos.txt"
[ $rc -eq 2 ] || fail "an invalid profile exited $rc, not 2"
has "$OUT/typos.txt" "typos.json:6: redy: unknown key (did you mean 'ready'?)"
has "$OUT/typos.txt" "typos.json:3: command[2]: unknown placeholder {slave_prot} (did you mean {slave_port}?)"
has "$OUT/typos.txt" "typos.json:5: offers[0]: \"metrcs\" is not offered"
env -u DILEARN_TEST_UNSET_VARIABLE "$RS" -q --aggregator-profile "$S/tests/fixtures/profiles/needs_env.json" \
    "$S/scenarios/happy_1.json" >"$OUT/env.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a missing required variable exited $rc, not 2"
has "$OUT/env.txt" "needs DILEARN_TEST_UNSET_VARIABLE set in the environment"

# 4b. the profile named by the scenario; a missing variable skips the run
"$RS" -q --out "$OUT/sl" "$S/tests/fixtures/profile_in_scenario.json" >"$OUT/sl.txt" 2>&1 ||
    { cat "$OUT/sl.txt"; fail "a scenario's own profile"; }
has "$OUT/sl.txt" "which profile ours-config does not offer"
env -u DILEARN_TEST_UNSET_VARIABLE "$RS" -q --out "$OUT/sle" --junit "$OUT/sle.xml" \
    "$S/tests/fixtures/profile_needs_env.json" >"$OUT/sle.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a scenario whose profile lacks its variable exited $rc, not 1"
has "$OUT/sle.txt" "not run: the aggregator profile needs-env needs DILEARN_TEST_UNSET_VARIABLE"
has "$OUT/sle.xml" '<skipped message="not run: the aggregator profile needs-env'

# 5. a real learner process given by command, killed, judged from the protocol
for how in builtin profile; do
    set --
    [ $how = profile ] && set -- --aggregator-profile "$S/profiles/ours-config.json"
    "$RS" -q "$@" --out "$OUT/real-$how" "$S/tests/fixtures/real_learner_killed.json" >"$OUT/real-$how.txt" 2>&1 ||
        { cat "$OUT/real-$how.txt"; fail "real_learner_killed ($how)"; }
    has "$OUT/real-$how.txt" "1 passed, 0 failed"
    grep -q -- "--id-prefix real" "$OUT"/real-$how/runs/*/commands.txt || fail "the command was not run as given"
done
"$RS" --check "$S/tests/invalid_scenarios/real_learner_faults.json" >"$OUT/rf.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "protocol faults on a command group exited $rc, not 2"
has "$OUT/rf.txt" "real_learner_faults.json:4: learners[0].batch_size: 'batch_size' is a setting of the mock learner"
has "$OUT/rf.txt" "real_learner_faults.json:9: actions[0].target: fault is a protocol fault and needs the mock learner"
has "$OUT/rf.txt" "real_learner_faults.json:10: actions[1].target: group 'running' is a learner already running"
echo "ok: aggregator profiles and real learners"
