# ci/peer-sdist.sh: the pinned llama-cpp-python sdist (its vendor/llama.cpp
# is the peer), sourced by the scripts that need it: peer-llamacpp.sh
# builds from it, fetch-vocabs.sh and tokenizer-vectors.sh take
# llama.cpp's vocabularies out of it. One pin, one download-and-verify.
PEER_VERSION=0.3.36
PEER_SDIST=llama_cpp_python-$PEER_VERSION.tar.gz
PEER_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# The sdist carries no .git; its CHANGELOG names the llama.cpp commit of the release.
PEER_COMMIT=0c1e57098
# The vendored tree inside the unpacked sdist.
PEER_TREE=llama_cpp_python-$PEER_VERSION/vendor/llama.cpp

# peer_sdist_download DIR: the sdist into DIR from PyPI, its sha256 checked;
# returns 1 (saying why) when it cannot be had or does not match.
peer_sdist_download() {
  python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$PEER_VERSION" \
    -d "$1" >&2 || { echo "peer-sdist: cannot download $PEER_SDIST from PyPI" >&2; return 1; }
  local got
  got=$(sha256sum "$1/$PEER_SDIST" | cut -d' ' -f1)
  [ "$got" = "$PEER_SDIST_SHA256" ] ||
    { echo "peer-sdist: $PEER_SDIST has sha256 $got, expected $PEER_SDIST_SHA256" >&2; return 1; }
}
