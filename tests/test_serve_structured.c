/* test_serve_structured.c: `gauntlet serve` with OpenAI's response_format
 * (constrained decoding, gt/constraint.h) on a synthetic model (random
 * weights) and, where it was fetched, SmolLM2 for the chat API (the
 * synthetic vocabulary has no chat-template tokens).
 *
 * - completions: a json_schema answer parses and validates (own validator,
 *   tests/test_json_valid.h), finish_reason "stop"; json_object gives an
 *   object or, cut by max_tokens, finish_reason "length"; the stream's text
 *   and finish equal the plain answer's; the same request gives the same
 *   bytes on the reference and cpu backends.
 * - refused: an unsupported keyword (named with its JSON pointer), a
 *   malformed schema, an unknown type and a json_schema without schema are
 *   400 with param "response_format".
 * - parallel: constrained and plain requests sent together to --parallel 2
 *   answer as --parallel 1 does.
 * - chat: a json_schema chat answer (SmolLM2) parses and validates.
 * Servers listen on 127.0.0.1 only (gt_test_serve_start). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gt/synth.h"
#include "test_json_valid.h"
#include "testutil.h"

static const char *g_model;

#define BOUNDED                                                                              \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"     \
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\"," \
    "\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\",\"age\"]}"
#define RF_SCHEMA(s) \
    "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", " \
    "\"strict\": true, \"schema\": " s "}}"

typedef struct buf {
    char *p;
    size_t n;
} buf;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    buf *b = ud;
    const size_t k = size * n;
    char *q = realloc(b->p, b->n + k + 1);
    if (!q)
        return 0;
    memcpy(q + b->n, p, k);
    b->p = q;
    b->n += k;
    b->p[b->n] = '\0';
    return k;
}

static long post(int port, const char *path, const char *body, char **out)
{
    buf b = {0};
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) /* else a GET */
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    long status = -1;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    *out = b.p ? b.p : strdup("");
    return status;
}

/* A plain answer's text (or chat content) and finish_reason, malloc'ed. */
static void answer(const char *reply, char **text, char **finish)
{
    cJSON *o = cJSON_Parse(reply);
    ck_assert_msg(o, "not JSON: %s", reply);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    const cJSON *t = cJSON_GetObjectItem(ch, "text");
    if (!t)
        t = cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "message"), "content");
    ck_assert_msg(cJSON_IsString(t), "%s", reply);
    *text = strdup(t->valuestring);
    *finish = strdup(cJSON_GetObjectItem(ch, "finish_reason")->valuestring);
    cJSON_Delete(o);
}

/* A stream's concatenated text and last finish_reason. */
static void stream_answer(const char *sse, char **text, char **finish)
{
    size_t cap = strlen(sse) + 1;
    *text = calloc(1, cap);
    *finish = strdup("");
    ck_assert_msg(strstr(sse, "data: [DONE]"), "%s", sse);
    for (const char *p = sse; (p = strstr(p, "data: {")); p++) {
        const char *end = strstr(p, "\n\n");
        cJSON *o = cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6));
        ck_assert_msg(o && !cJSON_GetObjectItem(o, "error"), "%.*s", (int)(end - p), p);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        const cJSON *t = cJSON_GetObjectItem(ch, "text");
        if (cJSON_IsString(t))
            strcat(*text, t->valuestring);
        const cJSON *f = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(f)) {
            free(*finish);
            *finish = strdup(f->valuestring);
        }
        cJSON_Delete(o);
    }
}

static void check_valid(const char *text, const char *schema)
{
    cJSON *doc = cJSON_Parse(text), *s = cJSON_Parse(schema);
    ck_assert_msg(doc, "the answer does not parse as JSON: %s", text);
    char why[256] = "";
    ck_assert_msg(gt_test_json_valid(doc, s, s, why, sizeof why), "%s: %s", why, text);
    cJSON_Delete(doc);
    cJSON_Delete(s);
}

#define REQ_SCHEMA(extra)                                                                    \
    "{\"prompt\": \"The answer:\", \"max_tokens\": 120, \"temperature\": 0, " RF_SCHEMA(BOUNDED) \
    extra "}"
#define REQ_OBJECT(extra)                                                                    \
    "{\"prompt\": \"The answer:\", \"max_tokens\": 60, \"temperature\": 0, "                   \
    "\"response_format\": {\"type\": \"json_object\"}" extra "}"

/* The text of a json_object answer: a whole object when it says "stop";
 * cut by max_tokens ("length") it must still open as one. */
static void check_object(const char *text, const char *finish)
{
    if (!strcmp(finish, "stop")) {
        cJSON *o = cJSON_Parse(text);
        ck_assert_msg(cJSON_IsObject(o), "not an object: %s", text);
        cJSON_Delete(o);
    } else {
        ck_assert_str_eq(finish, "length");
        const char *p = text + (text[0] == ' ');
        ck_assert_msg(p[0] == '{' && !cJSON_Parse(text), "%s", text);
    }
}

START_TEST(completions)
{
    gt_test_server ref, cpu;
    const char *q[] = {"-q", NULL}, *qc[] = {"-q", "-b", "cpu", NULL};
    ck_assert(gt_test_serve_start(&ref, g_model, q) == 0);
    ck_assert(gt_test_serve_start(&cpu, g_model, qc) == 0);
    const char *reqs[2][2] = {{REQ_SCHEMA(""), REQ_SCHEMA(", \"stream\": true")},
                              {REQ_OBJECT(""), REQ_OBJECT(", \"stream\": true")}};
    for (int k = 0; k < 2; k++) {
        char *r, *text, *finish, *st, *sf, *cr, *ct, *cf;
        ck_assert_msg(post(ref.port, "/v1/completions", reqs[k][0], &r) == 200, "%s", r);
        answer(r, &text, &finish);
        if (k == 0) {
            ck_assert_msg(!strcmp(finish, "stop"), "%s: %s", finish, text);
            check_valid(text, BOUNDED);
        } else {
            check_object(text, finish);
        }
        free(r);
        /* The stream: the same tokens. */
        ck_assert_msg(post(ref.port, "/v1/completions", reqs[k][1], &r) == 200, "%s", r);
        stream_answer(r, &st, &sf);
        ck_assert_str_eq(st, text);
        ck_assert_str_eq(sf, finish);
        free(r);
        /* The cpu backend: the same bytes. */
        ck_assert_msg(post(cpu.port, "/v1/completions", reqs[k][0], &cr) == 200, "%s", cr);
        answer(cr, &ct, &cf);
        ck_assert_str_eq(ct, text);
        ck_assert_str_eq(cf, finish);
        printf("%s: finish %s, %zu bytes: %s\n", k ? "json_object" : "json_schema", finish,
               strlen(text), text);
        free(cr), free(ct), free(cf), free(st), free(sf), free(text), free(finish);
    }
    /* max_tokens before the document is complete: "length", the text an
     * unfinished document (a prefix of the whole answer above). */
    char *r, *text, *finish, *whole, *wf;
    ck_assert_int_eq(post(ref.port, "/v1/completions", reqs[0][0], &r), 200);
    answer(r, &whole, &wf);
    free(r);
    const char *cut = "{\"prompt\": \"The answer:\", \"max_tokens\": 5, \"temperature\": 0, "
                      "\"logprobs\": 2, " RF_SCHEMA(BOUNDED) "}";
    ck_assert_int_eq(post(ref.port, "/v1/completions", cut, &r), 200);
    answer(r, &text, &finish);
    ck_assert_str_eq(finish, "length");
    ck_assert_msg(!cJSON_Parse(text) && !strncmp(text, whole, strlen(text)), "'%s' of '%s'", text,
                  whole);
    /* Logprobs are the model's own: finite for the chosen tokens. */
    ck_assert_msg(strstr(r, "\"token_logprobs\":[") && !strstr(r, "null"), "%s", r);
    free(r), free(text), free(finish), free(whole), free(wf);
    ck_assert_int_eq(gt_test_serve_stop(&cpu), 0);
    ck_assert_int_eq(gt_test_serve_stop(&ref), 0);
}
END_TEST

static void expect_400(int port, const char *path, const char *body, const char *needle)
{
    char *r;
    const long st = post(port, path, body, &r);
    ck_assert_msg(st == 400, "%ld %s", st, r);
    ck_assert_msg(strstr(r, needle) && strstr(r, "\"param\":\"response_format\""),
                  "expected '%s': %s", needle, r);
    free(r);
}

START_TEST(refused)
{
    gt_test_server s;
    const char *q[] = {"-q", NULL};
    ck_assert(gt_test_serve_start(&s, g_model, q) == 0);
    const char *p = "{\"prompt\": \"x\", \"max_tokens\": 4, ";
    char b[1024];
    snprintf(b, sizeof b, "%s" RF_SCHEMA("{\"type\": \"object\", \"properties\": {\"x\": "
                                          "{\"type\": \"string\", \"pattern\": \"^a\"}}}") "}",
             p);
    expect_400(s.port, "/v1/completions", b, "pattern");
    expect_400(s.port, "/v1/completions", b, "/properties/x");
    snprintf(b, sizeof b, "%s" RF_SCHEMA("{\"type\": \"object\", \"properties\": 5}") "}", p);
    expect_400(s.port, "/v1/completions", b, "properties");
    snprintf(b, sizeof b, "%s" RF_SCHEMA("{\"type\": \"strin\"}") "}", p);
    expect_400(s.port, "/v1/completions", b, "unknown type \\\"strin\\\" at /");
    snprintf(b, sizeof b, "%s\"response_format\": {\"type\": \"xml\"}}", p);
    expect_400(s.port, "/v1/completions", b, "'xml'");
    snprintf(b, sizeof b, "%s\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                          "{\"name\": \"x\"}}}", p);
    expect_400(s.port, "/v1/completions", b, "schema' is required");
    /* A stream is refused before its 200, too. */
    snprintf(b, sizeof b, "%s\"stream\": true, \"response_format\": {\"type\": \"xml\"}}", p);
    expect_400(s.port, "/v1/completions", b, "'xml'");
    /* "text" is no constraint: the plain answer. */
    char *r1, *r2, *t1, *f1, *t2, *f2;
    snprintf(b, sizeof b, "%s\"temperature\": 0, \"response_format\": {\"type\": \"text\"}}", p);
    ck_assert_int_eq(post(s.port, "/v1/completions", b, &r1), 200);
    snprintf(b, sizeof b, "%s\"temperature\": 0}", p);
    ck_assert_int_eq(post(s.port, "/v1/completions", b, &r2), 200);
    answer(r1, &t1, &f1);
    answer(r2, &t2, &f2);
    ck_assert_str_eq(t1, t2);
    free(r1), free(r2), free(t1), free(f1), free(t2), free(f2);
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
}
END_TEST

typedef struct call {
    int port;
    const char *body;
    long status;
    char *reply;
} call;

static void *call_main(void *ud)
{
    call *c = ud;
    c->status = post(c->port, "/v1/completions", c->body, &c->reply);
    return NULL;
}

typedef struct poller {
    int port;
    volatile bool stop;
    int max_running;
} poller;

/* The most requests /health saw running at once. */
static void *poll_main(void *ud)
{
    poller *p = ud;
    while (!p->stop) {
        char *body;
        if (post(p->port, "/health", NULL, &body) == 200) {
            cJSON *o = cJSON_Parse(body);
            const cJSON *r = cJSON_GetObjectItem(o, "running");
            if (cJSON_IsNumber(r) && r->valueint > p->max_running)
                p->max_running = r->valueint;
            cJSON_Delete(o);
        }
        free(body);
        usleep(2000);
    }
    return NULL;
}

START_TEST(parallel)
{
    /* Long json_object requests (200 tokens) so that the others run
     * beside them; /health proves they did. */
    const char *bodies[] = {
        REQ_SCHEMA(""),
        "{\"prompt\": \"The answer:\", \"max_tokens\": 200, \"temperature\": 0, "
        "\"response_format\": {\"type\": \"json_object\"}}",
        "{\"prompt\": \"Once\", \"max_tokens\": 30, \"temperature\": 0}",
        REQ_SCHEMA(", \"seed\": 7, \"temperature\": 0.8"),
        "{\"prompt\": \"Once\", \"max_tokens\": 200, \"seed\": 3, "
        "\"response_format\": {\"type\": \"json_object\"}}"};
    enum { N = 5 };
    char *serial[N];
    gt_test_server s;
    const char *q[] = {"-q", NULL}, *p2[] = {"-q", "--parallel", "2", NULL};
    ck_assert(gt_test_serve_start(&s, g_model, q) == 0);
    for (int i = 0; i < N; i++) {
        char *r, *f;
        ck_assert_int_eq(post(s.port, "/v1/completions", bodies[i], &r), 200);
        answer(r, &serial[i], &f);
        free(r), free(f);
    }
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
    ck_assert(gt_test_serve_start(&s, g_model, p2) == 0);
    call c[N];
    pthread_t th[N], pt;
    poller pl = {.port = s.port};
    pthread_create(&pt, NULL, poll_main, &pl);
    for (int i = 0; i < N; i++) {
        c[i] = (call){.port = s.port, .body = bodies[i]};
        pthread_create(&th[i], NULL, call_main, &c[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pl.stop = true;
    pthread_join(pt, NULL);
    ck_assert_msg(pl.max_running >= 2, "requests never ran together (at most %d): the check "
                                      "would prove nothing", pl.max_running);
    printf("parallel: up to %d requests ran together\n", pl.max_running);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(c[i].status == 200, "%ld %s", c[i].status, c[i].reply);
        char *t, *f;
        answer(c[i].reply, &t, &f);
        ck_assert_msg(!strcmp(t, serial[i]), "request %d: '%s' beside others, '%s' alone", i, t,
                      serial[i]);
        free(t), free(f), free(c[i].reply), free(serial[i]);
    }
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
}
END_TEST

START_TEST(chat)
{
    gt_test_server s;
    const char *q[] = {"-q", "-b", "cpu", NULL};
    ck_assert(gt_test_serve_start(&s, gt_test_smollm2(), q) == 0);
    const char *body =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Give a name and an age as JSON.\"}], "
        "\"max_tokens\": 80, \"temperature\": 0, " RF_SCHEMA(BOUNDED) "}";
    char *r, *text, *finish;
    ck_assert_msg(post(s.port, "/v1/chat/completions", body, &r) == 200, "%s", r);
    answer(r, &text, &finish);
    printf("chat json_schema: finish %s: %s\n", finish, text);
    ck_assert_msg(!strcmp(finish, "stop"), "%s: %s", finish, text);
    check_valid(text, BOUNDED);
    free(r), free(text), free(finish);
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
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
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("serve_structured");
    TCase *tc = tcase_create("serve_structured");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, completions);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, parallel);
    gt_test_add_if(tc, chat, gt_test_smollm2() != NULL,
                   "chat: no model with a chat template (SmolLM2: ci/fetch-smollm2.sh or "
                   "GT_SMOLLM2; the synthetic vocabulary has no chat-template tokens)");
    suite_add_tcase(s, tc);
    const int rc = gt_test_run(s);
    curl_global_cleanup();
    return rc;
}
