/* test_http_decode_end.c: the http accuracy suite's decode check on replies
 * in llama-server's shape (suites/http_accuracy_decode.c), which name each
 * generated token's id and list the end token a server stopped on, as ""
 * with no bytes (a name every control token shares).
 *
 * tests/py/fault_proxy.py rewrites `gauntlet serve`'s decode replies into
 * that shape. Positive: a copy of stories260K (or its stand-in) whose EOS
 * output row is token X's scaled by 1 - 1e-6, so wherever X is the greedy
 * token EOS is a near-tie; the proxy stops the reply there on EOS (the
 * model supports that stop) and the check passes with fewer tokens than
 * asked. Negative: the same stop at token 2 of the plain model (which does
 * not end there) fails naming it; an id out of the vocabulary, and an id of
 * a token of another name, fail naming the position. Apart from
 * test_http_suites, which is long enough. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "../harness/net/http_client.c"
#include "gt/gguf.h"
#include "gt/quant.h"
#include "testutil.h"

#define BIN GT_BINARY_DIR "/gauntlet"

static const char *g_stories;
static const char *const SERVE_ARGS[] = {"--host", "127.0.0.1", "-q", NULL};
static const char *SETTINGS =
    "{\"accuracy\": {\"max_scored\": 32, \"n_gen\": 0, \"max_prompts\": 1}}";

/* The worker's lines for the accuracy suite on an http cell at port, the
 * artifact model (what a qualification runs). */
static cJSON *run_worker(int port, const char *model)
{
    static int n;
    char name[32], sha[65] = "", cmd[4096], spec[4096];
    snprintf(name, sizeof name, "spec%d.json", n++);
    const char *spec_path = gt_test_tmp(name);
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", model);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(fscanf(p, "%64s", sha), 1);
    pclose(p);
    snprintf(spec, sizeof spec,
             "{\"cell\": \"m/f32/http/default\", \"tier\": \"test\", \"model\": \"m\", \"quant\": "
             "\"f32\", \"backend\": \"http\", \"driver_id\": \"default\", \"artifact\": \"%s\", "
             "\"artifact_sha256\": \"%s\", \"seed\": 7, \"threads\": 1, \"data_dir\": "
             "\"%s/suites/data\", \"scratch\": \"%s\", \"suites\": [\"accuracy\"], \"settings\": "
             "%s, \"tolerances\": {}, \"http\": {\"endpoint\": \"http://127.0.0.1:%d/v1\", "
             "\"health\": \"http://127.0.0.1:%d/health\"}}",
             model, sha, GT_SOURCE_DIR, gt_test_tmp(""), SETTINGS, port, port);
    gt_test_write_file(spec_path, spec, strlen(spec));
    snprintf(cmd, sizeof cmd, "'%s' worker --spec '%s' 2>/dev/null", BIN, spec_path);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    cJSON *all = cJSON_CreateArray();
    char line[16384];
    while (fgets(line, sizeof line, p)) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_msg(o != NULL, "worker printed a line that is not JSON: %s", line);
        cJSON_AddItemToArray(all, o);
    }
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker exit %d", st);
    return all;
}

/* The line of type t ("result" of a check, "metric") named name. */
static const cJSON *need(const cJSON *all, const char *t, const char *name)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, all)
    {
        const cJSON *ty = cJSON_GetObjectItem(o, "t");
        const cJSON *nm = cJSON_GetObjectItem(o, strcmp(t, "metric") ? "check" : "name");
        if (cJSON_IsString(ty) && !strcmp(ty->valuestring, t) && cJSON_IsString(nm) &&
            !strcmp(nm->valuestring, name))
            return o;
    }
    ck_abort_msg("no %s line named %s", t, name);
    return NULL;
}

static const char *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* tests/py/fault_proxy.py in front of upstream in mode; the worker's lines. */
static cJSON *through_proxy(int upstream, const char *mode, const char *model)
{
    char cmd[1024], line[256] = "";
    int port = 0, pid = 0;
    snprintf(cmd, sizeof cmd, "exec python3 '%s/tests/py/fault_proxy.py' %d %s", GT_SOURCE_DIR,
             upstream, mode);
    FILE *srv = popen(cmd, "r");
    ck_assert_ptr_nonnull(srv);
    ck_assert_msg(fgets(line, sizeof line, srv) &&
                      sscanf(line, "listening on http://127.0.0.1:%d pid %d", &port, &pid) == 2,
                  "fault_proxy.py did not start: %s", line);
    cJSON *all = run_worker(port, model);
    kill(pid, SIGTERM);
    pclose(srv);
    return all;
}

static int64_t eos_of(const char *model)
{
    gt_gguf *g;
    gt_err e = {{0}};
    ck_assert_msg(gt_gguf_open(model, &g, &e) == 0, "%s", e.msg);
    int64_t eos = -1;
    ck_assert(gt_gguf_kv_int(g, gt_gguf_find_key(g, "tokenizer.ggml.eos_token_id"), &eos));
    gt_gguf_close(g);
    return eos;
}

/* The id of the 4th greedy token after the first decode prompt, and in
 * *first where that token comes first among the 4. */
static int greedy_token(const gt_test_server *s, int *first)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", s->port);
    cJSON *q = cJSON_Parse("{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, "
                           "\"temperature\": 0, \"logprobs\": 1}");
    gt_http_reply r;
    gt_err e = {{0}};
    ck_assert_int_eq(gt_http_post_json(url, q, 0, 30, &r, &e), 0);
    cJSON *o = cJSON_Parse(r.body);
    const cJSON *ids = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "logprobs"),
        "token_ids");
    ck_assert_int_eq(cJSON_GetArraySize(ids), 4);
    int x = cJSON_GetArrayItem(ids, 3)->valueint;
    for (*first = 0; cJSON_GetArrayItem(ids, *first)->valueint != x; ++*first)
        ;
    cJSON_Delete(o);
    cJSON_Delete(q);
    gt_http_reply_free(&r);
    return x;
}

/* g_stories with output.weight's row eos set to row x times 1 - 1e-6. */
static const char *eos_ties_model(int64_t eos, int x)
{
    const char *path = gt_test_tmp("eos-ties.gguf");
    gt_gguf *g;
    gt_err e = {{0}};
    ck_assert_msg(gt_gguf_open(g_stories, &g, &e) == 0, "%s", e.msg);
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, "output.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, GT_TYPE_F32);
    size_t data_size;
    gt_gguf_data(g, 0, &data_size);
    uint64_t at = gt_gguf_file_size(g) - data_size + t->offset;
    size_t n = (size_t)t->ne[0];
    char *file = gt_test_slurp(g_stories);
    ck_assert_ptr_nonnull(file);
    ck_assert_int_eq(memcmp(file + at, t->data, t->nbytes), 0);
    float *w = (float *)(void *)(file + at);
    for (size_t i = 0; i < n; i++)
        w[(size_t)eos * n + i] = w[(size_t)x * n + i] * (1.0f - 1e-6f);
    gt_test_write_file(path, file, (size_t)gt_gguf_file_size(g));
    free(file);
    gt_gguf_close(g);
    return path;
}

START_TEST(test_decode_stop_on_end_token)
{
    int64_t eos = eos_of(g_stories);
    gt_test_server s = {0};
    ck_assert(gt_test_serve_start(&s, g_stories, SERVE_ARGS) == 0);
    int first, x = greedy_token(&s, &first);
    gt_test_serve_stop(&s);
    const char *model = eos_ties_model(eos, x);
    ck_assert(gt_test_serve_start(&s, model, SERVE_ARGS) == 0);
    char mode[64];
    snprintf(mode, sizeof mode, "end=%lld,%d", (long long)eos, x);
    cJSON *all = through_proxy(s.port, mode, model);
    const cJSON *ck = need(all, "result", "decode");
    ck_assert_msg(!strcmp(field(ck, "status"), "pass"), "%s", field(ck, "message"));
    ck_assert_str_eq(field(need(all, "result", "logprobs_wellformed"), "status"), "pass");
    double got = cJSON_GetObjectItem(need(all, "metric", "decode_tokens"), "value")->valuedouble;
    /* Cut on the end token where x came first: the end token is counted
     * (a stop of the server's own before x would not be). */
    ck_assert_msg(got == first + 1, "%g generated tokens, expected %d", got, first + 1);
    cJSON_Delete(all);
    gt_test_serve_stop(&s);
}
END_TEST

START_TEST(test_decode_unsupported_stop_and_bad_ids)
{
    char mode[64];
    snprintf(mode, sizeof mode, "end=%lld,@2", (long long)eos_of(g_stories));
    const char *cases[][3] = {
        {mode, "prompt s01 token 2: the server stopped on its end token \"</s>\" where the "
               "reference",
         "> tie_margin 0.1"},
        {"badid=3", "prompt s01 token 3: the reply gives id 999999 for the generated token \"",
         "which is no id of the vocabulary"},
        {"wrongid=3", "prompt s01 token 3: the reply gives id ",
         "but the vocabulary's token of that id is \""},
    };
    gt_test_server s = {0};
    ck_assert(gt_test_serve_start(&s, g_stories, SERVE_ARGS) == 0);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *all = through_proxy(s.port, cases[i][0], g_stories);
        const cJSON *ck = need(all, "result", "decode");
        const char *m = field(ck, "message");
        /* The stand-in's EOS has another piece than stories260K's "</s>". */
        const char *want = i == 0 && !gt_test_llama_is_stories() ? "stopped on its end token"
                                                                  : cases[i][1];
        ck_assert_msg(!strcmp(field(ck, "status"), "fail") && strstr(m, want) &&
                          strstr(m, cases[i][2]),
                      "%s: %s", cases[i][0], m);
        cJSON_Delete(all);
    }
    gt_test_serve_stop(&s);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    g_stories = gt_test_llama();
    gt_err e = {{0}};
    if (gt_http_global_init(&e) != 0) {
        printf("%s\n", e.msg);
        return 1;
    }
    Suite *s = suite_create("http_decode_end");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_decode_stop_on_end_token);
    tcase_add_test(tc, test_decode_unsupported_stop_and_bad_ids);
    suite_add_tcase(s, tc);
    int rc = gt_test_run(s);
    gt_test_sh("rm -rf '%s'", gt_test_tmp(""));
    return rc;
}
