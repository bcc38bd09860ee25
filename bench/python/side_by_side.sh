#!/usr/bin/env bash
# Side by side: DI-engine's Python LearnerAggregator driven by agg_bench (the
# same coordinator) with the same mock_learner learners. Needs a DI-engine
# checkout at $DI_ROOT, through reference/di_aggregator.py.
# usage: side_by_side.sh BUILD_DIR CSV N [N...]
set -euo pipefail
B=$1; CSV=$2; shift 2
for N in "$@"; do
  LOG=$(mktemp -d /tmp/pyagg-XXXXXX)
  "$B/mock_learner/mock_learner" --count "$N" --batch-size 4 --log-level warn >"$LOG/ml.out" 2>"$LOG/ml.err" &
  MLPID=$!
  for i in $(seq 100); do [ -s "$LOG/ml.out" ] && break; sleep 0.1; done
  ARGS=$(/usr/bin/python3 -c "import json,sys;d=json.load(open('$LOG/ml.out'));print(' '.join('%s=127.0.0.1:%d'%(l['id'],l['port']) for l in d['learners']))")
  # Two ports the kernel says are free; the aggregator binds them a moment
  # later, so one may be taken meanwhile: then again with two others.
  for try in 1 2 3 4 5; do
    read -r SP MP < <(/usr/bin/python3 -c "
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(('127.0.0.1', 0))
print(*(x.getsockname()[1] for x in s))")
    "$(dirname "$0")/../../reference/di_aggregator.py" $SP $MP $ARGS >"$LOG/py.out" 2>"$LOG/py.err" &
    PYPID=$!
    for i in $(seq 600); do
      grep -q ready "$LOG/py.out" 2>/dev/null && break
      grep -q "in use" "$LOG/py.err" 2>/dev/null && break
      kill -0 $PYPID 2>/dev/null || break
      sleep 0.1
    done
    grep -q ready "$LOG/py.out" 2>/dev/null && break
    kill $PYPID 2>/dev/null || true
    wait $PYPID 2>/dev/null || true
    grep -q "in use" "$LOG/py.err" || break
    echo "python N=$N: port $SP or $MP was taken meanwhile; again with two others" >&2
  done
  "$B/bench/agg_bench" rounds --connect 127.0.0.1:$SP --agg-pid $PYPID --learners "$N" --seconds "${SECONDS_PER_POINT:-3}" --min-rounds 5 --impl python ${CSV:+--csv "$CSV"} | tail -1 || echo "python N=$N failed (logs in $LOG)"
  kill $PYPID $MLPID 2>/dev/null || true
  wait $PYPID $MLPID 2>/dev/null || true
done
