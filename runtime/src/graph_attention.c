/* graph_attention.c: what every architecture's graph shares around the
 * KV cache: RoPE, K/V stores and attention, one sequence run at a time,
 * and the output head over the rows whose logits are wanted.
 *
 * Only these ops see positions and slots: the projections, norms and FFN
 * before and after treat the micro-batch's rows alike, whichever sequence
 * they belong to, so several sequences share each weight read. A run's
 * nodes read and write only its own rows and its own slot, so what a
 * sequence computes does not depend on its neighbours in the batch.
 *
 * GT_FAULT's batch-split@L and seq-bleed@L (gt/fault.h) are applied here:
 * they are bugs of a setting, visible only when a prompt is split across
 * micro-batches or when more than two sequences share the cache. So is
 * pos-wrap@N, a bug of length: RoPE of positions >= N. */
#include "session_internal.h"

/* Rows row0..row0+n-1 of a batch tensor; t itself when that is all of it
 * (so a one-run batch builds exactly the nodes it always did). */
static gt_tensor *rows_of(gt_session *s, gt_tensor *t, int row0, int n, const char *name)
{
    if (row0 == 0 && n == t->ne[1])
        return t;
    return new_tensor(s, name, t->type, t->ne[0], n, t->buf,
                      t->offset + (size_t)row0 * gt_tensor_row_bytes(t));
}

static gt_tensor *rope(gt_session *s, gt_tensor *x, const char *name, int heads, int pos0,
                       const gt_rope_args *r)
{
    const gt_hparams *hp = &s->model->hp;
    gt_tensor *t = node(s, GT_OP_ROPE, same(s, x, name), x, NULL, NULL);
    const int32_t ip[6] = {heads, hp->head_dim, hp->rope_dim, pos0, hp->rope_mode};
    memcpy(t->iparams, ip, sizeof ip);
    t->fparams[0] = r->base;
    t->fparams[1] = r->freq_scale;
    t->fparams[2] = r->attn_factor;
    if (r->factors) /* the same factors for Q and K at every layer */
        t->src[1] = weight_t(s, r->factors);
    return t;
}

/* RoPE of one run's rows (x: rows row0..row0+n-1 of the batch) at positions
 * pos0... pos-wrap@N rotates a position p >= N as p mod N. A ROPE node
 * takes consecutive positions, so where the wrapped positions restart (at
 * each multiple of N) the run is roped in pieces, in place; the run's rows
 * tensor then holds them all. Unfaulted, or all in one piece, it is the one
 * node it always was. */
static gt_tensor *rope_run(gt_session *s, gt_tensor *x, int row0, int n, const char *name,
                           int heads, int pos0, const gt_rope_args *r, int wrap)
{
    gt_tensor *rows = rows_of(s, x, row0, n, name[0] == 'q' ? "q" : "k");
    if (wrap <= 0 || pos0 + n <= wrap)
        return rope(s, rows, name, heads, pos0, r);
    gt_tensor *last = NULL;
    int pieces = 0;
    for (int i = 0; i < n; pieces++) {
        const int p = pos0 + i;
        const int end = p < wrap ? wrap : (p / wrap + 1) * wrap; /* where this piece stops */
        const int len = end - p < n - i ? end - p : n - i;
        last = rope(s, rows_of(s, rows, i, len, name[0] == 'q' ? "q" : "k"), name, heads,
                    p < wrap ? p : p % wrap, r);
        i += len;
    }
    return pieces == 1 ? last : rows;
}

gt_tensor *gt_graph_attend(gt_session *s, int l, gt_tensor *q, gt_tensor *k, gt_tensor *v,
                           const gt_rope_args *r, int window)
{
    const gt_hparams *hp = &s->model->hp;
    const gt_ubatch *ub = s->ub;
    const int KV = s->kv_dim;
    const gt_fault_set *f = s->fault;
    gt_tensor *att = act(s, A_ATT, "kqv", hp->q_dim, ub->n);
    for (int i = 0; i < ub->n_runs; i++) {
        const gt_run *run = &ub->runs[i];
        /* batch-split: a continuation micro-batch believes it starts one
         * position later. */
        const int pos = run->pos0 + (f && f->batch_split_at == l && run->split ? 1 : 0);
        const int wrap = f ? f->pos_wrap : 0;
        gt_tensor *qr = rope_run(s, q, run->row0, run->n, "q_rope", hp->n_head, pos, r, wrap);
        gt_tensor *kr = rope_run(s, k, run->row0, run->n, "k_rope", hp->n_head_kv, pos, r, wrap);
        /* A window layer's cache row 0 holds position kv_base: the cache
         * and attention see positions relative to it (RoPE is absolute). */
        const int row0 = run->pos0 - kv_base(s, l, run->slot);
        gt_tensor *kc = kv_cache(s, l, 0, run->slot), *vc = kv_cache(s, l, 1, run->slot);
        if (kv_stores(s, run->n, run->pos0)) {
            gt_tensor *ks = new_tensor(s, "k_store", s->kv_type, KV, run->n, s->kv,
                                       kc->offset + (size_t)row0 * s->kv_row);
            gt_tensor *vs = new_tensor(s, "v_store", s->kv_type, KV, run->n, s->kv,
                                       vc->offset + (size_t)row0 * s->kv_row);
            node(s, GT_OP_KV_STORE, ks, kr, kc, NULL)->iparams[0] = row0;
            node(s, GT_OP_KV_STORE, vs, rows_of(s, v, run->row0, run->n, "v"), vc, NULL)->iparams[0] =
                row0;
        }
        /* seq-bleed: with more than two sequences, attention reads the
         * next slot's K/V instead of its own. */
        if (f && f->seq_bleed_at == l && s->n_slots > 2) {
            const int other = (run->slot + 1) % s->n_slots;
            kc = kv_cache(s, l, 0, other);
            vc = kv_cache(s, l, 1, other);
        }
        gt_tensor *a = node(s, GT_OP_ATTENTION, rows_of(s, att, run->row0, run->n, "kqv"), qr, kc,
                            vc);
        const int32_t ap[6] = {hp->n_head, hp->n_head_kv, hp->head_dim, row0,
                               attn_window(s, window)};
        memcpy(a->iparams, ap, sizeof ap);
        a->fparams[0] = hp->attn_scale;
    }
    return att;
}

void gt_graph_output(gt_session *s, gt_tensor *x)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const gt_ubatch *ub = s->ub;
    const int E = hp->n_embd, rows = ub->n_out > 0 ? ub->n_out : 1;
    s->layer = -1;
    gt_tensor *xn = new_tensor(s, "result_norm_rms", GT_TYPE_F32, E, rows, s->scratch,
                               s->act_offset[A_XB]);
    gt_tensor *xl;
    if (ub->gather) { /* the wanted rows of several sequences, in order */
        gt_tensor *ids = new_tensor(s, "out_ids", GT_TYPE_I32, 1, rows, s->scratch,
                                    s->act_offset[A_OUT_IDS]);
        xl = node(s, GT_OP_GET_ROWS, same(s, xn, "x_out"), x, ids, NULL);
    } else { /* the last rows: all of them, or the last token's */
        xl = new_tensor(s, "x_out", GT_TYPE_F32, E, rows, x->buf,
                        x->offset + (size_t)(ub->n - rows) * E * sizeof(float));
    }
    node(s, GT_OP_RMS_NORM, xn, xl, NULL, NULL)->fparams[0] = hp->rms_eps;
    xn = node(s, GT_OP_MUL, same(s, xn, "result_norm"), xn, weight_t(s, m->out_norm), NULL);
    node(s, GT_OP_MUL_MAT,
         new_tensor(s, "logits", GT_TYPE_F32, hp->n_vocab, rows, s->logits_buf, 0),
         weight_t(s, m->output), xn, NULL);
}
