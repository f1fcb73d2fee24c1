#!/usr/bin/env bash
# ci/peer-llamacpp.sh: build llama.cpp's llama-server, llama-bench,
# llama-cli and llama-perplexity, the peer that matrices/peer.json, `gauntlet
# anchors` and `gauntlet bench --peer` compare gauntlet with, and
# gt-peer-oracle (tests/peer/gt_peer_oracle.c, linked against the same
# libllama: logits and tokenization for the committed goldens). The source is the llama-cpp-python 0.3.36 sdist
# from PyPI (its vendor/llama.cpp), pinned by sha256; the build is CPU only
# with a portable ISA (GGML_NATIVE=OFF: a native build crashed on the
# 2-core VM), AVX2/FMA/F16C and AVX-512 on where this CPU has them, AMX off.
# It is built once into the cache; a second run only checks and prints.
#
#   usage: ci/peer-llamacpp.sh            build (or find) and print the paths
#          ci/peer-llamacpp.sh --where    print the paths if built, exit 1 if not
#          ci/peer-llamacpp.sh --exec TOOL ARGS...
#                                         run the built TOOL (a matrix's "start"
#                                         command); without the build, say so and
#                                         exit 77, which makes the cell a skip
#   prints: "TOOL PATH" for each tool (llama-server llama-bench llama-cli
#           llama-perplexity gt-peer-oracle),
#           "commit HASH", "source llama-cpp-python==0.3.36"
#   env:   GT_PEER_DIR (default $XDG_CACHE_HOME/gauntlet/peer or
#          ~/.cache/gauntlet/peer), GT_PEER_JOBS (default: nproc)
# Never part of ci/test.sh: the build takes ~10 min on 2 cores.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/ci/peer-sdist.sh"
VERSION=$PEER_VERSION
SDIST=$PEER_SDIST
SDIST_SHA256=$PEER_SDIST_SHA256
COMMIT=$PEER_COMMIT
CMAKE_TOOLS=(llama-server llama-bench llama-cli llama-perplexity)
TOOLS=("${CMAKE_TOOLS[@]}" gt-peer-oracle)

cache=${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/peer
root=${GT_PEER_DIR:-$cache}
isa=avx2
grep -qw avx512f /proc/cpuinfo 2>/dev/null && isa=avx512
dir=$root/llama.cpp-$VERSION-$isa
stamp=$dir/BUILT

print_paths() {
  for t in "${TOOLS[@]}"; do echo "$t $dir/bin/$t"; done
  echo "commit $COMMIT"
  echo "source llama-cpp-python==$VERSION"
}

built() {
  [ -f "$stamp" ] || return 1
  for t in "${TOOLS[@]}"; do [ -x "$dir/bin/$t" ] || return 1; done
  # A binary built for an ISA this CPU lacks dies on SIGILL: prove it runs.
  "$dir/bin/llama-bench" --help >/dev/null 2>&1
}

if [ "${1:-}" = --exec ]; then
  tool=${2:-}
  case " ${TOOLS[*]} " in *" $tool "*) ;; *) echo "usage: ci/peer-llamacpp.sh --exec {${TOOLS[*]}} ARGS..." >&2; exit 2;; esac
  shift 2
  [ -f "$stamp" ] && [ -x "$dir/bin/$tool" ] && exec "$dir/bin/$tool" "$@"
  echo "peer not built: no $tool in $dir (run ci/peer-llamacpp.sh)" >&2
  exit 77
fi
if built; then print_paths; exit 0; fi
if [ "${1:-}" = --where ]; then
  echo "ci/peer-llamacpp.sh: the peer is not built in $dir (run ci/peer-llamacpp.sh)" >&2
  exit 1
fi
[ $# -eq 0 ] || { echo "usage: ci/peer-llamacpp.sh [--where]" >&2; exit 2; }

for tool in cmake g++ make python3; do
  command -v $tool >/dev/null || { echo "ci/peer-llamacpp.sh: needs $tool (apt-get install cmake g++ make python3-pip)" >&2; exit 2; }
done

work=$dir.work
rm -rf "$work"
mkdir -p "$work"
echo "peer: downloading $SDIST from PyPI" >&2
peer_sdist_download "$work" || exit 1
tar -xzf "$work/$SDIST" -C "$work"
src=$work/$PEER_TREE

avx512=OFF
[ $isa = avx512 ] && avx512=ON
echo "peer: configuring llama.cpp $COMMIT (GGML_NATIVE=OFF, AVX2 on, AVX-512 $avx512, AMX off)" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=$avx512 -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_OPENCL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_COMMIT=$COMMIT -DLLAMA_BUILD_NUMBER=0 >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log" >&2; echo "ci/peer-llamacpp.sh: configure failed ($work/configure.log)" >&2; exit 1; }
jobs=${GT_PEER_JOBS:-$(nproc)}
start=$(date +%s)
echo "peer: building ${TOOLS[*]} with $jobs jobs (about 10 min on 2 cores)" >&2
cmake --build "$work/build" -j "$jobs" --target "${CMAKE_TOOLS[@]}" >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; echo "ci/peer-llamacpp.sh: build failed ($work/build.log)" >&2; exit 1; }
mkdir -p "$dir/bin"
for t in "${CMAKE_TOOLS[@]}"; do install -m 0755 "$work/build/bin/$t" "$dir/bin/$t"; done
bash "$here/ci/peer-oracle-build.sh" "$src" "$work/build" "$dir/bin/gt-peer-oracle" >&2
printf 'llama-cpp-python==%s sha256=%s commit=%s isa=%s built=%s seconds=%s\n' \
  "$VERSION" "$SDIST_SHA256" "$COMMIT" "$isa" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" >"$stamp"
rm -rf "$work"
built || { echo "ci/peer-llamacpp.sh: the built llama-bench does not run on this CPU" >&2; exit 1; }
print_paths
