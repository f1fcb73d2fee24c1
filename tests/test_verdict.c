/* test_verdict.c: a cell's status from its worker's lines (harness/run/
 * verdict.c), for the rule that zero coverage is a failure.
 *
 * The lines are what `gauntlet worker` writes (worker.c: result, metric,
 * skip, done), fed to gt_verdict_judge_cell with a cell whose tier runs
 * the named suites, as `gauntlet qualify` does:
 *   - a suite whose every check was skipped fails the cell, "no coverage:
 *     suite accuracy ran no check (accuracy.greedy: ...)";
 *   - so does a suite of the tier that reported nothing, or only "info"
 *     metrics (numbers recorded without a tolerance judge nothing);
 *   - a cell in which no check ran at all fails, even when every skip is
 *     the matrix's own choice ("skipped by the matrix: ...");
 *   - the control: smoke passing beside a performance suite that the tier's
 *     "cells" setting leaves out is a pass;
 *   - a cell that fails, or skips, keeps its own status and reason;
 *   - without a cell (gt_verdict_judge) the suites are those the lines name,
 *     and a suite with no HTTP variant ("suite soak does not run over HTTP")
 *     is zero coverage, since no shipped matrix asks for one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "testutil.h"
#include "verdict.h"

#define SMOKE_PASS                                                                              \
    "{\"t\":\"result\",\"suite\":\"smoke\",\"check\":\"load\",\"status\":\"pass\","          \
    "\"message\":\"m.gguf\"}\n"                                                               \
    "{\"t\":\"metric\",\"suite\":\"smoke\",\"name\":\"nonfinite\",\"value\":0,\"unit\":"      \
    "\"count\",\"tolerance\":0,\"comparator\":\"==\",\"verdict\":\"pass\",\"better\":-1,"     \
    "\"regress\":false}\n"
#define PERF_MATRIX_SKIP                                                                        \
    "{\"t\":\"result\",\"suite\":\"performance\",\"check\":\"measured\",\"status\":\"skip\","  \
    "\"message\":\"skipped by the matrix: cell m/f32/reference/default is not in this tier's " \
    "performance cells\"}\n"
#define DONE "{\"t\":\"done\",\"worker_s\":0.5}\n"

typedef struct judged {
    gt_status raw, final;
    char reason[2048];
} judged;

/* The outcome of a worker that exited 0 after writing text (lines). */
static gt_outcome outcome(const char *text)
{
    gt_outcome o = {.end = GT_END_EXITED, .code = 0, .lines = cJSON_CreateArray(),
                    .log = strdup(""), .worker_s = 0.5};
    char *copy = strdup(text), *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_msg(cJSON_IsObject(j), "bad test line: %s", l);
        cJSON_AddItemToArray(o.lines, j);
    }
    free(copy);
    return o;
}

/* Judges text as a cell expected to pass whose tier runs suites. */
static judged judge_cell(const char *const *suites, int n, const char *text)
{
    gt_cell c = {.expected = GT_ST_PASS, .expect_reason = NULL, .timeout_s = 60,
                 .suites = suites, .n_suites = n};
    snprintf(c.id, sizeof c.id, "m/f32/reference/default");
    gt_outcome o = outcome(text);
    judged j;
    gt_verdict_judge_cell(&o, &c, &j.raw, &j.final, j.reason, sizeof j.reason);
    cJSON_Delete(o.lines);
    free(o.log);
    return j;
}

static void expect(const judged *j, gt_status st, const char *reason_prefix)
{
    ck_assert_msg(j->raw == st && j->final == st, "raw %s, final %s (want %s): %s",
                  gt_status_name(j->raw), gt_status_name(j->final), gt_status_name(st),
                  j->reason);
    ck_assert_msg(!strncmp(j->reason, reason_prefix, strlen(reason_prefix)),
                  "reason \"%s\", want it to start \"%s\"", j->reason, reason_prefix);
}

START_TEST(all_skipped_suite_is_no_coverage)
{
    static const char *const S[] = {"smoke", "accuracy"};
    judged j = judge_cell(S, 2,
                          SMOKE_PASS
                          "{\"t\":\"result\",\"suite\":\"accuracy\",\"check\":\"greedy\","
                          "\"status\":\"skip\",\"message\":\"no prompt of p.jsonl fits a context"
                          " of 64\"}\n" DONE);
    expect(&j, GT_ST_FAIL,
           "no coverage: suite accuracy ran no check (accuracy.greedy: no prompt of p.jsonl fits"
           " a context of 64)");
}
END_TEST

START_TEST(silent_or_info_only_suite_is_no_coverage)
{
    /* functional is in the tier but wrote no line at all */
    static const char *const S[] = {"smoke", "functional"};
    judged j = judge_cell(S, 2, SMOKE_PASS DONE);
    expect(&j, GT_ST_FAIL,
           "no coverage: suite functional ran no check (no result, no judged metric)");
    /* a number recorded without a tolerance judges nothing */
    j = judge_cell(S, 2,
                   SMOKE_PASS
                   "{\"t\":\"metric\",\"suite\":\"functional\",\"name\":\"seed_varies\","
                   "\"value\":1,\"unit\":\"\",\"tolerance\":null,\"comparator\":\"\",\"verdict\":"
                   "\"info\",\"better\":0,\"regress\":false}\n" DONE);
    expect(&j, GT_ST_FAIL, "no coverage: suite functional ran no check");
}
END_TEST

START_TEST(nothing_ran_anywhere_is_no_coverage)
{
    /* the matrix left this cell out of performance, and performance is all
     * the tier runs: nothing was qualified */
    static const char *const S[] = {"performance"};
    judged j = judge_cell(S, 1, PERF_MATRIX_SKIP DONE);
    expect(&j, GT_ST_FAIL,
           "no coverage: no check ran in any suite (performance.measured: skipped by the matrix:"
           " cell m/f32/reference/default is not in this tier's performance cells)");
    /* the same with soak left out too */
    static const char *const S2[] = {"performance", "soak"};
    j = judge_cell(S2, 2,
                   PERF_MATRIX_SKIP
                   "{\"t\":\"result\",\"suite\":\"soak\",\"check\":\"soak\",\"status\":\"skip\","
                   "\"message\":\"skipped by the matrix: cell m/f32/reference/default is not in"
                   " this tier's soak cells\"}\n" DONE);
    expect(&j, GT_ST_FAIL, "no coverage: no check ran in any suite (performance.measured: ");
}
END_TEST

START_TEST(matrix_skipped_suite_beside_a_passing_one_passes)
{
    static const char *const S[] = {"smoke", "performance"};
    judged j = judge_cell(S, 2, SMOKE_PASS PERF_MATRIX_SKIP DONE);
    expect(&j, GT_ST_PASS, "");
    /* and an ordinary skip of one check in a suite that ran others */
    j = judge_cell(S, 2,
                   SMOKE_PASS
                   "{\"t\":\"result\",\"suite\":\"smoke\",\"check\":\"chat\",\"status\":\"skip\","
                   "\"message\":\"no chat template\"}\n"
                   "{\"t\":\"result\",\"suite\":\"performance\",\"check\":\"measured\","
                   "\"status\":\"pass\",\"message\":\"5 reps\"}\n" DONE);
    expect(&j, GT_ST_PASS, "");
}
END_TEST

START_TEST(failing_and_skipped_cells_keep_their_status)
{
    static const char *const S[] = {"smoke", "accuracy"};
    judged j = judge_cell(S, 2,
                          "{\"t\":\"result\",\"suite\":\"smoke\",\"check\":\"generate\","
                          "\"status\":\"fail\",\"message\":\"NaN in logits\"}\n"
                          "{\"t\":\"result\",\"suite\":\"accuracy\",\"check\":\"run\","
                          "\"status\":\"skip\",\"message\":\"not run: smoke failed\"}\n" DONE);
    expect(&j, GT_ST_FAIL, "smoke.generate: NaN in logits");
    j = judge_cell(S, 2,
                   "{\"t\":\"skip\",\"reason\":\"unsupported: op/type on cpu: MUL_MAT q2_k\"}\n"
                   DONE);
    expect(&j, GT_ST_SKIP, "unsupported: op/type on cpu");
}
END_TEST

START_TEST(without_a_cell_the_lines_name_the_suites)
{
    gt_outcome o = outcome(SMOKE_PASS
                           "{\"t\":\"result\",\"suite\":\"server\",\"check\":\"start\","
                           "\"status\":\"pass\",\"message\":\"healthy in 0.1 s\"}\n"
                           "{\"t\":\"result\",\"suite\":\"soak\",\"check\":\"run\","
                           "\"status\":\"skip\",\"message\":\"suite soak does not run over HTTP\"}"
                           "\n" DONE);
    judged j;
    gt_verdict_judge(&o, 60, GT_ST_PASS, NULL, &j.raw, &j.final, j.reason, sizeof j.reason);
    cJSON_Delete(o.lines);
    free(o.log);
    expect(&j, GT_ST_FAIL,
           "no coverage: suite soak ran no check (soak.run: suite soak does not run over HTTP)");
    /* the harness's own checks (server.start) are no suite's coverage */
    o = outcome("{\"t\":\"result\",\"suite\":\"server\",\"check\":\"start\",\"status\":\"pass\","
                "\"message\":\"healthy\"}\n" DONE);
    gt_verdict_judge(&o, 60, GT_ST_PASS, NULL, &j.raw, &j.final, j.reason, sizeof j.reason);
    cJSON_Delete(o.lines);
    free(o.log);
    expect(&j, GT_ST_FAIL, "no coverage: no check ran in any suite");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("verdict");
    TCase *tc = tcase_create("verdict");
    tcase_add_test(tc, all_skipped_suite_is_no_coverage);
    tcase_add_test(tc, silent_or_info_only_suite_is_no_coverage);
    tcase_add_test(tc, nothing_ran_anywhere_is_no_coverage);
    tcase_add_test(tc, matrix_skipped_suite_beside_a_passing_one_passes);
    tcase_add_test(tc, failing_and_skipped_cells_keep_their_status);
    tcase_add_test(tc, without_a_cell_the_lines_name_the_suites);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
