#!/usr/bin/env bash
# Static analysis: cppcheck and clang-tidy over the project's C sources
# (interaction/, aggregator/, mock_learner/, mock_coordinator/,
# mock_operator/, runner/). Tests, bench/ and fuzz/ are not gated: test code
# uses idioms both tools flag (NULL sentinels of variadic helpers, #error for
# missing compile definitions). Exits non-zero on any finding.
#   cppcheck 2.10: --enable=warning,portability,performance (plus the default
#     error checks), inline suppressions with a reason only.
#   clang-tidy-14: the checks of .clang-tidy (clang-analyzer-*, bugprone-*,
#     cert-*, misc-*, performance-*, portability-*, with the exclusions
#     listed and justified there); warnings are errors. Compile commands come
#     from a configure-only CMake run in build-static/.
#   ci/static-analysis.sh                 both tools
#   ci/static-analysis.sh cppcheck|tidy   one of them
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIRS=(interaction aggregator mock_learner mock_coordinator mock_operator runner)
JOBS=${JOBS:-$(nproc)}
what=${1:-all}
rc=0

if [ "$what" = all ] || [ "$what" = cppcheck ]; then
    echo "== cppcheck $(cppcheck --version | sed 's/Cppcheck //') on ${DIRS[*]}"
    srcs=()
    for d in "${DIRS[@]}"; do
        [ -d "$d" ] && srcs+=("$d")
    done
    cppcheck --quiet --std=c11 -D_GNU_SOURCE -I interaction \
        --enable=warning,portability,performance --inline-suppr \
        --suppress=missingIncludeSystem --error-exitcode=1 -j "$JOBS" \
        --template='{file}:{line}: {severity} ({id}): {message}' "${srcs[@]}" || rc=1
fi

if [ "$what" = all ] || [ "$what" = tidy ]; then
    TIDY=$(command -v clang-tidy-14 || command -v clang-tidy)
    RUN=$(command -v run-clang-tidy-14 || command -v run-clang-tidy)
    echo "== $($TIDY --version | grep -o 'version [0-9.]*') on ${DIRS[*]} (checks: .clang-tidy)"
    cmake -S "$ROOT" -B "$ROOT/build-static" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_BUILD_TYPE=Debug \
        >/dev/null
    regex="$ROOT/($(IFS='|'; echo "${DIRS[*]}"))/[^/]*\\.c\$"
    "$RUN" -clang-tidy-binary "$TIDY" -p "$ROOT/build-static" -j "$JOBS" -quiet "$regex" \
        >"$ROOT/build-static/clang-tidy.log" 2>&1 || rc=1
    # The findings (with their notes), without the progress lines.
    grep -E '(warning|error|note): ' "$ROOT/build-static/clang-tidy.log" | sed -E 's/\x1b\[[0-9;]*m//g' | sort -u || true
fi

if [ $rc -ne 0 ]; then
    echo "static analysis: findings above (fix them, or suppress one with a reason: see .clang-tidy)" >&2
else
    echo "static analysis: clean"
fi
exit $rc
