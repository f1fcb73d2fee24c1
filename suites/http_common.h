/* http_common.h: what the suites' http variants share (suites/http_*.c).
 *
 * An http cell qualifies an OpenAI-compatible server (ctx->endpoint, the API
 * base ending in /v1) against the reference backend on the matrix's artifact
 * (ctx->model_path). By default everything speaks the completions API, the
 * subset every such server implements: prompt as text, temperature, seed,
 * max_tokens, stop, logprobs, echo, stream. A cell whose entry says "api":
 * "chat" speaks POST /chat/completions instead: each prompt is the content
 * of one user message, and wherever the suites compare with the reference
 * they render that message with the artifact's chat template
 * (base/chat_template.h) exactly as the server should (gt_hc_prompt_ids), so
 * the reference continues the same tokens. Token ids are not sent: the
 * suites tokenize locally with the artifact's tokenizer and compare text,
 * so a server with its own tokenizer code is judged on what it returns. The
 * one place a reply's ids are read is the decode path, and only once they
 * agree with the text (http_accuracy_decode.c).
 *
 * Requests have a total timeout (GT_HC_TIMEOUT_S); a transport failure or a
 * non-200 answer comes back as -1 with a message naming the URL, the status
 * and the start of the body, which the suites turn into failed checks. */
#ifndef GT_SUITE_HTTP_COMMON_H
#define GT_SUITE_HTTP_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "net.h"
#include "base.h"
#include "gt/model.h"
#include "suite.h"

#define GT_HC_TIMEOUT_S 120.0

/* The server of an http cell: API base and the model name to request. */
typedef struct gt_hc {
    char base[512];   /* ctx->endpoint without a trailing '/' */
    char root[512];   /* base without its trailing "/v1" (where /health lives) */
    char model[256];  /* ctx->served_model, or the first id of GET {base}/models */
    bool chat;        /* ctx->http_api is "chat" */
} gt_hc;

/* Fills t from the cell; with lookup, asks GET /models when the matrix names
 * no model. -1 with err when the endpoint is unset or /models cannot say. */
int gt_hc_open(const gt_suite_ctx *c, bool lookup, gt_hc *t, gt_err *err);

/* gt_hc_open with the lookup, then the cell's artifact (gt_suite_model):
 * what every variant that compares with the reference starts with. */
int gt_hc_open_model(gt_suite_ctx *c, gt_hc *t, gt_model **m, gt_err *err);

/* base + path ("/models") into out. */
void gt_hc_url(const gt_hc *t, const char *path, char *out, size_t cap);

/* The URL generation requests go to: {base}/completions or, for a chat
 * cell, {base}/chat/completions. */
void gt_hc_generate_url(const gt_hc *t, char *out, size_t cap);

/* {"model", "prompt" (chat: "messages": [{"role": "user", "content"}]),
 * "max_tokens", "temperature"}: add the rest with cJSON (gt_hc_set_logprobs
 * for logprobs, whose shape differs). */
cJSON *gt_hc_request(const gt_hc *t, const char *prompt, int max_tokens, double temperature);

/* Asks for n alternatives per token: "logprobs": n, or for chat "logprobs":
 * true, "top_logprobs": n. */
void gt_hc_set_logprobs(const gt_hc *t, cJSON *req, int n);

/* Replaces the prompt text of a request made by gt_hc_request (or deletes
 * it with text NULL). */
void gt_hc_set_prompt(const gt_hc *t, cJSON *req, const char *text);

/* The ids a prompt stands for on this cell's server: the text tokenized with
 * the model's BOS rule, or for chat the one user turn rendered with the
 * artifact's chat template and the assistant's generation prompt. Writes up
 * to cap ids (ids may be NULL to count) and returns how many there are; -1
 * with err (for chat: the artifact has no template of a known family). */
int gt_hc_prompt_ids(const gt_hc *t, const gt_model *m, const char *prompt, int32_t *ids,
                     int cap, gt_err *err);

/* The token that ends an answer besides EOS: the chat template's end of
 * turn for a chat cell, -1 otherwise. */
int32_t gt_hc_turn_end(const gt_hc *t, const gt_model *m);

/* A parsed non-streaming completion. */
typedef struct gt_hc_completion {
    cJSON *root;           /* the whole reply (free with gt_hc_completion_free) */
    const char *text;      /* choices[0].text, or for chat choices[0].message.content ("" when absent) */
    const char *finish;    /* choices[0].finish_reason, "" when absent or null */
    const cJSON *logprobs; /* choices[0].logprobs, NULL when absent or null */
    int prompt_tokens;     /* usage; -1 when absent */
    int completion_tokens;
    long status;
    double total_s;
} gt_hc_completion;

/* POST to gt_hc_generate_url; 0 for a 200 with a parseable body, else -1 (err
 * names the status and the body, out->status is set when one came back). */
int gt_hc_complete(const gt_hc *t, const cJSON *req, gt_hc_completion *out, gt_err *err);
void gt_hc_completion_free(gt_hc_completion *r);

/* One alternative of a returned token: its text and logprob. */
typedef struct gt_hc_alt {
    const char *text;    /* into the reply's cJSON */
    double lp;
    const cJSON *bytes;  /* the chat shape's "bytes" array when given (the token's exact
                          * bytes, where "token" may be cut to valid UTF-8), else NULL */
    const cJSON *id;     /* gt_hc_token only: the token's id where the reply gives one
                          * (llama-server's content[i].id, gauntlet serve's token_ids[i]),
                          * as sent (not checked), else NULL */
} gt_hc_alt;

/* The alternatives of token i of a completion's logprobs, in either shape a
 * server uses: the legacy completions one (top_logprobs[i] an object
 * {text: logprob}, token_logprobs[i]) or the chat one that llama-server
 * gives on /v1/completions too (content[i] = {token, logprob, top_logprobs:
 * [{token, logprob}]}). Up to cap into out, largest first; returns how many,
 * -1 when logprobs has no token i in either shape. *lp gets token i's own
 * logprob (NaN when absent). */
int gt_hc_alternatives(const cJSON *logprobs, int i, gt_hc_alt *out, int cap, double *lp);

/* Token i's own entry in logprobs (the token itself: tokens[i] or
 * content[i].token, its logprob, its bytes, its id), 0; -1 when there is
 * none. */
int gt_hc_token(const cJSON *logprobs, int i, gt_hc_alt *out);

/* How many tokens logprobs describes in either shape, -1 when neither. */
int gt_hc_logprob_tokens(const cJSON *logprobs);

/* s escaped to stand between double quotes in a message (newline, '"', '\\'),
 * cut to fit cap. */
void gt_hc_quote(const char *s, char *out, size_t cap);

/* The text of token id as the server would send it (UTF-8-cleaned bytes of
 * the token, the space a SentencePiece piece stands for included) into out;
 * returns its length. */
size_t gt_hc_piece(const gt_model *m, int32_t id, char *out, size_t cap);

/* Greedy continuations of prompts[0..n) (their gt_hc_prompt_ids) on the
 * reference backend (n_gen tokens each, EOS not special: exactly what the
 * normal suites cache), from the reference cache under (kind, data_hash,
 * settings, and the chat family for a chat cell) or computed and stored.
 * Prompts longer than n_ctx - n_gen get zeros. *out is malloc'ed
 * (n * n_gen). */
int gt_hc_ref_greedy(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const char *kind,
                     const char *data_hash,
                     const char *settings, const char *const *prompts, int n, int n_gen,
                     int n_ctx, int32_t **out, bool *cached, gt_err *err);

/* How many of the reference's greedy tokens ref[0..n) the server's text
 * reproduces: the largest k whose decoded pieces are a prefix of text. A
 * reference that reaches EOS (or a chat cell's end of turn) at k with the
 * server stopping there ("stop", text equal) counts as n: the rest would
 * come after the end. */
int gt_hc_agreement(const gt_hc *t, const gt_model *m, const int32_t *ref, int n,
                    const char *text, const char *finish);

/* Defined beside each suite's normal run (smoke.c shares its prompts). */
int gt_smoke_prompts(const gt_suite_ctx *c, const char **out, int cap);
/* accuracy's "greedy" result and metrics: of the prompts of ps_path that fit
 * n_ctx, `used` were compared, `identical` for all n_gen tokens, `same` of
 * `total` tokens before the first divergence; note ends the message. */
void gt_accuracy_greedy_result(gt_suite_ctx *c, const char *ps_path, int n_ctx, bool cached,
                               int used, int identical, int n_gen, long same, long total,
                               const char *note);

/* The http variants (suites/http_<suite>.c), bound in suite_table.c. */
int gt_anchor_run_http(gt_suite_ctx *c, gt_err *err);
int gt_smoke_run_http(gt_suite_ctx *c, gt_err *err);
int gt_functional_run_http(gt_suite_ctx *c, gt_err *err);
int gt_accuracy_run_http(gt_suite_ctx *c, gt_err *err);
int gt_performance_run_http(gt_suite_ctx *c, gt_err *err);
int gt_structured_run_http(gt_suite_ctx *c, gt_err *err);

#endif
