#!/usr/bin/env bash
# ci/arch-goldens.sh: llama.cpp's logits on gauntlet's synthetic models, one
# golden per architecture preset, written to tests/vectors/arch/PRESET.json.
# tests/test_arch_goldens.c holds gauntlet's reference backend to them
# without needing the peer.
#
# Each golden: `gauntlet synth` writes the preset (seed 7, f32 weights), the
# peer's gt-peer-oracle (tests/peer/gt_peer_oracle.c, built by
# ci/peer-llamacpp.sh) evaluates TOKENS in one batch with F32 K/V and flash
# attention off: the top 40 logits at every position, then 32 greedy steps.
#
# A real model (--model ID ENV FILE: a tests/models.json entry, found through
# $ENV or in the model cache) gets the same on a fixed prompt that llama.cpp
# tokenizes; its golden names the file and its sha256.
#
#   usage: ci/arch-goldens.sh BUILD_DIR PRESET...
#          ci/arch-goldens.sh BUILD_DIR --model ID ENV FILE
#   env:   GT_PEER_DIR (see ci/peer-llamacpp.sh), XDG_CACHE_HOME
# Needs the peer built (ci/peer-llamacpp.sh, ~10 min); never part of test.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: ci/arch-goldens.sh BUILD_DIR PRESET..." >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
gauntlet=$build/gauntlet
[ -x "$gauntlet" ] || { echo "ci/arch-goldens.sh: no $gauntlet (build first)" >&2; exit 2; }
paths=$(bash "$here/ci/peer-llamacpp.sh" --where)
oracle=$(awk '$1 == "gt-peer-oracle" {print $2}' <<<"$paths")
commit=$(awk '$1 == "commit" {print $2}' <<<"$paths")
source=$(awk '$1 == "source" {print $2}' <<<"$paths")

# 24 fixed ids below every tiny preset's vocabulary (>= 256 tokens), BOS
# (1) first as a prompt would start; the same for every architecture.
TOKENS=1,72,101,108,108,111,44,32,119,111,114,108,100,33,10,84,104,101,32,99,97,116,32,115
SEED=7
work=$(mktemp -d "${TMPDIR:-/tmp}/gt-arch-goldens.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ "$1" = --model ]; then
  [ $# -eq 4 ] || { echo "usage: ci/arch-goldens.sh BUILD_DIR --model ID ENV FILE" >&2; exit 2; }
  id=$2 env=$3 file=$4
  model=${!env:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/models/$file}
  [ -f "$model" ] || { echo "ci/arch-goldens.sh: no $model (ci/fetch-models.sh $id)" >&2; exit 1; }
  # A code prompt: the real model shipped on PyPI is a coder model.
  prompt=$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
  ids=$(printf '%s' "$prompt" | "$oracle" tokenize "$model" --add-special | tr -d '[] \n')
  "$oracle" logits "$model" --tokens "$ids" --top 40 --greedy 32 >"$work/out.json"
  sha=$(sha256sum "$model" | cut -d' ' -f1)
  out=$here/tests/vectors/arch/$id.json
  python3 "$here/ci/arch-goldens-write.py" "$work/out.json" "$out" model \
    "{\"id\": \"$id\", \"env\": \"$env\", \"file\": \"$file\", \"sha256\": \"$sha\"}" \
    "ci/arch-goldens.sh BUILD --model $id $env $file" "$commit" "$source" "$prompt"
  echo "arch-goldens: $id -> ${out#$here/}"
  exit 0
fi

for preset in "$@"; do
  model=$work/$preset.gguf
  "$gauntlet" synth "$model" --preset "$preset" --seed $SEED --type f32 >/dev/null
  "$oracle" logits "$model" --tokens $TOKENS --top 40 --greedy 32 >"$work/out.json"
  out=$here/tests/vectors/arch/$preset.json
  python3 "$here/ci/arch-goldens-write.py" "$work/out.json" "$out" synth \
    "{\"preset\": \"$preset\", \"seed\": $SEED, \"type\": \"f32\"}" \
    "ci/arch-goldens.sh BUILD $preset" "$commit" "$source"
  echo "arch-goldens: $preset -> ${out#$here/}"
done
