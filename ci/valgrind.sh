#!/usr/bin/env bash
# valgrind memcheck on the end-to-end tests: a plain Debug build (build-vg/),
# then the end-to-end test programs and a set of scenarios
# (ci/valgrind-scenarios/: library scenarios slowed down to time_scale 0.2)
# with every executable they start (aggregator, mock_learner,
# mock_coordinator, mock_operator) run under
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
# through the DILEARN_WRAPPER hook of tests/wrapexec.h and runner/sc_proc.c.
# Passes when every test passes and every valgrind log says 0 errors and
# 0 bytes definitely lost. A test program that fails is run once more (a
# timing race under valgrind's slowness; reported); a valgrind finding is
# never retried away.
#   ci/valgrind.sh [--quick]     --quick: scenarios and test_aggregator_e2e only
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)" >&2; exit 2; }
BUILD=$ROOT/build-vg
OUT=$ROOT/out/valgrind
start=$(date +%s)
echo "== valgrind: building (Debug, $BUILD)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" >/dev/null

rm -rf "$OUT"
mkdir -p "$OUT/logs"
export DILEARN_WRAPPER="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --log-file=$OUT/logs/vg.%p.log"
export DILEARN_TEST_SLOWDOWN=4

tests=(test_aggregator_e2e)
[ $QUICK = 1 ] || tests+=(test_mock_coordinator_e2e test_mock_learner test_mock_operator)
# run NAME COMMAND...: runs a test program, once more if it fails (a
# timing race under valgrind's slowness; reported); leaves "ok", "retried"
# or "failed" in $OUT/NAME.status.
run() {
    local name=$1
    shift
    local t0=$(date +%s) rc=0 status=ok
    "$@" >"$OUT/$name.txt" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
        echo "     $name failed (exit $rc), running it again: $OUT/$name.txt"
        grep -E "^\[  FAILED|FAILED" "$OUT/$name.txt" | head -5 || true
        status=retried
        rc=0
        "$@" >"$OUT/$name.retry.txt" 2>&1 || rc=$?
    fi
    if [ $rc -ne 0 ]; then
        status=failed
        echo "FAIL $name (exit $rc, $(($(date +%s) - t0)) s): $OUT/$name.retry.txt"
    else
        echo "ok   $name ($(($(date +%s) - t0)) s)"
    fi
    echo $status >"$OUT/$name.status"
}
# Two lanes at once (each valgrind process is one thread; the machines have
# two cores), about equally long: the longest test program and the
# scenarios in one (180 + 38 s in CI), the other test programs one after
# another in the other (45 + 102 + 57 s).
lane_first() {
    run "${tests[0]}" "$BUILD/tests/${tests[0]}"
    run scenarios "$BUILD/runner/run_scenarios" -q -j 2 --out "$OUT/scenarios" "$ROOT/ci/valgrind-scenarios/"
}
lane_rest() {
    local t
    for t in "${tests[@]:1}"; do
        run "$t" "$BUILD/tests/$t"
    done
}
lane_first &
lane_rest &
wait
failed=()
retried=()
for t in "${tests[@]}" scenarios; do
    st=$(cat "$OUT/$t.status" 2>/dev/null || echo failed)
    if [ "$st" != ok ]; then retried+=("$t"); fi
    if [ "$st" = failed ]; then failed+=("$t"); fi
done

# Every process that ran under valgrind left a log; one that was killed
# (SIGKILL by a test or a scenario) has no summary.
procs=0 errors=0 definite=0 killed=0 bad=()
for f in "$OUT"/logs/vg.*.log; do
    [ -e "$f" ] || continue
    procs=$((procs + 1))
    e=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$f" | tr -d , | tail -1)
    d=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$f" | tr -d , | tail -1)
    if [ -z "$e" ]; then
        killed=$((killed + 1))
        continue
    fi
    errors=$((errors + e))
    definite=$((definite + ${d:-0}))
    if [ "$e" != 0 ] || [ "${d:-0}" != 0 ]; then
        bad+=("$f")
    fi
done
for f in "${bad[@]}"; do
    echo "---- $f ($(grep -m1 'Command:' "$f" | sed 's/.*Command: //'))"
    grep -v "^==[0-9]*== *$" "$f" | head -60
done
echo "valgrind: $procs processes checked ($killed killed before their summary), $errors errors, $definite bytes definitely lost; ${#retried[@]} test programs rerun (${retried[*]:-none}); $(($(date +%s) - start)) s"
if [ $procs -eq 0 ] || [ $errors -ne 0 ] || [ $definite -ne 0 ] || [ ${#failed[@]} -ne 0 ]; then
    echo "valgrind: FAILED${failed[*]:+ (tests: ${failed[*]})}"
    exit 1
fi
echo "valgrind: passed"
