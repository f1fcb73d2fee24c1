/* junit.c: JUnit XML for CI systems, valid against the strict Ant schema
 * (../shared/schemas/junit.xsd).
 *
 * Mapping (what a CI UI shows):
 *   <testsuites>                        no attributes: the schema allows none
 *     <testsuite> per cell              package "gauntlet.<matrix>.<tier>", id = position,
 *                                       name = cell id; the axes, status and reason as
 *                                       <properties>
 *       <testcase name="cell">          the cell's verdict, always present, so a cell
 *                                       that crashed, timed out or was skipped before
 *                                       any check still shows up as one test
 *       <testcase> per check and per metric (classname = the cell id with dots,
 *                                       so CI UIs group them by cell)
 *       <system-out>                    every metric with value and tolerance
 *       <system-err>                    the worker's log tail
 * Outcomes: fail -> <failure>, error/crash/timeout -> <error type=status>,
 * skip -> <skipped>. In a cell the matrix expects to fail (xfail), failing
 * checks are <skipped message="expected failure: ..."> so a documented
 * limitation never turns CI red; an xpass is a <failure> of the cell's
 * verdict (the expectation is stale). Hence, per cell:
 *   tests = 1 + checks + metrics, and failures/errors/skipped count exactly
 *   the testcases holding those elements. */
#include "report.h"

#include <string.h>
#include <time.h>

typedef enum { OUT_PASS, OUT_FAIL, OUT_ERROR, OUT_SKIP } outcome;

typedef struct tc {
    outcome o;
    const char *type; /* failure/error type */
    char msg[1400];
} tc;

static void cell_verdict(const gt_rep_cell *c, tc *t)
{
    const char *s = c->status;
    t->type = s;
    if (!strcmp(s, "pass")) {
        t->o = OUT_PASS;
        snprintf(t->msg, sizeof t->msg, "pass");
    } else if (!strcmp(s, "fail")) {
        t->o = OUT_FAIL;
        snprintf(t->msg, sizeof t->msg, "%s", c->reason[0] ? c->reason : "a check failed");
    } else if (!strcmp(s, "xpass")) {
        t->o = OUT_FAIL;
        snprintf(t->msg, sizeof t->msg, "expected to fail (%s) but passed: the expectation is stale",
                 c->expect_reason[0] ? c->expect_reason : "no reason given");
    } else if (!strcmp(s, "xfail")) {
        t->o = OUT_SKIP;
        snprintf(t->msg, sizeof t->msg, "expected failure (%s): %s",
                 c->expect_reason[0] ? c->expect_reason : "documented limitation",
                 c->reason[0] ? c->reason : c->raw_status);
    } else if (!strcmp(s, "skip")) {
        t->o = OUT_SKIP;
        snprintf(t->msg, sizeof t->msg, "%s", c->reason[0] ? c->reason : "skipped");
    } else if (!strcmp(s, "pending")) {
        t->o = OUT_SKIP;
        snprintf(t->msg, sizeof t->msg, "not run: the run ended before this cell");
    } else { /* error, crash, timeout */
        t->o = OUT_ERROR;
        snprintf(t->msg, sizeof t->msg, "%s: %s", s, c->reason[0] ? c->reason : "no reason recorded");
    }
}

static bool expected_fail(const gt_rep_cell *c) { return !strcmp(c->status, "xfail"); }

static void check_outcome(const gt_rep_cell *c, const gt_rep_check *k, tc *t)
{
    t->type = "check";
    snprintf(t->msg, sizeof t->msg, "%s", k->message);
    if (!strcmp(k->status, "pass")) {
        t->o = OUT_PASS;
    } else if (!strcmp(k->status, "skip")) {
        t->o = OUT_SKIP;
    } else if (expected_fail(c)) {
        t->o = OUT_SKIP;
        snprintf(t->msg, sizeof t->msg, "expected failure (%s): %s %s", c->expect_reason,
                 k->status, k->message);
    } else {
        t->o = !strcmp(k->status, "error") ? OUT_ERROR : OUT_FAIL;
        t->type = k->status;
    }
}

static void metric_outcome(const gt_rep_cell *c, const gt_rep_metric *m, tc *t)
{
    char v[32], tol[32];
    gt_report_num(m->value, v, sizeof v);
    gt_report_num(m->tolerance, tol, sizeof tol);
    t->type = "tolerance";
    if (m->has_tol)
        snprintf(t->msg, sizeof t->msg, "%s %s, tolerance %s %s", m->has_value ? v : "no value",
                 m->unit, m->comparator, tol);
    else
        snprintf(t->msg, sizeof t->msg, "%s %s (no tolerance)", m->has_value ? v : "no value",
                 m->unit);
    if (strcmp(m->verdict, "fail") != 0) {
        t->o = OUT_PASS;
    } else if (expected_fail(c)) {
        t->o = OUT_SKIP;
        char inner[1400];
        snprintf(inner, sizeof inner, "%s", t->msg);
        snprintf(t->msg, sizeof t->msg, "expected failure (%s): %s", c->expect_reason, inner);
    } else {
        t->o = OUT_FAIL;
    }
}

static void prop(FILE *f, const char *name, const char *value)
{
    fprintf(f, "      <property name=\"%s\" value=\"", name);
    gt_report_esc(f, value);
    fputs("\"/>\n", f);
}

static void emit(FILE *f, const char *name, const char *classname, double time, const tc *t)
{
    fputs("    <testcase name=\"", f);
    gt_report_esc(f, name);
    fputs("\" classname=\"", f);
    gt_report_esc(f, classname);
    fprintf(f, "\" time=\"%.3f\"", time > 0 ? time : 0.0);
    if (t->o == OUT_PASS) {
        fputs("/>\n", f);
        return;
    }
    static const char *const el[] = {"", "failure", "error", "skipped"};
    fprintf(f, ">\n      <%s", el[t->o]);
    if (t->o != OUT_SKIP) {
        fputs(" type=\"", f);
        gt_report_esc(f, t->type);
        fputc('"', f);
    }
    fputs(" message=\"", f);
    gt_report_esc(f, t->msg);
    fprintf(f, "\"/>\n    </testcase>\n");
}

static void timestamp(double t, char *out, size_t cap)
{
    time_t s = (time_t)(t > 0 ? t : 0);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
}

int gt_report_junit(const gt_rep_run *r, FILE *f, gt_err *err)
{
    (void)err;
    char pkg[300];
    snprintf(pkg, sizeof pkg, "gauntlet.%s.%s", r->matrix_name[0] ? r->matrix_name : "matrix",
             r->tier[0] ? r->tier : "tier");
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n", f);
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        char cls[512];
        snprintf(cls, sizeof cls, "%s", c->cell_id[0] ? c->cell_id : "cell");
        for (char *p = cls; *p; p++)
            if (*p == '/')
                *p = '.';
        tc verdict;
        cell_verdict(c, &verdict);
        if (!c->required && (verdict.o == OUT_FAIL || verdict.o == OUT_ERROR)) {
            size_t len = strlen(verdict.msg);
            snprintf(verdict.msg + len, sizeof verdict.msg - len,
                     " (optional cell: does not fail the gate)");
        }
        int fails = 0, errors = 0, skips = 0;
        tc t;
#define COUNT(t)                                                                              \
    do {                                                                                      \
        fails += (t).o == OUT_FAIL;                                                           \
        errors += (t).o == OUT_ERROR;                                                         \
        skips += (t).o == OUT_SKIP;                                                           \
    } while (0)
        COUNT(verdict);
        for (int k = 0; k < c->n_checks; k++) {
            check_outcome(c, &c->checks[k], &t);
            COUNT(t);
        }
        for (int k = 0; k < c->n_metrics; k++) {
            metric_outcome(c, &c->metrics[k], &t);
            COUNT(t);
        }
        char ts[32];
        timestamp(c->started_at > 0 ? c->started_at : r->started_at, ts, sizeof ts);
        const char *host = c->host[0] ? c->host : r->host[0] ? r->host : "localhost";
        fputs("  <testsuite package=\"", f);
        gt_report_esc(f, pkg);
        fprintf(f, "\" id=\"%d\" name=\"", i);
        gt_report_esc(f, c->cell_id[0] ? c->cell_id : "cell");
        fprintf(f, "\" timestamp=\"%s\" hostname=\"", ts);
        gt_report_esc(f, host);
        fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
                1 + c->n_checks + c->n_metrics, fails, errors, skips,
                c->duration_s > 0 ? c->duration_s : 0.0);
        fputs("    <properties>\n", f);
        prop(f, "model", c->model);
        prop(f, "quant", c->quant);
        prop(f, "backend", c->backend);
        prop(f, "driver", c->driver);
        if (c->settings[0])
            prop(f, "settings", c->settings);
        prop(f, "device", c->device);
        prop(f, "required", c->required ? "true" : "false");
        prop(f, "expected", c->expected);
        prop(f, "status", c->status);
        prop(f, "raw_status", c->raw_status);
        prop(f, "reason", c->reason);
        if (c->expect_reason[0])
            prop(f, "expect_reason", c->expect_reason);
        prop(f, "run_key", r->run_key);
        prop(f, "git_sha", r->git_sha);
        fputs("    </properties>\n", f);
        emit(f, "cell", cls, c->duration_s, &verdict);
        char name[300];
        for (int k = 0; k < c->n_checks; k++) {
            const gt_rep_check *ck = &c->checks[k];
            check_outcome(c, ck, &t);
            snprintf(name, sizeof name, "%s.%s", ck->suite, ck->name);
            emit(f, name, cls, 0, &t);
        }
        for (int k = 0; k < c->n_metrics; k++) {
            metric_outcome(c, &c->metrics[k], &t);
            gt_report_metric_label(&c->metrics[k], name, sizeof name);
            emit(f, name, cls, 0, &t);
        }
        fputs("    <system-out>", f);
        for (int k = 0; k < c->n_metrics; k++) {
            metric_outcome(c, &c->metrics[k], &t);
            gt_report_metric_label(&c->metrics[k], name, sizeof name);
            gt_report_esc(f, name);
            fputs(" = ", f);
            gt_report_esc(f, t.msg);
            fprintf(f, " [%s]\n", c->metrics[k].verdict);
        }
        fputs("</system-out>\n    <system-err>", f);
        gt_report_esc(f, c->log);
        fputs("</system-err>\n  </testsuite>\n", f);
    }
    fputs("</testsuites>\n", f);
    return 0;
}
