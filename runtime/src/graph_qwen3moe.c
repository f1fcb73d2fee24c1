/* graph_qwen3moe.c: the qwen3moe forward pass as backend ops, one op per
 * line (llama.cpp: src/models/qwen3moe.cpp and build_moe_ffn).
 *
 * Attention is llama's with Qwen 3's per-head q/k RMS norms before a NeoX
 * RoPE, q n_head * head_dim wide (kept here rather than shared with the
 * dense qwen3 graph, so each file reads on its own). The FFN is a mixture
 * of experts:
 *   logits = router * x                    (n_tok rows of n_expert)
 *   ids    = TOPK(logits)                  the k best experts per token
 *   w      = MOE_WEIGHTS(logits, ids)      softmax over all experts, taken
 *                                          at ids, renormalized to sum 1
 *   g, u   = MUL_MAT_ID(gate/up experts, x, ids)   (n_tok*k rows of n_ff_exp)
 *   h      = silu(g) * u
 *   d      = MUL_MAT_ID(down experts, h, ids)      (n_tok*k rows of n_embd)
 *   out    = MOE_SUM(d, w)                 sum over the k slots of w * d */
#include "session_internal.h"

void gt_graph_qwen3moe(gt_session *s, int n, int pos0, bool all_logits)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int E = hp->n_embd, QD = hp->q_dim, KV = s->kv_dim, HD = hp->head_dim;
    const int X = hp->n_expert, K = hp->n_expert_used, F = hp->n_ff_exp;
    s->n_t = 0;
    s->n_nodes = 0;
    s->layer = -1;

    gt_tensor *tokens = act(s, A_TOKENS, "tokens", n, 1);
    tokens->ne[0] = 1, tokens->ne[1] = n; /* (n) ids, one per row */
    gt_tensor *x = node(s, GT_OP_GET_ROWS, act(s, A_X, "inp_embd", E, n), weight_t(s, m->tok_embd),
                        tokens, NULL);                                     /* (n, E) */

    for (int l = 0; l < graph_layers(s); l++) {
        const gt_layer_weights *w = &m->layers[l];
        s->layer = l;
        /* attention */
        gt_tensor *xb = node(s, GT_OP_RMS_NORM, act(s, A_XB, "attn_norm_rms", E, n), x, NULL, NULL);
        xb->fparams[0] = hp->rms_eps;
        xb = node(s, GT_OP_MUL, same(s, xb, "attn_norm"), xb, weight_t(s, w->attn_norm), NULL);
        gt_tensor *q = node(s, GT_OP_MUL_MAT, act(s, A_Q, "q", QD, n), weight_t(s, w->wq), xb, NULL);
        gt_tensor *k = node(s, GT_OP_MUL_MAT, act(s, A_K, "k", KV, n), weight_t(s, w->wk), xb, NULL);
        gt_tensor *v = node(s, GT_OP_MUL_MAT, act(s, A_V, "v", KV, n), weight_t(s, w->wv), xb, NULL);
        /* QK-norm: one head per row */
        gt_tensor *qh = new_tensor(s, "q_norm_rms", GT_TYPE_F32, HD, (int64_t)n * hp->n_head, q->buf,
                                   q->offset);
        gt_tensor *kh = new_tensor(s, "k_norm_rms", GT_TYPE_F32, HD, (int64_t)n * hp->n_head_kv,
                                   k->buf, k->offset);
        node(s, GT_OP_RMS_NORM, qh, qh, NULL, NULL)->fparams[0] = hp->rms_eps;
        node(s, GT_OP_RMS_NORM, kh, kh, NULL, NULL)->fparams[0] = hp->rms_eps;
        node(s, GT_OP_MUL, same(s, qh, "q_norm"), qh, weight_t(s, w->q_norm), NULL);
        node(s, GT_OP_MUL, same(s, kh, "k_norm"), kh, weight_t(s, w->k_norm), NULL);
        gt_tensor *qr = node(s, GT_OP_ROPE, same(s, q, "q_rope"), q, NULL, NULL);
        gt_tensor *kr = node(s, GT_OP_ROPE, same(s, k, "k_rope"), k, NULL, NULL);
        int32_t rope[2][6] = {{hp->n_head, HD, hp->rope_dim, pos0, hp->rope_mode},
                              {hp->n_head_kv, HD, hp->rope_dim, pos0, hp->rope_mode}};
        memcpy(qr->iparams, rope[0], sizeof rope[0]);
        memcpy(kr->iparams, rope[1], sizeof rope[1]);
        qr->fparams[0] = kr->fparams[0] = hp->rope_base;

        gt_tensor *kc = kv_cache(s, l, 0), *vc = kv_cache(s, l, 1);
        gt_tensor *ks = new_tensor(s, "k_store", GT_TYPE_F32, KV, n, s->kv,
                                   kc->offset + (size_t)pos0 * KV * sizeof(float));
        gt_tensor *vs = new_tensor(s, "v_store", GT_TYPE_F32, KV, n, s->kv,
                                   vc->offset + (size_t)pos0 * KV * sizeof(float));
        if (kv_stores(s, n, pos0)) {
            node(s, GT_OP_KV_STORE, ks, kr, kc, NULL)->iparams[0] = pos0;
            node(s, GT_OP_KV_STORE, vs, v, vc, NULL)->iparams[0] = pos0;
        }

        gt_tensor *att = node(s, GT_OP_ATTENTION, act(s, A_ATT, "kqv", QD, n), qr, kc, vc);
        int32_t ap[6] = {hp->n_head, hp->n_head_kv, HD, pos0, attn_window(s, 0)};
        memcpy(att->iparams, ap, sizeof ap);
        att->fparams[0] = hp->attn_scale;
        gt_tensor *o = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "attn_out", E, n), weight_t(s, w->wo),
                            att, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "attn_res"), x, o, NULL);

        /* feed-forward: routed experts */
        xb = node(s, GT_OP_RMS_NORM, act(s, A_XB, "ffn_norm_rms", E, n), x, NULL, NULL);
        xb->fparams[0] = hp->rms_eps;
        xb = node(s, GT_OP_MUL, same(s, xb, "ffn_norm"), xb, weight_t(s, w->ffn_norm), NULL);
        gt_tensor *lg = node(s, GT_OP_MUL_MAT, act(s, A_ROUTER, "ffn_moe_logits", X, n),
                             weight_t(s, w->ffn_gate_inp), xb, NULL);         /* (n, X) */
        gt_tensor *ids = node(s, GT_OP_TOPK,
                              new_tensor(s, "ffn_moe_topk", GT_TYPE_I32, K, n, s->scratch,
                                         s->act_offset[A_EIDS]),
                              lg, NULL, NULL);                                 /* (n, K) */
        gt_tensor *ew = node(s, GT_OP_MOE_WEIGHTS, act(s, A_EW, "ffn_moe_weights", K, n), lg, ids,
                             NULL);                                            /* (n, K) */
        ew->iparams[0] = hp->expert_norm;
        gt_tensor *hg = node(s, GT_OP_MUL_MAT_ID, act(s, A_HG, "ffn_moe_gate", F, n * K),
                             weight_t(s, w->ffn_gate_exps), xb, ids);          /* (n*K, F) */
        gt_tensor *hu = node(s, GT_OP_MUL_MAT_ID, act(s, A_HU, "ffn_moe_up", F, n * K),
                             weight_t(s, w->ffn_up_exps), xb, ids);
        hg->iparams[0] = hu->iparams[0] = F; /* rows per expert; one input row per token */
        gt_tensor *h = node(s, GT_OP_SILU_MUL, same(s, hg, "ffn_moe_act"), hg, hu, NULL);
        gt_tensor *d = node(s, GT_OP_MUL_MAT_ID, act(s, A_EOUT, "ffn_moe_down", E, n * K),
                            weight_t(s, w->ffn_down_exps), h, ids);            /* (n*K, E) */
        d->iparams[0] = E;
        d->iparams[1] = 1; /* one input row per slot */
        gt_tensor *mo = node(s, GT_OP_MOE_SUM, act(s, A_XB2, "ffn_moe_out", E, n), d, ew, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "ffn_res"), x, mo, NULL);
    }

    s->layer = -1;
    /* output: only the rows whose logits are wanted */
    const int rows = all_logits ? n : 1;
    gt_tensor *xl = new_tensor(s, "x_out", GT_TYPE_F32, E, rows, x->buf,
                               x->offset + (size_t)(n - rows) * E * sizeof(float));
    gt_tensor *xn = new_tensor(s, "result_norm_rms", GT_TYPE_F32, E, rows, s->scratch,
                               s->act_offset[A_XB]);
    node(s, GT_OP_RMS_NORM, xn, xl, NULL, NULL)->fparams[0] = hp->rms_eps;
    xn = node(s, GT_OP_MUL, same(s, xn, "result_norm"), xn, weight_t(s, m->out_norm), NULL);
    node(s, GT_OP_MUL_MAT, new_tensor(s, "logits", GT_TYPE_F32, hp->n_vocab, rows, s->logits_buf, 0),
         weight_t(s, m->output), xn, NULL);
}
