/* test_opencl.c: the OpenCL backend against the reference backend.
 *
 * Op level: single-op graphs built on both backends from the same host
 * data, compared by NMSE = sum (a - b)^2 / sum b^2 (b = reference). The
 * reference accumulates in double; the kernels in float, so the bounds are
 * float rounding, not quantization: both dequantize the same blocks.
 *   ADD, MUL, KV_STORE, GET_ROWS, SCALE       1e-12 (one rounding or exact)
 *   RMS_NORM, SILU_MUL, GELU_MUL, ROPE        1e-10
 *   MUL_MAT (every type), ATTENTION           1e-8 (windowed too)
 * Shapes include odd sizes, batches 1, 2, 7, 64 and 512, views at odd
 * offsets and in-place nodes.
 * Model level: greedy tokens on stories260K (its synthetic stand-in
 * without ../shared) equal the reference's; it, the llama.cpp-made
 * F16/Q8_0/Q4_0/Q4_1 files and SmolLM2-135M Q4_1 agree on >= 99% of
 * teacher-forced top-1 predictions, and so do Gemma 3 270M Q4_K_M and
 * SmolLM2 requantized to q4_k_m over 256 tokens (a case whose file is
 * absent, or a long real-model case in a sanitized build, is a printed
 * SKIP).
 * Plumbing: device selection by driver profile, the program cache
 * surviving corrupt entries, errors that name the problem, weights split
 * for a small CL_DEVICE_MAX_MEM_ALLOC_SIZE, and 1,000 sessions without
 * growing RSS or device allocations.
 *
 * Skips (77) only when no OpenCL platform exists and $CI is unset; in CI a
 * missing platform is a failure. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/quant.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
/* LeakSanitizer crashes walking the dynamic TLS of the libraries PoCL
 * dlopens and dlcloses (a libsanitizer/glibc DTLS mismatch: "Tracer caught
 * signal 11" at exit). Not scanning TLS avoids that; nothing here or in the
 * backend keeps heap pointers in TLS, so no leak of ours can hide there. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "use_tls=0"; }
#endif

/* --- two backends, one graph -------------------------------------------------- */

enum { REF, OCL };

__attribute__((noinline)) static gt_backend *open_be(const char *name, const char *driver)
{
    gt_err err = {{0}};
    gt_backend_config cfg = {.device = 0, .driver = driver};
    gt_backend *b = NULL;
    ck_assert_msg(gt_backend_open(name, &cfg, &b, &err) == 0, "open %s: %s", name, err.msg);
    return b;
}

typedef struct twin {
    gt_backend *be[2];
    gt_buffer *bufs[2][64];
    int n_bufs;
    void *keep[256]; /* host bytes behind the reference's weight buffers */
    int n_keep;
} twin;

static void twin_open(twin *w)
{
    memset(w, 0, sizeof *w);
    w->be[REF] = open_be("reference", NULL);
    w->be[OCL] = open_be("opencl", NULL);
}

static void twin_close(twin *w)
{
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < w->n_bufs; i++)
            w->be[s]->iface->buffer_free(w->bufs[s][i]);
        gt_backend_close(w->be[s]);
    }
    for (int i = 0; i < w->n_keep; i++)
        free(w->keep[i]);
}

/* A leaf tensor holding data on both sides, `pad` bytes into its buffer (so
 * kernels see a view at an offset). Weights go through buffer_from_host. */
static void leaf(twin *w, gt_tensor t[2], const char *name, gt_type type, int64_t ne0,
                 int64_t ne1, const void *data, size_t pad, bool weight)
{
    gt_err err = {{0}};
    const size_t bytes = gt_row_size(type, ne0) * (size_t)ne1;
    ck_assert(w->n_bufs < 64);
    char *host = calloc(1, pad + bytes);
    if (data)
        memcpy(host + pad, data, bytes);
    for (int s = 0; s < 2; s++) {
        gt_backend *b = w->be[s];
        gt_buffer **buf = &w->bufs[s][w->n_bufs];
        if (weight) {
            /* Host backends keep pointing at the bytes: they live until
             * twin_close. */
            ck_assert(w->n_keep < 256);
            char *keep = malloc(pad + bytes);
            memcpy(keep, host, pad + bytes);
            w->keep[w->n_keep++] = keep;
            ck_assert_msg(b->iface->buffer_from_host(b, keep, pad + bytes, buf, &err) == 0, "%s",
                          err.msg);
        } else {
            ck_assert_msg(b->iface->buffer_alloc(b, pad + bytes, buf, &err) == 0, "%s", err.msg);
            ck_assert_msg(b->iface->upload(*buf, 0, host, pad + bytes, &err) == 0, "%s", err.msg);
        }
        memset(&t[s], 0, sizeof t[s]);
        snprintf(t[s].name, sizeof t[s].name, "%s", name);
        t[s].type = type;
        t[s].ne[0] = ne0;
        t[s].ne[1] = ne1;
        t[s].buf = *buf;
        t[s].offset = pad;
    }
    w->n_bufs++;
    free(host);
}

static void node(gt_tensor t[2], gt_op op, gt_tensor *a, gt_tensor *b, gt_tensor *c)
{
    for (int s = 0; s < 2; s++) {
        t[s].op = op;
        t[s].src[0] = a ? &a[s] : NULL;
        t[s].src[1] = b ? &b[s] : NULL;
        t[s].src[2] = c ? &c[s] : NULL;
    }
}

static void run(twin *w, gt_tensor *t)
{
    for (int s = 0; s < 2; s++) {
        gt_err err = {{0}};
        gt_tensor *n = &t[s];
        gt_graph g = {&n, 1};
        ck_assert_msg(gt_backend_compute(w->be[s], &g, &err) == 0, "%s: %s",
                      w->be[s]->info.backend, err.msg);
    }
}

static float *fetch(twin *w, const gt_tensor *t, int s)
{
    gt_err err = {{0}};
    const size_t n = gt_tensor_bytes(&t[s]);
    float *out = malloc(n);
    ck_assert_msg(t[s].buf->backend->iface->download(t[s].buf, t[s].offset, out, n, &err) == 0,
                  "%s", err.msg);
    (void)w;
    return out;
}

static double nmse_of(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i]))
            return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* Compares node t across the two backends. */
static double check(twin *w, gt_tensor *t, double bound, const char *what)
{
    float *r = fetch(w, t, REF), *o = fetch(w, t, OCL);
    const size_t n = (size_t)(t[0].ne[0] * t[0].ne[1]);
    double e = nmse_of(o, r, n);
    ck_assert_msg(e <= bound, "%s: NMSE %.3g > %.3g (ocl[0]=%g ref[0]=%g)", what, e, bound, o[0],
                  r[0]);
    free(r);
    free(o);
    return e;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) /* [-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static float *rand_floats(size_t n, float scale)
{
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    return v;
}

static const int BATCHES[] = {1, 2, 7, 64, 512};

/* Every weight type the runtime reads (Q8_K is for activations only). */
static const gt_type WEIGHT_TYPES[] = {
    GT_TYPE_F32,  GT_TYPE_F16,  GT_TYPE_BF16, GT_TYPE_Q8_0, GT_TYPE_Q4_0,
    GT_TYPE_Q4_1, GT_TYPE_Q5_0, GT_TYPE_Q5_1, GT_TYPE_IQ4_NL, GT_TYPE_Q2_K,
    GT_TYPE_Q3_K, GT_TYPE_Q4_K, GT_TYPE_Q5_K, GT_TYPE_Q6_K};
#define N_WEIGHT_TYPES (sizeof WEIGHT_TYPES / sizeof WEIGHT_TYPES[0])
#define N_BATCHES (int)(sizeof BATCHES / sizeof BATCHES[0])

/* --- op tests ------------------------------------------------------------------- */

static void op_mul_mat_body(void)
{
    /* K-quant rows are 256-value superblocks: {256, 9} and {512, 40} */
    const struct { int k, n_out; } shapes[] = {{64, 17}, {576, 129}, {96, 1}, {172, 33},
                                               {75, 5},  {256, 9},   {512, 40}};
    twin w;
    twin_open(&w);
    double worst = 0;
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const gt_type ty = WEIGHT_TYPES[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int K = shapes[si].k, n_out = shapes[si].n_out;
            if (gt_row_size(ty, K) == 0)
                continue; /* quantized rows must be whole blocks */
            float *wf = rand_floats((size_t)K * n_out, 1.0f);
            char *wq = malloc(gt_row_size(ty, K) * (size_t)n_out);
            for (int r = 0; r < n_out; r++)
                gt_quantize_row(ty, wf + (size_t)r * K, wq + gt_row_size(ty, K) * r, K);
            /* weights at offsets aligned only to their element (or scale) size */
            const size_t wpad = ty == GT_TYPE_F32 ? 36 : 6;
            gt_tensor W[2];
            leaf(&w, W, "w", ty, K, n_out, wq, wpad, true);
            for (int bi = 0; bi < N_BATCHES; bi++) {
                const int n_tok = BATCHES[bi];
                if ((size_t)K * n_tok * n_out > 40u * 1000 * 1000)
                    continue;
                float *xf = rand_floats((size_t)K * n_tok, 1.0f);
                gt_tensor X[2], Y[2];
                leaf(&w, X, "x", GT_TYPE_F32, K, n_tok, xf, 64 + 4 * (bi + 1), false);
                leaf(&w, Y, "y", GT_TYPE_F32, n_out, n_tok, NULL, 132, false);
                node(Y, GT_OP_MUL_MAT, W, X, NULL);
                run(&w, Y);
                char what[96];
                snprintf(what, sizeof what, "MUL_MAT %s %dx%d by %d rows", gt_type_name(ty),
                         n_out, K, n_tok);
                double e = check(&w, Y, 1e-8, what);
                worst = e > worst ? e : worst;
                free(xf);
                /* free this batch's buffers to stay within the twin's table */
                for (int s = 0; s < 2; s++)
                    for (int k = 1; k <= 2; k++)
                        w.be[s]->iface->buffer_free(w.bufs[s][w.n_bufs - k]);
                w.n_bufs -= 2;
            }
            free(wf);
            free(wq);
        }
    }
    printf("MUL_MAT: worst NMSE vs reference %.3g (bound 1e-8)\n", worst);
    twin_close(&w);
}
START_TEST(op_mul_mat)
{
    op_mul_mat_body();
}
END_TEST


static void op_get_rows_body(void)
{
    twin w;
    twin_open(&w);
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const gt_type ty = WEIGHT_TYPES[ti];
        /* three blocks (K-quants: superblocks), or an odd width */
        const int bs = gt_type_info(ty)->block_size;
        const int K = gt_type_info(ty)->quantized ? 3 * bs : 75, rows = 41, n = 7;
        float *wf = rand_floats((size_t)K * rows, 2.0f);
        char *wq = malloc(gt_row_size(ty, K) * rows);
        for (int r = 0; r < rows; r++)
            gt_quantize_row(ty, wf + (size_t)r * K, wq + gt_row_size(ty, K) * r, K);
        int32_t ids[7] = {0, 40, 3, 3, 17, 39, 1};
        gt_tensor W[2], I[2], Y[2];
        leaf(&w, W, "table", ty, K, rows, wq, ty == GT_TYPE_F32 ? 8 : 2, true);
        leaf(&w, I, "ids", GT_TYPE_I32, 1, n, ids, 12, false);
        leaf(&w, Y, "rows", GT_TYPE_F32, K, n, NULL, 20, false);
        node(Y, GT_OP_GET_ROWS, W, I, NULL);
        run(&w, Y);
        check(&w, Y, 1e-12, gt_type_name(ty));
        free(wf);
        free(wq);
    }
    /* An id outside the table is an error that names it, not garbage. */
    int32_t bad[2] = {1, 41};
    gt_tensor I[2], Y[2];
    leaf(&w, I, "ids", GT_TYPE_I32, 1, 2, bad, 0, false);
    leaf(&w, Y, "rows", GT_TYPE_F32, 75, 2, NULL, 0, false);
    gt_tensor W[2];
    float *wf = rand_floats(75 * 41, 1.0f);
    leaf(&w, W, "table", GT_TYPE_F32, 75, 41, wf, 0, true);
    node(Y, GT_OP_GET_ROWS, W, I, NULL);
    gt_err err = {{0}};
    gt_tensor *n = &Y[OCL];
    gt_graph g = {&n, 1};
    ck_assert_int_ne(gt_backend_compute(w.be[OCL], &g, &err), 0);
    ck_assert_msg(strstr(err.msg, "id 41") && strstr(err.msg, "41 rows"), "message: %s", err.msg);
    /* and the next graph works again */
    bad[1] = 40;
    ck_assert(w.be[OCL]->iface->upload(I[OCL].buf, 0, bad, sizeof bad, &err) == 0);
    ck_assert_msg(gt_backend_compute(w.be[OCL], &g, &err) == 0, "%s", err.msg);
    free(wf);
    twin_close(&w);
}
START_TEST(op_get_rows)
{
    op_get_rows_body();
}
END_TEST


static void op_elementwise_body(void)
{
    twin w;
    twin_open(&w);
    const int cols[] = {64, 75, 576};
    for (int ci = 0; ci < 3; ci++) {
        for (int bi = 0; bi < N_BATCHES; bi++) {
            const int C = cols[ci], R = BATCHES[bi];
            const size_t n = (size_t)C * R;
            float *a = rand_floats(n, 3.0f), *b = rand_floats(n, 3.0f), *g = rand_floats(C, 1.0f);
            char what[64];
            gt_tensor A[2], B[2], G[2], Y[2];
            leaf(&w, A, "a", GT_TYPE_F32, C, R, a, 4, false);
            leaf(&w, B, "b", GT_TYPE_F32, C, R, b, 8, false);
            leaf(&w, G, "g", GT_TYPE_F32, C, 1, g, 12, true);
            leaf(&w, Y, "y", GT_TYPE_F32, C, R, NULL, 16, false);
            snprintf(what, sizeof what, "%dx%d", C, R);

            node(Y, GT_OP_ADD, A, B, NULL);
            run(&w, Y);
            check(&w, Y, 1e-12, "ADD");
            node(Y, GT_OP_MUL, A, G, NULL);
            run(&w, Y);
            check(&w, Y, 1e-12, "MUL");
            node(Y, GT_OP_SILU_MUL, A, B, NULL);
            run(&w, Y);
            check(&w, Y, 1e-10, "SILU_MUL");
            node(Y, GT_OP_GELU_MUL, A, B, NULL);
            run(&w, Y);
            check(&w, Y, 1e-10, "GELU_MUL");
            node(Y, GT_OP_SCALE, A, NULL, NULL);
            Y[0].fparams[0] = Y[1].fparams[0] = 25.298221f; /* sqrt(640), Gemma 3 270M */
            run(&w, Y);
            check(&w, Y, 1e-12, "SCALE");
            node(Y, GT_OP_RMS_NORM, A, NULL, NULL);
            Y[0].fparams[0] = Y[1].fparams[0] = 1e-5f;
            run(&w, Y);
            check(&w, Y, 1e-10, "RMS_NORM");

            /* in place: y is a */
            gt_tensor P[2] = {A[0], A[1]};
            node(P, GT_OP_RMS_NORM, A, NULL, NULL);
            P[0].fparams[0] = P[1].fparams[0] = 1e-5f;
            run(&w, P);
            check(&w, P, 1e-10, "RMS_NORM in place");
            node(P, GT_OP_MUL, A, G, NULL);
            run(&w, P);
            check(&w, P, 1e-10, "MUL in place");
            node(P, GT_OP_ADD, A, B, NULL);
            run(&w, P);
            check(&w, P, 1e-10, "ADD in place");
            node(P, GT_OP_SILU_MUL, A, B, NULL);
            run(&w, P);
            check(&w, P, 1e-10, "SILU_MUL in place");
            node(P, GT_OP_GELU_MUL, A, B, NULL);
            run(&w, P);
            check(&w, P, 1e-10, "GELU_MUL in place");
            node(P, GT_OP_SCALE, A, NULL, NULL);
            P[0].fparams[0] = P[1].fparams[0] = 0.125f;
            run(&w, P);
            check(&w, P, 1e-12, "SCALE in place");
            for (int s = 0; s < 2; s++)
                for (int k = 1; k <= 4; k++)
                    w.be[s]->iface->buffer_free(w.bufs[s][w.n_bufs - k]);
            w.n_bufs -= 4;
            free(a);
            free(b);
            free(g);
        }
    }
    twin_close(&w);
}
START_TEST(op_elementwise)
{
    op_elementwise_body();
}
END_TEST


static void op_rope_body(void)
{
    /* heads, head_dim, rope_dim, mode, extra columns, pos0 */
    const int cases[][6] = {{8, 8, 8, 0, 0, 0},    {9, 64, 64, 0, 0, 3},  {4, 64, 32, 1, 0, 100},
                            {3, 16, 16, 1, 5, 2900}, {2, 10, 6, 0, 3, 7}, {4, 128, 128, 1, 0, 40000}};
    twin w;
    twin_open(&w);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int bi = 0; bi < N_BATCHES; bi++) {
            const int *cs = cases[ci], R = BATCHES[bi];
            const int C = cs[0] * cs[1] + cs[4];
            float *a = rand_floats((size_t)C * R, 2.0f);
            gt_tensor A[2], Y[2];
            leaf(&w, A, "a", GT_TYPE_F32, C, R, a, 4, false);
            leaf(&w, Y, "y", GT_TYPE_F32, C, R, NULL, 8, false);
            for (int inplace = 0; inplace < 2; inplace++) {
                gt_tensor *T = inplace ? A : Y;
                gt_tensor N[2] = {T[0], T[1]};
                node(N, GT_OP_ROPE, A, NULL, NULL);
                for (int s = 0; s < 2; s++) {
                    int32_t p[6] = {cs[0], cs[1], cs[2], cs[5], cs[3], 0};
                    memcpy(N[s].iparams, p, sizeof p);
                    N[s].fparams[0] = ci % 2 ? 10000.0f : 100000.0f;
                }
                run(&w, N);
                char what[96];
                snprintf(what, sizeof what, "ROPE case %zu, %d rows%s", ci, R,
                         inplace ? " in place" : "");
                check(&w, N, 1e-10, what);
            }
            for (int s = 0; s < 2; s++)
                for (int k = 1; k <= 2; k++)
                    w.be[s]->iface->buffer_free(w.bufs[s][w.n_bufs - k]);
            w.n_bufs -= 2;
            free(a);
        }
    }
    twin_close(&w);
}
START_TEST(op_rope)
{
    op_rope_body();
}
END_TEST


static void op_attention_body(void)
{
    /* n_head, n_kv, head_dim, pos0, window (0 = none). With a window, the
     * cache rows that no query row may see are NaN, so reading one shows. */
    const int cases[][5] = {{8, 4, 8, 0, 0},       {9, 3, 64, 5, 0},  {4, 4, 6, 30, 0},
                            {2, 1, 128, 1500, 0},  {6, 2, 32, 0, 0},  {9, 3, 64, 90, 48},
                            {4, 1, 256, 600, 512}, {6, 2, 32, 0, 16}, {4, 4, 6, 30, 1}};
    twin w;
    twin_open(&w);
    double worst = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int bi = 0; bi < N_BATCHES; bi++) {
            const int nh = cases[ci][0], nkv = cases[ci][1], hd = cases[ci][2];
            const int pos0 = cases[ci][3], window = cases[ci][4], R = BATCHES[bi];
            if (R == 512 && pos0 > 100)
                continue;
            const int n_ctx = pos0 + R + 3, qd = nh * hd, kvd = nkv * hd;
            float *q = rand_floats((size_t)qd * R, 1.5f), *k = rand_floats((size_t)kvd * n_ctx, 1.5f);
            float *v = rand_floats((size_t)kvd * n_ctx, 1.0f), *kn = rand_floats((size_t)kvd * R, 1.5f);
            const int hidden = window > 0 && pos0 + 1 > window ? pos0 + 1 - window : 0;
            for (size_t j = 0; j < (size_t)kvd * hidden; j++)
                k[j] = v[j] = NAN;
            gt_tensor Q[2], KC[2], VC[2], KN[2], KS[2], Y[2];
            leaf(&w, Q, "q", GT_TYPE_F32, qd, R, q, 4, false);
            leaf(&w, KC, "k_cache", GT_TYPE_F32, kvd, n_ctx, k, 32, false);
            leaf(&w, VC, "v_cache", GT_TYPE_F32, kvd, n_ctx, v, 64, false);
            leaf(&w, KN, "k_new", GT_TYPE_F32, kvd, R, kn, 8, false);
            leaf(&w, Y, "att", GT_TYPE_F32, qd, R, NULL, 12, false);
            /* the new rows go into the K cache first, as in the model */
            for (int s = 0; s < 2; s++) {
                KS[s] = KC[s];
                KS[s].ne[1] = R;
                KS[s].offset = KC[s].offset + (size_t)pos0 * kvd * sizeof(float);
            }
            node(KS, GT_OP_KV_STORE, KN, KC, NULL);
            KS[0].iparams[0] = KS[1].iparams[0] = pos0;
            run(&w, KS);
            if (hidden == 0) /* NaN rows compare as NaN */
                check(&w, KC, 1e-12, "KV_STORE");
            node(Y, GT_OP_ATTENTION, Q, KC, VC);
            for (int s = 0; s < 2; s++) {
                int32_t p[6] = {nh, nkv, hd, pos0, window};
                memcpy(Y[s].iparams, p, sizeof p);
                Y[s].fparams[0] = 1.0f / sqrtf((float)hd);
            }
            run(&w, Y);
            char what[96];
            snprintf(what, sizeof what, "ATTENTION %d/%d heads of %d, pos0 %d, %d rows, window %d",
                     nh, nkv, hd, pos0, R, window);
            double e = check(&w, Y, 1e-8, what);
            worst = e > worst ? e : worst;
            for (int s = 0; s < 2; s++)
                for (int j = 1; j <= 5; j++)
                    w.be[s]->iface->buffer_free(w.bufs[s][w.n_bufs - j]);
            w.n_bufs -= 5;
            free(q);
            free(k);
            free(v);
            free(kn);
        }
    }
    printf("ATTENTION: worst NMSE vs reference %.3g (bound 1e-8)\n", worst);
    twin_close(&w);
}
START_TEST(op_attention)
{
    op_attention_body();
}
END_TEST


/* RMS_NORM then MUL by a weight: in place, the backend fuses the two
 * launches; out of place it must not (the norm output stays observable). */
START_TEST(op_fused_norm_mul)
{
    twin w;
    twin_open(&w);
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int bi = 0; bi < N_BATCHES; bi++) {
            const int C = 75 + 501 * inplace, R = BATCHES[bi];
            float *a = rand_floats((size_t)C * R, 3.0f), *g = rand_floats(C, 1.0f);
            gt_tensor A[2], G[2], N[2], Y[2];
            leaf(&w, A, "a", GT_TYPE_F32, C, R, a, 4, false);
            leaf(&w, G, "g", GT_TYPE_F32, C, 1, g, 8, true);
            leaf(&w, N, "norm", GT_TYPE_F32, C, R, NULL, 12, false);
            leaf(&w, Y, "y", GT_TYPE_F32, C, R, NULL, 16, false);
            if (inplace) {
                Y[0] = N[0];
                Y[1] = N[1];
            }
            node(N, GT_OP_RMS_NORM, A, NULL, NULL);
            N[0].fparams[0] = N[1].fparams[0] = 1e-5f;
            node(Y, GT_OP_MUL, N, G, NULL);
            for (int s = 0; s < 2; s++) {
                gt_err err = {{0}};
                gt_tensor *nodes[2] = {&N[s], &Y[s]};
                gt_graph gr = {nodes, 2};
                ck_assert_msg(gt_backend_compute(w.be[s], &gr, &err) == 0, "%s", err.msg);
            }
            check(&w, Y, 1e-10, inplace ? "RMS_NORM+MUL in place" : "RMS_NORM, MUL elsewhere");
            if (!inplace)
                check(&w, N, 1e-10, "RMS_NORM output next to its MUL");
            free(a);
            free(g);
        }
    }
    twin_close(&w);
}
END_TEST

/* The same ops with the work sizes a GPU gets (wide groups, local-memory
 * reductions, short attention chunks), so PoCL runs those code paths too. */
START_TEST(op_gpu_work_sizes)
{
    setenv("GT_OPENCL_TUNE", "ew_width=4,ew_lws=64,norm_lws=128,mv_lws=64,mv_rows=2,"
           "mv_max_tok=4,mm_rn=2,mm_rm=4,mm_lx=16,mm_ly=8,att_lws=64,att_vw=4,att_chunk=256", 1);
    op_mul_mat_body();
    op_get_rows_body();
    op_elementwise_body();
    op_rope_body();
    op_attention_body();
    unsetenv("GT_OPENCL_TUNE");
}
END_TEST

START_TEST(op_supports)
{
    gt_backend *b = open_be("opencl", NULL);
    char why[256];
    /* every op of the llama and gemma3 graphs; op_elementwise and
     * op_attention check that GELU_MUL, SCALE and windows compute right */
    for (int op = GT_OP_GET_ROWS; op < GT_OP_COUNT; op++)
        ck_assert_msg(gt_backend_supports(b, (gt_op)op, GT_TYPE_F32, why, sizeof why), "%s: %s",
                      gt_op_name((gt_op)op), why);
    for (size_t i = 1; i < N_WEIGHT_TYPES; i++) {
        const gt_type t = WEIGHT_TYPES[i];
        ck_assert_msg(gt_backend_supports(b, GT_OP_MUL_MAT, t, why, sizeof why), "%s: %s",
                      gt_type_name(t), why);
        ck_assert(gt_backend_supports(b, GT_OP_GET_ROWS, t, why, sizeof why));
        ck_assert(!gt_backend_supports(b, GT_OP_ADD, t, why, sizeof why));
        ck_assert_msg(why[0] != '\0', "no reason given");
    }
    /* Q8_K only ever holds activations: no weight kernel, and it says so */
    ck_assert(!gt_backend_supports(b, GT_OP_MUL_MAT, GT_TYPE_Q8_K, why, sizeof why));
    ck_assert_msg(strstr(why, "no OpenCL kernel") && strstr(why, "q8_k"), "why: %s", why);
    gt_backend_close(b);
}
END_TEST

/* --- devices, profiles, errors, cache --------------------------------------------- */

START_TEST(device_profiles)
{
    const gt_backend_entry *e = gt_backend_find("opencl");
    ck_assert(e && e->reg);
    gt_device_info devs[16];
    gt_err err = {{0}};
    int n = e->reg->probe(devs, 16, NULL, &err);
    ck_assert_msg(n > 0, "probe: %s", err.msg);
    for (int i = 0; i < n; i++)
        printf("opencl device %d: %s | %s %s | %s\n", i, devs[i].name, devs[i].driver,
               devs[i].driver_version, devs[i].extra);
    ck_assert_str_eq(devs[0].backend, "opencl");
    ck_assert(devs[0].driver[0] && devs[0].driver_version[0]);
    ck_assert_msg(strstr(devs[0].extra, "opencl_c=OpenCL C") && strstr(devs[0].extra, "platform_version="),
                  "extra: %s", devs[0].extra);

    /* A profile naming the first device's platform selects it. */
    char prof[200];
    snprintf(prof, sizeof prof, "platform=%.12s", devs[0].driver);
    gt_backend *b = open_be("opencl", prof);
    ck_assert_str_eq(b->info.name, devs[0].name);
    ck_assert_str_eq(b->info.driver, devs[0].driver);
    gt_backend_close(b);
    snprintf(prof, sizeof prof, " platform = %s , device=%s", devs[0].driver, devs[0].name);
    b = open_be("opencl", prof);
    gt_backend_close(b);

    gt_backend_config cfg = {.driver = "platform=No Such Platform"};
    ck_assert(gt_backend_open("opencl", &cfg, &b, &err) != 0);
    ck_assert_msg(strstr(err.msg, "No Such Platform") && strstr(err.msg, devs[0].name),
                  "message: %s", err.msg);
    cfg.driver = "vendor=x";
    ck_assert(gt_backend_open("opencl", &cfg, &b, &err) != 0);
    ck_assert_msg(strstr(err.msg, "unknown key 'vendor'"), "message: %s", err.msg);
    cfg.driver = NULL;
    cfg.device = n;
    ck_assert(gt_backend_open("opencl", &cfg, &b, &err) != 0);
    ck_assert_msg(strstr(err.msg, "does not exist"), "message: %s", err.msg);
}
END_TEST

START_TEST(errors_name_the_problem)
{
    gt_backend *b = open_be("opencl", NULL);
    gt_err err = {{0}};
    gt_buffer *buf = NULL;
    ck_assert(b->iface->buffer_alloc(b, (size_t)1 << 50, &buf, &err) != 0);
    ck_assert_msg(strstr(err.msg, "CL_DEVICE_MAX_MEM_ALLOC_SIZE"), "message: %s", err.msg);
    ck_assert(b->iface->buffer_alloc(b, 256, &buf, &err) == 0);
    float x[8] = {0};
    ck_assert(b->iface->download(buf, 250, x, 8, &err) != 0);
    ck_assert_msg(strstr(err.msg, "overruns"), "message: %s", err.msg);
    /* a node whose tensor runs past its buffer is refused before any kernel */
    gt_tensor a = {.name = "a", .type = GT_TYPE_F32, .ne = {64, 2}, .buf = buf};
    gt_tensor y = a;
    snprintf(y.name, sizeof y.name, "y");
    y.op = GT_OP_ADD;
    y.src[0] = y.src[1] = &a;
    gt_tensor *n = &y;
    gt_graph g = {&n, 1};
    ck_assert(gt_backend_compute(b, &g, &err) != 0);
    ck_assert_msg(strstr(err.msg, "ADD 'y'") && strstr(err.msg, "past the end"), "message: %s",
                  err.msg);
    b->iface->buffer_free(buf);
    gt_backend_close(b);
}
END_TEST

/* The cache= field of a backend's extra (copied: b is closed right after). */
static const char *cache_status(const gt_backend *b)
{
    static char out[256];
    const char *s = strstr(b->info.extra, "cache=");
    snprintf(out, sizeof out, "%s", s ? s + 6 : "");
    return out;
}

START_TEST(program_cache)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", gt_test_tmp("oclcache"));
    setenv("GT_OPENCL_CACHE", dir, 1);
    gt_backend *b = open_be("opencl", NULL);
    ck_assert_msg(strncmp(cache_status(b), "miss: no entry, stored", 22) == 0, "%s", b->info.extra);
    gt_backend_close(b);
    b = open_be("opencl", NULL);
    ck_assert_msg(strncmp(cache_status(b), "hit", 3) == 0, "%s", b->info.extra);
    gt_backend_close(b);

    char cmd[600], path[512] = "";
    snprintf(cmd, sizeof cmd, "ls %s/*.clbin", dir);
    FILE *p = popen(cmd, "r");
    ck_assert(p && fgets(path, sizeof path, p));
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
    /* corruptions: flipped bytes in the binary, truncation, garbage, a stale key */
    for (int kind = 0; kind < 4; kind++) {
        FILE *f = fopen(path, "r+b");
        ck_assert(f);
        if (kind == 0) {
            fseek(f, -100, SEEK_END);
            fputs("garbage!", f);
        } else if (kind == 1) {
            ck_assert(ftruncate(fileno(f), 300) == 0);
        } else if (kind == 2) {
            rewind(f);
            fputs("not a cache file at all", f);
        } else {
            fseek(f, 40 + 20, SEEK_SET); /* inside the stored key */
            fputc('#', f);
        }
        fclose(f);
        b = open_be("opencl", NULL);
        ck_assert_msg(strstr(cache_status(b), "miss:") && strstr(cache_status(b), "stored"),
                      "kind %d: %s", kind, b->info.extra);
        /* and it still computes */
        char why[8];
        ck_assert(gt_backend_supports(b, GT_OP_ADD, GT_TYPE_F32, why, sizeof why));
        gt_backend_close(b);
        b = open_be("opencl", NULL);
        ck_assert_msg(strncmp(cache_status(b), "hit", 3) == 0, "kind %d: %s", kind, b->info.extra);
        gt_backend_close(b);
    }
    setenv("GT_OPENCL_CACHE", "off", 1);
    b = open_be("opencl", NULL);
    ck_assert_msg(strncmp(cache_status(b), "off", 3) == 0, "%s", b->info.extra);
    gt_backend_close(b);
    unsetenv("GT_OPENCL_CACHE");
}
END_TEST

/* --- models ------------------------------------------------------------------------ */

typedef struct run_ctx {
    gt_model *m;
    gt_backend *b;
    gt_session *s;
} run_ctx;

static void run_open(run_ctx *r, gt_model *m, const char *backend, int n_ctx)
{
    gt_err err = {{0}};
    r->m = m;
    r->b = open_be(backend, NULL);
    gt_session_params p = {.n_ctx = n_ctx};
    ck_assert_msg(gt_session_new(m, r->b, &p, &r->s, &err) == 0, "%s", err.msg);
}

static void run_close(run_ctx *r)
{
    gt_session_free(r->s);
    gt_backend_close(r->b);
}

static gt_model *load(const char *path)
{
    gt_err err = {{0}};
    gt_model *m = NULL;
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    return m;
}

static int tokens_of(const gt_model *m, const char *text, int32_t *ids, int max)
{
    gt_err err = {{0}};
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    int n = gt_tokenize(tok, text, strlen(text), gt_tokenizer_adds_bos(tok), ids, max, &err);
    ck_assert_msg(n > 0, "tokenize: %s", err.msg);
    return n < max ? n : max;
}

/* Greedy continuation: prompt, then n tokens one at a time. */
static void greedy(run_ctx *r, const int32_t *prompt, int np, int n, int32_t *out)
{
    gt_err err = {{0}};
    const int nv = gt_model_hparams(r->m)->n_vocab;
    float *logits = malloc(sizeof(float) * nv);
    ck_assert_msg(gt_session_eval(r->s, prompt, np, false, logits, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        out[i] = gt_argmax(logits, nv);
        ck_assert_msg(gt_session_eval(r->s, &out[i], 1, false, logits, &err) == 0, "%s", err.msg);
    }
    free(logits);
}

static const char *PROMPTS[] = {"Zoo", "Once upon a time", "The little dog was sad because",
                                "Lily and Tom went to the park."};

START_TEST(model_stories_greedy)
{
    const char *path = gt_test_llama();
    gt_model *m = load(path);
    for (size_t i = 0; i < sizeof PROMPTS / sizeof PROMPTS[0]; i++) {
        int32_t prompt[64], ref[64], ocl[64];
        int np = tokens_of(m, PROMPTS[i], prompt, 64);
        run_ctx r, o;
        run_open(&r, m, "reference", 256);
        run_open(&o, m, "opencl", 256);
        greedy(&r, prompt, np, 64, ref);
        greedy(&o, prompt, np, 64, ocl);
        for (int k = 0; k < 64; k++)
            ck_assert_msg(ref[k] == ocl[k], "prompt '%s': token %d differs: opencl %d, reference %d",
                          PROMPTS[i], k, ocl[k], ref[k]);
        run_close(&r);
        run_close(&o);
    }
    gt_model_free(m);
}
END_TEST

static const char *STORY =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
    "One day, she saw a big red ball in the park. She ran to the ball and kicked it very hard. "
    "The ball went up into the sky and came down on a tree. Lily was sad because she could not "
    "reach it. Her friend Tom came to help her. Tom was tall and strong. He climbed the tree and "
    "got the ball. Lily was very happy. She said, \"Thank you, Tom! You are a good friend.\" They "
    "played with the ball all day long. When the sun went down, they went home to eat dinner. "
    "Lily told her mom about the ball and the tree. Her mom smiled and gave her a big hug. The "
    "next day, Lily and Tom went to the park again. They saw a small dog that was lost. The dog "
    "was scared and hungry. Lily gave the dog some bread, and Tom gave it water. The dog wagged "
    "its tail and licked their hands. They looked for the dog's home and found a kind old man "
    "who was looking for his pet. He was so happy to see his dog. He thanked Lily and Tom and "
    "gave them a cookie. Lily and Tom learned that helping others makes everyone happy.";

/* Teacher-forced top-1 agreement over text, all positions in one batch. */
static double agreement(gt_model *m, const char *text, int max_tok, int *n_out)
{
    gt_err err = {{0}};
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)max_tok);
    const int n = tokens_of(m, text, ids, max_tok);
    const int nv = gt_model_hparams(m)->n_vocab;
    float *lr = malloc(sizeof(float) * (size_t)n * nv), *lo = malloc(sizeof(float) * (size_t)n * nv);
    run_ctx r, o;
    run_open(&r, m, "reference", n + 8);
    run_open(&o, m, "opencl", n + 8);
    ck_assert_msg(gt_session_eval(r.s, ids, n, true, lr, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_session_eval(o.s, ids, n, true, lo, &err) == 0, "%s", err.msg);
    int same = 0;
    for (int i = 0; i < n; i++)
        same += gt_argmax(lr + (size_t)i * nv, nv) == gt_argmax(lo + (size_t)i * nv, nv);
    run_close(&r);
    run_close(&o);
    free(lr);
    free(lo);
    free(ids);
    *n_out = n;
    return (double)same / n;
}

/* Teacher-forced agreement on one file: at least 200 tokens, >= 99%. */
static void check_agreement(const char *path, const char *name)
{
    gt_model *m = load(path);
    int n = 0;
    double a = agreement(m, STORY, 400, &n);
    printf("%s: top-1 agreement %.2f%% over %d teacher-forced tokens\n", name, 100 * a, n);
    ck_assert_msg(n >= 200 && a >= 0.99, "%s: agreement %.4f over %d tokens", name, a, n);
    gt_model_free(m);
}

/* The f32 llama model (stories260K or its stand-in). */
START_TEST(model_llama_agreement) { check_agreement(gt_test_llama(), "stories260K (or stand-in) f32"); }
END_TEST

static const char *const LLAMACPP_QUANTS[] = {
    "llamacpp-quants/stories260K-f16.gguf", "llamacpp-quants/stories260K-q8_0.gguf",
    "llamacpp-quants/stories260K-q4_0.gguf", "llamacpp-quants/stories260K-q4_1.gguf"};
#define N_LLAMACPP_QUANTS (sizeof LLAMACPP_QUANTS / sizeof LLAMACPP_QUANTS[0])

START_TEST(model_llamacpp_quants)
{
    for (size_t i = 0; i < N_LLAMACPP_QUANTS; i++) {
        const char *path = gt_test_model(LLAMACPP_QUANTS[i]);
        ck_assert_msg(path != NULL, "%s absent (main() checked it)", LLAMACPP_QUANTS[i]);
        check_agreement(path, LLAMACPP_QUANTS[i]);
    }
}
END_TEST

static const char *ENGLISH =
    "The history of the bicycle is a story of many small improvements. Early machines had no "
    "pedals at all: riders pushed themselves along with their feet, like children on a balance "
    "bike. Later designs added cranks to the front wheel, and to go faster the wheel grew larger "
    "and larger, until riders sat high above the road and a fall could be dangerous. The safety "
    "bicycle changed this. It had two wheels of the same size, a chain that drove the rear "
    "wheel, and a frame shaped like a diamond. Air-filled tires made the ride smooth, and soon "
    "millions of people could travel cheaply and quickly. Bicycles gave workers a way to reach "
    "factories in distant towns, and they gave many women a new kind of freedom. Today engineers "
    "still refine the design with light materials, better brakes and electric motors, but the "
    "basic shape has hardly changed in more than a century. In many cities, planners build "
    "protected lanes so that riders of every age can feel safe, and studies show that people "
    "who cycle to work are often healthier and happier than those who drive. The humble bicycle "
    "remains one of the most efficient machines ever invented for turning human effort into "
    "motion. Repairing one needs only a few simple tools, which is why a bicycle can run for "
    "decades, and why mechanics in small villages and large cities alike can keep it on the "
    "road long after a car of the same age would have been scrapped.";

START_TEST(model_smollm2)
{
    const char *path = gt_test_smollm2();
    ck_assert_msg(path != NULL, "SmolLM2 absent (main() checked it)");
#if defined(__SANITIZE_ADDRESS__)
    /* The scalar reference under ASan needs minutes for 256 tokens of a
     * 135M model; the sanitizer build checks memory, the release build the
     * full acceptance length. */
    const int want = 64;
    printf("SmolLM2 agreement shortened to %d tokens under AddressSanitizer\n", want);
#else
    const int want = 256;
#endif
    gt_model *m = load(path);
    int n = 0;
    double a = agreement(m, ENGLISH, want, &n);
    printf("SmolLM2-135M Q4_1: top-1 agreement %.2f%% over %d teacher-forced tokens\n", 100 * a, n);
    ck_assert_msg(n == want && a >= 0.99, "agreement %.4f over %d tokens", a, n);
    gt_model_free(m);
}
END_TEST

/* Gemma 3 270M as released (Q4_K_M: q4_k, q6_k, q5_0 and q8_0 weights;
 * GELU_MUL, SCALE, NeoX ROPE, head_dim 256) over the first 256 tokens of
 * suites/data/eval.txt, both backends in one batch: opencl's top-1 must be
 * the reference's at >= 99% of the positions (issue 18). */
START_TEST(model_gemma3)
{
    const char *path = gt_test_gemma3();
    ck_assert_msg(path != NULL, "Gemma 3 absent (main() checked it)");
    char *text = gt_test_slurp(GT_SOURCE_DIR "/suites/data/eval.txt");
    ck_assert_msg(text != NULL, "suites/data/eval.txt unreadable");
    gt_model *m = load(path);
    ck_assert_str_eq(gt_model_hparams(m)->arch, "gemma3");
    int n = 0;
    const double t0 = gt_test_now();
    const double a = agreement(m, text, 256, &n);
    printf("Gemma 3 270M Q4_K_M: top-1 agreement %.2f%% over %d teacher-forced tokens (%.0f s)\n",
           100 * a, n, gt_test_now() - t0);
    ck_assert_msg(n == 256 && a >= 0.99, "agreement %.4f over %d tokens", a, n);
    gt_model_free(m);
    free(text);
}
END_TEST

/* SmolLM2 requantized by `gauntlet quantize` to q4_k_m: on its rows of 576
 * most tensors become the fallbacks q5_0/q5_1/q8_0, ffn_down (rows of
 * 1536) and the output head q4_k/q6_k, so one file runs most new types. */
START_TEST(model_smollm2_q4_k_m)
{
    const char *path = gt_test_smollm2();
    ck_assert_msg(path != NULL, "SmolLM2 absent (main() checked it)");
    const char *out = gt_test_tmp("smollm2-q4_k_m.gguf");
    ck_assert_int_eq(gt_test_sh("'%s/gauntlet' quantize --quiet '%s' '%s' q4_k_m >/dev/null",
                                GT_BINARY_DIR, path, out),
                     0);
    gt_model *m = load(out);
    int n = 0;
    const double a = agreement(m, ENGLISH, 256, &n);
    printf("SmolLM2-135M q4_k_m: top-1 agreement %.2f%% over %d teacher-forced tokens\n",
           100 * a, n);
    ck_assert_msg(n == 256 && a >= 0.99, "agreement %.4f over %d tokens", a, n);
    gt_model_free(m);
    unlink(out);
}
END_TEST

/* Weights split into chunks for a small CL_DEVICE_MAX_MEM_ALLOC_SIZE still
 * give the reference's tokens. */
START_TEST(model_split_weights)
{
    setenv("GT_OPENCL_MAX_ALLOC", "524288", 1);
    gt_model *m = load(gt_test_llama());
    int32_t prompt[64], ref[32], ocl[32];
    int np = tokens_of(m, PROMPTS[1], prompt, 64);
    run_ctx r, o;
    run_open(&r, m, "reference", 128);
    run_open(&o, m, "opencl", 128);
    greedy(&r, prompt, np, 32, ref);
    greedy(&o, prompt, np, 32, ocl);
    ck_assert(memcmp(ref, ocl, sizeof ref) == 0);
    run_close(&r);
    run_close(&o);
    gt_model_free(m);
    unsetenv("GT_OPENCL_MAX_ALLOC");
}
END_TEST

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The plugin's own count of live cl_mem objects (a test hook it exports). */
static long live_allocations(gt_backend *b)
{
    void *h = dlopen(GT_BINARY_DIR "/libgt-backend-opencl.so", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "plugin not loaded from " GT_BINARY_DIR);
    long (*fn)(gt_backend *) = (long (*)(gt_backend *))dlsym(h, "gt_ocl_live_allocations");
    ck_assert(fn != NULL);
    long n = fn(b);
    dlclose(h);
    return n;
}

START_TEST(sessions_do_not_leak)
{
    gt_err err = {{0}};
    gt_model *m = load(gt_test_llama());
    gt_backend *b = open_be("opencl", NULL);
    gt_session_params p = {.n_ctx = 64};
    long rss_warm = 0, live0 = -1;
    for (int i = 0; i < 1000; i++) {
        if (i == 50)
            rss_warm = rss_kib();
        gt_session *s = NULL;
        ck_assert_msg(gt_session_new(m, b, &p, &s, &err) == 0, "%s", err.msg);
        if (i % 10 == 0) {
            int32_t t[2] = {1, 300};
            float logits[512];
            ck_assert_msg(gt_session_eval(s, t, 2, false, logits, &err) == 0, "%s", err.msg);
        }
        gt_session_free(s);
        /* after the first graph: the backend keeps its ROPE table */
        if (live0 < 0)
            live0 = live_allocations(b);
        ck_assert_int_eq(live_allocations(b), live0);
    }
    const long rss_end = rss_kib();
    printf("1000 sessions: RSS %ld KiB after 50, %ld KiB after 1000\n", rss_warm, rss_end);
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's quarantine keeps freed memory resident on purpose; LeakSanitizer
     * and the live-allocation count above check for leaks instead. */
    printf("RSS bound not checked under AddressSanitizer\n");
#else
    ck_assert_msg(rss_end - rss_warm < 8 * 1024, "RSS grew by %ld KiB", rss_end - rss_warm);
#endif
    gt_backend_close(b);
    gt_model_free(m);
}
END_TEST

/* --- main ------------------------------------------------------------------------- */

/* Asks a child process whether any OpenCL device exists, so this process
 * has not started an OpenCL driver before Check forks the tests. */
static int probe_in_child(char *why, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char msg[600] = "";
        int n = 0;
        const gt_backend_entry *e = gt_backend_find("opencl");
        if (!e || !e->reg) {
            snprintf(msg, sizeof msg, "plugin: %s", e ? e->why : "not registered");
            /* not built (no OpenCL headers, GT_OPENCL=OFF) vs. built but broken */
            n = e && strstr(e->why, "not found") ? -4 : -2;
        } else {
            gt_device_info d[4];
            gt_err err = {{0}};
            n = e->reg->probe(d, 4, NULL, &err);
            if (n <= 0)
                snprintf(msg, sizeof msg, "%s", err.msg);
        }
        if (write(fds[1], msg, strlen(msg)) < 0)
            n = -3;
        _exit(n > 0 ? 0 : n == -2 ? 2 : n == -4 ? 3 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], why, cap - 1);
    why[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
    char why[600];
    const int probe = probe_in_child(why, sizeof why);
    const char *ci = getenv("CI");
    const bool in_ci = ci && ci[0] && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
    if (probe == 2 || probe < 0) {
        printf("FAIL: the OpenCL backend plugin is not usable: %s\n", why);
        return 1;
    }
    if (probe == 3) {
        if (in_ci) {
            printf("FAIL: the OpenCL backend plugin was not built or not found in CI: %s\n", why);
            return 1;
        }
        printf("SKIP: the OpenCL backend plugin was not built (%s)\n", why);
        return GT_TEST_SKIP;
    }
    if (probe == 1) {
        if (in_ci) {
            printf("FAIL: no OpenCL platform/device in CI (install pocl-opencl-icd): %s\n", why);
            return 1;
        }
        printf("SKIP: no OpenCL platform/device: %s\n", why);
        return GT_TEST_SKIP;
    }
    gt_test_llama(); /* written once here, before the cases fork */
    bool quants = true;
    for (size_t i = 0; i < N_LLAMACPP_QUANTS; i++)
        quants = quants && gt_test_model(LLAMACPP_QUANTS[i]) != NULL;

    Suite *s = suite_create("opencl");
    TCase *ops = tcase_create("ops");
    tcase_set_timeout(ops, 300);
    tcase_add_test(ops, op_supports);
    tcase_add_test(ops, op_mul_mat);
    tcase_add_test(ops, op_get_rows);
    tcase_add_test(ops, op_elementwise);
    tcase_add_test(ops, op_rope);
    tcase_add_test(ops, op_attention);
    tcase_add_test(ops, op_gpu_work_sizes);
    tcase_add_test(ops, op_fused_norm_mul);
    suite_add_tcase(s, ops);
    TCase *plumbing = tcase_create("plumbing");
    tcase_set_timeout(plumbing, 300);
    tcase_add_test(plumbing, device_profiles);
    tcase_add_test(plumbing, errors_name_the_problem);
    tcase_add_test(plumbing, program_cache);
    tcase_add_test(plumbing, sessions_do_not_leak);
    suite_add_tcase(s, plumbing);
    TCase *models = tcase_create("models");
    tcase_set_timeout(models, 300);
    tcase_add_test(models, model_stories_greedy);
    tcase_add_test(models, model_split_weights);
    tcase_add_test(models, model_llama_agreement);
    gt_test_add_if(models, model_llamacpp_quants, quants,
                   "llama.cpp quants of stories260K not found (../shared/models/llamacpp-quants)");
    gt_test_add_if(models, model_smollm2, gt_test_smollm2() != NULL,
                   "SmolLM2-135M Q4_1 not found (set GT_SMOLLM2 or run ci/fetch-smollm2.sh)");
    /* 256 positions of a 262,144-token vocabulary on the reference, or a
     * quantize plus 256 positions, take many minutes under ASan; the plain
     * build runs them. */
    const char *slow = "sanitized build: a 256-token real-model reference run takes many "
                       "minutes under the sanitizers; the plain build runs this case";
    gt_test_add_if(models, model_smollm2_q4_k_m, gt_test_smollm2() != NULL && !gt_test_sanitized(),
                   gt_test_sanitized() ? slow
                   : "SmolLM2-135M Q4_1 not found (set GT_SMOLLM2 or run ci/fetch-smollm2.sh)");
    gt_test_add_if(models, model_gemma3, gt_test_gemma3() != NULL && !gt_test_sanitized(),
                   gt_test_sanitized() ? slow
                   : "Gemma 3 270M Q4_K_M not found (set GT_GEMMA3 or run ci/fetch-models.sh "
                     "gemma3-270m-q4_k_m)");
    suite_add_tcase(s, models);
    return gt_test_run(s);
}
