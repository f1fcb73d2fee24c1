/* test_sweep.c: gauntlet compare --sweep (harness/compare/compare_sweep.c).
 *
 * Unit level, on synthetic grids (no model): the naming says which setting
 * breaks agreement, with its threshold, for each shape of grid: all agree;
 * a split prompt; n_parallel and threads thresholds (exact and with a gap
 * between the values tried); a non-monotone axis; two axes at once; only a
 * combination; the base itself disagreeing; an unswept axis never named.
 * The lists' parsing and the grid's resolution ("prompt", sorting,
 * duplicates) too, and bad lists as usage errors.
 *
 * End to end, through the built binary on a synthetic tiny model: with no
 * fault the sweep agrees everywhere (exit 0); with each runtime fault that
 * shows only under one setting (GT_FAULT batch-split@0, seq-bleed@0,
 * thread-race on the backend GT_FAULT_BACKEND names) it exits 1 and names
 * exactly that setting, on cpu and on opencl. OpenCL cases need the plugin
 * and a platform (PoCL): skipped with the reason outside CI, a failure in
 * CI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "compare.h"
#include "testutil.h"

#define GAUNTLET GT_BINARY_DIR "/gauntlet"

/* --- naming on synthetic grids -------------------------------------------- */

typedef bool (*agree_fn)(const int v[GT_SW_N_AXES], int n_prompt);

static void make_grid(gt_sweep_grid *g, const bool swept[GT_SW_N_AXES], const char *nb,
                      const char *np, const char *th, int n_prompt, agree_fn agree)
{
    gt_sweep_spec s;
    gt_sweep_defaults(&s);
    memcpy(s.swept, swept, sizeof s.swept);
    gt_err err = {{0}};
    const char *lists[GT_SW_N_AXES] = {nb, np, th};
    for (int a = 0; a < GT_SW_N_AXES; a++)
        if (lists[a])
            ck_assert_msg(gt_sweep_values_parse((gt_sweep_axis)a, lists[a], s.values[a],
                                                &s.n_values[a], &err) == 0,
                          "%s", err.msg);
    ck_assert_msg(gt_sweep_grid_init(&s, n_prompt, g, &err) == 0, "%s", err.msg);
    for (int k = 0; k < g->n_cells; k++)
        g->cells[k].agrees = agree(g->cells[k].v, n_prompt);
}

static const bool ALL[GT_SW_N_AXES] = {true, true, true};

static void name_all(agree_fn f, int n_prompt, gt_sweep_verdict *v)
{
    gt_sweep_grid g;
    make_grid(&g, ALL, NULL, NULL, NULL, n_prompt, f);
    gt_sweep_name(&g, v);
    gt_sweep_grid_free(&g);
}

static bool always(const int v[GT_SW_N_AXES], int n) { (void)v, (void)n; return true; }
static bool never(const int v[GT_SW_N_AXES], int n) { (void)v, (void)n; return false; }
static bool unsplit(const int v[GT_SW_N_AXES], int n) { return v[GT_SW_N_BATCH] >= n; }
static bool few_seqs(const int v[GT_SW_N_AXES], int n) { (void)n; return v[GT_SW_N_PARALLEL] <= 2; }
static bool one_thread(const int v[GT_SW_N_AXES], int n) { (void)n; return v[GT_SW_THREADS] == 1; }
static bool not_seven(const int v[GT_SW_N_AXES], int n) { (void)n; return v[GT_SW_N_BATCH] != 7; }
static bool not_one(const int v[GT_SW_N_AXES], int n) { (void)n; return v[GT_SW_N_BATCH] != 1; }
static bool split_or_threads(const int v[GT_SW_N_AXES], int n)
{
    return unsplit(v, n) && one_thread(v, n);
}
static bool combo(const int v[GT_SW_N_AXES], int n)
{
    (void)n;
    return !(v[GT_SW_N_BATCH] == 1 && v[GT_SW_N_PARALLEL] == 4);
}

START_TEST(names_nothing_when_all_agree)
{
    gt_sweep_verdict v;
    name_all(always, 37, &v);
    ck_assert(v.agrees);
    ck_assert_str_eq(v.text, "agrees everywhere");
    for (int a = 0; a < GT_SW_N_AXES; a++)
        ck_assert(!v.breaks[a]);
}
END_TEST

START_TEST(names_a_split_prompt)
{
    gt_sweep_verdict v;
    name_all(unsplit, 37, &v);
    ck_assert(!v.agrees);
    ck_assert_str_eq(v.text, "diverges when the prompt (37 tokens) is split: n_batch < 37; "
                             "n_parallel has no effect; threads has no effect");
    ck_assert(v.breaks[GT_SW_N_BATCH] && !v.breaks[GT_SW_N_PARALLEL] && !v.breaks[GT_SW_THREADS]);
    ck_assert_int_eq(v.combo, -1);
}
END_TEST

START_TEST(names_n_parallel_with_a_gap)
{
    /* {1, 2, 4}: 4 breaks, 2 agrees; 3 was not tried, so both are said. */
    gt_sweep_verdict v;
    name_all(few_seqs, 37, &v);
    ck_assert_str_eq(v.text, "diverges when n_parallel >= 4 (2 agrees); n_batch has no effect; "
                             "threads has no effect");
    ck_assert(v.breaks[GT_SW_N_PARALLEL] && !v.breaks[GT_SW_N_BATCH]);
    /* {1, 2, 3, 4}: the threshold is exact. */
    gt_sweep_grid g;
    make_grid(&g, ALL, NULL, "1,2,3,4", NULL, 37, few_seqs);
    gt_sweep_name(&g, &v);
    gt_sweep_grid_free(&g);
    ck_assert_str_eq(v.axis_text[GT_SW_N_PARALLEL], "diverges when n_parallel > 2");
}
END_TEST

START_TEST(names_threads)
{
    gt_sweep_verdict v;
    name_all(one_thread, 37, &v);
    ck_assert_str_eq(v.text, "diverges when threads > 1; n_batch has no effect; n_parallel has "
                             "no effect");
    ck_assert(v.breaks[GT_SW_THREADS] && !v.breaks[GT_SW_N_BATCH] && !v.breaks[GT_SW_N_PARALLEL]);
}
END_TEST

START_TEST(names_a_small_batch_and_a_hole)
{
    gt_sweep_verdict v;
    name_all(not_one, 37, &v);
    ck_assert_str_eq(v.axis_text[GT_SW_N_BATCH], "diverges when n_batch <= 1 (7 agrees)");
    name_all(not_seven, 37, &v);
    ck_assert_str_eq(v.axis_text[GT_SW_N_BATCH], "diverges at n_batch 7 (agrees at 1, 37, 512)");
    ck_assert(v.breaks[GT_SW_N_BATCH]);
}
END_TEST

START_TEST(names_two_axes)
{
    gt_sweep_verdict v;
    name_all(split_or_threads, 20, &v);
    ck_assert_str_eq(v.text, "diverges when the prompt (20 tokens) is split: n_batch < 20; "
                             "diverges when threads > 1; n_parallel has no effect");
}
END_TEST

START_TEST(names_a_combination)
{
    gt_sweep_verdict v;
    name_all(combo, 37, &v);
    ck_assert(!v.agrees);
    ck_assert_int_ge(v.combo, 0);
    ck_assert_str_eq(v.text, "diverges only in combination: n_batch 1, n_parallel 4; n_batch has "
                             "no effect alone; n_parallel has no effect alone; threads has no "
                             "effect alone");
}
END_TEST

START_TEST(names_a_backend_wrong_everywhere)
{
    gt_sweep_verdict v;
    name_all(never, 37, &v);
    ck_assert(!v.agrees);
    ck_assert_msg(strstr(v.text, "diverges at every setting tried") &&
                      strstr(v.text, "n_batch 512, n_parallel 1, threads 1"),
                  "%s", v.text);
    for (int a = 0; a < GT_SW_N_AXES; a++)
        ck_assert(!v.breaks[a]);
}
END_TEST

START_TEST(unswept_axes_are_not_named)
{
    const bool only_nb[GT_SW_N_AXES] = {true, false, false};
    gt_sweep_grid g;
    make_grid(&g, only_nb, NULL, NULL, NULL, 37, unsplit);
    ck_assert_int_eq(g.n_cells, 4);
    ck_assert_int_eq(g.n_values[GT_SW_N_PARALLEL], 1);
    ck_assert_int_eq(g.values[GT_SW_N_PARALLEL][0], 1);
    gt_sweep_verdict v;
    gt_sweep_name(&g, &v);
    gt_sweep_grid_free(&g);
    ck_assert_str_eq(v.text, "diverges when the prompt (37 tokens) is split: n_batch < 37");
}
END_TEST

START_TEST(lists_parse_and_resolve)
{
    gt_err err = {{0}};
    bool swept[GT_SW_N_AXES];
    ck_assert_int_eq(gt_sweep_axes_parse("threads,n_batch", swept, &err), 0);
    ck_assert(swept[GT_SW_N_BATCH] && !swept[GT_SW_N_PARALLEL] && swept[GT_SW_THREADS]);
    ck_assert_int_eq(gt_sweep_axes_parse("n_batch,kv_type", swept, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "kv_type"));
    ck_assert_int_eq(gt_sweep_axes_parse("n_batch,", swept, &err), -1);
    ck_assert_int_eq(gt_sweep_axes_parse("", swept, &err), -1);

    int vals[GT_SW_MAX_VALUES], n = 0;
    ck_assert_int_eq(gt_sweep_values_parse(GT_SW_N_BATCH, "512,prompt,7,7,1", vals, &n, &err), 0);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(vals[1], GT_SW_PROMPT_LEN);
    ck_assert_int_eq(gt_sweep_values_parse(GT_SW_N_PARALLEL, "prompt", vals, &n, &err), -1);
    ck_assert_int_eq(gt_sweep_values_parse(GT_SW_THREADS, "0", vals, &n, &err), -1);
    ck_assert_int_eq(gt_sweep_values_parse(GT_SW_THREADS, "2x", vals, &n, &err), -1);
    ck_assert_int_eq(gt_sweep_values_parse(GT_SW_THREADS, "1,,2", vals, &n, &err), -1);
    ck_assert_int_eq(
        gt_sweep_values_parse(GT_SW_THREADS, "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", vals,
                              &n, &err),
        -1);

    gt_sweep_grid g;
    make_grid(&g, ALL, "512,prompt,7,7,1", "4,1", NULL, 40, always);
    ck_assert_int_eq(g.n_values[GT_SW_N_BATCH], 4);
    const int want[] = {1, 7, 40, 512};
    for (int j = 0; j < 4; j++)
        ck_assert_int_eq(g.values[GT_SW_N_BATCH][j], want[j]);
    ck_assert_int_eq(g.values[GT_SW_N_PARALLEL][1], 4);
    ck_assert_int_eq(g.n_cells, 4 * 2 * 2);
    const int i[GT_SW_N_AXES] = {2, 1, 0};
    const gt_sweep_cell *c = &g.cells[gt_sweep_index(&g, i)];
    ck_assert(c->v[0] == 40 && c->v[1] == 4 && c->v[2] == 1);
    gt_sweep_grid_free(&g);
}
END_TEST

/* --- end to end -------------------------------------------------------------- */

static const char *tiny;

/* The sweep on backend b under env; exit code, the JSON in *root. */
static int sweep(const char *env, const char *b, cJSON **root, char **text)
{
    char json[512], out[512];
    snprintf(json, sizeof json, "%s", gt_test_tmp("sweep.json"));
    snprintf(out, sizeof out, "%s", gt_test_tmp("sweep.txt"));
    remove(json);
    int rc = gt_test_sh("%s %s compare -m %s --b %s --sweep n_batch,n_parallel,threads "
                        "--json %s > %s 2>&1",
                        env, GAUNTLET, tiny, b, json, out);
    char *j = gt_test_slurp(json);
    *root = j ? cJSON_Parse(j) : NULL;
    free(j);
    *text = gt_test_slurp(out);
    ck_assert_ptr_nonnull(*text);
    return rc;
}

static bool axis_breaks(const cJSON *root, const char *axis)
{
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "axis_findings"), axis);
    ck_assert_msg(a, "no finding for %s", axis);
    return cJSON_IsTrue(cJSON_GetObjectItem(a, "breaks"));
}

static void expect_clean(const char *b)
{
    cJSON *root;
    char *text;
    int rc = sweep("", b, &root, &text);
    ck_assert_msg(rc == 0, "%s: exit %d:\n%s", b, rc, text);
    ck_assert_msg(strstr(text, "agrees everywhere"), "%s", text);
    ck_assert_ptr_nonnull(root);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(root, "agrees")));
    /* 4 n_batch x 3 n_parallel x 2 threads, each measured */
    const cJSON *cells = cJSON_GetObjectItem(root, "cells"), *c;
    ck_assert_int_eq(cJSON_GetArraySize(cells), 24);
    cJSON_ArrayForEach(c, cells)
    {
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(c, "agrees")));
        ck_assert(cJSON_GetObjectItem(c, "kld_mean")->valuedouble <= 1e-9);
    }
    cJSON_Delete(root);
    free(text);
}

typedef struct fault_case {
    const char *fault, *axis, *phrase;
} fault_case;

static const fault_case FAULTS[] = {
    {"batch-split@0", "n_batch", "is split: n_batch <"},
    {"seq-bleed@0", "n_parallel", "diverges when n_parallel"},
    {"thread-race", "threads", "diverges when threads > 1"},
};

static void expect_fault(const char *b, const fault_case *f)
{
    char env[128];
    snprintf(env, sizeof env, "GT_FAULT=%s GT_FAULT_BACKEND=%s", f->fault, b);
    cJSON *root;
    char *text;
    int rc = sweep(env, b, &root, &text);
    ck_assert_msg(rc == 1, "%s on %s: exit %d:\n%s", f->fault, b, rc, text);
    ck_assert_msg(root, "%s on %s: no JSON:\n%s", f->fault, b, text);
    const char *finding = cJSON_GetObjectItem(root, "finding")->valuestring;
    ck_assert_msg(strstr(finding, f->phrase), "%s on %s: %s", f->fault, b, finding);
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        const char *name = gt_sweep_axis_name((gt_sweep_axis)a);
        ck_assert_msg(axis_breaks(root, name) == !strcmp(name, f->axis),
                      "%s on %s: %s %s: %s", f->fault, b, name,
                      axis_breaks(root, name) ? "breaks" : "does not break", finding);
    }
    cJSON_Delete(root);
    free(text);

    /* The fault is on b only: the reference swept is clean. */
    rc = sweep(env, "reference", &root, &text);
    ck_assert_msg(rc == 0, "%s on %s leaked into the reference: exit %d:\n%s", f->fault, b, rc,
                  text);
    cJSON_Delete(root);
    free(text);
}

START_TEST(clean_cpu) { expect_clean("cpu"); }
END_TEST
START_TEST(clean_opencl) { expect_clean("opencl"); }
END_TEST
START_TEST(faults_on_cpu) { expect_fault("cpu", &FAULTS[_i]); }
END_TEST
START_TEST(faults_on_opencl) { expect_fault("opencl", &FAULTS[_i]); }
END_TEST

START_TEST(usage_errors)
{
    const char *bad[] = {
        "--sweep n_batch",                                 /* no --b */
        "--b cpu --sweep kv_type",                         /* unknown setting */
        "--b cpu --sweep n_batch --n-parallel 1,4",        /* a list for an unswept axis */
        "--b cpu --sweep threads --threads 0",             /* a thread count below 1 */
        "--b cpu --sweep n_batch --max-kld -1",            /* a negative bound */
        "--b cpu --sweep n_batch --min-top1 1.5",          /* top-1 above 1 */
        "--a reference --b cpu --prompts x --max-kld 1e-3", /* a sweep flag without --sweep */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = gt_test_sh("%s compare -m %s %s > /dev/null 2>&1", GAUNTLET, tiny, bad[i]);
        ck_assert_msg(rc == 2, "'%s': exit %d", bad[i], rc);
    }
}
END_TEST

static bool opencl_usable(char *why, size_t cap)
{
    const char *log = gt_test_tmp("probe.txt");
    int rc = gt_test_sh("%s compare -m %s --b opencl --sweep n_batch --n-batch 512 > %s 2>&1",
                        GAUNTLET, tiny, log);
    char *text = gt_test_slurp(log);
    snprintf(why, cap, "opencl did not run (exit %d): %.400s", rc, text ? text : "");
    free(text);
    return rc == 0;
}

int main(void)
{
    Suite *s = suite_create("sweep");
    TCase *u = tcase_create("naming");
    tcase_add_test(u, names_nothing_when_all_agree);
    tcase_add_test(u, names_a_split_prompt);
    tcase_add_test(u, names_n_parallel_with_a_gap);
    tcase_add_test(u, names_threads);
    tcase_add_test(u, names_a_small_batch_and_a_hole);
    tcase_add_test(u, names_two_axes);
    tcase_add_test(u, names_a_combination);
    tcase_add_test(u, names_a_backend_wrong_everywhere);
    tcase_add_test(u, unswept_axes_are_not_named);
    tcase_add_test(u, lists_parse_and_resolve);
    suite_add_tcase(s, u);

    gt_test_require_gauntlet();
    tiny = gt_test_tmp("tiny.gguf");
    if (gt_test_sh("%s synth %s --preset tiny --seed 1 > /dev/null 2>&1", GAUNTLET, tiny) != 0) {
        printf("FAIL: gauntlet synth could not write %s\n", tiny);
        return 1;
    }
    TCase *e = tcase_create("end_to_end");
    tcase_set_timeout(e, 300);
    tcase_add_test(e, usage_errors);
    tcase_add_test(e, clean_cpu);
    tcase_add_loop_test(e, faults_on_cpu, 0, 3);
    char why[600];
    const bool ocl = opencl_usable(why, sizeof why);
    const char *ci = getenv("CI");
    if (!ocl && ci && ci[0] && strcmp(ci, "false") != 0) {
        printf("FAIL: OpenCL must run in CI for the sweep's opencl cases: %s\n", why);
        return 1;
    }
    gt_test_add_if(e, clean_opencl, ocl, why);
    if (ocl)
        tcase_add_loop_test(e, faults_on_opencl, 0, 3);
    else
        printf("SKIP faults_on_opencl: %s\n", why);
    suite_add_tcase(s, e);
    return gt_test_run(s);
}
