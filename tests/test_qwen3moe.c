/* test_qwen3moe.c: the qwen3moe architecture (a mixture of experts) on the
 * synthetic qwen3moe-tiny model:
 *   1. the loader reads its hyper-parameters and 3-D expert tensors, and
 *      refuses an expert tensor of the wrong shape by name;
 *   2. the reference backend equals an independent numpy forward pass
 *      (tests/oracle/qwen3moe_forward.py; gguf-py + numpy in $GT_PYORACLE)
 *      at every position, top-1 and logits within 1e-4;
 *   3. cpu and opencl equal the reference (f32 and q8_0 weights), and a
 *      token-by-token decode equals the one-batch evaluation.
 * llama.cpp's goldens for this model come through the coordinator's
 * oracle (tests/vectors/arch) when it lands. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/gguf.h"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "gt/synth.h"

/* A fixed token sequence (ids < 512, no tokenizer involved). */
static const int32_t IDS[] = {1,   259, 306, 337, 395, 504, 360, 413, 259, 364, 386, 484,
                              430, 413, 259, 335, 371, 343, 383, 259, 330, 332, 341, 335,
                              462, 324, 336, 369, 259, 303, 332, 407, 260, 183, 416, 493};
#define N_IDS (int)(sizeof IDS / sizeof IDS[0])

static const char *synth(const char *name, gt_type type)
{
    const char *path = gt_test_tmp(name);
    gt_err err = {{0}};
    ck_assert_msg(gt_synth_write(path, "qwen3moe-tiny", 1, type, &err) == 0, "%s", err.msg);
    return path;
}

/* Every position's logits of IDS on a backend: in one batch, or token by token. */
static float *eval(const char *model, const char *backend, bool decode)
{
    gt_err err = {{0}};
    gt_model *m;
    gt_backend *b;
    gt_session *s;
    ck_assert_msg(gt_model_load(model, &m, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_backend_open(backend, NULL, &b, &err) == 0, "%s: %s", backend, err.msg);
    ck_assert_msg(gt_session_new(m, b, NULL, &s, &err) == 0, "%s: %s", backend, err.msg);
    const int nv = gt_model_hparams(m)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)nv * N_IDS);
    ck_assert_ptr_nonnull(out);
    if (decode)
        for (int i = 0; i < N_IDS; i++)
            ck_assert_msg(gt_session_eval(s, &IDS[i], 1, false, out + (size_t)i * nv, &err) == 0,
                          "%s", err.msg);
    else
        ck_assert_msg(gt_session_eval(s, IDS, N_IDS, true, out, &err) == 0, "%s", err.msg);
    gt_session_free(s);
    gt_backend_close(b);
    gt_model_free(m);
    return out;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

START_TEST(loads_hparams_and_experts)
{
    gt_err err = {{0}};
    gt_model *m;
    ck_assert_msg(gt_model_load(synth("moe.gguf", GT_TYPE_F32), &m, &err) == 0, "%s", err.msg);
    const gt_hparams *hp = gt_model_hparams(m);
    ck_assert_int_eq(hp->arch_id, GT_ARCH_QWEN3MOE);
    ck_assert_int_eq(hp->n_expert, 8);
    ck_assert_int_eq(hp->n_expert_used, 2);
    ck_assert_int_eq(hp->n_ff_exp, 32);
    ck_assert_int_eq(hp->head_dim, 32); /* key_length, not n_embd / n_head = 16 */
    ck_assert_int_eq(hp->q_dim, 128);
    ck_assert_int_eq(hp->rope_mode, 1);
    ck_assert(hp->expert_norm);
    /* per token: the router and 2 of 8 experts, not all 8 */
    const uint64_t per_layer_attn = 64 * 128 * 2 + 64 * 64 * 2, router = 64 * 8,
                   two_experts = 2 * 3 * 64 * 32;
    ck_assert_uint_eq(gt_model_matrix_params(m),
                      512 * 64 + 2 * (per_layer_attn + router + two_experts));
    gt_model_free(m);

    /* An expert tensor with one plane too few is refused, by name. */
    gt_gguf *g;
    ck_assert_msg(gt_gguf_open(gt_test_tmp("moe.gguf"), &g, &err) == 0, "%s", err.msg);
    gt_gguf_writer *w = gt_gguf_writer_new();
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        gt_gguf_writer_copy_kv(w, g, i);
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        size_t bytes = t->nbytes;
        if (strcmp(t->name, "blk.1.ffn_up_exps.weight") == 0) {
            ne[2] -= 1;
            bytes -= bytes / 8;
        }
        gt_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data,
                                  bytes);
    }
    const char *bad = gt_test_tmp("moe-bad.gguf");
    ck_assert_msg(gt_gguf_writer_write(w, bad, &err) == 0, "%s", err.msg);
    gt_gguf_writer_free(w);
    gt_gguf_close(g);
    ck_assert_int_ne(gt_model_load(bad, &m, &err), 0);
    ck_assert_msg(strstr(err.msg, "blk.1.ffn_up_exps.weight") && strstr(err.msg, "x 7"), "%s",
                  err.msg);
}
END_TEST

START_TEST(reference_matches_numpy_oracle)
{
    const char *model = synth("moe-oracle.gguf", GT_TYPE_F32);
    float *ref = eval(model, "reference", false);
    char list[1024] = "";
    for (int i = 0, o = 0; i < N_IDS; i++)
        o += snprintf(list + o, sizeof list - (size_t)o, "%s%d", i ? "," : "", IDS[i]);
    const char *out = gt_test_tmp("oracle.f32");
    ck_assert_int_eq(gt_test_sh("PYTHONPATH='%s' python3 '%s/tests/oracle/qwen3moe_forward.py' "
                                "'%s' '%s' '%s'",
                                gt_test_pyoracle(), GT_SOURCE_DIR, model, list, out),
                     0);
    float *want = (float *)gt_test_slurp(out);
    ck_assert_ptr_nonnull(want);
    const int nv = 512;
    for (int i = 0; i < N_IDS; i++)
        ck_assert_msg(gt_argmax(ref + (size_t)i * nv, nv) == gt_argmax(want + (size_t)i * nv, nv),
                      "position %d: top-1 differs from the oracle", i);
    /* float32 weights and activations against float64: ~1e-6 observed;
     * 1e-4 still catches any wrong expert (differences of ~0.1 and up) */
    const double d = max_diff(ref, want, (size_t)nv * N_IDS);
    printf("reference vs numpy oracle: %d positions, top-1 equal, max |dlogit| %.3g\n", N_IDS, d);
    ck_assert_msg(d < 1e-4, "max |dlogit| %g", d);
    free(ref);
    free(want);
}
END_TEST

static void backends_agree(gt_type type, const char *name)
{
    const char *model = synth(name, type);
    const size_t n = (size_t)512 * N_IDS;
    float *ref = eval(model, "reference", false);
    float *ref_dec = eval(model, "reference", true);
    /* decode (MUL_MAT_ID of one token) vs batch: same definition, same bits */
    ck_assert_msg(max_diff(ref, ref_dec, n) == 0.0, "reference decode vs batch %g",
                  max_diff(ref, ref_dec, n));
    static const char *const others[] = {"cpu", "opencl"};
    for (int i = 0; i < 2; i++) {
        const gt_backend_entry *e = gt_backend_find(others[i]);
        if (!e || !e->reg) {
            printf("SKIP %s: not available (%s)\n", others[i], e ? e->why : "not built");
            continue;
        }
        for (int decode = 0; decode < 2; decode++) {
            float *got = eval(model, others[i], decode);
            const double d = max_diff(ref, got, n);
            printf("%s %s %s: max |dlogit| vs reference %.3g\n", gt_type_name(type), others[i],
                   decode ? "decode" : "batch", d);
            /* float accumulation vs double over K <= 128: ~5e-6 observed */
            ck_assert_msg(d < 1e-3, "%s: max |dlogit| %g", others[i], d);
            for (int p = 0; p < N_IDS; p++)
                ck_assert_int_eq(gt_argmax(got + (size_t)p * 512, 512),
                                 gt_argmax(ref + (size_t)p * 512, 512));
            free(got);
        }
    }
    free(ref);
    free(ref_dec);
}

START_TEST(backends_agree_f32) { backends_agree(GT_TYPE_F32, "moe-f32.gguf"); }
END_TEST
START_TEST(backends_agree_q8_0) { backends_agree(GT_TYPE_Q8_0, "moe-q8.gguf"); }
END_TEST

int main(void)
{
    Suite *s = suite_create("qwen3moe");
    TCase *tc = tcase_create("qwen3moe");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, loads_hparams_and_experts);
    tcase_add_test(tc, backends_agree_f32);
    tcase_add_test(tc, backends_agree_q8_0);
    gt_test_add_if(tc, reference_matches_numpy_oracle, gt_test_have_pyoracle(),
                   "gguf-py + numpy not importable from $GT_PYORACLE (ci/test.sh installs them)");
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
