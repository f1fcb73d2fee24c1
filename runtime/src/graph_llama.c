/* graph_llama.c: the forward pass of the llama family as backend ops, one
 * op per line, in the order of llama2.c's run.c: RMSNorm, Q/K/V, RoPE,
 * attention over the KV cache, residual; RMSNorm, FFN, residual; final norm
 * and the output projection.
 *
 * llama, mistral, phi3, qwen2, qwen3 and qwen3moe are this one pass; each
 * differs only in what its file has, and the pass uses what is there
 * (model.c and model_<arch>.c decide what an architecture must have):
 *   - Q, K, V: three weights, or row views of phi3's fused attn_qkv
 *     (rows 0..QD-1, QD..QD+KV-1, QD+KV..QD+2KV-1), so each is a MUL_MAT;
 *   - qwen2's q/k/v biases (ADD of a one-row b) right after the projections;
 *   - qwen3's per-head q/k RMS norms before RoPE, on a view with one head
 *     per row [head_dim, n_tok * heads], as graph_gemma3.c does;
 *   - RoPE factors: Llama 3's rope_freqs, or phi3's long or short factors
 *     (long when the session's context, rounded up to a multiple of 256 as
 *     llama.cpp 0c1e57098 rounds it, exceeds the original training context);
 *     linear scaling and attn_factor from hp; adjacent pairs or NeoX halves
 *     by hp->rope_mode;
 *   - the FFN: SwiGLU over ffn_gate and ffn_up, or over the two halves of
 *     phi3's fused ffn_up (gate first), or qwen3moe's routed experts:
 *       logits = router * x, ids = TOPK(logits), w = MOE_WEIGHTS(logits, ids),
 *       g, u = MUL_MAT_ID(gate/up experts, x, ids), h = silu(g) * u,
 *       d = MUL_MAT_ID(down experts, h, ids), out = MOE_SUM(d, w).
 * q and the attention output are hp->q_dim wide (n_head * head_dim). */
#include "session_internal.h"

/* Rows row0 .. row0+rows-1 of a weight, as a weight tensor of its own. */
static gt_tensor *weight_rows(gt_session *s, const gt_gguf_tensor *w, int64_t row0, int64_t rows)
{
    gt_tensor *t = weight_t(s, w);
    t->offset += (size_t)row0 * gt_tensor_row_bytes(t);
    t->ne[1] = rows;
    return t;
}

/* The RoPE frequency factors this session applies, or NULL. */
static const gt_gguf_tensor *rope_factors(const gt_session *s)
{
    const gt_model *m = s->model;
    if (m->rope_freqs)
        return m->rope_freqs;
    if (!m->rope_long && !m->rope_short)
        return NULL;
    const int n_ctx_seq = (s->n_ctx + 255) / 256 * 256;
    return n_ctx_seq > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
}

/* x RMS-normalized (node name rms) and scaled by weight (node name name). */
static gt_tensor *norm(gt_session *s, gt_tensor *x, int n, const char *rms, const char *name,
                       const gt_gguf_tensor *weight)
{
    gt_tensor *t = node(s, GT_OP_RMS_NORM, act(s, A_XB, rms, s->model->hp.n_embd, n), x, NULL, NULL);
    t->fparams[0] = s->model->hp.rms_eps;
    return node(s, GT_OP_MUL, same(s, t, name), t, weight_t(s, weight), NULL);
}

/* One head per row of t (heads of head_dim), RMS-normalized and scaled. */
static void head_norm(gt_session *s, gt_tensor *t, int n, int heads, const char *rms,
                      const char *name, const gt_gguf_tensor *weight)
{
    const gt_hparams *hp = &s->model->hp;
    gt_tensor *h = new_tensor(s, rms, GT_TYPE_F32, hp->head_dim, (int64_t)n * heads, t->buf,
                              t->offset);
    node(s, GT_OP_RMS_NORM, h, h, NULL, NULL)->fparams[0] = hp->rms_eps;
    node(s, GT_OP_MUL, same(s, h, name), h, weight_t(s, weight), NULL);
}

/* The SwiGLU FFN of layer w on xb: separate gate/up, or phi3's fused halves. */
static gt_tensor *ffn_dense(gt_session *s, const gt_layer_weights *w, gt_tensor *xb, int n)
{
    const int E = s->model->hp.n_embd, FF = s->model->hp.n_ff;
    gt_tensor *wg = w->w_gate ? weight_t(s, w->w_gate) : weight_rows(s, w->w_up, 0, FF);
    gt_tensor *wu = w->w_gate ? weight_t(s, w->w_up) : weight_rows(s, w->w_up, FF, FF);
    gt_tensor *hg = node(s, GT_OP_MUL_MAT, act(s, A_HG, "ffn_gate", FF, n), wg, xb, NULL);
    gt_tensor *hu = node(s, GT_OP_MUL_MAT, act(s, A_HU, "ffn_up", FF, n), wu, xb, NULL);
    gt_tensor *h = node(s, GT_OP_SILU_MUL, same(s, hg, "ffn_act"), hg, hu, NULL);
    return node(s, GT_OP_MUL_MAT, act(s, A_XB2, "ffn_out", E, n), weight_t(s, w->w_down), h,
                NULL);
}

/* qwen3moe's FFN: the router's k best experts, weighted and summed. */
static gt_tensor *ffn_moe(gt_session *s, const gt_layer_weights *w, gt_tensor *xb, int n)
{
    const gt_hparams *hp = &s->model->hp;
    const int E = hp->n_embd, X = hp->n_expert, K = hp->n_expert_used, F = hp->n_ff_exp;
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
    return node(s, GT_OP_MOE_SUM, act(s, A_XB2, "ffn_moe_out", E, n), d, ew, NULL);
}

/* The forward pass of the micro-batch s->ub. */
void gt_graph_llama(gt_session *s)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int n = s->ub->n;
    const int E = hp->n_embd, QD = hp->q_dim, KV = s->kv_dim;
    const gt_gguf_tensor *factors = rope_factors(s);
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
        gt_tensor *xb = norm(s, x, n, "attn_norm_rms", "attn_norm", w->attn_norm);
        gt_tensor *wq = w->wqkv ? weight_rows(s, w->wqkv, 0, QD) : weight_t(s, w->wq);
        gt_tensor *wk = w->wqkv ? weight_rows(s, w->wqkv, QD, KV) : weight_t(s, w->wk);
        gt_tensor *wv = w->wqkv ? weight_rows(s, w->wqkv, QD + KV, KV) : weight_t(s, w->wv);
        gt_tensor *q = node(s, GT_OP_MUL_MAT, act(s, A_Q, "q", QD, n), wq, xb, NULL);
        gt_tensor *k = node(s, GT_OP_MUL_MAT, act(s, A_K, "k", KV, n), wk, xb, NULL);
        gt_tensor *v = node(s, GT_OP_MUL_MAT, act(s, A_V, "v", KV, n), wv, xb, NULL);
        if (w->bq)
            q = node(s, GT_OP_ADD, same(s, q, "q_bias"), q, weight_t(s, w->bq), NULL);
        if (w->bk)
            k = node(s, GT_OP_ADD, same(s, k, "k_bias"), k, weight_t(s, w->bk), NULL);
        if (w->bv)
            v = node(s, GT_OP_ADD, same(s, v, "v_bias"), v, weight_t(s, w->bv), NULL);
        if (w->q_norm) {
            head_norm(s, q, n, hp->n_head, "q_norm_rms", "q_norm", w->q_norm);
            head_norm(s, k, n, hp->n_head_kv, "k_norm_rms", "k_norm", w->k_norm);
        }
        const gt_rope_args rope = {hp->rope_base, hp->rope_freq_scale, hp->rope_attn_factor,
                                   factors};
        gt_tensor *att = gt_graph_attend(s, l, q, k, v, &rope, 0);
        gt_tensor *o = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "attn_out", E, n), weight_t(s, w->wo),
                            att, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "attn_res"), x, o, NULL);

        /* feed-forward */
        xb = norm(s, x, n, "ffn_norm_rms", "ffn_norm", w->ffn_norm);
        gt_tensor *d = w->ffn_gate_inp ? ffn_moe(s, w, xb, n) : ffn_dense(s, w, xb, n);
        x = node(s, GT_OP_ADD, same(s, x, "ffn_res"), x, d, NULL);
    }

    gt_graph_output(s, x);
}
