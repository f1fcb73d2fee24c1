/* test_overflow.c: overflow is an error, never undefined (issue 37).
 *
 * A session of N_CTX positions on a synthetic model (tiny, n_batch 8, so
 * evals span several micro-batches):
 * 1. One sequence: a prompt of N_CTX + 1 tokens is refused; after 20
 *    tokens, 13 more are refused, 12 fill the context, and one more (a
 *    generation step past the end) is refused. Every refusal names the
 *    context and the positions used, leaves n_past where it was, and the
 *    logits of the eval after it are the same bytes as those of a session
 *    that was never asked the refused evals.
 * 2. The same with companions (a backend opened with n_parallel 3) and
 *    with an F16 K/V cache.
 * 3. Several sequences (gt_session_eval_seqs): one entry that does not fit
 *    refuses the whole call, and no sequence moves.
 * On reference, cpu, opencl and cuda: a backend that does not open here
 * is a SKIP with its reason. Sliding-window layers (no synthetic preset
 * has a window): Gemma 3 270M ($GT_GEMMA3) on reference, cpu and opencl
 * with a context past its bounded cache (window 512 - 1 + n_batch 8 = 519
 * rows), skipped with the reason without the file or under sanitizers.
 * 4. `gauntlet generate` refuses, exit 2, a prompt longer than -c and a
 *    prompt plus -n past it, naming the numbers; prompt plus -n equal to
 *    -c runs.
 * 5. `gauntlet serve -c 32` answers 400 for a prompt alone past the
 *    context (param "prompt") and for prompt plus max_tokens past it
 *    (param "max_tokens"), naming the token counts, and 200 with
 *    finish_reason "length" when they fill it exactly. */
#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/session.h"
#include "gt/synth.h"
#include "gt/tokenizer.h"
#include "testutil.h"

enum { N_CTX = 32, N_BATCH = 8, N_FIRST = 20 };

static const char *model_path;
static gt_model *model;

static void load_model(void)
{
    gt_err err = {{0}};
    if (!model_path) {
        model_path = gt_test_tmp("tiny-overflow.gguf");
        ck_assert_msg(gt_synth_write(model_path, "tiny", 5, GT_TYPE_F32, &err) == 0, "%s",
                      err.msg);
    }
    ck_assert_msg(gt_model_load(model_path, &model, &err) == 0, "%s", err.msg);
}

static void free_model(void)
{
    gt_model_free(model);
    model = NULL;
}

static void ids_of(const gt_model *m, int salt, int32_t *ids, int n)
{
    const int nv = gt_model_hparams(m)->n_vocab;
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 41 + salt * 97 + 3) % nv);
}

static gt_backend *open_be(const char *name, int n_parallel, gt_type kv)
{
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {.n_threads = 2, .n_parallel = n_parallel, .kv_type = kv};
    ck_assert_msg(gt_backend_open(name, &cfg, &b, &err) == 0, "%s: %s", name, err.msg);
    return b;
}

static gt_session *open_session(const gt_model *m, gt_backend *b, int n_ctx, int n_batch,
                                int n_seq)
{
    gt_session *s = NULL;
    gt_err err = {{0}};
    const gt_session_params sp = {.n_ctx = n_ctx, .n_batch = n_batch, .n_seq_max = n_seq};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);
    return s;
}

/* An eval that must be refused: the message names the context and the
 * positions used, and sequence 0 stays at past. */
static void refused(gt_session *s, const int32_t *ids, int n, int past, const char *what)
{
    gt_err err = {{0}};
    const int n_ctx = gt_session_n_ctx(s);
    ck_assert_msg(gt_session_eval(s, ids, n, false, NULL, &err) != 0,
                  "%s: %d tokens at %d of %d were accepted", what, n, past, n_ctx);
    char want[96];
    snprintf(want, sizeof want, "context is %d and %d positions are used", n_ctx, past);
    ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "not fit"), "%s: message '%s'", what,
                  err.msg);
    ck_assert_int_eq(gt_session_n_past(s), past);
}

static void same_bytes(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                      "%s: logit %zu is %.9g after a refusal, %.9g without one", what, i,
                      (double)got[i], (double)want[i]);
}

/* Case 1 and 2 on one backend instance: the session that was refused three
 * times against one that never was, both ending with 12 rows of logits at
 * positions 20..31. */
static void one_sequence(const char *backend, int n_parallel, gt_type kv)
{
    load_model();
    gt_backend *b = open_be(backend, n_parallel, kv);
    const int nv = gt_model_hparams(model)->n_vocab, n_last = N_CTX - N_FIRST;
    int32_t ids[N_CTX + 1];
    ids_of(model, 1, ids, N_CTX + 1);
    float *got = malloc(sizeof(float) * (size_t)nv * n_last);
    float *want = malloc(sizeof(float) * (size_t)nv * n_last);
    ck_assert(got && want);
    gt_err err = {{0}};

    gt_session *s = open_session(model, b, N_CTX, N_BATCH, 0);
    ck_assert_int_eq(gt_session_n_companions(s), n_parallel > 1 ? n_parallel - 1 : 0);
    refused(s, ids, N_CTX + 1, 0, "a prompt longer than the context");
    ck_assert_msg(gt_session_eval(s, ids, N_FIRST, false, NULL, &err) == 0, "%s", err.msg);
    refused(s, ids + N_FIRST, n_last + 1, N_FIRST, "a prompt past the end");
    ck_assert_msg(gt_session_eval(s, ids + N_FIRST, n_last, true, got, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_session_n_past(s), N_CTX);
    refused(s, ids + N_CTX, 1, N_CTX, "a generation step past the end");
    gt_session_free(s);

    s = open_session(model, b, N_CTX, N_BATCH, 0);
    ck_assert_msg(gt_session_eval(s, ids, N_FIRST, false, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_session_eval(s, ids + N_FIRST, n_last, true, want, &err) == 0, "%s",
                  err.msg);
    gt_session_free(s);
    char what[96];
    snprintf(what, sizeof what, "%s, %d companions, %s cache", backend,
             n_parallel > 1 ? n_parallel - 1 : 0, kv == GT_TYPE_F16 ? "f16" : "f32");
    same_bytes(got, want, (size_t)nv * n_last, what);
    printf("%s: 3 overflows refused, state unchanged\n", what);
    free(got);
    free(want);
    gt_backend_close(b);
    free_model();
}

/* Case 3: sequences 0 and 1; an entry of sequence 1 that does not fit
 * refuses the call, sequence 0's entry in it included. */
static void several_sequences(const char *backend)
{
    load_model();
    gt_backend *b = open_be(backend, 0, 0);
    const int nv = gt_model_hparams(model)->n_vocab;
    int32_t a[N_CTX + 1], c[N_CTX + 1];
    ids_of(model, 2, a, N_CTX + 1);
    ids_of(model, 3, c, N_CTX + 1);
    float *got = malloc(sizeof(float) * (size_t)nv * 2), *want = malloc(sizeof(float) * (size_t)nv * 2);
    ck_assert(got && want);
    gt_err err = {{0}};
    float *results[2] = {got, want};
    for (int pass = 0; pass < 2; pass++) {
        gt_session *s = open_session(model, b, N_CTX, N_BATCH, 2);
        float *out = results[pass];
        if (pass == 0) {
            const gt_seq_eval e[2] = {{0, a, 10, false, NULL}, {1, c, N_CTX + 1, false, NULL}};
            ck_assert(gt_session_eval_seqs(s, e, 2, &err) != 0);
            ck_assert_msg(strstr(err.msg, "context is 32 and 0 positions are used"), "%s", err.msg);
            ck_assert_int_eq(gt_session_seq_n_past(s, 0), 0);
            ck_assert_int_eq(gt_session_seq_n_past(s, 1), 0);
        }
        const gt_seq_eval fill[2] = {{0, a, 30, false, NULL}, {1, c, 5, false, NULL}};
        ck_assert_msg(gt_session_eval_seqs(s, fill, 2, &err) == 0, "%s", err.msg);
        if (pass == 0) {
            const gt_seq_eval e[2] = {{0, a + 30, 3, false, NULL}, {1, c + 5, 1, false, NULL}};
            ck_assert(gt_session_eval_seqs(s, e, 2, &err) != 0);
            ck_assert_msg(strstr(err.msg, "context is 32 and 30 positions are used"), "%s",
                          err.msg);
            ck_assert_int_eq(gt_session_seq_n_past(s, 0), 30);
            ck_assert_int_eq(gt_session_seq_n_past(s, 1), 5);
        }
        const gt_seq_eval last[2] = {{0, a + 30, 2, false, out}, {1, c + 5, 1, false, out + nv}};
        ck_assert_msg(gt_session_eval_seqs(s, last, 2, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(gt_session_seq_n_past(s, 0), N_CTX);
        gt_session_free(s);
    }
    char what[64];
    snprintf(what, sizeof what, "%s, 2 sequences", backend);
    same_bytes(got, want, (size_t)nv * 2, what);
    printf("%s: 2 overflows refused, both sequences unchanged\n", what);
    free(got);
    free(want);
    gt_backend_close(b);
    free_model();
}

/* Sliding-window layers past their bounded cache: Gemma 3. */
static void sliding_window(const char *backend)
{
    enum { W_CTX = 528, W_FIRST = 520, W_BATCH = 8 };
    gt_err err = {{0}};
    gt_model *g = NULL;
    ck_assert_msg(gt_model_load(gt_test_gemma3(), &g, &err) == 0, "%s", err.msg);
    const gt_hparams *hp = gt_model_hparams(g);
    ck_assert_int_eq(hp->swa_window, 512);
    gt_backend *b = open_be(backend, 0, 0);
    const int nv = hp->n_vocab, n_last = W_CTX - W_FIRST;
    int32_t *ids = malloc(sizeof(int32_t) * (W_CTX + 1));
    float *got = malloc(sizeof(float) * (size_t)nv), *want = malloc(sizeof(float) * (size_t)nv);
    ck_assert(ids && got && want);
    ids_of(g, 4, ids, W_CTX + 1);
    float *results[2] = {got, want};
    for (int pass = 0; pass < 2; pass++) {
        gt_session *s = open_session(g, b, W_CTX, W_BATCH, 0);
        ck_assert_int_eq(gt_session_kv_rows(s, 0), 512 - 1 + W_BATCH); /* bounded */
        if (pass == 0)
            refused(s, ids, W_CTX + 1, 0, "gemma3: a prompt longer than the context");
        ck_assert_msg(gt_session_eval(s, ids, W_FIRST, false, NULL, &err) == 0, "%s", err.msg);
        if (pass == 0)
            refused(s, ids + W_FIRST, n_last + 1, W_FIRST, "gemma3: a prompt past the end");
        ck_assert_msg(gt_session_eval(s, ids + W_FIRST, n_last, false, results[pass], &err) == 0,
                      "%s", err.msg);
        if (pass == 0)
            refused(s, ids + W_CTX, 1, W_CTX, "gemma3: a generation step past the end");
        gt_session_free(s);
    }
    char what[64];
    snprintf(what, sizeof what, "gemma3 %s, sliding window", backend);
    same_bytes(got, want, (size_t)nv, what);
    printf("%s: overflows refused past the bounded window cache, state unchanged\n", what);
    free(ids);
    free(got);
    free(want);
    gt_backend_close(b);
    gt_model_free(g);
}

/* ---- every backend -------------------------------------------------------- */

static const char *const BACKENDS[] = {"reference", "cpu", "opencl", "cuda"};
enum { N_BACKENDS = 4 };

#define PER_BACKEND(i)                                                                  \
    START_TEST(single_##i) { one_sequence(BACKENDS[i], 0, 0); }                         \
    END_TEST                                                                            \
    START_TEST(companions_##i) { one_sequence(BACKENDS[i], 3, 0); }                     \
    END_TEST                                                                            \
    START_TEST(f16_cache_##i) { one_sequence(BACKENDS[i], 0, GT_TYPE_F16); }            \
    END_TEST                                                                            \
    START_TEST(sequences_##i) { several_sequences(BACKENDS[i]); }                       \
    END_TEST
START_TEST(window_reference) { sliding_window("reference"); }
END_TEST
START_TEST(window_cpu) { sliding_window("cpu"); }
END_TEST
START_TEST(window_opencl) { sliding_window("opencl"); }
END_TEST

PER_BACKEND(0)
PER_BACKEND(1)
PER_BACKEND(2)
PER_BACKEND(3)

/* Whether a backend opens here, asked in a forked child (a GPU driver's
 * threads must not be inherited by the forked cases); why gets its error. */
static bool backend_opens(const char *name, char *why, size_t cap)
{
    if (strcmp(name, "opencl") == 0)
        return gt_test_opencl_opens(why, cap);
    int fds[2];
    why[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(why, cap, "pipe failed");
        return false;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        gt_backend *b = NULL;
        gt_err err = {{0}};
        const int rc = gt_backend_open(name, NULL, &b, &err);
        if (rc != 0 && write(fds[1], err.msg, strlen(err.msg)) < 0)
            _exit(2);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    const ssize_t got = read(fds[0], why, cap - 1);
    why[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- the CLI: generate ------------------------------------------------------ */

#define PROMPT "Once upon a time there was a little girl named Lily who loved the sun"
#define SHORT "Once upon a time there was a little girl" /* 24 tokens of synth tiny */

START_TEST(generate_refuses)
{
    load_model();
    int32_t ids[128];
    gt_err err = {{0}};
    const gt_tokenizer *tok = gt_model_tokenizer(model);
    const int n = gt_tokenize(tok, PROMPT, strlen(PROMPT), gt_tokenizer_adds_bos(tok), ids, 128, &err);
    ck_assert_msg(n > 8 && n < 48, "the prompt is %d tokens (%s)", n, err.msg);
    free_model();
    char out[4096], want[160];
    const char *dir = gt_test_tmp("generate");
    ck_assert_int_eq(gt_test_sh("mkdir -p %s", dir), 0);
    /* the prompt alone is longer than the context */
    int rc = gt_test_run_in(dir, out, sizeof out, "%s/gauntlet generate -m %s -b cpu -t 1 -c %d -n 1 -p '%s'",
                            GT_BINARY_DIR, model_path, n - 1, PROMPT);
    snprintf(want, sizeof want, "the prompt is %d tokens, longer than the context of %d", n, n - 1);
    ck_assert_msg(rc == 2 && strstr(out, want), "rc %d: %s", rc, out);
    /* the prompt fits, prompt + -n does not */
    rc = gt_test_run_in(dir, out, sizeof out, "%s/gauntlet generate -m %s -b cpu -t 1 -c 48 -n %d -p '%s'",
                        GT_BINARY_DIR, model_path, 49 - n, PROMPT);
    snprintf(want, sizeof want, "the prompt is %d tokens and -n asks for %d more: 49 positions, "
             "more than the context of 48 (-c); lower -n to %d", n, 49 - n, 48 - n);
    ck_assert_msg(rc == 2 && strstr(out, want), "rc %d: %s", rc, out);
    /* exactly the context: runs */
    rc = gt_test_run_in(dir, out, sizeof out, "%s/gauntlet generate -m %s -b cpu -t 1 -c 48 -n %d --ignore-eos -q -p '%s'",
                        GT_BINARY_DIR, model_path, 48 - n, PROMPT);
    ck_assert_msg(rc == 0 && strstr(out, PROMPT), "rc %d: %s", rc, out);
}
END_TEST

/* ---- serve ----------------------------------------------------------------------- */

typedef struct reply {
    long status;
    char *body;
    size_t len;
} reply;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    const size_t k = size * n;
    char *b = realloc(r->body, r->len + k + 1);
    if (!b)
        return 0;
    r->body = b;
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

static reply post(int port, const char *json)
{
    reply r = {0};
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", port);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = strdup("");
    return r;
}

/* A 400 whose error names param and holds every string in want. */
static void bad_request(int port, const char *json, const char *param, const char *want)
{
    reply r = post(port, json);
    ck_assert_msg(r.status == 400, "%s: %ld %s", json, r.status, r.body);
    cJSON *o = cJSON_Parse(r.body);
    const cJSON *e = cJSON_GetObjectItem(o, "error");
    const cJSON *p = cJSON_GetObjectItem(e, "param"), *m = cJSON_GetObjectItem(e, "message");
    ck_assert_msg(cJSON_IsString(p) && strcmp(p->valuestring, param) == 0, "%s", r.body);
    ck_assert_msg(cJSON_IsString(m) && strstr(m->valuestring, want), "want '%s' in %s", want,
                  r.body);
    printf("serve: 400 %s\n", m->valuestring);
    cJSON_Delete(o);
    free(r.body);
}

START_TEST(serve_400)
{
    load_model();
    int32_t ids[128];
    gt_err err = {{0}};
    const gt_tokenizer *tok = gt_model_tokenizer(model);
    const int n = gt_tokenize(tok, SHORT, strlen(SHORT), gt_tokenizer_adds_bos(tok), ids, 128, &err);
    ck_assert_msg(n > 8 && n < N_CTX, "the prompt is %d tokens (%s)", n, err.msg);
    free_model();
    gt_test_server srv;
    const char *extra[] = {"-c", "32", NULL};
    ck_assert_msg(gt_test_serve_start(&srv, model_path, extra) == 0, "serve did not start: %s",
                  srv.log);
    char json[512], want[160];
    /* the prompt alone: PROMPT is longer than 32 tokens */
    snprintf(json, sizeof json, "{\"prompt\": \"%s\", \"max_tokens\": 1}", PROMPT);
    bad_request(srv.port, json, "prompt", "this model's context is 32 tokens; the prompt alone is");
    /* prompt + max_tokens */
    snprintf(json, sizeof json, "{\"prompt\": \"%s\", \"max_tokens\": %d}", SHORT, 33 - n);
    snprintf(want, sizeof want, "this model's context is 32 tokens; the request needs 33 (%d in the "
             "prompt, %d for the completion)", n, 33 - n);
    bad_request(srv.port, json, "max_tokens", want);
    /* exactly the context: generated to the end */
    snprintf(json, sizeof json, "{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0}",
             SHORT, 32 - n);
    reply r = post(srv.port, json);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    cJSON *o = cJSON_Parse(r.body);
    const cJSON *u = cJSON_GetObjectItem(o, "usage");
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
    ck_assert_msg(cJSON_IsString(fr), "%s", r.body);
    /* a synthetic model may say EOS before the end ("stop"); "length" must
     * then be because all 32 - n were generated */
    const int done = cJSON_GetObjectItem(u, "completion_tokens")->valueint;
    ck_assert_msg(strcmp(fr->valuestring, "length") == 0 ? done == 32 - n
                                                           : strcmp(fr->valuestring, "stop") == 0,
                  "%s", r.body);
    cJSON_Delete(o);
    free(r.body);
    ck_assert_int_eq(gt_test_serve_stop(&srv), 0);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("overflow");
    TCase *tc = tcase_create("overflow");
    tcase_set_timeout(tc, 600);
    const TTest *single[N_BACKENDS] = {single_0, single_1, single_2, single_3};
    const TTest *comp[N_BACKENDS] = {companions_0, companions_1, companions_2, companions_3};
    const TTest *f16[N_BACKENDS] = {f16_cache_0, f16_cache_1, f16_cache_2, f16_cache_3};
    const TTest *seqs[N_BACKENDS] = {sequences_0, sequences_1, sequences_2, sequences_3};
    for (int i = 0; i < N_BACKENDS; i++) {
        char why[512];
        const bool ok = backend_opens(BACKENDS[i], why, sizeof why);
        char name[4][64];
        snprintf(name[0], sizeof name[0], "single_%s", BACKENDS[i]);
        snprintf(name[1], sizeof name[1], "companions_%s", BACKENDS[i]);
        snprintf(name[2], sizeof name[2], "f16_cache_%s", BACKENDS[i]);
        snprintf(name[3], sizeof name[3], "sequences_%s", BACKENDS[i]);
        char reason[600];
        snprintf(reason, sizeof reason, "%s does not open here: %s", BACKENDS[i], why);
        gt_test_add_if_(tc, single[i], name[0], ok, reason);
        gt_test_add_if_(tc, comp[i], name[1], ok, reason);
        gt_test_add_if_(tc, f16[i], name[2], ok, reason);
        gt_test_add_if_(tc, seqs[i], name[3], ok, reason);
    }
    const char *g = gt_test_gemma3();
    const char *gwhy = !g ? "no Gemma 3 270M file ($GT_GEMMA3, ci/fetch-models.sh): no "
                            "synthetic preset has a sliding window"
                          : "Gemma 3's 262,144-entry vocabulary takes minutes under sanitizers";
    const bool gok = g && !gt_test_sanitized();
    char owhy[600];
    const bool ook = backend_opens("opencl", owhy, sizeof owhy);
    gt_test_add_if(tc, window_reference, gok, gwhy);
    gt_test_add_if(tc, window_cpu, gok, gwhy);
    gt_test_add_if(tc, window_opencl, gok && ook, !gok ? gwhy : owhy);
    tcase_add_test(tc, generate_refuses);
    tcase_add_test(tc, serve_400);
    suite_add_tcase(s, tc);
    const int rc = gt_test_run(s);
    curl_global_cleanup();
    return rc;
}
