#!/usr/bin/env bash
# ci/sanitize.sh: the test suite's unit-level tests under AddressSanitizer
# and UndefinedBehaviorSanitizer (GT_SANITIZE=address,undefined), built into
# build-asan/ without CUDA (the CUDA runtime and ASan do not mix: its
# address-space reservations and driver threads trip the shadow memory),
# and one end-to-end qualification cell per backend (ci/sanitize-cells.json:
# reference, cpu, opencl through smoke, functional, accuracy, performance
# and soak), run by the sanitized gauntlet. The harness knows
# (worker.c/runner.c): no RLIMIT_AS under ASan.
#
# Run in the plain build only (steps fresh-clone and shared of .ci/run), as
# instrumented code is 3-5x slower and these exercise no code that the unit
# tests and the cells above do not:
#   - CTest tests labelled plain-only: ci_fanout (two sharded quickstart
#     runs and an unsharded one), readme_commands (the README's main job
#     expects the cuda plugin built; this build has none), test_peer (the
#     llama-server peer matrix), chat_openai (SmolLM2 chat through the
#     python openai client);
#   - cases that skip themselves under sanitizers, saying so (grep
#     gt_test_sanitized tests/): the chat cell of test_qualify_http, the
#     full quickstart qualifications of test_qualify and test_reports
#     (sanitize-cells below is their instrumented stand-in), the SmolLM2
#     end-to-end cases of test_cpu, the SmolLM2 and Gemma 3 model-level
#     checks of test_opencl, test_gemma3 and test_quantize_mix, the longest
#     reference and sliding-window cases.
#
# Leaks are errors (detect_leaks=1). PoCL/OpenCL keep allocations for the
# process's lifetime; ci/lsan-thirdparty.supp suppresses exactly those
# libraries and nothing of ours. A UBSan report fails the test that hit it
# (halt_on_error).
#
# usage: ci/sanitize.sh [CTEST-ARGS...]   e.g. ci/sanitize.sh -R test_gguf
#   (with arguments, only that ctest selection runs: no cells, no replay)
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
SRC=$PWD
cd "$BUILD"
start=$(date +%s)
rc=0
full=0
if [ $# -eq 0 ]; then
  full=1
  echo "ci/sanitize.sh: plain build only (above): $(ctest -N -L plain-only | sed -n 's/^ *Test *#[0-9]*: //p' | grep -v '^tmp_' | paste -sd' ')"
  set -- -LE plain-only
fi
ctest --output-on-failure -j"${GT_TEST_JOBS:-2}" "$@" || rc=$?
# The ten slowest, so the step's time is explained.
awk '/^[0-9]+\/[0-9]+ Testing: / {t = $3} /^Test time = / {print $4, t}' \
  Testing/Temporary/LastTest.log 2>/dev/null | sort -rn | head -10 |
  awk '{printf "ci/sanitize.sh: slow: %7.1f s %s\n", $1, $2}'
# LeakSanitizer's own stop-the-world tracer sometimes segfaults at a
# process's exit ("Tracer caught signal 11", then "LeakSanitizer has
# encountered a fatal error"): no leak report, after the test's own checks
# (seen once in test_qwen3moe's forked OpenCL case, while PoCL's worker
# threads wound down; google/sanitizers#1353). When every failed test
# failed that way, those tests run once more and their second result
# counts; any other failure fails the step as it stands.
if [ "$rc" != 0 ] && [ -f Testing/Temporary/LastTestsFailed.log ]; then
  failed=$(sed 's/^[0-9]*://' Testing/Temporary/LastTestsFailed.log | sort -u | paste -sd' ')
  crashed=$(awk '/^[0-9]+\/[0-9]+ Testing: / {t = $3}
                 /^Tracer caught signal/ {print t}' Testing/Temporary/LastTest.log |
            sort -u | paste -sd' ')
  if [ -n "$failed" ] && [ "$failed" = "$crashed" ]; then
    echo "ci/sanitize.sh: LeakSanitizer's tracer crashed at exit in: $failed; running them once more"
    rc=0
    ctest --output-on-failure -R "^($(echo "$failed" | tr ' ' '|'))\$" || rc=$?
  fi
fi
# One qualification cell per backend, end to end, by the sanitized binary.
if [ "$full" = 1 ]; then
  cells=$(mktemp -d /tmp/gt-sanitize-cells.XXXXXX)
  t0=$(date +%s)
  if ./gauntlet qualify "$SRC/ci/sanitize-cells.json" --db "$cells/cells.sqlite" \
      --cache-dir "$cells/cache" --no-progress >"$cells/qualify.log" 2>&1; then
    grep -E '^  |gate' "$cells/qualify.log" | tail -8
    echo "ci/sanitize.sh: sanitize-cells passed ($(( $(date +%s) - t0 )) s)"
  else
    rc=1
    echo "ci/sanitize.sh: sanitize-cells FAILED:"; tail -40 "$cells/qualify.log"
  fi
  rm -rf "$cells"
fi
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
