#!/usr/bin/env bash
# ci/fuzz.sh: build the libFuzzer targets (tests/fuzz/) with clang, ASan and
# UBSan into build-fuzz/, and run each for SECONDS (default 60).
#
# Targets: gguf (the GGUF reader, tokenizer-from-metadata and model load on
# a memfd), matrix (matrix parser + expansion), tokenizer (stories260K and
# GPT-2 vocabularies: never crash, decode(encode(s)) == s where documented),
# protocol (the worker's JSON lines as the qualify parent judges and records
# them). Seeds are assembled at run time in build-fuzz/corpus/<target>: the
# committed small seeds (tests/fuzz/corpus/), kept crash inputs
# (tests/fuzz/regressions/), matrices/*.json, the tokenizer test vectors and
# GGUF files made by `gauntlet synth` or cut from ../shared/models (model
# files are never committed). The corpus grows between runs on one machine.
#
# A crash stops that target, is copied to build-fuzz/crashes/<target>/, and
# makes the script exit 1 after the other targets ran; to keep one as a
# regression test, move it to tests/fuzz/regressions/<target>/ (CTest's
# fuzz_replay_<target> replays it in every build).
#
# usage: ci/fuzz.sh [SECONDS] [TARGET...]
#   env: GT_FUZZ_BUILD (build-fuzz), GT_FUZZ_JOBS (build jobs, nproc),
#        GT_FUZZ_MODELS (../shared/models), CC (clang)
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(gguf matrix tokenizer protocol)
BUILD=${GT_FUZZ_BUILD:-build-fuzz}
MODELS=${GT_FUZZ_MODELS:-$(cd .. && pwd)/shared/models}
export GT_FUZZ_MODELS=$MODELS
CC=${CC:-clang}
case "$CC" in *clang*) ;; *) CC=clang ;; esac

# libFuzzer ships with clang; Debian splits the runtime into its own package.
probe=$(mktemp -d /tmp/gt-fuzzprobe.XXXXXX)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' >"$probe/p.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  ver=$("$CC" -dumpversion | cut -d. -f1)
  echo "ci/fuzz.sh: $CC cannot link -fsanitize=fuzzer; installing libclang-rt-$ver-dev"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "libclang-rt-$ver-dev" ||
    { echo "ci/fuzz.sh: no libFuzzer runtime for $CC" >&2; rm -rf "$probe"; exit 2; }
fi
rm -rf "$probe"

# Everything is instrumented for coverage (fuzzer-no-link) and sanitized;
# only the four targets and what they link are built.
CC=$CC cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGT_FUZZ=ON \
  -DGT_OPENCL=OFF -DGT_CUDA=OFF -DGT_SANITIZE=address,undefined \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -Wno-unknown-warning-option" >/dev/null || exit 2
cmake --build "$BUILD" -j"${GT_FUZZ_JOBS:-$(nproc)}" $(printf -- '--target fuzz_%s ' "${TARGETS[@]}") \
  >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log" >&2; exit 2; }
G=build/gauntlet
[ -x "$G" ] || G=""

# ---- seeds -------------------------------------------------------------------
seed() { # target file...
  local t=$1; shift
  mkdir -p "$BUILD/corpus/$t"
  for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$BUILD/corpus/$t/" 2>/dev/null; done
  return 0
}
for t in "${TARGETS[@]}"; do
  seed "$t" tests/fuzz/corpus/"$t"/* tests/fuzz/regressions/"$t"/*
done
seed matrix matrices/*.json
if [ -d "$MODELS" ]; then
  gdir="$BUILD/corpus/gguf"
  mkdir -p "$gdir"
  # The metadata half of real files (tokenizer arrays, hparams): a cut file
  # fails at its tensors, which is the reader's bounds checking at work.
  head -c 24576 "$MODELS/stories260K.gguf" >"$gdir/stories260K.head" 2>/dev/null
  head -c 65536 "$MODELS/vocab/ggml-vocab-llama-spm.gguf" >"$gdir/llama-spm.head" 2>/dev/null
  head -c 65536 "$MODELS/vocab/ggml-vocab-gpt-2.gguf" >"$gdir/gpt-2.head" 2>/dev/null
  # Whole tokenizer test strings, one per file.
  tdir="$BUILD/corpus/tokenizer"
  mkdir -p "$tdir"
  for inp in "$MODELS"/vocab/*.inp; do
    [ -f "$inp" ] || continue
    python3 - "$inp" "$tdir/$(basename "$inp" .gguf.inp)" <<'PY' 2>/dev/null || true
import sys
data = open(sys.argv[1], "rb").read().split(b"\n__ggml_vocab_test__\n")
for i, s in enumerate(data):
    open("%s-%02d" % (sys.argv[2], i), "wb").write(s)
PY
  done
fi
if [ -n "$G" ]; then
  # Whole, valid models (every tensor type the synthesiser makes) so the
  # fuzzer starts past the reader's checks, into tokenizer and model load.
  for ty in q4_0 q4_1 q8_0; do
    [ -f "$BUILD/corpus/gguf/synth-tiny-$ty.gguf" ] ||
      "$G" synth "$BUILD/corpus/gguf/synth-tiny-$ty.gguf" --preset tiny --type "$ty" >/dev/null 2>&1
  done
fi

# ---- run ---------------------------------------------------------------------
declare -A MAXLEN=([gguf]=131072 [matrix]=65536 [tokenizer]=4096 [protocol]=65536)
status=0
for t in "${TARGETS[@]}"; do
  if [ "$t" = tokenizer ] && ! [ -f "$MODELS/stories260K.gguf" -a -f "$MODELS/vocab/ggml-vocab-gpt-2.gguf" ]; then
    echo "ci/fuzz.sh: tokenizer SKIPPED: no stories260K / GPT-2 vocabulary in $MODELS"
    continue
  fi
  crashes="$BUILD/crashes/$t"
  mkdir -p "$crashes"
  start=$(date +%s)
  # -rss_limit_mb: the runtime may legitimately allocate what a header asks
  # for within its limits; an input that makes it take more is a finding.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$BUILD/fuzz_$t" "$BUILD/corpus/$t" -max_total_time="$SECS" -max_len="${MAXLEN[$t]}" \
      -timeout=25 -rss_limit_mb=2560 -artifact_prefix="$crashes/" -print_final_stats=1 \
      >"$BUILD/fuzz_$t.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/fuzz_$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$BUILD/fuzz_$t.log" | tail -1)
  if [ $rc -ne 0 ]; then
    status=1
    echo "ci/fuzz.sh: $t FAILED after ${took}s (exit $rc); input kept in $crashes/:"
    ls -1 "$crashes" | sed 's/^/  /'
    grep -m1 -E 'ERROR: |runtime error|SUMMARY' "$BUILD/fuzz_$t.log" | sed 's/^/  /'
    echo "  log: $BUILD/fuzz_$t.log"
  else
    echo "ci/fuzz.sh: $t ok, ${took}s, ${execs:-?} inputs, $cov, corpus $(ls "$BUILD/corpus/$t" | wc -l) files"
  fi
done
exit $status
