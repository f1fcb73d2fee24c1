/* html_long.c: the HTML report's "Long context" section, one part per cell
 * that ran the long suite:
 *   - passkey retrieval: per length and depth, the key, this cell's answer
 *     next to the reference's, found or missed, and whether they agree;
 *   - drift against depth: an inline SVG of the series "drift_kld" (mean KL
 *     of the 8 positions ending at x, log scale; a zero is drawn at
 *     LONG_Y_FLOOR), x on a log scale when the checkpoints span more than a
 *     factor of 4, each checkpoint (drift_L<L>) marked, and the gated
 *     tolerance (metric long.drift_kld_mean) drawn as a dashed line; then
 *     the checkpoints' numbers;
 *   - K/V memory: per length, the bytes the session allocated against its
 *     plan, the ratio, and peak RSS (kv_L<L>).
 *
 * Why markup here rather than in the script's data block (html_data.c):
 * a long tier has a handful of cells with at most a few hundred points
 * each, so the markup is small, and drawn on the server the curve reads
 * without JavaScript, prints, and is what a screenshot shows. The script
 * copies a cell's part into its details when they are opened
 * (html_lazy.c: the element id "long-c<cells.id>"), so it is also "part of
 * the cell's details". A run without long cells writes nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"

#define E(s) gt_report_esc(f, s)
#define LONG_Y_FLOOR 1e-12 /* KL of two f32 pipelines is ~1e-12; 0 has no log */
#define MAX_MARKS 32

/* Plot geometry (SVG user units). */
enum { SW = 720, SH = 270, ML = 66, MR = 18, MT = 16, MB = 44 };

typedef struct axis {
    bool log;
    double lo, hi; /* in axis units (log10 when log) */
} axis;

static double ax_unit(const axis *a, double v) { return a->log ? log10(v) : v; }
static double px_x(const axis *a, double v)
{
    return ML + (ax_unit(a, v) - a->lo) / (a->hi - a->lo) * (SW - ML - MR);
}
static double px_y(double lo, double hi, double v)
{
    double l = log10(v < LONG_Y_FLOOR ? LONG_Y_FLOOR : v);
    return MT + (hi - l) / (hi - lo) * (SH - MT - MB);
}

static int cmp_x(const void *a, const void *b)
{
    double x = ((const gt_rep_point *)a)->x, y = ((const gt_rep_point *)b)->x;
    return x < y ? -1 : x > y;
}

static void status_td(FILE *f, const char *status)
{
    fputs("<td>", f);
    gt_html_badge(f, status, NULL, NULL);
    fputs("</td>", f);
}

static void passkeys(FILE *f, const gt_rep_cell *c)
{
    int n = 0;
    for (int i = 0; i < c->n_checks; i++) {
        gt_rep_passkey p;
        if (gt_report_passkey(&c->checks[i], &p) != 0)
            continue;
        if (!n++)
            fputs("<h4>Passkey retrieval</h4><table class=\"passkey\"><thead><tr>"
                  "<th>length</th><th>depth</th><th>key</th><th>this cell's answer</th>"
                  "<th>found</th><th>reference's answer</th><th>found</th><th>agree</th>"
                  "</tr></thead><tbody>\n",
                  f);
        bool same = !strcmp(p.cell, p.ref);
        fprintf(f, "<tr class=\"pk%s\" data-check=\"", same ? "" : " bad");
        E(c->checks[i].name);
        fprintf(f, "\"><td class=\"num\">%d</td><td class=\"num\">%d%%</td><td class=\"mono\">",
                p.length, p.depth_pct);
        E(p.key);
        fputs("</td><td class=\"mono ans\">", f);
        E(p.cell);
        fprintf(f, "</td><td>%s</td><td class=\"mono ans\">",
                p.cell_found ? "&#10003; found" : "&#10007; missed");
        E(p.ref);
        fprintf(f, "</td><td>%s</td><td class=\"vd vd-%s\">%s</td></tr>\n",
                p.ref_found ? "&#10003; found" : "&#10007; missed", same ? "pass" : "fail",
                same ? "&#10003; same" : "&#10007; differs");
    }
    if (n)
        fputs("</tbody></table>\n", f);
}

/* The drift curve: the points of series drift_kld with finite x > 0 and
 * finite y, sorted by position, as one polyline. */
static void drift_svg(FILE *f, const gt_rep_cell *c, const double *marks, int n_marks)
{
    gt_rep_point *pts = malloc(sizeof *pts * (size_t)(c->n_points ? c->n_points : 1));
    if (!pts)
        return;
    int n = 0;
    bool clamped = false;
    for (int i = 0; i < c->n_points; i++) {
        const gt_rep_point *p = &c->points[i];
        if (strcmp(p->suite, "long") || strcmp(p->series, "drift_kld") || !isfinite(p->x) ||
            p->x <= 0 || !isfinite(p->y))
            continue;
        pts[n++] = *p;
        clamped |= p->y < LONG_Y_FLOOR;
    }
    if (!n) {
        fputs("<p class=\"sub\">No drift points were recorded for this cell.</p>\n", f);
        free(pts);
        return;
    }
    qsort(pts, (size_t)n, sizeof *pts, cmp_x);
    const gt_rep_metric *tm = gt_report_metric(c, "long", "drift_kld_mean");
    double tol = tm && tm->has_tol && tm->tolerance > 0 ? tm->tolerance : NAN;

    double xmin = pts[0].x, xmax = pts[n - 1].x, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < n_marks; i++) {
        xmin = fmin(xmin, marks[i]);
        xmax = fmax(xmax, marks[i]);
    }
    for (int i = 0; i < n; i++) {
        double l = log10(pts[i].y < LONG_Y_FLOOR ? LONG_Y_FLOOR : pts[i].y);
        ymin = fmin(ymin, l);
        ymax = fmax(ymax, l);
    }
    if (isfinite(tol)) {
        ymin = fmin(ymin, log10(fmax(tol, LONG_Y_FLOOR)));
        ymax = fmax(ymax, log10(fmax(tol, LONG_Y_FLOOR)));
    }
    double ylo = floor(ymin), yhi = ceil(ymax);
    if (yhi <= ylo)
        yhi = ylo + 1;
    axis ax = {xmax / xmin > 4, 0, 0};
    ax.lo = ax_unit(&ax, xmin);
    ax.hi = ax_unit(&ax, xmax);
    double pad = ax.hi > ax.lo ? (ax.hi - ax.lo) * 0.03 : (ax.log ? 0.05 : 8);
    ax.lo -= pad;
    ax.hi += pad;

    fprintf(f, "<svg class=\"drift\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
               "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\"><title>",
            SW, SH, SW, SH);
    E(c->cell_id);
    fprintf(f, ": mean KL against the reference by position (%d points)</title>\n", n);
    /* Decades on y. */
    int step = yhi - ylo > 8 ? 2 : 1;
    for (double d = ylo; d <= yhi + 1e-9; d += step) {
        double y = px_y(ylo, yhi, pow(10, d));
        fprintf(f, "<line class=\"gl\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                ML, y, SW - MR, y, ML - 6, y + 4, (int)d);
    }
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
               "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n",
            ML, MT, ML, SH - MB, ML, SH - MB, SW - MR, SH - MB);
    for (int i = 0; i < n_marks; i++) {
        double x = px_x(&ax, marks[i]);
        fprintf(f, "<line class=\"ckpt\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n",
                x, MT, x, SH - MB + 4, x, SH - MB + 16, marks[i] + 1);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">position%s; checkpoints "
               "marked by length</text>\n",
            (ML + SW - MR) / 2, SH - 6, ax.log ? " (log scale)" : "");
    fprintf(f, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">"
               "KL (log scale)</text>\n",
            (MT + SH - MB) / 2, (MT + SH - MB) / 2);
    if (isfinite(tol)) {
        char t[32];
        gt_report_num(tol, t, sizeof t);
        double y = px_y(ylo, yhi, tol);
        fprintf(f, "<line class=\"tol\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                   "<text class=\"tol\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">tolerance ",
                ML, y, SW - MR, y, SW - MR - 4, y - 4);
        E(tm->comparator);
        fprintf(f, " %s (drift_kld_mean, gated at the deepest checkpoint)</text>\n", t);
    }
    fprintf(f, "<polyline class=\"drift\" data-n=\"%d\" points=\"", n);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", px_x(&ax, pts[i].x), px_y(ylo, yhi, pts[i].y));
    fputs("\"/>\n</svg>\n", f);
    fprintf(f, "<p class=\"sub\">%d points: each is the mean KL of the 8 positions ending "
               "there.%s%s</p>\n",
            n, clamped ? " Zeros are drawn at 1e-12." : "",
            isfinite(tol) ? "" : " No tolerance was recorded for long.drift_kld_mean.");
    free(pts);
}

static void drift(FILE *f, const gt_rep_cell *c)
{
    double marks[MAX_MARKS];
    int n_marks = 0, n = 0;
    for (int i = 0; i < c->n_checks && n_marks < MAX_MARKS; i++) {
        gt_rep_drift d;
        if (gt_report_drift(&c->checks[i], &d) == 0)
            marks[n_marks++] = d.to > 0 ? d.to : d.length - 1;
    }
    fputs("<h4>Drift against depth</h4>\n", f);
    drift_svg(f, c, marks, n_marks);
    for (int i = 0; i < c->n_checks; i++) {
        gt_rep_drift d;
        if (gt_report_drift(&c->checks[i], &d) != 0)
            continue;
        if (!n++)
            fputs("<table class=\"drift\"><thead><tr><th>length</th><th>positions</th>"
                  "<th>KL mean</th><th>KL max</th><th>top-1</th><th>verdict</th></tr></thead>"
                  "<tbody>\n",
                  f);
        char a[32], b[32], t[32];
        gt_report_num(d.kld_mean, a, sizeof a);
        gt_report_num(d.kld_max, b, sizeof b);
        snprintf(t, sizeof t, "%.3f", d.top1);
        fprintf(f, "<tr><td class=\"num\">%d</td><td class=\"num\">%d..%d</td>"
                   "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>",
                d.length, d.from, d.to, a, b, t);
        status_td(f, c->checks[i].status);
        fputs("</tr>\n", f);
    }
    if (n)
        fputs("</tbody></table>\n", f);
}

static void kv(FILE *f, const gt_rep_cell *c)
{
    int n = 0;
    for (int i = 0; i < c->n_checks; i++) {
        gt_rep_kv k;
        if (gt_report_kv(&c->checks[i], &k) != 0)
            continue;
        if (!n++)
            fputs("<h4>K/V memory</h4><table class=\"kvmem\"><thead><tr><th>length</th>"
                  "<th>K/V bytes</th><th>plan</th><th>ratio</th><th>peak RSS (MiB)</th>"
                  "<th>verdict</th></tr></thead><tbody>\n",
                  f);
        fprintf(f, "<tr><td class=\"num\">%d</td><td class=\"num\">%.0f</td>"
                   "<td class=\"num\">%.0f</td><td class=\"num\">%.3f</td>"
                   "<td class=\"num\">%.1f</td>",
                k.length, k.bytes, k.plan, k.ratio, k.rss_mib);
        status_td(f, c->checks[i].status);
        fputs("</tr>\n", f);
    }
    if (n)
        fputs("</tbody></table>\n", f);
}

void gt_html_long(FILE *f, const gt_rep_run *r)
{
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        if (!gt_report_has_long(c))
            continue;
        if (!n++)
            fputs("<section id=\"long\"><h2>Long context</h2>\n<p class=\"sub\">Cells that ran "
                  "the long suite: passkey answers next to the reference backend's, KL "
                  "against the reference by position, and K/V memory against its plan. Each "
                  "part is also shown in its cell's details.</p>\n",
                  f);
        fprintf(f, "<div class=\"long\" id=\"long-c%lld\"><h3 class=\"lh\">", (long long)c->id);
        gt_html_cell_link(f, c);
        fputs(" ", f);
        gt_html_badge(f, c->status, NULL, NULL);
        fputs("</h3>\n", f);
        passkeys(f, c);
        drift(f, c);
        kv(f, c);
        fputs("</div>\n", f);
    }
    if (n)
        fputs("</section>\n", f);
}

bool gt_html_any_long(const gt_rep_run *r)
{
    for (int i = 0; i < r->n; i++)
        if (gt_report_has_long(&r->cells[i]))
            return true;
    return false;
}
