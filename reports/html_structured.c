/* html_structured.c: the HTML report's "Structured output" section, a row
 * per cell that ran the structured suite, with three columns (and a fourth
 * for servers):
 *   - validity: valid/total answers (complete, and jsonschema accepts
 *     them), naming the cases that did not validate and why the first
 *     did not;
 *   - agreement: answers that are the reference backend's bytes, against
 *     the bound when a matrix loosened it, and the first divergence (case,
 *     byte, both sides' next bytes);
 *   - refusal: malformed schemas refused N/M, naming the first that was
 *     not, with its message;
 *   - stream (http cells): the streamed answer is the plain one.
 * A column whose checks failed on an xfail (or xpass) cell reads "xfail", a known
 * deviation (structured.c says why that is sound), never "pass".
 *
 * The rows are markup, like the Long context part: a tier runs the suite on
 * a handful of cells. The script copies a cell's row, under the table's
 * head, into its details when they are opened (html_lazy.c: the row id
 * "sc-c<cells.id>"). Cells that did not run the suite have no row, and a
 * run without any has no section. */
#include <string.h>

#include "html.h"

#define E(s) gt_report_esc(f, s)

static const char *mark(const char *verdict)
{
    return !strcmp(verdict, "pass")    ? "&#10003;"
           : !strcmp(verdict, "xfail") ? "&#8856;"
                                       : "&#10007;";
}

/* <td class="vd vd-V">MARK text</td>, the text written by the caller. */
static void open_td(FILE *f, const char *verdict)
{
    fprintf(f, "<td class=\"vd vd-%s sc\">%s ", verdict, mark(verdict));
}

static void sub(FILE *f, const char *label, const char *text, size_t max)
{
    fputs("<div class=\"sub\">", f);
    E(label);
    gt_report_esc_n(f, text, max);
    if (strlen(text) > max)
        fputs("&#8230;", f);
    fputs("</div>", f);
}

static void validity(FILE *f, const gt_rep_structured *s)
{
    char label[128];
    if (!s->n_cases && !s->other_bad) {
        fputs("<td class=\"sub\">&#8212;</td>", f);
        return;
    }
    open_td(f, gt_report_structured_verdict(s, s->n_valid < s->n_cases || s->other_bad));
    if (s->n_cases)
        fprintf(f, "%d/%d valid", s->n_valid, s->n_cases);
    else
        fputs("no answers", f);
    if (s->first_invalid) {
        sub(f, "not valid: ", s->invalid, 200);
        snprintf(label, sizeof label, "%s: ", s->first_invalid->name + 6);
        sub(f, label, s->first_invalid->message, 160);
    }
    if (s->other_bad) { /* the server gave no answer, or the suite could not run */
        snprintf(label, sizeof label, "%s: ", s->other_bad->name);
        sub(f, label, s->other_bad->message, 160);
    }
    fputs("</td>", f);
}

static void agreement(FILE *f, const gt_rep_structured *s)
{
    if (!s->agreement) {
        fputs("<td class=\"sub\">&#8212;</td>", f);
        return;
    }
    open_td(f, gt_report_structured_verdict(s, strcmp(s->agreement->status, "pass") != 0));
    if (s->n_answers < 0) {
        gt_report_esc_n(f, s->agreement->message, 200);
        fputs("</td>", f);
        return;
    }
    fprintf(f, "%d/%d same bytes", s->n_agree, s->n_answers);
    const gt_rep_metric *m = s->ref_agreement;
    if (m && m->has_tol && m->tolerance < 1) {
        char t[32];
        gt_report_num(m->tolerance, t, sizeof t);
        fputs(" (bound ", f);
        E(m->comparator);
        fprintf(f, " %s)", t);
    }
    if (s->divergence) {
        fputs("<div class=\"sub mono\">", f);
        gt_report_esc_n(f, s->divergence, s->divergence_len < 200 ? s->divergence_len : 200);
        if (s->divergence_len > 200)
            fputs("&#8230;", f);
        fputs("</div>", f);
        int more = s->n_answers - s->n_agree - 1;
        if (more > 0)
            fprintf(f, "<div class=\"sub\">and %d more case%s</div>", more, more == 1 ? "" : "s");
    }
    fputs("</td>", f);
}

static void refusal(FILE *f, const gt_rep_structured *s)
{
    if (!s->n_malformed) {
        fputs("<td class=\"sub\">&#8212;</td>", f);
        return;
    }
    open_td(f, gt_report_structured_verdict(s, s->n_refused < s->n_malformed));
    fprintf(f, "refused %d/%d", s->n_refused, s->n_malformed);
    if (s->first_unrefused) {
        char label[128];
        snprintf(label, sizeof label, "%s: ", s->first_unrefused->name);
        sub(f, label, s->first_unrefused->message, 200);
    }
    fputs("</td>", f);
}

static void stream(FILE *f, const gt_rep_structured *s)
{
    if (!s->stream) {
        fputs("<td class=\"sub\">&#8212;</td>", f);
        return;
    }
    const bool failed = strcmp(s->stream->status, "pass") != 0;
    open_td(f, gt_report_structured_verdict(s, failed));
    fputs(failed ? "differs" : "same", f);
    if (failed)
        sub(f, "", s->stream->message, 200);
    fputs("</td>", f);
}

void gt_html_structured(FILE *f, const gt_rep_run *r)
{
    int n = 0;
    bool streams = false;
    for (int i = 0; i < r->n && !streams; i++) {
        gt_rep_structured s;
        streams = gt_report_structured(&r->cells[i], &s) == 0 && s.stream;
    }
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        gt_rep_structured s;
        if (gt_report_structured(c, &s) != 0)
            continue;
        if (!n++)
            fprintf(f, "<section id=\"structured\"><h2>Structured output</h2>\n<p class=\"sub\">"
                       "Cells that ran the structured suite: schema-constrained greedy answers "
                       "that jsonschema validates, that are the reference backend's bytes, and "
                       "malformed schemas refused by name within the deadline. %s"
                       "&#8856; marks a known deviation (the matrix expects it). Each row is also "
                       "shown in its cell's details.</p>\n<table class=\"sc\"><thead><tr>"
                       "<th>cell</th><th>validity</th><th>agreement with the reference</th>"
                       "<th>refusal of malformed schemas</th>%s</tr></thead><tbody>\n",
                    streams ? "Servers also stream the first case's answer. " : "",
                    streams ? "<th>stream</th>" : "");
        fprintf(f, "<tr class=\"sc\" id=\"sc-c%lld\"><td class=\"sch\">", (long long)c->id);
        gt_html_cell_link(f, c);
        fputs(" ", f);
        gt_html_badge(f, c->status, NULL, NULL);
        if (s.known)
            sub(f, "known deviation: ",
                c->expect_reason[0] ? c->expect_reason : c->reason, 240);
        fputs("</td>", f);
        validity(f, &s);
        agreement(f, &s);
        refusal(f, &s);
        if (streams)
            stream(f, &s);
        fputs("</tr>\n", f);
    }
    if (n)
        fputs("</tbody></table>\n</section>\n", f);
}

bool gt_html_any_structured(const gt_rep_run *r)
{
    for (int i = 0; i < r->n; i++)
        if (gt_report_has_structured(&r->cells[i]))
            return true;
    return false;
}
