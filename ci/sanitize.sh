#!/usr/bin/env bash
# ci/sanitize.sh: the whole test suite under AddressSanitizer and
# UndefinedBehaviorSanitizer (GT_SANITIZE=address,undefined), built into
# build-asan/ without CUDA (the CUDA runtime and ASan do not mix: its
# address-space reservations and driver threads trip the shadow memory).
# The harness knows (worker.c/runner.c): no RLIMIT_AS under ASan.
#
# Leaks are errors (detect_leaks=1). PoCL/OpenCL keep allocations for the
# process's lifetime; ci/lsan-thirdparty.supp suppresses exactly those
# libraries and nothing of ours. A UBSan report fails the test that hit it
# (halt_on_error).
#
# usage: ci/sanitize.sh [CTEST-ARGS...]   e.g. ci/sanitize.sh -R test_gguf
#   env: GT_ASAN_BUILD (build-asan), GT_TEST_JOBS (2), GT_SMOLLM2 (as ci/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GT_ASAN_BUILD:-build-asan}
SUPP=$PWD/ci/lsan-thirdparty.supp
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGT_CUDA=OFF \
  -DGT_SANITIZE=address,undefined >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

if [ -z "${GT_SMOLLM2:-}" ] && smol=$(bash ci/fetch-smollm2.sh 2>/dev/null); then
  export GT_SMOLLM2="$smol"
fi
# Children (workers) inherit these options. The quarantine is small
# (1 MiB, default 256): the soak suite fails a cell whose RSS grows by more
# than 2 MiB, and freed memory parked in ASan's quarantine reads as exactly
# that growth (50-200 MiB over a 30 s soak). A use after free of a recent
# allocation is still caught.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:quarantine_size_mb=1:thread_local_quarantine_size_kb=64}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$SUPP:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Instrumented code runs 3-5x slower: the Check cases' timeouts scale with it
# (CTest's per-test TIMEOUT does too, in tests/CMakeLists.txt).
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-3}
# ... and ci_fanout's four qualify jobs, at once, time cells out (a
# SmolLM2 cpu cell ran past its 180 s): it runs them one after another.
export GT_FANOUT_SERIAL=1
cd "$BUILD"
start=$(date +%s)
rc=0
# readme_commands runs the README's commands verbatim, and this build has no
# cuda plugin, so the README's main job would see cuda cells "not built"
# where the README (and its gate) speak of "no device". It runs in the plain
# build (step test) and in the fresh clone (step fresh-clone) instead.
full=0
if [ $# -eq 0 ]; then
  full=1
  echo "ci/sanitize.sh: SKIP readme_commands: the README's main job expects the cuda plugin built (no device), this build has GT_CUDA=OFF; steps test and fresh-clone run it"
  set -- -E '^readme_commands$'
fi
ctest --output-on-failure -j"${GT_TEST_JOBS:-2}" "$@" || rc=$?
# The corpus ci/fuzz.sh grew (clang builds) replayed through this build's
# gcc replay_* binaries too: a different compiler orders and inlines
# differently, and has shown what libFuzzer's build did not.
if [ "$full" = 1 ] && [ -d ../build-fuzz/corpus ]; then
  for t in gguf matrix tokenizer protocol; do
    [ -d "../build-fuzz/corpus/$t" ] && [ -x "./replay_$t" ] || continue
    ./replay_$t "../build-fuzz/corpus/$t" >"replay_$t.log" 2>&1 ||
      { rc=1; echo "ci/sanitize.sh: replay_$t failed on the fuzz corpus:"; tail -30 "replay_$t.log"; }
    tail -1 "replay_$t.log"
  done
fi
echo "ci/sanitize.sh: ctest exit $rc in $(( $(date +%s) - start )) s"
exit $rc
