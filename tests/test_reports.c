/* test_reports.c: `gauntlet report` end to end, on synthetic runs written in
 * the real schema (report_fixture.c through the harness's db.c) and on a
 * real quickstart qualification (gt_test_quickstart).
 *
 * What is asserted, per format:
 *   JUnit     valid against reports/junit.xsd (and ../shared/schemas/junit.xsd
 *             when present; xmllint), and the
 *             testcase / failure / error / skipped counts equal what SQL
 *             counts in the database under the documented mapping;
 *   HTML      well-formed (xmllint --noout: the report is polyglot XHTML),
 *             clean under tidy -e when tidy is installed,
 *             every cell present with its status, every failing metric
 *             shown with its tolerance inside its cell's details, the log's
 *             markup escaped, the baseline section listing exactly the
 *             changed cells, self-contained (no http(s) URL to load);
 *   Markdown  verdict and failing cells;
 *   JSON      parses, cells/checks/metrics counts equal the DB's.
 * Also: usage errors exit 2, and `test_reports --make-db FILE N` writes the
 * benchmark's database (ci/bench-report.sh). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../harness/db.c"
#include "report_fixture.c"
#include "testutil.h"

#define GAUNTLET GT_BINARY_DIR "/gauntlet"


static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}


/* tidy (HTML5-aware) when installed: exit 0 means no errors and no
 * warnings. xmllint --html is not used: its HTML 4 parser rejects the HTML5
 * elements (header, section, details) the report is made of. */
static void check_tidy(const char *html)
{
    if (gt_test_sh("command -v tidy >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_reports: tidy not installed; HTML checked by xmllint only\n");
        return;
    }
    ck_assert_int_eq(gt_test_sh("tidy -q -e %s", html), 0);
}

static int64_t sql_int(const char *db_path, const char *sql)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(h));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* The JUnit counts the DB implies for run `run` (see reports/junit.c). */
static void check_junit_counts(const char *db, int64_t run, const char *xml)
{
    char q[1024];
#define Q(...) (snprintf(q, sizeof q, __VA_ARGS__), sql_int(db, q))
    int64_t cells = Q("SELECT count(*) FROM cells WHERE run_id = %lld", (long long)run);
    int64_t checks = Q("SELECT count(*) FROM results r JOIN cells c ON c.id = r.cell"
                       " WHERE c.run_id = %lld", (long long)run);
    int64_t metrics = Q("SELECT count(*) FROM metrics m JOIN cells c ON c.id = m.cell"
                        " WHERE c.run_id = %lld", (long long)run);
    int64_t fail = Q("SELECT (SELECT count(*) FROM cells WHERE run_id = %lld AND status IN"
                     " ('fail','xpass')) + (SELECT count(*) FROM results r JOIN cells c ON"
                     " c.id = r.cell WHERE c.run_id = %lld AND r.status = 'fail' AND c.status"
                     " != 'xfail') + (SELECT count(*) FROM metrics m JOIN cells c ON c.id ="
                     " m.cell WHERE c.run_id = %lld AND m.verdict = 'fail' AND c.status !="
                     " 'xfail')",
                     (long long)run, (long long)run, (long long)run);
    int64_t err = Q("SELECT (SELECT count(*) FROM cells WHERE run_id = %lld AND status IN"
                    " ('error','crash','timeout')) + (SELECT count(*) FROM results r JOIN cells c"
                    " ON c.id = r.cell WHERE c.run_id = %lld AND r.status = 'error' AND"
                    " c.status != 'xfail')",
                    (long long)run, (long long)run);
    int64_t skip = Q("SELECT (SELECT count(*) FROM cells WHERE run_id = %lld AND status IN"
                     " ('xfail','skip','pending')) + (SELECT count(*) FROM results r JOIN cells"
                     " c ON c.id = r.cell WHERE c.run_id = %lld AND (r.status = 'skip' OR"
                     " (c.status = 'xfail' AND r.status != 'pass'))) + (SELECT count(*) FROM"
                     " metrics m JOIN cells c ON c.id = m.cell WHERE c.run_id = %lld AND"
                     " c.status = 'xfail' AND m.verdict = 'fail')",
                     (long long)run, (long long)run, (long long)run);
    ck_assert_int_eq(count(xml, "<testsuite "), cells);
    ck_assert_int_eq(count(xml, "<testcase "), cells + checks + metrics);
    ck_assert_int_eq(count(xml, "<failure "), fail);
    ck_assert_int_eq(count(xml, "<error "), err);
    ck_assert_int_eq(count(xml, "<skipped "), skip);
#undef Q
}

/* The slice of html holding cell `id`'s details. */
static char *details_of(const char *html, long long id)
{
    char key[64];
    snprintf(key, sizeof key, "<details class=\"cell\" id=\"c%lld\"", id);
    const char *a = strstr(html, key);
    if (!a)
        return NULL;
    const char *b = strstr(a, "</details>");
    return b ? strndup(a, (size_t)(b - a)) : NULL;
}

static const char *make_db(const char *name, int n, int64_t *base, int64_t *cur)
{
    const char *path = gt_test_tmp(name);
    unlink(path);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(path, false, &db, &err) == 0, "%s", err.msg);
    *base = fx_make_run(db, n, 0, "synthetic/base");
    *cur = fx_make_run(db, n, 1, "synthetic/current");
    ck_assert_int_gt(*base, 0);
    ck_assert_int_gt(*cur, 0);
    gt_db_close(db);
    return path;
}

START_TEST(synthetic_all_formats)
{
    int64_t base, cur;
    const char *db = make_db("synth.sqlite", 48, &base, &cur);
    char html[512], xml[512], md[512], js[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("r.html"));
    snprintf(xml, sizeof xml, "%s", gt_test_tmp("r.xml"));
    snprintf(md, sizeof md, "%s", gt_test_tmp("r.md"));
    snprintf(js, sizeof js, "%s", gt_test_tmp("r.json"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --baseline %lld --html %s --junit %s "
                        "--markdown %s --json %s",
                        GAUNTLET, db, (long long)cur, (long long)base, html, xml, md, js),
                     0);

    /* JUnit */
    gt_test_assert_junit(xml);
    char *x = gt_test_slurp(xml);
    ck_assert_ptr_nonnull(x);
    check_junit_counts(db, cur, x);
    ck_assert_int_gt(count(x, "<failure "), 0);
    ck_assert_int_gt(count(x, "<error "), 0);
    ck_assert_ptr_null(strstr(x, "<script>"));
    free(x);

    /* HTML */
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    check_tidy(html);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(strstr(h, "GATE FAIL"));
    ck_assert_ptr_null(strstr(h, "<script>alert"));
    ck_assert_ptr_nonnull(strstr(h, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    ck_assert_ptr_null(strstr(h, "src=\"http"));
    ck_assert_ptr_null(strstr(h, "href=\"http"));
    ck_assert_ptr_nonnull(strstr(h, "<svg class=\"chart\""));
    ck_assert_ptr_nonnull(strstr(h, "accuracy.kld_mean_vs_ref"));
    ck_assert_ptr_nonnull(strstr(h, "Q4 on OpenCL: known rounding &lt;issue #12&gt;"));
    sqlite3 *sq;
    ck_assert_int_eq(sqlite3_open_v2(db, &sq, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(sq, "SELECT id, cell_id, status FROM cells WHERE run_id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, cur);
    int n_cells = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        long long id = sqlite3_column_int64(st, 0);
        const char *status = (const char *)sqlite3_column_text(st, 2);
        char *d = details_of(h, id);
        ck_assert_msg(d != NULL, "cell %s has no details", sqlite3_column_text(st, 1));
        char want[128];
        snprintf(want, sizeof want, "data-st=\"%s\"", status);
        ck_assert_msg(strstr(d, want), "cell %lld: no %s", id, want);
        /* The badge: colour class and the status as text. */
        snprintf(want, sizeof want, "<span class=\"st st-%s\">", status);
        ck_assert_msg(strstr(d, want), "cell %lld: no badge %s", id, status);
        snprintf(want, sizeof want, " %s</span> <span class=\"mono\">", status);
        ck_assert_msg(strstr(d, want), "cell %lld: no status text %s", id, status);
        /* The grid links to it with its status. */
        snprintf(want, sizeof want, "href=\"#c%lld\">", id);
        ck_assert_msg(strstr(h, want), "cell %lld not linked", id);
        free(d);
        n_cells++;
    }
    sqlite3_finalize(st);
    ck_assert_int_eq(n_cells, 48);
    /* Every failing metric with its tolerance, in its cell's details. */
    ck_assert_int_eq(sqlite3_prepare_v2(sq,
                                        "SELECT c.id, m.suite || '.' || m.name, m.comparator,"
                                        " m.tolerance FROM metrics m JOIN cells c ON c.id = m.cell"
                                        " WHERE c.run_id = ? AND m.verdict = 'fail'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, cur);
    int n_fail = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char *d = details_of(h, sqlite3_column_int64(st, 0));
        ck_assert_ptr_nonnull(d);
        char want[256];
        snprintf(want, sizeof want, "<tr class=\"bad\"><td>%s</td>",
                 sqlite3_column_text(st, 1));
        ck_assert_msg(strstr(d, want), "failing metric %s not shown", sqlite3_column_text(st, 1));
        snprintf(want, sizeof want, "<td>%s %g</td>",
                 !strcmp((const char *)sqlite3_column_text(st, 2), "<=") ? "&lt;=" : "&gt;=",
                 sqlite3_column_double(st, 3));
        ck_assert_msg(strstr(d, want), "tolerance %s not shown", want);
        free(d);
        n_fail++;
    }
    sqlite3_finalize(st);
    ck_assert_int_gt(n_fail, 0);
    /* The baseline section lists exactly the changed cells. */
    const char *a = strstr(h, "<section id=\"baseline\">");
    ck_assert_ptr_nonnull(a);
    char *sec = strndup(a, (size_t)(strstr(a, "</section>") - a));
    ck_assert_int_eq(sqlite3_prepare_v2(sq,
                                        "SELECT c.cell_id, c.status != b.status OR c.cell_id IN"
                                        " ('m0/f32/reference/default', 'm1/f32/reference/default')"
                                        " FROM cells c JOIN cells b ON b.cell_id = c.cell_id"
                                        " WHERE c.run_id = ? AND b.run_id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, cur);
    sqlite3_bind_int64(st, 2, base);
    int changed = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char want[256];
        snprintf(want, sizeof want, ">%s</a>", sqlite3_column_text(st, 0));
        bool listed = strstr(sec, want) != NULL;
        ck_assert_msg(listed == (sqlite3_column_int(st, 1) != 0), "cell %s: listed %d",
                      sqlite3_column_text(st, 0), listed);
        changed += listed;
    }
    sqlite3_finalize(st);
    ck_assert_int_eq(changed, 6); /* 2 new failures, 1 fix, 1 pending, 2 decode speed moves */
    ck_assert_ptr_nonnull(strstr(sec, "New failures (2)"));
    ck_assert_ptr_nonnull(strstr(sec, "Performance regressions beyond 10.0% (1)"));
    ck_assert_ptr_nonnull(strstr(sec, "Performance improvements beyond 10.0% (1)"));
    free(sec);
    sqlite3_close(sq);
    free(h);

    /* Markdown */
    char *m = gt_test_slurp(md);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(strstr(m, "FAIL"));
    ck_assert_ptr_nonnull(strstr(m, "m0/f32/cpu/openblas"));
    ck_assert_ptr_nonnull(strstr(m, "2 new failures"));
    ck_assert_ptr_null(strstr(m, "<script>"));
    free(m);

    /* JSON */
    char *j = gt_test_slurp(js);
    cJSON *root = cJSON_Parse(j);
    ck_assert_ptr_nonnull(root);
    const cJSON *cells = cJSON_GetObjectItem(root, "cells");
    ck_assert_int_eq(cJSON_GetArraySize(cells), 48);
    int nk = 0, nm = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cells)
    {
        nk += cJSON_GetArraySize(cJSON_GetObjectItem(c, "checks"));
        nm += cJSON_GetArraySize(cJSON_GetObjectItem(c, "metrics"));
    }
    char q[256];
    snprintf(q, sizeof q, "SELECT count(*) FROM results r JOIN cells c ON c.id = r.cell WHERE"
                          " c.run_id = %lld", (long long)cur);
    ck_assert_int_eq(nk, sql_int(db, q));
    snprintf(q, sizeof q, "SELECT count(*) FROM metrics m JOIN cells c ON c.id = m.cell WHERE"
                          " c.run_id = %lld", (long long)cur);
    ck_assert_int_eq(nm, sql_int(db, q));
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "run"),
                                                             "gate"),
                                         "verdict")
                         ->valuestring,
                     "fail");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "baseline"),
                                                            "changes")),
                     4);
    cJSON_Delete(root);
    free(j);
}
END_TEST

START_TEST(baseline_from_other_file_and_default_run)
{
    int64_t base, cur;
    const char *db = make_db("two.sqlite", 24, &base, &cur);
    char other[512];
    snprintf(other, sizeof other, "%s", gt_test_tmp("other.sqlite"));
    ck_assert_int_eq(gt_test_sh("cp %s %s", db, other), 0);
    const char *md = gt_test_tmp("d.md");
    /* Default run = newest (the current one); the other file's newest run of
     * the same matrix and tier is the current one too: nothing changed. */
    ck_assert_int_eq(gt_test_sh("%s report --db %s --baseline %s --markdown %s", GAUNTLET, db, other, md),
                     0);
    char *m = gt_test_slurp(md);
    ck_assert_ptr_nonnull(strstr(m, "0 new failures, 0 fixed"));
    free(m);
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run synthetic/base --markdown -  >/dev/null", GAUNTLET,
                        db),
                     0);
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(gt_test_sh("%s report --db /nonexistent.sqlite --html /dev/null 2>/dev/null", GAUNTLET),
                     2);
    int64_t base, cur;
    const char *db = make_db("u.sqlite", 12, &base, &cur);
    ck_assert_int_eq(gt_test_sh("%s report --db %s 2>/dev/null", GAUNTLET, db), 2);
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run 999 --json /dev/null 2>/dev/null", GAUNTLET, db), 2);
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run nosuchkey --json /dev/null 2>/dev/null", GAUNTLET,
                        db),
                     2);
    ck_assert_int_eq(gt_test_sh("%s report --help >/dev/null", GAUNTLET), 0);
}
END_TEST

/* A run with no cells (a shard that got none, a matrix that excludes
 * everything) still gives valid, clean reports. */
START_TEST(empty_run)
{
    int64_t base, cur;
    const char *db = make_db("empty.sqlite", 0, &base, &cur);
    char html[512], xml[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("e.html"));
    snprintf(xml, sizeof xml, "%s", gt_test_tmp("e.xml"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --baseline 1 --html %s --junit %s --json /dev/null "
                        "--markdown /dev/null",
                        GAUNTLET, db, html, xml),
                     0);
    gt_test_assert_junit(xml);
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    check_tidy(html);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_nonnull(strstr(h, "This run recorded no cells."));
    free(h);
}
END_TEST

/* A real run of the quickstart matrix (on the stand-in model without
 * ../shared): the gate may pass (0) or fail (1), and the reports must say
 * which; a crash or a usage/config error (2) is a failure of this test. */
START_TEST(quickstart_run)
{
    const char *db = gt_test_tmp("quick.sqlite");
    unlink(db);
    const char *matrix = gt_test_quickstart();
    int rc = gt_test_sh("cd %s && %s qualify '%s' --db %s >/dev/null 2>&1", GT_SOURCE_DIR,
                        GAUNTLET, matrix, db);
    struct stat sb;
    ck_assert_msg(rc == 0 || rc == 1, "qualify %s exited %d (0 or 1 expected)", matrix, rc);
    ck_assert_msg(stat(db, &sb) == 0, "qualify wrote no database %s", db);
    char q[128];
    snprintf(q, sizeof q, "SELECT max(id) FROM runs");
    int64_t run = sql_int(db, q);
    char html[512], xml[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("quick.html"));
    snprintf(xml, sizeof xml, "%s", gt_test_tmp("quick.xml"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --html %s --junit %s --json /dev/null --markdown "
                        "/dev/null",
                        GAUNTLET, db, html, xml),
                     0);
    gt_test_assert_junit(xml);
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    check_tidy(html);
    char *x = gt_test_slurp(xml);
    char *h = gt_test_slurp(html);
    check_junit_counts(db, run, x);
    ck_assert_ptr_nonnull(strstr(h, rc == 0 ? "GATE PASS" : "GATE FAIL"));
    ck_assert_ptr_nonnull(strstr(h, "synth-tiny"));
    free(x);
    free(h);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reports");
    TCase *t = tcase_create("reports");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, synthetic_all_formats);
    tcase_add_test(t, baseline_from_other_file_and_default_run);
    tcase_add_test(t, usage_errors);
    tcase_add_test(t, empty_run);
    tcase_add_test(t, quickstart_run);
    suite_add_tcase(s, t);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--make-db")) {
        gt_db *db;
        gt_err err = {{0}};
        unlink(argv[2]);
        if (gt_db_open(argv[2], false, &db, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        int n = atoi(argv[3]);
        int ok = fx_make_run(db, n, 0, "synthetic/base") > 0 &&
                 fx_make_run(db, n, 1, "synthetic/current") > 0;
        gt_db_close(db);
        return ok ? 0 : 1;
    }
    gt_test_require_gauntlet();
    gt_test_llama(); /* written once here, before the cases fork */
    return gt_test_run(suite());
}
