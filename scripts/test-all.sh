#!/usr/bin/env bash
# The whole NetSparse test suite, from a fresh Debian 12 machine (as root):
#   installs what is missing, builds, and runs
#     1. the release build's ctest suite (unit tests + real `mpirun` multi-rank tests),
#     2. the ASan/UBSan build's tests (parsers, protocol, filter, engine),
#     3. the TSan build's concurrency tests (filter, engine on in-process fabrics),
#     4. bounded libFuzzer runs of the packet decoder, the concatenation point and the Matrix
#        Market and METIS readers (clang),
#     5. an example built against the *installed* package (find_package / pkg-config),
#     6. the verbs transport on real soft-RoCE (rdma_rxe) inside a QEMU guest.
# Exits non-zero if anything fails; ends with one line "summary: N passed, N failed".
# Environment: NETSPARSE_JOBS (build jobs, default 2), NETSPARSE_TEST_JOBS (ctest jobs, default twice
# NETSPARSE_JOBS), NETSPARSE_CCACHE=0 (compile without the compiler cache: a cold run's time),
# NETSPARSE_SKIP_VM=1 only for quick local runs
# (CI never sets it; the summary then says the stage was not run).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${NETSPARSE_JOBS:-2}
# The release stage's ctest runs twice as many tests as there are build jobs: its multi-rank
# tests hold 2 of ctest's processors (PROCESSORS 2) but mostly wait (in mpirun's start and
# teardown, in watchdogs and deadlines: rig.mpi.np2 took 8.2 s of wall time for 2.6 s of CPU),
# so at -j 2 they ran one at a time. Measured side by side on the loaded development machine:
# the 48 bench.* tests 133 s at -j 2, 97 s at -j 4; the whole release suite passed at -j 4 at a
# load of 15. The sanitizer stages keep -j NETSPARSE_JOBS: their tests are CPU-bound (ASan at
# -j 4 took 446 s against 334 s at -j 2, every test about twice as long).
test_jobs=${NETSPARSE_TEST_JOBS:-$((2 * jobs))}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

ccache_report() {  # the cache's hits and misses since the last report (nothing without it)
  [[ -n ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]] || return 0
  ccache --print-stats 2>/dev/null | awk -F'\t' '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hit += $2 }
    $1 == "cache_miss" { miss = $2 }
    $1 ~ /^(could_not|unsupported|bad_|preprocessor_error|compile_failed)/ && $2 > 0 {
      other = other " " $1 "=" $2 }
    END { printf "ccache: %d compiles from the cache, %d compiled%s\n", hit, miss,
          other == "" ? "" : "; not cacheable:" other }'
  ccache --zero-stats >/dev/null 2>&1 || true
}

passed=0
failed=0
failures=()
stage() {  # stage NAME COMMAND... : run, time, count; returns the command's status
  local name=$1
  shift
  local t0=$SECONDS rc=0
  echo
  echo "=== [$name] $*"
  "$@" || rc=$?
  if ((rc == 0)); then
    passed=$((passed + 1))
    echo "=== [$name] PASSED in $((SECONDS - t0)) s"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "=== [$name] FAILED in $((SECONDS - t0)) s"
  fi
  return "$rc"
}

configure_build() {  # configure_build DIR [cmake args...] -- [targets...]
  local dir=$1
  shift
  local args=() targets=()
  while (($#)) && [[ $1 != -- ]]; do args+=("$1"); shift; done
  (($#)) && shift
  targets=("$@")
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja "${args[@]}" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; return 1; }
  ninja -C "$dir" -j "$jobs" "${targets[@]}" || return
  ccache_report
}

with_env() {  # with_env NAME=VALUE... COMMAND... : COMMAND (a function too) with extra variables
  (
    while [[ $# -gt 0 && $1 == *=* ]]; do export "${1?}"; shift; done
    "$@"
  )
}

run_ctest() {  # run_ctest DIR JOBS [ctest args...]: then the counts and the 20 slowest tests
  local dir=$1 test_jobs=$2 rc=0
  shift 2
  # Per-test times and statuses of this run (JUnit), read back by scripts/ctest-report.py; ctest
  # also keeps its running averages in Testing/Temporary/CTestCostData.txt.
  rm -f "$dir/ctest-junit.xml"
  ctest --test-dir "$dir" --output-on-failure -j "$test_jobs" --timeout 300 \
    --output-junit "$dir/ctest-junit.xml" --test-output-size-passed 4000000 "$@" || rc=$?
  python3 "$root/scripts/ctest-report.py" "$dir" "$dir/ctest-junit.xml" 20 || true
  return "$rc"
}

stage install-deps bash scripts/install-deps.sh --vm
((failed == 0)) || { echo "summary: $passed passed, $failed failed"; exit 1; }

# A compiler cache (ccache, which install-deps.sh has just installed) behind every compile of
# every stage, through CMake's CMAKE_<LANG>_COMPILER_LAUNCHER environment defaults (the fuzz and
# installed-package builds inherit them). Paths are hashed relative to the source tree
# (CCACHE_BASEDIR; CCACHE_NOHASHDIR because the sanitizer trees compile with -g1), so a clean
# clone anywhere on the machine reuses what an earlier run compiled; the cache lives in ccache's
# default place (~/.cache/ccache) unless CCACHE_DIR says otherwise. The first run on a fresh
# machine compiles everything (the README gives both times); NETSPARSE_CCACHE=0 turns the cache
# off to time that. Each build stage prints its hits and misses.
if [[ ${NETSPARSE_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
  # The test programs compile with a precompiled GoogleTest header (tests/CMakeLists.txt): ccache
  # caches those compiles only with these sloppiness flags (its manual, "Precompiled headers").
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  ccache --zero-stats >/dev/null 2>&1 || true
else
  unset CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER
fi

# 1. Release build, portable (no -march=native: the same tree runs in the soft-RoCE guest).
stage build-release configure_build "$root/build/release" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$root/build/install" --
stage ctest-release run_ctest "$root/build/release" "$test_jobs"

# Sanitizer builds compile at -O1 with line tables only (-g1): what ASan's documentation advises
# for speed, and a compile of test_rig_inproc.cpp under ASan took 29 s user at -O1 -g1 against 51 s
# at RelWithDebInfo's -O2 -g (reports keep file:line; only variable locations are lost).
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

# 2. ASan + UBSan: everything that parses untrusted bytes or indexes remote memory. Only the
#    programs of the tests labelled `sanitize` are built (tests-sanitize, tests/CMakeLists.txt); a
#    test whose program is missing fails, it is not skipped. Each multi-rank case runs at one
#    process count here (tests labelled np_repeat rerun a case at another count: stage 1 runs
#    them); every program that stage 1 runs from a `sanitize` directory still runs here.
#    The test sources compile at -O0 here, except the directories that compute references in
#    the test code (tests/CMakeLists.txt, netsparse_tests_stay_optimized).
stage build-asan configure_build "$root/build/asan" "${sanitizer_flags[@]}" \
  -DNETSPARSE_SANITIZE_ADDRESS=ON -DNETSPARSE_BUILD_BENCH=OFF -DNETSPARSE_BUILD_EXAMPLES=OFF -- \
  tests-sanitize
stage ctest-asan with_env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:fast_unwind_on_malloc=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest "$root/build/asan" "$jobs" -L sanitize \
  -LE np_repeat

# 3. TSan: the shared Idx Filter and the engine's threads (the programs of the tests labelled
#    `threads` only: tests-threads).
stage build-tsan configure_build "$root/build/tsan" "${sanitizer_flags[@]}" \
  -DNETSPARSE_SANITIZE_THREAD=ON -DNETSPARSE_BUILD_BENCH=OFF -DNETSPARSE_BUILD_EXAMPLES=OFF -- \
  tests-threads
stage ctest-tsan with_env TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  run_ctest "$root/build/tsan" "$jobs" -L threads -E "\\.mpi"

# 4. Bounded fuzzing of the packet decoder, the concatenation point and the file readers. The
#    targets are built once, then fuzzed two at a time (libFuzzer is single-threaded: one per
#    core); each target is still its own stage, with its own log and verdict.
fuzz_seconds="${NETSPARSE_FUZZ_SECONDS:-30}"
fuzz_logs="${NETSPARSE_FUZZ_BUILD_DIR:-$root/build-fuzz}/logs"
declare -A fuzz_pid=()
fuzz_start() {  # fuzz_start SECONDS TARGET: in the background, its output to a log
  mkdir -p "$fuzz_logs"
  NETSPARSE_FUZZ_PREBUILT=1 bash scripts/run-fuzz.sh "$1" "$2" >"$fuzz_logs/$2.log" 2>&1 &
  fuzz_pid[$2]=$!
}
fuzz_result() {  # fuzz_result TARGET: waits for it, shows its log, succeeds as it did
  local rc=0
  wait "${fuzz_pid[$1]}" || rc=$?
  cat "$fuzz_logs/$1.log"
  return "$rc"
}
if stage build-fuzz bash scripts/run-fuzz.sh --build && ccache_report; then
  fuzz_start "$fuzz_seconds" decoder
  fuzz_start "$fuzz_seconds" concat_point
  stage fuzz-decoder fuzz_result decoder
  stage fuzz-concat-point fuzz_result concat_point
  fuzz_start "$fuzz_seconds" matrix_market
  fuzz_start "$fuzz_seconds" metis
  stage fuzz-matrix-market fuzz_result matrix_market
  stage fuzz-metis fuzz_result metis
  # The sparse-allreduce packet decoder: a small grammar, 15 s at most.
  fuzz_sparse_seconds=$((fuzz_seconds > 15 ? 15 : fuzz_seconds))
  fuzz_start "$fuzz_sparse_seconds" sparse_packet
  stage fuzz-sparse-packet fuzz_result sparse_packet
fi

# 5. The installed package: install, then build the examples out of tree against it.
stage install-package cmake --install "$root/build/release"
stage installed-example bash scripts/check-installed.sh "$root/build/install"

# 6. Real RDMA: the verbs transport on soft-RoCE in a QEMU guest.
if [[ ${NETSPARSE_SKIP_VM:-0} == 1 && ${CI:-} != true ]]; then
  echo "=== [softroce-vm] NOT RUN (NETSPARSE_SKIP_VM=1): the verbs transport was not tested"
  failed=$((failed + 1))
  failures+=("softroce-vm(not run)")
else
  stage softroce-vm bash scripts/softroce-vm.sh --build-dir "$root/build/release" -- \
    bash "$root/scripts/verbs-guest-tests.sh" "$root/build/release"
fi

echo
if ((failed)); then echo "failed stages: ${failures[*]}"; fi
echo "summary: $passed passed, $failed failed"
((failed == 0))
