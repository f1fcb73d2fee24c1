#!/usr/bin/env bash
# ci/test.sh: set up, build with -Werror, fetch the test models the project
# gets itself, and run every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
GT_BUILD_DIR=${GT_BUILD_DIR:-build} bash ci/setup.sh -DGT_WERROR=ON
BUILD=${GT_BUILD_DIR:-build}

if smol=$(bash ci/fetch-smollm2.sh); then
  export GT_SMOLLM2="$smol"
else
  echo "ci/test.sh: SmolLM2 unavailable; tests that need it will report SKIP with the reason"
fi
cd "$BUILD"
ctest --output-on-failure -j"${GT_TEST_JOBS:-2}" "$@"
