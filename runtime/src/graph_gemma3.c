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

void gt_graph_gemma3(gt_session *s)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int n = s->ub->n;
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
        const gt_rope_args rope = {local ? hp->rope_base_local : hp->rope_base, 0, 0, NULL};
        gt_tensor *att = gt_graph_attend(s, l, q, k, v, &rope, local ? hp->swa_window : 0);
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

    gt_graph_output(s, x);
}
