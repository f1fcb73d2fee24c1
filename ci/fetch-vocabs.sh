#!/usr/bin/env bash
# ci/fetch-vocabs.sh: llama.cpp's tokenizer-only GGUFs of the Day-0
# architectures (Llama 3's llama-bpe, Qwen 2, Phi-3) with their .inp/.out
# vectors, from the pinned llama-cpp-python sdist on PyPI (its
# vendor/llama.cpp/models/), into the fetch cache's models/vocab/ where the
# tests look after ../shared/models/vocab. Each .gguf is checked against its
# sha256 in tests/models.json. A second run finds them and downloads nothing.
#   usage: ci/fetch-vocabs.sh        exit 0 when all are there, 1 otherwise
#   env:   XDG_CACHE_HOME
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/ci/peer-sdist.sh"
VOCABS=(ggml-vocab-llama-bpe ggml-vocab-qwen2 ggml-vocab-phi-3)
dest=${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/models/vocab

want_sha() { # FILE -> its sha256 in tests/models.json
  python3 -c 'import json,sys
for m in json.load(open(sys.argv[1]))["models"]:
    if m["file"] == sys.argv[2]: print(m["sha256"])' "$ROOT/tests/models.json" "$1"
}
complete() {
  for v in "${VOCABS[@]}"; do
    for f in "$v.gguf" "$v.gguf.inp" "$v.gguf.out"; do [ -f "$dest/$f" ] || return 1; done
    [ "$(sha256sum "$dest/$v.gguf" | cut -d' ' -f1)" = "$(want_sha "$v.gguf")" ] || return 1
  done
}
if complete; then echo "ci/fetch-vocabs.sh: ${VOCABS[*]} in $dest"; exit 0; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gt-vocabs.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "ci/fetch-vocabs.sh: downloading $PEER_SDIST (76 MB) from PyPI for llama.cpp's vocabularies" >&2
peer_sdist_download "$work" || exit 1
members=()
for v in "${VOCABS[@]}"; do
  for f in "$v.gguf" "$v.gguf.inp" "$v.gguf.out"; do
    members+=("$PEER_TREE/models/$f")
  done
done
tar -xzf "$work/$PEER_SDIST" -C "$work" "${members[@]}" ||
  { echo "ci/fetch-vocabs.sh: $PEER_SDIST lacks the vocabularies" >&2; exit 1; }
mkdir -p "$dest"
for m in "${members[@]}"; do install -m 0644 "$work/$m" "$dest/$(basename "$m")"; done
complete || { echo "ci/fetch-vocabs.sh: a vocabulary does not match its sha256 in tests/models.json" >&2; exit 1; }
echo "ci/fetch-vocabs.sh: ${VOCABS[*]} in $dest"
