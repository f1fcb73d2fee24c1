"""qwen3moe_forward.py MODEL.gguf IDS OUT.f32: an independent forward pass
of a qwen3moe GGUF (Qwen3-30B-A3B's architecture), written from the
published description and llama.cpp's tensor layout, as a test oracle for
the runtime's qwen3moe graph. gguf-py (not ours) reads the file and
dequantizes every weight exactly; activations are float64.

IDS is a comma-separated token list; OUT gets the logits of every
position, row-major float32 [n_tokens, n_vocab].

The architecture:
  - per layer: h = rmsnorm(x) * attn_norm; q, k, v = h Wq, h Wk, h Wv (no
    biases); per-head rmsnorm of q and k (attn_q_norm, attn_k_norm); NeoX
    rotary (pairs j, j + d/2) over the whole head, base rope.freq_base;
    softmax(q k^T / sqrt(head_dim)) v, causal, grouped KV heads;
    x += attn Wo.
  - h = rmsnorm(x) * ffn_norm; p = softmax(h Wrouter) over expert_count
    experts; the expert_used_count largest p, divided by their sum;
    x += sum over them of p_e * (silu(h Wgate_e) * (h Wup_e)) Wdown_e, the
    experts being the planes of the 3-D ffn_{gate,up,down}_exps tensors.
  - logits = (rmsnorm(x) * output_norm) Wout (token_embd when tied)."""
import sys

import numpy as np
from gguf import GGUFReader, quants


def main():
    path, ids, out = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3]
    r = GGUFReader(path)
    kv = {f.name: f for f in r.fields.values()}

    def scalar(key):
        f = kv.get(key)
        if f is None:
            sys.exit(f"missing metadata {key}")
        return f.parts[f.data[0]][0].item()

    A = "qwen3moe."
    n_layer = int(scalar(A + "block_count"))
    n_head = int(scalar(A + "attention.head_count"))
    n_kv = int(scalar(A + "attention.head_count_kv"))
    hd = int(scalar(A + "attention.key_length"))
    n_used = int(scalar(A + "expert_used_count"))
    eps = float(scalar(A + "attention.layer_norm_rms_epsilon"))
    base = float(scalar(A + "rope.freq_base"))

    # dequantize gives [..., rows, cols] (numpy order: ne reversed)
    W = {t.name: quants.dequantize(t.data, t.tensor_type).astype(np.float64) for t in r.tensors}
    n = len(ids)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x):  # [n, heads, hd], NeoX halves
        pos = np.arange(n)[:, None]
        j = np.arange(hd // 2)[None, :]
        th = pos * base ** (-2.0 * j / hd)
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        a, b = x[..., : hd // 2], x[..., hd // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)

    x = W["token_embd.weight"][ids]
    mask = np.tril(np.ones((n, n))) > 0
    for l in range(n_layer):
        w = lambda s: W[f"blk.{l}.{s}.weight"]
        h = rms(x, w("attn_norm"))
        q = rope(rms((h @ w("attn_q").T).reshape(n, n_head, hd), w("attn_q_norm")))
        k = rope(rms((h @ w("attn_k").T).reshape(n, n_kv, hd), w("attn_k_norm")))
        v = (h @ w("attn_v").T).reshape(n, n_kv, hd)
        att = np.zeros((n, n_head, hd))
        for hh in range(n_head):
            g = hh // (n_head // n_kv)
            sc = np.where(mask, q[:, hh] @ k[:, g].T / np.sqrt(hd), -np.inf)
            sc = np.exp(sc - sc.max(1, keepdims=True))
            att[:, hh] = (sc / sc.sum(1, keepdims=True)) @ v[:, g]
        x = x + att.reshape(n, n_head * hd) @ w("attn_output").T
        h = rms(x, w("ffn_norm"))
        logits = h @ w("ffn_gate_inp").T
        gate, up, down = w("ffn_gate_exps"), w("ffn_up_exps"), w("ffn_down_exps")
        moe = np.zeros_like(x)
        for i in range(n):
            p = np.exp(logits[i] - logits[i].max())
            p /= p.sum()
            top = np.argsort(-p, kind="stable")[:n_used]
            wt = p[top] / p[top].sum()
            for s, e in enumerate(top):
                a, b = gate[e] @ h[i], up[e] @ h[i]
                moe[i] += wt[s] * (down[e] @ (a / (1.0 + np.exp(-a)) * b))
        x = x + moe
    out_w = W["output.weight"] if "output.weight" in W else W["token_embd.weight"]
    (rms(x, W["output_norm.weight"]) @ out_w.T).astype(np.float32).tofile(out)


if __name__ == "__main__":
    main()
