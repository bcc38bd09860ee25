#!/usr/bin/env bash
# The scenario library against DI-engine's own LearnerAggregator (the
# profile profiles/di-engine.json) and against ours (built in), side by side
# in docs/reference-results.md (./do reference).
# usage: reference/reference_results.sh BUILD_DIR OUT_DIR [DOC]
# Needs DI_ROOT (a DI-engine checkout) and Debian's python3 modules.
set -euo pipefail
B=$1 OUT=$2
S=$(cd "$(dirname "$0")/.." && pwd)
DOC=${3:-$S/docs/reference-results.md}
PY=/usr/bin/python3
if [ -z "${DI_ROOT:-}" ] || [ ! -f "$DI_ROOT/ding/worker/adapter/learner_aggregator.py" ]; then
    echo "reference: set DI_ROOT to a DI-engine checkout (git clone https://github.com/opendilab/DI-engine)" >&2
    exit 2
fi
if ! $PY -c 'import flask, requests, easydict, urlobject, yaml' 2>/dev/null; then
    echo "reference: needs Debian's python3-flask python3-requests python3-easydict python3-urlobject python3-yaml" >&2
    exit 2
fi
JOBS=${JOBS:-2}
rm -rf "$OUT/ours" "$OUT/di-engine"
mkdir -p "$OUT"
# each run ends within its scenario's timeout_ms (the runner's SIGTERM, then
# SIGKILL after its grace); a failing scenario is a result, not an error here
"$B/runner/run_scenarios" -q -j "$JOBS" --out "$OUT/ours" "$S/scenarios" >"$OUT/ours.txt" 2>&1 || true
"$B/runner/run_scenarios" -q -j "$JOBS" --aggregator-profile "$S/profiles/di-engine.json" \
    --out "$OUT/di-engine" "$S/scenarios" >"$OUT/di-engine.txt" 2>&1 || true
# nothing may be left behind: every process of a run names its run folder
if left=$(pgrep -af -- "$OUT/" | grep -v "pgrep" || true) && [ -n "$left" ]; then
    echo "reference: processes left behind:" >&2
    echo "$left" >&2
    exit 1
fi
commit=$(git -C "$DI_ROOT" rev-parse HEAD 2>/dev/null || echo "unknown (not a git checkout)")
$PY "$S/reference/results_table.py" "$OUT/ours/runs" "$OUT/di-engine/runs" "$commit" "$S/reference/notes.md" >"$DOC.tmp"
mv "$DOC.tmp" "$DOC"
echo "reference: wrote $DOC"
grep -E '^(Ours|DI-engine):' "$DOC" || true
