/* test_http_suites.c: the suites' http variants (suites/http_*.c) and the
 * client under them (harness/net/http_client.c).
 *
 * The client is compiled in directly and checked against a `gauntlet
 * serve` this test starts on 127.0.0.1 (port 0: the server picks one and
 * prints it): replies, server-sent events counted and timed, [DONE], the
 * messages of transport failures, wait_healthy's deadline.
 *
 * The suites run the way a qualification runs them: `gauntlet worker
 * --spec FILE` with an http cell whose endpoint is that server, the JSON
 * lines it prints parsed and judged here. Positive: serve stories260K (or
 * its synthetic stand-in without ../shared, gt_test_llama) on
 * the reference backend, the cell's artifact the same file; every check
 * passes and every metric is inside the tolerances a matrix would give.
 * Negative (a check nobody has seen fail is not known to work):
 *   - the server serves stories260K with its output rows rotated by one
 *     (same tokenizer, another model): smoke's reference agreement and
 *     accuracy's top-1 fail, with their numbers in the messages;
 *   - the server serves a `gauntlet synth` model (another tokenizer; SmolLM2
 *     when the artifact is the stand-in, whose tokenizer is synth's):
 *     accuracy's token_count fails naming both counts, smoke's usage and
 *     reference checks fail;
 *   - tests/py/fault_proxy.py in front of the reference server invents
 *     alternatives, inflates their sum or demotes the generated token:
 *     logprobs_wellformed fails naming the position; or forgets its K/V
 *     after 30 generated tokens: the decode check fails past token 30
 *     while the prompt's top1 and greedy pass. */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../harness/net/http_client.c"
#include "gt/gguf.h"
#include "gt/quant.h"
#include "testutil.h"

#define BIN GT_BINARY_DIR "/gauntlet"

static const char *g_stories;

/* After gt_test_serve_start's `serve -m MODEL -b reference --port 0 -t 1`:
 * no per-request log lines. */
static const char *const SERVE_ARGS[] = {"--host", "127.0.0.1", "-q", NULL};

static char *url_of(const gt_test_server *s, const char *path)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "http://127.0.0.1:%d%s", s->port, path);
    return buf;
}

/* --- the client ----------------------------------------------------------- */

static gt_test_server g_main;

static void main_up(void)
{
    ck_assert_msg(gt_test_serve_start(&g_main, g_stories, SERVE_ARGS) == 0,
                  "gauntlet serve did not come up");
}

static void main_down(void) { gt_test_serve_stop(&g_main); }

START_TEST(test_client_get_post)
{
    gt_err e = {{0}};
    ck_assert_int_eq(gt_http_global_init(&e), 0);
    gt_http_reply r;
    ck_assert_int_eq(gt_http_get(url_of(&g_main, "/v1/models"), 10, &r, &e), 0);
    ck_assert_int_eq(r.status, 200);
    const char *slash = strrchr(g_stories, '/'); /* the model id is the file's name */
    ck_assert_ptr_nonnull(strstr(r.body, slash ? slash + 1 : g_stories));
    ck_assert_uint_eq(r.size, strlen(r.body));
    ck_assert(r.total_s > 0 && r.first_s <= r.total_s);
    gt_http_reply_free(&r);

    cJSON *q = cJSON_Parse("{\"prompt\": \"Once upon a time\", \"max_tokens\": 6, "
                           "\"temperature\": 0}");
    ck_assert_int_eq(gt_http_post_json(url_of(&g_main, "/v1/completions"), q, 0, 10, &r, &e), 0);
    ck_assert_int_eq(r.status, 200);
    cJSON *o = cJSON_Parse(r.body);
    ck_assert_ptr_nonnull(o);
    const cJSON *u = cJSON_GetObjectItem(o, "usage");
    ck_assert_int_eq(cJSON_GetObjectItem(u, "completion_tokens")->valueint, 6);
    cJSON_Delete(o);
    gt_http_reply_free(&r);

    /* An HTTP error status is a transport success: the caller judges it. */
    const char *bad = "{\"prompt\": 1}";
    ck_assert_int_eq(gt_http_post_raw(url_of(&g_main, "/v1/completions"), bad, strlen(bad), 0,
                                      10, &r, &e),
                     0);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "prompt"));
    gt_http_reply_free(&r);
    cJSON_Delete(q);
}
END_TEST

START_TEST(test_client_stream)
{
    gt_err e = {{0}};
    cJSON *q = cJSON_Parse("{\"prompt\": \"Once upon a time\", \"max_tokens\": 8, "
                           "\"temperature\": 0, \"stream\": true}");
    gt_http_reply r;
    ck_assert_int_eq(gt_http_post_json(url_of(&g_main, "/v1/completions"), q, 1, 10, &r, &e), 0);
    ck_assert_int_eq(r.status, 200);
    /* One event per token, then the one with finish_reason; [DONE] apart. */
    ck_assert_int_eq(r.n_events, 9);
    ck_assert_int_eq(r.done, 1);
    ck_assert(r.first_s > 0 && r.first_s <= r.last_s && r.last_s <= r.total_s);
    int lines = 0;
    for (const char *p = r.body; (p = strchr(p, '\n')); p++)
        lines++;
    ck_assert_int_eq(lines, 9);
    ck_assert_ptr_null(strstr(r.body, "data:"));
    ck_assert_ptr_null(strstr(r.body, "[DONE]"));
    char *first = strndup(r.body, (size_t)(strchr(r.body, '\n') - r.body));
    cJSON *o = cJSON_Parse(first);
    ck_assert_msg(o != NULL, "first event is not JSON: %s", first);
    cJSON_Delete(o);
    free(first);
    gt_http_reply_free(&r);

    /* A streamed request answered with an error is kept verbatim. */
    cJSON_ReplaceItemInObject(q, "max_tokens", cJSON_CreateNumber(-5));
    ck_assert_int_eq(gt_http_post_json(url_of(&g_main, "/v1/completions"), q, 1, 10, &r, &e), 0);
    ck_assert_int_eq(r.status, 400);
    ck_assert_int_eq(r.n_events, 0);
    ck_assert_ptr_nonnull(strstr(r.body, "\"error\""));
    gt_http_reply_free(&r);
    cJSON_Delete(q);
}
END_TEST

START_TEST(test_client_failures)
{
    /* A port nobody listens on: bound and closed again. */
    gt_test_server dead = {0};
    ck_assert_int_eq(gt_test_serve_start(&dead, g_stories, SERVE_ARGS), 0);
    int port = dead.port;
    gt_test_serve_stop(&dead);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", port);
    gt_http_reply r;
    gt_err e = {{0}};
    ck_assert_int_eq(gt_http_get(url, 2, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, url) != NULL, "%s", e.msg);
    ck_assert_ptr_null(r.body);
    gt_http_reply_free(&r); /* safe after a failure */
    double t0 = mono_now();
    ck_assert_int_eq(gt_http_wait_healthy(url, 0.5, &e), -1);
    double dt = mono_now() - t0;
    ck_assert_msg(dt >= 0.4 && dt < 3, "waited %.2f s", dt);
    ck_assert_msg(strstr(e.msg, "not healthy after 0.5 s") && strstr(e.msg, "last attempt"), "%s",
                  e.msg);
    /* A path that answers 404 is not healthy either. */
    ck_assert_int_eq(gt_http_wait_healthy(url_of(&g_main, "/nope"), 0.3, &e), -1);
    ck_assert_msg(strstr(e.msg, "HTTP 404"), "%s", e.msg);
}
END_TEST

/* --- the suites through `gauntlet worker --spec` -------------------------- */

typedef struct lines {
    cJSON *all; /* array of the worker's JSON lines */
    char log[4096];
} lines;

static const char *SUITE_TOLERANCES =
    "{\"smoke.ref_agreement\": {\"min\": 0.99}, \"functional.determinism_diff\": {\"eq\": 0},"
    " \"functional.seed_diff\": {\"eq\": 0}, \"accuracy.drift_top1\": {\"min\": 0.99},"
    " \"accuracy.logprob_max_abs_diff\": {\"max\": 0.0001}, \"performance.errors\": {\"eq\": 0}}";

/* Runs the worker on an http cell against s; the artifact is stories260K. */
static void run_worker(const gt_test_server *s, const char *suites, const char *settings,
                       lines *out)
{
    static int n;
    char name[32];
    snprintf(name, sizeof name, "spec%d.json", n++);
    const char *spec_path = gt_test_tmp(name);
    char sha[65] = "";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", g_stories);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(fscanf(p, "%64s", sha), 1);
    pclose(p);
    char spec[8192];
    snprintf(spec, sizeof spec,
             "{\"cell\": \"stories260k/f32/http/default\", \"tier\": \"test\", \"model\": "
             "\"stories260k\", \"quant\": \"f32\", \"backend\": \"http\", \"driver_id\": "
             "\"default\", \"artifact\": \"%s\", \"artifact_sha256\": \"%s\", \"seed\": 7, "
             "\"threads\": 1, \"data_dir\": \"%s/suites/data\", \"scratch\": \"%s\", "
             "\"suites\": %s, \"settings\": %s, \"tolerances\": %s, \"http\": {\"endpoint\": "
             "\"http://127.0.0.1:%d/v1\", \"health\": \"http://127.0.0.1:%d/health\"}}",
             g_stories, sha, GT_SOURCE_DIR, gt_test_tmp(""), suites, settings, SUITE_TOLERANCES,
             s->port, s->port);
    gt_test_write_file(spec_path, spec, strlen(spec));
    snprintf(cmd, sizeof cmd, "'%s' worker --spec '%s' 2>'%s.log'", BIN, spec_path, spec_path);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    out->all = cJSON_CreateArray();
    char line[16384];
    while (fgets(line, sizeof line, p)) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_msg(o != NULL, "worker printed a line that is not JSON: %s", line);
        cJSON_AddItemToArray(out->all, o);
    }
    int st = pclose(p);
    char log_path[1024];
    snprintf(log_path, sizeof log_path, "%s.log", spec_path);
    char *log = gt_test_slurp(log_path);
    snprintf(out->log, sizeof out->log, "%s", log ? log : "");
    free(log);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker exit %d; log: %s", st,
                  out->log);
    const cJSON *last = cJSON_GetArrayItem(out->all, cJSON_GetArraySize(out->all) - 1);
    ck_assert_msg(last && !strcmp(cJSON_GetObjectItem(last, "t")->valuestring, "done"),
                  "the worker's last line is not done; log: %s", out->log);
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The line of type t for suite/name (check or metric name), or NULL. */
static const cJSON *find(const lines *l, const char *t, const char *suite, const char *name)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, l->all)
    {
        if (strcmp(str(o, "t"), t) || strcmp(str(o, "suite"), suite))
            continue;
        if (!strcmp(str(o, strcmp(t, "metric") ? "check" : "name"), name))
            return o;
    }
    return NULL;
}

static const cJSON *need(const lines *l, const char *t, const char *suite, const char *name)
{
    const cJSON *o = find(l, t, suite, name);
    ck_assert_msg(o != NULL, "no %s %s.%s in the worker's lines; log: %s", t, suite, name,
                  l->log);
    return o;
}

static double value(const lines *l, const char *suite, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(need(l, "metric", suite, name), "value");
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void expect_status(const lines *l, const char *suite, const char *check, const char *st)
{
    const cJSON *o = need(l, "result", suite, check);
    ck_assert_msg(!strcmp(str(o, "status"), st), "%s.%s is %s, expected %s: %s", suite, check,
                  str(o, "status"), st, str(o, "message"));
}

static const char *message(const lines *l, const char *suite, const char *check)
{
    return str(need(l, "result", suite, check), "message");
}

START_TEST(test_suites_pass_against_reference_server)
{
    lines l;
    run_worker(&g_main, "[\"smoke\", \"functional\", \"accuracy\", \"performance\", \"soak\"]",
               "{\"accuracy\": {\"max_scored\": 640, \"max_prompts\": 4}, \"performance\": "
               "{\"n_clients\": 3, "
               "\"requests\": 3, \"n_gen\": 16}}",
               &l);
    /* Every check passes (soak has no http variant: skipped), every
     * metric is inside its tolerance. */
    const cJSON *o;
    int n_results = 0, n_metrics = 0;
    cJSON_ArrayForEach(o, l.all)
    {
        if (!strcmp(str(o, "t"), "result")) {
            n_results++;
            bool soak = !strcmp(str(o, "suite"), "soak");
            ck_assert_msg(!strcmp(str(o, "status"), soak ? "skip" : "pass"), "%s.%s: %s: %s",
                          str(o, "suite"), str(o, "check"), str(o, "status"), str(o, "message"));
        } else if (!strcmp(str(o, "t"), "metric")) {
            n_metrics++;
            ck_assert_msg(strcmp(str(o, "verdict"), "fail") != 0, "metric %s.%s failed: %g",
                          str(o, "suite"), str(o, "name"),
                          cJSON_GetObjectItem(o, "value")->valuedouble);
        } else {
            ck_assert_msg(strcmp(str(o, "t"), "skip") != 0, "cell skipped: %s",
                          str(o, "reason"));
        }
    }
    ck_assert_int_ge(n_results, 16);
    ck_assert_int_ge(n_metrics, 16);
    const char *checks[][2] = {
        {"smoke", "health"},          {"smoke", "models"},          {"smoke", "generate"},
        {"smoke", "usage"},           {"smoke", "reference"},       {"functional", "determinism"},
        {"functional", "seed"},       {"functional", "max_tokens"}, {"functional", "stop"},
        {"functional", "bad_request"}, {"accuracy", "token_count"}, {"accuracy", "top1"},
        {"accuracy", "greedy"},       {"accuracy", "decode"},
        {"accuracy", "logprobs_wellformed"}, {"performance", "errors"},
        {"performance", "measured"},
    };
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++)
        expect_status(&l, checks[i][0], checks[i][1], "pass");
    expect_status(&l, "soak", "run", "skip");
    /* The server is the reference backend on the same file: exact. */
    ck_assert_double_eq(value(&l, "smoke", "ref_agreement"), 1);
    ck_assert_double_eq(value(&l, "functional", "determinism_diff"), 0);
    ck_assert_double_eq(value(&l, "functional", "seed_diff"), 0);
    ck_assert_double_eq(value(&l, "accuracy", "drift_top1"), 1);
    ck_assert_double_eq(value(&l, "accuracy", "scored_tokens"), 640);
    ck_assert_double_eq_tol(value(&l, "accuracy", "drift_ppl_ratio"), 1, 1e-6);
    ck_assert_double_lt(value(&l, "accuracy", "logprob_max_abs_diff"), 1e-4);
    ck_assert_double_eq(value(&l, "accuracy", "greedy_match"), 1);
    /* The decode path: 64 tokens of each of the 4 prompts, exact. */
    ck_assert_double_eq(value(&l, "accuracy", "decode_tokens"), 4 * 64);
    ck_assert_double_eq(value(&l, "accuracy", "decode_greedy_match"), 1);
    ck_assert_double_eq(value(&l, "accuracy", "decode_drift_top1"), 1);
    ck_assert_double_lt(value(&l, "accuracy", "decode_drift_kld_max"), 1e-9);
    ck_assert_double_lt(value(&l, "accuracy", "decode_logprob_max_abs_diff"), 1e-4);
    ck_assert_ptr_nonnull(strstr(message(&l, "accuracy", "logprobs_wellformed"),
                                 "every alternative is a token of the vocabulary"));
    ck_assert_double_eq(value(&l, "performance", "errors"), 0);
    ck_assert_double_eq(value(&l, "performance", "requests"), 9);
    ck_assert_double_gt(value(&l, "performance", "ttft_ms"), 0);
    ck_assert_double_gt(value(&l, "performance", "http_tps"), 0);
    double p50 = value(&l, "performance", "latency_p50_ms");
    ck_assert(p50 > 0 && p50 <= value(&l, "performance", "latency_p99_ms"));
    ck_assert_str_eq(str(need(&l, "metric", "smoke", "ref_agreement"), "verdict"), "pass");
    ck_assert_str_eq(str(need(&l, "metric", "performance", "errors"), "verdict"), "pass");
    ck_assert_ptr_nonnull(strstr(message(&l, "accuracy", "top1"), "640/640 positions"));
    cJSON_Delete(l.all);
}
END_TEST

/* stories260K with output.weight's rows rotated by one: the same tokenizer
 * and file layout, another model (each logit is the next token's). */
static const char *rotated_model(void)
{
    const char *path = gt_test_tmp("rotated.gguf");
    gt_gguf *g;
    gt_err e = {{0}};
    ck_assert_msg(gt_gguf_open(g_stories, &g, &e) == 0, "%s", e.msg);
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, "output.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, GT_TYPE_F32);
    size_t data_size;
    gt_gguf_data(g, 0, &data_size);
    uint64_t at = gt_gguf_file_size(g) - data_size + t->offset;
    size_t row = (size_t)t->ne[0] * sizeof(float), rows = (size_t)t->ne[1];
    char *file = gt_test_slurp(g_stories);
    ck_assert_ptr_nonnull(file);
    size_t size = (size_t)gt_gguf_file_size(g);
    ck_assert_int_eq(memcmp(file + at, t->data, t->nbytes), 0); /* the offset is right */
    char *first = malloc(row);
    memcpy(first, file + at, row);
    memmove(file + at, file + at + row, row * (rows - 1));
    memcpy(file + at + row * (rows - 1), first, row);
    gt_test_write_file(path, file, size);
    free(first);
    free(file);
    gt_gguf_close(g);
    return path;
}

START_TEST(test_suites_fail_against_another_model)
{
    gt_test_server s = {0};
    ck_assert_msg(gt_test_serve_start(&s, rotated_model(), SERVE_ARGS) == 0,
                  "serve of the rotated model failed");
    lines l;
    run_worker(&s, "[\"smoke\"]", "{}", &l);
    expect_status(&l, "smoke", "health", "pass");
    expect_status(&l, "smoke", "usage", "pass"); /* same tokenizer: counts agree */
    expect_status(&l, "smoke", "reference", "fail");
    const char *m = message(&l, "smoke", "reference");
    ck_assert_msg(strstr(m, "tokens agree (ref_agreement 0.") && strstr(m, "min_ref_agreement 0.5") &&
                      strstr(m, "first divergence: prompt 1 at token 0"),
                  "%s", m);
    const cJSON *ra = need(&l, "metric", "smoke", "ref_agreement");
    ck_assert_str_eq(str(ra, "verdict"), "fail");
    ck_assert_double_lt(value(&l, "smoke", "ref_agreement"), 0.5);
    cJSON_Delete(l.all);

    run_worker(&s, "[\"accuracy\"]",
               "{\"accuracy\": {\"max_scored\": 256, \"n_gen\": 0, \"max_prompts\": 2}}", &l);
    expect_status(&l, "accuracy", "token_count", "pass");
    expect_status(&l, "accuracy", "top1", "fail");
    m = message(&l, "accuracy", "top1");
    ck_assert_msg(strstr(m, "/256 positions") && strstr(m, "(drift_top1 0.") &&
                      strstr(m, "min_top1 0.9") && strstr(m, "first disagreement at chunk 0"),
                  "%s", m);
    ck_assert_str_eq(str(need(&l, "metric", "accuracy", "drift_top1"), "verdict"), "fail");
    ck_assert_double_lt(value(&l, "accuracy", "drift_top1"), 0.5);
    ck_assert_double_gt(value(&l, "accuracy", "logprob_max_abs_diff"), 0.01);
    cJSON_Delete(l.all);
    gt_test_serve_stop(&s);
}
END_TEST

/* A model with another tokenizer than g_stories: a `gauntlet synth` model
 * for stories260K; for its stand-in, itself synthetic with synth's
 * SentencePiece vocabulary, SmolLM2 (GPT-2 style BPE). */
static const char *other_tokenizer_model(void)
{
    if (!gt_test_llama_is_stories())
        return gt_test_smollm2();
    const char *synth = gt_test_tmp("synth.gguf");
    ck_assert_int_eq(gt_test_sh("'%s' synth '%s' --seed 5 >/dev/null", BIN, synth), 0);
    return synth;
}

START_TEST(test_suites_fail_against_another_tokenizer)
{
    const char *other = other_tokenizer_model();
    ck_assert_msg(other != NULL, "no model with another tokenizer (main() checked)");
    gt_test_server s = {0};
    ck_assert_msg(gt_test_serve_start(&s, other, SERVE_ARGS) == 0,
                  "serve of %s failed", other);
    lines l;
    run_worker(&s, "[\"accuracy\"]",
               "{\"accuracy\": {\"max_scored\": 128, \"n_gen\": 0, \"max_prompts\": 2}}", &l);
    expect_status(&l, "accuracy", "token_count", "fail");
    const char *m = message(&l, "accuracy", "token_count");
    ck_assert_msg(strstr(m, "chunk 0: the server has ") && strstr(m, "the artifact's tokenizer "),
                  "%s", m);
    /* Both counts, and they differ. */
    int srv = -1, usage = -1, local = -1;
    const char *p = strstr(m, "the server has ");
    ck_assert_int_eq(sscanf(p, "the server has %d prompt tokens (usage.prompt_tokens %d), the "
                               "artifact's tokenizer %d",
                            &srv, &usage, &local),
                     3);
    ck_assert_int_ne(srv, local);
    expect_status(&l, "accuracy", "top1", "fail");
    cJSON_Delete(l.all);

    run_worker(&s, "[\"smoke\"]", "{}", &l);
    expect_status(&l, "smoke", "usage", "fail");
    ck_assert_ptr_nonnull(strstr(message(&l, "smoke", "usage"), "(the artifact's tokenizer: "));
    expect_status(&l, "smoke", "reference", "fail");
    ck_assert_ptr_nonnull(strstr(message(&l, "smoke", "reference"), "tokens agree (ref_agreement"));
    cJSON_Delete(l.all);
    gt_test_serve_stop(&s);
}
END_TEST

/* Starts tests/py/SCRIPT with args and reads the port and pid it
 * prints: "listening on http://127.0.0.1:PORT pid PID". */
static FILE *py_server(const char *script, const char *args, gt_test_server *s, int *pid)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec python3 '%s/tests/py/%s' %s", GT_SOURCE_DIR, script, args);
    FILE *srv = popen(cmd, "r");
    ck_assert_ptr_nonnull(srv);
    char line[256] = "";
    ck_assert_msg(fgets(line, sizeof line, srv) &&
                      sscanf(line, "listening on http://127.0.0.1:%d pid %d", &s->port, pid) == 2,
                  "%s did not start: %s", script, line);
    return srv;
}

/* A server with no echo that answers logprobs in llama-server's shape
 * (tests/py/noecho_proxy.py in front of the reference server): accuracy
 * probes once, scores by next-token requests and says so; the same proxy
 * with each position's two best alternatives swapped fails top-1 and shows
 * the KL. */
START_TEST(test_accuracy_without_echo)
{
    const char *settings =
        "{\"accuracy\": {\"max_scored\": 48, \"n_gen\": 0, \"max_prompts\": 2}}";
    for (int swap = 0; swap < 2; swap++) {
        char args[64];
        snprintf(args, sizeof args, "%d %s", g_main.port, swap ? "swap" : "faithful");
        gt_test_server s = {0};
        int pid = 0;
        FILE *srv = py_server("noecho_proxy.py", args, &s, &pid);
        lines l;
        run_worker(&s, "[\"accuracy\"]", settings, &l);
        ck_assert_double_eq(value(&l, "accuracy", "echo_method"), 0);
        ck_assert_double_eq(value(&l, "accuracy", "scored_tokens"), 48);
        ck_assert_double_eq(value(&l, "accuracy", "logprob_alternatives"), 20);
        ck_assert_ptr_null(find(&l, "metric", "accuracy", "ppl"));
        ck_assert_msg(strstr(l.log, "echo gives no prompt logprobs"), "%s", l.log);
        expect_status(&l, "accuracy", "token_count", "pass");
        const char *m = message(&l, "accuracy", "top1");
        ck_assert_msg(strstr(m, "by the next-token method (no echo; 20 alternatives asked)"), "%s",
                      m);
        if (!swap) {
            expect_status(&l, "accuracy", "top1", "pass");
            ck_assert_double_eq(value(&l, "accuracy", "drift_top1"), 1);
            ck_assert_double_lt(value(&l, "accuracy", "drift_kld_topn_mean"), 1e-6);
            ck_assert_double_lt(value(&l, "accuracy", "logprob_max_abs_diff"), 1e-4);
        } else {
            expect_status(&l, "accuracy", "top1", "fail");
            ck_assert_msg(strstr(m, "first disagreement at chunk 0"), "%s", m);
            ck_assert_double_lt(value(&l, "accuracy", "drift_top1"), 0.2);
            ck_assert_double_gt(value(&l, "accuracy", "drift_kld_topn_mean"), 1e-3);
            ck_assert_double_gt(value(&l, "accuracy", "logprob_max_abs_diff"), 1e-2);
        }
        cJSON_Delete(l.all);
        kill(pid, SIGTERM);
        pclose(srv);
    }
}
END_TEST

/* Logprobs that are no distribution over the vocabulary
 * (tests/py/fault_proxy.py in front of the reference server): invented
 * alternatives below a true top-1 (which the drift scores cannot see),
 * real ones inflated to sum past 1, and a generated token that is not the
 * top alternative each fail logprobs_wellformed, naming the first bad
 * position and why. */
START_TEST(test_accuracy_logprobs_wellformed)
{
    const char *settings = "{\"accuracy\": {\"max_scored\": 32, \"n_gen\": 0, "
                           "\"max_prompts\": 1}}";
    const char *cases[][3] = {
        {"invent", "chunk 0 (echo), token 1: alternative \"zzq1x\" (logprob ",
         "is no token of the vocabulary"},
        /* Where the sum first passes 1 depends on how peaked the model is
         * (the synthetic stand-in of a checkout without ../shared is flat). */
        {"inflate", "the probabilities of its 20 alternatives sum to ", "(at most 1 + 0.001)"},
        {"demote", "(decode), token 0: the token generated at temperature 0 is ",
         ", not the top alternative"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[64];
        snprintf(args, sizeof args, "%d %s", g_main.port, cases[i][0]);
        gt_test_server s = {0};
        int pid = 0;
        FILE *srv = py_server("fault_proxy.py", args, &s, &pid);
        lines l;
        run_worker(&s, "[\"accuracy\"]", settings, &l);
        expect_status(&l, "accuracy", "logprobs_wellformed", "fail");
        const char *m = message(&l, "accuracy", "logprobs_wellformed");
        ck_assert_msg(strstr(m, "positions have malformed logprobs; first: ") &&
                          strstr(m, cases[i][1]) && strstr(m, cases[i][2]),
                      "%s: %s", cases[i][0], m);
        if (i == 0) /* the top-1 is right: the drift scores alone pass it */
            ck_assert_double_lt(value(&l, "accuracy", "drift_kld_topn_mean"), 1e-9);
        cJSON_Delete(l.all);
        kill(pid, SIGTERM);
        pclose(srv);
    }
}
END_TEST

/* A server whose decode forgets everything after its 30th generated token
 * (fault_proxy.py forget=30, the effect of a K/V cache no longer written):
 * the prompt's logprobs and 8-token greedy text are exact, so top1 and
 * greedy pass, but the decode path fails at the first generated token past
 * 30 that is not a near-tie, and its drift is far from 0. */
START_TEST(test_accuracy_decode_path)
{
    char args[64];
    snprintf(args, sizeof args, "%d forget=30", g_main.port);
    gt_test_server s = {0};
    int pid = 0;
    FILE *srv = py_server("fault_proxy.py", args, &s, &pid);
    lines l;
    run_worker(&s, "[\"accuracy\"]",
               "{\"accuracy\": {\"max_scored\": 64, \"n_gen\": 8, \"max_prompts\": 4}}", &l);
    expect_status(&l, "accuracy", "top1", "pass");
    expect_status(&l, "accuracy", "greedy", "pass");
    expect_status(&l, "accuracy", "logprobs_wellformed", "pass");
    expect_status(&l, "accuracy", "decode", "fail");
    const char *m = message(&l, "accuracy", "decode");
    int k = -1;
    const char *at = strstr(m, " token ");
    ck_assert_msg(strstr(m, "are neither the reference's argmax nor a near-tie; first: prompt ") &&
                      at && sscanf(at, " token %d:", &k) == 1 && k >= 30 &&
                      strstr(m, "teacher-forced on the server's text") &&
                      strstr(m, "> tie_margin 0.1"),
                  "%s", m);
    ck_assert_double_eq(value(&l, "accuracy", "decode_tokens"), 4 * 64);
    ck_assert_double_lt(value(&l, "accuracy", "decode_greedy_match"), 0.9);
    ck_assert_double_gt(value(&l, "accuracy", "decode_drift_kld_mean"), 1e-2);
    ck_assert_double_lt(value(&l, "accuracy", "decode_drift_top1"), 0.9);
    ck_assert_double_lt(value(&l, "accuracy", "drift_kld_topn_mean"), 1e-9);
    cJSON_Delete(l.all);
    kill(pid, SIGTERM);
    pclose(srv);
}
END_TEST

/* The same through the runtime's own fault: `gauntlet serve` with
 * GT_FAULT=kv-decode-drop@30 (a decode step at position >= 30 does not
 * write its K/V). The worker runs without it; the reference it
 * teacher-forces evaluates in batches, which the fault leaves alone anyway. */
START_TEST(test_accuracy_decode_kv_fault)
{
    gt_test_server s = {0};
    setenv("GT_FAULT", "kv-decode-drop@30", 1);
    int up = gt_test_serve_start(&s, g_stories, SERVE_ARGS);
    unsetenv("GT_FAULT");
    ck_assert_msg(up == 0, "gauntlet serve with GT_FAULT did not come up");
    lines l;
    run_worker(&s, "[\"accuracy\"]",
               "{\"accuracy\": {\"max_scored\": 64, \"n_gen\": 8, \"max_prompts\": 4}}", &l);
    expect_status(&l, "accuracy", "top1", "pass");
    expect_status(&l, "accuracy", "logprobs_wellformed", "pass");
    expect_status(&l, "accuracy", "decode", "fail");
    ck_assert_double_gt(value(&l, "accuracy", "decode_drift_kld_mean"), 1e-3);
    ck_assert_double_lt(value(&l, "accuracy", "drift_kld_topn_mean"), 1e-9);
    cJSON_Delete(l.all);
    gt_test_serve_stop(&s);
}
END_TEST

/* A server that takes max_tokens -1 and "generates" for 20 s, answers an
 * unknown model and refuses a negative temperature with 422
 * (tests/py/deviant_server.py): each deviation is a failed check that names
 * it, the hanging one within its 5 s deadline, and what it does right
 * passes. */
START_TEST(test_functional_names_deviations_within_deadlines)
{
    gt_test_server s = {0};
    int pid = 0;
    FILE *srv = py_server("deviant_server.py", "", &s, &pid);
    lines l;
    double t0 = gt_test_now();
    run_worker(&s, "[\"functional\"]", "{}", &l);
    double took = gt_test_now() - t0;
    expect_status(&l, "functional", "bad_request", "fail");
    const char *m = message(&l, "functional", "bad_request");
    ck_assert_msg(strstr(m, "max_tokens -1 was not refused within 5 s") &&
                      strstr(m, "OpenAI answers 400"), "%s", m);
    expect_status(&l, "functional", "unknown_model", "fail");
    m = message(&l, "functional", "unknown_model");
    ck_assert_msg(strstr(m, "an unknown model name was accepted (HTTP 200") &&
                      strstr(m, "OpenAI answers 404"), "%s", m);
    expect_status(&l, "functional", "negative_temperature", "fail");
    m = message(&l, "functional", "negative_temperature");
    ck_assert_msg(strstr(m, "HTTP 422 (OpenAI answers 400)"), "%s", m);
    const char *fine[] = {"bad_json", "missing_prompt", "stop_type", "oversized_prompt"};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
        expect_status(&l, "functional", fine[i], "pass");
    /* The 20 s request was given up after 5 s: the whole suite is well
     * under the server's delay plus the rest. */
    ck_assert_msg(took < 15, "the functional suite took %.1f s", took);
    cJSON_Delete(l.all);
    kill(pid, SIGTERM);
    pclose(srv);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    g_stories = gt_test_llama(); /* written once here, before the cases fork */
    gt_err e = {{0}};
    if (gt_http_global_init(&e) != 0) {
        printf("%s\n", e.msg);
        return 1;
    }
    Suite *s = suite_create("http_suites");
    TCase *client = tcase_create("client");
    tcase_add_unchecked_fixture(client, main_up, main_down);
    tcase_set_timeout(client, 60);
    tcase_add_test(client, test_client_get_post);
    tcase_add_test(client, test_client_stream);
    tcase_add_test(client, test_client_failures);
    suite_add_tcase(s, client);
    TCase *suites = tcase_create("suites");
    tcase_add_unchecked_fixture(suites, main_up, main_down);
    tcase_set_timeout(suites, 120);
    tcase_add_test(suites, test_suites_pass_against_reference_server);
    tcase_add_test(suites, test_suites_fail_against_another_model);
    gt_test_add_if(suites, test_suites_fail_against_another_tokenizer,
                   gt_test_llama_is_stories() || gt_test_smollm2() != NULL,
                   "the stand-in for stories260K has synth's tokenizer, so another tokenizer "
                   "needs SmolLM2, which was not found (ci/fetch-smollm2.sh or GT_SMOLLM2)");
    tcase_add_test(suites, test_functional_names_deviations_within_deadlines);
    tcase_add_test(suites, test_accuracy_without_echo);
    tcase_add_test(suites, test_accuracy_logprobs_wellformed);
    tcase_add_test(suites, test_accuracy_decode_path);
    tcase_add_test(suites, test_accuracy_decode_kv_fault);
    suite_add_tcase(s, suites);
    int rc = gt_test_run(s);
    gt_test_sh("rm -rf '%s'", gt_test_tmp(""));
    return rc;
}
