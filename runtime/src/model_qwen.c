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
    int64_t v;
    hp->arch_id = qwen3 ? GT_ARCH_QWEN3 : GT_ARCH_QWEN2;
    /* key_length defaults to n_embd / n_head, as in llama.cpp */
    const int64_t def = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : -1;
    if (gt_model_arch_int(g, arch, "attention.key_length", def, &v, err)) return -1;
    hp->head_dim = (int)v;
    if (gt_model_arch_int(g, arch, "attention.value_length", hp->head_dim, &v, err)) return -1;
    if (v != hp->head_dim)
        return gt_err_set(err, "%s.attention.value_length %lld differs from key_length %d", arch,
                          (long long)v, hp->head_dim);
    hp->q_dim = hp->n_head * hp->head_dim;
    if (!qwen3 && hp->q_dim != hp->n_embd)
        return gt_err_set(err, "qwen2: head_count %d x key_length %d is not embedding_length %d",
                          hp->n_head, hp->head_dim, hp->n_embd);
    if (gt_model_arch_int(g, arch, "rope.dimension_count", hp->head_dim, &v, err)) return -1;
    if (v != hp->head_dim)
        return gt_err_set(err, "%s.rope.dimension_count %lld is not the head size %d (%s rotates "
                               "whole heads)", arch, (long long)v, hp->head_dim, arch);
    hp->rope_dim = hp->head_dim;
    hp->rope_mode = 1; /* NeoX halves */
    hp->rope_base_local = hp->rope_base;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
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
