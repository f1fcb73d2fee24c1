/* cuda_backend.c: the CUDA backend's registration, probe, init, buffers and
 * the per-graph driver. Kernels live in cuda_ops.cu and cuda_matmul.cu; the
 * error messages all of them build, in cuda_status.c.
 *
 * Built as the plugin libgt-backend-cuda.so, loaded with dlopen, so the
 * gauntlet program runs on machines without CUDA. libcudart loads the
 * driver (libcuda.so.1) lazily at the first runtime call, so a machine with
 * the toolkit libraries but no driver still loads the plugin, and the probe
 * then reports why it has no devices ("cudaGetDeviceCount: error 35
 * (cudaErrorInsufficientDriver) ...") instead of the program failing to
 * start.
 *
 * Design choices:
 * - Device buffers are plain cudaMalloc allocations; gt_buffer.impl is the
 *   device address, host is NULL; a tensor is (buffer, offset) as on every
 *   backend, so views cost nothing.
 * - Weights are uploaded once per session by buffer_from_host (one copy of
 *   the GGUF data section); nothing is re-uploaded per token.
 * - Each backend instance owns one stream; every copy and kernel goes on it
 *   in order. compute() synchronizes once at the end so that asynchronous
 *   kernel faults are reported by the call that caused them; GT_CUDA_SYNC=1
 *   synchronizes after every node to name the failing one.
 * - Every node is validated (types, shapes, bounds, alignment) before its
 *   launch: an unsupported or malformed node is an error, never garbage. */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static const gt_backend_iface CU_IFACE;

/* --- errors (gt_cuda_fail, gt_cuda_fail_blas: cuda_status.c) ---------------- */

/* Errors on paths that cannot return one (free): said on stderr, not lost. */
static void warn_cuda(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        fprintf(stderr, "gauntlet cuda: %s: error %d (%s): %s\n", what, (int)e, cudaGetErrorName(e),
                cudaGetErrorString(e));
}

/* --- probe ------------------------------------------------------------------ */

/* The kernel module's version ("580.159.03") from /proc, or "" when the
 * driver is not loaded (or this is not Linux). */
static void kernel_module_version(char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f)
        return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "Module");
        if (p) {
            p += strlen("Module");
            while (*p && !(*p >= '0' && *p <= '9'))
                p++;
            size_t len = strspn(p, "0123456789.");
            if (len >= n)
                len = n - 1;
            memcpy(out, p, len);
            out[len] = '\0';
        }
    }
    fclose(f);
}

/* Runtime and driver versions, then the device count; the one place that
 * turns "no driver" / "no device" into a reason. */
static int count_devices(int *count, gt_cuda_found *found, gt_err *err)
{
    int rt = 0, drv = 0;
    *count = 0;
    cudaError_t e = cudaRuntimeGetVersion(&rt);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaRuntimeGetVersion");
    /* Reports 0 (and success) when no driver is installed. */
    e = cudaDriverGetVersion(&drv);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaDriverGetVersion");
    found->runtime = gt_cuda_version_from_int(rt);
    found->driver = gt_cuda_version_from_int(drv);
    char rs[32], ds[32];
    gt_cuda_version_str(found->runtime, rs, sizeof rs);
    if (drv)
        gt_cuda_version_str(found->driver, ds, sizeof ds);
    else
        snprintf(ds, sizeof ds, "none found");
    e = cudaGetDeviceCount(count);
    if (e != cudaSuccess) {
        *count = 0;
        return gt_err_set(err, "cudaGetDeviceCount: error %d (%s): %s (CUDA runtime %s, driver %s)",
                          (int)e, cudaGetErrorName(e), cudaGetErrorString(e), rs, ds);
    }
    if (*count <= 0)
        return gt_err_set(err, "cudaGetDeviceCount: no CUDA device (runtime %s, driver %s)", rs, ds);
    return 0;
}

/* Fills d for device dev; cc receives its compute capability. */
static int describe_device(int dev, const gt_cuda_found *found, gt_device_info *d,
                           gt_cuda_version *cc, gt_err *err)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaGetDeviceProperties(device %d)", dev);
    /* Peak DRAM bandwidth from the clock (kHz, double data rate) and bus
     * width, for the device line; the bandwidth probe measures the real one. */
    int mem_khz = 0, bus_bits = 0;
    e = cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaDeviceGetAttribute(device %d, memory clock/bus width)", dev);
    const double peak_tbs = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e12;

    char rs[32], ds[32], ccs[32], kmd[64];
    *cc = (gt_cuda_version){{p.major, p.minor, 0}};
    kernel_module_version(kmd, sizeof kmd);
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "cuda");
    snprintf(d->name, sizeof d->name, "%s", p.name);
    snprintf(d->kind, sizeof d->kind, "gpu");
    d->memory = (uint64_t)p.totalGlobalMem;
    if (kmd[0])
        snprintf(d->driver, sizeof d->driver, "NVIDIA CUDA driver (kernel module %s)", kmd);
    else
        snprintf(d->driver, sizeof d->driver, "NVIDIA CUDA driver");
    snprintf(d->driver_version, sizeof d->driver_version, "%s",
             gt_cuda_version_str(found->driver, ds, sizeof ds));
    snprintf(d->extra, sizeof d->extra,
             "compute capability %s, CUDA runtime %s, %d SMs, L2 %d MiB, %d-bit bus, "
             "peak DRAM %.2f TB/s, pci %04x:%02x:%02x.0",
             gt_cuda_version_str(*cc, ccs, sizeof ccs),
             gt_cuda_version_str(found->runtime, rs, sizeof rs), p.multiProcessorCount,
             p.l2CacheSize >> 20, bus_bits, peak_tbs, p.pciDomainID, p.pciBusID, p.pciDeviceID);
    return 0;
}

static int cu_probe(gt_device_info *devs, int max, const char *driver, gt_err *err)
{
    gt_cuda_profile prof;
    if (gt_cuda_profile_parse(driver, &prof, err) != 0)
        return 0;
    gt_cuda_found found = {0};
    int n;
    if (count_devices(&n, &found, err) != 0)
        return 0;
    int listed = 0;
    for (int i = 0; i < n && listed < max; i++) {
        if (describe_device(i, &found, &devs[listed], &found.cc, err) != 0)
            return 0;
        listed++;
    }
    return n;
}

/* --- lifetime ---------------------------------------------------------------- */

static void destroy_ctx(gt_cuda_ctx *c)
{
    if (!c)
        return;
    warn_cuda(cudaSetDevice(c->device), "cudaSetDevice");
    if (c->stream)
        warn_cuda(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize (closing)");
    gt_cuda_matmul_release(c);
    if (c->status)
        warn_cuda(cudaFree(c->status), "cudaFree (status words)");
    if (c->exec)
        warn_cuda(cudaGraphExecDestroy(c->exec), "cudaGraphExecDestroy");
    if (c->cublas) {
        cublasStatus_t s = cublasDestroy(c->cublas);
        if (s != CUBLAS_STATUS_SUCCESS)
            fprintf(stderr, "gauntlet cuda: cublasDestroy: %s\n", cublasGetStatusString(s));
    }
    if (c->blas_ws)
        warn_cuda(cudaFree(c->blas_ws), "cudaFree (cuBLAS workspace)");
    if (c->stream)
        warn_cuda(cudaStreamDestroy(c->stream), "cudaStreamDestroy");
    free(c);
}

static void cu_free(gt_backend *b)
{
    if (!b)
        return;
    destroy_ctx(b->ctx);
    free(b);
}

static int cu_init(const gt_backend_config *cfg, gt_backend **out, gt_err *err)
{
    *out = NULL;
    gt_cuda_profile prof;
    if (gt_cuda_profile_parse(cfg->driver, &prof, err) != 0)
        return -1;
    gt_cuda_found found = {0};
    int n;
    if (count_devices(&n, &found, err) != 0)
        return -1;
    if (cfg->device < 0 || cfg->device >= n)
        return gt_err_set(err, "device %d requested, but there %s %d CUDA device%s (0..%d)",
                          cfg->device, n == 1 ? "is" : "are", n, n == 1 ? "" : "s", n - 1);
    gt_backend *b = calloc(1, sizeof *b);
    gt_cuda_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return gt_err_set(err, "out of memory");
    }
    b->iface = &CU_IFACE;
    b->ctx = c;
    c->device = cfg->device;
    c->gemm = prof.gemm;
    const char *sync = getenv("GT_CUDA_SYNC");
    c->sync_each = sync && sync[0] && strcmp(sync, "0") != 0;
    if (describe_device(c->device, &found, &b->info, &found.cc, err) != 0)
        goto fail;
    /* Fail fast, before any allocation, on a machine the profile excludes. */
    if (gt_cuda_profile_check(&prof, &found, err) != 0) {
        gt_err_wrap(err, "device %d (%s), profile '%s'", c->device, b->info.name, cfg->driver);
        goto fail;
    }
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess) {
        gt_cuda_fail(err, e, "cudaSetDevice(%d)", c->device);
        goto fail;
    }
    /* Non-blocking: our stream never waits on the legacy default stream;
     * every copy below is on it explicitly. */
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        gt_cuda_fail(err, e, "cudaStreamCreateWithFlags");
        goto fail;
    }
    e = cudaMalloc((void **)&c->status, GT_CUDA_STATUS_WORDS * sizeof(int32_t));
    if (e == cudaSuccess)
        e = cudaMemsetAsync(c->status, 0, GT_CUDA_STATUS_WORDS * sizeof(int32_t), c->stream);
    if (e != cudaSuccess) {
        gt_cuda_fail(err, e, "cudaMalloc/cudaMemsetAsync(%zu bytes of status words)",
                     GT_CUDA_STATUS_WORDS * sizeof(int32_t));
        goto fail;
    }
    cublasStatus_t s = cublasCreate(&c->cublas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        c->cublas = NULL;
        gt_cuda_fail_blas(err, s, "cublasCreate");
        goto fail;
    }
    /* Our own workspace (cublasSetStream resets to the default pool, so it
     * comes after): cuBLAS then never allocates inside a graph capture.
     * 32 MiB is what NVIDIA suggests for Hopper. */
    const size_t ws = (size_t)32 << 20;
    e = cudaMalloc(&c->blas_ws, ws);
    if (e != cudaSuccess) {
        c->blas_ws = NULL;
        gt_cuda_fail(err, e, "cudaMalloc(%zu bytes) for the cuBLAS workspace", ws);
        goto fail;
    }
    s = cublasSetStream(c->cublas, c->stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetWorkspace(c->cublas, c->blas_ws, ws);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(c->cublas, c->gemm == GT_CUDA_GEMM_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                     : CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        gt_cuda_fail_blas(err, s, "cublasSetStream/cublasSetWorkspace/cublasSetMathMode");
        goto fail;
    }
    c->graphs = prof.graphs && !c->sync_each;
    if (c->gemm == GT_CUDA_GEMM_TF32 || c->graphs) {
        size_t len = strlen(b->info.extra);
        snprintf(b->info.extra + len, sizeof b->info.extra - len, "%s%s",
                 c->gemm == GT_CUDA_GEMM_TF32 ? ", gemm tf32" : "", c->graphs ? ", graphs" : "");
    }
    *out = b;
    return 0;
fail:
    cu_free(b);
    return -1;
}

/* --- capabilities ------------------------------------------------------------ */

/* The weight types GET_ROWS and MUL_MAT read (GT_CUDA_WEIGHT_TYPES in
 * cuda_kernels.h lists the same ones for the kernels' switches). */
static bool is_weight_type(gt_type t)
{
    switch (t) {
    case GT_TYPE_F32:
    case GT_TYPE_F16:
    case GT_TYPE_BF16:
    case GT_TYPE_Q8_0:
    case GT_TYPE_Q4_0:
    case GT_TYPE_Q4_1:
    case GT_TYPE_Q5_0:
    case GT_TYPE_Q5_1:
    case GT_TYPE_IQ4_NL:
    case GT_TYPE_Q2_K:
    case GT_TYPE_Q3_K:
    case GT_TYPE_Q4_K:
    case GT_TYPE_Q5_K:
    case GT_TYPE_Q6_K: return true;
    default: return false;
    }
}

static bool cu_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len)
{
    (void)b;
    if (op == GT_OP_MUL_MAT || op == GT_OP_GET_ROWS || op == GT_OP_MUL_MAT_ID) {
        if (is_weight_type(type))
            return true;
        if (type == GT_TYPE_Q8_K) { /* GGML's activation partner of the K-quants */
            if (why && why_len)
                snprintf(why, why_len, "q8_k is an activation-only type (the K-quants' dot-product "
                         "partner), never a weight: cuda has no %s kernel for it", gt_op_name(op));
            return false;
        }
        if (why && why_len)
            snprintf(why, why_len, "cuda has no %s kernel for %s weights", gt_op_name(op),
                     gt_type_name(type));
        return false;
    }
    if (op > GT_OP_NONE && op < GT_OP_COUNT && type == GT_TYPE_F32)
        return true;
    /* F16 K/V caches (kv_type f16). */
    if (type == GT_TYPE_F16 && (op == GT_OP_KV_STORE || op == GT_OP_ATTENTION))
        return true;
    if (why && why_len)
        snprintf(why, why_len, "cuda computes %s on f32 only, not %s", gt_op_name(op),
                 gt_type_name(type));
    return false;
}

/* --- buffers --------------------------------------------------------------- */

static gt_cuda_ctx *buf_ctx(const gt_buffer *buf) { return buf->backend->ctx; }
static void cu_buffer_free(gt_buffer *buf);

static int cu_buffer_alloc(gt_backend *b, size_t size, gt_buffer **out, gt_err *err)
{
    gt_cuda_ctx *c = b->ctx;
    *out = NULL;
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaSetDevice(%d)", c->device);
    gt_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return gt_err_set(err, "out of memory");
    void *p = NULL;
    e = cudaMalloc(&p, size ? size : 256);
    if (e != cudaSuccess) {
        size_t fr = 0, total = 0;
        (void)cudaGetLastError(); /* clear it so that cudaMemGetInfo can answer */
        if (cudaMemGetInfo(&fr, &total) == cudaSuccess)
            gt_cuda_fail(err, e, "cudaMalloc(%zu bytes) on device %d (%zu MiB free of %zu MiB)", size,
                         c->device, fr >> 20, total >> 20);
        else
            gt_cuda_fail(err, e, "cudaMalloc(%zu bytes) on device %d", size, c->device);
        free(buf);
        return -1;
    }
    /* Zeroed like host buffers, so an unwritten KV row reads as 0, not noise. */
    e = cudaMemsetAsync(p, 0, size, c->stream);
    if (e != cudaSuccess) {
        warn_cuda(cudaFree(p), "cudaFree");
        free(buf);
        return gt_cuda_fail(err, e, "cudaMemsetAsync(%zu bytes)", size);
    }
    buf->backend = b;
    buf->size = size;
    buf->host = NULL;
    buf->impl = p;
    *out = buf;
    return 0;
}

static int cu_buffer_from_host(gt_backend *b, const void *host, size_t size, gt_buffer **out,
                               gt_err *err)
{
    if (cu_buffer_alloc(b, size, out, err) != 0)
        return -1;
    gt_cuda_ctx *c = b->ctx;
    cudaError_t e = cudaMemcpyAsync((*out)->impl, host, size, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        cu_buffer_free(*out);
        *out = NULL;
        return gt_cuda_fail(err, e, "cudaMemcpyAsync(%zu bytes host to device) of weights", size);
    }
    return 0;
}

static void cu_buffer_free(gt_buffer *buf)
{
    if (!buf)
        return;
    gt_cuda_ctx *c = buf_ctx(buf);
    warn_cuda(cudaSetDevice(c->device), "cudaSetDevice");
    /* Work queued on the stream may still read this memory. */
    warn_cuda(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize (freeing a buffer)");
    warn_cuda(cudaFree(buf->impl), "cudaFree");
    free(buf);
}

static int copy(gt_buffer *buf, size_t offset, void *dst, const void *src, size_t n,
                enum cudaMemcpyKind kind, const char *what, gt_err *err)
{
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "%s of %zu bytes at %zu overruns a %zu-byte buffer", what, n, offset,
                          buf->size);
    if (n == 0)
        return 0;
    gt_cuda_ctx *c = buf_ctx(buf);
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst, src, n, kind, c->stream);
    /* Synchronous for the caller: host memory may be reused at once. */
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "%s: cudaMemcpyAsync(%zu bytes at offset %zu)", what, n, offset);
    return 0;
}

static int cu_upload(gt_buffer *buf, size_t offset, const void *src, size_t n, gt_err *err)
{
    return copy(buf, offset, (char *)buf->impl + offset, src, n, cudaMemcpyHostToDevice, "upload",
                err);
}

static int cu_download(gt_buffer *buf, size_t offset, void *dst, size_t n, gt_err *err)
{
    return copy(buf, offset, dst, (const char *)buf->impl + offset, n, cudaMemcpyDeviceToHost,
                "download", err);
}

/* --- graph ------------------------------------------------------------------ */

/* The tensor lives in this backend's device memory, inside its buffer, at
 * an address its element loads may use. */
static int check_tensor(const gt_tensor *t, const char *role, gt_err *err)
{
    if (!t)
        return gt_err_set(err, "%s is missing", role);
    if (!t->buf || !t->buf->backend || t->buf->backend->iface != &CU_IFACE || !t->buf->impl)
        return gt_err_set(err, "%s '%s' is not in CUDA device memory (buffer of backend '%s')", role,
                          t->name,
                          t->buf && t->buf->backend ? t->buf->backend->info.backend : "none");
    const size_t bytes = gt_tensor_bytes(t);
    if (t->ne[0] <= 0 || t->ne[1] <= 0 || t->ne[0] > INT32_MAX || t->ne[1] > INT32_MAX || !bytes)
        return gt_err_set(err, "%s '%s' has a bad shape [%lld, %lld] for type %s", role, t->name,
                          (long long)t->ne[0], (long long)t->ne[1], gt_type_name(t->type));
    if (t->offset > t->buf->size || bytes > t->buf->size - t->offset)
        return gt_err_set(err, "%s '%s' (%zu bytes at offset %zu) overruns its %zu-byte buffer", role,
                          t->name, bytes, t->offset, t->buf->size);
    const size_t align = t->type == GT_TYPE_F32 || t->type == GT_TYPE_I32 ? 4 : 2;
    if (t->offset % align)
        return gt_err_set(err, "%s '%s' at offset %zu is not %zu-byte aligned", role, t->name,
                          t->offset, align);
    return 0;
}

static int want_type(const gt_tensor *t, gt_type type, const char *role, gt_err *err)
{
    if (t->type != type)
        return gt_err_set(err, "%s '%s' is %s, expected %s", role, t->name, gt_type_name(t->type),
                          gt_type_name(type));
    return 0;
}

static int same_shape(const gt_tensor *a, const gt_tensor *b, gt_err *err)
{
    if (a->ne[0] != b->ne[0] || a->ne[1] != b->ne[1])
        return gt_err_set(err, "'%s' [%lld, %lld] and '%s' [%lld, %lld] differ in shape", a->name,
                          (long long)a->ne[0], (long long)a->ne[1], b->name, (long long)b->ne[0],
                          (long long)b->ne[1]);
    return 0;
}

/* Everything the kernels assume about a node, checked on the host. */
static int validate(const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0], *b = t->src[1], *c = t->src[2];
    if (check_tensor(t, "output", err) || check_tensor(a, "src0", err))
        return -1;
    const bool two = t->op == GT_OP_GET_ROWS || t->op == GT_OP_MUL_MAT || t->op == GT_OP_ADD ||
                     t->op == GT_OP_MUL || t->op == GT_OP_KV_STORE || t->op == GT_OP_ATTENTION ||
                     t->op == GT_OP_SILU_MUL || t->op == GT_OP_GELU_MUL ||
                     t->op == GT_OP_MOE_WEIGHTS || t->op == GT_OP_MUL_MAT_ID ||
                     t->op == GT_OP_MOE_SUM;
    if (two && check_tensor(b, "src1", err))
        return -1;
    if ((t->op == GT_OP_ATTENTION || t->op == GT_OP_MUL_MAT_ID) && check_tensor(c, "src2", err))
        return -1;
    if (t->op != GT_OP_KV_STORE &&
        want_type(t, t->op == GT_OP_TOPK ? GT_TYPE_I32 : GT_TYPE_F32, "output", err))
        return -1;

    switch (t->op) {
    case GT_OP_GET_ROWS:
        if (!is_weight_type(a->type))
            return gt_err_set(err, "table '%s' has type %s, which cuda cannot read", a->name,
                              gt_type_name(a->type));
        if (want_type(b, GT_TYPE_I32, "ids", err))
            return -1;
        if (b->ne[0] * b->ne[1] != t->ne[1] || t->ne[0] != a->ne[0])
            return gt_err_set(err, "%lld ids of a %lld-wide table do not make [%lld, %lld]",
                              (long long)(b->ne[0] * b->ne[1]), (long long)a->ne[0],
                              (long long)t->ne[0], (long long)t->ne[1]);
        return 0;
    case GT_OP_MUL_MAT:
        if (!is_weight_type(a->type))
            return gt_err_set(err, "weight '%s' has type %s, which cuda cannot multiply", a->name,
                              gt_type_name(a->type));
        if (want_type(b, GT_TYPE_F32, "activations", err))
            return -1;
        if (a->ne[0] != b->ne[0] || t->ne[0] != a->ne[1] || t->ne[1] != b->ne[1])
            return gt_err_set(err, "weight [%lld, %lld] x activations [%lld, %lld] cannot give [%lld, %lld]",
                              (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                              (long long)b->ne[1], (long long)t->ne[0], (long long)t->ne[1]);
        return 0;
    case GT_OP_ADD:
    case GT_OP_SILU_MUL:
    case GT_OP_GELU_MUL:
        if (want_type(a, GT_TYPE_F32, "src0", err) || want_type(b, GT_TYPE_F32, "src1", err))
            return -1;
        if (t->op == GT_OP_ADD && b->ne[1] == 1 && b->ne[0] == a->ne[0])
            return same_shape(t, a, err); /* a bias row */
        return same_shape(t, a, err) || same_shape(t, b, err) ? -1 : 0;
    case GT_OP_MUL:
        if (want_type(a, GT_TYPE_F32, "src0", err) || want_type(b, GT_TYPE_F32, "src1", err))
            return -1;
        if (b->ne[0] != a->ne[0])
            return gt_err_set(err, "row '%s' has %lld elements, rows of '%s' have %lld", b->name,
                              (long long)b->ne[0], a->name, (long long)a->ne[0]);
        return same_shape(t, a, err);
    case GT_OP_RMS_NORM:
    case GT_OP_SCALE:
        if (want_type(a, GT_TYPE_F32, "src0", err))
            return -1;
        return same_shape(t, a, err);
    case GT_OP_ROPE: {
        const int nh = t->iparams[0], hd = t->iparams[1], rd = t->iparams[2], mode = t->iparams[4];
        if (want_type(a, GT_TYPE_F32, "src0", err) || same_shape(t, a, err))
            return -1;
        if (nh <= 0 || hd <= 0 || rd < 0 || rd > hd || rd % 2 || (mode != 0 && mode != 1) ||
            (int64_t)nh * hd > a->ne[0] || t->iparams[3] < 0)
            return gt_err_set(err, "bad ROPE parameters: %d heads of %d, rope_dim %d, pos0 %d, mode %d "
                              "for rows of %lld", nh, hd, rd, t->iparams[3], mode, (long long)a->ne[0]);
        if (b && want_type(b, GT_TYPE_F32, "factors", err))
            return -1;
        if (b && b->ne[0] * b->ne[1] != rd / 2)
            return gt_err_set(err, "ROPE factors '%s' hold %lld values, not rope_dim/2 = %d",
                              b->name, (long long)(b->ne[0] * b->ne[1]), rd / 2);
        return 0;
    }
    case GT_OP_KV_STORE: {
        const int pos0 = t->iparams[0];
        if (want_type(a, GT_TYPE_F32, "src0", err) ||
            (b->type != GT_TYPE_F16 && want_type(b, GT_TYPE_F32, "cache", err)))
            return -1;
        if (a->ne[0] != b->ne[0] || pos0 < 0 || pos0 + a->ne[1] > b->ne[1])
            return gt_err_set(err, "cannot store %lld rows of %lld at row %d of a cache of [%lld, %lld]",
                              (long long)a->ne[1], (long long)a->ne[0], pos0, (long long)b->ne[0],
                              (long long)b->ne[1]);
        return 0;
    }
    case GT_OP_ATTENTION: {
        const int nh = t->iparams[0], nkv = t->iparams[1], hd = t->iparams[2], pos0 = t->iparams[3];
        const int window = t->iparams[4];
        const gt_type kv = b->type == GT_TYPE_F16 ? GT_TYPE_F16 : GT_TYPE_F32;
        if (want_type(a, GT_TYPE_F32, "q", err) || want_type(b, kv, "K cache", err) ||
            want_type(c, kv, "V cache", err) || same_shape(t, a, err))
            return -1;
        if (nh <= 0 || nkv <= 0 || hd <= 0 || hd > 1024 || nh % nkv || (int64_t)nh * hd != a->ne[0] ||
            (int64_t)nkv * hd != b->ne[0] || same_shape(b, c, err) || pos0 < 0 ||
            pos0 + a->ne[1] > b->ne[1] || window < 0)
            return gt_err_set(err, "bad ATTENTION parameters: %d heads, %d KV heads of %d, pos0 %d, "
                              "window %d, q [%lld, %lld], cache [%lld, %lld]", nh, nkv, hd, pos0,
                              window, (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                              (long long)b->ne[1]);
        return 0;
    }
    case GT_OP_TOPK:
        if (want_type(a, GT_TYPE_F32, "logits", err))
            return -1;
        if (t->ne[1] != a->ne[1] || t->ne[0] > a->ne[0])
            return gt_err_set(err, "TOPK: top %lld of [%lld, %lld]", (long long)t->ne[0],
                              (long long)a->ne[0], (long long)a->ne[1]);
        return 0;
    case GT_OP_MOE_WEIGHTS:
        if (want_type(a, GT_TYPE_F32, "logits", err) || want_type(b, GT_TYPE_I32, "ids", err))
            return -1;
        return same_shape(t, b, err) || t->ne[1] != a->ne[1]
                   ? gt_err_set(err, "MOE_WEIGHTS: [%lld, %lld] logits for [%lld, %lld] ids",
                                (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                                (long long)b->ne[1])
                   : 0;
    case GT_OP_MOE_SUM:
        if (want_type(a, GT_TYPE_F32, "src0", err) || want_type(b, GT_TYPE_F32, "weights", err))
            return -1;
        if (a->ne[1] != b->ne[0] * b->ne[1] || t->ne[1] != b->ne[1] || t->ne[0] != a->ne[0])
            return gt_err_set(err, "MOE_SUM: [%lld, %lld] with weights [%lld, %lld]",
                              (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                              (long long)b->ne[1]);
        return 0;
    case GT_OP_MUL_MAT_ID: {
        const int64_t n_out = t->iparams[0];
        if (!is_weight_type(a->type))
            return gt_err_set(err, "weight '%s' has type %s, which cuda cannot multiply", a->name,
                              gt_type_name(a->type));
        if (want_type(b, GT_TYPE_F32, "activations", err) || want_type(c, GT_TYPE_I32, "ids", err))
            return -1;
        if (n_out <= 0 || a->ne[1] % n_out || a->ne[0] != b->ne[0] || t->ne[0] != n_out ||
            t->ne[1] != c->ne[0] * c->ne[1] ||
            b->ne[1] != (t->iparams[1] ? c->ne[0] * c->ne[1] : c->ne[1]))
            return gt_err_set(err, "MUL_MAT_ID: experts [%lld, %lld] of %lld rows x [%lld, %lld]",
                              (long long)a->ne[0], (long long)a->ne[1], (long long)n_out,
                              (long long)b->ne[0], (long long)b->ne[1]);
        return 0;
    }
    default:
        return gt_err_set(err, "cuda does not implement op %d", (int)t->op);
    }
}

static int kv_store(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0], *cache = t->src[1];
    if (cache->type == GT_TYPE_F16)
        return gt_cuda_op_kv_store_f16(c, t, err);
    char *dst = (char *)gt_cuda_ptr(cache) + (size_t)t->iparams[0] * gt_tensor_row_bytes(cache);
    const size_t n = gt_tensor_bytes(a);
    if (dst == gt_cuda_ptr(a))
        return 0;
    cudaError_t e = cudaMemcpyAsync(dst, gt_cuda_ptr(a), n, cudaMemcpyDeviceToDevice, c->stream);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "KV_STORE: cudaMemcpyAsync(%zu bytes device to device)", n);
    return 0;
}

/* Reads the status words after the stream has drained; a kernel that saw
 * bad input left the first such node's index there. */
static int check_status(gt_cuda_ctx *c, const gt_graph *g, gt_err *err)
{
    int32_t st[GT_CUDA_STATUS_WORDS];
    cudaError_t e = cudaMemcpyAsync(st, c->status, sizeof st, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "reading the status words (cudaMemcpyAsync, %zu bytes)", sizeof st);
    if (st[0] == 0)
        return 0;
    e = cudaMemsetAsync(c->status, 0, sizeof st, c->stream);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaMemsetAsync(status words)");
    const int node = st[0] - 1;
    const gt_tensor *t = node < g->n_nodes ? g->nodes[node] : NULL;
    return gt_err_set(err, "node %d (%s '%s'): id %d outside table of %d rows", node,
                      t ? gt_op_name(t->op) : "?", t ? t->name : "?", st[1], st[2]);
}

/* Launches every node on the stream; *last is the last one launched. */
static int launch_nodes(gt_cuda_ctx *c, const gt_graph *g, bool validated, int *last, gt_err *err)
{
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        if (t->op == GT_OP_NONE)
            continue;
        int rc = validated ? 0 : validate(t, err);
        if (rc == 0) {
            switch (t->op) {
            case GT_OP_GET_ROWS: rc = gt_cuda_op_get_rows(c, t, n, err); break;
            case GT_OP_RMS_NORM: rc = gt_cuda_op_rms_norm(c, t, err); break;
            case GT_OP_MUL_MAT: rc = gt_cuda_op_mul_mat(c, t, err); break;
            case GT_OP_ADD: rc = gt_cuda_op_add(c, t, err); break;
            case GT_OP_MUL: rc = gt_cuda_op_mul(c, t, err); break;
            case GT_OP_ROPE: rc = gt_cuda_op_rope(c, t, err); break;
            case GT_OP_KV_STORE: rc = kv_store(c, t, err); break;
            case GT_OP_ATTENTION: rc = gt_cuda_op_attention(c, t, err); break;
            case GT_OP_SILU_MUL: rc = gt_cuda_op_silu_mul(c, t, err); break;
            case GT_OP_GELU_MUL: rc = gt_cuda_op_gelu_mul(c, t, err); break;
            case GT_OP_SCALE: rc = gt_cuda_op_scale(c, t, err); break;
            case GT_OP_TOPK:
            case GT_OP_MOE_WEIGHTS:
            case GT_OP_MUL_MAT_ID:
            case GT_OP_MOE_SUM: rc = gt_cuda_op_moe(c, t, err); break;
            default: rc = gt_err_set(err, "op %d not implemented", (int)t->op); break;
            }
        }
        cudaError_t e;
        if (rc == 0 && c->sync_each && (e = cudaStreamSynchronize(c->stream)) != cudaSuccess)
            rc = gt_cuda_fail(err, e, "cudaStreamSynchronize after the node's kernels");
        if (rc != 0)
            return gt_err_wrap(err, "node %d (%s '%s')", n, gt_op_name(t->op), t->name);
        *last = n;
    }
    return 0;
}

/* graphs=on: the nodes are captured into a CUDA graph and replayed. The
 * previous executable graph is updated in place when only parameters
 * changed (decode: the same kernels every token, new positions), and
 * re-instantiated when the shape changed (prefill after decode). Anything
 * that would allocate or synchronize is done before the capture. */
static int capture_and_launch(gt_cuda_ctx *c, const gt_graph *g, int *last, gt_err *err)
{
    for (int n = 0; n < g->n_nodes; n++) {
        const gt_tensor *t = g->nodes[n];
        if (t->op == GT_OP_NONE)
            continue;
        if (validate(t, err) != 0 ||
            (t->op == GT_OP_MUL_MAT && gt_cuda_matmul_reserve(c, t, err) != 0))
            return gt_err_wrap(err, "node %d (%s '%s')", n, gt_op_name(t->op), t->name);
    }
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaStreamBeginCapture");
    const int rc = launch_nodes(c, g, true, last, err);
    cudaGraph_t graph = NULL;
    e = cudaStreamEndCapture(c->stream, &graph);
    if (rc != 0 || e != cudaSuccess) {
        if (graph)
            warn_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");
        (void)cudaGetLastError(); /* an invalidated capture is not sticky */
        return rc != 0 ? -1 : gt_cuda_fail(err, e, "cudaStreamEndCapture (%d nodes)", g->n_nodes);
    }
    if (c->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(c->exec, graph, &info) != cudaSuccess) {
            (void)cudaGetLastError(); /* a shape change, not a failure */
            warn_cuda(cudaGraphExecDestroy(c->exec), "cudaGraphExecDestroy");
            c->exec = NULL;
        }
    }
    if (!c->exec && (e = cudaGraphInstantiate(&c->exec, graph, 0)) != cudaSuccess) {
        c->exec = NULL;
        warn_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");
        return gt_cuda_fail(err, e, "cudaGraphInstantiate (%d nodes)", g->n_nodes);
    }
    e = cudaGraphLaunch(c->exec, c->stream);
    warn_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaGraphLaunch (%d nodes)", g->n_nodes);
    return 0;
}

static int cu_compute(gt_backend *b, const gt_graph *g, gt_err *err)
{
    gt_cuda_ctx *c = b->ctx;
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaSetDevice(%d)", c->device);
    c->status_armed = false;
    int last = -1;
    if ((c->graphs ? capture_and_launch(c, g, &last, err) : launch_nodes(c, g, false, &last, err)) != 0)
        return -1;
    e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        const gt_tensor *t = last >= 0 ? g->nodes[last] : NULL;
        return gt_cuda_fail(err, e,
                            "executing %d nodes (last launched: node %d, %s '%s'; set GT_CUDA_SYNC=1 "
                            "to name the failing one): cudaStreamSynchronize",
                            g->n_nodes, last, t ? gt_op_name(t->op) : "-", t ? t->name : "-");
    }
    return c->status_armed ? check_status(c, g, err) : 0;
}

static const gt_backend_iface CU_IFACE = {
    .free = cu_free,
    .supports = cu_supports,
    .buffer_alloc = cu_buffer_alloc,
    .buffer_from_host = cu_buffer_from_host,
    .buffer_free = cu_buffer_free,
    .upload = cu_upload,
    .download = cu_download,
    .compute = cu_compute,
};

static const gt_backend_reg CU_REG = {
    .name = "cuda",
    .description = "NVIDIA GPUs: quantized mat-vec kernels for decode, cuBLAS for prefill",
    .probe = cu_probe,
    .init = cu_init,
};

EXPORT const gt_backend_reg *gt_backend_plugin_entry(void) { return &CU_REG; }

/* For leak tests (tests/test_cuda.c finds it with dlsym): the driver's view
 * of a device's free and total memory. 0 on success. */
EXPORT int gt_cuda_plugin_mem_info(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t fr = 0, total = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&fr, &total) != cudaSuccess)
        return -1;
    *free_bytes = fr;
    *total_bytes = total;
    return 0;
}
