/* test_reference.c: the reference backend is the oracle, so being fast must
 * never make it different. Its numerics are defined by the frozen scalar
 * version in reference_definition.c; this test asserts the live backend
 * gives the same bytes:
 *   1. every op on seeded random inputs (MUL_MAT and GET_ROWS for every
 *      weight type; attention with GQA, head_dim 256, a decode row far into
 *      the cache and sliding windows; in-place element-wise ops; rows long
 *      enough to be split between threads), on 1, 2, 3 and 5 threads;
 *   2. the logits of SmolLM2-135M and Gemma 3 270M on 40 tokens of
 *      suites/data/eval.txt, on 1 and 2 threads (a printed SKIP without the
 *      models, and under sanitizers, where the scalar definition alone
 *      takes minutes). The speed-up over the definition is printed there;
 *      it is measured, not asserted (gauntlet bench is where speed is
 *      judged). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "reference_definition.h"

static const int THREADS[] = {1, 2, 3, 5};
#define N_THREADS ((int)(sizeof THREADS / sizeof THREADS[0]))

/* ---- one-node graphs on host memory ---------------------------------------- */

enum { MAX_T = 6 };

/* The node is t[0]; t[1..] are its sources. */
typedef struct node_case {
    gt_tensor t[MAX_T];
    gt_buffer buf[MAX_T];
    int n;
    char what[160];
} node_case;

static uint64_t rng_state;

static float rnd(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A tensor of type with ne0 x ne1 elements, seeded random values (quantized
 * from floats for weight types; ids in [0, id_range) for I32). */
static gt_tensor *add_tensor(node_case *c, gt_type type, int64_t ne0, int64_t ne1, int id_range)
{
    ck_assert_int_lt(c->n, MAX_T);
    gt_tensor *t = &c->t[c->n];
    gt_buffer *b = &c->buf[c->n];
    c->n++;
    memset(t, 0, sizeof *t);
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    b->size = gt_tensor_bytes(t);
    b->host = malloc(b->size ? b->size : 1);
    ck_assert_ptr_nonnull(b->host);
    t->buf = b;
    float *row = malloc(sizeof(float) * (size_t)ne0);
    ck_assert_ptr_nonnull(row);
    for (int64_t r = 0; r < ne1; r++) {
        char *dst = (char *)b->host + (size_t)r * gt_tensor_row_bytes(t);
        if (type == GT_TYPE_I32) {
            for (int64_t i = 0; i < ne0; i++)
                ((int32_t *)dst)[i] = (int32_t)((rnd() + 1.0f) * 0.5f * (float)id_range) % id_range;
            continue;
        }
        for (int64_t i = 0; i < ne0; i++)
            row[i] = rnd() * 2.0f;
        if (type == GT_TYPE_F32)
            memcpy(dst, row, sizeof(float) * (size_t)ne0);
        else
            gt_quantize_row(type, row, dst, ne0);
    }
    free(row);
    return t;
}

static void free_case(node_case *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->buf[i].host);
    c->n = 0;
}

typedef void (*build_fn)(node_case *c, int variant);

/* Builds the case afresh (same seed: in-place nodes overwrite an input),
 * runs it on b and returns a copy of the node's output bytes. */
static void *run_case(build_fn build, int variant, gt_backend *b, size_t *bytes, char *what)
{
    node_case c = {.n = 0};
    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)variant * 0x100000001b3ull;
    build(&c, variant);
    gt_tensor *node = &c.t[0];
    gt_tensor *nodes[] = {node};
    const gt_graph g = {nodes, 1};
    gt_err err = {{0}};
    ck_assert_msg(gt_backend_compute(b, &g, &err) == 0, "%s: %s", c.what, err.msg);
    *bytes = gt_tensor_bytes(node);
    void *out = malloc(*bytes);
    ck_assert_ptr_nonnull(out);
    memcpy(out, gt_tensor_host(node), *bytes);
    snprintf(what, 160, "%s", c.what);
    free_case(&c);
    return out;
}

static gt_backend *open_reference(int threads)
{
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {.device = 0, .n_threads = threads, .driver = NULL};
    ck_assert_msg(gt_backend_open("reference", &cfg, &b, &err) == 0, "%s", err.msg);
    return b;
}

/* Every variant of build, the definition against the live reference on each
 * thread count: the same bytes, or the first differing element is named. */
static void check_variants(build_fn build, int n_variants)
{
    gt_backend *def = reference_definition_open();
    ck_assert_ptr_nonnull(def);
    gt_backend *live[N_THREADS];
    for (int k = 0; k < N_THREADS; k++)
        live[k] = open_reference(THREADS[k]);
    for (int v = 0; v < n_variants; v++) {
        char what[160];
        size_t n_want = 0;
        void *want = run_case(build, v, def, &n_want, what);
        for (int k = 0; k < N_THREADS; k++) {
            size_t n_got = 0;
            void *got = run_case(build, v, live[k], &n_got, what);
            ck_assert_uint_eq(n_got, n_want);
            if (memcmp(got, want, n_want) != 0) {
                size_t i = 0;
                while (memcmp((float *)got + i, (float *)want + i, sizeof(float)) == 0)
                    i++;
                ck_abort_msg("%s, %d threads: element %zu is %.9g, the definition says %.9g",
                             what, THREADS[k], i, ((float *)got)[i], ((float *)want)[i]);
            }
            free(got);
        }
        free(want);
    }
    for (int k = 0; k < N_THREADS; k++)
        gt_backend_close(live[k]);
    gt_backend_close(def);
}

/* ---- the cases -------------------------------------------------------------- */

static const gt_type WEIGHT_TYPES[] = {
    GT_TYPE_F32,  GT_TYPE_F16,  GT_TYPE_BF16, GT_TYPE_Q8_0, GT_TYPE_Q4_0,
    GT_TYPE_Q4_1, GT_TYPE_Q5_0, GT_TYPE_Q5_1, GT_TYPE_IQ4_NL, GT_TYPE_Q2_K,
    GT_TYPE_Q3_K, GT_TYPE_Q4_K, GT_TYPE_Q5_K, GT_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES ((int)(sizeof WEIGHT_TYPES / sizeof WEIGHT_TYPES[0]))
/* Token counts: one (decode), a whole tile of 8, and tiles plus a remainder. */
static const int MM_TOKENS[] = {1, 8, 19};

/* variant = type index * 3 + token-count index. 37 output columns: four
 * whole blocks of 8 and a partial one; K = 512 is whole blocks of every type. */
static void build_mul_mat(node_case *c, int variant)
{
    const gt_type type = WEIGHT_TYPES[variant / 3];
    const int n_tok = MM_TOKENS[variant % 3];
    gt_tensor *t = add_tensor(c, GT_TYPE_F32, 37, n_tok, 0);
    t->op = GT_OP_MUL_MAT;
    t->src[0] = add_tensor(c, type, 512, 37, 0);
    t->src[1] = add_tensor(c, GT_TYPE_F32, 512, n_tok, 0);
    snprintf(c->what, sizeof c->what, "MUL_MAT %s, %d tokens", gt_type_name(type), n_tok);
}

START_TEST(mul_mat_every_type)
{
    check_variants(build_mul_mat, N_WEIGHT_TYPES * 3);
}
END_TEST

static void build_get_rows(node_case *c, int variant)
{
    const gt_type type = WEIGHT_TYPES[variant];
    gt_tensor *t = add_tensor(c, GT_TYPE_F32, 256, 11, 0);
    t->op = GT_OP_GET_ROWS;
    t->src[0] = add_tensor(c, type, 256, 29, 0);
    t->src[1] = add_tensor(c, GT_TYPE_I32, 11, 1, 29);
    snprintf(c->what, sizeof c->what, "GET_ROWS %s", gt_type_name(type));
}

START_TEST(get_rows_every_type)
{
    check_variants(build_get_rows, N_WEIGHT_TYPES);
}
END_TEST

/* n_head, n_kv, head_dim, pos0, n_tok, window */
static const int ATT[][6] = {
    {4, 1, 256, 0, 9, 0},     /* Gemma's shape, prefill from 0 */
    {4, 2, 64, 13, 1, 0},     /* decode after a prompt */
    {8, 4, 32, 5, 17, 8},     /* a window shorter than the batch */
    {4, 1, 256, 600, 1, 512}, /* decode far into the cache, windowed */
    {9, 3, 64, 40, 23, 0},    /* SmolLM2's heads, key blocks not whole */
};

static void build_attention(node_case *c, int variant)
{
    const int *a = ATT[variant];
    const int n_head = a[0], n_kv = a[1], hd = a[2], pos0 = a[3], n_tok = a[4];
    gt_tensor *t = add_tensor(c, GT_TYPE_F32, (int64_t)n_head * hd, n_tok, 0);
    t->op = GT_OP_ATTENTION;
    t->src[0] = add_tensor(c, GT_TYPE_F32, (int64_t)n_head * hd, n_tok, 0);
    t->src[1] = add_tensor(c, GT_TYPE_F32, (int64_t)n_kv * hd, pos0 + n_tok + 3, 0);
    t->src[2] = add_tensor(c, GT_TYPE_F32, (int64_t)n_kv * hd, pos0 + n_tok + 3, 0);
    memcpy(t->iparams, a, sizeof(int32_t) * 2);
    t->iparams[2] = hd;
    t->iparams[3] = pos0;
    t->iparams[4] = a[5];
    t->fparams[0] = 1.0f / 16.0f;
    snprintf(c->what, sizeof c->what, "ATTENTION heads %d/%d dim %d pos0 %d tokens %d window %d",
             n_head, n_kv, hd, pos0, n_tok, a[5]);
}

START_TEST(attention_shapes)
{
    check_variants(build_attention, (int)(sizeof ATT / sizeof ATT[0]));
}
END_TEST

/* The element-wise ops, each on short and thread-split shapes, in place
 * (the node is its first source's storage) and not. */
static const gt_op ELEMENTWISE[] = {GT_OP_RMS_NORM, GT_OP_ADD,      GT_OP_MUL,  GT_OP_ROPE,
                                    GT_OP_SILU_MUL, GT_OP_GELU_MUL, GT_OP_SCALE};
#define N_ELEMENTWISE ((int)(sizeof ELEMENTWISE / sizeof ELEMENTWISE[0]))
/* row length, rows: one token; a batch; rows long enough for one chunk each */
static const int EW_SHAPES[][2] = {{576, 1}, {1024, 37}, {20480, 3}};

static void build_elementwise(node_case *c, int variant)
{
    const gt_op op = ELEMENTWISE[variant / 6];
    const int *shape = EW_SHAPES[(variant / 2) % 3];
    const bool in_place = variant % 2;
    gt_tensor *t = add_tensor(c, GT_TYPE_F32, shape[0], shape[1], 0);
    t->op = op;
    t->src[0] = add_tensor(c, GT_TYPE_F32, shape[0], shape[1], 0);
    if (op == GT_OP_ADD || op == GT_OP_SILU_MUL || op == GT_OP_GELU_MUL)
        t->src[1] = add_tensor(c, GT_TYPE_F32, shape[0], shape[1], 0);
    if (op == GT_OP_MUL)
        t->src[1] = add_tensor(c, GT_TYPE_F32, shape[0], 1, 0);
    if (op == GT_OP_RMS_NORM)
        t->fparams[0] = 1e-6f;
    if (op == GT_OP_SCALE)
        t->fparams[0] = 25.298221f;
    if (op == GT_OP_ROPE) { /* heads of 64 (adjacent pairs) or 256 (NeoX, part rotated) */
        const bool neox = shape[0] % 256 == 0;
        t->iparams[1] = neox ? 256 : 64;
        t->iparams[0] = shape[0] / t->iparams[1];
        t->iparams[2] = neox ? 128 : 64;
        t->iparams[3] = 7;
        t->iparams[4] = neox;
        t->fparams[0] = neox ? 1e6f : 1e4f;
    }
    if (in_place)
        t->buf = t->src[0]->buf;
    snprintf(c->what, sizeof c->what, "%s %dx%d%s", gt_op_name(op), shape[0], shape[1],
             in_place ? " in place" : "");
}

START_TEST(elementwise_ops)
{
    check_variants(build_elementwise, N_ELEMENTWISE * 6);
}
END_TEST

/* ADD of a one-row b (a bias row): every row of a gets the same b, in place and not. */
static void build_add_row(node_case *c, int variant)
{
    const int *shape = EW_SHAPES[(variant / 2) % 3];
    const bool in_place = variant % 2;
    gt_tensor *t = add_tensor(c, GT_TYPE_F32, shape[0], shape[1], 0);
    t->op = GT_OP_ADD;
    t->src[0] = add_tensor(c, GT_TYPE_F32, shape[0], shape[1], 0);
    t->src[1] = add_tensor(c, GT_TYPE_F32, shape[0], 1, 0);
    if (in_place)
        t->buf = t->src[0]->buf;
    snprintf(c->what, sizeof c->what, "ADD bias row %dx%d%s", shape[0], shape[1],
             in_place ? " in place" : "");
}

START_TEST(add_bias_row)
{
    check_variants(build_add_row, 6);
}
END_TEST

/* ---- whole models ----------------------------------------------------------- */

/* Logits of the first n tokens of eval.txt on b (n x n_vocab, malloc'd), and
 * the seconds the eval took. */
static float *model_logits(const gt_model *m, gt_backend *b, int n, double *secs)
{
    char *text = gt_test_slurp(GT_SOURCE_DIR "/suites/data/eval.txt");
    ck_assert_ptr_nonnull(text);
    gt_err err = {{0}};
    int32_t ids[64];
    const int got = gt_tokenize(gt_model_tokenizer(m), text, strlen(text), true, ids, 64, &err);
    ck_assert_msg(got >= n, "eval.txt: %d tokens (%s)", got, err.msg);
    free(text);
    const int nv = gt_model_hparams(m)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)nv * (size_t)n);
    ck_assert_ptr_nonnull(out);
    gt_session *s = NULL;
    const gt_session_params sp = {.n_ctx = 128};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
    const double t0 = gt_test_now();
    ck_assert_msg(gt_session_eval(s, ids, n, true, out, &err) == 0, "%s", err.msg);
    *secs = gt_test_now() - t0;
    gt_session_free(s);
    return out;
}

static void check_model(const char *path)
{
    gt_model *m = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    enum { N = 40 };
    const size_t bytes = sizeof(float) * (size_t)gt_model_hparams(m)->n_vocab * N;
    gt_backend *def = reference_definition_open();
    double t_def = 0;
    float *want = model_logits(m, def, N, &t_def);
    gt_backend_close(def);
    for (int threads = 1; threads <= 2; threads++) {
        gt_backend *b = open_reference(threads);
        double t = 0;
        float *got = model_logits(m, b, N, &t);
        gt_backend_close(b);
        ck_assert_msg(memcmp(got, want, bytes) == 0, "%s: logits differ from the definition on %d threads",
                      path, threads);
        printf("%s: %d tokens, definition %.2f s, reference on %d thread(s) %.2f s (%.1fx), same bytes\n",
               strrchr(path, '/') ? strrchr(path, '/') + 1 : path, N, t_def, threads, t,
               t > 0 ? t_def / t : 0.0);
        free(got);
    }
    free(want);
    gt_model_free(m);
}

START_TEST(smollm2_logits)
{
    check_model(gt_test_smollm2());
}
END_TEST

START_TEST(gemma3_logits)
{
    check_model(gt_test_gemma3());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reference");
    TCase *ops = tcase_create("ops");
    tcase_add_test(ops, mul_mat_every_type);
    tcase_add_test(ops, get_rows_every_type);
    tcase_add_test(ops, attention_shapes);
    tcase_add_test(ops, elementwise_ops);
    tcase_add_test(ops, add_bias_row);
    suite_add_tcase(s, ops);
    TCase *models = tcase_create("models");
    const bool sanitized = gt_test_sanitized();
    const char *why_san = "under sanitizers the scalar definition alone takes minutes per model";
    const bool have_gemma = gt_test_gemma3() != NULL;
    gt_test_add_if(models, smollm2_logits, gt_test_smollm2() && !sanitized,
                   sanitized ? why_san : "SmolLM2 not fetched (ci/fetch-models.sh)");
    gt_test_add_if(models, gemma3_logits, have_gemma && !sanitized,
                   sanitized ? why_san : "Gemma 3 270M Q4_K_M not fetched ($GT_GEMMA3; ci/fetch-models.sh)");
    suite_add_tcase(s, models);
    return gt_test_run(s);
}
