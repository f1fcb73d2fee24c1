/* test_quantize_mix.c: `gauntlet quantize` writes llama-quantize's K-quant
 * mixes (harness/matrix/quant_scheme.c).
 *
 * 1. The real Gemma 3 270M Q4_K_M release: its f32 dequantization
 *    requantized to q4_k_m must give every one of its 236 tensors the type
 *    the release has (F32 x109, Q5_0 x81, Q4_K x27, Q8_0 x10, Q6_K x9):
 *    llama.cpp chose those types, we did not write them down.
 * 2. SmolLM2-135M (30 layers, 576 wide, 9 heads / 3 KV heads, FFN 1536,
 *    tied embeddings) in q4_k_m, q5_k_m, q6_k, q3_k_m and q2_k: the count of
 *    tensors per type, derived by hand from the published rules below, and
 *    a few tensors by name. Then gguf-py (an implementation we did not
 *    write) must read each file and dequantize every tensor to exactly what
 *    our `quantize OUT f32` gives (tests/oracle/dequant_compare.py).
 *
 * The hand derivation for SmolLM2. Rows of 576 are not whole 256-blocks, so
 * every K-quant choice on a 576-wide tensor falls back (Q2_K/Q3_K ->
 * IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0); ffn_down rows are 1536
 * (6 blocks) and keep their K-quant. Per layer: attn_q, attn_k, attn_v,
 * attn_output, ffn_gate, ffn_up (576 wide), ffn_down (1536 wide), two norms;
 * plus token_embd (the output projection, tied: Q6_K -> Q8_0) and
 * output_norm: 61 f32 tensors. use_more_bits(i, 30) holds for i in
 * {0,1,2,5,8,11,14,17,20,23,26,27,28,29}: 14 layers.
 *   q4_k_m: q,k,o,gate,up Q4_K->Q5_0 (150); attn_v Q6_K->Q8_0 in 14 layers,
 *           else Q5_0 (16); ffn_down Q6_K x14, Q4_K x16; token_embd Q8_0.
 *   q5_k_m: as q4_k_m with Q5_K->Q5_1 (166), Q5_K x16.
 *   q6_k:   every 576-wide matrix Q8_0 (180 + token_embd), ffn_down Q6_K x30.
 *   q3_k_m: q,k,gate,up Q3_K->IQ4_NL (120); attn_v Q5_K->Q5_1 in layers 0-1,
 *           else Q4_K->Q5_0 (28); attn_output Q4_K->Q5_0 (30); ffn_down
 *           Q5_K for i < 30/16 (1), else Q4_K (29).
 *   q2_k:   n_gqa = 3 < 4 so attn_v Q3_K; q,k,v,o,gate,up all ->IQ4_NL (180);
 *           ffn_down Q3_K (30). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gt/gguf.h"
#include "gt/quant.h"
#include "testutil.h"

#define BIN "'" GT_BINARY_DIR "/gauntlet'"

static gt_gguf *open_or_fail(const char *path)
{
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_gguf_open(path, &g, &err) == 0, "%s: %s", path, err.msg);
    return g;
}

static const char *type_of(const gt_gguf *g, const char *name)
{
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, name);
    ck_assert_msg(t != NULL, "no tensor %s", name);
    return gt_type_name(t->type);
}

START_TEST(gemma_release_types)
{
    const char *gemma = getenv("GT_GEMMA3");
    const char *f32 = gt_test_tmp("gemma-f32.gguf"), *mine = gt_test_tmp("gemma-q4_k_m.gguf");
    ck_assert_int_eq(gt_test_sh(BIN " quantize --quiet '%s' '%s' f32", gemma, f32), 0);
    ck_assert_int_eq(gt_test_sh(BIN " quantize --quiet '%s' '%s' q4_k_m", f32, mine), 0);
    unlink(f32);
    gt_gguf *rel = open_or_fail(gemma), *out = open_or_fail(mine);
    ck_assert_int_eq(gt_gguf_n_tensors(rel), 236);
    ck_assert_int_eq(gt_gguf_n_tensors(out), 236);
    int differ = 0, count[GT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gt_gguf_n_tensors(rel); i++) {
        const gt_gguf_tensor *r = gt_gguf_tensor_at(rel, i);
        const gt_gguf_tensor *o = gt_gguf_find_tensor(out, r->name);
        ck_assert_msg(o != NULL, "%s missing from our file", r->name);
        count[r->type]++;
        if (o->type != r->type) {
            printf("  %s: release %s, ours %s\n", r->name, gt_type_name(r->type),
                   gt_type_name(o->type));
            differ++;
        }
    }
    ck_assert_int_eq(gt_gguf_get_int(out, "general.file_type", -1), 15); /* MOSTLY_Q4_K_M */
    printf("gemma q4_k_m: 236 tensors, %d with a type other than the release's "
           "(release: f32 %d, q5_0 %d, q4_k %d, q8_0 %d, q6_k %d)\n",
           differ, count[GT_TYPE_F32], count[GT_TYPE_Q5_0], count[GT_TYPE_Q4_K],
           count[GT_TYPE_Q8_0], count[GT_TYPE_Q6_K]);
    ck_assert_int_eq(differ, 0);
    gt_gguf_close(rel);
    gt_gguf_close(out);
    unlink(mine);
}
END_TEST

typedef struct mix_case {
    const char *scheme;
    int file_type;
    struct { gt_type t; int n; } counts[8]; /* every type present, {0, 0}-ended */
    struct { const char *tensor, *type; } named[6];
} mix_case;

static const mix_case MIXES[] = {
    {"q4_k_m", 15,
     {{GT_TYPE_F32, 61}, {GT_TYPE_Q5_0, 166}, {GT_TYPE_Q8_0, 15}, {GT_TYPE_Q6_K, 14},
      {GT_TYPE_Q4_K, 16}},
     {{"blk.0.attn_v.weight", "q8_0"}, {"blk.3.attn_v.weight", "q5_0"},
      {"blk.5.ffn_down.weight", "q6_k"}, {"blk.3.ffn_down.weight", "q4_k"},
      {"token_embd.weight", "q8_0"}, {"blk.7.attn_q.weight", "q5_0"}}},
    {"q5_k_m", 17,
     {{GT_TYPE_F32, 61}, {GT_TYPE_Q5_1, 166}, {GT_TYPE_Q8_0, 15}, {GT_TYPE_Q6_K, 14},
      {GT_TYPE_Q5_K, 16}},
     {{"blk.29.attn_v.weight", "q8_0"}, {"blk.4.attn_v.weight", "q5_1"},
      {"blk.26.ffn_down.weight", "q6_k"}, {"blk.25.ffn_down.weight", "q5_k"}}},
    {"q6_k", 18,
     {{GT_TYPE_F32, 61}, {GT_TYPE_Q8_0, 181}, {GT_TYPE_Q6_K, 30}},
     {{"blk.0.ffn_down.weight", "q6_k"}, {"blk.0.ffn_up.weight", "q8_0"}}},
    {"q3_k_m", 12,
     {{GT_TYPE_F32, 61}, {GT_TYPE_IQ4_NL, 120}, {GT_TYPE_Q5_0, 58}, {GT_TYPE_Q5_1, 2},
      {GT_TYPE_Q5_K, 1}, {GT_TYPE_Q4_K, 29}, {GT_TYPE_Q8_0, 1}},
     {{"blk.1.attn_v.weight", "q5_1"}, {"blk.2.attn_v.weight", "q5_0"},
      {"blk.0.ffn_down.weight", "q5_k"}, {"blk.1.ffn_down.weight", "q4_k"},
      {"blk.9.attn_output.weight", "q5_0"}, {"blk.9.ffn_gate.weight", "iq4_nl"}}},
    {"q2_k", 10,
     {{GT_TYPE_F32, 61}, {GT_TYPE_IQ4_NL, 180}, {GT_TYPE_Q3_K, 30}, {GT_TYPE_Q8_0, 1}},
     {{"blk.0.attn_v.weight", "iq4_nl"}, {"blk.0.ffn_down.weight", "q3_k"}}},
};
#define N_MIXES (int)(sizeof MIXES / sizeof MIXES[0])

START_TEST(smollm2_mix)
{
    const mix_case *c = &MIXES[_i];
    const char *src = gt_test_smollm2();
    char name[64];
    snprintf(name, sizeof name, "smol-%s.gguf", c->scheme);
    const char *out = gt_test_tmp(name);
    ck_assert_int_eq(gt_test_sh(BIN " quantize --quiet '%s' '%s' %s", src, out, c->scheme), 0);
    gt_gguf *g = open_or_fail(out);
    int have[GT_TYPE_COUNT] = {0}, want[GT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++)
        have[gt_gguf_tensor_at(g, i)->type]++;
    for (int k = 0; c->counts[k].n; k++)
        want[c->counts[k].t] = c->counts[k].n;
    for (int t = 0; t < GT_TYPE_COUNT; t++)
        ck_assert_msg(have[t] == want[t], "%s: %d tensors of %s, want %d", c->scheme, have[t],
                      gt_type_name(t), want[t]);
    for (int k = 0; k < 6 && c->named[k].tensor; k++)
        ck_assert_str_eq(type_of(g, c->named[k].tensor), c->named[k].type);
    ck_assert_int_eq(gt_gguf_get_int(g, "general.file_type", -1), c->file_type);
    gt_gguf_close(g);

    if (!gt_test_have_pyoracle()) {
        printf("SKIP gguf-py read of %s: gguf-py + numpy not importable from %s\n", c->scheme,
               gt_test_pyoracle());
    } else {
        snprintf(name, sizeof name, "smol-%s-f32.gguf", c->scheme);
        const char *f32 = gt_test_tmp(name);
        ck_assert_int_eq(gt_test_sh(BIN " quantize --quiet '%s' '%s' f32", out, f32), 0);
        ck_assert_msg(gt_test_sh("PYTHONPATH='%s' python3 '%s/tests/oracle/dequant_compare.py' "
                                 "'%s' '%s'",
                                 gt_test_pyoracle(), GT_SOURCE_DIR, out, f32) == 0,
                      "%s: gguf-py's dequantization differs from ours (lines above)", c->scheme);
        unlink(f32);
    }
    unlink(out);
}
END_TEST

START_TEST(scheme_names)
{
    char out[4096];
    /* An unknown scheme is a usage error that lists the schemes. */
    int rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " quantize a.gguf b.gguf q7_k");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "q4_k_m") && strstr(out, "q2_k") && strstr(out, "iq4_nl"), "%s",
                  out);
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " quantize --help");
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(out, "q5_k_m") && strstr(out, "falls back") != NULL, "%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quantize_mix");
    TCase *tc = tcase_create("mix");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, scheme_names);
    const char *gemma = getenv("GT_GEMMA3");
    gt_test_add_if(tc, gemma_release_types, gemma && access(gemma, R_OK) == 0,
                   "Gemma 3 270M Q4_K_M not fetched ($GT_GEMMA3; ci/fetch-models.sh "
                   "gemma3-270m-q4_k_m)");
    if (gt_test_smollm2() && gt_test_sanitized()) {
        printf("SKIP smollm2_mix[1..%d]: sanitized build: only q4_k_m runs (each mix quantizes "
               "135M weights; the plain build runs all five)\n", N_MIXES - 1);
        tcase_add_loop_test(tc, smollm2_mix, 0, 1);
    } else if (gt_test_smollm2())
        tcase_add_loop_test(tc, smollm2_mix, 0, N_MIXES);
    else
        printf("SKIP smollm2_mix: SmolLM2-135M not fetched ($GT_SMOLLM2; ci/fetch-models.sh "
               "smollm2-135m)\n");
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
