/* session_internal.h: what a graph builder sees of a session: its buffers
 * and the helpers that make tensors and nodes in the per-batch graph
 * storage. One builder per architecture (graph_llama.c, graph_gemma3.c);
 * session.c owns the lifetime and calls the model's builder per batch.
 * Private to the runtime. */
#ifndef GT_SESSION_INTERNAL_H
#define GT_SESSION_INTERNAL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "fault.h"
#include "gt/session.h"
#include "model_internal.h"

/* Activation slots in the scratch buffer (one batch, reused by every layer). */
enum { A_TOKENS, A_X, A_XB, A_Q, A_K, A_V, A_ATT, A_XB2, A_HG, A_HU,
       /* mixture of experts: router logits, chosen ids, their weights, the
        * k experts' outputs per token */
       A_ROUTER, A_EIDS, A_EW, A_EOUT,
       /* the batch rows whose logits are wanted, when they are not simply
        * the last one or all (several sequences in a batch) */
       A_OUT_IDS, A_COUNT };

/* Sequences (slots) a session may hold: its own and its companions. */
#define GT_MAX_SEQ 64

/* One sequence's consecutive tokens in a micro-batch: batch rows
 * row0..row0+n-1 hold its positions pos0..pos0+n-1. split: the eval's
 * tokens of this sequence began in an earlier micro-batch. */
typedef struct gt_run {
    int slot, pos0, row0, n;
    bool split;
} gt_run;

/* What one graph computes: n tokens in runs, and n_out rows of logits:
 * the last n_out rows, or (gather) the rows listed in A_OUT_IDS. */
typedef struct gt_ubatch {
    int n, n_runs;
    gt_run runs[GT_MAX_SEQ];
    int n_out;
    bool gather;
} gt_ubatch;

struct gt_session {
    const gt_model *model;
    gt_backend *be;
    int n_ctx, n_batch;
    int kv_dim;
    gt_type kv_type;        /* F32 or F16 cache rows */
    size_t kv_row;          /* bytes of one cache row: gt_row_size(kv_type, kv_dim) */

    /* Sequences: slots 0..n_seq-1 are the caller's, n_seq..n_slots-1 the
     * companions (session.h); past[slot] positions each. */
    int n_seq, n_comp, n_slots;
    int past[GT_MAX_SEQ];
    unsigned evals;         /* gt_session_eval calls: the companions' schedule */

    /* The KV cache: layer l's K rows (slot 0, 1, ...) then its V rows,
     * from kv_off[l]. A sliding-window layer keeps swa_rows positions per
     * slot (window - 1 + n_batch, all a batch can need), the oldest at
     * swa_base[slot]; every other layer keeps n_ctx from position 0.
     * session.c moves the newest window - 1 down when a batch would not
     * fit (swa_make_room). */
    size_t *kv_off;         /* (n_layer) */
    int swa_rows;
    int swa_base[GT_MAX_SEQ];
    const gt_ubatch *ub;    /* the micro-batch being built */

    gt_buffer **wbuf;       /* (n_shards) */
    int n_wbuf;
    gt_buffer *kv;
    gt_buffer *scratch;
    gt_buffer *logits_buf;
    int logits_rows;        /* rows logits_buf holds */
    /* Per micro-batch (n_batch each): the batch row of each wanted logits
     * row, whose entry it is and its position (session_eval.c). */
    int32_t *out_rows;
    int *out_entry, *out_pos;
    size_t act_offset[A_COUNT];

    /* Graph storage, rebuilt per batch. */
    gt_tensor *t;           /* (max_tensors) */
    int n_t, max_t;
    gt_tensor **nodes;      /* (max_tensors) */
    int n_nodes;
    int layer;              /* the layer being built (node names), -1 outside */

    const gt_node_observer *observer; /* NULL: the graph runs in one call */
    const gt_fault_set *fault;        /* GT_FAULT on this backend, NULL: none (gt/fault.h) */
};

/* Truncates any slot, a companion's too (session.c). */
int gt_session_slot_truncate(gt_session *s, int slot, int n_past, gt_err *err);

/* --- weights as backend tensors ------------------------------------------ */

static inline void bind_weight(gt_session *s, gt_tensor *t, const gt_gguf_tensor *w)
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

static inline gt_tensor *new_tensor(gt_session *s, const char *name, gt_type type, int64_t ne0,
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

static inline gt_tensor *weight_t(gt_session *s, const gt_gguf_tensor *w)
{
    if (s->n_t >= s->max_t)
        abort();
    gt_tensor *t = &s->t[s->n_t++];
    bind_weight(s, t, w);
    return t;
}

static inline gt_tensor *act(gt_session *s, int which, const char *name, int64_t cols, int n_tok)
{
    return new_tensor(s, name, which == A_TOKENS ? GT_TYPE_I32 : GT_TYPE_F32, cols, n_tok,
                      s->scratch, s->act_offset[which]);
}

/* A node writing into `dst`'s storage; inside a layer its name becomes
 * "blk.L.<name>" (session.h lists the names). */
static inline gt_tensor *node(gt_session *s, gt_op op, gt_tensor *dst, gt_tensor *a, gt_tensor *b,
                       gt_tensor *c)
{
    if (s->layer >= 0) {
        char local[64];
        snprintf(local, sizeof local, "%s", dst->name);
        snprintf(dst->name, sizeof dst->name, "blk.%d.%.50s", s->layer, local);
    }
    dst->op = op;
    dst->src[0] = a;
    dst->src[1] = b;
    dst->src[2] = c;
    s->nodes[s->n_nodes++] = dst;
    return dst;
}

static inline gt_tensor *same(gt_session *s, gt_tensor *like, const char *name)
{
    return new_tensor(s, name, like->type, like->ne[0], like->ne[1], like->buf, like->offset);
}

static inline bool kv_is_window(const gt_session *s, int layer)
{
    return gt_hparams_layer_local(&s->model->hp, layer);
}

/* Cache rows of a layer (per slot), and the position its row 0 holds. */
static inline int kv_rows(const gt_session *s, int layer)
{
    return kv_is_window(s, layer) ? s->swa_rows : s->n_ctx;
}
static inline int kv_base(const gt_session *s, int layer, int slot)
{
    return kv_is_window(s, layer) ? s->swa_base[slot] : 0;
}
/* Byte offset of a slot's K (which 0) or V (1) rows of a layer. */
static inline size_t kv_at(const gt_session *s, int layer, int which, int slot)
{
    const size_t per = (size_t)kv_rows(s, layer) * s->kv_row;
    return s->kv_off[layer] + ((size_t)which * s->n_slots + (size_t)slot) * per;
}

static inline gt_tensor *kv_cache(gt_session *s, int layer, int which /* 0 K, 1 V */, int slot)
{
    return new_tensor(s, which ? "cache_v" : "cache_k", s->kv_type, s->kv_dim,
                      kv_rows(s, layer), s->kv, kv_at(s, layer, which, slot));
}

/* Layers the graph runs: all but the last under graph-drop-last. */
static inline int graph_layers(const gt_session *s)
{
    const int n = s->model->hp.n_layer;
    return s->fault && s->fault->drop_last && n > 1 ? n - 1 : n;
}

/* Whether a batch writes its K and V: not a decode (one token) at or past
 * kv-decode-drop's position. */
static inline bool kv_stores(const gt_session *s, int n, int pos0)
{
    return !(s->fault && s->fault->kv_drop_at >= 0 && n == 1 && pos0 >= s->fault->kv_drop_at);
}

/* Attention's window: the layer's own (0 = none), narrowed by attn-window. */
static inline int attn_window(const gt_session *s, int window)
{
    const int f = s->fault ? s->fault->attn_window : 0;
    return f > 0 && (window == 0 || f < window) ? f : window;
}

/* RoPE of one attention: base, linear scale, attn_factor (0 = 1) and the
 * optional frequency factors. */
typedef struct gt_rope_args {
    float base, freq_scale, attn_factor;
    const gt_gguf_tensor *factors;
} gt_rope_args;

/* Layer l's attention over s->ub, from q, k and v (batch rows): per run,
 * RoPE of its rows at its positions, its K/V into its slot's cache, and
 * attention over that slot only (window 0 = none); returns the attention
 * output [q_dim, n] (graph_attention.c). One run gives the nodes q_rope,
 * k_rope, k_store, v_store, kqv. */
gt_tensor *gt_graph_attend(gt_session *s, int l, gt_tensor *q, gt_tensor *k, gt_tensor *v,
                           const gt_rope_args *rope, int window);
/* The output head on the final x: norm, weight, logits of the wanted rows;
 * three nodes (four when rows are gathered), which session.c drops for a
 * batch whose logits nobody reads. */
void gt_graph_output(gt_session *s, gt_tensor *x);
/* Nodes the output head added (what session.c drops). */
static inline int graph_output_nodes(const gt_ubatch *ub) { return ub->gather ? 4 : 3; }

/* The forward pass of s->ub into s->nodes, ending with gt_graph_output. */
void gt_graph_llama(gt_session *s); /* + mistral, phi3, qwen2, qwen3, qwen3moe */
void gt_graph_gemma3(gt_session *s);

#endif
