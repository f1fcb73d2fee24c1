/* suite.c: the helpers suites report through (see suite.h); the table of
 * suites is suite_table.c, above every suite. The helpers only format and route: the worker's gt_suite_host
 * callbacks decide where things go (JSON lines on the result pipe). */
#include "suite.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numerics.h"
#include "refkey.h"
#include "base.h"
#include "gt/fault.h"

#ifndef GT_VERSION
#define GT_VERSION "0.0.0"
#endif

const gt_metric_def *gt_suite_metric_def(const gt_suite *s, const char *name)
{
    for (const gt_metric_def *d = s ? s->metrics : NULL; d && d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

const gt_setting_def *gt_suite_setting_def(const gt_suite *s, const char *name)
{
    for (const gt_setting_def *d = s ? s->settings : NULL; d && d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

static void vresult(gt_suite_ctx *c, const char *check, gt_status st, const char *fmt,
                    va_list ap)
{
    char msg[2048] = "";
    if (fmt)
        vsnprintf(msg, sizeof msg, fmt, ap);
    if (st == GT_ST_FAIL || st == GT_ST_ERROR)
        c->n_failed++;
    c->host->result(c->host_data, c->suite->name, check, st, msg);
}

int gt_suite_ints(const gt_suite_ctx *c, const char *name, int64_t *out, int max, gt_err *err)
{
    const cJSON *v = gt_suite_setting(c, name);
    if (!v)
        return 0;
    if (cJSON_IsObject(v)) {
        const cJSON *mine = cJSON_GetObjectItemCaseSensitive(v, c->model_id);
        v = mine ? mine : cJSON_GetObjectItemCaseSensitive(v, "*");
        if (!v)
            return gt_err_set(err, "setting %s names neither model %s nor \"*\"", name,
                              c->model_id);
    }
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
        if (n < max)
            out[n++] = (int64_t)e->valuedouble;
    return n;
}

bool gt_suite_cell_selected(const gt_suite_ctx *c)
{
    const cJSON *globs = gt_suite_setting(c, "cells");
    if (!globs)
        return true;
    for (const cJSON *g = globs->child; g; g = g->next)
        if (cJSON_IsString(g) && fnmatch(g->valuestring, c->cell_id, 0) == 0)
            return true;
    return false;
}

void gt_suite_point(gt_suite_ctx *c, const char *series, double x, double y)
{
    if (c->host->point)
        c->host->point(c->host_data, c->suite->name, series, x, y);
    else
        gt_suite_log(c, "%s.%s: (%g, %g) (this host keeps no series)", c->suite->name, series, x,
                     y);
}

void gt_suite_result(gt_suite_ctx *c, const char *check, gt_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vresult(c, check, st, fmt, ap);
    va_end(ap);
}

bool gt_suite_check(gt_suite_ctx *c, const char *check, bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vresult(c, check, ok ? GT_ST_PASS : GT_ST_FAIL, fmt, ap);
    va_end(ap);
    return ok;
}

gt_status gt_suite_metric(gt_suite_ctx *c, const char *name, double value)
{
    const gt_metric_def *d = gt_suite_metric_def(c->suite, name);
    if (!d) {
        gt_suite_result(c, name, GT_ST_ERROR, "suite reported undeclared metric %s", name);
        return GT_ST_ERROR;
    }
    char key[160];
    snprintf(key, sizeof key, "%s.%s", c->suite->name, name);
    const cJSON *spec = c->tolerances ? cJSON_GetObjectItemCaseSensitive(c->tolerances, key) : NULL;
    const char *cmp;
    double tol;
    gt_status v = gt_tol_eval(spec, value, &cmp, &tol);
    if (v == GT_ST_FAIL)
        c->n_failed++;
    c->host->metric(c->host_data, c->suite->name, d, value, cmp, tol, v);
    return v;
}

void gt_suite_log(gt_suite_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", c->suite ? c->suite->name : "worker");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const cJSON *gt_suite_setting(const gt_suite_ctx *c, const char *name)
{
    return c->settings ? cJSON_GetObjectItemCaseSensitive(c->settings, name) : NULL;
}

int64_t gt_suite_int(const gt_suite_ctx *c, const char *name, int64_t def)
{
    const cJSON *n = gt_suite_setting(c, name);
    return cJSON_IsNumber(n) ? (int64_t)n->valuedouble : def;
}

double gt_suite_num(const gt_suite_ctx *c, const char *name, double def)
{
    const cJSON *n = gt_suite_setting(c, name);
    return cJSON_IsNumber(n) ? n->valuedouble : def;
}

bool gt_suite_bool(const gt_suite_ctx *c, const char *name, bool def)
{
    const cJSON *n = gt_suite_setting(c, name);
    return cJSON_IsBool(n) ? cJSON_IsTrue(n) : def;
}

const char *gt_suite_str(const gt_suite_ctx *c, const char *name, const char *def)
{
    const cJSON *n = gt_suite_setting(c, name);
    return cJSON_IsString(n) ? n->valuestring : def;
}

const char *const GT_SUITE_FAULT_KINDS[] = {"perturb-logits", "nan-logits", "nondeterministic",
                                              "leak", NULL};

bool gt_suite_fault(const gt_suite_ctx *c, const char *kind, double *arg)
{
    size_t kl = strlen(kind);
    for (const char *p = c->faults; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= kl && strncmp(p, kind, kl) == 0 && (len == kl || p[kl] == '=')) {
            if (arg)
                *arg = len > kl ? atof(p + kl + 1) : 0;
            return true;
        }
        p += len + (end ? 1 : 0);
    }
    return false;
}

int gt_suite_model(gt_suite_ctx *c, gt_model **out, gt_err *err)
{
    if (!c->model && gt_model_load(c->model_path, &c->model, err) != 0)
        return -1;
    *out = c->model;
    return 0;
}

void gt_suite_ref_key(const gt_suite_ctx *c, const char *kind, const char *data_hash,
                      const char *settings, char key[65])
{
    /* The versions of the oracle are part of the key (refkey.h), and so are
     * the runtime faults on the reference (gt/fault.h): a faulted reference
     * is another oracle, never served to a clean run. */
    const char *fault = gt_fault_active("reference");
    char version[600];
    snprintf(version, sizeof version, "%s%s%s", GT_VERSION, fault[0] ? "+fault:" : "", fault);
    gt_ref_key(kind, c->model_sha256, c->quant, data_hash, settings, version,
               GT_NUMERICS_VERSION, key);
}

int gt_suite_ref_get(gt_suite_ctx *c, const char *key, void **data, size_t *size, gt_err *err)
{
    return c->host->ref_get(c->host_data, key, data, size, err);
}

int gt_suite_ref_put(gt_suite_ctx *c, const char *key, const char *meta, const void *data,
                     size_t size, gt_err *err)
{
    return c->host->ref_put(c->host_data, key, meta, data, size, err);
}

double gt_suite_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
