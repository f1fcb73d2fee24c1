#!/usr/bin/env bash
# ci/tokenizer-vectors.sh: llama.cpp's token ids for ci/tokenizer_cases.py's
# strings, with parse_special false and true, one file per vocabulary under
# tests/vectors/tokenizer/. tests/test_tokenizer_vectors.c holds gauntlet's
# tokenizer to them without needing the peer.
#
# Vocabularies: llama.cpp's models/ggml-vocab-{llama-bpe,qwen2,phi-3}.gguf
# (Llama 3, Qwen 2, Phi-3 as released; they ship in the llama-cpp-python
# 0.3.36 sdist on PyPI, the peer's own source), Gemma 3 270M and
# Qwen2.5-Coder 0.5B (tests/models.json; $GT_GEMMA3, $GT_QWEN25 or the
# model cache). llama.cpp loads a vocabulary only with a model, so
# ci/tokenizer_model.py wraps each in a 1-layer model first.
#
#   usage: ci/tokenizer-vectors.sh [VENDOR_LLAMA_CPP_DIR]
#          (default: download and check the sdist, as ci/peer-llamacpp.sh)
#   needs: the peer built (ci/peer-llamacpp.sh, for gt-peer-oracle) and a
#          python3 with numpy and pyyaml (gguf-py comes from the sdist).
#   env:   GT_PY (python3), GT_GEMMA3, GT_QWEN25, GT_PEER_DIR,
#          GT_TOK_ONLY="qwen2 gemma3 ..." (regenerate only these files)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=${GT_PY:-python3}
paths=$(bash "$here/ci/peer-llamacpp.sh" --where)
oracle=$(awk '$1 == "gt-peer-oracle" {print $2}' <<<"$paths")
commit=$(awk '$1 == "commit" {print $2}' <<<"$paths")
source=$(awk '$1 == "source" {print $2}' <<<"$paths")
"$py" -c 'import numpy, yaml' 2>/dev/null ||
  { echo "ci/tokenizer-vectors.sh: $py needs numpy and pyyaml (pip install numpy pyyaml)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gt-tok-vectors.XXXXXX")
trap 'rm -rf "$work"' EXIT

only=${GT_TOK_ONLY:-}
src=${1:-}
if [ -z "$src" ]; then
  . "$here/ci/peer-sdist.sh"
  peer_sdist_download "$work" || exit 1
  tar -xzf "$work/$PEER_SDIST" -C "$work" --wildcards '*/vendor/llama.cpp/models/ggml-vocab-*' \
    '*/vendor/llama.cpp/gguf-py/*'
  src=$work/$PEER_TREE
fi

wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
# vector file name, model for the oracle, vocabulary file (for its sha256)
jobs=()
for v in llama-bpe qwen2 phi-3; do
  wanted "$v" || continue
  vocab=$src/models/ggml-vocab-$v.gguf
  PYTHONPATH=$src/gguf-py "$py" "$here/ci/tokenizer_model.py" "$vocab" "$work/$v.gguf"
  jobs+=("$v $work/$v.gguf $vocab ggml-vocab-$v.gguf")
done
# Real models from tests/models.json: vector name, env override, file.
models=${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/models
for r in "gemma3 GT_GEMMA3 gemma-3-270m-q4_k_m.gguf" \
         "qwen2.5-coder GT_QWEN25 qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"; do
  read -r name env file <<<"$r"
  wanted "$name" || continue
  model=${!env:-$models/$file}
  if [ -f "$model" ]; then
    jobs+=("$name $model $model $file")
  else
    echo "ci/tokenizer-vectors.sh: no $file ($env): $name.json left as it is" >&2
  fi
done

mapfile -t cases < <("$py" "$here/ci/tokenizer_cases.py" list)
for j in "${jobs[@]}"; do
  read -r name model vocab file <<<"$j"
  mkdir -p "$work/ids-$name"
  for i in "${!cases[@]}"; do
    "$py" -c 'import json,sys; sys.stdout.write(json.loads(sys.argv[1]))' "${cases[$i]}" >"$work/text"
    "$oracle" tokenize "$model" <"$work/text" >"$work/ids-$name/$i.F.json"
    "$oracle" tokenize "$model" --special <"$work/text" >"$work/ids-$name/$i.T.json"
  done
  sha=$(sha256sum "$vocab" | cut -d' ' -f1)
  "$py" "$here/ci/tokenizer_cases.py" write "$here/tests/vectors/tokenizer/$name.json" "$file" \
    "$sha" "$commit" "$source" "$work/ids-$name"
  echo "tests/vectors/tokenizer/$name.json: ${#cases[@]} strings x 2 modes" >&2
done
