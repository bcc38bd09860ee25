#!/usr/bin/env bash
# One entry point for people and CI. Works as root on a fresh Debian 12.
#   ./do run        install what building and running need, build (without the
#                   tests), run the scenario library (summary on stdout,
#                   reports in out/)
#   ./do test       install what the tests need too, build, run every test (ctest)
#                   but test_runner_explore (./do explore runs it in CI)
#   ./do test-asan  the same under ASan+UBSan (build-asan/)
#   ./do test-tsan  the tests that use threads under TSan (ci/tsan.sh)
#   ./do valgrind   end-to-end tests under valgrind memcheck (ci/valgrind.sh)
#   ./do fuzz [N]   libFuzzer targets, N seconds each (ci/fuzz.sh; default CI size)
#   ./do soak [N]   chaos soak over N rounds (ci/soak.sh; default CI size)
#   ./do static     cppcheck and clang-tidy (ci/static-analysis.sh)
#   ./do bench      every benchmark (bench/run_all.sh; docs/benchmarks.md)
#   ./do test-planted  the scenario library and --explore against each bug
#                   planted in the aggregator (build-planted/, -DPLANT_BUGS=ON)
#   ./do explore [N]  --explore of the aggregator from scenarios/explore/base_4.json,
#                   N runs (default 120, none started after 150 s; reports in out/explore/)
#   ./do reference  the scenario library against DI-engine's own aggregator (needs
#                   DI_ROOT, a DI-engine checkout) and ours: docs/reference-results.md
#   ./do build      install and build only (without the tests)
#   ./do image      the OCI image of the aggregator and the mocks (deploy/, kept
#                   in build-image/), imported into podman or docker if one answers
# Each command installs the Debian packages it needs (as root) and shows
# apt's progress.
set -euo pipefail
cd "$(dirname "$0")"
# The comment block above, without its "# " (./do help).
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

# What each command needs from Debian, one list per purpose: adding a
# package is a one-line edit of the list that needs it.
#   building and running: compiler, CMake, pkg-config, the libraries
BUILD_PKGS=(gcc make cmake pkg-config libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev)
#   the tests (ctest): cmocka for the units, promtool (prometheus) for the
#   metrics format, curl and procps in end-to-end tests, xmllint for the
#   JUnit schema, Chromium for the HTML report, debootstrap for the image's
#   tests, python3-yaml and python3-jsonschema for the Kubernetes manifests
TEST_PKGS=(libcmocka-dev curl procps libxml2-utils chromium prometheus)
TEST_PKGS+=(debootstrap python3-yaml python3-jsonschema)
IMAGE_PKGS=(debootstrap)
VALGRIND_PKGS=(valgrind)
FUZZ_PKGS=(clang libclang-rt-14-dev)
STATIC_PKGS=(cppcheck clang-tidy)
SOAK_PKGS=(procps)

install_deps() { # install_deps PKG... : installs the missing ones
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== installing Debian packages: ${missing[*]}"
        if [ "$(id -u)" != 0 ]; then
            echo "error: missing packages (${missing[*]}); run as root or install them" >&2
            exit 2
        fi
        export DEBIAN_FRONTEND=noninteractive
        # apt's own progress is shown: a minute of downloads is not a hang
        apt-get update
        apt-get install -y --no-install-recommends "${missing[@]}"
        echo "== installed: ${missing[*]}"
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
    # the runner removes old reports itself; this also covers a runner that
    # could not start
    rm -f out/junit.xml out/report.html
    local rc=0
    build/runner/run_scenarios -j "$JOBS" --junit out/junit.xml --html out/report.html scenarios/ || rc=$?
    local f
    for f in out/junit.xml out/report.html; do
        if [ -s "$f" ]; then echo "report: $ROOT/$f"; else echo "no report $ROOT/$f (the runner exited $rc)"; fi
    done
    return $rc
}

cmd=${1:-run}
case "$cmd" in
run)
    install_deps "${BUILD_PKGS[@]}"
    build build -DWERROR=ON -DBUILD_TESTING=OFF
    main_job
    ;;
build)
    install_deps "${BUILD_PKGS[@]}"
    build build -DWERROR=ON -DBUILD_TESTING=OFF
    ;;
test)
    install_deps "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
    build build -DWERROR=ON -DBUILD_TESTING=ON
    run_tests build -E '^test_runner_explore$'
    ;;
test-asan)
    install_deps "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
    build build-asan -DWERROR=ON -DSANITIZE=address
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_tests build-asan
    ;;
test-tsan)
    install_deps "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
    ci/tsan.sh
    ;;
valgrind)
    install_deps "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" "${VALGRIND_PKGS[@]}"
    ci/valgrind.sh "${@:2}"
    ;;
fuzz)
    install_deps "${BUILD_PKGS[@]}" "${FUZZ_PKGS[@]}"
    if [ -n "${2:-}" ]; then ci/fuzz.sh --seconds-per-target "$2"; else ci/fuzz.sh; fi
    ;;
soak)
    install_deps "${BUILD_PKGS[@]}" "${SOAK_PKGS[@]}"
    if [ -n "${2:-}" ]; then ci/soak.sh --rounds "$2"; else ci/soak.sh; fi
    ;;
static)
    install_deps "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" "${STATIC_PKGS[@]}"
    ci/static-analysis.sh
    ;;
bench)
    install_deps "${BUILD_PKGS[@]}"
    bench/run_all.sh
    ;;
test-planted)
    install_deps "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
    # only what the planted tests run (they are scripts over run_scenarios)
    cmake -S "$ROOT" -B build-planted -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWERROR=ON -DPLANT_BUGS=ON >/dev/null
    cmake --build build-planted -j "$JOBS" --target aggregator mock_learner mock_coordinator mock_operator run_scenarios
    run_tests build-planted -L planted
    ;;
explore)
    install_deps "${BUILD_PKGS[@]}"
    build build -DWERROR=ON
    # each exploration writes a new folder under out/explore/
    mkdir -p out/explore
    build/runner/run_scenarios --explore scenarios/explore/base_4.json --runs "${2:-120}" --seed "${SEED:-1}" \
        -j "$JOBS" --quiet --max-seconds 150 --shrink-seconds 60 --out out/explore \
        --junit out/explore/junit.xml --html out/explore/report.html
    ;;
reference)
    if [ -z "${DI_ROOT:-}" ]; then
        echo "./do reference: set DI_ROOT to a DI-engine checkout (git clone https://github.com/opendilab/DI-engine)" >&2
        exit 2
    fi
    install_deps "${BUILD_PKGS[@]}" python3-flask python3-requests python3-easydict python3-urlobject python3-yaml
    build build -DWERROR=ON -DBUILD_TESTING=OFF
    JOBS=$JOBS reference/reference_results.sh build build/reference docs/reference-results.md
    ;;
image)
    install_deps "${BUILD_PKGS[@]}" "${IMAGE_PKGS[@]}"
    build build -DWERROR=ON -DBUILD_TESTING=OFF
    deploy/build-image.sh build build-image
    deploy/import-image.sh build-image
    ;;
help | -h | --help)
    usage
    ;;
*)
    echo "unknown command '$cmd'; the commands:" >&2
    usage >&2
    exit 2
    ;;
esac
