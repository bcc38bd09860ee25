#!/bin/sh
# DI-engine's own LearnerAggregator, run by reference/di_aggregator.py from a
# plain checkout at $DI_ROOT, serves mock_coordinator with four mock
# learners: resource answers the world size and two learn rounds complete,
# checked by the coordinator's oracle and dump checks; SIGTERM ends it.
# Skipped (exit 77) without DI_ROOT or Debian's python3 modules.
# usage: test_reference_launcher.sh BUILD_DIR SOURCE_DIR OUT_DIR
set -u
B=$1 S=$2 OUT=$3
PY=/usr/bin/python3
if [ -z "${DI_ROOT:-}" ] || [ ! -f "$DI_ROOT/ding/worker/adapter/learner_aggregator.py" ]; then
    echo "skipped: set DI_ROOT to a DI-engine checkout"; exit 77
fi
if ! $PY -c 'import flask, requests, easydict, urlobject, yaml' 2>/dev/null; then
    echo "skipped: needs python3-flask python3-requests python3-easydict python3-urlobject python3-yaml"; exit 77
fi
rm -rf "$OUT"; mkdir -p "$OUT"
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$OUT"/*; do echo "== $f"; tail -20 "$f"; done; exit 1; }
wait_line() { # FILE PATTERN
    i=0; while [ $i -lt 300 ]; do grep -q "$2" "$1" 2>/dev/null && return 0; i=$((i + 1)); sleep 0.1; done; return 1
}
"$B/mock_learner/mock_learner" --count 4 --dump "$OUT/dump.jsonl" >"$OUT/ml.out" 2>"$OUT/ml.err" &
pids="$pids $!"
wait_line "$OUT/ml.out" ready || fail "mock_learner not ready"
LEARNERS=$($PY -c "import json;d=json.loads(open('$OUT/ml.out').readline());print(' '.join('%s=127.0.0.1:%d'%(l['id'],l['port']) for l in d['learners']))")
PORTS=$($PY -c "
import socket
s=[socket.socket() for _ in range(2)]
[x.bind(('127.0.0.1',0)) for x in s]
print(' '.join(str(x.getsockname()[1]) for x in s))")
set -- $PORTS
SP=$1 MP=$2
"$S/reference/di_aggregator.py" "$SP" "$MP" $LEARNERS >"$OUT/agg.out" 2>"$OUT/agg.err" &
AGG=$!
pids="$pids $AGG"
wait_line "$OUT/agg.out" '"ready": true' || fail "di_aggregator not ready"
grep -q '"world_size": 4' "$OUT/agg.out" || fail "world size is not 4"
"$B/mock_coordinator/mock_coordinator" --connect "127.0.0.1:$SP" --rounds 2 --no-close --dump "$OUT/dump.jsonl" \
    --expect-learners 4 >"$OUT/coord.json" 2>"$OUT/coord.err" || fail "mock_coordinator failed"
grep -q '"ok":true' "$OUT/coord.json" || fail "coordinator not ok"
kill -TERM $AGG
i=0; while kill -0 $AGG 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
kill -0 $AGG 2>/dev/null && fail "di_aggregator did not exit within 10 s of SIGTERM"
echo "ok: DI-engine's LearnerAggregator served 2 rounds with 4 learners"
