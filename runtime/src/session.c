/* session.c: running a model's graph on a backend, with a KV cache.
 *
 * Buffers, all owned by the backend:
 *   weights  one per GGUF shard, made from the mmapped data section
 *            (zero-copy on host backends, one upload on devices)
 *   kv       K and V of every layer, f32 or f16 rows (kv_type): (2, n_ctx, kv_dim) per global
 *            layer, (2, window - 1 + n_batch, kv_dim) per sliding-window
 *            layer (session_internal.h: which positions it holds)
 *   scratch  activations for one batch, reused by every layer (the graph
 *            runs in order, so layer l+1 may overwrite what layer l wrote)
 *   logits   grown on demand: 1 row, or n_batch rows when all are asked for
 * The graph is rebuilt for every batch (a few hundred small structs) by the
 * architecture's builder (graph_llama.c for the llama family, graph_gemma3.c). */
#include "gt/session.h"

#include "fault.h"
#include "session_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC 0x53544732u /* "2GTS": version 2 has swa_base */

/* --- lifetime ------------------------------------------------------------- */

static int alloc(gt_session *s, size_t size, gt_buffer **out, const char *what, gt_err *err)
{
    if (s->be->iface->buffer_alloc(s->be, size, out, err) != 0)
        return gt_err_wrap(err, "allocating %s (%zu bytes)", what, size);
    return 0;
}

/* A window layer's row i at position p reads p - window + 1 .. p, so a
 * batch of n_batch needs window - 1 older positions besides its own. */
int gt_kv_window_rows(const gt_hparams *hp, int n_ctx, int n_batch, bool swa_full)
{
    if (n_batch <= 0)
        n_batch = 512;
    if (n_batch > n_ctx)
        n_batch = n_ctx;
    const bool bounded = hp->swa_window > 0 && !swa_full && hp->swa_window - 1 + n_batch < n_ctx;
    return bounded ? hp->swa_window - 1 + n_batch : n_ctx;
}

uint64_t gt_kv_cache_bytes(const gt_hparams *hp, int n_ctx, int n_batch, bool swa_full,
                           gt_type kv_type)
{
    const int w = gt_kv_window_rows(hp, n_ctx, n_batch, swa_full);
    uint64_t rows = 0;
    for (int l = 0; l < hp->n_layer; l++)
        rows += (uint64_t)(gt_hparams_layer_local(hp, l) ? w : n_ctx);
    const gt_type t = kv_type == GT_TYPE_F16 ? GT_TYPE_F16 : GT_TYPE_F32;
    return 2 * rows * (uint64_t)gt_row_size(t, (int64_t)hp->n_head_kv * hp->head_dim);
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
    s->n_batch = p && p->n_batch > 0 ? p->n_batch : b->exec.n_batch > 0 ? b->exec.n_batch : 512;
    if (s->n_batch > s->n_ctx)
        s->n_batch = s->n_ctx;
    /* Explicit sequences, or one plus the backend's companions. */
    s->n_seq = p && p->n_seq_max > 0 ? p->n_seq_max : 1;
    s->n_comp = (p && p->n_seq_max > 0) || b->exec.n_parallel <= 1 ? 0 : b->exec.n_parallel - 1;
    s->n_slots = s->n_seq + s->n_comp;
    if (s->n_slots > GT_MAX_SEQ) {
        gt_err_set(err, "%d sequences asked for; a session holds at most %d", s->n_slots,
                   GT_MAX_SEQ);
        goto fail;
    }
    s->kv_dim = hp->n_head_kv * hp->head_dim;
    s->kv_type = p && p->kv_type ? p->kv_type : b->exec.kv_type ? b->exec.kv_type : GT_TYPE_F32;
    if (s->kv_type != GT_TYPE_F32 && s->kv_type != GT_TYPE_F16) {
        gt_err_set(err, "kv_type %s: the K/V cache is f32 or f16", gt_type_name(s->kv_type));
        goto fail;
    }
    s->kv_row = gt_row_size(s->kv_type, s->kv_dim);
    if (gt_fault_session_check(b->info.backend, hp->n_vocab, err) != 0)
        goto fail;
    s->fault = gt_fault_get(b->info.backend);

    /* Every op/type the graph needs, checked up front: an unsupported
     * combination is reported, never computed. */
    char why[256];
    const bool moe = hp->arch_id == GT_ARCH_QWEN3MOE;
    const gt_layer_weights *l0 = &m->layers[0];
    const gt_gguf_tensor *wq = l0->wq ? l0->wq : l0->wqkv; /* phi3: fused QKV */
    const gt_type wtypes[] = {m->tok_embd->type, m->output->type, wq->type,
                              moe ? l0->ffn_down_exps->type : l0->w_down->type,
                              moe ? l0->ffn_gate_exps->type : wq->type};
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++) {
        gt_op op = i == 0 ? GT_OP_GET_ROWS : moe && i >= 3 ? GT_OP_MUL_MAT_ID : GT_OP_MUL_MAT;
        if (!gt_backend_supports(b, op, wtypes[i], why, sizeof why)) {
            gt_err_set(err, "backend %s does not support %s on %s weights%s%s", b->info.backend,
                       gt_op_name(op), gt_type_name(wtypes[i]), why[0] ? ": " : "", why);
            goto fail;
        }
    }
    const bool gemma3 = hp->arch_id == GT_ARCH_GEMMA3;
    for (gt_op op = GT_OP_GET_ROWS; op < GT_OP_COUNT; op++) {
        bool used = op == GT_OP_SILU_MUL ? !gemma3
                        : op == GT_OP_GELU_MUL || op == GT_OP_SCALE ? gemma3
                        : op == GT_OP_TOPK || op == GT_OP_MOE_WEIGHTS || op == GT_OP_MOE_SUM
                            ? moe
                            : op != GT_OP_MUL_MAT && op != GT_OP_MUL_MAT_ID;
        if (op == GT_OP_GET_ROWS) /* of F32 rows: the wanted rows of several sequences */
            used = s->n_slots > 1;
        if (used && !gt_backend_supports(b, op, GT_TYPE_F32, why, sizeof why)) {
            gt_err_set(err, "backend %s does not support %s%s%s", b->info.backend, gt_op_name(op),
                       why[0] ? ": " : "", why);
            goto fail;
        }
    }
    /* An F16 cache is written by KV_STORE and read by ATTENTION. */
    for (gt_op op = GT_OP_KV_STORE; s->kv_type == GT_TYPE_F16 && op <= GT_OP_ATTENTION; op++) {
        if (!gt_backend_supports(b, op, GT_TYPE_F16, why, sizeof why)) {
            gt_err_set(err, "backend %s does not support kv_type f16 (%s on an F16 cache)%s%s",
                       b->info.backend, gt_op_name(op), why[0] ? ": " : "", why);
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
    s->swa_rows = gt_kv_window_rows(hp, s->n_ctx, s->n_batch, p && p->swa_full);
    s->kv_off = calloc((size_t)hp->n_layer, sizeof *s->kv_off);
    if (!s->kv_off) {
        gt_err_set(err, "out of memory");
        goto fail;
    }
    size_t kv_size = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        s->kv_off[l] = kv_size;
        kv_size += (size_t)2 * s->n_slots * kv_rows(s, l) * s->kv_row;
    }
    if (alloc(s, kv_size, &s->kv, "the KV cache", err) != 0)
        goto fail;

    const int64_t cols[A_COUNT] = {
        [A_TOKENS] = 1, [A_X] = hp->n_embd, [A_XB] = hp->n_embd,
        [A_Q] = (int64_t)hp->n_head * hp->head_dim, [A_K] = s->kv_dim, [A_V] = s->kv_dim,
        [A_ATT] = (int64_t)hp->n_head * hp->head_dim, [A_XB2] = hp->n_embd,
        [A_HG] = moe && hp->n_expert_used * hp->n_ff_exp > hp->n_ff
                     ? hp->n_expert_used * hp->n_ff_exp : hp->n_ff,
        [A_HU] = moe && hp->n_expert_used * hp->n_ff_exp > hp->n_ff
                     ? hp->n_expert_used * hp->n_ff_exp : hp->n_ff,
        [A_ROUTER] = hp->n_expert, [A_EIDS] = hp->n_expert_used, [A_EW] = hp->n_expert_used,
        [A_EOUT] = (int64_t)hp->n_expert_used * hp->n_embd, [A_OUT_IDS] = 1};
    size_t total = 0;
    for (int a = 0; a < A_COUNT; a++) {
        s->act_offset[a] = total;
        total += ((size_t)cols[a] * s->n_batch * 4 + 63) & ~(size_t)63; /* keep 64-byte aligned */
    }
    if (alloc(s, total, &s->scratch, "activations", err) != 0 ||
        alloc(s, (size_t)hp->n_vocab * sizeof(float), &s->logits_buf, "logits", err) != 0)
        goto fail;
    s->logits_rows = 1;
    s->out_rows = malloc(sizeof *s->out_rows * (size_t)s->n_batch);
    s->out_entry = malloc(sizeof *s->out_entry * (size_t)s->n_batch);
    s->out_pos = malloc(sizeof *s->out_pos * (size_t)s->n_batch);
    if (!s->out_rows || !s->out_entry || !s->out_pos) {
        gt_err_set(err, "out of memory");
        goto fail;
    }

    /* gemma3 makes ~50 tensors a layer, llama ~35; each further sequence
     * run in a batch adds 13 (views, RoPE, stores, attention). */
    s->max_t = 16 + hp->n_layer * (64 + 13 * s->n_slots);
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
    free(s->kv_off);
    free(s->out_rows);
    free(s->out_entry);
    free(s->out_pos);
    free(s->t);
    free(s->nodes);
    free(s);
}

int gt_session_n_past(const gt_session *s) { return s->past[0]; }
int gt_session_n_seq(const gt_session *s) { return s->n_seq; }
int gt_session_n_companions(const gt_session *s) { return s->n_comp; }

int gt_session_seq_n_past(const gt_session *s, int seq)
{
    return seq >= 0 && seq < s->n_seq ? s->past[seq] : -1;
}
int gt_session_n_ctx(const gt_session *s) { return s->n_ctx; }
const gt_model *gt_session_model(const gt_session *s) { return s->model; }
gt_backend *gt_session_backend(const gt_session *s) { return s->be; }

/* Any slot, companions included (session_eval.c restarts them). */
int gt_session_slot_truncate(gt_session *s, int slot, int n_past, gt_err *err)
{
    const int have = s->past[slot];
    if (n_past < 0 || n_past > have)
        return gt_err_set(err, "cannot truncate to %d: the session holds %d positions", n_past,
                          have);
    /* The next token, at n_past, reads window - 1 older positions. */
    const int w = s->model->hp.swa_window;
    const int oldest = n_past > w - 1 ? n_past - (w - 1) : 0;
    if (s->swa_rows < s->n_ctx && n_past > 0 && n_past < have && oldest < s->swa_base[slot])
        return gt_err_set(err,
                          "cannot truncate to %d: the sliding-window layers keep positions %d.. "
                          "only (a cache of %d positions; a session with swa_full keeps all)",
                          n_past, s->swa_base[slot], s->swa_rows);
    s->past[slot] = n_past;
    if (n_past == 0)
        s->swa_base[slot] = 0;
    return 0;
}

int gt_session_seq_truncate(gt_session *s, int seq, int n_past, gt_err *err)
{
    if (seq < 0 || seq >= s->n_seq)
        return gt_err_set(err, "no sequence %d: the session holds %d", seq, s->n_seq);
    return gt_session_slot_truncate(s, seq, n_past, err);
}

int gt_session_truncate(gt_session *s, int n_past, gt_err *err)
{
    return gt_session_slot_truncate(s, 0, n_past, err);
}

int gt_session_kv_rows(const gt_session *s, int layer)
{
    return layer < 0 || layer >= s->model->hp.n_layer ? -1 : kv_rows(s, layer);
}

uint64_t gt_session_kv_bytes(const gt_session *s) { return s->kv->size; }

/* --- state ---------------------------------------------------------------- */

typedef struct state_header {
    uint32_t magic, n_layer, kv_dim, n_past, swa_base;
} state_header;

/* The rows of layer l a state holds: its positions base..n_past-1. */
static size_t state_rows(const gt_session *s, int l, uint32_t n_past, uint32_t swa_base)
{
    return kv_is_window(s, l) ? n_past - swa_base : n_past;
}

static size_t state_size(const gt_session *s, uint32_t n_past, uint32_t swa_base)
{
    size_t n = sizeof(state_header);
    for (int l = 0; l < s->model->hp.n_layer; l++)
        n += 2 * state_rows(s, l, n_past, swa_base) * s->kv_row;
    return n;
}

size_t gt_session_state_size(const gt_session *s)
{
    return state_size(s, (uint32_t)s->past[0], (uint32_t)s->swa_base[0]);
}

/* A state is sequence 0's: companions are filler and keep their own. */
static int one_sequence(const gt_session *s, gt_err *err)
{
    if (s->n_seq == 1)
        return 0;
    return gt_err_set(err, "session state of %d sequences is not supported: save and restore a "
                           "one-sequence session", s->n_seq);
}

/* Copies each layer's used K and V rows between the cache and buf. */
static int state_copy(const gt_session *s, char *buf, uint32_t n_past, uint32_t swa_base,
                      bool save, gt_err *err)
{
    const size_t row = s->kv_row;
    char *p = buf + sizeof(state_header);
    for (int l = 0; l < s->model->hp.n_layer; l++) {
        const size_t used = state_rows(s, l, n_past, swa_base) * row;
        for (int which = 0; which < 2; which++, p += used) {
            const size_t at = kv_at(s, l, which, 0);
            const int rc = save ? s->be->iface->download(s->kv, at, p, used, err)
                                : s->be->iface->upload(s->kv, at, p, used, err);
            if (rc != 0)
                return gt_err_wrap(err, "%s layer %d's KV state", save ? "saving" : "restoring", l);
        }
    }
    return 0;
}

int gt_session_state_save(const gt_session *s, void *buf, size_t size, gt_err *err)
{
    if (one_sequence(s, err) != 0)
        return -1;
    if (size < gt_session_state_size(s))
        return gt_err_set(err, "state buffer of %zu bytes is smaller than %zu", size,
                          gt_session_state_size(s));
    state_header h = {STATE_MAGIC, (uint32_t)s->model->hp.n_layer, (uint32_t)s->kv_dim,
                      (uint32_t)s->past[0], (uint32_t)s->swa_base[0]};
    memcpy(buf, &h, sizeof h);
    return state_copy(s, buf, h.n_past, h.swa_base, true, err);
}

int gt_session_state_load(gt_session *s, const void *buf, size_t size, gt_err *err)
{
    state_header h;
    if (one_sequence(s, err) != 0)
        return -1;
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
    if (h.swa_base > h.n_past || h.n_past - h.swa_base > (uint32_t)s->swa_rows)
        return gt_err_set(err,
                          "state's sliding-window layers hold positions %u..%u, more than this "
                          "session's %d",
                          h.swa_base, h.n_past, s->swa_rows);
    if (size != state_size(s, h.n_past, h.swa_base))
        return gt_err_set(err, "state is %zu bytes, expected %zu", size,
                          state_size(s, h.n_past, h.swa_base));
    if (state_copy(s, (char *)buf, h.n_past, h.swa_base, false, err) != 0)
        return -1;
    s->past[0] = (int)h.n_past;
    s->swa_base[0] = (int)h.swa_base;
    return 0;
}

uint64_t gt_session_device_bytes(const gt_session *s)
{
    uint64_t n = s->kv->size + s->scratch->size + s->logits_buf->size;
    for (int i = 0; i < s->n_wbuf; i++)
        n += s->wbuf[i]->size;
    return n;
}
