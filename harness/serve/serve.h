/* serve.h: `gauntlet serve`: one model behind an OpenAI-compatible HTTP API.
 *
 * Four parts, one file each:
 *   serve_request.c  a /v1/completions body -> a validated gt_serve_req, or
 *                    the 400 that says which parameter is wrong and why;
 *   serve_gen.c      one request run on the session: sampling, stop strings,
 *                    logprobs, and the OpenAI JSON (whole or as SSE chunks);
 *   serve_format.c   response_format: its parse, and its constraint compiled
 *                    for the model (a schema it cannot compile is a 400);
 *   serve_http.c     libmicrohttpd routing, the bounded queue, timeouts,
 *                    shutdown;
 *   serve_worker.c   the thread that owns the session: one request at a
 *                    time, or (--parallel N) up to N decoded together.
 * (serve_job.c holds what the last two share: a job's release and sink.)
 * The model session is used by the worker thread only; HTTP threads only
 * parse, tokenize (the tokenizer is read-only) and wait. Chat messages are
 * rendered through the model's template by base's chat_template.h, which the
 * http suites share to render a chat cell's prompts for the reference.
 *
 * May use: base, libmicrohttpd, cJSON, the runtime's public headers. */
#ifndef GT_SERVE_H
#define GT_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gt/constraint.h"
#include "gt/error.h"
#include "gt/model.h"
#include "gt/session.h"
#include "base.h"

#define GT_SERVE_MAX_STOP 16
#define GT_SERVE_MAX_STOP_LEN 256
#define GT_SERVE_MAX_LOGPROBS 20

/* An OpenAI-style error: {"error": {"message", "type", "param", "code"}}. */
typedef struct gt_serve_error {
    int status;         /* HTTP status */
    const char *type;   /* "invalid_request_error", "server_error", ... */
    const char *param;  /* the offending request field, or NULL */
    const char *code;   /* e.g. "model_not_found", or NULL */
    char message[512];
} gt_serve_error;

/* Fills e and returns -1. */
int gt_serve_fail(gt_serve_error *e, int status, const char *type, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The error as a JSON body (malloc'ed). */
char *gt_serve_error_json(const gt_serve_error *e);

typedef struct gt_serve_req {
    bool chat;          /* /v1/chat/completions: messages, not prompt */
    char *model;        /* the "model" asked for, or NULL when not given */
    char *prompt;       /* completions */
    gt_chat_msg *messages; /* chat */
    int n_messages;
    int max_tokens;     /* default 16, as OpenAI */
    float temperature;  /* default 1; 0 = greedy */
    float top_p;        /* default 1 (off) */
    int top_k;          /* extension; default 0 (off) */
    uint64_t seed;
    bool has_seed;      /* else the server picks one per request */
    char *stop[GT_SERVE_MAX_STOP];
    int n_stop;
    int logprobs;       /* top-N alternatives per token; -1 = no logprobs (chat:
                         * top_logprobs when logprobs is true) */
    bool echo;
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    int format;         /* response_format: GT_SERVE_FORMAT_* */
    char *schema;       /* json_schema: the schema's JSON text */
    gt_constraint *con; /* compiled by gt_serve_compile_format; NULL = unconstrained */
} gt_serve_req;

enum { GT_SERVE_FORMAT_TEXT, GT_SERVE_FORMAT_JSON_OBJECT, GT_SERVE_FORMAT_JSON_SCHEMA };

/* Parses and validates a request body. max_tokens_cap bounds max_tokens
 * (the context size). Unknown fields are ignored (clients send extras);
 * known ones must have the documented type and range. */
int gt_serve_parse(const char *body, size_t len, int max_tokens_cap, gt_serve_req *out,
                   gt_serve_error *e);
/* The same for a /v1/chat/completions body: messages (string content, or
 * an array of text parts), max_tokens or max_completion_tokens, logprobs
 * (a boolean) with top_logprobs; echo does not exist there. */
int gt_serve_parse_chat(const char *body, size_t len, int max_tokens_cap, gt_serve_req *out,
                        gt_serve_error *e);
void gt_serve_req_free(gt_serve_req *r);
/* (serve_format.c) Parses o's "response_format" into r->format and
 * r->schema: {"type": "text"}, {"type": "json_object"} or {"type":
 * "json_schema", "json_schema": {"name", "schema", "strict"}}; anything
 * else is a 400 naming it. */
int gt_serve_parse_format(const cJSON *o, gt_serve_req *r, gt_serve_error *e);

/* Where a generation's output goes. write is NULL for a plain request and
 * receives SSE frames, ready to send, for a stream. */
typedef struct gt_serve_sink {
    void (*write)(void *ud, const char *data, size_t n);
    /* True when the client went away: generation stops early. */
    bool (*cancelled)(void *ud);
    void *ud;
} gt_serve_sink;

typedef struct gt_serve_ctx {
    gt_session *session;
    const gt_model *model;
    const char *model_id;  /* "model" in answers */
    const gt_chat_template *chat; /* how chat requests are rendered */
    uint64_t counter;      /* for completion ids and default seeds */
} gt_serve_ctx;

/* Tokenizes a prompt with the model's BOS rule, or renders a chat request's
 * messages with the chat template; checks that prompt plus max_tokens fit
 * the context. Returns a malloc'ed array, or NULL with e. */
int32_t *gt_serve_tokenize(const gt_serve_ctx *c, const gt_serve_req *r, int *n,
                           gt_serve_error *e);

/* Compiles r's response_format for c's model into r->con (freed by
 * gt_serve_req_free); a schema the constraint cannot compile is a 400 with
 * the compiler's reason (the keyword and its JSON pointer), never an
 * unconstrained answer. Safe on HTTP threads: the model's vocabulary index
 * is built once under the runtime's lock. */
int gt_serve_compile_format(const gt_serve_ctx *c, gt_serve_req *r, gt_serve_error *e);

/* One request as a state machine, for a driver that runs several in one
 * batch (serve_worker.c): gt_serve_gen_new; then, until step says done,
 * gt_serve_gen_next_eval gives the tokens to append to the request's
 * sequence (its prompt first, then each sampled token; the caller sets
 * ev->seq), the caller evaluates them and calls gt_serve_gen_step (or
 * gt_serve_gen_eval_failed when the eval failed); gt_serve_gen_end answers
 * and frees. A NULL from new means the request is answered already (e
 * filled; a stream got its error frame and [DONE]). The driver owns the
 * sequence: it must start empty. */
typedef struct gt_serve_gen gt_serve_gen;
gt_serve_gen *gt_serve_gen_new(gt_serve_ctx *c, const gt_serve_req *r, const int32_t *ids,
                               int n_ids, double deadline, const gt_serve_sink *sink,
                               gt_serve_error *e);
void gt_serve_gen_next_eval(const gt_serve_gen *g, gt_seq_eval *ev);
/* After the eval: 1 = another eval is wanted, 0 = finished (a stop, the
 * length, or the client went away), -1 = failed (e filled: a timeout, out
 * of memory). */
int gt_serve_gen_step(gt_serve_gen *g, gt_serve_error *e);
/* The eval failed with why: fills e, returns -1. */
int gt_serve_gen_eval_failed(const gt_serve_gen *g, const char *why, gt_serve_error *e);
/* rc is the last step's (0 or -1). Sends or builds the answer as
 * gt_serve_generate does, frees g, returns 0 or -1 with e filled. */
int gt_serve_gen_end(gt_serve_gen *g, int rc, char **response, gt_serve_error *e);

/* Runs one request on the session (worker thread only). For a plain
 * request (sink->write NULL) the answer JSON is returned in *response
 * (malloc'ed). For a stream, SSE frames go to sink->write, ending with
 * "data: [DONE]"; errors are sent as an error frame since the 200 is out.
 * deadline is in gt_now() seconds. Returns 0, or -1 with e filled. Drives
 * the state machine above on sequence 0 with gt_session_eval. */
int gt_serve_generate(gt_serve_ctx *c, const gt_serve_req *r, const int32_t *ids, int n_ids,
                      double deadline, const gt_serve_sink *sink, char **response,
                      gt_serve_error *e);

/* The HTTP server. */
typedef struct gt_server_opts {
    const char *host;     /* numeric address; default 127.0.0.1 */
    int port;             /* 0 = pick a free one */
    int queue;            /* requests waiting beyond those running; default 32 */
    size_t max_body;      /* bytes; default 1 MiB */
    double timeout_s;     /* per request, queue wait included; default 120 */
    bool quiet;           /* no per-request log lines */
} gt_server_opts;

typedef struct gt_server gt_server;

int gt_server_start(gt_serve_ctx *ctx, const gt_server_opts *o, gt_server **out, gt_err *err);
int gt_server_port(const gt_server *s);
/* Stops accepting, lets queued and running requests finish (bounded by
 * their timeouts), then stops the worker and frees everything. */
void gt_server_stop(gt_server *s);

#endif
