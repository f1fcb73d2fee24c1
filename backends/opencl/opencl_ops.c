/* opencl_ops.c: compute(): a graph becomes a stream of kernel launches on
 * one in-order queue, with a single clFinish at the end (no per-node
 * synchronisation: on PoCL a round trip costs as much as a small kernel).
 *
 * Each node is checked before it is enqueued (types, shapes, byte ranges
 * inside their buffers, alignment), because a kernel that reads past a
 * buffer corrupts memory or hangs a GPU instead of failing. Failures name
 * the node, the kernel and the sizes.
 *
 * Two things cannot be done inside one kernel and are prepared per graph:
 * - ROPE's cos/sin are computed here in double precision, exactly as the
 *   reference does, for every (position, pair) the graph's ROPE nodes use,
 *   and uploaded once as a table. Devices without cl_khr_fp64 then get the
 *   same angles as those with it, even at positions in the thousands.
 * - GET_ROWS cannot fail from a kernel, so an out-of-range id is written to
 *   a flag buffer that is read back after the clFinish. */
#include "opencl_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- kernel arguments and launches ------------------------------------------ */

typedef struct kargs {
    ocl_ctx *c;
    int k;
    cl_uint idx;
    cl_int st;
    cl_uint bad; /* first argument that failed */
} kargs;

static kargs args_for(ocl_ctx *c, int k) { return (kargs){c, k, 0, CL_SUCCESS, 0}; }

static void arg(kargs *a, size_t size, const void *v)
{
    if (a->st == CL_SUCCESS) {
        a->st = clSetKernelArg(a->c->k[a->k], a->idx, size, v);
        a->bad = a->idx;
    }
    a->idx++;
}
static void arg_int(kargs *a, int v) { arg(a, sizeof(cl_int), &(cl_int){v}); }
static void arg_ulong(kargs *a, size_t v) { arg(a, sizeof(cl_ulong), &(cl_ulong){v}); }
static void arg_float(kargs *a, float v) { arg(a, sizeof(cl_float), &(cl_float){v}); }
static void arg_mem(kargs *a, cl_mem m) { arg(a, sizeof m, &m); }
static void arg_local(kargs *a, size_t bytes) { arg(a, bytes, NULL); }

/* A tensor is two arguments: its allocation and its byte offset there. */
static int arg_tensor(kargs *a, const gt_tensor *t, gt_err *err)
{
    cl_mem m;
    size_t off;
    if (!t->buf || !t->buf->impl || t->buf->backend->iface->compute != gt_ocl_compute)
        return gt_err_set(err, "tensor '%s' is not in an OpenCL buffer", t->name);
    if (gt_ocl_resolve(t->buf, t->offset, gt_tensor_bytes(t), &m, &off, err) != 0)
        return gt_err_wrap(err, "tensor '%s'", t->name);
    arg_mem(a, m);
    arg_ulong(a, off);
    return 0;
}

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

/* Largest power of two <= min(v, max), at least 1: a work-group that fits
 * small problems instead of launching mostly idle items. */
static size_t fit(size_t v, size_t max)
{
    size_t p = 1;
    while (p * 2 <= v && p * 2 <= max)
        p *= 2;
    return p;
}

static int launch(kargs *a, size_t gx, size_t gy, size_t lx, size_t ly, gt_err *err)
{
    const char *name = gt_ocl_kernel_name(a->k);
    if (a->st != CL_SUCCESS)
        return gt_ocl_fail(err, "clSetKernelArg", a->st, "%s, argument %u", name, a->bad);
    if (gx == 0 || gy == 0)
        return 0;
    const size_t g[2] = {round_up(gx, lx), round_up(gy, ly)}, l[2] = {lx, ly};
    cl_int st = clEnqueueNDRangeKernel(a->c->queue, a->c->k[a->k], 2, NULL, g, l, 0, NULL,
                                       gt_ocl_event(a->c));
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clEnqueueNDRangeKernel", st, "%s, global %zux%zu, local %zux%zu",
                           name, g[0], g[1], l[0], l[1]);
    return 0;
}

/* --- checks ----------------------------------------------------------------- */

static int want_f32(const gt_tensor *t, const char *role, gt_err *err)
{
    if (!t)
        return gt_err_set(err, "%s is missing", role);
    if (t->type != GT_TYPE_F32)
        return gt_err_set(err, "%s '%s' is %s, expected f32", role, t->name, gt_type_name(t->type));
    if (t->offset % 4 != 0)
        return gt_err_set(err, "%s '%s' starts at offset %zu, not a multiple of 4", role, t->name,
                          t->offset);
    return 0;
}

static int want_shape(const gt_tensor *t, int64_t ne0, int64_t ne1, const char *role, gt_err *err)
{
    if (t->ne[0] != ne0 || t->ne[1] != ne1)
        return gt_err_set(err, "%s '%s' is %lld x %lld, expected %lld x %lld", role, t->name,
                          (long long)t->ne[0], (long long)t->ne[1], (long long)ne0,
                          (long long)ne1);
    return 0;
}

/* A weight matrix's type and alignment: f32 rows are read as floats, the
 * others as ushorts (values, or the scales of quantized blocks). GGUF
 * aligns tensors to 32 bytes, so only a hand-made view can fail this. */
static int want_weight(const gt_tensor *w, int *ot, gt_err *err)
{
    *ot = gt_ocl_type_index(w->type);
    if (*ot < 0)
        return gt_err_set(err, "weight '%s' has type %s, which has no OpenCL kernel", w->name,
                          gt_type_name(w->type));
    const size_t align = w->type == GT_TYPE_F32 ? 4 : 2;
    if (w->offset % align != 0)
        return gt_err_set(err, "weight '%s' (%s) at offset %zu is not %zu-byte aligned", w->name,
                          gt_type_name(w->type), w->offset, align);
    if (gt_tensor_row_bytes(w) == 0)
        return gt_err_set(err, "weight '%s': rows of %lld values are not whole %s blocks",
                          w->name, (long long)w->ne[0], gt_type_name(w->type));
    return 0;
}

static bool same_storage(const gt_tensor *a, const gt_tensor *b)
{
    return a->buf == b->buf && a->offset == b->offset;
}

static bool overlaps(const gt_tensor *a, const gt_tensor *b)
{
    return a->buf == b->buf && a->offset < b->offset + gt_tensor_bytes(b) &&
           b->offset < a->offset + gt_tensor_bytes(a);
}

/* --- ROPE tables ------------------------------------------------------------ */

typedef struct rope_key {
    int pos0, n_rows, rope_dim;
    float base, freq_scale, attn_factor;
    const gt_buffer *fbuf; /* the frequency factors' storage (NULL: none) */
    size_t foff;
    size_t offset; /* bytes into the table */
} rope_key;

#define MAX_ROPE_KEYS 16
#define ROPE_MAX_PAIRS 512 /* rope_dim / 2 at most (heads of up to 1024) */

static bool same_key(const rope_key *k, const gt_tensor *t)
{
    const gt_tensor *f = t->src[1];
    return k->pos0 == t->iparams[3] && k->n_rows == (int)t->ne[1] &&
           k->rope_dim == t->iparams[2] && k->base == t->fparams[0] &&
           k->freq_scale == t->fparams[1] && k->attn_factor == t->fparams[2] &&
           k->fbuf == (f ? f->buf : NULL) && k->foff == (f ? f->offset : 0);
}

/* The rope_dim/2 frequency factors of a ROPE node, read back to the host
 * (a few hundred bytes per distinct table). */
static int read_factors(ocl_ctx *c, const gt_tensor *f, int rope_dim, float *out, gt_err *err)
{
    const size_t n = (size_t)(rope_dim / 2);
    if (f->type != GT_TYPE_F32 || (size_t)(f->ne[0] * f->ne[1]) != n)
        return gt_err_set(err, "ROPE factors '%s' must be %zu f32 values (%s [%lld, %lld])",
                          f->name, n, gt_type_name(f->type), (long long)f->ne[0],
                          (long long)f->ne[1]);
    if (f->buf->host) {
        memcpy(out, (const char *)f->buf->host + f->offset, n * sizeof(float));
        return 0;
    }
    cl_mem m;
    size_t off;
    if (gt_ocl_resolve(f->buf, f->offset, n * sizeof(float), &m, &off, err))
        return -1;
    cl_int st = clEnqueueReadBuffer(c->queue, m, CL_TRUE, off, n * sizeof(float), out, 0, NULL,
                                    NULL);
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clEnqueueReadBuffer", st, "ROPE factors '%s'", f->name);
    return 0;
}

/* Computes every distinct table the graph's ROPE nodes need and uploads
 * them as one buffer. */
static int prepare_rope(ocl_ctx *c, const gt_graph *g, rope_key *keys, int *n_keys, gt_err *err)
{
    *n_keys = 0;
    size_t floats = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        if (t->op != GT_OP_ROPE || t->iparams[2] <= 0)
            continue;
        bool seen = false;
        for (int i = 0; i < *n_keys && !seen; i++)
            seen = same_key(&keys[i], t);
        if (seen)
            continue;
        if (*n_keys == MAX_ROPE_KEYS)
            return gt_err_set(err, "graph has more than %d distinct ROPE position ranges",
                              MAX_ROPE_KEYS);
        const gt_tensor *f = t->src[1];
        keys[(*n_keys)++] = (rope_key){t->iparams[3],  (int)t->ne[1],      t->iparams[2],
                                       t->fparams[0],  t->fparams[1],      t->fparams[2],
                                       f ? f->buf : NULL, f ? f->offset : 0, floats * sizeof(float)};
        if (f && f->buf == NULL)
            return gt_err_set(err, "ROPE factors '%s' have no buffer", f->name);
        floats += (size_t)t->ne[1] * (size_t)(t->iparams[2] / 2) * 2;
    }
    if (floats == 0)
        return 0;
    if (floats > c->rope_host_cap) {
        float *p = realloc(c->rope_host, floats * sizeof(float));
        if (!p)
            return gt_err_set(err, "out of memory for a %zu-float ROPE table", floats);
        c->rope_host = p;
        c->rope_host_cap = floats;
    }
    for (int i = 0; i < *n_keys; i++) {
        const rope_key *k = &keys[i];
        float *out = c->rope_host + k->offset / sizeof(float);
        const double base = k->base;
        const double freq_scale = k->freq_scale != 0.0f ? k->freq_scale : 1.0;
        const double mscale = k->attn_factor != 0.0f ? k->attn_factor : 1.0;
        float factor[ROPE_MAX_PAIRS];
        if (k->rope_dim / 2 > ROPE_MAX_PAIRS)
            return gt_err_set(err, "rope_dim %d exceeds %d", k->rope_dim, 2 * ROPE_MAX_PAIRS);
        for (int j = 0; j < k->rope_dim / 2; j++)
            factor[j] = 1.0f;
        for (int n = 0; n < g->n_nodes && k->fbuf; n++) /* the first node with this key */
            if (g->nodes[n]->op == GT_OP_ROPE && same_key(k, g->nodes[n])) {
                if (read_factors(c, g->nodes[n]->src[1], k->rope_dim, factor, err))
                    return -1;
                break;
            }
        for (int r = 0; r < k->n_rows; r++) {
            const double pos = (double)(k->pos0 + r);
            for (int j = 0; j < k->rope_dim / 2; j++) {
                /* theta_j = freq_scale * pos * base^(-2j/rope_dim) / factor_j, cos and
                 * sin times attn_factor, as in the reference */
                const double theta = freq_scale * pos * pow(base, -2.0 * j / k->rope_dim) /
                                     (double)factor[j];
                *out++ = (float)(mscale * cos(theta));
                *out++ = (float)(mscale * sin(theta));
            }
        }
    }
    const size_t bytes = floats * sizeof(float);
    if (bytes > c->rope_tab_bytes) {
        if (c->rope_tab) {
            clReleaseMemObject(c->rope_tab);
            c->n_live_mem--;
            c->live_bytes -= c->rope_tab_bytes;
            c->rope_tab = NULL;
            c->rope_tab_bytes = 0;
        }
        cl_int st;
        c->rope_tab = clCreateBuffer(c->context, CL_MEM_READ_ONLY, bytes, NULL, &st);
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clCreateBuffer", st, "ROPE table, %zu bytes", bytes);
        c->rope_tab_bytes = bytes;
        c->n_live_mem++;
        c->live_bytes += bytes;
    }
    cl_int st = clEnqueueWriteBuffer(c->queue, c->rope_tab, CL_TRUE, 0, bytes, c->rope_host, 0,
                                     NULL, NULL);
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clEnqueueWriteBuffer", st, "ROPE table, %zu bytes", bytes);
    return 0;
}

/* --- ops ---------------------------------------------------------------------- */

static int op_get_rows(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *w = t->src[0], *ids = t->src[1];
    int ot;
    if (!w || !ids)
        return gt_err_set(err, "GET_ROWS needs a table and ids");
    if (want_weight(w, &ot, err) || want_f32(t, "output", err) ||
        want_shape(t, w->ne[0], t->ne[1], "output", err))
        return -1;
    if (ids->type != GT_TYPE_I32 || ids->ne[0] * ids->ne[1] != t->ne[1] || ids->offset % 4)
        return gt_err_set(err, "ids '%s' must be %lld aligned i32 values", ids->name,
                          (long long)t->ne[1]);
    if (w->ne[1] > INT32_MAX || w->ne[0] > INT32_MAX)
        return gt_err_set(err, "table '%s' is too large", w->name);
    kargs a = args_for(c, K_GET_ROWS + ot);
    if (arg_tensor(&a, w, err))
        return -1;
    arg_ulong(&a, gt_tensor_row_bytes(w));
    arg_int(&a, (int)w->ne[1]);
    arg_int(&a, (int)w->ne[0]);
    if (arg_tensor(&a, ids, err) || arg_tensor(&a, t, err))
        return -1;
    arg_mem(&a, c->flag);
    const size_t nb = (size_t)(w->ne[0] + 31) / 32;
    return launch(&a, nb, (size_t)t->ne[1], fit(nb, (size_t)c->tune.ew_lws), 1, err);
}

/* RMS_NORM t, and when mul is given (the MUL by a norm weight that follows
 * it in place, see fuses_norm_mul) that too, in the same launch. */
static int op_rms_norm(ocl_ctx *c, const gt_tensor *t, const gt_tensor *mul, gt_err *err)
{
    const gt_tensor *x = t->src[0];
    if (want_f32(x, "input", err) || want_f32(t, "output", err) ||
        want_shape(t, x->ne[0], x->ne[1], "output", err))
        return -1;
    kargs a = args_for(c, K_RMS_NORM);
    if (arg_tensor(&a, x, err) || arg_tensor(&a, t, err))
        return -1;
    arg_int(&a, (int)x->ne[0]);
    arg_float(&a, t->fparams[0]);
    if (mul) {
        gt_tensor row = *mul->src[1];
        row.ne[1] = 1;
        if (arg_tensor(&a, &row, err))
            return -1;
    } else if (arg_tensor(&a, x, err)) { /* a placeholder the kernel does not read */
        return -1;
    }
    arg_int(&a, mul != NULL);
    const size_t lws = (size_t)c->tune.norm_lws;
    return launch(&a, (size_t)x->ne[1] * lws, 1, lws, 1, err);
}

/* Whether node m multiplies the output of RMS_NORM t by a weight row, in
 * place: then nothing can observe t between the two, and one launch does
 * both (y = x * scale * w, the same float operations in the same order). */
static bool fuses_norm_mul(const gt_tensor *t, const gt_tensor *m)
{
    const gt_tensor *w = m->src[1];
    return t->op == GT_OP_RMS_NORM && m->op == GT_OP_MUL && m->src[0] == t && w &&
           same_storage(m, t) && m->ne[0] == t->ne[0] && m->ne[1] == t->ne[1] &&
           m->type == GT_TYPE_F32 && w->type == GT_TYPE_F32 && w->ne[0] == t->ne[0] &&
           w->ne[1] >= 1 && w->offset % 4 == 0 && w->buf && !overlaps(w, t);
}

static int op_binary(ocl_ctx *c, const gt_tensor *t, int k, gt_err *err)
{
    const gt_tensor *x = t->src[0], *y = t->src[1];
    if (want_f32(x, "a", err) || want_f32(y, "b", err) || want_f32(t, "output", err) ||
        want_shape(y, x->ne[0], x->ne[1], "b", err) ||
        want_shape(t, x->ne[0], x->ne[1], "output", err))
        return -1;
    kargs a = args_for(c, k);
    if (arg_tensor(&a, x, err) || arg_tensor(&a, y, err) || arg_tensor(&a, t, err))
        return -1;
    const size_t n = (size_t)(x->ne[0] * x->ne[1]);
    arg_ulong(&a, n);
    const size_t items = (n + (size_t)c->tune.ew_width - 1) / (size_t)c->tune.ew_width;
    return launch(&a, items, 1, fit(items, (size_t)c->tune.ew_lws), 1, err);
}

static int op_scale(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *x = t->src[0];
    if (want_f32(x, "input", err) || want_f32(t, "output", err) ||
        want_shape(t, x->ne[0], x->ne[1], "output", err))
        return -1;
    if (!same_storage(t, x) && overlaps(t, x))
        return gt_err_set(err, "SCALE output '%s' partly overlaps its input", t->name);
    kargs a = args_for(c, K_SCALE);
    if (arg_tensor(&a, x, err) || arg_tensor(&a, t, err))
        return -1;
    const size_t n = (size_t)(x->ne[0] * x->ne[1]);
    arg_ulong(&a, n);
    arg_float(&a, t->fparams[0]);
    const size_t items = (n + (size_t)c->tune.ew_width - 1) / (size_t)c->tune.ew_width;
    return launch(&a, items, 1, fit(items, (size_t)c->tune.ew_lws), 1, err);
}

/* MUL (k = K_MUL), and ADD of a one-row b (K_ADD_ROW): b's row applies to
 * every row of a. */
static int op_row(ocl_ctx *c, const gt_tensor *t, int k, gt_err *err)
{
    const gt_tensor *x = t->src[0], *w = t->src[1];
    if (want_f32(x, "a", err) || want_f32(w, "b", err) || want_f32(t, "output", err) ||
        want_shape(t, x->ne[0], x->ne[1], "output", err))
        return -1;
    if (w->ne[0] != x->ne[0])
        return gt_err_set(err, "b '%s' has rows of %lld, a has %lld", w->name,
                          (long long)w->ne[0], (long long)x->ne[0]);
    /* Only b's first row is read. */
    gt_tensor row = *w;
    row.ne[1] = 1;
    kargs a = args_for(c, k);
    if (arg_tensor(&a, x, err) || arg_tensor(&a, &row, err) || arg_tensor(&a, t, err))
        return -1;
    arg_int(&a, (int)x->ne[0]);
    const size_t items = (size_t)(x->ne[0] + c->tune.ew_width - 1) / (size_t)c->tune.ew_width;
    return launch(&a, items, (size_t)x->ne[1], fit(items, (size_t)c->tune.ew_lws), 1, err);
}

static int op_rope(ocl_ctx *c, const gt_tensor *t, const rope_key *keys, int n_keys, gt_err *err)
{
    const gt_tensor *x = t->src[0];
    const int n_heads = t->iparams[0], hd = t->iparams[1], rd = t->iparams[2];
    if (want_f32(x, "input", err) || want_f32(t, "output", err) ||
        want_shape(t, x->ne[0], x->ne[1], "output", err))
        return -1;
    if (n_heads <= 0 || hd <= 0 || rd < 0 || rd % 2 || rd > hd || (int64_t)n_heads * hd > x->ne[0])
        return gt_err_set(err, "ROPE parameters (%d heads of %d, %d rotated) do not fit rows of %lld",
                          n_heads, hd, rd, (long long)x->ne[0]);
    if (!same_storage(t, x)) {
        /* The kernel rotates in place; pass-through dims come from this copy. */
        if (overlaps(t, x))
            return gt_err_set(err, "ROPE output '%s' partly overlaps its input", t->name);
        cl_mem ms, md;
        size_t os, od, n = gt_tensor_bytes(x);
        if (gt_ocl_resolve(x->buf, x->offset, n, &ms, &os, err) ||
            gt_ocl_resolve(t->buf, t->offset, n, &md, &od, err))
            return -1;
        cl_int st = clEnqueueCopyBuffer(c->queue, ms, md, os, od, n, 0, NULL, gt_ocl_event(c));
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clEnqueueCopyBuffer", st, "ROPE input, %zu bytes", n);
    }
    if (rd == 0)
        return 0;
    const rope_key *key = NULL;
    for (int i = 0; i < n_keys && !key; i++)
        if (same_key(&keys[i], t))
            key = &keys[i];
    if (!key)
        return gt_err_set(err, "ROPE table missing (internal error)");
    kargs a = args_for(c, K_ROPE);
    if (arg_tensor(&a, t, err))
        return -1;
    arg_int(&a, (int)t->ne[0]);
    arg_int(&a, n_heads);
    arg_int(&a, hd);
    arg_int(&a, rd);
    arg_int(&a, t->iparams[4] == 1);
    arg_mem(&a, c->rope_tab);
    arg_ulong(&a, key->offset);
    const size_t items = (size_t)n_heads * (size_t)(rd / 2);
    return launch(&a, items, (size_t)t->ne[1], fit(items, (size_t)c->tune.ew_lws), 1, err);
}

static int op_kv_store(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *x = t->src[0], *cache = t->src[1];
    const bool f16 = cache->type == GT_TYPE_F16; /* rounded on the device */
    if (want_f32(x, "input", err) || (!f16 && want_f32(cache, "cache", err)))
        return -1;
    const int pos0 = t->iparams[0];
    if (x->ne[0] != cache->ne[0] || pos0 < 0 || pos0 + x->ne[1] > cache->ne[1])
        return gt_err_set(err, "%lld rows of %lld at position %d do not fit cache '%s' of %lld x "
                               "%lld", (long long)x->ne[1], (long long)x->ne[0], pos0,
                          cache->name, (long long)cache->ne[1], (long long)cache->ne[0]);
    const size_t n = gt_tensor_bytes(x);
    const size_t dst_off = cache->offset + (size_t)pos0 * gt_tensor_row_bytes(cache);
    const size_t dst_n = (size_t)x->ne[1] * gt_tensor_row_bytes(cache);
    cl_mem ms, md;
    size_t os, od;
    if (gt_ocl_resolve(x->buf, x->offset, n, &ms, &os, err) ||
        gt_ocl_resolve(cache->buf, dst_off, dst_n, &md, &od, err))
        return -1;
    if (ms == md && os < od + dst_n && od < os + n)
        return gt_err_set(err, "KV_STORE source '%s' overlaps the cache rows it writes", x->name);
    if (n == 0)
        return 0;
    if (f16) {
        gt_tensor rows = *cache; /* the rows written, as the kernel's destination */
        rows.offset = dst_off;
        rows.ne[1] = x->ne[1];
        kargs a = args_for(c, K_KV_STORE_F16);
        if (arg_tensor(&a, x, err) || arg_tensor(&a, &rows, err))
            return -1;
        const size_t items = (size_t)(x->ne[0] * x->ne[1]);
        arg_ulong(&a, items);
        return launch(&a, items, 1, fit(items, (size_t)c->tune.ew_lws), 1, err);
    }
    cl_int st = clEnqueueCopyBuffer(c->queue, ms, md, os, od, n, 0, NULL, gt_ocl_event(c));
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clEnqueueCopyBuffer", st, "%zu bytes to cache offset %zu", n, od);
    return 0;
}

static int op_attention(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *q = t->src[0], *kc = t->src[1], *vc = t->src[2];
    const int n_head = t->iparams[0], n_kv = t->iparams[1], hd = t->iparams[2];
    const int pos0 = t->iparams[3], window = t->iparams[4];
    const bool f16 = kc->type == GT_TYPE_F16 && vc->type == GT_TYPE_F16;
    if (want_f32(q, "q", err) ||
        (!f16 && (want_f32(kc, "K cache", err) || want_f32(vc, "V cache", err))) ||
        want_f32(t, "output", err))
        return -1;
    if (n_head <= 0 || n_kv <= 0 || hd <= 0 || n_head % n_kv != 0)
        return gt_err_set(err, "%d heads over %d KV heads of size %d is not a valid grouping",
                          n_head, n_kv, hd);
    if (window < 0)
        return gt_err_set(err, "attention window %d is negative", window);
    if (hd > c->tune.att_hd_max)
        return gt_err_set(err, "head size %d exceeds the attention kernel's limit of %d", hd,
                          c->tune.att_hd_max);
    if (want_shape(q, (int64_t)n_head * hd, t->ne[1], "q", err) ||
        want_shape(t, (int64_t)n_head * hd, q->ne[1], "output", err) ||
        want_shape(vc, (int64_t)n_kv * hd, kc->ne[1], "V cache", err) ||
        want_shape(kc, (int64_t)n_kv * hd, kc->ne[1], "K cache", err))
        return -1;
    if (pos0 < 0 || pos0 + q->ne[1] > kc->ne[1])
        return gt_err_set(err, "rows at positions %d..%lld are past the cache's %lld", pos0,
                          (long long)(pos0 + q->ne[1] - 1), (long long)kc->ne[1]);
    /* Only the rows that are attended to need to be in the cache tensor. */
    gt_tensor k_used = *kc, v_used = *vc;
    k_used.ne[1] = v_used.ne[1] = pos0 + q->ne[1];
    kargs a = args_for(c, f16 ? K_ATTENTION_F16 : K_ATTENTION);
    if (arg_tensor(&a, q, err) || arg_tensor(&a, &k_used, err) || arg_tensor(&a, &v_used, err) ||
        arg_tensor(&a, t, err))
        return -1;
    arg_int(&a, n_head);
    arg_int(&a, n_kv);
    arg_int(&a, hd);
    arg_int(&a, pos0);
    arg_int(&a, window);
    arg_float(&a, t->fparams[0]);
    arg_local(&a, sizeof(float) * (size_t)hd);
    arg_local(&a, sizeof(float) * (size_t)c->tune.att_chunk);
    const size_t lws = (size_t)c->tune.att_lws;
    return launch(&a, lws * (size_t)n_head, (size_t)q->ne[1], lws, 1, err);
}

static int op_mul_mat(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *w = t->src[0], *x = t->src[1];
    int ot;
    if (!w || want_weight(w, &ot, err) || want_f32(x, "activations", err) ||
        want_f32(t, "output", err))
        return -1;
    if (x->ne[0] != w->ne[0])
        return gt_err_set(err, "activations '%s' have rows of %lld, weight '%s' of %lld", x->name,
                          (long long)x->ne[0], w->name, (long long)w->ne[0]);
    if (want_shape(t, w->ne[1], x->ne[1], "output", err))
        return -1;
    if (w->ne[0] > INT32_MAX || w->ne[1] > INT32_MAX || x->ne[1] > INT32_MAX)
        return gt_err_set(err, "MUL_MAT of %lld x %lld by %lld rows is too large",
                          (long long)w->ne[1], (long long)w->ne[0], (long long)x->ne[1]);
    const ocl_tuning *tu = &c->tune;
    const size_t n_out = (size_t)w->ne[1], n_tok = (size_t)x->ne[1];
    const bool mv = n_tok <= (size_t)tu->mv_max_tok;
    kargs a = args_for(c, (mv ? K_MATVEC : K_MATMUL) + ot);
    if (arg_tensor(&a, w, err))
        return -1;
    arg_ulong(&a, gt_tensor_row_bytes(w));
    arg_int(&a, (int)w->ne[0]);
    arg_int(&a, (int)n_out);
    if (arg_tensor(&a, x, err))
        return -1;
    if (mv) {
        if (arg_tensor(&a, t, err))
            return -1;
        const size_t groups = (n_out + (size_t)tu->mv_rows - 1) / (size_t)tu->mv_rows;
        return launch(&a, groups * (size_t)tu->mv_lws, n_tok, (size_t)tu->mv_lws, 1, err);
    }
    arg_int(&a, (int)n_tok);
    if (arg_tensor(&a, t, err))
        return -1;
    const size_t gx = (n_out + (size_t)tu->mm_rn - 1) / (size_t)tu->mm_rn;
    const size_t gy = (n_tok + (size_t)tu->mm_rm - 1) / (size_t)tu->mm_rm;
    return launch(&a, gx, gy, fit(gx, (size_t)tu->mm_lx), fit(gy, (size_t)tu->mm_ly), err);
}

/* --- mixture of experts (kernels/moe.cl) --------------------------------------- */

static int want_ids(const gt_tensor *ids, int64_t k, int64_t rows, gt_err *err)
{
    if (ids->type != GT_TYPE_I32 || ids->ne[0] != k || ids->ne[1] != rows || ids->offset % 4)
        return gt_err_set(err, "ids '%s' must be [%lld, %lld] aligned i32", ids->name,
                          (long long)k, (long long)rows);
    return 0;
}

static int op_moe(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0], *b = t->src[1], *ids = t->src[2];
    if (!a || !b)
        return gt_err_set(err, "%s needs two inputs", gt_op_name(t->op));
    const int64_t n_tok = t->op == GT_OP_MUL_MAT_ID ? ids->ne[1] : t->ne[1];
    if (n_tok > INT32_MAX || a->ne[0] > INT32_MAX || a->ne[1] > INT32_MAX || t->ne[0] > INT32_MAX)
        return gt_err_set(err, "%s is too large", gt_op_name(t->op));
    kargs k;
    if (t->op == GT_OP_MOE_WEIGHTS) {
        if (want_f32(a, "logits", err) || want_f32(t, "output", err) ||
            want_shape(t, b->ne[0], a->ne[1], "output", err) || want_ids(b, t->ne[0], a->ne[1], err))
            return -1;
        k = args_for(c, K_MOE_WEIGHTS);
        if (arg_tensor(&k, a, err))
            return -1;
        arg_int(&k, (int)a->ne[0]);
        if (arg_tensor(&k, b, err) || arg_tensor(&k, t, err))
            return -1;
        arg_int(&k, (int)t->ne[0]);
        arg_int(&k, t->iparams[0]);
        return launch(&k, (size_t)t->ne[1], 1, 1, 1, err);
    }
    if (t->op == GT_OP_MOE_SUM) {
        if (want_f32(a, "src0", err) || want_f32(b, "weights", err) ||
            want_f32(t, "output", err) || want_shape(t, a->ne[0], b->ne[1], "output", err))
            return -1;
        if (a->ne[1] != b->ne[0] * b->ne[1])
            return gt_err_set(err, "MOE_SUM: %lld rows for %lld x %lld weights",
                              (long long)a->ne[1], (long long)b->ne[1], (long long)b->ne[0]);
        k = args_for(c, K_MOE_SUM);
        if (arg_tensor(&k, a, err) || arg_tensor(&k, b, err) || arg_tensor(&k, t, err))
            return -1;
        arg_int(&k, (int)t->ne[0]);
        arg_int(&k, (int)b->ne[0]);
        const size_t gx = round_up((size_t)t->ne[0], (size_t)c->tune.ew_lws);
        return launch(&k, gx, (size_t)t->ne[1], (size_t)c->tune.ew_lws, 1, err);
    }
    int ot;
    const int64_t n_out = t->iparams[0];
    if (!ids || want_weight(a, &ot, err) || want_f32(b, "activations", err) ||
        want_f32(t, "output", err) || want_ids(ids, ids->ne[0], ids->ne[1], err))
        return -1;
    if (n_out <= 0 || a->ne[1] % n_out || a->ne[0] != b->ne[0] ||
        b->ne[1] != (t->iparams[1] ? ids->ne[0] * ids->ne[1] : ids->ne[1]) ||
        want_shape(t, n_out, ids->ne[0] * ids->ne[1], "output", err))
        return gt_err_set(err, "MUL_MAT_ID: experts [%lld, %lld] of %lld rows x [%lld, %lld]",
                          (long long)a->ne[0], (long long)a->ne[1], (long long)n_out,
                          (long long)b->ne[0], (long long)b->ne[1]);
    k = args_for(c, K_MUL_MAT_ID + ot);
    if (arg_tensor(&k, a, err))
        return -1;
    arg_ulong(&k, gt_tensor_row_bytes(a));
    arg_int(&k, (int)a->ne[0]);
    arg_int(&k, (int)n_out);
    arg_int(&k, (int)(a->ne[1] / n_out));
    if (arg_tensor(&k, b, err) || arg_tensor(&k, ids, err))
        return -1;
    arg_int(&k, (int)ids->ne[0]);
    arg_int(&k, t->iparams[1] != 0);
    if (arg_tensor(&k, t, err))
        return -1;
    const size_t lx = (size_t)c->tune.ew_lws;
    return launch(&k, round_up((size_t)n_out, lx), (size_t)t->ne[1], lx, 1, err);
}

static int op_topk(ocl_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0];
    if (!a || want_f32(a, "logits", err))
        return -1;
    if (t->type != GT_TYPE_I32 || t->ne[1] != a->ne[1] || t->ne[0] > a->ne[0] ||
        a->ne[0] > INT32_MAX)
        return gt_err_set(err, "TOPK: top %lld of [%lld, %lld] into an i32 [%lld, %lld]",
                          (long long)t->ne[0], (long long)a->ne[0], (long long)a->ne[1],
                          (long long)t->ne[0], (long long)t->ne[1]);
    kargs k = args_for(c, K_TOPK);
    if (arg_tensor(&k, a, err))
        return -1;
    arg_int(&k, (int)a->ne[0]);
    if (arg_tensor(&k, t, err))
        return -1;
    arg_int(&k, (int)t->ne[0]);
    return launch(&k, (size_t)t->ne[1], 1, 1, 1, err);
}

/* --- compute ------------------------------------------------------------------ */

static void profile_collect(ocl_ctx *c, double wall);

static int enqueue(ocl_ctx *c, const gt_tensor *t, const rope_key *keys, int n_keys, gt_err *err)
{
    switch (t->op) {
    case GT_OP_NONE: return 0;
    case GT_OP_GET_ROWS: return op_get_rows(c, t, err);
    case GT_OP_RMS_NORM: return op_rms_norm(c, t, NULL, err);
    case GT_OP_MUL_MAT: return op_mul_mat(c, t, err);
    case GT_OP_ADD:
        return t->src[1]->ne[1] == 1 && t->src[0]->ne[1] > 1 ? op_row(c, t, K_ADD_ROW, err)
                                                              : op_binary(c, t, K_ADD, err);
    case GT_OP_MUL: return op_row(c, t, K_MUL, err);
    case GT_OP_ROPE: return op_rope(c, t, keys, n_keys, err);
    case GT_OP_KV_STORE: return op_kv_store(c, t, err);
    case GT_OP_ATTENTION: return op_attention(c, t, err);
    case GT_OP_SILU_MUL: return op_binary(c, t, K_SILU_MUL, err);
    case GT_OP_GELU_MUL: return op_binary(c, t, K_GELU_MUL, err);
    case GT_OP_SCALE: return op_scale(c, t, err);
    case GT_OP_TOPK: return op_topk(c, t, err);
    case GT_OP_MOE_WEIGHTS:
    case GT_OP_MUL_MAT_ID:
    case GT_OP_MOE_SUM: return op_moe(c, t, err);
    default: return gt_err_set(err, "op %d is not implemented", (int)t->op);
    }
}

int gt_ocl_compute(gt_backend *b, const gt_graph *g, gt_err *err)
{
    ocl_ctx *c = ocl_of(b);
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    rope_key keys[MAX_ROPE_KEYS];
    int n_keys = 0;
    c->cur_op = GT_OP_NONE;
    bool has_get_rows = false;
    for (int n = 0; n < g->n_nodes; n++)
        has_get_rows |= g->nodes[n]->op == GT_OP_GET_ROWS;
    if (prepare_rope(c, g, keys, &n_keys, err) != 0)
        return gt_err_wrap(err, "OpenCL");
    if (has_get_rows && c->flag_dirty) {
        const cl_int zero = 0;
        cl_int st = clEnqueueFillBuffer(c->queue, c->flag, &zero, sizeof zero, 0, 16, 0, NULL, NULL);
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clEnqueueFillBuffer", st, "GET_ROWS flag");
        c->flag_dirty = false;
    }
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        c->cur_op = t->op > GT_OP_NONE && t->op < GT_OP_COUNT ? (int)t->op : GT_OP_NONE;
        if (n + 1 < g->n_nodes && fuses_norm_mul(t, g->nodes[n + 1])) {
            if (op_rms_norm(c, t, g->nodes[n + 1], err) != 0) {
                clFinish(c->queue);
                return gt_err_wrap(err, "nodes %d-%d (RMS_NORM '%s' with MUL '%s')", n, n + 1,
                                   t->name, g->nodes[n + 1]->name);
            }
            n++;
            continue;
        }
        if (enqueue(c, t, keys, n_keys, err) != 0) {
            clFinish(c->queue); /* what was enqueued may still use the buffers */
            return gt_err_wrap(err, "node %d (%s '%s')", n, gt_op_name(t->op), t->name);
        }
    }
    cl_int st = clFinish(c->queue);
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clFinish", st, "after %d nodes", g->n_nodes);
    if (c->profile) {
        clock_gettime(CLOCK_MONOTONIC, &w1);
        profile_collect(c, (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec));
    }
    if (has_get_rows) {
        cl_int flag[3];
        st = clEnqueueReadBuffer(c->queue, c->flag, CL_TRUE, 0, sizeof flag, flag, 0, NULL, NULL);
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clEnqueueReadBuffer", st, "GET_ROWS flag");
        if (flag[0]) {
            c->flag_dirty = true;
            for (int n = 0; n < g->n_nodes; n++)
                if (g->nodes[n]->op == GT_OP_GET_ROWS)
                    return gt_err_set(err, "node %d (GET_ROWS '%s'): GET_ROWS: id %d (row %d) "
                                           "outside a table of %lld rows", n, g->nodes[n]->name,
                                      flag[1], flag[2], (long long)g->nodes[n]->src[0]->ne[1]);
        }
    }
    return 0;
}

cl_event *gt_ocl_event(ocl_ctx *c)
{
    if (!c->profile)
        return NULL;
    if (c->prof_count == c->prof_cap) {
        const int cap = c->prof_cap ? 2 * c->prof_cap : 1024;
        cl_event *ev = realloc(c->prof_ev, sizeof *ev * (size_t)cap);
        if (ev)
            c->prof_ev = ev;
        int *op = realloc(c->prof_op, sizeof *op * (size_t)cap);
        if (op)
            c->prof_op = op;
        if (!ev || !op)
            return NULL; /* profiling is best effort */
        c->prof_cap = cap;
    }
    c->prof_op[c->prof_count] = c->cur_op;
    return &c->prof_ev[c->prof_count++];
}

/* After a graph's clFinish: the device-side time of each command. */
static void profile_collect(ocl_ctx *c, double wall)
{
    for (int i = 0; i < c->prof_count; i++) {
        cl_ulong t0 = 0, t1 = 0;
        if (clGetEventProfilingInfo(c->prof_ev[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                    NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(c->prof_ev[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                    NULL) == CL_SUCCESS && t1 >= t0) {
            c->prof_s[c->prof_op[i]] += 1e-9 * (double)(t1 - t0);
            c->prof_n[c->prof_op[i]]++;
        }
        clReleaseEvent(c->prof_ev[i]);
    }
    c->prof_count = 0;
    c->prof_wall += wall;
    c->prof_graphs++;
}

void gt_ocl_profile_report(ocl_ctx *c)
{
    for (int i = 0; i < c->prof_count; i++)
        clReleaseEvent(c->prof_ev[i]);
    c->prof_count = 0;
    free(c->prof_ev);
    free(c->prof_op);
    c->prof_ev = NULL;
    c->prof_op = NULL;
    if (!c->profile || c->prof_graphs == 0)
        return;
    double busy = 0;
    for (int op = 0; op < GT_OP_COUNT; op++)
        busy += c->prof_s[op];
    fprintf(stderr, "opencl profile: %ld graphs, %.3f ms wall, %.3f ms in commands (%.1f%%)\n",
            c->prof_graphs, 1e3 * c->prof_wall, 1e3 * busy,
            c->prof_wall > 0 ? 100 * busy / c->prof_wall : 0.0);
    for (int op = 0; op < GT_OP_COUNT; op++)
        if (c->prof_n[op])
            fprintf(stderr, "  %-10s %8ld commands %10.3f ms %5.1f%%  %8.1f us each\n",
                    op == GT_OP_NONE ? "(tables)" : gt_op_name((gt_op)op), c->prof_n[op],
                    1e3 * c->prof_s[op], busy > 0 ? 100 * c->prof_s[op] / busy : 0.0,
                    1e6 * c->prof_s[op] / (double)c->prof_n[op]);
}

bool gt_ocl_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len)
{
    (void)b;
    char none[1];
    if (!why || why_len == 0) {
        why = none;
        why_len = sizeof none;
    }
    if (op <= GT_OP_NONE || op >= GT_OP_COUNT) {
        snprintf(why, why_len, "op %d is not an op", (int)op);
        return false;
    }
    if (op == GT_OP_MUL_MAT || op == GT_OP_GET_ROWS || op == GT_OP_MUL_MAT_ID) {
        if (gt_ocl_type_index(type) >= 0)
            return true;
        snprintf(why, why_len, "no OpenCL kernel for %s weights (have f32, f16, bf16, q8_0, "
                               "q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k)",
                 gt_type_name(type));
        return false;
    }
    if (type == GT_TYPE_F32)
        return true;
    /* F16 K/V caches (kv_type f16): kv_store_f16 and attention_f16. */
    if (type == GT_TYPE_F16 && (op == GT_OP_KV_STORE || op == GT_OP_ATTENTION))
        return true;
    snprintf(why, why_len, "%s runs on f32 activations only, not %s", gt_op_name(op),
             gt_type_name(type));
    return false;
}
