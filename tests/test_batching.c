/* test_batching.c: several sequences in one batch (gt_session_eval_seqs),
 * the companions a backend's n_parallel setting adds, and the split of a
 * prompt into micro-batches (n_batch), on synthetic models (tiny: llama,
 * qwen3-tiny: per-head norms and a 32-wide head).
 *
 * The target is a 37-token prompt then 6 greedy decode steps; its logits at
 * every prompt position and every step are compared with the same run alone
 * at n_batch 512:
 * 1. reference: the same bytes (memcmp) at n_batch 1, 7 and 512, alone,
 *    as the third of four sequences (ragged prompts of 5, 20 and 50 tokens;
 *    sequence 0 finishes after two steps, is removed and starts again), and
 *    with three companions (a backend opened with n_parallel 4). The
 *    reference's every row is computed on its own in double, so anything
 *    else is a bleed between sequences or a wrong position.
 * 2. cpu and opencl: the same runs within 1e-4 of their own alone run
 *    (observed 0 to ~1e-6: a matmul of 1 row and of 40 may take different
 *    kernels).
 * 3. The setting faults (GT_FAULT, gt/fault.h) show only under their
 *    setting, on cpu and opencl (GT_FAULT_BACKEND), against the reference:
 *    batch-split@0 is clean at n_batch 512 and wrong at 7; seq-bleed@0
 *    clean with one companion and wrong with three; thread-race clean with
 *    1 thread and wrong with 2. Each fault case runs in its own forked
 *    child (GT_FAULT is read once per process). */
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
#include "gt/synth.h"
#include "testutil.h"

enum { N_PROMPT = 37, N_STEPS = 6, N_ROWS = N_PROMPT + N_STEPS, N_CTX = 128 };

static bool opencl_ok;
static char opencl_why[512];

static gt_model *synth_load(const char *preset)
{
    char name[64];
    snprintf(name, sizeof name, "%s-batching.gguf", preset);
    const char *path = gt_test_tmp(name);
    gt_err err = {{0}};
    ck_assert_msg(gt_synth_write(path, preset, 7, GT_TYPE_F32, &err) == 0, "%s", err.msg);
    gt_model *m = NULL;
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    return m;
}

static gt_backend *open_be(const char *name, int threads, int n_batch, int n_parallel)
{
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {.n_threads = threads, .n_batch = n_batch,
                                   .n_parallel = n_parallel};
    ck_assert_msg(gt_backend_open(name, &cfg, &b, &err) == 0, "%s: %s", name, err.msg);
    return b;
}

static void prompt_of(const gt_model *m, int salt, int32_t *ids, int n)
{
    const int nv = gt_model_hparams(m)->n_vocab;
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 37 + salt * 101 + 11) % nv);
}

/* Alone through gt_session_eval (companions when b has n_parallel > 1):
 * all prompt rows, then N_STEPS greedy steps; N_ROWS x n_vocab. */
static float *run_alone(const gt_model *m, gt_backend *b, int n_batch)
{
    const int nv = gt_model_hparams(m)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)nv * N_ROWS);
    ck_assert_ptr_nonnull(out);
    gt_session *s = NULL;
    gt_err err = {{0}};
    const gt_session_params sp = {.n_ctx = N_CTX, .n_batch = n_batch};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
    int32_t ids[N_PROMPT];
    prompt_of(m, 0, ids, N_PROMPT);
    ck_assert_msg(gt_session_eval(s, ids, N_PROMPT, true, out, &err) == 0, "%s", err.msg);
    for (int i = 0; i < N_STEPS; i++) {
        const float *last = out + (size_t)(N_PROMPT - 1 + i) * nv;
        const int32_t next = gt_argmax(last, nv);
        ck_assert_msg(gt_session_eval(s, &next, 1, false, out + (size_t)(N_PROMPT + i) * nv,
                                      &err) == 0,
                      "%s", err.msg);
    }
    gt_session_free(s);
    return out;
}

/* The target as sequence 2 of four in one session: ragged prompts in the
 * same first call, then one token each per step; sequence 0 finishes after
 * two steps and starts again with a 3-token prompt. */
static float *run_four(const gt_model *m, gt_backend *b, int n_batch)
{
    const int nv = gt_model_hparams(m)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)nv * N_ROWS);
    float *junk = malloc(sizeof(float) * (size_t)nv * 64);
    ck_assert(out && junk);
    gt_session *s = NULL;
    gt_err err = {{0}};
    const gt_session_params sp = {.n_ctx = N_CTX, .n_batch = n_batch, .n_seq_max = 4};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_session_n_seq(s), 4);
    ck_assert_int_eq(gt_session_n_companions(s), 0);
    const int lens[4] = {5, 20, N_PROMPT, 50};
    int32_t p[4][50];
    for (int q = 0; q < 4; q++)
        prompt_of(m, q == 2 ? 0 : q + 10, p[q], lens[q]);
    gt_seq_eval e[4];
    for (int q = 0; q < 4; q++)
        e[q] = (gt_seq_eval){q, p[q], lens[q], q == 2, q == 2 ? out : junk + (size_t)q * nv};
    ck_assert_msg(gt_session_eval_seqs(s, e, 4, &err) == 0, "%s", err.msg);
    int32_t tok[4];
    for (int i = 0; i < N_STEPS; i++) {
        int n_e = 0;
        if (i == 2) { /* sequence 0 finished: removed, and a new one starts */
            ck_assert_msg(gt_session_seq_truncate(s, 0, 0, &err) == 0, "%s", err.msg);
            ck_assert_int_eq(gt_session_seq_n_past(s, 0), 0);
            e[n_e++] = (gt_seq_eval){0, p[1], 3, false, junk};
        }
        for (int q = 0; q < 4; q++) {
            if (q == 0 && i == 2)
                continue;
            const float *last = q == 2 ? out + (size_t)(N_PROMPT - 1 + i) * nv : junk + (size_t)q * nv;
            tok[q] = gt_argmax(last, nv);
            e[n_e++] = (gt_seq_eval){q, &tok[q], 1, false,
                                     q == 2 ? out + (size_t)(N_PROMPT + i) * nv
                                            : junk + (size_t)q * nv};
        }
        ck_assert_msg(gt_session_eval_seqs(s, e, n_e, &err) == 0, "%s", err.msg);
    }
    ck_assert_int_eq(gt_session_seq_n_past(s, 2), N_PROMPT + N_STEPS);
    gt_session_free(s);
    free(junk);
    return out;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = fabs((double)a[i] - b[i]);
        d = x > d || isnan(x) ? (isnan(x) ? INFINITY : x) : d;
    }
    return d;
}

/* Every way of running the target against alone at n_batch 512: bitwise
 * (bound < 0) or within bound. */
static void check_backend(const char *preset, const char *backend, double bound)
{
    gt_model *m = synth_load(preset);
    const size_t n = (size_t)gt_model_hparams(m)->n_vocab * N_ROWS;
    gt_backend *b = open_be(backend, 0, 0, 0);
    float *base = run_alone(m, b, 512);
    const int batches[] = {1, 7, 512};
    for (int k = 0; k < 3; k++) {
        float *runs[3] = {run_alone(m, b, batches[k]), run_four(m, b, batches[k]), NULL};
        gt_backend *bc = open_be(backend, 0, batches[k], 4);
        runs[2] = run_alone(m, bc, 0);
        gt_backend_close(bc);
        const char *what[3] = {"alone", "4 sequences", "3 companions"};
        for (int r = 0; r < 3; r++) {
            const double d = max_diff(base, runs[r], n);
            printf("%s %s n_batch %d %s: max |diff| %.3g\n", preset, backend, batches[k], what[r], d);
            if (bound < 0)
                ck_assert_msg(memcmp(base, runs[r], sizeof(float) * n) == 0,
                              "%s %s n_batch %d %s: not bit-identical (max |diff| %g)", preset,
                              backend, batches[k], what[r], d);
            else
                ck_assert_msg(d <= bound, "%s %s n_batch %d %s: max |diff| %g > %g", preset,
                              backend, batches[k], what[r], d, bound);
            free(runs[r]);
        }
    }
    free(base);
    gt_backend_close(b);
    gt_model_free(m);
}

START_TEST(reference_bit_identical)
{
    check_backend("tiny", "reference", -1);
    check_backend("qwen3-tiny", "reference", -1);
}
END_TEST

START_TEST(cpu_within_tolerance)
{
    check_backend("tiny", "cpu", 1e-4);
    check_backend("qwen3-tiny", "cpu", 1e-4);
}
END_TEST

START_TEST(opencl_within_tolerance)
{
    check_backend("tiny", "opencl", 1e-4);
}
END_TEST

/* A MUL_MAT on the cpu backend (act f32 or q8) of a type weight mapped
 * from host memory, as a session maps it, against up to `rows` f32 rows;
 * inputs from sin/cos at the given steps. */
typedef struct mm_fix {
    gt_backend *b;
    gt_buffer *bw, *bx, *bo;
    float *wf, *x;
    char *wq;
    gt_tensor w;
    int k, n_out;
} mm_fix;

static void mm_open(mm_fix *f, gt_type type, const char *act, int k, int n_out, int rows,
                    double w_step, double x_step)
{
    *f = (mm_fix){.k = k, .n_out = n_out};
    setenv("GT_CPU_ACT", act, 1);
    f->b = open_be("cpu", 2, 0, 0);
    unsetenv("GT_CPU_ACT");
    char want[16];
    snprintf(want, sizeof want, "act=%s", act);
    ck_assert_msg(strstr(f->b->info.extra, want), "%s", f->b->info.extra);
    const gt_backend_iface *bi = f->b->iface;
    const size_t wrow = gt_row_size(type, k);
    f->wf = malloc(sizeof(float) * (size_t)k * n_out);
    f->x = malloc(sizeof(float) * (size_t)k * rows);
    f->wq = malloc(wrow * (size_t)n_out);
    ck_assert(f->wf && f->x && f->wq);
    for (int i = 0; i < k * n_out; i++)
        f->wf[i] = (float)sin(i * w_step) * 0.5f;
    for (int i = 0; i < k * rows; i++)
        f->x[i] = (float)cos(i * x_step);
    for (int r = 0; r < n_out; r++)
        gt_quantize_row(type, f->wf + (size_t)r * k, f->wq + (size_t)r * wrow, k);
    gt_err err = {{0}};
    ck_assert_msg(bi->buffer_from_host(f->b, f->wq, wrow * (size_t)n_out, &f->bw, &err) == 0 &&
                      bi->buffer_alloc(f->b, sizeof(float) * (size_t)k * rows, &f->bx, &err) == 0 &&
                      bi->buffer_alloc(f->b, sizeof(float) * (size_t)n_out * rows, &f->bo, &err) == 0 &&
                      bi->upload(f->bx, 0, f->x, sizeof(float) * (size_t)k * rows, &err) == 0,
                  "%s", err.msg);
    f->w = (gt_tensor){.name = "w", .type = type, .ne = {k, n_out}, .buf = f->bw};
}

/* Input rows [at, at + rows) through the MUL_MAT; their outputs into dst. */
static void mm_run(mm_fix *f, int at, int rows, float *dst)
{
    const gt_backend_iface *bi = f->b->iface;
    gt_tensor xt = {.name = "x", .type = GT_TYPE_F32, .ne = {f->k, rows}, .buf = f->bx,
                    .offset = sizeof(float) * (size_t)f->k * (size_t)at};
    gt_tensor t = {.name = "t", .type = GT_TYPE_F32, .ne = {f->n_out, rows}, .buf = f->bo,
                   .op = GT_OP_MUL_MAT, .src = {&f->w, &xt}};
    gt_tensor *node = &t;
    const gt_graph g = {&node, 1};
    gt_err err = {{0}};
    ck_assert_msg(bi->compute(f->b, &g, &err) == 0, "%s", err.msg);
    ck_assert(bi->download(f->bo, 0, dst, sizeof(float) * (size_t)f->n_out * rows, &err) == 0);
}

static void mm_close(mm_fix *f)
{
    const gt_backend_iface *bi = f->b->iface;
    bi->buffer_free(f->bw);
    bi->buffer_free(f->bx);
    bi->buffer_free(f->bo);
    free(f->wf), free(f->x), free(f->wq);
    gt_backend_close(f->b);
}

/* The cpu backend's decode of several sequences (MUL_MAT of 2..15 rows,
 * under the BLAS threshold) gives each row the same bytes as a MUL_MAT of
 * that row alone, for Q8_0 (four rows share each weight read: fdot4, or
 * with act = "q8" the packed panels) and F32 weights. */
static void rows_alone(gt_type type, const char *act)
{
    enum { K = 256, N_OUT = 96, ROWS = 7 };
    mm_fix f;
    mm_open(&f, type, act, K, N_OUT, ROWS, 0.37, 0.11);
    float all[N_OUT * ROWS], one[N_OUT];
    mm_run(&f, 0, ROWS, all);
    for (int at = 0; at < ROWS; at++) {
        mm_run(&f, at, 1, one);
        ck_assert_msg(memcmp(one, all + (size_t)at * N_OUT, sizeof one) == 0,
                      "%s, act=%s: row %d of %d differs from the row alone", gt_type_name(type),
                      act, at, ROWS);
    }
    mm_close(&f);
}

START_TEST(cpu_rows_alone)
{
    rows_alone(GT_TYPE_Q8_0, "f32");
    rows_alone(GT_TYPE_F32, "f32");
    rows_alone(GT_TYPE_Q4_1, "f32");
    const gt_type q8_types[] = {GT_TYPE_Q8_0, GT_TYPE_Q4_0, GT_TYPE_Q4_1,
                                GT_TYPE_Q5_0, GT_TYPE_Q4_K, GT_TYPE_Q6_K};
    for (int i = 0; i < 6; i++)
        rows_alone(q8_types[i], "q8");
}
END_TEST

/* SILU_MUL and GELU_MUL split the batch's elements over the threads as one
 * flat range, so where a thread's range ends moves with the number of
 * rows: an element must get the bytes it gets alone whatever its place
 * (every ISA this CPU has; the rows are 172 wide, no multiple of 8 or 16,
 * 2 threads). AVX2's scalar expf tail broke this once: serve --parallel's
 * answers differed from serial ones. */
/* op over rows [r0, r0 + rows) of the n-wide inputs in ba and bb; into dst. */
static void ew_run(gt_backend *be, gt_op op, gt_buffer *ba, gt_buffer *bb, gt_buffer *bo, int n,
                   int r0, int rows, float *dst)
{
    const gt_backend_iface *bi = be->iface;
    const size_t off = sizeof(float) * (size_t)n * (size_t)r0;
    gt_tensor ta = {.name = "a", .type = GT_TYPE_F32, .ne = {n, rows}, .buf = ba, .offset = off};
    gt_tensor tb = {.name = "b", .type = GT_TYPE_F32, .ne = {n, rows}, .buf = bb, .offset = off};
    gt_tensor t = {.name = "t", .type = GT_TYPE_F32, .ne = {n, rows}, .buf = bo, .op = op,
                   .src = {&ta, &tb}};
    gt_tensor *node = &t;
    const gt_graph g = {&node, 1};
    gt_err err = {{0}};
    ck_assert_msg(bi->compute(be, &g, &err) == 0, "%s", err.msg);
    ck_assert(bi->download(bo, 0, dst, sizeof(float) * (size_t)n * (size_t)rows, &err) == 0);
}

START_TEST(cpu_elementwise_rows_alone)
{
    enum { N = 172, ROWS = 3 };
    const char *isas[] = {"scalar", "avx2", "avx512"};
    const gt_op ops[] = {GT_OP_SILU_MUL, GT_OP_GELU_MUL};
    static float a[N * ROWS], b[N * ROWS], all[N * ROWS], one[N];
    for (int i = 0; i < N * ROWS; i++) {
        a[i] = (float)sin(i * 0.37) * 4.0f;
        b[i] = (float)cos(i * 0.11);
    }
    for (int i = 0; i < 3; i++) {
        setenv("GT_CPU_ISA", isas[i], 1);
        gt_backend *be = NULL;
        gt_err err = {{0}};
        const gt_backend_config cfg = {.n_threads = 2};
        const int rc = gt_backend_open("cpu", &cfg, &be, &err);
        unsetenv("GT_CPU_ISA");
        if (rc != 0) {
            ck_assert_msg(strstr(err.msg, "lacks") || strstr(err.msg, "not compiled"), "%s", err.msg);
            printf("SKIP elementwise %s: %s\n", isas[i], err.msg);
            continue;
        }
        const gt_backend_iface *bi = be->iface;
        gt_buffer *ba, *bb, *bo;
        ck_assert(bi->buffer_alloc(be, sizeof a, &ba, &err) == 0 &&
                  bi->buffer_alloc(be, sizeof b, &bb, &err) == 0 &&
                  bi->buffer_alloc(be, sizeof all, &bo, &err) == 0 &&
                  bi->upload(ba, 0, a, sizeof a, &err) == 0 && bi->upload(bb, 0, b, sizeof b, &err) == 0);
        for (int o = 0; o < 2; o++) {
            ew_run(be, ops[o], ba, bb, bo, N, 0, ROWS, all);
            for (int at = 0; at < ROWS; at++) {
                ew_run(be, ops[o], ba, bb, bo, N, at, 1, one);
                ck_assert_msg(memcmp(one, all + (size_t)at * N, sizeof one) == 0,
                              "%s %s: row %d of %d differs from the row alone", isas[i],
                              gt_op_name(ops[o]), at, ROWS);
            }
        }
        bi->buffer_free(ba), bi->buffer_free(bb), bi->buffer_free(bo);
        gt_backend_close(be);
    }
}
END_TEST

/* With act=q8, a Q4_0 or Q8_0 weight mapped from host is repacked once for
 * the few-row products (cpu_packed.c), its mapped pages handed back, and
 * the integer GEMM (blas_min_batch rows and more) then repacks from that
 * copy: its results must be the bytes it gives from the weight itself. */
static void gemm_from_packed(gt_type type)
{
    enum { K = 256, N_OUT = 96, ROWS = 20 };
    mm_fix f;
    mm_open(&f, type, "q8", K, N_OUT, ROWS, 0.29, 0.13);
    static float first[N_OUT * ROWS], again[N_OUT * ROWS], two[N_OUT * 2];
    mm_run(&f, 0, ROWS, first); /* the GEMM from the weight */
    mm_run(&f, 0, 2, two);      /* the packing */
    mm_run(&f, 0, ROWS, again); /* the GEMM from the copy */
    ck_assert_msg(memcmp(first, again, sizeof first) == 0,
                  "%s: the integer GEMM from the packed copy differs from the weight's own",
                  gt_type_name(type));
    mm_close(&f);
}

START_TEST(cpu_gemm_from_packed)
{
    gemm_from_packed(GT_TYPE_Q4_0);
    gemm_from_packed(GT_TYPE_Q5_0);
    gemm_from_packed(GT_TYPE_Q8_0);
}
END_TEST

/* The packed few-row products (cpu_packed.c: Q4_0, Q5_0, Q8_0 weights
 * mapped from host, act=q8) on every ISA this CPU has, against the
 * dequantized weights dotted with the f32 inputs in double. The only
 * rounding beyond float sums is the activations' 8-bit quantization:
 * pooled NMSE ~3e-5 (step^2/12 of the signal, as test_cpu's igemm case);
 * a wrong nibble, fifth bit, scale or offset gives >= 1e-2. Above 1e-7
 * shows the 8-bit path ran, not the f32 one. */
START_TEST(cpu_packed_matches_dequantized)
{
    enum { K = 256, N_OUT = 21, ROWS = 5 };
    const char *isas[] = {"scalar", "avx2", "avx512"};
    const gt_type types[] = {GT_TYPE_Q4_0, GT_TYPE_Q5_0, GT_TYPE_Q8_0};
    for (int i = 0; i < 3; i++) {
        setenv("GT_CPU_ISA", isas[i], 1);
        gt_backend *probe = NULL;
        gt_err err = {{0}};
        const gt_backend_config cfg = {0};
        if (gt_backend_open("cpu", &cfg, &probe, &err) != 0) {
            unsetenv("GT_CPU_ISA");
            ck_assert_msg(strstr(err.msg, "lacks") || strstr(err.msg, "not compiled"), "%s", err.msg);
            printf("SKIP packed %s: %s\n", isas[i], err.msg);
            continue;
        }
        gt_backend_close(probe);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            mm_fix f;
            mm_open(&f, types[t], "q8", K, N_OUT, ROWS, 0.37, 0.11);
            ck_assert_msg(strstr(f.b->info.extra, isas[i]), "%s", f.b->info.extra);
            static float got[N_OUT * ROWS], wd[K * N_OUT];
            mm_run(&f, 0, ROWS, got);
            const size_t wrow = gt_row_size(types[t], K);
            for (int r = 0; r < N_OUT; r++)
                gt_dequantize_row(types[t], f.wq + (size_t)r * wrow, wd + (size_t)r * K, K);
            double se = 0.0, sr = 0.0;
            for (int i2 = 0; i2 < ROWS; i2++)
                for (int r = 0; r < N_OUT; r++) {
                    double want = 0.0;
                    for (int e = 0; e < K; e++)
                        want += (double)wd[r * K + e] * f.x[i2 * K + e];
                    const double d = got[i2 * N_OUT + r] - want;
                    se += d * d;
                    sr += want * want;
                }
            printf("packed %s %s: pooled NMSE %.2e\n", isas[i], gt_type_name(types[t]), se / sr);
            ck_assert_msg(se / sr <= 1e-4 && se / sr > 1e-7, "packed %s %s: NMSE %.3e", isas[i],
                          gt_type_name(types[t]), se / sr);
            mm_close(&f);
        }
        unsetenv("GT_CPU_ISA");
    }
}
END_TEST

/* A setting fault on backend: clean under the setting `ok`, wrong under
 * `bad` (threads, n_batch, n_parallel), against the reference. */
static void check_fault(const char *fault, const char *backend, const int ok[3], const int bad[3])
{
    setenv("GT_FAULT", fault, 1);
    setenv("GT_FAULT_BACKEND", backend, 1);
    gt_model *m = synth_load("tiny");
    const size_t n = (size_t)gt_model_hparams(m)->n_vocab * N_ROWS;
    gt_backend *r = open_be("reference", 0, 0, 0);
    float *want = run_alone(m, r, 512);
    const int *set[2] = {ok, bad};
    for (int k = 0; k < 2; k++) {
        gt_backend *b = open_be(backend, set[k][0], set[k][1], set[k][2]);
        float *got = run_alone(m, b, 0);
        const double d = max_diff(want, got, n);
        printf("%s on %s, threads %d n_batch %d n_parallel %d: max |diff| %.3g\n", fault, backend,
               set[k][0], set[k][1], set[k][2], d);
        if (k == 0)
            ck_assert_msg(d <= 1e-4, "%s on %s: wrong outside its setting (%g)", fault, backend, d);
        else
            ck_assert_msg(d > 1e-2, "%s on %s: not visible under its setting (%g)", fault, backend,
                          d);
        free(got);
        gt_backend_close(b);
    }
    free(want);
    gt_backend_close(r);
    gt_model_free(m);
}

static const char *fault_backend(int i) { return i == 0 ? "cpu" : "opencl"; }

static bool backend_usable(int i)
{
    if (i == 1 && !opencl_ok) {
        printf("SKIP opencl half: %s\n", opencl_why);
        return false;
    }
    return true;
}

START_TEST(fault_batch_split)
{
    if (backend_usable(_i))
        check_fault("batch-split@0", fault_backend(_i), (const int[3]){1, 512, 1},
                    (const int[3]){1, 7, 1});
}
END_TEST

START_TEST(fault_seq_bleed)
{
    if (backend_usable(_i))
        check_fault("seq-bleed@0", fault_backend(_i), (const int[3]){1, 512, 2},
                    (const int[3]){1, 512, 4});
}
END_TEST

START_TEST(fault_thread_race)
{
    if (backend_usable(_i))
        check_fault("thread-race", fault_backend(_i), (const int[3]){1, 512, 1},
                    (const int[3]){2, 512, 1});
}
END_TEST

/* Whether OpenCL opens (asked in a child: testutil.h). */
static void probe_opencl(void) { opencl_ok = gt_test_opencl_opens(opencl_why, sizeof opencl_why); }

int main(void)
{
    probe_opencl();
    Suite *s = suite_create("batching");
    TCase *tc = tcase_create("batching");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, reference_bit_identical);
    tcase_add_test(tc, cpu_within_tolerance);
    tcase_add_test(tc, cpu_rows_alone);
    tcase_add_test(tc, cpu_gemm_from_packed);
    tcase_add_test(tc, cpu_packed_matches_dequantized);
    tcase_add_test(tc, cpu_elementwise_rows_alone);
    gt_test_add_if(tc, opencl_within_tolerance, opencl_ok, opencl_why);
    tcase_add_loop_test(tc, fault_batch_split, 0, 2);
    tcase_add_loop_test(tc, fault_seq_bleed, 0, 2);
    tcase_add_loop_test(tc, fault_thread_race, 0, 2);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
