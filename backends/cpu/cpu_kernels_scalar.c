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

static void quantize_act(const float *x, int64_t n, int8_t *q, float *d, float *s)
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
            d[b] = s[b] = NAN;
            continue;
        }
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < GT_CPU_QK; j++) {
            const int v = (int)nearbyintf(xb[j] * id);
            q[b * GT_CPU_QK + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            sum += q[b * GT_CPU_QK + j];
        }
        d[b] = amax / 127.0f;
        s[b] = d[b] * (float)sum;
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

/* Nibbles are used unsigned; the "-8" comes back through s: sum (q-8)*a =
 * sum q*a - 8*sum a. */
static float qdot_q4_0(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    const gt_block_q4_0 *x = w;
    float acc = 0.0f, off = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *qa = q + b * GT_CPU_QK;
        int sum = 0;
        for (int j = 0; j < GT_CPU_QK / 2; j++)
            sum += (x[b].qs[j] & 0x0F) * qa[j] + (x[b].qs[j] >> 4) * qa[j + GT_CPU_QK / 2];
        const float dw = gt_f16_to_f32(x[b].d);
        acc += dw * d[b] * (float)sum;
        off += dw * s[b];
    }
    return acc - 8.0f * off;
}

static float qdot_q4_1(const void *w, const int8_t *q, const float *d, const float *s, int64_t nb)
{
    const gt_block_q4_1 *x = w;
    float acc = 0.0f, off = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *qa = q + b * GT_CPU_QK;
        int sum = 0;
        for (int j = 0; j < GT_CPU_QK / 2; j++)
            sum += (x[b].qs[j] & 0x0F) * qa[j] + (x[b].qs[j] >> 4) * qa[j + GT_CPU_QK / 2];
        acc += gt_f16_to_f32(x[b].d) * d[b] * (float)sum;
        off += gt_f16_to_f32(x[b].m) * s[b];
    }
    return acc + off;
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

void gt_cpu_kernels_scalar(gt_cpu_kernels *k)
{
    memset(k, 0, sizeof *k);
    k->name = "scalar";
    k->quantize_act = quantize_act;
    k->qdot[GT_TYPE_Q8_0] = qdot_q8_0;
    k->qdot[GT_TYPE_Q4_0] = qdot_q4_0;
    k->qdot[GT_TYPE_Q4_1] = qdot_q4_1;
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
    k->dot_f32 = dot_f32;
    k->axpy = axpy;
    k->scale = scale;
    k->sum_sq = sum_sq;
    k->exp_sub_sum = exp_sub_sum;
    k->silu_mul = silu_mul;
}
