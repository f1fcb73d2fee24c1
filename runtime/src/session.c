/* session.c: running the llama graph on a backend, with a KV cache.
 *
 * Buffers, all owned by the backend:
 *   weights  one per GGUF shard, made from the mmapped data section
 *            (zero-copy on host backends, one upload on devices)
 *   kv       K and V of every layer: (n_layer, 2, n_ctx, kv_dim) f32
 *   scratch  activations for one batch, reused by every layer (the graph
 *            runs in order, so layer l+1 may overwrite what layer l wrote)
 *   logits   grown on demand: 1 row, or n_batch rows when all are asked for
 * The graph is rebuilt for every batch (a few hundred small structs); it
 * reads like the forward pass of llama2.c's run.c, one op per line. */
#include "gt/session.h"

#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC 0x53544731u /* "1GTS" */

enum { A_TOKENS, A_X, A_XB, A_Q, A_K, A_V, A_ATT, A_XB2, A_HG, A_HU, A_COUNT };

struct gt_session {
    const gt_model *model;
    gt_backend *be;
    int n_ctx, n_batch, n_past;
    int kv_dim;

    gt_buffer **wbuf;       /* (n_shards) */
    int n_wbuf;
    gt_buffer *kv;
    gt_buffer *scratch;
    gt_buffer *logits_buf;
    int logits_rows;        /* rows logits_buf holds */
    size_t act_offset[A_COUNT];

    /* Graph storage, rebuilt per batch. */
    gt_tensor *t;           /* (max_tensors) */
    int n_t, max_t;
    gt_tensor **nodes;      /* (max_tensors) */
    int n_nodes;
};

/* --- weights as backend tensors ------------------------------------------ */

static void bind_weight(gt_session *s, gt_tensor *t, const gt_gguf_tensor *w)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", w->name);
    t->type = w->type;
    t->ne[0] = w->ne[0];
    t->ne[1] = w->n_elements / w->ne[0];
    t->buf = s->wbuf[w->shard];
    t->offset = (size_t)w->offset;
    t->op = GT_OP_NONE;
}

/* --- graph building ------------------------------------------------------- */

static gt_tensor *new_tensor(gt_session *s, const char *name, gt_type type, int64_t ne0,
                             int64_t ne1, gt_buffer *buf, size_t offset)
{
    /* max_t is sized from the layer count, so running out is a bug here. */
    if (s->n_t >= s->max_t)
        abort();
    gt_tensor *t = &s->t[s->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->buf = buf;
    t->offset = offset;
    return t;
}

static gt_tensor *weight_t(gt_session *s, const gt_gguf_tensor *w)
{
    if (s->n_t >= s->max_t)
        abort();
    gt_tensor *t = &s->t[s->n_t++];
    bind_weight(s, t, w);
    return t;
}

static gt_tensor *act(gt_session *s, int which, const char *name, int64_t cols, int n_tok)
{
    return new_tensor(s, name, which == A_TOKENS ? GT_TYPE_I32 : GT_TYPE_F32, cols, n_tok,
                      s->scratch, s->act_offset[which]);
}

/* A node writing into `dst`'s storage. */
static gt_tensor *node(gt_session *s, gt_op op, gt_tensor *dst, gt_tensor *a, gt_tensor *b,
                       gt_tensor *c)
{
    dst->op = op;
    dst->src[0] = a;
    dst->src[1] = b;
    dst->src[2] = c;
    s->nodes[s->n_nodes++] = dst;
    return dst;
}

static gt_tensor *same(gt_session *s, gt_tensor *like, const char *name)
{
    return new_tensor(s, name, like->type, like->ne[0], like->ne[1], like->buf, like->offset);
}

static gt_tensor *kv_cache(gt_session *s, int layer, int which /* 0 K, 1 V */)
{
    size_t per = (size_t)s->n_ctx * s->kv_dim * sizeof(float);
    return new_tensor(s, which ? "cache_v" : "cache_k", GT_TYPE_F32, s->kv_dim, s->n_ctx, s->kv,
                      ((size_t)layer * 2 + which) * per);
}

/* The llama forward pass for n tokens at positions pos0.. */
static void build_graph(gt_session *s, int n, int pos0, bool all_logits)
{
    const gt_model *m = s->model;
    const gt_hparams *hp = &m->hp;
    const int E = hp->n_embd, QD = hp->n_head * hp->head_dim, KV = s->kv_dim, FF = hp->n_ff;
    s->n_t = 0;
    s->n_nodes = 0;

    gt_tensor *tokens = act(s, A_TOKENS, "tokens", n, 1);
    tokens->ne[0] = 1, tokens->ne[1] = n; /* (n) ids, one per row */
    gt_tensor *x = node(s, GT_OP_GET_ROWS, act(s, A_X, "x", E, n), weight_t(s, m->tok_embd),
                        tokens, NULL);                                     /* (n, E) */

    for (int l = 0; l < hp->n_layer; l++) {
        const gt_layer_weights *w = &m->layers[l];
        /* attention */
        gt_tensor *xb = node(s, GT_OP_RMS_NORM, act(s, A_XB, "attn_in", E, n), x, NULL, NULL);
        xb->fparams[0] = hp->rms_eps;
        xb = node(s, GT_OP_MUL, same(s, xb, "attn_in*w"), xb, weight_t(s, w->attn_norm), NULL);
        gt_tensor *q = node(s, GT_OP_MUL_MAT, act(s, A_Q, "q", QD, n), weight_t(s, w->wq), xb, NULL);
        gt_tensor *k = node(s, GT_OP_MUL_MAT, act(s, A_K, "k", KV, n), weight_t(s, w->wk), xb, NULL);
        gt_tensor *v = node(s, GT_OP_MUL_MAT, act(s, A_V, "v", KV, n), weight_t(s, w->wv), xb, NULL);
        gt_tensor *qr = node(s, GT_OP_ROPE, same(s, q, "q_rope"), q, NULL, NULL);
        gt_tensor *kr = node(s, GT_OP_ROPE, same(s, k, "k_rope"), k, NULL, NULL);
        int32_t rope[2][6] = {{hp->n_head, hp->head_dim, hp->rope_dim, pos0, hp->rope_mode},
                              {hp->n_head_kv, hp->head_dim, hp->rope_dim, pos0, hp->rope_mode}};
        memcpy(qr->iparams, rope[0], sizeof rope[0]);
        memcpy(kr->iparams, rope[1], sizeof rope[1]);
        qr->fparams[0] = kr->fparams[0] = hp->rope_base;

        gt_tensor *kc = kv_cache(s, l, 0), *vc = kv_cache(s, l, 1);
        gt_tensor *ks = new_tensor(s, "k_store", GT_TYPE_F32, KV, n, s->kv,
                                   kc->offset + (size_t)pos0 * KV * sizeof(float));
        gt_tensor *vs = new_tensor(s, "v_store", GT_TYPE_F32, KV, n, s->kv,
                                   vc->offset + (size_t)pos0 * KV * sizeof(float));
        node(s, GT_OP_KV_STORE, ks, kr, kc, NULL)->iparams[0] = pos0;
        node(s, GT_OP_KV_STORE, vs, v, vc, NULL)->iparams[0] = pos0;

        gt_tensor *att = node(s, GT_OP_ATTENTION, act(s, A_ATT, "attn", QD, n), qr, kc, vc);
        int32_t ap[6] = {hp->n_head, hp->n_head_kv, hp->head_dim, pos0};
        memcpy(att->iparams, ap, sizeof ap);
        att->fparams[0] = 1.0f / sqrtf((float)hp->head_dim);
        gt_tensor *o = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "attn_out", E, n), weight_t(s, w->wo),
                            att, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "x+attn"), x, o, NULL);

        /* feed-forward (SwiGLU) */
        xb = node(s, GT_OP_RMS_NORM, act(s, A_XB, "ffn_in", E, n), x, NULL, NULL);
        xb->fparams[0] = hp->rms_eps;
        xb = node(s, GT_OP_MUL, same(s, xb, "ffn_in*w"), xb, weight_t(s, w->ffn_norm), NULL);
        gt_tensor *hg = node(s, GT_OP_MUL_MAT, act(s, A_HG, "gate", FF, n), weight_t(s, w->w_gate),
                             xb, NULL);
        gt_tensor *hu = node(s, GT_OP_MUL_MAT, act(s, A_HU, "up", FF, n), weight_t(s, w->w_up),
                             xb, NULL);
        gt_tensor *h = node(s, GT_OP_SILU_MUL, same(s, hg, "swiglu"), hg, hu, NULL);
        gt_tensor *d = node(s, GT_OP_MUL_MAT, act(s, A_XB2, "ffn_out", E, n),
                            weight_t(s, w->w_down), h, NULL);
        x = node(s, GT_OP_ADD, same(s, x, "x+ffn"), x, d, NULL);
    }

    /* output: only the rows whose logits are wanted */
    const int rows = all_logits ? n : 1;
    gt_tensor *xl = new_tensor(s, "x_out", GT_TYPE_F32, E, rows, x->buf,
                               x->offset + (size_t)(n - rows) * E * sizeof(float));
    gt_tensor *xn = new_tensor(s, "out_norm", GT_TYPE_F32, E, rows, s->scratch,
                               s->act_offset[A_XB]);
    node(s, GT_OP_RMS_NORM, xn, xl, NULL, NULL)->fparams[0] = hp->rms_eps;
    xn = node(s, GT_OP_MUL, same(s, xn, "out_norm*w"), xn, weight_t(s, m->out_norm), NULL);
    node(s, GT_OP_MUL_MAT, new_tensor(s, "logits", GT_TYPE_F32, hp->n_vocab, rows, s->logits_buf, 0),
         weight_t(s, m->output), xn, NULL);
}

/* --- lifetime ------------------------------------------------------------- */

static int alloc(gt_session *s, size_t size, gt_buffer **out, const char *what, gt_err *err)
{
    if (s->be->iface->buffer_alloc(s->be, size, out, err) != 0)
        return gt_err_wrap(err, "allocating %s (%zu bytes)", what, size);
    return 0;
}

int gt_session_new(const gt_model *m, gt_backend *b, const gt_session_params *p,
                   gt_session **out, gt_err *err)
{
    *out = NULL;
    const gt_hparams *hp = &m->hp;
    gt_session *s = calloc(1, sizeof *s);
    if (!s)
        return gt_err_set(err, "out of memory");
    s->model = m;
    s->be = b;
    s->n_ctx = p && p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
    s->n_batch = p && p->n_batch > 0 ? p->n_batch : 512;
    if (s->n_batch > s->n_ctx)
        s->n_batch = s->n_ctx;
    s->kv_dim = hp->n_head_kv * hp->head_dim;

    /* Every op/type the graph needs, checked up front: an unsupported
     * combination is reported, never computed. */
    char why[256];
    const gt_type wtypes[] = {m->tok_embd->type, m->output->type, m->layers[0].wq->type,
                              m->layers[0].w_down->type};
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++) {
        gt_op op = i == 0 ? GT_OP_GET_ROWS : GT_OP_MUL_MAT;
        if (!gt_backend_supports(b, op, wtypes[i], why, sizeof why)) {
            gt_err_set(err, "backend %s does not support %s on %s weights%s%s", b->info.backend,
                       gt_op_name(op), gt_type_name(wtypes[i]), why[0] ? ": " : "", why);
            goto fail;
        }
    }
    for (gt_op op = GT_OP_RMS_NORM; op < GT_OP_COUNT; op++) {
        if (op != GT_OP_MUL_MAT && !gt_backend_supports(b, op, GT_TYPE_F32, why, sizeof why)) {
            gt_err_set(err, "backend %s does not support %s%s%s", b->info.backend, gt_op_name(op),
                       why[0] ? ": " : "", why);
            goto fail;
        }
    }

    s->n_wbuf = gt_gguf_n_shards(m->gguf);
    s->wbuf = calloc((size_t)s->n_wbuf, sizeof *s->wbuf);
    if (!s->wbuf) {
        gt_err_set(err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < s->n_wbuf; i++) {
        size_t size;
        const void *data = gt_gguf_data(m->gguf, i, &size);
        if (b->iface->buffer_from_host(b, data, size, &s->wbuf[i], err) != 0) {
            gt_err_wrap(err, "loading weights of shard %d (%zu bytes)", i + 1, size);
            goto fail;
        }
    }
    if (alloc(s, (size_t)hp->n_layer * 2 * s->n_ctx * s->kv_dim * sizeof(float), &s->kv,
              "the KV cache", err) != 0)
        goto fail;

    const int64_t cols[A_COUNT] = {
        [A_TOKENS] = 1, [A_X] = hp->n_embd, [A_XB] = hp->n_embd,
        [A_Q] = (int64_t)hp->n_head * hp->head_dim, [A_K] = s->kv_dim, [A_V] = s->kv_dim,
        [A_ATT] = (int64_t)hp->n_head * hp->head_dim, [A_XB2] = hp->n_embd,
        [A_HG] = hp->n_ff, [A_HU] = hp->n_ff};
    size_t total = 0;
    for (int a = 0; a < A_COUNT; a++) {
        s->act_offset[a] = total;
        total += ((size_t)cols[a] * s->n_batch * 4 + 63) & ~(size_t)63; /* keep 64-byte aligned */
    }
    if (alloc(s, total, &s->scratch, "activations", err) != 0 ||
        alloc(s, (size_t)hp->n_vocab * sizeof(float), &s->logits_buf, "logits", err) != 0)
        goto fail;
    s->logits_rows = 1;

    s->max_t = 8 + hp->n_layer * 40;
    s->t = calloc((size_t)s->max_t, sizeof *s->t);
    s->nodes = calloc((size_t)s->max_t, sizeof *s->nodes);
    if (!s->t || !s->nodes) {
        gt_err_set(err, "out of memory");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    gt_session_free(s);
    return -1;
}

void gt_session_free(gt_session *s)
{
    if (!s)
        return;
    const gt_backend_iface *bi = s->be->iface;
    for (int i = 0; i < s->n_wbuf; i++)
        if (s->wbuf[i])
            bi->buffer_free(s->wbuf[i]);
    if (s->kv) bi->buffer_free(s->kv);
    if (s->scratch) bi->buffer_free(s->scratch);
    if (s->logits_buf) bi->buffer_free(s->logits_buf);
    free(s->wbuf);
    free(s->t);
    free(s->nodes);
    free(s);
}

/* --- evaluation ----------------------------------------------------------- */

static int ensure_logit_rows(gt_session *s, int rows, gt_err *err)
{
    if (rows <= s->logits_rows)
        return 0;
    gt_buffer *nb;
    if (alloc(s, (size_t)rows * s->model->hp.n_vocab * sizeof(float), &nb, "logits", err) != 0)
        return -1;
    s->be->iface->buffer_free(s->logits_buf);
    s->logits_buf = nb;
    s->logits_rows = rows;
    return 0;
}

int gt_session_eval(gt_session *s, const int32_t *tokens, int n, bool all_logits,
                    float *logits, gt_err *err)
{
    const int n_vocab = s->model->hp.n_vocab;
    if (n <= 0)
        return gt_err_set(err, "nothing to evaluate (0 tokens)");
    if (n > s->n_ctx - s->n_past)
        return gt_err_set(err, "%d token%s do%s not fit: context is %d and %d positions are used",
                          n, n == 1 ? "" : "s", n == 1 ? "es" : "", s->n_ctx, s->n_past);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return gt_err_set(err, "token %d at index %d is outside the vocabulary (0..%d)",
                              tokens[i], i, n_vocab - 1);

    int pos = s->n_past;
    for (int done = 0; done < n;) {
        const int nb = n - done < s->n_batch ? n - done : s->n_batch;
        const bool last_batch = done + nb == n;
        const bool want = all_logits || last_batch;
        const int rows = all_logits ? nb : 1;
        if (want && ensure_logit_rows(s, rows, err) != 0)
            return -1;
        if (s->be->iface->upload(s->scratch, s->act_offset[A_TOKENS], tokens + done,
                                 sizeof(int32_t) * (size_t)nb, err) != 0)
            return gt_err_wrap(err, "uploading tokens");
        build_graph(s, nb, pos, all_logits);
        gt_graph g = {s->nodes, s->n_nodes};
        if (!want)
            g.n_nodes -= 3; /* the output head of a batch whose logits nobody reads */
        if (gt_backend_compute(s->be, &g, err) != 0)
            return gt_err_wrap(err, "evaluating tokens %d..%d", pos, pos + nb - 1);
        if (want && logits) {
            float *dst = all_logits ? logits + (size_t)done * n_vocab : logits;
            if (s->be->iface->download(s->logits_buf, 0, dst, sizeof(float) * (size_t)rows * n_vocab,
                                       err) != 0)
                return gt_err_wrap(err, "reading logits");
        }
        done += nb;
        pos += nb;
    }
    s->n_past = pos;
    return 0;
}

int gt_session_n_past(const gt_session *s) { return s->n_past; }
int gt_session_n_ctx(const gt_session *s) { return s->n_ctx; }
const gt_model *gt_session_model(const gt_session *s) { return s->model; }
gt_backend *gt_session_backend(const gt_session *s) { return s->be; }

int gt_session_truncate(gt_session *s, int n_past, gt_err *err)
{
    if (n_past < 0 || n_past > s->n_past)
        return gt_err_set(err, "cannot truncate to %d: the session holds %d positions", n_past,
                          s->n_past);
    s->n_past = n_past;
    return 0;
}

/* --- state ---------------------------------------------------------------- */

typedef struct state_header {
    uint32_t magic, n_layer, kv_dim, n_past;
} state_header;

size_t gt_session_state_size(const gt_session *s)
{
    return sizeof(state_header) +
           (size_t)s->model->hp.n_layer * 2 * s->n_past * s->kv_dim * sizeof(float);
}

int gt_session_state_save(const gt_session *s, void *buf, size_t size, gt_err *err)
{
    if (size < gt_session_state_size(s))
        return gt_err_set(err, "state buffer of %zu bytes is smaller than %zu", size,
                          gt_session_state_size(s));
    state_header h = {STATE_MAGIC, (uint32_t)s->model->hp.n_layer, (uint32_t)s->kv_dim,
                      (uint32_t)s->n_past};
    memcpy(buf, &h, sizeof h);
    char *p = (char *)buf + sizeof h;
    const size_t used = (size_t)s->n_past * s->kv_dim * sizeof(float);
    const size_t per = (size_t)s->n_ctx * s->kv_dim * sizeof(float);
    for (int i = 0; i < 2 * s->model->hp.n_layer; i++, p += used)
        if (s->be->iface->download(s->kv, (size_t)i * per, p, used, err) != 0)
            return gt_err_wrap(err, "saving KV state");
    return 0;
}

int gt_session_state_load(gt_session *s, const void *buf, size_t size, gt_err *err)
{
    state_header h;
    if (size < sizeof h)
        return gt_err_set(err, "state of %zu bytes is too short for its header", size);
    memcpy(&h, buf, sizeof h);
    if (h.magic != STATE_MAGIC)
        return gt_err_set(err, "not a session state (bad magic 0x%08x)", h.magic);
    if (h.n_layer != (uint32_t)s->model->hp.n_layer || h.kv_dim != (uint32_t)s->kv_dim)
        return gt_err_set(err, "state is for %u layers x %u KV dims, this model has %d x %d",
                          h.n_layer, h.kv_dim, s->model->hp.n_layer, s->kv_dim);
    if (h.n_past > (uint32_t)s->n_ctx)
        return gt_err_set(err, "state holds %u positions, the context is %d", h.n_past, s->n_ctx);
    const size_t used = (size_t)h.n_past * s->kv_dim * sizeof(float);
    if (size != sizeof h + used * 2 * h.n_layer)
        return gt_err_set(err, "state is %zu bytes, expected %zu", size,
                          sizeof h + used * 2 * h.n_layer);
    const char *p = (const char *)buf + sizeof h;
    const size_t per = (size_t)s->n_ctx * s->kv_dim * sizeof(float);
    for (uint32_t i = 0; i < 2 * h.n_layer; i++, p += used)
        if (s->be->iface->upload(s->kv, (size_t)i * per, p, used, err) != 0)
            return gt_err_wrap(err, "restoring KV state");
    s->n_past = (int)h.n_past;
    return 0;
}

uint64_t gt_session_device_bytes(const gt_session *s)
{
    uint64_t n = s->kv->size + s->scratch->size + s->logits_buf->size;
    for (int i = 0; i < s->n_wbuf; i++)
        n += s->wbuf[i]->size;
    return n;
}
