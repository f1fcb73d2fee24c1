/* graph_phi3.c: the Phi-3 forward pass as backend ops, one op per line.
 *
 * The llama graph (graph_llama.c) with model_phi3.c's differences:
 *   - Q, K and V come from row views of the fused attn_qkv weight (rows
 *     0..E-1, E..E+KV-1, E+KV..E+2KV-1), gate and up from the two halves of
 *     the fused ffn_up weight, so each is an ordinary MUL_MAT;
 *   - RoPE rotates NeoX halves with the long or the short frequency factors:
 *     long when the session's context, rounded up to a multiple of 256 as
 *     llama.cpp rounds it, exceeds the original training context (llama.cpp:
 *     n_ctx_seq > n_ctx_orig_yarn), and rope.scaling.attn_factor as the
 *     magnitude of cos and sin;
 *   - no sliding window (llama.cpp disables Phi SWA). */
#include "session_internal.h"

/* Rows row0 .. row0+rows-1 of a weight, as a weight tensor of its own. */
static gt_tensor *weight_rows(gt_session *s, const gt_gguf_tensor *w, int64_t row0, int64_t rows)
{
    gt_tensor *t = weight_t(s, w);
    t->offset += (size_t)row0 * gt_tensor_row_bytes(t);
    t->ne[1] = rows;
    return t;
}

void gt_graph_phi3(gt_session *s, int n, int pos0, bool all_logits)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int E = hp->n_embd, QD = hp->q_dim, KV = s->kv_dim, FF = hp->n_ff;
    /* llama.cpp 0c1e57098 rounds the context up to a multiple of 256
     * (llama-context.cpp) before comparing it with the original context */
    const int n_ctx_seq = (s->n_ctx + 255) / 256 * 256;
    const gt_gguf_tensor *factors = n_ctx_seq > hp->n_ctx_orig ? m->rope_long : m->rope_short;
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
        gt_tensor *wq = w->wqkv ? weight_rows(s, w->wqkv, 0, QD) : weight_t(s, w->wq);
        gt_tensor *wk = w->wqkv ? weight_rows(s, w->wqkv, QD, KV) : weight_t(s, w->wk);
        gt_tensor *wv = w->wqkv ? weight_rows(s, w->wqkv, QD + KV, KV) : weight_t(s, w->wv);
        gt_tensor *q = node(s, GT_OP_MUL_MAT, act(s, A_Q, "q", QD, n), wq, xb, NULL);
        gt_tensor *k = node(s, GT_OP_MUL_MAT, act(s, A_K, "k", KV, n), wk, xb, NULL);
        gt_tensor *v = node(s, GT_OP_MUL_MAT, act(s, A_V, "v", KV, n), wv, xb, NULL);
        gt_tensor *qr = node(s, GT_OP_ROPE, same(s, q, "q_rope"), q, NULL, NULL);
        gt_tensor *kr = node(s, GT_OP_ROPE, same(s, k, "k_rope"), k, NULL, NULL);
        int32_t rope[2][6] = {{hp->n_head, hp->head_dim, hp->rope_dim, pos0, hp->rope_mode},
                              {hp->n_head_kv, hp->head_dim, hp->rope_dim, pos0, hp->rope_mode}};
        memcpy(qr->iparams, rope[0], sizeof rope[0]);
        memcpy(kr->iparams, rope[1], sizeof rope[1]);
        qr->fparams[0] = kr->fparams[0] = hp->rope_base;
        qr->fparams[1] = kr->fparams[1] = hp->rope_freq_scale;
        qr->fparams[2] = kr->fparams[2] = hp->rope_attn_factor;
        if (factors)
            qr->src[1] = kr->src[1] = weight_t(s, factors);

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
        int32_t ap[6] = {hp->n_head, hp->n_head_kv, hp->head_dim, pos0, attn_window(s, 0)};
        memcpy(att->iparams, ap, sizeof ap);
        att->fparams[0] = hp->attn_scale;
        gt_tensor *o = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "attn_out", E, n), weight_t(s, w->wo),
                            att, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "attn_res"), x, o, NULL);

        /* feed-forward (SwiGLU on the two halves of the fused ffn_up) */
        xb = node(s, GT_OP_RMS_NORM, act(s, A_XB, "ffn_norm_rms", E, n), x, NULL, NULL);
        xb->fparams[0] = hp->rms_eps;
        xb = node(s, GT_OP_MUL, same(s, xb, "ffn_norm"), xb, weight_t(s, w->ffn_norm), NULL);
        gt_tensor *hg = node(s, GT_OP_MUL_MAT, act(s, A_HG, "ffn_gate", FF, n),
                             weight_rows(s, w->w_up, 0, FF), xb, NULL);
        gt_tensor *hu = node(s, GT_OP_MUL_MAT, act(s, A_HU, "ffn_up", FF, n),
                             weight_rows(s, w->w_up, FF, FF), xb, NULL);
        gt_tensor *h = node(s, GT_OP_SILU_MUL, same(s, hg, "ffn_act"), hg, hu, NULL);
        gt_tensor *d = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "ffn_out", E, n),
                            weight_t(s, w->w_down), h, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "ffn_res"), x, d, NULL);
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
