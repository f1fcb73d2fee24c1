/* localize_out.c: a localizer result as a terminal table, JSON and a
 * self-contained HTML page (per-layer NMSE on a log scale, inline SVG). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "localize.h"
#include "report.h"

static const char *mark(const gt_loc_result *r, int i)
{
    return i == r->first_added ? "<< first beyond tolerance on identical inputs"
         : i == r->first_reached ? "<  first whose reached NMSE is beyond tolerance"
                                 : "";
}

void gt_loc_print_table(const gt_loc_result *r, const char *a_label, const char *b_label, FILE *f)
{
    if (r->from > 0)
        fprintf(f, "per node, %s vs %s over positions %d..%d of %d tokens (NMSE reached; NMSE "
                   "added on %s's inputs)\n",
                b_label, a_label, r->from, r->n_tokens - 1, r->n_tokens, a_label);
    else
        fprintf(f, "per node, %s vs %s over %d tokens (NMSE reached; NMSE added on %s's "
                   "inputs)\n",
                b_label, a_label, r->n_tokens, a_label);
    fprintf(f, "%-4s %-26s %-13s %-18s %11s %11s %9s %11s %9s\n", "#", "node", "op", "inputs",
            "NMSE", "max|d|", "cosine", "added", "tol");
    for (int i = 0; i < r->n; i++) {
        const gt_loc_node *d = &r->nodes[i];
        fprintf(f, "%-4d %-26s %-13s %-18.18s %11.3g %11.3g %9.6f %11.3g %9.1g %s\n", i, d->name,
                d->op, d->types, d->nmse, d->max_abs, d->cosine, d->added_nmse, d->tolerance,
                mark(r, i));
    }
    char line[512];
    gt_loc_summary(r, b_label, line, sizeof line);
    fprintf(f, "%s\n", line);
    if (r->first_added >= 0) {
        const gt_loc_node *d = &r->nodes[r->first_added];
        fprintf(f, "  layer %d, op %s, inputs %s, output %lld x %lld; NMSE reached there %.3g\n",
                d->layer, d->op, d->types, (long long)d->ne0, (long long)d->ne1, d->nmse);
    } else if (r->first_reached >= 0) {
        fprintf(f, "  the difference reached tolerance first at %s (NMSE %.3g), built up by "
                "nodes that are each within tolerance\n", r->nodes[r->first_reached].name,
                r->nodes[r->first_reached].nmse);
    }
}

static cJSON *node_json(const gt_loc_node *d)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "node", d->name);
    cJSON_AddNumberToObject(o, "layer", d->layer);
    cJSON_AddStringToObject(o, "op", d->op);
    cJSON_AddStringToObject(o, "inputs", d->types);
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d->ne0));
    cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d->ne1));
    const double v[] = {d->nmse, d->max_abs, d->cosine, d->added_nmse, d->tolerance};
    const char *k[] = {"nmse", "max_abs", "cosine", "added_nmse", "tolerance"};
    for (int i = 0; i < 5; i++) {
        if (isfinite(v[i]))
            cJSON_AddNumberToObject(o, k[i], v[i]);
        else
            cJSON_AddStringToObject(o, k[i], isnan(v[i]) ? "nan" : "inf");
    }
    return o;
}

int gt_loc_write_json(const gt_loc_result *r, const char *model, const char *a_label,
                      const char *b_label, FILE *f, gt_err *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddStringToObject(root, "a", a_label);
    cJSON_AddStringToObject(root, "b", b_label);
    cJSON_AddNumberToObject(root, "tokens", r->n_tokens);
    cJSON_AddNumberToObject(root, "from", r->from);
    char line[512];
    gt_loc_summary(r, b_label, line, sizeof line);
    cJSON_AddStringToObject(root, "summary", line);
    if (r->first_added >= 0)
        cJSON_AddItemToObject(root, "divergence", node_json(&r->nodes[r->first_added]));
    else
        cJSON_AddNullToObject(root, "divergence");
    if (r->first_reached >= 0)
        cJSON_AddStringToObject(root, "first_reached", r->nodes[r->first_reached].name);
    if (r->max_at >= 0)
        cJSON_AddItemToObject(root, "largest", node_json(&r->nodes[r->max_at]));
    cJSON *ns = cJSON_AddArrayToObject(root, "nodes");
    for (int i = 0; i < r->n; i++)
        cJSON_AddItemToArray(ns, node_json(&r->nodes[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return gt_err_set(err, "out of memory");
    int rc = fprintf(f, "%s\n", text) < 0 ? gt_err_set(err, "write failed") : 0;
    cJSON_free(text);
    return rc;
}

/* y of an NMSE on the plot's log axis, 1e-16 (bottom) .. 1 (top). */
static double plot_y(double v, double top, double h)
{
    double l = v > 0 ? log10(v) : -16;
    if (!(l >= -16))
        l = -16;
    if (l > 0 || !isfinite(v))
        l = 0;
    return top + h * (-l / 16.0);
}

static void polyline(FILE *f, const gt_loc_result *r, bool added, const char *colour, double x0,
                     double w, double top, double h)
{
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='", colour);
    for (int i = 0; i < r->n; i++) {
        const double v = added ? r->nodes[i].added_nmse : r->nodes[i].nmse;
        fprintf(f, "%.1f,%.1f ", x0 + w * i / (r->n > 1 ? r->n - 1 : 1), plot_y(v, top, h));
    }
    fprintf(f, "'/>\n");
}

int gt_loc_write_html(const gt_loc_result *r, const char *model, const char *a_label,
                      const char *b_label, FILE *f, gt_err *err)
{
    char line[512];
    gt_loc_summary(r, b_label, line, sizeof line);
    fprintf(f, "<!doctype html>\n<html><head><meta charset='utf-8'><title>localize: ");
    gt_report_esc(f, model);
    fprintf(f, "</title><style>body{font:14px sans-serif;margin:2em}table{border-collapse:"
               "collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
               "td:nth-child(2),td:nth-child(3){text-align:left}tr.bad{background:#fdd}"
               "</style></head><body>\n<h1>Where ");
    gt_report_esc(f, b_label);
    fprintf(f, " parts from ");
    gt_report_esc(f, a_label);
    fprintf(f, "</h1>\n<p>");
    gt_report_esc(f, model);
    fprintf(f, ", %d tokens", r->n_tokens);
    if (r->from > 0)
        fprintf(f, " (positions %d..%d compared)", r->from, r->n_tokens - 1);
    fprintf(f, ". <b>");
    gt_report_esc(f, line);
    fprintf(f, "</b></p>\n");
    /* The plot: x = node in graph order, y = log10 NMSE. */
    const double x0 = 60, w = 900, top = 20, h = 300;
    fprintf(f, "<svg width='%.0f' height='%.0f' role='img' aria-label='NMSE per node'>\n",
            x0 + w + 20, top + h + 40);
    for (int e = 0; e >= -16; e -= 4) {
        const double y = plot_y(pow(10, e), top, h);
        fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='#ccc'/>"
                   "<text x='4' y='%.1f' font-size='11'>1e%d</text>\n", x0, x0 + w, y, y, y + 4, e);
    }
    int last_layer = -2;
    for (int i = 0; i < r->n; i++)
        if (r->nodes[i].layer != last_layer && r->nodes[i].layer >= 0 &&
            r->nodes[i].layer % 5 == 0) {
            last_layer = r->nodes[i].layer;
            const double x = x0 + w * i / (r->n > 1 ? r->n - 1 : 1);
            fprintf(f, "<text x='%.1f' y='%.0f' font-size='11'>blk.%d</text>\n", x, top + h + 16,
                    last_layer);
        }
    polyline(f, r, false, "#c33", x0, w, top, h);
    polyline(f, r, true, "#36c", x0, w, top, h);
    if (r->first_added >= 0) {
        const double x = x0 + w * r->first_added / (r->n > 1 ? r->n - 1 : 1);
        fprintf(f, "<line x1='%.1f' x2='%.1f' y1='%.0f' y2='%.0f' stroke='#000' "
                   "stroke-dasharray='4'/><text x='%.1f' y='%.0f' font-size='12'>",
                x, x, top, top + h, x + 4, top + 12);
        gt_report_esc(f, r->nodes[r->first_added].name);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n<p><span style='color:#c33'>&#9632;</span> NMSE reached (");
    gt_report_esc(f, b_label);
    fprintf(f, " vs ");
    gt_report_esc(f, a_label);
    fprintf(f, ") &nbsp; <span style='color:#36c'>&#9632;</span> NMSE added on identical "
               "inputs</p>\n<table><tr><th>#</th><th>node</th><th>op</th><th>inputs</th>"
               "<th>NMSE</th><th>max |&Delta;|</th><th>cosine</th><th>added</th>"
               "<th>tolerance</th></tr>\n");
    for (int i = 0; i < r->n; i++) {
        const gt_loc_node *d = &r->nodes[i];
        fprintf(f, "<tr%s><td>%d</td><td>", i == r->first_added ? " class='bad'" : "", i);
        gt_report_esc(f, d->name);
        fprintf(f, "</td><td>");
        gt_report_esc(f, d->op);
        fprintf(f, "</td><td>");
        gt_report_esc(f, d->types);
        fprintf(f, "</td><td>%.3g</td><td>%.3g</td><td>%.6f</td><td>%.3g</td><td>%.1g</td></tr>\n",
                d->nmse, d->max_abs, d->cosine, d->added_nmse, d->tolerance);
    }
    fprintf(f, "</table></body></html>\n");
    return ferror(f) ? gt_err_set(err, "write failed") : 0;
}
