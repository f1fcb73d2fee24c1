/* test_bench_depth.c: `gauntlet bench -d LIST` (speed at depth, issue 37),
 * without judging any speed (the machine is shared; numbers are measured
 * by hand and written down in the README):
 * 1. On a synthetic tiny model, -d 0,8,40 -p 4 -n 2 -o json gives one pp4
 *    and one tg2 row per depth, each with its depth, in the order given,
 *    and positive tokens/s; csv and md have the depth column.
 * 2. A bad -d (empty, a word, a negative, an empty item, a repeat, too
 *    many, too deep) is refused with exit 2 and a message naming it.
 * 3. --peer llama-bench=PATH passes the same -d to the peer: a stand-in
 *    script that answers llama-bench's JSON for exactly the depths it was
 *    given (and fails on any other argument list), so each row gets the
 *    peer's t/s at its own depth and the ratio. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gt/synth.h"
#include "testutil.h"

static const char *model;
static char out[1 << 16];

static void make_model(void)
{
    gt_err err = {{0}};
    model = gt_test_tmp("tiny-depth.gguf");
    ck_assert_msg(gt_synth_write(model, "tiny", 3, GT_TYPE_F32, &err) == 0, "%s", err.msg);
}

static int bench(const char *args)
{
    return gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                          "sh -c '%s/gauntlet bench -m %s -b cpu -t 1 --no-machine -r 1 %s 2>/dev/null'",
                          GT_BINARY_DIR, model, args);
}

/* The result rows of a json run, checked: depths[i] per pair of rows. */
static cJSON *rows_at(const long *depths, int n)
{
    cJSON *arr = cJSON_Parse(out);
    ck_assert_msg(cJSON_IsArray(arr), "not JSON: %s", out);
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(e, "kind"));
        ck_assert_msg(kind && strcmp(kind, "result") == 0, "%s", out);
        ck_assert_msg(k < 2 * n, "more than %d rows: %s", 2 * n, out);
        const char *test = cJSON_GetStringValue(cJSON_GetObjectItem(e, "test"));
        const cJSON *d = cJSON_GetObjectItem(e, "depth");
        const cJSON *tps = cJSON_GetObjectItem(e, "tokens_per_s");
        ck_assert_msg(test && strcmp(test, k % 2 ? "tg2" : "pp4") == 0, "row %d: %s", k, out);
        ck_assert_msg(cJSON_IsNumber(d) && (long)d->valuedouble == depths[k / 2], "row %d: %s", k,
                      out);
        ck_assert_msg(cJSON_IsNumber(tps) && tps->valuedouble > 0, "row %d: %s", k, out);
        k++;
    }
    ck_assert_int_eq(k, 2 * n);
    return arr;
}

START_TEST(one_row_per_depth)
{
    make_model();
    ck_assert_msg(bench("-p 4 -n 2 -d 0,8,40 -o json") == 0, "%s", out);
    cJSON_Delete(rows_at((const long[]){0, 8, 40}, 3));
    ck_assert_msg(bench("-p 4 -n 2 -o json") == 0, "%s", out); /* default: depth 0 */
    cJSON_Delete(rows_at((const long[]){0}, 1));
    ck_assert_msg(bench("-p 4 -n 2 -d 40,0 -o csv") == 0, "%s", out);
    /* depth is the last column (scripts read the others by number) */
    ck_assert_msg(strstr(out, ",test,tokens_per_s,") && strstr(out, ",ratio_vs_peer,int8_gops,depth\n"),
                  "%s", out);
    const char *line = strchr(out, '\n');
    static const char *const want[4] = {"pp4", "tg2", "pp4", "tg2"};
    static const long depth[4] = {40, 40, 0, 0};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(line && line[1], "row %d missing: %s", i, out);
        char test[16] = "";
        int field = 0;
        const char *p = line + 1, *last = p;
        for (; *p && *p != '\n'; p++)
            if (*p == ',') {
                if (++field == 6)
                    sscanf(p + 1, "%15[^,]", test);
                last = p + 1;
            }
        ck_assert_msg(strcmp(test, want[i]) == 0 && strtol(last, NULL, 10) == depth[i] &&
                          field == 22,
                      "row %d: %s", i, out);
        line = p;
    }
    ck_assert_msg(bench("-p 0 -n 2 -d 16") == 0, "%s", out);
    ck_assert_msg(strstr(out, "| test | depth | t/s |") && strstr(out, "| tg2 | 16 | "), "%s", out);
}
END_TEST

/* The cpu backend's act=q8 prefill of quantized weights is judged against
 * the int8 peak the same run measures, the f32 path against sgemm. */
START_TEST(int8_prefill_against_int8_peak)
{
    gt_err err = {{0}};
    const char *q8 = gt_test_tmp("tiny-q8.gguf");
    ck_assert_msg(gt_synth_write(q8, "tiny", 3, GT_TYPE_Q8_0, &err) == 0, "%s", err.msg);
    for (int act = 0; act < 2; act++) {
        /* with the machine measured (a small bandwidth buffer) */
        const int rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                                      "sh -c '%s/gauntlet bench -m %s -b cpu -t 1 -r 1 -p 32 -n 0 "
                                      "--bw-mib 16 --driver act=%s -o jsonl 2>/dev/null'",
                                      GT_BINARY_DIR, q8, act ? "q8" : "f32");
        ck_assert_msg(rc == 0, "%s", out);
        const char *k = strstr(out, "\"int8_gops\":");
        ck_assert_msg(k, "no int8 peak: %s", out);
        const double peak = strtod(k + strlen("\"int8_gops\":"), NULL);
        ck_assert_msg(peak > 0 || strstr(out, "\"int8_isa\":\"none"), "%s", out);
        if (act)
            ck_assert_msg(peak == 0 || strstr(out, "\"pct_of_int8_peak\":"), "%s", out);
        else
            ck_assert_msg(strstr(out, "\"pct_of_sgemm\":") && !strstr(out, "pct_of_int8_peak"), "%s",
                          out);
    }
}
END_TEST

START_TEST(bad_depth_refused)
{
    make_model();
    static const struct {
        const char *arg, *says;
    } cases[] = {
        {"''", "expected a comma-separated list of depths"},
        {"deep", "-d deep: expected a comma-separated list"},
        {"-5", "-d -5: expected"},
        {"0,,8", "-d 0,,8: expected"},
        {"8,", "-d 8,: expected"},
        {"4096x", "-d 4096x: expected"},
        {"8,0,8", "depth 8 is listed twice"},
        {"0,1,2,3,4,5,6,7,8", "at most 8 depths"},
        {"2000000", "0 to 1048576"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                                      "%s/gauntlet bench -m %s --no-machine -n 2 -p 0 -d %s",
                                      GT_BINARY_DIR, model, cases[i].arg);
        ck_assert_msg(rc == 2 && strstr(out, cases[i].says), "-d %s: rc %d: %s", cases[i].arg, rc,
                      out);
    }
}
END_TEST

/* A llama-bench stand-in: JSON like llama-bench's -o json for the -p, -n
 * and -d it was given (t/s = 1000 + depth for pp, 100 + depth for tg, so
 * a row matched to another depth's result shows in the ratio); exits 3 on
 * an argument list it does not expect. */
static const char *fake_peer(void)
{
    const char *path = gt_test_tmp("llama-bench");
    static const char script[] =
        "#!/bin/sh\n"
        "[ \"$1\" = -m ] && [ \"$3\" = -p ] && [ \"$5\" = -n ] && [ \"$7\" = -d ] || "
        "{ echo \"unexpected args: $*\" >&2; exit 3; }\n"
        "p=$4; n=$6; sep=''\n"
        "printf '['\n"
        "for d in $(echo \"$8\" | tr , ' '); do\n"
        "  [ \"$p\" -gt 0 ] && printf '%s{\"build_commit\":\"fake\",\"build_number\":1,\"n_prompt\":%s,"
        "\"n_gen\":0,\"n_depth\":%s,\"avg_ts\":%s}' \"$sep\" $p $d $((1000 + d)) && sep=,\n"
        "  [ \"$n\" -gt 0 ] && printf '%s{\"build_commit\":\"fake\",\"build_number\":1,\"n_prompt\":0,"
        "\"n_gen\":%s,\"n_depth\":%s,\"avg_ts\":%s}' \"$sep\" $n $d $((100 + d)) && sep=,\n"
        "done\n"
        "printf ']\\n'\n";
    gt_test_write_file(path, script, strlen(script));
    ck_assert_int_eq(chmod(path, 0755), 0);
    return path;
}

START_TEST(peer_gets_the_depths)
{
    make_model();
    char args[512];
    snprintf(args, sizeof args, "-p 4 -n 2 -d 0,8 -o json --peer llama-bench=%s", fake_peer());
    ck_assert_msg(bench(args) == 0, "%s", out);
    cJSON *arr = rows_at((const long[]){0, 8}, 2);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const long d = (long)cJSON_GetObjectItem(e, "depth")->valuedouble;
        const bool pp = cJSON_GetStringValue(cJSON_GetObjectItem(e, "test"))[0] == 'p';
        const cJSON *peer = cJSON_GetObjectItem(e, "peer_tokens_per_s");
        const cJSON *ratio = cJSON_GetObjectItem(e, "ratio_vs_peer");
        const double tps = cJSON_GetObjectItem(e, "tokens_per_s")->valuedouble;
        ck_assert_msg(cJSON_IsNumber(peer) && peer->valuedouble == (pp ? 1000 : 100) + d, "%s",
                      out);
        /* JSON's 15-17 digits: equal to rounding */
        ck_assert_msg(cJSON_IsNumber(ratio) &&
                          fabs(ratio->valuedouble - tps / peer->valuedouble) <=
                              1e-9 * ratio->valuedouble,
                      "%s", out);
    }
    cJSON_Delete(arr);
    /* the markdown's peer table: one row per test and depth */
    snprintf(args, sizeof args, "-p 0 -n 2 -d 0,8 --peer llama-bench=%s", fake_peer());
    ck_assert_msg(bench(args) == 0, "%s", out);
    ck_assert_msg(strstr(out, "| test | depth | cpu t/s | llama.cpp t/s |") &&
                      strstr(out, "| tg2 | 0 | ") && strstr(out, "| 100.00 | ") &&
                      strstr(out, "| tg2 | 8 | ") && strstr(out, "| 108.00 | "),
                  "%s", out);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    Suite *s = suite_create("bench_depth");
    TCase *tc = tcase_create("bench_depth");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, one_row_per_depth);
    tcase_add_test(tc, int8_prefill_against_int8_peak);
    tcase_add_test(tc, bad_depth_refused);
    tcase_add_test(tc, peer_gets_the_depths);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
