/* test_cpu.c: the fast CPU backend against the reference.
 *
 * - Op conformance (the engine of `gauntlet test-ops`, compiled in here):
 *   every op x weight type x shape, for the ISA this CPU gets, and again
 *   with GT_CPU_ISA=scalar and =avx2 (set before the backend is opened, which
 *   is when the ISA is chosen), with BLAS turned off (own kernels for big
 *   batches), and with 1 and 3 threads (odd splits, oversubscription).
 * - Contract: supports() refuses other types with a reason; compute()
 *   refuses malformed nodes with a message instead of computing garbage; a
 *   bad GT_CPU_ISA is a configuration error; the device info is filled.
 * - End to end: greedy generation on stories260K (F32) equals the
 *   reference's for 64 tokens on several prompts, and a batched prefill
 *   (BLAS path) gives the reference's logits. With SmolLM2 present
 *   (GT_SMOLLM2 or the fetch cache), Q4_1 logits agree with the reference. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/opcheck.c"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"

static gt_backend *open_backend(const char *name, int threads, const char *driver)
{
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {0, threads, driver};
    ck_assert_msg(gt_backend_open(name, &cfg, &b, &err) == 0, "open %s: %s", name, err.msg);
    return b;
}

/* Runs the conformance engine (optionally one op) and asserts no failure. */
static opcheck_counts conformance(gt_backend *b, int op)
{
    gt_backend *ref = open_backend("reference", 0, NULL);
    opcheck_opts o = {.op = op, .type = -1, .seed = 7, .out = stdout, .failures_only = true};
    opcheck_counts c = {0, 0, 0};
    gt_err err = {{0}};
    ck_assert_msg(opcheck_run(b, ref, &o, &c, &err) == 0, "opcheck: %s", err.msg);
    printf("cpu [%s]: %d ok, %d failed, %d unsupported\n", b->info.extra, c.ok, c.fail,
           c.unsupported);
    ck_assert_int_eq(c.fail, 0);
    ck_assert_int_eq(c.unsupported, 0);
    ck_assert_int_gt(c.ok, 0);
    gt_backend_close(ref);
    return c;
}

START_TEST(conformance_default_isa)
{
    gt_backend *b = open_backend("cpu", 0, NULL);
    const opcheck_counts c = conformance(b, -1);
    ck_assert_int_gt(c.ok, 300); /* every op, every type, every shape */
    gt_backend_close(b);
}
END_TEST

START_TEST(conformance_scalar)
{
    setenv("GT_CPU_ISA", "scalar", 1);
    gt_backend *b = open_backend("cpu", 0, NULL);
    unsetenv("GT_CPU_ISA");
    ck_assert_ptr_nonnull(strstr(b->info.extra, "isa=scalar"));
    conformance(b, -1);
    gt_backend_close(b);
}
END_TEST

START_TEST(conformance_avx2)
{
    setenv("GT_CPU_ISA", "avx2", 1);
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {0, 0, NULL};
    const int rc = gt_backend_open("cpu", &cfg, &b, &err);
    unsetenv("GT_CPU_ISA");
    if (rc != 0) {
        /* Only acceptable reason: this CPU (or build) has no AVX2. */
        ck_assert_msg(strstr(err.msg, "lacks") || strstr(err.msg, "not compiled"), "%s", err.msg);
        printf("avx2 not available here: %s\n", err.msg);
        return;
    }
    ck_assert_ptr_nonnull(strstr(b->info.extra, "isa=avx2"));
    conformance(b, -1);
    gt_backend_close(b);
}
END_TEST

START_TEST(conformance_no_blas_and_threads)
{
    gt_backend *b = open_backend("cpu", 2, "blas=none");
    ck_assert_ptr_nonnull(strstr(b->info.driver, "none"));
    conformance(b, GT_OP_MUL_MAT);
    conformance(b, GT_OP_ATTENTION);
    gt_backend_close(b);
    for (int t = 1; t <= 3; t += 2) {
        b = open_backend("cpu", t, NULL);
        conformance(b, GT_OP_MUL_MAT);
        conformance(b, GT_OP_ATTENTION);
        conformance(b, GT_OP_SILU_MUL);
        gt_backend_close(b);
    }
}
END_TEST

START_TEST(reference_blas_driver)
{
    const char *path = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
    char drv[128];
    snprintf(drv, sizeof drv, "blas=%s", path);
    gt_backend *b = open_backend("cpu", 0, drv);
    if (strstr(b->info.driver, "none")) {
        printf("reference BLAS not installed: %s\n", b->info.extra);
    } else {
        ck_assert_ptr_nonnull(strstr(b->info.driver, "libblas"));
        conformance(b, GT_OP_MUL_MAT);
    }
    gt_backend_close(b);
}
END_TEST

START_TEST(supports_and_info)
{
    gt_backend *b = open_backend("cpu", 0, NULL);
    char why[256];
    const gt_type w[] = {GT_TYPE_F32, GT_TYPE_F16, GT_TYPE_BF16, GT_TYPE_Q8_0, GT_TYPE_Q4_0, GT_TYPE_Q4_1};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        ck_assert(gt_backend_supports(b, GT_OP_MUL_MAT, w[i], why, sizeof why));
        ck_assert(gt_backend_supports(b, GT_OP_GET_ROWS, w[i], why, sizeof why));
    }
    for (gt_op op = GT_OP_GET_ROWS; op < GT_OP_COUNT; op++)
        ck_assert(gt_backend_supports(b, op, GT_TYPE_F32, why, sizeof why));
    ck_assert(!gt_backend_supports(b, GT_OP_MUL_MAT, (gt_type)14 /* Q6_K */, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "no MUL_MAT kernel"));
    ck_assert(!gt_backend_supports(b, GT_OP_MUL_MAT, GT_TYPE_I32, why, sizeof why));
    ck_assert(!gt_backend_supports(b, GT_OP_RMS_NORM, GT_TYPE_F16, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "f32"));
    ck_assert(!gt_backend_supports(b, GT_OP_NONE, GT_TYPE_F32, why, sizeof why));
    ck_assert_str_eq(b->info.backend, "cpu");
    ck_assert_str_eq(b->info.kind, "cpu");
    ck_assert_uint_gt(b->info.memory, 0);
    ck_assert(b->info.driver[0] && b->info.driver_version[0]);
    ck_assert_ptr_nonnull(strstr(b->info.extra, "isa="));
    gt_backend_close(b);

    gt_device_info d[2];
    gt_err err = {{0}};
    ck_assert_int_eq(gt_backend_cpu_reg()->probe(d, 2, "blas=/no/such/libblas.so", &err), 1);
    ck_assert_str_eq(d[0].driver, "none (built-in kernels)");
    ck_assert_ptr_nonnull(strstr(d[0].extra, "blas unavailable"));
}
END_TEST

START_TEST(bad_isa_is_an_error)
{
    setenv("GT_CPU_ISA", "sse9", 1);
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {0, 0, NULL};
    ck_assert_int_ne(gt_backend_open("cpu", &cfg, &b, &err), 0);
    unsetenv("GT_CPU_ISA");
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(err.msg, "GT_CPU_ISA=sse9"));
    const gt_backend_config bad_dev = {1, 0, NULL};
    ck_assert_int_ne(gt_backend_open("cpu", &bad_dev, &b, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "one device"));
}
END_TEST

/* A MUL_MAT node over host buffers: w [k x n] q8_0, x [k x m]. */
typedef struct mm_fixture {
    gt_buffer *bw, *bx, *bt;
    gt_tensor w, x, t;
} mm_fixture;

static void mm_setup(gt_backend *b, mm_fixture *f, int64_t k, int64_t n, int64_t m)
{
    gt_err err = {{0}};
    memset(f, 0, sizeof *f);
    ck_assert_int_eq(b->iface->buffer_alloc(b, gt_row_size(GT_TYPE_Q8_0, 64) * (size_t)n, &f->bw, &err), 0);
    ck_assert_int_eq(b->iface->buffer_alloc(b, sizeof(float) * (size_t)(k * m), &f->bx, &err), 0);
    ck_assert_int_eq(b->iface->buffer_alloc(b, sizeof(float) * (size_t)(n * m), &f->bt, &err), 0);
    f->w = (gt_tensor){.name = "w", .type = GT_TYPE_Q8_0, .ne = {64, n}, .buf = f->bw};
    f->x = (gt_tensor){.name = "x", .type = GT_TYPE_F32, .ne = {k, m}, .buf = f->bx};
    f->t = (gt_tensor){.name = "t", .type = GT_TYPE_F32, .ne = {n, m}, .buf = f->bt,
                       .op = GT_OP_MUL_MAT, .src = {&f->w, &f->x}};
}

static void mm_teardown(gt_backend *b, mm_fixture *f)
{
    b->iface->buffer_free(f->bw);
    b->iface->buffer_free(f->bx);
    b->iface->buffer_free(f->bt);
}

START_TEST(compute_rejects_malformed_nodes)
{
    gt_backend *b = open_backend("cpu", 0, NULL);
    gt_err err = {{0}};
    mm_fixture f;
    gt_tensor *node;
    gt_graph g = {&node, 1};

    mm_setup(b, &f, 48, 8, 2); /* activations of 48 vs weight rows of 64 */
    node = &f.t;
    ck_assert_int_ne(gt_backend_compute(b, &g, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "MUL_MAT"));
    mm_teardown(b, &f);

    mm_setup(b, &f, 64, 8, 2);
    f.t.ne[1] = 3; /* output rows != activation rows, and past its buffer */
    ck_assert_int_ne(gt_backend_compute(b, &g, &err), 0);
    f.t.ne[1] = 2;
    f.t.buf = f.bx; /* output overlapping the activations */
    ck_assert_int_ne(gt_backend_compute(b, &g, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "overlaps"));
    f.t.buf = f.bt;
    ck_assert_int_eq(gt_backend_compute(b, &g, &err), 0); /* and now it is fine */
    mm_teardown(b, &f);

    /* GET_ROWS with an id outside the table */
    gt_buffer *btab, *bids, *bout;
    ck_assert_int_eq(b->iface->buffer_alloc(b, 4 * 32 * 4, &btab, &err), 0);
    ck_assert_int_eq(b->iface->buffer_alloc(b, 2 * 4, &bids, &err), 0);
    ck_assert_int_eq(b->iface->buffer_alloc(b, 2 * 32 * 4, &bout, &err), 0);
    const int32_t ids[2] = {1, 4};
    ck_assert_int_eq(b->iface->upload(bids, 0, ids, sizeof ids, &err), 0);
    gt_tensor tab = {.name = "tab", .type = GT_TYPE_F32, .ne = {32, 4}, .buf = btab};
    gt_tensor idt = {.name = "ids", .type = GT_TYPE_I32, .ne = {1, 2}, .buf = bids};
    gt_tensor out = {.name = "rows", .type = GT_TYPE_F32, .ne = {32, 2}, .buf = bout,
                     .op = GT_OP_GET_ROWS, .src = {&tab, &idt}};
    node = &out;
    ck_assert_int_ne(gt_backend_compute(b, &g, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "outside table"));
    b->iface->buffer_free(btab);
    b->iface->buffer_free(bids);
    b->iface->buffer_free(bout);
    gt_backend_close(b);
}
END_TEST

/* ---- end to end ------------------------------------------------------------ */

static int32_t *tokenize(const gt_model *m, const char *text, int *n)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    gt_err err = {{0}};
    const int need = gt_tokenize(tok, text, strlen(text), gt_tokenizer_adds_bos(tok), NULL, 0, &err);
    ck_assert_msg(need >= 0, "tokenize: %s", err.msg);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need + 1));
    ck_assert_ptr_nonnull(ids);
    *n = gt_tokenize(tok, text, strlen(text), gt_tokenizer_adds_bos(tok), ids, need + 1, &err);
    ck_assert_int_eq(*n, need);
    return ids;
}

/* Greedy continuation of prompt: n_gen ids into out. */
static void greedy(const gt_model *m, gt_backend *b, const int32_t *prompt, int np, int n_gen,
                   int32_t *out)
{
    gt_err err = {{0}};
    gt_session *s = NULL;
    const gt_session_params sp = {0, 0};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "session: %s", err.msg);
    const int nv = gt_model_hparams(m)->n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    ck_assert_ptr_nonnull(logits);
    ck_assert_msg(gt_session_eval(s, prompt, np, false, logits, &err) == 0, "eval: %s", err.msg);
    for (int i = 0; i < n_gen; i++) {
        out[i] = gt_argmax(logits, nv);
        ck_assert_msg(gt_session_eval(s, &out[i], 1, false, logits, &err) == 0, "eval: %s", err.msg);
    }
    free(logits);
    gt_session_free(s);
}

START_TEST(stories_greedy_equals_reference)
{
    const char *path = gt_test_model("stories260K.gguf");
    gt_model *m = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    gt_backend *ref = open_backend("reference", 0, NULL);
    gt_backend *cpus[2] = {open_backend("cpu", 0, NULL), open_backend("cpu", 1, "blas=none")};
    /* The last prompt is long enough for a BLAS-sized prefill batch. */
    const char *prompts[] = {"Once upon a time", "", "The little dog", "Lily and Tom went to the park",
                             "One day a big red ball rolled down the hill and a cat saw it and ran "
                             "after it because it wanted to play with the ball"};
    enum { N = 64 };
    for (size_t p = 0; p < sizeof prompts / sizeof prompts[0]; p++) {
        int np;
        int32_t *ids = tokenize(m, prompts[p], &np);
        if (np == 0) {
            free(ids);
            continue; /* no BOS and no text: nothing to condition on */
        }
        int32_t want[N], got[N];
        greedy(m, ref, ids, np, N, want);
        for (int c = 0; c < 2; c++) {
            greedy(m, cpus[c], ids, np, N, got);
            for (int i = 0; i < N; i++)
                ck_assert_msg(got[i] == want[i], "prompt %zu (%d tokens), cpu %s: token %d is %d, reference %d",
                              p, np, cpus[c]->info.extra, i, got[i], want[i]);
        }
        free(ids);
    }
    gt_backend_close(cpus[0]);
    gt_backend_close(cpus[1]);
    gt_backend_close(ref);
    gt_model_free(m);
}
END_TEST

/* Logits of every position of a prompt, cpu vs reference: NMSE at most
 * max_nmse, and the same argmax, except that where the reference itself
 * scores the cpu's pick within tie * (max - min logit) of its own top the
 * choice is a near-tie and either is right (tie = 0: always strict). */
static void logits_agree(const char *path, const char *text, double max_nmse, double tie)
{
    gt_model *m = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    int np;
    int32_t *ids = tokenize(m, text, &np);
    const int nv = gt_model_hparams(m)->n_vocab;
    float *l[2];
    const char *names[2] = {"reference", "cpu"};
    for (int i = 0; i < 2; i++) {
        gt_backend *b = open_backend(names[i], 0, NULL);
        gt_session *s = NULL;
        const gt_session_params sp = {0, 0};
        ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
        l[i] = malloc(sizeof(float) * (size_t)nv * (size_t)np);
        ck_assert_ptr_nonnull(l[i]);
        ck_assert_msg(gt_session_eval(s, ids, np, true, l[i], &err) == 0, "%s", err.msg);
        gt_session_free(s);
        gt_backend_close(b);
    }
    for (int r = 0; r < np; r++) {
        double se = 0, sb = 0;
        for (int j = 0; j < nv; j++) {
            const double a = l[1][(size_t)r * nv + j], b = l[0][(size_t)r * nv + j];
            ck_assert(isfinite(a));
            se += (a - b) * (a - b);
            sb += b * b;
        }
        ck_assert_msg(se / sb <= max_nmse, "%s position %d: logits nmse %g > %g", path, r, se / sb, max_nmse);
        const float *ref = l[0] + (size_t)r * nv;
        const int32_t want = gt_argmax(ref, nv), got = gt_argmax(l[1] + (size_t)r * nv, nv);
        float lo = ref[0];
        for (int j = 1; j < nv; j++)
            lo = ref[j] < lo ? ref[j] : lo;
        ck_assert_msg(got == want || ref[want] - ref[got] <= tie * (ref[want] - lo),
                      "%s position %d: argmax %d, reference %d (%g vs %g)", path, r, got, want,
                      (double)ref[got], (double)ref[want]);
    }
    free(l[0]);
    free(l[1]);
    free(ids);
    gt_model_free(m);
}

START_TEST(stories_batched_logits)
{
    logits_agree(gt_test_model("stories260K.gguf"),
                 "Once upon a time there was a little girl who lived in a village near the forest "
                 "and she liked to pick flowers",
                 1e-8, 0.0);
}
END_TEST

/* Quantized models through the dot path: each output element is computed by
 * exactly one thread with the same kernel, so 1, 2 and 3 threads must give
 * bit-identical logits; a missing barrier or a stale reused activation
 * (cpu_backend.c's plan) would not. And the logits stay near the reference. */
START_TEST(stories_quantized_threads_agree)
{
    const char *files[] = {"llamacpp-quants/stories260K-q8_0.gguf", "llamacpp-quants/stories260K-q4_0.gguf",
                           "llamacpp-quants/stories260K-q4_1.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        const char *path = gt_test_model(files[f]);
        if (!path) {
            printf("%s absent: skipped\n", files[f]);
            continue;
        }
        gt_model *m = NULL;
        gt_err err = {{0}};
        ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
        const int nv = gt_model_hparams(m)->n_vocab;
        int np;
        int32_t *ids = tokenize(m, "Once upon a time", &np);
        enum { N = 24 };
        float *l[3];
        for (int t = 0; t < 3; t++) {
            gt_backend *b = open_backend("cpu", t + 1, NULL);
            gt_session *s = NULL;
            const gt_session_params sp = {0, 0};
            ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
            l[t] = malloc(sizeof(float) * (size_t)nv * (N + 1));
            ck_assert_ptr_nonnull(l[t]);
            ck_assert(gt_session_eval(s, ids, np, false, l[t], &err) == 0);
            for (int i = 0; i < N; i++) {
                const int32_t next = gt_argmax(l[t] + (size_t)i * nv, nv);
                ck_assert(gt_session_eval(s, &next, 1, false, l[t] + (size_t)(i + 1) * nv, &err) == 0);
            }
            gt_session_free(s);
            gt_backend_close(b);
        }
        ck_assert_msg(memcmp(l[0], l[1], sizeof(float) * (size_t)nv * (N + 1)) == 0,
                      "%s: 1 and 2 threads differ", files[f]);
        ck_assert_msg(memcmp(l[0], l[2], sizeof(float) * (size_t)nv * (N + 1)) == 0,
                      "%s: 1 and 3 threads differ", files[f]);
        for (int t = 0; t < 3; t++)
            free(l[t]);
        free(ids);
        gt_model_free(m);
        /* 8-bit activations on a tiny model: measured NMSE 5e-6..6e-4, and
         * one near-tie (reference logits 0.35% of their range apart) flips. */
        logits_agree(path, "Once upon a time there was a cat", 3e-3, 0.02);
    }
}
END_TEST

START_TEST(smollm2_q4_1_logits)
{
    const char *path = gt_test_smollm2();
    if (!path) {
        printf("SmolLM2 not fetched (ci/fetch-smollm2.sh or GT_SMOLLM2): skipped\n");
        return;
    }
    /* A short prompt runs the dot path, where activations are quantized to
     * 8-bit blocks (as GGML does). SmolLM2 has outlier channels, so a block
     * holding one quantizes its neighbours coarsely: measured logits NMSE
     * 5e-4..9e-3 per position (and 1e-11 with GT_CPU_BLAS_MIN_BATCH=1, f32
     * activations through BLAS: the difference is that rounding, nothing
     * else). The argmax must agree at every position regardless. */
    logits_agree(path, "The capital of France is", 2e-2, 0.0);
}
END_TEST

int main(void)
{
    gt_test_require(gt_test_model("stories260K.gguf"), "stories260K.gguf");
    Suite *s = suite_create("cpu");
    TCase *tc = tcase_create("conformance");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, conformance_default_isa);
    tcase_add_test(tc, conformance_scalar);
    tcase_add_test(tc, conformance_avx2);
    tcase_add_test(tc, conformance_no_blas_and_threads);
    tcase_add_test(tc, reference_blas_driver);
    suite_add_tcase(s, tc);
    TCase *tk = tcase_create("contract");
    tcase_add_test(tk, supports_and_info);
    tcase_add_test(tk, bad_isa_is_an_error);
    tcase_add_test(tk, compute_rejects_malformed_nodes);
    suite_add_tcase(s, tk);
    TCase *te = tcase_create("end-to-end");
    tcase_set_timeout(te, 600);
    tcase_add_test(te, stories_greedy_equals_reference);
    tcase_add_test(te, stories_batched_logits);
    tcase_add_test(te, stories_quantized_threads_agree);
    tcase_add_test(te, smollm2_q4_1_logits);
    suite_add_tcase(s, te);
    return gt_test_run(s);
}
