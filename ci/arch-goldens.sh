#!/usr/bin/env bash
# ci/arch-goldens.sh: llama.cpp's logits on gauntlet's synthetic models, one
# golden per architecture preset, written to tests/vectors/arch/PRESET.json.
# tests/test_arch_goldens.c holds gauntlet's reference backend to them
# without needing the peer.
#
# Each golden: `gauntlet synth` writes the preset (seed 7, f32 weights), the
# peer's gt-peer-oracle (tests/peer/gt_peer_oracle.c, built by
# ci/peer-llamacpp.sh) evaluates TOKENS in one batch with F32 K/V and flash
# attention off: the top 40 logits at every position, then 32 greedy steps.
#
#   usage: ci/arch-goldens.sh BUILD_DIR PRESET...
#   env:   GT_PEER_DIR (see ci/peer-llamacpp.sh)
# Needs the peer built (ci/peer-llamacpp.sh, ~10 min); never part of test.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: ci/arch-goldens.sh BUILD_DIR PRESET..." >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
gauntlet=$build/gauntlet
[ -x "$gauntlet" ] || { echo "ci/arch-goldens.sh: no $gauntlet (build first)" >&2; exit 2; }
paths=$(bash "$here/ci/peer-llamacpp.sh" --where)
oracle=$(awk '$1 == "gt-peer-oracle" {print $2}' <<<"$paths")
commit=$(awk '$1 == "commit" {print $2}' <<<"$paths")
source=$(awk '$1 == "source" {print $2}' <<<"$paths")

# 24 fixed ids below every tiny preset's vocabulary (>= 256 tokens), BOS
# (1) first as a prompt would start; the same for every architecture.
TOKENS=1,72,101,108,108,111,44,32,119,111,114,108,100,33,10,84,104,101,32,99,97,116,32,115
SEED=7
work=$(mktemp -d "${TMPDIR:-/tmp}/gt-arch-goldens.XXXXXX")
trap 'rm -rf "$work"' EXIT

for preset in "$@"; do
  model=$work/$preset.gguf
  "$gauntlet" synth "$model" --preset "$preset" --seed $SEED --type f32 >/dev/null
  "$oracle" logits "$model" --tokens $TOKENS --top 40 --greedy 32 >"$work/out.json"
  out=$here/tests/vectors/arch/$preset.json
  python3 - "$work/out.json" "$out" "$preset" $SEED "$commit" "$source" <<'PY'
import json, sys
src, out, preset, seed, commit, source = sys.argv[1:]
d = json.load(open(src))
golden = {
    "source": f"llama.cpp {commit} ({source}), tests/peer/gt_peer_oracle.c logits: "
              "one batch, K/V f32, flash attention off, 2 threads",
    "command": f"ci/arch-goldens.sh BUILD {preset}",
    "synth": {"preset": preset, "seed": int(seed), "type": "f32"},
}
golden.update(d)
# One line per position and for the greedy steps: small diffs on regeneration.
lines = ["{"]
for k in ("source", "command", "synth", "n_vocab", "tokens"):
    lines.append(f" {json.dumps(k)}: {json.dumps(golden[k])},")
lines.append(' "positions": [')
pos = golden["positions"]
for i, p in enumerate(pos):
    lines.append("  " + json.dumps(p) + ("," if i + 1 < len(pos) else ""))
lines.append(" ],")
lines.append(f' "greedy": {json.dumps(golden["greedy"])}')
lines.append("}")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
PY
  echo "arch-goldens: $preset -> ${out#$here/}"
done
