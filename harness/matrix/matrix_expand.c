/* matrix_expand.c: from a validated matrix to the list of cells of a tier.
 *
 * Order: the cross product (models × each model's quants × backends × their
 * driver profiles × their settings variants, all in the order written; see
 * matrix_settings.c for the variants' order), then "include" cells appended
 * in order, then "exclude" removes cells, then the tier's "cells" filter.
 * Each surviving cell's index in that list is its shard key, so sharding is
 * a pure function of the matrix and tier.
 *
 * The same expansion, run once over all cells at load time, is how rules are
 * validated: each must match at least one cell (gt_matrix_check_rules). */
#include "matrix.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "matrix_parse.h"
#include "quant_scheme.h"
#include "suite.h"

typedef struct raw_cell {
    char id[GT_CELL_ID_MAX];
    const gt_mx_model *model;
    const char *quant;
    const gt_mx_backend *backend;
    const gt_mx_driver *driver;
    const gt_mx_setting *setting;
    bool excluded;
} raw_cell;

bool gt_rule_match(const gt_mx_rule *r, const char *cell_id)
{
    char buf[GT_CELL_ID_MAX];
    snprintf(buf, sizeof buf, "%s", cell_id);
    if (r->glob && fnmatch(r->glob, cell_id, 0) != 0) {
        /* A pattern written for the four-part id covers the cell's settings
         * variants: try it on the id without its fifth part. */
        char *s = buf;
        for (int slashes = 0; *s && slashes < 4; s++)
            slashes += *s == '/';
        if (!*s || (s[-1] = '\0', fnmatch(r->glob, buf, 0) != 0))
            return false;
        snprintf(buf, sizeof buf, "%s", cell_id);
    }
    char *part[5] = {0}, *save = NULL;
    char *tok = strtok_r(buf, "/", &save);
    for (int i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, "/", &save))
        part[i] = tok;
    for (int a = 0; a < 5; a++)
        if (r->axis[a] && (!part[a] || fnmatch(r->axis[a], part[a], 0) != 0))
            return false;
    return true;
}

static bool any_match(const gt_mx_rule *r, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (gt_rule_match(&r[i], id))
            return true;
    return false;
}

/* "model/quant/backend/driver", "/settings" when the variant has an id. */
static void cell_id(char *out, size_t cap, const gt_mx_model *md, const char *q,
                    const gt_mx_backend *b, const gt_mx_driver *d, const gt_mx_setting *s)
{
    snprintf(out, cap, "%s/%s/%s/%s%s%s", md->id, q, b->id, d->id, s->id[0] ? "/" : "", s->id);
}

static int push(raw_cell **list, int *n, int *cap, const gt_mx_model *md, const char *q,
                const gt_mx_backend *b, const gt_mx_driver *d, const gt_mx_setting *s)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        raw_cell *nl = realloc(*list, (size_t)nc * sizeof *nl);
        if (!nl)
            return -1;
        *list = nl;
        *cap = nc;
    }
    raw_cell *c = &(*list)[(*n)++];
    memset(c, 0, sizeof *c);
    cell_id(c->id, sizeof c->id, md, q, b, d, s);
    c->model = md, c->quant = q, c->backend = b, c->driver = d, c->setting = s;
    return 0;
}

static const char *find_quant(const gt_matrix *m, const gt_mx_model *md, const char *q)
{
    for (int i = 0; i < m->n_quants; i++)
        if (strcmp(m->quants[i], q) == 0)
            return m->quants[i];
    for (const cJSON *c = md->quants ? md->quants->child : NULL; c; c = c->next)
        if (strcmp(c->valuestring, q) == 0)
            return c->valuestring;
    return NULL;
}

static bool has_glob(const char *s) { return s && strpbrk(s, "*?[") != NULL; }

/* The product plus includes, minus excludes; v non-NULL validates the
 * include/exclude rules as it goes. */
static int build(const gt_matrix *m, const gt_jv *v, raw_cell **out, int *n_out, gt_err *err)
{
    raw_cell *list = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < m->n_models; i++) {
        const gt_mx_model *md = &m->models[i];
        const cJSON *mq = md->quants ? md->quants->child : NULL;
        int nq = md->quants ? cJSON_GetArraySize(md->quants) : m->n_quants;
        for (int q = 0; q < nq; q++, mq = mq ? mq->next : NULL) {
            const char *qn = md->quants ? mq->valuestring : m->quants[q];
            for (int b = 0; b < m->n_backends; b++) {
                const gt_mx_backend *be = &m->backends[b];
                for (int d = 0; d < be->n_drivers; d++)
                    for (int st = 0; st < be->n_settings; st++)
                        if (push(&list, &n, &cap, md, qn, be, &be->drivers[d], &be->settings[st]))
                            goto oom;
            }
        }
    }
    for (int r = 0; r < m->n_include; r++) {
        const gt_mx_rule *ru = &m->include[r];
        const char *const *ax = ru->axis;
        if (v && (ru->glob || !ax[0] || !ax[1] || !ax[2] || has_glob(ax[0]) ||
                  has_glob(ax[1]) || has_glob(ax[2]) || has_glob(ax[3]) || has_glob(ax[4]))) {
            free(list);
            return gt_jv_fail(v, ru->path, "an include names one cell: exact \"model\", "
                                           "\"quant\", \"backend\" (and \"driver\" unless the "
                                           "backend has one profile, \"settings\" unless it has "
                                           "one variant), no patterns");
        }
        const gt_mx_model *md = NULL;
        const gt_mx_backend *be = NULL;
        for (int i = 0; i < m->n_models; i++)
            if (strcmp(m->models[i].id, ax[0]) == 0)
                md = &m->models[i];
        for (int i = 0; i < m->n_backends; i++)
            if (strcmp(m->backends[i].id, ax[2]) == 0)
                be = &m->backends[i];
        const char *q = md ? find_quant(m, md, ax[1]) : NULL;
        if (!q && md && gt_quant_scheme_ok(ax[1], NULL))
            q = ax[1]; /* a quant used only by this include: points into the doc */
        const gt_mx_driver *dr = NULL;
        for (int i = 0; be && i < be->n_drivers; i++)
            if (ax[3] ? strcmp(be->drivers[i].id, ax[3]) == 0 : be->n_drivers == 1)
                dr = &be->drivers[i];
        if (v && ru->settings && be && be->is_http) {
            free(list);
            return gt_jv_fail(v, ru->path, "http backend \"%s\" cannot take settings: "
                                           "n_batch, n_parallel, threads and kv_type are for "
                                           "in-process backends", be->id);
        }
        /* The include's own grid, or one of the backend's variants. */
        const gt_mx_setting *se = NULL;
        if (ru->settings)
            se = be && be->is_http ? NULL : &ru->settings[0];
        for (int i = 0; be && !ru->settings && i < be->n_settings; i++)
            if (ax[4] ? strcmp(be->settings[i].id, ax[4]) == 0 : be->n_settings == 1)
                se = &be->settings[i];
        if (v && (!md || !q || !be || !dr || !se)) {
            free(list);
            return gt_jv_fail(v, ru->path, "%s \"%s\" is not in the matrix",
                              !md ? "model" : !q ? "quant" : !be ? "backend" : !dr ? "driver profile"
                                                                                 : "settings variant",
                              !md   ? ax[0]
                              : !q  ? ax[1]
                              : !be ? ax[2]
                              : !dr ? (ax[3] ? ax[3] : "(none)")
                                    : (ax[4] ? ax[4] : "(none)"));
        }
        if (!md || !q || !be || !dr || !se)
            continue;
        for (int s = 0; s < (ru->settings ? ru->n_settings : 1); s++) {
            if (ru->settings)
                se = &ru->settings[s];
            char id[GT_CELL_ID_MAX];
            cell_id(id, sizeof id, md, q, be, dr, se);
            bool dup = false;
            for (int i = 0; i < n; i++)
                dup |= strcmp(list[i].id, id) == 0;
            if (dup && v) {
                free(list);
                return gt_jv_fail(v, ru->path, "cell %s is already in the matrix", id);
            }
            if (!dup && push(&list, &n, &cap, md, q, be, dr, se))
                goto oom;
        }
    }
    for (int r = 0; r < m->n_exclude; r++) {
        int hits = 0;
        for (int i = 0; i < n; i++)
            if (gt_rule_match(&m->exclude[r], list[i].id))
                list[i].excluded = true, hits++;
        if (v && hits == 0) {
            free(list);
            return gt_jv_fail(v, m->exclude[r].path, "exclude matches no cell");
        }
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!list[i].excluded)
            list[k++] = list[i];
    *out = list;
    *n_out = k;
    return 0;
oom:
    free(list);
    return gt_err_set(err, "%s: out of memory expanding the matrix", m->file);
}

static int rules_hit(const gt_jv *v, const gt_mx_rule *r, int nr, const raw_cell *cells,
                     int n, const char *what)
{
    for (int i = 0; i < nr; i++) {
        bool hit = false;
        for (int j = 0; j < n && !hit; j++)
            hit = gt_rule_match(&r[i], cells[j].id);
        if (!hit)
            return gt_jv_fail(v, r[i].path, "%s matches no cell", what);
    }
    return 0;
}

bool gt_matrix_smoke_reference(const gt_matrix *m, const gt_mx_tier *t)
{
    const cJSON *smoke = t->settings ? cJSON_GetObjectItemCaseSensitive(t->settings, "smoke") : NULL;
    const cJSON *ref = smoke ? cJSON_GetObjectItemCaseSensitive(smoke, "reference") : NULL;
    if (cJSON_IsBool(ref))
        return cJSON_IsTrue(ref);
    for (int i = 0; i < m->n_backends; i++)
        if (!m->backends[i].is_http && !strcmp(m->backends[i].id, "reference"))
            return true;
    return false;
}

static cJSON *resolve_tolerances(const gt_matrix *m, const gt_mx_tier *t, const char *id,
                                 const char *quant, cJSON **written);

/* A bound the matrix writes for a metric a tier's suites never produce is
 * a matrix error, not a cell that fails at run time: smoke.ref_agreement
 * exists only when smoke compares with the reference. (Metrics a suite
 * reports on some cells only, an HTTP variant's subset, are judged per
 * cell by the worker: written and unreported fails the cell.) */
static int unproduced_bounds(const gt_matrix *m, const gt_jv *v, const raw_cell *cells, int n)
{
    for (int t = 0; t < m->n_tiers; t++) {
        const gt_mx_tier *tr = &m->tiers[t];
        bool smoke = false;
        for (int i = 0; i < tr->n_suites; i++)
            smoke |= strcmp(tr->suites[i], "smoke") == 0;
        if (!smoke || gt_matrix_smoke_reference(m, tr))
            continue;
        const cJSON *ss = tr->settings ? cJSON_GetObjectItemCaseSensitive(tr->settings, "smoke")
                                       : NULL;
        const bool off = cJSON_IsFalse(ss ? cJSON_GetObjectItemCaseSensitive(ss, "reference")
                                          : NULL);
        for (int j = 0; j < n; j++) {
            if (cells[j].excluded || (tr->n_cells && !any_match(tr->cells, tr->n_cells, cells[j].id)))
                continue;
            if (cells[j].backend->is_http && !off)
                continue; /* the HTTP smoke compares unless told not to */
            cJSON *written = NULL, *tol = resolve_tolerances(m, tr, cells[j].id, cells[j].quant,
                                                             &written);
            bool hit = false;
            for (const cJSON *w = written ? written->child : NULL; w && !hit; w = w->next)
                hit = strcmp(w->valuestring, "smoke.ref_agreement") == 0;
            cJSON_Delete(tol);
            cJSON_Delete(written);
            if (hit) {
                char p[GT_JV_PATH];
                return gt_jv_fail(v, gt_jv_key(p, "tiers", tr->name),
                                  "cell %s has a tolerance for smoke.ref_agreement, which this "
                                  "tier never reports: its smoke does not compare with the "
                                  "reference (settings.smoke.reference is false, or the "
                                  "matrix has no reference backend); set it true, or write "
                                  "the bound only for the cells of tiers that compare",
                                  cells[j].id);
            }
        }
    }
    return 0;
}

int gt_matrix_check_rules(gt_matrix *m, const gt_jv *v)
{
    raw_cell *cells = NULL;
    int n = 0;
    if (build(m, v, &cells, &n, v->err) != 0)
        return -1;
    int rc = -1;
    if (n == 0) {
        gt_jv_fail(v, "exclude", "the matrix has no cells left after exclusions");
        goto out;
    }
    if (rules_hit(v, m->expect, m->n_expect, cells, n, "expectation") ||
        rules_hit(v, m->tol_cells, m->n_tol_cells, cells, n, "tolerance override") ||
        rules_hit(v, m->gate.required, m->gate.n_required, cells, n, "gate pattern") ||
        rules_hit(v, m->gate.optional, m->gate.n_optional, cells, n, "gate pattern"))
        goto out;
    for (const cJSON *q = m->tol_quants ? m->tol_quants->child : NULL; q; q = q->next) {
        bool hit = false;
        for (int j = 0; j < n && !hit; j++)
            hit = strcmp(cells[j].quant, q->string) == 0;
        if (!hit) {
            char p[GT_JV_PATH], r[GT_JV_PATH];
            gt_jv_fail(v, gt_jv_key(r, gt_jv_key(p, "tolerances", "quants"), q->string),
                       "no cell uses quant %s", q->string);
            goto out;
        }
    }
    for (int t = 0; t < m->n_tiers; t++) {
        gt_mx_tier *tr = &m->tiers[t];
        if (rules_hit(v, tr->cells, tr->n_cells, cells, n, "tier cell filter"))
            goto out;
        if (tr->gate.json != m->gate.json &&
            (rules_hit(v, tr->gate.required, tr->gate.n_required, cells, n, "gate pattern") ||
             rules_hit(v, tr->gate.optional, tr->gate.n_optional, cells, n, "gate pattern")))
            goto out;
    }
    if (unproduced_bounds(m, v, cells, n) != 0)
        goto out;
    rc = 0;
out:
    free(cells);
    return rc;
}

/* The cell's tolerances (suite defaults overlaid by the matrix's layers);
 * *written gets the names the matrix wrote, whatever their value: a bound
 * written equal to a suite's default is still a bound requested. */
static cJSON *resolve_tolerances(const gt_matrix *m, const gt_mx_tier *t, const char *id,
                                 const char *quant, cJSON **written)
{
    cJSON *tol = cJSON_CreateObject();
    *written = cJSON_CreateArray();
    if (!tol || !*written) {
        cJSON_Delete(tol);
        cJSON_Delete(*written);
        return NULL;
    }
    char key[160];
    for (int i = 0; i < t->n_suites; i++) {
        const gt_suite *s = gt_suite_find(t->suites[i]);
        for (const gt_metric_def *d = s ? s->metrics : NULL; d && d->name; d++) {
            if (!d->tolerance)
                continue;
            snprintf(key, sizeof key, "%s.%s", s->name, d->name);
            cJSON *spec = cJSON_Parse(d->tolerance);
            if (spec)
                cJSON_AddItemToObject(tol, key, spec);
        }
    }
    const cJSON *layers[64];
    int nl = 0;
    if (m->tol_default)
        layers[nl++] = m->tol_default;
    const cJSON *q = m->tol_quants ? cJSON_GetObjectItemCaseSensitive(m->tol_quants, quant) : NULL;
    if (q)
        layers[nl++] = q;
    for (int i = 0; i < m->n_tol_cells && nl < 64; i++)
        if (gt_rule_match(&m->tol_cells[i], id))
            layers[nl++] = m->tol_cells[i].metrics;
    for (int l = 0; l < nl; l++) {
        for (const cJSON *c = layers[l]->child; c; c = c->next) {
            cJSON *dup = cJSON_Duplicate(c, 1);
            if (!dup)
                continue;
            if (cJSON_GetObjectItemCaseSensitive(tol, c->string))
                cJSON_ReplaceItemInObjectCaseSensitive(tol, c->string, dup);
            else
                cJSON_AddItemToObject(tol, c->string, dup);
            bool listed = false;
            for (const cJSON *w = (*written)->child; w && !listed; w = w->next)
                listed = strcmp(w->valuestring, c->string) == 0;
            if (!listed)
                cJSON_AddItemToArray(*written, cJSON_CreateString(c->string));
        }
    }
    return tol;
}

int gt_matrix_expand(const gt_matrix *m, const gt_mx_tier *tier, gt_cell **cells, int *n,
                     gt_err *err)
{
    raw_cell *raw = NULL;
    int nr = 0;
    *cells = NULL;
    *n = 0;
    if (build(m, NULL, &raw, &nr, err) != 0)
        return -1;
    gt_cell *out = calloc((size_t)nr + 1, sizeof *out);
    if (!out) {
        free(raw);
        return gt_err_set(err, "out of memory");
    }
    int k = 0;
    for (int i = 0; i < nr; i++) {
        const raw_cell *r = &raw[i];
        if (tier->n_cells && !any_match(tier->cells, tier->n_cells, r->id))
            continue;
        gt_cell *c = &out[k];
        snprintf(c->id, sizeof c->id, "%s", r->id);
        c->index = k;
        c->model = r->model;
        c->quant = r->quant;
        gt_quant_scheme_ok(r->quant, &c->type);
        c->backend = r->backend;
        c->driver = r->driver;
        c->setting = r->setting;
        c->suites = (const char *const *)tier->suites;
        c->n_suites = tier->n_suites;
        c->expected = GT_ST_PASS;
        c->n_known = 0;
        for (int e = 0; e < m->n_expect; e++)
            if (m->expect[e].check && c->n_known < GT_CELL_MAX_KNOWN &&
                gt_rule_match(&m->expect[e], r->id))
                c->known[c->n_known++] = &m->expect[e];
        for (int e = 0; e < m->n_expect; e++) {
            if (!m->expect[e].check && gt_rule_match(&m->expect[e], r->id)) {
                c->expected = m->expect[e].status;
                c->expect_reason = m->expect[e].reason;
                break;
            }
        }
        const gt_mx_gate *g = &tier->gate;
        c->required = (g->n_required == 0 || any_match(g->required, g->n_required, r->id)) &&
                      !any_match(g->optional, g->n_optional, r->id);
        c->timeout_s = tier->timeout_s >= 0         ? tier->timeout_s
                       : r->backend->timeout_s >= 0 ? r->backend->timeout_s
                                                    : m->timeout_s;
        c->memory_mb = r->backend->memory_mb >= 0 ? r->backend->memory_mb : m->memory_mb;
        c->threads = r->setting->threads      ? r->setting->threads
                     : r->backend->threads >= 0 ? r->backend->threads
                                                : m->threads;
        if (!(c->tolerances = resolve_tolerances(m, tier, r->id, r->quant, &c->tol_written))) {
            free(raw);
            gt_cells_free(out, k);
            return gt_err_set(err, "out of memory");
        }
        k++;
    }
    free(raw);
    *cells = out;
    *n = k;
    return 0;
}

void gt_cells_free(gt_cell *cells, int n)
{
    for (int i = 0; cells && i < n; i++) {
        cJSON_Delete(cells[i].tolerances);
        cJSON_Delete(cells[i].tol_written);
    }
    free(cells);
}

void gt_matrix_resolve(const gt_matrix *m, const char *path, char *out, size_t cap)
{
    const char *home = getenv("HOME");
    if (path[0] == '/')
        snprintf(out, cap, "%s", path);
    else if (path[0] == '~' && path[1] == '/' && home)
        snprintf(out, cap, "%s/%s", home, path + 2);
    else
        snprintf(out, cap, "%s/%s", m->base, path);
}

/* Version numbers: the first run of digits and dots ("PoCL 3.1-foo" -> 3.1). */
static int parse_version(const char *s, long parts[4], const char **end)
{
    while (*s && !isdigit((unsigned char)*s))
        s++;
    if (!*s)
        return -1;
    int n = 0;
    memset(parts, 0, 4 * sizeof *parts);
    while (n < 4 && isdigit((unsigned char)*s)) {
        parts[n++] = strtol(s, (char **)&s, 10);
        if (*s == '.' && isdigit((unsigned char)s[1]))
            s++;
        else
            break;
    }
    if (end)
        *end = s;
    return 0;
}

static int cmp_version(const long a[4], const long b[4])
{
    for (int i = 0; i < 4; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* Calls fn on each clause "OP VERSION"; returns -1 on a malformed clause. */
static int clauses(const char *constraint, const long *have, bool *ok)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", constraint);
    char *save = NULL;
    int n = 0;
    for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save), n++) {
        while (isspace((unsigned char)*c))
            c++;
        const char *op = c;
        int ol = 0;
        while (c[ol] && strchr("<>=!", c[ol]))
            ol++;
        long want[4];
        const char *end;
        const char *num = c + ol;
        while (isspace((unsigned char)*num))
            num++;
        if (!isdigit((unsigned char)*num) || parse_version(num, want, &end) != 0)
            return -1;
        while (isspace((unsigned char)*end))
            end++;
        if (*end)
            return -1;
        int r = have ? cmp_version(have, want) : 0;
        bool pass;
        if (ol == 2 && !strncmp(op, ">=", 2))
            pass = r >= 0;
        else if (ol == 2 && !strncmp(op, "<=", 2))
            pass = r <= 0;
        else if (ol == 2 && !strncmp(op, "==", 2))
            pass = r == 0;
        else if (ol == 2 && !strncmp(op, "!=", 2))
            pass = r != 0;
        else if (ol == 1 && *op == '>')
            pass = r > 0;
        else if (ol == 1 && *op == '<')
            pass = r < 0;
        else if (ol == 1 && *op == '=')
            pass = r == 0;
        else
            return -1;
        if (ok && have)
            *ok = *ok && pass;
    }
    return n > 0 ? 0 : -1;
}

bool gt_version_constraint_valid(const char *constraint)
{
    return clauses(constraint, NULL, NULL) == 0;
}

bool gt_version_satisfies(const char *version, const char *constraint)
{
    long have[4];
    if (!version || parse_version(version, have, NULL) != 0)
        return false;
    bool ok = true;
    return clauses(constraint, have, &ok) == 0 && ok;
}
