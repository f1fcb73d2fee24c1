/* grid.c: lays a run's cells out as the compatibility grid, rows model x
 * quant and columns backend x driver (and settings variant: the column is
 * "driver/nb7-np4", so a backend's variants sit side by side), in expansion
 * order (the order the matrix author wrote the axes in). Hash-free: keys are
 * sorted and looked up with bsearch, so a 10,000-cell run is laid out in
 * O(n log n) (plus one pass over pairs of columns to keep a profile's
 * variants together). */
#include "report.h"

#include <stdlib.h>
#include <string.h>

typedef struct key {
    const char *a, *b;
    int first; /* cell index of first appearance */
    int group; /* columns: first appearance of the column's backend and driver, so
                * the settings variants of one profile sit together even when an
                * include added some after the product; rows: first */
    int slot;  /* row/column number, in order of (group, first) */
} key;

static int cmp_key(const void *x, const void *y)
{
    const key *p = x, *q = y;
    int c = strcmp(p->a, q->a);
    return c ? c : strcmp(p->b, q->b);
}

static int cmp_first(const void *x, const void *y)
{
    const key *p = x, *q = y;
    return p->group != q->group ? p->group - q->group : p->first - q->first;
}

/* Unique (a, b) pairs, numbered by first appearance; *out sorted by key. */
static int uniq(const gt_rep_run *r, bool rows, key **out, int *n_out)
{
    key *k = malloc(sizeof *k * (size_t)(r->n ? r->n : 1));
    if (!k)
        return -1;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        k[i] = (key){rows ? c->model : c->backend, rows ? c->quant : c->column, i, i, 0};
    }
    qsort(k, (size_t)r->n, sizeof *k, cmp_key);
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        if (n > 0 && cmp_key(&k[n - 1], &k[i]) == 0) {
            if (k[i].first < k[n - 1].first)
                k[n - 1].first = k[i].first;
            continue;
        }
        k[n++] = k[i];
    }
    for (int i = 0; i < n; i++) {
        k[i].group = k[i].first;
        const gt_rep_cell *ci = &r->cells[k[i].first];
        for (int j = 0; !rows && j < n; j++) {
            const gt_rep_cell *cj = &r->cells[k[j].first];
            if (k[j].first < k[i].group && !strcmp(ci->backend, cj->backend) &&
                !strcmp(ci->driver, cj->driver))
                k[i].group = k[j].first;
        }
    }
    qsort(k, (size_t)n, sizeof *k, cmp_first);
    for (int i = 0; i < n; i++)
        k[i].slot = i;
    qsort(k, (size_t)n, sizeof *k, cmp_key);
    *out = k;
    *n_out = n;
    return 0;
}

int gt_report_grid(const gt_rep_run *r, gt_rep_grid *g, gt_err *err)
{
    memset(g, 0, sizeof *g);
    key *rk = NULL, *ck = NULL;
    if (uniq(r, true, &rk, &g->n_rows) != 0 || uniq(r, false, &ck, &g->n_cols) != 0)
        goto oom;
    g->row_first = malloc(sizeof *g->row_first * (size_t)(g->n_rows + 1));
    g->col_first = malloc(sizeof *g->col_first * (size_t)(g->n_cols + 1));
    g->at = malloc(sizeof *g->at * ((size_t)g->n_rows * (size_t)g->n_cols + 1));
    if (!g->row_first || !g->col_first || !g->at)
        goto oom;
    for (int i = 0; i < g->n_rows; i++)
        g->row_first[rk[i].slot] = &r->cells[rk[i].first];
    for (int i = 0; i < g->n_cols; i++)
        g->col_first[ck[i].slot] = &r->cells[ck[i].first];
    for (size_t i = 0; i < (size_t)g->n_rows * (size_t)g->n_cols; i++)
        g->at[i] = -1;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        key q1 = {c->model, c->quant, 0, 0, 0}, q2 = {c->backend, c->column, 0, 0, 0};
        const key *a = bsearch(&q1, rk, (size_t)g->n_rows, sizeof *rk, cmp_key);
        const key *b = bsearch(&q2, ck, (size_t)g->n_cols, sizeof *ck, cmp_key);
        if (a && b)
            g->at[(size_t)a->slot * (size_t)g->n_cols + (size_t)b->slot] = i;
    }
    free(rk);
    free(ck);
    return 0;
oom:
    free(rk);
    free(ck);
    gt_report_grid_free(g);
    return gt_err_set(err, "out of memory laying out the grid");
}

void gt_report_grid_free(gt_rep_grid *g)
{
    free(g->row_first);
    free(g->col_first);
    free(g->at);
    memset(g, 0, sizeof *g);
}

static const char *const AXES[GT_AXIS_COUNT] = {"model", "quant", "backend", "driver",
                                                "settings"};

int gt_report_axis_from_name(const char *name)
{
    for (int a = 0; a < GT_AXIS_COUNT; a++)
        if (strcmp(AXES[a], name) == 0)
            return a;
    return -1;
}

const char *gt_report_axis_name(int axis)
{
    return axis >= 0 && axis < GT_AXIS_COUNT ? AXES[axis] : "?";
}

const char *gt_report_axis_value(const gt_rep_cell *c, int axis)
{
    switch (axis) {
    case GT_AXIS_MODEL: return c->model;
    case GT_AXIS_QUANT: return c->quant;
    case GT_AXIS_BACKEND: return c->backend;
    case GT_AXIS_DRIVER: return c->driver;
    default: return c->settings;
    }
}
