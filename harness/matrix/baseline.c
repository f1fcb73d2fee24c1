/* baseline.c: a matrix's bounds against what a baseline run measured (see
 * matrix.h, baselines).
 *
 * A bound that is 10^6 times looser than what it judges passes a backend a
 * million times worse: it is a number, not a check. So a matrix is read
 * beside its baselines file (matrices/baselines/<name>.json: per metric,
 * per cell id or glob, the worst value a recorded run measured), and every
 * bound, as written, is set against the worst value of the cells it covers
 * in every tier; a slack above GT_TOL_LOOSE (base/tolerance.h, the same
 * arithmetic as `gauntlet db headroom`) is an error unless its note says
 * "loose: <why>". A bound with no baseline value for a cell is listed, not
 * failed: matrices name hardware the measuring machine does not have
 * (cuda, opencl), and failing them would only push someone to invent a
 * number; the list (with the baseline's "unmeasured" reasons) keeps them in
 * view. Format: matrices/README.md, "Baselines". */
#include <fnmatch.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "matrix.h"
#include "suite.h"
#include "base.h"

struct gt_baseline {
    char *path;
    cJSON *doc;
    const cJSON *worst;      /* {"suite.metric": {"cell glob": value}} */
    const cJSON *unmeasured; /* [{"cell": glob, "reason": text}] or NULL */
};

static const char *const TOP_KEYS[] = {"matrix", "description", "provenance", "worst",
                                       "unmeasured", NULL};
static const char *const PROV_KEYS[] = {"command", "date", "commit", "machine", "run", "note",
                                        NULL};

static int check_doc(gt_baseline *b, gt_err *err)
{
    gt_jv v = {b->path, err};
    const cJSON *d = b->doc, *prov;
    const char *s;
    if (gt_jv_object(&v, d, "", TOP_KEYS) || gt_jv_str(&v, d, "", "matrix", true, &s) ||
        gt_jv_obj(&v, d, "", "provenance", true, &prov) ||
        gt_jv_object(&v, prov, "provenance", PROV_KEYS))
        return -1;
    for (int i = 0; i < 4; i++) /* command, date, commit, machine: who measured what, where */
        if (gt_jv_str(&v, prov, "provenance", PROV_KEYS[i], true, &s))
            return -1;
    if (gt_jv_obj(&v, d, "", "worst", true, &b->worst))
        return -1;
    char p[GT_JV_PATH];
    for (const cJSON *m = b->worst->child; m; m = m->next) {
        gt_jv_key(p, "worst", m->string);
        if (!cJSON_IsObject(m))
            return gt_jv_fail(&v, p, "expected an object {\"cell glob\": value}");
        if (!strchr(m->string, '.'))
            return gt_jv_fail(&v, p, "expected a metric named suite.metric");
        for (const cJSON *c = m->child; c; c = c->next)
            if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)) {
                char q[GT_JV_PATH];
                return gt_jv_fail(&v, gt_jv_key(q, p, c->string), "expected a finite number");
            }
    }
    b->unmeasured = cJSON_GetObjectItemCaseSensitive(d, "unmeasured");
    if (b->unmeasured) {
        if (!cJSON_IsArray(b->unmeasured))
            return gt_jv_fail(&v, "unmeasured", "expected an array of {cell, reason}");
        static const char *const UK[] = {"cell", "reason", NULL};
        int i = 0;
        for (const cJSON *u = b->unmeasured->child; u; u = u->next, i++) {
            snprintf(p, sizeof p, "unmeasured[%d]", i);
            if (gt_jv_object(&v, u, p, UK) || gt_jv_str(&v, u, p, "cell", true, &s) ||
                gt_jv_str(&v, u, p, "reason", true, &s))
                return -1;
        }
    }
    return 0;
}

int gt_baseline_load(const char *path, gt_baseline **out, gt_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gt_err_set(err, "%s: cannot open baseline", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *t = realloc(text, cap = cap * 2 + 8192);
            if (!t) {
                free(text);
                fclose(f);
                return gt_err_set(err, "out of memory");
            }
            text = t;
        }
        size_t r = fread(text + len, 1, cap - len - 1, f);
        len += r;
        if (r == 0)
            break;
    }
    fclose(f);
    text[len] = '\0';
    gt_baseline *b = calloc(1, sizeof *b);
    if (!b || !(b->path = strdup(path))) {
        free(b);
        free(text);
        return gt_err_set(err, "out of memory");
    }
    int pr = gt_jv_parse(path, text, len, &b->doc, err);
    free(text);
    if (pr != 0) {
        gt_baseline_free(b);
        return -1;
    }
    if (check_doc(b, err) != 0) {
        gt_baseline_free(b);
        return -1;
    }
    *out = b;
    return 0;
}

void gt_baseline_free(gt_baseline *b)
{
    if (!b)
        return;
    cJSON_Delete(b->doc);
    free(b->path);
    free(b);
}

void gt_baseline_default_path(const gt_matrix *m, char *out, size_t cap)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", m->file);
    snprintf(out, cap, "%s/baselines/%s.json", dirname(dir), m->name);
}

/* The worst value over every entry of metric whose glob matches id. */
static bool lookup(const gt_baseline *b, const char *metric, const char *id, double *worst,
                   const char *cmp)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(b->worst, metric);
    bool found = false;
    for (const cJSON *c = m ? m->child : NULL; c; c = c->next) {
        if (fnmatch(c->string, id, 0) != 0)
            continue;
        double v = c->valuedouble;
        if (!found || (strcmp(cmp, ">=") == 0 ? v < *worst : v > *worst))
            *worst = v;
        found = true;
    }
    return found;
}

static const char *unmeasured_reason(const gt_baseline *b, const char *id)
{
    for (const cJSON *u = b->unmeasured ? b->unmeasured->child : NULL; u; u = u->next) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(u, "cell");
        if (fnmatch(c->valuestring, id, 0) == 0)
            return cJSON_GetObjectItemCaseSensitive(u, "reason")->valuestring;
    }
    return NULL;
}

/* One line per (metric, cell) seen, so tiers sharing cells report once. */
typedef struct seen {
    char key[GT_CELL_ID_MAX + 96];
} seen;

static bool seen_add(seen **s, int *n, int *cap, const char *metric, const char *id)
{
    char key[sizeof(*s)->key];
    snprintf(key, sizeof key, "%s %s", metric, id);
    for (int i = 0; i < *n; i++)
        if (strcmp((*s)[i].key, key) == 0)
            return false;
    if (*n == *cap) {
        seen *t = realloc(*s, (size_t)(*cap = *cap ? *cap * 2 : 256) * sizeof *t);
        if (!t)
            return false;
        *s = t;
    }
    snprintf((*s)[(*n)++].key, sizeof key, "%s", key);
    return true;
}

/* One bound as written (metric, comparator, value, whether its note is
 * marked loose) and the cells it covers: like `gauntlet db headroom`, its
 * slack is against the worst value over the covered cells that the
 * baseline measured (a quant-wide bound also covers the reference cells,
 * which measure 0 against themselves; what it must catch is the worst
 * backend's value). */
typedef struct bound {
    char metric[96];
    const char *cmp, *why; /* a literal; the baseline's text */
    double value, worst;
    bool noted, ratio;
    int n_measured, n_unmeasured;
    char worst_cell[GT_CELL_ID_MAX], first_unmeasured[GT_CELL_ID_MAX];
} bound;

static bound *bound_get(bound **g, int *n, int *cap, const char *metric, const char *cmp,
                        double value, bool noted)
{
    for (int i = 0; i < *n; i++)
        if (strcmp((*g)[i].metric, metric) == 0 && strcmp((*g)[i].cmp, cmp) == 0 &&
            (*g)[i].value == value && (*g)[i].noted == noted)
            return &(*g)[i];
    if (*n == *cap) {
        bound *t = realloc(*g, (size_t)(*cap = *cap ? *cap * 2 : 32) * sizeof *t);
        if (!t)
            return NULL;
        *g = t;
    }
    bound *e = &(*g)[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->metric, sizeof e->metric, "%s", metric);
    e->cmp = cmp;
    e->value = value;
    e->noted = noted;
    return e;
}

int gt_matrix_check_baseline(const gt_matrix *m, const gt_baseline *b, FILE *report,
                             gt_err *err)
{
    seen *s = NULL;
    bound *g = NULL;
    int ng = 0, cg = 0, ns = 0, cs = 0;
    for (int t = 0; t < m->n_tiers; t++) {
        gt_cell *cells;
        int n;
        if (gt_matrix_expand(m, &m->tiers[t], &cells, &n, err) != 0) {
            free(s);
            free(g);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            for (const cJSON *spec = cells[i].tolerances->child; spec; spec = spec->next) {
                const char *metric = spec->string, *cmp;
                double value, worst = 0;
                gt_tol_eval(spec, 0, &cmp, &value);
                if (strcmp(cmp, "==") == 0 || !cmp[0])
                    continue; /* an exact bound has no slack */
                /* Only metrics a suite of this tier reports (a matrix-wide
                 * bound on accuracy is not a bound of the smoke tier). */
                char suite[64];
                const char *dot = strchr(metric, '.');
                snprintf(suite, sizeof suite, "%.*s", dot ? (int)(dot - metric) : 0, metric);
                bool in_tier = false;
                for (int k = 0; k < cells[i].n_suites && !in_tier; k++)
                    in_tier = strcmp(cells[i].suites[k], suite) == 0;
                if (!in_tier || !seen_add(&s, &ns, &cs, metric, cells[i].id))
                    continue;
                bound *e = bound_get(&g, &ng, &cg, metric, cmp, value, gt_tol_loose_noted(spec));
                if (!e)
                    continue;
                if (!lookup(b, metric, cells[i].id, &worst, cmp)) {
                    if (!e->n_unmeasured++) {
                        snprintf(e->first_unmeasured, sizeof e->first_unmeasured, "%s",
                                 cells[i].id);
                        e->why = unmeasured_reason(b, cells[i].id);
                    }
                    continue;
                }
                if (!e->n_measured++ ||
                    (strcmp(cmp, ">=") == 0 ? worst < e->worst : worst > e->worst)) {
                    e->worst = worst;
                    snprintf(e->worst_cell, sizeof e->worst_cell, "%s", cells[i].id);
                }
                const gt_suite *su = gt_suite_find(suite);
                const gt_metric_def *d = su ? gt_suite_metric_def(su, dot + 1) : NULL;
                e->ratio = d && d->unit && strcmp(d->unit, "ratio") == 0;
            }
        }
        gt_cells_free(cells, n);
    }
    free(s);
    int n_loose = 0, n_checked = 0, n_unmeasured = 0;
    char first[512] = "";
    for (int i = 0; i < ng; i++) {
        bound *e = &g[i];
        if (e->n_unmeasured) {
            n_unmeasured++;
            if (report)
                fprintf(report,
                        "%s: baseline: %s %s %g not measured on %d of its %d cells (first %s: "
                        "%s)\n",
                        m->file, e->metric, e->cmp, e->value, e->n_unmeasured,
                        e->n_unmeasured + e->n_measured, e->first_unmeasured,
                        e->why ? e->why : "no value in the baseline");
        }
        if (!e->n_measured)
            continue;
        n_checked++;
        double slack = gt_tol_slack(e->cmp, e->value, e->worst, e->ratio);
        if (slack <= GT_TOL_LOOSE || e->noted)
            continue;
        char line[512];
        snprintf(line, sizeof line,
                 "%s %s %g is %.3gx looser than its baseline (worst %.3g, cell %s; %d cells "
                 "measured), more than %.0fx; tighten it or say why in its note (\"%s ...\")",
                 e->metric, e->cmp, e->value, slack, e->worst, e->worst_cell, e->n_measured,
                 GT_TOL_LOOSE, GT_TOL_LOOSE_MARKER);
        if (report)
            fprintf(report, "%s: %s\n", m->file, line);
        if (!n_loose++)
            snprintf(first, sizeof first, "%s", line);
    }
    free(g);
    if (report)
        fprintf(report,
                "%s: baseline %s: %d bounds checked, %d too loose, %d with cells not measured\n",
                m->file, b->path, n_checked, n_loose, n_unmeasured);
    if (n_loose)
        return gt_err_set(err, "%s: %s%s", m->file, first,
                          n_loose > 1 ? " (and more, listed above)" : "");
    return 0;
}

int gt_matrix_validate_baseline(const gt_matrix *m, const char *path, FILE *report,
                                gt_err *err)
{
    char def[4096];
    if (!path) {
        gt_baseline_default_path(m, def, sizeof def);
        if (access(def, F_OK) != 0) {
            if (report)
                fprintf(report, "%s: no baseline (%s): its bounds are not checked against a "
                                "measurement\n",
                        m->file, def);
            return 0;
        }
        path = def;
    }
    gt_baseline *b;
    if (gt_baseline_load(path, &b, err) != 0)
        return -1;
    int r = gt_matrix_check_baseline(m, b, report, err);
    gt_baseline_free(b);
    return r;
}
