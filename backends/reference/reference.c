/* reference.c: the oracle backend. Every other backend is judged against
 * what this file computes, so it is written to be checked by reading: each
 * op is a direct transcription of its definition in gt/backend.h, every sum
 * accumulated in double, in one fixed order.
 *
 * The numerics definition. Each output element is one chain of IEEE double
 * operations in a fixed order; the comment above each op spells it out. For
 * the two ops that matter:
 *   MUL_MAT    t[i,j] = (float)s, where s = 0; for k = 0..K-1:
 *              s += (double)w[j,k] * x[i,k]   (w[j,:] from gt_dequantize_row)
 *   ATTENTION  per row i and head h: score[p] = (q . k_p, summed over d in
 *              order) * scale; softmax with exp() and a denominator summed
 *              over p in order; out[d] = (float)((sum over p in order of
 *              score[p] * v_p[d]) / denom)
 * That definition is what the first, single-threaded scalar version of this
 * file computed; tests/reference_definition.c keeps that version and
 * tests/test_reference.c checks that this one gives the same bytes.
 *
 * How it is fast without changing a bit:
 *   1. Threads split outputs, never sums (reference_pool.c): MUL_MAT's output
 *      columns in blocks of 8, ATTENTION's (row, head) pairs, the rows of the
 *      element-wise ops. Who computes an output does not change how.
 *   2. Vectors run ACROSS outputs, never along a sum: MUL_MAT computes 8
 *      output columns for 8 tokens at once, and lane l of a vector holds
 *      column j+l's own sum, taken over k = 0..K-1 in order exactly as the
 *      scalar loop takes it; attention does 8 keys' scores or 8 output
 *      dimensions at once the same way. These are plain fixed-width C loops
 *      the compiler turns into vector multiplies and adds; REF_CLONES builds
 *      them for avx512f and avx2 besides the baseline (picked at load time).
 *      Element-wise IEEE multiplies and adds round the same in any lane of
 *      any ISA, so the ISA does not change a bit either.
 *   3. Work done once, not per use: a block of weight rows is dequantized
 *      once and reused for every token of the batch; activations and cached
 *      keys are converted to double once (exact).
 * This file must be compiled without floating-point contraction
 * (-ffp-contract=off, backends/CMakeLists.txt): a fused multiply-add rounds
 * once where the definition rounds twice.
 *
 * Threads: GT_REF_THREADS=N if set, else the n_threads the backend is opened
 * with (e.g. -t), else every core this process may run on. The result is
 * the same bytes for any N. */
#include "gt/backend.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference.h"

#define MAX_THREADS 256

/* The vectorized loops, built for several ISAs (x86-64 ELF: an ifunc picks
 * one when the library loads); one portable build elsewhere. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define REF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define REF_CLONES
#endif

typedef struct ref_ctx {
    ref_pool *pool;
    int n_threads;
    double *shared;     /* a node's data prepared once for all threads */
    size_t shared_cap;  /* (doubles) */
    double *per_thread; /* n_threads scratch areas of thread_cap doubles */
    size_t thread_cap;
} ref_ctx;

static float *f32(const gt_tensor *t) { return (float *)gt_tensor_host(t); }

static const char *row_ptr(const gt_tensor *t, int64_t row)
{
    return (const char *)gt_tensor_host(t) + (size_t)row * gt_tensor_row_bytes(t);
}

/* Grows a 64-byte aligned buffer of doubles to at least n (contents lost). */
static int reserve(double **buf, size_t *cap, size_t n, gt_err *err)
{
    if (n <= *cap)
        return 0;
    const size_t bytes = (n * sizeof(double) + 63) & ~(size_t)63;
    double *p = aligned_alloc(64, bytes);
    if (!p)
        return gt_err_set(err, "reference: out of memory (%zu bytes of scratch)", bytes);
    free(*buf);
    *buf = p;
    *cap = bytes / sizeof(double);
    return 0;
}

/* Makes `shared` hold n_shared doubles and every thread's area n_thread. */
static int reserve_scratch(ref_ctx *c, size_t n_shared, size_t n_thread, gt_err *err)
{
    n_thread = (n_thread + 7) & ~(size_t)7; /* keep each area 64-byte aligned */
    if (reserve(&c->shared, &c->shared_cap, n_shared, err) != 0)
        return -1;
    if (n_thread > c->thread_cap) {
        size_t cap = 0;
        free(c->per_thread);
        c->per_thread = NULL;
        c->thread_cap = 0;
        if (reserve(&c->per_thread, &cap, n_thread * (size_t)c->n_threads, err) != 0)
            return -1;
        c->thread_cap = n_thread;
    }
    return 0;
}

static double *thread_scratch(const ref_ctx *c, int thread)
{
    return c->per_thread + (size_t)thread * c->thread_cap;
}

/* ---- row-wise ops ------------------------------------------------------------
 * Each computes rows [i0, i1) of t; rows are independent (in place too). */

/* t[i,:] = dequant(a[ids[i], :]) */
static int op_get_rows(gt_tensor *t, gt_err *err)
{
    const gt_tensor *table = t->src[0];
    const int32_t *ids = (const int32_t *)gt_tensor_host(t->src[1]);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        if (ids[i] < 0 || ids[i] >= table->ne[1])
            return gt_err_set(err, "GET_ROWS: id %d outside table of %lld rows", ids[i],
                              (long long)table->ne[1]);
        gt_dequantize_row(table->type, row_ptr(table, ids[i]), f32(t) + i * t->ne[0], t->ne[0]);
    }
    return 0;
}

/* t[i,:] = a[i,:] / sqrt(mean(a[i,:]^2) + eps) */
static void rows_rms_norm(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int64_t n = t->ne[0];
    const float eps = t->fparams[0];
    for (int64_t i = i0; i < i1; i++) {
        const float *x = f32(t->src[0]) + i * n;
        float *y = f32(t) + i * n;
        double ss = 0.0;
        for (int64_t j = 0; j < n; j++)
            ss += (double)x[j] * x[j];
        const double scale = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)(x[j] * scale);
    }
}

/* t = a + b; a one-row b (a bias) is added to every row */
static void rows_add(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int64_t n = t->ne[0];
    const bool row = t->src[1]->ne[1] == 1;
    for (int64_t i = i0; i < i1; i++) {
        const float *a = f32(t->src[0]) + i * n, *b = f32(t->src[1]) + (row ? 0 : i * n);
        float *y = f32(t) + i * n;
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)((double)a[j] + b[j]);
    }
}

/* t[i,:] = a[i,:] * b[0,:] */
static void rows_mul(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int64_t n = t->ne[0];
    const float *w = f32(t->src[1]);
    for (int64_t i = i0; i < i1; i++) {
        const float *x = f32(t->src[0]) + i * n;
        float *y = f32(t) + i * n;
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)((double)x[j] * w[j]);
    }
}

/* Rotates dimension pairs of every head by
 * theta_j = freq_scale * pos * base^(-2j/rope_dim) / factor_j and scales the
 * rotated pair by attn_factor (backend.h). The angle depends on (row, j)
 * only, so it is computed once for all heads. */
static void rows_rope(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int n_heads = t->iparams[0], head_dim = t->iparams[1], rope_dim = t->iparams[2];
    const int pos0 = t->iparams[3], neox = t->iparams[4] == 1;
    const double base = t->fparams[0];
    const double freq_scale = t->fparams[1] != 0.0f ? t->fparams[1] : 1.0;
    const double mscale = t->fparams[2] != 0.0f ? t->fparams[2] : 1.0;
    const float *factor = t->src[1] ? f32(t->src[1]) : NULL;
    const int64_t n = t->ne[0];
    for (int64_t i = i0; i < i1; i++) {
        const float *x = f32(t->src[0]) + i * n;
        float *y = f32(t) + i * n;
        if (y != x)
            memcpy(y, x, sizeof(float) * (size_t)n);
        const double pos = (double)(pos0 + i);
        for (int j = 0; j < rope_dim / 2; j++) {
            const double ff = factor ? (double)factor[j] : 1.0;
            const double theta = freq_scale * pos * pow(base, -2.0 * j / rope_dim) / ff;
            const double c = mscale * cos(theta), s = mscale * sin(theta);
            const int d0 = neox ? j : 2 * j;
            const int d1 = neox ? j + rope_dim / 2 : 2 * j + 1;
            for (int h = 0; h < n_heads; h++) {
                float *v = y + (int64_t)h * head_dim;
                const double x0 = v[d0], x1 = v[d1];
                v[d0] = (float)(x0 * c - x1 * s);
                v[d1] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

/* ROPE's optional factors: F32, one per rotated pair. */
static int check_rope(const gt_tensor *t, gt_err *err)
{
    const gt_tensor *f = t->src[1];
    if (f && (f->type != GT_TYPE_F32 || f->ne[0] * f->ne[1] != t->iparams[2] / 2))
        return gt_err_set(err, "ROPE factors '%s' must be %d f32 values (%s [%lld, %lld])", f->name,
                          t->iparams[2] / 2, gt_type_name(f->type), (long long)f->ne[0],
                          (long long)f->ne[1]);
    return 0;
}

/* t = silu(a) * b, silu(x) = x / (1 + e^-x) */
static void rows_silu_mul(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int64_t n = t->ne[0];
    const float *a = f32(t->src[0]), *b = f32(t->src[1]);
    float *y = f32(t);
    for (int64_t i = i0 * n; i < i1 * n; i++) {
        const double x = a[i];
        y[i] = (float)(x / (1.0 + exp(-x)) * b[i]);
    }
}

/* t = gelu(a) * b, gelu in its tanh form (backend.h) */
static void rows_gelu_mul(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int64_t n = t->ne[0];
    const float *a = f32(t->src[0]), *b = f32(t->src[1]);
    float *y = f32(t);
    const double c = 0.79788456080286535588; /* sqrt(2/pi) */
    for (int64_t i = i0 * n; i < i1 * n; i++) {
        const double x = a[i];
        y[i] = (float)(0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x))) * b[i]);
    }
}

/* t = a * fparams[0] (a float product, as defined) */
static void rows_scale(gt_tensor *t, int64_t i0, int64_t i1)
{
    const int64_t n = t->ne[0];
    const float *a = f32(t->src[0]);
    float *y = f32(t);
    for (int64_t i = i0 * n; i < i1 * n; i++)
        y[i] = a[i] * t->fparams[0];
}

/* cache[pos0 + i, :] = a[i, :] */
/* An F16 cache holds gt_f32_to_f16 of each value (round to nearest even). */
static void op_kv_store(gt_tensor *t)
{
    const gt_tensor *a = t->src[0], *cache = t->src[1];
    const int64_t n = a->ne[0] * a->ne[1];
    if (cache->type == GT_TYPE_F16) {
        uint16_t *dst = (uint16_t *)gt_tensor_host(cache) + (int64_t)t->iparams[0] * cache->ne[0];
        const float *src = f32(a);
        for (int64_t i = 0; i < n; i++)
            dst[i] = gt_f32_to_f16(src[i]);
        return;
    }
    float *dst = f32(cache) + (int64_t)t->iparams[0] * cache->ne[0];
    memcpy(dst, f32(a), sizeof(float) * (size_t)n);
}

typedef void (*rows_fn)(gt_tensor *t, int64_t i0, int64_t i1);
typedef struct rows_job {
    gt_tensor *t;
    rows_fn fn;
} rows_job;

static void rows_task(void *arg, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const rows_job *j = arg;
    j->fn(j->t, begin, end);
}

/* Runs fn over t's rows, on the pool when there are enough of them. */
static void for_rows(ref_ctx *c, gt_tensor *t, rows_fn fn)
{
    enum { GRAIN = 16384 }; /* elements per chunk: a wake-up is worth that much */
    const int64_t per_chunk = t->ne[0] >= GRAIN ? 1 : GRAIN / (t->ne[0] > 0 ? t->ne[0] : 1);
    rows_job j = {t, fn};
    ref_pool_for(c->pool, t->ne[1], per_chunk, rows_task, &j);
}

/* ---- MUL_MAT -----------------------------------------------------------------
 * t[i,j] = sum_k w[j,k] * x[i,k], the sum in double from k = 0 upwards.
 *
 * Weight rows are taken MM_COLS at a time: dequantized, converted to double
 * and interleaved as wp[k][l] = w[j0+l, k], so that one vector load holds
 * the k-th element of MM_COLS rows. x is converted to double once (xd). For
 * MM_TOKS tokens at a time, sum[t][l] += wp[k][l] * xd[i+t][k] then runs k
 * from 0 to K-1: each (token, column) pair has its own sum, in the order of
 * the definition; the tile only keeps MM_TOKS x MM_COLS of them in flight. */

#define MM_COLS 8 /* output columns per block (the vector lanes) */
#define MM_TOKS 8 /* tokens per tile (independent vectors of sums) */

/* y[i, j0 + l] for all tokens i and l < n_cols, from the block wp (K, MM_COLS). */
REF_CLONES static void mm_block(const double *restrict wp, const double *restrict xd, int64_t k,
                                int64_t n_tok, float *restrict y, int64_t n_out, int64_t j0,
                                int n_cols)
{
    int64_t i = 0;
    for (; i + MM_TOKS <= n_tok; i += MM_TOKS) {
        double sum[MM_TOKS][MM_COLS] = {{0}};
        const double *x = xd + i * k;
        for (int64_t c = 0; c < k; c++) {
            const double *w = wp + c * MM_COLS;
#pragma GCC unroll 16
            for (int t = 0; t < MM_TOKS; t++) {
                const double xc = x[t * k + c];
#pragma GCC unroll 16
                for (int l = 0; l < MM_COLS; l++)
                    sum[t][l] += w[l] * xc;
            }
        }
        for (int t = 0; t < MM_TOKS; t++)
            for (int l = 0; l < n_cols; l++)
                y[(i + t) * n_out + j0 + l] = (float)sum[t][l];
    }
    for (; i < n_tok; i++) { /* the last tokens, one at a time */
        double sum[MM_COLS] = {0};
        const double *x = xd + i * k;
        for (int64_t c = 0; c < k; c++) {
            const double *w = wp + c * MM_COLS;
#pragma GCC unroll 16
            for (int l = 0; l < MM_COLS; l++)
                sum[l] += w[l] * x[c];
        }
        for (int l = 0; l < n_cols; l++)
            y[i * n_out + j0 + l] = (float)sum[l];
    }
}

typedef struct mm_job {
    const ref_ctx *c;
    const gt_tensor *w, *x;
    float *y;
    double *xd; /* (n_tok, k) x as double */
    int64_t k, n_out, n_tok;
} mm_job;

/* xd[i,:] = (double)x[i,:] for tokens [i0, i1) */
static void mm_convert_task(void *arg, int64_t i0, int64_t i1, int thread)
{
    (void)thread;
    const mm_job *m = arg;
    for (int64_t e = i0 * m->k; e < i1 * m->k; e++)
        m->xd[e] = f32(m->x)[e];
}

/* Column blocks [b0, b1) of MM_COLS columns each. */
static void mm_blocks_task(void *arg, int64_t b0, int64_t b1, int thread)
{
    const mm_job *m = arg;
    const int64_t k = m->k;
    double *wp = thread_scratch(m->c, thread);  /* (k, MM_COLS) the block, interleaved */
    float *wrow = (float *)(wp + k * MM_COLS); /* (k) one dequantized row */
    for (int64_t b = b0; b < b1; b++) {
        const int64_t j0 = b * MM_COLS;
        const int n_cols = m->n_out - j0 < MM_COLS ? (int)(m->n_out - j0) : MM_COLS;
        for (int l = 0; l < MM_COLS; l++) {
            if (l < n_cols)
                gt_dequantize_row(m->w->type, row_ptr(m->w, j0 + l), wrow, k);
            for (int64_t c = 0; c < k; c++)
                wp[c * MM_COLS + l] = l < n_cols ? (double)wrow[c] : 0.0; /* 0: unused lane */
        }
        mm_block(wp, m->xd, k, m->n_tok, m->y, m->n_out, j0, n_cols);
    }
}

static int op_mul_mat(ref_ctx *c, gt_tensor *t, gt_err *err)
{
    mm_job m = {.c = c, .w = t->src[0], .x = t->src[1], .y = f32(t)};
    m.k = m.w->ne[0];
    m.n_out = m.w->ne[1];
    m.n_tok = m.x->ne[1];
    const size_t per_thread = (size_t)m.k * MM_COLS + ((size_t)m.k + 1) / 2;
    if (reserve_scratch(c, (size_t)(m.n_tok * m.k), per_thread, err) != 0)
        return gt_err_wrap(err, "MUL_MAT");
    m.xd = c->shared;
    ref_pool_for(c->pool, m.n_tok, 1 + 65536 / (m.k > 0 ? m.k : 1), mm_convert_task, &m);
    const int64_t n_blocks = (m.n_out + MM_COLS - 1) / MM_COLS;
    /* Enough chunks per thread that a slow one is made up for by the others. */
    int64_t chunk = n_blocks / ((int64_t)c->n_threads * 16);
    ref_pool_for(c->pool, n_blocks, chunk < 1 ? 1 : chunk, mm_blocks_task, &m);
    return 0;
}

/* ---- ATTENTION ---------------------------------------------------------------
 * Causal attention with grouped KV heads: query head h reads KV head
 * h / (n_head / n_kv_head). Row i sees cache rows 0..pos0+i, or with a
 * window w (iparams[4]) only the last w of them. For each (row, head):
 *   score[p] = (sum over d from 0 of (double)q[d] * k_p[d]) * scale
 *   max = the largest score; score[p] = exp(score[p] - max);
 *   denom = sum over p from first of score[p]
 *   out[d] = (float)((sum over p from first of score[p] * v_p[d]) / denom)
 * The keys are packed once per node, as doubles, ATT_KEYS rows at a time
 * with the rows interleaved (kt[block][d][l] = k_{block*ATT_KEYS + l}[d]),
 * so that one vector holds dimension d of ATT_KEYS keys: each lane sums its
 * own key's dot product over d in order. The value sum does ATT_DIMS output
 * dimensions at once, each lane summing over p in order. */

#define ATT_KEYS 8 /* keys scored at once (the vector lanes) */
#define ATT_DIMS 8 /* output dimensions summed at once (the vector lanes) */

typedef struct att_job {
    const ref_ctx *c;
    const gt_tensor *t;
    int n_head, n_kv, hd, pos0, window, group;
    int64_t kv_dim, q_dim;
    int b_lo, n_blocks; /* key blocks packed: b_lo .. b_lo + n_blocks - 1 */
    double *kt;         /* (n_kv, n_blocks, hd, ATT_KEYS) the packed keys */
    double scale;
    const float *kc, *vc; /* the caches as F32 (an F16 cache widened first) */
} att_job;

/* The first cache row that row i sees. */
static int att_first(const att_job *a, int64_t i)
{
    const int n_seen = a->pos0 + (int)i + 1;
    return a->window > 0 && n_seen > a->window ? n_seen - a->window : 0;
}

/* Packs key blocks: item = kv head * n_blocks + block. Rows past the
 * newest position are zeros (their lanes are computed, never used). */
static void att_pack_task(void *arg, int64_t it0, int64_t it1, int thread)
{
    (void)thread;
    const att_job *a = arg;
    const float *kc = a->kc;
    const int n_rows = a->pos0 + (int)a->t->src[0]->ne[1];
    for (int64_t it = it0; it < it1; it++) {
        const int g = (int)(it / a->n_blocks), blk = (int)(it % a->n_blocks);
        double *dst = a->kt + (size_t)it * a->hd * ATT_KEYS;
        for (int l = 0; l < ATT_KEYS; l++) {
            const int p = (a->b_lo + blk) * ATT_KEYS + l;
            const float *kp = kc + (int64_t)p * a->kv_dim + (int64_t)g * a->hd;
            for (int d = 0; d < a->hd; d++)
                dst[d * ATT_KEYS + l] = p < n_rows ? (double)kp[d] : 0.0;
        }
    }
}

/* score[p] for p in [first, n_seen), from the packed blocks of this KV head. */
REF_CLONES static void att_scores(const double *restrict kt, int b_lo, const float *restrict qh,
                                  int hd, int first, int n_seen, double scale,
                                  double *restrict score)
{
    for (int blk = first / ATT_KEYS; blk * ATT_KEYS < n_seen; blk++) {
        const double *kb = kt + (size_t)(blk - b_lo) * hd * ATT_KEYS;
        double dot[ATT_KEYS] = {0};
        for (int d = 0; d < hd; d++) {
            const double qd = qh[d];
#pragma GCC unroll 16
            for (int l = 0; l < ATT_KEYS; l++)
                dot[l] += qd * kb[d * ATT_KEYS + l];
        }
        for (int l = 0; l < ATT_KEYS; l++) {
            const int p = blk * ATT_KEYS + l;
            if (p >= first && p < n_seen)
                score[p] = dot[l] * scale;
        }
    }
}

/* out[d] = (sum over p of score[p] * v_p[d]) / denom; vh = this head's
 * dimension 0 in cache row 0, rows kv_dim apart. */
REF_CLONES static void att_values(const double *restrict score, const float *restrict vh,
                                  int64_t kv_dim, int hd, int first, int n_seen, double denom,
                                  float *restrict out)
{
    int d0 = 0;
    for (; d0 + ATT_DIMS <= hd; d0 += ATT_DIMS) {
        double acc[ATT_DIMS] = {0};
        for (int p = first; p < n_seen; p++) {
            const float *v = vh + p * kv_dim + d0;
#pragma GCC unroll 16
            for (int l = 0; l < ATT_DIMS; l++)
                acc[l] += score[p] * v[l];
        }
        for (int l = 0; l < ATT_DIMS; l++)
            out[d0 + l] = (float)(acc[l] / denom);
    }
    for (int d = d0; d < hd; d++) { /* a head_dim that is not a multiple of ATT_DIMS */
        double acc = 0.0;
        for (int p = first; p < n_seen; p++)
            acc += score[p] * vh[p * kv_dim + d];
        out[d] = (float)(acc / denom);
    }
}

/* Items: row * n_head + head. */
static void att_rows_task(void *arg, int64_t it0, int64_t it1, int thread)
{
    const att_job *a = arg;
    const gt_tensor *t = a->t;
    double *score = thread_scratch(a->c, thread); /* (n_seen) */
    for (int64_t it = it0; it < it1; it++) {
        const int64_t i = it / a->n_head;
        const int h = (int)(it % a->n_head), g = h / a->group;
        const int n_seen = a->pos0 + (int)i + 1, first = att_first(a, i);
        const float *qh = f32(t->src[0]) + i * a->q_dim + (int64_t)h * a->hd;
        att_scores(a->kt + (size_t)g * a->n_blocks * a->hd * ATT_KEYS, a->b_lo, qh, a->hd, first,
                   n_seen, a->scale, score);
        double max = -INFINITY;
        for (int p = first; p < n_seen; p++)
            if (score[p] > max)
                max = score[p];
        double denom = 0.0;
        for (int p = first; p < n_seen; p++) {
            score[p] = exp(score[p] - max);
            denom += score[p];
        }
        att_values(score, a->vc + (int64_t)g * a->hd, a->kv_dim, a->hd, first, n_seen,
                   denom, f32(t) + i * a->q_dim + (int64_t)h * a->hd);
    }
}

static int op_attention(ref_ctx *c, gt_tensor *t, gt_err *err)
{
    att_job a = {.c = c, .t = t};
    a.n_head = t->iparams[0];
    a.n_kv = t->iparams[1];
    a.hd = t->iparams[2];
    a.pos0 = t->iparams[3];
    a.window = t->iparams[4];
    a.scale = t->fparams[0];
    a.kv_dim = (int64_t)a.n_kv * a.hd;
    a.q_dim = (int64_t)a.n_head * a.hd;
    a.group = a.n_head / a.n_kv;
    const int64_t n_tok = t->src[0]->ne[1];
    const int n_rows = a.pos0 + (int)n_tok; /* cache rows 0 .. n_rows-1 are in use */
    a.b_lo = att_first(&a, 0) / ATT_KEYS;   /* row 0 sees the oldest keys */
    a.n_blocks = (n_rows + ATT_KEYS - 1) / ATT_KEYS - a.b_lo;
    const size_t packed = (size_t)a.n_kv * a.n_blocks * a.hd * ATT_KEYS;
    if (reserve_scratch(c, packed, (size_t)n_rows, err) != 0)
        return gt_err_wrap(err, "ATTENTION");
    a.kt = c->shared;
    /* F16 caches: rows 0..n_rows-1 widened exactly (gt_f16_to_f32), then
     * the same definition as F32 caches. */
    float *wide = NULL;
    a.kc = f32(t->src[1]);
    a.vc = f32(t->src[2]);
    if (t->src[1]->type == GT_TYPE_F16) {
        const size_t n = (size_t)n_rows * a.kv_dim;
        if (!(wide = malloc(2 * n * sizeof *wide)))
            return gt_err_set(err, "ATTENTION: out of memory widening the F16 cache");
        const uint16_t *k16 = gt_tensor_host(t->src[1]), *v16 = gt_tensor_host(t->src[2]);
        for (size_t i = 0; i < n; i++) {
            wide[i] = gt_f16_to_f32(k16[i]);
            wide[n + i] = gt_f16_to_f32(v16[i]);
        }
        a.kc = wide;
        a.vc = wide + n;
    }
    const int64_t per_block = (int64_t)a.hd * ATT_KEYS;
    ref_pool_for(c->pool, (int64_t)a.n_kv * a.n_blocks, 1 + 16384 / per_block, att_pack_task, &a);
    ref_pool_for(c->pool, n_tok * a.n_head, 1, att_rows_task, &a);
    free(wide);
    return 0;
}

/* ---- the backend -------------------------------------------------------------- */

static int ref_compute(gt_backend *b, const gt_graph *g, gt_err *err)
{
    ref_ctx *c = b->ctx;
    for (int n = 0; n < g->n_nodes; n++) {
        gt_tensor *t = g->nodes[n];
        int rc = 0;
        switch (t->op) {
        case GT_OP_NONE: break;
        case GT_OP_GET_ROWS: rc = op_get_rows(t, err); break;
        case GT_OP_RMS_NORM: for_rows(c, t, rows_rms_norm); break;
        case GT_OP_MUL_MAT: rc = op_mul_mat(c, t, err); break;
        case GT_OP_ADD: for_rows(c, t, rows_add); break;
        case GT_OP_MUL: for_rows(c, t, rows_mul); break;
        case GT_OP_ROPE:
            if ((rc = check_rope(t, err)) == 0)
                for_rows(c, t, rows_rope);
            break;
        case GT_OP_KV_STORE: op_kv_store(t); break;
        case GT_OP_ATTENTION: rc = op_attention(c, t, err); break;
        case GT_OP_SILU_MUL: for_rows(c, t, rows_silu_mul); break;
        case GT_OP_GELU_MUL: for_rows(c, t, rows_gelu_mul); break;
        case GT_OP_SCALE: for_rows(c, t, rows_scale); break;
        case GT_OP_TOPK:
        case GT_OP_MOE_WEIGHTS:
        case GT_OP_MUL_MAT_ID:
        case GT_OP_MOE_SUM: rc = ref_moe_compute(c->pool, t, err); break;
        default: return gt_err_set(err, "reference: op %d not implemented", (int)t->op);
        }
        if (rc != 0)
            return gt_err_wrap(err, "node %d (%s '%s')", n, gt_op_name(t->op), t->name);
    }
    return 0;
}

static bool ref_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len)
{
    (void)b;
    (void)why;
    (void)why_len;
    /* Weights of every type the runtime dequantizes (gt_dequantize_row is
     * the definition of the format, so the oracle uses nothing else). */
    if (op == GT_OP_MUL_MAT || op == GT_OP_GET_ROWS || op == GT_OP_MUL_MAT_ID)
        return gt_type_info(type) && type != GT_TYPE_I32;
    /* F16 K/V caches (kv_type f16): written by KV_STORE, read by ATTENTION. */
    if ((op == GT_OP_KV_STORE || op == GT_OP_ATTENTION) && type == GT_TYPE_F16)
        return true;
    return op > GT_OP_NONE && op < GT_OP_COUNT && type == GT_TYPE_F32;
}

static void ref_free(gt_backend *b)
{
    ref_ctx *c = b->ctx;
    if (c) {
        ref_pool_free(c->pool);
        free(c->shared);
        free(c->per_thread);
        free(c);
    }
    free(b);
}

static const gt_backend_iface REF_IFACE = {
    .free = ref_free,
    .supports = ref_supports,
    .buffer_alloc = gt_host_buffer_alloc,
    .buffer_from_host = gt_host_buffer_from_host,
    .buffer_free = gt_host_buffer_free,
    .upload = gt_host_upload,
    .download = gt_host_download,
    .compute = ref_compute,
};

static int n_cores(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The vector ISA the clones run with here (what REF_CLONES picks). */
static const char *simd_name(void)
{
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return "avx512f";
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
    return "x86-64";
#else
    return "portable";
#endif
}

static void ref_device(gt_device_info *d, int n_threads)
{
    memset(d, 0, sizeof *d);
    strcpy(d->backend, "reference");
    strcpy(d->name, "scalar C (double accumulation)");
    strcpy(d->kind, "cpu");
    strcpy(d->driver, "none");
    strcpy(d->driver_version, "-");
    if (n_threads > 0)
        snprintf(d->extra, sizeof d->extra, "threads=%d simd=%s (results do not depend on either)",
                 n_threads, simd_name());
}

static int ref_probe(gt_device_info *devs, int max, const char *driver, gt_err *err)
{
    (void)driver;
    (void)err;
    if (max > 0)
        ref_device(&devs[0], 0);
    return 1;
}

/* GT_REF_THREADS, else cfg->n_threads, else every core. */
static int ref_threads(const gt_backend_config *cfg, int *out, gt_err *err)
{
    const char *env = getenv("GT_REF_THREADS");
    if (env && env[0]) {
        char *end;
        const long v = strtol(env, &end, 10);
        if (*end || v < 1 || v > MAX_THREADS)
            return gt_err_set(err, "GT_REF_THREADS=%s: expected 1 to %d", env, MAX_THREADS);
        *out = (int)v;
        return 0;
    }
    if (cfg->n_threads < 0 || cfg->n_threads > MAX_THREADS)
        return gt_err_set(err, "n_threads=%d: expected 0 (all cores) to %d", cfg->n_threads,
                          MAX_THREADS);
    *out = cfg->n_threads > 0 ? cfg->n_threads : n_cores();
    return 0;
}

static int ref_init(const gt_backend_config *cfg, gt_backend **out, gt_err *err)
{
    *out = NULL;
    if (cfg->device != 0)
        return gt_err_set(err, "reference has one device (0), not %d", cfg->device);
    int n_threads = 1;
    if (ref_threads(cfg, &n_threads, err) != 0)
        return -1;
    gt_backend *b = calloc(1, sizeof *b);
    ref_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return gt_err_set(err, "out of memory");
    }
    b->iface = &REF_IFACE;
    b->ctx = c;
    c->n_threads = n_threads;
    if (ref_pool_new(n_threads, &c->pool, err) != 0) {
        ref_free(b);
        return -1;
    }
    ref_device(&b->info, n_threads);
    *out = b;
    return 0;
}

static const gt_backend_reg REF_REG = {
    .name = "reference",
    .description = "the oracle: double accumulation in a fixed order, any thread count",
    .probe = ref_probe,
    .init = ref_init,
};

const gt_backend_reg *gt_backend_reference_reg(void) { return &REF_REG; }
