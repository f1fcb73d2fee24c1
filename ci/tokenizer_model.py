"""ci/tokenizer_model.py: a tokenizer-only GGUF (llama.cpp's models/
ggml-vocab-*.gguf) made loadable as a model, for the tokenizer oracle.

llama.cpp loads a vocabulary only with a model's tensors beside it, so this
copies every tokenizer.* key and general.name (llama.cpp keys Phi-3's strip
rule on the name) into a 1-layer llama with 16-wide random weights. The
tokenizer does not depend on the architecture, only on these keys.

    usage: python3 ci/tokenizer_model.py VOCAB.gguf OUT.gguf
    needs: numpy, and gguf-py from the peer's source on PYTHONPATH
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType

src, out = sys.argv[1], sys.argv[2]
r = GGUFReader(src)
w = GGUFWriter(out, "llama")
n_vocab = len(r.fields["tokenizer.ggml.tokens"].data)
n_embd, n_ff, n_head = 16, 32, 2
w.add_block_count(1)
w.add_context_length(256)
w.add_embedding_length(n_embd)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_layer_norm_rms_eps(1e-5)
for key, f in r.fields.items():
    if not (key.startswith("tokenizer.") or key == "general.name"):
        continue
    vtype = f.types[0]
    if vtype == GGUFValueType.ARRAY:
        w.add_key_value(key, f.contents(), vtype, f.types[-1])
    else:
        w.add_key_value(key, f.contents(), vtype)
rng = np.random.default_rng(1)


def t(name, *shape):
    w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))


t("token_embd.weight", n_vocab, n_embd)
w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
w.add_tensor("blk.0.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
w.add_tensor("blk.0.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
    t("blk.0.%s.weight" % name, n_embd, n_embd)
t("blk.0.ffn_gate.weight", n_ff, n_embd)
t("blk.0.ffn_up.weight", n_ff, n_embd)
t("blk.0.ffn_down.weight", n_embd, n_ff)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
