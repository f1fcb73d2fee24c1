/* graph_common.c: the pieces every architecture's forward pass builds the
 * same way: writing a layer's K/V rows into the cache and the output head
 * (final RMS norm and the vocabulary projection, for the rows whose logits
 * are wanted). One definition, so that the node names the localizer and
 * GT_FAULT rely on (k_store, v_store, result_norm, logits) cannot drift
 * apart between architectures. */
#include "session_internal.h"

void gt_graph_kv_store(gt_session *s, gt_tensor *kc, gt_tensor *vc, gt_tensor *k, gt_tensor *v,
                       int n, int pos0, int row0)
{
    const int KV = s->kv_dim;
    gt_tensor *ks = new_tensor(s, "k_store", GT_TYPE_F32, KV, n, s->kv,
                               kc->offset + (size_t)row0 * KV * sizeof(float));
    gt_tensor *vs = new_tensor(s, "v_store", GT_TYPE_F32, KV, n, s->kv,
                               vc->offset + (size_t)row0 * KV * sizeof(float));
    if (kv_stores(s, n, pos0)) {
        node(s, GT_OP_KV_STORE, ks, k, kc, NULL)->iparams[0] = row0;
        node(s, GT_OP_KV_STORE, vs, v, vc, NULL)->iparams[0] = row0;
    }
}

void gt_graph_output(gt_session *s, gt_tensor *x, int n, bool all_logits)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    s->layer = -1;
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
