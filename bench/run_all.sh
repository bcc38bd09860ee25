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
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DWERROR=ON -DBUILD_TESTING=OFF >/dev/null
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
echo "== (d) and (a) with everything on one core (no cross-core wake-ups)"
"$B/bench/agg_bench" floor --one-core --learners 4,16,64 --csv "$CSV"
echo "== the library floor: libmicrohttpd and libcurl multi, same exchanges, one core"
"$B/bench/agg_bench" libfloor --one-core --learners 4,16,64 --csv "$CSV"
"$B/bench/agg_bench" rounds --one-core --learners 4,16,64 --csv "$CSV"
echo "== (c) large learn data over 8 learners"
"$B/bench/agg_bench" large --csv "$CSV"
if [ -n "${DI_ROOT:-}" ] && [ -f "$DI_ROOT/ding/worker/adapter/learner_aggregator.py" ]; then
    echo "== DI-engine's Python LearnerAggregator, same learners and coordinator"
    "$ROOT/bench/python/side_by_side.sh" "$B" "$CSV" 4 64
else
    echo "== (skipped: DI-engine side by side; set DI_ROOT to a DI-engine checkout)"
fi
"$B/bench/agg_bench" plot --csv "$CSV" --svg "$OUT/benchmarks.svg"
echo "== ratios (median round time; floor: the faster of its two placements)"
awk -F, 'NR > 1 && ($1 == "rounds" || $1 == "floor") { t[$2 "," $3] = $6 }
  END {
    for (k in t) { split(k, p, ","); if (p[1] == "c") n[p[2]] = 1 }
    for (l in n) {
      f = t["floor," l]; f1 = t["floor-1core," l]; fl = (f1 != "" && (f == "" || f1 < f)) ? f1 : f
      line = sprintf("%5d learners: ours %.3f ms", l, t["c," l])
      if (fl != "") line = line sprintf(", %.2fx the floor (%.3f ms)", t["c," l] / fl, fl)
      if (t["c-1core," l] != "" && f1 != "") line = line sprintf("; one core: %.2fx", t["c-1core," l] / f1)
      if (t["python," l] != "") line = line sprintf("; DI-engine Python %.3f ms: %.1fx faster", t["python," l], t["python," l] / t["c," l])
      print line
    }
  }' "$CSV" | sort -n
echo "== CPU per learner-task over the library floor's CPU per exchange (one core)"
awk -F, 'NR > 1 && ($2 == "c-1core" || $2 == "libfloor-1core") { c[$2 "," $3] = $11 }
  END { for (k in c) { split(k, p, ","); if (p[1] == "c-1core" && c["libfloor-1core," p[2]] > 0)
          printf("%5d learners: %.2f us / %.2f us = %.2fx the library floor\n", p[2], c[k],
                 c["libfloor-1core," p[2]], c[k] / c["libfloor-1core," p[2]]) } }' "$CSV" | sort -n
echo "== wrote $CSV and $OUT/benchmarks.svg"
