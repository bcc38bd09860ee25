#!/usr/bin/env bash
# Runs every benchmark (docs/benchmarks.md): the loopback floor, rounds for
# 1..1024 learners, large learn data, and, when a DI-engine checkout is at
# $DI_ROOT, DI-engine's Python LearnerAggregator side by side with the same
# learners and coordinator. Prints the tables, writes OUT_DIR/results.csv and
# OUT_DIR/benchmarks.svg.
#   usage: bench/run_all.sh [BUILD_DIR (build-bench)] [OUT_DIR (bench/out)]
# Run it on a quiet machine (uptime): round times are wall-clock figures.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build-bench}
OUT=${2:-$ROOT/bench/out}
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DWERROR=ON >/dev/null
cmake --build "$B" -j "$(nproc)" --target agg_bench aggregator mock_learner >/dev/null
mkdir -p "$OUT"
CSV=$OUT/results.csv
rm -f "$CSV"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
echo "== load: $(uptime)"
echo "== (d) loopback floor: minimal C client and server, same exchanges"
"$B/bench/agg_bench" floor --csv "$CSV"
echo "== (a), (b) rounds: get-data + learn, learners that answer at once"
"$B/bench/agg_bench" rounds --csv "$CSV"
echo "== (c) large learn data over 8 learners"
"$B/bench/agg_bench" large --csv "$CSV"
if [ -n "${DI_ROOT:-}" ] && [ -f "$DI_ROOT/ding/worker/adapter/learner_aggregator.py" ]; then
    echo "== DI-engine's Python LearnerAggregator, same learners and coordinator"
    "$ROOT/bench/python/side_by_side.sh" "$B" "$CSV" 4 64
else
    echo "== (skipped: DI-engine side by side; set DI_ROOT to a DI-engine checkout)"
fi
"$B/bench/agg_bench" plot --csv "$CSV" --svg "$OUT/benchmarks.svg"
echo "== wrote $CSV and $OUT/benchmarks.svg"
