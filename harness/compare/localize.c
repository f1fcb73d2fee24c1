/* localize.c: the three passes of localize.h over session observers. With
 * from > 0 each pass first fills its cache with positions 0..from-1, and
 * only the batch from..n-1 is observed: the capture holds n - from tokens'
 * nodes (plus the attention caches), not n tokens'. */
#include "localize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "gt/session.h"
#include "opcheck.h"

typedef struct capture {
    float **data;  /* per node index: the output, for segment ends */
    size_t *bytes;
    int n_nodes;
    /* per node index: an ATTENTION node's K and V cache (its src[1] and
     * src[2]) as it reads them, when positions before the observed batch
     * are in it (from > 0): rows the batch did not write, so no node output
     * holds them. Raw bytes (F32 or F16 rows). */
    void **kv[2];
    size_t *kv_bytes[2];
} capture;

typedef struct pass {
    capture *a;           /* A's outputs */
    bool cache;           /* capture and feed the attention caches (from > 0) */
    gt_loc_result *r;     /* filled by the compare passes */
    int mode;             /* 0 capture A, 1 compare B, 2 compare B fed A's inputs */
    int seg;              /* segments seen */
    float *tmp;
    size_t tmp_cap;
} pass;

static bool same_storage(const gt_tensor *x, const gt_tensor *y)
{
    return x->buf == y->buf && x->offset == y->offset && gt_tensor_bytes(x) == gt_tensor_bytes(y);
}

/* Segment ends hold their node's output; the first run sizes the arrays. */
static int grow(capture *c, int n, gt_err *err)
{
    if (n <= c->n_nodes)
        return 0;
    float **d = realloc(c->data, sizeof *d * (size_t)n);
    if (d)
        c->data = d;
    size_t *b = d ? realloc(c->bytes, sizeof *b * (size_t)n) : NULL;
    if (!d || !b)
        return gt_err_set(err, "out of memory capturing %d nodes", n);
    c->bytes = b;
    for (int w = 0; w < 2; w++) {
        void **kv = realloc(c->kv[w], sizeof *kv * (size_t)n);
        if (kv)
            c->kv[w] = kv;
        size_t *kb = kv ? realloc(c->kv_bytes[w], sizeof *kb * (size_t)n) : NULL;
        if (!kv || !kb)
            return gt_err_set(err, "out of memory capturing %d nodes", n);
        c->kv_bytes[w] = kb;
    }
    for (int i = c->n_nodes; i < n; i++) {
        c->data[i] = NULL, c->bytes[i] = 0;
        c->kv[0][i] = c->kv[1][i] = NULL, c->kv_bytes[0][i] = c->kv_bytes[1][i] = 0;
    }
    c->n_nodes = n;
    return 0;
}

/* Pass 1, before an ATTENTION node: its K and V caches as A holds them. */
static int capture_cache(pass *p, gt_session *s, const gt_graph *g, int k, gt_err *err)
{
    if (grow(p->a, g->n_nodes, err) != 0)
        return -1;
    for (int w = 0; w < 2; w++) {
        const gt_tensor *c = g->nodes[k]->src[1 + w];
        const size_t bytes = gt_tensor_bytes(c);
        void *d = malloc(bytes ? bytes : 1);
        if (!d)
            return gt_err_set(err, "out of memory capturing %s's cache (%zu bytes)",
                              g->nodes[k]->name, bytes);
        free(p->a->kv[w][k]);
        p->a->kv[w][k] = d;
        p->a->kv_bytes[w][k] = bytes;
        if (gt_session_read_tensor(s, c, d, err) != 0)
            return -1;
    }
    return 0;
}

/* Pass 3, before an ATTENTION node: A's caches in place of B's, so the
 * positions before the batch (B's own prefill) are identical inputs too.
 * Left alone when the two differ in size (another K/V type). */
static int feed_cache(pass *p, gt_session *s, const gt_graph *g, int k, gt_err *err)
{
    for (int w = 0; w < 2; w++) {
        const gt_tensor *c = g->nodes[k]->src[1 + w];
        if (k < p->a->n_nodes && p->a->kv[w][k] && p->a->kv_bytes[w][k] == gt_tensor_bytes(c) &&
            gt_session_write_tensor(s, c, p->a->kv[w][k], err) != 0)
            return gt_err_wrap(err, "feeding %s its cache", g->nodes[k]->name);
    }
    return 0;
}

/* Pass 3: every input of the segment that an earlier node wrote gets A's
 * output of that node. Inputs written inside the segment are left alone. */
static int feed(pass *p, gt_session *s, const gt_graph *g, int first, int last, gt_err *err)
{
    for (int k = first; k <= last; k++)
        for (int si = 0; si < 3; si++) {
            const gt_tensor *src = g->nodes[k]->src[si];
            if (!src)
                continue;
            bool inside = false;
            for (int m = first; m < k && !inside; m++)
                inside = same_storage(g->nodes[m], src);
            if (inside)
                continue;
            for (int j = first - 1; j >= 0; j--) {
                if (!same_storage(g->nodes[j], src))
                    continue;
                if (j < p->a->n_nodes && p->a->data[j] && g->nodes[j]->type == GT_TYPE_F32 &&
                    gt_session_write_tensor(s, src, p->a->data[j], err) != 0)
                    return gt_err_wrap(err, "feeding %s its input %s", g->nodes[k]->name,
                                       g->nodes[j]->name);
                break;
            }
        }
    return 0;
}

static int before(void *user, gt_session *s, const gt_graph *g, int first, int last, gt_err *err)
{
    pass *p = user;
    for (int k = first; p->cache && p->mode != 1 && k <= last; k++)
        if (g->nodes[k]->op == GT_OP_ATTENTION &&
            (p->mode == 0 ? capture_cache(p, s, g, k, err) : feed_cache(p, s, g, k, err)) != 0)
            return -1;
    return p->mode == 2 ? feed(p, s, g, first, last, err) : 0;
}

static void describe(gt_loc_node *d, const gt_graph *g, int first, int last)
{
    const gt_tensor *t = g->nodes[last], *f = g->nodes[first];
    snprintf(d->name, sizeof d->name, "%s", t->name);
    d->layer = -1;
    if (strncmp(t->name, "blk.", 4) == 0)
        d->layer = atoi(t->name + 4);
    snprintf(d->op, sizeof d->op, "%s%s%s", gt_op_name(f->op), first < last ? "+" : "",
             first < last ? gt_op_name(t->op) : "");
    d->types[0] = '\0';
    for (int i = 0; i < 3 && f->src[i]; i++) {
        size_t len = strlen(d->types);
        snprintf(d->types + len, sizeof d->types - len, "%s%s", i ? " x " : "",
                 gt_type_name(f->src[i]->type));
    }
    d->ne0 = t->ne[0];
    d->ne1 = t->ne[1];
    const gt_type w = f->src[0] ? f->src[0]->type : GT_TYPE_F32;
    d->tolerance = opcheck_threshold(f->op, w);
    if (first < last) {
        const double t2 = opcheck_threshold(t->op, GT_TYPE_F32);
        if (t2 > d->tolerance)
            d->tolerance = t2;
    }
}

static void diff(const float *a, const float *b, size_t n, double *nmse, double *max_abs,
                 double *cosine)
{
    double se = 0, sa = 0, sb = 0, ab = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = a[i], y = b[i], d = y - x;
        se += d * d, sa += x * x, sb += y * y, ab += x * y;
        if (!(fabs(d) <= mx))
            mx = fabs(d); /* NaN included */
    }
    *nmse = sa > 0 ? se / sa : se > 0 ? INFINITY : 0;
    if (!isfinite(*nmse))
        *nmse = INFINITY;
    *max_abs = mx;
    *cosine = sa > 0 && sb > 0 ? ab / sqrt(sa * sb) : (sa == sb ? 1 : 0);
}

/* A node's values as floats: an F16 node widened exactly, an I32 node (a
 * mixture of experts' chosen expert ids) as the integers it holds, so a
 * routing that picks another expert shows as a difference, not an error. */
static int read_floats(gt_session *s, const gt_tensor *t, float *dst, gt_err *err)
{
    if (t->type == GT_TYPE_F32)
        return gt_session_read_tensor(s, t, dst, err);
    const size_t n = (size_t)(t->ne[0] * t->ne[1]);
    const bool f16 = t->type == GT_TYPE_F16;
    void *h = malloc(n ? n * (f16 ? sizeof(uint16_t) : sizeof(int32_t)) : 1);
    if (!h)
        return gt_err_set(err, "out of memory reading %s", t->name);
    const int rc = gt_session_read_tensor(s, t, h, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        dst[i] = f16 ? gt_f16_to_f32(((const uint16_t *)h)[i]) : (float)((const int32_t *)h)[i];
    free(h);
    return rc;
}

static int after(void *user, gt_session *s, const gt_graph *g, int first, int last, gt_err *err)
{
    pass *p = user;
    const gt_tensor *t = g->nodes[last];
    /* F16 nodes (the rows a KV_STORE wrote into an F16 cache) and I32 nodes
     * (expert ids) are captured and compared as the floats they hold. */
    const bool widened = t->type == GT_TYPE_F16 || t->type == GT_TYPE_I32;
    const size_t bytes =
        widened ? (size_t)(t->ne[0] * t->ne[1]) * sizeof(float) : gt_tensor_bytes(t);
    if (t->type != GT_TYPE_F32 && !widened)
        return gt_err_set(err, "node %s is %s: the localizer compares f32, f16 and i32 nodes",
                          t->name, gt_type_name(t->type));
    if (p->mode == 0) {
        if (grow(p->a, g->n_nodes, err) != 0)
            return -1;
        float *d = malloc(bytes ? bytes : 1);
        if (!d)
            return gt_err_set(err, "out of memory capturing %s (%zu bytes)", t->name, bytes);
        free(p->a->data[last]);
        p->a->data[last] = d;
        p->a->bytes[last] = bytes;
        p->seg++;
        return read_floats(s, t, d, err);
    }
    if (last >= p->a->n_nodes || !p->a->data[last] || p->a->bytes[last] != bytes)
        return gt_err_set(err, "node %d (%s) has no counterpart of %zu bytes on the other side",
                          last, t->name, bytes);
    if (bytes > p->tmp_cap) {
        float *n = realloc(p->tmp, bytes);
        if (!n)
            return gt_err_set(err, "out of memory reading %s", t->name);
        p->tmp = n;
        p->tmp_cap = bytes;
    }
    if (read_floats(s, t, p->tmp, err) != 0)
        return -1;
    if (p->seg >= p->r->n)
        return gt_err_set(err, "more segments on the second side than the first");
    gt_loc_node *d = &p->r->nodes[p->seg++];
    double nm, mx, cs;
    diff(p->a->data[last], p->tmp, bytes / sizeof(float), &nm, &mx, &cs);
    if (p->mode == 1) {
        describe(d, g, first, last);
        d->nmse = nm, d->max_abs = mx, d->cosine = cs;
    } else {
        if (strcmp(d->name, t->name) != 0)
            return gt_err_set(err, "the fed run reached %s where %s was expected", t->name, d->name);
        d->added_nmse = nm;
    }
    return 0;
}

/* Tokens [0, from) unobserved, in micro-batches of at least 64 (few graphs
 * for a long prefix; the batch's logits rows stay small on a large
 * vocabulary), then [from, n) as one observed batch. */
static int run_pass(const gt_model *m, gt_backend *b, pass *p, const int32_t *tokens, int n,
                    int from, gt_err *err)
{
    /* Spare positions past the prompt: what a node reading past the causal
     * limit (attn-overread) finds there is unwritten cache, not a refusal. */
    const int batch = from == 0 ? n : n - from > 64 ? n - from : 64;
    gt_session_params sp = {.n_ctx = n + 8, .n_batch = batch};
    gt_session *s;
    if (gt_session_new(m, b, &sp, &s, err) != 0)
        return -1;
    int rc = from > 0 ? gt_session_eval(s, tokens, from, false, NULL, err) : 0;
    if (rc != 0)
        gt_err_wrap(err, "filling the cache with positions 0..%d", from - 1);
    gt_node_observer o = {before, after, p};
    gt_session_observe(s, &o);
    p->seg = 0;
    if (rc == 0)
        rc = gt_session_eval(s, tokens + from, n - from, false, NULL, err);
    gt_session_free(s);
    return rc;
}

int gt_loc_run(const gt_model *ma, gt_backend *a, const gt_model *mb, gt_backend *b,
               const int32_t *tokens, int n, int from, gt_loc_result *out, gt_err *err)
{
    memset(out, 0, sizeof *out);
    out->first_added = out->first_reached = out->max_at = -1;
    out->n_tokens = n;
    out->from = from;
    if (n < 1)
        return gt_err_set(err, "nothing to localize (0 tokens)");
    if (from < 0 || from >= n)
        return gt_err_set(err, "the first position compared (%d) is outside the %d tokens", from,
                          n);
    const double t0 = gt_now();
    capture cap = {0};
    pass p = {.a = &cap, .r = out, .cache = from > 0};
    int rc = -1;
    if (run_pass(ma, a, &p, tokens, n, from, err) != 0) {
        gt_err_wrap(err, "capturing %s", a->info.backend);
        goto done;
    }
    out->nodes = calloc((size_t)p.seg, sizeof *out->nodes);
    if (!out->nodes) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    out->n = p.seg;
    p.mode = 1;
    if (run_pass(mb, b, &p, tokens, n, from, err) != 0) {
        gt_err_wrap(err, "capturing %s", b->info.backend);
        goto done;
    }
    p.mode = 2;
    if (run_pass(mb, b, &p, tokens, n, from, err) != 0) {
        gt_err_wrap(err, "running %s on %s's inputs", b->info.backend, a->info.backend);
        goto done;
    }
    double mx = -1;
    for (int i = 0; i < out->n; i++) {
        const gt_loc_node *d = &out->nodes[i];
        if (out->first_added < 0 && d->added_nmse > d->tolerance)
            out->first_added = i;
        if (out->first_reached < 0 && d->nmse > (d->tolerance > 1e-12 ? d->tolerance : 1e-12))
            out->first_reached = i;
        if (d->nmse > mx)
            mx = d->nmse, out->max_at = i;
    }
    rc = 0;
done:
    for (int i = 0; i < cap.n_nodes; i++)
        free(cap.data[i]), free(cap.kv[0][i]), free(cap.kv[1][i]);
    free(cap.data);
    free(cap.bytes);
    for (int w = 0; w < 2; w++)
        free(cap.kv[w]), free(cap.kv_bytes[w]);
    free(p.tmp);
    out->seconds = gt_now() - t0;
    if (rc != 0)
        gt_loc_result_free(out);
    return rc;
}

void gt_loc_result_free(gt_loc_result *r)
{
    free(r->nodes);
    r->nodes = NULL;
    r->n = 0;
}

void gt_loc_summary(const gt_loc_result *r, const char *b_label, char *out, size_t cap)
{
    if (r->first_added >= 0) {
        const gt_loc_node *d = &r->nodes[r->first_added];
        snprintf(out, cap, "diverges at %s (%s, %s): %s adds NMSE %.3g on identical inputs "
                 "(tolerance %.3g)", d->name, d->op, d->types, b_label, d->added_nmse,
                 d->tolerance);
    } else if (r->max_at >= 0) {
        const gt_loc_node *d = &r->nodes[r->max_at];
        snprintf(out, cap, "no node beyond tolerance on identical inputs (largest NMSE reached "
                 "%.3g at %s)", d->nmse, d->name);
    } else {
        snprintf(out, cap, "no nodes compared");
    }
}
