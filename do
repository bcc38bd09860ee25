#!/usr/bin/env bash
# One entry point for people and CI. Works as root on a fresh Debian 12.
#   ./do run        install what is missing, build, run the scenario library
#                   (summary on stdout, reports in out/)
#   ./do test       install what is missing, build, run every test (ctest)
#   ./do test-asan  the same under ASan+UBSan (build-asan/)
#   ./do test-tsan  the tests that use threads under TSan (ci/tsan.sh)
#   ./do valgrind   end-to-end tests under valgrind memcheck (ci/valgrind.sh)
#   ./do fuzz [N]   libFuzzer targets, N seconds each (ci/fuzz.sh; default CI size)
#   ./do soak [N]   chaos soak over N rounds (ci/soak.sh; default CI size)
#   ./do static     cppcheck and clang-tidy (ci/static-analysis.sh)
#   ./do bench      every benchmark (bench/run_all.sh; docs/benchmarks.md)
#   ./do test-planted  the scenario library against each bug planted in the
#                   aggregator (build-planted/, -DPLANT_BUGS=ON)
#   ./do build      install and build only
#   ./do image      the OCI image of the aggregator and the mocks (deploy/, kept
#                   in build-image/), imported into podman or docker if one answers
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

PKGS=(gcc make cmake pkg-config curl libcurl4-openssl-dev libcjson-dev libcmocka-dev
      chromium valgrind clang libclang-rt-14-dev clang-tidy cppcheck procps
      debootstrap python3-yaml python3-jsonschema)

install_deps() {
    local missing=()
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== installing Debian packages: ${missing[*]}"
        if [ "$(id -u)" != 0 ]; then
            echo "error: missing packages (${missing[*]}); run as root or install them" >&2
            exit 2
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

build() { # build DIR [cmake args...]
    local dir=$1
    shift
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

run_tests() { # DIR [ctest args...]
    local dir=$1
    shift
    (cd "$dir" && ctest --output-on-failure -j "$JOBS" --timeout 600 "$@")
}

main_job() {
    mkdir -p out
    local rc=0
    build/runner/run_scenarios -j "$JOBS" --junit out/junit.xml --html out/report.html scenarios/ || rc=$?
    echo "reports: $ROOT/out/junit.xml $ROOT/out/report.html"
    return $rc
}

cmd=${1:-run}
case "$cmd" in
run)
    install_deps
    build build -DWERROR=ON
    main_job
    ;;
build)
    install_deps
    build build -DWERROR=ON
    ;;
test)
    install_deps
    build build -DWERROR=ON
    run_tests build
    ;;
test-asan)
    install_deps
    build build-asan -DWERROR=ON -DSANITIZE=address
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_tests build-asan
    ;;
test-tsan)
    install_deps
    ci/tsan.sh
    ;;
valgrind)
    install_deps
    ci/valgrind.sh "${@:2}"
    ;;
fuzz)
    install_deps
    if [ -n "${2:-}" ]; then ci/fuzz.sh --seconds-per-target "$2"; else ci/fuzz.sh; fi
    ;;
soak)
    install_deps
    if [ -n "${2:-}" ]; then ci/soak.sh --rounds "$2"; else ci/soak.sh; fi
    ;;
static)
    install_deps
    ci/static-analysis.sh
    ;;
bench)
    install_deps
    bench/run_all.sh
    ;;
test-planted)
    install_deps
    build build-planted -DWERROR=ON -DPLANT_BUGS=ON
    run_tests build-planted -L planted
    ;;
image)
    install_deps
    build build -DWERROR=ON
    deploy/build-image.sh build build-image
    deploy/import-image.sh build-image
    ;;
help | -h | --help)
    sed -n '2,17p' "$0"
    ;;
*)
    echo "unknown command '$cmd'; the commands:" >&2
    sed -n '2,17p' "$0"
    exit 2
    ;;
esac
