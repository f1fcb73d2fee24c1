/* cpu_igemm.c: MUL_MAT of a batch (prefill) as an 8-bit integer GEMM, the
 * act=q8 profile's replacement for dequantize + sgemm.
 *
 * Why: sgemm caps prefill at the machine's f32 FMA rate, and this backend
 * already reaches ~90% of it. VNNI's vpdpbusd does 64 byte products per
 * instruction against 16 FMAs, so integer products of 8-bit activations
 * with the weights' own integers can go past that ceiling.
 *
 * How, per node:
 *   1. The activations are quantized once (all threads share one copy, the
 *      dot path's layout: gt_cpu_quantize_rows), to blocks of 32 int8
 *      holding llama.cpp's Q8_0/Q8_1 numbers (cpu.h, gt_cpu_act8),
 *      whatever the weight type; Q4_K's 256-element blocks are 8
 *      sub-blocks of 32 with their own scale and min, which is the same
 *      shape (llama.cpp's Q8_K scales per 256; ours per 32 is finer).
 *   2. Weight rows are taken in panels of 16. A thread repacks its panel
 *      into its own scratch (gt_cpu_ig_block: 4 consecutive weights of
 *      each of the 16 rows side by side, as bytes biased by +128, with the
 *      row scales and mins as floats) and then multiplies it with every
 *      activation row while it sits in L1/L2. Repacking on the fly, not at
 *      load time, costs no memory and cannot go stale (the runtime hands
 *      weights over as plain host pointers); it is O(weights) per node
 *      against O(weights x rows) for the products, a few per cent at the
 *      batch sizes that take this path (measured in README.md).
 *   3. The kernel (scalar here, cpu_igemm_avx2.c, cpu_igemm_avx512.c) sums
 *      each block's products in int32 and applies d_w * d_a in float once
 *      per block, minus m_w * s_a for the K-quants' mins.
 * Exactness: the integer sums are exact, so the only rounding beyond the
 * f32 path's is the activations' 8-bit quantization, the same one the
 * act=q8 dot path makes (test_cpu.c measures the NMSE per type and ISA).
 *
 * Which nodes: act=q8, a weight type with a repacker below (Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K: every type whose scales are per 32
 * weights; Q2_K, Q3_K and Q6_K scale 16 and keep BLAS), and at least blas_min_batch activation rows (the batch size from
 * which the f32 profile goes to BLAS). Smaller batches keep the dot path,
 * where repacking would not pay. */
#include "cpu.h"

#include <string.h>

#include "gt/quant.h"

/* ---- repacking ------------------------------------------------------------
 * Each repacker decodes the nb blocks of one weight row r of the panel into
 * 32 bytes each (the weights plus 128) and hands them to store(), with the
 * block's d and m. Decoding into a plain array first lets the compiler
 * vectorize the unpacking; store() is 8 four-byte copies (perf: writing
 * byte by byte into the panel was 7% of Gemma 3's prefill in repack_q5_0). */

static inline void store(gt_cpu_ig_block *b, int r, const uint8_t u[32], float d, float m)
{
    for (int g = 0; g < 8; g++)
        memcpy(b->q[g][r], u + 4 * g, 4);
    b->d[r] = d;
    b->m[r] = m;
}

static void repack_q8_0(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q8_0 *x = row;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t u[32];
        for (int e = 0; e < 32; e++)
            u[e] = (uint8_t)(x[b].qs[e] + 128);
        store(&out[b], r, u, gt_f16_to_f32(x[b].d), 0.0f);
    }
}

/* Nibbles lo then hi, each plus bias (Q4_0: 128 - 8, Q4_1: 128). */
static inline void nibbles(const uint8_t qs[16], int bias, uint8_t u[32])
{
    for (int e = 0; e < 16; e++) {
        u[e] = (uint8_t)((qs[e] & 0x0F) + bias);
        u[e + 16] = (uint8_t)((qs[e] >> 4) + bias);
    }
}

static void repack_q4_0(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q4_0 *x = row;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t u[32];
        nibbles(x[b].qs, 128 - 8, u);
        store(&out[b], r, u, gt_f16_to_f32(x[b].d), 0.0f);
    }
}

/* Q4_1 and Q5_1: w = d*q + m, so m enters as -m (w = d*q - m_ig). */
static void repack_q4_1(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q4_1 *x = row;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t u[32];
        nibbles(x[b].qs, 128, u);
        store(&out[b], r, u, gt_f16_to_f32(x[b].d), -gt_f16_to_f32(x[b].m));
    }
}

/* A Q5 block: nibbles plus the fifth bit, bit e of qh, plus bias. */
static inline void q5(const uint8_t qs[16], const uint8_t qh4[4], int bias, uint8_t u[32])
{
    uint32_t qh;
    memcpy(&qh, qh4, sizeof qh);
    nibbles(qs, bias, u);
    for (int e = 0; e < 32; e++)
        u[e] = (uint8_t)(u[e] + (((qh >> e) & 1) << 4));
}

static void repack_q5_0(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q5_0 *x = row;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t u[32];
        q5(x[b].qs, x[b].qh, 128 - 16, u);
        store(&out[b], r, u, gt_f16_to_f32(x[b].d), 0.0f);
    }
}

static void repack_q5_1(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q5_1 *x = row;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t u[32];
        q5(x[b].qs, x[b].qh, 128, u);
        store(&out[b], r, u, gt_f16_to_f32(x[b].d), -gt_f16_to_f32(x[b].m));
    }
}

/* IQ4_NL: the nibble indexes the 16 int8 levels. */
static void repack_iq4_nl(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_iq4_nl *x = row;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t u[32];
        for (int e = 0; e < 16; e++) {
            u[e] = (uint8_t)(gt_iq4nl_levels[x[b].qs[e] & 0x0F] + 128);
            u[e + 16] = (uint8_t)(gt_iq4nl_levels[x[b].qs[e] >> 4] + 128);
        }
        store(&out[b], r, u, gt_f16_to_f32(x[b].d), 0.0f);
    }
}

/* One K-quant super-block into panel blocks out[0..7]: sub-block s with
 * scale d*sc and min dmin*m as gt_dequantize_q4_K rounds them; qh (Q5_K's
 * fifth bits, bit s of qh[e]) or NULL (Q4_K). */
static void repack_k_super(float d, float dmin, const uint8_t scales[12], const uint8_t *qs,
                           const uint8_t *qh, int r, gt_cpu_ig_block *out)
{
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m, u[32];
        gt_k_scale_min(scales, s, &sc, &m);
        const uint8_t *q = qs + 32 * (s / 2);
        for (int e = 0; e < 32; e++)
            u[e] = (uint8_t)(((s & 1) ? q[e] >> 4 : q[e] & 0x0F) + (qh ? 16 * ((qh[e] >> s) & 1) : 0) +
                             128);
        store(&out[s], r, u, d * (float)sc, dmin * (float)m);
    }
}

static void repack_q4_K(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q4_K *x = row;
    for (int64_t i = 0; i < nb / 8; i++)
        repack_k_super(gt_f16_to_f32(x[i].d), gt_f16_to_f32(x[i].dmin), x[i].scales, x[i].qs, NULL, r,
                       out + 8 * i);
}

static void repack_q5_K(const void *row, int r, int64_t nb, gt_cpu_ig_block *out)
{
    const gt_block_q5_K *x = row;
    for (int64_t i = 0; i < nb / 8; i++)
        repack_k_super(gt_f16_to_f32(x[i].d), gt_f16_to_f32(x[i].dmin), x[i].scales, x[i].qs, x[i].qh,
                       r, out + 8 * i);
}

typedef void (*repack_fn)(const void *row, int r, int64_t nb, gt_cpu_ig_block *out);

static repack_fn repacker(gt_type t)
{
    switch (t) {
    case GT_TYPE_Q8_0: return repack_q8_0;
    case GT_TYPE_Q4_0: return repack_q4_0;
    case GT_TYPE_Q4_1: return repack_q4_1;
    case GT_TYPE_Q5_0: return repack_q5_0;
    case GT_TYPE_Q5_1: return repack_q5_1;
    case GT_TYPE_IQ4_NL: return repack_iq4_nl;
    case GT_TYPE_Q4_K: return repack_q4_K;
    case GT_TYPE_Q5_K: return repack_q5_K;
    default: return NULL;
    }
}

/* Rows [r0, r0 + n_rows) of w into nb panel blocks; the rest of the 16
 * zero. From the decode path's packed copy when w has one (cpu_packed.c):
 * its mapped pages may have been handed back. */
static void repack_panel(const gt_tensor *w, const void *packed, int64_t r0, int n_rows, int64_t nb,
                         gt_cpu_ig_block *out)
{
    const repack_fn fn = repacker(w->type);
    const size_t wrow = gt_tensor_row_bytes(w);
    const char *base = (const char *)gt_tensor_host(w) + (size_t)r0 * wrow;
    for (int r = 0; r < n_rows; r++) {
        if (!packed) {
            fn(base + (size_t)r * wrow, r, nb, out);
            continue;
        }
        for (int64_t b0 = 0; b0 < nb; b0 += 64) { /* 64 blocks at a time on the stack */
            uint8_t u[64][32];
            float d[64];
            const int64_t n = nb - b0 < 64 ? nb - b0 : 64;
            gt_cpu_packed_row_range(w->type, packed, nb, r0 + r, b0, n, u, d);
            for (int64_t b = 0; b < n; b++)
                store(&out[b0 + b], r, u[b], d[b], 0.0f);
        }
    }
    for (int r = n_rows; r < GT_CPU_IG_ROWS; r++)
        for (int64_t b = 0; b < nb; b++) {
            for (int g = 0; g < 8; g++)
                memset(out[b].q[g][r], 128, 4);
            out[b].d[r] = out[b].m[r] = 0.0f;
        }
}

/* ---- the scalar kernel ------------------------------------------------------
 * The reference for the SIMD ones: the same sums in the same roles. */
void gt_cpu_igemm_scalar(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                         float *out, int64_t ldo, int n_rows)
{
    for (int64_t i = i0; i < i1; i++) {
        const int8_t *q = a->q + i * a->k;
        const float *d = a->d + i * a->nb, *s = a->s + i * a->nb;
        for (int r = 0; r < n_rows; r++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < a->nb; b++) {
                int32_t sum = 0;
                for (int e = 0; e < 32; e++)
                    sum += ((int)w[b].q[e / 4][r][e % 4] - 128) * q[b * 32 + e];
                acc += (float)sum * w[b].d[r] * d[b] - w[b].m[r] * s[b];
            }
            out[i * ldo + r] = acc;
        }
    }
}

/* ---- the node ------------------------------------------------------------ */

bool gt_cpu_igemm_takes(const gt_cpu_ctx *c, const gt_tensor *t)
{
    return c->act_q8 && repacker(t->src[0]->type) && t->src[1]->ne[1] >= c->blas_min_batch;
}

size_t gt_cpu_igemm_thread_floats(const gt_tensor *t)
{
    const int64_t nb = t->src[0]->ne[0] / GT_CPU_QK;
    return ((size_t)nb * sizeof(gt_cpu_ig_block) + sizeof(float) - 1) / sizeof(float);
}

/* Next panel for this thread: first its own, then whatever is left. */
static inline int64_t next_panel(atomic_int *counter, int64_t *mine, int nth)
{
    const int64_t p = *mine;
    *mine = (int64_t)atomic_fetch_add_explicit(counter, 1, memory_order_relaxed) + nth;
    return p;
}

void gt_cpu_igemm(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act, int ith,
                  int nth)
{
    const gt_tensor *w = t->src[0], *x = t->src[1];
    const int64_t k = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
    gt_cpu_act8 a;
    gt_cpu_quantize_rows(c, gt_cpu_f32(x), n_tok, k, reuse_act, &a, ith, nth);
    a.s = gt_cpu_act_sums(&a, w->type); /* the kernels' min term takes s */
    gt_cpu_ig_block *panel = (gt_cpu_ig_block *)c->tscratch[ith];
    const void *packed = gt_cpu_packed_data(c, w);
    float *out = gt_cpu_f32(t);
    const int64_t n_panels = (n_out + GT_CPU_IG_ROWS - 1) / GT_CPU_IG_ROWS;
    int64_t mine = ith;
    for (int64_t p = next_panel(counter, &mine, nth); p < n_panels; p = next_panel(counter, &mine, nth)) {
        const int64_t r0 = p * GT_CPU_IG_ROWS;
        const int n_rows = (int)(n_out - r0 < GT_CPU_IG_ROWS ? n_out - r0 : GT_CPU_IG_ROWS);
        repack_panel(w, packed, r0, n_rows, a.nb, panel);
        c->k.igemm(panel, &a, 0, n_tok, out + r0, n_out, n_rows);
    }
}
