/* cpu_blas.c: the CPU backend's driver axis, a BLAS found at run time.
 *
 * Which BLAS computes the batched matrix products is a qualification axis
 * (OpenBLAS pthread / OpenMP, reference BLAS, BLIS ...), so it is loaded with
 * dlopen from the driver profile rather than linked: "blas=PATH" names a
 * library, "blas=none" turns BLAS off, no setting means libopenblas.so.0.
 * Only cblas_sgemm is needed. Not finding it is not an error: the backend
 * falls back to its own kernels and the device info says so.
 *
 * Name and version: OpenBLAS describes itself (openblas_get_config gives
 * "OpenBLAS 0.3.21 DYNAMIC_ARCH ...", openblas_get_parallel the threading
 * model); for any other library the version is read from the real file name
 * behind the soname (libblas.so.3 -> libblas.so.3.11.0).
 *
 * OpenBLAS's DYNAMIC_ARCH build picks its kernels from the CPU model number,
 * and a release older than the CPU (0.3.21 on a newer Xeon, or any CPU a
 * hypervisor reports with an unfamiliar model) falls back to "Prescott"
 * SSE3 kernels, 5-6x slower than it could be. So unless OPENBLAS_CORETYPE is
 * already set, it is set from the features __builtin_cpu_supports reports
 * (AVX-512 -> SkylakeX, AVX2+FMA -> Haswell) before the first dlopen; other
 * BLAS libraries ignore it. The kernel set in use is reported either way
 * (openblas_get_corename), so a cell records what really ran.
 *
 * Handles are cached and never closed: OpenBLAS keeps worker threads that
 * must not outlive their code, and a second backend instance asking for the
 * same library should get the same one. */
#include "cpu.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BLAS "libopenblas.so.0"
#define MAX_CACHED 8

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static gt_cpu_blas g_cache[MAX_CACHED];
static int g_n_cache;

static void set_coretype(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (getenv("OPENBLAS_CORETYPE"))
        return;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        setenv("OPENBLAS_CORETYPE", "Haswell", 0);
#endif
}

/* "0.3.21" out of "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
static void openblas_describe(void *h, gt_cpu_blas *b)
{
    typedef char *(*config_fn)(void);
    typedef int (*parallel_fn)(void);
    config_fn cfg = (config_fn)dlsym(h, "openblas_get_config");
    parallel_fn par = (parallel_fn)dlsym(h, "openblas_get_parallel");
    const char *c = cfg ? cfg() : NULL;
    const int p = par ? par() : -1;
    const char *model = p == 0 ? "sequential" : p == 1 ? "pthread" : p == 2 ? "OpenMP" : "unknown threading";
    snprintf(b->driver, sizeof b->driver, "OpenBLAS (%s)", model);
    b->version[0] = '\0';
    if (c && strncmp(c, "OpenBLAS ", 9) == 0) {
        size_t n = strcspn(c + 9, " ");
        if (n >= sizeof b->version)
            n = sizeof b->version - 1;
        memcpy(b->version, c + 9, n);
        b->version[n] = '\0';
    }
    if (!b->version[0])
        snprintf(b->version, sizeof b->version, "unknown");
    config_fn core = (config_fn)dlsym(h, "openblas_get_corename");
    const char *cn = core ? core() : NULL;
    snprintf(b->core, sizeof b->core, "%s", cn ? cn : "unknown");
}

/* The version suffix of the file the handle really maps. */
static void file_describe(void *h, gt_cpu_blas *b)
{
    struct link_map *lm = NULL;
    char real[PATH_MAX] = "";
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) {
        if (!realpath(lm->l_name, real))
            snprintf(real, sizeof real, "%s", lm->l_name);
    }
    const char *base = strrchr(real[0] ? real : b->path, '/');
    base = base ? base + 1 : (real[0] ? real : b->path);
    snprintf(b->driver, sizeof b->driver, "BLAS (%.100s)", base);
    const char *so = strstr(base, ".so.");
    snprintf(b->version, sizeof b->version, "%s", so ? so + 4 : "unknown");
}

static void load_uncached(const char *path, gt_cpu_blas *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    if (strcmp(path, "none") == 0) {
        snprintf(b->why, sizeof b->why, "BLAS disabled by the driver profile (blas=none)");
    } else {
        set_coretype();
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(b->why, sizeof b->why, "%.180s", e ? e : "dlopen failed");
        } else {
            b->sgemm = (gt_cpu_sgemm_fn)dlsym(h, "cblas_sgemm");
            if (!b->sgemm) {
                snprintf(b->why, sizeof b->why, "%.120s has no cblas_sgemm", path);
                dlclose(h);
            } else {
                b->set_num_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
                if (dlsym(h, "openblas_get_config"))
                    openblas_describe(h, b);
                else
                    file_describe(h, b);
            }
        }
    }
    if (!b->sgemm) {
        snprintf(b->driver, sizeof b->driver, "none (built-in kernels)");
        snprintf(b->version, sizeof b->version, "-");
    }
}

void gt_cpu_blas_load(const char *driver, gt_cpu_blas *blas)
{
    char path[256] = DEFAULT_BLAS;
    /* The profile string may carry other settings too: "blas=X,foo=bar". */
    const char *p = driver ? strstr(driver, "blas=") : NULL;
    if (p && (p == driver || p[-1] == ',' || p[-1] == ' ')) {
        p += 5;
        size_t n = strcspn(p, ", ");
        if (n >= sizeof path)
            n = sizeof path - 1;
        memcpy(path, p, n);
        path[n] = '\0';
        if (!path[0])
            snprintf(path, sizeof path, "%s", DEFAULT_BLAS);
    }
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n_cache; i++) {
        if (strcmp(g_cache[i].path, path) == 0) {
            *blas = g_cache[i];
            pthread_mutex_unlock(&g_mu);
            return;
        }
    }
    load_uncached(path, blas);
    if (g_n_cache < MAX_CACHED)
        g_cache[g_n_cache++] = *blas;
    pthread_mutex_unlock(&g_mu);
}
