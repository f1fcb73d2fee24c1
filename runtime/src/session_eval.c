/* session_eval.c: evaluating tokens of one or several sequences: packing
 * them into micro-batches, the companions that run beside sequence 0 under
 * a backend's n_parallel setting, sliding-window room per slot, and the
 * graph one segment at a time for observers and node faults.
 *
 * A micro-batch takes the entries' tokens in entry order, each sequence's
 * in position order, until n_batch are taken; the graph builders see it as
 * runs (graph_attention.c), and only the logits rows that are wanted are
 * computed. */
#include "gt/session.h"

#include "fault.h"
#include "session_internal.h"

#include <stdlib.h>
#include <string.h>

/* An entry as eval sees it: out = whether its logits rows are computed
 * (the caller's entries always, companions never). */
typedef struct entry {
    int slot;
    const int32_t *tokens;
    int n;
    bool all_logits, out;
    float *logits;
} entry;

static int ensure_logit_rows(gt_session *s, int rows, gt_err *err)
{
    if (rows <= s->logits_rows)
        return 0;
    gt_buffer *nb;
    const size_t size = (size_t)rows * s->model->hp.n_vocab * sizeof(float);
    if (s->be->iface->buffer_alloc(s->be, size, &nb, err) != 0)
        return gt_err_wrap(err, "allocating logits (%zu bytes)", size);
    s->be->iface->buffer_free(s->logits_buf);
    s->logits_buf = nb;
    s->logits_rows = rows;
    return 0;
}

/* Before a run of nb tokens of slot at pos: when it would run past the end
 * of the window layers' caches, the slot's newest window - 1 positions (all
 * the run reads besides its own) move down to row 0. Through host memory:
 * once per n_batch tokens, and the backend contract needs no copy op. */
static int swa_make_room(gt_session *s, int slot, int pos, int nb, gt_err *err)
{
    const gt_hparams *hp = &s->model->hp;
    const int rel = pos - s->swa_base[slot];
    if (s->swa_rows == s->n_ctx || rel + nb <= s->swa_rows)
        return 0;
    const int keep = rel < hp->swa_window - 1 ? rel : hp->swa_window - 1;
    const size_t row = s->kv_row;
    const size_t bytes = (size_t)keep * row;
    char *tmp = malloc(bytes ? bytes : 1);
    if (!tmp)
        return gt_err_set(err, "out of memory moving the sliding-window cache (%zu bytes)", bytes);
    int rc = 0;
    for (int l = 0; l < hp->n_layer && rc == 0; l++) {
        if (!kv_is_window(s, l))
            continue;
        for (int which = 0; which < 2 && rc == 0; which++) {
            const size_t at = kv_at(s, l, which, slot);
            if (s->be->iface->download(s->kv, at + (size_t)(rel - keep) * row, tmp, bytes, err) != 0 ||
                s->be->iface->upload(s->kv, at, tmp, bytes, err) != 0)
                rc = gt_err_wrap(err, "moving layer %d's sliding-window cache", l);
        }
    }
    free(tmp);
    if (rc == 0)
        s->swa_base[slot] = pos - keep;
    return rc;
}

/* --- observation and node faults (session.h) ----------------------------- */

static bool same_storage(const gt_tensor *a, const gt_tensor *b)
{
    return a->buf == b->buf && a->offset == b->offset;
}

int gt_graph_segment_end(const gt_graph *g, int first)
{
    const gt_tensor *t = g->nodes[first];
    if (t->op == GT_OP_RMS_NORM && first + 1 < g->n_nodes) {
        const gt_tensor *m = g->nodes[first + 1];
        if (m->op == GT_OP_MUL && m->src[0] == t && same_storage(m, t))
            return first + 2;
    }
    return first + 1;
}

/* thread-race (gt/fault.h): with a thread setting other than 1, layer 0's
 * attention output projection loses a partial sum, as a reduction whose
 * threads race would. */
static bool thread_race(const gt_session *s)
{
    return s->fault && s->fault->thread_race && s->be->exec.n_threads != 1;
}

static const char *node_fault(const gt_session *s, const gt_tensor *t)
{
    const char *f = gt_node_fault(s->be->info.backend, t->name);
    if (!f && thread_race(s) && strcmp(t->name, "blk.0.attn_out") == 0)
        f = "matmul-short";
    return f;
}

/* The graph one segment at a time: the observer sees each, and a faulted
 * node is corrupted on its way to the backend. */
static int compute_segments(gt_session *s, const gt_graph *g, gt_err *err)
{
    const gt_node_observer *o = s->observer;
    for (int i = 0; i < g->n_nodes;) {
        const int end = gt_graph_segment_end(g, i);
        if (o && o->before && o->before(o->user, s, g, i, end - 1, err) != 0)
            return -1;
        const char *fault[2] = {NULL, NULL};
        for (int k = i; k < end; k++)
            if ((fault[k - i] = node_fault(s, g->nodes[k])))
                gt_fault_before(fault[k - i], g->nodes[k]);
        gt_graph seg = {g->nodes + i, end - i};
        if (gt_backend_compute(s->be, &seg, err) != 0)
            return gt_err_wrap(err, "node %s", g->nodes[end - 1]->name);
        for (int k = i; k < end; k++)
            if ((fault[k - i] && gt_fault_after(fault[k - i], g->nodes[k], err) != 0) ||
                gt_fault_quant_scale(s->fault, g->nodes[k], err) != 0)
                return -1;
        if (o && o->after && o->after(o->user, s, g, i, end - 1, err) != 0)
            return -1;
        i = end;
    }
    return 0;
}

void gt_session_observe(gt_session *s, const gt_node_observer *o) { s->observer = o; }

int gt_session_read_tensor(gt_session *s, const gt_tensor *t, void *dst, gt_err *err)
{
    (void)s;
    return t->buf->backend->iface->download(t->buf, t->offset, dst, gt_tensor_bytes(t), err);
}

int gt_session_write_tensor(gt_session *s, const gt_tensor *t, const void *src, gt_err *err)
{
    (void)s;
    return t->buf->backend->iface->upload(t->buf, t->offset, src, gt_tensor_bytes(t), err);
}

/* --- micro-batches --------------------------------------------------------- */

/* Takes the next micro-batch from the entries (done[i] of entry i already
 * evaluated) into ub, and the batch row of each wanted logits row into
 * out_rows, with out_entry/out_pos saying whose row and position it is. */
static void next_ubatch(const gt_session *s, const entry *e, int n_e, const int *done,
                        gt_ubatch *ub, int32_t *out_rows, int *out_entry, int *out_pos)
{
    memset(ub, 0, sizeof *ub);
    int cap = s->n_batch;
    for (int i = 0; i < n_e && cap > 0; i++) {
        const int take = e[i].n - done[i] < cap ? e[i].n - done[i] : cap;
        if (take <= 0)
            continue;
        gt_run *r = &ub->runs[ub->n_runs++];
        *r = (gt_run){e[i].slot, s->past[e[i].slot] + done[i], ub->n, take, done[i] > 0};
        const bool last = done[i] + take == e[i].n;
        for (int j = 0; e[i].out && j < take; j++)
            if (e[i].all_logits || (last && j == take - 1)) {
                out_rows[ub->n_out] = ub->n + j;
                out_entry[ub->n_out] = i;
                out_pos[ub->n_out++] = r->pos0 + j;
            }
        ub->n += take;
        cap -= take;
    }
    /* One run wanting all its rows, or its last: the rows at the end. */
    ub->gather = !(ub->n_runs == 1 &&
                   (ub->n_out == ub->n || (ub->n_out == 1 && out_rows[0] == ub->n - 1)));
    if (ub->n_out == 0)
        ub->gather = false;
}

/* Runs one micro-batch and hands each wanted logits row to its entry. */
static int run_ubatch(gt_session *s, const entry *e, const int *done, gt_ubatch *ub,
                      gt_err *err)
{
    const int32_t *out_rows = s->out_rows;
    const int *out_entry = s->out_entry, *out_pos = s->out_pos;
    const int n_vocab = s->model->hp.n_vocab;
    const gt_backend_iface *bi = s->be->iface;
    if (ub->n_out > 0 && ensure_logit_rows(s, ub->n_out, err) != 0)
        return -1;
    for (int r = 0; r < ub->n_runs; r++) {
        const gt_run *run = &ub->runs[r];
        if (swa_make_room(s, run->slot, run->pos0, run->n, err) != 0)
            return -1;
    }
    for (int r = 0, i = 0; r < ub->n_runs; r++, i++) {
        const gt_run *run = &ub->runs[r];
        while (e[i].slot != run->slot)
            i++;
        if (bi->upload(s->scratch, s->act_offset[A_TOKENS] + sizeof(int32_t) * (size_t)run->row0,
                       e[i].tokens + done[i], sizeof(int32_t) * (size_t)run->n, err) != 0)
            return gt_err_wrap(err, "uploading tokens");
    }
    if (ub->gather && bi->upload(s->scratch, s->act_offset[A_OUT_IDS], out_rows,
                                 sizeof(int32_t) * (size_t)ub->n_out, err) != 0)
        return gt_err_wrap(err, "uploading the wanted rows");
    s->ub = ub;
    if (s->model->hp.arch_id == GT_ARCH_GEMMA3)
        gt_graph_gemma3(s);
    else /* llama, mistral, phi3, qwen2, qwen3, qwen3moe */
        gt_graph_llama(s);
    s->ub = NULL;
    gt_graph g = {s->nodes, s->n_nodes};
    if (ub->n_out == 0)
        g.n_nodes -= graph_output_nodes(ub); /* logits nobody reads */
    const bool by_segment = s->observer || gt_fault_any(s->be->info.backend) || thread_race(s);
    if ((by_segment ? compute_segments(s, &g, err) : gt_backend_compute(s->be, &g, err)) != 0)
        return -1;
    if (ub->n_out == 0)
        return 0;
    /* Each entry's rows lie together and in order in logits_buf: one
     * download straight into the caller's array per entry (one sequence
     * alone: one download, no copy). */
    const size_t row = sizeof(float) * (size_t)n_vocab;
    for (int k = 0, end; k < ub->n_out; k = end) {
        const entry *en = &e[out_entry[k]];
        for (end = k + 1; end < ub->n_out && out_entry[end] == out_entry[k]; end++)
            ;
        if (!en->logits)
            continue;
        float *to = en->logits +
                    (en->all_logits ? (size_t)(out_pos[k] - s->past[en->slot]) * n_vocab : 0);
        if (bi->download(s->logits_buf, row * (size_t)k, to, row * (size_t)(end - k), err) != 0)
            return gt_err_wrap(err, "reading logits");
        if (s->fault)
            gt_fault_logits(s->fault, to, end - k, n_vocab, out_pos[k]);
    }
    return 0;
}

/* Checks every entry before anything runs, so a bad call changes nothing. */
static int check_entries(const gt_session *s, const entry *e, int n_e, gt_err *err)
{
    const int n_vocab = s->model->hp.n_vocab;
    bool seen[GT_MAX_SEQ] = {false};
    for (int k = 0; k < n_e; k++) {
        const int n = e[k].n, past = s->past[e[k].slot];
        if (seen[e[k].slot])
            return gt_err_set(err, "sequence %d appears twice in one eval", e[k].slot);
        seen[e[k].slot] = true;
        if (n <= 0)
            return gt_err_set(err, "nothing to evaluate (%d tokens)", n);
        if (n > s->n_ctx - past)
            return gt_err_set(err, "%d token%s do%s not fit: context is %d and %d positions are used",
                              n, n == 1 ? "" : "s", n == 1 ? "es" : "", s->n_ctx, past);
        for (int i = 0; i < n; i++)
            if (e[k].tokens[i] < 0 || e[k].tokens[i] >= n_vocab)
                return gt_err_set(err, "token %d at index %d is outside the vocabulary (0..%d)",
                                  e[k].tokens[i], i, n_vocab - 1);
    }
    return 0;
}

static int eval_entries(gt_session *s, const entry *e, int n_e, gt_err *err)
{
    if (check_entries(s, e, n_e, err) != 0)
        return -1;
    int done[GT_MAX_SEQ] = {0};
    int rc = 0, first = 0, total = 0;
    for (int i = 0; i < n_e; i++)
        total += e[i].n;
    for (int taken = 0; rc == 0 && taken < total;) {
        gt_ubatch ub;
        next_ubatch(s, e, n_e, done, &ub, s->out_rows, s->out_entry, s->out_pos);
        if (run_ubatch(s, e, done, &ub, err) != 0) {
            const gt_run *r = &ub.runs[0];
            rc = gt_err_wrap(err, "evaluating tokens %d..%d", r->pos0, r->pos0 + r->n - 1);
            break;
        }
        for (int r = 0, i = first; r < ub.n_runs; r++, i++) {
            while (e[i].slot != ub.runs[r].slot)
                i++;
            done[i] += ub.runs[r].n;
        }
        while (first < n_e && done[first] == e[first].n)
            first++;
        taken += ub.n;
    }
    if (rc == 0)
        for (int i = 0; i < n_e; i++)
            s->past[e[i].slot] += e[i].n;
    return rc;
}

int gt_session_eval_seqs(gt_session *s, const gt_seq_eval *e, int n_e, gt_err *err)
{
    if (n_e <= 0 || n_e > s->n_seq)
        return gt_err_set(err, "%d entries: an eval takes 1 to %d (the session's sequences)", n_e,
                          s->n_seq);
    entry en[GT_MAX_SEQ];
    for (int i = 0; i < n_e; i++) {
        if (e[i].seq < 0 || e[i].seq >= s->n_seq)
            return gt_err_set(err, "no sequence %d: the session holds %d", e[i].seq, s->n_seq);
        en[i] = (entry){e[i].seq, e[i].tokens, e[i].n, e[i].all_logits, true, e[i].logits};
    }
    return eval_entries(s, en, n_e, err);
}

/* --- companions ------------------------------------------------------------ */

/* A companion's filler token at a position: seeded, so runs repeat. */
static int32_t filler(int slot, int pos, int n_vocab)
{
    uint64_t x = ((uint64_t)slot << 32 | (uint32_t)pos) + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return (int32_t)((x ^ (x >> 31)) % (uint64_t)n_vocab);
}

int gt_session_eval(gt_session *s, const int32_t *tokens, int n, bool all_logits,
                    float *logits, gt_err *err)
{
    entry e[GT_MAX_SEQ];
    e[0] = (entry){0, tokens, n, all_logits, true, logits};
    if (s->n_comp == 0)
        return eval_entries(s, e, 1, err);
    if (check_entries(s, e, 1, err) != 0)
        return -1;
    /* Companions: ragged (1 to 4 tokens each), and one of them finishes
     * and starts again from empty every third eval. */
    int32_t fill[GT_MAX_SEQ][4];
    const unsigned k = s->evals++;
    const int n_vocab = s->model->hp.n_vocab;
    for (int j = 1; j <= s->n_comp; j++) {
        const int slot = s->n_seq - 1 + j, cnt = 1 + (int)((k + (unsigned)j) % 4);
        const bool restart = k % 3 == 2 && (int)((k / 3) % (unsigned)s->n_comp) == j - 1;
        if ((restart || s->past[slot] + cnt > s->n_ctx) &&
            gt_session_slot_truncate(s, slot, 0, err) != 0)
            return -1;
        for (int t = 0; t < cnt; t++)
            fill[j][t] = filler(slot, s->past[slot] + t, n_vocab);
        e[j] = (entry){slot, fill[j], cnt, false, false, NULL};
    }
    return eval_entries(s, e, 1 + s->n_comp, err);
}
