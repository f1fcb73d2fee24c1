/* backend.c: the backend registry. It names no backend: the build generates
 * the table of built-in entry functions and plugin names
 * (backends/CMakeLists.txt writes backends_builtin.c), so adding a backend
 * touches backends/ only.
 *
 * Plugins are looked up once, lazily, as libgt-backend-<name>.so in
 * $GT_BACKEND_PATH (colon-separated) and then beside the executable. A plugin
 * that is missing or fails to load is still listed, with the reason, so that
 * "not available: libcudart.so.12: cannot open shared object file" is what a
 * user sees rather than a link error. */
#include "gt/backend.h"
#include "backend_table.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The generated table: built-ins register through an entry function of the
 * plugins' signature; plugins are looked up by name. */
#define N_MAX 16

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

static gt_backend_entry g_entries[N_MAX];
static bool g_loaded[N_MAX];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t n_builtins(void)
{
    size_t n = 0;
    while (gt_backend_builtins[n].name)
        n++;
    return n;
}

static size_t n_entries(void)
{
    size_t n = n_builtins();
    for (size_t i = 0; gt_backend_plugins[i]; i++)
        n++;
    return n < N_MAX ? n : N_MAX;
}

static const char *entry_name(size_t i)
{
    size_t nb = n_builtins();
    return i < nb ? gt_backend_builtins[i].name : gt_backend_plugins[i - nb];
}

/* Entry i, with its plugin loaded on first use: a cell that runs on cpu
 * should not pay for dlopen'ing cuBLAS (~100 ms) just to be listed. */
static const gt_backend_entry *entry_at(size_t i)
{
    pthread_mutex_lock(&g_lock);
    if (!g_loaded[i]) {
        size_t nb = n_builtins();
        if (i < nb)
            g_entries[i] = (gt_backend_entry){.name = gt_backend_builtins[i].name,
                                              .reg = gt_backend_builtins[i].entry()};
        else
            load_plugin(&g_entries[i], gt_backend_plugins[i - nb]);
        g_loaded[i] = true;
    }
    pthread_mutex_unlock(&g_lock);
    return &g_entries[i];
}

int gt_backend_registry(const gt_backend_entry **out)
{
    size_t n = n_entries();
    for (size_t i = 0; i < n; i++)
        entry_at(i);
    *out = g_entries;
    return (int)n;
}

const gt_backend_entry *gt_backend_find(const char *name)
{
    size_t n = n_entries();
    for (size_t i = 0; i < n; i++)
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
    if (!cfg)
        cfg = &def;
    if (cfg->n_batch < 0 || cfg->n_parallel < 0)
        return gt_err_set(err, "backend %s: n_batch %d and n_parallel %d must be >= 0", name,
                          cfg->n_batch, cfg->n_parallel);
    if (e->reg->init(cfg, out, err) != 0)
        return gt_err_wrap(err, "backend %s", name);
    (*out)->exec = (gt_exec_settings){cfg->n_threads, cfg->n_batch, cfg->n_parallel,
                                      cfg->kv_type};
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

