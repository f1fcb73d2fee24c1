/* test_quant.c: the element-type conversions of quant.c.
 *
 * Three kinds of evidence:
 *  1. Golden bytes for single blocks, computed by hand in the comments, so a
 *     change of rounding, scale choice or nibble order shows up as a byte
 *     difference rather than as a slightly different error statistic.
 *  2. f16/bf16 special values (signed zeros, subnormals, the overflow
 *     boundary, inf, NaN, ties), plus exhaustive round-trips over all 65536
 *     bit patterns and a nearest-value property on random floats.
 *  3. Error bounds on seeded random rows, derived per block from the scale
 *     that was stored (the reasoning is beside each bound), and idempotence:
 *     re-quantizing dequantized data gives the same bytes.
 * The random data comes from our own splitmix64 so the test is the same on
 * every machine. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/quant.h"

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_uniform(void) /* [0, 1) */
{
    return (float)(rng_next() >> 40) * 0x1p-24f;
}

/* Roughly normal(0, scale): Irwin-Hall with 4 uniforms, variance 4/12. */
static float rng_normal(float scale)
{
    float s = rng_uniform() + rng_uniform() + rng_uniform() + rng_uniform() - 2.0f;
    return s * 1.7320508f * scale;
}

/* Rows like real weights, with a few outliers and a spread of magnitudes
 * across blocks so scales land in many f16 binades. */
static void fill_weights(float *x, int64_t n, uint64_t seed)
{
    rng_state = seed;
    for (int64_t b = 0; b < n / 32; b++) {
        float scale = 0.02f * powf(2.0f, (float)(rng_next() % 9) - 4.0f);
        for (int j = 0; j < 32; j++) {
            float v = rng_normal(scale);
            if (rng_next() % 97 == 0)
                v *= 8.0f;
            x[b * 32 + j] = v;
        }
    }
}

/* ---- golden blocks ----------------------------------------------------- */

START_TEST(test_q8_0_golden)
{
    /* x = 0..31: amax 31, d = 31/127 = 0.2440945 = 1.952756 * 2^-3.
     * f16: exponent field -3+15 = 12 (0x3000), mantissa .952756*1024 =
     * 975.6 -> 976 = 0x3d0, so d = 0x33d0 (0.244140625).
     * q_j = round(127j/31) = 4j + floor(3j/31) + (3j mod 31 >= 16): the
     * fractional part is (3j mod 31)/31, never 1/2, so no ties. */
    static const int8_t want_q[32] = {
        0,  4,  8,  12, 16, 20, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61,
        66, 70, 74, 78, 82, 86, 90, 94, 98, 102, 107, 111, 115, 119, 123, 127};
    float x[64];
    for (int j = 0; j < 32; j++) {
        x[j] = (float)j;
        x[32 + j] = -(float)j; /* second block: same scale, negated q */
    }
    gt_block_q8_0 b[2];
    gt_quantize_row(GT_TYPE_Q8_0, x, b, 64);
    ck_assert_uint_eq(b[0].d, 0x33d0);
    ck_assert_uint_eq(b[1].d, 0x33d0);
    for (int j = 0; j < 32; j++) {
        ck_assert_int_eq(b[0].qs[j], want_q[j]);
        ck_assert_int_eq(b[1].qs[j], -want_q[j]);
    }
    /* The struct is the file layout: d little-endian, then the quants. */
    const uint8_t *raw = (const uint8_t *)b;
    ck_assert_uint_eq(raw[0], 0xd0);
    ck_assert_uint_eq(raw[1], 0x33);
    ck_assert_uint_eq(raw[2 + 31], 127);

    float y[64];
    gt_dequantize_row(GT_TYPE_Q8_0, b, y, 64);
    ck_assert_float_eq(y[31], 127.0f * 0.244140625f);
    ck_assert_float_eq(y[32 + 6], -25.0f * 0.244140625f);
}
END_TEST

START_TEST(test_q4_0_golden)
{
    /* Block A, x = 0..31: the largest magnitude is +31, so d = 31/-8 =
     * -3.875 = -1.9375 * 2^1 -> f16 sign 0x8000 | exponent 16 (0x4000) |
     * mantissa .9375*1024 = 960 (0x3c0) = 0xc3c0, exact.
     * q_j = trunc(8.5 - 8j/31) = floor((527 - 16j)/62) (never integral,
     * so float rounding cannot tip it): j=0,1 -> 8; 2..5 -> 7; 6..9 -> 6;
     * 10..13 -> 5; 14..17 -> 4; 18..21 -> 3; 22..25 -> 2; 26..29 -> 1;
     * 30,31 -> 0. Byte j = q_j | q_{j+16} << 4.
     *
     * Block B, x = j - 16 (-16..15): the largest magnitude is -16, so
     * d = -16/-8 = 2 (0x4000), id = 0.5, q_j = trunc(j/2 + 0.5) =
     * (j+1)/2, and x = 15 gives 16 which is clipped to 15: it dequantizes
     * to (15-8)*2 = 14, the one-step loss on the far side of max. */
    static const uint8_t want_a[16] = {0x48, 0x48, 0x37, 0x37, 0x37, 0x37, 0x26, 0x26,
                                       0x26, 0x26, 0x15, 0x15, 0x15, 0x15, 0x04, 0x04};
    static const uint8_t want_b[16] = {0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4,
                                       0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8};
    float x[64];
    for (int j = 0; j < 32; j++) {
        x[j] = (float)j;
        x[32 + j] = (float)(j - 16);
    }
    gt_block_q4_0 b[2];
    gt_quantize_row(GT_TYPE_Q4_0, x, b, 64);
    ck_assert_uint_eq(b[0].d, 0xc3c0);
    ck_assert_uint_eq(b[1].d, 0x4000);
    ck_assert_mem_eq(b[0].qs, want_a, 16);
    ck_assert_mem_eq(b[1].qs, want_b, 16);
    const uint8_t *raw = (const uint8_t *)b;
    ck_assert_uint_eq(raw[0], 0xc0);
    ck_assert_uint_eq(raw[1], 0xc3);
    ck_assert_uint_eq(raw[2], 0x48);

    float y[64];
    gt_dequantize_row(GT_TYPE_Q4_0, b, y, 64);
    ck_assert_float_eq(y[0], 0.0f);             /* q=8 */
    ck_assert_float_eq(y[31], 31.0f);           /* q=0: exact */
    ck_assert_float_eq(y[32], -16.0f);          /* q=0: exact */
    ck_assert_float_eq(y[32 + 31], 14.0f);      /* clipped */
    ck_assert_float_eq(y[32 + 16], 0.0f);       /* q=8 */
}
END_TEST

START_TEST(test_q4_1_golden)
{
    /* Block A, x = 0..31: min 0, max 31, d = 31/15 = 2.0667 = 1.0333*2^1 ->
     * exponent 16 (0x4000) | mantissa .0333*1024 = 34.13 -> 34 (0x22) =
     * 0x4022; m = 0 (0x0000). q_j = trunc(15j/31 + 0.5), the fraction of
     * 15j/31 is (15j mod 31)/31, never 1/2: j=0,1 -> 0, then each pair
     * (2,3) -> 1, (4,5) -> 2, ..., (28,29) -> 14, and 30,31 -> 15.
     * Block B, x = j + 1 (1..32): x - min is exactly block A, so the same
     * d and nibbles, and m = 1.0 = 0x3c00. */
    static const uint8_t want[16] = {0x80, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3,
                                     0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7};
    float x[64];
    for (int j = 0; j < 32; j++) {
        x[j] = (float)j;
        x[32 + j] = (float)(j + 1);
    }
    gt_block_q4_1 b[2];
    gt_quantize_row(GT_TYPE_Q4_1, x, b, 64);
    ck_assert_uint_eq(b[0].d, 0x4022);
    ck_assert_uint_eq(b[0].m, 0x0000);
    ck_assert_uint_eq(b[1].d, 0x4022);
    ck_assert_uint_eq(b[1].m, 0x3c00);
    ck_assert_mem_eq(b[0].qs, want, 16);
    ck_assert_mem_eq(b[1].qs, want, 16);
    const uint8_t *raw = (const uint8_t *)&b[1];
    ck_assert_uint_eq(raw[0], 0x22); /* d, then m, then nibbles */
    ck_assert_uint_eq(raw[1], 0x40);
    ck_assert_uint_eq(raw[2], 0x00);
    ck_assert_uint_eq(raw[3], 0x3c);
    ck_assert_uint_eq(raw[4], 0x80);

    float y[64];
    gt_dequantize_row(GT_TYPE_Q4_1, b, y, 64);
    const float d = gt_f16_to_f32(0x4022); /* 2.06640625 */
    ck_assert_float_eq(d, 2.06640625f);
    ck_assert_float_eq(y[0], 0.0f);
    ck_assert_float_eq(y[31], 15.0f * d);
    ck_assert_float_eq(y[32], 1.0f);
    ck_assert_float_eq(y[32 + 2], 1.0f * d + 1.0f);
}
END_TEST

START_TEST(test_degenerate_blocks)
{
    /* All zeros: d = 0, id = 0, every type reproduces zeros exactly. */
    float z[32] = {0}, y[32];
    uint8_t buf[128];
    const gt_type types[] = {GT_TYPE_Q8_0, GT_TYPE_Q4_0, GT_TYPE_Q4_1};
    for (size_t t = 0; t < 3; t++) {
        memset(buf, 0xaa, sizeof buf);
        gt_quantize_row(types[t], z, buf, 32);
        gt_dequantize_row(types[t], buf, y, 32);
        for (int j = 0; j < 32; j++)
            ck_assert_float_eq(y[j], 0.0f);
    }
    gt_block_q4_0 *q40 = (gt_block_q4_0 *)buf;
    gt_quantize_row(GT_TYPE_Q4_0, z, buf, 32);
    ck_assert_uint_eq(q40->qs[0], 0x88); /* zero sits at q = 8 */

    /* A constant block in Q4_1: max == min, d = 0, value carried by m. */
    float c[32];
    for (int j = 0; j < 32; j++)
        c[j] = 0.75f;
    gt_quantize_row(GT_TYPE_Q4_1, c, buf, 32);
    gt_block_q4_1 *q41 = (gt_block_q4_1 *)buf;
    ck_assert_uint_eq(q41->d, 0);
    ck_assert_uint_eq(q41->m, 0x3a00); /* 0.75 = 1.5 * 2^-1 */
    gt_dequantize_row(GT_TYPE_Q4_1, buf, y, 32);
    ck_assert_float_eq(y[17], 0.75f);

    /* Non-finite input must not crash (sanitizers) and gives a defined
     * block; the finite neighbours of an inf are lost, which is fine. */
    c[3] = INFINITY;
    c[4] = NAN;
    for (size_t t = 0; t < 3; t++)
        gt_quantize_row(types[t], c, buf, 32);
}
END_TEST

/* ---- f16 / bf16 scalars ------------------------------------------------ */

START_TEST(test_f16_special)
{
    struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.1f, 0x2e66},    /* 1.6*2^-4: mantissa 614.4 -> 614 = 0x266 */
        {1.0f / 3, 0x3555}, /* 1.333*2^-2: 341.33 -> 0x155 */
        {65504.0f, 0x7bff}, /* largest finite */
        {65519.0f, 0x7bff}, /* below the midpoint to 2^16 */
        {65520.0f, 0x7c00}, /* the midpoint: ties to even = inf */
        {1e10f, 0x7c00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400},   /* smallest normal */
        {0x1p-24f, 0x0001},   /* smallest subnormal */
        {1023 * 0x1p-24f, 0x03ff}, /* largest subnormal */
        {1023.5f * 0x1p-24f, 0x0400}, /* tie, even is 1024 = the normal */
        {0x1p-25f, 0x0000},   /* tie between 0 and 2^-24: even is 0 */
        {-0x1p-25f, 0x8000},
        {3 * 0x1p-25f, 0x0002}, /* tie between 1 and 2 units: 2 */
        {5 * 0x1p-25f, 0x0002}, /* tie between 2 and 3 units: 2 */
        {0x1p-26f, 0x0000},
        {1.0f + 0x1p-11f, 0x3c00},     /* tie: mantissa 0 is even */
        {1.0f + 3 * 0x1p-11f, 0x3c02}, /* tie between 1 and 2: 2 */
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, /* just above the tie */
        {2047.0f * 0x1p-10f, 0x3fff}, /* 1.999 exactly representable */
        {4095.0f * 0x1p-11f, 0x4000}, /* 1.9995: tie, rounds up into 2.0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(gt_f32_to_f16(cases[i].f) == cases[i].h,
                      "f16(%a) = 0x%04x, want 0x%04x", (double)cases[i].f,
                      gt_f32_to_f16(cases[i].f), cases[i].h);
    }
    /* The smallest float above 2^-25 rounds up to the smallest subnormal. */
    ck_assert_uint_eq(gt_f32_to_f16(bitsf(fbits(0x1p-25f) + 1)), 0x0001);
    ck_assert_uint_eq(gt_f32_to_f16(bitsf(0x7f7fffff)), 0x7c00);

    /* NaN stays NaN (quiet, sign kept); it must not become inf. */
    ck_assert_uint_eq(gt_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    ck_assert_uint_eq(gt_f32_to_f16(bitsf(0x7fc00000)), 0x7e00);
    ck_assert_uint_eq(gt_f32_to_f16(bitsf(0xffc00000)), 0xfe00);
    uint16_t snan = gt_f32_to_f16(bitsf(0x7f800001)); /* payload in low bits */
    ck_assert_uint_eq(snan & 0x7c00, 0x7c00);
    ck_assert_uint_ne(snan & 0x3ff, 0);

    ck_assert_float_eq(gt_f16_to_f32(0x0001), 0x1p-24f);
    ck_assert_float_eq(gt_f16_to_f32(0x03ff), 1023 * 0x1p-24f);
    ck_assert_float_eq(gt_f16_to_f32(0x7bff), 65504.0f);
    ck_assert_float_eq(gt_f16_to_f32(0x3555), 0.333251953125f);
    ck_assert(isinf(gt_f16_to_f32(0xfc00)) && gt_f16_to_f32(0xfc00) < 0);
    ck_assert(isnan(gt_f16_to_f32(0x7e00)));
    ck_assert(signbit(gt_f16_to_f32(0x8000)) && gt_f16_to_f32(0x8000) == 0.0f);
}
END_TEST

START_TEST(test_f16_exhaustive)
{
    /* Every f16 value is exact in f32, so f16 -> f32 -> f16 is the identity
     * on all non-NaN patterns, and NaNs come back as NaNs of the same sign. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = gt_f16_to_f32((uint16_t)h);
        uint16_t back = gt_f32_to_f16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            ck_assert(isnan(f));
            ck_assert_uint_eq(back & 0xfe00, (h & 0x8000) | 0x7e00);
        } else {
            ck_assert_msg(back == h, "0x%04x -> %a -> 0x%04x", h, (double)f, back);
        }
    }
}
END_TEST

START_TEST(test_f16_nearest)
{
    /* On random floats inside the f16 range the result is the nearest f16,
     * and on an exact tie the one with the even mantissa. Neighbours are
     * compared in double, where these differences are exact. */
    rng_state = 12345;
    for (int i = 0; i < 200000; i++) {
        /* Exponents 2^-27 .. 2^16 cover zero-rounding, subnormals, normals
         * and overflow. */
        uint32_t e = 100 + (uint32_t)(rng_next() % 44);
        uint32_t u = (uint32_t)(rng_next() & 0x807fffffu) | (e << 23);
        if (i % 4 == 0) /* force ties: low 13 bits exactly one half-ulp */
            u = (u & ~0x1fffu) | 0x1000u;
        float f = bitsf(u);
        uint16_t h = gt_f32_to_f16(f);
        double fa = fabs((double)f);
        double got = fabs((double)gt_f16_to_f32(h));
        ck_assert_uint_eq(h & 0x8000, (u >> 16) & 0x8000);
        if (fa >= 65520.0) {
            ck_assert_uint_eq(h & 0x7fff, 0x7c00);
            continue;
        }
        uint16_t mag = h & 0x7fff;
        double err = fabs(got - fa);
        if (mag > 0) {
            double below = (double)gt_f16_to_f32((uint16_t)(mag - 1));
            ck_assert(err <= fa - below);
            if (err == fa - below)
                ck_assert_uint_eq(mag & 1, 0);
        }
        if (mag < 0x7bff) {
            double above = (double)gt_f16_to_f32((uint16_t)(mag + 1));
            ck_assert(err <= above - fa);
            if (err == above - fa)
                ck_assert_uint_eq(mag & 1, 0);
        }
    }
}
END_TEST

START_TEST(test_bf16)
{
    struct { uint32_t f; uint16_t h; } cases[] = {
        {0x00000000, 0x0000},
        {0x80000000, 0x8000}, /* -0 */
        {0x3f800000, 0x3f80}, /* 1 */
        {0x3f808000, 0x3f80}, /* 1 + 2^-8: tie, 0x3f80 is even */
        {0x3f818000, 0x3f82}, /* tie between 0x3f81 and 0x3f82: even */
        {0x3f808001, 0x3f81}, /* just above the tie */
        {0x3f807fff, 0x3f80}, /* just below */
        {0x7f7fffff, 0x7f80}, /* FLT_MAX rounds to inf */
        {0x7f7f0000, 0x7f7f}, /* largest finite bf16 */
        {0x7f800000, 0x7f80}, /* inf */
        {0xff800000, 0xff80}, /* -inf */
        {0x7fc00000, 0x7fc0}, /* quiet NaN */
        {0x7f800001, 0x7fc0}, /* NaN with low payload: quiet, not inf */
        {0xff800001, 0xffc0},
        {0x7fffffff, 0x7fff},
        {0x00010000, 0x0001}, /* subnormals are kept, not flushed */
        {0x00008000, 0x0000}, /* tie: even */
        {0x00018000, 0x0002}, /* tie: even */
        {0x00000001, 0x0000},
        {0x007fffff, 0x0080}, /* largest subnormal rounds to min normal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = gt_f32_to_bf16(bitsf(cases[i].f));
        ck_assert_msg(h == cases[i].h, "bf16(0x%08x) = 0x%04x, want 0x%04x", cases[i].f, h,
                      cases[i].h);
    }
    /* bf16 -> f32 is a shift; every non-NaN pattern round-trips. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = gt_bf16_to_f32((uint16_t)h);
        ck_assert_uint_eq(fbits(f), h << 16);
        uint16_t back = gt_f32_to_bf16(f);
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
            ck_assert_uint_eq(back, h | 0x40);
        else
            ck_assert_uint_eq(back, h);
    }
}
END_TEST

/* ---- error bounds on random rows -------------------------------------- */

#define NROW 4096
#define NROWS 64

START_TEST(test_q8_0_bound)
{
    /* For one block with f32 scale d = amax/127 and stored d16 = f16(d):
     *   x - q*d16 = (x - q*d) + q*(d - d16)
     * roundf makes |x - q*d| <= d/2 (plus ~2 ulp of x*id, bounded by
     * 127*2^-22 in units of d), and |q| <= 127. So
     *   |err| <= d/2*(1 + 1e-4) + 127*|d - d16| + 2^-22*amax,
     * the last term for the product rounding in dequantize. Since
     * |d - d16| <= d*2^-11 for normal d16, that is about 0.562*d. */
    float *x = malloc(NROW * NROWS * sizeof *x), *y = malloc(NROW * NROWS * sizeof *y);
    gt_block_q8_0 *b = malloc(NROWS * (NROW / 32) * sizeof *b);
    ck_assert(x && y && b);
    fill_weights(x, NROW * NROWS, 1);
    for (int r = 0; r < NROWS; r++) {
        gt_quantize_row(GT_TYPE_Q8_0, x + r * NROW, b + r * (NROW / 32), NROW);
        gt_dequantize_row(GT_TYPE_Q8_0, b + r * (NROW / 32), y + r * NROW, NROW);
    }
    float worst = 0;
    for (int i = 0; i < NROW * NROWS / 32; i++) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[i * 32 + j]));
        float d = amax / 127.0f, d16 = gt_f16_to_f32(b[i].d);
        float bound = d / 2 * (1 + 1e-4f) + 127 * fabsf(d - d16) + 0x1p-22f * amax;
        for (int j = 0; j < 32; j++) {
            float e = fabsf(x[i * 32 + j] - y[i * 32 + j]);
            ck_assert_msg(e <= bound, "block %d elem %d: err %g > bound %g", i, j, (double)e,
                          (double)bound);
            /* The relative statement needs a normal d16; blocks with
             * amax < 127*2^-14 ~ 0.0078 get a subnormal scale whose
             * absolute error is up to 2^-25 instead (covered above). */
            if (d16 >= 0x1p-14f)
                worst = fmaxf(worst, e / d16);
        }
    }
    ck_assert(worst <= 0.5f + 127 * 0x1p-11f + 1e-3f);
    printf("q8_0: max |err|/d16 = %.4f (bound 0.5 + 127*2^-11 = 0.562)\n", (double)worst);
    free(x);
    free(y);
    free(b);
}
END_TEST

START_TEST(test_q4_0_bound)
{
    /* d = max/-8 (max: the signed value of largest magnitude), stored d16.
     * With s = x/d in [-8, 8], q = min(15, trunc(s + 8.5)) is s+8 rounded
     * half up except that s in (7.5, 8] (only on the side opposite max) is
     * clipped to 15. Hence |x - (q-8)*d| <= |d|/2 when s <= 7.5 and <= |d|
     * otherwise; the f16 scale adds |q-8|*|d - d16| <= 8*|d - d16|:
     *   |err| <= |d|*(1/2 or 1)*(1 + 1e-4) + 8*|d - d16| + 2^-22*amax. */
    float *x = malloc(NROW * NROWS * sizeof *x), *y = malloc(NROW * NROWS * sizeof *y);
    gt_block_q4_0 *b = malloc(NROWS * (NROW / 32) * sizeof *b);
    ck_assert(x && y && b);
    fill_weights(x, NROW * NROWS, 2);
    for (int r = 0; r < NROWS; r++) {
        gt_quantize_row(GT_TYPE_Q4_0, x + r * NROW, b + r * (NROW / 32), NROW);
        gt_dequantize_row(GT_TYPE_Q4_0, b + r * (NROW / 32), y + r * NROW, NROW);
    }
    float worst = 0, worst_unclipped = 0;
    for (int i = 0; i < NROW * NROWS / 32; i++) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(x[i * 32 + j])) {
                amax = fabsf(x[i * 32 + j]);
                max = x[i * 32 + j];
            }
        }
        float d = max / -8.0f, d16 = gt_f16_to_f32(b[i].d);
        float ad = fabsf(d), ad16 = fabsf(d16);
        for (int j = 0; j < 32; j++) {
            float s = x[i * 32 + j] / d;
            float step = s <= 7.5f ? 0.5f : 1.0f;
            float bound = ad * step * (1 + 1e-4f) + 8 * fabsf(d - d16) + 0x1p-22f * amax;
            float e = fabsf(x[i * 32 + j] - y[i * 32 + j]);
            ck_assert_msg(e <= bound, "block %d elem %d: err %g > bound %g", i, j, (double)e,
                          (double)bound);
            if (ad16 < 0x1p-14f) /* subnormal scale: absolute bound only */
                continue;
            worst = fmaxf(worst, e / ad16);
            if (s <= 7.5f)
                worst_unclipped = fmaxf(worst_unclipped, e / ad16);
        }
    }
    ck_assert(worst <= 1.0f + 8 * 0x1p-11f + 1e-3f);
    ck_assert(worst_unclipped <= 0.5f + 8 * 0x1p-11f + 1e-3f);
    printf("q4_0: max |err|/|d16| = %.4f (bound 1.004), unclipped %.4f (bound 0.504)\n",
           (double)worst, (double)worst_unclipped);
    free(x);
    free(y);
    free(b);
}
END_TEST

START_TEST(test_q4_1_bound)
{
    /* d = (max-min)/15, stored d16 and m16 = f16(min). With s = (x-min)/d
     * in [0, 15], q = min(15, trunc(s + 0.5)) never clips for finite s, so
     * |(x-min) - q*d| <= d/2. Dequantize computes q*d16 + m16:
     *   |err| <= d/2*(1 + 1e-4) + 15*|d - d16| + |min - m16| + 2^-21*amax
     * (the last for the rounding of the product and the sum). */
    float *x = malloc(NROW * NROWS * sizeof *x), *y = malloc(NROW * NROWS * sizeof *y);
    gt_block_q4_1 *b = malloc(NROWS * (NROW / 32) * sizeof *b);
    ck_assert(x && y && b);
    fill_weights(x, NROW * NROWS, 3);
    for (int r = 0; r < NROWS; r++) {
        gt_quantize_row(GT_TYPE_Q4_1, x + r * NROW, b + r * (NROW / 32), NROW);
        gt_dequantize_row(GT_TYPE_Q4_1, b + r * (NROW / 32), y + r * NROW, NROW);
    }
    float worst = 0;
    for (int i = 0; i < NROW * NROWS / 32; i++) {
        float min = x[i * 32], max = x[i * 32], amax = 0;
        for (int j = 0; j < 32; j++) {
            min = fminf(min, x[i * 32 + j]);
            max = fmaxf(max, x[i * 32 + j]);
            amax = fmaxf(amax, fabsf(x[i * 32 + j]));
        }
        float d = (max - min) / 15.0f, d16 = gt_f16_to_f32(b[i].d);
        float m16 = gt_f16_to_f32(b[i].m);
        float bound = d / 2 * (1 + 1e-4f) + 15 * fabsf(d - d16) + fabsf(min - m16) +
                      0x1p-21f * amax;
        for (int j = 0; j < 32; j++) {
            float e = fabsf(x[i * 32 + j] - y[i * 32 + j]);
            ck_assert_msg(e <= bound, "block %d elem %d: err %g > bound %g", i, j, (double)e,
                          (double)bound);
            if (d16 >= 0x1p-14f) /* subnormal scale: absolute bound only */
                worst = fmaxf(worst, e / d16);
        }
    }
    printf("q4_1: max |err|/d16 = %.4f (bound 0.5 + 15*2^-11 + |min-m16|/d16)\n",
           (double)worst);
    free(x);
    free(y);
    free(b);
}
END_TEST

START_TEST(test_float_bounds)
{
    /* Round to nearest: relative error <= half an ulp, 2^-11 for f16 (in
     * its normal range; our data sits above 2^-14 except for a tail which
     * gets the absolute subnormal bound 2^-25) and 2^-8 for bf16. f32 is
     * a copy. */
    enum { N = NROW * 16 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint16_t *h = malloc(N * sizeof *h);
    ck_assert(x && y && h);
    fill_weights(x, N, 4);
    float wf16 = 0, wbf16 = 0;
    gt_quantize_row(GT_TYPE_F16, x, h, N);
    gt_dequantize_row(GT_TYPE_F16, h, y, N);
    for (int i = 0; i < N; i++) {
        float e = fabsf(x[i] - y[i]);
        ck_assert(e <= fmaxf(fabsf(x[i]) * 0x1p-11f, 0x1p-25f));
        if (fabsf(x[i]) >= 0x1p-14f)
            wf16 = fmaxf(wf16, e / fabsf(x[i]));
    }
    gt_quantize_row(GT_TYPE_BF16, x, h, N);
    gt_dequantize_row(GT_TYPE_BF16, h, y, N);
    for (int i = 0; i < N; i++) {
        float e = fabsf(x[i] - y[i]);
        ck_assert(e <= fabsf(x[i]) * 0x1p-8f);
        wbf16 = fmaxf(wbf16, x[i] != 0 ? e / fabsf(x[i]) : 0);
    }
    gt_quantize_row(GT_TYPE_F32, x, y, N);
    ck_assert_mem_eq(x, y, N * sizeof *x);
    gt_dequantize_row(GT_TYPE_F32, x, y, N);
    ck_assert_mem_eq(x, y, N * sizeof *x);
    printf("f16: max rel err %.3g (2^-11 = %.3g); bf16: %.3g (2^-8 = %.3g)\n", (double)wf16,
           0x1p-11, (double)wbf16, 0x1p-8);
    free(x);
    free(y);
    free(h);
}
END_TEST

START_TEST(test_idempotent)
{
    /* Already-quantized values quantize to the same bytes: the scale is
     * recovered exactly (Q8_0: amax = 127*d16, Q4_0: max = -8*d16, both
     * exact products with an exact quotient; Q4_1: min = m16 and max =
     * 15*d16 + m16 up to one rounding that f16 absorbs) and every element
     * sits on a grid point, far from any rounding boundary. */
    const gt_type types[] = {GT_TYPE_Q8_0, GT_TYPE_Q4_0, GT_TYPE_Q4_1, GT_TYPE_F16,
                             GT_TYPE_BF16};
    enum { N = NROW * 8 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    uint8_t *q1 = malloc(N * 4), *q2 = malloc(N * 4);
    ck_assert(x && y && z && q1 && q2);
    fill_weights(x, N, 5);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t bytes = gt_row_size(types[t], N);
        ck_assert_uint_gt(bytes, 0);
        gt_quantize_row(types[t], x, q1, N);
        gt_dequantize_row(types[t], q1, y, N);
        gt_quantize_row(types[t], y, q2, N);
        ck_assert_msg(memcmp(q1, q2, bytes) == 0, "%s: requantized bytes differ",
                      gt_type_name(types[t]));
        gt_dequantize_row(types[t], q2, z, N);
        ck_assert_mem_eq(y, z, N * sizeof *y);
    }
    free(x);
    free(y);
    free(z);
    free(q1);
    free(q2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_q8_0_golden);
    tcase_add_test(tc, test_q4_0_golden);
    tcase_add_test(tc, test_q4_1_golden);
    tcase_add_test(tc, test_degenerate_blocks);
    tcase_add_test(tc, test_f16_special);
    tcase_add_test(tc, test_f16_exhaustive);
    tcase_add_test(tc, test_f16_nearest);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_q8_0_bound);
    tcase_add_test(tc, test_q4_0_bound);
    tcase_add_test(tc, test_q4_1_bound);
    tcase_add_test(tc, test_float_bounds);
    tcase_add_test(tc, test_idempotent);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
