/* cpu_matmul.c: MUL_MAT, t[i,j] = sum_k w[j,k] * x[i,k], straight from the
 * weight's own blocks.
 *
 * Two paths, chosen per node by the number of activation rows n_tok:
 *
 * Dot path (decode, small batches, or no BLAS). Weight bytes dominate, so
 * each weight row is read once per node and dotted with every activation
 * row while it sits in L1. By default every weight type is dotted with the
 * F32 activations as they are (fdot: Q8_0/Q4_0/Q4_1 blocks are widened to
 * floats in registers), which keeps decode as accurate as the BLAS path.
 * With GT_CPU_ACT=q8, the types with a qdot kernel (Q8_0, Q4_0, Q4_1,
 * Q5_0, Q4_K, Q6_K; cpu.h) instead first quantize the activations to 8-bit
 * blocks (all threads share one copy, split by rows, then a barrier;
 * consecutive products of the same input, q/k/v and gate/up, reuse that
 * copy) and the dot products are integer (cpu_qdot.h; four activation rows
 * share each weight read through qdot4, as fdot4 does on the f32 path).
 * That rounding costs some agreement with the reference (the act-q8 cells'
 * tolerances, matrices/README.md) and buys decode speed: with the packed
 * Q4_0/Q8_0 panels, decode ran 1.4-1.9x the f32 path at 1 thread
 * (backends/cpu/README.md). Weight
 * rows are handed out in chunks, each thread starting at its own chunk and
 * then stealing with one atomic add per chunk: about four chunks per thread
 * keeps the atomics negligible while a thread slowed by a neighbour process
 * does not hold everyone up. While a row is dotted, the row PREFETCH_BYTES
 * ahead is prefetched: one core's hardware prefetch alone does not keep
 * enough misses in flight.
 *
 * BLAS path (prefill: n_tok >= blas_min_batch). A tile of weight rows is
 * dequantized into the thread's own scratch (never the whole matrix: the
 * tile is capped at TILE_BYTES) and multiplied with cblas_sgemm against all
 * activation rows, writing the tile's output columns in place (ldc = n_out).
 * Each thread runs its own single-threaded sgemm (OpenBLAS is set to one
 * thread at init), so the pool, not the BLAS, owns the cores: no
 * oversubscription, and dequantization overlaps other threads' sgemm. Tiles
 * are sized for one per thread (up to TILE_BYTES): every sgemm call packs
 * the whole activation matrix again, and measured prefill (SmolLM2 Q8_0,
 * pp512) ran ~10% slower with two tiles per thread and ~20% with four.
 * F32 weights go to sgemm in place, no copy at all.
 *
 * With act=q8, the batches that would go to BLAS take the integer GEMM
 * instead where the weight type has one (cpu_igemm.c), and Q4_0 weights
 * mapped from the model file take their repacked copy below that
 * (cpu_packed.c). */
#include "cpu.h"

#include <string.h>

/* Upper bound on one thread's dequantized tile. */
#define TILE_BYTES (4u << 20)
/* Weight rows dotted with all activation rows before moving on (L1 reuse). */
#define DOT_ROW_BLOCK 16
/* How far ahead of the row being dotted its successors are prefetched.
 * Measured on SmolLM2 decode (Xeon, KVM guest, CPU time per token): no
 * software prefetch 20.8/23.5 ms (Q4_0/Q8_0), the next rows' prefetches
 * issued in one burst 18.1/20.7 ms (the burst stalls on full fill
 * buffers), one row's prefetches interleaved with each row's dot product
 * 2-4 KiB ahead 11.6-14.7/15.2-17.6 ms. */
#define PREFETCH_BYTES 4096

static inline void prefetch_row(const char *p, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(p + off, 0, 3);
}

/* The Q8-activation kernel for this weight type, or NULL: fdot then. */
static gt_cpu_qdot_fn act_qdot(const gt_cpu_ctx *c, gt_type t)
{
    return c->act_q8 ? c->k.qdot[t] : NULL;
}

static bool use_blas(const gt_cpu_ctx *c, const gt_tensor *t)
{
    return c->blas.sgemm && t->src[1]->ne[1] >= c->blas_min_batch;
}

static int64_t tile_rows(int64_t n_out, int64_t k, int nth)
{
    int64_t cap = (int64_t)(TILE_BYTES / (sizeof(float) * (size_t)k));
    cap = cap < 16 ? 16 : cap / 16 * 16;
    int64_t rows = (n_out + nth - 1) / nth;
    rows = (rows + 15) / 16 * 16;
    return rows < cap ? rows : cap;
}

void gt_cpu_mul_mat_scratch(const gt_cpu_ctx *c, const gt_tensor *t, size_t *act_bytes,
                            size_t *thread_floats)
{
    const gt_tensor *w = t->src[0];
    const int64_t k = w->ne[0];
    *act_bytes = 0;
    *thread_floats = 0;
    if (gt_cpu_igemm_takes(c, t)) {
        *act_bytes = gt_cpu_act_row_bytes(k) * (size_t)t->src[1]->ne[1];
        *thread_floats = gt_cpu_igemm_thread_floats(t);
    } else if (use_blas(c, t)) {
        if (w->type != GT_TYPE_F32)
            *thread_floats = (size_t)(tile_rows(w->ne[1], k, c->n_threads) * k);
    } else if (act_qdot(c, w->type)) {
        *act_bytes = gt_cpu_act_row_bytes(k) * (size_t)t->src[1]->ne[1];
    }
}

/* Next chunk for this thread: first its own, then whatever is left. */
static inline int64_t next_chunk(atomic_int *counter, int64_t *mine, int nth)
{
    const int64_t c = *mine;
    *mine = (int64_t)atomic_fetch_add_explicit(counter, 1, memory_order_relaxed) + nth;
    return c;
}

static void mul_mat_blas(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, int ith, int nth)
{
    const gt_tensor *w = t->src[0], *x = t->src[1];
    const int64_t k = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
    const size_t wrow = gt_tensor_row_bytes(w);
    const char *wbase = gt_tensor_host(w);
    const float *xa = gt_cpu_f32(x);
    float *out = gt_cpu_f32(t);
    float *tile = c->tscratch[ith];
    const int64_t rows_per = tile_rows(n_out, k, nth);
    const int64_t n_tiles = (n_out + rows_per - 1) / rows_per;
    int64_t mine = ith;
    for (int64_t ti = next_chunk(counter, &mine, nth); ti < n_tiles; ti = next_chunk(counter, &mine, nth)) {
        const int64_t r0 = ti * rows_per;
        const int64_t rows = n_out - r0 < rows_per ? n_out - r0 : rows_per;
        const float *wt;
        if (w->type == GT_TYPE_F32) {
            wt = (const float *)(wbase + (size_t)r0 * wrow);
        } else {
            for (int64_t r = 0; r < rows; r++)
                c->k.dequant[w->type](wbase + (size_t)(r0 + r) * wrow, tile + r * k, k);
            wt = tile;
        }
        c->blas.sgemm(GT_CPU_ROW_MAJOR, GT_CPU_NO_TRANS, GT_CPU_TRANS, (int)n_tok, (int)rows, (int)k,
                      1.0f, xa, (int)k, wt, (int)k, 0.0f, out + r0, (int)n_out);
    }
}

static void mul_mat_dot(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act,
                        int ith, int nth)
{
    const gt_tensor *w = t->src[0], *x = t->src[1];
    const int64_t k = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
    const size_t wrow = gt_tensor_row_bytes(w);
    const char *wbase = gt_tensor_host(w);
    const float *xa = gt_cpu_f32(x);
    float *out = gt_cpu_f32(t);
    const gt_cpu_qdot_fn qdot = act_qdot(c, w->type);
    const gt_cpu_fdot_fn fdot = c->k.fdot[w->type];
    const gt_cpu_fdot4_fn fdot4 = c->k.fdot4[w->type];
    const gt_cpu_qdot4_fn qdot4 = qdot ? c->k.qdot4[w->type] : NULL;
    const int64_t nb = k / GT_CPU_QK;
    gt_cpu_act8 act = {0};
    if (qdot)
        gt_cpu_quantize_rows(c, xa, n_tok, k, reuse_act, &act, ith, nth);
    const int8_t *aq = act.q;
    const float *ad = act.d, *as = gt_cpu_act_sums(&act, w->type);

    const int64_t n_chunks = nth == 1 ? 1 : (int64_t)nth * 4;
    int64_t per = (n_out + n_chunks - 1) / n_chunks;
    per = per < DOT_ROW_BLOCK ? DOT_ROW_BLOCK : per;
    const int64_t n_real = (n_out + per - 1) / per;
    int64_t mine = ith;
    for (int64_t ci = next_chunk(counter, &mine, nth); ci < n_real; ci = next_chunk(counter, &mine, nth)) {
        const int64_t c0 = ci * per, c1 = c0 + per < n_out ? c0 + per : n_out;
        for (int64_t r0 = c0; r0 < c1; r0 += DOT_ROW_BLOCK) {
            const int64_t r1 = r0 + DOT_ROW_BLOCK < c1 ? r0 + DOT_ROW_BLOCK : c1;
            for (int64_t i = 0; i < n_tok; i++) {
                float *o = out + i * n_out;
                if (qdot4 && i + 4 <= n_tok) { /* four rows per weight read, as fdot4 */
                    const int8_t *const q4[4] = {aq + i * k, aq + (i + 1) * k, aq + (i + 2) * k,
                                                 aq + (i + 3) * k};
                    const float *const d4[4] = {ad + i * nb, ad + (i + 1) * nb, ad + (i + 2) * nb,
                                                ad + (i + 3) * nb};
                    const float *const s4[4] = {as + i * nb, as + (i + 1) * nb, as + (i + 2) * nb,
                                                as + (i + 3) * nb};
                    float v[4];
                    for (int64_t r = r0; r < r1; r++) {
                        if (i == 0)
                            prefetch_row(wbase + (size_t)r * wrow + PREFETCH_BYTES, wrow);
                        qdot4(wbase + (size_t)r * wrow, q4, d4, s4, nb, v);
                        for (int j = 0; j < 4; j++)
                            o[j * n_out + r] = v[j];
                    }
                    i += 3;
                } else if (qdot) {
                    const int8_t *q = aq + i * k;
                    const float *d = ad + i * nb, *s = as + i * nb;
                    for (int64_t r = r0; r < r1; r++) {
                        if (i == 0)
                            prefetch_row(wbase + (size_t)r * wrow + PREFETCH_BYTES, wrow);
                        o[r] = qdot(wbase + (size_t)r * wrow, q, d, s, nb);
                    }
                } else if (fdot4 && i + 4 <= n_tok) { /* four rows per weight read */
                    const float *const x4[4] = {xa + i * k, xa + (i + 1) * k, xa + (i + 2) * k,
                                                xa + (i + 3) * k};
                    float v[4];
                    for (int64_t r = r0; r < r1; r++) {
                        if (i == 0)
                            prefetch_row(wbase + (size_t)r * wrow + PREFETCH_BYTES, wrow);
                        fdot4(wbase + (size_t)r * wrow, x4, k, v);
                        for (int j = 0; j < 4; j++)
                            o[j * n_out + r] = v[j];
                    }
                    i += 3;
                } else {
                    const float *xi = xa + i * k;
                    for (int64_t r = r0; r < r1; r++) {
                        if (i == 0)
                            prefetch_row(wbase + (size_t)r * wrow + PREFETCH_BYTES, wrow);
                        o[r] = fdot(wbase + (size_t)r * wrow, xi, k);
                    }
                }
            }
        }
    }
}

bool gt_cpu_mul_mat_quantizes(const gt_cpu_ctx *c, const gt_tensor *t)
{
    return gt_cpu_igemm_takes(c, t) || (!use_blas(c, t) && act_qdot(c, t->src[0]->type) != NULL);
}

void gt_cpu_mul_mat(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act, int ith,
                    int nth)
{
    if (gt_cpu_igemm_takes(c, t))
        gt_cpu_igemm(c, t, counter, reuse_act, ith, nth);
    else if (gt_cpu_packed_takes(c, t))
        gt_cpu_mul_mat_packed(c, t, counter, reuse_act, ith, nth);
    else if (use_blas(c, t))
        mul_mat_blas(c, t, counter, ith, nth);
    else
        mul_mat_dot(c, t, counter, reuse_act, ith, nth);
}
