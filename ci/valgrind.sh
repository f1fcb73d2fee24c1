#!/usr/bin/env bash
# ci/valgrind.sh: valgrind memcheck over a quickstart cell on stories260K,
# on the reference and the cpu backends: zero errors and zero definitely
# lost bytes (indirect/possible/reachable leaks are reported, not failed:
# OpenBLAS and glibc keep thread pools and caches for the process).
#
# What runs, each as its own valgrind process:
#   gauntlet generate   the runtime end to end (load, tokenize, prefill,
#                       decode, sample, detokenize) with sampling on;
#   gauntlet worker     one matrix cell exactly as qualify runs it (the
#                       worker reads its spec from --spec instead of the
#                       parent's pipe): smoke + functional suites, KV
#                       save/restore, batched vs token-by-token prefill, and
#                       its DB reads; valgrind on the worker directly, since
#                       qualify re-executes itself with an address-space limit
#                       that valgrind's own reservations would exceed.
#   gauntlet tokenize   both tokenizer models (stories260K and GPT-2 vocab).
#
# usage: ci/valgrind.sh   env: GT_BUILD_DIR (build), GT_MODELS (../shared/models),
#   GT_VALGRIND_KEEP=1 (keep the logs' folder, else removed on exit)
# exit: 0 clean, 1 valgrind found something (logs kept, path printed), 2 setup
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GT_BUILD_DIR:-build}
case "$BUILD" in /*) G=$BUILD/gauntlet ;; *) G=$PWD/$BUILD/gauntlet ;; esac
MODELS=$(cd "${GT_MODELS:-../shared/models}" 2>/dev/null && pwd) ||
  { echo "ci/valgrind.sh: no models folder (../shared/models)" >&2; exit 2; }
M=$MODELS/stories260K.gguf
command -v valgrind >/dev/null || { echo "ci/valgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ -x "$G" ] || GT_BUILD_DIR=$BUILD bash ci/setup.sh >/dev/null || exit 2
[ -f "$M" ] || { echo "ci/valgrind.sh: no $M" >&2; exit 2; }
T=$(mktemp -d /tmp/gt-valgrind.XXXXXX)
trap '[ "${GT_VALGRIND_KEEP:-0}" = 1 ] && echo "ci/valgrind.sh: kept $T" || rm -rf "$T"' EXIT
trap 'exit 143' TERM INT
VG=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=yes
    --num-callers=30)

status=0
run() { # name command...
  local name=$1; shift
  local start=$(date +%s)
  "${VG[@]}" --log-file="$T/$name.vg" "$@" >"$T/$name.out" 2>&1
  local rc=$?
  local errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$T/$name.vg" | tail -1)
  local lost=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$T/$name.vg" | tail -1)
  if [ $rc -ne 0 ]; then
    status=1
    echo "ci/valgrind.sh: $name FAILED (exit $rc: ${errs:-?} errors, ${lost:-0} bytes definitely lost)"
    grep -m20 -E '^==[0-9]+== (Invalid|Conditional|Use of|Mismatched|Syscall|Source|  (at|by) |[0-9,]+ bytes in)' \
      "$T/$name.vg" | sed 's/^/  /'
    tail -5 "$T/$name.out" | sed 's/^/  out: /'
  else
    echo "ci/valgrind.sh: $name clean (${errs:-0} errors, ${lost:-0} bytes definitely lost, $(( $(date +%s) - start )) s)"
  fi
}

spec() { # backend suites-json
  cat <<JSON
{"cell": "stories260k/f32/$1/default", "tier": "valgrind", "model": "stories260k",
 "quant": "f32", "backend": "$1", "driver_id": "default", "device": 0, "threads": 2,
 "seed": 1, "artifact": "$M", "artifact_sha256": "$(sha256sum "$M" | cut -d' ' -f1)",
 "source_sha256": "$(sha256sum "$M" | cut -d' ' -f1)", "suites": $2,
 "settings": {"smoke": {"n_tokens": 8, "reference": $3},
              "functional": {"n_tokens": 8, "prefill_tokens": 16}},
 "tolerances": {}, "db": "$T/cell.sqlite", "scratch": "$T",
 "data_dir": "$PWD/suites/data"}
JSON
}

for b in reference cpu; do
  run "generate-$b" "$G" generate -m "$M" -b "$b" -p "Once upon a time" -n 24 --temp 0.8 --seed 7
done
# The worker reads and writes reference outputs in the run's database: make
# one with the schema (a one-cell qualify, not under valgrind).
"$G" qualify tests/fuzz/corpus/matrix/minimal.json --db "$T/cell.sqlite" --cache-dir "$T/cache" \
  -q >"$T/setup.out" 2>&1 || { echo "ci/valgrind.sh: could not create the cell database:"; cat "$T/setup.out"; exit 2; }
spec reference '["smoke", "functional"]' false >"$T/reference.json"
spec cpu '["smoke", "functional"]' true >"$T/cpu.json"
for b in reference cpu; do
  run "worker-$b" "$G" worker --spec "$T/$b.json"
  # The cell must have passed, not merely run clean.
  if ! grep -q '"t":"done"' "$T/worker-$b.out" || grep -q '"status":"\(fail\|error\)"' "$T/worker-$b.out"; then
    echo "ci/valgrind.sh: worker-$b did not pass its checks:"; grep -E '"(fail|error)"' "$T/worker-$b.out" | head -5
    status=1
  fi
done
run tokenize-llama "$G" tokenize -m "$M" $'Hello world, caf\xc3\xa9 \xe2\x96\x81 \xff'
[ -f "$MODELS/vocab/ggml-vocab-gpt-2.gguf" ] &&
  run tokenize-gpt2 "$G" tokenize -m "$MODELS/vocab/ggml-vocab-gpt-2.gguf" "Hello world, it's 2024"

[ $status -eq 0 ] || echo "ci/valgrind.sh: the findings are above (GT_VALGRIND_KEEP=1 keeps the logs)"
exit $status
