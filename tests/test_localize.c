/* test_localize.c: the localizer (harness/compare/localize.c) through the built
 * binary, on stories260K (its synthetic stand-in without ../shared).
 *
 *   - compare --localize reference vs cpu with no fault: exit 0, "no node
 *     beyond tolerance", the largest NMSE named, one row per node;
 *   - each of the four GT_FAULT node faults on cpu and on opencl (8 cases):
 *     exit 1, and --json names exactly the faulted node, its layer and op,
 *     with an added NMSE beyond its tolerance (so it was added by that node
 *     on identical inputs), and the reference side stays clean;
 *   - --html writes the page with the node marked;
 *   - at length: GT_FAULT=pos-wrap@32 on cpu, 48 tokens compared from 40
 *     (--from: 0..39 only fill the cache) names blk.0.q_rope, and only
 *     ROPE nodes add NMSE on identical inputs (attention is fed the
 *     reference's cache, its prefill included); clean, nothing diverges;
 *     --passkey N builds the long suite's prompt of N tokens and compares
 *     its last 16; bad --from/--passkey uses are refused (exit 2);
 *   - a qualification with a faulted cpu records check accuracy.localize
 *     naming the node, and the HTML report shows it; --no-localize records
 *     no such check; a clean one passes with none.
 * OpenCL cases need the plugin and a platform (PoCL): skipped with the
 * reason outside CI, a failure in CI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "testutil.h"

#define GAUNTLET GT_BINARY_DIR "/gauntlet"
#define PROMPT "\"Once upon a time there was a little girl\""

static const char *model;

typedef struct fault_case {
    const char *fault, *node, *op;
    int layer;
} fault_case;

static const fault_case FAULTS[] = {
    {"rope-mode@2", "blk.2.q_rope", "ROPE", 2},
    {"matmul-short@3", "blk.3.ffn_out", "MUL_MAT", 3},
    {"attn-overread@1", "blk.1.kqv", "ATTENTION", 1},
    {"norm-eps@4", "blk.4.attn_norm", "RMS_NORM+MUL", 4},
};

/* compare --localize; returns the exit code, the JSON parsed in *root. */
static int localize(const char *env, const char *b, cJSON **root, char **text)
{
    char json[512], out[512];
    snprintf(json, sizeof json, "%s", gt_test_tmp("loc.json"));
    snprintf(out, sizeof out, "%s", gt_test_tmp("loc.txt"));
    remove(json);
    int rc = gt_test_sh("%s %s compare -m %s --a reference --b %s --localize -p " PROMPT
                        " --json %s > %s 2>&1",
                        env, GAUNTLET, model, b, json, out);
    char *j = gt_test_slurp(json);
    *root = j ? cJSON_Parse(j) : NULL;
    free(j);
    *text = gt_test_slurp(out);
    ck_assert_ptr_nonnull(*text);
    return rc;
}

START_TEST(clean_run_has_no_divergence)
{
    cJSON *root;
    char *text;
    int rc = localize("", "cpu", &root, &text);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, text);
    ck_assert_msg(strstr(text, "no node beyond tolerance") && strstr(text, "largest NMSE"), "%s",
                  text);
    ck_assert_ptr_nonnull(strstr(text, "blk.0.q_rope"));
    ck_assert_ptr_nonnull(strstr(text, "result_norm"));
    ck_assert_ptr_nonnull(root);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(root, "divergence")));
    const cJSON *nodes = cJSON_GetObjectItem(root, "nodes");
    /* stories260K: embedding, 5 layers of 17 segments, norm, logits */
    ck_assert_int_gt(cJSON_GetArraySize(nodes), 5 * 17);
    const cJSON *n;
    cJSON_ArrayForEach(n, nodes)
    {
        const double added = cJSON_GetObjectItem(n, "added_nmse")->valuedouble;
        const double tol = cJSON_GetObjectItem(n, "tolerance")->valuedouble;
        ck_assert_msg(added <= tol, "%s adds %g > %g", cJSON_GetObjectItem(n, "node")->valuestring,
                      added, tol);
    }
    cJSON_Delete(root);
    free(text);
}
END_TEST

static void expect_fault(const char *backend, const fault_case *f)
{
    char env[128];
    snprintf(env, sizeof env, "GT_FAULT=%s GT_FAULT_BACKEND=%s", f->fault, backend);
    cJSON *root;
    char *text;
    int rc = localize(env, backend, &root, &text);
    ck_assert_msg(rc == 1, "%s on %s: exit %d:\n%s", f->fault, backend, rc, text);
    ck_assert_msg(root, "%s on %s: no JSON:\n%s", f->fault, backend, text);
    const cJSON *d = cJSON_GetObjectItem(root, "divergence");
    ck_assert_msg(cJSON_IsObject(d), "%s on %s: no divergence:\n%s", f->fault, backend, text);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "node")->valuestring, f->node);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "layer")->valueint, f->layer);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "op")->valuestring, f->op);
    const double added = cJSON_GetObjectItem(d, "added_nmse")->valuedouble;
    ck_assert_msg(added > 10 * cJSON_GetObjectItem(d, "tolerance")->valuedouble, "added %g",
                  added);
    ck_assert_ptr_nonnull(strstr(text, "on identical inputs"));
    cJSON_Delete(root);
    free(text);

    /* The fault is on backend only: the reference on both sides is clean. */
    rc = localize(env, "reference", &root, &text);
    ck_assert_msg(rc == 0, "%s on %s leaked into the reference: exit %d:\n%s", f->fault, backend,
                  rc, text);
    cJSON_Delete(root);
    free(text);
}

START_TEST(faults_on_cpu)
{
    expect_fault("cpu", &FAULTS[_i]);
}
END_TEST

START_TEST(faults_on_opencl)
{
    expect_fault("opencl", &FAULTS[_i]);
}
END_TEST

START_TEST(html_marks_the_node)
{
    const char *html = gt_test_tmp("loc.html");
    int rc = gt_test_sh("GT_FAULT=rope-mode@2 GT_FAULT_BACKEND=cpu %s compare -m %s --a reference "
                        "--b cpu --localize -p " PROMPT " --html %s > /dev/null 2>&1",
                        GAUNTLET, model, html);
    ck_assert_int_eq(rc, 1);
    char *page = gt_test_slurp(html);
    ck_assert_ptr_nonnull(page);
    ck_assert_ptr_nonnull(strstr(page, "<svg"));
    ck_assert_ptr_nonnull(strstr(page, "class='bad'><td>"));
    ck_assert_ptr_nonnull(strstr(page, "diverges at blk.2.q_rope"));
    free(page);
    ck_assert_int_eq(gt_test_sh("%s compare -m %s --a reference --b cpu --localize 2>/dev/null",
                                GAUNTLET, model),
                     2);
}
END_TEST

/* --- at length: --from and --passkey ------------------------------------- */

#define LONG_PROMPT                                                                                \
    "\"Once upon a time there was a little girl named Lily who loved to play outside in the "    \
    "park with her friends every day. One day she saw a big red ball under a tree and she "       \
    "ran to get it.\""

/* compare --localize with extra arguments; the JSON parsed in *root. */
static int localize_args(const char *env, const char *args, cJSON **root, char **text)
{
    char json[512], out[512];
    snprintf(json, sizeof json, "%s", gt_test_tmp("locl.json"));
    snprintf(out, sizeof out, "%s", gt_test_tmp("locl.txt"));
    remove(json);
    int rc = gt_test_sh("%s %s compare -m %s --a reference --b cpu --localize %s --json %s > %s "
                        "2>&1",
                        env, GAUNTLET, model, args, json, out);
    char *j = gt_test_slurp(json);
    *root = j ? cJSON_Parse(j) : NULL;
    free(j);
    *text = gt_test_slurp(out);
    ck_assert_ptr_nonnull(*text);
    return rc;
}

/* The divergence is blk.0.q_rope, and only ROPE nodes (q_rope, k_rope of
 * every layer) add NMSE on identical inputs: were attention not fed the
 * reference's cache, the wrapped keys of positions 32..39 that the cpu's own
 * prefill wrote would make every kqv add it too. */
static void expect_wrap_at_rope(const cJSON *root, const char *text, int tokens, int from)
{
    ck_assert_msg(root, "no JSON:\n%s", text);
    ck_assert_int_eq(cJSON_GetObjectItem(root, "tokens")->valueint, tokens);
    ck_assert_int_eq(cJSON_GetObjectItem(root, "from")->valueint, from);
    const cJSON *d = cJSON_GetObjectItem(root, "divergence");
    ck_assert_msg(cJSON_IsObject(d), "no divergence:\n%s", text);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "node")->valuestring, "blk.0.q_rope");
    ck_assert_str_eq(cJSON_GetObjectItem(d, "op")->valuestring, "ROPE");
    int beyond = 0;
    const cJSON *n;
    cJSON_ArrayForEach(n, cJSON_GetObjectItem(root, "nodes"))
    {
        const char *name = cJSON_GetObjectItem(n, "node")->valuestring;
        const double added = cJSON_GetObjectItem(n, "added_nmse")->valuedouble;
        if (added <= cJSON_GetObjectItem(n, "tolerance")->valuedouble)
            continue;
        beyond++;
        ck_assert_msg(strstr(name, "_rope"), "%s adds NMSE %g on identical inputs", name, added);
    }
    ck_assert_int_ge(beyond, 2); /* q_rope and k_rope at least */
}

START_TEST(pos_wrap_localized_from)
{
    cJSON *root;
    char *text;
    int rc = localize_args("GT_FAULT=pos-wrap@32 GT_FAULT_BACKEND=cpu",
                           "-p " LONG_PROMPT " --max-tokens 48 --from 40", &root, &text);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, text);
    ck_assert_msg(strstr(text, "over positions 40..47 of 48 tokens"), "%s", text);
    expect_wrap_at_rope(root, text, 48, 40);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "nodes")), 5 * 17 + 3);
    cJSON_Delete(root);
    free(text);

    rc = localize_args("", "-p " LONG_PROMPT " --max-tokens 48 --from 40", &root, &text);
    ck_assert_msg(rc == 0 && strstr(text, "no node beyond tolerance"), "clean: exit %d:\n%s", rc,
                  text);
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(cJSON_GetObjectItem(root, "from")->valueint, 40);
    cJSON_Delete(root);
    free(text);
}
END_TEST

/* The passkey prompt of 400 tokens (the stories vocabulary needs about 170
 * for the instruction, key and question), its last 16 compared by default. */
START_TEST(pos_wrap_localized_passkey)
{
    cJSON *root;
    char *text;
    int rc = localize_args("GT_FAULT=pos-wrap@256 GT_FAULT_BACKEND=cpu", "--passkey 400", &root,
                           &text);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, text);
    expect_wrap_at_rope(root, text, 400, 384);
    cJSON_Delete(root);
    free(text);
    rc = localize_args("", "--passkey 400", &root, &text);
    ck_assert_msg(rc == 0 && strstr(text, "no node beyond tolerance"), "clean: exit %d:\n%s", rc,
                  text);
    cJSON_Delete(root);
    free(text);
}
END_TEST

START_TEST(length_usage_errors)
{
    static const char *const bad[] = {
        "--localize --passkey 400 -p x",      /* two prompts */
        "--localize -p x --from 5",            /* from past the prompt's end */
        "--localize --passkey 20",             /* too short for the key and question */
        "--prompts p.jsonl --from 3",          /* --from without --localize */
        "--localize --passkey 0",              /* out of range */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const int rc = gt_test_sh("%s compare -m %s --a reference --b cpu %s > /dev/null 2>&1",
                                  GAUNTLET, model, bad[i]);
        ck_assert_msg(rc == 2, "%s: exit %d, want 2", bad[i], rc);
    }
}
END_TEST

/* --- the worker localizes a failed accuracy cell -------------------------- */

static char g_dir[4096], g_out[1 << 16];
#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)

static void write_matrix(void)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"localize-test\",\n"
             " \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],\n"
             " \"quants\": [\"q8_0\"],\n"
             " \"backends\": [\"reference\", \"cpu\"],\n"
             " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
             " \"tolerances\": {\"default\": {\"accuracy.drift_kld_mean\": {\"max\": 1e-3}}},\n"
             " \"tiers\": {\"acc\": {\"suites\": [\"smoke\", \"accuracy\"],\n"
             "   \"settings\": {\"smoke\": {\"reference\": false},\n"
             "                \"accuracy\": {\"max_scored\": 128, \"max_prompts\": 4, "
             "\"n_gen\": 8}}}},\n"
             " \"default_tier\": \"acc\"}\n",
             model);
    gt_test_write_file(gt_test_join(g_dir, "m.json"), text, strlen(text));
}

static long long localize_rows(const char *db, const char **msg)
{
    sqlite3 *h = gt_test_db_open(gt_test_join(g_dir, db));
    long long n = gt_test_q_int(h, "SELECT count(*) FROM results WHERE suite = 'accuracy' AND "
                                   "check_name = 'localize'");
    if (msg) {
        const char *m = n ? gt_test_q_text(h, "SELECT status || ': ' || message FROM results "
                                              "WHERE check_name = 'localize'")
                          : "";
        *msg = strdup(m ? m : "");
    }
    sqlite3_close(h);
    return n;
}

/* Smoke's comparison with the reference is off: a fault it catches stops the
 * cell before accuracy, and this test is about what accuracy's localizer
 * records. */
START_TEST(qualify_records_the_divergence)
{
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("q"));
    ck_assert_int_eq(gt_test_sh("mkdir -p %s", g_dir), 0);
    write_matrix();
    int rc = run(GAUNTLET " qualify m.json --db clean.sqlite --quiet");
    ck_assert_msg(rc == 0, "clean: exit %d:\n%s", rc, g_out);
    ck_assert_int_eq(localize_rows("clean.sqlite", NULL), 0);

    rc = run("GT_FAULT=rope-mode@2 GT_FAULT_BACKEND=cpu " GAUNTLET
             " qualify m.json --db f.sqlite --html r.html --quiet");
    ck_assert_msg(rc == 1, "faulted: exit %d:\n%s", rc, g_out);
    const char *msg;
    ck_assert_int_eq(localize_rows("f.sqlite", &msg), 1);
    ck_assert_msg(strncmp(msg, "fail: diverges at blk.2.q_rope (ROPE", 36) == 0, "%s", msg);
    ck_assert_msg(strstr(msg, "on identical inputs"), "%s", msg);
    free((char *)msg);
    char *page = gt_test_slurp(gt_test_join(g_dir, "r.html"));
    ck_assert_ptr_nonnull(page);
    ck_assert_msg(strstr(page, "diverges at blk.2.q_rope (ROPE, f32)"), "not in the report");
    free(page);

    rc = run("GT_FAULT=rope-mode@2 GT_FAULT_BACKEND=cpu " GAUNTLET
             " qualify m.json --db n.sqlite --no-localize --quiet");
    ck_assert_msg(rc == 1, "--no-localize: exit %d:\n%s", rc, g_out);
    ck_assert_int_eq(localize_rows("n.sqlite", NULL), 0);
}
END_TEST

/* A mixture of experts: its router's chosen expert ids are I32 nodes,
 * compared as the integers they hold (an error before 2026-12-07, which
 * turned every failed MoE cell's localizer into an error). The ids agree,
 * so the clean run names no divergence. */
START_TEST(moe_expert_ids_are_compared)
{
    const char *moe = gt_test_tmp("moe.gguf");
    ck_assert_int_eq(gt_test_sh("%s synth %s --preset qwen3moe-tiny --seed 1 --type q8_0"
                                " >/dev/null 2>&1",
                                GAUNTLET, moe),
                     0);
    const char *out = gt_test_tmp("moe.txt");
    int rc = gt_test_sh("%s compare -m %s --a reference --b cpu --localize -p " PROMPT
                        " > %s 2>&1",
                        GAUNTLET, moe, out);
    char *text = gt_test_slurp(out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, text ? text : "");
    ck_assert_msg(strstr(text, "ffn_moe_topk") && strstr(text, "no node beyond tolerance"), "%s",
                  text);
    free(text);
    remove(moe);
}
END_TEST

static bool opencl_usable(char *why, size_t cap)
{
    const char *log = gt_test_tmp("probe.txt");
    int rc = gt_test_sh("%s compare -m %s --a reference --b opencl --localize -p x > %s 2>&1",
                        GAUNTLET, model, log);
    char *text = gt_test_slurp(log);
    snprintf(why, cap, "opencl did not run (exit %d): %.400s", rc, text ? text : "");
    free(text);
    return rc == 0;
}

int main(void)
{
    gt_test_require_gauntlet();
    model = gt_test_llama();
    Suite *s = suite_create("localize");
    TCase *t = tcase_create("localize");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, clean_run_has_no_divergence);
    tcase_add_loop_test(t, faults_on_cpu, 0, 4);
    tcase_add_test(t, html_marks_the_node);
    tcase_add_test(t, pos_wrap_localized_from);
    tcase_add_test(t, pos_wrap_localized_passkey);
    tcase_add_test(t, length_usage_errors);
    tcase_add_test(t, qualify_records_the_divergence);
    tcase_add_test(t, moe_expert_ids_are_compared);
    char why[600];
    const bool ocl = opencl_usable(why, sizeof why);
    const char *ci = getenv("CI");
    if (!ocl && ci && ci[0] && strcmp(ci, "false") != 0) {
        printf("FAIL: OpenCL must run in CI for the localizer's opencl cases: %s\n", why);
        return 1;
    }
    if (ocl)
        tcase_add_loop_test(t, faults_on_opencl, 0, 4);
    else
        printf("SKIP faults_on_opencl: %s\n", why);
    suite_add_tcase(s, t);
    return gt_test_run(s);
}
