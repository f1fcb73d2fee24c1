/* headroom.c: how far each bound of a run is from what it measured (see
 * report.h, headroom). */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "tolerance.h"

static bool same_bound(const gt_headroom_row *h, const gt_rep_metric *m)
{
    return strcmp(h->suite, m->suite) == 0 && strcmp(h->name, m->name) == 0 &&
           strcmp(h->comparator, m->comparator) == 0 && h->bound == m->tolerance;
}

/* Worse = further towards failing the bound. */
static bool worse(const char *cmp, double v, double than)
{
    return strcmp(cmp, ">=") == 0 ? v < than : v > than;
}

static double ratio(const gt_headroom_row *h)
{
    return gt_tol_slack(h->comparator, h->bound, h->worst,
                        h->unit && strcmp(h->unit, "ratio") == 0);
}

static int by_name(const void *a, const void *b)
{
    const gt_headroom_row *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    if (!c)
        c = strcmp(x->name, y->name);
    return c ? c : (x->bound > y->bound) - (x->bound < y->bound);
}

int gt_headroom_rows(const gt_rep_run *r, gt_headroom_row **rows, int *n)
{
    int cap = 0;
    *rows = NULL;
    *n = 0;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        for (int j = 0; j < c->n_metrics; j++) {
            const gt_rep_metric *m = &c->metrics[j];
            if (!m->has_value || !m->has_tol || !m->comparator || !m->comparator[0] ||
                isnan(m->value))
                continue;
            gt_headroom_row *h = NULL;
            for (int k = 0; k < *n && !h; k++)
                if (same_bound(&(*rows)[k], m))
                    h = &(*rows)[k];
            if (!h) {
                if (*n == cap) {
                    cap = cap ? cap * 2 : 32;
                    gt_headroom_row *g = realloc(*rows, (size_t)cap * sizeof *g);
                    if (!g) {
                        free(*rows);
                        *rows = NULL;
                        *n = 0;
                        return -1;
                    }
                    *rows = g;
                }
                h = &(*rows)[(*n)++];
                *h = (gt_headroom_row){m->suite, m->name, m->unit, m->comparator, m->tolerance,
                                       m->value, 0, c, 0, 0, false};
            } else if (worse(m->comparator, m->value, h->worst)) {
                h->worst = m->value;
                h->worst_cell = c;
            }
            h->n_cells++;
            h->n_fail += m->verdict && strcmp(m->verdict, "fail") == 0;
        }
    }
    for (int k = 0; k < *n; k++) {
        gt_headroom_row *h = &(*rows)[k];
        h->ratio = ratio(h);
        h->loose = h->ratio > GT_HEADROOM_LOOSE;
    }
    if (*n)
        qsort(*rows, (size_t)*n, sizeof **rows, by_name);
    return 0;
}

int gt_headroom_print(FILE *f, const gt_headroom_row *rows, int n)
{
    int loose = 0;
    fprintf(f, "%-36s %-2s %10s %12s %10s  %5s  %s\n", "metric", "", "bound", "worst", "headroom",
            "cells", "worst cell");
    for (int i = 0; i < n; i++) {
        const gt_headroom_row *h = &rows[i];
        char name[96];
        snprintf(name, sizeof name, "%s.%s", h->suite, h->name);
        fprintf(f, "%-36s %-2s %10.3g %12.4g %9.3gx  %5d  %s%s%s\n", name, h->comparator,
                h->bound, h->worst, h->ratio, h->n_cells, h->worst_cell->cell_id,
                h->n_fail ? "  FAILING" : "", h->loose ? "  LOOSE" : "");
        loose += h->loose;
    }
    fprintf(f, "%d bounds; %d more than %.0fx looser than measured (values below %.0e count "
               "as %.0e, agreement shortfalls below %.2g as %.2g)\n",
            n, loose, GT_HEADROOM_LOOSE, GT_HEADROOM_FLOOR, GT_HEADROOM_FLOOR,
            GT_HEADROOM_RATIO_FLOOR, GT_HEADROOM_RATIO_FLOOR);
    return loose;
}

void gt_html_headroom(FILE *f, const gt_rep_run *r)
{
    gt_headroom_row *rows;
    int n;
    if (gt_headroom_rows(r, &rows, &n) != 0) {
        fputs("<p>out of memory</p>\n", f);
        return;
    }
    fprintf(f, "<p class=\"sub\">Each bound of this run, the worst value measured under it and "
               "the headroom (bound / worst for upper bounds; for agreement ratios the allowed "
               "shortfall / the measured one); values below %.0e count as %.0e, agreement "
               "shortfalls below %.2g as %.2g. A bound more "
               "than %.0fx looser than what it judges is flagged: it could not catch a "
               "regression of that size.</p>\n",
            GT_HEADROOM_FLOOR, GT_HEADROOM_FLOOR, GT_HEADROOM_RATIO_FLOOR,
            GT_HEADROOM_RATIO_FLOOR, GT_HEADROOM_LOOSE);
    if (!n) {
        fputs("<p>No metric of this run has a bound.</p>\n", f);
        free(rows);
        return;
    }
    fputs("<div class=\"scroll\"><table class=\"sortable metrics\"><thead><tr><th>metric</th><th>bound</th><th>worst measured"
          "</th><th>headroom</th><th>cells</th><th>worst cell</th></tr></thead><tbody>\n",
          f);
    for (int i = 0; i < n; i++) {
        const gt_headroom_row *h = &rows[i];
        fputs("<tr><td class=\"mono\">", f);
        gt_report_esc(f, h->suite);
        fputc('.', f);
        gt_report_esc(f, h->name);
        fputs("</td><td class=\"mono\">", f);
        gt_report_esc(f, h->comparator);
        fprintf(f, " %.3g</td><td class=\"mono\">%.4g</td><td class=\"mono\">%.3gx%s</td>"
                   "<td>%d</td><td>",
                h->bound, h->worst, h->ratio, h->loose ? " <strong>LOOSE</strong>" : "",
                h->n_cells);
        gt_html_cell_link(f, h->worst_cell);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
    free(rows);
}
