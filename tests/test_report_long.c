/* test_report_long.c: the HTML report's Long context part, on a synthetic
 * run (report_fixture.c) where one cell carries what the long suite records
 * (fx_add_long: passkey, drift and kv checks, the drift_kld series, the
 * gated drift metric).
 *
 * Test case "html" (always runs), on `gauntlet report --html`:
 *   - the file is well-formed (xmllint) and loads nothing from a network;
 *   - exactly the long cell has a part (id long-c<cells.id>); its passkey
 *     table has a row per check (9), the cell's answer next to the
 *     reference's, the odd answer escaped and marked as differing;
 *   - the drift SVG's polyline has one point per drawable point
 *     (FX_LONG_DRIFT_DRAWN: the NULL is left out, the zero clamped), inside
 *     the plot, in order of position; a mark per checkpoint; the tolerance
 *     line at long.drift_kld_mean's bound;
 *   - the K/V table has a row per length with bytes, plan, ratio and RSS;
 *   - a run without long data has no Long context section at all.
 * Test case "render" (CTest: report_long_screenshot; skips, saying why,
 * without /usr/bin/chromium): ci/render-report.sh renders a 4-cell page,
 * tall enough to hold the section, into a PNG (it must exist and be more
 * than a blank page's size), and the DOM
 * chromium dumps after the script ran, with the cell named in the address,
 * holds the part copied into the cell's opened details, polyline and all.
 * GT_KEEP_LONG_PNG=PATH copies the PNG there and the page to PATH.html
 * (for a reviewer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../harness/store/db.c"
#include "report_fixture.c"
#include "testutil.h"

#define GAUNTLET GT_BINARY_DIR "/gauntlet"
#define LONG_CELL "m0/f32/cpu/openblas"

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* A run of n cells with the long cell, and a second run without long
 * data; writes the first's HTML to html (the second's to plain_html when
 * not NULL) and returns the long cell's cells.id. */
static int64_t make_report(int n, const char *html, const char *plain_html)
{
    const char *db_path = gt_test_tmp("long.sqlite");
    unlink(db_path);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(db_path, false, &db, &err) == 0, "%s", err.msg);
    int64_t plain = fx_make_run(db, n, 0, "synthetic/nightly/plain");
    int64_t run = fx_make_run(db, n, 0, "synthetic/nightly/long");
    ck_assert_int_gt(plain, 0);
    ck_assert_int_gt(run, 0);
    ck_assert_int_eq(fx_add_long(db, run, LONG_CELL), 0);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(gt_db_sqlite(db),
                                        "SELECT id FROM cells WHERE run_id = ? AND cell_id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, LONG_CELL, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t cell = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    gt_db_close(db);
    ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --html %s", GAUNTLET, db_path,
                                (long long)run, html),
                     0);
    if (plain_html) {
        ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --html %s", GAUNTLET, db_path,
                                    (long long)plain, plain_html),
                         0);
        ck_assert_int_eq(gt_test_sh("%s report --db %s --run %lld --json %s.json --markdown %s.md",
                                    GAUNTLET, db_path, (long long)run, html, html),
                         0);
    }
    return cell;
}

/* The points attribute of the drift polyline in s: checks count, bounds
 * and order. */
static void check_polyline(const char *s, int want)
{
    char head[96];
    snprintf(head, sizeof head, "<polyline class=\"drift\" data-n=\"%d\" points=\"", want);
    const char *p = strstr(s, head);
    ck_assert_msg(p, "no drift polyline with %d points", want);
    p += strlen(head);
    const char *end = strchr(p, '"');
    ck_assert_ptr_nonnull(end);
    int n = 0;
    double last_x = -1;
    while (p < end) {
        double x, y;
        int used = 0;
        ck_assert_int_eq(sscanf(p, "%lf,%lf%n", &x, &y, &used), 2);
        ck_assert_msg(x >= 0 && x <= 720 && y >= 0 && y <= 270, "point %d (%g, %g) off the plot",
                      n, x, y);
        ck_assert_msg(x >= last_x, "point %d is left of the one before", n);
        last_x = x;
        n++;
        p += used;
        while (p < end && *p == ' ')
            p++;
    }
    ck_assert_int_eq(n, want);
}

START_TEST(long_part_in_html)
{
    char html[512], plain[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("long.html"));
    snprintf(plain, sizeof plain, "%s", gt_test_tmp("plain.html"));
    int64_t cell = make_report(24, html, plain);
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_nonnull(h);
    /* Self-contained: nothing to fetch (a URL in the provenance is text
     * and a link, never loaded). */
    ck_assert_ptr_null(strstr(h, "src=\""));
    ck_assert_ptr_null(strstr(h, "<link"));
    ck_assert_ptr_null(strstr(h, "url("));

    ck_assert_ptr_nonnull(strstr(h, "<section id=\"long\"><h2>Long context</h2>"));
    ck_assert_ptr_nonnull(strstr(h, "<a href=\"#long\">Long context</a>"));
    ck_assert_int_eq(count(h, "<div class=\"long\" id=\"long-c"), 1);
    char id[64];
    snprintf(id, sizeof id, "<div class=\"long\" id=\"long-c%lld\">", (long long)cell);
    const char *part = strstr(h, id);
    ck_assert_msg(part, "no part for the long cell");
    char *one = strndup(part, (size_t)(strstr(part, "</div>") - part));
    /* The part's only URL is the SVG namespace. */
    ck_assert_int_eq(count(one, "http"), count(one, "\"http://www.w3.org/2000/svg\""));

    /* Passkeys: 9 rows, answers side by side, the odd one escaped and bad. */
    ck_assert_int_eq(count(one, "<tr class=\"pk"), 9);
    ck_assert_int_eq(count(one, "<tr class=\"pk bad\""), 1);
    const char *odd = strstr(one, "<tr class=\"pk bad\" data-check=\"passkey_L8192_d90\">");
    ck_assert_ptr_nonnull(odd);
    char *row = strndup(odd, (size_t)(strstr(odd, "</tr>") - odd));
    ck_assert_ptr_nonnull(strstr(row, "<td class=\"mono ans\">4821&quot;3 &lt;b&gt;</td>"
                                      "<td>&#10007; missed</td><td class=\"mono ans\">48269</td>"
                                      "<td>&#10003; found</td>"));
    ck_assert_ptr_nonnull(strstr(row, "&#10007; differs"));
    free(row);
    ck_assert_ptr_nonnull(
        strstr(one, "<tr class=\"pk\" data-check=\"passkey_L2048_d10\"><td class=\"num\">2048</td>"
                    "<td class=\"num\">10%</td><td class=\"mono\">48213</td>"
                    "<td class=\"mono ans\">48213</td><td>&#10003; found</td>"
                    "<td class=\"mono ans\">48213</td><td>&#10003; found</td>"
                    "<td class=\"vd vd-pass\">&#10003; same</td></tr>"));

    /* Drift: the curve, a mark per checkpoint, the tolerance, the numbers. */
    check_polyline(one, FX_LONG_DRIFT_DRAWN);
    ck_assert_int_eq(count(one, "<line class=\"ckpt\""), 3);
    ck_assert_ptr_nonnull(strstr(one, ">2048</text>"));
    ck_assert_ptr_nonnull(strstr(one, ">8192</text>"));
    ck_assert_ptr_nonnull(strstr(one, "<line class=\"tol\""));
    ck_assert_ptr_nonnull(strstr(one, "tolerance &lt;= 0.0001"));
    ck_assert_ptr_nonnull(strstr(one, "position (log scale)"));
    ck_assert_ptr_nonnull(strstr(one, "Zeros are drawn at 1e-12."));
    ck_assert_int_eq(count(one, "<table class=\"drift\">"), 1);
    ck_assert_ptr_nonnull(strstr(one, "<td class=\"num\">8192</td><td class=\"num\">8064..8191</td>"));

    /* K/V memory: a row per length. */
    const char *kv = strstr(one, "<table class=\"kvmem\">");
    ck_assert_ptr_nonnull(kv);
    ck_assert_int_eq(count(kv, "<tr><td class=\"num\">"), 3);
    ck_assert_ptr_nonnull(strstr(kv, "<td class=\"num\">4096</td><td class=\"num\">125829120</td>"
                                     "<td class=\"num\">125829120</td><td class=\"num\">1.000</td>"
                                     "<td class=\"num\">220.0</td>"));
    free(one);
    free(h);

    /* The JSON report carries the points: the long cell's 48 drift points
     * (the NaN as null) and 9 kv/rss points, no other cell any. */
    char jpath[600];
    snprintf(jpath, sizeof jpath, "%s.json", html);
    char *jt = gt_test_slurp(jpath);
    ck_assert_ptr_nonnull(jt);
    cJSON *root = cJSON_Parse(jt);
    ck_assert_ptr_nonnull(root);
    int n_long = 0, n_other = 0, n_null = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cells"))
    {
        const cJSON *sr = cJSON_GetObjectItem(c, "series"), *pt;
        ck_assert(cJSON_IsArray(sr));
        bool is_long = !strcmp(cJSON_GetObjectItem(c, "cell_id")->valuestring, LONG_CELL);
        cJSON_ArrayForEach(pt, sr)
        {
            is_long ? n_long++ : n_other++;
            n_null += cJSON_IsNull(cJSON_GetObjectItem(pt, "y"));
        }
    }
    ck_assert_int_eq(n_long, FX_LONG_DRIFT_POINTS + 9);
    ck_assert_int_eq(n_other, 0);
    ck_assert_int_eq(n_null, 1);
    cJSON_Delete(root);
    free(jt);

    /* The Markdown summary's line for it. */
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s.md", html);
    char *md = gt_test_slurp(mpath);
    ck_assert_ptr_nonnull(md);
    ck_assert_ptr_nonnull(strstr(md, "### Long context"));
    ck_assert_ptr_nonnull(strstr(md, "| `m0/f32/cpu/openblas` | 8 / 9 | 8 / 9 | 8e-07 at 8192 "
                                     "(&lt;= 0.0001) | 1.000 |"));
    free(md);

    /* No long data: no section, no link, nothing half-drawn. */
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", plain), 0);
    char *p = gt_test_slurp(plain);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(strstr(p, "id=\"long\""));
    ck_assert_ptr_null(strstr(p, "href=\"#long\""));
    ck_assert_ptr_null(strstr(p, "<polyline"));
    free(p);
}
END_TEST

START_TEST(long_part_rendered)
{
    char html[512], png[512], dom[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("long.html"));
    snprintf(png, sizeof png, "%s", gt_test_tmp("long.png"));
    snprintf(dom, sizeof dom, "%s", gt_test_tmp("long.dom"));
    /* Four cells, so that the whole page, Long context included, fits the
     * shot (headless Chromium paints nothing when asked to scroll to an
     * anchor first). */
    int64_t cell = make_report(4, html, NULL);
    ck_assert_int_eq(gt_test_sh("%s/ci/render-report.sh %s %s 1400x3700", GT_SOURCE_DIR, html,
                                png),
                     0);
    struct stat sb;
    /* A blank 1400x3700 page compresses to a few kB; a drawn one is
     * hundreds. */
    ck_assert_msg(stat(png, &sb) == 0 && sb.st_size > 50000, "no screenshot (or a blank one) at %s",
                  png);
    const char *keep = getenv("GT_KEEP_LONG_PNG");
    if (keep && keep[0])
        ck_assert_int_eq(gt_test_sh("cp %s %s && cp %s %s.html", png, keep, html, keep), 0);

    /* The cell named in the address opens, its details built by the script
     * with the long part copied in. */
    ck_assert_int_eq(gt_test_sh("p=$(mktemp -d) && timeout 120 /usr/bin/chromium --headless "
                                "--no-sandbox --disable-gpu --user-data-dir=$p "
                                "--virtual-time-budget=2000 --dump-dom 'file://%s#c%lld' >%s "
                                "2>/dev/null; rm -rf $p",
                                html, (long long)cell, dom),
                     0);
    char *d = gt_test_slurp(dom);
    ck_assert_ptr_nonnull(d);
    char want[96];
    snprintf(want, sizeof want, "<details class=\"cell\" id=\"c%lld\"", (long long)cell);
    const char *det = strstr(d, want);
    ck_assert_msg(det, "the long cell's details were not built");
    char *one = strndup(det, (size_t)(strstr(det, "</details>") - det));
    ck_assert_ptr_nonnull(strstr(one, " open="));
    ck_assert_ptr_nonnull(strstr(one, "<h3>Long context</h3><div class=\"long\">"));
    ck_assert_int_eq(count(one, "<tr class=\"pk"), 9);
    check_polyline(one, FX_LONG_DRIFT_DRAWN);
    free(one);
    free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("report_long");
    TCase *t = tcase_create("html");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, long_part_in_html);
    suite_add_tcase(s, t);
    TCase *r = tcase_create("render");
    tcase_set_timeout(r, 300);
    gt_test_add_if(r, long_part_rendered, access("/usr/bin/chromium", X_OK) == 0,
                   "no /usr/bin/chromium (apt-get install chromium): the screenshot is not taken");
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    gt_test_require_gauntlet();
    return gt_test_run(suite());
}
