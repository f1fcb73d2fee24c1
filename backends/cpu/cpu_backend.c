/* cpu_backend.c: the fast CPU backend's face to the runtime: registration,
 * device probe, init/free, supports(), and compute().
 *
 * compute() first validates every node (types, shapes, bounds, aliasing,
 * token ids) and sizes the scratch, so that once the threads start nothing
 * can fail: the node kernels have no error paths. Then the whole graph runs
 * in one pool job: every thread walks the node list, does its share of each
 * node and meets the others at a barrier before a node that depends on what
 * the ones before it wrote (plan_graph).
 *
 * ISA choice: the best of avx512 (F/BW/VL/DQ/VNNI) > avx2 (+FMA, F16C) >
 * scalar that __builtin_cpu_supports reports, unless GT_CPU_ISA names one
 * (scalar, avx2, avx512, auto); asking for one the CPU lacks is an error,
 * not a silent downgrade, so a qualification cell means what it says.
 * GT_CPU_BLAS_MIN_BATCH overrides the batch size from which matrix products
 * go to BLAS (default 16; 0 never). The driver profile's act= (or
 * GT_CPU_ACT) picks the dot path for quantized weights: f32 (default,
 * activations as they are) or q8 (activations quantized to 8-bit blocks,
 * integer dots, and an integer GEMM for batches; see cpu_matmul.c and
 * cpu_igemm.c).
 * Weights stay where the runtime mapped
 * them: buffer_from_host wraps them without a copy. */
#include "cpu.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define DEFAULT_BLAS_MIN_BATCH 16
#define MAX_THREADS 256

/* Weight types with fdot and dequant kernels in every table; listed in
 * supports()'s refusal as WEIGHT_TYPES. */
#define WEIGHT_TYPES "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl"

static bool is_weight_type(gt_type t)
{
    switch (t) {
    case GT_TYPE_F32: case GT_TYPE_F16: case GT_TYPE_BF16: case GT_TYPE_Q8_0:
    case GT_TYPE_Q4_0: case GT_TYPE_Q4_1: case GT_TYPE_Q5_0: case GT_TYPE_Q5_1:
    case GT_TYPE_Q2_K: case GT_TYPE_Q3_K: case GT_TYPE_Q4_K: case GT_TYPE_Q5_K:
    case GT_TYPE_Q6_K: case GT_TYPE_IQ4_NL:
        return true;
    default:
        return false;
    }
}

/* ---- ISA ------------------------------------------------------------------ */

static bool cpu_has(const char *isa)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    /* F16C from CPUID leaf 1 directly: clang before 16 rejects "f16c" in
     * __builtin_cpu_supports (the fuzz build uses clang 14). */
    unsigned a, b, c = 0, d;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (strcmp(isa, "avx2") == 0)
        return avx2;
    if (strcmp(isa, "avx512") == 0)
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return strcmp(isa, "scalar") == 0;
}

static const char *best_isa(void)
{
    return cpu_has("avx512") ? "avx512" : cpu_has("avx2") ? "avx2" : "scalar";
}

static int choose_kernels(gt_cpu_kernels *k, gt_err *err)
{
    const char *want = getenv("GT_CPU_ISA");
    if (!want || !want[0] || strcmp(want, "auto") == 0)
        want = best_isa();
    if (strcmp(want, "scalar") != 0 && strcmp(want, "avx2") != 0 && strcmp(want, "avx512") != 0)
        return gt_err_set(err, "GT_CPU_ISA=%s: expected scalar, avx2, avx512 or auto", want);
    if (!cpu_has(want))
        return gt_err_set(err, "GT_CPU_ISA=%s: this CPU lacks it (best available: %s)", want,
                          best_isa());
    if (strcmp(want, "avx512") == 0 ? gt_cpu_kernels_avx512(k)
        : strcmp(want, "avx2") == 0 ? gt_cpu_kernels_avx2(k)
                                    : (gt_cpu_kernels_scalar(k), true))
        return 0;
    return gt_err_set(err, "GT_CPU_ISA=%s: not compiled into this build", want);
}

/* The activation path: the driver profile's "act=f32|q8" (so one matrix can
 * qualify both as two profiles), else GT_CPU_ACT, else f32. Anything else is
 * a configuration error, as is a profile and an environment that disagree. */
static int choose_act(const char *driver, bool *q8, gt_err *err)
{
    const char *env = getenv("GT_CPU_ACT");
    char want[16] = "";
    const char *p = driver ? strstr(driver, "act=") : NULL;
    if (p && (p == driver || p[-1] == ',' || p[-1] == ' ')) {
        size_t n = strcspn(p + 4, ", ");
        snprintf(want, sizeof want, "%.*s", (int)(n < sizeof want ? n : sizeof want - 1), p + 4);
        if (env && env[0] && strcmp(env, want) != 0)
            return gt_err_set(err, "driver profile act=%s but GT_CPU_ACT=%s: unset one", want, env);
    } else if (env) {
        snprintf(want, sizeof want, "%.15s", env);
    }
    *q8 = false;
    if (!want[0] || strcmp(want, "f32") == 0)
        return 0;
    if (strcmp(want, "q8") == 0) {
        *q8 = true;
        return 0;
    }
    return gt_err_set(err, "%s%s: expected f32 or q8", p ? "act=" : "GT_CPU_ACT=", want);
}

static int n_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- device info ------------------------------------------------------- */

static void cpu_model_name(char *out, size_t n)
{
    snprintf(out, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ' || *v == '\t')
                    v++;
                snprintf(out, n, "%.*s", (int)strcspn(v, "\n"), v);
            }
            break;
        }
    }
    fclose(f);
}

static void fill_info(gt_device_info *d, const gt_cpu_blas *blas, const char *isa, bool act_q8,
                      int threads, int min_batch)
{
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "cpu");
    cpu_model_name(d->name, sizeof d->name);
    snprintf(d->kind, sizeof d->kind, "cpu");
    const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    d->memory = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
    snprintf(d->driver, sizeof d->driver, "%s", blas->driver);
    snprintf(d->driver_version, sizeof d->driver_version, "%s", blas->version);
    if (blas->sgemm)
        snprintf(d->extra, sizeof d->extra,
                 "isa=%s act=%s threads=%d cores=%d blas=%.100s%s%.40s blas_min_batch=%d", isa,
                 act_q8 ? "q8" : "f32", threads, n_cores(), blas->path, blas->core[0] ? " core=" : "",
                 blas->core, min_batch);
    else
        snprintf(d->extra, sizeof d->extra, "isa=%s act=%s threads=%d cores=%d blas unavailable: %.150s",
                 isa, act_q8 ? "q8" : "f32", threads, n_cores(), blas->why);
}

static int cpu_probe(gt_device_info *devs, int max, const char *driver, gt_err *err)
{
    gt_cpu_kernels k;
    bool act_q8;
    if (choose_kernels(&k, err) != 0 || choose_act(driver, &act_q8, err) != 0)
        return 0;
    gt_cpu_blas blas;
    gt_cpu_blas_load(driver, &blas);
    if (max > 0)
        fill_info(&devs[0], &blas, k.name, act_q8, n_cores(), DEFAULT_BLAS_MIN_BATCH);
    return 1;
}

/* ---- supports ------------------------------------------------------------ */

static bool cpu_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len)
{
    (void)b;
    if (op <= GT_OP_NONE || op >= GT_OP_COUNT) {
        if (why && why_len)
            snprintf(why, why_len, "op %d is not an operation", (int)op);
        return false;
    }
    if (op == GT_OP_MUL_MAT || op == GT_OP_GET_ROWS || op == GT_OP_MUL_MAT_ID) {
        if (is_weight_type(type))
            return true;
        if (why && why_len)
            snprintf(why, why_len, "no %s kernel for %s weights (cpu has " WEIGHT_TYPES ")",
                     gt_op_name(op), gt_type_name(type));
        return false;
    }
    if (type == GT_TYPE_F32)
        return true;
    /* F16 K/V caches (kv_type f16). */
    if (type == GT_TYPE_F16 && (op == GT_OP_KV_STORE || op == GT_OP_ATTENTION))
        return true;
    if (why && why_len)
        snprintf(why, why_len, "%s works on f32 tensors only, not %s", gt_op_name(op),
                 gt_type_name(type));
    return false;
}

/* ---- validation ------------------------------------------------------------ */

static int check_tensor(const gt_tensor *t, const char *role, gt_err *err)
{
    if (!t)
        return gt_err_set(err, "missing %s", role);
    if (!gt_type_info(t->type))
        return gt_err_set(err, "%s '%s' has unknown type %d", role, t->name, (int)t->type);
    if (t->ne[0] <= 0 || t->ne[1] <= 0 || t->ne[0] > INT32_MAX || t->ne[1] > INT32_MAX)
        return gt_err_set(err, "%s '%s' has bad shape [%lld, %lld]", role, t->name,
                          (long long)t->ne[0], (long long)t->ne[1]);
    if (gt_tensor_row_bytes(t) == 0)
        return gt_err_set(err, "%s '%s': row of %lld is not whole %s blocks", role, t->name,
                          (long long)t->ne[0], gt_type_name(t->type));
    if (!gt_tensor_host(t))
        return gt_err_set(err, "%s '%s' is not in host memory", role, t->name);
    const size_t bytes = gt_tensor_bytes(t);
    if (t->offset > t->buf->size || bytes > t->buf->size - t->offset)
        return gt_err_set(err, "%s '%s' (%zu bytes at %zu) overruns its %zu-byte buffer", role,
                          t->name, bytes, t->offset, t->buf->size);
    return 0;
}

static int want_f32(const gt_tensor *t, const char *role, gt_err *err)
{
    return t->type == GT_TYPE_F32 ? 0
                                  : gt_err_set(err, "%s '%s' must be f32, not %s", role, t->name,
                                               gt_type_name(t->type));
}

static int same_shape(const gt_tensor *a, const gt_tensor *b, gt_err *err)
{
    if (a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1])
        return 0;
    return gt_err_set(err, "shape mismatch: '%s' [%lld, %lld] vs '%s' [%lld, %lld]", a->name,
                      (long long)a->ne[0], (long long)a->ne[1], b->name, (long long)b->ne[0],
                      (long long)b->ne[1]);
}

/* 1 when the tensors' bytes overlap, 2 when they start at the same address. */
static int overlap(const gt_tensor *a, const gt_tensor *b)
{
    const char *pa = gt_tensor_host(a), *pb = gt_tensor_host(b);
    if (pa == pb)
        return 2;
    return pa < pb + gt_tensor_bytes(b) && pb < pa + gt_tensor_bytes(a);
}

static int validate_node(const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0], *b = t->src[1], *c = t->src[2];
    const int n_src = t->op == GT_OP_ATTENTION || t->op == GT_OP_MUL_MAT_ID ? 3
                    : t->op == GT_OP_ROPE                                 ? (b ? 2 : 1)
                    : t->op == GT_OP_RMS_NORM || t->op == GT_OP_SCALE || t->op == GT_OP_TOPK
                        ? 1
                        : 2;
    const char *roles[3] = {"src0", "src1", "src2"};
    if (check_tensor(t, "output", err))
        return -1;
    if (t->op == GT_OP_KV_STORE && t->type == GT_TYPE_F16 && b && b->type == GT_TYPE_F16) {
        /* the rows written of an F16 cache: checked below */
    } else if (t->op == GT_OP_TOPK ? t->type != GT_TYPE_I32 : want_f32(t, "output", err) != 0)
        return t->op == GT_OP_TOPK ? gt_err_set(err, "output '%s' must be i32", t->name) : -1;
    for (int i = 0; i < n_src; i++)
        if (check_tensor(t->src[i], roles[i], err))
            return -1;
    /* In-place (identical start) is allowed where the contract says so;
     * any other overlap between output and input would be read after written. */
    const bool inplace_ok = t->op == GT_OP_ADD || t->op == GT_OP_MUL || t->op == GT_OP_RMS_NORM ||
                            t->op == GT_OP_ROPE || t->op == GT_OP_SILU_MUL ||
                            t->op == GT_OP_GELU_MUL || t->op == GT_OP_SCALE;
    for (int i = 0; i < n_src && t->op != GT_OP_KV_STORE; i++) {
        const int o = overlap(t, t->src[i]);
        if (o == 1 || (o == 2 && !(inplace_ok && same_shape(t, t->src[i], NULL) == 0)))
            return gt_err_set(err, "output '%s' overlaps input '%s'", t->name, t->src[i]->name);
    }
    switch (t->op) {
    case GT_OP_GET_ROWS: {
        if (!is_weight_type(a->type))
            return gt_err_set(err, "no kernel for %s table", gt_type_name(a->type));
        if (b->type != GT_TYPE_I32)
            return gt_err_set(err, "ids '%s' must be i32", b->name);
        if (t->ne[0] != a->ne[0] || t->ne[1] != b->ne[0] * b->ne[1])
            return gt_err_set(err, "output [%lld, %lld] does not match %lld ids of %lld",
                              (long long)t->ne[0], (long long)t->ne[1],
                              (long long)(b->ne[0] * b->ne[1]), (long long)a->ne[0]);
        const int32_t *ids = gt_tensor_host(b);
        for (int64_t i = 0; i < t->ne[1]; i++)
            if (ids[i] < 0 || ids[i] >= a->ne[1])
                return gt_err_set(err, "id %d at %lld outside table of %lld rows", ids[i],
                                  (long long)i, (long long)a->ne[1]);
        return 0;
    }
    case GT_OP_MUL_MAT:
        if (!is_weight_type(a->type))
            return gt_err_set(err, "no kernel for %s weights", gt_type_name(a->type));
        if (want_f32(b, "activations", err))
            return -1;
        if (a->ne[0] != b->ne[0] || t->ne[0] != a->ne[1] || t->ne[1] != b->ne[1])
            return gt_err_set(err, "weight [%lld, %lld] x activations [%lld, %lld] -> [%lld, %lld]",
                              (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                              (long long)b->ne[1], (long long)t->ne[0], (long long)t->ne[1]);
        return 0;
    case GT_OP_RMS_NORM:
    case GT_OP_SCALE:
        return want_f32(a, "src0", err) || same_shape(t, a, err) ? -1 : 0;
    case GT_OP_ADD:
        if (b->ne[1] == 1 && b->ne[0] == a->ne[0] && b->type == GT_TYPE_F32)
            return want_f32(a, "src0", err) || same_shape(t, a, err) ? -1 : 0; /* a bias row */
        /* fall through */
    case GT_OP_SILU_MUL:
    case GT_OP_GELU_MUL:
        return want_f32(a, "src0", err) || want_f32(b, "src1", err) || same_shape(t, a, err) ||
                       same_shape(t, b, err)
                   ? -1
                   : 0;
    case GT_OP_MUL:
        if (want_f32(a, "src0", err) || want_f32(b, "src1", err) || same_shape(t, a, err))
            return -1;
        return b->ne[0] == a->ne[0] ? 0
                                    : gt_err_set(err, "norm weight '%s' has %lld columns, rows have %lld",
                                                 b->name, (long long)b->ne[0], (long long)a->ne[0]);
    case GT_OP_ROPE: {
        const int nh = t->iparams[0], hd = t->iparams[1], rd = t->iparams[2];
        if (want_f32(a, "src0", err) || same_shape(t, a, err))
            return -1;
        if (nh <= 0 || hd <= 0 || (int64_t)nh * hd > a->ne[0] || rd < 0 || rd > hd || rd % 2 ||
            rd > 2 * GT_CPU_MAX_ROPE_PAIRS || t->iparams[3] < 0 ||
            (t->iparams[4] != 0 && t->iparams[4] != 1))
            return gt_err_set(err, "bad parameters: n_heads=%d head_dim=%d rope_dim=%d pos0=%d mode=%d "
                              "for rows of %lld", nh, hd, rd, t->iparams[3], t->iparams[4],
                              (long long)a->ne[0]);
        if (b && want_f32(b, "factors", err))
            return -1;
        if (b && b->ne[0] * b->ne[1] != rd / 2)
            return gt_err_set(err, "factors '%s' hold %lld values, not rope_dim/2 = %d", b->name,
                              (long long)(b->ne[0] * b->ne[1]), rd / 2);
        return 0;
    }
    case GT_OP_KV_STORE:
        if (want_f32(a, "src0", err) || (b->type != GT_TYPE_F16 && want_f32(b, "cache", err)))
            return -1;
        if (a->ne[0] != b->ne[0] || t->iparams[0] < 0 || t->iparams[0] + a->ne[1] > b->ne[1])
            return gt_err_set(err, "%lld rows of %lld at pos0=%d do not fit cache [%lld, %lld]",
                              (long long)a->ne[1], (long long)a->ne[0], t->iparams[0],
                              (long long)b->ne[0], (long long)b->ne[1]);
        if (overlap(a, b))
            return gt_err_set(err, "source '%s' overlaps the cache", a->name);
        return 0;
    case GT_OP_ATTENTION: {
        const int nh = t->iparams[0], nkv = t->iparams[1], hd = t->iparams[2], pos0 = t->iparams[3];
        if (b->type == GT_TYPE_F16 && c->type == GT_TYPE_F16) {
            if (want_f32(a, "q", err) || same_shape(t, a, err))
                return -1;
        } else if (want_f32(a, "q", err) || want_f32(b, "k cache", err) ||
                   want_f32(c, "v cache", err) || same_shape(t, a, err))
            return -1;
        if (nh <= 0 || nkv <= 0 || hd <= 0 || nh % nkv || pos0 < 0 || t->iparams[4] < 0 ||
            a->ne[0] != (int64_t)nh * hd || b->ne[0] != (int64_t)nkv * hd || c->ne[0] != b->ne[0] ||
            pos0 + a->ne[1] > b->ne[1] || pos0 + a->ne[1] > c->ne[1])
            return gt_err_set(err, "bad parameters: n_head=%d n_kv_head=%d head_dim=%d pos0=%d, "
                              "q [%lld, %lld], caches [%lld, %lld] and [%lld, %lld]", nh, nkv, hd,
                              pos0, (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                              (long long)b->ne[1], (long long)c->ne[0], (long long)c->ne[1]);
        return 0;
    }
    case GT_OP_TOPK:
        if (want_f32(a, "logits", err))
            return -1;
        return t->ne[1] == a->ne[1] && t->ne[0] <= a->ne[0]
                   ? 0
                   : gt_err_set(err, "top %lld of [%lld, %lld] into [%lld, %lld]",
                                (long long)t->ne[0], (long long)a->ne[0], (long long)a->ne[1],
                                (long long)t->ne[0], (long long)t->ne[1]);
    case GT_OP_MOE_WEIGHTS:
    case GT_OP_MOE_SUM:
    case GT_OP_MUL_MAT_ID: {
        const gt_tensor *ids = t->op == GT_OP_MUL_MAT_ID ? c : t->op == GT_OP_MOE_WEIGHTS ? b : NULL;
        if (ids) {
            const int64_t n_exp = t->op == GT_OP_MUL_MAT_ID
                                      ? (t->iparams[0] > 0 ? a->ne[1] / t->iparams[0] : 0)
                                      : a->ne[0];
            if (ids->type != GT_TYPE_I32)
                return gt_err_set(err, "ids '%s' must be i32", ids->name);
            const int32_t *id = gt_tensor_host(ids);
            for (int64_t i = 0; i < ids->ne[0] * ids->ne[1]; i++)
                if (id[i] < 0 || id[i] >= n_exp)
                    return gt_err_set(err, "expert id %d outside 0..%lld", id[i],
                                      (long long)n_exp - 1);
        }
        if (t->op == GT_OP_MOE_WEIGHTS)
            return want_f32(a, "logits", err) || t->ne[1] != a->ne[1] || t->ne[0] != b->ne[0] ||
                           t->ne[1] != b->ne[1]
                       ? gt_err_set(err, "router weights: bad shapes")
                       : 0;
        if (t->op == GT_OP_MOE_SUM)
            return want_f32(a, "src0", err) || want_f32(b, "weights", err) ||
                           a->ne[1] != b->ne[0] * b->ne[1] || t->ne[1] != b->ne[1] ||
                           t->ne[0] != a->ne[0]
                       ? gt_err_set(err, "MOE_SUM: bad shapes")
                       : 0;
        if (!is_weight_type(a->type))
            return gt_err_set(err, "no kernel for %s weights", gt_type_name(a->type));
        if (want_f32(b, "activations", err))
            return -1;
        const int64_t want_rows = t->iparams[1] ? c->ne[0] * c->ne[1] : c->ne[1];
        if (t->iparams[0] <= 0 || a->ne[1] % t->iparams[0] || a->ne[0] != b->ne[0] ||
            b->ne[1] != want_rows || t->ne[0] != t->iparams[0] || t->ne[1] != c->ne[0] * c->ne[1])
            return gt_err_set(err, "MUL_MAT_ID: experts [%lld, %lld] of %d rows x [%lld, %lld] "
                              "-> [%lld, %lld]", (long long)a->ne[0], (long long)a->ne[1],
                              t->iparams[0], (long long)b->ne[0], (long long)b->ne[1],
                              (long long)t->ne[0], (long long)t->ne[1]);
        return 0;
    }
    default:
        return gt_err_set(err, "op %d (%s) not implemented", (int)t->op, gt_op_name(t->op));
    }
}

/* ---- scratch ----------------------------------------------------------- */

static void free_scratch(gt_cpu_ctx *c)
{
    free(c->act);
    c->act = NULL;
    c->act_size = 0;
    if (c->tscratch)
        for (int i = 0; i < c->n_threads; i++)
            free(c->tscratch[i]);
    c->tscratch_floats = 0;
}

static int ensure_scratch(gt_cpu_ctx *c, size_t act_bytes, size_t thread_floats, int n_nodes,
                          gt_err *err)
{
    if (act_bytes > c->act_size) {
        void *p = NULL;
        const size_t n = (act_bytes + 63) / 64 * 64;
        if (posix_memalign(&p, 64, n) != 0)
            return gt_err_set(err, "out of memory for %zu bytes of activation scratch", n);
        free(c->act);
        c->act = p;
        c->act_size = n;
    }
    if (thread_floats > c->tscratch_floats) {
        const size_t n = (thread_floats + 15) / 16 * 16;
        for (int i = 0; i < c->n_threads; i++) {
            void *p = NULL;
            if (posix_memalign(&p, 64, n * sizeof(float)) != 0)
                return gt_err_set(err, "out of memory for %zu floats of thread scratch", n);
            free(c->tscratch[i]);
            c->tscratch[i] = p;
        }
        c->tscratch_floats = n;
    }
    if (n_nodes > c->n_counters) {
        atomic_int *p = malloc(sizeof *p * (size_t)n_nodes);
        uint8_t *plan = malloc((size_t)n_nodes);
        if (!p || !plan) {
            free(p);
            free(plan);
            return gt_err_set(err, "out of memory for %d node counters", n_nodes);
        }
        free(c->counters);
        free(c->plan);
        c->counters = p;
        c->plan = plan;
        c->n_counters = n_nodes;
    }
    for (int i = 0; i < n_nodes; i++)
        atomic_init(&c->counters[i], 0);
    return 0;
}

/* ---- plan: which nodes must wait for the others ---------------------------
 *
 * A barrier is needed before a node only when it reads memory that a node
 * since the last barrier wrote, or writes memory such a node read or wrote
 * (byte ranges of the host tensors; a KV_STORE writes just its cache rows),
 * or when it would re-quantize activations into the shared buffer that a
 * node since the barrier still reads. So q, k and v (and gate and up), which
 * read one input and write three outputs, run back to back, and the second
 * and third reuse the first one's quantized input. About a third of a
 * decode step's barriers go, which matters most when a thread is descheduled
 * by a neighbour process and every barrier costs a context switch. */

typedef struct span {
    const char *p, *e;
} span;

static span span_of(const gt_tensor *t)
{
    const char *p = gt_tensor_host(t);
    return (span){p, p + gt_tensor_bytes(t)};
}

static bool meets(span a, span b) { return a.p < b.e && b.p < a.e; }

static bool same_input(const gt_tensor *a, const gt_tensor *b)
{
    return a && b && gt_tensor_host(a) == gt_tensor_host(b) && a->type == b->type &&
           a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1];
}

#define PLAN_SPANS 48

static void plan_graph(gt_cpu_ctx *c, const gt_graph *g)
{
    span rd[PLAN_SPANS], wr[PLAN_SPANS];
    int nr = 0, nw = 0;
    const gt_tensor *act_src = NULL; /* what c->act holds, quantized */
    bool act_read = false;           /* c->act read since the last barrier */
    bool first = true;
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        c->plan[n] = 0;
        if (t->op == GT_OP_NONE)
            continue;
        const int n_src = t->op == GT_OP_ATTENTION || t->op == GT_OP_MUL_MAT_ID ? 3
                        : t->op == GT_OP_ROPE                                 ? (t->src[1] ? 2 : 1)
                        : t->op == GT_OP_RMS_NORM || t->op == GT_OP_SCALE || t->op == GT_OP_TOPK
                            ? 1
                            : 2;
        span w = span_of(t);
        if (t->op == GT_OP_KV_STORE) {
            const size_t row = gt_tensor_row_bytes(t->src[1]);
            w.p = (const char *)gt_tensor_host(t->src[1]) + (size_t)t->iparams[0] * row;
            w.e = w.p + (size_t)t->src[0]->ne[1] * row;
        }
        const bool quant = t->op == GT_OP_MUL_MAT && gt_cpu_mul_mat_quantizes(c, t);
        const bool reuse = quant && same_input(act_src, t->src[1]);
        bool need = (quant && !reuse && act_read) || nr + n_src > PLAN_SPANS || nw + 1 > PLAN_SPANS;
        for (int i = 0; i < n_src && !need; i++)
            for (int j = 0; j < nw && !need; j++)
                need = meets(span_of(t->src[i]), wr[j]);
        for (int j = 0; j < nw && !need; j++)
            need = meets(w, wr[j]);
        for (int j = 0; j < nr && !need; j++)
            need = meets(w, rd[j]);
        if (need && !first) {
            c->plan[n] |= GT_CPU_PLAN_BARRIER;
            nr = nw = 0;
            act_read = false;
        }
        first = false;
        for (int i = 0; i < n_src; i++)
            rd[nr++] = span_of(t->src[i]);
        wr[nw++] = w;
        if (quant) {
            if (reuse)
                c->plan[n] |= GT_CPU_PLAN_REUSE_ACT;
            else
                act_src = t->src[1];
            act_read = true;
        }
        if (act_src && meets(w, span_of(act_src)))
            act_src = NULL; /* its input changed: the quantized copy is stale */
    }
}

/* ---- compute ------------------------------------------------------------ */

typedef struct graph_job {
    gt_cpu_ctx *c;
    const gt_graph *g;
    bool blas;
} graph_job;

static void run_graph(void *arg, int ith, int nth)
{
    graph_job *job = arg;
    gt_cpu_ctx *c = job->c;
    if (job->blas && c->blas.set_num_threads)
        c->blas.set_num_threads(1); /* per thread: OpenMP builds keep it per thread */
    for (int n = 0; n < job->g->n_nodes; n++) {
        const gt_tensor *t = job->g->nodes[n];
        atomic_int *ctr = &c->counters[n];
        if (c->plan[n] & GT_CPU_PLAN_BARRIER)
            gt_cpu_barrier(c->pool);
        switch (t->op) {
        case GT_OP_NONE: continue;
        case GT_OP_GET_ROWS: gt_cpu_get_rows(c, t, ith, nth); break;
        case GT_OP_RMS_NORM: gt_cpu_rms_norm(c, t, ith, nth); break;
        case GT_OP_MUL_MAT:
            gt_cpu_mul_mat(c, t, ctr, (c->plan[n] & GT_CPU_PLAN_REUSE_ACT) != 0, ith, nth);
            break;
        case GT_OP_ADD: gt_cpu_add(c, t, ith, nth); break;
        case GT_OP_MUL: gt_cpu_mul(c, t, ith, nth); break;
        case GT_OP_ROPE: gt_cpu_rope(c, t, ith, nth); break;
        case GT_OP_KV_STORE: gt_cpu_kv_store(c, t, ith, nth); break;
        case GT_OP_ATTENTION: gt_cpu_attention(c, t, ctr, ith, nth); break;
        case GT_OP_SILU_MUL: gt_cpu_silu_mul(c, t, ith, nth); break;
        case GT_OP_GELU_MUL: gt_cpu_gelu_mul(c, t, ith, nth); break;
        case GT_OP_SCALE: gt_cpu_scale(c, t, ith, nth); break;
        case GT_OP_TOPK: gt_cpu_topk(c, t, ith, nth); break;
        case GT_OP_MOE_WEIGHTS: gt_cpu_moe_weights(c, t, ith, nth); break;
        case GT_OP_MUL_MAT_ID: gt_cpu_mul_mat_id(c, t, ith, nth); break;
        case GT_OP_MOE_SUM: gt_cpu_moe_sum(c, t, ith, nth); break;
        default: break; /* rejected by validation */
        }
    }
}

static int compute_locked(gt_cpu_ctx *c, const gt_graph *g, gt_err *err);

/* Sessions on different threads may share one backend: graphs take turns. */
static int cpu_compute(gt_backend *b, const gt_graph *g, gt_err *err)
{
    gt_cpu_ctx *c = b->ctx;
    pthread_mutex_lock(&c->mu);
    const int rc = compute_locked(c, g, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Whether a node other than a MUL_MAT reads w's bytes (a tied embedding's
 * GET_ROWS): then its mapped pages stay. */
static bool read_otherwise(const gt_graph *g, const gt_tensor *w)
{
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        if (t->op == GT_OP_MUL_MAT || t->op == GT_OP_NONE)
            continue;
        for (size_t i = 0; i < sizeof t->src / sizeof t->src[0]; i++)
            if (t->src[i] && t->src[i]->buf == w->buf &&
                gt_tensor_host(t->src[i]) == gt_tensor_host(w))
                return true;
    }
    return false;
}

static int compute_locked(gt_cpu_ctx *c, const gt_graph *g, gt_err *err)
{
    size_t act = 0, tf = 0;
    bool blas = false;
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        if (!t)
            return gt_err_set(err, "cpu: node %d is NULL", n);
        if (t->op == GT_OP_NONE)
            continue;
        if (validate_node(t, err) != 0)
            return gt_err_wrap(err, "cpu: node %d (%s '%s')", n, gt_op_name(t->op), t->name);
        size_t a = 0, f = 0;
        /* read_otherwise scans the whole graph: only for a weight not yet
         * packed (it cost ~2% of a SmolLM2 decode step, on one thread,
         * when it ran for every packed node of every step). */
        if (t->op == GT_OP_MUL_MAT && gt_cpu_packed_takes(c, t) &&
            !gt_cpu_packed_ready(c, t->src[0]) &&
            gt_cpu_packed_prepare(c, t, !read_otherwise(g, t->src[0]), err) != 0)
            return gt_err_wrap(err, "cpu: node %d (%s '%s')", n, gt_op_name(t->op), t->name);
        if (t->op == GT_OP_MUL_MAT)
            gt_cpu_mul_mat_scratch(c, t, &a, &f);
        else if (t->op == GT_OP_ATTENTION)
            gt_cpu_attention_scratch(c, t, &f);
        if ((t->op == GT_OP_MUL_MAT || t->op == GT_OP_ATTENTION) && c->blas.sgemm &&
            t->src[t->op == GT_OP_MUL_MAT ? 1 : 0]->ne[1] >= c->blas_min_batch)
            blas = true;
        act = a > act ? a : act;
        tf = f > tf ? f : tf;
    }
    if (ensure_scratch(c, act, tf, g->n_nodes, err) != 0)
        return gt_err_wrap(err, "cpu");
    plan_graph(c, g);
    graph_job job = {c, g, blas};
    gt_cpu_pool_run(c->pool, run_graph, &job);
    return 0;
}

/* ---- lifetime ------------------------------------------------------------- */

static void cpu_free(gt_backend *b)
{
    if (!b)
        return;
    gt_cpu_ctx *c = b->ctx;
    if (c) {
        gt_cpu_pool_free(c->pool);
        free_scratch(c);
        free(c->tscratch);
        free(c->counters);
        free(c->plan);
        gt_cpu_packed_drop(c, NULL);
        if (c->mu_ok)
            pthread_mutex_destroy(&c->mu);
        free(c);
    }
    free(b);
}

/* A freed buffer's packed weights go with it: its address may come back
 * holding other bytes. */
static void cpu_buffer_free(gt_buffer *buf)
{
    if (buf && buf->backend && buf->backend->ctx) {
        gt_cpu_ctx *c = buf->backend->ctx;
        pthread_mutex_lock(&c->mu);
        gt_cpu_packed_drop(c, buf);
        pthread_mutex_unlock(&c->mu);
    }
    gt_host_buffer_free(buf);
}

static const gt_backend_iface CPU_IFACE = {
    .free = cpu_free,
    .supports = cpu_supports,
    .buffer_alloc = gt_host_buffer_alloc,
    .buffer_from_host = gt_host_buffer_from_host,
    .buffer_free = cpu_buffer_free,
    .upload = gt_host_upload,
    .download = gt_host_download,
    .compute = cpu_compute,
};

static int cpu_init(const gt_backend_config *cfg, gt_backend **out, gt_err *err)
{
    *out = NULL;
    if (cfg->device != 0)
        return gt_err_set(err, "cpu has one device (0), not %d", cfg->device);
    if (cfg->n_threads < 0 || cfg->n_threads > MAX_THREADS)
        return gt_err_set(err, "n_threads=%d: expected 0 (all cores) to %d", cfg->n_threads,
                          MAX_THREADS);
    gt_backend *b = calloc(1, sizeof *b);
    gt_cpu_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return gt_err_set(err, "out of memory");
    }
    b->iface = &CPU_IFACE;
    b->ctx = c;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        cpu_free(b);
        return gt_err_set(err, "cannot create the backend's lock");
    }
    c->mu_ok = true;
    c->n_threads = cfg->n_threads > 0 ? cfg->n_threads : n_cores();
    c->blas_min_batch = DEFAULT_BLAS_MIN_BATCH;
    const char *mb = getenv("GT_CPU_BLAS_MIN_BATCH");
    if (mb && mb[0]) {
        char *end;
        const long v = strtol(mb, &end, 10);
        if (*end || v < 0 || v > INT32_MAX) {
            cpu_free(b);
            return gt_err_set(err, "GT_CPU_BLAS_MIN_BATCH=%s: expected a non-negative integer", mb);
        }
        c->blas_min_batch = v == 0 ? INT32_MAX : (int)v;
    }
    if (choose_kernels(&c->k, err) != 0 || choose_act(cfg->driver, &c->act_q8, err) != 0) {
        cpu_free(b);
        return -1;
    }
    c->tscratch = calloc((size_t)c->n_threads, sizeof *c->tscratch);
    if (!c->tscratch) {
        cpu_free(b);
        return gt_err_set(err, "out of memory");
    }
    if (gt_cpu_pool_new(c->n_threads, &c->pool, err) != 0) {
        cpu_free(b);
        return -1;
    }
    gt_cpu_blas_load(cfg->driver, &c->blas);
    fill_info(&b->info, &c->blas, c->k.name, c->act_q8, c->n_threads,
              c->blas_min_batch == INT32_MAX ? 0 : c->blas_min_batch);
    *out = b;
    return 0;
}

static const gt_backend_reg CPU_REG = {
    .name = "cpu",
    .description = "fast CPU: SIMD dot products on quantized weights, threads, BLAS for batches",
    .probe = cpu_probe,
    .init = cpu_init,
};

const gt_backend_reg *gt_backend_cpu_reg(void) { return &CPU_REG; }
