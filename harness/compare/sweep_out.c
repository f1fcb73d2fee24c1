/* sweep_out.c: the settings sweep's grid on a terminal and as JSON
 * (sweep.h has the JSON's shape).
 *
 * The terminal grid has one row per n_batch and one column per (n_parallel,
 * threads) pair, each entry the cell's KL mean and top-1, marked when it
 * disagrees: the axis that breaks shows as a band of marks. The finding
 * follows, one line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "compare.h"

static void label(const char *backend, const char *driver, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s%s", backend, driver ? ":" : "", driver ? driver : "");
}

static void axis_value(int a, int v, char *out, size_t cap)
{
    if (v == 0 && a != GT_SW_N_PARALLEL)
        snprintf(out, cap, "default");
    else
        snprintf(out, cap, "%d", v);
}

void gt_sweep_print(const gt_sweep_spec *s, const gt_sweep_grid *g, const gt_sweep_verdict *v,
                    bool color, FILE *f)
{
    const char *bold = color ? "\033[1m" : "", *red = color ? "\033[31m" : "",
               *green = color ? "\033[32m" : "", *reset = color ? "\033[0m" : "";
    char a[160], b[160];
    label(s->ref_backend, s->ref_driver, a, sizeof a);
    label(s->backend, s->driver, b, sizeof b);
    fprintf(f, "%s%s against %s%s over a %d-token prompt, %d settings (%.1f s); agrees when KL "
               "mean <= %.3g and top-1 >= %.3g\n\n",
            bold, b, a, reset, g->n_prompt, g->n_cells, g->seconds, g->max_kld, g->min_top1);
    const int np = g->n_values[GT_SW_N_PARALLEL], nt = g->n_values[GT_SW_THREADS];
    fprintf(f, "%s%-10s", bold, "n_batch");
    char x[32], y[32], head[64];
    for (int p = 0; p < np; p++)
        for (int t = 0; t < nt; t++) {
            axis_value(GT_SW_N_PARALLEL, g->values[GT_SW_N_PARALLEL][p], x, sizeof x);
            axis_value(GT_SW_THREADS, g->values[GT_SW_THREADS][t], y, sizeof y);
            snprintf(head, sizeof head, "np %s t %s", x, y);
            fprintf(f, " %17s", head);
        }
    fprintf(f, "%s\n", reset);
    for (int bi = 0; bi < g->n_values[GT_SW_N_BATCH]; bi++) {
        axis_value(GT_SW_N_BATCH, g->values[GT_SW_N_BATCH][bi], x, sizeof x);
        fprintf(f, "%-10s", x);
        for (int p = 0; p < np; p++)
            for (int t = 0; t < nt; t++) {
                const int i[GT_SW_N_AXES] = {bi, p, t};
                const gt_sweep_cell *c = &g->cells[gt_sweep_index(g, i)];
                char e[32];
                if (c->error[0])
                    snprintf(e, sizeof e, "error x");
                else
                    snprintf(e, sizeof e, "%8.2g %5.1f%% %s", c->kld_mean, 100 * c->top1,
                             c->agrees ? " " : "x");
                fprintf(f, " %s%17s%s", c->agrees ? "" : red, e, reset);
            }
        fputc('\n', f);
    }
    for (int k = 0; k < g->n_cells; k++)
        if (g->cells[k].error[0]) {
            const gt_sweep_cell *c = &g->cells[k];
            fprintf(f, "  error at n_batch %d, n_parallel %d, threads %d: %s\n",
                    c->v[GT_SW_N_BATCH], c->v[GT_SW_N_PARALLEL], c->v[GT_SW_THREADS], c->error);
        }
    fprintf(f, "(entries: KL(%s || %s) mean over the prompt's positions, top-1 agreement; x = "
               "disagrees)\n\n%s%s%s\n",
            a, b, v->agrees ? green : red, v->text, reset);
}

static cJSON *setting(const gt_sweep_cell *c)
{
    cJSON *o = cJSON_CreateObject();
    for (int a = 0; a < GT_SW_N_AXES; a++)
        cJSON_AddNumberToObject(o, gt_sweep_axis_name((gt_sweep_axis)a), c->v[a]);
    return o;
}

/* JSON has no infinity: a cell that could not run has null numbers. */
static void num(cJSON *o, const char *k, double x)
{
    if (isfinite(x))
        cJSON_AddNumberToObject(o, k, x);
    else
        cJSON_AddNullToObject(o, k);
}

int gt_sweep_write_json(const gt_sweep_spec *s, const gt_sweep_grid *g,
                        const gt_sweep_verdict *v, FILE *f, gt_err *err)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return gt_err_set(err, "out of memory");
    cJSON_AddStringToObject(root, "model", s->model_path);
    const char *sides[2][2] = {{s->ref_backend, s->ref_driver}, {s->backend, s->driver}};
    for (int i = 0; i < 2; i++) {
        cJSON *o = cJSON_AddObjectToObject(root, i ? "b" : "a");
        cJSON_AddStringToObject(o, "backend", sides[i][0]);
        if (sides[i][1])
            cJSON_AddStringToObject(o, "driver", sides[i][1]);
        else
            cJSON_AddNullToObject(o, "driver");
    }
    cJSON_AddStringToObject(root, "prompt", s->prompt);
    cJSON_AddNumberToObject(root, "n_prompt", g->n_prompt);
    cJSON_AddNumberToObject(root, "max_kld", g->max_kld);
    cJSON_AddNumberToObject(root, "min_top1", g->min_top1);
    cJSON *axes = cJSON_AddArrayToObject(root, "axes");
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        if (!g->swept[a])
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", gt_sweep_axis_name((gt_sweep_axis)a));
        cJSON *vals = cJSON_AddArrayToObject(o, "values");
        for (int j = 0; j < g->n_values[a]; j++)
            cJSON_AddItemToArray(vals, cJSON_CreateNumber(g->values[a][j]));
        cJSON_AddItemToArray(axes, o);
    }
    cJSON *cells = cJSON_AddArrayToObject(root, "cells");
    for (int k = 0; k < g->n_cells; k++) {
        const gt_sweep_cell *c = &g->cells[k];
        cJSON *o = setting(c);
        num(o, "kld_mean", c->kld_mean);
        num(o, "kld_max", c->kld_max);
        num(o, "top1", c->top1);
        cJSON_AddBoolToObject(o, "agrees", c->agrees);
        if (c->error[0])
            cJSON_AddStringToObject(o, "error", c->error);
        cJSON_AddItemToArray(cells, o);
    }
    cJSON_AddBoolToObject(root, "agrees", v->agrees);
    cJSON_AddStringToObject(root, "finding", v->text);
    cJSON *af = cJSON_AddObjectToObject(root, "axis_findings");
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        if (!g->swept[a])
            continue;
        cJSON *o = cJSON_AddObjectToObject(af, gt_sweep_axis_name((gt_sweep_axis)a));
        cJSON_AddBoolToObject(o, "breaks", v->breaks[a]);
        cJSON_AddStringToObject(o, "text", v->axis_text[a]);
    }
    cJSON_AddItemToObject(root, "base", setting(&g->cells[v->base]));
    if (v->combo >= 0)
        cJSON_AddItemToObject(root, "combination", setting(&g->cells[v->combo]));
    else
        cJSON_AddNullToObject(root, "combination");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return gt_err_set(err, "out of memory");
    int rc = fprintf(f, "%s\n", text) < 0 ? gt_err_set(err, "write failed") : 0;
    free(text);
    return rc;
}
