/* test_kquant.c: Q5_0, Q5_1, the K-quants and IQ4_NL (runtime/src/quant_k.c).
 *
 * 1. Dequantization bit for bit against gguf-py (the `gguf` package on
 *    PyPI, an implementation we did not write), on blocks from our own
 *    quantizer and on blocks of seeded random bytes (scales made finite), so
 *    that every bit position of every layout is exercised, not only those
 *    our quantizer produces. ci/test.sh installs gguf-py and numpy into
 *    $GT_PYORACLE (pip --target); without them that case prints SKIP with
 *    the reason (it is the only case that can skip).
 * 2. Quantization error on Gaussian rows: NMSE per type under a bound that
 *    is a small margin over what was measured (the bounds' order follows the
 *    bits per weight); requantizing a dequantized row loses much less than
 *    the first pass; an all-zero row stays zero. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gt/quant.h"
#include "testutil.h"

typedef struct kcase {
    gt_type type;
    const char *gguf_name; /* gguf.GGMLQuantizationType member, NULL = not in gguf-py */
    double max_nmse;       /* on N(0,1) rows */
} kcase;

static const kcase CASES[] = {
    {GT_TYPE_Q5_0, "Q5_0", 2.0e-3}, {GT_TYPE_Q5_1, "Q5_1", 1.6e-3},
    {GT_TYPE_Q2_K, "Q2_K", 0.12},   {GT_TYPE_Q3_K, "Q3_K", 0.04},
    {GT_TYPE_Q4_K, "Q4_K", 9.0e-3}, {GT_TYPE_Q5_K, "Q5_K", 2.4e-3},
    {GT_TYPE_Q6_K, "Q6_K", 6.0e-4}, {GT_TYPE_Q8_K, NULL, 1.0e-4},
    {GT_TYPE_IQ4_NL, "IQ4_NL", 9.0e-3},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])
#define ROW 1024
#define ROWS 16

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform(void) { return ((double)(next_u64() >> 11) + 0.5) * 0x1p-53; }
static float gauss(void) { return (float)(sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform())); }

static void gaussian_rows(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = gauss();
}

/* Random bytes for nb blocks of type t whose f16 scale fields are finite
 * and moderate, so the oracle and we both stay in normal float ranges. */
static void random_blocks(gt_type t, uint8_t *dst, size_t nb)
{
    const gt_type_traits *ti = gt_type_info(t);
    for (size_t i = 0; i < nb * ti->block_bytes; i++)
        dst[i] = (uint8_t)next_u64();
    /* f16 fields at these byte offsets within a block */
    int off[2] = {-1, -1};
    switch (t) {
    case GT_TYPE_Q5_0: off[0] = 0; break;
    case GT_TYPE_Q5_1: off[0] = 0, off[1] = 2; break;
    case GT_TYPE_Q2_K: off[0] = 80, off[1] = 82; break;
    case GT_TYPE_Q3_K: off[0] = 108; break;
    case GT_TYPE_Q4_K:
    case GT_TYPE_Q5_K: off[0] = 0, off[1] = 2; break;
    case GT_TYPE_Q6_K: off[0] = 208; break;
    case GT_TYPE_IQ4_NL: off[0] = 0; break;
    default: return;
    }
    for (size_t b = 0; b < nb; b++)
        for (int k = 0; k < 2; k++)
            if (off[k] >= 0) {
                uint16_t h = gt_f32_to_f16((float)((uniform() - 0.5) * 0.02));
                memcpy(dst + b * ti->block_bytes + off[k], &h, 2);
            }
}

/* gguf-py's dequantization of the bytes in qpath (type name) into fpath. */
static int oracle_dequantize(const char *name, const char *qpath, const char *fpath)
{
    return gt_test_sh("PYTHONPATH='%s' python3 -c 'import sys, numpy as np\n"
                      "from gguf import quants, GGMLQuantizationType as T\n"
                      "q = np.fromfile(sys.argv[2], dtype=np.uint8)\n"
                      "quants.dequantize(q, T[sys.argv[1]]).astype(np.float32).tofile(sys.argv[3])\n"
                      "' %s '%s' '%s'",
                      gt_test_pyoracle(), name, qpath, fpath);
}

/* Our dequantization of nb blocks vs the oracle's, bit for bit. */
static void compare_with_oracle(const kcase *c, const uint8_t *q, size_t nb, const char *what)
{
    const gt_type_traits *ti = gt_type_info(c->type);
    const size_t n = nb * (size_t)ti->block_size;
    const char *qp = gt_test_tmp("blocks.bin"), *fp = gt_test_tmp("oracle.f32");
    gt_test_write_file(qp, q, nb * ti->block_bytes);
    ck_assert_int_eq(oracle_dequantize(c->gguf_name, qp, fp), 0);
    FILE *f = fopen(fp, "rb");
    ck_assert_ptr_nonnull(f);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    ck_assert_uint_eq(fread(want, sizeof *want, n, f), n);
    fclose(f);
    gt_dequantize_row(c->type, q, got, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)) != 0)
            ck_abort_msg("%s %s: element %zu (block %zu, position %zu): gguf-py %.9g, ours %.9g",
                         ti->name, what, i, i / ti->block_size, i % ti->block_size, want[i],
                         got[i]);
    free(want);
    free(got);
}

START_TEST(dequantize_matches_gguf_py)
{
    const kcase *c = &CASES[_i];
    if (!c->gguf_name) {
        printf("SKIP dequantize_matches_gguf_py[%s]: gguf-py has no dequantizer for it\n",
               gt_type_name(c->type));
        return;
    }
    const gt_type_traits *ti = gt_type_info(c->type);
    const size_t n = ROW * ROWS, nb = n / (size_t)ti->block_size;
    float *x = malloc(n * sizeof *x);
    uint8_t *q = malloc(nb * ti->block_bytes);
    gaussian_rows(x, n);
    gt_quantize_row(c->type, x, q, (int64_t)n);
    compare_with_oracle(c, q, nb, "quantized Gaussian rows");
    random_blocks(c->type, q, nb);
    compare_with_oracle(c, q, nb, "random blocks");
    free(x);
    free(q);
}
END_TEST

START_TEST(quantization_error_bounded)
{
    const kcase *c = &CASES[_i];
    const gt_type_traits *ti = gt_type_info(c->type);
    ck_assert_ptr_nonnull(ti);
    ck_assert_int_eq(ROW % ti->block_size, 0);
    const size_t n = ROW * ROWS, nb = n / (size_t)ti->block_size;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    uint8_t *q = malloc(nb * ti->block_bytes), *q2 = malloc(nb * ti->block_bytes);
    gaussian_rows(x, n);
    gt_quantize_row(c->type, x, q, (int64_t)n);
    gt_dequantize_row(c->type, q, y, (int64_t)n);
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(y[i]), "%s: element %zu is %g", ti->name, i, y[i]);
        err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        ref += (double)x[i] * x[i];
    }
    const double nmse = err / ref;
    printf("%s: NMSE %.3e on N(0,1) (bound %.1e)\n", ti->name, nmse, c->max_nmse);
    ck_assert_msg(nmse <= c->max_nmse, "%s: NMSE %.3e > %.1e", ti->name, nmse, c->max_nmse);
    /* Requantizing what the file holds must not lose much more: the values
     * already sit on a grid the quantizer can find again. */
    gt_quantize_row(c->type, y, q2, (int64_t)n);
    gt_dequantize_row(c->type, q2, z, (int64_t)n);
    double err2 = 0;
    for (size_t i = 0; i < n; i++)
        err2 += ((double)z[i] - y[i]) * ((double)z[i] - y[i]);
    ck_assert_msg(err2 / ref <= 0.5 * nmse, "%s: requantizing loses %.3e (first pass %.3e)",
                  ti->name, err2 / ref, nmse);
    /* Zero rows stay zero, with no NaN from a zero scale. */
    memset(x, 0, n * sizeof *x);
    gt_quantize_row(c->type, x, q, (int64_t)n);
    gt_dequantize_row(c->type, q, y, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(y[i] == 0.0f, "%s: zero row gives %g at %zu", ti->name, y[i], i);
    free(x), free(y), free(z), free(q), free(q2);
}
END_TEST

START_TEST(type_table)
{
    static const struct { gt_type t; const char *name; int bs; size_t bytes; } T[] = {
        {GT_TYPE_Q5_0, "q5_0", 32, 22},  {GT_TYPE_Q5_1, "q5_1", 32, 24},
        {GT_TYPE_Q2_K, "q2_k", 256, 84}, {GT_TYPE_Q3_K, "q3_k", 256, 110},
        {GT_TYPE_Q4_K, "q4_k", 256, 144}, {GT_TYPE_Q5_K, "q5_k", 256, 176},
        {GT_TYPE_Q6_K, "q6_k", 256, 210}, {GT_TYPE_Q8_K, "q8_k", 256, 292},
        {GT_TYPE_IQ4_NL, "iq4_nl", 32, 18},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        const gt_type_traits *ti = gt_type_info(T[i].t);
        ck_assert_ptr_nonnull(ti);
        ck_assert_str_eq(ti->name, T[i].name);
        ck_assert_int_eq(ti->block_size, T[i].bs);
        ck_assert_uint_eq(ti->block_bytes, T[i].bytes);
        gt_type back;
        ck_assert_int_eq(gt_type_from_name(T[i].name, &back), 0);
        ck_assert_int_eq(back, T[i].t);
    }
    ck_assert_ptr_null(gt_type_info(99));
}
END_TEST

/* The real release file: `gauntlet quantize GEMMA out.gguf f32` must equal
 * gguf-py's dequantization of all 236 tensors, bit for bit. */
START_TEST(real_file_f32_matches_gguf_py)
{
    const char *gemma = getenv("GT_GEMMA3");
    const char *out = gt_test_tmp("gemma-f32.gguf");
    ck_assert_int_eq(gt_test_sh("'%s/gauntlet' quantize --quiet '%s' '%s' f32", GT_BINARY_DIR,
                                gemma, out),
                     0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "PYTHONPATH='%s' python3 '%s/tests/oracle/dequant_compare.py' '%s' '%s'",
             gt_test_pyoracle(), GT_SOURCE_DIR, gemma, out);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[512], last[512] = "";
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        snprintf(last, sizeof last, "%s", line);
    }
    const int rc = pclose(p);
    ck_assert_msg(rc == 0, "gguf-py disagrees: %s", last);
    ck_assert_msg(strstr(last, "236 tensors compared") && strstr(last, " 0 differ"), "%s", last);
    unlink(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kquant");
    TCase *tc = tcase_create("kquant");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, type_table);
    tcase_add_loop_test(tc, quantization_error_bounded, 0, (int)N_CASES);
    if (gt_test_have_pyoracle()) {
        tcase_add_loop_test(tc, dequantize_matches_gguf_py, 0, (int)N_CASES);
        const char *gemma = getenv("GT_GEMMA3");
        if (gemma && access(gemma, R_OK) == 0)
            tcase_add_test(tc, real_file_f32_matches_gguf_py);
        else
            printf("SKIP real_file_f32_matches_gguf_py: Gemma 3 270M Q4_K_M not fetched"
                   " ($GT_GEMMA3; ci/fetch-models.sh gemma3-270m-q4_k_m)\n");
    } else {
        printf("SKIP dequantize_matches_gguf_py: gguf-py + numpy not importable from %s (ci/test.sh"
               " installs them there with pip --target)\n", gt_test_pyoracle());
    }
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
