/* test_rope_factors.c: RoPE frequency factors in models (issue 35).
 *
 *  - llama3-tiny (synth, rope_freqs.weight): reference, cpu and opencl give
 *    the same logits, and the factors matter: the same file without the
 *    tensor gives logits that differ by far more than the backends do.
 *  - llama.rope.scaling.type linear with factor 2 equals rope_freqs of all 2s
 *    (freq_scale 1/2), and any other scaling type is refused by name, as is
 *    an attention.key_length other than n_embd / n_head.
 *  - phi3-tiny (synth, long/short factors) with an original context of 256:
 *    a session of 128 positions uses the short factors, one of 300 the long
 *    ones (llama.cpp's rule on the context rounded up to 256), and the two
 *    differ; reference, cpu and opencl agree on both.
 *  - The repro: SmolLM2 requantized to Q8_0 with rope_freqs.weight
 *    (32 factors from 1 to 8) added continues "The capital of France is" at
 *    temperature 0 exactly as llama.cpp 0c1e57098's llama-server does, on
 *    every backend (skips without GT_SMOLLM2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/gguf.h"
#include "gt/model.h"
#include "gt/session.h"
#include "gt/synth.h"
#include "gt/tokenizer.h"
#include "testutil.h"

/* cpu/opencl vs the reference on f32 weights: float vs double accumulation
 * over dots of <= 512 gives ~1e-6 relative; 1e-3 absolute on logits of a
 * few units is a wide margin that a missing factor (>= 1e-2) still exceeds. */
#define BACKEND_TOL 1e-3
/* What the factors must change at least (measured: > 0.1). */
#define FACTOR_EFFECT 1e-2

static const int32_t PROMPT[] = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108,
                                 100, 33, 10, 84, 104, 101, 32, 99, 97, 116, 32, 115,
                                 72, 101, 108, 108, 111, 44, 32, 119};
#define N_PROMPT (int)(sizeof PROMPT / sizeof PROMPT[0])

/* Copies src to path, leaving out tensor `drop` (NULL: none), converting
 * 2-D matrices to `to` (GT_TYPE_COUNT: keep), adding a 1-D f32 tensor
 * `add` of n values (NULL: none) and setting string key skey to sval. */
typedef struct rewrite {
    const char *drop;
    gt_type to;
    const char *add;
    const float *add_v;
    int64_t add_n;
    const char *skey, *sval;
    const char *fkey;
    float fval;
    const char *ukey[2];
    uint32_t uval[2];
} rewrite;

static void rewrite_gguf(const char *src, const char *path, const rewrite *r)
{
    gt_err err = {{0}};
    gt_gguf *g = NULL;
    ck_assert_msg(gt_gguf_open(src, &g, &err) == 0, "%s", err.msg);
    gt_gguf_writer *w = gt_gguf_writer_new();
    ck_assert(w != NULL);
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        ck_assert(gt_gguf_writer_copy_kv(w, g, i) == 0);
    if (r->to == GT_TYPE_Q8_0)
        gt_gguf_writer_set_u32(w, "general.file_type", 7);
    if (r->skey)
        gt_gguf_writer_set_str(w, r->skey, r->sval);
    if (r->fkey)
        gt_gguf_writer_set_f32(w, r->fkey, r->fval);
    for (int i = 0; i < 2; i++)
        if (r->ukey[i])
            gt_gguf_writer_set_u32(w, r->ukey[i], r->uval[i]);
    void **keep = calloc((size_t)gt_gguf_n_tensors(g) + 1, sizeof *keep);
    int n_keep = 0;
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        if (r->drop && strcmp(t->name, r->drop) == 0)
            continue;
        if (r->to == GT_TYPE_COUNT || t->n_dims != 2 || t->type == r->to) {
            gt_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
            continue;
        }
        const int64_t cols = t->ne[0], rows = t->ne[1];
        const size_t in_rb = gt_row_size(t->type, cols), out_rb = gt_row_size(r->to, cols);
        float *row = malloc(sizeof *row * (size_t)cols);
        char *data = malloc(out_rb * (size_t)rows);
        ck_assert(row && data);
        for (int64_t k = 0; k < rows; k++) {
            gt_dequantize_row(t->type, (const char *)t->data + (size_t)k * in_rb, row, cols);
            gt_quantize_row(r->to, row, data + (size_t)k * out_rb, cols);
        }
        free(row);
        keep[n_keep++] = data;
        gt_gguf_writer_add_tensor(w, t->name, r->to, 2, t->ne, data, out_rb * (size_t)rows);
    }
    if (r->add)
        gt_gguf_writer_add_tensor(w, r->add, GT_TYPE_F32, 1, &r->add_n, r->add_v,
                                  sizeof(float) * (size_t)r->add_n);
    ck_assert_msg(gt_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    gt_gguf_writer_free(w);
    for (int i = 0; i < n_keep; i++)
        free(keep[i]);
    free(keep);
    gt_gguf_close(g);
}

static const char *synth(const char *preset)
{
    char name[64];
    snprintf(name, sizeof name, "%s.gguf", preset);
    const char *path = gt_test_tmp(name);
    gt_err err = {{0}};
    ck_assert_msg(gt_synth_write(path, preset, 7, GT_TYPE_F32, &err) == 0, "%s", err.msg);
    return path;
}

/* All logits of PROMPT (n_vocab per position) on a backend; NULL when the
 * backend cannot be opened (why says so). */
static float *prompt_logits(const char *path, const char *backend, int n_ctx, int *n_vocab)
{
    gt_err err = {{0}};
    gt_model *m = NULL;
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    *n_vocab = gt_model_hparams(m)->n_vocab;
    gt_backend *b = NULL;
    gt_backend_config cfg = {0};
    ck_assert_msg(gt_backend_open(backend, &cfg, &b, &err) == 0, "%s: %s", backend, err.msg);
    gt_session *s = NULL;
    gt_session_params sp = {.n_ctx = n_ctx};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
    float *lg = malloc(sizeof *lg * (size_t)N_PROMPT * (size_t)*n_vocab);
    ck_assert_msg(gt_session_eval(s, PROMPT, N_PROMPT, true, lg, &err) == 0, "%s", err.msg);
    gt_session_free(s);
    gt_backend_close(b);
    gt_model_free(m);
    return lg;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static bool have(const char *backend)
{
    const gt_backend_entry *e = gt_backend_find(backend);
    return e && e->reg;
}

/* The model on reference, cpu, opencl (when present): all within BACKEND_TOL. */
static float *check_backends(const char *path, int n_ctx, int *n_vocab, const char *what)
{
    float *ref = prompt_logits(path, "reference", n_ctx, n_vocab);
    const char *others[] = {"cpu", "opencl"};
    for (int i = 0; i < 2; i++) {
        if (!have(others[i])) {
            ck_assert_msg(strcmp(others[i], "opencl") == 0, "no cpu backend");
            printf("%s: opencl not available, cpu only\n", what);
            continue;
        }
        int nv;
        float *lg = prompt_logits(path, others[i], n_ctx, &nv);
        const double d = max_diff(lg, ref, (size_t)N_PROMPT * (size_t)nv);
        printf("%s: %s vs reference max|dlogit| %.3g\n", what, others[i], d);
        ck_assert_msg(d <= BACKEND_TOL, "%s: %s differs from the reference by %g", what,
                      others[i], d);
        free(lg);
    }
    return ref;
}

START_TEST(llama3_factors_on_every_backend)
{
    const char *path = synth("llama3-tiny");
    int nv;
    float *with = check_backends(path, 128, &nv, "llama3-tiny");
    const char *plain = gt_test_tmp("llama3-tiny-no-freqs.gguf");
    rewrite r = {.drop = "rope_freqs.weight", .to = GT_TYPE_COUNT};
    rewrite_gguf(path, plain, &r);
    float *without = check_backends(plain, 128, &nv, "llama3-tiny without rope_freqs");
    const double effect = max_diff(with, without, (size_t)N_PROMPT * (size_t)nv);
    printf("llama3-tiny: rope_freqs moves logits by up to %.3g\n", effect);
    ck_assert_msg(effect > FACTOR_EFFECT, "rope_freqs changed logits by only %g", effect);
    free(with);
    free(without);
}
END_TEST

START_TEST(llama3_linear_scaling)
{
    /* linear factor 2 (freq_scale 1/2) == rope_freqs of all 2s */
    const char *base = synth("llama3-tiny");
    const char *plain = gt_test_tmp("plain.gguf"), *twos = gt_test_tmp("twos.gguf");
    const char *linear = gt_test_tmp("linear.gguf"), *yarn = gt_test_tmp("yarn.gguf");
    rewrite drop = {.drop = "rope_freqs.weight", .to = GT_TYPE_COUNT};
    rewrite_gguf(base, plain, &drop);
    float v[8];
    for (int j = 0; j < 8; j++)
        v[j] = 2.0f;
    rewrite add = {.to = GT_TYPE_COUNT, .add = "rope_freqs.weight", .add_v = v, .add_n = 8};
    rewrite_gguf(plain, twos, &add);
    rewrite lin = {.to = GT_TYPE_COUNT, .skey = "llama.rope.scaling.type", .sval = "linear",
                   .fkey = "llama.rope.scaling.factor", .fval = 2.0f};
    rewrite_gguf(plain, linear, &lin);
    int nv;
    float *a = prompt_logits(twos, "reference", 64, &nv);
    float *b = prompt_logits(linear, "reference", 64, &nv);
    float *c = prompt_logits(plain, "reference", 64, &nv);
    const size_t n = (size_t)N_PROMPT * (size_t)nv;
    printf("linear x2 vs factors of 2: %.3g; vs unscaled: %.3g\n", max_diff(a, b, n),
           max_diff(b, c, n));
    ck_assert_msg(max_diff(a, b, n) < 1e-5, "linear scaling differs from factors of 2");
    ck_assert_msg(max_diff(b, c, n) > FACTOR_EFFECT, "linear scaling had no effect");
    free(a);
    free(b);
    free(c);

    rewrite y = {.to = GT_TYPE_COUNT, .skey = "llama.rope.scaling.type", .sval = "yarn",
                 .fkey = "llama.rope.scaling.factor", .fval = 4.0f};
    rewrite_gguf(plain, yarn, &y);
    gt_model *m = NULL;
    gt_err err = {{0}};
    ck_assert(gt_model_load(yarn, &m, &err) != 0);
    ck_assert_msg(strstr(err.msg, "unsupported: metadata key llama.rope.scaling.type = \"yarn\" is not implemented") != NULL, "%s",
                  err.msg);

    /* a stated head size this graph does not derive is refused; the right one loads */
    const char *kl = gt_test_tmp("key_length.gguf");
    rewrite k = {.to = GT_TYPE_COUNT, .ukey = {"llama.attention.key_length"}, .uval = {32}};
    rewrite_gguf(plain, kl, &k);
    ck_assert(gt_model_load(kl, &m, &err) != 0);
    ck_assert_msg(strstr(err.msg, "unsupported: metadata key llama.attention.key_length = 32 is not implemented") != NULL, "%s",
                  err.msg);
    k.uval[0] = 16;
    rewrite_gguf(plain, kl, &k);
    ck_assert_msg(gt_model_load(kl, &m, &err) == 0, "%s", err.msg);
    gt_model_free(m);

    /* the acceptance: the Llama-3-style file with a made-up tensor is
     * unsupported, naming it (rope_freqs itself is used) */
    const char *sink = gt_test_tmp("sink.gguf");
    rewrite x = {.to = GT_TYPE_COUNT, .add = "blk.0.attn_sink_extra.weight", .add_v = v,
                 .add_n = 8};
    rewrite_gguf(base, sink, &x);
    ck_assert_int_eq(gt_model_load(sink, &m, &err), GT_MODEL_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "unsupported: tensor blk.0.attn_sink_extra.weight is not used") &&
                      !strstr(err.msg, "rope_freqs"),
                  "%s", err.msg);
}
END_TEST

START_TEST(phi3_long_short)
{
    /* phi3-tiny's original context (64) is below llama.cpp's 256 rounding,
     * so every session uses its long factors (as its golden checks); with
     * an original context of 256 a session of 128 uses the short ones and
     * one of 300 (rounded: 512) the long ones. */
    const char *path = gt_test_tmp("phi3-tiny-orig256.gguf");
    rewrite r = {.to = GT_TYPE_COUNT,
                 .ukey = {"phi3.rope.scaling.original_context_length", "phi3.context_length"},
                 .uval = {256, 1024}};
    rewrite_gguf(synth("phi3-tiny"), path, &r);
    int nv;
    float *shrt = check_backends(path, 128, &nv, "phi3-tiny n_ctx 128 (short factors)");
    float *lng = check_backends(path, 300, &nv, "phi3-tiny n_ctx 300 (long factors)");
    const double effect = max_diff(shrt, lng, (size_t)N_PROMPT * (size_t)nv);
    printf("phi3-tiny: long vs short factors move logits by up to %.3g\n", effect);
    ck_assert_msg(effect > FACTOR_EFFECT, "long vs short changed logits by only %g", effect);
    free(shrt);
    free(lng);
}
END_TEST

/* llama.cpp 0c1e57098 llama-server, temperature 0, on the file this test
 * writes: " Paris.\n\nThe United States has a population of approximately"
 * (without the tensor: " Paris.\n\nThe answer is: 201"). */
static const char *const WANT = " Paris.\n\nThe United States has a population of approximately";

START_TEST(smollm2_rope_freqs_repro)
{
    const char *path = gt_test_tmp("smollm2-q8-freqs.gguf");
    float v[32];
    for (int j = 0; j < 32; j++)
        v[j] = 1.0f + 7.0f * (float)j / 31.0f;
    rewrite r = {.to = GT_TYPE_Q8_0, .add = "rope_freqs.weight", .add_v = v, .add_n = 32};
    rewrite_gguf(gt_test_smollm2(), path, &r);
    gt_err err = {{0}};
    gt_model *m = NULL;
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    const char *prompt = "The capital of France is";
    int32_t ids[64];
    int n = gt_tokenize(tok, prompt, strlen(prompt), gt_tokenizer_adds_bos(tok), ids, 64, &err);
    ck_assert_int_gt(n, 0);
    const int n_vocab = gt_model_hparams(m)->n_vocab;
    const char *backends[] = {"reference", "cpu", "opencl"};
    for (int bi = 0; bi < 3; bi++) {
        if (!have(backends[bi])) {
            printf("smollm2 repro: %s not available\n", backends[bi]);
            continue;
        }
        gt_backend *b = NULL;
        gt_backend_config cfg = {0};
        ck_assert_msg(gt_backend_open(backends[bi], &cfg, &b, &err) == 0, "%s", err.msg);
        gt_session *s = NULL;
        gt_session_params sp = {.n_ctx = 256};
        ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
        float *lg = malloc(sizeof *lg * (size_t)n_vocab);
        ck_assert_msg(gt_session_eval(s, ids, n, false, lg, &err) == 0, "%s", err.msg);
        char text[512] = "";
        size_t len = 0;
        while (len < strlen(WANT)) {
            int32_t best = 0;
            for (int i = 1; i < n_vocab; i++)
                if (lg[i] > lg[best])
                    best = i;
            int k = gt_token_to_bytes(tok, best, text + len, sizeof text - 1 - len);
            ck_assert(k >= 0 && len + (size_t)k < sizeof text);
            len += (size_t)k;
            text[len] = '\0';
            ck_assert_msg(gt_session_eval(s, &best, 1, false, lg, &err) == 0, "%s", err.msg);
        }
        printf("smollm2 repro on %s: \"%s\"\n", backends[bi], text);
        ck_assert_msg(strncmp(text, WANT, strlen(WANT)) == 0, "%s continued \"%s\", llama.cpp \"%s\"",
                      backends[bi], text, WANT);
        free(lg);
        gt_session_free(s);
        gt_backend_close(b);
    }
    gt_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rope_factors");
    TCase *tc = tcase_create("synthetic");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, llama3_factors_on_every_backend);
    tcase_add_test(tc, llama3_linear_scaling);
    tcase_add_test(tc, phi3_long_short);
    suite_add_tcase(s, tc);
    TCase *models = tcase_create("models");
    tcase_set_timeout(models, 600);
    gt_test_add_if(models, smollm2_rope_freqs_repro, gt_test_smollm2() != NULL && !gt_test_sanitized(),
                   "SmolLM2 not found (ci/fetch-smollm2.sh or GT_SMOLLM2)");
    suite_add_tcase(s, models);
    return gt_test_run(s);
}
