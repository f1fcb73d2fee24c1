/* cpu_kernels_scalar.c: the portable kernel table (GT_CPU_ISA=scalar, and
 * what any non-x86 build runs).
 *
 * Same algorithms as the SIMD tables, written as plain loops so it doubles
 * as the readable statement of what the SIMD kernels must compute:
 *   fdot  quantized weights x f32 activations (the default dot path): each
 *         block's 32 weights times the activations summed in float, times
 *         the block scale (Q4_1: plus m times the activations' block sum);
 *   qdot  the GT_CPU_ACT=q8 path: activations quantized to 8-bit blocks
 *         with the same scale and round-to-nearest-even as the SIMD tables,
 *         integer block sums, float accumulation. */
#include "cpu.h"

#include <float.h>
#include <math.h>
#include <string.h>

static void quantize_act(const float *x, int64_t n, int8_t *q, float *d)
{
    for (int64_t b = 0; b < n / GT_CPU_QK; b++) {
        const float *xb = x + b * GT_CPU_QK;
        float amax = 0.0f;
        bool bad = false;
        for (int j = 0; j < GT_CPU_QK; j++) {
            const float a = fabsf(xb[j]);
            bad |= !(a <= FLT_MAX); /* NaN or inf */
            amax = a > amax ? a : amax;
        }
        /* d = amax/127 and its reciprocal 127/amax: the SIMD kernels use the
         * same two expressions so every ISA quantizes identically. A NaN or
         * inf anywhere must reach the output, not vanish in the int8s. */
        if (bad) {
            memset(q + b * GT_CPU_QK, 0, GT_CPU_QK);
            d[b] = NAN;
            continue;
        }
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < GT_CPU_QK; j++) {
            const int v = (int)nearbyintf(xb[j] * id);
            q[b * GT_CPU_QK + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        d[b] = amax / 127.0f;
    }
}

static float qdot_q8_0(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    (void)s;
    const gt_block_q8_0 *x = w;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int sum = 0;
        for (int j = 0; j < GT_CPU_QK; j++)
            sum += x[b].qs[j] * q[b * GT_CPU_QK + j];
        acc += gt_f16_to_f32(x[b].d) * d[b] * (float)sum;
    }
    return acc;
}

/* A Q4/Q5 block's integer sum with the activations qa: nibbles used
 * unsigned (low ones elements 0..15, high ones 16..31), each with its
 * fifth bit from qh (bit j for element j; 0 for Q4). */
static int nibble_sum(const uint8_t qs[16], uint32_t qh, const int8_t *qa)
{
    int sum = 0;
    for (int j = 0; j < GT_CPU_QK / 2; j++) {
        const int lo = (qs[j] & 0x0F) | (int)((qh >> j) & 1) << 4;
        const int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        sum += lo * qa[j] + hi * qa[j + GT_CPU_QK / 2];
    }
    return sum;
}

/* The offsets come back through s: sum (q-8)*a = sum q*a - 8*sum a (Q4_0;
 * Q5_0 with 16), and Q4_1's min m times s. */
static float qdot_q4_0(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    const gt_block_q4_0 *x = w;
    float acc = 0.0f, off = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const float dw = gt_f16_to_f32(x[b].d);
        acc += dw * d[b] * (float)nibble_sum(x[b].qs, 0, q + b * GT_CPU_QK);
        off += dw * s[b];
    }
    return acc - 8.0f * off;
}

static float qdot_q4_1(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    const gt_block_q4_1 *x = w;
    float acc = 0.0f, off = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        acc += gt_f16_to_f32(x[b].d) * d[b] * (float)nibble_sum(x[b].qs, 0, q + b * GT_CPU_QK);
        off += gt_f16_to_f32(x[b].m) * s[b];
    }
    return acc + off;
}

static float qdot_q5_0(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    const gt_block_q5_0 *x = w;
    float acc = 0.0f, off = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint32_t qh;
        memcpy(&qh, x[b].qh, sizeof qh);
        const float dw = gt_f16_to_f32(x[b].d);
        acc += dw * d[b] * (float)nibble_sum(x[b].qs, qh, q + b * GT_CPU_QK);
        off += dw * s[b];
    }
    return acc - 16.0f * off;
}

/* Q4_K: run i of a super-block (sub-scale sc, min mn) meets activation
 * block 8*sb + i; dot = sum d*sc*da * sum(u*a) - dmin*mn * s (cpu_qdot.h). */
static float qdot_q4_K(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    const gt_block_q4_K *x = w;
    float acc = 0.0f, off = 0.0f;
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        const float dw = gt_f16_to_f32(x[sb].d), dmin = gt_f16_to_f32(x[sb].dmin);
        for (int i = 0; i < 8; i++) {
            uint8_t sc, mn;
            gt_k_scale_min(x[sb].scales, i, &sc, &mn);
            const int64_t b = sb * 8 + i;
            const uint8_t *qs = x[sb].qs + 32 * (i / 2);
            int sum = 0;
            for (int j = 0; j < GT_CPU_QK; j++)
                sum += ((qs[j] >> (4 * (i % 2))) & 0x0F) * q[b * GT_CPU_QK + j];
            acc += dw * (float)sc * d[b] * (float)sum;
            off += dmin * (float)mn * s[b];
        }
    }
    return acc - off;
}

/* Q6_K: per run of 32, the two groups' int8 scales multiply their integer
 * sums exactly; d * da once per run. */
static float qdot_q6_K(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    (void)s;
    const gt_block_q6_K *x = w;
    float acc = 0.0f;
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        const float dw = gt_f16_to_f32(x[sb].d);
        for (int i = 0; i < 8; i++) {
            const int64_t b = sb * 8 + i;
            const int h = i / 4, g = i % 4;
            const uint8_t *ql = x[sb].ql + 64 * h + 32 * (g % 2), *qh = x[sb].qh + 32 * h;
            int sum = 0;
            for (int j = 0; j < GT_CPU_QK; j++) {
                const int u = ((ql[j] >> (4 * (g / 2))) & 0x0F) | ((qh[j] >> (2 * g)) & 3) << 4;
                sum += x[sb].scales[2 * i + j / 16] * (u - 32) * q[b * GT_CPU_QK + j];
            }
            acc += dw * d[b] * (float)sum;
        }
    }
    return acc;
}

/* Quantized weights x f32 activations: a block's products are summed in
 * four partial sums (as dot_f32), then scaled once by the block's d. */
static float fdot_q8_0(const void *w, const float *x, int64_t n)
{
    const gt_block_q8_0 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK8_0; i++) {
        const float *xb = x + i * GT_QK8_0;
        float s[4] = {0, 0, 0, 0};
        for (int j = 0; j < GT_QK8_0; j++)
            s[j % 4] += (float)b[i].qs[j] * xb[j];
        acc += gt_f16_to_f32(b[i].d) * ((s[0] + s[1]) + (s[2] + s[3]));
    }
    return acc;
}

static float fdot_q4_0(const void *w, const float *x, int64_t n)
{
    const gt_block_q4_0 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK4_0; i++) {
        const float *xb = x + i * GT_QK4_0;
        float s[4] = {0, 0, 0, 0};
        for (int j = 0; j < GT_QK4_0 / 2; j++) {
            s[j % 2] += (float)((b[i].qs[j] & 0x0F) - 8) * xb[j];
            s[2 + j % 2] += (float)((b[i].qs[j] >> 4) - 8) * xb[j + GT_QK4_0 / 2];
        }
        acc += gt_f16_to_f32(b[i].d) * ((s[0] + s[1]) + (s[2] + s[3]));
    }
    return acc;
}

/* sum (d*q + m)*x = d * sum q*x + m * sum x. */
static float fdot_q4_1(const void *w, const float *x, int64_t n)
{
    const gt_block_q4_1 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK4_1; i++) {
        const float *xb = x + i * GT_QK4_1;
        float s[2] = {0, 0}, sx[2] = {0, 0};
        for (int j = 0; j < GT_QK4_1 / 2; j++) {
            s[0] += (float)(b[i].qs[j] & 0x0F) * xb[j];
            s[1] += (float)(b[i].qs[j] >> 4) * xb[j + GT_QK4_1 / 2];
            sx[0] += xb[j];
            sx[1] += xb[j + GT_QK4_1 / 2];
        }
        acc += gt_f16_to_f32(b[i].d) * (s[0] + s[1]) + gt_f16_to_f32(b[i].m) * (sx[0] + sx[1]);
    }
    return acc;
}

/* ---- Q5_0, Q5_1, IQ4_NL and the K-quants -----------------------------------
 * Each block's integers are decoded first (where every element's bits live
 * is spelled out at the top of runtime/src/quant_k.c), then dotted with the
 * activations per scale group (sub-block): with x ~ d1*q - m1,
 *   sum x*a = d1 * sum q*a - m1 * sum a.
 * The dequantizers form every product in the order gt_dequantize_row does
 * (scale first, then times q, then the min subtracted), so they are
 * bit-exact with it; this project builds as ISO C (-std=c11), where GCC
 * does not contract a multiply and an add into an FMA. */

/* Element j (0..31) of a Q5 block: nibble plus the fifth bit from qh. */
static int q5_value(const uint8_t qs[16], uint32_t qh, int j)
{
    const int nib = j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
    return nib | (int)(((qh >> j) & 1) << 4);
}

static float fdot_q5_0(const void *w, const float *x, int64_t n)
{
    const gt_block_q5_0 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK5_0; i++) {
        const float *xb = x + i * GT_QK5_0;
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        float s[4] = {0, 0, 0, 0};
        for (int j = 0; j < GT_QK5_0; j++)
            s[j % 4] += (float)(q5_value(b[i].qs, qh, j) - 16) * xb[j];
        acc += gt_f16_to_f32(b[i].d) * ((s[0] + s[1]) + (s[2] + s[3]));
    }
    return acc;
}

static float fdot_q5_1(const void *w, const float *x, int64_t n)
{
    const gt_block_q5_1 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK5_1; i++) {
        const float *xb = x + i * GT_QK5_1;
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        float s[2] = {0, 0}, sx[2] = {0, 0};
        for (int j = 0; j < GT_QK5_1; j++) {
            s[j % 2] += (float)q5_value(b[i].qs, qh, j) * xb[j];
            sx[j % 2] += xb[j];
        }
        acc += gt_f16_to_f32(b[i].d) * (s[0] + s[1]) + gt_f16_to_f32(b[i].m) * (sx[0] + sx[1]);
    }
    return acc;
}

static float fdot_iq4_nl(const void *w, const float *x, int64_t n)
{
    const gt_block_iq4_nl *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK4_NL; i++) {
        const float *xb = x + i * GT_QK4_NL;
        float s[4] = {0, 0, 0, 0};
        for (int j = 0; j < GT_QK4_NL / 2; j++) {
            s[j % 2] += (float)gt_iq4nl_levels[b[i].qs[j] & 0x0F] * xb[j];
            s[2 + j % 2] += (float)gt_iq4nl_levels[b[i].qs[j] >> 4] * xb[j + GT_QK4_NL / 2];
        }
        acc += gt_f16_to_f32(b[i].d) * ((s[0] + s[1]) + (s[2] + s[3]));
    }
    return acc;
}

/* A super-block as integers q[256] and per-group floats: x[p] = sc[g]*q[p]
 * - mn[g] with g = p / gsize. sc/mn are the products the format defines
 * (d*sub-scale, dmin*sub-min), rounded as gt_dequantize_row rounds them. */
typedef struct kblock {
    int q[GT_QK_K];
    float sc[16], mn[16];
    int gsize; /* 16 or 32 */
} kblock;

static void decode_q2_K(const gt_block_q2_K *b, kblock *k)
{
    const float d = gt_f16_to_f32(b->d), dmin = gt_f16_to_f32(b->dmin);
    k->gsize = 16;
    for (int g = 0; g < 16; g++) {
        k->sc[g] = d * (float)(b->scales[g] & 0xF);
        k->mn[g] = dmin * (float)(b->scales[g] >> 4);
    }
    for (int p = 0; p < GT_QK_K; p++)
        k->q[p] = (b->qs[32 * (p / 128) + p % 32] >> (2 * ((p % 128) / 32))) & 3;
}

static void decode_q3_K(const gt_block_q3_K *b, kblock *k)
{
    const float d = gt_f16_to_f32(b->d);
    const uint8_t *s = b->scales;
    k->gsize = 16;
    for (int i = 0; i < 4; i++) { /* 16 6-bit scales, stored + 32 */
        const int v[4] = {(s[i] & 0xF) | ((s[8 + i] & 3) << 4),
                          (s[4 + i] & 0xF) | (((s[8 + i] >> 2) & 3) << 4),
                          (s[i] >> 4) | (((s[8 + i] >> 4) & 3) << 4),
                          (s[4 + i] >> 4) | (((s[8 + i] >> 6) & 3) << 4)};
        for (int j = 0; j < 4; j++) {
            k->sc[4 * j + i] = d * (float)(v[j] - 32);
            k->mn[4 * j + i] = 0.0f;
        }
    }
    for (int p = 0; p < GT_QK_K; p++) {
        const int lo = (b->qs[32 * (p / 128) + p % 32] >> (2 * ((p % 128) / 32))) & 3;
        const int hbit = (b->hmask[p % 32] >> (p / 32)) & 1;
        k->q[p] = lo - (hbit ? 0 : 4);
    }
}

/* Q4_K and Q5_K: 8 groups of 32 with 6-bit scales and mins. */
static void k_scales_8(const uint8_t scales[12], uint16_t d16, uint16_t dmin16, kblock *k)
{
    const float d = gt_f16_to_f32(d16), dmin = gt_f16_to_f32(dmin16);
    k->gsize = 32;
    for (int g = 0; g < 8; g++) {
        uint8_t sc, m;
        gt_k_scale_min(scales, g, &sc, &m);
        k->sc[g] = d * (float)sc;
        k->mn[g] = dmin * (float)m;
    }
}

static void decode_q4_K(const gt_block_q4_K *b, kblock *k)
{
    k_scales_8(b->scales, b->d, b->dmin, k);
    for (int p = 0; p < GT_QK_K; p++) {
        const uint8_t byte = b->qs[32 * (p / 64) + p % 32];
        k->q[p] = (p % 64) < 32 ? byte & 0xF : byte >> 4;
    }
}

static void decode_q5_K(const gt_block_q5_K *b, kblock *k)
{
    k_scales_8(b->scales, b->d, b->dmin, k);
    for (int p = 0; p < GT_QK_K; p++) {
        const uint8_t byte = b->qs[32 * (p / 64) + p % 32];
        const int lo = (p % 64) < 32 ? byte & 0xF : byte >> 4;
        k->q[p] = lo | (((b->qh[p % 32] >> (p / 32)) & 1) << 4);
    }
}

static void decode_q6_K(const gt_block_q6_K *b, kblock *k)
{
    const float d = gt_f16_to_f32(b->d);
    k->gsize = 16;
    for (int g = 0; g < 16; g++) {
        k->sc[g] = d * (float)b->scales[g];
        k->mn[g] = 0.0f;
    }
    for (int p = 0; p < GT_QK_K; p++) {
        const int h = p / 128, r = p % 128;
        const uint8_t l = b->ql[64 * h + p % 32 + 32 * ((r % 64) / 32)];
        const int lo = r < 64 ? l & 0xF : l >> 4;
        const int hi = (b->qh[32 * h + p % 32] >> (2 * (r / 32))) & 3;
        k->q[p] = (lo | (hi << 4)) - 32;
    }
}

static void decode_k(gt_type t, const void *blk, kblock *k)
{
    switch (t) {
    case GT_TYPE_Q2_K: decode_q2_K(blk, k); return;
    case GT_TYPE_Q3_K: decode_q3_K(blk, k); return;
    case GT_TYPE_Q4_K: decode_q4_K(blk, k); return;
    case GT_TYPE_Q5_K: decode_q5_K(blk, k); return;
    default: decode_q6_K(blk, k); return;
    }
}

static float fdot_k(gt_type t, const void *w, const float *x, int64_t n)
{
    const size_t bytes = gt_type_info(t)->block_bytes;
    kblock k;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / GT_QK_K; i++) {
        decode_k(t, (const char *)w + (size_t)i * bytes, &k);
        const float *xb = x + i * GT_QK_K;
        for (int g = 0; g < GT_QK_K / k.gsize; g++) {
            float s[2] = {0, 0}, sx[2] = {0, 0};
            for (int j = 0; j < k.gsize; j++) {
                const int p = g * k.gsize + j;
                s[j % 2] += (float)k.q[p] * xb[p];
                sx[j % 2] += xb[p];
            }
            acc += k.sc[g] * (s[0] + s[1]) - k.mn[g] * (sx[0] + sx[1]);
        }
    }
    return acc;
}

static float fdot_q2_K(const void *w, const float *x, int64_t n) { return fdot_k(GT_TYPE_Q2_K, w, x, n); }
static float fdot_q3_K(const void *w, const float *x, int64_t n) { return fdot_k(GT_TYPE_Q3_K, w, x, n); }
static float fdot_q4_K(const void *w, const float *x, int64_t n) { return fdot_k(GT_TYPE_Q4_K, w, x, n); }
static float fdot_q5_K(const void *w, const float *x, int64_t n) { return fdot_k(GT_TYPE_Q5_K, w, x, n); }
static float fdot_q6_K(const void *w, const float *x, int64_t n) { return fdot_k(GT_TYPE_Q6_K, w, x, n); }

static float dot_f32(const float *a, const float *b, int64_t n)
{
    /* Four partial sums: a little accuracy and a lot of speed over one chain. */
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static float fdot_f32(const void *w, const float *x, int64_t n) { return dot_f32(w, x, n); }

static float fdot_f16(const void *w, const float *x, int64_t n)
{
    const uint16_t *h = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++)
        acc += gt_f16_to_f32(h[i]) * x[i];
    return acc;
}

static float bf16_f32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float fdot_bf16(const void *w, const float *x, int64_t n)
{
    const uint16_t *h = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++)
        acc += bf16_f32(h[i]) * x[i];
    return acc;
}

static void dq_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, sizeof(float) * (size_t)n); }

static void dq_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = gt_f16_to_f32(h[i]);
}

static void dq_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_f32(h[i]);
}

static void dq_q8_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q8_0 *x = src;
    for (int64_t b = 0; b < n / GT_QK8_0; b++) {
        const float d = gt_f16_to_f32(x[b].d);
        for (int j = 0; j < GT_QK8_0; j++)
            dst[b * GT_QK8_0 + j] = d * x[b].qs[j];
    }
}

static void dq_q4_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q4_0 *x = src;
    for (int64_t b = 0; b < n / GT_QK4_0; b++) {
        const float d = gt_f16_to_f32(x[b].d);
        float *y = dst + b * GT_QK4_0;
        for (int j = 0; j < GT_QK4_0 / 2; j++) {
            y[j] = d * (float)((x[b].qs[j] & 0x0F) - 8);
            y[j + GT_QK4_0 / 2] = d * (float)((x[b].qs[j] >> 4) - 8);
        }
    }
}

static void dq_q4_1(const void *src, float *dst, int64_t n)
{
    const gt_block_q4_1 *x = src;
    for (int64_t b = 0; b < n / GT_QK4_1; b++) {
        const float d = gt_f16_to_f32(x[b].d), m = gt_f16_to_f32(x[b].m);
        float *y = dst + b * GT_QK4_1;
        for (int j = 0; j < GT_QK4_1 / 2; j++) {
            y[j] = d * (float)(x[b].qs[j] & 0x0F) + m;
            y[j + GT_QK4_1 / 2] = d * (float)(x[b].qs[j] >> 4) + m;
        }
    }
}

static void dq_q5_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q5_0 *x = src;
    for (int64_t b = 0; b < n / GT_QK5_0; b++) {
        const float d = gt_f16_to_f32(x[b].d);
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        for (int j = 0; j < GT_QK5_0; j++)
            dst[b * GT_QK5_0 + j] = (float)(q5_value(x[b].qs, qh, j) - 16) * d;
    }
}

static void dq_q5_1(const void *src, float *dst, int64_t n)
{
    const gt_block_q5_1 *x = src;
    for (int64_t b = 0; b < n / GT_QK5_1; b++) {
        const float d = gt_f16_to_f32(x[b].d), m = gt_f16_to_f32(x[b].m);
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        for (int j = 0; j < GT_QK5_1; j++)
            dst[b * GT_QK5_1 + j] = (float)q5_value(x[b].qs, qh, j) * d + m;
    }
}

static void dq_iq4_nl(const void *src, float *dst, int64_t n)
{
    const gt_block_iq4_nl *x = src;
    for (int64_t b = 0; b < n / GT_QK4_NL; b++) {
        const float d = gt_f16_to_f32(x[b].d);
        float *y = dst + b * GT_QK4_NL;
        for (int j = 0; j < GT_QK4_NL / 2; j++) {
            y[j] = d * (float)gt_iq4nl_levels[x[b].qs[j] & 0x0F];
            y[j + GT_QK4_NL / 2] = d * (float)gt_iq4nl_levels[x[b].qs[j] >> 4];
        }
    }
}

static void dq_k(gt_type t, const void *src, float *dst, int64_t n)
{
    const size_t bytes = gt_type_info(t)->block_bytes;
    kblock k;
    for (int64_t i = 0; i < n / GT_QK_K; i++) {
        decode_k(t, (const char *)src + (size_t)i * bytes, &k);
        for (int p = 0; p < GT_QK_K; p++) {
            const float sc = k.sc[p / k.gsize], mn = k.mn[p / k.gsize];
            /* Q3_K and Q6_K have no min: sc*q - 0 is sc*q exactly. */
            dst[i * GT_QK_K + p] = sc * (float)k.q[p] - mn;
        }
    }
}

static void dq_q2_K(const void *s, float *d, int64_t n) { dq_k(GT_TYPE_Q2_K, s, d, n); }
static void dq_q3_K(const void *s, float *d, int64_t n) { dq_k(GT_TYPE_Q3_K, s, d, n); }
static void dq_q4_K(const void *s, float *d, int64_t n) { dq_k(GT_TYPE_Q4_K, s, d, n); }
static void dq_q5_K(const void *s, float *d, int64_t n) { dq_k(GT_TYPE_Q5_K, s, d, n); }
static void dq_q6_K(const void *s, float *d, int64_t n) { dq_k(GT_TYPE_Q6_K, s, d, n); }

static void axpy(float a, const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void scale(const float *x, float a, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a * x[i];
}

static float sum_sq(const float *x, int64_t n) { return dot_f32(x, x, n); }

static float exp_sub_sum(float *x, int64_t n, float m)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    return sum;
}

static void silu_mul(const float *a, const float *b, float *t, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        t[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

static void gelu_mul(const float *a, const float *b, float *t, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = a[i], u = GT_CPU_GELU_K * (x + 0.044715f * x * x * x);
        t[i] = x * b[i] / (1.0f + expf(-2.0f * u));
    }
}

void gt_cpu_kernels_scalar(gt_cpu_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->name = "scalar";
    k->quantize_act = quantize_act;
    k->qdot[GT_TYPE_Q8_0] = qdot_q8_0;
    k->qdot[GT_TYPE_Q4_0] = qdot_q4_0;
    k->qdot[GT_TYPE_Q4_1] = qdot_q4_1;
    k->qdot[GT_TYPE_Q5_0] = qdot_q5_0;
    k->qdot[GT_TYPE_Q4_K] = qdot_q4_K;
    k->qdot[GT_TYPE_Q6_K] = qdot_q6_K;
    k->fdot[GT_TYPE_F32] = fdot_f32;
    k->fdot[GT_TYPE_F16] = fdot_f16;
    k->fdot[GT_TYPE_BF16] = fdot_bf16;
    k->fdot[GT_TYPE_Q8_0] = fdot_q8_0;
    k->fdot[GT_TYPE_Q4_0] = fdot_q4_0;
    k->fdot[GT_TYPE_Q4_1] = fdot_q4_1;
    k->dequant[GT_TYPE_F32] = dq_f32;
    k->dequant[GT_TYPE_F16] = dq_f16;
    k->dequant[GT_TYPE_BF16] = dq_bf16;
    k->dequant[GT_TYPE_Q8_0] = dq_q8_0;
    k->dequant[GT_TYPE_Q4_0] = dq_q4_0;
    k->dequant[GT_TYPE_Q4_1] = dq_q4_1;
    k->fdot[GT_TYPE_Q5_0] = fdot_q5_0;
    k->fdot[GT_TYPE_Q5_1] = fdot_q5_1;
    k->fdot[GT_TYPE_IQ4_NL] = fdot_iq4_nl;
    k->fdot[GT_TYPE_Q2_K] = fdot_q2_K;
    k->fdot[GT_TYPE_Q3_K] = fdot_q3_K;
    k->fdot[GT_TYPE_Q4_K] = fdot_q4_K;
    k->fdot[GT_TYPE_Q5_K] = fdot_q5_K;
    k->fdot[GT_TYPE_Q6_K] = fdot_q6_K;
    k->dequant[GT_TYPE_Q5_0] = dq_q5_0;
    k->dequant[GT_TYPE_Q5_1] = dq_q5_1;
    k->dequant[GT_TYPE_IQ4_NL] = dq_iq4_nl;
    k->dequant[GT_TYPE_Q2_K] = dq_q2_K;
    k->dequant[GT_TYPE_Q3_K] = dq_q3_K;
    k->dequant[GT_TYPE_Q4_K] = dq_q4_K;
    k->dequant[GT_TYPE_Q5_K] = dq_q5_K;
    k->dequant[GT_TYPE_Q6_K] = dq_q6_K;
    k->dot_f32 = dot_f32;
    k->axpy = axpy;
    k->scale = scale;
    k->sum_sq = sum_sq;
    k->exp_sub_sum = exp_sub_sum;
    k->silu_mul = silu_mul;
    k->gelu_mul = gelu_mul;
    k->igemm = gt_cpu_igemm_scalar;
    k->pk[GT_TYPE_Q4_0] = gt_cpu_pk_q4_0_scalar;
    k->pk[GT_TYPE_Q5_0] = gt_cpu_pk_q5_0_scalar;
    k->pk[GT_TYPE_Q8_0] = gt_cpu_pk_q8_0_scalar;
}
