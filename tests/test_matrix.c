/* test_matrix.c: the matrix parser, validator and expansion.
 *
 * In-process (the harness sources are included directly, with a small fake
 * suite table so the test does not depend on which suites exist): valid
 * matrices expand to the expected cells in a stable order, rules and
 * tolerances resolve as documented; every kind of bad matrix fails with the
 * file name and the JSON path of the offending value. The same bad matrices
 * are then given to the real binary (`gauntlet plan`), which must exit 2 and
 * say the same thing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

#ifndef GT_VERSION
#define GT_VERSION "test"
#endif
#include "../harness/net/fetch.c"
#include "../harness/net/fetch_model.c"
#include "../harness/net/fetch_pypi.c"
#include "../harness/base/jsonv.c"
#include "../harness/matrix/matrix.c"
#include "../harness/matrix/quant_scheme.c"
#include "../harness/matrix/matrix_expand.c"
#include "../harness/matrix/matrix_http.c"
#include "../harness/matrix/matrix_settings.c"
#include "../harness/base/sha256.c"
#include "../harness/base/status.c"
#include "../harness/base/tolerance.c"

/* The fake suite table the matrix validates against. */
static const gt_metric_def SMOKE_METRICS[] = {
    {"load_ms", "ms", -1, false, NULL, ""},
    {"decode_tps", "tok/s", +1, true, NULL, ""},
    {"nonfinite", "count", -1, false, "{\"eq\": 0}", ""},
    {"ref_agreement", "ratio", +1, false, "{\"min\": 0.9}", ""},
    {NULL},
};
static const gt_setting_def SMOKE_SETTINGS[] = {
    {"n_tokens", GT_SET_INT, ""},
    {"prompts", GT_SET_STRINGS, ""},
    {"reference", GT_SET_BOOL, ""},
    {NULL},
};
static const gt_suite FAKE_SMOKE = {.name = "smoke", .metrics = SMOKE_METRICS,
                                    .settings = SMOKE_SETTINGS};
static const gt_suite FAKE_PERF = {.name = "performance", .metrics = SMOKE_METRICS + 1};

const gt_suite *gt_suite_find(const char *name)
{
    return !strcmp(name, "smoke") ? &FAKE_SMOKE : !strcmp(name, "performance") ? &FAKE_PERF : NULL;
}
const gt_metric_def *gt_suite_metric_def(const gt_suite *s, const char *name)
{
    for (const gt_metric_def *d = s->metrics; d && d->name; d++)
        if (!strcmp(d->name, name))
            return d;
    return NULL;
}
const gt_setting_def *gt_suite_setting_def(const gt_suite *s, const char *name)
{
    for (const gt_setting_def *d = s->settings; d && d->name; d++)
        if (!strcmp(d->name, name))
            return d;
    return NULL;
}

#define MODELS                                                                               \
    "\"models\": [{\"id\": \"a\", \"path\": \"/nonexistent/a.gguf\"},"                      \
    " {\"id\": \"b\", \"synth\": {\"preset\": \"tiny\"}}]"
#define TIERS "\"tiers\": {\"smoke\": {\"suites\": [\"smoke\"]}}"
#define BASE(extra)                                                                          \
    "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\", \"q8_0\"],"                        \
    " \"backends\": [\"reference\", \"cpu\"], " TIERS extra "}"

static gt_matrix *parse_ok(const char *text)
{
    gt_matrix *m = NULL;
    gt_err err = {{0}};
    int rc = gt_matrix_parse("t.json", text, strlen(text), &m, &err);
    ck_assert_msg(rc == 0, "parse failed: %s", err.msg);
    return m;
}

static gt_cell *expand(gt_matrix *m, const char *tier, int *n)
{
    gt_err err = {{0}};
    const gt_mx_tier *t = gt_matrix_tier(m, tier, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    gt_cell *cells;
    ck_assert_msg(gt_matrix_expand(m, t, &cells, n, &err) == 0, "%s", err.msg);
    return cells;
}

START_TEST(expands_in_axis_order)
{
    gt_matrix *m = parse_ok(BASE(""));
    int n;
    gt_cell *c = expand(m, NULL, &n);
    ck_assert_int_eq(n, 8);
    static const char *const want[] = {"a/f32/reference/default",  "a/f32/cpu/default",
                                       "a/q8_0/reference/default", "a/q8_0/cpu/default",
                                       "b/f32/reference/default",  "b/f32/cpu/default",
                                       "b/q8_0/reference/default", "b/q8_0/cpu/default"};
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(c[i].id, want[i]);
        ck_assert_int_eq(c[i].index, i);
        ck_assert(c[i].required);
        ck_assert_int_eq(c[i].expected, GT_ST_PASS);
        ck_assert_double_eq(c[i].timeout_s, 300);
    }
    ck_assert_int_eq(c[2].type, GT_TYPE_Q8_0);
    /* The suite's default tolerance is in every cell. */
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c[0].tolerances, "smoke.nonfinite");
    ck_assert(cJSON_IsObject(t));
    ck_assert_double_eq(cJSON_GetObjectItem(t, "eq")->valuedouble, 0);
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

START_TEST(ids_are_stable)
{
    /* Same text, same ids and same hash; whitespace changes the hash only. */
    gt_matrix *a = parse_ok(BASE("")), *b = parse_ok(BASE("")), *c = parse_ok(BASE(" "));
    ck_assert_str_eq(a->sha256, b->sha256);
    ck_assert_str_ne(a->sha256, c->sha256);
    int na, nb;
    gt_cell *ca = expand(a, NULL, &na), *cb = expand(c, NULL, &nb);
    ck_assert_int_eq(na, nb);
    for (int i = 0; i < na; i++)
        ck_assert_str_eq(ca[i].id, cb[i].id);
    gt_cells_free(ca, na);
    gt_cells_free(cb, nb);
    gt_matrix_free(a);
    gt_matrix_free(b);
    gt_matrix_free(c);
}
END_TEST

START_TEST(rules_drivers_and_tolerances)
{
    const char *text =
        "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\", \"q8_0\"],"
        " \"defaults\": {\"timeout_s\": 30, \"memory_mb\": 1024, \"threads\": 2, \"seed\": 7},"
        " \"backends\": [\"reference\", {\"id\": \"cpu\", \"timeout_s\": 5, \"drivers\": ["
        "   {\"id\": \"openblas\", \"driver\": \"blas=libopenblas.so.0\"},"
        "   {\"id\": \"refblas\", \"driver\": \"blas=libblas.so.3\", \"version\": \">=3\"}]}],"
        " \"include\": [{\"model\": \"a\", \"quant\": \"q4_0\", \"backend\": \"reference\"}],"
        " \"exclude\": [{\"model\": \"b\", \"quant\": \"q8_0\", \"reason\": \"slow\"}],"
        " \"expect\": [{\"cell\": \"a/*/cpu/refblas\", \"status\": \"xfail\", \"reason\": \"bug 1\"},"
        "   {\"backend\": \"cpu\", \"model\": \"b\", \"status\": \"skip\", \"reason\": \"no\"}],"
        " \"tolerances\": {\"default\": {\"smoke.load_ms\": {\"max\": 100}},"
        "   \"quants\": {\"q8_0\": {\"smoke.load_ms\": {\"max\": 200}}},"
        "   \"cells\": [{\"cell\": \"a/q8_0/cpu/*\", \"metrics\": {\"smoke.load_ms\": {\"max\": 300},"
        "      \"smoke.nonfinite\": {\"max\": 1}}}]},"
        " \"gate\": {\"optional\": [\"*/cpu/refblas\"], \"perf_regression_pct\": 5},"
        " \"tiers\": {\"ci\": {\"suites\": [\"smoke\"], \"timeout_s\": 9,"
        "    \"settings\": {\"smoke\": {\"n_tokens\": 4, \"prompts\": [\"x\"]}}},"
        "  \"fast\": {\"suites\": [\"smoke\"], \"cells\": [\"*/reference/*\"],"
        "    \"gate\": {\"allowed\": [\"pass\"]}}}, \"default_tier\": \"fast\"}";
    gt_matrix *m = parse_ok(text);
    ck_assert_int_eq(m->seed, 7);
    int n;
    gt_cell *c = expand(m, "ci", &n);
    /* a: f32,q8_0 x (ref, openblas, refblas) = 6, + include a/q4_0/reference;
     * b: f32 x 3 (q8_0 excluded) = 3. */
    ck_assert_int_eq(n, 10);
    ck_assert_str_eq(c[1].id, "a/f32/cpu/openblas");
    ck_assert_str_eq(c[1].driver->driver, "blas=libopenblas.so.0");
    ck_assert_str_eq(c[2].id, "a/f32/cpu/refblas");
    ck_assert_int_eq(c[2].expected, GT_ST_XFAIL);
    ck_assert_str_eq(c[2].expect_reason, "bug 1");
    ck_assert(!c[2].required);
    ck_assert(c[1].required);
    ck_assert_str_eq(c[6].id, "b/f32/reference/default");
    ck_assert_int_eq(c[7].expected, GT_ST_SKIP);
    ck_assert_str_eq(c[9].id, "a/q4_0/reference/default");
    ck_assert_double_eq(c[0].timeout_s, 9); /* the tier's timeout wins */
    ck_assert_int_eq(c[0].memory_mb, 1024);
    ck_assert_int_eq(c[1].threads, 2);
    double want_load[] = {100, 100, 100, 200, 300, 300};
    for (int i = 0; i < 6; i++) {
        const cJSON *t = cJSON_GetObjectItem(c[i].tolerances, "smoke.load_ms");
        ck_assert_msg(t && cJSON_GetObjectItem(t, "max")->valuedouble == want_load[i],
                      "cell %s", c[i].id);
    }
    const cJSON *nf = cJSON_GetObjectItem(c[4].tolerances, "smoke.nonfinite");
    ck_assert_double_eq(cJSON_GetObjectItem(nf, "max")->valuedouble, 1);
    gt_cells_free(c, n);

    c = expand(m, NULL, &n); /* default tier "fast": reference cells only */
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(strstr(c[i].id, "/reference/"));
        ck_assert_int_eq(c[i].index, i);
    }
    ck_assert_double_eq(c[0].timeout_s, 30); /* defaults.timeout_s */
    const gt_mx_tier *fast = gt_matrix_tier(m, "fast", NULL);
    ck_assert_uint_eq(fast->gate.allowed, GT_ST_BIT(GT_ST_PASS));
    ck_assert_double_eq(m->gate.perf_regression_pct, 5);
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

START_TEST(patterns_and_versions)
{
    gt_mx_rule r = {.glob = "*/q4_0/*"};
    ck_assert(gt_rule_match(&r, "m/q4_0/cpu/default"));
    ck_assert(!gt_rule_match(&r, "m/q8_0/cpu/default"));
    gt_mx_rule ax = {.axis = {NULL, "q*", "cpu", NULL}};
    ck_assert(gt_rule_match(&ax, "m/q4_0/cpu/openblas"));
    ck_assert(!gt_rule_match(&ax, "m/f32/cpu/openblas"));
    ck_assert(!gt_rule_match(&ax, "m/q4_0/opencl/pocl"));

    ck_assert(gt_version_satisfies("12.4", ">=12.4"));
    ck_assert(gt_version_satisfies("CUDA 12.6 (runtime 12.4)", ">=12.4,<13"));
    ck_assert(!gt_version_satisfies("12.2", ">=12.4"));
    ck_assert(!gt_version_satisfies("13.0", ">=12.4,<13"));
    ck_assert(gt_version_satisfies("PoCL 3.1-debian", "==3.1"));
    ck_assert(!gt_version_satisfies("no version", ">=1"));
    ck_assert(gt_version_constraint_valid(">=3, <4"));
    ck_assert(!gt_version_constraint_valid("3.1"));
    ck_assert(!gt_version_constraint_valid(">=x"));
    ck_assert(!gt_version_constraint_valid("~>3"));

    const char *cmp;
    double tol;
    cJSON *spec = cJSON_Parse("{\"min\": 0.5}");
    ck_assert_int_eq(gt_tol_eval(spec, 0.7, &cmp, &tol), GT_ST_PASS);
    ck_assert_str_eq(cmp, ">=");
    ck_assert_int_eq(gt_tol_eval(spec, 0.2, &cmp, &tol), GT_ST_FAIL);
    ck_assert_int_eq(gt_tol_eval(spec, NAN, &cmp, &tol), GT_ST_FAIL);
    ck_assert_int_eq(gt_tol_eval(NULL, 1, &cmp, &tol), GT_ST_PENDING);
    cJSON_Delete(spec);

    char hex[65];
    gt_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    gt_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

START_TEST(relative_paths_use_root)
{
    const char *path = gt_test_tmp("sub");
    mkdir(path, 0755);
    char file[4200];
    snprintf(file, sizeof file, "%s/m.json", path);
    const char *text = "{\"name\": \"t\", \"root\": \"..\", " MODELS ", \"quants\": [\"f32\"],"
                       " \"backends\": [\"reference\"], " TIERS "}";
    gt_test_write_file(file, text, strlen(text));
    gt_matrix *m;
    gt_err err = {{0}};
    ck_assert_msg(gt_matrix_load(file, &m, &err) == 0, "%s", err.msg);
    char out[4200], want[4200];
    gt_matrix_resolve(m, "x/y.gguf", out, sizeof out);
    char real[4096];
    ck_assert_ptr_nonnull(realpath(gt_test_tmp(""), real));
    snprintf(want, sizeof want, "%s/x/y.gguf", real);
    ck_assert_str_eq(out, want);
    gt_matrix_resolve(m, "/abs.gguf", out, sizeof out);
    ck_assert_str_eq(out, "/abs.gguf");
    gt_matrix_free(m);
}
END_TEST

/* "http" entries: their id is the backend axis value, one "default"
 * profile, the health URL derived from the endpoint unless given. */
START_TEST(http_entries)
{
    const char *text =
        "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\","
        " {\"id\": \"serve-cpu\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
        "  \"start\": [\"{gauntlet}\", \"serve\", \"-m\", \"{model_path}\", \"--port\", \"{port}\","
        "  \"-t\", \"{threads}\", \"{literal\", \"{Not_a_placeholder}\"], \"threads\": 2},"
        " {\"id\": \"ext\", \"backend\": \"http\", \"endpoint\": \"http://localhost:8080/api/v1\","
        "  \"model\": \"m\", \"health\": \"/v1/models\", \"start_timeout_s\": 5, \"timeout_s\": 9},"
        " {\"id\": \"ext2\", \"backend\": \"http\", \"endpoint\": \"http://10.0.0.1/v1\","
        "  \"health\": \"http://10.0.0.1:9000/ready\"}], " TIERS
        ", \"exclude\": [{\"backend\": \"ext*\", \"model\": \"b\"}]}";
    gt_matrix *m = parse_ok(text);
    ck_assert_int_eq(m->n_backends, 4);
    const gt_mx_backend *cpu = &m->backends[0], *s = &m->backends[1], *e = &m->backends[2],
                        *e2 = &m->backends[3];
    ck_assert(!cpu->is_http);
    ck_assert(s->is_http && e->is_http && e2->is_http);
    ck_assert_str_eq(s->http.endpoint, "http://127.0.0.1:{port}/v1");
    ck_assert_str_eq(s->http.health, "http://127.0.0.1:{port}/health");
    ck_assert_int_eq(cJSON_GetArraySize(s->http.start), 10);
    ck_assert_ptr_null(s->http.model);
    ck_assert_double_eq(s->http.start_timeout_s, 60);
    ck_assert_int_eq(s->threads, 2);
    ck_assert_int_eq(s->n_drivers, 1);
    ck_assert_str_eq(s->drivers[0].id, "default");
    ck_assert_str_eq(e->http.health, "http://localhost:8080/v1/models");
    ck_assert_str_eq(e->http.model, "m");
    ck_assert_ptr_null(e->http.start);
    ck_assert_double_eq(e->http.start_timeout_s, 5);
    ck_assert_str_eq(e2->http.health, "http://10.0.0.1:9000/ready");
    int n;
    gt_cell *c = expand(m, NULL, &n);
    static const char *const want[] = {"a/f32/cpu/default", "a/f32/serve-cpu/default",
                                       "a/f32/ext/default", "a/f32/ext2/default",
                                       "b/f32/cpu/default", "b/f32/serve-cpu/default"};
    ck_assert_int_eq(n, 6);
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(c[i].id, want[i]);
    ck_assert_ptr_eq(c[1].backend, s);
    ck_assert_int_eq(c[1].threads, 2);
    ck_assert_double_eq(c[2].timeout_s, 9);
    gt_cells_free(c, n);
    gt_matrix_free(m);
}
END_TEST

/* Bad matrices: the text, and what the message must contain (the JSON
 * path, and a word of what was expected). */
typedef struct bad_case {
    const char *name, *text, *path, *what;
} bad_case;

static const bad_case BAD[] = {
    {"syntax", "{\"name\": \"t\",\n  \"models\": [\n  }", ".json:3:3:", "JSON syntax error"},
    {"trailing", BASE("") " {}", ".json:1:", "JSON syntax error"},
    {"not an object", "[1, 2]", "(top level)", "expected an object"},
    {"unknown top key", BASE(", \"modles\": []"), "modles", "unknown key"},
    {"survivor not a runtime fault", BASE(", \"survivors\": [{\"fault\": \"segv\", \"reason\": \"r\"}]"),
     "survivors[0].fault", "runtime fault kind"},
    {"survivor with argument",
     BASE(", \"survivors\": [{\"fault\": \"attn-window=3\", \"reason\": \"r\"}]"),
     "survivors[0].fault", "without argument"},
    {"survivor without reason", BASE(", \"survivors\": [{\"fault\": \"attn-window\"}]"),
     "survivors[0].reason", "required key"},
    {"survivor of no tier",
     BASE(", \"survivors\": [{\"fault\": \"nan-at\", \"tiers\": [\"x\"], \"reason\": \"r\"}]"),
     "survivors[0].tiers[0]", "one of this matrix's tiers"},
    {"unknown model key",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\", \"path\": \"x\"}, {\"id\": \"b\","
     " \"path\": \"y\", \"sha\": \"1\"}], \"quants\": [\"f32\"], \"backends\": [\"cpu\"], " TIERS "}",
     "models[1].sha", "unknown key"},
    {"wrong type",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\", \"path\": \"x\", \"sha256\": 12}],"
     " \"quants\": [\"f32\"], \"backends\": [\"cpu\"], " TIERS "}",
     "models[0].sha256", "expected a string"},
    {"bad sha256",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\", \"path\": \"x\"}, {\"id\": \"b\","
     " \"path\": \"y\", \"sha256\": \"abc\"}], \"quants\": [\"f32\"], \"backends\": [\"cpu\"], " TIERS
     "}",
     "models[1].sha256", "64 lower-case hex"},
    {"pypi unpinned",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\", \"file\": \"a.gguf\", \"sha256\": \""
     "0000000000000000000000000000000000000000000000000000000000000000\", \"pypi\":"
     " {\"package\": \"p\", \"member\": \"a.gguf\"}}], \"quants\": [\"f32\"],"
     " \"backends\": [\"cpu\"], " TIERS "}",
     "models[0].pypi", "must pin a version"},
    {"pypi without sha256",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\", \"file\": \"a.gguf\", \"pypi\":"
     " {\"package\": \"p==1\", \"member\": \"a.gguf\"}}], \"quants\": [\"f32\"],"
     " \"backends\": [\"cpu\"], " TIERS "}",
     "models[0].pypi", "needs \"file\""},
    {"no source",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\"}], \"quants\": [\"f32\"],"
     " \"backends\": [\"cpu\"], " TIERS "}",
     "models[0]", "where the model comes from"},
    {"empty models", "{\"name\": \"t\", \"models\": [], \"quants\": [\"f32\"],"
                     " \"backends\": [\"cpu\"], " TIERS "}",
     "models", "non-empty"},
    {"empty quants",
     "{\"name\": \"t\", " MODELS ", \"quants\": [], \"backends\": [\"cpu\"], " TIERS "}", "quants",
     "non-empty"},
    {"missing backends", "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], " TIERS "}",
     "backends", "required key is missing"},
    {"unknown quant",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\", \"q7_k\"], \"backends\": [\"cpu\"], " TIERS
     "}",
     "quants[1]", "quant scheme"},
    {"unknown backend",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\", \"vulkan\"], " TIERS
     "}",
     "backends[1]", "unknown backend"},
    {"unknown backend object",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"metal\"}], " TIERS
     "}",
     "backends[0].id", "unknown backend"},
    {"duplicate model id",
     "{\"name\": \"t\", \"models\": [{\"id\": \"a\", \"path\": \"x\"}, {\"id\": \"a\","
     " \"path\": \"y\"}], \"quants\": [\"f32\"], \"backends\": [\"cpu\"], " TIERS "}",
     "models[1].id", "duplicate"},
    {"duplicate backend",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\", \"cpu\"], " TIERS
     "}",
     "backends[1]", "duplicate"},
    {"duplicate driver",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"cpu\","
     " \"drivers\": [{\"id\": \"x\"}, {\"id\": \"x\"}]}], " TIERS "}",
     "backends[0].drivers[1].id", "duplicate"},
    {"duplicate json key", BASE(", \"name\": \"u\""), "name", "duplicate key"},
    {"bad version",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"cuda\","
     " \"drivers\": [{\"id\": \"d\", \"version\": \"12.4\"}]}], " TIERS "}",
     "backends[0].drivers[0].version", "version constraint"},
    {"unknown suite",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"],"
     " \"tiers\": {\"ci\": {\"suites\": [\"smoke\", \"nope\"]}}}",
     "tiers.ci.suites[1]", "known suite"},
    {"no tiers", "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"]}",
     "tiers", "required key is missing"},
    {"unknown setting",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"],"
     " \"tiers\": {\"ci\": {\"suites\": [\"smoke\"], \"settings\": {\"smoke\": {\"ntok\": 1}}}}}",
     "tiers.ci.settings.smoke.ntok", "unknown setting"},
    {"setting type",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"],"
     " \"tiers\": {\"ci\": {\"suites\": [\"smoke\"], \"settings\": {\"smoke\": {\"n_tokens\": \"8\"}}}}}",
     "tiers.ci.settings.smoke.n_tokens", "expected an integer"},
    {"settings for a suite not run",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"],"
     " \"tiers\": {\"ci\": {\"suites\": [\"smoke\"], \"settings\": {\"performance\": {}}}}}",
     "tiers.ci.settings.performance", "does not run"},
    {"exclude matches nothing", BASE(", \"exclude\": [\"*/q4_1/*\"]"), "exclude[0]",
     "matches no cell"},
    {"xfail matches nothing",
     BASE(", \"expect\": [{\"cell\": \"a/f32/cpu/default\", \"status\": \"xfail\", \"reason\": \"r\"},"
          " {\"backend\": \"opencl\", \"status\": \"xfail\", \"reason\": \"r\"}]"),
     "expect[1]", "matches no cell"},
    {"xfail without reason", BASE(", \"expect\": [{\"cell\": \"*\", \"status\": \"xfail\"}]"),
     "expect[0].reason", "required"},
    {"bad expect status",
     BASE(", \"expect\": [{\"cell\": \"*\", \"status\": \"pass\", \"reason\": \"r\"}]"),
     "expect[0].status", "\"xfail\" or \"skip\""},
    {"check expectation of an unknown suite",
     BASE(", \"expect\": [{\"cell\": \"*\", \"check\": \"nosuch.x\", \"status\": \"xfail\", \"reason\": \"r\"}]"),
     "expect[0].check", "of a known suite"},
    {"check expectation without a check name",
     BASE(", \"expect\": [{\"cell\": \"*\", \"check\": \"smoke.\", \"status\": \"xfail\", \"reason\": \"r\"}]"),
     "expect[0].check", "<suite>.<check>"},
    {"check expectation that skips",
     BASE(", \"expect\": [{\"cell\": \"*\", \"check\": \"smoke.generate\", \"status\": \"skip\", \"reason\": \"r\"}]"),
     "expect[0].status", "a \"check\" expectation is \"xfail\""},
    {"unknown metric", BASE(", \"tolerances\": {\"default\": {\"smoke.laod_ms\": {\"max\": 1}}}"),
     "tolerances.default[\"smoke.laod_ms\"]", "no metric"},
    {"two bounds",
     BASE(", \"tolerances\": {\"default\": {\"smoke.load_ms\": {\"max\": 1, \"min\": 0}}}"),
     "tolerances.default[\"smoke.load_ms\"]", "exactly one"},
    {"tolerance quant unused",
     BASE(", \"tolerances\": {\"quants\": {\"q4_0\": {\"smoke.load_ms\": {\"max\": 1}}}}"),
     "tolerances.quants.q4_0", "no cell uses"},
    {"tolerance cell unused",
     BASE(", \"tolerances\": {\"cells\": [{\"cell\": \"zzz/*\", \"metrics\": {}}]}"),
     "tolerances.cells[0]", "matches no cell"},
    {"gate status", BASE(", \"gate\": {\"allowed\": [\"pass\", \"fine\"]}"), "gate.allowed[1]",
     "expected a status"},
    {"gate pattern unused", BASE(", \"gate\": {\"required\": [\"*/cuda/*\"]}"),
     "gate.required[0]", "matches no cell"},
    {"include unknown model",
     BASE(", \"include\": [{\"model\": \"zz\", \"quant\": \"f32\", \"backend\": \"cpu\"}]"),
     "include[0]", "not in the matrix"},
    {"include existing",
     BASE(", \"include\": [{\"model\": \"a\", \"quant\": \"f32\", \"backend\": \"cpu\"}]"),
     "include[0]", "already in the matrix"},
    {"bad default tier", BASE(", \"default_tier\": \"nightly\""), "default_tier", "no tier"},
    /* Found by fuzz_matrix: a rule list of the wrong type was accepted. */
    {"exclude object", BASE(", \"exclude\": {\"model\": \"a\"}"), "exclude", "expected an array"},
    {"expect string", BASE(", \"expect\": \"xfail\""), "expect", "expected an array"},
    {"negative timeout", BASE(", \"defaults\": {\"timeout_s\": -1}"), "defaults.timeout_s",
     "expected a number in"},
    {"fractional memory", BASE(", \"defaults\": {\"memory_mb\": 1.5}"), "defaults.memory_mb",
     "integer"},
    {"bad id", "{\"name\": \"t/x\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"], " TIERS
               "}",
     "name", "identifier"},
    {"everything excluded", BASE(", \"exclude\": [\"*\"]"), "exclude",
     "no cells left"},
    {"http without endpoint",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\","
     " {\"id\": \"s\", \"backend\": \"http\", \"start\": [\"srv\"]}], " TIERS "}",
     "backends[1].endpoint", "required key is missing"},
    {"http port only in start",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"s\","
     " \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:80/v1\","
     " \"start\": [\"srv\", \"-p\", \"{port}\"]}], " TIERS "}",
     "backends[0].start[2]", "{port}"},
    {"http https endpoint",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"s\","
     " \"backend\": \"http\", \"endpoint\": \"https://example.com/v1\"}], " TIERS "}",
     "backends[0].endpoint", "http://"},
    {"http unknown placeholder",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"s\","
     " \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:80/v1\","
     " \"start\": [\"srv\", \"{model}\"]}], " TIERS "}",
     "backends[0].start[1]", "unknown placeholder {model}"},
    {"http id of a built-in backend",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [{\"id\": \"reference\","
     " \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:80/v1\"}], " TIERS "}",
     "backends[0].id", "built-in"},
    /* A bound for a metric a tier never produces is the matrix's error, not
     * a cell that fails at run time (issue 34, finding 7). */
    {"ref_agreement without comparing",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"reference\", \"cpu\"],"
     " \"tiers\": {\"smoke\": {\"suites\": [\"smoke\"], \"settings\": {\"smoke\": {\"reference\":"
     " false}}}}, \"tolerances\": {\"cells\": [{\"cell\": \"*/*/cpu/*\", \"metrics\":"
     " {\"smoke.ref_agreement\": {\"min\": 0.5}}}]}}",
     "tiers.smoke", "smoke.ref_agreement, which this tier never reports"},
    {"ref_agreement without a reference backend",
     "{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"], " TIERS
     ", \"tolerances\": {\"default\": {\"smoke.ref_agreement\": {\"min\": 0.9}}}}",
     "tiers.smoke", "no reference backend"},
};
#define N_BAD ((int)(sizeof BAD / sizeof BAD[0]))

/* Smoke compares with the reference by default when the matrix has a
 * reference backend; a tolerance written is listed as requested even when
 * it equals the suite's default, a suite default nobody wrote is not
 * (issue 34, findings 7 and 8). */
START_TEST(written_tolerances_and_smoke_reference)
{
    gt_matrix *m = parse_ok(BASE(", \"tolerances\": {\"default\": {\"smoke.ref_agreement\":"
                                 " {\"min\": 0.9}}}"));
    ck_assert(gt_matrix_smoke_reference(m, &m->tiers[0]));
    int n;
    gt_cell *c = expand(m, NULL, &n);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(cJSON_GetArraySize(c[0].tol_written), 1);
    ck_assert_str_eq(cJSON_GetArrayItem(c[0].tol_written, 0)->valuestring, "smoke.ref_agreement");
    gt_cells_free(c, n);
    gt_matrix_free(m);
    m = parse_ok(BASE(""));
    c = expand(m, NULL, &n);
    ck_assert_ptr_nonnull(cJSON_GetObjectItemCaseSensitive(c[0].tolerances, "smoke.ref_agreement"));
    ck_assert_int_eq(cJSON_GetArraySize(c[0].tol_written), 0);
    gt_cells_free(c, n);
    gt_matrix_free(m);
    m = parse_ok("{\"name\": \"t\", " MODELS ", \"quants\": [\"f32\"], \"backends\": [\"cpu\"], "
                 TIERS "}");
    ck_assert(!gt_matrix_smoke_reference(m, &m->tiers[0]));
    gt_matrix_free(m);
}
END_TEST

START_TEST(bad_matrix_in_process)
{
    const bad_case *b = &BAD[_i];
    gt_matrix *m = NULL;
    gt_err err = {{0}};
    int rc = gt_matrix_parse("t.json", b->text, strlen(b->text), &m, &err);
    ck_assert_msg(rc != 0, "case '%s' parsed", b->name);
    ck_assert_ptr_null(m);
    ck_assert_msg(strncmp(err.msg, "t.json", 6) == 0, "case '%s': no file name: %s", b->name,
                  err.msg);
    ck_assert_msg(strstr(err.msg, b->path) != NULL, "case '%s': no path '%s' in: %s", b->name,
                  b->path, err.msg);
    ck_assert_msg(strstr(err.msg, b->what) != NULL, "case '%s': no '%s' in: %s", b->name,
                  b->what, err.msg);
}
END_TEST

/* The binary says the same, exits 2. */
START_TEST(bad_matrix_binary)
{
    const bad_case *b = &BAD[_i];
    char name[64], cmd[8192], out[4096] = "";
    snprintf(name, sizeof name, "bad%d.json", _i);
    const char *path = gt_test_tmp(name);
    gt_test_write_file(path, b->text, strlen(b->text));
    snprintf(cmd, sizeof cmd, "'%s/gauntlet' plan --no-probe '%s' 2>&1", GT_BINARY_DIR, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "case '%s': exit %d: %s", b->name,
                  WEXITSTATUS(st), out);
    ck_assert_msg(strstr(out, path) != NULL, "case '%s': file not named: %s", b->name, out);
    ck_assert_msg(strstr(out, b->path) != NULL, "case '%s': path '%s' not in: %s", b->name,
                  b->path, out);
}
END_TEST

START_TEST(unknown_tier_and_missing_file)
{
    char cmd[8192];
    const char *path = gt_test_tmp("ok.json");
    const char *text = BASE("");
    gt_test_write_file(path, text, strlen(text));
    snprintf(cmd, sizeof cmd, "'%s/gauntlet' plan --no-probe --tier nightly '%s' >/dev/null 2>&1",
             GT_BINARY_DIR, path);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "'%s/gauntlet' plan --no-probe '%s' >/dev/null 2>&1", GT_BINARY_DIR,
             path);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(cmd, sizeof cmd, "'%s/gauntlet' plan /nonexistent.json >/dev/null 2>&1",
             GT_BINARY_DIR);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}
END_TEST

/* The shipped matrices are valid. */
START_TEST(shipped_matrices_parse)
{
    static const char *const FILES[] = {"quickstart", "ci",      "nightly", "release",
                                        "serve",      "peer",    "kquants", "settings"};
    for (int i = 0; i < 8; i++) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "'%s/gauntlet' plan --no-probe '%s/matrices/%s.json' >/dev/null",
                 GT_BINARY_DIR, GT_SOURCE_DIR, FILES[i]);
        int st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "matrices/%s.json", FILES[i]);
    }
}
END_TEST

/* The complete example in matrices/README.md is a valid matrix. */
START_TEST(readme_example_is_valid)
{
    FILE *f = fopen(GT_SOURCE_DIR "/matrices/README.md", "rb");
    ck_assert_ptr_nonnull(f);
    static char doc[65536];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    char *start = strstr(doc, "```json\n");
    ck_assert_ptr_nonnull(start);
    start += 8;
    char *end = strstr(start, "```");
    ck_assert_ptr_nonnull(end);
    const char *path = gt_test_tmp("readme.json");
    gt_test_write_file(path, start, (size_t)(end - start));
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s/gauntlet' plan --no-probe '%s' >/dev/null", GT_BINARY_DIR, path);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the README example does not parse");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("matrix");
    TCase *tc = tcase_create("matrix");
    tcase_add_test(tc, expands_in_axis_order);
    tcase_add_test(tc, ids_are_stable);
    tcase_add_test(tc, rules_drivers_and_tolerances);
    tcase_add_test(tc, patterns_and_versions);
    tcase_add_test(tc, relative_paths_use_root);
    tcase_add_test(tc, http_entries);
    tcase_add_test(tc, written_tolerances_and_smoke_reference);
    tcase_add_loop_test(tc, bad_matrix_in_process, 0, N_BAD);
    tcase_add_loop_test(tc, bad_matrix_binary, 0, N_BAD);
    tcase_add_test(tc, unknown_tier_and_missing_file);
    tcase_add_test(tc, shipped_matrices_parse);
    tcase_add_test(tc, readme_example_is_valid);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
