#!/bin/sh
# DI-engine's own LearnerAggregator through profiles/di-engine.json runs
# happy_1, happy_4 and happy_16 and passes them, judged from the protocol;
# no process of the runs is left behind. Skipped (77) without DI_ROOT or
# Debian's python3 modules.
# usage: test_profile_di_engine.sh RUN_SCENARIOS SOURCE_DIR OUT_DIR
set -u
RS=$1 S=$2 OUT=$3
if [ -z "${DI_ROOT:-}" ] || [ ! -f "$DI_ROOT/ding/worker/adapter/learner_aggregator.py" ]; then
    echo "skipped: set DI_ROOT to a DI-engine checkout"; exit 77
fi
if ! /usr/bin/python3 -c 'import flask, requests, easydict, urlobject, yaml' 2>/dev/null; then
    echo "skipped: needs python3-flask python3-requests python3-easydict python3-urlobject python3-yaml"; exit 77
fi
rm -rf "$OUT"; mkdir -p "$OUT"
"$RS" -q -j2 --aggregator-profile "$S/profiles/di-engine.json" --out "$OUT" --junit "$OUT/junit.xml" \
    "$S/scenarios/happy_1.json" "$S/scenarios/happy_4.json" "$S/scenarios/happy_16.json" >"$OUT/out.txt" 2>&1
rc=$?
cat "$OUT/out.txt"
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; exit 1; }
grep -qF "3 passed, 0 failed" "$OUT/out.txt" || { echo "FAIL: not 3 passed"; exit 1; }
grep -qF "serves no learner_close_task" "$OUT/out.txt" || { echo "FAIL: the close task is not reported skipped"; exit 1; }
if pgrep -f -- "$OUT/runs/" >/dev/null; then echo "FAIL: processes left behind"; pgrep -af -- "$OUT/runs/"; exit 1; fi
echo "ok: DI-engine's LearnerAggregator passes happy_1, happy_4, happy_16"
