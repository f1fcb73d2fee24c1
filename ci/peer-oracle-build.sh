#!/usr/bin/env bash
# ci/peer-oracle-build.sh: link tests/peer/gt_peer_oracle.c against a built
# llama.cpp tree's static libllama and ggml (ci/peer-llamacpp.sh calls it
# after building the peer; the tool is test-only and never part of gauntlet).
#
#   usage: ci/peer-oracle-build.sh LLAMA_SRC LLAMA_BUILD OUT
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: ci/peer-oracle-build.sh LLAMA_SRC LLAMA_BUILD OUT" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
src=$1 build=$2 out=$3
cmake --build "$build" -j "${GT_PEER_JOBS:-$(nproc)}" --target llama >/dev/null
libs=("$build/src/libllama.a" "$build/ggml/src/libggml.a" "$build/ggml/src/libggml-cpu.a"
      "$build/ggml/src/libggml-base.a")
for l in "${libs[@]}"; do [ -f "$l" ] || { echo "ci/peer-oracle-build.sh: no $l" >&2; exit 1; }; done
tmp=$out.tmp.$$
cc -O2 -std=c11 -I"$src/include" -I"$src/ggml/include" -c "$here/tests/peer/gt_peer_oracle.c" -o "$tmp.o"
g++ -o "$tmp" "$tmp.o" "${libs[@]}" -lpthread -lm -ldl
rm -f "$tmp.o"
mv "$tmp" "$out"
echo "gt-peer-oracle: $out"
