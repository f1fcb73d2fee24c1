#!/usr/bin/env bash
# ci/sanitize-long.sh: the long suite at 8192 tokens on Gemma 3, reference
# and cpu, run by the ASan/UBSan build (ci/sanitize-long.json). Nightly: it
# takes 20-40 minutes on 2 cores, too long for the merge-request CI, whose
# sanitize step runs the long suite on a synthetic model at 256 tokens
# (ci/sanitize-cells.json). Any sanitizer report fails its cell (the
# options are ci/sanitize.sh's: halt_on_error, leaks are errors), so gate
# PASS means every check ran and held and nothing was reported.
#
# usage: ci/sanitize-long.sh [OUT-DIR]   (default out/sanitize-long)
#   keeps OUT-DIR/{results.sqlite,report.html,junit.xml,qualify.log}: the
#   CI artifact. env: GT_ASAN_BUILD (build-asan), GT_GEMMA3 (the model file;
#   default: fetched and cached as the matrices do).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
BUILD=${GT_ASAN_BUILD:-build-asan}
OUT=${1:-out/sanitize-long}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGT_CUDA=OFF \
  -DGT_SANITIZE=address,undefined -DGT_WERROR=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target gauntlet >/dev/null
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$SRC/ci/lsan-thirdparty.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
rm -f "$OUT/results.sqlite"
t0=$(date +%s)
rc=0
"$BUILD/gauntlet" qualify "$SRC/ci/sanitize-long.json" --db "$OUT/results.sqlite" \
  --html "$OUT/report.html" --junit "$OUT/junit.xml" --no-progress >"$OUT/qualify.log" 2>&1 || rc=$?
grep -E '^\[|gate' "$OUT/qualify.log" | tail -6
if grep -q "ERROR: AddressSanitizer\|runtime error:" "$OUT/qualify.log"; then
  echo "ci/sanitize-long.sh: a sanitizer reported (see $OUT/qualify.log)"
  rc=1
fi
echo "ci/sanitize-long.sh: exit $rc in $(( $(date +%s) - t0 )) s; artifact in $OUT"
exit $rc
