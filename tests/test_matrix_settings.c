/* test_matrix_settings.c: the execution-settings axis of a matrix
 * (harness/matrix/matrix_settings.c and its expansion).
 *
 * Settings expand like driver profiles into cells whose ids carry only the
 * keys the matrix names, in the fixed order nb, np, t, kv; a backend without
 * settings keeps its four-part id; bad settings are refused naming the JSON
 * path and the key or backend; rules written for four-part ids cover the
 * variants; an include adds a settings grid to one cell; the shipped
 * settings matrix has the 72 cells the issue asks for. Linked against the
 * harness's libraries (the real suite table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "matrix.h"

#define TIERS "\"tiers\": {\"t\": {\"suites\": [\"smoke\"]}}"
#define MODELS "\"models\": [{\"id\": \"a\", \"synth\": {\"preset\": \"tiny\"}}]"

static gt_matrix *parse(const char *text, gt_err *err)
{
    gt_matrix *m = NULL;
    if (gt_matrix_parse("s.json", text, strlen(text), &m, err) != 0)
        return NULL;
    return m;
}

static gt_matrix *parse_ok(const char *text)
{
    gt_err err = {{0}};
    gt_matrix *m = parse(text, &err);
    ck_assert_msg(m != NULL, "parse failed: %s", err.msg);
    return m;
}

static gt_cell *expand(const gt_matrix *m, int *n)
{
    gt_err err = {{0}};
    gt_cell *cells = NULL;
    ck_assert_msg(gt_matrix_expand(m, gt_matrix_tier(m, NULL, &err), &cells, n, &err) == 0, "%s",
                  err.msg);
    return cells;
}

START_TEST(grid_expands_like_drivers)
{
    gt_matrix *m = parse_ok(
        "{\"name\": \"s\", " MODELS ", \"quants\": [\"q8_0\"],"
        " \"defaults\": {\"threads\": 3},"
        " \"backends\": [\"reference\", {\"id\": \"cpu\", \"drivers\": [{\"id\": \"x\"},"
        "   {\"id\": \"y\"}], \"settings\": {\"n_batch\": [1, 7, 512], \"n_parallel\": [1, 4],"
        "   \"threads\": [1, 2]}}], " TIERS "}");
    int n;
    gt_cell *c = expand(m, &n);
    /* reference: 1 (no settings); cpu: 2 drivers x 3 x 2 x 2. */
    ck_assert_int_eq(n, 1 + 2 * 12);
    ck_assert_str_eq(c[0].id, "a/q8_0/reference/default"); /* unchanged: no fifth part */
    ck_assert_str_eq(c[0].setting->id, "");
    ck_assert_int_eq(c[0].threads, 3); /* the matrix default, as before */
    static const char *const want[] = {
        "nb1-np1-t1",   "nb1-np1-t2",   "nb1-np4-t1",   "nb1-np4-t2",
        "nb7-np1-t1",   "nb7-np1-t2",   "nb7-np4-t1",   "nb7-np4-t2",
        "nb512-np1-t1", "nb512-np1-t2", "nb512-np4-t1", "nb512-np4-t2"};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 12; i++) {
            const gt_cell *x = &c[1 + d * 12 + i];
            char id[GT_CELL_ID_MAX];
            snprintf(id, sizeof id, "a/q8_0/cpu/%s/%s", d ? "y" : "x", want[i]);
            ck_assert_str_eq(x->id, id);
            ck_assert_int_eq(x->index, 1 + d * 12 + i);
        }
    const gt_cell *x = &c[1 + 7]; /* nb7-np4-t2 */
    ck_assert_int_eq(x->setting->n_batch, 7);
    ck_assert_int_eq(x->setting->n_parallel, 4);
    ck_assert_int_eq(x->setting->threads, 2);
    ck_assert_int_eq(x->threads, 2); /* the setting's threads win over the default */
    ck_assert_ptr_null(x->setting->kv_type);
    char desc[128];
    gt_setting_describe(x->setting, desc, sizeof desc);
    ck_assert_str_eq(desc, "n_batch 7, n_parallel 4, threads 2");
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

START_TEST(ids_name_only_the_keys_written)
{
    gt_matrix *m = parse_ok(
        "{\"name\": \"s\", " MODELS ", \"quants\": [\"f32\"],"
        " \"backends\": [{\"id\": \"cpu\", \"settings\": {\"kv_type\": [\"f32\", \"f16\"],"
        "   \"n_parallel\": [4]}}, {\"id\": \"reference\", \"settings\": {\"threads\": [2],"
        "   \"kv_type\": [\"f16\"], \"n_batch\": [7], \"n_parallel\": [4]}}], " TIERS "}");
    int n;
    gt_cell *c = expand(m, &n);
    ck_assert_int_eq(n, 3);
    /* Written order does not matter: nb, np, t, kv always. */
    ck_assert_str_eq(c[0].id, "a/f32/cpu/default/np4-kvf32");
    ck_assert_str_eq(c[1].id, "a/f32/cpu/default/np4-kvf16");
    ck_assert_str_eq(c[2].id, "a/f32/reference/default/nb7-np4-t2-kvf16");
    ck_assert_int_eq(c[0].setting->n_batch, 0); /* not named: the session's own */
    ck_assert_str_eq(c[0].setting->kv_type, "f32");
    ck_assert_str_eq(c[1].setting->kv_type, "f16");
    /* Same text, same ids: nothing of the machine enters them. */
    gt_matrix *m2 = parse_ok(m->text);
    int n2;
    gt_cell *c2 = expand(m2, &n2);
    ck_assert_int_eq(n, n2);
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(c[i].id, c2[i].id);
    gt_cells_free(c, n);
    gt_cells_free(c2, n2);
    gt_matrix_free(m);
    gt_matrix_free(m2);
}
END_TEST

START_TEST(defaults_apply_to_in_process_backends)
{
    gt_matrix *m = parse_ok(
        "{\"name\": \"s\", " MODELS ", \"quants\": [\"f32\"],"
        " \"defaults\": {\"settings\": {\"n_batch\": [1, 64]}},"
        " \"backends\": [\"reference\", {\"id\": \"cpu\", \"settings\": {}},"
        "   {\"id\": \"srv\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:1/v1\"}],"
        " " TIERS "}");
    int n;
    gt_cell *c = expand(m, &n);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(c[0].id, "a/f32/reference/default/nb1");
    ck_assert_str_eq(c[1].id, "a/f32/reference/default/nb64");
    ck_assert_str_eq(c[2].id, "a/f32/cpu/default"); /* {} opts out */
    ck_assert_str_eq(c[3].id, "a/f32/srv/default"); /* a server is never given them */
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

START_TEST(rules_cover_variants)
{
    gt_matrix *m = parse_ok(
        "{\"name\": \"s\", " MODELS ", \"quants\": [\"f32\", \"q8_0\"],"
        " \"backends\": [\"reference\", {\"id\": \"cpu\", \"settings\": {\"n_batch\": [1, 7],"
        "   \"n_parallel\": [1, 4]}}],"
        " \"exclude\": [\"a/q8_0/cpu/default\"],"
        " \"expect\": [{\"backend\": \"cpu\", \"settings\": \"nb7-*\", \"status\": \"xfail\","
        "   \"reason\": \"split\"}],"
        " \"include\": [{\"model\": \"a\", \"quant\": \"q8_0\", \"backend\": \"reference\","
        "   \"settings\": {\"n_parallel\": [2, 3]}}],"
        " " TIERS "}");
    int n;
    gt_cell *c = expand(m, &n);
    /* f32: reference + 4 cpu; q8_0: reference (the 4 cpu excluded by the
     * four-part pattern); the include's grid: reference np2, np3. */
    ck_assert_int_eq(n, 1 + 4 + 1 + 2);
    ck_assert_str_eq(c[1].id, "a/f32/cpu/default/nb1-np1");
    ck_assert_int_eq(c[1].expected, GT_ST_PASS);
    ck_assert_str_eq(c[3].id, "a/f32/cpu/default/nb7-np1");
    ck_assert_int_eq(c[3].expected, GT_ST_XFAIL);
    ck_assert_int_eq(c[4].expected, GT_ST_XFAIL);
    ck_assert_str_eq(c[6].id, "a/q8_0/reference/default/np2");
    ck_assert_str_eq(c[7].id, "a/q8_0/reference/default/np3");
    ck_assert_int_eq(c[7].setting->n_parallel, 3);
    gt_mx_rule four = {.glob = "a/f32/cpu/default"}, axis = {.axis = {NULL, NULL, "cpu"}};
    ck_assert(gt_rule_match(&four, "a/f32/cpu/default/nb7-np4"));
    ck_assert(gt_rule_match(&four, "a/f32/cpu/default"));
    ck_assert(!gt_rule_match(&four, "a/f32/cpu/defaultx/nb7"));
    ck_assert(gt_rule_match(&axis, "a/f32/cpu/default/nb7-np4"));
    gt_mx_rule set = {.axis = {NULL, NULL, NULL, NULL, "np4*"}};
    ck_assert(gt_rule_match(&set, "a/f32/cpu/default/np4-t2"));
    ck_assert(!gt_rule_match(&set, "a/f32/cpu/default")); /* no fifth part */
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

/* Each bad settings block fails naming the path and what is wrong. */
static const struct {
    const char *backends, *want;
} BAD[] = {
    {"{\"id\": \"cpu\", \"settings\": {\"n_ubatch\": [1]}}",
     "backends[0].settings.n_ubatch: unknown setting \"n_ubatch\""},
    {"{\"id\": \"cpu\", \"settings\": {\"n_batch\": [0]}}",
     "backends[0].settings.n_batch[0]: expected an integer from 1"},
    {"{\"id\": \"cpu\", \"settings\": {\"n_batch\": [-3]}}", "got -3"},
    {"{\"id\": \"cpu\", \"settings\": {\"threads\": [1.5]}}",
     "backends[0].settings.threads[0]: expected an integer from 1 to 1024, got 1.5"},
    {"{\"id\": \"cpu\", \"settings\": {\"n_parallel\": [\"4\"]}}", "from 1 to 256, got a string"},
    {"{\"id\": \"cpu\", \"settings\": {\"n_parallel\": [1, 4, 1]}}",
     "backends[0].settings.n_parallel[2]: duplicate value"},
    {"{\"id\": \"cpu\", \"settings\": {\"n_batch\": []}}", "expected a non-empty array"},
    {"{\"id\": \"cpu\", \"settings\": {\"kv_type\": [\"q8_0\"]}}",
     "backends[0].settings.kv_type[0]: expected a K/V type, \"f32\" or \"f16\", got \"q8_0\""},
    {"{\"id\": \"cpu\", \"settings\": [1]}", "backends[0].settings: expected an object"},
    {"{\"id\": \"srv\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:1/v1\","
     " \"settings\": {\"n_batch\": [7]}}",
     "backends[0].settings: http backend \"srv\" cannot take settings"},
};
enum { N_BAD = sizeof BAD / sizeof BAD[0] };

START_TEST(bad_settings_refused)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\": \"s\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [%s], " TIERS
             "}",
             BAD[_i].backends);
    gt_err err = {{0}};
    gt_matrix *m = parse(text, &err);
    ck_assert_msg(m == NULL, "case %d parsed", _i);
    ck_assert_msg(strstr(err.msg, BAD[_i].want) && strstr(err.msg, "s.json"),
                  "case %d: got \"%s\", want \"%s\"", _i, err.msg, BAD[_i].want);
}
END_TEST

START_TEST(bad_includes_refused)
{
    static const char *const inc[][2] = {
        /* A backend with several variants needs the one named. */
        {"{\"model\": \"a\", \"quant\": \"f32\", \"backend\": \"cpu\"}",
         "include[0]: settings variant \"(none)\" is not in the matrix"},
        {"{\"model\": \"a\", \"quant\": \"f32\", \"backend\": \"cpu\", \"settings\": \"nb9\"}",
         "settings variant \"nb9\" is not in the matrix"},
        {"{\"model\": \"a\", \"quant\": \"f32\", \"backend\": \"cpu\", \"settings\": \"nb1\"}",
         "cell a/f32/cpu/default/nb1 is already in the matrix"},
        {"{\"model\": \"a\", \"quant\": \"f32\", \"backend\": \"srv\","
         " \"settings\": {\"n_batch\": [2]}}",
         "http backend \"srv\" cannot take settings"},
        {"{\"model\": \"a\", \"quant\": \"f32\", \"backend\": \"reference\","
         " \"settings\": {\"n_batch\": [2], \"x\": [1]}}",
         "include[0].settings.x: unknown setting \"x\""},
    };
    for (size_t i = 0; i < sizeof inc / sizeof inc[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"name\": \"s\", " MODELS ", \"quants\": [\"f32\"], \"backends\": ["
                 "\"reference\", {\"id\": \"cpu\", \"settings\": {\"n_batch\": [1, 7]}},"
                 " {\"id\": \"srv\", \"backend\": \"http\", \"endpoint\": "
                 "\"http://127.0.0.1:1/v1\"}], \"include\": [%s], " TIERS "}",
                 inc[i][0]);
        gt_err err = {{0}};
        gt_matrix *m = parse(text, &err);
        ck_assert_msg(m == NULL, "include %zu parsed", i);
        ck_assert_msg(strstr(err.msg, inc[i][1]), "include %zu: got \"%s\", want \"%s\"", i,
                      err.msg, inc[i][1]);
    }
}
END_TEST

/* matrices/settings.json: 2 models x q8_0 x 3 backends x 3 x 2 x 2 = 72;
 * ci.json's block adds 8 synth-tiny cells to what it had. */
START_TEST(shipped_settings_grid)
{
    gt_matrix *m = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_matrix_load(GT_SOURCE_DIR "/matrices/settings.json", &m, &err) == 0, "%s",
                  err.msg);
    int n;
    gt_cell *c = expand(m, &n);
    ck_assert_int_eq(n, 72);
    int per_backend[3] = {0}, t2 = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(c[i].setting->id[0] ? c[i].setting : NULL);
        per_backend[!strcmp(c[i].backend->id, "cpu") + 2 * !strcmp(c[i].backend->id, "opencl")]++;
        t2 += c[i].threads == 2;
    }
    ck_assert_int_eq(per_backend[0], 24);
    ck_assert_int_eq(per_backend[1], 24);
    ck_assert_int_eq(per_backend[2], 24);
    ck_assert_int_eq(t2, 36);
    ck_assert_str_eq(c[0].id, "smollm2-135m/q8_0/reference/default/nb1-np1-t1");
    ck_assert_str_eq(c[71].id, "gemma3-270m/q8_0/opencl/pocl/nb512-np4-t2");
    gt_cells_free(c, n);
    gt_matrix_free(m);

    ck_assert_msg(gt_matrix_load(GT_SOURCE_DIR "/matrices/ci.json", &m, &err) == 0, "%s",
                  err.msg);
    c = expand(m, &n);
    int with = 0;
    for (int i = 0; i < n; i++)
        if (c[i].setting->id[0]) {
            with++;
            ck_assert_ptr_nonnull(strstr(c[i].id, "synth-tiny/q8_0/"));
        }
    ck_assert_int_eq(with, 8);
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("matrix_settings");
    TCase *tc = tcase_create("matrix_settings");
    tcase_add_test(tc, grid_expands_like_drivers);
    tcase_add_test(tc, ids_name_only_the_keys_written);
    tcase_add_test(tc, defaults_apply_to_in_process_backends);
    tcase_add_test(tc, rules_cover_variants);
    tcase_add_loop_test(tc, bad_settings_refused, 0, N_BAD);
    tcase_add_test(tc, bad_includes_refused);
    tcase_add_test(tc, shipped_settings_grid);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
