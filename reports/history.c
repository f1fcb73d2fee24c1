/* history.c: a run's cells across the previous runs of the same matrix and
 * tier, for `gauntlet report --history N`.
 *
 * Runs are matched by matrix name and tier, ordered by start time: each row
 * of runs is one run key, and a merged file holds one row per merged run
 * key, so shards merged into one file count once and every run merged in
 * counts. Cells are matched by cell_id, so a cell added to the matrix has
 * no history before it was added (shown as absent, not as a failure).
 *
 * Three series are kept per cell, the ones a reviewer asks "since when?"
 * about: decode tokens/s, drift KLD (against the reference on the same
 * weights) and top-1 agreement. Metric names belong to the suites, so the
 * series are chosen by the same name patterns the report's tables use.
 *
 * "Changed since" holds two kinds of event:
 *   - a status flip between two consecutive runs in which the cell exists;
 *   - a metric value outside the band of the earlier runs in the window:
 *     [min - m, max + m], m = max(max - min, 5% of their median, a floor per
 *     series: 1e-6 nats of KLD, 0.005 of top-1). The band is the spread the
 *     earlier runs showed, so a noisy metric needs a bigger move, and a run
 *     after the move sees the move in its band and is not flagged again.
 * Each event names the run where it happened. Two queries per window
 * (cells, metrics), whatever N. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

typedef struct id_ix {
    const char *id;
    int ix;
} id_ix;

static int cmp_id(const void *a, const void *b)
{
    return strcmp(((const id_ix *)a)->id, ((const id_ix *)b)->id);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

const char *gt_report_hist_series_name(int s)
{
    static const char *const names[] = {"decode t/s", "drift KLD", "top-1"};
    return s >= 0 && s < GT_HIST_NSERIES ? names[s] : "?";
}

static bool has(const char *s, const char *n) { return strstr(s, n) != NULL; }

/* Which series a metric feeds, and how strongly it claims it (a cell may
 * report several candidates: the performance suite's decode median beats
 * another suite's single measurement, a mean KLD beats a percentile). */
static int series_of(const gt_rep_metric *m, int *score)
{
    bool same = !strncmp(m->name, "drift_", 6) || has(m->name, "vs_ref");
    if (gt_report_perf_kind(m) == 2) {
        *score = !strcmp(m->suite, "performance") ? 2 : 1;
        return GT_HIST_DECODE;
    }
    if (has(m->name, "kld") && gt_report_is_accuracy(m) && same) {
        *score = has(m->name, "mean") ? 2 : 1;
        return GT_HIST_KLD;
    }
    if (has(m->name, "top1")) {
        *score = same ? 2 : 1;
        return GT_HIST_TOP1;
    }
    return -1;
}

void gt_report_history_free(gt_rep_history *h)
{
    if (!h)
        return;
    free(h->run_ids);
    free(h->run_keys);
    free(h->started_at);
    free(h->status);
    free(h->series);
    free(h->changes);
    free(h);
}

static int push_change(gt_rep_history *h, int *cap, gt_rep_hist_change c)
{
    if (h->n_changes == *cap) {
        int nc = *cap * 2 + 32;
        gt_rep_hist_change *p = realloc(h->changes, (size_t)nc * sizeof *p);
        if (!p)
            return -1;
        h->changes = p;
        *cap = nc;
    }
    h->changes[h->n_changes++] = c;
    return 0;
}

static int cmp_change(const void *a, const void *b)
{
    const gt_rep_hist_change *x = a, *y = b;
    if (x->at != y->at)
        return y->at - x->at;
    if (x->cell != y->cell)
        return x->cell - y->cell;
    return x->series - y->series;
}

static int find_changes(const gt_rep_run *r, gt_rep_history *h)
{
    static const double floors[GT_HIST_NSERIES] = {0, 1e-6, 0.005};
    int cap = 0, N = h->n_runs;
    double *earlier = malloc(sizeof *earlier * (size_t)(N ? N : 1));
    if (!earlier)
        return -1;
    for (int i = 0; i < r->n; i++) {
        const signed char *st = &h->status[(size_t)i * N];
        for (int k = 1; k < N; k++) {
            int p = k - 1;
            while (p >= 0 && st[p] < 0)
                p--;
            if (p < 0 || st[k] < 0 || st[k] == st[p])
                continue;
            gt_rep_hist_change c = {i, -1, k, gt_status_name(st[p]), gt_status_name(st[k]), 0, 0};
            if (push_change(h, &cap, c) != 0)
                goto oom;
        }
        for (int s = 0; s < GT_HIST_NSERIES; s++) {
            const double *v = &h->series[((size_t)i * GT_HIST_NSERIES + s) * N];
            for (int k = 1; k < N; k++) {
                if (isnan(v[k]))
                    continue;
                int ne = 0;
                for (int j = 0; j < k; j++)
                    if (!isnan(v[j]))
                        earlier[ne++] = v[j];
                if (!ne)
                    continue;
                qsort(earlier, (size_t)ne, sizeof *earlier, cmp_dbl);
                double lo = earlier[0], hi = earlier[ne - 1];
                double med = ne % 2 ? earlier[ne / 2] : (earlier[ne / 2 - 1] + earlier[ne / 2]) / 2;
                double m = fmax(hi - lo, fmax(0.05 * fabs(med), floors[s]));
                if (v[k] >= lo - m && v[k] <= hi + m)
                    continue;
                gt_rep_hist_change c = {i, s, k, "", "", med, v[k]};
                if (push_change(h, &cap, c) != 0)
                    goto oom;
            }
        }
    }
    free(earlier);
    if (h->n_changes > 1)
        qsort(h->changes, (size_t)h->n_changes, sizeof *h->changes, cmp_change);
    return 0;
oom:
    free(earlier);
    return -1;
}

static int run_index(const gt_rep_history *h, int64_t id)
{
    for (int k = 0; k < h->n_runs; k++)
        if (h->run_ids[k] == id)
            return k;
    return -1;
}

int gt_report_history(gt_db *db, gt_rep_run *r, int n, gt_err *err)
{
    sqlite3 *sq = gt_db_sqlite(db);
    gt_rep_history *h = calloc(1, sizeof *h);
    id_ix *map = malloc(sizeof *map * (size_t)(r->n ? r->n : 1));
    sqlite3_stmt *st = NULL;
    bool oom = !h || !map || n < 1;
    if (oom)
        goto fail_oom;
    h->run_ids = calloc((size_t)n, sizeof *h->run_ids);
    h->run_keys = calloc((size_t)n, sizeof *h->run_keys);
    h->started_at = calloc((size_t)n, sizeof *h->started_at);
    if (!h->run_ids || !h->run_keys || !h->started_at)
        goto fail_oom;
    if (sqlite3_prepare_v2(sq,
                           "SELECT id, run_key, started_at FROM runs WHERE matrix_name = ?1 AND"
                           " tier = ?2 AND (started_at < ?3 OR (started_at = ?3 AND id <= ?4))"
                           " ORDER BY started_at DESC, id DESC LIMIT ?5",
                           -1, &st, NULL) != SQLITE_OK)
        goto fail_sql;
    sqlite3_bind_text(st, 1, r->matrix_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->tier, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, r->started_at);
    sqlite3_bind_int64(st, 4, r->id);
    sqlite3_bind_int(st, 5, n);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && h->n_runs < n) {
        h->run_ids[h->n_runs] = sqlite3_column_int64(st, 0);
        h->run_keys[h->n_runs] = gt_report_dup_col(r, st, 1, &oom);
        h->started_at[h->n_runs] = sqlite3_column_double(st, 2);
        h->n_runs++;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        goto fail_sql;
    sqlite3_finalize(st);
    st = NULL;
    /* Newest first from SQL; oldest first is how a sparkline reads. */
    for (int a = 0, b = h->n_runs - 1; a < b; a++, b--) {
        int64_t ti = h->run_ids[a];
        h->run_ids[a] = h->run_ids[b];
        h->run_ids[b] = ti;
        const char *tk = h->run_keys[a];
        h->run_keys[a] = h->run_keys[b];
        h->run_keys[b] = tk;
        double td = h->started_at[a];
        h->started_at[a] = h->started_at[b];
        h->started_at[b] = td;
    }
    int N = h->n_runs;
    size_t ns = (size_t)r->n * (size_t)N, nv = ns * GT_HIST_NSERIES;
    h->status = malloc(ns ? ns : 1);
    h->series = malloc(sizeof *h->series * (nv ? nv : 1));
    signed char *score = calloc(nv ? nv : 1, 1);
    if (!h->status || !h->series || !score) {
        free(score);
        goto fail_oom;
    }
    memset(h->status, -1, ns ? ns : 1);
    for (size_t i = 0; i < nv; i++)
        h->series[i] = NAN;
    for (int i = 0; i < r->n; i++)
        map[i] = (id_ix){r->cells[i].cell_id, i};
    qsort(map, (size_t)r->n, sizeof *map, cmp_id);

    /* The window's run ids are bound as a JSON array (one statement for any N). */
    char ids[64 * 32] = "[";
    for (int k = 0; k < N && k < 60; k++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%lld", k ? "," : "",
                 (long long)h->run_ids[k]);
    strcat(ids, "]");
    for (int pass = 0; pass < 2; pass++) {
        const char *sql =
            pass == 0
                ? "SELECT run_id, cell_id, status FROM cells WHERE run_id IN"
                  " (SELECT value FROM json_each(?1))"
                : "SELECT c.run_id, c.cell_id, m.suite, m.name, COALESCE(m.unit, ''), m.value"
                  " FROM metrics m JOIN cells c ON c.id = m.cell WHERE c.run_id IN"
                  " (SELECT value FROM json_each(?1)) AND m.value IS NOT NULL AND"
                  " (m.name LIKE '%kld%' OR m.name LIKE '%top1%' OR m.name LIKE '%tps%' OR"
                  "  m.name LIKE '%tok_s%' OR m.unit LIKE '%tok/s%')";
        if (sqlite3_prepare_v2(sq, sql, -1, &st, NULL) != SQLITE_OK) {
            free(score);
            goto fail_sql;
        }
        sqlite3_bind_text(st, 1, ids, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int k = run_index(h, sqlite3_column_int64(st, 0));
            id_ix key = {(const char *)sqlite3_column_text(st, 1), 0};
            const id_ix *hit =
                k >= 0 && key.id ? bsearch(&key, map, (size_t)r->n, sizeof *map, cmp_id) : NULL;
            if (!hit)
                continue;
            if (pass == 0) {
                const char *s = (const char *)sqlite3_column_text(st, 2);
                gt_status gs;
                if (s && gt_status_from_name(s, &gs) == 0)
                    h->status[(size_t)hit->ix * N + k] = (signed char)gs;
                continue;
            }
            gt_rep_metric m = {0};
            m.suite = (const char *)sqlite3_column_text(st, 2);
            m.name = (const char *)sqlite3_column_text(st, 3);
            m.unit = (const char *)sqlite3_column_text(st, 4);
            m.comparator = m.verdict = "";
            int sc = 0, s = m.suite && m.name ? series_of(&m, &sc) : -1;
            if (s < 0)
                continue;
            size_t at = ((size_t)hit->ix * GT_HIST_NSERIES + (size_t)s) * N + (size_t)k;
            if (sc > score[at]) {
                score[at] = (signed char)sc;
                h->series[at] = sqlite3_column_double(st, 5);
            }
        }
        sqlite3_finalize(st);
        st = NULL;
        if (rc != SQLITE_DONE) {
            free(score);
            goto fail_sql;
        }
    }
    free(score);
    if (oom || find_changes(r, h) != 0)
        goto fail_oom;
    free(map);
    gt_report_history_free(r->hist);
    r->hist = h;
    return 0;
fail_sql:
    gt_err_set(err, "reading the run's history: %s", sqlite3_errmsg(sq));
    sqlite3_finalize(st);
    free(map);
    gt_report_history_free(h);
    return -1;
fail_oom:
    free(map);
    gt_report_history_free(h);
    return gt_err_set(err, n < 1 ? "history needs at least one run" : "out of memory");
}
