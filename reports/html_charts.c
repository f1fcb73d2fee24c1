/* html_charts.c: the accuracy table and the performance section.
 *
 * Metric names belong to the suites and keep evolving, so nothing here
 * names a metric: accuracy metrics are found by suite or by pattern (kld,
 * top1, agreement, nmse, ppl), throughput by tok/s with prefill/pp or
 * decode/tg in the name, latency by latency/ttft/_pNN. A column appears for
 * each such metric some cell reported, in first-seen order.
 *
 * Charts are inline SVG drawn here: horizontal bars (labels stay readable
 * however many cells a model has), one chart per model and per direction
 * (prefill and decode differ by an order of magnitude, so one shared axis
 * would flatten decode), each bar with its value written at its end so the
 * chart prints and reads without colour. No links inside the SVG (HTML
 * checkers such as tidy reject them); the tables below link every cell. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"

#define MAX_COLS 16

typedef struct cols {
    char label[MAX_COLS][128];
    int n;
} cols;

static int col_of(cols *k, const gt_rep_metric *m, bool add)
{
    char l[128];
    gt_report_metric_label(m, l, sizeof l);
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->label[i], l))
            return i;
    if (!add || k->n == MAX_COLS)
        return -1;
    snprintf(k->label[k->n], sizeof k->label[0], "%s", l);
    return k->n++;
}

static void metric_td(FILE *f, const gt_rep_metric *m)
{
    char v[32], t[32];
    gt_report_num(m->value, v, sizeof v);
    bool bad = !strcmp(m->verdict, "fail");
    fprintf(f, "<td class=\"num%s\" data-v=\"%.9g\"", bad ? " v" : "",
            m->has_value ? m->value : -INFINITY);
    if (m->has_tol) {
        gt_report_num(m->tolerance, t, sizeof t);
        fputs(" title=\"tolerance ", f);
        gt_report_esc(f, m->comparator);
        fprintf(f, " %s\"", t);
    }
    fputs(bad ? " style=\"background:var(--fail-bg)\">" : ">", f);
    fputs(m->has_value ? v : "&#8212;", f);
    if (bad) {
        fputs(" &#10007; (", f);
        gt_report_esc(f, m->comparator);
        fprintf(f, " %s)", t);
    }
    fputs("</td>", f);
}

/* A table of cells x the metric columns selected by pick. */
static void metric_table(FILE *f, const gt_rep_run *r, bool (*pick)(const gt_rep_metric *))
{
    cols k = {.n = 0};
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->cells[i].n_metrics; j++)
            if (pick(&r->cells[i].metrics[j]))
                col_of(&k, &r->cells[i].metrics[j], true);
    if (k.n == 0) {
        fputs("<p class=\"sub\">No cell of this run reported such metrics (the suite was not in "
              "this tier, or every cell stopped before it).</p>\n",
              f);
        return;
    }
    /* Headers show the metric's own name (the section says which suite),
     * the full label is the tooltip. */
    fputs("<div class=\"scroll\"><table class=\"sortable metrics\"><thead><tr><th>cell</th>"
          "<th>status</th>",
          f);
    for (int i = 0; i < k.n; i++) {
        const char *dot = strchr(k.label[i], '.');
        fputs("<th class=\"num mono\" title=\"", f);
        gt_report_esc(f, k.label[i]);
        fputs("\">", f);
        gt_report_esc(f, dot ? dot + 1 : k.label[i]);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    const gt_rep_metric *row[MAX_COLS];
    char href[32];
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        int any = 0;
        memset(row, 0, sizeof row);
        for (int j = 0; j < c->n_metrics; j++) {
            if (!pick(&c->metrics[j]))
                continue;
            int ix = col_of(&k, &c->metrics[j], false);
            if (ix >= 0) {
                row[ix] = &c->metrics[j];
                any = 1;
            }
        }
        if (!any)
            continue;
        fputs("<tr><td>", f);
        gt_html_cell_link(f, c);
        fprintf(f, "</td><td data-v=\"%s\">", c->status);
        gt_html_cell_href(href, sizeof href, c);
        gt_html_badge(f, c->status, href, NULL);
        fputs("</td>", f);
        for (int j = 0; j < k.n; j++) {
            if (row[j])
                metric_td(f, row[j]);
            else
                fputs("<td class=\"num\" data-v=\"-inf\">&#8212;</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

/* Accuracy against which reference: the suite names its metrics drift_*
 * (reference backend on the same quantized weights) and loss_* (reference on
 * F32 weights); *_vs_ref / *_vs_f32 are accepted too. */
static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool vs_same(const gt_rep_metric *m)
{
    return starts(m->name, "drift_") || strstr(m->name, "vs_ref") != NULL;
}
static bool vs_f32(const gt_rep_metric *m)
{
    return starts(m->name, "loss_") || strstr(m->name, "f32") != NULL;
}
static bool pick_same(const gt_rep_metric *m) { return gt_report_is_accuracy(m) && vs_same(m); }
static bool pick_f32(const gt_rep_metric *m)
{
    return gt_report_is_accuracy(m) && !vs_same(m) && vs_f32(m);
}
static bool pick_acc_other(const gt_rep_metric *m)
{
    return !strcmp(m->suite, "accuracy") && !vs_same(m) && !vs_f32(m);
}
static bool pick_latency(const gt_rep_metric *m) { return gt_report_is_latency(m); }
static bool pick_perf_other(const gt_rep_metric *m)
{
    return !strcmp(m->suite, "performance") && !gt_report_is_latency(m) &&
           !gt_report_perf_kind(m);
}

void gt_html_accuracy(FILE *f, const gt_rep_run *r)
{
    fputs("<p class=\"sub\">Teacher-forced logits over the eval text. KL divergence: lower is "
          "better; top-1 agreement: higher is better. Out-of-tolerance values are marked "
          "&#10007; with their bound; hover a value for its tolerance; click a header to "
          "sort.</p>\n<h3>Against the reference backend on the same quantized weights "
          "(backend drift)</h3>\n",
          f);
    metric_table(f, r, pick_same);
    fputs("<h3>Against the reference backend on F32 weights (quantization loss)</h3>\n", f);
    metric_table(f, r, pick_f32);
    fputs("<h3>Other accuracy measurements</h3>\n", f);
    metric_table(f, r, pick_acc_other);
}

typedef struct bar {
    const gt_rep_cell *c;
    double v;
    bool bad, perf;
} bar;

static void chart(FILE *f, const char *title, const char *unit, const bar *b, int n, int cls)
{
    double max = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(b[i].v) && b[i].v > max)
            max = b[i].v;
    const int lw = 220, bw = 290, vw = 80, rh = 18, top = 22;
    const int w = lw + bw + vw, h = top + n * rh + 6;
    fprintf(f, "<svg class=\"chart\" role=\"img\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\"><title>",
            w, h, w, h);
    gt_report_esc(f, title);
    fprintf(f, "</title><text x=\"0\" y=\"14\" style=\"font-weight:600;font-size:12px\">");
    gt_report_esc(f, title);
    fputs(" (", f);
    gt_report_esc(f, unit);
    fprintf(f, ")</text><line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", lw,
            top - 2, lw, h - 4);
    for (int i = 0; i < n; i++) {
        const gt_rep_cell *c = b[i].c;
        int y = top + i * rh;
        double frac = max > 0 && isfinite(b[i].v) && b[i].v > 0 ? b[i].v / max : 0;
        char v[32];
        gt_report_num(b[i].v, v, sizeof v);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", lw - 6, y + 12);
        gt_report_esc_n(f, c->quant, 24);
        fputs(" \xC2\xB7 ", f);
        gt_report_esc_n(f, c->backend, 24);
        fputc('/', f);
        gt_report_esc_n(f, c->driver, 24);
        fprintf(f, "</text><rect class=\"bar%d\" x=\"%d\" y=\"%d\" width=\"%.1f\" "
                   "height=\"%d\"%s><title>",
                cls, lw, y + 2, frac * bw, rh - 5,
                b[i].bad ? " style=\"fill:#D55E00\"" : "");
        gt_report_esc(f, c->cell_id);
        fprintf(f, ": %s</title></rect><text x=\"%.1f\" y=\"%d\">%s%s</text>", v,
                lw + frac * bw + 4, y + 12, v, b[i].bad ? " \xE2\x9C\x97" : "");
    }
    fputs("</svg>\n", f);
}

void gt_html_performance(FILE *f, const gt_rep_run *r)
{
    bar *b1 = malloc(sizeof *b1 * (size_t)(r->n ? r->n : 1));
    bar *b2 = malloc(sizeof *b2 * (size_t)(r->n ? r->n : 1));
    char *done = calloc((size_t)(r->n ? r->n : 1), 1);
    if (!b1 || !b2 || !done) {
        fputs("<p>out of memory drawing the charts</p>", f);
        goto out;
    }
    fputs("<p class=\"sub\">Median tokens per second per cell, grouped by model; bars in "
          "vermillion with &#10007; are outside their tolerance; hover a bar for its cell.</p>\n",
          f);
    int charts = 0;
    for (int i = 0; i < r->n; i++) {
        if (done[i])
            continue;
        const char *model = r->cells[i].model;
        int n1 = 0, n2 = 0;
        const char *u1 = "tok/s", *u2 = "tok/s";
        for (int j = i; j < r->n; j++) {
            const gt_rep_cell *c = &r->cells[j];
            if (done[j] || strcmp(c->model, model) != 0)
                continue;
            done[j] = 1;
            for (int k = 0; k < c->n_metrics; k++) {
                const gt_rep_metric *m = &c->metrics[k];
                int kind = gt_report_perf_kind(m);
                if (!kind || !m->has_value)
                    continue;
                bar x = {c, m->value, !strcmp(m->verdict, "fail"), false};
                /* One bar per cell and direction; the performance suite's
                 * median wins over another suite's single measurement. */
                bar *b = kind == 1 ? b1 : b2;
                int *nb = kind == 1 ? &n1 : &n2;
                bool perf = !strcmp(m->suite, "performance");
                if (*nb == 0 || b[*nb - 1].c != c) {
                    b[(*nb)++] = x;
                    b[*nb - 1].perf = perf;
                } else if (perf && !b[*nb - 1].perf) {
                    b[*nb - 1] = x;
                    b[*nb - 1].perf = true;
                } else {
                    continue;
                }
                if (m->unit[0])
                    *(kind == 1 ? &u1 : &u2) = m->unit;
            }
        }
        if (!n1 && !n2)
            continue;
        charts++;
        fputs("<h3>", f);
        gt_report_esc(f, model);
        fputs("</h3><div class=\"charts\">", f);
        char title[300];
        if (n1) {
            snprintf(title, sizeof title, "prefill");
            chart(f, title, u1, b1, n1, 1);
        }
        if (n2) {
            snprintf(title, sizeof title, "decode");
            chart(f, title, u2, b2, n2, 2);
        }
        fputs("</div>\n", f);
    }
    if (!charts)
        fputs("<p class=\"sub\">No cell of this run reported prefill or decode throughput.</p>\n",
              f);
    fputs("<h3>Latency</h3>\n", f);
    metric_table(f, r, pick_latency);
    fputs("<h3>Load time, memory and spread</h3>\n", f);
    metric_table(f, r, pick_perf_other);
out:
    free(b1);
    free(b2);
    free(done);
}
