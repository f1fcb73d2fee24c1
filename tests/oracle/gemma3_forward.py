"""gemma3_forward.py MODEL.gguf IDS OUT.f32: an independent F32 forward pass
of a Gemma 3 GGUF, written from the published architecture description, as
a test oracle for the runtime's gemma3 graph. gguf-py (not ours) reads the
file and dequantizes every weight exactly; activations stay in float32.

IDS is a comma-separated token list (the caller tokenizes); OUT gets the
logits of every position, row-major float32 [n_tokens, n_vocab].

The architecture, as published (Gemma 3 technical report, the reference
implementation) and as GGUF stores it:
  - x = embedding[ids] * sqrt(n_embd); the output projection is the same
    embedding matrix (tied).
  - per layer: h = rmsnorm(x) * attn_norm; q, k, v = h Wq, h Wk, h Wv;
    per-head rmsnorm of q and k (attn_q_norm, attn_k_norm); NeoX rotary
    (pairs j, j + d/2) with base 1e4 on local layers and rope.freq_base on
    global ones; softmax(q k^T / sqrt(head_dim)) v, causal, and on local
    layers only the last `sliding_window` positions; o = attn Wo;
    x += rmsnorm(o) * post_attention_norm.
    h = rmsnorm(x) * ffn_norm; f = (gelu_tanh(h Wgate) * (h Wup)) Wdown;
    x += rmsnorm(f) * post_ffw_norm.
  - layer l is global when (l + 1) % 6 == 0, local otherwise.
  - logits = (rmsnorm(x) * output_norm) E^T.
GGUF norm weights already hold Gemma's (1 + w), so every norm is a plain
multiply."""
import sys

import numpy as np
from gguf import GGUFReader, quants


def main():
    path, ids, out = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3]
    r = GGUFReader(path)
    kv = {f.name: f for f in r.fields.values()}

    def scalar(key, default=None):
        f = kv.get(key)
        if f is None:
            if default is None:
                sys.exit(f"missing metadata {key}")
            return default
        return f.parts[f.data[0]][0].item()

    n_layer = int(scalar("gemma3.block_count"))
    n_embd = int(scalar("gemma3.embedding_length"))
    n_head = int(scalar("gemma3.attention.head_count"))
    n_kv = int(scalar("gemma3.attention.head_count_kv"))
    hd = int(scalar("gemma3.attention.key_length"))
    eps = float(scalar("gemma3.attention.layer_norm_rms_epsilon"))
    base_global = float(scalar("gemma3.rope.freq_base"))
    window = int(scalar("gemma3.attention.sliding_window"))
    base_local = 10000.0

    W = {}
    for t in r.tensors:
        d = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        W[t.name] = d

    def mat(name):  # [rows, cols] with rows = outputs
        a = W[name]
        return a.reshape(-1, a.shape[-1])

    def rms(x, w):
        ms = np.mean(x.astype(np.float32) ** 2, axis=-1, keepdims=True)
        return (x / np.sqrt(ms + np.float32(eps))) * w

    def rope(x, base):  # x: [n, heads, hd], NeoX halves
        n = x.shape[0]
        half = hd // 2
        inv = base ** (-np.arange(0, half, dtype=np.float64) * 2.0 / hd)
        ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
        c = np.cos(ang).astype(np.float32)[:, None, :]
        s = np.sin(ang).astype(np.float32)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)

    def gelu_tanh(x):
        return 0.5 * x * (1.0 + np.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (x + 0.044715 * x ** 3)))

    n = len(ids)
    E = mat("token_embd.weight")
    x = E[ids] * np.float32(np.sqrt(n_embd))
    pos = np.arange(n)
    for l in range(n_layer):
        p = f"blk.{l}."
        is_global = (l + 1) % 6 == 0
        h = rms(x, W[p + "attn_norm.weight"])
        q = (h @ mat(p + "attn_q.weight").T).reshape(n, n_head, hd)
        k = (h @ mat(p + "attn_k.weight").T).reshape(n, n_kv, hd)
        v = (h @ mat(p + "attn_v.weight").T).reshape(n, n_kv, hd)
        q = rms(q, W[p + "attn_q_norm.weight"])
        k = rms(k, W[p + "attn_k_norm.weight"])
        base = base_global if is_global else base_local
        q, k = rope(q, base), rope(k, base)
        mask = pos[None, :] <= pos[:, None]
        if not is_global:
            mask &= pos[None, :] > pos[:, None] - window
        att = np.zeros((n, n_head, hd), dtype=np.float32)
        g = n_head // n_kv
        for hh in range(n_head):
            kh, vh = k[:, hh // g, :], v[:, hh // g, :]
            sc = (q[:, hh, :] @ kh.T) / np.float32(np.sqrt(hd))
            sc = np.where(mask, sc, -np.inf)
            sc = sc - sc.max(axis=1, keepdims=True)
            pr = np.exp(sc)
            pr /= pr.sum(axis=1, keepdims=True)
            att[:, hh, :] = pr @ vh
        o = att.reshape(n, n_head * hd) @ mat(p + "attn_output.weight").T
        x = x + rms(o, W[p + "post_attention_norm.weight"])
        h = rms(x, W[p + "ffn_norm.weight"])
        f = gelu_tanh(h @ mat(p + "ffn_gate.weight").T) * (h @ mat(p + "ffn_up.weight").T)
        f = f @ mat(p + "ffn_down.weight").T
        x = x + rms(f, W[p + "post_ffw_norm.weight"])
    x = rms(x, W["output_norm.weight"])
    logits = (x @ E.T).astype(np.float32)
    logits.tofile(out)


if __name__ == "__main__":
    main()
