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
path_of() { echo "$models" | awk -v id="$1" '$1 == id {print $2}'; }
smol=$(path_of smollm2-135m) && [ -n "$smol" ] && export GT_SMOLLM2="$smol"
gemma=$(path_of gemma3-270m-q4_k_m) && [ -n "$gemma" ] && export GT_GEMMA3="$gemma"
# llama.cpp's Llama 3 / Qwen 2 / Phi-3 vocabularies (from its pinned sdist).
bash ci/fetch-vocabs.sh ||
  echo "ci/test.sh: llama.cpp's vocabularies could not be had; the tokenizer cases pinned to them will SKIP"
qwen25=$(path_of qwen2.5-coder-0.5b-q4_k_m) && [ -n "$qwen25" ] && export GT_QWEN25="$qwen25"

# The test oracle we did not write: gguf-py (dequantizes every GGUF type in
# numpy), installed with pip --target into the cache, never system-wide.
export GT_PYORACLE=${GT_PYORACLE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/pyoracle}
if ! PYTHONPATH=$GT_PYORACLE python3 -c 'import gguf, numpy' 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --target "$GT_PYORACLE" \
      gguf==0.19.0 numpy==2.4.6 ||
    echo "ci/test.sh: gguf-py unavailable; the cross-checks against it will report SKIP"
fi
# The chat API's client oracle: the openai SDK, and jinja2 to render a GGUF's
# chat template the way Hugging Face does (tests/py/chat_openai.py).
if ! PYTHONPATH=$GT_PYORACLE python3 -c 'import openai, jinja2' 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --target "$GT_PYORACLE" \
      openai==3.60.0 jinja2==3.1.6 ||
    echo "ci/test.sh: openai/jinja2 unavailable; chat_openai will report SKIP"
fi
# Structured output's validator oracle: the jsonschema package
# (suites/data/jsonschema_validate.py).
if ! PYTHONPATH=$GT_PYORACLE python3 -c 'import jsonschema' 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --target "$GT_PYORACLE" \
      jsonschema==4.26.0 ||
    echo "ci/test.sh: jsonschema unavailable; the constraint's oracle case will report SKIP"
fi
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
