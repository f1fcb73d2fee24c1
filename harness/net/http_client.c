/* http_client.c: a small blocking HTTP client over libcurl (see
 * http_client.h) for talking to OpenAI-compatible servers.
 *
 * Design: one easy handle per call, no shared state but curl's global init
 * (done once under pthread_once), so calls from N threads never contend.
 * CURLOPT_NOSIGNAL keeps curl's timeouts from using SIGALRM in threads.
 * Loopback addresses bypass any proxy from the environment: a qualification
 * run talking to a server it started must not go through http_proxy.
 *
 * Streaming: with stream set, a reply whose Content-Type is
 * text/event-stream is parsed as server-sent events as it arrives. Each
 * "data:" line is one event; its payload goes into body followed by '\n';
 * "data: [DONE]" sets done and is not counted. first_s is the arrival of the
 * first event, last_s that of the last one. Any other reply (an error JSON
 * with status 400, say) is kept verbatim, as without stream. */
#include "http_client.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#ifndef GT_VERSION /* compiled into a test directly */
#define GT_VERSION "test"
#endif

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static CURLcode http_init_rc = CURLE_OK;
static void http_init_once(void) { http_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int gt_http_global_init(gt_err *err)
{
    pthread_once(&http_once, http_init_once);
    if (http_init_rc != CURLE_OK)
        return gt_err_set(err, "curl_global_init: %s", curl_easy_strerror(http_init_rc));
    return 0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A growing NUL-terminated byte buffer. */
typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static int buf_add(buf *b, const char *s, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

typedef struct xfer {
    CURL *curl;
    int stream;     /* asked for SSE */
    int sse;        /* the reply is text/event-stream (decided at the first byte) */
    int started;
    double t0;
    buf body;
    buf line;       /* SSE: the current, incomplete line */
    gt_http_reply *out;
} xfer;

/* One complete SSE line (without its line ending). */
static int sse_line(xfer *x, const char *s, size_t n)
{
    if (n < 5 || strncmp(s, "data:", 5) != 0)
        return 0; /* blank separators, comments (":"), event:, id:, retry: */
    s += 5;
    n -= 5;
    if (n > 0 && *s == ' ')
        s++, n--;
    double now = mono_now() - x->t0;
    if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
        x->out->done = 1;
        return 0;
    }
    if (x->out->n_events == 0)
        x->out->first_s = now;
    x->out->last_s = now;
    x->out->n_events++;
    if (buf_add(&x->body, s, n) != 0 || buf_add(&x->body, "\n", 1) != 0)
        return -1;
    return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t len = size * nmemb;
    if (!x->started) {
        x->started = 1;
        if (x->stream) {
            char *ct = NULL;
            curl_easy_getinfo(x->curl, CURLINFO_CONTENT_TYPE, &ct);
            x->sse = ct && strncasecmp(ct, "text/event-stream", 17) == 0;
        }
        if (!x->sse)
            x->out->first_s = mono_now() - x->t0;
    }
    if (!x->sse)
        return buf_add(&x->body, data, len) == 0 ? len : 0;
    /* Split into lines; a line may span callbacks. */
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t seg = nl ? (size_t)(nl - (data + i)) : len - i;
        if (buf_add(&x->line, data + i, seg) != 0)
            return 0;
        i += seg;
        if (!nl)
            break;
        i++; /* the '\n' */
        size_t ln = x->line.len;
        if (ln > 0 && x->line.p[ln - 1] == '\r')
            ln--;
        if (sse_line(x, x->line.p, ln) != 0)
            return 0;
        x->line.len = 0;
    }
    return len;
}

static int perform(const char *method_url, CURL *c, const char *url, struct curl_slist *hdrs,
                   int stream, double timeout_s, gt_http_reply *out, gt_err *err)
{
    memset(out, 0, sizeof *out);
    xfer x = {.curl = c, .stream = stream, .out = out};
    char errbuf[CURL_ERROR_SIZE] = "";
    long ms = timeout_s > 0 ? (long)(timeout_s * 1000.0 + 0.5) : 30000L;
    if (ms < 1)
        ms = 1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms < 10000 ? ms : 10000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gauntlet/" GT_VERSION);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    if (hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    x.t0 = mono_now();
    CURLcode rc = curl_easy_perform(c);
    double total = mono_now() - x.t0;
    /* A final SSE line without its newline still counts. */
    if (rc == CURLE_OK && x.sse && x.line.len > 0)
        sse_line(&x, x.line.p, x.line.len);
    free(x.line.p);
    if (x.body.oom) {
        free(x.body.p);
        return gt_err_set(err, "%s %s: out of memory for the reply", method_url, url);
    }
    if (rc != CURLE_OK) {
        free(x.body.p);
        return gt_err_set(err, "%s %s: %s", method_url, url,
                          errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    if (!x.body.p && buf_add(&x.body, "", 0) != 0)
        return gt_err_set(err, "%s %s: out of memory for the reply", method_url, url);
    out->body = x.body.p;
    out->size = x.body.len;
    out->total_s = total;
    if (!x.started)
        out->first_s = total;
    return 0;
}

int gt_http_get(const char *url, double timeout_s, gt_http_reply *out, gt_err *err)
{
    if (gt_http_global_init(err) != 0)
        return -1;
    CURL *c = curl_easy_init();
    if (!c)
        return gt_err_set(err, "GET %s: curl_easy_init failed", url);
    int rc = perform("GET", c, url, NULL, 0, timeout_s, out, err);
    curl_easy_cleanup(c);
    return rc;
}

int gt_http_post_raw(const char *url, const char *body, size_t n, int stream, double timeout_s,
                     gt_http_reply *out, gt_err *err)
{
    if (gt_http_global_init(err) != 0)
        return -1;
    CURL *c = curl_easy_init();
    if (!c)
        return gt_err_set(err, "POST %s: curl_easy_init failed", url);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = h ? curl_slist_append(h, stream ? "Accept: text/event-stream"
                                                            : "Accept: application/json")
                              : NULL;
    if (!h2) {
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return gt_err_set(err, "POST %s: out of memory", url);
    }
    /* An empty Expect: no 100-continue round trip for larger bodies. */
    struct curl_slist *h3 = curl_slist_append(h2, "Expect:");
    if (h3)
        h2 = h3;
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    int rc = perform("POST", c, url, h2, stream, timeout_s, out, err);
    curl_slist_free_all(h2);
    curl_easy_cleanup(c);
    return rc;
}

int gt_http_post_json(const char *url, const cJSON *body, int stream, double timeout_s,
                      gt_http_reply *out, gt_err *err)
{
    char *text = cJSON_PrintUnformatted(body);
    if (!text)
        return gt_err_set(err, "POST %s: could not serialize the request body", url);
    int rc = gt_http_post_raw(url, text, strlen(text), stream, timeout_s, out, err);
    cJSON_free(text);
    return rc;
}

void gt_http_reply_free(gt_http_reply *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    r->size = 0;
}

int gt_http_wait_healthy(const char *url, double timeout_s, gt_err *err)
{
    if (gt_http_global_init(err) != 0)
        return -1;
    double t0 = mono_now();
    char last[512] = "no attempt";
    for (;;) {
        double left = timeout_s - (mono_now() - t0);
        gt_http_reply r;
        gt_err e = {{0}};
        double per = left < 2.0 ? (left > 0.05 ? left : 0.05) : 2.0;
        if (gt_http_get(url, per, &r, &e) == 0) {
            long st = r.status;
            if (st == 200) {
                gt_http_reply_free(&r);
                return 0;
            }
            snprintf(last, sizeof last, "HTTP %ld: %.200s", st, r.body ? r.body : "");
            gt_http_reply_free(&r);
        } else {
            snprintf(last, sizeof last, "%s", e.msg);
        }
        if (mono_now() - t0 + 0.1 >= timeout_s)
            break;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return gt_err_set(err, "%s not healthy after %.1f s; last attempt: %s", url, timeout_s, last);
}
