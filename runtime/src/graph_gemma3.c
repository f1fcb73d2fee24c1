/* graph_gemma3.c: the Gemma 3 forward pass as backend ops, one op per line.
 *
 * What differs from llama (graph_llama.c), as the Gemma 3 report and its
 * reference implementation describe it:
 *   - token embeddings are scaled by sqrt(n_embd); the output projection is
 *     the embedding matrix (tied);
 *   - q and k are RMS-normalized per head (attn_q_norm, attn_k_norm) before
 *     RoPE, which rotates NeoX halves;
 *   - the attention output and the FFN output are RMS-normalized again
 *     (post_attention_norm, post_ffw_norm) before their residual adds;
 *   - the FFN is gated GELU (tanh form) instead of SwiGLU;
 *   - 5 of every 6 layers are local: they attend only to the last
 *     swa_window positions and use their own rope base (rope_base_local);
 *     every swa_period-th layer is global with the file's rope.freq_base;
 *   - q is n_head * head_dim = 1024 wide, not n_embd (640).
 * GGUF stores Gemma's norm weights as (1 + w), so every norm is RMS_NORM
 * then MUL, as in llama. The per-head norms run on a view of q (k) with
 * one head per row: [head_dim, n_tok * n_head]. */
#include "session_internal.h"

void gt_graph_gemma3(gt_session *s, int n, int pos0, bool all_logits)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int E = hp->n_embd, QD = hp->q_dim, KV = s->kv_dim, FF = hp->n_ff, HD = hp->head_dim;
    s->n_t = 0;
    s->n_nodes = 0;
    s->layer = -1;

    gt_tensor *tokens = act(s, A_TOKENS, "tokens", n, 1);
    tokens->ne[0] = 1, tokens->ne[1] = n; /* (n) ids, one per row */
    gt_tensor *x = node(s, GT_OP_GET_ROWS, act(s, A_X, "inp_embd", E, n), weight_t(s, m->tok_embd),
                        tokens, NULL);                                     /* (n, E) */
    x = node(s, GT_OP_SCALE, same(s, x, "inp_scaled"), x, NULL, NULL);
    x->fparams[0] = hp->embd_scale;

    for (int l = 0; l < graph_layers(s); l++) {
        const gt_layer_weights *w = &m->layers[l];
        s->layer = l;
        const bool local = gt_hparams_layer_local(hp, l);
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
        qr->fparams[0] = kr->fparams[0] = local ? hp->rope_base_local : hp->rope_base;

        /* A local layer's cache row 0 holds position kv_base: the cache and
         * attention see positions relative to it (RoPE above is absolute). */
        const int row0 = pos0 - kv_base(s, l);
        gt_tensor *kc = kv_cache(s, l, 0), *vc = kv_cache(s, l, 1);
        gt_tensor *ks = new_tensor(s, "k_store", GT_TYPE_F32, KV, n, s->kv,
                                   kc->offset + (size_t)row0 * KV * sizeof(float));
        gt_tensor *vs = new_tensor(s, "v_store", GT_TYPE_F32, KV, n, s->kv,
                                   vc->offset + (size_t)row0 * KV * sizeof(float));
        if (kv_stores(s, n, pos0)) {
            node(s, GT_OP_KV_STORE, ks, kr, kc, NULL)->iparams[0] = row0;
            node(s, GT_OP_KV_STORE, vs, v, vc, NULL)->iparams[0] = row0;
        }

        gt_tensor *att = node(s, GT_OP_ATTENTION, act(s, A_ATT, "kqv", QD, n), qr, kc, vc);
        int32_t ap[6] = {hp->n_head, hp->n_head_kv, HD, row0, attn_window(s, local ? hp->swa_window : 0)};
        memcpy(att->iparams, ap, sizeof ap);
        att->fparams[0] = hp->attn_scale;
        gt_tensor *o = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "attn_out", E, n), weight_t(s, w->wo),
                            att, NULL);
        o = node(s, GT_OP_RMS_NORM, same(s, o, "attn_post_norm_rms"), o, NULL, NULL);
        o->fparams[0] = hp->rms_eps;
        o = node(s, GT_OP_MUL, same(s, o, "attn_post_norm"), o, weight_t(s, w->post_attn_norm),
                 NULL);
        x = node(s, GT_OP_ADD, same(s, x, "attn_res"), x, o, NULL);

        /* feed-forward (gated GELU) */
        xb = node(s, GT_OP_RMS_NORM, act(s, A_XB, "ffn_norm_rms", E, n), x, NULL, NULL);
        xb->fparams[0] = hp->rms_eps;
        xb = node(s, GT_OP_MUL, same(s, xb, "ffn_norm"), xb, weight_t(s, w->ffn_norm), NULL);
        gt_tensor *hg = node(s, GT_OP_MUL_MAT, act(s, A_HG, "ffn_gate", FF, n), weight_t(s, w->w_gate),
                             xb, NULL);
        gt_tensor *hu = node(s, GT_OP_MUL_MAT, act(s, A_HU, "ffn_up", FF, n), weight_t(s, w->w_up),
                             xb, NULL);
        gt_tensor *h = node(s, GT_OP_GELU_MUL, same(s, hg, "ffn_act"), hg, hu, NULL);
        gt_tensor *d = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "ffn_out", E, n),
                            weight_t(s, w->w_down), h, NULL);
        d = node(s, GT_OP_RMS_NORM, same(s, d, "ffn_post_norm_rms"), d, NULL, NULL);
        d->fparams[0] = hp->rms_eps;
        d = node(s, GT_OP_MUL, same(s, d, "ffn_post_norm"), d, weight_t(s, w->post_ffn_norm), NULL);
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
