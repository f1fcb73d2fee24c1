/* test_anchors.c: anchors (matrix.h, suites/anchor.c): every shipped model
 * has an anchors file that covers its quants; a file that lacks one of the
 * matrix's quants is refused by name; a bug every backend shares (the
 * reference included) passes the comparisons but fails the anchor; a
 * bound the matrix writes for a cell replaces the file's there. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "testutil.h"

static char g_dir[4096];
static char g_out[65536];

#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)
#define BIN "'" GT_BINARY_DIR "/gauntlet'"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

static const char *const SHIPPED[] = {"quickstart", "ci",   "nightly", "release",
                                      "serve",      "peer", "kquants"};

START_TEST(shipped_models_are_anchored)
{
    for (size_t i = 0; i < sizeof SHIPPED / sizeof *SHIPPED; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/matrices/%s.json", GT_SOURCE_DIR, SHIPPED[i]);
        char *text = slurp(path);
        ck_assert_ptr_nonnull(text);
        cJSON *d = cJSON_Parse(text);
        free(text);
        const cJSON *m;
        int count = 0;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(d, "models"))
        {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(m, "anchors");
            ck_assert_msg(cJSON_IsString(a), "matrices/%s.json: model %s has no anchors",
                          SHIPPED[i], cJSON_GetObjectItemCaseSensitive(m, "id")->valuestring);
            count++;
        }
        ck_assert_int_gt(count, 0);
        cJSON_Delete(d);
        /* plan loads every anchors file and checks it covers the quants. */
        int rc = run(BIN " plan --no-probe '%s'", path);
        ck_assert_msg(rc == 0, "matrices/%s.json: plan exit %d\n%s", SHIPPED[i], rc, g_out);
    }
}
END_TEST

/* tolerances: the matrix's "tolerances" object, or NULL for none. */
static void write_matrix_tol(const char *anchors_file, const char *tolerances)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"anc\",\n"
             " \"models\": [{\"id\": \"synth-tiny\", \"anchors\": \"%s\",\n"
             "              \"synth\": {\"preset\": \"tiny\", \"seed\": 1}}],\n"
             " \"quants\": [\"f32\", \"q8_0\"], \"backends\": [\"reference\", \"cpu\"],\n"
             " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
             "%s%s%s"
             " \"tiers\": {\"t\": {\"suites\": [\"smoke\"]}}}\n",
             anchors_file, tolerances ? " \"tolerances\": " : "", tolerances ? tolerances : "",
             tolerances ? ",\n" : "");
    gt_test_write_file(gt_test_join(g_dir, "anc.json"), text, strlen(text));
}

static void write_matrix(const char *anchors_file)
{
    write_matrix_tol(anchors_file, NULL);
}

START_TEST(missing_quant_is_refused)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/matrices/anchors/synth-tiny.json", GT_SOURCE_DIR);
    char *text = slurp(path);
    ck_assert_ptr_nonnull(text);
    cJSON *d = cJSON_Parse(text);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "quants"), "q8_0");
    char *out = cJSON_Print(d);
    gt_test_write_file(gt_test_join(g_dir, "no-q8.json"), out, strlen(out));
    free(out);
    cJSON_Delete(d);
    write_matrix("no-q8.json");
    int rc = run(BIN " plan --no-probe anc.json");
    ck_assert_msg(rc == 2 && strstr(g_out, "has no anchor for quant q8_0"), "exit %d\n%s", rc,
                  g_out);
    rc = run(BIN " qualify anc.json --db r.sqlite");
    ck_assert_msg(rc == 2 && strstr(g_out, "has no anchor for quant q8_0"), "exit %d\n%s", rc,
                  g_out);
    write_matrix("absent.json");
    rc = run(BIN " plan --no-probe anc.json");
    ck_assert_msg(rc == 2 && strstr(g_out, "cannot open anchors file"), "exit %d\n%s", rc, g_out);
}
END_TEST

/* graph-drop-last is in the runtime's graph: the reference has it too, so
 * every comparison with the reference holds and only the anchor sees it. */
START_TEST(shared_bug_fails_the_anchor)
{
    gt_test_sh("cp '%s/matrices/anchors/synth-tiny.json' '%s/st.json'", GT_SOURCE_DIR, g_dir);
    write_matrix("st.json");
    int rc = run(BIN " qualify anc.json --db clean.sqlite --no-progress");
    ck_assert_msg(rc == 0 && strstr(g_out, "gate: PASS (4 cells: 4 pass"), "exit %d\n%s", rc,
                  g_out);
    rc = run("GT_FAULT=graph-drop-last " BIN " qualify anc.json --db fault.sqlite --no-progress");
    ck_assert_msg(rc == 1 && strstr(g_out, "gate: FAIL (4 cells: 4 fail") &&
                      strstr(g_out, "anchor.ppl_rel_err"),
                  "exit %d\n%s", rc, g_out);
    /* The comparisons with the (equally broken) reference still pass: the
     * anchor is the only check that fails. */
    rc = run("sqlite3 fault.sqlite \"select count(*) from results where status = 'fail' and "
             "suite != 'anchor'\"");
    ck_assert_msg(rc == 0 && atoi(g_out) == 0, "non-anchor failures: %s", g_out);
}
END_TEST

/* A bound the matrix writes for a cell (an 8-bit activation profile's, in
 * ci.json) replaces the anchors file's on that cell only: here an
 * impossible one on the cpu cells fails them, naming it, while the
 * reference cells keep the file's bound and pass. */
START_TEST(matrix_bound_replaces_the_files)
{
    gt_test_sh("cp '%s/matrices/anchors/synth-tiny.json' '%s/st.json'", GT_SOURCE_DIR, g_dir);
    write_matrix_tol("st.json", "{\"cells\": [{\"cell\": \"*/*/cpu/*\", \"metrics\": "
                                "{\"anchor.ppl_rel_err\": {\"max\": 1e-12, "
                                "\"note\": \"impossible, for the test\"}}}]}");
    int rc = run(BIN " qualify anc.json --db tol.sqlite --no-progress");
    ck_assert_msg(rc == 1 && strstr(g_out, "gate: FAIL (4 cells: 2 pass, 2 fail") &&
                      strstr(g_out, "synth-tiny/q8_0/cpu/default: fail: anchor.ppl_rel_err") &&
                      strstr(g_out, "tolerance <= 1e-12"),
                  "exit %d\n%s", rc, g_out);
    rc = run("sqlite3 tol.sqlite \"select count(*) from metrics m join cells c on c.id = m.cell "
             "where m.name = 'ppl_rel_err' and c.backend = 'reference' and m.tolerance >= 0.002 "
             "and m.verdict = 'pass'\"");
    ck_assert_msg(rc == 0 && atoi(g_out) == 2, "reference cells with the file's bound: %s", g_out);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("anchors"));
    if (gt_test_sh("mkdir -p '%s'", g_dir) != 0) {
        fprintf(stderr, "cannot make %s\n", g_dir);
        return 1;
    }
    Suite *s = suite_create("anchors");
    TCase *tc = tcase_create("anchors");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, shipped_models_are_anchored);
    tcase_add_test(tc, missing_quant_is_refused);
    tcase_add_test(tc, shared_bug_fails_the_anchor);
    tcase_add_test(tc, matrix_bound_replaces_the_files);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
