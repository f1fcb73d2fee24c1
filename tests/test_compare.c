/* test_compare.c: `gauntlet compare`, run as the built binary.
 *
 * Backends: stories260K (its synthetic stand-in without ../shared,
 * gt_test_llama) on cpu vs reference and reference vs reference,
 * with and without --quant, on a prompt file written here: the JSON has a
 * divergence index per prompt, per-token KL for each of A's tokens, top-1 in
 * [0, 1]; the same backend on both sides is identical with KL exactly 0 and
 * top-1 1; a random q4_0 model diverges between cpu and reference and the
 * divergence index and tokens match the token lists; the terminal table is
 * printed, plain when piped. Runs: two
 * synthetic runs (report_fixture.c) give the status changes the fixture
 * planted. Bad prompt files are usage errors naming the line. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../harness/store/db.c"
#include "report_fixture.c"
#include "testutil.h"

#define GAUNTLET GT_BINARY_DIR "/gauntlet"

static const char *model;



static const char *prompts(void)
{
    static char path[512];
    snprintf(path, sizeof path, "%s", gt_test_tmp("prompts.jsonl"));
    const char *text = "{\"id\": \"p01\", \"prompt\": \"Once upon a time\"}\n"
                       "# comments and blank lines are skipped\n\n"
                       "{\"id\": \"p02\", \"prompt\": \"The little dog\"}\n"
                       "{\"id\": \"p03\", \"prompt\": \"Lily wanted to\"}\n";
    gt_test_write_file(path, text, strlen(text));
    return path;
}

/* Runs compare and returns the parsed JSON (stdout kept in *out_text). */
static cJSON *run_compare_model(const char *m, const char *sides, const char *extra,
                               char **out_text)
{
    char json[512], out[512];
    snprintf(json, sizeof json, "%s", gt_test_tmp("cmp.json"));
    snprintf(out, sizeof out, "%s", gt_test_tmp("cmp.txt"));
    const char *p = prompts();
    ck_assert_int_eq(gt_test_sh("%s compare -m %s %s --prompts %s %s --json %s > %s", GAUNTLET,
                        m, sides, p, extra, json, out),
                     0);
    char *j = gt_test_slurp(json);
    ck_assert_ptr_nonnull(j);
    cJSON *root = cJSON_Parse(j);
    free(j);
    ck_assert_ptr_nonnull(root);
    *out_text = gt_test_slurp(out);
    return root;
}

static cJSON *run_compare(const char *sides, const char *extra, char **out_text)
{
    char e[700];
    snprintf(e, sizeof e, "-n 24 %s", extra);
    return run_compare_model(model, sides, e, out_text);
}

static void check_shape(const cJSON *root, bool identical)
{
    const cJSON *ps = cJSON_GetObjectItem(root, "prompts");
    ck_assert_int_eq(cJSON_GetArraySize(ps), 3);
    const cJSON *p;
    cJSON_ArrayForEach(p, ps)
    {
        const cJSON *dv = cJSON_GetObjectItem(p, "diverge_index");
        ck_assert(cJSON_IsNumber(dv));
        const cJSON *a = cJSON_GetObjectItem(p, "a"), *b = cJSON_GetObjectItem(p, "b");
        int na = cJSON_GetArraySize(cJSON_GetObjectItem(a, "tokens"));
        int nb = cJSON_GetArraySize(cJSON_GetObjectItem(b, "tokens"));
        ck_assert_int_gt(na, 0);
        ck_assert_int_le(na, cJSON_GetObjectItem(root, "n_tokens")->valueint);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "kld")), na);
        ck_assert(strlen(cJSON_GetObjectItem(a, "text")->valuestring) > 0);
        double top1 = cJSON_GetObjectItem(p, "top1")->valuedouble;
        ck_assert(top1 >= 0 && top1 <= 1);
        ck_assert(cJSON_GetObjectItem(a, "decode_tps")->valuedouble > 0);
        ck_assert(cJSON_GetObjectItem(b, "decode_tps")->valuedouble > 0);
        /* The divergence index is where the token lists first differ. */
        int first = -1;
        for (int i = 0; i < na && i < nb && first < 0; i++)
            if (cJSON_GetArrayItem(cJSON_GetObjectItem(a, "tokens"), i)->valueint !=
                cJSON_GetArrayItem(cJSON_GetObjectItem(b, "tokens"), i)->valueint)
                first = i;
        if (first < 0 && na != nb)
            first = na < nb ? na : nb;
        ck_assert_int_eq(dv->valueint, first);
        const cJSON *k;
        cJSON_ArrayForEach(k, cJSON_GetObjectItem(p, "kld"))
        {
            ck_assert(k->valuedouble >= 0 && isfinite(k->valuedouble));
            if (identical)
                ck_assert(k->valuedouble == 0);
        }
        if (identical) {
            ck_assert_int_eq(dv->valueint, -1);
            ck_assert(top1 == 1);
        }
    }
}

START_TEST(cpu_vs_reference)
{
    char *text;
    cJSON *root = run_compare("--a cpu --b reference", "", &text);
    check_shape(root, false);
    /* cpu and reference agree on this model: the KL is tiny. */
    ck_assert(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "summary"), "kld_max")->valuedouble <
              1e-3);
    ck_assert_ptr_nonnull(strstr(text, "diverges"));
    ck_assert_ptr_nonnull(strstr(text, "KL mean"));
    ck_assert_ptr_nonnull(strstr(text, "of 3 prompts identical"));
    ck_assert_ptr_nonnull(strstr(text, "== p02 =="));
    ck_assert_ptr_null(strchr(text, '\033')); /* piped: no colour */
    free(text);
    cJSON_Delete(root);
}
END_TEST

START_TEST(same_backend_is_identical)
{
    char *text;
    cJSON *root = run_compare("--a reference --b reference:default", "", &text);
    check_shape(root, true);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "b"), "driver")->valuestring,
                     "default");
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "summary"), "identical")
                         ->valueint,
                     3);
    free(text);
    cJSON_Delete(root);
}
END_TEST

START_TEST(quantized_first)
{
    char *text;
    char html[512];
    snprintf(html, sizeof html, "%s", gt_test_tmp("cmp.html"));
    char extra[600];
    snprintf(extra, sizeof extra, "--quant q8_0 --html %s 2>/dev/null", html);
    cJSON *root = run_compare("--a reference --b cpu", extra, &text);
    check_shape(root, false);
    ck_assert_str_eq(cJSON_GetObjectItem(root, "quant")->valuestring, "q8_0");
    ck_assert_int_eq(gt_test_sh("xmllint --noout %s", html), 0);
    char *h = gt_test_slurp(html);
    ck_assert_ptr_nonnull(strstr(h, "Summary"));
    ck_assert_ptr_nonnull(strstr(h, "p03"));
    free(h);
    free(text);
    cJSON_Delete(root);
}
END_TEST

/* A seeded random model quantized to q4_0: the cpu backend's quantized dot
 * products part from the reference's within 64 tokens on these prompts, so
 * the divergence path is exercised with real backends. */
START_TEST(diverging_sides)
{
    const char *tiny = gt_test_tmp("tiny.gguf");
    ck_assert_int_eq(gt_test_sh("%s synth %s --preset tiny --seed 1 >/dev/null 2>&1", GAUNTLET, tiny), 0);
    char *text;
    /* Two numerically different paths on the same weights: the CPU
     * backend's 8-bit activation decode against the reference's f32 (its
     * default f32-activation path matches the reference token for token). */
    setenv("GT_CPU_ACT", "q8", 1);
    cJSON *root = run_compare_model(tiny, "--a cpu --b reference", "-n 64 --quant q4_0 2>/dev/null",
                                    &text);
    unsetenv("GT_CPU_ACT");
    check_shape(root, false);
    int diverged = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(root, "prompts"))
    {
        int dv = cJSON_GetObjectItem(p, "diverge_index")->valueint;
        if (dv < 0)
            continue;
        diverged++;
        const cJSON *ta = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "a"), "tokens");
        const cJSON *tb = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "b"), "tokens");
        ck_assert_int_eq(cJSON_GetObjectItem(p, "diverge_a")->valueint,
                         cJSON_GetArrayItem(ta, dv)->valueint);
        ck_assert_int_eq(cJSON_GetObjectItem(p, "diverge_b")->valueint,
                         cJSON_GetArrayItem(tb, dv)->valueint);
        ck_assert(cJSON_IsString(cJSON_GetObjectItem(p, "diverge_piece_a")));
        ck_assert(cJSON_GetObjectItem(p, "top1")->valuedouble < 1.0 ||
                  cJSON_GetObjectItem(p, "kld_max")->valuedouble > 0);
    }
    ck_assert_int_gt(diverged, 0);
    ck_assert_ptr_nonnull(strstr(text, "first divergence at token"));
    free(text);
    cJSON_Delete(root);
}
END_TEST

START_TEST(bad_prompt_files)
{
    const char *bad = gt_test_tmp("bad.jsonl");
    const char *text = "{\"id\": \"p01\", \"prompt\": \"ok\"}\n{\"id\": \"p02\"}\n";
    gt_test_write_file(bad, text, strlen(text));
    const char *err = gt_test_tmp("err.txt");
    ck_assert_int_eq(gt_test_sh("%s compare -m %s --a reference --b reference --prompts %s 2> %s",
                        GAUNTLET, model, bad, err),
                     2);
    char *e = gt_test_slurp(err);
    ck_assert_ptr_nonnull(strstr(e, ":2:"));
    free(e);
    ck_assert_int_eq(gt_test_sh("%s compare -m %s --a reference --b reference --prompts /nonexistent "
                        "2>/dev/null",
                        GAUNTLET, model),
                     2);
    ck_assert_int_eq(gt_test_sh("%s compare -m %s --a reference 2>/dev/null", GAUNTLET, model), 2);
    ck_assert_int_eq(gt_test_sh("%s compare -m %s --a nosuchbackend --b reference --prompts %s "
                        "2>/dev/null",
                        GAUNTLET, model, prompts()),
                     2);
}
END_TEST

START_TEST(two_runs)
{
    char db[512], out[512], json[512];
    snprintf(db, sizeof db, "%s", gt_test_tmp("runs.sqlite"));
    snprintf(out, sizeof out, "%s", gt_test_tmp("runs.txt"));
    snprintf(json, sizeof json, "%s", gt_test_tmp("runs.json"));
    gt_db *d;
    gt_err err = {{0}};
    unlink(db);
    ck_assert_msg(gt_db_open(db, false, &d, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(fx_make_run(d, 24, 0, "synthetic/base"), 1);
    ck_assert_int_eq(fx_make_run(d, 24, 1, "synthetic/current"), 2);
    gt_db_close(d);
    ck_assert_int_eq(gt_test_sh("%s compare --db %s --run synthetic/base --run 2 --json %s > %s", GAUNTLET,
                        db, json, out),
                     0);
    char *t = gt_test_slurp(out);
    ck_assert_ptr_nonnull(strstr(t, "m0/f32/cpu/openblas"));
    ck_assert_ptr_nonnull(strstr(t, "new failure"));
    ck_assert_ptr_nonnull(strstr(t, "performance.tg_tps"));
    free(t);
    char *j = gt_test_slurp(json);
    cJSON *root = cJSON_Parse(j);
    ck_assert_ptr_nonnull(root);
    /* Cells 1 and 9 fail anew, 3 is fixed, 23 went pending. */
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "status_changes")), 4);
    cJSON_Delete(root);
    free(j);
    ck_assert_int_eq(gt_test_sh("%s compare --db %s --run 1 2>/dev/null", GAUNTLET, db), 2);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    model = gt_test_llama(); /* written once here, before the cases fork */
    Suite *s = suite_create("compare");
    TCase *t = tcase_create("compare");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, two_runs);
    tcase_add_test(t, cpu_vs_reference);
    tcase_add_test(t, same_backend_is_identical);
    tcase_add_test(t, quantized_first);
    tcase_add_test(t, bad_prompt_files);
    tcase_add_test(t, diverging_sides);
    suite_add_tcase(s, t);
    return gt_test_run(s);
}
