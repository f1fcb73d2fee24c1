/* html_charts.c: the accuracy table and the performance section.
 *
 * Metric names belong to the suites and keep evolving, so nothing here
 * names a metric: accuracy metrics are found by suite or by pattern (kld,
 * top1, agreement, nmse, ppl), throughput by tok/s with prefill/pp or
 * decode/tg in the name, latency by latency/ttft/_pNN. A column appears for
 * each such metric some cell reported, in first-seen order.
 *
 * The tables' rows and the charts are drawn by the script (html_lazy.c)
 * from the data block: horizontal bars (labels stay readable however many
 * cells a model has), one chart per model and per direction (prefill and
 * decode differ by an order of magnitude, so one shared axis would flatten
 * decode), each bar with its value written at its end so the chart prints
 * and reads without colour. */
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

/* A table of cells x the metric columns selected by pick: the columns are
 * chosen here (the classification is the report's, in C), the rows are
 * drawn by the script from the data block. */
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
    fputs("<div class=\"lazy-table\" data-cols=\"[", f);
    for (int i = 0; i < k.n; i++) {
        if (i)
            fputc(',', f);
        /* JSON inside an attribute: the JSON escaper leaves no quote
         * unescaped for the attribute escaper to turn into &quot;. */
        char *buf = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&buf, &n);
        if (!m)
            continue;
        gt_report_json_str(m, k.label[i]);
        fclose(m);
        gt_report_esc(f, buf);
        free(buf);
    }
    fputs("]\"></div>\n", f);
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

void gt_html_performance(FILE *f, const gt_rep_run *r)
{
    bool any = false;
    for (int i = 0; i < r->n && !any; i++)
        for (int k = 0; k < r->cells[i].n_metrics && !any; k++)
            any = gt_report_perf_kind(&r->cells[i].metrics[k]) && r->cells[i].metrics[k].has_value;
    if (any)
        fputs("<p class=\"sub\">Median tokens per second per cell, grouped by model, for the "
              "models on the grid's current page; bars in vermillion with &#10007; are outside "
              "their tolerance; hover a bar for its cell.</p>\n<div id=\"perf-charts\"></div>\n",
              f);
    else
        fputs("<p class=\"sub\">No cell of this run reported prefill or decode throughput.</p>\n",
              f);
    fputs("<h3>Latency</h3>\n", f);
    metric_table(f, r, pick_latency);
    fputs("<h3>Load time, memory and spread</h3>\n", f);
    metric_table(f, r, pick_perf_other);
}
