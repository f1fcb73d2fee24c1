/* html_data.c: the HTML report's cells as one compact JSON block, from which
 * the page's script builds the grid, the metric tables, the charts and each
 * cell's details when the reader reaches them (reports/html_lazy.c).
 *
 * Why a data block and not markup: a 10,000-cell run is ~100,000 checks and
 * metrics; as <details> and table rows that is a DOM of millions of nodes
 * that the browser must parse, style and lay out before the first paint
 * (the issue measured: no screenshot within 120 s). As data it is parsed
 * once by JSON.parse (milliseconds) and only what is on screen becomes DOM.
 *
 * Compactness: every string goes through a table ("s"), so a status, a
 * suite, a metric label or a message repeated over 10,000 cells costs one
 * small integer each; cells and their checks and metrics are flat arrays
 * whose field order is written below and read by the script by position.
 *
 *   {"s": [strings],
 *    "c": [[id, cell_id, status, model, quant, backend, driver, required,
 *           expected, expect_reason, raw_status, reason, device, host,
 *           attempts, duration_s, log, change, baseline_status, artifact,
 *           checks[suite, name, status, message]*, metrics[label, value,
 *           unit, comparator, tolerance, verdict]*, bars[prefill, decode,
 *           bad bits], history [[status]*, [decode]*, [kld]*, [top1]*] | 0]],
 *    "grid": {"cols": [[backend, driver]], "rows": [[model, quant]],
 *             "at": [cell index or -1, row-major]},
 *    "art": [[file, sha256]], "runs": [[id, run_key]] }
 * Strings are indices into "s"; missing numbers are null.
 * The log is kept only for cells that need attention, as before. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "base.h"

typedef struct strtab {
    const char **key;
    int *idx;
    size_t cap; /* power of two */
    int n;
    const char **order; /* by index */
    int order_cap;
    char **owned; /* keys copied by intern_copy */
    int n_owned, owned_cap;
    bool oom;
} strtab;

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool grow(strtab *t)
{
    size_t nc = t->cap ? t->cap * 2 : 4096;
    const char **nk = calloc(nc, sizeof *nk);
    int *ni = malloc(nc * sizeof *ni);
    if (!nk || !ni) {
        free(nk);
        free(ni);
        return false;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->key[i])
            continue;
        size_t j = hash(t->key[i]) & (nc - 1);
        while (nk[j])
            j = (j + 1) & (nc - 1);
        nk[j] = t->key[i];
        ni[j] = t->idx[i];
    }
    free(t->key);
    free(t->idx);
    t->key = nk;
    t->idx = ni;
    t->cap = nc;
    return true;
}

static int intern(strtab *t, const char *s)
{
    if (t->oom)
        return 0;
    if ((size_t)(t->n + 1) * 2 > t->cap && !grow(t)) {
        t->oom = true;
        return 0;
    }
    size_t j = hash(s) & (t->cap - 1);
    while (t->key[j]) {
        if (!strcmp(t->key[j], s))
            return t->idx[j];
        j = (j + 1) & (t->cap - 1);
    }
    if (t->n == t->order_cap) {
        int nc = t->order_cap * 2 + 1024;
        const char **no = realloc(t->order, (size_t)nc * sizeof *no);
        if (!no) {
            t->oom = true;
            return 0;
        }
        t->order = no;
        t->order_cap = nc;
    }
    t->key[j] = s;
    t->idx[j] = t->n;
    t->order[t->n] = s;
    return t->n++;
}

/* For a string built on the stack (a metric label): copied once, the
 * first time it is seen. */
static int intern_copy(strtab *t, const char *s)
{
    if (t->oom)
        return 0;
    if (t->cap) {
        size_t j = hash(s) & (t->cap - 1);
        for (; t->key[j]; j = (j + 1) & (t->cap - 1))
            if (!strcmp(t->key[j], s))
                return t->idx[j];
    }
    if (t->n_owned == t->owned_cap) {
        int nc = t->owned_cap * 2 + 16;
        char **no = realloc(t->owned, (size_t)nc * sizeof *no);
        if (!no) {
            t->oom = true;
            return 0;
        }
        t->owned = no;
        t->owned_cap = nc;
    }
    char *dup = strdup(s);
    if (!dup) {
        t->oom = true;
        return 0;
    }
    t->owned[t->n_owned++] = dup;
    return intern(t, dup);
}

static void num(FILE *f, double v, bool present)
{
    if (present && isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* The prefill and decode bar of a cell, as the charts had them: one per
 * direction, the performance suite's median over another suite's value. */
static void bars(FILE *f, const gt_rep_cell *c)
{
    double v[2] = {NAN, NAN};
    int bad = 0, perf[2] = {0, 0};
    for (int k = 0; k < c->n_metrics; k++) {
        const gt_rep_metric *m = &c->metrics[k];
        int kind = gt_report_perf_kind(m);
        if (!kind || !m->has_value)
            continue;
        int p = !strcmp(m->suite, "performance");
        if (!isnan(v[kind - 1]) && (perf[kind - 1] || !p))
            continue;
        v[kind - 1] = m->value;
        perf[kind - 1] = p;
        if (!strcmp(m->verdict, "fail"))
            bad |= kind;
        else
            bad &= ~kind;
    }
    if (isnan(v[0]) && isnan(v[1])) {
        fputc('0', f);
        return;
    }
    fputc('[', f);
    num(f, v[0], true);
    fputc(',', f);
    num(f, v[1], true);
    fprintf(f, ",%d]", bad);
}

static void history(FILE *f, const gt_rep_run *r, int i, strtab *t)
{
    const gt_rep_history *h = r->hist;
    if (!h || !h->n_runs) {
        fputc('0', f);
        return;
    }
    int N = h->n_runs;
    fputs("[[", f);
    for (int k = 0; k < N; k++) {
        int st = h->status[(size_t)i * N + k];
        fprintf(f, "%s%d", k ? "," : "", st < 0 ? -1 : intern(t, gt_status_name((gt_status)st)));
    }
    fputc(']', f);
    for (int s = 0; s < GT_HIST_NSERIES; s++) {
        fputs(",[", f);
        for (int k = 0; k < N; k++) {
            if (k)
                fputc(',', f);
            num(f, h->series[((size_t)i * GT_HIST_NSERIES + s) * N + k], true);
        }
        fputc(']', f);
    }
    fputc(']', f);
}

int gt_html_data(FILE *out, const gt_rep_run *r, const gt_rep_diff *d, gt_err *err)
{
    strtab t = {0};
    char *body = NULL;
    size_t body_n = 0;
    FILE *f = open_memstream(&body, &body_n);
    const gt_rep_status_delta **delta = calloc((size_t)(r->n ? r->n : 1), sizeof *delta);
    gt_rep_grid g = {0};
    int rc = -1;
    if (!f || !delta)
        goto oom;
    for (int i = 0; d && i < d->n_status; i++)
        if (d->status[i].cur)
            delta[d->status[i].cur - r->cells] = &d->status[i];
#define S(x) fprintf(f, "%d,", intern(&t, (x)))
    fputs(",\"c\":[", f);
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        bool attention = strcmp(c->status, "pass") != 0 && strcmp(c->status, "skip") != 0;
        fprintf(f, "%s[%lld,", i ? ",\n" : "", (long long)c->id);
        S(c->cell_id);
        S(c->status);
        S(c->model);
        S(c->quant);
        S(c->backend);
        S(c->driver);
        fprintf(f, "%d,", c->required);
        S(c->expected);
        S(c->expect_reason);
        S(c->raw_status);
        S(c->reason);
        S(c->device);
        S(c->host);
        fprintf(f, "%d,%.3f,", c->attempts, c->duration_s);
        S(attention || gt_report_is_bad(c->status) ? c->log : "");
        const gt_rep_status_delta *dl = delta[i];
        S(!d ? "" : dl ? gt_report_change_name(dl->kind) : "unchanged");
        S(dl && dl->base ? dl->base->status : d && dl ? "(not in baseline)" : "");
        fprintf(f, "%d,[", c->artifact);
        for (int k = 0; k < c->n_checks; k++) {
            const gt_rep_check *x = &c->checks[k];
            if (k)
                fputc(',', f);
            S(x->suite);
            S(x->name);
            S(x->status);
            fprintf(f, "%d", intern(&t, x->message));
        }
        fputs("],[", f);
        for (int k = 0; k < c->n_metrics; k++) {
            const gt_rep_metric *m = &c->metrics[k];
            char label[256];
            gt_report_metric_label(m, label, sizeof label);
            if (k)
                fputc(',', f);
            int li = intern_copy(&t, label);
            fprintf(f, "%d,", li);
            num(f, m->value, m->has_value);
            fputc(',', f);
            S(m->unit);
            S(m->comparator);
            num(f, m->tolerance, m->has_tol);
            fprintf(f, ",%d", intern(&t, m->verdict));
        }
        fputs("],", f);
        bars(f, c);
        fputc(',', f);
        history(f, r, i, &t);
        fputc(']', f);
    }
    fputs("],\n\"grid\":{\"cols\":[", f);
    if (gt_report_grid(r, &g, err) != 0)
        goto done;
    for (int j = 0; j < g.n_cols; j++) {
        fprintf(f, "%s[%d,", j ? "," : "", intern(&t, g.col_first[j]->backend));
        fprintf(f, "%d]", intern(&t, g.col_first[j]->column));
    }
    fputs("],\"rows\":[", f);
    for (int j = 0; j < g.n_rows; j++) {
        fprintf(f, "%s[%d,", j ? "," : "", intern(&t, g.row_first[j]->model));
        fprintf(f, "%d]", intern(&t, g.row_first[j]->quant));
    }
    fputs("],\"at\":[", f);
    for (size_t j = 0; j < (size_t)g.n_rows * (size_t)g.n_cols; j++)
        fprintf(f, "%s%d", j ? "," : "", g.at[j]);
    fputs("]},\n\"art\":[", f);
    for (int j = 0; j < r->n_artifacts; j++) {
        fprintf(f, "%s[%d,", j ? "," : "", intern(&t, r->artifacts[j].file));
        fprintf(f, "%d]", intern(&t, r->artifacts[j].sha256));
    }
    fputs("],\"runs\":[", f);
    for (int k = 0; r->hist && k < r->hist->n_runs; k++) {
        fprintf(f, "%s[%lld,", k ? "," : "", (long long)r->hist->run_ids[k]);
        fprintf(f, "%d]", intern(&t, r->hist->run_keys[k]));
    }
    fputs("]}", f);
#undef S
    if (t.oom || fflush(f) != 0)
        goto oom;
    fputs("<script type=\"application/json\" id=\"gt-data\">{\"s\":[", out);
    for (int i = 0; i < t.n; i++) {
        if (i)
            fputc(',', out);
        gt_report_json_str(out, t.order[i]);
    }
    fputc(']', out);
    fwrite(body, 1, body_n, out);
    fputs("</script>\n", out);
    rc = 0;
    goto done;
oom:
    rc = gt_err_set(err, "out of memory writing the report's data");
done:
    if (f)
        fclose(f);
    free(body);
    free(delta);
    gt_report_grid_free(&g);
    for (int i = 0; i < t.n_owned; i++)
        free(t.owned[i]);
    free(t.owned);
    free(t.key);
    free(t.idx);
    free(t.order);
    return rc;
}
