"""dequant_compare.py SRC.gguf F32.gguf: every tensor of F32.gguf (written by
`gauntlet quantize SRC F32 f32`) must hold, bit for bit, what gguf-py's own
dequantization of the same tensor in SRC gives. gguf-py is the test oracle:
an implementation this project did not write. Prints one line per mismatch
and a summary; exit 0 when all match, 1 otherwise."""
import sys

import numpy as np
from gguf import GGUFReader, quants

src, out = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])
by_name = {t.name: t for t in out.tensors}
bad = 0
types = {}
for t in src.tensors:
    types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    want = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
    o = by_name.get(t.name)
    got = None if o is None else np.asarray(o.data, dtype=np.float32).reshape(-1)
    if got is None or want.shape != got.shape or not np.array_equal(
            want.view(np.uint32), got.view(np.uint32)):
        bad += 1
        first = "missing" if got is None or want.shape != got.shape else int(
            np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))[0])
        print(f"MISMATCH {t.name} ({t.tensor_type.name}): first differing element {first}")
print(f"{len(src.tensors)} tensors compared ({', '.join(f'{k} x{v}' for k, v in sorted(types.items()))}),"
      f" {bad} differ")
sys.exit(1 if bad else 0)
