#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets of fuzz/ with clang (ASan+UBSan,
# build-fuzz/) and runs each for a bounded time from its seed corpus
# fuzz/corpus/<target>/ (new inputs go to out/fuzz/corpus/<target>/, crash
# reproducers to out/fuzz/artifacts/). Fails on any crash, sanitizer report
# or leak; prints the executions per target.
#   ci/fuzz.sh                          CI run: 12 s per target, nproc at once
#   ci/fuzz.sh --seconds-per-target N   N seconds per target
#   ci/fuzz.sh --long N                 the same (a longer run, e.g. 600)
#   ci/fuzz.sh --only TARGET            one target (repeatable)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGETS=(fuzz_json fuzz_agg_merge fuzz_agg_split fuzz_agg_config fuzz_operator_reply fuzz_scenario fuzz_http fuzz_hc_reply)
SECS=$((100 / ${#TARGETS[@]}))
ONLY=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds-per-target | --long) SECS=$2; shift 2 ;;
    --only) ONLY+=("$2"); shift 2 ;;
    *) sed -n '2,11p' "$0"; exit 2 ;;
    esac
done
[ ${#ONLY[@]} -gt 0 ] && TARGETS=("${ONLY[@]}")
command -v clang >/dev/null || { echo "fuzz: clang is missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

BUILD=$ROOT/build-fuzz
OUT=$ROOT/out/fuzz
echo "== fuzz: building (clang, ASan+UBSan, $BUILD)"
CC=clang cmake -S "$ROOT" -B "$BUILD" -DFUZZ=ON -DSANITIZE=address -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target fuzz_all -j "${JOBS:-$(nproc)}" >/dev/null

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$OUT/artifacts"
# The targets run $JOBS at a time (each libFuzzer process is one thread).
PAR=${JOBS:-$(nproc)}
fuzz_one() { # fuzz_one TARGET: runs it, leaves its exit code in $OUT/TARGET.rc
    local t=$1 dict=() rc=0
    mkdir -p "$OUT/corpus/$t"
    case $t in
    fuzz_json | fuzz_agg_merge | fuzz_agg_config | fuzz_operator_reply | fuzz_scenario) dict=(-dict="$ROOT/fuzz/dict/json.dict") ;;
    fuzz_http | fuzz_hc_reply) dict=(-dict="$ROOT/fuzz/dict/http.dict") ;;
    esac
    "$BUILD/fuzz/$t" "${dict[@]}" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t-" \
        "$OUT/corpus/$t" "$ROOT/fuzz/corpus/$t" >"$OUT/$t.log" 2>&1 || rc=$?
    echo $rc >"$OUT/$t.rc"
}
running=0
for t in "${TARGETS[@]}"; do
    rm -f "$OUT/$t.rc"
    fuzz_one "$t" &
    running=$((running + 1))
    if [ $running -ge "$PAR" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait
total=0
failed=()
for t in "${TARGETS[@]}"; do
    log=$OUT/$t.log
    rc=$(cat "$OUT/$t.rc" 2>/dev/null || echo "no exit code")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    execs=${execs:-0}
    total=$((total + execs))
    if [ "$rc" != 0 ]; then
        failed+=("$t")
        echo "FAIL $t (exit $rc, $execs executions): see $log"
        grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -8 || true
    else
        echo "ok   $t: fuzz executions: $execs in ${SECS} s"
    fi
done
echo "fuzz executions: $total in all (${#TARGETS[@]} targets, ${SECS} s each, $PAR at once)"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}"
    exit 1
fi
echo "fuzz: passed"
