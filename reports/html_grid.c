/* html_grid.c: the compatibility grid and its legend.
 *
 * Rows are model x quant (the model cell spans its quants), columns backend
 * x driver under a two-level header (the backend spans its drivers). Each
 * cell is a link to its details, shows the status as symbol + word on the
 * status colour, carries the reason as a tooltip, and says "new" or "fixed"
 * when the baseline comparison changed it, so a reviewer sees a regression
 * in the grid itself and not only in a list. Positions the matrix does not
 * have (excluded combinations) are hatched and say "not in matrix". */
#include <stdlib.h>
#include <string.h>

#include "html.h"

static const struct {
    const char *st, *doc;
} LEGEND[] = {
    {"pass", "every check passed, every metric in tolerance"},
    {"fail", "a check failed or a metric is out of tolerance"},
    {"xfail", "failed as documented (known limitation)"},
    {"xpass", "expected to fail but passed (stale expectation)"},
    {"skip", "not run, with a reason"},
    {"error", "the harness could not judge the cell"},
    {"crash", "the worker died on a signal"},
    {"timeout", "killed at the cell's deadline"},
    {"pending", "not run yet (interrupted run)"},
};

void gt_html_badge(FILE *f, const char *status, const char *href, const char *extra_class)
{
    const char *tag = href ? "a" : "span";
    fprintf(f, "<%s class=\"st st-", tag);
    gt_report_esc(f, status);
    if (extra_class) {
        fputc(' ', f);
        fputs(extra_class, f);
    }
    fputc('"', f);
    if (href)
        fprintf(f, " href=\"%s\"", href);
    fprintf(f, ">%s ", gt_report_icon(status));
    gt_report_esc(f, status);
    fprintf(f, "</%s>", tag);
}

void gt_html_cell_href(char *out, size_t cap, const gt_rep_cell *c)
{
    snprintf(out, cap, "#c%lld", (long long)c->id);
}

void gt_html_cell_link(FILE *f, const gt_rep_cell *c)
{
    fprintf(f, "<a class=\"mono\" href=\"#c%lld\">", (long long)c->id);
    gt_report_esc(f, c->cell_id);
    fputs("</a>", f);
}

void gt_html_legend(FILE *f)
{
    fputs("<div class=\"legend\">", f);
    for (size_t i = 0; i < sizeof LEGEND / sizeof LEGEND[0]; i++) {
        fputs("<span>", f);
        gt_html_badge(f, LEGEND[i].st, NULL, NULL);
        fprintf(f, " <span class=\"d\">%s</span></span>", LEGEND[i].doc);
    }
    fputs("</div>\n", f);
}

int gt_html_grid(FILE *f, const gt_rep_run *r, const gt_rep_diff *d, gt_err *err)
{
    gt_rep_grid g;
    if (gt_report_grid(r, &g, err) != 0)
        return -1;
    if (g.n_rows == 0) {
        fputs("<p class=\"callout info\">This run recorded no cells.</p>\n", f);
        gt_report_grid_free(&g);
        return 0;
    }
    /* Baseline change per cell index, -1 = none. */
    signed char *change = malloc((size_t)(r->n ? r->n : 1));
    if (!change) {
        gt_report_grid_free(&g);
        return gt_err_set(err, "out of memory");
    }
    memset(change, -1, (size_t)(r->n ? r->n : 1));
    for (int i = 0; d && i < d->n_status; i++)
        if (d->status[i].cur)
            change[d->status[i].cur - r->cells] = (signed char)d->status[i].kind;

    fputs("<table class=\"grid\"><thead><tr><th rowspan=\"2\">model</th>"
          "<th rowspan=\"2\">quant</th>",
          f);
    for (int j = 0; j < g.n_cols;) {
        int k = j;
        while (k < g.n_cols && !strcmp(g.col_first[k]->backend, g.col_first[j]->backend))
            k++;
        fprintf(f, "<th colspan=\"%d\">", k - j);
        gt_report_esc(f, g.col_first[j]->backend);
        fputs("</th>", f);
        j = k;
    }
    fputs("</tr><tr>", f);
    for (int j = 0; j < g.n_cols; j++) {
        fputs("<th class=\"mono\">", f);
        gt_report_esc(f, g.col_first[j]->driver);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    char href[32];
    for (int i = 0; i < g.n_rows;) {
        int k = i;
        while (k < g.n_rows && !strcmp(g.row_first[k]->model, g.row_first[i]->model))
            k++;
        for (int row = i; row < k; row++) {
            fputs("<tr>", f);
            if (row == i) {
                fprintf(f, "<th class=\"model\" rowspan=\"%d\">", k - i);
                gt_report_esc(f, g.row_first[i]->model);
                fputs("</th>", f);
            }
            fputs("<th class=\"mono\">", f);
            gt_report_esc(f, g.row_first[row]->quant);
            fputs("</th>", f);
            for (int j = 0; j < g.n_cols; j++) {
                int ix = g.at[(size_t)row * g.n_cols + j];
                if (ix < 0) {
                    fputs("<td class=\"none\" title=\"not in matrix\"></td>", f);
                    continue;
                }
                const gt_rep_cell *c = &r->cells[ix];
                fputs("<td class=\"g\" data-st=\"", f);
                gt_report_esc(f, c->status);
                fputs("\" title=\"", f);
                gt_report_esc(f, c->cell_id);
                if (c->reason[0]) {
                    fputs(": ", f);
                    gt_report_esc_n(f, c->reason, 300);
                }
                if (!c->required)
                    fputs(" (optional: not gated)", f);
                fputs("\">", f);
                gt_html_cell_href(href, sizeof href, c);
                gt_html_badge(f, c->status, href, c->required ? NULL : "opt");
                if (change[ix] == GT_CH_NEW_FAILURE)
                    fputs("<small>&#9650; new</small>", f);
                else if (change[ix] == GT_CH_FIX)
                    fputs("<small>&#9660; fixed</small>", f);
                else if (change[ix] == GT_CH_STATUS)
                    fputs("<small>changed</small>", f);
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
        i = k;
    }
    fputs("</tbody></table>\n", f);
    free(change);
    gt_report_grid_free(&g);
    return 0;
}
