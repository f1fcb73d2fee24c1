#!/usr/bin/env bash
# ci/anchors.sh: measure (again) the anchors of every model of every shipped
# matrix with llama.cpp, into matrices/anchors/ (gauntlet anchors --into).
# Needs the peer (ci/peer-llamacpp.sh, ~15 min to build once) and the
# models (ci/fetch-models.sh); takes a few minutes. Never part of ci/test.sh:
# its output is committed, with the llama.cpp build that made it in each
# file's "source".
#   usage: ci/anchors.sh [BUILD_DIR] [MODEL_ID...]   (default build, all models)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
peer=$(bash ci/peer-llamacpp.sh --where)
ppl=$(echo "$peer" | awk '$1 == "llama-perplexity" {print $2}')
srv=$(echo "$peer" | awk '$1 == "llama-server" {print $2}')
# matrix  model  anchors file (a model whose artifacts differ between
# matrices, e.g. a synthetic model's seed, gets one file per variant)
PAIRS=(
  "ci.json synth-tiny synth-tiny"
  "nightly.json synth-tiny synth-tiny"
  "ci.json stories260k stories260k"
  "nightly.json stories260k stories260k"
  "nightly.json stories260k-llamacpp-q8_0 stories260k-llamacpp-q8_0"
  "nightly.json stories260k-llamacpp-q4_0 stories260k-llamacpp-q4_0"
  "nightly.json stories260k-llamacpp-q4_1 stories260k-llamacpp-q4_1"
  "nightly.json synth-smollm2 synth-smollm2-s1"
  "release.json synth-smollm2 synth-smollm2-s7"
  "nightly.json smollm2-135m smollm2-135m"
  "kquants.json smollm2-135m smollm2-135m"
  "ci.json gemma3-270m gemma3-270m"
  "ci.json synth-llama3-tiny synth-llama3-tiny"
  "ci.json synth-phi3-tiny synth-phi3-tiny"
  "ci.json synth-qwen2-tiny synth-qwen2-tiny"
  "ci.json synth-qwen3-tiny synth-qwen3-tiny"
  "ci.json synth-qwen3moe-tiny synth-qwen3moe-tiny"
  "nightly.json synth-llama3.2-1b synth-llama3.2-1b"
  "nightly.json synth-phi3-mini synth-phi3-mini"
  "nightly.json synth-qwen2.5-0.5b synth-qwen2.5-0.5b"
  "nightly.json synth-qwen3-0.6b synth-qwen3-0.6b"
)
for p in "${PAIRS[@]}"; do
  read -r matrix model file <<<"$p"
  if [ $# -gt 0 ] && [[ " $* " != *" $model "* ]]; then continue; fi
  "$BUILD/gauntlet" anchors "matrices/$matrix" "$model" \
    --peer "llama-perplexity=$ppl" --peer "llama-server=$srv" \
    --into "matrices/anchors/$file.json"
done
