/* backend.c: the backend registry, op names, and the host-memory buffers that
 * the reference and cpu backends share.
 *
 * Plugins are looked up once, lazily, as libgt-backend-<name>.so in
 * $GT_BACKEND_PATH (colon-separated) and then beside the executable. A plugin
 * that is missing or fails to load is still listed, with the reason, so that
 * "not available: libcudart.so.12: cannot open shared object file" is what a
 * user sees rather than a link error. */
#include "gt/backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const OP_NAMES[GT_OP_COUNT] = {
    [GT_OP_NONE] = "NONE",         [GT_OP_GET_ROWS] = "GET_ROWS",
    [GT_OP_RMS_NORM] = "RMS_NORM", [GT_OP_MUL_MAT] = "MUL_MAT",
    [GT_OP_ADD] = "ADD",           [GT_OP_MUL] = "MUL",
    [GT_OP_ROPE] = "ROPE",         [GT_OP_KV_STORE] = "KV_STORE",
    [GT_OP_ATTENTION] = "ATTENTION", [GT_OP_SILU_MUL] = "SILU_MUL",
    [GT_OP_GELU_MUL] = "GELU_MUL",   [GT_OP_SCALE] = "SCALE",
};

const char *gt_op_name(gt_op op)
{
    return op >= 0 && op < GT_OP_COUNT ? OP_NAMES[op] : "UNKNOWN";
}

int gt_op_from_name(const char *name, gt_op *out)
{
    for (int i = 0; i < GT_OP_COUNT; i++) {
        if (strcasecmp(OP_NAMES[i], name) == 0) {
            *out = (gt_op)i;
            return 0;
        }
    }
    return -1;
}

/* Plugin backends we know to look for; a plugin of another name can still be
 * added to this list without touching anything else. */
static const char *const PLUGINS[] = {"opencl", "cuda"};
#define N_PLUGINS (sizeof PLUGINS / sizeof PLUGINS[0])

static void *try_dlopen(const char *dir, const char *file, char *why, size_t why_len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (access(path, F_OK) != 0)
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(why, why_len, "%s", dlerror());
    return h;
}

static void load_plugin(gt_backend_entry *e, const char *name)
{
    char file[96];
    snprintf(file, sizeof file, "libgt-backend-%s.so", name);
    e->name = name;
    e->reg = NULL;
    snprintf(e->why, sizeof e->why, "plugin %s not found (looked in $GT_BACKEND_PATH and beside the executable)", file);

    char why[300] = "";
    void *h = NULL;
    const char *env = getenv("GT_BACKEND_PATH");
    if (env) {
        char *dirs = strdup(env);
        for (char *save = NULL, *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d && !h && !why[0];
             d = strtok_r(NULL, ":", &save))
            h = try_dlopen(d, file, why, sizeof why);
        free(dirs);
    }
    if (!h && !why[0]) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash) {
                *slash = '\0';
                h = try_dlopen(exe, file, why, sizeof why);
            }
        }
    }
    if (!h) {
        if (why[0])
            snprintf(e->why, sizeof e->why, "cannot load %s: %s", file, why);
        return;
    }
    gt_backend_plugin_entry_fn entry = (gt_backend_plugin_entry_fn)dlsym(h, "gt_backend_plugin_entry");
    if (!entry) {
        snprintf(e->why, sizeof e->why, "%s has no gt_backend_plugin_entry symbol", file);
        dlclose(h);
        return;
    }
    e->reg = entry();
    if (!e->reg)
        snprintf(e->why, sizeof e->why, "%s returned no registration", file);
    /* The handle stays open for the life of the process: backends hand out
     * function pointers into it. */
}

static gt_backend_entry g_entries[2 + N_PLUGINS];
static bool g_loaded[2 + N_PLUGINS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* Entry i, with its plugin loaded on first use: a cell that runs on cpu
 * should not pay for dlopen'ing cuBLAS (~100 ms) just to be listed. */
static const gt_backend_entry *entry_at(size_t i)
{
    pthread_mutex_lock(&g_lock);
    if (!g_loaded[i]) {
        if (i == 0)
            g_entries[i] = (gt_backend_entry){.name = "reference", .reg = gt_backend_reference_reg()};
        else if (i == 1)
            g_entries[i] = (gt_backend_entry){.name = "cpu", .reg = gt_backend_cpu_reg()};
        else
            load_plugin(&g_entries[i], PLUGINS[i - 2]);
        g_loaded[i] = true;
    }
    pthread_mutex_unlock(&g_lock);
    return &g_entries[i];
}

static const char *entry_name(size_t i)
{
    return i == 0 ? "reference" : i == 1 ? "cpu" : PLUGINS[i - 2];
}

int gt_backend_registry(const gt_backend_entry **out)
{
    for (size_t i = 0; i < 2 + N_PLUGINS; i++)
        entry_at(i);
    *out = g_entries;
    return (int)(2 + N_PLUGINS);
}

const gt_backend_entry *gt_backend_find(const char *name)
{
    for (size_t i = 0; i < 2 + N_PLUGINS; i++)
        if (strcmp(entry_name(i), name) == 0)
            return entry_at(i);
    return NULL;
}

int gt_backend_open(const char *name, const gt_backend_config *cfg, gt_backend **out,
                    gt_err *err)
{
    *out = NULL;
    const gt_backend_entry *e = gt_backend_find(name);
    if (!e) {
        const gt_backend_entry *all;
        int n = gt_backend_registry(&all);
        char names[256] = "";
        for (int i = 0; i < n; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, all[i].name, sizeof names - strlen(names) - 1);
        }
        return gt_err_set(err, "unknown backend '%s' (known: %s)", name, names);
    }
    if (!e->reg)
        return gt_err_set(err, "backend %s not available: %s", name, e->why);
    gt_backend_config def = {0};
    if (e->reg->init(cfg ? cfg : &def, out, err) != 0)
        return gt_err_wrap(err, "backend %s", name);
    return 0;
}

void gt_backend_close(gt_backend *b)
{
    if (b)
        b->iface->free(b);
}

int gt_backend_compute(gt_backend *b, const gt_graph *g, gt_err *err)
{
    return b->iface->compute(b, g, err);
}

bool gt_backend_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    return b->iface->supports(b, op, type, why, why_len);
}

/* Host buffers: 64-byte aligned so SIMD kernels may use aligned loads on
 * activations. A wrapped buffer (weights) points at the caller's bytes. */
int gt_host_buffer_alloc(gt_backend *b, size_t size, gt_buffer **out, gt_err *err)
{
    gt_buffer *buf = calloc(1, sizeof *buf);
    void *mem = NULL;
    if (!buf || posix_memalign(&mem, 64, size ? size : 64) != 0) {
        free(buf);
        return gt_err_set(err, "out of memory allocating a %zu-byte host buffer", size);
    }
    memset(mem, 0, size);
    buf->backend = b;
    buf->size = size;
    buf->host = mem;
    buf->impl = mem; /* owned: freed with the buffer */
    *out = buf;
    return 0;
}

int gt_host_buffer_from_host(gt_backend *b, const void *host, size_t size, gt_buffer **out,
                             gt_err *err)
{
    gt_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return gt_err_set(err, "out of memory");
    buf->backend = b;
    buf->size = size;
    buf->host = (void *)host; /* read-only by contract: weights are never written */
    buf->impl = NULL;         /* not owned */
    *out = buf;
    return 0;
}

void gt_host_buffer_free(gt_buffer *buf)
{
    if (!buf)
        return;
    free(buf->impl);
    free(buf);
}

int gt_host_upload(gt_buffer *buf, size_t offset, const void *src, size_t n, gt_err *err)
{
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "upload of %zu bytes at %zu overruns a %zu-byte buffer", n, offset,
                          buf->size);
    memcpy((char *)buf->host + offset, src, n);
    return 0;
}

int gt_host_download(gt_buffer *buf, size_t offset, void *dst, size_t n, gt_err *err)
{
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "download of %zu bytes at %zu overruns a %zu-byte buffer", n,
                          offset, buf->size);
    memcpy(dst, (const char *)buf->host + offset, n);
    return 0;
}
