/* test_cuda_dequant.c: the CUDA kernels' dequantization, run on the host.
 *
 * backends/cuda/cuda_dequant.h holds __host__ __device__ functions that the
 * GET_ROWS, mat-vec and tile kernels use to turn 8 consecutive elements of
 * a Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K row into floats. As
 * plain C (this file needs no CUDA, and builds with GT_CUDA=OFF) the same
 * functions are compared bit for bit (memcmp) with gt_dequantize_row, the
 * runtime's reference, itself tested against gguf-py by test_kquant. Rows
 * are seeded random bytes, so every bit of every layout is exercised, with
 * three kinds of f16 scale fields: moderate random, extremes (zeros of both
 * signs, the smallest subnormals, the largest finite values, the smallest
 * normal) mixed per block, and random finite f16 of any exponent.
 * NaN and inf scales are left out: the device's NaN payloads (canonical
 * NaN) are not promised to equal the host's.
 *
 * Compiled with -ffp-contract=off (tests/CMakeLists.txt), as quant_k.c is,
 * so neither side fuses a multiply and an add. What this cannot check is
 * the device compiler: that nvcc's code for the same source computes the
 * same floats (the functions use __fmul_rn/__fadd_rn/__fsub_rn there,
 * which are specified as single IEEE operations); the device cases of
 * test_cuda.c check GET_ROWS exact against the reference on a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/quant.h"
#include "testutil.h"

#include "../backends/cuda/cuda_dequant.h"

typedef struct dcase {
    gt_type type;
    int bytes;       /* the header's block size */
    int f16_off[2];  /* f16 scale fields within a block, -1 = none */
} dcase;

static const dcase CASES[] = {
    {GT_TYPE_Q5_0, GT_DQ_Q5_0_BYTES, {0, -1}},     {GT_TYPE_Q5_1, GT_DQ_Q5_1_BYTES, {0, 2}},
    {GT_TYPE_IQ4_NL, GT_DQ_IQ4_NL_BYTES, {0, -1}}, {GT_TYPE_Q2_K, GT_DQ_Q2_K_BYTES, {80, 82}},
    {GT_TYPE_Q3_K, GT_DQ_Q3_K_BYTES, {108, -1}},   {GT_TYPE_Q4_K, GT_DQ_Q4_K_BYTES, {0, 2}},
    {GT_TYPE_Q5_K, GT_DQ_Q5_K_BYTES, {0, 2}},      {GT_TYPE_Q6_K, GT_DQ_Q6_K_BYTES, {208, -1}},
};
#define N_CASES (int)(sizeof CASES / sizeof CASES[0])

enum { SCALES_MODERATE, SCALES_EXTREME, SCALES_ANY, N_SCALE_KINDS };
static const char *SCALE_KIND[N_SCALE_KINDS] = {"moderate", "extreme", "any finite"};

/* Row lengths: a 32-block type gets 32, 96 and 1024 elements, a K-quant
 * 256, 768 and 2048 (1, 3 and 8 super-blocks). */
#define N_LENS 3
#define ROWS 6 /* rows per (type, scale kind, length) */

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const uint16_t EXTREMES[] = {
    0x0000, 0x8000,         /* +0, -0 */
    0x0001, 0x8001,         /* smallest subnormals */
    0x03ff, 0x83ff,         /* largest subnormals */
    0x0400, 0x8400,         /* smallest normals */
    0x7bff, 0xfbff,         /* +-65504 */
    0x3c00, 0xbc00,         /* +-1 */
};
#define N_EXTREMES (sizeof EXTREMES / sizeof EXTREMES[0])

static uint16_t scale_field(int kind)
{
    switch (kind) {
    case SCALES_MODERATE: return gt_f32_to_f16((float)((double)(next_u64() >> 11) * 0x1p-53 - 0.5) * 0.02f);
    case SCALES_EXTREME: return EXTREMES[next_u64() % N_EXTREMES];
    default: {
        uint16_t h;
        do
            h = (uint16_t)next_u64();
        while ((h & 0x7c00) == 0x7c00); /* no inf or NaN */
        return h;
    }
    }
}

static void random_row(const dcase *c, int kind, uint8_t *dst, size_t nb)
{
    for (size_t i = 0; i < nb * (size_t)c->bytes; i++)
        dst[i] = (uint8_t)next_u64();
    for (size_t b = 0; b < nb; b++)
        for (int k = 0; k < 2; k++)
            if (c->f16_off[k] >= 0) {
                const uint16_t h = scale_field(kind);
                uint8_t *p = dst + b * (size_t)c->bytes + c->f16_off[k];
                p[0] = (uint8_t)(h & 0xff), p[1] = (uint8_t)(h >> 8);
            }
}

static int row_len(const dcase *c, int li)
{
    static const int small[N_LENS] = {32, 96, 1024}, big[N_LENS] = {256, 768, 2048};
    return gt_type_info(c->type)->block_size == 256 ? big[li] : small[li];
}

/* The header's row, 8 elements at a time (in a scattered order, as the
 * kernels' threads take chunks: the result must not depend on it). */
static void header_row(gt_type type, const uint8_t *row, int n, float *out)
{
    const int chunks = n / GT_DQ_CHUNK;
    for (int i = 0; i < chunks; i++) {
        const int c = (int)(((int64_t)i * 7 + 3) % chunks); /* 7 is coprime to every chunk count here */
        ck_assert_int_eq(gt_dq8(type, row, c * GT_DQ_CHUNK, out + c * GT_DQ_CHUNK), 0);
    }
}

/* Index of the first element whose bits differ, or -1 (memcmp decides). */
static int first_mismatch(const float *a, const float *b, int n)
{
    if (memcmp(a, b, (size_t)n * sizeof(float)) == 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return i;
    return 0;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The layouts the header hard-codes are the runtime's. */
START_TEST(block_sizes)
{
    for (int i = 0; i < N_CASES; i++) {
        const gt_type_traits *ti = gt_type_info(CASES[i].type);
        ck_assert_ptr_nonnull(ti);
        ck_assert_msg((int)ti->block_bytes == CASES[i].bytes, "%s: header %d bytes, runtime %zu",
                      ti->name, CASES[i].bytes, ti->block_bytes);
        ck_assert(gt_dq8_has(CASES[i].type));
    }
    ck_assert_int_eq(sizeof(gt_block_q5_0), GT_DQ_Q5_0_BYTES);
    ck_assert_int_eq(sizeof(gt_block_q5_1), GT_DQ_Q5_1_BYTES);
    ck_assert_int_eq(sizeof(gt_block_iq4_nl), GT_DQ_IQ4_NL_BYTES);
    ck_assert_int_eq(sizeof(gt_block_q2_K), GT_DQ_Q2_K_BYTES);
    ck_assert_int_eq(sizeof(gt_block_q3_K), GT_DQ_Q3_K_BYTES);
    ck_assert_int_eq(sizeof(gt_block_q4_K), GT_DQ_Q4_K_BYTES);
    ck_assert_int_eq(sizeof(gt_block_q5_K), GT_DQ_Q5_K_BYTES);
    ck_assert_int_eq(sizeof(gt_block_q6_K), GT_DQ_Q6_K_BYTES);
    /* Types the chunk functions do not read are refused, not guessed. */
    const gt_type others[] = {GT_TYPE_F32, GT_TYPE_F16, GT_TYPE_BF16, GT_TYPE_Q8_0,
                              GT_TYPE_Q4_0, GT_TYPE_Q4_1, GT_TYPE_Q8_K, GT_TYPE_I32};
    float out[8];
    uint8_t blk[300] = {0};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        ck_assert(!gt_dq8_has(others[i]));
        ck_assert_int_eq(gt_dq8(others[i], blk, 0, out), -1);
    }
}
END_TEST

START_TEST(iq4nl_levels)
{
    for (int q = 0; q < 16; q++)
        ck_assert_msg(gt_dq_iq4nl_level(q) == gt_iq4nl_levels[q], "level %d: header %d, runtime %d",
                      q, gt_dq_iq4nl_level(q), gt_iq4nl_levels[q]);
}
END_TEST

/* The host f16 conversion, all 65536 values (NaNs included: on the host the
 * payload is kept as the runtime keeps it). */
START_TEST(f16_all)
{
    for (uint32_t h = 0; h < 65536; h++) {
        const uint8_t p[2] = {(uint8_t)(h & 0xff), (uint8_t)(h >> 8)};
        const float a = gt_dq_f16(p), b = gt_f16_to_f32((uint16_t)h);
        ck_assert_msg(bits(a) == bits(b), "f16 0x%04x: header 0x%08x, runtime 0x%08x", h, bits(a),
                      bits(b));
    }
}
END_TEST

START_TEST(rows_bit_exact)
{
    const dcase *c = &CASES[_i];
    const char *name = gt_type_name(c->type);
    long long rows = 0, elements = 0;
    for (int kind = 0; kind < N_SCALE_KINDS; kind++)
        for (int li = 0; li < N_LENS; li++) {
            const int n = row_len(c, li);
            const size_t nb = (size_t)n / (size_t)gt_type_info(c->type)->block_size;
            ck_assert_int_eq(gt_row_size(c->type, n), nb * (size_t)c->bytes);
            uint8_t *row = malloc(nb * (size_t)c->bytes);
            float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
            ck_assert(row && want && got);
            for (int r = 0; r < ROWS; r++) {
                random_row(c, kind, row, nb);
                gt_dequantize_row(c->type, row, want, n);
                memset(got, 0xa5, sizeof(float) * (size_t)n); /* an element never written shows */
                header_row(c->type, row, n, got);
                const int bad = first_mismatch(want, got, n);
                ck_assert_msg(bad < 0,
                              "%s, %s scales, row %d of %d elements: element %d (block %d) is "
                              "%.9g (0x%08x) from cuda_dequant.h, %.9g (0x%08x) from "
                              "gt_dequantize_row",
                              name, SCALE_KIND[kind], r, n, bad,
                              bad / gt_type_info(c->type)->block_size, (double)got[bad],
                              bits(got[bad]), (double)want[bad], bits(want[bad]));
                rows++;
                elements += n;
            }
            free(row);
            free(want);
            free(got);
        }
    printf("  %-7s %lld rows, %lld elements bit-identical (moderate, extreme, any finite scales)\n",
           name, rows, elements);
}
END_TEST

/* The comparison can fail: one bit changed in one block after the
 * reference decoded the row gives a mismatch, found at that block. */
START_TEST(mismatch_is_caught)
{
    for (int i = 0; i < N_CASES; i++) {
        const dcase *c = &CASES[i];
        const int n = row_len(c, 1);
        const int bs = gt_type_info(c->type)->block_size;
        const size_t nb = (size_t)(n / bs);
        uint8_t *row = malloc(nb * (size_t)c->bytes);
        float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
        ck_assert(row && want && got);
        random_row(c, SCALES_MODERATE, row, nb);
        /* scale 1.0 in the last block, so that any changed value shows */
        uint8_t *last = row + (nb - 1) * (size_t)c->bytes;
        last[c->f16_off[0]] = 0x00, last[c->f16_off[0] + 1] = 0x3c;
        gt_dequantize_row(c->type, row, want, n);
        /* flip the lowest bit of the last block's last byte that is not a scale */
        int at = c->bytes - 1;
        while (at == c->f16_off[0] || at == c->f16_off[0] + 1 || at == c->f16_off[1] ||
               at == c->f16_off[1] + 1)
            at--;
        /* a byte that only moves a value by its weight in one element */
        int changed = -1;
        for (int bit = 0; bit < 8 && changed < 0; bit++) {
            last[at] ^= (uint8_t)(1u << bit);
            header_row(c->type, row, n, got);
            changed = first_mismatch(want, got, n);
            last[at] ^= (uint8_t)(1u << bit);
        }
        ck_assert_msg(changed >= 0, "%s: a flipped bit in byte %d of the last block went unseen",
                      gt_type_name(c->type), at);
        ck_assert_msg(changed / bs == (int)nb - 1, "%s: mismatch at element %d, not in the last block",
                      gt_type_name(c->type), changed);
        free(row);
        free(want);
        free(got);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_dequant");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, block_sizes);
    tcase_add_test(tc, iq4nl_levels);
    tcase_add_test(tc, f16_all);
    tcase_add_loop_test(tc, rows_bit_exact, 0, N_CASES);
    tcase_add_test(tc, mismatch_is_caught);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
