/* test_report_structured.c: the report's Structured output part, on a
 * synthetic run (report_fixture.c) where five cells carry what the
 * structured suite records (fx_add_structured):
 *   m0/f32/reference/default  pass: 5/5 valid, 5/5 same bytes, refused 3/3;
 *   m0/f32/cpu/openblas       fail: 3/5 valid (array incomplete, tool_call
 *                             invalid), 3/5 same bytes, refused 2/3;
 *   m0/f32/opencl/pocl        pass: 3/5 same bytes against a loosened bound
 *                             (>= 0.4, as ci.json's act-q8 cells);
 *   m0/q8_0/cpu/openblas      xfail (a server's known deviations): 4/5 valid,
 *                             3/5 same, refused 2/3, a stream check;
 *   m0/q4_0/cpu/blis          xpass, with the same failing checks (only
 *                             expected ones failed, and one expected passed);
 *   m0/q8_0/reference/default only the skip of a cell the tier leaves out.
 *
 * Test case "html" (always runs):
 *   - the query layer (gt_report_structured on the loaded run) counts,
 *     names the failing cases and cuts the first divergence where it ends,
 *     though its bytes hold a quote and "; ";
 *   - `gauntlet report --html`: well-formed (xmllint); a row per cell that
 *     ran the suite (5; the skipped and the untouched cells have none, no
 *     "0/0"), each column's text and verdict; the known deviation reads
 *     xfail in every failing column and nowhere pass; markup in a
 *     divergence is escaped; a run without the suite has no section;
 *   - `--markdown`: a line per such cell with the same marks.
 * Also in case "html", where the pyoracle has jsonschema (else it skips
 * saying so): `gauntlet qualify` runs the suite itself on synth-tiny,
 * reference and a cpu whose logits GT_FAULT noises; the part's counts,
 * read from the messages, equal the suite's metrics, and the cpu's first
 * divergence is cut where it ends (about 1 s).
 * Test case "render" (CTest: report_structured_screenshot; skips, saying
 * why, without /usr/bin/chromium): ci/render-report.sh draws a PNG of the
 * page, and the DOM chromium dumps after the script ran, with the failing
 * cell named in the address, holds its row copied into its details.
 * GT_KEEP_STRUCTURED_PNG=PATH keeps the PNG there and the page at
 * PATH.html (for a reviewer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"
#include "report_fixture.c"
#include "testutil.h"

#define GAUNTLET GT_BINARY_DIR "/gauntlet"
#define PASS_CELL "m0/f32/reference/default"
#define FAIL_CELL "m0/f32/cpu/openblas"
#define LOOSE_CELL "m0/f32/opencl/pocl"
#define KNOWN_CELL "m0/q8_0/cpu/openblas"
#define SKIP_CELL "m0/q8_0/reference/default"
#define XPASS_CELL "m0/q4_0/cpu/blis"

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

typedef struct made {
    const char *db;
    int64_t run, plain;
    int64_t fail_id; /* cells.id of FAIL_CELL */
} made;

static made make_db(int n)
{
    made m = {gt_test_tmp("structured.sqlite"), 0, 0, 0};
    unlink(m.db);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(m.db, false, &db, &err) == 0, "%s", err.msg);
    m.plain = fx_make_run(db, n, 0, "synthetic/nightly/plain");
    m.run = fx_make_run(db, n, 1, "synthetic/nightly/structured");
    ck_assert_int_gt(m.plain, 0);
    ck_assert_int_gt(m.run, 0);
    /* the fixture's statuses (variant 1) fit the kinds: pass, fail, pass, xfail */
    ck_assert_str_eq(fx_status(0, 1), "pass");
    ck_assert_str_eq(fx_status(1, 1), "fail");
    ck_assert_str_eq(fx_status(3, 1), "pass");
    ck_assert_str_eq(fx_status(5, 1), "xfail");
    ck_assert_str_eq(fx_status(10, 1), "xpass");
    ck_assert_int_eq(fx_add_structured(db, m.run, PASS_CELL, FX_SC_PASS), 0);
    ck_assert_int_eq(fx_add_structured(db, m.run, FAIL_CELL, FX_SC_FAIL), 0);
    ck_assert_int_eq(fx_add_structured(db, m.run, LOOSE_CELL, FX_SC_LOOSE), 0);
    ck_assert_int_eq(fx_add_structured(db, m.run, KNOWN_CELL, FX_SC_KNOWN), 0);
    ck_assert_int_eq(fx_add_structured(db, m.run, XPASS_CELL, FX_SC_KNOWN), 0);
    ck_assert_int_eq(fx_add_structured(db, m.run, SKIP_CELL, FX_SC_SKIP), 0);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(gt_db_sqlite(db),
                                        "SELECT id FROM cells WHERE run_id = ? AND cell_id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, m.run);
    sqlite3_bind_text(st, 2, FAIL_CELL, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    m.fail_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    gt_db_close(db);
    return m;
}

/* The markup of the row of cell id (cells.id), malloc'ed. */
static char *row_of(const char *h, int64_t id)
{
    char want[64];
    snprintf(want, sizeof want, "<tr class=\"sc\" id=\"sc-c%lld\">", (long long)id);
    const char *p = strstr(h, want);
    ck_assert_msg(p, "no structured row for cell %lld", (long long)id);
    const char *e = strstr(p, "</tr>");
    ck_assert_ptr_nonnull(e);
    return strndup(p, (size_t)(e - p));
}

static int64_t id_of(const gt_rep_run *r, const char *cell_id)
{
    const gt_rep_cell *c = gt_report_find(r, cell_id);
    ck_assert_msg(c, "no cell %s", cell_id);
    return c->id;
}

START_TEST(structured_part_in_html)
{
    made m = make_db(24);

    /* The query layer, on the run as the writers see it. */
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(m.db, false, &db, &err) == 0, "%s", err.msg);
    gt_rep_run *r = NULL;
    ck_assert_msg(gt_report_load(db, m.run, false, NULL, 0, &r, &err) == 0, "%s", err.msg);
    gt_rep_structured s;
    ck_assert_int_eq(gt_report_structured(gt_report_find(r, PASS_CELL), &s), 0);
    ck_assert_int_eq(s.n_cases, 5);
    ck_assert_int_eq(s.n_valid, 5);
    ck_assert_int_eq(s.n_agree, 5);
    ck_assert_int_eq(s.n_answers, 5);
    ck_assert_ptr_null(s.divergence);
    ck_assert_int_eq(s.n_refused, 3);
    ck_assert_int_eq(s.n_malformed, 3);
    ck_assert_int_eq(s.n_failed, 0);
    ck_assert(!s.known);
    ck_assert_ptr_nonnull(s.valid_rate);
    ck_assert_ptr_nonnull(s.ref_agreement);
    ck_assert_ptr_nonnull(s.refused);

    ck_assert_int_eq(gt_report_structured(gt_report_find(r, FAIL_CELL), &s), 0);
    ck_assert_int_eq(s.n_valid, 3);
    ck_assert_str_eq(s.invalid, "array, tool_call");
    ck_assert_str_eq(s.first_invalid->name, "valid_array");
    ck_assert_int_eq(s.n_agree, 3);
    ck_assert_ptr_nonnull(s.divergence);
    /* The first divergence ends after the reference's closing quote,
     * not at the "; " inside the cell's bytes. */
    ck_assert_int_eq((int)s.divergence_len,
                     (int)strlen("tool_call parts at byte 14: cell \"\"; <b>\"}\" | reference "
                                 "\"\"city\": \"Paris\"}\""));
    ck_assert(!strncmp(s.divergence, "tool_call parts at byte 14: ", 28));
    ck_assert_int_eq(s.n_refused, 2);
    ck_assert_str_eq(s.first_unrefused->name, "refuse_unknown_type");
    ck_assert_int_eq(s.n_failed, 4);
    ck_assert(!s.known);
    ck_assert_str_eq(gt_report_structured_verdict(&s, true), "fail");

    ck_assert_int_eq(gt_report_structured(gt_report_find(r, KNOWN_CELL), &s), 0);
    ck_assert(s.known);
    ck_assert_ptr_nonnull(s.stream);
    ck_assert_str_eq(gt_report_structured_verdict(&s, true), "xfail");
    ck_assert_str_eq(gt_report_structured_verdict(&s, false), "pass");
    ck_assert_int_eq(gt_report_structured(gt_report_find(r, XPASS_CELL), &s), 0);
    ck_assert(s.known);

    /* The skip of a cell the tier leaves out, and a cell without any
     * structured rows: not run, nothing to show. */
    ck_assert_int_eq(gt_report_structured(gt_report_find(r, SKIP_CELL), &s), -1);
    ck_assert(!gt_report_has_structured(gt_report_find(r, SKIP_CELL)));
    ck_assert_int_eq(gt_report_structured(gt_report_find(r, "m0/f32/cpu/blis"), &s), -1);
    int64_t pass_id = id_of(r, PASS_CELL), loose_id = id_of(r, LOOSE_CELL),
            known_id = id_of(r, KNOWN_CELL), skip_id = id_of(r, SKIP_CELL);
    gt_report_free(r);
    gt_db_close(db);

    /* The HTML. */
    char html[512], plain[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("structured.html"));
    snprintf(plain, sizeof plain, "%s", gt_test_tmp("plain.html"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --html %s --markdown %s.md",
                                GAUNTLET, m.db, (long long)m.run, html, html),
                     0);
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --html %s", GAUNTLET, m.db,
                                (long long)m.plain, plain),
                     0);
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(strstr(h, "<section id=\"structured\"><h2>Structured output</h2>"));
    ck_assert_ptr_nonnull(strstr(h, "<a href=\"#structured\">Structured output</a>"));
    ck_assert_int_eq(count(h, "<tr class=\"sc\" id=\"sc-c"), 5);
    char skip_row[64];
    snprintf(skip_row, sizeof skip_row, "id=\"sc-c%lld\"", (long long)skip_id);
    ck_assert_ptr_null(strstr(h, skip_row));
    ck_assert_ptr_null(strstr(h, "0/0"));
    /* a server's cell is in the run, so the stream column is there */
    ck_assert_ptr_nonnull(strstr(h, "<th>stream</th>"));

    char *row = row_of(h, pass_id);
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-pass sc\">&#10003; 5/5 valid</td>"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-pass sc\">&#10003; 5/5 same bytes</td>"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-pass sc\">&#10003; refused 3/3</td>"));
    ck_assert_int_eq(count(row, "vd-fail") + count(row, "vd-xfail"), 0);
    free(row);

    row = row_of(h, m.fail_id);
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-fail sc\">&#10007; 3/5 valid"
                                      "<div class=\"sub\">not valid: array, tool_call</div>"
                                      "<div class=\"sub\">array: incomplete document "
                                      "(max_tokens reached): [1, 2, </div></td>"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-fail sc\">&#10007; 3/5 same bytes"
                                      "<div class=\"sub mono\">tool_call parts at byte 14: cell "
                                      "&quot;&quot;; &lt;b&gt;&quot;}&quot; | reference "
                                      "&quot;&quot;city&quot;: &quot;Paris&quot;}&quot;</div>"
                                      "<div class=\"sub\">and 1 more case</div></td>"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-fail sc\">&#10007; refused 2/3"
                                      "<div class=\"sub\">refuse_unknown_type: compiled a "
                                      "malformed schema (unknown_type expected): "));
    ck_assert_ptr_null(strstr(row, "<b>"));
    ck_assert_ptr_null(strstr(row, "known deviation"));
    free(row);

    /* Agreement under a loosened bound: a pass that shows its bound and
     * where the answers parted. */
    row = row_of(h, loose_id);
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-pass sc\">&#10003; 3/5 same bytes "
                                      "(bound &gt;= 0.4)<div class=\"sub mono\">tool_call parts"));
    free(row);

    /* The known deviation: xfail in each failing column, never pass. */
    row = row_of(h, known_id);
    ck_assert_ptr_nonnull(strstr(row, "<div class=\"sub\">known deviation: Q4 on OpenCL: known "
                                      "rounding &lt;issue #12&gt;</div>"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-xfail sc\">&#8856; 4/5 valid"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-xfail sc\">&#8856; 3/5 same bytes"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-xfail sc\">&#8856; refused 2/3"
                                      "<div class=\"sub\">refuse_pattern: HTTP 200"));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"vd vd-pass sc\">&#10003; same</td>"));
    ck_assert_int_eq(count(row, "vd-pass"), 1); /* the stream, and nothing else */
    ck_assert_int_eq(count(row, "vd-fail"), 0);
    free(row);
    free(h);

    /* Markdown: a line per cell that ran the suite. */
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s.md", html);
    char *md = gt_test_slurp(mpath);
    ck_assert_ptr_nonnull(md);
    ck_assert_ptr_nonnull(strstr(md, "### Structured output"));
    ck_assert_ptr_nonnull(strstr(md, "| `m0/f32/reference/default` | ✓ 5 / 5 | ✓ 5 / 5 | "
                                     "✓ 3 / 3 |  |\n"));
    ck_assert_ptr_nonnull(strstr(md, "| `m0/f32/cpu/openblas` | ✗ 3 / 5 | ✗ 3 / 5 | ✗ 2 / 3 | "
                                     "array, tool\\_call |\n"));
    ck_assert_ptr_nonnull(strstr(md, "| `m0/f32/opencl/pocl` | ✓ 5 / 5 | ✓ 3 / 5 | ✓ 3 / 3 |"));
    ck_assert_ptr_nonnull(strstr(md, "| `m0/q8\\_0/cpu/openblas` | ⊘ 4 / 5 (known) | ⊘ 3 / 5 "
                                     "(known) | ⊘ 2 / 3 (known) | tool\\_call |\n"));
    ck_assert_ptr_nonnull(strstr(md, "| `m0/q4\\_0/cpu/blis` | ⊘ 4 / 5 (known) | "));
    ck_assert_ptr_null(strstr(md, "| `m0/q8\\_0/reference/default` | "));
    free(md);

    /* No structured data: no section, no link. */
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", plain), 0);
    char *p = gt_test_slurp(plain);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(strstr(p, "id=\"structured\""));
    ck_assert_ptr_null(strstr(p, "href=\"#structured\""));
    ck_assert_ptr_null(strstr(p, "<tr class=\"sc\""));
    free(p);
}
END_TEST

/* The structured suite itself, qualified on a synthetic model (reference
 * and cpu, the cpu's logits noised by GT_FAULT so its answers part from
 * the reference's): the part reads the suite's real messages, and its
 * counts are the suite's metrics (numbers recorded apart from the
 * messages the part parses). */
START_TEST(structured_part_from_the_suite)
{
    char matrix[512], up[512] = "", html[512];
    snprintf(matrix, sizeof matrix, "%s", gt_test_tmp("sc.json"));
    snprintf(html, sizeof html, "%s", gt_test_tmp("sc.html"));
    const char *db_path = gt_test_tmp("sc.sqlite");
    /* root is relative to the matrix's folder: up to / once per level */
    for (const char *p = strchr(matrix + 1, '/'); p; p = strchr(p + 1, '/'))
        strncat(up, "../", sizeof up - strlen(up) - 1);
    strncat(up, GT_SOURCE_DIR + 1, sizeof up - strlen(up) - 1);
    FILE *f = fopen(matrix, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"name\": \"sc\", \"root\": \"%s\", \"defaults\": {\"timeout_s\": 300, "
               "\"threads\": 2, \"seed\": 1}, \"models\": [{\"id\": \"synth-tiny\", \"synth\": "
               "{\"preset\": \"tiny\", \"seed\": 1}}], \"quants\": [\"f32\"], \"backends\": "
               "[\"reference\", \"cpu\"], \"tiers\": {\"t\": {\"suites\": [\"structured\"], "
               "\"settings\": {\"structured\": {\"max_tokens\": 160}}}}, "
               "\"default_tier\": \"t\"}\n",
            up);
    fclose(f);
    /* exit 1: the noised cpu cell fails its agreement, as it must */
    ck_assert_int_eq(gt_test_sh("GT_PYORACLE='%s' GT_FAULT=logit-noise=2 GT_FAULT_BACKEND=cpu "
                                "%s qualify %s --db %s --html %s >/dev/null 2>&1",
                                gt_test_pyoracle(), GAUNTLET, matrix, db_path, html),
                     1);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(db_path, false, &db, &err) == 0, "%s", err.msg);
    gt_rep_run *r = NULL;
    ck_assert_msg(gt_report_load(db, 0, false, NULL, 0, &r, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(r->n, 2);
    for (int i = 0; i < r->n; i++) {
        const gt_rep_cell *c = &r->cells[i];
        gt_rep_structured s;
        ck_assert_msg(gt_report_structured(c, &s) == 0, "%s: no structured part", c->cell_id);
        ck_assert_int_eq(s.n_cases, 5);
        ck_assert_ptr_nonnull(s.valid_rate);
        ck_assert_ptr_nonnull(s.ref_agreement);
        ck_assert_ptr_nonnull(s.refused);
        ck_assert_double_eq_tol(s.valid_rate->value, (double)s.n_valid / s.n_cases, 1e-9);
        ck_assert_int_eq(s.n_answers, 5);
        ck_assert_double_eq_tol(s.ref_agreement->value, (double)s.n_agree / s.n_answers, 1e-9);
        ck_assert_int_eq(s.n_malformed, 3);
        ck_assert_double_eq_tol(s.refused->value, (double)s.n_refused / s.n_malformed, 1e-9);
        if (!strcmp(c->backend, "reference")) {
            ck_assert_int_eq(s.n_agree, 5);
            ck_assert_ptr_null(s.divergence);
        } else {
            ck_assert_int_lt(s.n_agree, 5);
            ck_assert_ptr_nonnull(s.divergence);
            /* the first divergence is one case's, cut at its closing quote */
            char *d = strndup(s.divergence, s.divergence_len);
            int n = 0;
            unsigned long at;
            char name[64];
            ck_assert_msg(sscanf(d, "%63[a-z_] parts at byte %lu: cell \"%n", name, &at, &n) == 2 &&
                              n > 0,
                          "divergence: %s", d);
            ck_assert_ptr_nonnull(strstr(d, "\" | reference \""));
            ck_assert_int_eq(d[strlen(d) - 1], '"');
            ck_assert_int_eq(s.n_answers - s.n_agree - 1 > 0 ? 1 : 0,
                             strstr(s.divergence + s.divergence_len, " parts at byte ") != NULL);
            free(d);
        }
    }
    gt_report_free(r);
    gt_db_close(db);
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(count(h, "<tr class=\"sc\" id=\"sc-c"), 2);
    ck_assert_int_eq(count(h, "same bytes<div class=\"sub mono\">"), 1);
    free(h);
}
END_TEST

START_TEST(structured_part_rendered)
{
    made m = make_db(12);
    char html[512], png[512], dom[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("structured.html"));
    snprintf(png, sizeof png, "%s", gt_test_tmp("structured.png"));
    snprintf(dom, sizeof dom, "%s", gt_test_tmp("structured.dom"));
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --html %s", GAUNTLET, m.db,
                                (long long)m.run, html),
                     0);
    ck_assert_int_eq(gt_test_sh("%s/ci/render-report.sh %s %s 1400x3200", GT_SOURCE_DIR, html,
                                png),
                     0);
    struct stat sb;
    /* A blank page compresses to a few kB; a drawn one is hundreds. */
    ck_assert_msg(stat(png, &sb) == 0 && sb.st_size > 50000, "no screenshot (or a blank one) at %s",
                  png);
    const char *keep = getenv("GT_KEEP_STRUCTURED_PNG");
    if (keep && keep[0])
        ck_assert_int_eq(gt_test_sh("cp %s %s && cp %s %s.html", png, keep, html, keep), 0);

    ck_assert_int_eq(gt_test_sh("p=$(mktemp -d) && timeout 120 /usr/bin/chromium --headless "
                                "--no-sandbox --disable-gpu --user-data-dir=$p "
                                "--virtual-time-budget=2000 --dump-dom 'file://%s#c%lld' >%s "
                                "2>/dev/null; rm -rf $p",
                                html, (long long)m.fail_id, dom),
                     0);
    char *d = gt_test_slurp(dom);
    ck_assert_ptr_nonnull(d);
    char want[96];
    snprintf(want, sizeof want, "<details class=\"cell\" id=\"c%lld\"", (long long)m.fail_id);
    const char *det = strstr(d, want);
    ck_assert_msg(det, "the failing cell's details were not built");
    char *one = strndup(det, (size_t)(strstr(det, "</details>") - det));
    ck_assert_ptr_nonnull(strstr(one, " open="));
    ck_assert_ptr_nonnull(strstr(one, "<h3>Structured output</h3><table class=\"sc\"><thead>"));
    ck_assert_int_eq(count(one, "<tr class=\"sc\">"), 1); /* the copy, without its id */
    ck_assert_ptr_nonnull(strstr(one, "3/5 valid"));
    ck_assert_ptr_nonnull(strstr(one, "refused 2/3"));
    free(one);
    free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("report_structured");
    TCase *t = tcase_create("html");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, structured_part_in_html);
    gt_test_add_if(t, structured_part_from_the_suite,
                   gt_test_sh("PYTHONPATH='%s' python3 -c 'import jsonschema' >/dev/null 2>&1",
                              gt_test_pyoracle()) == 0,
                   "no jsonschema in the pyoracle (GT_PYORACLE; ci/setup.sh installs it): the "
                   "structured suite cannot validate, so it is not qualified here");
    suite_add_tcase(s, t);
    TCase *r = tcase_create("render");
    tcase_set_timeout(r, 300);
    gt_test_add_if(r, structured_part_rendered, access("/usr/bin/chromium", X_OK) == 0,
                   "no /usr/bin/chromium (apt-get install chromium): the screenshot is not taken");
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    gt_test_require_gauntlet();
    return gt_test_run(suite());
}
