/* cpu_packed.c: Q4_0, Q5_0 and Q8_0 weights repacked once, for act=q8 products
 * of a few activation rows (decode, and serve --parallel's decode of several
 * sequences).
 *
 * Why: the dot path (cpu_qdot.h) works one weight row at a time. Per row it
 * gathers the blocks' scales (a gather at an 18-byte stride, whose latency
 * shows in profiles) and ends in a horizontal sum; on SmolLM2 Q4_0 that
 * left decode at 0.6-0.8x llama.cpp, which repacks Q4_0 into interleaved
 * rows at load. Here 8 weight rows are interleaved (gt_cpu_pk_q4_0, _q5_0
 * and _q8_0 in cpu.h): one load gives 4 quant bytes of each of the 8 rows, one
 * vpdpbusd against 4 broadcast activation bytes adds into the 8 rows' sums
 * at once, the 8 scales are one vcvtph2ps, and 8 results are one store.
 * The packed copy holds the same bytes as the blocks it replaces.
 *
 * When: the node's weight is a Q4_0, Q5_0 or Q8_0 leaf tensor in a buffer made from host
 * memory (buffer_from_host: the model's mapped weights, which by the
 * backend contract stay unchanged for the buffer's life), act=q8, and
 * fewer activation rows than blas_min_batch (from there the integer GEMM
 * takes them). The copy is made before the first graph that needs it runs
 * (on one thread), kept in the backend, and dropped when its buffer is
 * freed. The mapped pages it replaces are handed back (MADV_PAGEOUT)
 * unless another kind of node reads the same tensor (a tied embedding's
 * GET_ROWS), and the integer GEMM repacks from the copy when there is
 * one, so the weights are not resident twice (the bench reports peak
 * RSS against its budget).
 *
 * Exactness: per row and block the sum of w * q is an exact integer (Q4_0:
 * (nibble - 8) * q, started at the activations' -8 * sum q; Q5_0 the same
 * with the fifth bit and -16 * sum q; Q8_0: (w + 128)
 * * q started at -128 * sum q), times d_w,
 * then fused-multiply-added with d_a into the row's sum: the same
 * operations for a row whatever the number of activation rows or its
 * place in the panel, so decode beside other sequences gives each the
 * bytes it gets alone (test_batching cpu_rows_alone). */
#include "cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gt/quant.h"

typedef struct gt_cpu_packed {
    const gt_buffer *buf;
    const void *src; /* the weight's first byte */
    int64_t k, n;
    gt_type type;
    void *data; /* ceil(n/8) panels of k/32 blocks */
} gt_cpu_packed;

bool gt_cpu_packed_takes(const gt_cpu_ctx *c, const gt_tensor *t)
{
    const gt_tensor *w = t->src[0];
    return c->act_q8 && c->k.pk[w->type] && w->op == GT_OP_NONE && w->buf &&
           w->buf->impl == NULL && w->ne[0] % GT_CPU_QK == 0 &&
           t->src[1]->ne[1] < c->blas_min_batch;
}

static bool is_pack_of(const gt_cpu_packed *p, const gt_tensor *w)
{
    return p->src == gt_tensor_host(w) && p->buf == w->buf && p->type == w->type &&
           p->k == w->ne[0] && p->n == w->ne[1];
}

/* The pack of w, or NULL. Graphs run their nodes in the same order each
 * time, so the search starts after the last hit. */
static gt_cpu_packed *find(gt_cpu_ctx *c, const gt_tensor *w)
{
    for (int j = 0; j < c->n_packed; j++) {
        const int i = (c->packed_hint + j) % c->n_packed;
        gt_cpu_packed *p = &c->packed[i];
        if (is_pack_of(p, w)) {
            c->packed_hint = i + 1 < c->n_packed ? i + 1 : 0;
            return p;
        }
    }
    return NULL;
}

static size_t panel_block_bytes(gt_type t)
{
    return t == GT_TYPE_Q4_0   ? sizeof(gt_cpu_pk_q4_0)
           : t == GT_TYPE_Q5_0 ? sizeof(gt_cpu_pk_q5_0)
                               : sizeof(gt_cpu_pk_q8_0);
}

/* Row r's block b into panel block o at row slot j. */
static void pack_block(gt_type t, const void *blk, void *o, int j)
{
    if (t == GT_TYPE_Q4_0) {
        const gt_block_q4_0 *x = blk;
        gt_cpu_pk_q4_0 *p = o;
        p->d[j] = x->d;
        for (int g = 0; g < 4; g++)
            memcpy(p->q[g][j], x->qs + 4 * g, 4);
    } else if (t == GT_TYPE_Q5_0) {
        const gt_block_q5_0 *x = blk;
        gt_cpu_pk_q5_0 *p = o;
        uint32_t qh;
        memcpy(&qh, x->qh, sizeof qh);
        p->d[j] = x->d;
        for (int g = 0; g < 4; g++) {
            memcpy(p->q[g][j], x->qs + 4 * g, 4);
            for (int e = 0; e < 4; e++) {
                p->h[g][0] |= ((qh >> (4 * g + e)) & 1u) << (4 * j + e);
                p->h[g][1] |= ((qh >> (16 + 4 * g + e)) & 1u) << (4 * j + e);
            }
        }
    } else {
        const gt_block_q8_0 *x = blk;
        gt_cpu_pk_q8_0 *p = o;
        p->d[j] = x->d;
        for (int g = 0; g < 8; g++)
            for (int e = 0; e < 4; e++)
                p->q[g][j][e] = (uint8_t)(x->qs[4 * g + e] + 128);
    }
}

static void pack(const gt_tensor *w, char *out)
{
    const int64_t nb = w->ne[0] / GT_CPU_QK, n = w->ne[1];
    const size_t wrow = gt_tensor_row_bytes(w), bb = panel_block_bytes(w->type);
    const size_t blk = gt_row_size(w->type, GT_CPU_QK);
    const char *base = gt_tensor_host(w);
    for (int64_t p = 0; p < (n + GT_CPU_PK_ROWS - 1) / GT_CPU_PK_ROWS; p++)
        for (int64_t b = 0; b < nb; b++) {
            char *o = out + (size_t)(p * nb + b) * bb;
            memset(o, 0, bb);
            for (int j = 0; j < GT_CPU_PK_ROWS && p * GT_CPU_PK_ROWS + j < n; j++)
                pack_block(w->type, base + (size_t)(p * GT_CPU_PK_ROWS + j) * wrow + (size_t)b * blk,
                           o, j);
        }
}

bool gt_cpu_packed_ready(gt_cpu_ctx *c, const gt_tensor *w) { return find(c, w) != NULL; }

int gt_cpu_packed_prepare(gt_cpu_ctx *c, const gt_tensor *t, bool pageout, gt_err *err)
{
    const gt_tensor *w = t->src[0];
    if (find(c, w))
        return 0;
    if (c->n_packed == c->cap_packed) {
        const int cap = c->cap_packed ? 2 * c->cap_packed : 64;
        gt_cpu_packed *np = realloc(c->packed, sizeof *np * (size_t)cap);
        if (!np)
            return gt_err_set(err, "out of memory for the packed weights' index");
        c->packed = np;
        c->cap_packed = cap;
    }
    const int64_t panels = (w->ne[1] + GT_CPU_PK_ROWS - 1) / GT_CPU_PK_ROWS;
    const size_t bytes = panel_block_bytes(w->type) * (size_t)panels * (size_t)(w->ne[0] / GT_CPU_QK);
    char *data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data)
        return gt_err_set(err, "out of memory repacking weight '%s' (%zu bytes)", w->name, bytes);
    pack(w, data);
    if (pageout) {
        /* The copy replaces the mapped bytes: let the kernel take their
         * pages back (a hint that never changes what they hold: clean file
         * pages are dropped and read again if touched; anonymous memory
         * stays or is swapped), so the weights are not resident twice. */
        const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        const uintptr_t lo = ((uintptr_t)gt_tensor_host(w) + pg - 1) / pg * pg;
        const uintptr_t hi = ((uintptr_t)gt_tensor_host(w) + gt_tensor_row_bytes(w) * (size_t)w->ne[1]) / pg * pg;
        if (hi > lo)
            (void)madvise((void *)lo, hi - lo, MADV_PAGEOUT);
    }
    c->packed[c->n_packed++] =
        (gt_cpu_packed){w->buf, gt_tensor_host(w), w->ne[0], w->ne[1], w->type, data};
    return 0;
}

void gt_cpu_packed_drop(gt_cpu_ctx *c, const gt_buffer *buf)
{
    int kept = 0;
    for (int i = 0; i < c->n_packed; i++) {
        if (buf && c->packed[i].buf != buf)
            c->packed[kept++] = c->packed[i];
        else
            free(c->packed[i].data);
    }
    c->n_packed = kept;
    c->packed_hint = 0;
    if (!buf) {
        free(c->packed);
        c->packed = NULL;
        c->cap_packed = 0;
    }
}

/* Row r's exact integer sum for block b of a panel against the activation
 * block q, started at c (-128 * sum q). */
static int32_t block_sum(gt_type t, const void *w, int64_t b, int r, const int8_t *q, int32_t c)
{
    int32_t sum;
    if (t == GT_TYPE_Q4_0) {
        const gt_cpu_pk_q4_0 *p = (const gt_cpu_pk_q4_0 *)w + b;
        sum = c / 16; /* -8 * sum q: the nibbles' offset */
        for (int g = 0; g < 4; g++)
            for (int j = 0; j < 4; j++)
                sum += (p->q[g][r][j] & 0x0F) * q[4 * g + j] + (p->q[g][r][j] >> 4) * q[16 + 4 * g + j];
    } else if (t == GT_TYPE_Q5_0) {
        const gt_cpu_pk_q5_0 *p = (const gt_cpu_pk_q5_0 *)w + b;
        sum = c / 8; /* -16 * sum q */
        for (int g = 0; g < 4; g++)
            for (int j = 0; j < 4; j++) {
                const int bit = 4 * r + j;
                const int lo = (p->q[g][r][j] & 0x0F) | (int)((p->h[g][0] >> bit) & 1) << 4;
                const int hi = (p->q[g][r][j] >> 4) | (int)((p->h[g][1] >> bit) & 1) << 4;
                sum += lo * q[4 * g + j] + hi * q[16 + 4 * g + j];
            }
    } else {
        const gt_cpu_pk_q8_0 *p = (const gt_cpu_pk_q8_0 *)w + b;
        sum = c; /* takes the +128 off */
        for (int g = 0; g < 8; g++)
            for (int j = 0; j < 4; j++)
                sum += p->q[g][r][j] * q[4 * g + j];
    }
    return sum;
}

/* Every panel block starts with its 8 rows' f16 scales. */
static uint16_t block_scale(gt_type t, const void *w, int64_t b, int r)
{
    uint16_t d;
    memcpy(&d, (const char *)w + (size_t)b * panel_block_bytes(t) + sizeof d * (size_t)r, sizeof d);
    return d;
}

/* The reference for the SIMD kernels: the same sums in the same roles. */
static void pk_scalar(gt_type t, const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0,
                      int64_t i1, float *out, int64_t ldo, int n_rows)
{
    for (int64_t i = i0; i < i1; i++)
        for (int r = 0; r < n_rows; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const int64_t at = i * a->nb + b;
                const int32_t sum = block_sum(t, w, b, r, a->q + i * a->k + b * 32, a->c[at]);
                acc += (float)sum * gt_f16_to_f32(block_scale(t, w, b, r)) * a->d[at];
            }
            out[i * ldo + r] = acc;
        }
}

void gt_cpu_pk_q4_0_scalar(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                           float *out, int64_t ldo, int n_rows)
{
    pk_scalar(GT_TYPE_Q4_0, w, nb, a, i0, i1, out, ldo, n_rows);
}

void gt_cpu_pk_q5_0_scalar(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                           float *out, int64_t ldo, int n_rows)
{
    pk_scalar(GT_TYPE_Q5_0, w, nb, a, i0, i1, out, ldo, n_rows);
}

void gt_cpu_pk_q8_0_scalar(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                           float *out, int64_t ldo, int n_rows)
{
    pk_scalar(GT_TYPE_Q8_0, w, nb, a, i0, i1, out, ldo, n_rows);
}

const void *gt_cpu_packed_data(const gt_cpu_ctx *c, const gt_tensor *w)
{
    /* Read by every thread while a graph runs: no hint to update. */
    for (int i = 0; i < c->n_packed; i++)
        if (is_pack_of(&c->packed[i], w))
            return c->packed[i].data;
    return NULL;
}

void gt_cpu_packed_row_range(gt_type t, const void *data, int64_t nb, int64_t row, int64_t b0,
                             int64_t n, uint8_t (*u)[32], float *d)
{
    const size_t bb = panel_block_bytes(t);
    const int j = (int)(row % GT_CPU_PK_ROWS);
    const char *base = (const char *)data + (size_t)(row / GT_CPU_PK_ROWS * nb + b0) * bb;
    for (int64_t b = 0; b < n; b++) {
        if (t == GT_TYPE_Q4_0) {
            const gt_cpu_pk_q4_0 *p = (const gt_cpu_pk_q4_0 *)(base + (size_t)b * bb);
            for (int g = 0; g < 4; g++)
                for (int e = 0; e < 4; e++) {
                    u[b][4 * g + e] = (uint8_t)((p->q[g][j][e] & 0x0F) + 120);
                    u[b][16 + 4 * g + e] = (uint8_t)((p->q[g][j][e] >> 4) + 120);
                }
            d[b] = gt_f16_to_f32(p->d[j]);
        } else if (t == GT_TYPE_Q5_0) {
            const gt_cpu_pk_q5_0 *p = (const gt_cpu_pk_q5_0 *)(base + (size_t)b * bb);
            for (int g = 0; g < 4; g++)
                for (int e = 0; e < 4; e++) {
                    const int bit = 4 * j + e;
                    u[b][4 * g + e] =
                        (uint8_t)((p->q[g][j][e] & 0x0F) + (((p->h[g][0] >> bit) & 1) << 4) + 112);
                    u[b][16 + 4 * g + e] =
                        (uint8_t)((p->q[g][j][e] >> 4) + (((p->h[g][1] >> bit) & 1) << 4) + 112);
                }
            d[b] = gt_f16_to_f32(p->d[j]);
        } else {
            const gt_cpu_pk_q8_0 *p = (const gt_cpu_pk_q8_0 *)(base + (size_t)b * bb);
            for (int g = 0; g < 8; g++)
                memcpy(u[b] + 4 * g, p->q[g][j], 4);
            d[b] = gt_f16_to_f32(p->d[j]);
        }
    }
}

/* Next chunk of panels for this thread: first its own, then whatever is left. */
static inline int64_t next_chunk(atomic_int *counter, int64_t *mine, int nth)
{
    const int64_t c = *mine;
    *mine = (int64_t)atomic_fetch_add_explicit(counter, 1, memory_order_relaxed) + nth;
    return c;
}

void gt_cpu_mul_mat_packed(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act,
                           int ith, int nth)
{
    const gt_tensor *w = t->src[0], *x = t->src[1];
    const int64_t k = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1], nb = k / GT_CPU_QK;
    gt_cpu_act8 a;
    gt_cpu_quantize_rows(c, gt_cpu_f32(x), n_tok, k, reuse_act, &a, ith, nth);
    const char *data = gt_cpu_packed_data(c, w);
    float *out = gt_cpu_f32(t);
    const int64_t panels = (n_out + GT_CPU_PK_ROWS - 1) / GT_CPU_PK_ROWS;
    /* About four chunks per thread (as the dot path) so a slowed thread does
     * not hold everyone up, each at least 2 panels. */
    int64_t per = (panels + 4 * nth - 1) / (4 * nth);
    per = per < 2 ? 2 : per;
    const int64_t n_chunks = (panels + per - 1) / per;
    int64_t mine = ith;
    for (int64_t ci = next_chunk(counter, &mine, nth); ci < n_chunks; ci = next_chunk(counter, &mine, nth))
        for (int64_t pi = ci * per; pi < (ci + 1) * per && pi < panels; pi++) {
            const int64_t r0 = pi * GT_CPU_PK_ROWS;
            const int rows = (int)(n_out - r0 < GT_CPU_PK_ROWS ? n_out - r0 : GT_CPU_PK_ROWS);
            c->k.pk[w->type](data + (size_t)(pi * nb) * panel_block_bytes(w->type), nb, &a, 0, n_tok,
                             out + r0, n_out, rows);
        }
}
