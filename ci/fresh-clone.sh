#!/usr/bin/env bash
# ci/fresh-clone.sh: the README's two commands as a user who clones the
# project runs them: in a fresh clone of HEAD in a temporary folder with no
# ../shared beside it, `bash ci/test.sh` must give 0 failed, and the main
# job (the quickstart qualification) must PASS with no "artifact missing"
# cell. Prints the skip list with reasons.
#
# The clone's cache ($T/cache) is its own, except for what is pinned or
# derived from pinned inputs and so the same for every clone: the downloaded
# models, their quantizations, the python oracles and the compiled OpenCL
# kernels (ours, keyed by source hash, and PoCL's) are links to the user's
# cache ($XDG_CACHE_HOME/gauntlet/{models,quants,pyoracle,opencl},
# $XDG_CACHE_HOME/pocl), filled once per machine and reused, never
# downloaded or recomputed per run.
#
#   usage: ci/fresh-clone.sh
#   env: GT_FRESH_DIR  folder to clone into; the caller owns it (.ci/run
#                      runs the shared-label tests in that clone next, then
#                      removes it). Default: a /tmp/gt-fresh.* folder removed
#                      on exit, pass or fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${GT_FRESH_DIR:-}" ]; then
  T=$GT_FRESH_DIR
  mkdir -p "$T"
else
  T=$(mktemp -d /tmp/gt-fresh.XXXXXX)
  trap 'rm -rf "$T"' EXIT
  trap 'exit 143' TERM INT
fi
[ -e "$T/shared" ] && { echo "ci/fresh-clone.sh: $T/shared exists; this check needs no ../shared" >&2; exit 2; }
rm -rf "$T/main" "$T/cache"
git clone -q "$ROOT" "$T/main"
user_cache=${XDG_CACHE_HOME:-$HOME/.cache}
mkdir -p "$T/cache/gauntlet"
for d in gauntlet/models gauntlet/quants gauntlet/pyoracle gauntlet/opencl pocl; do
  mkdir -p "$user_cache/$d"
  ln -s "$user_cache/$d" "$T/cache/$d"
done
cd "$T/main"
export XDG_CACHE_HOME=$T/cache
unset GT_SMOLLM2 GT_GEMMA3 GT_QWEN25 GT_MODEL_DIR GT_MODEL_MIRROR GT_PYORACLE
echo "ci/fresh-clone.sh: $T/main (no ../shared), git $(git rev-parse --short HEAD)"
bash ci/test.sh
echo "ci/fresh-clone.sh: main job"
start=$(date +%s)
./build/gauntlet qualify matrices/quickstart.json --db results.sqlite --html report.html \
    --junit junit.xml --no-progress | tee qualify.log
echo "ci/fresh-clone.sh: main job took $(( $(date +%s) - start )) s"
xmllint --noout --schema reports/junit.xsd junit.xml
if grep -q "artifact missing" qualify.log; then
  echo "ci/fresh-clone.sh: FAIL: the main job has cells whose artifact is missing" >&2
  exit 1
fi
echo "ci/fresh-clone.sh: PASS (tests: 0 failed; main job: gate PASS, every artifact had)"
