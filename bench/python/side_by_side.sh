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
  SP=$((20000 + RANDOM % 20000)); MP=$((SP + 1))
  "$(dirname "$0")/../../reference/di_aggregator.py" $SP $MP $ARGS >"$LOG/py.out" 2>"$LOG/py.err" &
  PYPID=$!
  for i in $(seq 600); do grep -q ready "$LOG/py.out" 2>/dev/null && break; sleep 0.1; done
  "$B/bench/agg_bench" rounds --connect 127.0.0.1:$SP --agg-pid $PYPID --learners "$N" --seconds "${SECONDS_PER_POINT:-3}" --min-rounds 5 --impl python ${CSV:+--csv "$CSV"} | tail -1 || echo "python N=$N failed (logs in $LOG)"
  kill $PYPID $MLPID 2>/dev/null || true
  wait $PYPID $MLPID 2>/dev/null || true
done
