/* serve_gen.c: one completion or chat request run on the model session.
 *
 * Every request starts from an empty sequence (gt_serve_generate truncates
 * the session; the batched worker hands it a slot emptied when its last
 * holder finished), so answers never depend on what was asked before, nor
 * on what runs beside them: the same request at temperature 0, or with the
 * same seed, gives the same text. Logprobs are the model's own
 * distribution (log-softmax of the raw logits, before temperature / top-k /
 * top-p), which is what a qualification against a reference compares.
 *
 * Text is kept as the model's bytes; JSON needs UTF-8, so every string that
 * goes out is cleaned (an invalid byte becomes U+FFFD). A stream holds back
 * the bytes that could still become a stop string or finish a UTF-8
 * sequence, so a client never sees text that a later token retracts.
 *
 * In logprobs, "tokens" are the pieces of the returned text (they
 * concatenate to it, and text_offset indexes it); "top_logprobs" keys are
 * each candidate token's own decoded bytes. The two differ only where the
 * tokenizer's prefix space was stripped from the first prompt token of an
 * echo. "token_ids" (an extension) gives the exact ids. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "gt/sampler.h"
#include "gt/tokenizer.h"
#include "serve.h"

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static int sbuf_add(sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* Bytes at the end of s[0..n) that start a UTF-8 sequence not yet complete. */
static size_t utf8_incomplete_tail(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = u[n - k];
        if ((c & 0xc0) == 0x80)
            continue;
        return gt_utf8_seq(u + n - k, k) == -1 ? k : 0;
    }
    return 0;
}

/* One position's token and, when asked, its logprob and top alternatives. */
typedef struct tokrec {
    int32_t id;
    size_t offset, len; /* its bytes in the answer's text */
    bool has_lp;        /* false for the first prompt token: nothing precedes it */
    float lp;
    int n_top;
    int32_t top_id[GT_SERVE_MAX_LOGPROBS];
    float top_lp[GT_SERVE_MAX_LOGPROBS];
} tokrec;

static void token_logprobs(const float *logits, int n_vocab, int32_t id, int n_top, tokrec *t)
{
    double mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++)
        sum += exp(logits[i] - mx);
    const double lse = mx + log(sum);
    t->has_lp = true;
    t->lp = (float)(logits[id] - lse);
    /* Top-N by insertion; strict comparison keeps ties in id order, as the
     * greedy sampler breaks them. */
    t->n_top = 0;
    for (int i = 0; i < n_vocab && n_top > 0; i++) {
        int k = t->n_top;
        if (k == n_top && !(logits[i] > logits[t->top_id[k - 1]]))
            continue;
        if (k < n_top)
            t->n_top++;
        else
            k--;
        while (k > 0 && logits[i] > logits[t->top_id[k - 1]]) {
            t->top_id[k] = t->top_id[k - 1];
            k--;
        }
        t->top_id[k] = i;
    }
    for (int k = 0; k < t->n_top; k++)
        t->top_lp[k] = (float)(logits[t->top_id[k]] - lse);
}

/* A token's bytes in piece[256], cut there (no token is that long). */
static size_t piece_bytes(const gt_tokenizer *tok, int32_t id, char piece[256])
{
    const int len = gt_token_to_bytes(tok, id, piece, 256);
    return len < 0 ? 0 : len > 256 ? 256 : (size_t)len;
}

static void add_clean_string(cJSON *arr_or_obj, const char *key, const char *s, size_t n)
{
    char *c = gt_utf8_clean(s, n, false);
    cJSON *v = cJSON_CreateString(c ? c : "");
    free(c);
    if (key)
        cJSON_AddItemToObject(arr_or_obj, key, v);
    else
        cJSON_AddItemToArray(arr_or_obj, v);
}

/* The OpenAI completions logprobs object for recs[0..n). */
static cJSON *logprobs_json(const tokrec *recs, int n, const char *text, const gt_tokenizer *tok)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens");
    cJSON *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON *offs = cJSON_AddArrayToObject(o, "text_offset");
    cJSON *ids = cJSON_AddArrayToObject(o, "token_ids"); /* extension: exact ids */
    for (int i = 0; i < n; i++) {
        const tokrec *t = &recs[i];
        add_clean_string(tokens, NULL, text + t->offset, t->len);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)t->offset));
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(t->id));
        if (!t->has_lp) {
            cJSON_AddItemToArray(lps, cJSON_CreateNull());
            cJSON_AddItemToArray(tops, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(t->lp));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < t->n_top; k++) {
            char piece[256];
            const size_t len = piece_bytes(tok, t->top_id[k], piece);
            char *key = gt_utf8_clean(piece, len, false);
            cJSON_AddItemToObject(top, key ? key : "", cJSON_CreateNumber(t->top_lp[k]));
            free(key);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return o;
}

static cJSON *bytes_json(const char *s, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

/* The chat API's logprobs: {"content": [{token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]}]}; bytes are the token's own,
 * so a client can rebuild text that a token split mid-character. */
static cJSON *chat_logprobs_json(const tokrec *recs, int n, const char *text,
                                 const gt_tokenizer *tok)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    for (int i = 0; i < n; i++) {
        const tokrec *t = &recs[i];
        cJSON *e = cJSON_CreateObject();
        add_clean_string(e, "token", text + t->offset, t->len);
        cJSON_AddNumberToObject(e, "logprob", t->lp);
        cJSON_AddItemToObject(e, "bytes", bytes_json(text + t->offset, t->len));
        cJSON *tops = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < t->n_top; k++) {
            char piece[256];
            const size_t len = piece_bytes(tok, t->top_id[k], piece);
            cJSON *a = cJSON_CreateObject();
            add_clean_string(a, "token", piece, len);
            cJSON_AddNumberToObject(a, "logprob", t->top_lp[k]);
            cJSON_AddItemToObject(a, "bytes", bytes_json(piece, len));
            cJSON_AddItemToArray(tops, a);
        }
        cJSON_AddItemToArray(content, e);
    }
    return o;
}

typedef struct gen {
    gt_serve_ctx *c;
    const gt_serve_req *r;
    const gt_tokenizer *tok;
    const gt_serve_sink *sink;
    bool stream;
    char id[48];
    long created;
    sbuf text;
    tokrec *recs;
    int n_rec, n_prompt_rec;
    size_t gen_start;  /* where generated text begins (after an echo) */
    size_t emitted;    /* stream: text bytes sent */
    int rec_sent;      /* stream: recs sent */
} gen;

static cJSON *chunk_base(const gen *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", g->id);
    cJSON_AddStringToObject(o, "object", !g->r->chat ? "text_completion"
                                         : g->stream ? "chat.completion.chunk"
                                                     : "chat.completion");
    cJSON_AddNumberToObject(o, "created", (double)g->created);
    cJSON_AddStringToObject(o, "model", g->c->model_id);
    return o;
}

static void send_frame(const gen *g, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return;
    g->sink->write(g->sink->ud, "data: ", 6);
    g->sink->write(g->sink->ud, s, strlen(s));
    g->sink->write(g->sink->ud, "\n\n", 2);
    free(s);
}

static cJSON *usage_json(int prompt, int completion)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", completion);
    cJSON_AddNumberToObject(u, "total_tokens", prompt + completion);
    return u;
}

/* Sends text and recs up to `upto` bytes (everything when final). */
static void stream_flush(gen *g, size_t upto, const char *finish)
{
    int r_end = g->rec_sent;
    while (r_end < g->n_rec && (finish || g->recs[r_end].offset + g->recs[r_end].len <= upto))
        r_end++;
    if (upto <= g->emitted && r_end == g->rec_sent && !finish)
        return;
    cJSON *o = chunk_base(g);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    const size_t n_new = upto > g->emitted ? upto - g->emitted : 0;
    if (g->r->chat) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        if (n_new || !finish)
            add_clean_string(delta, "content", g->text.p + g->emitted, n_new);
    } else {
        add_clean_string(ch, "text", g->text.p + g->emitted, n_new);
    }
    cJSON_AddNumberToObject(ch, "index", 0);
    if (g->r->logprobs >= 0)
        cJSON_AddItemToObject(ch, "logprobs",
                              (g->r->chat ? chat_logprobs_json : logprobs_json)(
                                  g->recs + g->rec_sent, r_end - g->rec_sent, g->text.p, g->tok));
    else
        cJSON_AddNullToObject(ch, "logprobs");
    if (finish)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    send_frame(g, o);
    if (upto > g->emitted)
        g->emitted = upto;
    g->rec_sent = r_end;
}

/* How much of the text a stream may release now. */
static size_t releasable(const gen *g)
{
    size_t end = g->text.len;
    size_t hold = 0;
    for (int s = 0; s < g->r->n_stop; s++) {
        const char *st = g->r->stop[s];
        size_t sl = strlen(st);
        for (size_t k = sl - 1; k > hold; k--)
            if (k <= end - g->gen_start && memcmp(g->text.p + end - k, st, k) == 0) {
                hold = k;
                break;
            }
    }
    end -= hold;
    return end - utf8_incomplete_tail(g->text.p, end);
}

/* Cuts the text at the first stop string that now appears in the
 * generated part; returns true when one did. */
static bool apply_stop(gen *g, size_t new_from)
{
    size_t best = (size_t)-1;
    for (int s = 0; s < g->r->n_stop; s++) {
        size_t sl = strlen(g->r->stop[s]);
        size_t from = new_from >= g->gen_start + sl ? new_from - sl + 1 : g->gen_start;
        const char *hit = memmem(g->text.p + from, g->text.len - from, g->r->stop[s], sl);
        if (hit && (size_t)(hit - g->text.p) < best)
            best = (size_t)(hit - g->text.p);
    }
    if (best == (size_t)-1)
        return false;
    g->text.len = best;
    g->text.p[best] = '\0';
    while (g->n_rec > g->n_prompt_rec && g->recs[g->n_rec - 1].offset >= best)
        g->n_rec--;
    if (g->n_rec > 0 && g->recs[g->n_rec - 1].offset + g->recs[g->n_rec - 1].len > best)
        g->recs[g->n_rec - 1].len = best - g->recs[g->n_rec - 1].offset;
    return true;
}

/* The prompt's tokens as text pieces: piece i is what decoding i+1 tokens
 * adds to decoding i, so the pieces concatenate to the decoded prompt. */
static int echo_prompt(gen *g, const int32_t *ids, int n)
{
    char *buf = NULL;
    size_t prev = 0;
    for (int i = 0; i < n; i++) {
        int len = gt_detokenize(g->tok, ids, i + 1, NULL, 0);
        if (len < 0)
            return -1;
        char *nb = realloc(buf, (size_t)len + 1);
        if (!nb) {
            free(buf);
            return -1;
        }
        buf = nb;
        gt_detokenize(g->tok, ids, i + 1, buf, (size_t)len + 1);
        size_t l = (size_t)len >= prev ? (size_t)len - prev : 0;
        g->recs[g->n_rec++] = (tokrec){.id = ids[i], .offset = g->text.len, .len = l};
        if (sbuf_add(&g->text, buf + prev, l)) {
            free(buf);
            return -1;
        }
        prev = (size_t)len;
    }
    free(buf);
    g->n_prompt_rec = g->n_rec;
    return 0;
}

/* A chat request's messages through the chat template. */
static int32_t *render_chat(const gt_serve_ctx *c, const gt_serve_req *r, int *n,
                            gt_serve_error *e)
{
    char why[400];
    if (!c->chat || c->chat->family == GT_CHAT_NONE)
        return gt_serve_fail(e, 400, "invalid_request_error", "messages", "%s",
                             c->chat ? c->chat->why : "this server has no chat template"), NULL;
    int32_t *ids = gt_chat_render(c->chat, gt_model_tokenizer(c->model), r->messages,
                                  r->n_messages, n, why, sizeof why);
    if (!ids)
        return gt_serve_fail(e, 400, "invalid_request_error", "messages", "%s", why), NULL;
    return ids;
}

static int32_t *tokenize_prompt(const gt_serve_ctx *c, const gt_serve_req *r, int *n,
                                gt_serve_error *e)
{
    const gt_tokenizer *tok = gt_model_tokenizer(c->model);
    const bool bos = gt_tokenizer_adds_bos(tok);
    const size_t len = strlen(r->prompt);
    gt_err err = {{0}};
    int need = gt_tokenize(tok, r->prompt, len, bos, NULL, 0, &err);
    if (need < 0)
        return gt_serve_fail(e, 400, "invalid_request_error", "prompt", "cannot tokenize: %s",
                             err.msg), NULL;
    if (need == 0)
        return gt_serve_fail(e, 400, "invalid_request_error", "prompt",
                             "the prompt is empty and the model adds no BOS token: nothing "
                             "to condition on"), NULL;
    int32_t *ids = malloc(sizeof *ids * (size_t)need);
    if (!ids)
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory"), NULL;
    *n = gt_tokenize(tok, r->prompt, len, bos, ids, need, &err);
    return ids;
}

int32_t *gt_serve_tokenize(const gt_serve_ctx *c, const gt_serve_req *r, int *n, gt_serve_error *e)
{
    int32_t *ids = r->chat ? render_chat(c, r, n, e) : tokenize_prompt(c, r, n, e);
    /* OpenAI's rule: prompt plus max_tokens must fit, else 400 before any
     * work (never a completion cut short where the cache runs out). */
    const int n_ctx = gt_session_n_ctx(c->session);
    if (ids && *n > n_ctx) {
        free(ids);
        const char *what = r->chat ? "messages" : "prompt";
        return gt_serve_fail(e, 400, "invalid_request_error", what,
                             "this model's context is %d tokens; the %s alone %s %d tokens",
                             n_ctx, r->chat ? "rendered messages" : "prompt",
                             r->chat ? "are" : "is", *n), NULL;
    }
    if (ids && *n + r->max_tokens > n_ctx) {
        free(ids);
        return gt_serve_fail(e, 400, "invalid_request_error", "max_tokens",
                             "this model's context is %d tokens; the request needs %d (%d in "
                             "the %s, %d for the completion)",
                             n_ctx, *n + r->max_tokens, *n,
                             r->chat ? "rendered messages" : "prompt", r->max_tokens), NULL;
    }
    return ids;
}

/* One request as a state machine, so that one driver can run several side
 * by side: the serial driver (gt_serve_generate) and the batched worker
 * (serve_worker.c) make the same calls in the same order per request, so a
 * request's text does not depend on which drove it. */
enum { ST_PROMPT, ST_DECODE };

struct gt_serve_gen {
    gen g;
    const int32_t *ids;
    int n_ids;
    double deadline;
    int state;
    int n_vocab, n_top;
    bool want_lp, prompt_lp;
    int32_t eos, turn_end;
    float *logits;      /* n_vocab per prompt token when prompt_lp, else n_vocab */
    float *masked;      /* response_format: the logits the constraint left (n_vocab) */
    const float *last;  /* the logits the next token is sampled from */
    gt_sampler *smp;
    int32_t tok;        /* the sampled token the next eval appends */
    int n_gen;
    const char *finish;
};

/* A stream's 200 and maybe some text are out: an error goes in the stream,
 * then [DONE]. */
static void stream_close(const gt_serve_sink *sink, int rc, const gt_serve_error *e)
{
    if (rc != 0) {
        char *ej = gt_serve_error_json(e);
        if (ej) {
            sink->write(sink->ud, "data: ", 6);
            sink->write(sink->ud, ej, strlen(ej));
            sink->write(sink->ud, "\n\n", 2);
            free(ej);
        }
    }
    sink->write(sink->ud, "data: [DONE]\n\n", 14);
}

static void gen_free(gt_serve_gen *q)
{
    gt_sampler_free(q->smp);
    free(q->logits);
    free(q->masked);
    free(q->g.text.p);
    free(q->g.recs);
    free(q);
}

gt_serve_gen *gt_serve_gen_new(gt_serve_ctx *c, const gt_serve_req *r, const int32_t *ids,
                               int n_ids, double deadline, const gt_serve_sink *sink,
                               gt_serve_error *e)
{
    gt_serve_gen *q = calloc(1, sizeof *q);
    if (!q) {
        gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
        if (sink->write)
            stream_close(sink, -1, e);
        return NULL;
    }
    gen *g = &q->g;
    *g = (gen){.c = c, .r = r, .tok = gt_model_tokenizer(c->model), .sink = sink,
               .stream = sink->write != NULL, .created = (long)time(NULL)};
    c->counter++;
    snprintf(g->id, sizeof g->id, "%s-%lx%04llx", r->chat ? "chatcmpl" : "cmpl",
             (unsigned long)g->created, (unsigned long long)(c->counter & 0xffff));
    q->ids = ids;
    q->n_ids = n_ids;
    q->deadline = deadline;
    q->n_vocab = gt_model_hparams(c->model)->n_vocab;
    q->want_lp = r->logprobs >= 0;
    q->prompt_lp = q->want_lp && r->echo;
    q->n_top = r->logprobs > 0 ? r->logprobs : 0;
    q->eos = gt_tokenizer_eos(g->tok);
    /* A chat turn ends at the template's end-of-turn token. */
    q->turn_end = r->chat && c->chat ? c->chat->turn_end : -1;
    q->finish = "length";
    q->logits = malloc(sizeof(float) * (size_t)q->n_vocab * (size_t)(q->prompt_lp ? n_ids : 1));
    g->recs = malloc(sizeof(tokrec) * (size_t)(n_ids + r->max_tokens + 1));
    gt_sampler_params sp = {r->temperature, r->top_k, r->top_p,
                            r->has_seed ? r->seed : (uint64_t)time(NULL) * 1000003u + c->counter};
    q->smp = gt_sampler_new(&sp, q->n_vocab);
    if (r->con) { /* a request's constraint starts each generation afresh */
        gt_constraint_reset(r->con);
        q->masked = malloc(sizeof(float) * (size_t)q->n_vocab);
    }
    if (!q->logits || !g->recs || !q->smp || (r->con && !q->masked)) {
        gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
        if (g->stream)
            stream_close(sink, -1, e);
        gen_free(q);
        return NULL;
    }
    return q;
}

void gt_serve_gen_next_eval(const gt_serve_gen *q, gt_seq_eval *ev)
{
    ev->tokens = q->state == ST_PROMPT ? q->ids : &q->tok;
    ev->n = q->state == ST_PROMPT ? q->n_ids : 1;
    ev->all_logits = q->state == ST_PROMPT && q->prompt_lp;
    ev->logits = q->logits;
}

int gt_serve_gen_eval_failed(const gt_serve_gen *q, const char *why, gt_serve_error *e)
{
    if (q->state == ST_PROMPT)
        return gt_serve_fail(e, 500, "server_error", NULL, "evaluating the prompt: %s", why);
    return gt_serve_fail(e, 500, "server_error", NULL, "evaluating token %d: %s", q->n_gen, why);
}

/* After the prompt's eval: echo, prompt logprobs, a stream's opening. */
static int prompt_done(gt_serve_gen *q, gt_serve_error *e)
{
    gen *g = &q->g;
    const gt_serve_req *r = g->r;
    if (r->echo && echo_prompt(g, q->ids, q->n_ids) != 0)
        return gt_serve_fail(e, 500, "server_error", NULL, "decoding the prompt failed");
    if (q->prompt_lp)
        for (int i = 1; i < q->n_ids; i++)
            token_logprobs(q->logits + (size_t)(i - 1) * (size_t)q->n_vocab, q->n_vocab,
                           q->ids[i], q->n_top, &g->recs[i]);
    g->gen_start = g->text.len;
    if (g->stream && r->echo)
        stream_flush(g, g->text.len, NULL);
    if (g->stream && r->chat) { /* the chat stream opens with the speaker's role */
        cJSON *o = chunk_base(g);
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), ch);
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddStringToObject(delta, "content", "");
        cJSON_AddNumberToObject(ch, "index", 0);
        cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddNullToObject(ch, "finish_reason");
        send_frame(g, o);
    }
    q->last = q->logits + (q->prompt_lp ? (size_t)(q->n_ids - 1) * (size_t)q->n_vocab : 0);
    q->state = ST_DECODE;
    return 0;
}

int gt_serve_gen_step(gt_serve_gen *q, gt_serve_error *e)
{
    gen *g = &q->g;
    const gt_serve_req *r = g->r;
    if (q->state == ST_PROMPT) {
        if (prompt_done(q, e) != 0)
            return -1;
    } else {
        q->last = q->logits;
    }
    if (q->n_gen >= r->max_tokens)
        return 0;
    if (gt_now() > q->deadline)
        return gt_serve_fail(e, 504, "timeout_error", NULL,
                             "the request ran past the server's per-request timeout after %d "
                             "tokens", q->n_gen);
    if (g->sink->cancelled && g->sink->cancelled(g->sink->ud)) {
        q->finish = "cancelled";
        return 0;
    }
    int32_t t;
    if (r->con) {
        /* Sampled from what the constraint allows; logprobs stay the
         * model's own distribution (q->last, unmasked). */
        memcpy(q->masked, q->last, sizeof(float) * (size_t)q->n_vocab);
        if (gt_constraint_mask(r->con, q->masked) == 0)
            return gt_serve_fail(e, 500, "server_error", NULL,
                                 "response_format: the constraint allows no token after %d "
                                 "tokens", q->n_gen);
        t = gt_sampler_sample(q->smp, q->masked);
        /* The mask allows an end token only once the document is complete. */
        if (gt_constraint_is_end(r->con, t)) {
            q->finish = "stop";
            return 0;
        }
        gt_err err = {{0}};
        if (gt_constraint_accept(r->con, t, &err) != 0)
            return gt_serve_fail(e, 500, "server_error", NULL, "response_format: %s", err.msg);
    } else {
        t = gt_sampler_sample(q->smp, q->last);
        if (t == q->eos || t == q->turn_end) {
            q->finish = "stop";
            return 0;
        }
    }
    tokrec *rec = &g->recs[g->n_rec];
    *rec = (tokrec){.id = t, .offset = g->text.len};
    if (q->want_lp)
        token_logprobs(q->last, q->n_vocab, t, q->n_top, rec);
    char piece[256];
    const size_t len = piece_bytes(g->tok, t, piece);
    rec->len = len;
    g->n_rec++;
    q->n_gen++;
    if (sbuf_add(&g->text, piece, len))
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    if (r->n_stop && apply_stop(g, rec->offset)) {
        q->finish = "stop";
        return 0;
    }
    if (g->stream)
        stream_flush(g, releasable(g), NULL);
    if (q->n_gen == r->max_tokens)
        return 0; /* nobody samples after the last token: skip its eval */
    q->tok = t;
    return 1;
}

/* The answer of a request that ran to its end (or was cancelled). */
static int finish(gt_serve_gen *q, char **response, gt_serve_error *e)
{
    gen *g = &q->g;
    const gt_serve_req *r = g->r;
    if (g->stream) {
        if (strcmp(q->finish, "cancelled") != 0) {
            stream_flush(g, g->text.len, q->finish);
            if (r->include_usage) {
                cJSON *o = chunk_base(g);
                cJSON_AddArrayToObject(o, "choices");
                cJSON_AddItemToObject(o, "usage", usage_json(q->n_ids, q->n_gen));
                send_frame(g, o);
            }
        }
        return 0;
    }
    if (!strcmp(q->finish, "cancelled"))
        return gt_serve_fail(e, 499, "cancelled", NULL, "the client went away");
    cJSON *o = chunk_base(g);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    if (r->chat) {
        cJSON *msg = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        add_clean_string(msg, "content", g->text.p ? g->text.p : "", g->text.len);
    } else {
        add_clean_string(ch, "text", g->text.p ? g->text.p : "", g->text.len);
    }
    if (q->want_lp)
        cJSON_AddItemToObject(ch, "logprobs",
                              (r->chat ? chat_logprobs_json : logprobs_json)(
                                  g->recs, g->n_rec, g->text.p, g->tok));
    else
        cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", q->finish);
    cJSON_AddItemToObject(o, "usage", usage_json(q->n_ids, q->n_gen));
    *response = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!*response)
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    return 0;
}

int gt_serve_gen_end(gt_serve_gen *q, int rc, char **response, gt_serve_error *e)
{
    if (response)
        *response = NULL;
    if (rc == 0)
        rc = finish(q, response, e);
    if (q->g.stream)
        stream_close(q->g.sink, rc, e);
    gen_free(q);
    return rc;
}

int gt_serve_generate(gt_serve_ctx *c, const gt_serve_req *r, const int32_t *ids, int n_ids,
                      double deadline, const gt_serve_sink *sink, char **response,
                      gt_serve_error *e)
{
    if (response)
        *response = NULL;
    gt_serve_gen *q = gt_serve_gen_new(c, r, ids, n_ids, deadline, sink, e);
    if (!q)
        return -1;
    gt_err err = {{0}};
    int rc;
    if (gt_session_truncate(c->session, 0, &err) != 0) {
        rc = gt_serve_fail(e, 500, "server_error", NULL, "session reset: %s", err.msg);
    } else {
        do {
            gt_seq_eval ev;
            gt_serve_gen_next_eval(q, &ev);
            if (gt_session_eval(c->session, ev.tokens, ev.n, ev.all_logits, ev.logits, &err) != 0)
                rc = gt_serve_gen_eval_failed(q, err.msg, e);
            else
                rc = gt_serve_gen_step(q, e);
        } while (rc == 1);
    }
    return gt_serve_gen_end(q, rc, response, e);
}
