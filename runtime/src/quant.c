/* quant.c: conversions between f32 and the element types of gt/quant.h.
 *
 * Every quantized format has exactly one quantizer here, the reference one,
 * and it reproduces GGML's reference quantizers bit for bit on finite input
 * (the same choice of scale, the same rounding, the same order of float
 * operations). That is what makes a file written by `gauntlet quantize`
 * byte-identical to one written by llama-quantize without an imatrix, and it
 * lets tests compare against golden bytes computed by hand.
 *
 *   Q8_0: d = amax/127, q = roundf(x/d) (half away from zero).
 *   Q4_0: d = max/-8 where max is the signed value of largest magnitude, so
 *         that value lands on q = 0 exactly and the other side loses one step
 *         (q is clipped to 15); q = min(15, trunc(x/d + 8.5)).
 *   Q4_1: d = (max-min)/15, m = min, q = min(15, trunc((x-min)/d + 0.5)).
 * The quantizers use the f32 scale and its reciprocal, as GGML does, even
 * though the block stores the scale rounded to f16; the tests account for
 * that rounding in their error bounds.
 *
 * Non-finite input has no meaning in a weight file; where GGML would hit
 * undefined behaviour (a NaN or out-of-range float cast to int8) we clamp, so
 * the output is some defined block instead of a sanitizer report.
 *
 * The f16 and bf16 scalars are converted in half.c, which the K-quants
 * (quant_k.c) use as well. */
#include "gt/quant.h"
#include "quant_k.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* roundf into int8 for |v| <= 127 (always true for finite input); anything
 * else is clamped, NaN becomes 0. */
static int8_t round_q8(float v)
{
    if (!(v > -127.0f))
        return v != v ? 0 : -127;
    if (v > 127.0f)
        return 127;
    return (int8_t)roundf(v);
}

/* GGML's MIN(15, (int8_t)v) for v in [0, 16.5]; clamped otherwise. */
static uint8_t trunc_q4(float v)
{
    if (!(v >= 0.0f))
        return 0;
    if (v >= 15.0f)
        return 15;
    return (uint8_t)v;
}

static void quantize_q8_0(const float *x, gt_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < GT_QK8_0; j++) {
            float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = gt_f32_to_f16(d);
        for (int j = 0; j < GT_QK8_0; j++)
            y[i].qs[j] = round_q8(x[j] * id);
    }
}

static void quantize_q4_0(const float *x, gt_block_q4_0 *y, int64_t nb)
{
    const int half = GT_QK4_0 / 2;
    for (int64_t i = 0; i < nb; i++, x += GT_QK4_0) {
        /* The first element of largest magnitude wins, keeping its sign. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < GT_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = gt_f32_to_f16(d);
        for (int j = 0; j < half; j++) {
            uint8_t lo = trunc_q4(x[j] * id + 8.5f);
            uint8_t hi = trunc_q4(x[j + half] * id + 8.5f);
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void quantize_q4_1(const float *x, gt_block_q4_1 *y, int64_t nb)
{
    const int half = GT_QK4_1 / 2;
    for (int64_t i = 0; i < nb; i++, x += GT_QK4_1) {
        float min = x[0], max = x[0];
        for (int j = 1; j < GT_QK4_1; j++) {
            if (x[j] < min)
                min = x[j];
            if (x[j] > max)
                max = x[j];
        }
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = gt_f32_to_f16(d);
        y[i].m = gt_f32_to_f16(min);
        for (int j = 0; j < half; j++) {
            uint8_t lo = trunc_q4((x[j] - min) * id + 0.5f);
            uint8_t hi = trunc_q4((x[j + half] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void dequantize_q8_0(const gt_block_q8_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GT_QK8_0) {
        const float d = gt_f16_to_f32(x[i].d);
        for (int j = 0; j < GT_QK8_0; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

static void dequantize_q4_0(const gt_block_q4_0 *x, float *y, int64_t nb)
{
    const int half = GT_QK4_0 / 2;
    for (int64_t i = 0; i < nb; i++, y += GT_QK4_0) {
        const float d = gt_f16_to_f32(x[i].d);
        for (int j = 0; j < half; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + half] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequantize_q4_1(const gt_block_q4_1 *x, float *y, int64_t nb)
{
    const int half = GT_QK4_1 / 2;
    for (int64_t i = 0; i < nb; i++, y += GT_QK4_1) {
        const float d = gt_f16_to_f32(x[i].d);
        const float m = gt_f16_to_f32(x[i].m);
        for (int j = 0; j < half; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            y[j + half] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* Blocks in a row of n elements; asserts the caller kept the contract. */
static int64_t n_blocks(gt_type type, int64_t n)
{
    const gt_type_traits *t = gt_type_info(type);
    assert(t && n >= 0 && n % t->block_size == 0);
    return t ? n / t->block_size : 0;
}

void gt_dequantize_row(gt_type type, const void *src, float *dst, int64_t n)
{
    switch (type) {
    case GT_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    case GT_TYPE_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = gt_f16_to_f32(s[i]);
        return;
    }
    case GT_TYPE_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = gt_bf16_to_f32(s[i]);
        return;
    }
    case GT_TYPE_Q8_0:
        dequantize_q8_0(src, dst, n_blocks(type, n));
        return;
    case GT_TYPE_Q4_0:
        dequantize_q4_0(src, dst, n_blocks(type, n));
        return;
    case GT_TYPE_Q4_1:
        dequantize_q4_1(src, dst, n_blocks(type, n));
        return;
    case GT_TYPE_Q5_0: gt_dequantize_q5_0(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q5_1: gt_dequantize_q5_1(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q2_K: gt_dequantize_q2_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q3_K: gt_dequantize_q3_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q4_K: gt_dequantize_q4_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q5_K: gt_dequantize_q5_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q6_K: gt_dequantize_q6_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q8_K: gt_dequantize_q8_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_IQ4_NL: gt_dequantize_iq4_nl(src, dst, n_blocks(type, n)); return;
    default:
        /* No conversion for this type: callers check gt_type_info and the
         * supported list first. Zeros rather than garbage if one did not. */
        assert(!"gt_dequantize_row: unsupported type");
        memset(dst, 0, (size_t)n * sizeof(float));
        return;
    }
}

void gt_quantize_row(gt_type type, const float *src, void *dst, int64_t n)
{
    switch (type) {
    case GT_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    case GT_TYPE_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = gt_f32_to_f16(src[i]);
        return;
    }
    case GT_TYPE_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = gt_f32_to_bf16(src[i]);
        return;
    }
    case GT_TYPE_Q8_0:
        quantize_q8_0(src, dst, n_blocks(type, n));
        return;
    case GT_TYPE_Q4_0:
        quantize_q4_0(src, dst, n_blocks(type, n));
        return;
    case GT_TYPE_Q4_1:
        quantize_q4_1(src, dst, n_blocks(type, n));
        return;
    case GT_TYPE_Q5_0: gt_quantize_q5_0(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q5_1: gt_quantize_q5_1(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q2_K: gt_quantize_q2_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q3_K: gt_quantize_q3_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q4_K: gt_quantize_q4_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q5_K: gt_quantize_q5_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q6_K: gt_quantize_q6_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_Q8_K: gt_quantize_q8_K(src, dst, n_blocks(type, n)); return;
    case GT_TYPE_IQ4_NL: gt_quantize_iq4_nl(src, dst, n_blocks(type, n)); return;
    default:
        assert(!"gt_quantize_row: unsupported type");
        return;
    }
}
