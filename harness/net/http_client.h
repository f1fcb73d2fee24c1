/* http_client.h: the harness's client for OpenAI-compatible servers (libcurl).
 *
 * Used by the suites' http variants (suites/http_*.c) and by the worker to
 * wait for a server it started. Every call has a total timeout; a transport
 * failure (refused, reset, timeout) returns -1 with err naming the URL and
 * curl's reason; any HTTP status is a success of the transport (the caller
 * judges *status). Thread-safe: each call uses its own easy handle (the
 * performance suite calls it from N client threads). */
#ifndef GT_HTTP_CLIENT_H
#define GT_HTTP_CLIENT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gt/error.h"

typedef struct gt_http_reply {
    long status;        /* HTTP status code */
    char *body;         /* NUL-terminated, malloc'ed (free with gt_http_reply_free) */
    size_t size;
    double total_s;     /* request start to last byte */
    double first_s;     /* request start to the first body byte (or first SSE event) */
    int n_events;       /* server-sent events received ("data:" lines, [DONE] excluded) */
    /* Additions (stream only): */
    double last_s;      /* request start to the last SSE event */
    int done;           /* "data: [DONE]" was received */
} gt_http_reply;

/* Call once per process before threads start (curl_global_init). */
int gt_http_global_init(gt_err *err);

/* GET url. */
int gt_http_get(const char *url, double timeout_s, gt_http_reply *out, gt_err *err);

/* POST a JSON body to url. With stream, the reply is read as server-sent
 * events: body holds the concatenated "data:" payloads, one per line. */
int gt_http_post_json(const char *url, const cJSON *body, int stream, double timeout_s,
                      gt_http_reply *out, gt_err *err);

/* POST n bytes of body as they are (Content-Type: application/json): for
 * requests cJSON would not produce, such as malformed JSON in tests. */
int gt_http_post_raw(const char *url, const char *body, size_t n, int stream, double timeout_s,
                     gt_http_reply *out, gt_err *err);

/* Frees body (safe on a reply whose call failed: it was zeroed). */
void gt_http_reply_free(gt_http_reply *r);

/* Polls GET url every 100 ms until it answers 200 or timeout_s passes;
 * 0 when healthy, -1 with err saying what the last attempt got. */
int gt_http_wait_healthy(const char *url, double timeout_s, gt_err *err);

#endif
