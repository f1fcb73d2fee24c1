/* opencl_program.c: building the embedded kernels for one device.
 *
 * The kernel sources (the kernels folder, embedded by CMake) are built as one
 * program. Work sizes are compile-time constants (-D options): kernels with
 * fixed local arrays and unrolled register tiles are what both GPU
 * compilers and PoCL's CPU compiler generate good code for. They are chosen
 * per device kind, clamped to the device's limits (work-group size, local
 * memory), and can be overridden for tuning experiments with
 * GT_OPENCL_TUNE="mv_lws=8,mm_rn=2,...". After the build each kernel's own
 * CL_KERNEL_WORK_GROUP_SIZE is checked against the size it will be
 * launched with; a driver that cannot run that size (register pressure)
 * gets a rebuild with halved sizes rather than a launch failure.
 *
 * The built binary is cached on disk (opencl_cache.c) under a key of
 * platform, device, driver version, options and source hash. A cached
 * binary the driver refuses is rebuilt from source, never fatal.
 *
 * GT_OPENCL_FAULT=build (tests only) skips the cache and adds a source that
 * does not compile, so the driver's real build fails: how a broken kernel
 * or compiler looks to the harness (an error, never a skip). */
#include "opencl_cache.h"
#include "opencl_internal.h"
#include "opencl_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* name_f32 .. name_q6_k at K + OT_F32 .. K + OT_Q6_K */
#define TYPED(K, name)                                                                       \
    [K + OT_F32] = name "_f32", [K + OT_F16] = name "_f16", [K + OT_BF16] = name "_bf16",     \
    [K + OT_Q8_0] = name "_q8_0", [K + OT_Q4_0] = name "_q4_0", [K + OT_Q4_1] = name "_q4_1", \
    [K + OT_Q5_0] = name "_q5_0", [K + OT_Q5_1] = name "_q5_1",                               \
    [K + OT_IQ4_NL] = name "_iq4_nl", [K + OT_Q2_K] = name "_q2_k",                           \
    [K + OT_Q3_K] = name "_q3_k", [K + OT_Q4_K] = name "_q4_k", [K + OT_Q5_K] = name "_q5_k", \
    [K + OT_Q6_K] = name "_q6_k"

static const char *const KERNEL_NAMES[K_COUNT] = {
    TYPED(K_GET_ROWS, "get_rows"),
    TYPED(K_MATVEC, "matvec"),
    TYPED(K_MATMUL, "matmul"),
    [K_RMS_NORM] = "rms_norm",
    [K_ADD] = "add",
    [K_MUL] = "mul",
    [K_ADD_ROW] = "add_row",
    [K_SILU_MUL] = "silu_mul",
    [K_GELU_MUL] = "gelu_mul",
    [K_SCALE] = "scale",
    [K_ROPE] = "rope",
    [K_ATTENTION] = "attention",
    [K_ATTENTION_F16] = "attention_f16",
    [K_KV_STORE_F16] = "kv_store_f16",
    [K_TOPK] = "topk",
    [K_MOE_WEIGHTS] = "moe_weights",
    [K_MOE_SUM] = "moe_sum",
    TYPED(K_MUL_MAT_ID, "mul_mat_id"),
};

const char *gt_ocl_kernel_name(int k)
{
    return k >= 0 && k < K_COUNT && KERNEL_NAMES[k] ? KERNEL_NAMES[k] : "?";
}

static int pow2_floor(size_t v)
{
    int p = 1;
    while ((size_t)p * 2 <= v && p < (1 << 20))
        p *= 2;
    return p;
}

static int clamp_pow2(int v, size_t max)
{
    int p = pow2_floor((size_t)(v > 0 ? v : 1));
    while ((size_t)p > max && p > 1)
        p /= 2;
    return p;
}

/* GT_OPENCL_TUNE="key=value,..." over the defaults (unknown keys ignored,
 * so an old setting never breaks a run). */
static void apply_overrides(ocl_tuning *t)
{
    const char *env = getenv("GT_OPENCL_TUNE");
    if (!env)
        return;
    struct { const char *key; int *v; } keys[] = {
        {"ew_width", &t->ew_width}, {"ew_lws", &t->ew_lws},       {"norm_lws", &t->norm_lws},
        {"mv_lws", &t->mv_lws},     {"mv_rows", &t->mv_rows},     {"mv_max_tok", &t->mv_max_tok},
        {"mm_rn", &t->mm_rn},       {"mm_rm", &t->mm_rm},         {"mm_lx", &t->mm_lx},
        {"mm_ly", &t->mm_ly},       {"att_lws", &t->att_lws},     {"att_chunk", &t->att_chunk},
        {"att_vw", &t->att_vw},
    };
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            continue;
        *eq = '\0';
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (strcmp(kv, keys[i].key) == 0 && atoi(eq + 1) > 0)
                *keys[i].v = atoi(eq + 1);
    }
}

void gt_ocl_choose_tuning(ocl_ctx *c)
{
    ocl_tuning *t = &c->tune;
    if (c->is_cpu) {
        /* PoCL-style CPU devices: a work-group is a loop on one thread and
         * float16 is a SIMD register, so: few items, wide vectors, more
         * rows per item to reuse each loaded activation block. */
        *t = (ocl_tuning){.ew_width = 16, .ew_lws = 8, .norm_lws = 4, .mv_lws = 1, .mv_rows = 16,
                          .mv_max_tok = 2, .mm_rn = 4, .mm_rm = 6, .mm_lx = 4, .mm_ly = 4,
                          .att_lws = 1, .att_vw = 16, .att_chunk = 1024, .att_hd_max = 256};
    } else {
        *t = (ocl_tuning){.ew_width = 4, .ew_lws = 64, .norm_lws = 128, .mv_lws = 64,
                          .mv_rows = 2, .mv_max_tok = 4, .mm_rn = 2, .mm_rm = 4, .mm_lx = 16,
                          .mm_ly = 8, .att_lws = 64, .att_vw = 4, .att_chunk = 1024,
                          .att_hd_max = 256};
    }
    apply_overrides(t);
    const size_t wg = c->max_wg ? c->max_wg : 1;
    t->ew_width = t->ew_width >= 16 ? 16 : t->ew_width >= 8 ? 8 : t->ew_width >= 4 ? 4 : 2;
    t->ew_lws = clamp_pow2(t->ew_lws, wg);
    t->norm_lws = clamp_pow2(t->norm_lws, wg);
    t->mv_lws = clamp_pow2(t->mv_lws, wg);
    t->att_lws = clamp_pow2(t->att_lws, wg);
    t->att_vw = t->att_vw >= 16 ? 16 : t->att_vw >= 8 ? 8 : 4;
    /* rows per item: 1, 2, 4, 8 or 16 (their scales convert as one vector) */
    t->mv_rows = clamp_pow2(t->mv_rows, 16);
    t->mm_rn = clamp_pow2(t->mm_rn, 8);
    t->mm_rm = t->mm_rm > 8 ? 8 : t->mm_rm;
    t->mm_lx = clamp_pow2(t->mm_lx, wg);
    t->mm_ly = clamp_pow2(t->mm_ly, wg / (size_t)t->mm_lx);
    /* attention's local memory: lq (head) + ls (chunk) + red (lws) floats,
     * with room left for what the compiler adds. */
    const cl_ulong floats = c->local_mem / 4;
    const cl_ulong fixed = (cl_ulong)t->att_hd_max + (cl_ulong)t->att_lws + 256;
    const cl_ulong room = floats > fixed ? floats - fixed : 64;
    t->att_chunk = clamp_pow2(t->att_chunk, (size_t)(room < 64 ? 64 : room));
}

static void build_options(const ocl_ctx *c, char *out, size_t cap)
{
    const ocl_tuning *t = &c->tune;
    snprintf(out, cap,
             "-cl-std=CL1.2 -DGT_FMA=%d -DEW_W=%d -DNORM_LWS=%d -DMV_LWS=%d -DMV_ROWS=%d "
             "-DMM_RN=%d -DMM_RM=%d -DATT_LWS=%d -DATT_VW=%d -DATT_CHUNK=%d -DATT_HD_MAX=%d",
             c->has_fma ? 1 : 0, t->ew_width, t->norm_lws, t->mv_lws, t->mv_rows, t->mm_rn,
             t->mm_rm, t->att_lws, t->att_vw, t->att_chunk, t->att_hd_max);
}

static void cache_key(const ocl_ctx *c, const char *options, char *out, size_t cap)
{
    char pname[256], pver[256], dname[256], dver[128], dclver[128];
    gt_ocl_platform_str(c->platform, CL_PLATFORM_NAME, pname, sizeof pname);
    gt_ocl_platform_str(c->platform, CL_PLATFORM_VERSION, pver, sizeof pver);
    gt_ocl_device_str(c->device, CL_DEVICE_NAME, dname, sizeof dname);
    gt_ocl_device_str(c->device, CL_DRIVER_VERSION, dver, sizeof dver);
    gt_ocl_device_str(c->device, CL_DEVICE_VERSION, dclver, sizeof dclver);
    uint64_t h = 0;
    for (size_t i = 0; i < GT_OCL_N_SOURCES; i++)
        h = gt_ocl_fnv1a(h, GT_OCL_SOURCES[i].text, GT_OCL_SOURCES[i].size);
    snprintf(out, cap,
             "gauntlet-opencl-1\nplatform=%s\nplatform_version=%s\ndevice=%s\n"
             "device_version=%s\ndriver=%s\noptions=%s\nsource=%016llx\n",
             pname, pver, dname, dclver, dver, options, (unsigned long long)h);
}

static int build_failed(ocl_ctx *c, cl_program p, cl_int st, const char *options, gt_err *err)
{
    char log[640] = "";
    size_t n = 0;
    if (clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS &&
        n > 0) {
        char *full = malloc(n + 1);
        if (full && clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, n, full, NULL) ==
                        CL_SUCCESS) {
            full[n] = '\0';
            snprintf(log, sizeof log, "%s", full);
        }
        free(full);
    }
    return gt_ocl_fail(err, "clBuildProgram", st, "%zu embedded sources, options \"%s\"; log: %s",
                       GT_OCL_N_SOURCES, options, log[0] ? log : "(empty)");
}

/* The driver's binary of a built program (malloc'ed), or NULL. */
static unsigned char *program_binary(cl_program p, size_t *len)
{
    size_t size = 0;
    cl_uint n_dev = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof n_dev, &n_dev, NULL) != CL_SUCCESS ||
        n_dev != 1 ||
        clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
        size == 0)
        return NULL;
    unsigned char *bin = malloc(size);
    if (!bin)
        return NULL;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
        free(bin);
        return NULL;
    }
    *len = size;
    return bin;
}

static cl_program from_cache(ocl_ctx *c, const char *dir, const char *key, const char *options)
{
    unsigned char *bin = NULL;
    size_t len = 0;
    char why[200];
    if (gt_ocl_cache_load(dir, key, &bin, &len, why, sizeof why) != 0) {
        snprintf(c->cache_status, sizeof c->cache_status, "miss: %s", why);
        return NULL;
    }
    cl_int st, bst = CL_SUCCESS;
    const unsigned char *bins[1] = {bin};
    cl_program p = clCreateProgramWithBinary(c->context, 1, &c->device, &len, bins, &bst, &st);
    free(bin);
    if (st == CL_SUCCESS && bst == CL_SUCCESS &&
        (st = clBuildProgram(p, 1, &c->device, options, NULL, NULL)) == CL_SUCCESS) {
        snprintf(c->cache_status, sizeof c->cache_status, "hit");
        return p;
    }
    if (p)
        clReleaseProgram(p);
    snprintf(c->cache_status, sizeof c->cache_status, "miss: driver refused the entry (%s)",
             gt_ocl_status_name(st != CL_SUCCESS ? st : bst));
    return NULL;
}

static int build_program(ocl_ctx *c, gt_err *err)
{
    char options[512], key[2048], dir[4096];
    build_options(c, options, sizeof options);
    cache_key(c, options, key, sizeof key);
    gt_ocl_cache_dir(dir, sizeof dir);

    const char *fault = getenv("GT_OPENCL_FAULT");
    bool fail_build = fault && strcmp(fault, "build") == 0;
    cl_program p = NULL;
    if (dir[0] && !fail_build)
        p = from_cache(c, dir, key, options);
    else
        snprintf(c->cache_status, sizeof c->cache_status, "off");
    if (!p) {
        static const char BROKEN[] = "this is not OpenCL C (GT_OPENCL_FAULT build) ;\n";
        const char *texts[GT_OCL_N_SOURCES + 1];
        size_t lens[GT_OCL_N_SOURCES + 1];
        for (size_t i = 0; i < GT_OCL_N_SOURCES; i++) {
            texts[i] = GT_OCL_SOURCES[i].text;
            lens[i] = GT_OCL_SOURCES[i].size - 1;
        }
        texts[GT_OCL_N_SOURCES] = BROKEN;
        lens[GT_OCL_N_SOURCES] = sizeof BROKEN - 1;
        cl_int st;
        p = clCreateProgramWithSource(c->context, (cl_uint)GT_OCL_N_SOURCES + fail_build, texts,
                                      lens, &st);
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clCreateProgramWithSource", st, "%zu embedded sources",
                               GT_OCL_N_SOURCES);
        st = clBuildProgram(p, 1, &c->device, options, NULL, NULL);
        if (st != CL_SUCCESS) {
            build_failed(c, p, st, options, err);
            clReleaseProgram(p);
            return -1;
        }
        if (dir[0] && !fail_build) {
            size_t len = 0;
            unsigned char *bin = program_binary(p, &len);
            char why[200] = "the driver gave no binary";
            bool stored = bin && gt_ocl_cache_store(dir, key, bin, len, why, sizeof why) == 0;
            free(bin);
            /* A cache that cannot be written only costs time: say so, go on. */
            size_t used = strlen(c->cache_status);
            snprintf(c->cache_status + used, sizeof c->cache_status - used, stored ? ", stored" :
                     ", not stored: %s", why);
        }
    }
    c->program = p;
    return 0;
}

static void release_kernels(ocl_ctx *c)
{
    for (int i = 0; i < K_COUNT; i++)
        if (c->k[i]) {
            clReleaseKernel(c->k[i]);
            c->k[i] = NULL;
        }
    if (c->program) {
        clReleaseProgram(c->program);
        c->program = NULL;
    }
}

/* The local size each kernel is launched with (opencl_ops.c uses the same). */
static size_t launch_lws(const ocl_ctx *c, int k)
{
    const ocl_tuning *t = &c->tune;
    if (k >= K_MATVEC && k < K_MATVEC + OT_COUNT)
        return (size_t)t->mv_lws;
    if (k >= K_MATMUL && k < K_MATMUL + OT_COUNT)
        return (size_t)t->mm_lx * (size_t)t->mm_ly;
    if (k == K_RMS_NORM)
        return (size_t)t->norm_lws;
    if (k == K_ATTENTION || k == K_ATTENTION_F16)
        return (size_t)t->att_lws;
    return (size_t)t->ew_lws;
}

int gt_ocl_program_init(ocl_ctx *c, gt_err *err)
{
    for (int attempt = 0;; attempt++) {
        if (build_program(c, err) != 0)
            return -1;
        bool shrink = false;
        for (int i = 0; i < K_COUNT; i++) {
            cl_int st;
            c->k[i] = clCreateKernel(c->program, KERNEL_NAMES[i], &st);
            if (st != CL_SUCCESS) {
                gt_ocl_fail(err, "clCreateKernel", st, "%s", KERNEL_NAMES[i]);
                release_kernels(c);
                return -1;
            }
            size_t kwg = 0;
            st = clGetKernelWorkGroupInfo(c->k[i], c->device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kwg, &kwg, NULL);
            if (st != CL_SUCCESS) {
                gt_ocl_fail(err, "clGetKernelWorkGroupInfo", st, "%s, CL_KERNEL_WORK_GROUP_SIZE",
                            KERNEL_NAMES[i]);
                release_kernels(c);
                return -1;
            }
            if (kwg < launch_lws(c, i))
                shrink = true;
        }
        if (!shrink)
            return 0;
        ocl_tuning *t = &c->tune;
        if (attempt >= 6 || (t->mv_lws == 1 && t->mm_lx * t->mm_ly == 1 && t->att_lws == 1 &&
                             t->norm_lws == 1 && t->ew_lws == 1)) {
            release_kernels(c);
            return gt_err_set(err, "the OpenCL device cannot run the kernels even with "
                                   "work-groups of 1 (CL_KERNEL_WORK_GROUP_SIZE too small)");
        }
        release_kernels(c);
        t->mv_lws = t->mv_lws > 1 ? t->mv_lws / 2 : 1;
        t->norm_lws = t->norm_lws > 1 ? t->norm_lws / 2 : 1;
        t->att_lws = t->att_lws > 1 ? t->att_lws / 2 : 1;
        t->ew_lws = t->ew_lws > 1 ? t->ew_lws / 2 : 1;
        if (t->mm_ly > 1)
            t->mm_ly /= 2;
        else if (t->mm_lx > 1)
            t->mm_lx /= 2;
    }
}

void gt_ocl_program_free(ocl_ctx *c) { release_kernels(c); }
