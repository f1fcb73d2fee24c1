/* test_long.c: the long suite end to end (`gauntlet qualify`, the built
 * binary), on a synthetic model of stories260K's shape (trained context
 * 2048) at 256 and 512 tokens, reference and cpu:
 *   - every check it promises is recorded and judged (passkey per length
 *     and depth against the reference's answer, drift per checkpoint
 *     within the drift bound, K/V bytes against the plan), the reference's
 *     outputs are cached and a second run does not recompute them;
 *   - a fault that appears only past position 300 (GT_FAULT=pos-wrap@300 on
 *     cpu) passes a tier of the other suites and fails the long tier at
 *     the 512 checkpoint only, and the localizer names a RoPE node;
 *   - lengths the model was not trained for, or out of order, are refused
 *     by name. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static char g_dir[4096];
static char g_out[65536];

#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)
#define BIN "'" GT_BINARY_DIR "/gauntlet'"
#define path_in(name) gt_test_join(g_dir, name)
#define db_open(name) gt_test_db_open(path_in(name))
#define q_int(...) gt_test_q_int(__VA_ARGS__)
#define q_text(...) gt_test_q_text(__VA_ARGS__)

/* The matrix: tier "long" (the long suite at `lengths`) and tier "short"
 * (smoke, functional, accuracy: nothing past a few hundred positions). */
static const char *matrix(const char *name, const char *lengths)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"long-test\",\n"
             " \"models\": [{\"id\": \"synth-stories\", \"synth\": {\"preset\": \"stories260k\","
             " \"seed\": 3}}],\n"
             " \"quants\": [\"f16\"],\n"
             " \"backends\": [\"reference\", \"cpu\"],\n"
             " \"defaults\": {\"timeout_s\": 300, \"threads\": 1},\n"
             " \"tolerances\": {\"default\": {\"long.drift_kld_mean\": {\"max\": 1e-9}}},\n"
             " \"tiers\": {\"long\": {\"suites\": [\"long\"], \"settings\": {\"long\":\n"
             "     {\"lengths\": %s, \"n_scored\": 32, \"depths\": [10, 90]}}},\n"
             "   \"picked\": {\"suites\": [\"smoke\", \"long\"], \"settings\": {\"smoke\":\n"
             "     {\"n_tokens\": 4}, \"long\": {\"lengths\": %s, \"n_scored\": 32, \"depths\": [50],\n"
             "     \"cells\": [\"*/reference/*\"]}}},\n"
             "   \"short\": {\"suites\": [\"smoke\", \"functional\", \"accuracy\"],\n"
             "     \"settings\": {\"smoke\": {\"n_tokens\": 8, \"reference\": true},\n"
             "       \"functional\": {\"n_tokens\": 8, \"prefill_tokens\": 32},\n"
             "       \"accuracy\": {\"max_scored\": 32, \"max_prompts\": 2, \"n_gen\": 4}}}},\n"
             " \"gate\": {\"allowed\": [\"pass\"]}}\n",
             lengths, lengths);
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    gt_test_write_file(path, text, strlen(text));
    return path;
}

#define CELL_CHECKS(h, cell, pattern, status)                                                  \
    q_int(h,                                                                                   \
          "SELECT COUNT(*) FROM results r JOIN cells c ON c.id = r.cell WHERE c.cell_id LIKE"   \
          " '%s' AND r.suite = 'long' AND r.check_name LIKE '%s' AND r.status = '%s'",          \
          cell, pattern, status)

START_TEST(long_checks_are_recorded_judged_and_cached)
{
    const char *m = matrix("m.json", "[256, 512]");
    int rc = run(BIN " qualify '%s' --tier long --db a.sqlite --run-id one --html a.html", m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "gate: PASS"));
    /* the report's long part: both cells, the drift drawn */
    ck_assert_int_eq(run("grep -c 'id=\"long-c' a.html"), 0);
    ck_assert_int_eq(run("grep -c '<polyline' a.html"), 0);
    sqlite3 *h = db_open("a.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"), 2);
    for (int i = 0; i < 2; i++) {
        const char *cell = i ? "%/cpu/%" : "%/reference/%";
        /* 2 lengths x 2 depths of passkey, a drift and a kv check per length */
        ck_assert_int_eq(CELL_CHECKS(h, cell, "passkey_L%", "pass"), 4);
        ck_assert_int_eq(CELL_CHECKS(h, cell, "passkey_L512_d90", "pass"), 1);
        ck_assert_int_eq(CELL_CHECKS(h, cell, "drift_L256", "pass"), 1);
        ck_assert_int_eq(CELL_CHECKS(h, cell, "drift_L512", "pass"), 1);
        ck_assert_int_eq(CELL_CHECKS(h, cell, "kv_L%", "pass"), 2);
        ck_assert_int_eq(CELL_CHECKS(h, cell, "%", "fail"), 0);
    }
    /* judged, not only recorded: the drift and the K/V bytes have bounds */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE suite = 'long' AND name ="
                              " 'drift_kld_mean' AND verdict = 'pass' AND comparator = '<='"
                              " AND tolerance = 1e-9"),
                     2);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE suite = 'long' AND name ="
                              " 'kv_ratio' AND verdict = 'pass' AND value = 1"),
                     2);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE suite = 'long' AND name ="
                              " 'passkey_agreement' AND verdict = 'pass' AND value = 1"),
                     2);
    /* the reference's outputs: 4 answers and 2 checkpoints' summaries */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE meta = 'long passkey answer'"),
                     4);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE meta = 'long drift summaries'"),
                     2);
    /* the series the report draws: 4 drift points per checkpoint (32
     * positions in bins of 8), K/V bytes, plan and RSS per length */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM series WHERE suite = 'long' AND name ="
                              " 'drift_kld'"),
                     2 * 8);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM series WHERE name = 'drift_kld' AND x = 511"),
                     2);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM series a JOIN series b ON a.cell = b.cell AND"
                              " a.x = b.x WHERE a.name = 'kv_bytes' AND b.name = 'kv_plan' AND"
                              " a.y = b.y AND a.y > 0"),
                     2 * 2);
    /* the cpu cell is judged against the reference, not itself */
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT r.message FROM results r JOIN cells c ON"
                                           " c.id = r.cell WHERE c.backend = 'cpu' AND"
                                           " r.check_name = 'drift_L512'"),
                                 "over positions 480..511"));
    sqlite3_close(h);

    /* A second run finds every reference output cached. */
    rc = run(BIN " qualify '%s' --tier long --db a.sqlite --run-id two", m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    h = db_open("a.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE meta LIKE 'long %%'"), 6);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells c JOIN runs u ON u.id = c.run_id"
                              " WHERE u.run_key LIKE '%%/two' AND c.log LIKE '%%reference at %%'"),
                     0);
    sqlite3_close(h);
}
END_TEST

START_TEST(position_fault_fails_only_the_long_checkpoint_past_it)
{
    const char *m = matrix("f.json", "[256, 512]");
    int rc = run("GT_FAULT=pos-wrap@300 GT_FAULT_BACKEND=cpu " BIN
                 " qualify '%s' --tier short --db f.sqlite",
                 m);
    ck_assert_msg(rc == 0, "the short tier must not see a fault past position 300: exit %d:\n%.3000s",
                  rc, g_out);
    rc = run("GT_FAULT=pos-wrap@300 GT_FAULT_BACKEND=cpu " BIN
             " qualify '%s' --tier long --db f.sqlite",
             m);
    ck_assert_msg(rc == 1, "exit %d:\n%.3000s", rc, g_out);
    sqlite3 *h = db_open("f.sqlite");
    const char *run_key = "(SELECT MAX(id) FROM runs)";
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE run_id = %s AND backend ="
                              " 'reference' AND status = 'pass'", run_key),
                     1);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE run_id = %s AND backend = 'cpu'"
                              " AND status = 'fail'", run_key),
                     1);
    ck_assert_int_eq(CELL_CHECKS(h, "%/cpu/%", "drift_L256", "pass"), 1);
    ck_assert_int_eq(CELL_CHECKS(h, "%/cpu/%", "drift_L512", "fail"), 1);
    ck_assert_int_eq(CELL_CHECKS(h, "%/cpu/%", "kv_L%", "fail"), 0);
    /* the localizer ran on the long text (long.localize, a failure) and
     * names layer 0's Q RoPE, the first node the wrap touches */
    const char *loc = q_text(h, "SELECT r.status || ': ' || r.message FROM results r JOIN cells c"
                                " ON c.id = r.cell WHERE c.run_id = %s AND c.backend = 'cpu' AND"
                                " r.suite = 'long' AND r.check_name = 'localize'", run_key);
    ck_assert_msg(loc && strncmp(loc, "fail: diverges at blk.0.q_rope (ROPE", 36) == 0,
                  "localize: %s", loc ? loc : "(none)");
    sqlite3_close(h);
}
END_TEST

START_TEST(cells_the_matrix_leaves_out_owe_no_bounds)
{
    /* The long suite runs on the reference cell only; the cpu cell reports
     * one matrix skip and is not failed for the long bound the matrix wrote
     * (long.drift_kld_mean), which only cells that run the suite report. */
    const char *m = matrix("picked.json", "[256]");
    int rc = run(BIN " qualify '%s' --tier picked --db s.sqlite", m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    sqlite3 *h = db_open("s.sqlite");
    ck_assert_int_eq(CELL_CHECKS(h, "%/cpu/%", "long", "skip"), 1);
    ck_assert_int_eq(CELL_CHECKS(h, "%/cpu/%", "tolerances", "fail"), 0);
    ck_assert_int_eq(CELL_CHECKS(h, "%/reference/%", "drift_L256", "pass"), 1);
    sqlite3_close(h);
}
END_TEST

START_TEST(lengths_the_model_cannot_hold_are_refused_by_name)
{
    const char *m = matrix("past.json", "[4096]");
    int rc = run(BIN " qualify '%s' --tier long --db p.sqlite", m);
    ck_assert_int_eq(rc, 1);
    sqlite3 *h = db_open("p.sqlite");
    const char *msg = q_text(h, "SELECT message FROM results WHERE suite = 'long' AND status ="
                                " 'error' LIMIT 1");
    ck_assert_msg(msg && strstr(msg, "past synth-stories's trained context (2048)"), "%s",
                  msg ? msg : "(no error recorded)");
    sqlite3_close(h);
    m = matrix("order.json", "[512, 256]");
    ck_assert_int_eq(run(BIN " qualify '%s' --tier long --db o.sqlite", m), 1);
    ck_assert_msg(strstr(g_out, "lengths must ascend") != NULL, "%.2000s", g_out);
    m = matrix("type.json", "\"long\"");
    ck_assert_int_eq(run(BIN " plan --no-probe '%s'", m), 2);
    ck_assert_msg(strstr(g_out, "an array of integers") != NULL, "%.2000s", g_out);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("long"));
    mkdir(g_dir, 0755);
    Suite *s = suite_create("long");
    TCase *tc = tcase_create("long");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, long_checks_are_recorded_judged_and_cached);
    tcase_add_test(tc, position_fault_fails_only_the_long_checkpoint_past_it);
    tcase_add_test(tc, cells_the_matrix_leaves_out_owe_no_bounds);
    tcase_add_test(tc, lengths_the_model_cannot_hold_are_refused_by_name);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
