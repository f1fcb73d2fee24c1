/* test_serve_parallel.c: `gauntlet serve --parallel N` (continuous
 * batching) over HTTP, against the same server answering one at a time.
 *
 * Batch invariance: twelve requests (greedy, seeded sampling, streams,
 * logprobs with a stop string; lengths that end at different steps) are
 * sent all at once to --parallel 1 and to --parallel 4; each answer
 * (choices[0] and usage of a plain one, the text and finish of a stream)
 * must be byte-identical between the two. On the reference backend the
 * runtime promises bit-identical logits beside other sequences, so even
 * logprobs must match exactly. /health is polled meanwhile to prove that
 * requests really ran together (running > 1), else the check proves
 * nothing. The cpu backend with Q8_0 weights, on both activation paths,
 * must give the same bytes too (test_parallel_cpu_equals_serial).
 *
 * Slots come back: clients that give up (a plain request and a stream)
 * free their slots, which /health shows, and the next requests complete;
 * a request past its timeout is 504 while one beside it completes.
 * Servers listen on 127.0.0.1 only (gt_test_serve_start). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"

static const char *model_path;

/* ---- a small libcurl client ---------------------------------------------- */

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

/* POST (body) or GET (body NULL); the HTTP status, or -curlcode when the
 * request did not complete (our own timeout_ms included). */
static long http(int port, const char *path, const char *body, long timeout_ms, char **out)
{
    buf b = {0};
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    long status = -1;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        status = -(long)rc;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    *out = b.p ? b.p : strdup("");
    return status;
}

/* /health's "running" (requests holding a slot), or -1. */
static int health_running(int port, int *slots)
{
    char *body;
    int running = -1;
    if (http(port, "/health", NULL, 5000, &body) == 200) {
        cJSON *o = cJSON_Parse(body);
        const cJSON *r = cJSON_GetObjectItem(o, "running"), *s = cJSON_GetObjectItem(o, "slots");
        if (cJSON_IsNumber(r))
            running = r->valueint;
        if (slots && cJSON_IsNumber(s))
            *slots = s->valueint;
        cJSON_Delete(o);
    }
    free(body);
    return running;
}

/* ---- what an answer says ------------------------------------------------- */

/* A plain answer without what differs between runs (id, created): its
 * choices[0] and usage as JSON. A stream's: its text pieces joined, its
 * finish_reason and usage, and whether it ended with [DONE]. NULL when it
 * is not an answer at all. */
static char *essence(const char *body, bool stream)
{
    char *out = NULL;
    if (!stream) {
        cJSON *o = cJSON_Parse(body);
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        char *a = ch ? cJSON_PrintUnformatted(ch) : NULL;
        char *u = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "usage"));
        if (a && u && asprintf(&out, "%s %s", a, u) < 0)
            out = NULL;
        free(a);
        free(u);
        cJSON_Delete(o);
        return out;
    }
    size_t cap = strlen(body) + 64, len = 0;
    char *text = calloc(1, cap);
    char finish[32] = "", *usage = NULL;
    bool done = false;
    for (const char *p = body; (p = strstr(p, "data: ")) != NULL;) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end)
            break;
        if (!strncmp(p, "[DONE]", 6))
            done = true;
        cJSON *o = cJSON_ParseWithLength(p, (size_t)(end - p));
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        const cJSON *t = cJSON_GetObjectItem(ch, "text");
        const cJSON *f = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(t) && len + strlen(t->valuestring) < cap) {
            memcpy(text + len, t->valuestring, strlen(t->valuestring));
            len += strlen(t->valuestring);
        }
        if (cJSON_IsString(f))
            snprintf(finish, sizeof finish, "%s", f->valuestring);
        if (cJSON_GetObjectItem(o, "usage") && !usage)
            usage = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "usage"));
        if (cJSON_GetObjectItem(o, "error"))
            snprintf(finish, sizeof finish, "error");
        cJSON_Delete(o);
        p = end;
    }
    if (asprintf(&out, "%s | %s | %s%s", text, finish, usage ? usage : "-",
                 done ? "" : " | no [DONE]") < 0)
        out = NULL;
    free(text);
    free(usage);
    return out;
}

/* ---- concurrent clients -------------------------------------------------- */

enum { N_REQ = 12 };

typedef struct call {
    int port;
    char body[512];
    bool stream;
    long timeout_ms;
    long status;
    char *reply;
} call;

static void *call_main(void *ud)
{
    call *c = ud;
    c->status = http(c->port, "/v1/completions", c->body, c->timeout_ms, &c->reply);
    return NULL;
}

typedef struct poller {
    int port;
    volatile bool stop;
    int max_running;
} poller;

static void *poll_main(void *ud)
{
    poller *p = ud;
    while (!p->stop) {
        const int r = health_running(p->port, NULL);
        if (r > p->max_running)
            p->max_running = r;
        usleep(2000);
    }
    return NULL;
}

/* The request set: greedy, seeded sampling, streams, logprobs with a stop,
 * of lengths that end at different steps (so slots free and refill while
 * others run). */
static void request(int i, call *c)
{
    static const char *const prompts[] = {"Once upon a time", "The little dog",
                                          "One day, Lily went to the park", "Tom and his mom",
                                          "Once upon a time, there was a big red ball that",
                                          "The sun"};
    const char *p = prompts[i % 6];
    const int max = 24 + (i * 37) % 90;
    c->stream = i % 4 == 2;
    c->timeout_ms = 60000;
    switch (i % 4) {
    case 0:
        snprintf(c->body, sizeof c->body,
                 "{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0}", p, max);
        break;
    case 1:
        snprintf(c->body, sizeof c->body,
                 "{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0.9, \"seed\": %d}", p,
                 max, 1000 + i);
        break;
    case 2:
        snprintf(c->body, sizeof c->body,
                 "{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0, \"stream\": true, "
                 "\"stream_options\": {\"include_usage\": true}}", p, max);
        break;
    default:
        snprintf(c->body, sizeof c->body,
                 "{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0, \"logprobs\": 3, "
                 "\"stop\": [\".\"]}", p, max);
    }
}

/* Sends the request set at once; the answers' essences in out[]. Returns
 * the most requests /health saw running together. */
static int run_all(int port, char *out[N_REQ])
{
    call c[N_REQ];
    pthread_t th[N_REQ], pt;
    poller pl = {.port = port};
    pthread_create(&pt, NULL, poll_main, &pl);
    for (int i = 0; i < N_REQ; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].port = port;
        request(i, &c[i]);
        pthread_create(&th[i], NULL, call_main, &c[i]);
    }
    for (int i = 0; i < N_REQ; i++)
        pthread_join(th[i], NULL);
    pl.stop = true;
    pthread_join(pt, NULL);
    for (int i = 0; i < N_REQ; i++) {
        ck_assert_msg(c[i].status == 200, "request %d: %s -> %ld %s", i, c[i].body, c[i].status,
                      c[i].reply);
        out[i] = essence(c[i].reply, c[i].stream);
        ck_assert_msg(out[i], "request %d: not an answer: %s", i, c[i].reply);
        free(c[i].reply);
    }
    return pl.max_running;
}

/* The request set on `serve -m model extra...` at --parallel 1 and 4:
 * every answer byte-identical, with requests provably running together. */
static void answers_equal_serial(const char *model, const char *const *extra)
{
    char *serial[N_REQ], *par[N_REQ];
    const char *one[16] = {"-q"}, *four[16] = {"-q", "--parallel", "4"};
    for (int i = 0; extra[i]; i++)
        one[1 + i] = four[3 + i] = extra[i];
    gt_test_server s;
    ck_assert_msg(gt_test_serve_start(&s, model, one) == 0, "serve did not come up");
    int slots = 0;
    ck_assert_int_eq(health_running(s.port, &slots), 0);
    ck_assert_int_eq(slots, 1);
    const int serial_peak = run_all(s.port, serial);
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
    ck_assert_msg(serial_peak <= 1, "--parallel 1 ran %d requests together", serial_peak);

    ck_assert_msg(gt_test_serve_start(&s, model, four) == 0, "serve --parallel 4 did not come up");
    ck_assert_int_eq(health_running(s.port, &slots), 0);
    ck_assert_int_eq(slots, 4);
    const int peak = run_all(s.port, par);
    ck_assert_int_eq(health_running(s.port, NULL), 0); /* every slot given back */
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
    /* Without overlap the comparison below would prove nothing. */
    ck_assert_msg(peak >= 2 && peak <= 4, "--parallel 4: at most %d requests ran together", peak);
    printf("serve --parallel 4: up to %d of %d requests decoded together\n", peak, N_REQ);

    int differ = 0;
    for (int i = 0; i < N_REQ; i++) {
        if (strcmp(serial[i], par[i]) != 0) {
            fprintf(stderr, "request %d differs:\n  --parallel 1: %.400s\n  --parallel 4: %.400s\n",
                    i, serial[i], par[i]);
            differ++;
        }
        free(serial[i]);
        free(par[i]);
    }
    ck_assert_msg(differ == 0, "%d of %d answers differ between --parallel 1 and 4", differ, N_REQ);
}

START_TEST(test_parallel_answers_equal_serial)
{
    const char *none[] = {NULL};
    answers_equal_serial(model_path, none);
}
END_TEST

/* The same on the cpu backend with Q8_0 weights, on both dot paths. The
 * cpu backend is exact only row by row: a MUL_MAT of blas_min_batch rows
 * or more takes BLAS (act=f32) or the integer GEMM (act=q8), which round
 * differently from the dot path that a few decode rows take. So the
 * server evaluates each new prompt in its own call, never beside the
 * decode tokens (serve_worker.c). GT_CPU_BLAS_MIN_BATCH=5 makes that
 * matter for these short prompts: beside three decode tokens, any prompt
 * of two tokens or more would cross it. Logprobs print to the last bit,
 * so a moved decode row shows. */
START_TEST(test_parallel_cpu_equals_serial)
{
    const char *q8 = gt_test_tmp("serve-parallel.q8_0.gguf");
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(GT_BINARY_DIR "/gauntlet", "gauntlet", "quantize", "--quiet", model_path, q8, "q8_0",
              (char *)NULL);
        _exit(127);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gauntlet quantize failed (%d)", st);
    setenv("GT_CPU_BLAS_MIN_BATCH", "5", 1);
    const char *f32[] = {"-b", "cpu", "-t", "2", "--driver", "act=f32", NULL};
    const char *act_q8[] = {"-b", "cpu", "-t", "2", "--driver", "act=q8", NULL};
    answers_equal_serial(q8, f32);
    answers_equal_serial(q8, act_q8);
    unsetenv("GT_CPU_BLAS_MIN_BATCH");
}
END_TEST

START_TEST(test_cancelled_and_timed_out_free_their_slots)
{
    gt_test_server s;
    const char *two[] = {"-q", "--parallel", "2", NULL};
    ck_assert(gt_test_serve_start(&s, model_path, two) == 0);
    /* Both slots taken by clients that give up after 300 ms (2000 tokens
     * take seconds here). */
    call slow[2] = {{.port = s.port, .timeout_ms = 300,
                     .body = "{\"prompt\": \"Once\", \"max_tokens\": 2000, \"temperature\": 0}"},
                    {.port = s.port, .timeout_ms = 300, .stream = true,
                     .body = "{\"prompt\": \"The\", \"max_tokens\": 2000, \"temperature\": 0, "
                             "\"stream\": true}"}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, call_main, &slow[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(slow[i].status < 0, "slow request %d: %ld (expected our own timeout)", i,
                      slow[i].status);
        free(slow[i].reply);
    }
    /* The slots come back well before the 2000 tokens would be done. */
    const double t0 = gt_test_now();
    int running = -1;
    while ((running = health_running(s.port, NULL)) != 0 && gt_test_now() - t0 < 3)
        usleep(20 * 1000);
    ck_assert_msg(running == 0, "%d slots still held %.1f s after their clients left", running,
                  gt_test_now() - t0);
    /* And later requests complete, four at once through two slots. */
    call next[4];
    pthread_t th4[4];
    for (int i = 0; i < 4; i++) {
        next[i] = (call){.port = s.port, .timeout_ms = 20000};
        snprintf(next[i].body, sizeof next[i].body,
                 "{\"prompt\": \"Once\", \"max_tokens\": %d, \"temperature\": 0}", 4 + i);
        pthread_create(&th4[i], NULL, call_main, &next[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th4[i], NULL);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(next[i].status == 200, "after the cancels: %ld %s", next[i].status,
                      next[i].reply);
        free(next[i].reply);
    }
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);

    /* A request past its timeout is 504 and frees its slot; one beside it
     * completes. */
    const char *tmo[] = {"-q", "--parallel", "2", "--timeout", "0.5", NULL};
    ck_assert(gt_test_serve_start(&s, model_path, tmo) == 0);
    call lng = {.port = s.port, .timeout_ms = 20000,
                .body = "{\"prompt\": \"Once\", \"max_tokens\": 2000, \"temperature\": 0}"};
    pthread_create(&th[0], NULL, call_main, &lng);
    usleep(50 * 1000);
    char *r;
    ck_assert_int_eq(http(s.port, "/v1/completions",
                          "{\"prompt\": \"Once\", \"max_tokens\": 3, \"temperature\": 0}", 20000, &r),
                     200);
    free(r);
    pthread_join(th[0], NULL);
    ck_assert_msg(lng.status == 504 && strstr(lng.reply, "timeout"), "%ld %s", lng.status,
                  lng.reply);
    free(lng.reply);
    ck_assert_int_eq(health_running(s.port, NULL), 0);
    ck_assert_int_eq(http(s.port, "/v1/completions",
                          "{\"prompt\": \"Once\", \"max_tokens\": 3, \"temperature\": 0}", 20000, &r),
                     200);
    free(r);
    ck_assert_int_eq(gt_test_serve_stop(&s), 0);
}
END_TEST

int main(void)
{
    model_path = gt_test_llama(); /* written once here, before the cases fork */
    gt_test_require_gauntlet();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("serve_parallel");
    TCase *tc = tcase_create("parallel");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_parallel_answers_equal_serial);
    tcase_add_test(tc, test_parallel_cpu_equals_serial);
    tcase_add_test(tc, test_cancelled_and_timed_out_free_their_slots);
    suite_add_tcase(s, tc);
    int rc = gt_test_run(s);
    curl_global_cleanup();
    return rc;
}
