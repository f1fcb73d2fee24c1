/* test_serve.c: `gauntlet serve` over HTTP, as a client would see it.
 *
 * The test starts the real binary on 127.0.0.1 with --port 0 (reading the
 * port from its "listening on" line), talks to it with libcurl, and checks
 * answers against values, not just status codes: greedy text equals what
 * `gauntlet generate` prints, a stream concatenates to the plain answer,
 * logprobs agree with the tokens chosen, seeds reproduce. Then the abuse:
 * malformed requests of every kind are 400 (413/404/405 where HTTP says so)
 * with an OpenAI error object, and the server keeps answering; a full queue
 * is 503 with Retry-After, a slow request 504; SIGTERM lets an in-flight
 * request finish and exits 0. Every wait is bounded. */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"

/* The server's pure parts, compiled in for direct unit tests. */
#include "../harness/base/cli_common.c"
#include "../harness/base/chat_template.c"
#include "../harness/serve/serve_gen.c"
#include "../harness/serve/serve_request.c"
#include "../harness/serve/serve_format.c"
#include "../harness/base/utf8.c"
#include "gt/backend.h"

static const char *model_path;

static gt_test_server main_srv;
static long client_timeout_ms = 60000; /* per request, for the client side */

/* ---- a small libcurl client ---------------------------------------------- */

typedef struct reply {
    long status;
    char *body;
    size_t len;
    char retry_after[32];
} reply;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t k = size * n;
    char *b = realloc(r->body, r->len + k + 1);
    if (!b)
        return 0;
    r->body = b;
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t k = size * n;
    if (k > 12 && strncasecmp(p, "Retry-After:", 12) == 0)
        snprintf(r->retry_after, sizeof r->retry_after, "%.*s", (int)(k - 12), p + 12);
    return k;
}

/* body NULL: no body (GET); ctype NULL: application/json. */
static reply http(int port, const char *method, const char *path, const char *body, size_t len,
                  const char *ctype)
{
    reply r = {0};
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, client_timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *h = NULL;
    char ct[128];
    snprintf(ct, sizeof ct, "Content-Type: %s", ctype ? ctype : "application/json");
    h = curl_slist_append(h, ct);
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    else
        r.status = -(long)rc;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = strdup("");
    return r;
}

static reply post(int port, const char *json)
{
    return http(port, "POST", "/v1/completions", json, strlen(json), NULL);
}

/* A 200 completion's parsed JSON (fails the test otherwise). */
static cJSON *complete(const char *json)
{
    reply r = post(main_srv.port, json);
    ck_assert_msg(r.status == 200, "%s -> %ld %s", json, r.status, r.body);
    cJSON *o = cJSON_Parse(r.body);
    ck_assert_msg(o, "not JSON: %s", r.body);
    free(r.body);
    return o;
}

static const cJSON *choice(const cJSON *o)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    ck_assert_ptr_nonnull(ch);
    return ch;
}

static const char *text_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItem(choice(o), "text");
    ck_assert(cJSON_IsString(t));
    return t->valuestring;
}

/* ---- starting the binary -------------------------------------------------- */

static void main_up(void)
{
    ck_assert_msg(gt_test_serve_start(&main_srv, model_path, NULL) == 0,
                  "gauntlet serve did not come up");
}

static void main_down(void) { ck_assert_int_eq(gt_test_serve_stop(&main_srv), 0); }

/* ---- answers ------------------------------------------------------------- */

START_TEST(test_health_and_models)
{
    reply r = http(main_srv.port, "GET", "/health", NULL, 0, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.body, "\"status\":\"ok\""), "%s", r.body);
    free(r.body);
    r = http(main_srv.port, "GET", "/v1/models", NULL, 0, NULL);
    ck_assert_int_eq(r.status, 200);
    cJSON *o = cJSON_Parse(r.body);
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "data"), 0);
    const char *slash = strrchr(model_path, '/'); /* the id is the file's name */
    ck_assert_str_eq(cJSON_GetObjectItem(m, "id")->valuestring, slash ? slash + 1 : model_path);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "object")->valuestring, "list");
    cJSON_Delete(o);
    free(r.body);
}
END_TEST

START_TEST(test_greedy_deterministic_and_matches_generate)
{
    const char *req = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0}";
    cJSON *a = complete(req), *b = complete(req);
    ck_assert_str_eq(text_of(a), text_of(b));
    if (gt_test_llama_is_stories()) /* its golden text (../shared/models/README.md) */
        ck_assert_msg(strncmp(text_of(a), ", there was a little girl named Lily", 36) == 0, "%s",
                      text_of(a));
    ck_assert_int_gt(strlen(text_of(a)), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(choice(a), "finish_reason")->valuestring, "length");
    const cJSON *u = cJSON_GetObjectItem(a, "usage");
    ck_assert_int_eq(cJSON_GetObjectItem(u, "completion_tokens")->valueint, 24);
    if (gt_test_llama_is_stories())
        ck_assert_int_eq(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, 5);
    ck_assert_int_gt(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, 1); /* BOS + text */
    ck_assert_str_eq(cJSON_GetObjectItem(a, "object")->valuestring, "text_completion");

    /* The same continuation as the CLI prints (prompt + text + newline). */
    char cmd[1024], out[4096] = "", want[4096];
    snprintf(cmd, sizeof cmd, "%s/gauntlet generate -m %s -p 'Once upon a time' -n 24 -q",
             GT_BINARY_DIR, model_path);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    snprintf(want, sizeof want, "Once upon a time%s\n", text_of(a));
    ck_assert_str_eq(out, want);
    cJSON_Delete(a);
    cJSON_Delete(b);
}
END_TEST

START_TEST(test_seed_reproducible)
{
    char req[256];
    char *texts[4];
    const int seeds[4] = {42, 42, 7, 1234};
    for (int i = 0; i < 4; i++) {
        snprintf(req, sizeof req,
                 "{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, \"temperature\": 0.8, "
                 "\"top_p\": 0.95, \"seed\": %d}", seeds[i]);
        cJSON *o = complete(req);
        texts[i] = strdup(text_of(o));
        cJSON_Delete(o);
    }
    ck_assert_str_eq(texts[0], texts[1]);
    ck_assert_msg(strcmp(texts[0], texts[2]) || strcmp(texts[0], texts[3]),
                  "three seeds gave the same text at temperature 0.8: %s", texts[0]);
    for (int i = 0; i < 4; i++)
        free(texts[i]);
}
END_TEST

/* Concatenates a stream's text; checks its framing. */
static char *stream_text(const char *req, char *finish, size_t cap, int *n_lp_tokens)
{
    reply r = post(main_srv.port, req);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    size_t tlen = 0;
    char *text = calloc(1, r.len + 1);
    bool done = false;
    int events = 0;
    *n_lp_tokens = 0;
    for (char *ev = r.body; *ev;) {
        char *end = strstr(ev, "\n\n");
        ck_assert_msg(end, "unterminated event: %s", ev);
        *end = '\0';
        ck_assert_msg(strncmp(ev, "data: ", 6) == 0, "not an SSE data line: %s", ev);
        ck_assert_msg(!done, "data after [DONE]");
        if (!strcmp(ev + 6, "[DONE]")) {
            done = true;
        } else {
            cJSON *o = cJSON_Parse(ev + 6);
            ck_assert_msg(o, "bad chunk %s", ev + 6);
            ck_assert_ptr_null(cJSON_GetObjectItem(o, "error"));
            const cJSON *ch = choice(o);
            const char *t = cJSON_GetObjectItem(ch, "text")->valuestring;
            memcpy(text + tlen, t, strlen(t));
            tlen += strlen(t);
            const cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
            if (cJSON_IsString(fr))
                snprintf(finish, cap, "%s", fr->valuestring);
            const cJSON *lp = cJSON_GetObjectItem(ch, "logprobs");
            if (cJSON_IsObject(lp))
                *n_lp_tokens += cJSON_GetArraySize(cJSON_GetObjectItem(lp, "tokens"));
            cJSON_Delete(o);
            events++;
        }
        ev = end + 2;
    }
    ck_assert_msg(done, "no [DONE]");
    ck_assert_int_ge(events, 2);
    free(r.body);
    return text;
}

START_TEST(test_stream_equals_plain)
{
    const char *reqs[][2] = {
        {"{\"prompt\": \"Once upon a time\", \"max_tokens\": 30, \"temperature\": 0}",
         "{\"prompt\": \"Once upon a time\", \"max_tokens\": 30, \"temperature\": 0, \"stream\": true, \"logprobs\": 1}"},
        {"{\"prompt\": \"Once upon a time\", \"max_tokens\": 60, \"temperature\": 0, \"stop\": [\"play\", \"zzz\"]}",
         "{\"prompt\": \"Once upon a time\", \"max_tokens\": 60, \"temperature\": 0, \"stop\": [\"play\", \"zzz\"], \"stream\": true}"},
    };
    for (int i = 0; i < 2; i++) {
        cJSON *o = complete(reqs[i][0]);
        char finish[32] = "";
        int n_lp = 0;
        char *s = stream_text(reqs[i][1], finish, sizeof finish, &n_lp);
        ck_assert_str_eq(s, text_of(o));
        ck_assert_str_eq(finish, cJSON_GetObjectItem(choice(o), "finish_reason")->valuestring);
        if (i == 0)
            ck_assert_int_eq(n_lp, 30);
        free(s);
        cJSON_Delete(o);
    }
}
END_TEST

START_TEST(test_stop_strings)
{
    cJSON *full = complete("{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, \"temperature\": 0}");
    const char *t = text_of(full);
    /* stories260K says "Lily"; any model: three characters from the middle
     * of its own greedy text (where they first occur, the stop applies). */
    char stop[8] = "Lily", req[300];
    if (!gt_test_llama_is_stories()) {
        ck_assert_int_ge(strlen(t), 8);
        for (int i = 0; i < 3; i++)
            stop[i] = t[strlen(t) / 2 + (size_t)i];
        stop[3] = '\0';
        ck_assert_msg(!strpbrk(stop, "\"\\") && stop[0] >= ' ' && stop[1] >= ' ' && stop[2] >= ' ',
                      "stop '%s' needs JSON escaping", stop);
    }
    const char *at = strstr(t, stop);
    ck_assert_ptr_nonnull(at);
    snprintf(req, sizeof req, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, "
                              "\"temperature\": 0, \"stop\": \"%s\"}", stop);
    cJSON *o = complete(req);
    ck_assert_int_eq(strlen(text_of(o)), (size_t)(at - t));
    ck_assert_int_eq(strncmp(text_of(o), t, (size_t)(at - t)), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(choice(o), "finish_reason")->valuestring, "stop");
    cJSON_Delete(o);
    cJSON_Delete(full);
}
END_TEST

START_TEST(test_logprobs)
{
    cJSON *o = complete("{\"prompt\": \"Once upon a time\", \"max_tokens\": 20, \"temperature\": 0, "
                        "\"logprobs\": 5}");
    const char *text = text_of(o);
    const cJSON *lp = cJSON_GetObjectItem(choice(o), "logprobs");
    const cJSON *tokens = cJSON_GetObjectItem(lp, "tokens");
    const cJSON *lps = cJSON_GetObjectItem(lp, "token_logprobs");
    const cJSON *tops = cJSON_GetObjectItem(lp, "top_logprobs");
    const cJSON *offs = cJSON_GetObjectItem(lp, "text_offset");
    ck_assert_int_eq(cJSON_GetArraySize(tokens), 20);
    ck_assert_int_eq(cJSON_GetArraySize(lps), 20);
    ck_assert_int_eq(cJSON_GetArraySize(tops), 20);
    char joined[2048] = "";
    for (int i = 0; i < 20; i++) {
        const char *tok = cJSON_GetArrayItem(tokens, i)->valuestring;
        ck_assert_int_eq(cJSON_GetArrayItem(offs, i)->valueint, (int)strlen(joined));
        strcat(joined, tok);
        double l = cJSON_GetArrayItem(lps, i)->valuedouble;
        ck_assert(l <= 0 && l > -30);
        const cJSON *top = cJSON_GetArrayItem(tops, i);
        ck_assert_int_eq(cJSON_GetArraySize(top), 5);
        /* Greedy picked the argmax: the first alternative is the token. */
        ck_assert_str_eq(top->child->string, tok);
        ck_assert_double_eq_tol(top->child->valuedouble, l, 1e-6);
        double prev = 0, mass = 0;
        for (const cJSON *e = top->child; e; e = e->next) {
            ck_assert(e->valuedouble <= prev + 1e-9);
            prev = e->valuedouble;
            mass += exp(e->valuedouble);
        }
        ck_assert(mass <= 1.0 + 1e-5);
    }
    ck_assert_str_eq(joined, text);
    cJSON_Delete(o);

    /* echo + logprobs: the prompt's tokens lead, the first has no logprob. */
    o = complete("{\"prompt\": \"Once upon a time\", \"max_tokens\": 3, \"temperature\": 0, "
                 "\"logprobs\": 1, \"echo\": true}");
    ck_assert_msg(strncmp(text_of(o), gt_test_llama_is_stories() ? "Once upon a time," : "Once upon a time",
                          gt_test_llama_is_stories() ? 17 : 16) == 0,
                  "%s", text_of(o));
    lp = cJSON_GetObjectItem(choice(o), "logprobs");
    lps = cJSON_GetObjectItem(lp, "token_logprobs");
    ck_assert_int_eq(cJSON_GetArraySize(lps), cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"),
                                                                   "prompt_tokens")->valueint + 3);
    ck_assert(cJSON_IsNull(cJSON_GetArrayItem(lps, 0)));
    for (int i = 1; i < 8; i++)
        ck_assert(cJSON_IsNumber(cJSON_GetArrayItem(lps, i)));
    cJSON_Delete(o);

    /* logprobs 0: the chosen tokens' logprobs, no alternatives. */
    o = complete("{\"prompt\": \"Once\", \"max_tokens\": 2, \"temperature\": 0, \"logprobs\": 0}");
    tops = cJSON_GetObjectItem(cJSON_GetObjectItem(choice(o), "logprobs"), "top_logprobs");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetArrayItem(tops, 0)), 0);
    cJSON_Delete(o);
}
END_TEST

START_TEST(test_lenient_on_unknown_fields)
{
    /* "model" names the served one (the file's name, as GET /v1/models lists it). */
    const char *slash = strrchr(model_path, '/');
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\": \"%s\", \"prompt\": [\"Once\"], \"max_tokens\": 2, "
             "\"user\": \"u1\", \"x_extra\": {\"a\": [1]}, \"n\": 1, "
             "\"presence_penalty\": 0, \"temperature\": null, \"stop\": null}",
             slash ? slash + 1 : model_path);
    cJSON *o = complete(body);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"), "completion_tokens")->valueint, 2);
    cJSON_Delete(o);
    /* `curl -d` sends a form content type; the body is still JSON. */
    const char *b = "{\"prompt\": \"Once\", \"max_tokens\": 1}";
    reply r = http(main_srv.port, "POST", "/v1/completions", b, strlen(b),
                   "application/x-www-form-urlencoded");
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    free(r.body);
    r = http(main_srv.port, "POST", "/v1/completions", b, strlen(b), "application/json; charset=utf-8");
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    free(r.body);
    /* max_tokens 0 is allowed: nothing generated. */
    o = complete("{\"prompt\": \"Once\", \"max_tokens\": 0}");
    ck_assert_str_eq(text_of(o), "");
    cJSON_Delete(o);
}
END_TEST

/* ---- abuse --------------------------------------------------------------- */

typedef struct bad_case {
    const char *method, *path, *body, *ctype;
    long status;
    const char *param; /* expected "param", or NULL for any */
} bad_case;

START_TEST(test_malformed_requests)
{
    static const bad_case cases[] = {
        {"POST", "/v1/completions", "{\"prompt\": \"x\"", NULL, 400, NULL},
        {"POST", "/v1/completions", "", NULL, 400, NULL},
        {"POST", "/v1/completions", "[1, 2]", NULL, 400, NULL},
        {"POST", "/v1/completions", "{\"prompt\": \"x\"} trailing", NULL, 400, NULL},
        {"POST", "/v1/completions", "{}", NULL, 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"model\": \"nope\"}", NULL, 404, "model"},
        {"POST", "/v1/completions", "{\"prompt\": 3}", NULL, 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\": [1, 2]}", NULL, 400, "prompt"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": -1}", NULL, 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 100000000}", NULL, 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 2047}", NULL, 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": \"5\"}", NULL, 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 1.5}", NULL, 400, "max_tokens"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"temperature\": -0.5}", NULL, 400, "temperature"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"temperature\": \"hot\"}", NULL, 400, "temperature"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"top_p\": 1.5}", NULL, 400, "top_p"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"seed\": \"abc\"}", NULL, 400, "seed"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"seed\": 1.25}", NULL, 400, "seed"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stop\": 5}", NULL, 400, "stop"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stop\": [\"a\", 3]}", NULL, 400, "stop"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stop\": \"\"}", NULL, 400, "stop"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"logprobs\": \"3\"}", NULL, 400, "logprobs"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"logprobs\": true}", NULL, 400, "logprobs"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"logprobs\": 100}", NULL, 400, "logprobs"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"logprobs\": -1}", NULL, 400, "logprobs"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stream\": \"yes\"}", NULL, 400, "stream"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"echo\": 1}", NULL, 400, "echo"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"n\": 2}", NULL, 400, "n"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"top_k\": -3}", NULL, 400, "top_k"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\", \"frequency_penalty\": 0.5}", NULL, 400, "frequency_penalty"},
        {"POST", "/v1/completions", "{\"prompt\": \"x\"}", "text/plain", 400, NULL},
        {"GET", "/v1/completions", NULL, NULL, 405, NULL},
        {"POST", "/health", "{}", NULL, 405, NULL},
        {"GET", "/v2/nothing", NULL, NULL, 404, NULL},
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    ck_assert_int_ge(n, 15);
    for (int i = 0; i < n; i++) {
        const bad_case *c = &cases[i];
        reply r = http(main_srv.port, c->method, c->path, c->body, c->body ? strlen(c->body) : 0,
                       c->ctype);
        ck_assert_msg(r.status == c->status, "case %d (%s %s %s): %ld %s", i, c->method, c->path,
                      c->body ? c->body : "", r.status, r.body);
        cJSON *o = cJSON_Parse(r.body);
        const cJSON *e = cJSON_GetObjectItem(o, "error");
        ck_assert_msg(cJSON_IsObject(e), "case %d: no error object: %s", i, r.body);
        ck_assert(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
        ck_assert(cJSON_IsString(cJSON_GetObjectItem(e, "type")));
        ck_assert(cJSON_GetObjectItem(e, "param") != NULL);
        if (c->param)
            ck_assert_msg(cJSON_IsString(cJSON_GetObjectItem(e, "param")) &&
                              !strcmp(cJSON_GetObjectItem(e, "param")->valuestring, c->param),
                          "case %d: param: %s", i, r.body);
        cJSON_Delete(o);
        free(r.body);
        /* ... and the server still answers. */
        reply h = http(main_srv.port, "GET", "/health", NULL, 0, NULL);
        ck_assert_msg(h.status == 200, "after case %d: health %ld", i, h.status);
        free(h.body);
    }

    /* A body over the limit (1 MiB): 413, announced or not. */
    size_t big = (2u << 20);
    char *body = malloc(big + 1);
    memset(body, ' ', big);
    memcpy(body, "{\"prompt\": \"", 12);
    memset(body + 12, 'a', big - 14);
    memcpy(body + big - 2, "\"}", 2);
    body[big] = '\0';
    reply r = http(main_srv.port, "POST", "/v1/completions", body, big, NULL);
    ck_assert_msg(r.status == 413, "%ld %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "\"error\""), "%s", r.body);
    free(r.body);
    free(body);

    /* ... and still answers: stories260K's golden text, or for any model
     * the start of its own 24-token greedy answer. */
    cJSON *o = complete("{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, \"temperature\": 0}");
    if (gt_test_llama_is_stories()) {
        ck_assert_str_eq(text_of(o), ", there was a");
    } else {
        cJSON *longer =
            complete("{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0}");
        ck_assert_int_gt(strlen(text_of(o)), 0);
        ck_assert_msg(strncmp(text_of(longer), text_of(o), strlen(text_of(o))) == 0, "'%s' vs '%s'",
                      text_of(o), text_of(longer));
        cJSON_Delete(longer);
    }
    cJSON_Delete(o);
}
END_TEST

/* ---- overload, timeout, shutdown (servers of their own) ------------------- */

typedef struct bg {
    int port;
    const char *req;
    reply r;
} bg;

static void *bg_post(void *ud)
{
    bg *b = ud;
    b->r = post(b->port, b->req);
    return NULL;
}

START_TEST(test_queue_full_is_503)
{
    gt_test_server s;
    const char *extra[] = {"--queue", "1", "-q", NULL};
    ck_assert(gt_test_serve_start(&s, model_path, extra) == 0);
    enum { N = 6 };
    bg b[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        b[i] = (bg){.port = s.port,
                    .req = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 600, \"temperature\": 0}"};
        pthread_create(&th[i], NULL, bg_post, &b[i]);
    }
    int ok = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (b[i].r.status == 200)
            ok++;
        else if (b[i].r.status == 503) {
            busy++;
            ck_assert_msg(atoi(b[i].r.retry_after) >= 1, "Retry-After: '%s'", b[i].r.retry_after);
            ck_assert_msg(strstr(b[i].r.body, "queue is full"), "%s", b[i].r.body);
        } else
            ck_abort_msg("status %ld: %s", b[i].r.status, b[i].r.body);
        free(b[i].r.body);
    }
    ck_assert_int_ge(ok, 1);
    ck_assert_int_ge(busy, 1);
    ck_assert_int_eq(ok + busy, N);
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
}
END_TEST

START_TEST(test_timeout_is_504)
{
    gt_test_server s;
    const char *extra[] = {"--timeout", "0.3", "-q", NULL};
    ck_assert(gt_test_serve_start(&s, model_path, extra) == 0);
    double t0 = gt_test_now();
    reply r = post(s.port, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 2000, \"temperature\": 0}");
    ck_assert_msg(r.status == 504, "%ld %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "timeout"), "%s", r.body);
    ck_assert(gt_test_now() - t0 < 5);
    free(r.body);
    r = post(s.port, "{\"prompt\": \"Once\", \"max_tokens\": 2}");
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
}
END_TEST

START_TEST(test_sigterm_finishes_in_flight)
{
    gt_test_server s;
    const char *extra[] = {"-q", NULL};
    ck_assert(gt_test_serve_start(&s, model_path, extra) == 0);
    bg b = {.port = s.port,
            .req = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 800, \"temperature\": 0}"};
    pthread_t th;
    pthread_create(&th, NULL, bg_post, &b);
    usleep(150 * 1000); /* the request is running */
    double t0 = gt_test_now();
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
    pthread_join(th, NULL);
    ck_assert_msg(b.r.status == 200, "in-flight request: %ld %s", b.r.status, b.r.body);
    cJSON *o = cJSON_Parse(b.r.body);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"), "completion_tokens")->valueint, 800);
    cJSON_Delete(o);
    free(b.r.body);
    ck_assert(gt_test_now() - t0 < 20);
    /* Gone: nothing listens any more. */
    reply r = http(s.port, "GET", "/health", NULL, 0, NULL);
    ck_assert_int_lt(r.status, 0);
    free(r.body);
}
END_TEST

START_TEST(test_disconnect_cancels)
{
    /* A client that gives up frees the worker: 2000 tokens take seconds
     * here, and the next request must not wait for them. */
    gt_test_server s;
    const char *extra[] = {"-q", NULL};
    ck_assert(gt_test_serve_start(&s, model_path, extra) == 0);
    const char *slow = "{\"prompt\": \"Once\", \"max_tokens\": 2000, \"temperature\": 0}";
    const char *slow_stream =
        "{\"prompt\": \"Once\", \"max_tokens\": 2000, \"temperature\": 0, \"stream\": true}";
    const char *reqs[] = {slow, slow_stream};
    for (int i = 0; i < 2; i++) {
        client_timeout_ms = 300;
        reply r = post(s.port, reqs[i]);
        free(r.body);
        ck_assert_int_lt(r.status, 0); /* our own timeout */
        client_timeout_ms = 60000;
        double t0 = gt_test_now();
        r = post(s.port, "{\"prompt\": \"Once\", \"max_tokens\": 2}");
        ck_assert_int_eq(r.status, 200);
        free(r.body);
        double waited = gt_test_now() - t0;
        ck_assert_msg(waited < 1.5, "the next request waited %.2f s", waited);
    }
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
}
END_TEST

/* ---- in-process: parsing, UTF-8, stream hold-back ------------------------ */

START_TEST(test_utf8_cleaning)
{
    char *c = gt_utf8_clean("a\xff b\xc0\xaf \xe2\x96\x81 \xf0\x9f\x98\x80", 15, false);
    ck_assert_str_eq(c, "a\xef\xbf\xbd b\xef\xbf\xbd\xef\xbf\xbd \xe2\x96\x81 \xf0\x9f\x98\x80");
    free(c);
    c = gt_utf8_clean("x\0y", 3, false); /* NUL cannot go through C strings */
    ck_assert_str_eq(c, "x\xef\xbf\xbdy");
    free(c);
    c = gt_utf8_clean("ab\xe2\x96", 4, true); /* a prefix: the unfinished tail is dropped */
    ck_assert_str_eq(c, "ab");
    free(c);
    ck_assert_uint_eq(utf8_incomplete_tail("ab\xe2\x96", 4), 2);
    ck_assert_uint_eq(utf8_incomplete_tail("ab\xf0", 3), 1);
    ck_assert_uint_eq(utf8_incomplete_tail("ab\xe2\x96\x81", 5), 0);
    ck_assert_uint_eq(utf8_incomplete_tail("abc", 3), 0);
    ck_assert_uint_eq(utf8_incomplete_tail("ab\xff", 3), 0); /* invalid, not incomplete */
}
END_TEST

START_TEST(test_parse_direct)
{
    gt_serve_req r;
    gt_serve_error e;
    const char *b = "{\"prompt\": \"hi\"}";
    ck_assert_int_eq(gt_serve_parse(b, strlen(b), 100, &r, &e), 0);
    ck_assert_int_eq(r.max_tokens, 16);
    ck_assert(r.temperature == 1.0f && r.top_p == 1.0f && r.logprobs == -1 && !r.has_seed);
    ck_assert(!r.stream && !r.echo && r.n_stop == 0);
    gt_serve_req_free(&r);
    b = "{\"prompt\": \"hi\", \"seed\": -5, \"top_p\": 0, \"temperature\": 0.7, "
        "\"stop\": [\"a\", \"bc\"], \"logprobs\": 3, \"max_tokens\": 100}";
    ck_assert_int_eq(gt_serve_parse(b, strlen(b), 100, &r, &e), 0);
    ck_assert(r.has_seed && r.seed == (uint64_t)-5);
    ck_assert(r.temperature == 0); /* top_p 0 keeps only the best token */
    ck_assert_int_eq(r.n_stop, 2);
    ck_assert_str_eq(r.stop[1], "bc");
    ck_assert_int_eq(r.logprobs, 3);
    gt_serve_req_free(&r);
    b = "{\"prompt\": \"hi\", \"max_tokens\": 101}";
    ck_assert_int_eq(gt_serve_parse(b, strlen(b), 100, &r, &e), -1);
    ck_assert_int_eq(e.status, 400);
    ck_assert_str_eq(e.param, "max_tokens");
    b = "{\"prompt\": \"hi\", \"seed\": 1e300}";
    ck_assert_int_eq(gt_serve_parse(b, strlen(b), 100, &r, &e), -1);
    ck_assert_str_eq(e.param, "seed");
    char many[1024] = "{\"prompt\": \"hi\", \"stop\": [";
    for (int i = 0; i <= GT_SERVE_MAX_STOP; i++)
        strcat(many, i ? ", \"s\"" : "\"s\"");
    strcat(many, "]}");
    ck_assert_int_eq(gt_serve_parse(many, strlen(many), 100, &r, &e), -1);
    ck_assert_msg(strstr(e.message, "at most"), "%s", e.message);
    char *j = gt_serve_error_json(&e);
    ck_assert_msg(strstr(j, "\"param\":\"stop\"") && strstr(j, "\"type\":\"invalid_request_error\""),
                  "%s", j);
    free(j);
}
END_TEST

START_TEST(test_chat_without_template_is_400)
{
    /* The test model has no tokenizer.chat_template: chat is refused with
     * the reason, and the completions API keeps working beside it. */
    const char *b = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    reply r = http(main_srv.port, "POST", "/v1/chat/completions", b, strlen(b), NULL);
    ck_assert_msg(r.status == 400, "%ld %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "tokenizer.chat_template") && strstr(r.body, "\"param\":\"messages\""),
                  "%s", r.body);
    free(r.body);
    r = http(main_srv.port, "GET", "/v1/chat/completions", NULL, 0, NULL);
    ck_assert_int_eq(r.status, 405);
    free(r.body);
    cJSON_Delete(complete("{\"prompt\": \"Once\", \"max_tokens\": 2}"));
}
END_TEST

START_TEST(test_chat_parse_direct)
{
    gt_serve_req r;
    gt_serve_error e;
    const char *b = "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, "
                    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, "
                    "{\"type\": \"text\", \"text\": \"b\"}]}], \"max_completion_tokens\": 7, "
                    "\"logprobs\": true, \"top_logprobs\": 4, \"stream\": true}";
    ck_assert_int_eq(gt_serve_parse_chat(b, strlen(b), 100, &r, &e), 0);
    ck_assert(r.chat && !r.prompt && r.stream);
    ck_assert_int_eq(r.n_messages, 2);
    ck_assert_str_eq(r.messages[0].role, "system");
    ck_assert_str_eq(r.messages[1].content, "ab"); /* text parts joined */
    ck_assert_int_eq(r.max_tokens, 7);
    ck_assert_int_eq(r.logprobs, 4);
    gt_serve_req_free(&r);
    b = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}";
    ck_assert_int_eq(gt_serve_parse_chat(b, strlen(b), 100, &r, &e), 0);
    ck_assert_int_eq(r.logprobs, 0); /* the chosen token's logprob, no alternatives */
    gt_serve_req_free(&r);
    static const struct { const char *body, *param; } bad[] = {
        {"{}", "messages"},
        {"{\"messages\": []}", "messages"},
        {"{\"messages\": \"hi\"}", "messages"},
        {"{\"messages\": [3]}", "messages"},
        {"{\"messages\": [{\"role\": 1, \"content\": \"x\"}]}", "messages"},
        {"{\"messages\": [{\"role\": \"user\"}]}", "messages"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 3}", "logprobs"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", "top_logprobs"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true, \"top_logprobs\": 21}", "top_logprobs"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": 101}", "max_completion_tokens"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": -1}", "max_tokens"},
        {"{\"prompt\": \"x\"}", "messages"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(gt_serve_parse_chat(bad[i].body, strlen(bad[i].body), 100, &r, &e) == -1,
                      "accepted: %s", bad[i].body);
        ck_assert_int_eq(e.status, 400);
        ck_assert_msg(e.param && !strcmp(e.param, bad[i].param), "%s: param %s, want %s",
                      bad[i].body, e.param ? e.param : "(none)", bad[i].param);
    }
}
END_TEST

START_TEST(test_chat_template_init)
{
    gt_model *m;
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(model_path, &m, &err) == 0, "%s", err.msg);
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    gt_chat_template t;
    /* No template in the file: no chat, and the reason names the way out. */
    ck_assert_int_eq(gt_chat_template_init(&t, NULL, NULL, tok), 0);
    ck_assert_int_eq(t.family, GT_CHAT_NONE);
    ck_assert_msg(strstr(t.why, "--chat-template"), "%s", t.why);
    /* A template of no known family. */
    ck_assert_int_eq(gt_chat_template_init(&t, "{{ messages[0]['content'] }}", NULL, tok), 0);
    ck_assert_int_eq(t.family, GT_CHAT_NONE);
    ck_assert_msg(strstr(t.why, "no family"), "%s", t.why);
    /* A ChatML template on a vocabulary without its tokens. */
    ck_assert_int_eq(gt_chat_template_init(&t, "<|im_start|>", NULL, tok), 0);
    ck_assert_int_eq(t.family, GT_CHAT_NONE);
    ck_assert_msg(strstr(t.why, "<|im_start|>"), "%s", t.why);
    /* Forced: an unknown name, or a family the vocabulary cannot express, is an error. */
    ck_assert_int_eq(gt_chat_template_init(&t, NULL, "vicuna", tok), -1);
    ck_assert_msg(strstr(t.why, "vicuna"), "%s", t.why);
    ck_assert_int_eq(gt_chat_template_init(&t, NULL, "gemma", tok), -1);
    ck_assert_msg(strstr(t.why, "<start_of_turn>"), "%s", t.why);
    gt_serve_req r;
    gt_serve_error e;
    const char *b = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
    ck_assert_int_eq(gt_serve_parse_chat(b, strlen(b), 100, &r, &e), 0);
    char why[256];
    int n = 0;
    ck_assert_ptr_null(gt_chat_render(&t, tok, r.messages, r.n_messages, &n, why, sizeof why));
    ck_assert_msg(strstr(why, "<start_of_turn>"), "%s", why);
    gt_serve_req_free(&r);
    gt_model_free(m);
}
END_TEST

typedef struct collect {
    char *buf;
    size_t len;
} collect;

static void collect_write(void *ud, const char *d, size_t n)
{
    collect *c = ud;
    c->buf = realloc(c->buf, c->len + n + 1);
    memcpy(c->buf + c->len, d, n);
    c->len += n;
    c->buf[c->len] = '\0';
}

/* The text of every chunk, concatenated; checks no chunk is an error. */
static char *sse_text(const char *sse)
{
    char *out = calloc(1, strlen(sse) + 1);
    const char *p = sse;
    while ((p = strstr(p, "data: {"))) {
        const char *end = strstr(p, "\n\n");
        char *one = strndup(p + 6, (size_t)(end - p - 6));
        cJSON *o = cJSON_Parse(one);
        ck_assert_msg(o && !cJSON_GetObjectItem(o, "error"), "%s", one);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        if (ch)
            strcat(out, cJSON_GetObjectItem(ch, "text")->valuestring);
        cJSON_Delete(o);
        free(one);
        p = end;
    }
    return out;
}

START_TEST(test_stream_holdback_in_process)
{
    gt_model *m;
    gt_backend *b;
    gt_session *ses;
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(model_path, &m, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_backend_open("reference", NULL, &b, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_session_new(m, b, NULL, &ses, &err) == 0, "%s", err.msg);
    gt_serve_ctx ctx = {.session = ses, .model = m, .model_id = "m"};
    /* Stop strings that straddle tokens, match at once, or never. */
    const char *stops[] = {"Lily", "ed to", "e", " a l", "zzz", "girl named"};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        char b[256];
        snprintf(b, sizeof b, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 48, "
                              "\"temperature\": 0, \"stop\": \"%s\"}", stops[i]);
        gt_serve_req r;
        gt_serve_error e;
        ck_assert_int_eq(gt_serve_parse(b, strlen(b), 2048, &r, &e), 0);
        int n;
        int32_t *ids = gt_serve_tokenize(&ctx, &r, &n, &e);
        ck_assert_ptr_nonnull(ids);
        gt_serve_sink plain = {0};
        char *resp = NULL;
        ck_assert_msg(gt_serve_generate(&ctx, &r, ids, n, gt_now() + 60, &plain, &resp, &e) == 0,
                      "%s", e.message);
        cJSON *o = cJSON_Parse(resp);
        const char *text = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0),
                                               "text")->valuestring;
        ck_assert_msg(!strstr(text, stops[i]), "stop '%s' still in '%s'", stops[i], text);
        collect c = {0};
        gt_serve_sink sink = {collect_write, NULL, &c};
        r.stream = true;
        ck_assert_int_eq(gt_serve_generate(&ctx, &r, ids, n, gt_now() + 60, &sink, NULL, &e), 0);
        char *st = sse_text(c.buf);
        ck_assert_str_eq(st, text);
        ck_assert_msg(strstr(c.buf, "data: [DONE]\n\n") == c.buf + c.len - 14, "no [DONE] at the end");
        free(st);
        free(c.buf);
        cJSON_Delete(o);
        free(resp);
        free(ids);
        gt_serve_req_free(&r);
    }
    /* A deadline already past: 504, and the stream carries the error. */
    const char *b2 = "{\"prompt\": \"Once\", \"max_tokens\": 5, \"stream\": true}";
    gt_serve_req r;
    gt_serve_error e;
    ck_assert_int_eq(gt_serve_parse(b2, strlen(b2), 2048, &r, &e), 0);
    int n;
    int32_t *ids = gt_serve_tokenize(&ctx, &r, &n, &e);
    collect c = {0};
    gt_serve_sink sink = {collect_write, NULL, &c};
    ck_assert_int_eq(gt_serve_generate(&ctx, &r, ids, n, gt_now() - 1, &sink, NULL, &e), -1);
    ck_assert_int_eq(e.status, 504);
    ck_assert_msg(strstr(c.buf, "\"timeout_error\"") && strstr(c.buf, "data: [DONE]"), "%s", c.buf);
    free(c.buf);
    free(ids);
    gt_serve_req_free(&r);
    gt_session_free(ses);
    gt_backend_close(b);
    gt_model_free(m);
}
END_TEST

int main(void)
{
    model_path = gt_test_llama(); /* written once here, before the cases fork */
    gt_test_require_gauntlet();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("serve");
    TCase *api = tcase_create("api");
    tcase_add_unchecked_fixture(api, main_up, main_down);
    tcase_set_timeout(api, 120);
    tcase_add_test(api, test_health_and_models);
    tcase_add_test(api, test_greedy_deterministic_and_matches_generate);
    tcase_add_test(api, test_seed_reproducible);
    tcase_add_test(api, test_stream_equals_plain);
    tcase_add_test(api, test_stop_strings);
    tcase_add_test(api, test_logprobs);
    tcase_add_test(api, test_lenient_on_unknown_fields);
    tcase_add_test(api, test_malformed_requests);
    tcase_add_test(api, test_chat_without_template_is_400);
    suite_add_tcase(s, api);
    TCase *life = tcase_create("lifecycle");
    tcase_set_timeout(life, 120);
    tcase_add_test(life, test_queue_full_is_503);
    tcase_add_test(life, test_timeout_is_504);
    tcase_add_test(life, test_disconnect_cancels);
    tcase_add_test(life, test_sigterm_finishes_in_flight);
    suite_add_tcase(s, life);
    TCase *unit = tcase_create("in-process");
    tcase_set_timeout(unit, 120);
    tcase_add_test(unit, test_utf8_cleaning);
    tcase_add_test(unit, test_parse_direct);
    tcase_add_test(unit, test_chat_parse_direct);
    tcase_add_test(unit, test_chat_template_init);
    tcase_add_test(unit, test_stream_holdback_in_process);
    suite_add_tcase(s, unit);
    int rc = gt_test_run(s);
    curl_global_cleanup();
    return rc;
}
