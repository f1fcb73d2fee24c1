/* compare_sweep.c: the settings sweep's engine and its naming (sweep.h).
 *
 * Design choices:
 * - The reference runs once, alone, with the backend's defaults: it is the
 *   one distribution every cell is held to, so two cells that disagree
 *   with each other but not with it are both fine.
 * - A fresh backend instance per cell: the settings are the backend's
 *   (gt_backend_config, kept in b->exec), as a matrix cell gets them, so the
 *   sweep exercises the same path the settings axis does. The model is
 *   loaded once and shared.
 * - All of the prompt's logits come from one eval: the runtime splits it
 *   into micro-batches of n_batch tokens and packs the companions' tokens
 *   beside it, which is exactly what the sweep varies.
 * - The naming reads only agree/disagree per cell, so it is tested on
 *   synthetic grids (tests/test_sweep.c) without running a model. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "compare.h"
#include "gt/backend.h"
#include "gt/model.h"
#include "gt/session.h"

static const char *const AXIS_NAMES[GT_SW_N_AXES] = {"n_batch", "n_parallel", "threads"};
/* The command-line flag of each axis's list. */
static const char *const AXIS_FLAGS[GT_SW_N_AXES] = {"--n-batch", "--n-parallel", "--threads"};

const char *gt_sweep_axis_name(gt_sweep_axis a)
{
    return a >= 0 && a < GT_SW_N_AXES ? AXIS_NAMES[a] : "?";
}

void gt_sweep_defaults(gt_sweep_spec *s)
{
    memset(s, 0, sizeof *s);
    s->ref_backend = "reference";
    static const int nb[] = {1, 7, GT_SW_PROMPT_LEN, 512}, np[] = {1, 2, 4}, th[] = {1, 2};
    memcpy(s->values[GT_SW_N_BATCH], nb, sizeof nb);
    s->n_values[GT_SW_N_BATCH] = 4;
    memcpy(s->values[GT_SW_N_PARALLEL], np, sizeof np);
    s->n_values[GT_SW_N_PARALLEL] = 3;
    memcpy(s->values[GT_SW_THREADS], th, sizeof th);
    s->n_values[GT_SW_THREADS] = 2;
    s->max_kld = 1e-9;
    s->min_top1 = 0.95;
}

/* Calls fn on each comma-separated item of list (items may not be empty). */
static int each_item(const char *list, const char *what, gt_err *err,
                     int (*fn)(const char *item, void *user, gt_err *err), void *user)
{
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item)
            return gt_err_set(err, "%s: '%s' is not a comma-separated list", what, list);
        memcpy(item, p, len);
        item[len] = '\0';
        if (fn(item, user, err) != 0)
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int axis_item(const char *item, void *user, gt_err *err)
{
    bool *swept = user;
    for (int a = 0; a < GT_SW_N_AXES; a++)
        if (!strcmp(item, AXIS_NAMES[a])) {
            swept[a] = true;
            return 0;
        }
    return gt_err_set(err, "--sweep: unknown setting '%s' (n_batch, n_parallel, threads)", item);
}

int gt_sweep_axes_parse(const char *list, bool swept[GT_SW_N_AXES], gt_err *err)
{
    bool s[GT_SW_N_AXES] = {false};
    if (each_item(list, "--sweep", err, axis_item, s) != 0)
        return -1;
    memcpy(swept, s, sizeof s);
    return 0;
}

typedef struct values_ctx {
    gt_sweep_axis axis;
    int *values, n;
} values_ctx;

static int value_item(const char *item, void *user, gt_err *err)
{
    values_ctx *v = user;
    const char *name = AXIS_FLAGS[v->axis];
    if (v->n == GT_SW_MAX_VALUES)
        return gt_err_set(err, "%s: at most %d values", name, GT_SW_MAX_VALUES);
    if (v->axis == GT_SW_N_BATCH && !strcmp(item, "prompt")) {
        v->values[v->n++] = GT_SW_PROMPT_LEN;
        return 0;
    }
    char *end;
    long x = strtol(item, &end, 10);
    if (*end || x < 1 || x > 65536)
        return gt_err_set(err, "%s: '%s' is not an integer in 1..65536%s", name, item,
                          v->axis == GT_SW_N_BATCH ? " (or \"prompt\")" : "");
    v->values[v->n++] = (int)x;
    return 0;
}

int gt_sweep_values_parse(gt_sweep_axis a, const char *list, int *values, int *n, gt_err *err)
{
    values_ctx v = {a, values, 0};
    if (each_item(list, AXIS_FLAGS[a], err, value_item, &v) != 0)
        return -1;
    *n = v.n;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int gt_sweep_index(const gt_sweep_grid *g, const int i[GT_SW_N_AXES])
{
    int k = 0;
    for (int a = 0; a < GT_SW_N_AXES; a++)
        k = k * g->n_values[a] + i[a];
    return k;
}

/* The value indices of cell k. */
static void cell_at(const gt_sweep_grid *g, int k, int i[GT_SW_N_AXES])
{
    for (int a = GT_SW_N_AXES - 1; a >= 0; a--) {
        i[a] = k % g->n_values[a];
        k /= g->n_values[a];
    }
}

int gt_sweep_grid_init(const gt_sweep_spec *spec, int n_prompt, gt_sweep_grid *g, gt_err *err)
{
    memset(g, 0, sizeof *g);
    g->n_prompt = n_prompt;
    g->max_kld = spec->max_kld;
    g->min_top1 = spec->min_top1;
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        g->swept[a] = spec->swept[a];
        int *v = g->values[a], n = 0;
        if (!spec->swept[a]) {
            v[n++] = a == GT_SW_N_BATCH ? 0 : a == GT_SW_N_PARALLEL ? 1 : spec->n_threads;
        } else {
            for (int j = 0; j < spec->n_values[a]; j++)
                v[n++] = spec->values[a][j] == GT_SW_PROMPT_LEN ? n_prompt : spec->values[a][j];
            qsort(v, (size_t)n, sizeof *v, cmp_int);
            int u = 0;
            for (int j = 0; j < n; j++)
                if (u == 0 || v[j] != v[u - 1])
                    v[u++] = v[j];
            n = u;
        }
        if (n < 1)
            return gt_err_set(err, "%s: no values", AXIS_FLAGS[a]);
        g->n_values[a] = n;
    }
    g->n_cells = g->n_values[0] * g->n_values[1] * g->n_values[2];
    g->cells = calloc((size_t)g->n_cells, sizeof *g->cells);
    if (!g->cells)
        return gt_err_set(err, "out of memory");
    for (int k = 0; k < g->n_cells; k++) {
        int i[GT_SW_N_AXES];
        cell_at(g, k, i);
        for (int a = 0; a < GT_SW_N_AXES; a++)
            g->cells[k].v[a] = g->values[a][i[a]];
    }
    return 0;
}

void gt_sweep_grid_free(gt_sweep_grid *g)
{
    free(g->cells);
    memset(g, 0, sizeof *g);
}

/* Room for the prompt and the companions' filler tokens (1 to 4 per eval). */
static int sweep_n_ctx(int n_prompt) { return n_prompt + 16; }

/* All of the prompt's logits from a fresh instance of backend opened with
 * these settings. */
static int eval_prompt(const gt_model *m, const char *backend, const char *driver, int threads,
                       int n_batch, int n_parallel, const int32_t *tok, int n, float *logits,
                       gt_err *err)
{
    gt_backend_config cfg = {.device = 0, .n_threads = threads, .driver = driver,
                             .n_batch = n_batch, .n_parallel = n_parallel};
    gt_backend *b = NULL;
    gt_session *s = NULL;
    gt_session_params sp = {.n_ctx = sweep_n_ctx(n)};
    int rc = -1;
    if (gt_backend_open(backend, &cfg, &b, err) != 0)
        return -1;
    if (gt_session_new(m, b, &sp, &s, err) == 0 &&
        gt_session_eval(s, tok, n, true, logits, err) == 0)
        rc = 0;
    gt_session_free(s);
    gt_backend_close(b);
    return rc;
}

static void judge(gt_sweep_cell *c, const float *ref, const float *got, int n, int n_vocab,
                  double *scratch, double max_kld, double min_top1)
{
    int agree = 0;
    c->kld_mean = c->kld_max = 0;
    for (int p = 0; p < n; p++) {
        bool same;
        size_t off = (size_t)p * (size_t)n_vocab;
        double kl = gt_cmp_kl(ref + off, got + off, n_vocab, scratch, &same);
        if (!isfinite(kl))
            kl = INFINITY;
        c->kld_mean += kl;
        if (kl > c->kld_max)
            c->kld_max = kl;
        agree += same;
    }
    c->kld_mean /= n;
    c->top1 = (double)agree / n;
    c->agrees = c->kld_mean <= max_kld && c->top1 >= min_top1;
}

int gt_sweep_run(const gt_sweep_spec *spec, gt_sweep_grid *g, gt_err *err)
{
    memset(g, 0, sizeof *g);
    gt_model *m = NULL;
    int32_t *tok = NULL;
    float *ref = NULL, *got = NULL;
    double *scratch = NULL;
    int n = 0, rc = -1;
    const double t0 = gt_now();
    if (gt_model_load(spec->model_path, &m, err) != 0)
        return -1;
    tok = gt_cli_tokenize("compare", m, spec->prompt, false, &n);
    if (!tok) {
        gt_err_set(err, "the prompt could not be tokenized");
        goto out;
    }
    if (n < 2) {
        gt_err_set(err, "the prompt has %d token%s; the sweep needs at least 2 to split", n,
                   n == 1 ? "" : "s");
        goto out;
    }
    const int n_vocab = gt_model_hparams(m)->n_vocab;
    const size_t len = (size_t)n * (size_t)n_vocab;
    ref = malloc(len * sizeof *ref);
    got = malloc(len * sizeof *got);
    scratch = malloc(2 * (size_t)n_vocab * sizeof *scratch);
    if (!ref || !got || !scratch) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    if (gt_sweep_grid_init(spec, n, g, err) != 0)
        goto out;
    fprintf(stderr, "gauntlet compare: sweeping %d settings of %s over a %d-token prompt...\n",
            g->n_cells, spec->backend, n);
    if (eval_prompt(m, spec->ref_backend, spec->ref_driver, spec->n_threads, 0, 0, tok, n, ref,
                    err) != 0) {
        gt_err_wrap(err, "reference side (%s)", spec->ref_backend);
        goto out;
    }
    for (int k = 0; k < g->n_cells; k++) {
        gt_sweep_cell *c = &g->cells[k];
        gt_err e = {{0}};
        if (eval_prompt(m, spec->backend, spec->driver, c->v[GT_SW_THREADS],
                        c->v[GT_SW_N_BATCH], c->v[GT_SW_N_PARALLEL], tok, n, got, &e) != 0) {
            snprintf(c->error, sizeof c->error, "%s", e.msg[0] ? e.msg : "failed");
            c->agrees = false;
            c->kld_mean = c->kld_max = INFINITY;
            c->top1 = 0;
            continue;
        }
        judge(c, ref, got, n, n_vocab, scratch, spec->max_kld, spec->min_top1);
    }
    g->seconds = gt_now() - t0;
    rc = 0;
out:
    if (rc != 0)
        gt_sweep_grid_free(g);
    free(tok);
    free(ref);
    free(got);
    free(scratch);
    gt_model_free(m);
    return rc;
}

/* --- naming ---------------------------------------------------------------- */

/* The least demanding value of an axis: the largest n_batch (splits
 * least), the fewest sequences, the fewest threads. */
static int base_index(const gt_sweep_grid *g, int a)
{
    return a == GT_SW_N_BATCH ? g->n_values[a] - 1 : 0;
}

static int append(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int append(char *out, size_t cap, const char *fmt, ...)
{
    size_t at = strlen(out);
    if (at >= cap)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(out + at, cap - at, fmt, ap);
    va_end(ap);
    return r;
}

static void value_list(const int *v, int n, char *out, size_t cap)
{
    out[0] = '\0';
    for (int j = 0; j < n; j++)
        append(out, cap, "%s%d", j ? ", " : "", v[j]);
}

/* Axis a changed alone from the base: which values break. */
static void name_axis(const gt_sweep_grid *g, const int base[GT_SW_N_AXES], int a,
                      gt_sweep_verdict *v)
{
    const char *name = AXIS_NAMES[a];
    char *out = v->axis_text[a];
    const size_t cap = sizeof v->axis_text[a];
    int bad[GT_SW_MAX_VALUES], good[GT_SW_MAX_VALUES], nb = 0, ng = 0;
    for (int j = 0; j < g->n_values[a]; j++) {
        int i[GT_SW_N_AXES];
        memcpy(i, base, sizeof i);
        i[a] = j;
        if (g->cells[gt_sweep_index(g, i)].agrees)
            good[ng++] = g->values[a][j];
        else
            bad[nb++] = g->values[a][j];
    }
    v->breaks[a] = nb > 0;
    if (nb == 0) {
        snprintf(out, cap, "%s has no effect", name);
        return;
    }
    /* Values ascend, so a threshold shows as every bad value on one side of
     * every good one (the base, which agrees, is on the good side). */
    if (a == GT_SW_N_BATCH && bad[nb - 1] < good[0]) {
        const int lo = good[0]; /* the smallest n_batch that agrees */
        if (bad[nb - 1] < g->n_prompt && lo >= g->n_prompt)
            snprintf(out, cap, "diverges when the prompt (%d tokens) is split: n_batch < %d",
                     g->n_prompt, g->n_prompt);
        else
            snprintf(out, cap, "diverges when n_batch <= %d (%d agrees)", bad[nb - 1], lo);
        return;
    }
    if (a != GT_SW_N_BATCH && good[ng - 1] < bad[0]) {
        const int hi = good[ng - 1]; /* the largest value that agrees */
        if (bad[0] == hi + 1)
            snprintf(out, cap, "diverges when %s > %d", name, hi);
        else
            snprintf(out, cap, "diverges when %s >= %d (%d agrees)", name, bad[0], hi);
        return;
    }
    char bl[128], gl[128];
    value_list(bad, nb, bl, sizeof bl);
    value_list(good, ng, gl, sizeof gl);
    snprintf(out, cap, "diverges at %s %s (agrees at %s)", name, bl, gl);
}

/* The cell's settings; with base, only those that differ from it. */
static void setting_text(const gt_sweep_cell *c, const gt_sweep_cell *base, char *out,
                         size_t cap)
{
    out[0] = '\0';
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        if (base && base->v[a] == c->v[a])
            continue;
        if (a == GT_SW_N_BATCH && c->v[a] == 0)
            append(out, cap, "%sn_batch default", out[0] ? ", " : "");
        else if (a == GT_SW_THREADS && c->v[a] == 0)
            append(out, cap, "%sthreads default", out[0] ? ", " : "");
        else
            append(out, cap, "%s%s %d", out[0] ? ", " : "", AXIS_NAMES[a], c->v[a]);
    }
}

void gt_sweep_name(const gt_sweep_grid *g, gt_sweep_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->combo = -1;
    int base[GT_SW_N_AXES];
    for (int a = 0; a < GT_SW_N_AXES; a++)
        base[a] = base_index(g, a);
    v->base = gt_sweep_index(g, base);
    int n_bad = 0;
    for (int k = 0; k < g->n_cells; k++)
        n_bad += !g->cells[k].agrees;
    v->agrees = n_bad == 0;
    if (v->agrees) {
        snprintf(v->text, sizeof v->text, "agrees everywhere");
        for (int a = 0; a < GT_SW_N_AXES; a++)
            if (g->swept[a])
                snprintf(v->axis_text[a], sizeof v->axis_text[a], "%s has no effect",
                         AXIS_NAMES[a]);
        return;
    }
    char set[160];
    if (!g->cells[v->base].agrees) {
        setting_text(&g->cells[v->base], NULL, set, sizeof set);
        snprintf(v->text, sizeof v->text,
                 "diverges at every setting tried, even the least demanding (%s): the backend "
                 "disagrees with the reference apart from these settings (compare --localize "
                 "finds where)",
                 set);
        return;
    }
    bool any = false;
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        if (!g->swept[a])
            continue;
        name_axis(g, base, a, v);
        any |= v->breaks[a];
    }
    if (!any) {
        /* Only a combination breaks: the one with the fewest changes. */
        int best_changes = GT_SW_N_AXES + 1;
        for (int k = 0; k < g->n_cells; k++) {
            if (g->cells[k].agrees)
                continue;
            int i[GT_SW_N_AXES], changes = 0;
            cell_at(g, k, i);
            for (int a = 0; a < GT_SW_N_AXES; a++)
                changes += i[a] != base[a];
            if (changes < best_changes)
                best_changes = changes, v->combo = k;
        }
        setting_text(&g->cells[v->combo], &g->cells[v->base], set, sizeof set);
        snprintf(v->text, sizeof v->text, "diverges only in combination: %s", set);
        for (int a = 0; a < GT_SW_N_AXES; a++)
            if (g->swept[a])
                snprintf(v->axis_text[a], sizeof v->axis_text[a], "%s has no effect alone",
                         AXIS_NAMES[a]);
    }
    /* The axes that break first, then those that do not. */
    for (int pass = 0; pass < 2; pass++)
        for (int a = 0; a < GT_SW_N_AXES; a++)
            if (g->swept[a] && v->breaks[a] == (pass == 0))
                append(v->text, sizeof v->text, "%s%s", v->text[0] ? "; " : "", v->axis_text[a]);
}
