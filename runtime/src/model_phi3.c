/* model_phi3.c: reading a Phi-3 model (llama.cpp architecture "phi3").
 *
 * Phi-3 is the llama graph with three differences in the file and one in
 * the math, as llama.cpp 0c1e57098 (src/models/phi3.cpp) reads it:
 *   - Q, K and V are one matrix, blk.N.attn_qkv.weight, whose rows are Q's
 *     (n_embd), then K's, then V's (kv_dim each); graph_llama.c multiplies
 *     by row views of it, so MUL_MAT is unchanged. A file with separate
 *     attn_q/attn_k/attn_v is read too (llama.cpp accepts both);
 *   - gate and up are one matrix, blk.N.ffn_up.weight with 2 n_ff rows:
 *     the first n_ff are the gate (silu'd), the rest the up projection
 *     (ggml_swiglu on the fused product, not swapped);
 *   - RoPE rotates NeoX halves and may carry frequency factors:
 *     rope_factors_long.weight / rope_factors_short.weight (rope_dim/2
 *     each, shared by every layer). llama.cpp uses the long ones when the
 *     context a sequence may reach exceeds rope.scaling.original_context_length
 *     (n_ctx_seq > n_ctx_orig_yarn, n_ctx_seq being the context rounded up
 *     to a multiple of 256) and the short ones otherwise; graph_llama.c
 *     applies that rule to the session's n_ctx. The converter
 *     also writes rope.scaling.attn_factor (sqrt(1 + ln(s)/ln(orig)) for a
 *     LongRoPE model), which scales cos and sin at every context length;
 *   - attention.sliding_window is read but not applied: llama.cpp
 *     0c1e57098 disables Phi SWA ("Phi SWA is currently disabled") and
 *     every layer attends to the whole context; we follow the oracle. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gt_model_read_phi3(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    const char *arch = hp->arch;
    double f;
    hp->arch_id = GT_ARCH_PHI3;
    if (gt_model_head_shape(g, hp, GT_HEAD_FIXED, err)) return -1;
    hp->rope_mode = 1; /* NeoX halves */
    /* read so that it is known; not applied (see the top of this file) */
    if (gt_model_arch_float(g, arch, "attention.sliding_window", 0.0, &f, err)) return -1;
    return gt_model_rope_scaling(g, hp, err);
}

int gt_model_find_phi3(gt_model *m, gt_err *err)
{
    const gt_gguf *g = m->gguf;
    const gt_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    const bool fused = gt_gguf_find_tensor(g, "blk.0.attn_qkv.weight") != NULL;
    if (gt_model_weight_opt(g, "rope_factors_long.weight", hp->rope_dim / 2, 1, &m->rope_long,
                            err) ||
        gt_model_weight_opt(g, "rope_factors_short.weight", hp->rope_dim / 2, 1, &m->rope_short,
                            err))
        return -1;
    if (!m->rope_long != !m->rope_short) /* one of them would leave some contexts unrotated */
        return gt_err_set(err, "rope_factors_%s.weight is present without rope_factors_%s.weight",
                          m->rope_long ? "long" : "short", m->rope_long ? "short" : "long");
    for (int l = 0; l < hp->n_layer; l++) {
        gt_layer_weights *w = &m->layers[l];
        char n[96];
#define W(field, suffix, cols, rows)                                   \
    snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix);              \
    if (gt_model_weight(g, n, cols, rows, &w->field, err)) return -1;
        W(attn_norm, "attn_norm", E, 1)
        if (fused) {
            W(wqkv, "attn_qkv", E, E + 2 * KV)
        } else {
            W(wq, "attn_q", E, E)
            W(wk, "attn_k", E, KV)
            W(wv, "attn_v", E, KV)
        }
        W(wo, "attn_output", E, E)
        W(ffn_norm, "ffn_norm", E, 1)
        W(w_up, "ffn_up", E, 2 * (int64_t)hp->n_ff)
        W(w_down, "ffn_down", hp->n_ff, E)
#undef W
    }
    return 0;
}
