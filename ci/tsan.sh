#!/usr/bin/env bash
# ThreadSanitizer on the tests that use threads (build-tsan/, -DSANITIZE=thread).
# The project's code runs one event loop per process, on one thread, with
# our own HTTP server and libcurl's client on it; the only threads are
#  - libcurl's threaded resolver (a thread per lookup of a name that is
#    neither an address nor localhost/*.localhost). libcurl is not
#    instrumented, but it hands results over under a pthread mutex, which
#    TSan intercepts, and hc's state is never touched off the loop: test_hc
#    resolves this machine's name and a name that does not exist through it
#    (no suppression is needed; a report would fail the run);
#  - test_bad_input's fake peers (pthreads sharing state with the test
#    thread under a mutex): the one test that starts threads itself.
# The Kubernetes scenarios (operator at 127.0.0.1, learners at
# learnerN.localhost) and the aggregator's end-to-end test run here too.
# Every process (tests and the executables they start, all TSan-built)
# writes its reports to out/tsan/; any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-tsan
OUT=$ROOT/out/tsan
start=$(date +%s)
echo "== tsan: building (-DSANITIZE=thread, $BUILD)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANITIZE=thread >/dev/null
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" >/dev/null
rm -rf "$OUT"
mkdir -p "$OUT"
TESTS='^(test_hc|test_bad_input|test_aggregator_e2e|scenario_k8s_.*|scenario_operator_.*)$'
rc=0
(cd "$BUILD" && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$OUT/tsan" \
    ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600 -R "$TESTS") >"$OUT/ctest.txt" 2>&1 || rc=$?
grep -E "tests passed|\*\*\*Failed|Timeout" "$OUT/ctest.txt" || true
reports=$(cat "$OUT"/tsan.* 2>/dev/null | grep -c "WARNING: ThreadSanitizer" || true)
ntests=$(grep -cE "Test +#[0-9]+: " "$OUT/ctest.txt" || true)
if [ "$reports" -gt 0 ]; then
    grep -h -A30 "WARNING: ThreadSanitizer" "$OUT"/tsan.* | head -80
fi
echo "tsan: $ntests tests, $reports ThreadSanitizer reports, $(($(date +%s) - start)) s"
if [ $rc -ne 0 ] || [ "$reports" -ne 0 ]; then
    echo "tsan: FAILED (ctest exit $rc; $OUT/ctest.txt)"
    exit 1
fi
echo "tsan: passed"
