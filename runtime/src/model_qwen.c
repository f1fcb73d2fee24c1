/* model_qwen.c: what Qwen 2 (qwen2) and Qwen 3 (qwen3) files add to the
 * llama layout that model.c reads.
 *
 * Both use the llama block (RMSNorm, GQA attention, SwiGLU FFN) with RoPE
 * on NeoX halves (llama.cpp's rope type for both; their GGUFs keep Q/K in
 * the Hugging Face order, unlike llama files). On top:
 *   - qwen2: biases on the q, k and v projections (blk.N.attn_{q,k,v}.bias),
 *     added before RoPE. llama.cpp loads each one only when present, so we do
 *     too; the graph adds the ones the file has.
 *   - qwen3: no biases; q and k are RMS-normalized per head
 *     (blk.N.attn_{q,k}_norm.weight, head_dim wide) before RoPE, and the
 *     head size comes from attention.key_length, so q is n_head * head_dim
 *     wide, which need not be n_embd (Qwen3-0.6B: 16 x 128 over 1024).
 * llama.cpp's qwen2 graph has q = n_embd and one head size for q, k and v,
 * rotated in full; a file that says otherwise is refused here rather than
 * run differently. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int gt_model_read_qwen(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    const char *arch = hp->arch;
    const bool qwen3 = strcmp(arch, "qwen3") == 0;
    hp->arch_id = qwen3 ? GT_ARCH_QWEN3 : GT_ARCH_QWEN2;
    /* qwen2's graph in llama.cpp has q n_embd wide; qwen3 states its head size */
    if (gt_model_head_shape(g, hp, (qwen3 ? 0 : GT_HEAD_FIXED) | GT_ROPE_WHOLE, err)) return -1;
    hp->rope_mode = 1; /* NeoX halves */
    return 0;
}

int gt_model_qwen_layer(gt_model *m, int l, gt_err *err)
{
    const gt_gguf *g = m->gguf;
    const gt_hparams *hp = &m->hp;
    gt_layer_weights *w = &m->layers[l];
    const int64_t KV = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[96];
    if (hp->arch_id == GT_ARCH_QWEN3) {
        snprintf(n, sizeof n, "blk.%d.attn_q_norm.weight", l);
        if (gt_model_weight(g, n, hp->head_dim, 1, &w->q_norm, err)) return -1;
        snprintf(n, sizeof n, "blk.%d.attn_k_norm.weight", l);
        if (gt_model_weight(g, n, hp->head_dim, 1, &w->k_norm, err)) return -1;
        return 0;
    }
    const struct { const char *suffix; int64_t cols; const gt_gguf_tensor **out; } bias[] = {
        {"attn_q", hp->q_dim, &w->bq}, {"attn_k", KV, &w->bk}, {"attn_v", KV, &w->bv}};
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "blk.%d.%s.bias", l, bias[i].suffix);
        if (gt_model_weight_opt(g, n, bias[i].cols, 1, bias[i].out, err))
            return -1;
    }
    return 0;
}
