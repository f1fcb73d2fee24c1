#!/usr/bin/env bash
# layering-probe.sh BUILD_DIR: shows that the build enforces the folder map.
# A file compiled as part of harness/store that includes the CLI's face
# (tests/layering/store_includes_cli.c) must fail to build for that include;
# its control (store_includes_allowed.c: base, matrix, store) must build.
set -u
b=${1:?usage: layering-probe.sh BUILD_DIR}
if ! out=$(cmake --build "$b" --target gt_layering_probe_allowed 2>&1); then
  echo "layering-probe: the control (store including base.h, matrix.h, store.h) does not build:"
  echo "$out"
  exit 1
fi
if out=$(cmake --build "$b" --target gt_layering_probe_wrong 2>&1); then
  echo "layering-probe: harness/store including commands.h BUILT: the layering is not enforced"
  exit 1
fi
if ! grep -Eq "commands\.h.*(No such file|not found)" <<<"$out"; then
  echo "layering-probe: the wrong-direction probe failed, but not for its include:"
  echo "$out"
  exit 1
fi
echo "layering-probe: store -> base, matrix, store builds; store -> cli fails:"
grep -E "commands\.h" <<<"$out" | head -2
