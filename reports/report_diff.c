/* report_diff.c: two loaded runs, cell by cell (matched on cell_id).
 *
 * Status changes are classified the way a release reviewer reads them:
 * a new failure (was fine or absent, now fail/error/crash/timeout/xpass), a
 * fix (was failing, now pass or xfail), any other change, and cells added or
 * removed by the matrix. Every metric present in both runs becomes a delta
 * (for compare); performance ones (regress-flagged, throughput, latency)
 * with a direction, worse or better by more than the threshold, are the
 * regressions and improvements (worst first). The
 * threshold defaults to the gate's perf_regression_pct so the report
 * highlights what the gate judged, and 5% without one. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *gt_report_change_name(gt_rep_change k)
{
    switch (k) {
    case GT_CH_NEW_FAILURE: return "new failure";
    case GT_CH_FIX: return "fixed";
    case GT_CH_STATUS: return "changed";
    case GT_CH_ADDED: return "added";
    case GT_CH_REMOVED: return "removed";
    }
    return "?";
}

typedef struct key_ix {
    const char *id;
    int ix;
} key_ix;

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const key_ix *)a)->id, ((const key_ix *)b)->id);
}

static int cmp_worse(const void *a, const void *b)
{
    double x = ((const gt_rep_metric_delta *)a)->worse_pct;
    double y = ((const gt_rep_metric_delta *)b)->worse_pct;
    return x < y ? 1 : x > y ? -1 : 0;
}

static const gt_rep_metric *find_metric(const gt_rep_cell *c, const gt_rep_metric *m)
{
    for (int i = 0; i < c->n_metrics; i++)
        if (!strcmp(c->metrics[i].name, m->name) && !strcmp(c->metrics[i].suite, m->suite))
            return &c->metrics[i];
    return NULL;
}

static bool push(void **arr, int *n, int *cap, size_t esz, const void *e)
{
    if (*n == *cap) {
        int nc = *cap * 2 + 32;
        void *na = realloc(*arr, (size_t)nc * esz);
        if (!na)
            return false;
        *arr = na;
        *cap = nc;
    }
    memcpy((char *)*arr + (size_t)*n * esz, e, esz);
    (*n)++;
    return true;
}

int gt_report_diff(const gt_rep_run *cur, const gt_rep_run *base, double threshold_pct,
                   gt_rep_diff **out, gt_err *err)
{
    *out = NULL;
    gt_rep_diff *d = calloc(1, sizeof *d);
    key_ix *map = malloc(sizeof *map * (size_t)(base->n ? base->n : 1));
    char *seen = calloc((size_t)(base->n ? base->n : 1), 1);
    if (!d || !map || !seen)
        goto oom;
    d->cur = cur;
    d->base = base;
    d->threshold_pct = threshold_pct >= 0 ? threshold_pct : cur->perf_pct >= 0 ? cur->perf_pct : 5.0;
    for (int i = 0; i < base->n; i++)
        map[i] = (key_ix){base->cells[i].cell_id, i};
    qsort(map, (size_t)base->n, sizeof *map, cmp_key);
    int cap_s = 0, cap_p = 0, cap_a = 0;
    for (int i = 0; i < cur->n; i++) {
        const gt_rep_cell *c = &cur->cells[i];
        key_ix key = {c->cell_id, 0};
        const key_ix *hit = bsearch(&key, map, (size_t)base->n, sizeof *map, cmp_key);
        const gt_rep_cell *b = hit ? &base->cells[hit->ix] : NULL;
        if (hit)
            seen[hit->ix] = 1;
        gt_rep_status_delta sd = {GT_CH_STATUS, c, b};
        bool add = false;
        if (!b) {
            sd.kind = gt_report_is_bad(c->status) ? GT_CH_NEW_FAILURE : GT_CH_ADDED;
            add = true;
        } else if (strcmp(c->status, b->status) != 0) {
            bool bad_now = gt_report_is_bad(c->status), bad_then = gt_report_is_bad(b->status);
            sd.kind = bad_now && !bad_then   ? GT_CH_NEW_FAILURE
                      : !bad_now && bad_then && (!strcmp(c->status, "pass") ||
                                                 !strcmp(c->status, "xfail"))
                          ? GT_CH_FIX
                          : GT_CH_STATUS;
            add = true;
        }
        if (add) {
            if (!push((void **)&d->status, &d->n_status, &cap_s, sizeof sd, &sd))
                goto oom;
            d->n_new_fail += sd.kind == GT_CH_NEW_FAILURE;
            d->n_fix += sd.kind == GT_CH_FIX;
        }
        if (!b)
            continue;
        for (int k = 0; k < c->n_metrics; k++) {
            const gt_rep_metric *m = &c->metrics[k];
            const gt_rep_metric *bm = find_metric(b, m);
            if (!bm || !m->has_value || !bm->has_value || !isfinite(m->value) ||
                !isfinite(bm->value))
                continue;
            gt_rep_metric_delta md = {c, m, bm, 0, 0, false};
            if (bm->value != 0)
                md.change_pct = (m->value - bm->value) / fabs(bm->value) * 100.0;
            else
                md.change_pct = m->value == 0 ? 0 : (m->value > 0 ? INFINITY : -INFINITY);
            md.worse_pct = m->better > 0 ? -md.change_pct : m->better < 0 ? md.change_pct : 0;
            if (!push((void **)&d->all, &d->n_all, &cap_a, sizeof md, &md))
                goto oom;
            /* Performance means what the gate compares (regress) and what
             * reads as speed; accuracy moves show up as status changes. */
            bool perf = m->regress || gt_report_perf_kind(m) || gt_report_is_latency(m);
            if (perf && m->better != 0 && bm->value != 0 &&
                fabs(md.worse_pct) > d->threshold_pct) {
                md.regression = md.worse_pct > 0;
                if (!push((void **)&d->perf, &d->n_perf, &cap_p, sizeof md, &md))
                    goto oom;
                d->n_regress += md.regression;
                d->n_improve += !md.regression;
            }
        }
    }
    for (int i = 0; i < base->n; i++) {
        if (seen[i])
            continue;
        gt_rep_status_delta sd = {GT_CH_REMOVED, NULL, &base->cells[i]};
        if (!push((void **)&d->status, &d->n_status, &cap_s, sizeof sd, &sd))
            goto oom;
    }
    if (d->n_perf > 1)
        qsort(d->perf, (size_t)d->n_perf, sizeof *d->perf, cmp_worse);
    free(map);
    free(seen);
    *out = d;
    return 0;
oom:
    free(map);
    free(seen);
    gt_report_diff_free(d);
    return gt_err_set(err, "out of memory comparing runs");
}

void gt_report_diff_free(gt_rep_diff *d)
{
    if (!d)
        return;
    free(d->status);
    free(d->perf);
    free(d->all);
    free(d);
}
