/* verdict.c: see verdict.h. */
#include "verdict.h"

#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "suite.h"

void gt_signal_describe(int sig, char *out, size_t cap)
{
    const char *abbrev = sigabbrev_np(sig);
    const char *desc = strsignal(sig);
    if (abbrev)
        snprintf(out, cap, "SIG%s (%s)", abbrev, desc ? desc : "?");
    else
        snprintf(out, cap, "signal %d", sig);
}

void gt_log_tail(const char *log, int n, char *out, size_t cap)
{
    out[0] = '\0';
    if (!log || cap == 0)
        return;
    const char *end = log + strlen(log);
    const char *starts[16];
    int found = 0;
    const char *p = end;
    if (n > 16)
        n = 16;
    while (p > log && found < n) {
        const char *line_end = p;
        while (line_end > log && (line_end[-1] == '\n' || line_end[-1] == '\r'))
            line_end--;
        const char *line_start = line_end;
        while (line_start > log && line_start[-1] != '\n')
            line_start--;
        if (line_end > line_start)
            starts[found++] = line_start;
        p = line_start;
    }
    for (int i = found - 1; i >= 0; i--) {
        const char *s = starts[i];
        size_t len = strcspn(s, "\r\n");
        size_t have = strlen(out);
        snprintf(out + have, cap - have, "%s%.*s", have ? " | " : "", (int)len, s);
    }
}

static const char *sget(const cJSON *o, const char *k)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(n) ? n->valuestring : "";
}

static double nget(const cJSON *o, const char *k)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(n) ? n->valuedouble : NAN;
}

/* The known-failing check (of c->known) that result or metric line l is,
 * or NULL. The part after "<suite>." is a glob ("structured.valid_*"): one
 * deviation of a server often fails a family of checks and the metric that
 * totals them. */
static const gt_mx_rule *known_check(const gt_cell *c, const cJSON *l)
{
    const bool metric = !strcmp(sget(l, "t"), "metric");
    if (!c || (!metric && strcmp(sget(l, "t"), "result") != 0))
        return NULL;
    const char *suite = sget(l, "suite"), *check = sget(l, metric ? "name" : "check");
    size_t n = strlen(suite);
    for (int i = 0; i < c->n_known; i++) {
        const char *k = c->known[i]->check;
        if (!strncmp(k, suite, n) && k[n] == '.' && fnmatch(k + n + 1, check, 0) == 0)
            return c->known[i];
    }
    return NULL;
}

/* "suite.check: message", or for a metric "suite.name = value (tolerance
 * cmp bound)". */
static void line_what(const cJSON *l, char *out, size_t cap)
{
    if (strcmp(sget(l, "t"), "metric") == 0)
        snprintf(out, cap, "%s.%s = %g (tolerance %s %g)", sget(l, "suite"), sget(l, "name"),
                 nget(l, "value"), sget(l, "comparator"), nget(l, "tolerance"));
    else
        snprintf(out, cap, "%s.%s: %s", sget(l, "suite"), sget(l, "check"), sget(l, "message"));
}

typedef struct known_seen {
    const cJSON *failed, *passed; /* the first known check that failed / passed */
    const gt_mx_rule *failed_rule, *passed_rule;
    bool only_known; /* the raw fail is known-failing checks alone */
    int n_failed;    /* known checks that failed */
} known_seen;

/* What one suite of the cell covered: whether any of its checks ran (a
 * result pass, fail or error; a metric judged pass or fail: an info metric
 * is a number recorded, not a check), and its first skip of another
 * category than GT_SKIP_MATRIX and its first of that category. */
typedef struct coverage {
    const char *suite;
    bool ran;
    const cJSON *skip, *matrix_skip;
} coverage;

#define MAX_COVER 32

static bool is_suite(const coverage *cv, int n, const char *name, int *at)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(cv[i].suite, name)) {
            *at = i;
            return true;
        }
    return false;
}

/* The suites to account for: the cell's tier's, or without a cell every
 * suite the lines name (gt_suite_find: not the harness's own "backend",
 * "server" or "worker" checks). */
static int cover_list(const gt_outcome *o, const gt_cell *c, coverage *cv)
{
    int n = 0, at;
    for (int i = 0; c && i < c->n_suites && n < MAX_COVER; i++)
        if (!is_suite(cv, n, c->suites[i], &at))
            cv[n++] = (coverage){c->suites[i], false, NULL, NULL};
    if (c && c->n_suites)
        return n;
    const cJSON *l;
    cJSON_ArrayForEach(l, o->lines)
    {
        const char *su = sget(l, "suite");
        if (n < MAX_COVER && gt_suite_find(su) && !is_suite(cv, n, su, &at))
            cv[n++] = (coverage){su, false, NULL, NULL};
    }
    return n;
}

/* Zero coverage (see verdict.h): 0 when every suite of the cell ran a
 * check or was left out by the matrix, and some check ran; otherwise -1
 * with reason "no coverage: ...". */
static int zero_coverage(const gt_outcome *o, const gt_cell *c, char *reason, size_t cap)
{
    coverage cv[MAX_COVER];
    const int n = cover_list(o, c, cv);
    const cJSON *l;
    cJSON_ArrayForEach(l, o->lines)
    {
        const char *t = sget(l, "t"), *st = sget(l, "status"), *v = sget(l, "verdict");
        int i;
        if (!is_suite(cv, n, sget(l, "suite"), &i))
            continue;
        if (!strcmp(t, "result") &&
            (!strcmp(st, "pass") || !strcmp(st, "fail") || !strcmp(st, "error")))
            cv[i].ran = true;
        else if (!strcmp(t, "metric") && (!strcmp(v, "pass") || !strcmp(v, "fail")))
            cv[i].ran = true;
        else if (!strcmp(t, "result") && !strcmp(st, "skip")) {
            bool matrix = !strncmp(sget(l, "message"), GT_SKIP_MATRIX, strlen(GT_SKIP_MATRIX));
            const cJSON **first = matrix ? &cv[i].matrix_skip : &cv[i].skip;
            if (!*first)
                *first = l;
        }
    }
    int ran = 0, bare = 0, first = -1;
    const cJSON *any_skip = NULL;
    for (int i = 0; i < n; i++) {
        ran += cv[i].ran;
        if (!any_skip)
            any_skip = cv[i].skip ? cv[i].skip : cv[i].matrix_skip;
        if (!cv[i].ran && (cv[i].skip || !cv[i].matrix_skip) && bare++ == 0)
            first = i;
    }
    if (ran == 0) {
        if (any_skip)
            snprintf(reason, cap, "no coverage: no check ran in any suite (%s.%s: %s)",
                     sget(any_skip, "suite"), sget(any_skip, "check"),
                     sget(any_skip, "message"));
        else
            snprintf(reason, cap, "no coverage: no check ran in any suite (%s)",
                     n ? "none reported a result" : "no suite reported anything");
        return -1;
    }
    if (first < 0)
        return 0;
    char more[64] = "";
    if (bare > 1)
        snprintf(more, sizeof more, " [+%d more suite%s without coverage]", bare - 1,
                 bare > 2 ? "s" : "");
    const coverage *f = &cv[first];
    if (f->skip)
        snprintf(reason, cap, "no coverage: suite %s ran no check (%s.%s: %s)%s", f->suite,
                 f->suite, sget(f->skip, "check"), sget(f->skip, "message"), more);
    else
        snprintf(reason, cap, "no coverage: suite %s ran no check (no result, no judged metric)%s",
                 f->suite, more);
    return -1;
}

/* Raw status from the worker's lines (it exited normally). A failure of a
 * known-failing check counts as a failure here (raw is the truth); *ks says
 * whether it was the only kind. */
static gt_status from_lines(const gt_outcome *o, const gt_cell *c, known_seen *ks, char *reason,
                            size_t cap)
{
    bool done = false;
    const cJSON *first_fail = NULL, *first_error = NULL, *skip = NULL;
    const cJSON *l;
    cJSON_ArrayForEach(l, o->lines)
    {
        const char *t = sget(l, "t");
        const gt_mx_rule *k = known_check(c, l);
        const char *st = sget(l, strcmp(t, "metric") ? "status" : "verdict");
        if (k && !strcmp(st, "fail")) {
            ks->n_failed++;
            if (!ks->failed) {
                ks->failed = l;
                ks->failed_rule = k;
            }
            continue;
        }
        if (k && !strcmp(st, "pass") && !ks->passed) {
            ks->passed = l;
            ks->passed_rule = k;
        }
        if (!strcmp(t, "done"))
            done = true;
        else if (!strcmp(t, "skip") && !skip)
            skip = l;
        else if (!strcmp(t, "result") && !strcmp(sget(l, "status"), "error") && !first_error)
            first_error = l;
        else if (((!strcmp(t, "result") && !strcmp(sget(l, "status"), "fail")) ||
                  (!strcmp(t, "metric") && !strcmp(sget(l, "verdict"), "fail"))) &&
                 !first_fail)
            first_fail = l;
    }
    if (skip) {
        snprintf(reason, cap, "%s", sget(skip, "reason"));
        return GT_ST_SKIP;
    }
    if (first_error) {
        /* A backend that would not open: its message already says why
         * ("bad driver setting: ..."), which is what the gate should print. */
        if (!strcmp(sget(first_error, "suite"), "backend") &&
            !strcmp(sget(first_error, "check"), "open"))
            snprintf(reason, cap, "%s", sget(first_error, "message"));
        else
            snprintf(reason, cap, "%s.%s: %s", sget(first_error, "suite"),
                     sget(first_error, "check"), sget(first_error, "message"));
        return GT_ST_ERROR;
    }
    if (!done) {
        char tail[400];
        gt_log_tail(o->log, 3, tail, sizeof tail);
        snprintf(reason, cap, "worker exited with code %d before finishing%s%s", o->code,
                 tail[0] ? "; last log: " : "", tail);
        return GT_ST_ERROR;
    }
    if (o->code != 0) { /* finished, then failed on the way out (e.g. a leak checker) */
        char tail[400];
        gt_log_tail(o->log, 3, tail, sizeof tail);
        snprintf(reason, cap, "worker exited with code %d after finishing%s%s", o->code,
                 tail[0] ? "; last log: " : "", tail);
        return GT_ST_ERROR;
    }
    if (first_fail) {
        if (!strcmp(sget(first_fail, "t"), "metric"))
            snprintf(reason, cap, "%s.%s = %.6g %s (tolerance %s %.6g)", sget(first_fail, "suite"),
                     sget(first_fail, "name"), nget(first_fail, "value"),
                     sget(first_fail, "unit"), sget(first_fail, "comparator"),
                     nget(first_fail, "tolerance"));
        else
            snprintf(reason, cap, "%s.%s: %s", sget(first_fail, "suite"),
                     sget(first_fail, "check"), sget(first_fail, "message"));
        return GT_ST_FAIL;
    }
    if (o->bad_lines) {
        snprintf(reason, cap, "worker wrote %d malformed result lines", o->bad_lines);
        return GT_ST_ERROR;
    }
    if (ks->failed) {
        ks->only_known = true;
        line_what(ks->failed, reason, cap);
        return GT_ST_FAIL;
    }
    /* Zero coverage is a failure: every check of a suite skipped (or none
     * reported) passes nothing. */
    if (zero_coverage(o, c, reason, cap) != 0)
        return GT_ST_FAIL;
    reason[0] = '\0';
    return GT_ST_PASS;
}

static void judge(const gt_outcome *o, const gt_cell *c, double timeout_s, gt_status expected,
                  const char *expect_reason, gt_status *raw, gt_status *final, char *reason,
                  size_t cap)
{
    known_seen ks = {0};
    char why[1024], tail[512], sig[96];
    gt_log_tail(o->log, 3, tail, sizeof tail);
    switch (o->end) {
    case GT_END_TIMEOUT:
        *raw = GT_ST_TIMEOUT;
        snprintf(why, sizeof why, "killed after the %.3gs timeout%s%s", timeout_s,
                 tail[0] ? "; last log: " : "", tail);
        break;
    case GT_END_SIGNALED:
        *raw = GT_ST_CRASH;
        gt_signal_describe(o->sig, sig, sizeof sig);
        snprintf(why, sizeof why, "%s%s%s", sig, tail[0] ? "; last log: " : "", tail);
        break;
    case GT_END_SPAWN:
    case GT_END_NOT_RUN:
        *raw = GT_ST_ERROR;
        snprintf(why, sizeof why, "could not run a worker: %s", tail);
        break;
    case GT_END_EXITED:
    default:
        *raw = from_lines(o, c, &ks, why, sizeof why);
        break;
    }
    *final = *raw;
    if (expected == GT_ST_XFAIL) {
        if (*raw == GT_ST_PASS) {
            *final = GT_ST_XPASS;
            snprintf(reason, cap, "expected to fail (%s) but passed", expect_reason);
            return;
        }
        if (*raw == GT_ST_FAIL || *raw == GT_ST_ERROR || *raw == GT_ST_CRASH ||
            *raw == GT_ST_TIMEOUT) {
            *final = GT_ST_XFAIL;
            snprintf(reason, cap, "expected: %s; got %s: %s", expect_reason,
                     gt_status_name(*raw), why);
            return;
        }
    }
    if (expected == GT_ST_PASS && (*raw == GT_ST_PASS || ks.only_known) && ks.passed) {
        char passed[600];
        line_what(ks.passed, passed, sizeof passed);
        *final = GT_ST_XPASS;
        snprintf(reason, cap, "%s was expected to fail (%s) but passed: %s",
                 ks.passed_rule->check, ks.passed_rule->reason, passed);
        return;
    }
    if (expected == GT_ST_PASS && *raw == GT_ST_FAIL && ks.only_known) {
        /* Only known-failing checks failed: a documented limitation. */
        *final = GT_ST_XFAIL;
        snprintf(reason, cap, "known limitation (%s): %s%s%.0d%s", ks.failed_rule->reason, why,
                 ks.n_failed > 1 ? " [+" : "", ks.n_failed > 1 ? ks.n_failed - 1 : 0,
                 ks.n_failed > 1 ? " more known-failing checks]" : "");
        return;
    }
    snprintf(reason, cap, "%s", why);
}

void gt_verdict_judge(const gt_outcome *o, double timeout_s, gt_status expected,
                      const char *expect_reason, gt_status *raw, gt_status *final, char *reason,
                      size_t cap)
{
    judge(o, NULL, timeout_s, expected, expect_reason, raw, final, reason, cap);
}

void gt_verdict_judge_cell(const gt_outcome *o, const gt_cell *c, gt_status *raw,
                           gt_status *final, char *reason, size_t cap)
{
    judge(o, c, c->timeout_s, c->expected, c->expect_reason, raw, final, reason, cap);
}
