/* html.c: the HTML compatibility report for release reviews.
 *
 * One self-contained file: inline CSS and SVG, a few lines of optional JS,
 * no external URL. The order is the order a reviewer asks questions in:
 *   1. the header: which run (matrix, hash, tier, git sha, host, times) and
 *      the gate's verdict with its reasons, as CI printed them;
 *   2. against the baseline: new failures, fixes, performance regressions
 *      and improvements beyond the threshold (before anything else, since
 *      it is what changed);
 *   3. the grid (model x quant by backend x driver), each cell linked to
 *      its details;
 *   4. known limitations (xfail reasons) and why cells were skipped, in
 *      plain words;
 *   5. environment: every backend, device, driver and version seen, and
 *      each model's architecture;
 *   6. accuracy and performance across cells, then the long and structured
 *      suites' parts (html_long.c, html_structured.c);
 *   7. provenance: every file the run used, its source, license and how it
 *      was derived (html_provenance.c);
 *   8. each cell's details: every check and metric with value, tolerance
 *      and verdict, the reason, its artifact, its history, and the log of
 *      failures, crashes and timeouts.
 * What scales with the cell count (the grid, metric tables, charts, cell
 * details) is not markup: it is one compact JSON block (html_data.c) that
 * the script (html_lazy.c) turns into DOM a page at a time, so the page
 * paints the verdict and summary first whatever the run's size.
 * The markup is polyglot: HTML5 that is also well-formed XML (void
 * elements closed, the script in CDATA), so `xmllint --noout` checks every
 * report strictly, and a stray unescaped byte cannot hide.
 * Every string from the database goes through gt_report_esc: worker logs
 * are arbitrary bytes and must not become markup. */
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "base.h"

#define E(s) gt_report_esc(f, (s))

static void fact(FILE *f, const char *k, const char *v, bool mono)
{
    fprintf(f, "<dt>%s</dt><dd%s>", k, mono ? " class=\"mono\"" : "");
    E(v[0] ? v : "-");
    fputs("</dd>", f);
}

/* The reference's numerics version(s) the accuracy cells compared with
 * (suites/numerics.h): more than one means the run mixed oracles. */
static void numerics_fact(FILE *f, const gt_rep_run *r)
{
    double seen[8];
    int n = 0;
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->cells[i].n_metrics; j++) {
            const gt_rep_metric *m = &r->cells[i].metrics[j];
            if (!m->has_value || strcmp(m->name, "numerics_version") != 0)
                continue;
            bool dup = false;
            for (int k = 0; k < n; k++)
                dup |= seen[k] == m->value;
            if (!dup && n < 8)
                seen[n++] = m->value;
        }
    char text[128] = "";
    for (int k = 0; k < n; k++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "%s%.0f", k ? ", " : "", seen[k]);
    }
    if (n > 1)
        strncat(text, " (mixed: cells compared with different oracles)", sizeof text - strlen(text) - 1);
    fact(f, "reference numerics", text, true);
}

static void header(FILE *f, const gt_rep_run *r)
{
    char t0[40], t1[40], id[32], dur[40];
    gt_report_time(r->started_at, t0, sizeof t0);
    gt_report_time(r->finished_at, t1, sizeof t1);
    snprintf(id, sizeof id, "%lld", (long long)r->id);
    if (r->finished_at > r->started_at && r->started_at > 0)
        snprintf(dur, sizeof dur, "%.0f s", r->finished_at - r->started_at);
    else
        snprintf(dur, sizeof dur, "-");
    fputs("<header class=\"top\"><div class=\"title\"><h1>Compatibility report: ", f);
    E(r->matrix_name);
    fputs(" <span class=\"sub\">/ ", f);
    E(r->tier);
    fputs("</span></h1><div class=\"sub\">gauntlet ", f);
    E(r->tool_version);
    fputs(" &#183; run ", f);
    E(id);
    fputs(" (", f);
    E(r->status);
    fputs(")</div><dl class=\"facts\">", f);
    fact(f, "run key", r->run_key, true);
    fact(f, "git sha", r->git_sha, true);
    fact(f, "matrix", r->matrix_name, false);
    fact(f, "matrix sha256", r->matrix_sha256, true);
    fact(f, "tier", r->tier, false);
    fact(f, "host", r->host, false);
    fact(f, "started", t0, false);
    fact(f, "finished", t1, false);
    fact(f, "duration", dur, false);
    fact(f, "database", r->db_path, true);
    numerics_fact(f, r);
    fputs("</dl></div>", f);
    const char *cls = r->gate == 0 ? "pass" : r->gate == 1 ? "fail" : "none";
    const char *txt = r->gate == 0   ? "&#10003; GATE PASS"
                      : r->gate == 1 ? "&#10007; GATE FAIL"
                                     : "GATE NOT EVALUATED";
    fprintf(f, "<div class=\"verdict %s\">%s</div></header>\n", cls, txt);
}

static void summary(FILE *f, const gt_rep_run *r, const gt_rep_diff *d)
{
    fputs("<section id=\"summary\"><div class=\"chips\">", f);
    fprintf(f, "<span class=\"st\" style=\"border-color:#555\">%d cells</span>", r->n);
    for (int s = 0; s < GT_ST_COUNT; s++) {
        if (!r->counts[s])
            continue;
        fprintf(f, "<span class=\"st st-%s\">%s %d %s</span>", gt_status_name(s),
                gt_report_icon(gt_status_name(s)), r->counts[s], gt_status_name(s));
    }
    fputs("</div>\n", f);
    if (r->n_cells > r->n)
        fprintf(f, "<p class=\"callout\">This run recorded %d of the %d cells its tier plans "
                   "(a shard, or cells not added yet).</p>\n",
                r->n, r->n_cells);
    if (strcmp(r->status, "complete") != 0)
        fprintf(f, "<p class=\"callout\">The run is <b>%s</b>: cells still pending were not "
                   "judged.</p>\n",
                strcmp(r->status, "running") == 0 ? "still running" : "interrupted");
    if (d) {
        bool bad = d->n_new_fail || d->n_regress;
        fprintf(f, "<p class=\"callout%s\"><b>Against baseline run %lld:</b> %d new failures, "
                   "%d fixed, %d performance regressions, %d improvements. "
                   "<a href=\"#baseline\">Details</a></p>\n",
                bad ? "" : " good", (long long)d->base->id, d->n_new_fail, d->n_fix,
                d->n_regress, d->n_improve);
    }
    fputs("<h3>Gate</h3>", f);
    if (r->gate_text[0]) {
        fputs("<pre>", f);
        E(r->gate_text);
        fputs("</pre>\n", f);
    } else {
        fputs("<p class=\"sub\">The gate was not evaluated.</p>\n", f);
    }
    fputs("</section>\n", f);
}

static void delta_rows(FILE *f, const gt_rep_diff *d, gt_rep_change kind, const char *title,
                       const char *cls)
{
    int n = 0;
    for (int i = 0; i < d->n_status; i++)
        n += d->status[i].kind == kind;
    if (!n)
        return;
    fprintf(f, "<div class=\"callout %s\"><h3>%s (%d)</h3><table class=\"sortable\"><thead><tr>"
               "<th>cell</th><th>baseline</th><th>now</th><th>reason</th></tr></thead><tbody>\n",
            cls, title, n);
    char href[32];
    for (int i = 0; i < d->n_status; i++) {
        const gt_rep_status_delta *s = &d->status[i];
        if (s->kind != kind)
            continue;
        fputs("<tr><td>", f);
        if (s->cur)
            gt_html_cell_link(f, s->cur);
        else
            E(s->base->cell_id);
        fputs("</td><td>", f);
        if (s->base)
            gt_html_badge(f, s->base->status, NULL, NULL);
        else
            fputs("<span class=\"sub\">(not in baseline)</span>", f);
        fputs("</td><td>", f);
        if (s->cur) {
            gt_html_cell_href(href, sizeof href, s->cur);
            gt_html_badge(f, s->cur->status, href, NULL);
        } else {
            fputs("<span class=\"sub\">(not in this run)</span>", f);
        }
        fputs("</td><td>", f);
        const gt_rep_cell *c = s->cur ? s->cur : s->base;
        gt_report_esc_n(f, c->reason, 400);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

static void perf_rows(FILE *f, const gt_rep_diff *d, bool regressions)
{
    int n = regressions ? d->n_regress : d->n_improve;
    if (!n)
        return;
    fprintf(f, "<div class=\"callout %s\"><h3>Performance %s beyond %.1f%% (%d)</h3>"
               "<table class=\"sortable\"><thead><tr><th>cell</th><th>metric</th>"
               "<th class=\"num\">baseline</th><th class=\"num\">now</th>"
               "<th class=\"num\">change</th></tr></thead><tbody>\n",
            regressions ? "" : "good", regressions ? "regressions" : "improvements",
            d->threshold_pct, n);
    int shown = 0;
    for (int i = 0; i < d->n_perf && shown < 500; i++) {
        const gt_rep_metric_delta *m = &d->perf[i];
        if (m->regression != regressions)
            continue;
        char label[256], a[32], b[32];
        gt_report_metric_label(m->m, label, sizeof label);
        gt_report_num(m->bm->value, a, sizeof a);
        gt_report_num(m->m->value, b, sizeof b);
        fputs("<tr><td>", f);
        gt_html_cell_link(f, m->cur);
        fputs("</td><td class=\"mono\">", f);
        E(label);
        fprintf(f, "</td><td class=\"num\">%s ", a);
        E(m->m->unit);
        fprintf(f, "</td><td class=\"num\">%s ", b);
        E(m->m->unit);
        fprintf(f, "</td><td class=\"num\" data-v=\"%.3f\">%s %+.1f%%</td></tr>\n", m->change_pct,
                regressions ? "&#9660; worse" : "&#9650; better", m->change_pct);
        shown++;
    }
    fputs("</tbody></table>", f);
    if (n > shown)
        fprintf(f, "<p>&#8230; and %d more (see the JSON report).</p>", n - shown);
    fputs("</div>\n", f);
}

static void baseline(FILE *f, const gt_rep_diff *d)
{
    const gt_rep_run *b = d->base;
    char t0[40];
    gt_report_time(b->started_at, t0, sizeof t0);
    fprintf(f, "<section id=\"baseline\"><h2>Against the baseline</h2><p>Baseline: run %lld "
               "(<span class=\"mono\">",
            (long long)b->id);
    E(b->run_key);
    fputs("</span>), git <span class=\"mono\">", f);
    E(b->git_sha);
    fprintf(f, "</span>, started %s, from <span class=\"mono\">", t0);
    E(b->db_path);
    fprintf(f, "</span>. <b>%d new failures</b>, <b>%d fixed</b>, %d other status changes; "
               "<b>%d performance regressions</b> and %d improvements beyond %.1f%%.</p>\n",
            d->n_new_fail, d->n_fix,
            d->n_status - d->n_new_fail - d->n_fix, d->n_regress, d->n_improve,
            d->threshold_pct);
    if (d->cur->perf_pct < 0 && d->n_perf)
        fputs("<p class=\"sub\">This tier's gate sets no perf_regression_pct, so performance "
              "changes are shown against the report's threshold but do not fail the gate.</p>\n",
              f);
    if (!d->n_status && !d->n_perf)
        fputs("<p class=\"callout good\">Nothing changed beyond the threshold.</p>\n", f);
    delta_rows(f, d, GT_CH_NEW_FAILURE, "New failures", "");
    perf_rows(f, d, true);
    delta_rows(f, d, GT_CH_FIX, "Fixed", "good");
    perf_rows(f, d, false);
    delta_rows(f, d, GT_CH_STATUS, "Other status changes", "info");
    delta_rows(f, d, GT_CH_ADDED, "Cells added to the matrix", "info");
    delta_rows(f, d, GT_CH_REMOVED, "Cells no longer in the matrix", "info");
    fputs("</section>\n", f);
}

static const char *skip_reason(const gt_rep_cell *c)
{
    return c->reason[0] ? c->reason : c->expect_reason[0] ? c->expect_reason : "no reason recorded";
}

static int cmp_reason(const void *a, const void *b)
{
    const gt_rep_cell *x = *(const gt_rep_cell *const *)a, *y = *(const gt_rep_cell *const *)b;
    int c = strcmp(skip_reason(x), skip_reason(y));
    return c ? c : x->idx - y->idx;
}

static void limitations(FILE *f, const gt_rep_run *r)
{
    fputs("<section id=\"limitations\"><h2>Known limitations</h2>\n", f);
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        if (strcmp(c->expected, "xfail") != 0 && strcmp(c->status, "xfail") != 0)
            continue;
        if (n++ == 0)
            fputs("<p>Combinations documented as not working (expected to fail). They do not "
                  "fail the gate; an <b>xpass</b> means the limitation may be gone and the "
                  "matrix should be updated.</p><ul>\n",
                  f);
        fputs("<li>", f);
        gt_html_cell_link(f, c);
        fputs(" ", f);
        gt_html_badge(f, c->status, NULL, NULL);
        fputs(": ", f);
        E(c->expect_reason[0] ? c->expect_reason : "no reason given in the matrix");
        fputs("</li>\n", f);
    }
    fputs(n ? "</ul>\n" : "<p class=\"sub\">None: the matrix documents no expected failures "
                          "in this run.</p>\n",
          f);
    /* Skips grouped by reason: a missing backend skips a whole column, and
     * one line per reason reads better than the same reason 40 times. */
    const gt_rep_cell **sk = malloc(sizeof *sk * (size_t)(r->n ? r->n : 1));
    int s = 0;
    for (int i = 0; sk && i < r->n; i++)
        if (!strcmp(r->cells[i].status, "skip"))
            sk[s++] = &r->cells[i];
    if (s) {
        qsort(sk, (size_t)s, sizeof *sk, cmp_reason);
        fputs("<h3>Skipped cells, by reason</h3><table><thead><tr><th>reason</th>"
              "<th class=\"num\">cells</th><th>which</th></tr></thead><tbody>\n",
              f);
        for (int i = 0; i < s;) {
            int j = i;
            while (j < s && !strcmp(skip_reason(sk[j]), skip_reason(sk[i])))
                j++;
            fputs("<tr><td>", f);
            E(skip_reason(sk[i]));
            fprintf(f, "</td><td class=\"num\">%d</td><td>", j - i);
            for (int k = i; k < j && k < i + 200; k++) {
                if (k > i)
                    fputs(", ", f);
                gt_html_cell_link(f, sk[k]);
            }
            if (j - i > 200)
                fprintf(f, " &#8230; and %d more", j - i - 200);
            fputs("</td></tr>\n", f);
            i = j;
        }
        fputs("</tbody></table>\n", f);
    }
    free(sk);
    fputs("</section>\n", f);
}

/* Each model the run used and its architecture (general.architecture, as
 * recorded with its files): the graph every backend ran. */
static void models(FILE *f, const gt_rep_run *r)
{
    if (!r->n_artifacts)
        return;
    fputs("<h3>Models</h3><table class=\"sortable\"><thead><tr><th>model</th>"
          "<th>architecture</th></tr></thead><tbody>\n", f);
    for (int i = 0; i < r->n_artifacts; i++) {
        const gt_rep_artifact *a = &r->artifacts[i];
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(r->artifacts[j].model, a->model) == 0;
        if (seen)
            continue;
        const char *arch = a->arch;
        for (int j = i + 1; j < r->n_artifacts && !arch[0]; j++)
            if (strcmp(r->artifacts[j].model, a->model) == 0)
                arch = r->artifacts[j].arch;
        fputs("<tr><td>", f);
        E(a->model);
        fputs("</td><td>", f);
        E(arch[0] ? arch : "(not recorded)");
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void environment(FILE *f, const gt_rep_run *r)
{
    fputs("<section id=\"environment\"><h2>Environment</h2>\n", f);
    if (!r->n_devices) {
        fputs("<p class=\"sub\">No device was recorded (no cell reached a backend).</p>", f);
    } else {
        fputs("<table class=\"sortable\"><thead><tr><th>backend</th><th>driver profile</th>"
              "<th>device</th><th>kind</th><th>driver</th><th>driver version</th>"
              "<th class=\"num\">memory</th><th>host</th><th>details</th></tr></thead><tbody>\n",
              f);
        for (int i = 0; i < r->n_devices; i++) {
            const gt_rep_device *d = &r->devices[i];
            const char *v[] = {d->backend, d->driver_profile, d->name, d->kind, d->driver,
                               d->driver_version};
            fputs("<tr>", f);
            for (int k = 0; k < 6; k++) {
                fputs("<td>", f);
                E(v[k]);
                fputs("</td>", f);
            }
            if (d->memory >= 0)
                fprintf(f, "<td class=\"num\" data-v=\"%lld\">%.1f GiB</td>",
                        (long long)d->memory, (double)d->memory / (1024.0 * 1024 * 1024));
            else
                fputs("<td class=\"num\">-</td>", f);
            fputs("<td>", f);
            E(d->host);
            fputs("</td><td class=\"mono\">", f);
            gt_report_esc_n(f, d->extra, 400);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    models(f, r);
    if (r->n_parts) {
        fputs("<h3>Harness invocations</h3><p class=\"sub\">Each shard or resume of this run "
              "(merged databases list every host).</p><table><thead><tr><th>shard</th>"
              "<th>host</th><th>gauntlet</th><th>git sha</th><th>started</th><th>finished</th>"
              "<th>status</th><th>command</th></tr></thead><tbody>\n",
              f);
        for (int i = 0; i < r->n_parts; i++) {
            const gt_rep_part *p = &r->parts[i];
            char t0[40], t1[40];
            gt_report_time(p->started_at, t0, sizeof t0);
            gt_report_time(p->finished_at, t1, sizeof t1);
            fprintf(f, "<tr><td class=\"num\">%d/%d</td><td>", p->shard_index, p->shard_count);
            E(p->host);
            fputs("</td><td>", f);
            E(p->tool_version);
            fputs("</td><td class=\"mono\">", f);
            E(p->git_sha);
            fprintf(f, "</td><td>%s</td><td>%s</td><td>", t0, t1);
            E(p->status);
            fputs("</td><td class=\"mono\">", f);
            gt_report_esc_n(f, p->argv, 400);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    fputs("</section>\n", f);
}

int gt_report_html(const gt_rep_run *r, const gt_rep_diff *d, FILE *f, gt_err *err)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\" xmlns=\"http://www.w3.org/1999/xhtml\"><head>"
          "<meta charset=\"utf-8\"/>"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
          "<title>gauntlet: ",
          f);
    E(r->matrix_name);
    fputs(" / ", f);
    E(r->tier);
    fprintf(f, " run %lld: %s</title>\n<style>\n", (long long)r->id,
            r->gate == 0 ? "PASS" : r->gate == 1 ? "FAIL" : "not gated");
    fputs(gt_html_css, f);
    fputs("</style></head><body>\n", f);
    header(f, r);
    fputs("<nav class=\"toc\"><a href=\"#summary\">Summary</a>", f);
    if (r->hist)
        fputs("<a href=\"#history\">Changed since</a>", f);
    if (d)
        fputs("<a href=\"#baseline\">Against the baseline</a>", f);
    fputs("<a href=\"#grid\">Grid</a><a href=\"#limitations\">Known limitations</a>"
          "<a href=\"#environment\">Environment</a><a href=\"#accuracy\">Accuracy</a>"
          "<a href=\"#performance\">Performance</a>",
          f);
    if (gt_html_any_long(r))
        fputs("<a href=\"#long\">Long context</a>", f);
    if (gt_html_any_structured(r))
        fputs("<a href=\"#structured\">Structured output</a>", f);
    fputs("<a href=\"#headroom\">Headroom</a><a href=\"#provenance\">Provenance</a>"
          "<a href=\"#cells\">Cell details</a></nav>\n",
          f);
    summary(f, r, d);
    if (r->hist)
        gt_html_history(f, r);
    if (d)
        baseline(f, d);
    fputs("<section id=\"grid\"><h2>Compatibility grid</h2>\n<p class=\"sub\">Rows: model "
          "&#215; quantization. Columns: backend &#215; driver profile. Each cell links to its "
          "details; hover for the reason. Faded labels are optional cells (not gated).</p>\n",
          f);
    gt_html_legend(f);
    fputs("<div id=\"filters\" data-statuses=\"[", f);
    bool first = true;
    for (int s = 0; s < GT_ST_COUNT; s++)
        if (r->counts[s]) {
            fprintf(f, "%s&quot;%s&quot;", first ? "" : ",", gt_status_name(s));
            first = false;
        }
    fputs("]\"></div>\n", f);
    if (!r->n)
        fputs("<p class=\"callout info\">This run recorded no cells.</p>\n", f);
    fputs("<div id=\"grid-view\"></div><noscript><p class=\"callout info\">The grid, the metric "
          "tables and the cell details are drawn by the page's script from the data embedded "
          "in this file; with JavaScript off, gauntlet report --json gives the same "
          "data.</p></noscript>\n</section>\n",
          f);
    limitations(f, r);
    environment(f, r);
    fputs("<section id=\"accuracy\"><h2>Accuracy</h2>\n", f);
    gt_html_accuracy(f, r);
    fputs("</section>\n<section id=\"performance\"><h2>Performance</h2>\n", f);
    gt_html_performance(f, r);
    fputs("</section>\n", f);
    gt_html_long(f, r);
    gt_html_structured(f, r);
    fputs("<section id=\"headroom\"><h2>Headroom of the bounds</h2>\n", f);
    gt_html_headroom(f, r);
    fputs("</section>\n", f);
    gt_html_provenance(f, r);
    fputs("<section id=\"cells\"><h2>Cell details</h2>\n<p class=\"sub\">Open a "
          "cell to see its checks, metrics, artifact, history and log; the status filters above "
          "the grid apply here too.</p>\n<div id=\"cell-search\"></div><div id=\"cell-focus\">"
          "</div><div id=\"cell-list\"></div>\n",
          f);
    fputs("</section>\n<footer>Generated by gauntlet ", f);
    E(r->tool_version);
    fputs(" from ", f);
    E(r->db_path);
    fputs(". Self-contained: no external resources.</footer>\n", f);
    if (gt_html_data(f, r, d, err) != 0)
        return -1;
    fputs("<script>//<![CDATA[\n", f);
    fputs(gt_html_js, f);
    fputs("//]]></script>\n</body></html>\n", f);
    return 0;
}
