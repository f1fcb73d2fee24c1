/* opencl_backend.c: the OpenCL backend's registration, device selection,
 * lifetime and buffers.
 *
 * Devices: every (platform, device) pair the ICD loader reports, in its
 * order. A driver profile (gt_backend_config.driver) narrows that list by
 * case-insensitive substrings of the names: "platform=Portable Computing
 * Language", "platform=NVIDIA CUDA,device=A100". cfg->device indexes the
 * narrowed list, so with no profile device 0 is the first device of the
 * first platform that has one. probe lists the same narrowed list, so the
 * index a user sees in `gauntlet devices` is the one init takes.
 *
 * Buffers live in device memory only (gt_buffer.host is NULL). Weights are
 * copied from the mmapped file once, at buffer_from_host, with
 * CL_MEM_COPY_HOST_PTR; when they exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE they
 * are split into overlapping chunks (see opencl_internal.h). Activation and
 * KV buffers are never split: a kernel must see them whole. */
#include "opencl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAIRS 64

typedef struct profile {
    char platform[128];
    char device[128];
} profile;

typedef struct pair {
    cl_platform_id platform;
    cl_device_id device;
} pair;

static int parse_profile(const char *s, profile *p, gt_err *err)
{
    memset(p, 0, sizeof *p);
    if (!s)
        return 0;
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return gt_err_set(err, "OpenCL driver profile is too long (%zu bytes)", strlen(s));
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        while (*kv == ' ')
            kv++;
        if (!*kv)
            continue;
        char *eq = strchr(kv, '=');
        if (!eq)
            return gt_err_set(err, "OpenCL driver profile '%s': '%s' is not key=value "
                                   "(keys: platform, device)", s, kv);
        *eq = '\0';
        for (char *e = eq; e > kv && e[-1] == ' ';)
            *--e = '\0';
        char *v = eq + 1;
        while (*v == ' ')
            v++;
        for (char *e = v + strlen(v); e > v && e[-1] == ' ';)
            *--e = '\0';
        if (strcmp(kv, "platform") == 0)
            snprintf(p->platform, sizeof p->platform, "%s", v);
        else if (strcmp(kv, "device") == 0)
            snprintf(p->device, sizeof p->device, "%s", v);
        else
            return gt_err_set(err, "OpenCL driver profile '%s': unknown key '%s' "
                                   "(keys: platform, device)", s, kv);
    }
    return 0;
}

static bool matches(const char *name, const char *pattern)
{
    return !pattern[0] || strcasestr(name, pattern) != NULL;
}

/* The (platform, device) pairs the profile selects, in ICD order. `seen`
 * lists every pair (for the "nothing matched" message). */
static int enumerate(const profile *prof, pair *out, int max, char *seen, size_t seen_cap,
                     gt_err *err)
{
    cl_platform_id plats[16];
    cl_uint n_plat = 0;
    cl_int st = clGetPlatformIDs(16, plats, &n_plat);
    if (st == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (st == CL_SUCCESS && n_plat == 0))
        return gt_err_set(err, "no OpenCL platform: the ICD loader found no driver "
                               "(install one, e.g. pocl-opencl-icd, or check OCL_ICD_VENDORS)");
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clGetPlatformIDs", st, "16");
    if (n_plat > 16)
        n_plat = 16;
    int n = 0;
    if (seen_cap)
        seen[0] = '\0';
    for (cl_uint i = 0; i < n_plat; i++) {
        char pname[256];
        gt_ocl_platform_str(plats[i], CL_PLATFORM_NAME, pname, sizeof pname);
        cl_device_id devs[32];
        cl_uint n_dev = 0;
        st = clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 32, devs, &n_dev);
        if (st == CL_DEVICE_NOT_FOUND)
            continue; /* a platform without devices is not an error */
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clGetDeviceIDs", st, "platform '%s'", pname);
        for (cl_uint j = 0; j < n_dev && j < 32; j++) {
            char dname[256];
            gt_ocl_device_str(devs[j], CL_DEVICE_NAME, dname, sizeof dname);
            size_t used = strlen(seen);
            if (used + 8 < seen_cap)
                snprintf(seen + used, seen_cap - used, "%s'%s' / '%s'", used ? ", " : "", pname,
                         dname);
            if (matches(pname, prof->platform) && matches(dname, prof->device) && n < max)
                out[n++] = (pair){plats[i], devs[j]};
        }
    }
    return n;
}

/* `facts`: what only an opened backend knows (threads, cache), or NULL. */
static void fill_info(gt_device_info *d, cl_platform_id p, cl_device_id dev, const char *facts)
{
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "opencl");
    gt_ocl_device_str(dev, CL_DEVICE_NAME, d->name, sizeof d->name);
    /* Facts a driver refuses to tell are recorded as unknown (0). */
    cl_device_type type = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS)
        type = 0;
    snprintf(d->kind, sizeof d->kind, "%s", type & CL_DEVICE_TYPE_GPU ? "gpu" :
             type & CL_DEVICE_TYPE_CPU ? "cpu" : "accelerator");
    cl_ulong mem = 0, max_alloc = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL) != CL_SUCCESS)
        mem = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL) !=
        CL_SUCCESS)
        max_alloc = 0;
    d->memory = mem;
    gt_ocl_platform_str(p, CL_PLATFORM_NAME, d->driver, sizeof d->driver);
    gt_ocl_device_str(dev, CL_DRIVER_VERSION, d->driver_version, sizeof d->driver_version);
    char clc[128], pver[256], ext[4096];
    gt_ocl_device_str(dev, CL_DEVICE_OPENCL_C_VERSION, clc, sizeof clc);
    gt_ocl_platform_str(p, CL_PLATFORM_VERSION, pver, sizeof pver);
    gt_ocl_device_str(dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    /* The short facts first: extra is 256 bytes and the platform version
     * string can be long (PoCL lists its build options there). */
    snprintf(d->extra, sizeof d->extra, "opencl_c=%s; fp64=%s; fp16=%s; max_alloc=%lluMiB%s%s; "
             "platform_version=%s", clc, strstr(ext, "cl_khr_fp64") ? "yes" : "no",
             strstr(ext, "cl_khr_fp16") ? "yes" : "no",
             (unsigned long long)(max_alloc >> 20), facts ? "; " : "", facts ? facts : "", pver);
}

static int ocl_probe(gt_device_info *devs, int max, const char *driver, gt_err *err)
{
    profile prof;
    if (parse_profile(driver, &prof, err) != 0)
        return 0;
    pair pairs[MAX_PAIRS];
    char seen[1024];
    int n = enumerate(&prof, pairs, MAX_PAIRS, seen, sizeof seen, err);
    if (n < 0)
        return 0;
    if (n == 0) {
        gt_err_set(err, "no OpenCL device matches driver profile '%s' (found: %s)",
                   driver ? driver : "", seen[0] ? seen : "no devices");
        return 0;
    }
    int filled = n < max ? n : max;
    for (int i = 0; i < filled; i++)
        fill_info(&devs[i], pairs[i].platform, pairs[i].device, NULL);
    return filled;
}

/* --- buffers ---------------------------------------------------------------- */

static ocl_buf *new_ocl_buf(int n_chunks)
{
    return calloc(1, sizeof(ocl_buf) + sizeof(cl_mem) * (size_t)n_chunks);
}

static int create_mem(ocl_ctx *c, cl_mem_flags flags, size_t size, void *host, cl_mem *out,
                      gt_err *err)
{
    cl_int st;
    *out = clCreateBuffer(c->context, flags, size, host, &st);
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clCreateBuffer", st, "%zu bytes%s", size,
                           host ? ", copied from host" : "");
    c->n_live_mem++;
    c->live_bytes += size;
    return 0;
}

static void release_mem(ocl_ctx *c, cl_mem m, size_t size)
{
    if (!m)
        return;
    clReleaseMemObject(m);
    c->n_live_mem--;
    c->live_bytes -= size;
}

static void ocl_buffer_free(gt_buffer *buf)
{
    if (!buf)
        return;
    ocl_ctx *c = ocl_of(buf->backend);
    ocl_buf *ob = buf->impl;
    if (ob) {
        for (int i = 0; i < ob->n_chunks; i++)
            release_mem(c, ob->mem[i], ob->n_chunks == 1 ? ob->chunk : gt_ocl_chunk_len(ob, buf, i));
        free(ob);
    }
    free(buf);
}

static int ocl_buffer_alloc(gt_backend *b, size_t size, gt_buffer **out, gt_err *err)
{
    ocl_ctx *c = ocl_of(b);
    *out = NULL;
    if (size > c->max_alloc)
        return gt_err_set(err, "a %zu-byte buffer exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu "
                               "bytes) of this device; activation and KV buffers cannot be "
                               "split (use a smaller context or batch)",
                          size, (unsigned long long)c->max_alloc);
    gt_buffer *buf = calloc(1, sizeof *buf);
    ocl_buf *ob = new_ocl_buf(1);
    if (!buf || !ob) {
        free(buf);
        free(ob);
        return gt_err_set(err, "out of memory");
    }
    const size_t real = size ? size : 4; /* OpenCL has no empty buffers */
    ob->n_chunks = 1;
    ob->stride = ob->chunk = real;
    buf->backend = b;
    buf->size = size;
    buf->impl = ob;
    if (create_mem(c, CL_MEM_READ_WRITE, real, NULL, &ob->mem[0], err) != 0) {
        free(ob);
        free(buf);
        return -1;
    }
    /* Zeroed like host buffers, so a fresh KV cache reads as zeros. */
    const cl_uchar zero = 0;
    cl_int st = clEnqueueFillBuffer(c->queue, ob->mem[0], &zero, 1, 0, real, 0, NULL, NULL);
    if (st != CL_SUCCESS) {
        ocl_buffer_free(buf);
        return gt_ocl_fail(err, "clEnqueueFillBuffer", st, "zeroing %zu bytes", real);
    }
    *out = buf;
    return 0;
}

static int ocl_buffer_from_host(gt_backend *b, const void *host, size_t size, gt_buffer **out,
                                gt_err *err)
{
    ocl_ctx *c = ocl_of(b);
    *out = NULL;
    const size_t max = (size_t)c->max_alloc;
    /* Chunks overlap by a quarter, so any tensor up to max/4 bytes lies
     * inside one of them. */
    size_t chunk = size ? size : 4, stride = chunk;
    int n = 1;
    if (size > max) {
        chunk = max;
        stride = max - max / 4;
        n = (int)((size - chunk + stride - 1) / stride) + 1;
    }
    gt_buffer *buf = calloc(1, sizeof *buf);
    ocl_buf *ob = new_ocl_buf(n);
    if (!buf || !ob) {
        free(buf);
        free(ob);
        return gt_err_set(err, "out of memory");
    }
    ob->n_chunks = n;
    ob->chunk = chunk;
    ob->stride = stride;
    buf->backend = b;
    buf->size = size;
    buf->impl = ob;
    static const uint32_t empty = 0;
    for (int i = 0; i < n; i++) {
        const size_t start = (size_t)i * stride;
        const size_t len = size ? gt_ocl_chunk_len(ob, buf, i) : 4;
        const void *src = size ? (const void *)((const char *)host + start) : (const void *)&empty;
        if (create_mem(c, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, len, (void *)src, &ob->mem[i],
                       err) != 0) {
            ocl_buffer_free(buf);
            return gt_err_wrap(err, "weights chunk %d of %d", i + 1, n);
        }
    }
    *out = buf;
    return 0;
}

static int ocl_upload(gt_buffer *buf, size_t offset, const void *src, size_t n, gt_err *err)
{
    ocl_ctx *c = ocl_of(buf->backend);
    const ocl_buf *ob = buf->impl;
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "upload of %zu bytes at %zu overruns a %zu-byte buffer", n, offset,
                          buf->size);
    /* Every chunk holding part of the range gets it (chunks overlap). */
    for (int i = 0; i < ob->n_chunks && n > 0; i++) {
        const size_t start = (size_t)i * ob->stride, end = start + gt_ocl_chunk_len(ob, buf, i);
        const size_t lo = offset > start ? offset : start;
        const size_t hi = offset + n < end ? offset + n : end;
        if (lo >= hi)
            continue;
        cl_int st = clEnqueueWriteBuffer(c->queue, ob->mem[i], CL_TRUE, lo - start, hi - lo,
                                         (const char *)src + (lo - offset), 0, NULL, NULL);
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clEnqueueWriteBuffer", st, "%zu bytes at %zu", hi - lo,
                               lo - start);
    }
    return 0;
}

static int ocl_download(gt_buffer *buf, size_t offset, void *dst, size_t n, gt_err *err)
{
    ocl_ctx *c = ocl_of(buf->backend);
    const ocl_buf *ob = buf->impl;
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "download of %zu bytes at %zu overruns a %zu-byte buffer", n,
                          offset, buf->size);
    for (size_t pos = offset; pos < offset + n;) {
        int i = (int)(pos / ob->stride);
        if (i >= ob->n_chunks)
            i = ob->n_chunks - 1;
        const size_t start = (size_t)i * ob->stride, end = start + gt_ocl_chunk_len(ob, buf, i);
        const size_t hi = offset + n < end ? offset + n : end;
        cl_int st = clEnqueueReadBuffer(c->queue, ob->mem[i], CL_TRUE, pos - start, hi - pos,
                                        (char *)dst + (pos - offset), 0, NULL, NULL);
        if (st != CL_SUCCESS)
            return gt_ocl_fail(err, "clEnqueueReadBuffer", st, "%zu bytes at %zu", hi - pos,
                               pos - start);
        pos = hi;
    }
    return 0;
}

/* --- lifetime --------------------------------------------------------------- */

static void ocl_free(gt_backend *b)
{
    if (!b)
        return;
    ocl_ctx *c = ocl_of(b);
    if (c) {
        /* Nothing may still run on buffers about to go; a failure here has
         * no one left to report to. */
        if (c->queue)
            (void)clFinish(c->queue);
        gt_ocl_profile_report(c);
        gt_ocl_program_free(c);
        if (c->flag)
            release_mem(c, c->flag, 16);
        if (c->rope_tab)
            release_mem(c, c->rope_tab, c->rope_tab_bytes);
        free(c->rope_host);
        if (c->queue)
            clReleaseCommandQueue(c->queue);
        if (c->context)
            clReleaseContext(c->context);
        if (c->sub_device)
            clReleaseDevice(c->sub_device);
        free(c);
    }
    free(b);
}

static const gt_backend_iface OCL_IFACE = {
    .free = ocl_free,
    .supports = gt_ocl_supports,
    .buffer_alloc = ocl_buffer_alloc,
    .buffer_from_host = ocl_buffer_from_host,
    .buffer_free = ocl_buffer_free,
    .upload = ocl_upload,
    .download = ocl_download,
    .compute = gt_ocl_compute,
};

static int query_device(ocl_ctx *c, gt_err *err)
{
    cl_device_type type = 0;
    cl_int st = clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (st == CL_SUCCESS)
        st = clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg,
                             &c->max_wg, NULL);
    if (st == CL_SUCCESS)
        st = clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem,
                             &c->local_mem, NULL);
    if (st == CL_SUCCESS)
        st = clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc,
                             &c->max_alloc, NULL);
    if (st == CL_SUCCESS)
        st = clGetDeviceInfo(c->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof c->global_mem,
                             &c->global_mem, NULL);
    if (st != CL_SUCCESS)
        return gt_ocl_fail(err, "clGetDeviceInfo", st, "work-group and memory limits");
    char ext[4096];
    gt_ocl_device_str(c->device, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    c->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    cl_device_fp_config fp = 0;
    if (clGetDeviceInfo(c->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS)
        c->has_fma = (fp & CL_FP_FMA) != 0;
    c->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    /* For tests of the split path: pretend allocations are smaller. */
    const char *env = getenv("GT_OPENCL_MAX_ALLOC");
    if (env && strtoull(env, NULL, 10) >= 4096 && strtoull(env, NULL, 10) < c->max_alloc)
        c->max_alloc = strtoull(env, NULL, 10);
    return 0;
}

/* n_threads on a CPU device: a sub-device of that many compute units
 * (CL_DEVICE_PARTITION_BY_COUNTS), so `-t 1` means one core here as on
 * the cpu backend. A device that cannot be partitioned runs whole, and
 * says so in the device info. */
static void partition(ocl_ctx *c, int n_threads, char *note, size_t cap)
{
    if (clGetDeviceInfo(c->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units,
                        &c->compute_units, NULL) != CL_SUCCESS)
        c->compute_units = 0; /* unknown: no partitioning */
    snprintf(note, cap, "compute_units=%u", c->compute_units);
    if (n_threads <= 0 || (cl_uint)n_threads >= c->compute_units)
        return;
    const cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_COUNTS,
                                                  (cl_device_partition_property)n_threads,
                                                  CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
    cl_device_id sub = NULL;
    cl_uint n = 0;
    cl_int st = clCreateSubDevices(c->device, props, 1, &sub, &n);
    if (st != CL_SUCCESS || n < 1) {
        snprintf(note, cap, "compute_units=%u (%d requested: %s)", c->compute_units, n_threads,
                 gt_ocl_status_name(st));
        return;
    }
    c->sub_device = sub;
    c->device = sub;
    snprintf(note, cap, "compute_units=%d of %u", n_threads, c->compute_units);
}

static int ocl_init(const gt_backend_config *cfg, gt_backend **out, gt_err *err)
{
    *out = NULL;
    profile prof;
    if (parse_profile(cfg->driver, &prof, err) != 0)
        return -1;
    pair pairs[MAX_PAIRS];
    char seen[1024];
    int n = enumerate(&prof, pairs, MAX_PAIRS, seen, sizeof seen, err);
    if (n < 0)
        return -1;
    if (n == 0)
        return gt_err_set(err, "no OpenCL device matches driver profile '%s' (found: %s)",
                          cfg->driver ? cfg->driver : "", seen[0] ? seen : "no devices");
    if (cfg->device < 0 || cfg->device >= n)
        return gt_err_set(err, "OpenCL device %d does not exist: the profile '%s' selects %d "
                               "device%s (0..%d)", cfg->device, cfg->driver ? cfg->driver : "",
                          n, n == 1 ? "" : "s", n - 1);

    gt_backend *b = calloc(1, sizeof *b);
    ocl_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return gt_err_set(err, "out of memory");
    }
    b->iface = &OCL_IFACE;
    b->ctx = c;
    c->platform = pairs[cfg->device].platform;
    c->device = pairs[cfg->device].device;
    char threads[64];
    partition(c, cfg->n_threads, threads, sizeof threads);

    cl_int st;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform, 0};
    char dname[128];
    gt_ocl_device_str(c->device, CL_DEVICE_NAME, dname, sizeof dname);
    c->context = clCreateContext(props, 1, &c->device, NULL, NULL, &st);
    if (st != CL_SUCCESS) {
        gt_ocl_fail(err, "clCreateContext", st, "device '%s'", dname);
        goto fail;
    }
    const char *penv = getenv("GT_OPENCL_PROFILE");
    c->profile = penv && penv[0] && strcmp(penv, "0") != 0;
    c->queue = clCreateCommandQueue(c->context, c->device,
                                    c->profile ? CL_QUEUE_PROFILING_ENABLE : 0, &st);
    if (st != CL_SUCCESS) {
        gt_ocl_fail(err, "clCreateCommandQueue", st, "device '%s'", dname);
        goto fail;
    }
    if (query_device(c, err) != 0)
        goto fail;
    gt_ocl_choose_tuning(c);
    if (gt_ocl_program_init(c, err) != 0)
        goto fail;
    if (create_mem(c, CL_MEM_READ_WRITE, 16, NULL, &c->flag, err) != 0)
        goto fail;
    c->flag_dirty = true;
    char facts[128];
    snprintf(facts, sizeof facts, "%s; cache=%s", threads, c->cache_status);
    fill_info(&b->info, c->platform, c->device, facts);
    *out = b;
    return 0;
fail:
    gt_err_wrap(err, "OpenCL device %d ('%s')", cfg->device, dname);
    ocl_free(b);
    return -1;
}

static const gt_backend_reg OCL_REG = {
    .name = "opencl",
    .description = "OpenCL 1.2 kernels on any ICD platform (PoCL, NVIDIA, Intel, ROCm)",
    .probe = ocl_probe,
    .init = ocl_init,
};

/* A test hook (tests/test_opencl.c finds it with dlsym): live cl_mem
 * objects of a backend, including its own (flag, ROPE table). */
__attribute__((visibility("default"))) long gt_ocl_live_allocations(gt_backend *b)
{
    return ocl_of(b)->n_live_mem;
}

__attribute__((visibility("default"))) const gt_backend_reg *gt_backend_plugin_entry(void)
{
    return &OCL_REG;
}
