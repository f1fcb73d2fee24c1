#!/usr/bin/env bash
# ci/test.sh: set up, build with -Werror, fetch the test models the project
# gets itself (tests/models.json, through ci/fetch-models.sh), and run every
# test through CTest. A model that cannot be had is named here; only the
# tests pinned to it skip, each printing why.
set -euo pipefail
cd "$(dirname "$0")/.."
GT_BUILD_DIR=${GT_BUILD_DIR:-build} bash ci/setup.sh -DGT_WERROR=ON
BUILD=${GT_BUILD_DIR:-build}

models=$(GAUNTLET=$BUILD/gauntlet bash ci/fetch-models.sh) ||
  echo "ci/test.sh: some test models could not be had (above); the tests pinned to them will SKIP"
echo "$models" | sed "s|^|ci/test.sh: model |"
smol=$(echo "$models" | awk '$1 == "smollm2-135m" {print $2}')
[ -n "$smol" ] && export GT_SMOLLM2="$smol"
cd "$BUILD"
rc=0
ctest --output-on-failure -j"${GT_TEST_JOBS:-2}" "$@" || rc=$?
# What was skipped, and why: every SKIP line the tests printed, by test.
log=Testing/Temporary/LastTest.log
if [ -f "$log" ] && grep -q SKIP "$log"; then
  echo "ci/test.sh: skipped tests and cases, with their reasons:"
  awk '/^[0-9]+\/[0-9]+ Testing: / {t = $3} /SKIP/ {print "  " t ": " $0}' "$log"
fi
exit $rc
