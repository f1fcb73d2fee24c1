/* http_performance.c: the performance suite against an OpenAI-compatible
 * server, under load.
 *
 * n_clients threads (default 4) each send `requests` streamed completions
 * (default 4), or keep sending until duration_s seconds have passed when
 * that is set, after one warm-up request. A request is a window of
 * n_prompt tokens of the eval text (decoded; each request its own window,
 * so a server's prefix cache cannot answer from the previous one), with
 * max_tokens n_gen, temperature 0, stream true and
 * stream_options.include_usage. Per request: time to the first event (the
 * first token), total latency, and generated tokens (usage.completion_tokens
 * when the server sends it, else the events carrying text). Reported:
 *   ttft_ms          median time to first token
 *   tg_tps           median per-request decode rate: (tokens - 1) / (last
 *                    event - first event)
 *   http_tps         all generated tokens / wall time of the run: the
 *                    server's throughput at this concurrency
 *   latency_p50_ms, latency_p99_ms   request latency percentiles
 *   requests, errors errors {"eq": 0}: a transport failure, a status other
 *                    than 200, an error event or a stream without [DONE]
 * The "cells" setting selects cells as in the normal suite. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/tokenizer.h"
#include "http_common.h"
#include "metrics.h"
#include "promptset.h"
#include "suite.h"

typedef struct sample {
    double ttft_s, total_s, tps;
    int tokens;
} sample;

typedef struct client {
    const gt_hc *t;
    char *const *prompts;
    int n_prompts, id, n_clients, n_req, n_gen;
    double stop_at; /* duration mode: monotonic deadline, else 0 */
    sample *s;
    int n, cap;
    int errors;
    char first_error[400];
} client;

/* One streamed request; 0 with *out filled, -1 with why. */
static int one(const client *cl, const char *prompt, sample *out, char *why, size_t cap)
{
    cJSON *req = gt_hc_request(cl->t, prompt, cl->n_gen, 0);
    if (!req)
        return snprintf(why, cap, "out of memory"), -1;
    cJSON_AddBoolToObject(req, "stream", true);
    cJSON *so = cJSON_AddObjectToObject(req, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", true);
    char url[600];
    gt_hc_generate_url(cl->t, url, sizeof url);
    gt_http_reply r;
    gt_err e = {{0}};
    int rc = gt_http_post_json(url, req, 1, GT_HC_TIMEOUT_S, &r, &e);
    cJSON_Delete(req);
    if (rc != 0)
        return snprintf(why, cap, "%s", e.msg), -1;
    rc = -1;
    if (r.status != 200) {
        snprintf(why, cap, "HTTP %ld: %.200s", r.status, r.body);
        goto out;
    }
    int text_events = 0, usage = -1;
    for (char *line = r.body, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        cJSON *o = cJSON_Parse(line);
        if (!o) {
            snprintf(why, cap, "an event is not JSON: %.100s", line);
            goto out;
        }
        const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
        if (er) {
            char *s = cJSON_PrintUnformatted(er);
            snprintf(why, cap, "error event: %.200s", s ? s : "");
            free(s);
            cJSON_Delete(o);
            goto out;
        }
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(
            cl->t->chat ? cJSON_GetObjectItemCaseSensitive(ch, "delta") : ch,
            cl->t->chat ? "content" : "text");
        if (cJSON_IsString(tx) && tx->valuestring[0])
            text_events++;
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "usage");
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        if (cJSON_IsNumber(ct))
            usage = (int)ct->valuedouble;
        cJSON_Delete(o);
    }
    if (!r.done) {
        snprintf(why, cap, "the stream ended without [DONE] after %d events", r.n_events);
        goto out;
    }
    out->tokens = usage >= 0 ? usage : text_events;
    out->ttft_s = r.first_s;
    out->total_s = r.total_s;
    out->tps = out->tokens > 1 && r.last_s > r.first_s
                   ? (out->tokens - 1) / (r.last_s - r.first_s)
                   : NAN;
    rc = 0;
out:
    gt_http_reply_free(&r);
    return rc;
}

static void *client_main(void *arg)
{
    client *cl = arg;
    for (int i = 0;; i++) {
        if (cl->stop_at > 0 ? (i > 0 && gt_suite_now() >= cl->stop_at) : i >= cl->n_req)
            break;
        if (cl->n == cl->cap) {
            int cap = cl->cap ? cl->cap * 2 : 16;
            sample *s = realloc(cl->s, (size_t)cap * sizeof *s);
            if (!s) {
                if (!cl->errors++)
                    snprintf(cl->first_error, sizeof cl->first_error, "out of memory");
                break;
            }
            cl->s = s;
            cl->cap = cap;
        }
        const char *p = cl->prompts[((size_t)i * cl->n_clients + cl->id) % cl->n_prompts];
        char why[400];
        if (one(cl, p, &cl->s[cl->n], why, sizeof why) == 0)
            cl->n++;
        else if (!cl->errors++)
            snprintf(cl->first_error, sizeof cl->first_error, "client %d request %d: %s", cl->id,
                     i + 1, why);
    }
    return NULL;
}

/* Windows of n_prompt tokens of the eval text, decoded; returns the count. */
static int make_prompts(gt_suite_ctx *c, const gt_model *m, int n_prompt, int want,
                        char ***out, gt_err *err)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    char *text, hash[65], path[1024];
    size_t len;
    if (gt_evaltext_load(c, gt_model_hparams(m)->n_vocab, &text, &len, hash, path, sizeof path,
                         err) != 0)
        return -1;
    int32_t *toks = malloc((len + 8) * sizeof *toks);
    int n_tok = toks ? gt_tokenize(t, text, len, false, toks, (int)len + 8, err) : -1;
    free(text);
    int w = n_prompt - (gt_tokenizer_adds_bos(t) ? 1 : 0);
    if (w < 1)
        w = 1;
    if (n_tok < w) {
        free(toks);
        return n_tok < 0 ? -1 : gt_err_set(err, "%s has %d tokens, fewer than n_prompt", path,
                                            n_tok);
    }
    /* Windows start every w / 4 + 1 tokens, cycling when the text is short. */
    int step = w / 4 + 1, n_start = (n_tok - w) / step + 1;
    char **p = calloc((size_t)want, sizeof *p);
    if (!p) {
        free(toks);
        return gt_err_set(err, "out of memory");
    }
    for (int i = 0; i < want; i++) {
        const int32_t *src = toks + (size_t)(i % n_start) * step;
        int need = gt_detokenize(t, src, w, NULL, 0);
        char *raw = need >= 0 ? malloc((size_t)need + 1) : NULL;
        if (raw) {
            gt_detokenize(t, src, w, raw, (size_t)need + 1);
            p[i] = gt_utf8_clean(raw, (size_t)need, true);
        }
        free(raw);
        if (!p[i]) {
            for (int k = 0; k < i; k++)
                free(p[k]);
            free(p);
            free(toks);
            return gt_err_set(err, "out of memory");
        }
    }
    free(toks);
    *out = p;
    return want;
}

int gt_performance_run_http(gt_suite_ctx *c, gt_err *err)
{
    int n_prompt = (int)gt_suite_int(c, "n_prompt", 64);
    int n_gen = (int)gt_suite_int(c, "n_gen", 32);
    int n_clients = (int)gt_suite_int(c, "n_clients", 4);
    int n_req = (int)gt_suite_int(c, "requests", 4);
    double duration = gt_suite_num(c, "duration_s", 0);
    if (n_prompt < 1 || n_gen < 1 || n_clients < 1 || n_clients > 256 || n_req < 1 ||
        duration < 0)
        return gt_err_set(err, "performance settings: n_prompt, n_gen, requests >= 1, "
                               "n_clients 1..256, duration_s >= 0");
    if (!gt_suite_cell_selected(c)) {
        gt_suite_result(c, "measured", GT_ST_SKIP,
                        GT_SKIP_MATRIX ": cell %s is not in this tier's performance cells",
                        c->cell_id);
        return 0;
    }
    gt_hc t;
    gt_model *m;
    if (gt_hc_open_model(c, &t, &m, err) != 0)
        return -1;
    int n_texts = n_clients * (duration > 0 ? 8 : n_req) + 1;
    char **prompts = NULL;
    if (make_prompts(c, m, n_prompt, n_texts, &prompts, err) < 0)
        return -1;
    int rc = -1;
    client *cl = calloc((size_t)n_clients, sizeof *cl);
    pthread_t *th = calloc((size_t)n_clients, sizeof *th);
    double *v = NULL;
    if (!cl || !th) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    /* Warm-up: the last window, not measured. */
    client warm = {.t = &t, .prompts = prompts + n_texts - 1, .n_prompts = 1, .n_gen = n_gen};
    sample ws;
    char why[400];
    if (one(&warm, prompts[n_texts - 1], &ws, why, sizeof why) != 0) {
        gt_suite_check(c, "warmup", false, "the warm-up request failed: %s", why);
        rc = 0;
        goto out;
    }
    double t0 = gt_suite_now();
    int started = 0;
    for (int i = 0; i < n_clients; i++) {
        cl[i] = (client){.t = &t, .prompts = prompts, .n_prompts = n_texts - 1, .id = i,
                         .n_clients = n_clients, .n_req = n_req, .n_gen = n_gen,
                         .stop_at = duration > 0 ? t0 + duration : 0};
        if (pthread_create(&th[i], NULL, client_main, &cl[i]) != 0) {
            gt_err_set(err, "cannot start client thread %d", i);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started < n_clients)
        goto out;
    double wall = gt_suite_now() - t0;
    int n = 0, errors = 0;
    long tokens = 0;
    const char *first_error = "";
    for (int i = 0; i < n_clients; i++) {
        n += cl[i].n;
        errors += cl[i].errors;
        if (cl[i].errors && !first_error[0])
            first_error = cl[i].first_error;
        for (int k = 0; k < cl[i].n; k++)
            tokens += cl[i].s[k].tokens;
    }
    gt_suite_check(c, "errors", errors == 0, "%d of %d requests failed%s%s", errors, n + errors,
                   errors ? "; first: " : "", first_error);
    gt_suite_metric(c, "requests", n + errors);
    gt_suite_metric(c, "errors", errors);
    if (n == 0) {
        rc = 0;
        goto out;
    }
    v = malloc((size_t)n * sizeof *v);
    if (!v) {
        gt_err_set(err, "out of memory");
        goto out;
    }
#define COLLECT(expr)                                                                          \
    do {                                                                                       \
        nv = 0;                                                                                \
        for (int i = 0; i < n_clients; i++)                                                    \
            for (int k = 0; k < cl[i].n; k++) {                                                \
                const sample *s = &cl[i].s[k];                                                 \
                double x = (expr);                                                             \
                if (isfinite(x))                                                               \
                    v[nv++] = x;                                                               \
            }                                                                                  \
    } while (0)
    int nv;
    COLLECT(s->ttft_s * 1e3);
    double ttft = gt_median(v, nv);
    COLLECT(s->tps);
    double tps = nv ? gt_median(v, nv) : NAN;
    int n_tps = nv;
    COLLECT(s->total_s * 1e3);
    double p50 = gt_percentile(v, nv, 0.5), p99 = gt_percentile(v, nv, 0.99);
#undef COLLECT
    double agg = tokens / wall;
    /* Judged: the numbers the gate compares with a baseline must be real. */
    gt_suite_check(c, "measured", isfinite(agg) && agg > 0 && isfinite(ttft) && ttft > 0,
                   "%d clients, %d requests (%ld tokens generated) in %.2f s: %.1f tok/s in "
                   "all; time to first token %.1f ms, decode %.1f tok/s per request (median); "
                   "latency p50 %.1f ms p99 %.1f ms",
                   n_clients, n, tokens, wall, agg, ttft, tps, p50, p99);
    gt_suite_metric(c, "ttft_ms", ttft);
    if (n_tps > 0)
        gt_suite_metric(c, "tg_tps", tps);
    gt_suite_metric(c, "http_tps", agg);
    gt_suite_metric(c, "latency_p50_ms", p50);
    gt_suite_metric(c, "latency_p99_ms", p99);
    rc = 0;
out:
    for (int i = 0; cl && i < n_clients; i++)
        free(cl[i].s);
    free(cl);
    free(th);
    free(v);
    for (int i = 0; i < n_texts; i++)
        free(prompts[i]);
    free(prompts);
    return rc;
}
