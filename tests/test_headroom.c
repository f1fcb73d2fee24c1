/* test_headroom.c: `gauntlet db headroom` and the report's headroom section
 * (reports/headroom.c) on a small synthetic run.
 *
 * The matrix (synth-tiny f32 and q8_0 on reference and cpu: no download, a
 * few seconds) sets one bound far looser than anything a correct backend
 * measures (drift KL max <= 0.5, measured ~1e-13) and one that is close
 * (at least 16 scored positions, 32 scored): the first must be flagged, the
 * second not, with the worst value the database holds and the ratio the
 * header defines; --strict turns a flag into exit 1. A third bound as loose
 * but whose note says why ("loose: ...", read back from the run's stored
 * matrix) is listed as loose on purpose, not flagged, and does not trip
 * --strict; the same bound unnoted in a second run is flagged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char g_dir[4096];
static char g_out[65536];

#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)
#define BIN "'" GT_BINARY_DIR "/gauntlet'"

/* The output line of metric name with bound text cmp (e.g. "<="), or NULL. */
static const char *row(const char *name, const char *cmp)
{
    static char line[512];
    for (const char *p = g_out; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n < sizeof line) {
            memcpy(line, p, n);
            line[n] = '\0';
            char first[128], second[8];
            if (sscanf(line, "%127s %7s", first, second) == 2 && strcmp(first, name) == 0 &&
                strcmp(second, cmp) == 0)
                return line;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

START_TEST(flags_loose_bounds_only)
{
    const char *matrix =
        "{\"name\": \"headroom\",\n"
        " \"models\": [{\"id\": \"synth-tiny\", \"synth\": {\"preset\": \"tiny\", \"seed\": 1}}],\n"
        " \"quants\": [\"f32\", \"q8_0\"], \"backends\": [\"reference\", \"cpu\"],\n"
        " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
        " \"tolerances\": {\"default\": {\n"
        "   \"accuracy.drift_kld_max\": {\"max\": 0.5},\n"
        "   \"accuracy.drift_kld_mean\": {\"max\": 0.25, \"note\": \"loose: a test of the marker\"},\n"
        "   \"accuracy.scored_tokens\": {\"min\": 16}}},\n"
        " \"tiers\": {\"t\": {\"suites\": [\"accuracy\"], \"settings\": {\"accuracy\":\n"
        "   {\"max_scored\": 32, \"max_prompts\": 2, \"n_gen\": 4}}}}}\n";
    gt_test_write_file(gt_test_join(g_dir, "m.json"), matrix, strlen(matrix));
    int rc = run(BIN " qualify m.json --db h.sqlite --html h.html");
    ck_assert_msg(rc == 0, "qualify exit %d:\n%s", rc, g_out);

    sqlite3 *h = gt_test_db_open(gt_test_join(g_dir, "h.sqlite"));
    double worst = atof(gt_test_q_text(h, "SELECT printf('%%.17g', MAX(value)) FROM metrics"
                                          " WHERE name = 'drift_kld_max'"));
    int n_kld = gt_test_q_int(h, "SELECT COUNT(*) FROM metrics WHERE name = 'drift_kld_max'");
    sqlite3_close(h);
    ck_assert_int_eq(n_kld, 4);

    rc = run(BIN " db headroom h.sqlite");
    ck_assert_msg(rc == 0, "headroom exit %d:\n%s", rc, g_out);
    const char *loose = row("accuracy.drift_kld_max", "<=");
    ck_assert_msg(loose, "no drift_kld_max row:\n%s", g_out);
    double bound, shown, ratio;
    int cells;
    ck_assert_msg(sscanf(loose, "%*s %*s %lf %lf %lfx %d", &bound, &shown, &ratio, &cells) == 4,
                  "%s", loose);
    ck_assert_double_eq(bound, 0.5);
    ck_assert_int_eq(cells, 4);
    ck_assert_msg(fabs(shown - worst) <= 1e-3 * fabs(worst), "shown %g, database max %g", shown,
                  worst);
    double want = 0.5 / fmax(worst, 1e-9);
    ck_assert_msg(fabs(ratio - want) <= 1e-2 * want, "ratio %g, expected %g", ratio, want);
    ck_assert_msg(strstr(loose, "LOOSE"), "not flagged: %s", loose);

    const char *tight = row("accuracy.scored_tokens", ">=");
    ck_assert_msg(tight, "no scored_tokens row:\n%s", g_out);
    ck_assert_msg(sscanf(tight, "%*s %*s %lf %lf %lfx %d", &bound, &shown, &ratio, &cells) == 4,
                  "%s", tight);
    ck_assert_double_eq(shown, 32);
    ck_assert_double_eq_tol(ratio, 2, 1e-9);
    ck_assert_msg(!strstr(tight, "LOOSE"), "flagged: %s", tight);
    ck_assert_ptr_nonnull(strstr(g_out, "more than 100x looser than measured"));

    /* Loose on purpose: listed with the marker's word, not flagged or counted. */
    const char *noted = row("accuracy.drift_kld_mean", "<=");
    ck_assert_msg(noted, "no drift_kld_mean row:\n%s", g_out);
    ck_assert_msg(sscanf(noted, "%*s %*s %lf %lf %lfx %d", &bound, &shown, &ratio, &cells) == 4,
                  "%s", noted);
    ck_assert_double_eq(bound, 0.25);
    ck_assert_msg(ratio > 100, "the test needs the noted bound loose: %s", noted);
    ck_assert_msg(!strstr(noted, "LOOSE") && strstr(noted, "loose (noted)"), "%s", noted);
    ck_assert_msg(strstr(g_out, "; 1 more than 100x looser than measured") &&
                      strstr(g_out, "1 more loose on purpose"),
                  "counts:\n%s", g_out);
    ck_assert_ptr_null(strstr(g_out, "notes were not read"));

    rc = run(BIN " db headroom h.sqlite --strict");
    ck_assert_msg(rc == 1, "--strict with a loose bound: exit %d\n%s", rc, g_out);

    /* The HTML report has the same table. */
    char *html = gt_test_slurp(gt_test_join(g_dir, "h.html"));
    ck_assert_ptr_nonnull(html);
    const char *sec = strstr(html, "<section id=\"headroom\">");
    ck_assert_msg(sec, "no headroom section");
    const char *kld = strstr(sec, "accuracy.drift_kld_max");
    ck_assert_msg(kld && strstr(kld, "LOOSE"), "headroom table lacks the loose bound");
    ck_assert_ptr_nonnull(strstr(html, "reference numerics"));
    const char *mean = strstr(sec, "accuracy.drift_kld_mean");
    const char *end = mean ? strstr(mean, "</tr>") : NULL;
    ck_assert_msg(mean && end, "headroom table lacks the noted bound");
    ck_assert_msg(strstr(mean, "loose (noted)") && strstr(mean, "loose (noted)") < end &&
                      (!strstr(mean, "LOOSE") || strstr(mean, "LOOSE") > end),
                  "the noted bound's row is not marked as noted");
    free(html);

    /* Only the marker lets it pass: the same bound without its note, and
     * only the noted bound (--strict passes). */
    const char *plain =
        "{\"name\": \"headroom\",\n"
        " \"models\": [{\"id\": \"synth-tiny\", \"synth\": {\"preset\": \"tiny\", \"seed\": 1}}],\n"
        " \"quants\": [\"f32\"], \"backends\": [\"reference\", \"cpu\"],\n"
        " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
        " \"tolerances\": {\"default\": {\n"
        "   \"accuracy.drift_kld_mean\": {\"max\": 0.25, \"note\": \"%s\"}}},\n"
        " \"tiers\": {\"t\": {\"suites\": [\"accuracy\"], \"settings\": {\"accuracy\":\n"
        "   {\"max_scored\": 32, \"max_prompts\": 2, \"n_gen\": 4}}}}}\n";
    static const char *const NOTES[] = {"no marker here", "loose: the test's marker"};
    for (int i = 0; i < 2; i++) {
        char text[2048];
        int len = snprintf(text, sizeof text, plain, NOTES[i]);
        gt_test_write_file(gt_test_join(g_dir, "p.json"), text, (size_t)len);
        gt_test_sh("rm -f '%s'/p.sqlite*", g_dir);
        rc = run(BIN " qualify p.json --db p.sqlite -q");
        ck_assert_msg(rc == 0, "qualify exit %d:\n%s", rc, g_out);
        rc = run(BIN " db headroom p.sqlite --strict");
        const char *r = row("accuracy.drift_kld_mean", "<=");
        ck_assert_msg(r, "no drift_kld_mean row:\n%s", g_out);
        if (i == 0) {
            ck_assert_msg(rc == 1 && strstr(r, "LOOSE"), "unnoted: exit %d, %s", rc, r);
        } else {
            ck_assert_msg(rc == 0 && !strstr(r, "LOOSE") && strstr(r, "loose (noted)"),
                          "noted: exit %d, %s", rc, r);
        }
    }
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(run(BIN " db headroom"), 2);
    ck_assert_int_eq(run(BIN " db headroom missing.sqlite"), 2);
    ck_assert_int_eq(run(BIN " db headroom h.sqlite no-such-run"), 2);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("headroom"));
    if (gt_test_sh("mkdir -p '%s'", g_dir) != 0) {
        fprintf(stderr, "cannot make %s\n", g_dir);
        return 1;
    }
    Suite *s = suite_create("headroom");
    TCase *tc = tcase_create("headroom");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, flags_loose_bounds_only);
    tcase_add_test(tc, usage_errors);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
