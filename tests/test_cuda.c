/* test_cuda.c: the CUDA backend, reached only through the registry (this
 * binary links libgtrt, never CUDA).
 *
 * Three parts:
 *   profile   the driver-profile parser and checker (cuda_constraints.c is
 *             plain C and is compiled into this test directly), everywhere
 *   registry  the no-device path: without a driver or a GPU the backend is
 *             listed as unavailable, or its probe returns 0 devices with
 *             the CUDA error, and opening it fails with that same reason
 *   device    only where a CUDA device is present: every op and weight type
 *             against the reference backend (NMSE; GET_ROWS and SCALE
 *             exact; ATTENTION with sliding windows), greedy stories260K
 *             equal to the reference, llama.cpp quants, Gemma 3 270M, and
 *             1,000 sessions that must leak no device memory
 * CUDA cannot be used in a process forked after CUDA was initialized, and
 * Check forks per test, so main() asks about devices in a throw-away child
 * and this process never calls CUDA itself. */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "testutil.h"

#include "../backends/cuda/cuda_constraints.c"

/* --- profile ------------------------------------------------------------- */

static gt_cuda_profile parse_ok(const char *s)
{
    gt_cuda_profile p;
    gt_err err = {{0}};
    ck_assert_msg(gt_cuda_profile_parse(s, &p, &err) == 0, "'%s': %s", s, err.msg);
    return p;
}

static void parse_bad(const char *s, const char *want)
{
    gt_cuda_profile p;
    gt_err err = {{0}};
    ck_assert_msg(gt_cuda_profile_parse(s, &p, &err) != 0, "'%s' parsed", s);
    ck_assert_msg(strstr(err.msg, want), "'%s': message '%s' lacks '%s'", s, err.msg, want);
}

START_TEST(profile_parse)
{
    gt_cuda_profile p = parse_ok("driver>=12.4, compute_capability>=8.0");
    ck_assert_int_eq(p.n, 2);
    ck_assert_int_eq(p.c[0].key, GT_CUDA_KEY_DRIVER);
    ck_assert_int_eq(p.c[0].cmp, GT_CUDA_GE);
    ck_assert_int_eq(p.c[0].want.v[0], 12);
    ck_assert_int_eq(p.c[0].want.v[1], 4);
    ck_assert_int_eq(p.c[1].key, GT_CUDA_KEY_CC);
    ck_assert_int_eq(p.c[1].want.v[0], 8);
    ck_assert_int_eq(p.gemm, GT_CUDA_GEMM_F32);

    p = parse_ok("  CC == 9.0 ,runtime<13.1.2 , gemm=tf32 ");
    ck_assert_int_eq(p.n, 2);
    ck_assert_int_eq(p.c[0].key, GT_CUDA_KEY_CC);
    ck_assert_int_eq(p.c[0].cmp, GT_CUDA_EQ);
    ck_assert_int_eq(p.c[1].key, GT_CUDA_KEY_RUNTIME);
    ck_assert_int_eq(p.c[1].cmp, GT_CUDA_LT);
    ck_assert_int_eq(p.c[1].want.v[2], 2);
    ck_assert_int_eq(p.gemm, GT_CUDA_GEMM_TF32);

    p = parse_ok("driver=12,driver!=12.1,driver>11,driver<=13");
    ck_assert_int_eq(p.n, 4);
    ck_assert_int_eq(p.c[0].cmp, GT_CUDA_EQ);
    ck_assert_int_eq(p.c[1].cmp, GT_CUDA_NE);
    ck_assert_int_eq(p.c[2].cmp, GT_CUDA_GT);
    ck_assert_int_eq(p.c[3].cmp, GT_CUDA_LE);
    ck_assert_int_eq(p.c[0].want.v[1], 0);
    ck_assert_int_eq(parse_ok(NULL).n, 0);
    ck_assert_int_eq(parse_ok("").n, 0);
    ck_assert_int_eq(parse_ok("   ").n, 0);
    ck_assert_int_eq(parse_ok("gemm=f32").n, 0);
    ck_assert_int_eq(parse_ok("").graphs, 0);
    ck_assert_int_eq(parse_ok("graphs=on").graphs, 1);
    ck_assert_int_eq(parse_ok("graphs=on, graphs=off").graphs, 0);
}
END_TEST

START_TEST(profile_parse_errors)
{
    parse_bad("drvier>=12.4", "unknown key 'drvier'");
    parse_bad("driver12.4", "expected an operator");
    parse_bad("driver>=12.x", "'12.x' is not a version");
    parse_bad("driver>=", "'' is not a version");
    parse_bad("driver>=1.2.3.4", "not a version");
    parse_bad("driver>=-1", "not a version");
    parse_bad("driver>=12.4,", "empty item");
    parse_bad(",driver>=12.4", "empty item");
    parse_bad("driver>=12.4,,cc>=8", "empty item");
    parse_bad("gemm=fp16", "gemm is f32 or tf32");
    parse_bad("gemm>=f32", "gemm=f32 or gemm=tf32");
    parse_bad("graphs=yes", "graphs=on or graphs=off");
    parse_bad("driver=>12", "not a version");
    parse_bad("cc>=8.0 9", "not a version");
    parse_bad("cc>=1,cc>=1,cc>=1,cc>=1,cc>=1,cc>=1,cc>=1,cc>=1,cc>=1", "more than 8");
    /* The whole profile is quoted so a matrix author finds it. */
    parse_bad("driver>=12.4,cc>=x", "cuda driver profile 'driver>=12.4,cc>=x'");
}
END_TEST

START_TEST(profile_check)
{
    char buf[32];
    const gt_cuda_found f = {gt_cuda_version_from_int(12020), gt_cuda_version_from_int(13000),
                             {{7, 5, 0}}};
    ck_assert_str_eq(gt_cuda_version_str(f.driver, buf, sizeof buf), "12.2");
    ck_assert_str_eq(gt_cuda_version_str(gt_cuda_version_from_int(12040), buf, sizeof buf), "12.4");
    ck_assert_str_eq(gt_cuda_version_str(f.runtime, buf, sizeof buf), "13.0");

    gt_err err = {{0}};
    gt_cuda_profile p = parse_ok("driver>=12.4, compute_capability>=8.0");
    ck_assert_int_ne(gt_cuda_profile_check(&p, &f, &err), 0);
    ck_assert_msg(strstr(err.msg, "driver 12.2 found, >=12.4 required"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "compute_capability 7.5 found, >=8.0 required"), "%s", err.msg);

    const char *ok[] = {"", "driver>=12.2", "driver>=12", "driver<12.3", "driver==12.2.0",
                        "driver!=12.3", "runtime>=13.0,cc>=7.5", "cc<8", "cc>7", "runtime<=13"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        p = parse_ok(ok[i]);
        ck_assert_msg(gt_cuda_profile_check(&p, &f, &err) == 0, "'%s': %s", ok[i], err.msg);
    }
    const char *bad[] = {"driver>12.2", "driver<12.2", "driver==12", "runtime!=13.0",
                         "cc>=7.6", "cc>7.5", "runtime>=13.0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = parse_ok(bad[i]);
        ck_assert_msg(gt_cuda_profile_check(&p, &f, &err) != 0, "'%s' held", bad[i]);
        ck_assert_msg(strstr(err.msg, "found") && strstr(err.msg, "required"), "%s", err.msg);
    }
}
END_TEST

/* --- registry: the no-device path ------------------------------------------ */

START_TEST(registry_no_device)
{
    const gt_backend_entry *e = gt_backend_find("cuda");
    ck_assert_msg(e != NULL, "cuda is not listed in the registry");
    gt_err err = {{0}};
    gt_backend *b = NULL;
    if (!e->reg) {
        /* Not built, or it cannot load here (no cudart): listed with why. */
        ck_assert_msg(e->why[0], "unavailable without a reason");
        ck_assert_int_ne(gt_backend_open("cuda", NULL, &b, &err), 0);
        ck_assert_msg(strstr(err.msg, e->why), "open says '%s', registry '%s'", err.msg, e->why);
        printf("cuda: not available: %s\n", e->why);
        return;
    }
    ck_assert_str_eq(e->reg->name, "cuda");
    gt_device_info devs[4];
    const int n = e->reg->probe(devs, 4, NULL, &err);
    if (n > 0) {
        for (int i = 0; i < n && i < 4; i++) {
            ck_assert_str_eq(devs[i].backend, "cuda");
            ck_assert_msg(devs[i].name[0] && devs[i].memory > 0 && devs[i].driver_version[0],
                          "device %d is described badly", i);
            ck_assert_msg(strstr(devs[i].extra, "compute capability"), "%s", devs[i].extra);
            printf("cuda device %d: %s, %llu MiB, driver %s, %s\n", i, devs[i].name,
                   (unsigned long long)(devs[i].memory >> 20), devs[i].driver_version,
                   devs[i].extra);
        }
        return;
    }
    /* No device: the reason names the CUDA call and error, and open says it too. */
    printf("cuda: no device: %s\n", err.msg);
    ck_assert_msg(strstr(err.msg, "cudaGetDeviceCount") && strstr(err.msg, "error") &&
                      strstr(err.msg, "cudaError"),
                  "probe reason lacks the CUDA error: '%s'", err.msg);
    gt_err oerr = {{0}};
    ck_assert_int_ne(gt_backend_open("cuda", NULL, &b, &oerr), 0);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(oerr.msg, err.msg), "open says '%s', probe '%s'", oerr.msg, err.msg);
    /* A bad profile is a configuration error whatever the machine has. */
    gt_backend_config cfg = {.driver = "drvier>=12.4"};
    ck_assert_int_ne(gt_backend_open("cuda", &cfg, &b, &oerr), 0);
    ck_assert_msg(strstr(oerr.msg, "unknown key 'drvier'"), "%s", oerr.msg);
    ck_assert_int_eq(e->reg->probe(devs, 4, "drvier>=12.4", &err), 0);
    ck_assert_msg(strstr(err.msg, "unknown key"), "%s", err.msg);
}
END_TEST

/* Asks about CUDA devices in a child process (see the top comment). */
static int devices_in_child(char *why, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0)
        return snprintf(why, cap, "pipe failed"), 0;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        char msg[1024] = "";
        int n = 0;
        const gt_backend_entry *e = gt_backend_find("cuda");
        if (!e || !e->reg) {
            snprintf(msg, sizeof msg, "%s", e ? e->why : "not in the registry");
        } else {
            gt_device_info d[1];
            gt_err err = {{0}};
            n = e->reg->probe(d, 1, NULL, &err);
            snprintf(msg, sizeof msg, "%s", n > 0 ? d[0].name : err.msg);
        }
        if (write(fd[1], &n, sizeof n) != (ssize_t)sizeof n ||
            write(fd[1], msg, strlen(msg) + 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(fd[1]);
    int n = 0;
    why[0] = '\0';
    if (pid < 0 || read(fd[0], &n, sizeof n) != (ssize_t)sizeof n) {
        snprintf(why, cap, "the probe child failed");
        n = 0;
    } else {
        ssize_t got = read(fd[0], why, cap - 1);
        why[got > 0 ? got : 0] = '\0';
    }
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return n;
}

/* --- device: every op against the reference ------------------------------- */

#define ARENA (32u << 20)

/* The same tensors at the same offsets in a reference and a cuda buffer. */
typedef struct pair {
    gt_backend *b[2]; /* 0 reference, 1 cuda */
    gt_buffer *buf[2];
    gt_tensor t[2][16];
    int n;
    size_t used;
} pair;

static void pair_open(pair *p, const char *profile)
{
    memset(p, 0, sizeof *p);
    gt_err err = {{0}};
    gt_backend_config cfg = {.driver = profile};
    ck_assert_msg(gt_backend_open("reference", NULL, &p->b[0], &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_backend_open("cuda", &cfg, &p->b[1], &err) == 0, "%s", err.msg);
    for (int s = 0; s < 2; s++)
        ck_assert_msg(p->b[s]->iface->buffer_alloc(p->b[s], ARENA, &p->buf[s], &err) == 0, "%s",
                      err.msg);
}

static void pair_close(pair *p)
{
    for (int s = 0; s < 2; s++) {
        p->b[s]->iface->buffer_free(p->buf[s]);
        gt_backend_close(p->b[s]);
    }
}

/* A new tensor, misalign bytes past a 256-byte boundary. */
static int tensor(pair *p, const char *name, gt_type type, int64_t ne0, int64_t ne1, size_t misalign)
{
    const size_t off = ((p->used + 255) & ~(size_t)255) + misalign;
    const size_t bytes = gt_row_size(type, ne0) * (size_t)ne1;
    ck_assert(bytes > 0 && off + bytes <= ARENA && p->n < 16);
    p->used = off + bytes;
    const int i = p->n++;
    for (int s = 0; s < 2; s++) {
        gt_tensor *t = &p->t[s][i];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->type = type;
        t->ne[0] = ne0;
        t->ne[1] = ne1;
        t->buf = p->buf[s];
        t->offset = off;
    }
    return i;
}

/* A tensor sharing another's storage, for in-place nodes. */
static int alias(pair *p, int of, const char *name)
{
    ck_assert(p->n < 16);
    const int i = p->n++;
    for (int s = 0; s < 2; s++) {
        p->t[s][i] = p->t[s][of];
        snprintf(p->t[s][i].name, sizeof p->t[s][i].name, "%s", name);
    }
    return i;
}

static void node(pair *p, int i, gt_op op, int a, int b, int c)
{
    for (int s = 0; s < 2; s++) {
        gt_tensor *t = &p->t[s][i];
        t->op = op;
        t->src[0] = a >= 0 ? &p->t[s][a] : NULL;
        t->src[1] = b >= 0 ? &p->t[s][b] : NULL;
        t->src[2] = c >= 0 ? &p->t[s][c] : NULL;
    }
}

static void set(pair *p, int i, const void *data)
{
    gt_err err = {{0}};
    for (int s = 0; s < 2; s++)
        ck_assert_msg(p->b[s]->iface->upload(p->buf[s], p->t[s][i].offset, data,
                                             gt_tensor_bytes(&p->t[s][i]), &err) == 0,
                      "%s", err.msg);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15u;
static float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

static void fill(pair *p, int i, float scale)
{
    const gt_tensor *t = &p->t[0][i];
    const int64_t n = t->ne[0] * t->ne[1];
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k++)
        x[k] = scale * frand();
    if (t->type == GT_TYPE_F32) {
        set(p, i, x);
    } else {
        char *q = malloc(gt_tensor_bytes(t));
        for (int64_t r = 0; r < t->ne[1]; r++)
            gt_quantize_row(t->type, x + r * t->ne[0], q + r * gt_tensor_row_bytes(t), t->ne[0]);
        set(p, i, q);
        free(q);
    }
    free(x);
}

/* Runs nodes on both sides; the reference must succeed, cuda's status is returned. */
static int run(pair *p, const int *idx, int n, gt_err *err)
{
    gt_tensor *nodes[2][16];
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < n; k++)
            nodes[s][k] = &p->t[s][idx[k]];
    gt_graph g0 = {nodes[0], n}, g1 = {nodes[1], n};
    gt_err rerr = {{0}};
    ck_assert_msg(gt_backend_compute(p->b[0], &g0, &rerr) == 0, "reference: %s", rerr.msg);
    return gt_backend_compute(p->b[1], &g1, err);
}

static void run_ok(pair *p, const int *idx, int n)
{
    gt_err err = {{0}};
    ck_assert_msg(run(p, idx, n, &err) == 0, "cuda: %s", err.msg);
}

/* NMSE of cuda's tensor i against the reference's (F32). */
static double nmse(pair *p, int i)
{
    const gt_tensor *t = &p->t[0][i];
    const size_t n = (size_t)(t->ne[0] * t->ne[1]);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    gt_err err = {{0}};
    ck_assert(p->b[0]->iface->download(p->buf[0], t->offset, a, n * sizeof *a, &err) == 0);
    ck_assert_msg(p->b[1]->iface->download(p->buf[1], t->offset, b, n * sizeof *b, &err) == 0,
                  "%s", err.msg);
    double num = 0, den = 0;
    for (size_t k = 0; k < n; k++) {
        num += ((double)b[k] - a[k]) * ((double)b[k] - a[k]);
        den += (double)a[k] * a[k];
    }
    free(a);
    free(b);
    return den > 0 ? num / den : num;
}

static void expect(pair *p, int i, double limit, const char *what)
{
    const double e = nmse(p, i);
    printf("  %-44s nmse %.3g\n", what, e);
    ck_assert_msg(e <= limit, "%s: NMSE %.3g > %.3g", what, e, limit);
}

static const gt_type WTYPES[] = {GT_TYPE_F32,  GT_TYPE_F16,  GT_TYPE_BF16,   GT_TYPE_Q8_0,
                                 GT_TYPE_Q4_0, GT_TYPE_Q4_1, GT_TYPE_Q5_0,   GT_TYPE_Q5_1,
                                 GT_TYPE_IQ4_NL, GT_TYPE_Q2_K, GT_TYPE_Q3_K, GT_TYPE_Q4_K,
                                 GT_TYPE_Q5_K, GT_TYPE_Q6_K};
#define N_WTYPES (int)(sizeof WTYPES / sizeof WTYPES[0])

/* K rounded up to a whole number of the type's blocks (256 for K-quants). */
static int row_for(gt_type type, int K)
{
    const int bs = gt_type_info(type)->block_size;
    return (K + bs - 1) / bs * bs;
}

START_TEST(op_get_rows)
{
    const int32_t ids[7] = {0, 49, 3, 3, 17, 25, 1};
    for (int w = 0; w < N_WTYPES; w++) {
        pair p;
        pair_open(&p, NULL);
        const int K = row_for(WTYPES[w], 96);
        const int tab = tensor(&p, "table", WTYPES[w], K, 50, 0);
        const int id = tensor(&p, "ids", GT_TYPE_I32, 1, 7, 0);
        const int out = tensor(&p, "rows", GT_TYPE_F32, K, 7, 0);
        fill(&p, tab, 1.0f);
        set(&p, id, ids);
        node(&p, out, GT_OP_GET_ROWS, tab, id, -1);
        run_ok(&p, &out, 1);
        char what[64];
        snprintf(what, sizeof what, "GET_ROWS %s (exact)", gt_type_name(WTYPES[w]));
        expect(&p, out, 0.0, what);
        pair_close(&p);
    }
}
END_TEST

START_TEST(op_mul_mat)
{
    const int shapes[][2] = {{256, 130}, {64, 7}, {576, 33}};
    const int ntoks[] = {1, 2, 8, 9, 40};
    for (int w = 0; w < N_WTYPES; w++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (size_t nt = 0; nt < sizeof ntoks / sizeof ntoks[0]; nt++)
                for (int mis = 0; mis < 2; mis++) {
                    if (mis && sh)
                        continue; /* scalar-load path: one shape is enough */
                    const int K = row_for(WTYPES[w], shapes[sh][0]), N = shapes[sh][1];
                    const int T = ntoks[nt];
                    pair p;
                    pair_open(&p, NULL);
                    const int wt = tensor(&p, "w", WTYPES[w], K, N, 0);
                    const int x = tensor(&p, "x", GT_TYPE_F32, K, T, mis ? 4 : 0);
                    const int y = tensor(&p, "y", GT_TYPE_F32, N, T, 0);
                    fill(&p, wt, 0.5f);
                    fill(&p, x, 1.0f);
                    node(&p, y, GT_OP_MUL_MAT, wt, x, -1);
                    run_ok(&p, &y, 1);
                    char what[80];
                    snprintf(what, sizeof what, "MUL_MAT %s [%d,%d] x %d rows%s",
                             gt_type_name(WTYPES[w]), K, N, T, mis ? " (unaligned x)" : "");
                    expect(&p, y, 5e-4, what);
                    pair_close(&p);
                }
    /* TF32 prefill stays within the quantized tolerance. */
    pair p;
    pair_open(&p, "gemm=tf32");
    ck_assert_msg(strstr(p.b[1]->info.extra, "tf32"), "%s", p.b[1]->info.extra);
    const int wt = tensor(&p, "w", GT_TYPE_Q8_0, 576, 200, 0);
    const int x = tensor(&p, "x", GT_TYPE_F32, 576, 64, 0);
    const int y = tensor(&p, "y", GT_TYPE_F32, 200, 64, 0);
    fill(&p, wt, 0.5f);
    fill(&p, x, 1.0f);
    node(&p, y, GT_OP_MUL_MAT, wt, x, -1);
    run_ok(&p, &y, 1);
    expect(&p, y, 5e-4, "MUL_MAT q8_0 [576,200] x 64 rows, gemm=tf32");
    pair_close(&p);
}
END_TEST

START_TEST(op_elementwise)
{
    for (int inplace = 0; inplace < 2; inplace++) {
        pair p;
        pair_open(&p, NULL);
        const int a = tensor(&p, "a", GT_TYPE_F32, 300, 7, 0);
        const int b = tensor(&p, "b", GT_TYPE_F32, 300, 7, 0);
        const int wrow = tensor(&p, "w", GT_TYPE_F32, 300, 1, 0);
        const gt_op ops[] = {GT_OP_ADD,      GT_OP_MUL,      GT_OP_SILU_MUL,
                             GT_OP_RMS_NORM, GT_OP_GELU_MUL, GT_OP_SCALE};
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            fill(&p, a, 3.0f);
            fill(&p, b, 2.0f);
            fill(&p, wrow, 1.5f);
            const int t = inplace ? alias(&p, a, "t") : tensor(&p, "t", GT_TYPE_F32, 300, 7, 0);
            const bool one = ops[o] == GT_OP_RMS_NORM || ops[o] == GT_OP_SCALE;
            node(&p, t, ops[o], a, ops[o] == GT_OP_MUL ? wrow : one ? -1 : b, -1);
            /* eps for RMS_NORM; Gemma 3 270M's embedding scale sqrt(640) for SCALE */
            p.t[0][t].fparams[0] = p.t[1][t].fparams[0] = ops[o] == GT_OP_SCALE ? 25.298221f : 1e-5f;
            run_ok(&p, &t, 1);
            char what[64];
            snprintf(what, sizeof what, "%s%s%s", gt_op_name(ops[o]), inplace ? " in place" : "",
                     ops[o] == GT_OP_SCALE ? " (exact)" : "");
            expect(&p, t, ops[o] == GT_OP_SCALE ? 0.0 : 1e-6, what);
        }
        pair_close(&p);
    }
}
END_TEST

START_TEST(op_rope)
{
    for (int mode = 0; mode < 2; mode++)
        for (int partial = 0; partial < 2; partial++)
            for (int inplace = 0; inplace < 2; inplace++) {
                pair p;
                pair_open(&p, NULL);
                const int a = tensor(&p, "a", GT_TYPE_F32, 72, 3, 0); /* 4 heads of 16 + 8 */
                fill(&p, a, 1.0f);
                const int t = inplace ? alias(&p, a, "t") : tensor(&p, "t", GT_TYPE_F32, 72, 3, 0);
                node(&p, t, GT_OP_ROPE, a, -1, -1);
                const int32_t ip[6] = {4, 16, partial ? 8 : 16, 1000, mode, 0};
                for (int s = 0; s < 2; s++) {
                    memcpy(p.t[s][t].iparams, ip, sizeof ip);
                    p.t[s][t].fparams[0] = 10000.0f;
                }
                run_ok(&p, &t, 1);
                char what[64];
                snprintf(what, sizeof what, "ROPE mode %d rope_dim %d%s", mode, ip[2],
                         inplace ? " in place" : "");
                expect(&p, t, 1e-6, what);
                pair_close(&p);
            }
}
END_TEST

/* KV_STORE of new rows, then ATTENTION over them and the older rows, in one
 * graph; 605 visible rows cover several of the kernel's 512-row tiles.
 * Windows (Gemma 3's local layers): row i at cache row p = pos0 + i sees
 * rows max(0, p - w + 1)..p: w = 1 (itself only), w shorter than the
 * batch, a whole tile, a window that starts at 0 for the first rows and
 * not for the last, one longer than the context, and small pos0 (a ring
 * cache hands the node cache-relative rows). */
START_TEST(op_attention)
{
    const int hds[] = {8, 64, 192};
    const int cases[][3] = {/* pos0, n_tok, window */
                            {600, 5, 0},   {600, 5, 1}, {600, 5, 3},    {600, 5, 512},
                            {600, 5, 603}, {600, 5, 1000}, {3, 5, 4}, {0, 40, 16}};
    const int n_head = 8, n_kv = 2, n_ctx = 700;
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const int hd = hds[h], pos0 = cases[ci][0], n_tok = cases[ci][1];
            const int window = cases[ci][2];
            pair p;
            pair_open(&p, NULL);
            const int kc = tensor(&p, "cache_k", GT_TYPE_F32, n_kv * hd, n_ctx, 0);
            const int vc = tensor(&p, "cache_v", GT_TYPE_F32, n_kv * hd, n_ctx, 0);
            const int k = tensor(&p, "k", GT_TYPE_F32, n_kv * hd, n_tok, 0);
            const int v = tensor(&p, "v", GT_TYPE_F32, n_kv * hd, n_tok, 0);
            const int q = tensor(&p, "q", GT_TYPE_F32, n_head * hd, n_tok, 0);
            const int att = tensor(&p, "att", GT_TYPE_F32, n_head * hd, n_tok, 0);
            fill(&p, kc, 1.0f);
            fill(&p, vc, 1.0f);
            fill(&p, k, 1.0f);
            fill(&p, v, 1.0f);
            fill(&p, q, 2.0f);
            const int ks = alias(&p, kc, "k_store"), vs = alias(&p, vc, "v_store");
            for (int s = 0; s < 2; s++) {
                p.t[s][ks].offset += (size_t)pos0 * n_kv * hd * sizeof(float);
                p.t[s][vs].offset += (size_t)pos0 * n_kv * hd * sizeof(float);
                p.t[s][ks].ne[1] = p.t[s][vs].ne[1] = n_tok;
            }
            node(&p, ks, GT_OP_KV_STORE, k, kc, -1);
            node(&p, vs, GT_OP_KV_STORE, v, vc, -1);
            node(&p, att, GT_OP_ATTENTION, q, kc, vc);
            const int32_t ap[6] = {n_head, n_kv, hd, pos0, window, 0};
            for (int s = 0; s < 2; s++) {
                p.t[s][ks].iparams[0] = p.t[s][vs].iparams[0] = pos0;
                memcpy(p.t[s][att].iparams, ap, sizeof ap);
                p.t[s][att].fparams[0] = 1.0f / sqrtf((float)hd);
            }
            const int order[3] = {ks, vs, att};
            run_ok(&p, order, 3);
            char what[64];
            snprintf(what, sizeof what, "KV_STORE (head_dim %d)", hd);
            expect(&p, kc, 0.0, what);
            snprintf(what, sizeof what, "ATTENTION GQA 8/2, head_dim %d, %d+%d rows, window %d",
                     hd, pos0, n_tok, window);
            expect(&p, att, 1e-6, what);
            pair_close(&p);
        }
}
END_TEST

START_TEST(op_errors)
{
    pair p;
    pair_open(&p, NULL);
    const int tab = tensor(&p, "table", GT_TYPE_Q8_0, 64, 10, 0);
    const int id = tensor(&p, "ids", GT_TYPE_I32, 1, 3, 0);
    const int out = tensor(&p, "rows", GT_TYPE_F32, 64, 3, 0);
    fill(&p, tab, 1.0f);
    const int32_t bad[3] = {1, 10, 2};
    set(&p, id, bad);
    node(&p, out, GT_OP_GET_ROWS, tab, id, -1);
    gt_tensor *n1 = &p.t[1][out];
    gt_graph g = {&n1, 1};
    gt_err err = {{0}};
    ck_assert_int_ne(gt_backend_compute(p.b[1], &g, &err), 0);
    ck_assert_msg(strstr(err.msg, "id 10 outside table of 10 rows"), "%s", err.msg);
    const int32_t good[3] = {1, 9, 2}; /* the backend stays usable */
    set(&p, id, good);
    run_ok(&p, &out, 1);
    expect(&p, out, 0.0, "GET_ROWS after a bad id");

    /* A tensor in another backend's memory is refused, not dereferenced. */
    n1->src[0] = &p.t[0][tab];
    ck_assert_int_ne(gt_backend_compute(p.b[1], &g, &err), 0);
    ck_assert_msg(strstr(err.msg, "not in CUDA device memory"), "%s", err.msg);
    n1->src[0] = &p.t[1][tab];

    const int x = tensor(&p, "x", GT_TYPE_F32, 32, 2, 0);
    const int y = tensor(&p, "y", GT_TYPE_F32, 10, 2, 0);
    node(&p, y, GT_OP_MUL_MAT, tab, x, -1);
    n1 = &p.t[1][y];
    ck_assert_int_ne(gt_backend_compute(p.b[1], &g, &err), 0);
    ck_assert_msg(strstr(err.msg, "cannot give") && strstr(err.msg, "MUL_MAT"), "%s", err.msg);
    char why[128];
    ck_assert(!gt_backend_supports(p.b[1], GT_OP_MUL_MAT, GT_TYPE_I32, why, sizeof why));
    ck_assert(!gt_backend_supports(p.b[1], GT_OP_ADD, GT_TYPE_F16, why, sizeof why));
    ck_assert(gt_backend_supports(p.b[1], GT_OP_GET_ROWS, GT_TYPE_Q4_1, why, sizeof why));
    for (int w = 0; w < N_WTYPES; w++)
        for (int op = 0; op < 2; op++)
            ck_assert_msg(gt_backend_supports(p.b[1], op ? GT_OP_MUL_MAT : GT_OP_GET_ROWS, WTYPES[w],
                                              why, sizeof why),
                          "%s: %s", gt_type_name(WTYPES[w]), why);
    ck_assert(gt_backend_supports(p.b[1], GT_OP_GELU_MUL, GT_TYPE_F32, why, sizeof why));
    ck_assert(gt_backend_supports(p.b[1], GT_OP_SCALE, GT_TYPE_F32, why, sizeof why));
    /* Q8_K is activations only: refused, saying so. */
    ck_assert(!gt_backend_supports(p.b[1], GT_OP_MUL_MAT, GT_TYPE_Q8_K, why, sizeof why));
    ck_assert_msg(strstr(why, "activation-only"), "%s", why);
    pair_close(&p);
}
END_TEST

/* --- device: models ------------------------------------------------------------ */

static const char *GOLDEN_ZOO =
    "Zoo was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but she didn't want to play with it.";

typedef struct run_ {
    gt_model *m;
    gt_backend *b;
    gt_session *s;
    int n_vocab;
} run_;

static void open_run(run_ *r, const char *path, const char *backend, const char *profile)
{
    gt_err err = {{0}};
    gt_backend_config cfg = {.driver = profile};
    ck_assert_msg(gt_model_load(path, &r->m, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_backend_open(backend, &cfg, &r->b, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_session_new(r->m, r->b, NULL, &r->s, &err) == 0, "%s", err.msg);
    r->n_vocab = gt_model_hparams(r->m)->n_vocab;
}

static void close_run(run_ *r)
{
    gt_session_free(r->s);
    gt_backend_close(r->b);
    gt_model_free(r->m);
}

static int tokens_of(const gt_model *m, const char *text, int32_t *ids, int max)
{
    gt_err err = {{0}};
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    int n = gt_tokenize(tok, text, strlen(text), gt_tokenizer_adds_bos(tok), ids, max, &err);
    ck_assert_msg(n > 0 && n <= max, "tokenize: %s", err.msg);
    return n;
}

/* Greedy ids after prompt, n of them. */
static void greedy(run_ *r, const char *prompt, int n, int32_t *out)
{
    gt_err err = {{0}};
    int32_t ids[256];
    const int np = tokens_of(r->m, prompt, ids, 256);
    float *logits = malloc(sizeof(float) * (size_t)r->n_vocab);
    ck_assert_msg(gt_session_eval(r->s, ids, np, false, logits, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        out[i] = gt_argmax(logits, r->n_vocab);
        ck_assert_msg(gt_session_eval(r->s, &out[i], 1, false, logits, &err) == 0, "%s", err.msg);
    }
    free(logits);
}

static void greedy_vs_reference(const char *profile)
{
    const char *path = gt_test_llama();
    run_ r, c;
    open_run(&r, path, "reference", NULL);
    open_run(&c, path, "cuda", profile);
    int32_t a[64], b[64];
    greedy(&r, "Zoo", 64, a);
    greedy(&c, "Zoo", 64, b);
    char text[4096] = "Zoo";
    size_t len = 3;
    for (int i = 0; i < 64; i++) {
        ck_assert_msg(a[i] == b[i], "greedy token %d: cuda %d, reference %d", i, b[i], a[i]);
        len += (size_t)gt_token_to_bytes(gt_model_tokenizer(c.m), b[i], text + len, sizeof text - len);
    }
    text[len] = '\0';
    if (gt_test_llama_is_stories()) /* the stand-in has no golden text */
        ck_assert_msg(strncmp(text, GOLDEN_ZOO, strlen(GOLDEN_ZOO)) == 0, "cuda text: %s", text);
    printf("  greedy 64 tokens%s%s: equal to the reference\n", profile ? ", " : "",
           profile ? profile : "");
    close_run(&r);
    close_run(&c);
}

START_TEST(model_greedy_stories260k) { greedy_vs_reference(NULL); }
END_TEST

/* Teacher-forced logits: batched prefill (cuBLAS path) and one token at a
 * time (mat-vec path), each against the reference on the same file. */
static void check_path(const char *path, const char *rel, double limit, const char *profile)
{
    ck_assert_msg(path != NULL, "%s absent (main() checked it)", rel);
    run_ r, c;
    open_run(&r, path, "reference", NULL);
    open_run(&c, path, "cuda", profile);
    int32_t ids[256];
    const int n = tokens_of(r.m, GOLDEN_ZOO, ids, 256);
    const size_t nl = (size_t)n * r.n_vocab;
    float *lr = malloc(sizeof(float) * nl), *lc = malloc(sizeof(float) * nl);
    gt_err err = {{0}};
    for (int mode = 0; mode < 2; mode++) {
        ck_assert(gt_session_truncate(r.s, 0, &err) == 0 && gt_session_truncate(c.s, 0, &err) == 0);
        ck_assert_msg(gt_session_eval(r.s, ids, n, true, lr, &err) == 0, "%s", err.msg);
        if (mode == 0) {
            ck_assert_msg(gt_session_eval(c.s, ids, n, true, lc, &err) == 0, "%s", err.msg);
        } else {
            for (int i = 0; i < n; i++)
                ck_assert_msg(gt_session_eval(c.s, &ids[i], 1, false, lc + (size_t)i * r.n_vocab,
                                              &err) == 0, "%s", err.msg);
        }
        double num = 0, den = 0;
        for (size_t k = 0; k < nl; k++) {
            num += ((double)lc[k] - lr[k]) * ((double)lc[k] - lr[k]);
            den += (double)lr[k] * lr[k];
        }
        printf("  %-44s nmse %.3g\n", mode ? "token by token" : "batched prefill", num / den);
        ck_assert_msg(num / den <= limit, "%s %s: logits NMSE %.3g > %.3g", rel,
                      mode ? "token by token" : "prefill", num / den, limit);
    }
    free(lr);
    free(lc);
    close_run(&r);
    close_run(&c);
}

static void check_file(const char *rel, double limit, const char *profile)
{
    check_path(strcmp(rel, "stories260K.gguf") == 0 ? gt_test_llama() : gt_test_model(rel), rel,
               limit, profile);
}

/* stories260K.gguf, or its stand-in (gt_test_llama) */
START_TEST(model_f32) { check_file("stories260K.gguf", 1e-6, NULL); }
END_TEST

START_TEST(model_llamacpp_quants)
{
    check_file("llamacpp-quants/stories260K-f16.gguf", 1e-6, NULL);
    check_file("llamacpp-quants/stories260K-q8_0.gguf", 5e-4, NULL);
    check_file("llamacpp-quants/stories260K-q4_0.gguf", 5e-4, NULL);
    check_file("llamacpp-quants/stories260K-q4_1.gguf", 5e-4, NULL);
}
END_TEST

/* graphs=on: replayed CUDA graphs give the same tokens and logits, across
 * prefill/decode shape changes (re-instantiation) and decode steps (update). */
START_TEST(model_graphs)
{
    greedy_vs_reference("graphs=on");
    check_file("stories260K.gguf", 1e-6, "graphs=on");
}
END_TEST

/* Gemma 3 270M Q4_K_M: Q4_K/Q5_K/Q6_K (and whatever else llama-quantize
 * chose) weights, GELU_MUL, SCALE, sliding-window layers, in prefill
 * (cuBLAS tiles) and token by token (mat-vec). */
START_TEST(model_gemma3) { check_path(gt_test_gemma3(), "gemma3-270m-q4_k_m", 5e-4, NULL); }
END_TEST

START_TEST(model_graphs_q8_0) { check_file("llamacpp-quants/stories260K-q8_0.gguf", 5e-4, "graphs=on"); }
END_TEST

/* --- device: leaks ------------------------------------------------------------- */

typedef int (*mem_info_fn)(int, uint64_t *, uint64_t *);

static mem_info_fn mem_info(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/libgt-backend-cuda.so", getenv("GT_BACKEND_PATH"));
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen(GT_BINARY_DIR "/libgt-backend-cuda.so", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "the cuda plugin is not loaded");
    mem_info_fn f = (mem_info_fn)dlsym(h, "gt_cuda_plugin_mem_info");
    ck_assert_msg(f != NULL, "gt_cuda_plugin_mem_info missing");
    return f;
}

static uint64_t free_bytes(mem_info_fn f)
{
    uint64_t fr = 0, total = 0;
    ck_assert(f(0, &fr, &total) == 0);
    return fr;
}

static void session_cycle(const gt_model *m, gt_backend *b, bool prefill)
{
    gt_err err = {{0}};
    gt_session *s;
    ck_assert_msg(gt_session_new(m, b, NULL, &s, &err) == 0, "%s", err.msg);
    int32_t ids[16];
    for (int i = 0; i < 16; i++)
        ids[i] = 1 + i * 7;
    ck_assert_msg(gt_session_eval(s, ids, prefill ? 16 : 1, false, NULL, &err) == 0, "%s", err.msg);
    gt_session_free(s);
}

START_TEST(leak_sessions)
{
    const char *path = gt_test_llama();
    gt_err err = {{0}};
    gt_model *m;
    gt_backend *b;
    ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_backend_open("cuda", NULL, &b, &err) == 0, "%s", err.msg);
    mem_info_fn f = mem_info();
    session_cycle(m, b, true); /* the matmul tile and cuBLAS workspace stay: backend-lifetime */
    const uint64_t before = free_bytes(f);
    for (int i = 0; i < 1000; i++)
        session_cycle(m, b, i % 100 == 0);
    const uint64_t after = free_bytes(f);
    printf("  1000 sessions: free device memory %llu -> %llu bytes\n", (unsigned long long)before,
           (unsigned long long)after);
    ck_assert_msg(after + (1u << 20) >= before, "1000 sessions leaked %lld bytes",
                  (long long)(before - after));
    gt_backend_close(b);

    /* Backends too: stream, cuBLAS handle, status words, tile. */
    ck_assert(gt_backend_open("cuda", NULL, &b, &err) == 0);
    session_cycle(m, b, true);
    gt_backend_close(b);
    const uint64_t b0 = free_bytes(f);
    for (int i = 0; i < 20; i++) {
        ck_assert_msg(gt_backend_open("cuda", NULL, &b, &err) == 0, "%s", err.msg);
        session_cycle(m, b, true);
        gt_backend_close(b);
    }
    const uint64_t b1 = free_bytes(f);
    printf("  20 backends: free device memory %llu -> %llu bytes\n", (unsigned long long)b0,
           (unsigned long long)b1);
    ck_assert_msg(b1 + (2u << 20) >= b0, "20 backends leaked %lld bytes", (long long)(b0 - b1));
    gt_model_free(m);
}
END_TEST

/* A profile the machine cannot meet fails at init, naming both versions. */
START_TEST(profile_mismatch)
{
    gt_backend_config cfg = {.driver = "driver>=99.0,cc>=1.0"};
    gt_backend *b = NULL;
    gt_err err = {{0}};
    ck_assert_int_ne(gt_backend_open("cuda", &cfg, &b, &err), 0);
    ck_assert_msg(strstr(err.msg, "found, >=99.0 required") && strstr(err.msg, "driver "), "%s",
                  err.msg);
    cfg.driver = "driver>=1.0,compute_capability>=1.0,runtime>=1.0";
    ck_assert_msg(gt_backend_open("cuda", &cfg, &b, &err) == 0, "%s", err.msg);
    gt_backend_close(b);
}
END_TEST

static void add_device_tests(Suite *s)
{
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, op_get_rows);
    tcase_add_test(tc, op_mul_mat);
    tcase_add_test(tc, op_elementwise);
    tcase_add_test(tc, op_rope);
    tcase_add_test(tc, op_attention);
    tcase_add_test(tc, op_errors);
    tcase_add_test(tc, profile_mismatch);
    tcase_add_test(tc, model_greedy_stories260k);
    tcase_add_test(tc, model_f32);
    const bool quants = gt_test_model("llamacpp-quants/stories260K-f16.gguf") &&
                        gt_test_model("llamacpp-quants/stories260K-q8_0.gguf") &&
                        gt_test_model("llamacpp-quants/stories260K-q4_0.gguf") &&
                        gt_test_model("llamacpp-quants/stories260K-q4_1.gguf");
    const char *no_quants = "llama.cpp quants of stories260K not found (../shared/models/llamacpp-quants)";
    gt_test_add_if(tc, model_llamacpp_quants, quants, no_quants);
    tcase_add_test(tc, model_graphs);
    gt_test_add_if(tc, model_graphs_q8_0, quants, no_quants);
    gt_test_add_if(tc, model_gemma3, gt_test_gemma3() != NULL,
                   "Gemma 3 270M Q4_K_M not found ($GT_GEMMA3 or the models cache)");
    tcase_add_test(tc, leak_sessions);
    suite_add_tcase(s, tc);
}

int main(void)
{
    /* Plugins are found beside this binary; say so explicitly for runs from
     * elsewhere (a copied build tree on a GPU machine). */
    setenv("GT_BACKEND_PATH", GT_BINARY_DIR, 0);
    gt_test_llama(); /* written once here, before the cases fork */
    Suite *s = suite_create("cuda");
    TCase *tp = tcase_create("profile");
    tcase_add_test(tp, profile_parse);
    tcase_add_test(tp, profile_parse_errors);
    tcase_add_test(tp, profile_check);
    suite_add_tcase(s, tp);
    TCase *tr = tcase_create("registry");
    tcase_add_test(tr, registry_no_device);
    suite_add_tcase(s, tr);

    char why[1024];
    const int n = devices_in_child(why, sizeof why);
    if (n > 0) {
        printf("cuda device tests on: %s\n", why);
        add_device_tests(s);
    } else {
        printf("cuda device tests skipped: no device: %s\n", why);
    }
    return gt_test_run(s);
}
