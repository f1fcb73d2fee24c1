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

#include "../harness/store/db.c"
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

/* The HTML's embedded data block (reports/html_data.c), parsed. */
static cJSON *data_block(const char *html)
{
    const char *key = "<script type=\"application/json\" id=\"gt-data\">";
    const char *a = strstr(html, key);
    if (!a)
        return NULL;
    a += strlen(key);
    const char *b = strstr(a, "</script>");
    if (!b)
        return NULL;
    char *txt = strndup(a, (size_t)(b - a));
    /* Nothing in the block may be markup: it sits inside the document. */
    ck_assert_ptr_null(strpbrk(txt, "<&"));
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    return j;
}

static const char *ds(const cJSON *data, const cJSON *cell, int field)
{
    int ix = cJSON_GetArrayItem(cell, field)->valueint;
    return cJSON_GetArrayItem(cJSON_GetObjectItem(data, "s"), ix)->valuestring;
}

/* The data block's cell with cells.id `id`, or NULL. */
static const cJSON *data_cell(const cJSON *data, long long id)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(data, "c"))
    if ((long long)cJSON_GetArrayItem(c, 0)->valuedouble == id)
        return c;
    return NULL;
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

/* Every file the run's cells name is a provenance row with its sha256,
 * source, license and derivation; each cell's data points at its file. */
static void check_provenance(sqlite3 *sq, int64_t run, const char *h, const cJSON *data)
{
    const char *a = strstr(h, "<section id=\"provenance\">");
    ck_assert_ptr_nonnull(a);
    char *sec = strndup(a, (size_t)(strstr(a, "</section>") - a));
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(sq,
                                        "SELECT sha256, kind, quant, source_sha256 FROM artifacts"
                                        " WHERE sha256 IN (SELECT artifact_sha256 FROM cells"
                                        " WHERE run_id = ?1 UNION SELECT model_sha256 FROM cells"
                                        " WHERE run_id = ?1)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, run);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *sha = (const char *)sqlite3_column_text(st, 0);
        const char *row = strstr(sec, sha);
        ck_assert_msg(row, "artifact %s not in the provenance section", sha);
        char *tr = strndup(row, (size_t)(strstr(row, "</tr>") - row));
        if (!strcmp((const char *)sqlite3_column_text(st, 1), "quant")) {
            char want[200];
            snprintf(want, sizeof want, "gauntlet quantize %s from %s", sqlite3_column_text(st, 2),
                     sqlite3_column_text(st, 3));
            ck_assert_msg(strstr(tr, want), "no derivation '%s' in %s", want, tr);
        } else {
            ck_assert_ptr_nonnull(strstr(tr, "as distributed"));
        }
        char src[65];
        fx_sha(src, 0, 0);
        if (strstr(tr, "/m0.gguf") || strstr(tr, src)) {
            /* m0 and everything derived from it: its URL's file, MIT. */
            ck_assert_ptr_nonnull(strstr(tr, "<td>MIT</td>"));
        }
        free(tr);
        n++;
    }
    sqlite3_finalize(st);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(count(sec, "<tr id=\"art-"), n);
    ck_assert_ptr_nonnull(strstr(sec, "https://example.org/models/m0.gguf"));
    ck_assert_ptr_nonnull(strstr(sec, "PyPI llm-m1==1.0, member m1.gguf"));
    ck_assert_ptr_nonnull(strstr(sec, "Apache-2.0"));
    free(sec);
    /* Each cell's artifact is the file it ran. */
    const cJSON *c, *arts = cJSON_GetObjectItem(data, "art");
    ck_assert_int_eq(cJSON_GetArraySize(arts), n);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(data, "c"))
    {
        int ai = cJSON_GetArrayItem(c, 19)->valueint;
        ck_assert_int_ge(ai, 0);
        char q[200];
        snprintf(q, sizeof q, "SELECT artifact_sha256 FROM cells WHERE id = %lld",
                 (long long)cJSON_GetArrayItem(c, 0)->valuedouble);
        ck_assert_int_eq(sqlite3_prepare_v2(sq, q, -1, &st, NULL), SQLITE_OK);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        ck_assert_str_eq(ds(data, cJSON_GetArrayItem(arts, ai), 1),
                         (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
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
    cJSON *data = data_block(h);
    ck_assert_ptr_nonnull(data);
    /* The crash log survives escaping intact as data (invalid bytes as U+FFFD). */
    bool evil = false;
    const cJSON *sv;
    cJSON_ArrayForEach(sv, cJSON_GetObjectItem(data, "s"))
    evil |= strstr(sv->valuestring, "segfault <script>alert(1)</script> & \"quotes\"") != NULL;
    ck_assert(evil);
    /* Lazy: no per-cell markup in the file; the script draws it. */
    ck_assert_ptr_null(strstr(h, "<details"));
    ck_assert_ptr_null(strstr(h, "<table class=\"grid\""));
    ck_assert_ptr_null(strstr(h, "src=\"http"));
    ck_assert_ptr_null(strstr(h, "href=\"http"));
    ck_assert_ptr_nonnull(strstr(h, "<div id=\"perf-charts\">"));
    ck_assert_ptr_nonnull(strstr(h, "data-cols=\"[&quot;accuracy.kld_mean_vs_ref&quot;"));
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
        const cJSON *d = data_cell(data, id);
        ck_assert_msg(d != NULL, "cell %s is not in the data block", sqlite3_column_text(st, 1));
        ck_assert_str_eq(ds(data, d, 1), (const char *)sqlite3_column_text(st, 1));
        ck_assert_str_eq(ds(data, d, 2), status);
        /* Placed in the grid, and linked from the one static list every
         * failing cell is in when it is bad (the baseline's or the limits'). */
        int pos = -1, k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(data, "grid"), "at"))
        {
            if (e->valueint >= 0 &&
                (long long)cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(data, "c"),
                                                                 e->valueint),
                                              0)
                        ->valuedouble == id)
                pos = k;
            k++;
        }
        ck_assert_msg(pos >= 0, "cell %lld not in the grid", id);
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
        const cJSON *d = data_cell(data, sqlite3_column_int64(st, 0));
        ck_assert_ptr_nonnull(d);
        const cJSON *mt = cJSON_GetArrayItem(d, 21);
        bool found = false;
        for (int k = 0; k + 5 < cJSON_GetArraySize(mt); k += 6) {
            const char *label = cJSON_GetArrayItem(cJSON_GetObjectItem(data, "s"),
                                                   cJSON_GetArrayItem(mt, k)->valueint)
                                    ->valuestring;
            if (strcmp(label, (const char *)sqlite3_column_text(st, 1)) != 0)
                continue;
            ck_assert_str_eq(ds(data, mt, k + 3), (const char *)sqlite3_column_text(st, 2));
            ck_assert_double_eq_tol(cJSON_GetArrayItem(mt, k + 4)->valuedouble,
                                    sqlite3_column_double(st, 3), 1e-12);
            ck_assert_str_eq(ds(data, mt, k + 5), "fail");
            found = true;
        }
        ck_assert_msg(found, "failing metric %s not in its cell's data", sqlite3_column_text(st, 1));
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
    check_provenance(sq, cur, h, data);
    sqlite3_close(sq);
    cJSON_Delete(data);
    free(h);

    /* Markdown */
    char *m = gt_test_slurp(md);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(strstr(m, "FAIL"));
    ck_assert_ptr_nonnull(strstr(m, "m0/f32/cpu/openblas"));
    ck_assert_ptr_nonnull(strstr(m, "2 new failures"));
    /* One Markdown line per artifact: 4 models x 3 files. */
    ck_assert_ptr_nonnull(strstr(m, "### Provenance"));
    ck_assert_int_eq(count(strstr(m, "### Provenance"), "\n- `m"), 12);
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
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "artifacts")), 12);
    const cJSON *c0 = cJSON_GetArrayItem(cells, 2); /* m0/f32/cpu/blis: the source file */
    const cJSON *a0 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "artifacts"),
                                         cJSON_GetObjectItem(c0, "artifact")->valueint);
    ck_assert_str_eq(cJSON_GetObjectItem(a0, "license")->valuestring, "MIT");
    ck_assert_str_eq(cJSON_GetObjectItem(a0, "source")->valuestring,
                     "https://example.org/models/m0.gguf");
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
    char q[512];
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
    /* Provenance: every file the cells name, with its sha256; quants say
     * what they were derived from. */
    snprintf(q, sizeof q, "SELECT count(DISTINCT sha256) FROM artifacts WHERE sha256 IN (SELECT"
                          " artifact_sha256 FROM cells UNION SELECT model_sha256 FROM cells)");
    int64_t n_art = sql_int(db, q);
    const char *prov = strstr(h, "<section id=\"provenance\">");
    ck_assert_ptr_nonnull(prov);
    ck_assert_int_eq(count(prov, "<tr id=\"art-"), n_art);
    snprintf(q, sizeof q, "SELECT count(*) FROM artifacts WHERE kind = 'quant'");
    if (sql_int(db, q) > 0)
        ck_assert_ptr_nonnull(strstr(prov, "gauntlet quantize "));
    free(x);
    free(h);
}
END_TEST

/* Five runs of one matrix and tier; cell 0 fails in run 4 only, and cell
 * FX_HIST_SLOW_CELL decodes at half speed from run 3 on. */
static const char *history_db(void)
{
    const char *path = gt_test_tmp("hist.sqlite");
    unlink(path);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(path, false, &db, &err) == 0, "%s", err.msg);
    for (int k = 1; k <= 5; k++) {
        char key[32];
        snprintf(key, sizeof key, "h/%d", k);
        ck_assert_int_gt(fx_make_run_ex(db, 48, k + 1, key, k == 4 ? 0 : -1), 0);
    }
    gt_db_close(db);
    return path;
}

START_TEST(history_changed_since)
{
    const char *db = history_db();
    char js[512], html[512], md[512];
    snprintf(js, sizeof js, "%s", gt_test_tmp("h.json"));
    snprintf(html, sizeof html, "%s", gt_test_tmp("h.html"));
    snprintf(md, sizeof md, "%s", gt_test_tmp("h.md"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --history 5 --json %s --html %s --markdown %s",
                                GAUNTLET, db, js, html, md),
                     0);
    char *j = gt_test_slurp(js);
    cJSON *root = cJSON_Parse(j);
    ck_assert_ptr_nonnull(root);
    const cJSON *hist = cJSON_GetObjectItem(root, "history");
    const cJSON *runs = cJSON_GetObjectItem(hist, "runs");
    ck_assert_int_eq(cJSON_GetArraySize(runs), 5);
    for (int k = 0; k < 5; k++) {
        char key[32];
        snprintf(key, sizeof key, "h/%d", k + 1);
        ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, k), "run_key")->valuestring,
                         key);
    }
    const cJSON *cells = cJSON_GetObjectItem(root, "cells");
    const cJSON *c0 = cJSON_GetArrayItem(cells, 0);
    const char *want[5] = {"pass", "pass", "pass", "fail", "pass"};
    const cJSON *sts = cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "history"), "statuses");
    for (int k = 0; k < 5; k++)
        ck_assert_str_eq(cJSON_GetArrayItem(sts, k)->valuestring, want[k]);
    /* Changed since: exactly cell 0's two flips (into fail in h/4, back in
     * h/5), cell 0's KLD in h/4, and the slow cell's decode in h/3, once. */
    int flips = 0, slow = 0, other = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(hist, "changed_since"))
    {
        const char *cell = cJSON_GetObjectItem(e, "cell_id")->valuestring;
        const char *what = cJSON_GetObjectItem(e, "what")->valuestring;
        const char *run = cJSON_GetObjectItem(e, "run_key")->valuestring;
        const char *c0id = cJSON_GetObjectItem(c0, "cell_id")->valuestring;
        const char *slowid = cJSON_GetObjectItem(cJSON_GetArrayItem(cells, FX_HIST_SLOW_CELL),
                                                 "cell_id")->valuestring;
        if (!strcmp(cell, c0id) && !strcmp(what, "status")) {
            const char *to = cJSON_GetObjectItem(e, "to")->valuestring;
            ck_assert_str_eq(run, !strcmp(to, "fail") ? "h/4" : "h/5");
            flips++;
        } else if (!strcmp(cell, slowid) && !strcmp(what, "decode t/s")) {
            ck_assert_str_eq(run, "h/3");
            slow++;
        } else if (!strcmp(cell, c0id) && !strcmp(what, "drift KLD")) {
            ck_assert_str_eq(run, "h/4");
        } else {
            other++;
            fprintf(stderr, "unexpected change: %s %s in %s\n", cell, what, run);
        }
    }
    ck_assert_int_eq(flips, 2);
    ck_assert_int_eq(slow, 1);
    ck_assert_int_eq(other, 0);
    cJSON_Delete(root);
    free(j);
    /* The HTML names run h/4 beside the cell, and each cell's data carries
     * its five statuses for the grid's strip. */
    char *h = gt_test_slurp(html);
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    const char *sec = strstr(h, "<section id=\"history\">");
    ck_assert_ptr_nonnull(sec);
    ck_assert_ptr_nonnull(strstr(sec, "<tr><td class=\"mono\">h/4</td><td><a class=\"mono\""));
    cJSON *data = data_block(h);
    ck_assert_ptr_nonnull(data);
    const cJSON *hc = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(data, "c"), 0), 23);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetArrayItem(hc, 0)), 5);
    ck_assert_str_eq(ds(data, cJSON_GetArrayItem(hc, 0), 3), "fail");
    cJSON_Delete(data);
    free(h);
    char *m = gt_test_slurp(md);
    ck_assert_ptr_nonnull(strstr(m, "### Changed since (last 5 runs)"));
    ck_assert_ptr_nonnull(strstr(m, "pass → fail in run `h/4`"));
    free(m);
    /* A window of 3 starts at h/3: the slow cell's drop is its first run,
     * with nothing earlier to move from. */
    ck_assert_int_eq(gt_test_sh("%s report --db %s --history 3 --json %s", GAUNTLET, db, js), 0);
    j = gt_test_slurp(js);
    ck_assert_ptr_null(strstr(j, "\"what\":\t\"decode t/s\""));
    ck_assert_ptr_nonnull(strstr(j, "\"run_key\":\t\"h/3\""));
    free(j);
    ck_assert_int_eq(gt_test_sh("%s report --db %s --history 1 --json /dev/null 2>/dev/null",
                                GAUNTLET, db),
                     2);
}
END_TEST

/* 10,000 cells with a baseline: the file stays within the 8 MB budget
 * because details are data, not markup (issue 22 measured 22 MB before). */
START_TEST(large_run_is_lazy)
{
    int64_t base, cur;
    const char *db = make_db("big.sqlite", 10000, &base, &cur);
    const char *html = gt_test_tmp("big.html");
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --baseline %lld --html %s", GAUNTLET,
                                db, (long long)cur, (long long)base, html),
                     0);
    struct stat sb;
    ck_assert_int_eq(stat(html, &sb), 0);
    ck_assert_int_le(sb.st_size, 8 * 1000 * 1000);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_null(strstr(h, "<details"));
    /* The markup that remains is bounded: no per-cell rows. */
    ck_assert_int_lt(count(h, "<tr"), 3000 + 2500 /* provenance: 3 files x 834 models */);
    cJSON *data = data_block(h);
    ck_assert_ptr_nonnull(data);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(data, "c")), 10000);
    cJSON_Delete(data);
    free(h);
}
END_TEST

/* The 3,000-cell report in a real browser: it paints, a cell named in the
 * address opens with its details built, and the provenance lists the
 * fixture's files. Skipped, with the reason, without Chromium. */
START_TEST(browser_render)
{
    int64_t base, cur;
    const char *db = make_db("b3k.sqlite", 3000, &base, &cur);
    char html[512], png[512], dom[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("b3k.html"));
    snprintf(png, sizeof png, "%s", gt_test_tmp("b3k.png"));
    snprintf(dom, sizeof dom, "%s", gt_test_tmp("b3k.dom"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --baseline %lld --html %s", GAUNTLET,
                                db, (long long)cur, (long long)base, html),
                     0);
    ck_assert_int_eq(gt_test_sh("%s/ci/render-report.sh %s %s >/dev/null", GT_SOURCE_DIR, html, png),
                     0);
    /* Cell 2041 is on no first page (grid: ~480 cells, list: 200). */
    const char *cell = "m170/f32/cpu/openblas";
    ck_assert_int_eq(gt_test_sh("p=$(mktemp -d) && timeout 120 /usr/bin/chromium --headless "
                                "--no-sandbox --disable-gpu --user-data-dir=$p "
                                "--virtual-time-budget=2000 --dump-dom 'file://%s#cell-%s' >%s "
                                "2>/dev/null; rm -rf $p",
                                html, cell, dom),
                     0);
    char *d = gt_test_slurp(dom);
    ck_assert_ptr_nonnull(d);
    const char *focus = strstr(d, "<div id=\"cell-focus\"><details class=\"cell\"");
    ck_assert_msg(focus, "the named cell was not opened");
    char *one = strndup(focus, (size_t)(strstr(focus, "</details>") - focus));
    char want[128];
    snprintf(want, sizeof want, "<span class=\"mono\">%s</span>", cell);
    ck_assert_ptr_nonnull(strstr(one, want));
    ck_assert_ptr_nonnull(strstr(one, " open="));
    ck_assert_ptr_nonnull(strstr(one, "<table class=\"mt\">"));
    ck_assert_ptr_nonnull(strstr(one, "Artifact: "));
    free(one);
    /* The grid drew one page, with its links. */
    ck_assert_ptr_nonnull(strstr(d, "<table class=\"grid\">"));
    const char *prov = strstr(d, "<section id=\"provenance\">");
    ck_assert_ptr_nonnull(prov);
    ck_assert_int_eq(count(prov, "<tr id=\"art-"), 3 * 250);
    free(d);
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
    tcase_add_test(t, history_changed_since);
    tcase_add_test(t, large_run_is_lazy);
    gt_test_add_if(t, browser_render, access("/usr/bin/chromium", X_OK) == 0,
                   "no /usr/bin/chromium (apt-get install chromium)");
    gt_test_add_if(t, quickstart_run, !gt_test_sanitized(),
                   "a full quickstart qualification (24 cells, SmolLM2 among them) takes many minutes " \
                   "instrumented; the plain build runs it, ci/sanitize.sh runs one cell per backend");
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
