/* test_suites.c: the qualification suites (functional, accuracy,
 * performance, soak) and the math they judge with.
 *
 * Two halves. The metric functions (suites/metrics.c, compiled into this
 * test directly: it has no dependencies) are checked on hand-computed
 * examples. Then each check is shown to be able to fail: the real gauntlet
 * binary qualifies a small stories260K matrix (reference + cpu, q8_0; its
 * synthetic stand-in without ../shared, gt_test_llama) in a
 * temporary folder, once clean (exit 0) and once per GT_FAULT kind (exit 1),
 * and the gate output and the results database must name the failing
 * metric with its measured value and its tolerance; and once per runtime
 * fault that shows only under one execution setting (batch-split@0,
 * seq-bleed@0, thread-race on cpu), which must fail exactly the functional
 * suite's invariance metric for that setting. A check nobody has seen fail
 * is not known to work. */
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../suites/metrics.c"
#include "kv_drift.h"
#include "testutil.h"

#define BIN "'" GT_BINARY_DIR "/gauntlet'"

static char g_dir[4096];
static char g_out[65536];
static const char *g_stories;

/* --- metric math ---------------------------------------------------------- */

START_TEST(test_log_softmax)
{
    float x[3] = {1000, 1000, -INFINITY};
    double lp[3];
    double lse = gt_log_softmax(x, 3, lp);
    ck_assert_double_eq_tol(lse, 1000 + log(2), 1e-9);
    ck_assert_double_eq_tol(lp[0], log(0.5), 1e-12);
    ck_assert(isinf(lp[2]) && lp[2] < 0);
    float y[4] = {0.5f, -1, 2, 3};
    double ly[4], sum = 0;
    gt_log_softmax(y, 4, ly);
    for (int i = 0; i < 4; i++)
        sum += exp(ly[i]);
    ck_assert_double_eq_tol(sum, 1, 1e-12);
}
END_TEST

START_TEST(test_kl)
{
    double p[3] = {log(0.5), log(0.3), log(0.2)};
    ck_assert_double_eq(gt_kl_div(p, p, 3), 0);
    double a[2] = {log(0.5), log(0.5)}, b[2] = {log(0.25), log(0.75)};
    /* 0.5 ln 2 + 0.5 ln(2/3) */
    ck_assert_double_eq_tol(gt_kl_div(a, b, 2), 0.5 * log(2) + 0.5 * log(2.0 / 3), 1e-12);
    ck_assert_double_eq_tol(gt_kl_div(a, b, 2), 0.1438410362, 1e-9);
    /* A zero-probability outcome of P contributes nothing. */
    double z[2] = {0, -INFINITY}, q[2] = {log(0.9), log(0.1)};
    ck_assert_double_eq_tol(gt_kl_div(z, q, 2), -log(0.9), 1e-12);
}
END_TEST

START_TEST(test_kl_topk)
{
    double lq[3] = {log(0.4), log(0.4), log(0.2)};
    double full_p[3] = {log(0.5), log(0.3), log(0.2)};
    double full = gt_kl_div(full_p, lq, 3);
    ck_assert_double_eq_tol(full, 0.5 * log(1.25) + 0.3 * log(0.75), 1e-12);
    /* All of P stored: exact. */
    int32_t ids[3] = {2, 0, 1};
    double lp[3] = {log(0.2), log(0.5), log(0.3)};
    ck_assert_double_eq_tol(gt_kl_div_topk(ids, lp, 3, 0, lq), full, 1e-12);
    /* Top-1 plus a tail bucket of 0.5 (q tail 0.6): a lower bound. */
    int32_t top[1] = {0};
    double lt[1] = {log(0.5)};
    double merged = gt_kl_div_topk(top, lt, 1, 0.5, lq);
    ck_assert_double_eq_tol(merged, 0.5 * log(0.5 / 0.4) + 0.5 * log(0.5 / 0.6), 1e-12);
    ck_assert(merged <= full);
    /* Identical distributions: 0 whatever is merged. */
    ck_assert_double_eq_tol(gt_kl_div_topk(top, (double[]){log(0.4)}, 1, 0.6, lq), 0, 1e-15);
}
END_TEST

START_TEST(test_nmse_percentiles)
{
    float r[2] = {1, 2}, x[2] = {1, 3};
    ck_assert_double_eq_tol(gt_nmse(r, x, 2), 0.2, 1e-12);
    ck_assert_double_eq(gt_nmse(r, r, 2), 0);
    double v[4] = {4, 1, 3, 2};
    ck_assert_double_eq_tol(gt_percentile(v, 4, 0.5), 2.5, 1e-12);
    ck_assert_double_eq(gt_percentile(v, 4, 0), 1);
    ck_assert_double_eq(gt_percentile(v, 4, 1), 4);
    double h[100];
    for (int i = 0; i < 100; i++)
        h[i] = 100 - i;
    ck_assert_double_eq_tol(gt_percentile(h, 100, 0.99), 99.01, 1e-9);
    ck_assert(isnan(gt_percentile(h, 0, 0.5)));
    double same[3] = {10, 10, 10};
    ck_assert_double_eq(gt_rel_spread(same, 3), 0);
    double s5[5] = {90, 100, 110, 100, 100}; /* q25 100, q75 100 */
    ck_assert_double_eq_tol(gt_rel_spread(s5, 5), 0, 1e-12);
    double s4[4] = {90, 110, 100, 100}; /* q25 97.5, q75 102.5, median 100 */
    ck_assert_double_eq_tol(gt_rel_spread(s4, 4), 0.05, 1e-12);
}
END_TEST

START_TEST(test_top_k)
{
    float x[6] = {1, 5, 3, 5, -2, 4};
    int32_t ids[3];
    gt_top_k(x, 6, 3, ids);
    ck_assert_int_eq(ids[0], 1); /* the tie at 5 goes to the lower id first */
    ck_assert_int_eq(ids[1], 3);
    ck_assert_int_eq(ids[2], 5);
    uint64_t s1 = 7, s2 = 7;
    ck_assert(gt_rng_next(&s1) == gt_rng_next(&s2));
    double u = gt_rng_uniform(&s1);
    ck_assert(u >= 0 && u < 1);
}
END_TEST

/* --- the suites through `gauntlet qualify` ------------------------------- */

#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)

/* stories260K q8_0 on reference and cpu; one tier per suite under test (each
 * after smoke, which every tier needs first) and one with all of them. The
 * tolerances are the ones the faults must break. */
/* Under ASan the reference cell's 2 s soak measures 0-2.3 MiB of RSS
 * growth (2026-12-07, three runs: 2.03 and 2.28 failed the suite's 2 MiB):
 * ASan's allocator fills its quarantine and metadata as the few iterations
 * run. The leak fault still measures 177 MiB there, so a bound of 8 keeps
 * what the faulted tests show; plain builds keep the suite's 2 MiB. */
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_TOL ",\n   \"soak.rss_growth_mib\": {\"max\": 8, \"note\": \"ASan's allocator\"}"
#else
#define SOAK_TOL ""
#endif

static void write_matrix(void)
{
    char text[8192], path[4200];
    snprintf(text, sizeof text,
             "{\"name\": \"suites-test\",\n"
             " \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],\n"
             " \"quants\": [\"q8_0\"],\n"
             " \"backends\": [\"reference\", \"cpu\"],\n"
             " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
             " \"tolerances\": {\"default\": {\n"
             "   \"functional.prefill_max_abs_diff\": {\"max\": 1},\n"
             "   \"accuracy.drift_kld_mean\": {\"max\": 2e-3},\n"
             "   \"accuracy.drift_top1\": {\"min\": 0.93}" SOAK_TOL "}},\n"
             " \"tiers\": {\n"
             "  \"all\": {\"suites\": [\"smoke\", \"functional\", \"accuracy\", \"performance\", "
             "\"soak\"],\n"
             "   \"settings\": {\"accuracy\": {\"max_scored\": 128, \"max_prompts\": 4, "
             "\"n_gen\": 8},\n"
             "     \"performance\": {\"n_prompt\": 16, \"n_gen\": 8, \"reps\": 2, \"max_reps\": 3},\n"
             "     \"soak\": {\"duration_s\": 2, \"max_prompts\": 2}}},\n"
             "  \"functional\": {\"suites\": [\"smoke\", \"functional\"]},\n"
             "  \"accuracy\": {\"suites\": [\"smoke\", \"accuracy\"],\n"
             "   \"settings\": {\"accuracy\": {\"max_scored\": 128, \"n_gen\": 0}}},\n"
             "  \"soak\": {\"suites\": [\"smoke\", \"soak\"],\n"
             "   \"settings\": {\"soak\": {\"duration_s\": 2, \"max_prompts\": 2}}}},\n"
             " \"default_tier\": \"all\"}\n",
             g_stories);
    snprintf(path, sizeof path, "%s/m.json", g_dir);
    gt_test_write_file(path, text, strlen(text));
}

static sqlite3 *db_open(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    return h;
}

/* The one metric row of (cell, suite.name) in the newest run. */
static bool metric_row(sqlite3 *h, const char *cell, const char *suite, const char *name,
                       double *value, double *tol, char *cmp, char *verdict)
{
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h,
                                        "SELECT m.value, m.tolerance, m.comparator, m.verdict"
                                        " FROM metrics m JOIN cells c ON m.cell = c.id"
                                        " WHERE c.cell_id = ? AND m.suite = ? AND m.name = ?"
                                        " ORDER BY c.run_id DESC LIMIT 1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, cell, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, suite, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    if (found) {
        *value = sqlite3_column_double(st, 0);
        *tol = sqlite3_column_double(st, 1);
        snprintf(cmp, 8, "%s", (const char *)sqlite3_column_text(st, 2));
        snprintf(verdict, 8, "%s", (const char *)sqlite3_column_text(st, 3));
    }
    sqlite3_finalize(st);
    return found;
}

static long long count(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

#define CPU_CELL "stories260k/q8_0/cpu/default"

/* A faulted run: exit 1, and the gate output and the DB name the metric,
 * the measured value and the tolerance; the reference cell still passes. */
static void expect_failure(const char *fault, const char *tier, const char *db,
                           const char *suite, const char *name, const char *cmp_want)
{
    int rc = run("GT_FAULT='%s:*/cpu/*' " BIN " qualify m.json --tier %s --db %s", fault, tier,
                 db);
    ck_assert_msg(rc == 1, "GT_FAULT=%s: exit %d, expected 1:\n%s", fault, rc, g_out);
    sqlite3 *h = db_open(db);
    double v, tol;
    char cmp[8], verdict[8];
    ck_assert_msg(metric_row(h, CPU_CELL, suite, name, &v, &tol, cmp, verdict),
                  "no %s.%s for %s", suite, name, CPU_CELL);
    ck_assert_str_eq(verdict, "fail");
    ck_assert_str_eq(cmp, cmp_want);
    char want[300];
    snprintf(want, sizeof want, "metric %s.%s = %.6g", suite, name, v);
    ck_assert_msg(strstr(g_out, want), "gate output lacks \"%s\":\n%s", want, g_out);
    snprintf(want, sizeof want, "tolerance %s %.6g", cmp, tol);
    ck_assert_msg(strstr(g_out, want), "gate output lacks \"%s\":\n%s", want, g_out);
    ck_assert_int_eq(count(h, "SELECT COUNT(*) FROM cells WHERE cell_id LIKE '%/reference/%'"
                              " AND status = 'pass'"),
                     1);
    sqlite3_close(h);
}

static const char *const INVARIANCE[] = {"invariance_batch_split", "invariance_parallel",
                                         "invariance_threads"};

START_TEST(test_clean_run_passes)
{
    int rc = run(BIN " qualify m.json --db clean.sqlite");
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    sqlite3 *h = db_open("clean.sqlite");
    /* Every suite reported metrics, each row with its comparator when bounded. */
    const char *suites[] = {"functional", "accuracy", "performance", "soak"};
    for (int i = 0; i < 4; i++) {
        char sql[300];
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM metrics m JOIN cells c ON m.cell = c.id"
                 " WHERE c.cell_id = '" CPU_CELL "' AND m.suite = '%s'",
                 suites[i]);
        ck_assert_msg(count(h, sql) >= 4, "too few %s metrics", suites[i]);
    }
    double v, tol;
    char cmp[8], verdict[8];
    ck_assert(metric_row(h, CPU_CELL, "accuracy", "drift_kld_mean", &v, &tol, cmp, verdict));
    ck_assert_str_eq(verdict, "pass");
    ck_assert(v >= 0 && v <= 2e-3 && tol == 2e-3);
    ck_assert(metric_row(h, CPU_CELL, "accuracy", "loss_kld_mean", &v, &tol, cmp, verdict));
    ck_assert(v > 0 && v < 0.05); /* q8_0 costs something, not much */
    ck_assert(metric_row(h, "stories260k/q8_0/reference/default", "accuracy", "drift_kld_mean",
                         &v, &tol, cmp, verdict));
    ck_assert_double_eq(v, 0); /* the reference against itself */
    ck_assert(metric_row(h, CPU_CELL, "functional", "determinism_diff", &v, &tol, cmp, verdict));
    ck_assert(v == 0 && !strcmp(cmp, "==") && !strcmp(verdict, "pass"));
    /* The invariance metrics, judged by their default bound: the reference
     * bit-identical, cpu within float reordering (measured <= 4e-7). These
     * cells run 1 thread, so the thread check is a skip saying so. */
    ck_assert_int_eq(count(h, "SELECT COUNT(*) FROM results r JOIN cells c ON r.cell = c.id"
                              " WHERE c.cell_id = '" CPU_CELL "' AND r.check_name ="
                              " 'invariance_threads' AND r.status = 'skip'"
                              " AND r.message LIKE '%runs 1 thread%'"),
                     1);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(metric_row(h, CPU_CELL, "functional", INVARIANCE[i], &v, &tol, cmp, verdict),
                      "no functional.%s", INVARIANCE[i]);
        ck_assert_msg(!strcmp(verdict, "pass") && !strcmp(cmp, "<=") && tol == 1e-4 && v < 1e-5,
                      "%s = %g (%s %s %g)", INVARIANCE[i], v, verdict, cmp, tol);
        ck_assert(metric_row(h, "stories260k/q8_0/reference/default", "functional",
                             INVARIANCE[i], &v, &tol, cmp, verdict));
        ck_assert_msg(v == 0 && !strcmp(verdict, "pass"), "reference %s = %g", INVARIANCE[i], v);
    }
    /* kv_f16_drift runs in every cell: an F16 cache drifts (not 0), within
     * its default bound, the same on the reference and cpu within 10x. */
    double ref_drift;
    ck_assert(metric_row(h, "stories260k/q8_0/reference/default", "functional", "kv_f16_drift",
                         &ref_drift, &tol, cmp, verdict));
    ck_assert_msg(ref_drift > 0 && !strcmp(verdict, "pass") && tol == GT_KV_F16_DRIFT_MAX,
                  "reference kv_f16_drift = %g (%s %g)", ref_drift, verdict, tol);
    ck_assert(metric_row(h, CPU_CELL, "functional", "kv_f16_drift", &v, &tol, cmp, verdict));
    ck_assert_msg(v > 0 && !strcmp(verdict, "pass") && !strcmp(cmp, "<=") &&
                      tol == GT_KV_F16_DRIFT_MAX && v < 10 * ref_drift && ref_drift < 10 * v,
                  "cpu kv_f16_drift = %g (%s %s %g), reference %g", v, verdict, cmp, tol,
                  ref_drift);
    /* Throughput is regress-flagged with higher-is-better for the gate. */
    ck_assert_int_eq(count(h, "SELECT COUNT(*) FROM metrics WHERE suite = 'performance'"
                              " AND name = 'tg_tps' AND regress = 1 AND better = 1 AND value > 0"),
                     2);
    /* The reference outputs were cached for later cells and runs. */
    ck_assert(count(h, "SELECT COUNT(*) FROM ref_cache") >= 3);
    sqlite3_close(h);
}
END_TEST

START_TEST(test_perturbed_logits_fail_accuracy)
{
    expect_failure("perturb-logits=1e-2", "accuracy", "perturb.sqlite", "accuracy",
                   "drift_kld_mean", "<=");
}
END_TEST

START_TEST(test_leak_fails_soak)
{
    expect_failure("leak=1MiB", "soak", "leak.sqlite", "soak", "rss_growth_mib", "<=");
}
END_TEST

START_TEST(test_nondeterminism_fails_functional)
{
    expect_failure("nondeterministic", "functional", "nondet.sqlite", "functional",
                   "determinism_diff", "==");
}
END_TEST

/* Each runtime fault that shows only under one execution setting fails
 * exactly its invariance metric on cpu (the others pass), and the
 * reference cell passes. The matrix names no settings, so each check
 * varies its setting; its cells run 2 threads, so the thread check runs (a
 * 1-thread cell leaves it to the cells with more). */
START_TEST(test_setting_faults_fail_invariance)
{
    static const char *const faults[] = {"batch-split@0", "seq-bleed@0", "thread-race"};
    char text[2048], path[4200], db[64];
    snprintf(text, sizeof text,
             "{\"name\": \"invariance-test\",\n"
             " \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],\n"
             " \"quants\": [\"q8_0\"], \"backends\": [\"reference\", \"cpu\"],\n"
             " \"defaults\": {\"timeout_s\": 120, \"threads\": 2},\n"
             " \"tiers\": {\"functional\": {\"suites\": [\"functional\"]}},\n"
             " \"default_tier\": \"functional\"}\n",
             g_stories);
    snprintf(path, sizeof path, "%s/inv.json", g_dir);
    gt_test_write_file(path, text, strlen(text));
    snprintf(db, sizeof db, "inv%d.sqlite", _i);
    int rc = run("GT_FAULT=%s GT_FAULT_BACKEND=cpu " BIN " qualify inv.json --db %s", faults[_i],
                 db);
    ck_assert_msg(rc == 1, "GT_FAULT=%s: exit %d, expected 1:\n%s", faults[_i], rc, g_out);
    sqlite3 *h = db_open(db);
    for (int i = 0; i < 3; i++) {
        double v, tol;
        char cmp[8], verdict[8];
        ck_assert(metric_row(h, CPU_CELL, "functional", INVARIANCE[i], &v, &tol, cmp, verdict));
        ck_assert_msg(!strcmp(verdict, i == _i ? "fail" : "pass"), "%s: %s = %g (%s)",
                      faults[_i], INVARIANCE[i], v, verdict);
    }
    ck_assert_int_eq(count(h, "SELECT COUNT(*) FROM cells WHERE cell_id LIKE '%/reference/%'"
                              " AND status = 'pass'"),
                     1);
    sqlite3_close(h);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    g_stories = gt_test_llama(); /* written once here, before the cases fork */
    Suite *s = suite_create("suites");
    TCase *math = tcase_create("metrics");
    tcase_add_test(math, test_log_softmax);
    tcase_add_test(math, test_kl);
    tcase_add_test(math, test_kl_topk);
    tcase_add_test(math, test_nmse_percentiles);
    tcase_add_test(math, test_top_k);
    suite_add_tcase(s, math);
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("suites"));
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", g_dir);
    if (system(cmd) != 0)
        return 1;
    TCase *q = tcase_create("qualify");
    tcase_set_timeout(q, 300);
    tcase_add_checked_fixture(q, write_matrix, NULL);
    tcase_add_test(q, test_clean_run_passes);
    tcase_add_test(q, test_perturbed_logits_fail_accuracy);
    tcase_add_test(q, test_leak_fails_soak);
    tcase_add_test(q, test_nondeterminism_fails_functional);
    tcase_add_loop_test(q, test_setting_faults_fail_invariance, 0, 3);
    suite_add_tcase(s, q);
    return gt_test_run(s);
}
