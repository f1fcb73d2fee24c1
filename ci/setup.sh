#!/usr/bin/env bash
# ci/setup.sh: make a fresh Debian machine ready and build gauntlet.
# Installs the Debian packages the project needs (only those missing), then
# configures and builds into build/ (or $GT_BUILD_DIR). Extra CMake options
# can be passed as arguments, e.g. ci/setup.sh -DGT_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config git python3 python3-pip
          libsqlite3-dev libcurl4-openssl-dev libcjson-dev
          ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
          libopenblas-dev libblas3 check libxml2-utils libmicrohttpd-dev
          sqlite3 valgrind)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ci/setup.sh: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

BUILD=${GT_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${GT_BUILD_TYPE:-Release} "$@"
cmake --build "$BUILD" -j"$(nproc)"
echo "ci/setup.sh: built $BUILD/gauntlet"
