#!/usr/bin/env bash
# ci/bench.sh: the CPU backend's performance run. Benches SmolLM2-135M as
# Q8_0 and Q4_0 (made with `gauntlet quantize` from the shipped file), Q4_1
# as shipped, and a synthetic SmolLM2-shaped model (`gauntlet synth --preset
# smollm2-135m`, Q8_0), each on 2 threads against the reference backend in
# the same run, and prints every figure: prefill/decode tokens/s, decode
# effective bandwidth in % of the measured read bandwidth, prefill GFLOP/s
# in % of the measured sgemm rate, cpu/reference ratios, and 1 vs 2 threads.
# When the peer is built (bash ci/peer-llamacpp.sh), it also benches Q8_0,
# Q4_0, Q4_K_M and Gemma 3 270M Q4_K_M (when fetched) against llama.cpp's
# llama-bench, interleaved in the same run
# (`gauntlet bench --peer`), at 1 and 2 threads with both activation paths
# (GT_CPU_ACT=f32, q8), and prints the ratios gauntlet/llama.cpp.
#
# Environment: GT_BUILD_DIR (default build), GT_BENCH_DIR for the derived
# models (default $XDG_CACHE_HOME/gauntlet/bench), GT_BENCH_REPS (default 5),
# GT_BENCH_THREADS (default 2), GT_SMOLLM2 (skip the fetch).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GT_BUILD_DIR:-build}
G="$BUILD/gauntlet"
T=${GT_BENCH_THREADS:-2}
R=${GT_BENCH_REPS:-5}
DIR=${GT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/bench}
[ -x "$G" ] || { echo "ci/bench.sh: $G not built (run ci/setup.sh first)" >&2; exit 2; }
mkdir -p "$DIR"

smol=${GT_SMOLLM2:-}
if [ -z "$smol" ]; then
  smol=$(bash ci/fetch-smollm2.sh) || { echo "ci/bench.sh: SmolLM2 unavailable" >&2; exit 1; }
fi
for q in q8_0 q4_0; do
  out="$DIR/SmolLM2-135M-Instruct.$q.gguf"
  [ -s "$out" ] || "$G" quantize --quiet "$smol" "$out" "$q" >&2
done
synth="$DIR/synth-smollm2-135m.q8_0.gguf"
[ -s "$synth" ] || "$G" synth "$synth" --preset smollm2-135m --type q8_0 >&2

# The reference is ~100x slower: a short decode and prefill are enough for
# the ratio, and the cpu side keeps the full pp512/tg128.
cmp=(--compare reference --compare-p 32 --compare-n 8 --compare-r 1)
status=0
run() { # name model extra-args...
  local name=$1 model=$2; shift 2
  echo "## $name"
  "$G" bench -m "$model" -b cpu -t "$T" -r "$R" "$@" || status=1
  echo
}
run "SmolLM2-135M Q8_0" "$DIR/SmolLM2-135M-Instruct.q8_0.gguf" "${cmp[@]}"
run "SmolLM2-135M Q4_0" "$DIR/SmolLM2-135M-Instruct.q4_0.gguf" "${cmp[@]}"
run "SmolLM2-135M Q4_1 (as shipped)" "$smol" "${cmp[@]}"
run "synthetic smollm2-135m Q8_0" "$synth" "${cmp[@]}"

echo "## 1 vs $T threads (decode, Q8_0 and Q4_0; prefill Q8_0)"
for q in q8_0 q4_0; do
  m="$DIR/SmolLM2-135M-Instruct.$q.gguf"
  one=$("$G" bench -m "$m" -b cpu -t 1 -p 0 -n 128 -r "$R" --no-machine -o csv | awk -F, 'NR==2{print $8}')
  two=$("$G" bench -m "$m" -b cpu -t "$T" -p 0 -n 128 -r "$R" --no-machine -o csv | awk -F, 'NR==2{print $8}')
  awk -v q="$q" -v a="$one" -v b="$two" -v t="$T" \
    'BEGIN{printf "%s tg128: 1 thread %.1f t/s, %d threads %.1f t/s, speed-up %.2fx\n", q, a, t, b, b/a}'
done
m="$DIR/SmolLM2-135M-Instruct.q8_0.gguf"
one=$("$G" bench -m "$m" -b cpu -t 1 -p 512 -n 0 -r 3 --no-machine -o csv | awk -F, 'NR==2{print $8}')
two=$("$G" bench -m "$m" -b cpu -t "$T" -p 512 -n 0 -r 3 --no-machine -o csv | awk -F, 'NR==2{print $8}')
awk -v a="$one" -v b="$two" -v t="$T" \
  'BEGIN{printf "q8_0 pp512: 1 thread %.1f t/s, %d threads %.1f t/s, speed-up %.2fx\n", a, t, b, b/a}'

if peer=$(bash ci/peer-llamacpp.sh --where 2>/dev/null | awk '$1 == "llama-bench" {print $2}'); then
  echo
  echo "## vs llama.cpp (llama-bench $(bash ci/peer-llamacpp.sh --where | awk '$1 == "commit" {print $2}'), interleaved, ratio = gauntlet / llama.cpp)"
  echo "| file | act | threads | test | gauntlet t/s | llama.cpp t/s | ratio |"
  echo "|---|---|---:|---|---:|---:|---:|"
  # issue 38's files: SmolLM2 Q8_0, Q4_0 and Q4_K_M (made from the shipped
  # Q4_1), and Gemma 3 270M Q4_K_M as released when it can be fetched
  [ -s "$DIR/SmolLM2-135M-Instruct.q4_k_m.gguf" ] ||
    "$G" quantize --quiet "$smol" "$DIR/SmolLM2-135M-Instruct.q4_k_m.gguf" q4_k_m >&2
  files=("$DIR/SmolLM2-135M-Instruct.q8_0.gguf" "$DIR/SmolLM2-135M-Instruct.q4_0.gguf"
         "$DIR/SmolLM2-135M-Instruct.q4_k_m.gguf")
  gemma=${GT_GEMMA3:-$(GAUNTLET=$G bash ci/fetch-models.sh gemma3-270m-q4_k_m 2>/dev/null | awk '{print $2}')}
  if [ -s "$gemma" ]; then files+=("$gemma"); else echo "(Gemma 3 270M Q4_K_M not fetched: not benched)"; fi
  for f in "${files[@]}"; do for t in 1 "$T"; do for act in f32 q8; do
    GT_CPU_ACT=$act "$G" bench -m "$f" -b cpu -t "$t" -r 3 \
        --no-machine -o csv --peer "llama-bench=$peer" 2>/dev/null |
      awk -F, -v q="$(basename "$f" .gguf)" -v a="$act" -v t="$t" 'NR > 1 {printf "| %s | %s | %d | %s | %.1f | %.1f | %.2fx |\n", q, a, t, $7, $8, $20, $21}' ||
      status=1
  done; done; done
else
  echo
  echo "## vs llama.cpp: skipped: peer not built (run ci/peer-llamacpp.sh)"
fi
exit $status
