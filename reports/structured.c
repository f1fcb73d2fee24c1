/* structured.c: the structured suite's checks, summed up per cell.
 *
 * The structured suite (suites/structured.c, http_structured.c) records
 *   valid_<case>    one per committed schema: the constrained answer is a
 *                   complete document that jsonschema accepts; the message
 *                   is the document, or why not and the document;
 *   answer_<case>   http only, when the server gave no answer at all;
 *   agreement       "N/M answers are the reference's bytes" and, for each
 *                   case that parted, "; <case> parts at byte K: cell
 *                   "<60 bytes>" | reference "<60 bytes>"";
 *   refuse_<case>   one per malformed schema;
 *   stream          http only: the streamed answer is the plain one;
 *   structured      one skip check, for a cell the tier's "cells" leave out;
 * and the metrics valid_rate, ref_agreement (its bound: a matrix may
 * loosen it, as ci.json does for 8-bit activations) and refused. The
 * report shows them as three columns (validity, agreement, refusal), so
 * they are read back here, in one place, from what the results table
 * already holds. A message that does not parse is not an error: its
 * column says what it can and the cell's plain check table shows it
 * verbatim.
 *
 * Known deviations: the matrix may mark structured checks of a cell as
 * expected to fail ("check": "structured.valid_*"); the check keeps its
 * own "fail" and the cell becomes xfail. The verdict makes a cell xfail
 * only when every failure it had was expected, and xpass with a failure
 * only when every failure was expected and another expected one passed
 * (harness/run/verdict.c), so a failing structured check of an xfail or
 * xpass cell is a known deviation, and reads as such. */
#include "report.h"

#include <stdio.h>
#include <string.h>

static bool is_structured(const gt_rep_check *k)
{
    return k->suite && !strcmp(k->suite, "structured");
}

static bool bad(const char *status)
{
    return !strcmp(status, "fail") || !strcmp(status, "error") || !strcmp(status, "crash") ||
           !strcmp(status, "timeout");
}

static void add_name(char *list, size_t cap, const char *name)
{
    size_t len = strlen(list);
    if (len + 1 < cap)
        snprintf(list + len, cap - len, "%s%s", len ? ", " : "", name);
}

/* Where the first divergence's text ends in the agreement message: the
 * snippets are raw bytes (quotes and "; " included), so the end is the
 * closing quote followed by the end of the message or by the next case's
 * "; <case> parts at byte K: cell "". */
static size_t divergence_end(const char *s)
{
    const char *ref = strstr(s, "\" | reference \"");
    if (!ref)
        return strlen(s);
    for (const char *p = ref + 15; (p = strchr(p, '"')); p++) {
        if (!p[1])
            return (size_t)(p + 1 - s);
        char name[96];
        unsigned long at;
        int n = 0;
        if (!strncmp(p, "\"; ", 3) &&
            sscanf(p + 3, "%95[A-Za-z0-9_.-] parts at byte %lu: cell \"%n", name, &at, &n) == 2 &&
            n > 0)
            return (size_t)(p + 1 - s);
    }
    return strlen(s);
}

int gt_report_structured(const gt_rep_cell *c, gt_rep_structured *o)
{
    memset(o, 0, sizeof *o);
    int n = 0;
    for (int i = 0; i < c->n_checks; i++) {
        const gt_rep_check *k = &c->checks[i];
        if (!is_structured(k) || !strcmp(k->status, "skip"))
            continue;
        n++;
        const char *nm = k->name;
        if (!strncmp(nm, "valid_", 6)) {
            o->n_cases++;
            if (!strcmp(k->status, "pass")) {
                o->n_valid++;
            } else {
                add_name(o->invalid, sizeof o->invalid, nm + 6);
                if (!o->first_invalid)
                    o->first_invalid = k;
            }
        } else if (!strncmp(nm, "refuse_", 7)) {
            o->n_malformed++;
            if (!strcmp(k->status, "pass"))
                o->n_refused++;
            else if (!o->first_unrefused)
                o->first_unrefused = k;
        } else if (!strcmp(nm, "agreement")) {
            o->agreement = k;
            int a, m, used = 0;
            if (k->message &&
                sscanf(k->message, "%d/%d answers are the reference's bytes%n", &a, &m, &used) ==
                    2 &&
                used > 0) {
                o->n_agree = a;
                o->n_answers = m;
                const char *d = k->message + used;
                if (!strncmp(d, ": ", 2)) {
                    o->divergence = d + 2;
                    o->divergence_len = divergence_end(d + 2);
                }
            } else {
                o->n_answers = -1; /* not in the suite's format */
            }
        } else if (!strcmp(nm, "stream")) {
            o->stream = k;
        } else if (bad(k->status) && !o->other_bad) {
            o->other_bad = k; /* answer_<case>, or the suite's own error */
        }
        if (bad(k->status))
            o->n_failed++;
    }
    if (!n)
        return -1;
    o->valid_rate = gt_report_metric(c, "structured", "valid_rate");
    o->ref_agreement = gt_report_metric(c, "structured", "ref_agreement");
    o->refused = gt_report_metric(c, "structured", "refused");
    o->known = o->n_failed > 0 && (!strcmp(c->status, "xfail") || !strcmp(c->status, "xpass"));
    return 0;
}

bool gt_report_has_structured(const gt_rep_cell *c)
{
    for (int i = 0; i < c->n_checks; i++)
        if (is_structured(&c->checks[i]) && strcmp(c->checks[i].status, "skip"))
            return true;
    return false;
}

const char *gt_report_structured_verdict(const gt_rep_structured *s, bool failed)
{
    return !failed ? "pass" : s->known ? "xfail" : "fail";
}
