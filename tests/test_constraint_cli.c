/* test_constraint_cli.c: `gauntlet generate --json-schema/--json-object`
 * and `gauntlet bench --json-schema` on a synthetic model (random weights).
 *
 * - same_bytes: the constrained greedy output is the same bytes on the
 *   reference, cpu and (where it opens) opencl backends, for a bounded
 *   schema (the document completes, exit 0, and validates) and for
 *   tests/schemas/person.json and --json-object (which random weights may
 *   not complete within -n: then every backend exits 1, with the same
 *   bytes).
 * - refused: an unsupported keyword exits 2 naming it and its place; no
 *   text is generated.
 * - bench: the constrained bench prints its row with the overhead. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/synth.h"
#include "test_json_valid.h"
#include "testutil.h"

static const char *g_model;
static bool opencl_ok;
static char opencl_why[256];

#define BOUNDED                                                                              \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"     \
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\"," \
    "\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\",\"age\"]}"

/* Runs generate on backend with args; stdout into *out, stderr printed
 * (both malloc'ed files in the test folder). The user's cache stays (the
 * opencl backend's compiled kernels are kept there). */
static int generate(const char *backend, const char *args, char **out)
{
    const char *o = gt_test_tmp("out.txt"), *e = gt_test_tmp("err.txt");
    int rc = gt_test_sh("'%s/gauntlet' generate -m '%s' -b %s -t 1 -q -p 'The answer:' %s > '%s' "
                        "2> '%s'",
                        GT_BINARY_DIR, g_model, backend, args, o, e);
    *out = gt_test_slurp(o);
    char *err = gt_test_slurp(e);
    ck_assert_ptr_nonnull(*out);
    ck_assert_ptr_nonnull(err);
    printf("%s %s: rc %d: %s%s", backend, args, rc, *out, err);
    free(err);
    return rc;
}

static void same_bytes(const char *args, int want_rc, const char *schema)
{
    const char *backends[] = {"reference", "cpu", "opencl"};
    char *first = NULL;
    for (int b = 0; b < (opencl_ok ? 3 : 2); b++) {
        char *out = NULL;
        ck_assert_int_eq(generate(backends[b], args, &out), want_rc);
        ck_assert_msg(strlen(out) > 1, "no text from %s", backends[b]);
        if (!first) {
            first = out;
            continue;
        }
        ck_assert_msg(strcmp(first, out) == 0, "%s differs from reference:\n%s\n%s", backends[b],
                      out, first);
        free(out);
    }
    if (schema) {
        cJSON *doc = cJSON_Parse(first), *sch = cJSON_Parse(schema);
        ck_assert_msg(doc != NULL, "not JSON: %s", first);
        char why[256] = "";
        ck_assert_msg(gt_test_json_valid(doc, sch, sch, why, sizeof why), "%s: %s", why, first);
        cJSON_Delete(doc);
        cJSON_Delete(sch);
    }
    free(first);
}

START_TEST(same_bytes_bounded)
{
    const char *p = gt_test_tmp("bounded.json");
    gt_test_write_file(p, BOUNDED, strlen(BOUNDED));
    char args[1024];
    snprintf(args, sizeof args, "--json-schema '%s' -n 200", p);
    same_bytes(args, 0, BOUNDED);
}
END_TEST

START_TEST(same_bytes_person)
{
    char args[1024];
    snprintf(args, sizeof args, "--json-schema '%s/tests/schemas/person.json' -n 60",
             GT_SOURCE_DIR);
    char *out = NULL;
    const int rc = generate("reference", args, &out);
    free(out);
    ck_assert(rc == 0 || rc == 1); /* 1: incomplete within -n, which random weights may be */
    same_bytes(args, rc, NULL);
}
END_TEST

START_TEST(same_bytes_object)
{
    char *out = NULL;
    const int rc = generate("reference", "--json-object -n 40", &out);
    free(out);
    ck_assert(rc == 0 || rc == 1);
    same_bytes("--json-object -n 40", rc, NULL);
}
END_TEST

START_TEST(refused)
{
    const char *bad = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
                      "\"format\":\"email\"}}}";
    const char *p = gt_test_tmp("bad.json");
    gt_test_write_file(p, bad, strlen(bad));
    char out[4096];
    const char *o = gt_test_tmp("refused.txt"), *e = gt_test_tmp("refused.err");
    int rc = gt_test_sh("'%s/gauntlet' generate -m '%s' -p hi --json-schema '%s' > '%s' 2> '%s'",
                        GT_BINARY_DIR, g_model, p, o, e);
    ck_assert_int_eq(rc, 2);
    char *msg = gt_test_slurp(e);
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, "unsupported JSON Schema keyword \"format\" at /properties/name"),
                  "%s", msg);
    free(msg);
    char *text = gt_test_slurp(o);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, ""); /* nothing generated */
    free(text);
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                        "'%s/gauntlet' generate -m '%s' -p hi --json-schema '%s' --json-object",
                        GT_BINARY_DIR, g_model, p);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "exclude each other"), "%s", out);
}
END_TEST

START_TEST(bench)
{
    const char *p = gt_test_tmp("bounded.json");
    gt_test_write_file(p, BOUNDED, strlen(BOUNDED));
    char out[8192];
    int rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                            "'%s/gauntlet' bench -m '%s' -b reference -t 1 --json-schema '%s' "
                            "-n 200 -r 1",
                            GT_BINARY_DIR, g_model, p);
    printf("%s", out);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(out, "| mask ms/tok |") && strstr(out, "| 512 |") &&
                      strstr(out, "| yes |"),
                  "%s", out);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    static char path[4096];
    gt_err err = {{0}};
    snprintf(path, sizeof path, "%s", gt_test_tmp("tiny.gguf"));
    if (gt_synth_write(path, "tiny", 5, GT_TYPE_F32, &err) != 0) {
        fprintf(stderr, "cannot write the synthetic model: %s\n", err.msg);
        return 1;
    }
    g_model = path;
    opencl_ok = gt_test_opencl_opens(opencl_why, sizeof opencl_why);
    if (!opencl_ok)
        printf("SKIP opencl in same_bytes: %s\n", opencl_why);
    Suite *s = suite_create("constraint_cli");
    TCase *tc = tcase_create("constraint_cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, same_bytes_bounded);
    tcase_add_test(tc, same_bytes_person);
    tcase_add_test(tc, same_bytes_object);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, bench);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
