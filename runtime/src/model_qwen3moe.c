/* model_qwen3moe.c: the qwen3moe architecture's hyper-parameters and
 * weights (Qwen3-30B-A3B and its family), as llama.cpp reads them.
 *
 * Attention is Qwen 3's: no biases, q and k RMS-normalized per head
 * (attn_q_norm, attn_k_norm), NeoX RoPE over the whole head, head_dim from
 * attention.key_length (not n_embd / n_head: 2048 / 32 = 64, but heads are
 * 128 wide). The FFN is a mixture of experts: a router (ffn_gate_inp) scores
 * expert_count experts, each token runs the expert_used_count best, and the
 * experts are 3-D tensors ffn_{gate,up,down}_exps (one plane per expert).
 * llama.cpp always renormalizes the chosen experts' router weights for this
 * architecture (build_moe_ffn with norm_w = true) and reads no key for it,
 * so neither do we: expert_norm is true. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gt_qwen3moe_hparams(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    const char *arch = hp->arch;
    int64_t v;
    hp->arch_id = GT_ARCH_QWEN3MOE;
    if (gt_model_head_shape(g, hp, GT_ROPE_WHOLE, err)) return -1;
    hp->rope_mode = 1; /* NeoX halves */

    if (gt_model_arch_int(g, arch, "expert_count", -1, &v, err)) return -1;
    hp->n_expert = (int)v;
    if (gt_model_arch_int(g, arch, "expert_used_count", -1, &v, err)) return -1;
    hp->n_expert_used = (int)v;
    if (hp->n_expert_used > hp->n_expert || hp->n_expert_used > 64)
        return gt_err_set(err, "%s.expert_used_count %d is more than expert_count %d or 64", arch,
                          hp->n_expert_used, hp->n_expert);
    /* llama.cpp: without the key, an expert is n_ff / expert_used_count wide */
    if (gt_model_arch_int(g, arch, "expert_feed_forward_length",
                          hp->n_ff / hp->n_expert_used > 0 ? hp->n_ff / hp->n_expert_used : -1,
                          &v, err))
        return -1;
    hp->n_ff_exp = (int)v;
    hp->expert_norm = true;
    return 0;
}

int gt_qwen3moe_weights(gt_model *m, gt_err *err)
{
    const gt_gguf *g = m->gguf;
    const gt_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim, QD = hp->q_dim;
    const int64_t X = hp->n_expert, F = hp->n_ff_exp, HD = hp->head_dim;
    for (int l = 0; l < hp->n_layer; l++) {
        gt_layer_weights *w = &m->layers[l];
        char n[96];
#define W(field, suffix, cols, rows, planes)                            \
    snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix);               \
    if ((planes > 1 ? gt_model_weight3(g, n, cols, rows, planes, &w->field, err)  \
                    : gt_model_weight(g, n, cols, rows, &w->field, err)))          \
        return -1;
        W(attn_norm, "attn_norm", E, 1, 1)
        W(wq, "attn_q", E, QD, 1)
        W(wk, "attn_k", E, KV, 1)
        W(wv, "attn_v", E, KV, 1)
        W(wo, "attn_output", QD, E, 1)
        W(q_norm, "attn_q_norm", HD, 1, 1)
        W(k_norm, "attn_k_norm", HD, 1, 1)
        W(ffn_norm, "ffn_norm", E, 1, 1)
        W(ffn_gate_inp, "ffn_gate_inp", E, X, 1)
        W(ffn_gate_exps, "ffn_gate_exps", E, F, X)
        W(ffn_up_exps, "ffn_up_exps", E, F, X)
        W(ffn_down_exps, "ffn_down_exps", F, E, X)
#undef W
    }
    return 0;
}
