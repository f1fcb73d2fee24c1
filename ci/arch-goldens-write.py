"""ci/arch-goldens-write.py: wrap gt-peer-oracle's logits output into a
golden (tests/vectors/arch/*.json) with its provenance; one line per
position so that a regeneration diffs small.

usage: arch-goldens-write.py ORACLE_OUT GOLDEN KEY BLOCK_JSON COMMAND COMMIT SOURCE [PROMPT]
  KEY is "synth" (BLOCK: preset, seed, type) or "model" (BLOCK: id, env,
  file, sha256)."""
import json
import sys

src, out, key, block, command, commit, source = sys.argv[1:8]
prompt = sys.argv[8] if len(sys.argv) > 8 else None
d = json.load(open(src))
golden = {
    "source": f"llama.cpp {commit} ({source}), tests/peer/gt_peer_oracle.c logits: "
              "one batch, K/V f32, flash attention off, 2 threads",
    "command": command,
    key: json.loads(block),
}
if prompt is not None:
    golden["prompt"] = prompt
golden.update(d)
lines = ["{"]
for k in ("source", "command", key, "prompt", "n_vocab", "tokens"):
    if k in golden:
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
