/* html_provenance.c: two static sections of the HTML report that a
 * reviewer reads as lists, not per cell:
 *   - provenance: every file the run used (reports/provenance.c), each with
 *     an anchor (#art-N) the cells' details link to;
 *   - changed since (with --history): status flips and metrics that left
 *     their spread, newest first, each naming the run where it happened
 *     (reports/history.c).
 * Both are bounded by what a run has (artifacts: models x quants; changes:
 * capped below), so they stay plain markup and paint with the summary. */
#include <math.h>
#include <string.h>

#include "html.h"

#define E(s) gt_report_esc(f, (s))
#define MAX_CHANGES 500

void gt_html_provenance(FILE *f, const gt_rep_run *r)
{
    fputs("<section id=\"provenance\"><h2>Provenance</h2>\n", f);
    if (!r->n_artifacts) {
        fputs("<p class=\"sub\">This run recorded no artifacts (no cell got as far as loading "
              "a model file, or the database predates artifact records).</p>\n",
              f);
        fputs("</section>\n", f);
        return;
    }
    fputs("<p class=\"sub\">Every file the run's cells ran or were derived from: where it came "
          "from, under which license, and how it was made. Sources come first, then the "
          "quants derived from them.</p>\n<div class=\"scroll\"><table class=\"sortable\"><thead>"
          "<tr><th>id</th><th>file</th><th>sha256</th><th class=\"num\">size</th>"
          "<th>source</th><th>license</th><th>derived</th></tr></thead><tbody>\n",
          f);
    for (int i = 0; i < r->n_artifacts; i++) {
        const gt_rep_artifact *a = &r->artifacts[i];
        fprintf(f, "<tr id=\"art-%d\"><td class=\"mono\">", i);
        E(a->model);
        if (a->quant[0]) {
            fputc('/', f);
            E(a->quant);
        }
        fputs("</td><td class=\"mono\" title=\"", f);
        E(a->path);
        fputs("\">", f);
        E(a->file);
        fputs("</td><td class=\"mono\">", f);
        E(a->sha256);
        if (a->size >= 0)
            fprintf(f, "</td><td class=\"num\" data-v=\"%lld\">%.1f MiB</td><td>",
                    (long long)a->size, (double)a->size / (1024.0 * 1024.0));
        else
            fputs("</td><td class=\"num\">-</td><td>", f);
        E(a->source);
        fputs("</td><td>", f);
        E(a->license[0] ? a->license : "not stated in the matrix");
        fputs("</td><td class=\"mono\">", f);
        E(a->derivation);
        if (a->parent >= 0)
            fprintf(f, " (<a href=\"#art-%d\">parent</a>)", a->parent);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n</section>\n", f);
}

void gt_html_history(FILE *f, const gt_rep_run *r)
{
    const gt_rep_history *h = r->hist;
    fprintf(f, "<section id=\"history\"><h2>Changed since</h2>\n<p class=\"sub\">The last %d "
               "runs of this matrix and tier, oldest first: ",
            h->n_runs);
    for (int k = 0; k < h->n_runs; k++) {
        char t[40];
        gt_report_time(h->started_at[k], t, sizeof t);
        fprintf(f, "%s<span class=\"mono\">", k ? ", " : "");
        E(h->run_keys[k]);
        fprintf(f, "</span> (run %lld, %s)", (long long)h->run_ids[k], t);
    }
    fputs(". Each grid cell shows its status in each of them; its details add sparklines of "
          "decode t/s, drift KLD and top-1. A metric has moved when it leaves the band of the "
          "earlier runs' values (their spread, at least 5% of their median).</p>\n",
          f);
    if (!h->n_changes) {
        fputs("<p class=\"callout good\">No status flipped and no metric left its spread in "
              "this window.</p></section>\n",
              f);
        return;
    }
    fprintf(f, "<table class=\"sortable\"><thead><tr><th>run</th><th>cell</th><th>what</th>"
               "<th>before</th><th>after</th></tr></thead><tbody>\n");
    for (int i = 0; i < h->n_changes && i < MAX_CHANGES; i++) {
        const gt_rep_hist_change *c = &h->changes[i];
        const gt_rep_cell *cell = &r->cells[c->cell];
        fputs("<tr><td class=\"mono\">", f);
        E(h->run_keys[c->at]);
        fputs("</td><td>", f);
        gt_html_cell_link(f, cell);
        fputs("</td><td>", f);
        if (c->series < 0) {
            fputs("status</td><td>", f);
            gt_html_badge(f, c->from, NULL, NULL);
            fputs("</td><td>", f);
            gt_html_badge(f, c->to, NULL, NULL);
        } else {
            char a[32], b[32];
            gt_report_num(c->before, a, sizeof a);
            gt_report_num(c->after, b, sizeof b);
            E(gt_report_hist_series_name(c->series));
            fprintf(f, "</td><td class=\"num\">%s (median)</td><td class=\"num\">%s</td>", a, b);
            fputs("</tr>\n", f);
            continue;
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    if (h->n_changes > MAX_CHANGES)
        fprintf(f, "<p class=\"sub\">&#8230; and %d more (the JSON report lists all).</p>\n",
                h->n_changes - MAX_CHANGES);
    fputs("</section>\n", f);
}
