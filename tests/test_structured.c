/* test_structured.c: the structured suite end to end (`gauntlet qualify`,
 * the built binary) on a synthetic model, reference and cpu, and on
 * `gauntlet serve -b cpu` over HTTP:
 *   - every check it promises is recorded and judged: each committed case's
 *     answer validated by the jsonschema package, agreement with the
 *     reference's bytes, each malformed schema refused by name; over HTTP
 *     also the streamed answer;
 *   - a cpu whose logits drift (GT_FAULT=logit-noise on cpu only) still
 *     writes valid documents, and fails agreement naming where it parted;
 *   - a validator that rejects the documents fails the cell, and one that
 *     cannot run makes it an error: an unjudged document is never valid. */
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

/* A matrix of a synthetic model of stories260K's shape (f16) on backends
 * (a JSON array's inside) whose tier runs structured with extra settings
 * (a JSON object's inside). */
static const char *matrix(const char *name, const char *backends, const char *extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"structured-test\",\n"
             " \"models\": [{\"id\": \"synth-stories\", \"synth\": {\"preset\":"
             " \"stories260k\", \"seed\": 3}}],\n"
             " \"quants\": [\"f16\"],\n"
             " \"backends\": [%s],\n"
             " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
             " \"tiers\": {\"st\": {\"suites\": [\"structured\"], \"settings\": {\"structured\":"
             " {%s}}}},\n"
             " \"gate\": {\"allowed\": [\"pass\"]}}\n",
             backends, extra);
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    gt_test_write_file(path, text, strlen(text));
    return path;
}

#define CHECKS(h, backend, pattern, status)                                                     \
    q_int(h,                                                                                    \
          "SELECT COUNT(*) FROM results r JOIN cells c ON c.id = r.cell WHERE c.backend = '%s'" \
          " AND r.suite = 'structured' AND r.check_name LIKE '%s' AND r.status = '%s'",         \
          backend, pattern, status)

START_TEST(every_case_is_validated_compared_and_refused)
{
    const char *m = matrix("m.json", "\"reference\", \"cpu\"", "");
    int rc = run("GT_PYORACLE='%s' " BIN " qualify '%s' --db a.sqlite", gt_test_pyoracle(), m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    sqlite3 *h = db_open("a.sqlite");
    for (int i = 0; i < 2; i++) {
        const char *b = i ? "cpu" : "reference";
        ck_assert_int_eq(CHECKS(h, b, "valid\\_%' ESCAPE '\\", "pass"), 5);
        ck_assert_int_eq(CHECKS(h, b, "refuse\\_%' ESCAPE '\\", "pass"), 3);
        ck_assert_int_eq(CHECKS(h, b, "agreement", "pass"), 1);
        ck_assert_int_eq(CHECKS(h, b, "%", "fail"), 0);
    }
    /* judged, not only recorded */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE suite = 'structured' AND"
                              " verdict = 'pass' AND value = 1 AND comparator = '>=' AND"
                              " tolerance = 1"),
                     2 * 3);
    /* the refusal names the keyword, and what the validator saw is kept */
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT message FROM results WHERE check_name ="
                                           " 'refuse_pattern' LIMIT 1"),
                                 "unsupported JSON Schema keyword \"pattern\""));
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT message FROM results WHERE check_name ="
                                           " 'valid_tool_call' LIMIT 1"),
                                 "\"get_weather\""));
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE meta LIKE 'structured%%'"), 1);
    sqlite3_close(h);
}
END_TEST

START_TEST(drifting_logits_stay_valid_and_fail_agreement)
{
    const char *m = matrix("m.json", "\"reference\", \"cpu\"", "");
    int rc = run("GT_FAULT=logit-noise=0.3 GT_FAULT_BACKEND=cpu GT_PYORACLE='%s' " BIN
                 " qualify '%s' --db b.sqlite",
                 gt_test_pyoracle(), m);
    ck_assert_msg(rc == 1, "exit %d:\n%.3000s", rc, g_out);
    sqlite3 *h = db_open("b.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT GROUP_CONCAT(backend || ' ' || status) FROM cells"),
                     "reference pass,cpu fail\n");
    ck_assert_int_eq(CHECKS(h, "cpu", "valid\\_%' ESCAPE '\\", "pass"), 5);
    ck_assert_int_eq(CHECKS(h, "cpu", "agreement", "fail"), 1);
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT r.message FROM results r JOIN cells c ON"
                                           " c.id = r.cell WHERE c.backend = 'cpu' AND"
                                           " r.check_name = 'agreement'"),
                                 "parts at byte"));
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics m JOIN cells c ON c.id = m.cell"
                              " WHERE c.backend = 'cpu' AND m.name = 'ref_agreement' AND"
                              " m.verdict = 'fail' AND m.value < 1"),
                     1);
    sqlite3_close(h);
}
END_TEST

START_TEST(a_rejecting_or_missing_validator_is_never_a_pass)
{
    /* a validator that rejects every document it is given */
    const char *m = matrix("reject.json", "\"reference\"",
                           "\"validator\": [\"python3\", \"-c\", \"import sys\\n"
                           "for d in sys.argv[2::2]: print('FAIL', d, 'against it: rejected by "
                           "the test')\\nsys.exit(1)\", \"x\"]");
    int rc = run(BIN " qualify '%s' --db c.sqlite", m);
    ck_assert_msg(rc == 1, "exit %d:\n%.3000s", rc, g_out);
    sqlite3 *h = db_open("c.sqlite");
    ck_assert_int_eq(CHECKS(h, "reference", "valid\\_%' ESCAPE '\\", "fail"), 5);
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT message FROM results WHERE check_name ="
                                           " 'valid_flat'"),
                                 "rejected by the test"));
    sqlite3_close(h);
    /* one that cannot run: the cell is an error, not a pass */
    m = matrix("missing.json", "\"reference\"", "\"validator\": [\"/nonexistent/validator\"]");
    rc = run(BIN " qualify '%s' --db d.sqlite", m);
    ck_assert_msg(rc == 1, "exit %d:\n%.3000s", rc, g_out);
    h = db_open("d.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "error\n");
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT reason FROM cells"), "could not judge"));
    ck_assert_int_eq(CHECKS(h, "reference", "%", "pass"), 0);
    sqlite3_close(h);
}
END_TEST

/* The same suite through gauntlet serve's response_format. */
START_TEST(serve_answers_over_http_as_the_reference)
{
    const char *m = matrix("http.json",
                           "{\"id\": \"serve-cpu\", \"backend\": \"http\", \"endpoint\":"
                           " \"http://127.0.0.1:{port}/v1\", \"start\": [\"{gauntlet}\", \"serve\","
                           " \"-m\", \"{model_path}\", \"-b\", \"cpu\", \"--port\", \"{port}\","
                           " \"-t\", \"1\", \"-q\"], \"start_timeout_s\": 60}",
                           "");
    int rc = run("GT_PYORACLE='%s' " BIN " qualify '%s' --db e.sqlite", gt_test_pyoracle(), m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    sqlite3 *h = db_open("e.sqlite");
    ck_assert_int_eq(CHECKS(h, "serve-cpu", "valid\\_%' ESCAPE '\\", "pass"), 5);
    ck_assert_int_eq(CHECKS(h, "serve-cpu", "refuse\\_%' ESCAPE '\\", "pass"), 3);
    ck_assert_int_eq(CHECKS(h, "serve-cpu", "stream", "pass"), 1);
    ck_assert_int_eq(CHECKS(h, "serve-cpu", "agreement", "pass"), 1);
    ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT message FROM results WHERE check_name ="
                                           " 'refuse_unknown_type'"),
                                 "HTTP 400"));
    sqlite3_close(h);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("structured"));
    mkdir(g_dir, 0755);
    Suite *s = suite_create("structured");
    TCase *tc = tcase_create("structured");
    tcase_set_timeout(tc, 300);
    const bool oracle = gt_test_sh("PYTHONPATH='%s' python3 -c 'import jsonschema' 2>/dev/null",
                                   gt_test_pyoracle()) == 0;
    const char *why = "python's jsonschema does not import from the oracle environment "
                      "(ci/test.sh installs it: pip install --target $GT_PYORACLE jsonschema)";
    gt_test_add_if(tc, every_case_is_validated_compared_and_refused, oracle, why);
    gt_test_add_if(tc, drifting_logits_stay_valid_and_fail_agreement, oracle, why);
    tcase_add_test(tc, a_rejecting_or_missing_validator_is_never_a_pass);
    gt_test_add_if(tc, serve_answers_over_http_as_the_reference, oracle, why);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
