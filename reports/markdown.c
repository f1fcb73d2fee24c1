/* markdown.c: a summary for a pull-request comment.
 *
 * Short by design: the verdict and counts first, what changed against the
 * baseline (new failures, fixes, the worst performance regressions), the
 * grid when it fits a comment (else per-column counts), the failing cells
 * with their reasons, and the documented limitations. Long lists are cut
 * with "... and N more": the HTML report has everything. Text from the DB is
 * escaped so a reason cannot break the table or inject HTML into the
 * rendered comment. */
#include "report.h"

#include <math.h>
#include <string.h>

#include "base.h"

#define MAX_LIST 20
#define MAX_GRID_ROWS 60
#define MAX_GRID_COLS 12
#define MAX_GATE_LINES 40
#define MAX_ARTIFACTS 60

static void md(FILE *f, const char *s, size_t max)
{
    size_t n = 0;
    for (; *s && n < max; s++, n++) {
        switch (*s) {
        case '|': fputs("\\|", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '`': fputs("'", f); break;
        case '*': case '_': case '[': case ']': case '#': fputc('\\', f); fputc(*s, f); break;
        case '\n': case '\r': case '\t': fputc(' ', f); break;
        default: fputc(*s, f);
        }
    }
    if (*s)
        fputs("…", f);
}

static void counts_line(FILE *f, const gt_rep_run *r)
{
    fprintf(f, "%d cells:", r->n);
    bool first = true;
    for (int s = 0; s < GT_ST_COUNT; s++) {
        if (!r->counts[s])
            continue;
        fprintf(f, "%s %s %d %s", first ? "" : ",", gt_report_icon(gt_status_name(s)),
                r->counts[s], gt_status_name(s));
        first = false;
    }
    fputs("\n\n", f);
}

static void grid(FILE *f, const gt_rep_run *r, gt_err *err)
{
    gt_rep_grid g;
    if (gt_report_grid(r, &g, err) != 0)
        return;
    if (g.n_rows <= MAX_GRID_ROWS && g.n_cols <= MAX_GRID_COLS) {
        fputs("| model | quant |", f);
        for (int j = 0; j < g.n_cols; j++) {
            fputc(' ', f);
            md(f, g.col_first[j]->backend, 40);
            fputs(" / ", f);
            md(f, g.col_first[j]->column, 100);
            fputs(" |", f);
        }
        fputs("\n|---|---|", f);
        for (int j = 0; j < g.n_cols; j++)
            fputs("---|", f);
        fputc('\n', f);
        for (int i = 0; i < g.n_rows; i++) {
            fputs("| ", f);
            md(f, g.row_first[i]->model, 60);
            fputs(" | ", f);
            md(f, g.row_first[i]->quant, 20);
            fputs(" |", f);
            for (int j = 0; j < g.n_cols; j++) {
                int ix = g.at[(size_t)i * g.n_cols + j];
                if (ix < 0)
                    fputs(" |", f);
                else
                    fprintf(f, " %s %s |", gt_report_icon(r->cells[ix].status),
                            r->cells[ix].status);
            }
            fputc('\n', f);
        }
    } else {
        fprintf(f, "The grid (%d rows × %d columns) is too large for a comment; per column:\n\n",
                g.n_rows, g.n_cols);
        fputs("| backend / driver | pass | not passing |\n|---|---|---|\n", f);
        for (int j = 0; j < g.n_cols; j++) {
            int pass = 0, bad = 0;
            for (int i = 0; i < g.n_rows; i++) {
                int ix = g.at[(size_t)i * g.n_cols + j];
                if (ix < 0)
                    continue;
                pass += !strcmp(r->cells[ix].status, "pass");
                bad += gt_report_is_bad(r->cells[ix].status);
            }
            fputs("| ", f);
            md(f, g.col_first[j]->backend, 40);
            fputs(" / ", f);
            md(f, g.col_first[j]->column, 100);
            fprintf(f, " | %d | %d |\n", pass, bad);
        }
    }
    fputc('\n', f);
    gt_report_grid_free(&g);
}

/* Status counts per value of one axis (gauntlet report --group-by AXIS), in
 * order of first appearance: which model, quant, backend, driver or setting
 * the failures share. */
static void group_section(FILE *f, const gt_rep_run *r, int axis)
{
    fprintf(f, "### By %s\n\n| %s | cells | pass | not passing | other |\n|---|---|---|---|---|\n",
            gt_report_axis_name(axis), gt_report_axis_name(axis));
    for (int i = 0; i < r->n; i++) {
        const char *v = gt_report_axis_value(&r->cells[i], axis);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(gt_report_axis_value(&r->cells[j], axis), v) == 0;
        if (seen)
            continue; /* quadratic, but only over the distinct values' first cells */
        int n = 0, pass = 0, bad = 0;
        for (int j = i; j < r->n; j++) {
            const gt_rep_cell *c = &r->cells[j];
            if (strcmp(gt_report_axis_value(c, axis), v) != 0)
                continue;
            n++;
            pass += !strcmp(c->status, "pass");
            bad += gt_report_is_bad(c->status);
        }
        fputs("| ", f);
        md(f, v[0] ? v : "(none)", 100);
        fprintf(f, " | %d | %d | %d | %d |\n", n, pass, bad, n - pass - bad);
    }
    fputc('\n', f);
}

static void diff_section(FILE *f, const gt_rep_diff *d)
{
    fprintf(f, "### Against baseline run %lld (%s)\n\n", (long long)d->base->id,
             d->base->git_sha[0] ? d->base->git_sha : "no git sha");
    fprintf(f, "%d new failures, %d fixed, %d performance regressions and %d improvements "
               "beyond %.1f%%.\n\n",
            d->n_new_fail, d->n_fix, d->n_regress, d->n_improve, d->threshold_pct);
    int shown = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < d->n_status && shown < MAX_LIST; i++) {
            const gt_rep_status_delta *s = &d->status[i];
            if ((pass == 0) != (s->kind == GT_CH_NEW_FAILURE))
                continue;
            const gt_rep_cell *c = s->cur ? s->cur : s->base;
            fprintf(f, "- **%s** `", gt_report_change_name(s->kind));
            md(f, c->cell_id, 200);
            fprintf(f, "`: %s → %s", s->base ? s->base->status : "(absent)",
                    s->cur ? s->cur->status : "(absent)");
            if (s->cur && s->cur->reason[0] && s->kind == GT_CH_NEW_FAILURE) {
                fputs(" — ", f);
                md(f, s->cur->reason, 200);
            }
            fputc('\n', f);
            shown++;
        }
    }
    if (d->n_status > shown)
        fprintf(f, "- … and %d more status changes\n", d->n_status - shown);
    if (d->n_perf) {
        fputs("\n| cell | metric | baseline | now | change |\n|---|---|---|---|---|\n", f);
        for (int i = 0; i < d->n_perf && i < MAX_LIST; i++) {
            const gt_rep_metric_delta *m = &d->perf[i];
            char label[256], a[32], b[32];
            gt_report_metric_label(m->m, label, sizeof label);
            gt_report_num(m->bm->value, a, sizeof a);
            gt_report_num(m->m->value, b, sizeof b);
            fputs("| ", f);
            md(f, m->cur->cell_id, 200);
            fputs(" | ", f);
            md(f, label, 100);
            fprintf(f, " | %s | %s | %s %+.1f%% |\n", a, b,
                    m->regression ? "🔻 worse" : "🔺 better", m->change_pct);
        }
        if (d->n_perf > MAX_LIST)
            fprintf(f, "\n… and %d more\n", d->n_perf - MAX_LIST);
    }
    fputc('\n', f);
}

/* One line per artifact: a comment reader wants to see what was tested
 * and where it came from, not a wide table. */
/* One line per cell that ran the long suite: passkey agreement with the
 * reference, the deepest checkpoint's KL against its bound, the worst K/V
 * ratio. The answers and the curve are the HTML report's. */
static void long_section(FILE *f, const gt_rep_run *r)
{
    int n = 0;
    for (int i = 0; i < r->n && n <= MAX_LIST; i++) {
        const gt_rep_cell *c = &r->cells[i];
        if (!gt_report_has_long(c))
            continue;
        if (n++ == MAX_LIST) {
            fputs("| … | | | | |\n", f);
            break;
        }
        if (n == 1)
            fputs("\n### Long context\n\n| cell | passkeys same as reference | found (cell / "
                  "reference) | deepest drift KL mean | worst K/V ratio |\n|---|---|---|---|---|\n",
                  f);
        int pk = 0, same = 0, cf = 0, rf = 0, deep = -1;
        double kl = NAN, kv = NAN;
        for (int k = 0; k < c->n_checks; k++) {
            gt_rep_passkey p;
            gt_rep_drift d;
            gt_rep_kv m;
            if (gt_report_passkey(&c->checks[k], &p) == 0) {
                pk++;
                same += !strcmp(p.cell, p.ref);
                cf += p.cell_found;
                rf += p.ref_found;
            } else if (gt_report_drift(&c->checks[k], &d) == 0 && d.length > deep) {
                deep = d.length;
                kl = d.kld_mean;
            } else if (gt_report_kv(&c->checks[k], &m) == 0 && !(m.ratio <= kv)) {
                kv = m.ratio;
            }
        }
        const gt_rep_metric *tm = gt_report_metric(c, "long", "drift_kld_mean");
        char a[32] = "—", t[32] = "";
        if (deep >= 0)
            gt_report_num(kl, a, sizeof a);
        if (tm && tm->has_tol)
            gt_report_num(tm->tolerance, t, sizeof t);
        fputs("| `", f);
        md(f, c->cell_id, 200);
        fprintf(f, "` | %d / %d | %d / %d | %s", same, pk, cf, rf, a);
        if (deep >= 0)
            fprintf(f, " at %d", deep);
        if (t[0])
            fprintf(f, " (%s %s)", tm->comparator[0] == '<' ? "&lt;=" : "bound", t);
        if (isnan(kv))
            fputs(" | — |\n", f);
        else
            fprintf(f, " | %.3f |\n", kv);
    }
}

/* One line per cell that ran the structured suite: valid, same bytes as
 * the reference, refused, each with its mark (xfail for a known
 * deviation), and the cases that did not validate. The divergences and
 * messages are the HTML report's. */
static void structured_col(FILE *f, const gt_rep_structured *s, bool failed, int a, int b)
{
    const char *v = gt_report_structured_verdict(s, failed);
    fprintf(f, " | %s %d / %d", gt_report_icon(v), a, b);
    if (!strcmp(v, "xfail"))
        fputs(" (known)", f);
}

static void structured_section(FILE *f, const gt_rep_run *r)
{
    int n = 0;
    for (int i = 0; i < r->n && n <= MAX_LIST; i++) {
        const gt_rep_cell *c = &r->cells[i];
        gt_rep_structured s;
        if (gt_report_structured(c, &s) != 0)
            continue;
        if (n++ == MAX_LIST) {
            fputs("| … | | | | |\n", f);
            break;
        }
        if (n == 1)
            fputs("\n### Structured output\n\n| cell | valid | same bytes as reference | "
                  "malformed refused | not valid |\n|---|---|---|---|---|\n",
                  f);
        fputs("| `", f);
        md(f, c->cell_id, 200);
        fputc('`', f);
        if (s.n_cases || s.other_bad)
            structured_col(f, &s, s.n_valid < s.n_cases || s.other_bad, s.n_valid, s.n_cases);
        else
            fputs(" | —", f);
        if (s.agreement && s.n_answers >= 0)
            structured_col(f, &s, strcmp(s.agreement->status, "pass") != 0, s.n_agree,
                           s.n_answers);
        else
            fputs(" | —", f);
        if (s.n_malformed)
            structured_col(f, &s, s.n_refused < s.n_malformed, s.n_refused, s.n_malformed);
        else
            fputs(" | —", f);
        fputs(" | ", f);
        md(f, s.invalid[0] ? s.invalid : s.other_bad ? s.other_bad->name : "", 200);
        fputs(" |\n", f);
    }
}

static void provenance_section(FILE *f, const gt_rep_run *r)
{
    if (!r->n_artifacts)
        return;
    fputs("\n### Provenance\n\n", f);
    /* A comment has a size limit; the HTML and JSON list every file. */
    for (int i = 0; i < r->n_artifacts && i < MAX_ARTIFACTS; i++) {
        const gt_rep_artifact *a = &r->artifacts[i];
        fputs("- `", f);
        md(f, a->model, 100);
        if (a->quant[0]) {
            fputc('/', f);
            md(f, a->quant, 30);
        }
        fputs("` ", f);
        md(f, a->file, 200);
        if (a->arch[0]) {
            fputs(", architecture ", f);
            md(f, a->arch, 40);
        }
        fprintf(f, ", sha256 `%.64s`", a->sha256);
        if (a->size >= 0)
            fprintf(f, ", %lld bytes", (long long)a->size);
        fputs(", source ", f);
        md(f, a->source, 300);
        fputs(", license ", f);
        md(f, a->license[0] ? a->license : "not stated", 60);
        fputs(", ", f);
        md(f, a->derivation, 300);
        fputc('\n', f);
    }
    if (r->n_artifacts > MAX_ARTIFACTS)
        fprintf(f, "- … and %d more (see the HTML or JSON report)\n",
                r->n_artifacts - MAX_ARTIFACTS);
}

static void history_section(FILE *f, const gt_rep_run *r)
{
    const gt_rep_history *h = r->hist;
    fprintf(f, "### Changed since (last %d runs)\n\n", h->n_runs);
    if (!h->n_changes)
        fputs("No status flipped and no metric left its spread.\n", f);
    for (int i = 0; i < h->n_changes && i < MAX_LIST; i++) {
        const gt_rep_hist_change *c = &h->changes[i];
        fputs("- `", f);
        md(f, r->cells[c->cell].cell_id, 200);
        fputs("` ", f);
        if (c->series < 0) {
            fprintf(f, "%s → %s", c->from, c->to);
        } else {
            char a[32], b[32];
            gt_report_num(c->before, a, sizeof a);
            gt_report_num(c->after, b, sizeof b);
            fprintf(f, "%s %s → %s", gt_report_hist_series_name(c->series), a, b);
        }
        fputs(" in run `", f);
        md(f, h->run_keys[c->at], 100);
        fputs("`\n", f);
    }
    if (h->n_changes > MAX_LIST)
        fprintf(f, "- … and %d more\n", h->n_changes - MAX_LIST);
    fputc('\n', f);
}

int gt_report_markdown(const gt_rep_run *r, const gt_rep_diff *d, FILE *f, gt_err *err)
{
    const char *verdict = r->gate == 0 ? "✅ PASS" : r->gate == 1 ? "❌ FAIL" : "⚪ not gated";
    fprintf(f, "## gauntlet %s — ", verdict);
    md(f, r->matrix_name, 100);
    fputs(" / ", f);
    md(f, r->tier, 50);
    fputs("\n\n", f);
    char t0[40];
    gt_report_time(r->started_at, t0, sizeof t0);
    fprintf(f, "Run %lld (%s), git `", (long long)r->id, r->status);
    md(f, r->git_sha, 48);
    fputs("`, host ", f);
    md(f, r->host, 100);
    fprintf(f, ", started %s. ", t0);
    counts_line(f, r);
    if (r->gate_text[0]) {
        fputs("<details><summary>Gate output</summary>\n\n```\n", f);
        /* Inside a fenced block only a fence can break out. A comment has a
         * size limit (GitHub: 65,536 characters), so long gate output keeps
         * its last line (the verdict) and the first MAX_GATE_LINES. */
        const char *p = r->gate_text, *last = strrchr(r->gate_text, '\n');
        int lines = 0;
        while (last && last > r->gate_text && last[-1] != '\n')
            last--;
        for (; *p && lines < MAX_GATE_LINES; p++) {
            fputc(*p == '`' ? '\'' : *p, f);
            lines += *p == '\n';
        }
        if (*p) {
            int rest = 0;
            for (const char *q = p; *q; q++)
                rest += *q == '\n';
            fprintf(f, "... %d more lines (see the HTML report)\n", rest > 0 ? rest - 1 : 0);
            for (const char *q = last && last >= p ? last : ""; *q; q++)
                fputc(*q == '`' ? '\'' : *q, f);
        }
        fputs("```\n\n</details>\n\n", f);
    }
    if (d)
        diff_section(f, d);
    if (r->hist)
        history_section(f, r);
    fputs("### Grid\n\n", f);
    grid(f, r, err);
    if (r->group_by >= 0)
        group_section(f, r, r->group_by);
    int shown = 0, bad = 0;
    for (int i = 0; i < r->n; i++)
        bad += gt_report_is_bad(r->cells[i].status);
    if (bad) {
        fputs("### Not passing\n\n", f);
        for (int i = 0; i < r->n && shown < MAX_LIST; i++) {
            const gt_rep_cell *c = &r->cells[i];
            if (!gt_report_is_bad(c->status))
                continue;
            fprintf(f, "- %s **%s**%s `", gt_report_icon(c->status), c->status,
                    c->required ? "" : " (optional)");
            md(f, c->cell_id, 200);
            fputs("`: ", f);
            md(f, c->reason[0] ? c->reason : "no reason recorded", 300);
            fputc('\n', f);
            shown++;
        }
        if (bad > shown)
            fprintf(f, "- … and %d more\n", bad - shown);
        fputc('\n', f);
    }
    int lim = 0;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        if (strcmp(c->status, "xfail") != 0 && strcmp(c->expected, "xfail") != 0)
            continue;
        if (lim == 0)
            fputs("### Known limitations (expected failures)\n\n", f);
        if (lim++ >= MAX_LIST)
            continue;
        fputs("- `", f);
        md(f, c->cell_id, 200);
        fputs("`: ", f);
        md(f, c->expect_reason[0] ? c->expect_reason : "no reason given", 300);
        fputc('\n', f);
    }
    if (lim > MAX_LIST)
        fprintf(f, "- … and %d more\n", lim - MAX_LIST);
    long_section(f, r);
    structured_section(f, r);
    provenance_section(f, r);
    return 0;
}
