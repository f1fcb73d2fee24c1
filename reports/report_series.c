/* report_series.c: a run's series points (the series table, schema 5) into
 * its cells, for the curves the HTML report draws (html_long.c).
 *
 * One scan joined to cells and ordered as r->cells is (idx, id), then by
 * the order the suite sent the points (seq): the rows of cell i follow
 * those of cell i-1, so a cursor walking r->cells places them without a
 * map. All points live in one array (r->points_block); each cell holds a
 * slice. The series name repeats for every point, so it is copied into the
 * arena once per run of equal names, not once per point. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int gt_report_series(gt_rep_run *r, sqlite3 *h, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h,
                           "SELECT s.cell, s.suite, s.name, s.x, s.y FROM series s"
                           " JOIN cells c ON c.id = s.cell WHERE c.run_id = ?"
                           " ORDER BY c.idx, c.id, s.seq, s.id",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_err_set(err, "reading the run's series: %s", sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, r->id);
    gt_rep_point *all = NULL;
    int *owner = NULL, n = 0, cap = 0, cur = 0, rc;
    bool oom = false;
    const char *suite = NULL, *name = NULL;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t cell = sqlite3_column_int64(st, 0);
        while (cur < r->n && r->cells[cur].id != cell)
            cur++;
        if (cur == r->n)
            break; /* cannot happen: rows come in r->cells' order */
        if (n == cap) {
            cap = cap * 2 + 256;
            gt_rep_point *na = realloc(all, (size_t)cap * sizeof *na);
            int *no = na ? realloc(owner, (size_t)cap * sizeof *no) : NULL;
            if (na)
                all = na;
            if (!no) {
                oom = true;
                break;
            }
            owner = no;
        }
        const char *s = (const char *)sqlite3_column_text(st, 1);
        const char *nm = (const char *)sqlite3_column_text(st, 2);
        if (!suite || strcmp(suite, s ? s : "") != 0)
            suite = gt_report_strdup(r, s ? s : "", &oom);
        if (!name || strcmp(name, nm ? nm : "") != 0)
            name = gt_report_strdup(r, nm ? nm : "", &oom);
        if (oom)
            break;
        all[n] = (gt_rep_point){suite, name,
                                sqlite3_column_type(st, 3) == SQLITE_NULL
                                    ? NAN
                                    : sqlite3_column_double(st, 3),
                                sqlite3_column_type(st, 4) == SQLITE_NULL
                                    ? NAN
                                    : sqlite3_column_double(st, 4)};
        owner[n++] = cur;
    }
    sqlite3_finalize(st);
    if (oom || (rc != SQLITE_DONE && rc != SQLITE_ROW)) {
        free(all);
        free(owner);
        return oom ? gt_err_set(err, "out of memory")
                   : gt_err_set(err, "reading the run's series: %s", sqlite3_errmsg(h));
    }
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && owner[j] == owner[i])
            j++;
        r->cells[owner[i]].points = all + i;
        r->cells[owner[i]].n_points = j - i;
        i = j;
    }
    free(owner);
    r->points_block = all;
    return 0;
}

const gt_rep_metric *gt_report_metric(const gt_rep_cell *c, const char *suite, const char *name)
{
    for (int i = 0; i < c->n_metrics; i++)
        if (!strcmp(c->metrics[i].suite, suite) && !strcmp(c->metrics[i].name, name))
            return &c->metrics[i];
    return NULL;
}
