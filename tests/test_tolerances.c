/* test_tolerances.c: bounds against baselines (harness/matrix/baseline.c)
 * and `gauntlet tolerances derive|baseline` (harness/cli/cmd_tolerances.c).
 *
 * - A bound 1000x looser than its baseline makes `plan` (and so `qualify`)
 *   exit 2, naming the metric, the cell and the ratio; the same bound whose
 *   note says "loose: why" passes; cells without a baseline value are
 *   listed as not measured, with the baseline's reason.
 * - derive on a small recorded run (synth-tiny f32/q8_0 on reference and
 *   cpu, 32 scored positions, a few seconds) gives k x the worst value the
 *   database holds, per cell group, and the bounds it prints, pasted into
 *   the matrix, validate against the baseline `tolerances baseline` writes
 *   from the same run.
 * - Every shipped matrix validates against its baseline, and ci, release
 *   and nightly have one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"

static char g_dir[4096];
static char g_out[65536];

#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)
#define BIN "'" GT_BINARY_DIR "/gauntlet'"

static const char *MATRIX_HEAD =
    "{\"name\": \"tol\",\n"
    " \"models\": [{\"id\": \"synth-tiny\", \"synth\": {\"preset\": \"tiny\", \"seed\": 1}}],\n"
    " \"quants\": [\"f32\", \"q8_0\"], \"backends\": [\"reference\", \"cpu\"],\n"
    " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
    " \"tiers\": {\"t\": {\"suites\": [\"accuracy\"], \"settings\": {\"accuracy\":\n"
    "   {\"max_scored\": 32, \"max_prompts\": 2, \"n_gen\": 4}}}},\n";

static void write_matrix(const char *name, const char *tolerances)
{
    char text[8192];
    snprintf(text, sizeof text, "%s \"tolerances\": %s}\n", MATRIX_HEAD, tolerances);
    gt_test_write_file(gt_test_join(g_dir, name), text, strlen(text));
}

static const char *BASELINE =
    "{\"matrix\": \"tol\",\n"
    " \"provenance\": {\"command\": \"by hand (test)\", \"date\": \"2026-12-06\",\n"
    "   \"commit\": \"0000000\", \"machine\": \"test\"},\n"
    " \"worst\": {\"accuracy.drift_kld_max\": {\"*/*/cpu/*\": 1e-6},\n"
    "            \"accuracy.drift_top1\": {\"*/*/cpu/*\": 1.0, \"*/*/reference/*\": 1.0}},\n"
    " \"unmeasured\": [{\"cell\": \"*/*/reference/*\", \"reason\": \"not run here\"}]}\n";

START_TEST(loose_bound_fails_validation)
{
    gt_test_sh("mkdir -p '%s/baselines'", g_dir);
    gt_test_write_file(gt_test_join(g_dir, "baselines/tol.json"), BASELINE, strlen(BASELINE));
    /* 1e-3 over a measured 1e-6: 1000x. */
    write_matrix("tol.json", "{\"default\": {\"accuracy.drift_kld_max\": {\"max\": 1e-3},"
                             " \"accuracy.drift_top1\": {\"min\": 0.95}}}");
    int rc = run(BIN " plan tol.json --no-probe");
    ck_assert_msg(rc == 2, "plan with a 1000x bound: exit %d\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "accuracy.drift_kld_max <= 0.001 is 1e+03x looser than its "
                                "baseline (worst 1e-06, cell synth-tiny/f32/cpu/default; 2 cells "
                                "measured), more than 100x"),
                  "%s", g_out);
    /* top-1 >= 0.95 over a measured 1.0 is 5x (shortfall floor 0.01): fine. */
    ck_assert_msg(!strstr(g_out, "drift_top1 >= 0.95 is"), "%s", g_out);
    /* The reference cells have no kld value: listed with the baseline's reason. */
    ck_assert_msg(strstr(g_out, "accuracy.drift_kld_max <= 0.001 not measured on 2 of its 4 "
                                "cells (first synth-tiny/f32/reference/default: not run here)"),
                  "%s", g_out);
    ck_assert_msg(strstr(g_out, "2 bounds checked, 1 too loose,"), "%s", g_out);
    /* qualify refuses it too, before running anything. */
    rc = run(BIN " qualify tol.json --db q.sqlite --no-progress");
    ck_assert_msg(rc == 2 && strstr(g_out, "1e+03x looser"), "qualify exit %d\n%s", rc, g_out);
    ck_assert_msg(access(gt_test_join(g_dir, "q.sqlite"), F_OK) != 0, "qualify opened its db");

    /* With the marker in its note it passes. */
    write_matrix("tol.json", "{\"default\": {\"accuracy.drift_kld_max\": {\"max\": 1e-3, "
                             "\"note\": \"loose: a test of the marker\"}}}");
    rc = run(BIN " plan tol.json --no-probe");
    ck_assert_msg(rc == 0, "plan with a noted loose bound: exit %d\n%s", rc, g_out);
    /* A note without the marker does not. */
    write_matrix("tol.json", "{\"default\": {\"accuracy.drift_kld_max\": {\"max\": 1e-3, "
                             "\"note\": \"chosen loosely\"}}}");
    ck_assert_int_eq(run(BIN " plan tol.json --no-probe"), 2);
    /* 50x passes without a note. */
    write_matrix("tol.json", "{\"default\": {\"accuracy.drift_kld_max\": {\"max\": 5e-5}}}");
    rc = run(BIN " plan tol.json --no-probe");
    ck_assert_msg(rc == 0, "plan with a 50x bound: exit %d\n%s", rc, g_out);

    /* --tol-baseline names another file; a bad one is a configuration error. */
    const char *bad = "{\"matrix\": \"tol\", \"worst\": {}}";
    gt_test_write_file(gt_test_join(g_dir, "bad.json"), bad, strlen(bad));
    rc = run(BIN " plan tol.json --no-probe --tol-baseline bad.json");
    ck_assert_msg(rc == 2 && strstr(g_out, "provenance"), "exit %d\n%s", rc, g_out);
    ck_assert_int_eq(run(BIN " plan tol.json --no-probe --tol-baseline missing.json"), 2);
    gt_test_sh("rm -rf '%s/baselines'", g_dir);
    rc = run(BIN " plan tol.json --no-probe");
    ck_assert_msg(rc == 0 && strstr(g_out, "no baseline"), "exit %d\n%s", rc, g_out);
}
END_TEST

static const cJSON *group_metric(const cJSON *doc, const char *cell, const char *metric)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "cells"))
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "cell");
        if (cJSON_IsString(c) && strcmp(c->valuestring, cell) == 0)
            return cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(e, "metrics"), metric);
    }
    return NULL;
}

START_TEST(derive_from_recorded_run)
{
    gt_test_sh("rm -rf '%s/baselines'", g_dir); /* the bounds below are the run's own */
    write_matrix("d.json", "{\"default\": {\"accuracy.drift_kld_max\": {\"max\": 0.5},"
                           " \"accuracy.drift_top1\": {\"min\": 0.5},"
                           " \"accuracy.scored_tokens\": {\"min\": 16}}}");
    int rc = run(BIN " qualify d.json --db d.sqlite --run-id one --no-progress");
    ck_assert_msg(rc == 0, "qualify exit %d:\n%s", rc, g_out);
    sqlite3 *h = gt_test_db_open(gt_test_join(g_dir, "d.sqlite"));
    double worst = atof(gt_test_q_text(
        h, "SELECT printf('%%.17g', MAX(m.value)) FROM metrics m JOIN cells c ON c.id = m.cell"
           " WHERE m.name = 'drift_kld_max' AND c.cell_id LIKE '%%/q8_0/cpu/%%'"));
    sqlite3_close(h);

    rc = run(BIN " tolerances derive --db d.sqlite --k 10");
    ck_assert_msg(rc == 0, "derive exit %d:\n%s", rc, g_out);
    cJSON *doc = cJSON_Parse(g_out);
    ck_assert_msg(doc, "derive printed no JSON:\n%s", g_out);
    const cJSON *kld = group_metric(doc, "*/q8_0/cpu/default", "accuracy.drift_kld_max");
    ck_assert_msg(kld, "no */q8_0/cpu/default drift_kld_max:\n%s", g_out);
    double want = 10 * fmax(worst, 1e-9), got = cJSON_GetObjectItem(kld, "max")->valuedouble;
    /* rounded up to 2 significant digits, never below k x worst */
    ck_assert_msg(got >= want && got <= want * 1.1, "max %g for worst %g", got, worst);
    ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(kld, "note")->valuestring, "10 x worst"));
    const cJSON *top1 = group_metric(doc, "*/q8_0/cpu/default", "accuracy.drift_top1");
    ck_assert_ptr_nonnull(top1);
    /* measured 1.000 on a correct backend: shortfall floor 0.01, 1 - 10 x 0.01 */
    ck_assert_double_eq_tol(cJSON_GetObjectItem(top1, "min")->valuedouble, 0.9, 1e-12);
    const cJSON *sc = group_metric(doc, "*/f32/reference/default", "accuracy.scored_tokens");
    ck_assert_ptr_nonnull(sc);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(sc, "min")->valuedouble, 3.2, 1e-12);
    /* --per-cell keys by cell id; --cells filters. */
    rc = run(BIN " tolerances derive --db d.sqlite --per-cell --cells '*/cpu/*'");
    ck_assert_msg(rc == 0 && strstr(g_out, "\"synth-tiny/q8_0/cpu/default\"") &&
                      !strstr(g_out, "reference"),
                  "exit %d\n%s", rc, g_out);
    ck_assert_int_eq(run(BIN " tolerances derive --db d.sqlite --k 1000"), 2);
    ck_assert_int_eq(run(BIN " tolerances derive --db d.sqlite --cells 'nothing/*'"), 1);
    ck_assert_int_eq(run(BIN " tolerances derive --db d.sqlite --run no/such/run"), 2);

    /* The derived bounds, pasted into the matrix, validate against the
     * baseline written from the same run. */
    cJSON *tol = cJSON_CreateObject();
    cJSON_AddItemToObject(tol, "cells", cJSON_DetachItemFromObject(doc, "cells"));
    char *tol_text = cJSON_PrintUnformatted(tol);
    write_matrix("d.json", tol_text);
    free(tol_text);
    cJSON_Delete(tol);
    cJSON_Delete(doc);
    rc = run(BIN " tolerances baseline --db d.sqlite --command 'qualify d.json'");
    ck_assert_msg(rc == 0, "baseline exit %d:\n%s", rc, g_out);
    cJSON *b = cJSON_Parse(g_out);
    ck_assert_msg(b, "baseline printed no JSON:\n%s", g_out);
    const cJSON *prov = cJSON_GetObjectItem(b, "provenance");
    ck_assert_str_eq(cJSON_GetObjectItem(prov, "command")->valuestring, "qualify d.json");
    ck_assert_str_eq(cJSON_GetObjectItem(prov, "run")->valuestring, "tol/t/one");
    double v = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "worst"),
                                                       "accuracy.drift_kld_max"),
                                   "synth-tiny/q8_0/cpu/default")
                   ->valuedouble;
    ck_assert_double_eq_tol(v, worst, fabs(worst) * 1e-9);
    cJSON_Delete(b);
    gt_test_sh("mkdir -p '%s/baselines'", g_dir);
    run(BIN " tolerances baseline --db d.sqlite > baselines/tol.json");
    rc = run(BIN " plan d.json --no-probe");
    ck_assert_msg(rc == 0 && strstr(g_out, "0 too loose, 0 with cells not measured"), "exit %d\n%s", rc,
                  g_out);
    gt_test_sh("rm -rf '%s/baselines'", g_dir);
}
END_TEST

/* Every shipped matrix validates against its baseline; the three whose
 * bounds issue 34 measured have one. */
START_TEST(shipped_matrices_validate)
{
    static const char *const FILES[] = {"quickstart", "ci",   "nightly", "release",
                                        "serve",      "peer", "kquants"};
    for (size_t i = 0; i < sizeof FILES / sizeof *FILES; i++) {
        int rc = run(BIN " plan --no-probe '%s/matrices/%s.json'", GT_SOURCE_DIR, FILES[i]);
        ck_assert_msg(rc == 0, "matrices/%s.json: exit %d\n%s", FILES[i], rc, g_out);
        bool has = !strstr(g_out, "no baseline (");
        if (!strcmp(FILES[i], "ci") || !strcmp(FILES[i], "release") ||
            !strcmp(FILES[i], "nightly"))
            ck_assert_msg(has && strstr(g_out, " 0 too loose"), "matrices/%s.json:\n%.4000s",
                          FILES[i], g_out);
    }
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("tolerances"));
    if (gt_test_sh("mkdir -p '%s'", g_dir) != 0) {
        fprintf(stderr, "cannot make %s\n", g_dir);
        return 1;
    }
    Suite *s = suite_create("tolerances");
    TCase *tc = tcase_create("tolerances");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, loose_bound_fails_validation);
    tcase_add_test(tc, derive_from_recorded_run);
    tcase_add_test(tc, shipped_matrices_validate);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
