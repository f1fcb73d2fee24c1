/* cmd_tolerances.c: `gauntlet tolerances derive|baseline --db RUN.sqlite`:
 * bounds and baselines from what a recorded run measured.
 *
 * derive:   for every metric the run judged against a bound (<= or >=),
 *           per cell group (*\/quant/backend/driver, or each cell with
 *           --per-cell), the worst value measured and a bound k times
 *           looser: max k x worst (not below GT_TOL_FLOOR, 1e-9: float
 *           noise is not a measurement); min on a 0..1 ratio 1 - k x the
 *           shortfall (at least GT_TOL_RATIO_FLOOR, 0.01); other mins
 *           worst / k. Printed as a "cells" array to paste into a matrix's
 *           "tolerances", each bound's note saying what it was measured at.
 *           The slack of a derived bound is k, so k > 100 is refused: the
 *           matrix would fail its own baseline check (matrix.h).
 * baseline: the run's values as a baselines file (matrices/README.md,
 *           "Baselines"): per metric, per cell, the value, with the run's
 *           provenance (command, date, commit, machine).
 * Reuses the report loader (reports/report.h) and the slack arithmetic of
 * `gauntlet db headroom` (base/tolerance.h). */
#include <fnmatch.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "report.h"
#include "store.h"
#include "base.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet tolerances derive --db FILE [--run KEY] [--k K] [--cells GLOB]\n"
            "                                  [--per-cell]\n"
            "       gauntlet tolerances baseline --db FILE [--run KEY] [--cells GLOB]\n"
            "                                  [--command TEXT]\n"
            "  derive: per metric the run judged and per cell group (*/quant/backend/driver;\n"
            "          each cell with --per-cell), a bound K x looser than the worst value\n"
            "          measured (default K 10, 1 <= K <= 100): max K x worst (at least 1e-9),\n"
            "          min on a 0..1 ratio 1 - K x shortfall (shortfall at least 0.01), other\n"
            "          mins worst / K; printed as a JSON \"cells\" array for a matrix's\n"
            "          \"tolerances\", the measurement in each note\n"
            "  baseline: the run's values per metric and cell, with provenance, as a\n"
            "          baselines file (matrices/baselines/<matrix>.json)\n"
            "  --run KEY      the run (default: the newest in the file)\n"
            "  --cells GLOB   only cells whose id matches (e.g. '*/*/cpu/act-q8')\n"
            "  --command TEXT what was run, for the provenance (default: the run's recorded\n"
            "                 argv)\n");
}

/* A metric worth a bound or a baseline: a finite value judged against a
 * <= or >= bound (derive), or any finite value that is not a speed
 * (baseline: speed belongs to the machine, the gate compares it with a
 * baseline run instead). */
static bool judged(const gt_rep_metric *m)
{
    return m->has_value && isfinite(m->value) && m->has_tol && m->comparator &&
           (!strcmp(m->comparator, "<=") || !strcmp(m->comparator, ">="));
}

typedef struct group {
    char key[280];
    char metric[96];
    const char *cmp, *unit;
    double worst;
    const char *worst_cell;
    int n;
} group;

/* Round away from the measurement to 2 significant digits (up for a max,
 * down for a min), so a pasted bound is readable and never tighter. */
static int by_key(const void *a, const void *b)
{
    const group *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->metric, y->metric);
}

static double round2(double x, bool up)
{
    if (x <= 0 || !isfinite(x))
        return x;
    double e = pow(10, floor(log10(x)) - 1);
    return (up ? ceil(x / e - 1e-9) : floor(x / e + 1e-9)) * e;
}

static double derive_bound(const group *g, double k, char *how, size_t cap)
{
    if (!strcmp(g->cmp, "<=")) {
        double b = round2(k * fmax(g->worst, GT_TOL_FLOOR), true);
        snprintf(how, cap, "%g x worst measured %.3g%s", k, g->worst,
                 g->worst < GT_TOL_FLOOR ? " (below float noise, counted as 1e-9)" : "");
        return b;
    }
    if (g->unit && !strcmp(g->unit, "ratio") && g->worst <= 1) {
        double shortfall = fmax(1 - g->worst, GT_TOL_RATIO_FLOOR);
        double b = fmax(0, floor((1 - k * shortfall) * 1000 + 1e-9) / 1000);
        snprintf(how, cap, "1 - %g x shortfall of worst measured %.4g%s", k, g->worst,
                 1 - g->worst < GT_TOL_RATIO_FLOOR ? " (shortfall below 0.01, counted as 0.01)"
                                                   : "");
        return b;
    }
    snprintf(how, cap, "worst measured %.4g / %g", g->worst, k);
    return round2(g->worst / k, false);
}

static int load(const char *db_path, const char *key, gt_db **db, gt_rep_run **rep, gt_err *err)
{
    if (gt_db_open(db_path, true, db, err) != 0)
        return -1;
    int64_t id = 0;
    if (key) {
        gt_db_run run;
        int r = gt_db_run_get(*db, key, &run, err);
        if (r != 0) {
            if (r > 0)
                gt_err_set(err, "%s: no run %s", db_path, key);
            gt_db_close(*db);
            return -1;
        }
        id = run.id;
    }
    if (gt_report_load(*db, id, false, NULL, 0, rep, err) != 0) {
        gt_db_close(*db);
        return -1;
    }
    if (!(*rep)->run_key) {
        gt_report_free(*rep);
        gt_db_close(*db);
        return gt_err_set(err, "%s: no run", db_path);
    }
    return 0;
}

static int derive(const gt_rep_run *r, double k, const char *glob, bool per_cell)
{
    group *g = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        if (glob && fnmatch(glob, c->cell_id, 0) != 0)
            continue;
        char key[280];
        if (per_cell)
            snprintf(key, sizeof key, "%s", c->cell_id);
        else
            snprintf(key, sizeof key, "*/%s/%s/%s", c->quant, c->backend, c->driver);
        for (int j = 0; j < c->n_metrics; j++) {
            const gt_rep_metric *m = &c->metrics[j];
            if (!judged(m))
                continue;
            char name[96];
            snprintf(name, sizeof name, "%s.%s", m->suite, m->name);
            group *e = NULL;
            for (int x = 0; x < n && !e; x++)
                if (!strcmp(g[x].key, key) && !strcmp(g[x].metric, name))
                    e = &g[x];
            if (!e) {
                if (n == cap) {
                    group *t = realloc(g, (size_t)(cap = cap ? cap * 2 : 64) * sizeof *t);
                    if (!t) {
                        free(g);
                        fprintf(stderr, "gauntlet tolerances: out of memory\n");
                        return GT_EXIT_USAGE;
                    }
                    g = t;
                }
                e = &g[n++];
                *e = (group){"", "", m->comparator, m->unit, m->value, c->cell_id, 0};
                snprintf(e->key, sizeof e->key, "%s", key);
                snprintf(e->metric, sizeof e->metric, "%s", name);
            } else if (!strcmp(e->cmp, ">=") ? m->value < e->worst : m->value > e->worst) {
                e->worst = m->value;
                e->worst_cell = c->cell_id;
            }
            e->n++;
        }
    }
    if (!n) {
        free(g);
        fprintf(stderr, "gauntlet tolerances derive: run %s has no metric judged against a "
                        "<= or >= bound%s%s\n",
                r->run_key, glob ? " in cells " : "", glob ? glob : "");
        return GT_EXIT_FAIL;
    }
    qsort(g, (size_t)n, sizeof *g, by_key);
    cJSON *cells = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        if (i && !strcmp(g[i].key, g[i - 1].key))
            continue;
        cJSON *e = cJSON_CreateObject(), *ms = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "cell", g[i].key);
        for (int j = i; j < n; j++) {
            if (strcmp(g[j].key, g[i].key))
                continue;
            char how[256], note[512];
            double b = derive_bound(&g[j], k, how, sizeof how);
            snprintf(note, sizeof note, "%s (%s; %d cell%s, run %s)", how, g[j].worst_cell, g[j].n,
                     g[j].n == 1 ? "" : "s", r->run_key);
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, !strcmp(g[j].cmp, "<=") ? "max" : "min", b);
            cJSON_AddStringToObject(t, "note", note);
            cJSON_AddItemToObject(ms, g[j].metric, t);
        }
        cJSON_AddItemToObject(e, "metrics", ms);
        cJSON_AddItemToArray(cells, e);
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddItemToObject(out, "cells", cells);
    char *s = cJSON_Print(out);
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(out);
    free(g);
    return GT_EXIT_OK;
}

static int baseline(const gt_rep_run *r, const char *glob, const char *command)
{
    cJSON *out = cJSON_CreateObject(), *prov = cJSON_CreateObject(),
          *worst = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "matrix", r->matrix_name ? r->matrix_name : "");
    char buf[1024];
    if (!command) {
        buf[0] = '\0';
        for (int i = 0; i < r->n_parts; i++) {
            size_t len = strlen(buf);
            snprintf(buf + len, sizeof buf - len, "%s%s", i ? "; " : "",
                     r->parts[i].argv ? r->parts[i].argv : "(not recorded)");
        }
        command = buf[0] ? buf : "(not recorded)";
    }
    cJSON_AddStringToObject(prov, "command", command);
    char date[32];
    time_t t = (time_t)r->started_at;
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    cJSON_AddStringToObject(prov, "date", date);
    cJSON_AddStringToObject(prov, "commit", r->git_sha ? r->git_sha : "");
    char machine[1024];
    snprintf(machine, sizeof machine, "%s", r->host ? r->host : "");
    for (int i = 0; i < r->n_devices; i++) {
        const gt_rep_device *d = &r->devices[i];
        size_t len = strlen(machine);
        snprintf(machine + len, sizeof machine - len, "%s%s: %s", i ? "; " : "; devices ",
                 d->backend ? d->backend : "", d->name ? d->name : "");
    }
    cJSON_AddStringToObject(prov, "machine", machine);
    cJSON_AddStringToObject(prov, "run", r->run_key);
    cJSON_AddItemToObject(out, "provenance", prov);
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        if (glob && fnmatch(glob, c->cell_id, 0) != 0)
            continue;
        for (int j = 0; j < c->n_metrics; j++) {
            const gt_rep_metric *m = &c->metrics[j];
            if (!m->has_value || !isfinite(m->value) || m->regress)
                continue;
            char name[96];
            snprintf(name, sizeof name, "%s.%s", m->suite, m->name);
            cJSON *per = cJSON_GetObjectItemCaseSensitive(worst, name);
            if (!per)
                cJSON_AddItemToObject(worst, name, per = cJSON_CreateObject());
            if (!cJSON_GetObjectItemCaseSensitive(per, c->cell_id)) {
                cJSON_AddNumberToObject(per, c->cell_id, m->value);
                n++;
            }
        }
    }
    cJSON_AddItemToObject(out, "worst", worst);
    char *s = cJSON_Print(out);
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(out);
    if (!n) {
        fprintf(stderr, "gauntlet tolerances baseline: run %s has no measured value\n",
                r->run_key);
        return GT_EXIT_FAIL;
    }
    return GT_EXIT_OK;
}

int cmd_tolerances(int argc, char **argv)
{
    static const struct option OPTS[] = {
        {"db", required_argument, NULL, 'd'},      {"run", required_argument, NULL, 'r'},
        {"k", required_argument, NULL, 'k'},       {"cells", required_argument, NULL, 'c'},
        {"per-cell", no_argument, NULL, 'p'},      {"command", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        help(stdout);
        return GT_EXIT_OK;
    }
    if (argc < 2 || (strcmp(argv[1], "derive") && strcmp(argv[1], "baseline"))) {
        help(stderr);
        return GT_EXIT_USAGE;
    }
    bool is_derive = !strcmp(argv[1], "derive"), per_cell = false;
    const char *db_path = NULL, *key = NULL, *glob = NULL, *command = NULL;
    double k = 10;
    int opt;
    optind = 2;
    while ((opt = getopt_long(argc, argv, "h", OPTS, NULL)) != -1) {
        switch (opt) {
        case 'd': db_path = optarg; break;
        case 'r': key = optarg; break;
        case 'c': glob = optarg; break;
        case 'p': per_cell = true; break;
        case 'C': command = optarg; break;
        case 'k': {
            char *end;
            k = strtod(optarg, &end);
            if (*end || !(k >= 1 && k <= GT_TOL_LOOSE)) {
                fprintf(stderr, "gauntlet tolerances: --k expects a number from 1 to %.0f (a "
                                "looser bound fails the matrix's baseline check), got '%s'\n",
                        GT_TOL_LOOSE, optarg);
                return GT_EXIT_USAGE;
            }
            break;
        }
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (!db_path || optind != argc || (!is_derive && (per_cell || k != 10)) ||
        (is_derive && command)) {
        help(stderr);
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    gt_db *db;
    gt_rep_run *rep;
    if (load(db_path, key, &db, &rep, &err) != 0) {
        fprintf(stderr, "gauntlet tolerances: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    int rc = is_derive ? derive(rep, k, glob, per_cell) : baseline(rep, glob, command);
    gt_report_free(rep);
    gt_db_close(db);
    return rc;
}
