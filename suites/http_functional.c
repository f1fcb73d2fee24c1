/* http_functional.c: the functional suite against an OpenAI-compatible
 * server: does it behave like an inference server should?
 *   determinism  the same temperature-0 request twice gives the same text
 *                (metric determinism_diff, as the normal suite's: the
 *                tokens that differ, counted on the artifact's tokenization
 *                of the two texts);
 *   seed         temperature 0.8 with the same seed twice gives the same
 *                text (metric seed_diff, {"eq": 0}); whether another seed
 *                gives another text is reported as info (seed_varies: a
 *                tiny model may well sample the same tokens);
 *   max_tokens   a request for fewer tokens gets exactly that many
 *                (usage.completion_tokens, finish_reason "length"), and its
 *                text is the start of the longer one;
 *   stop         a stop string taken from the middle of the temperature-0
 *                text cuts the text just before its first occurrence, with
 *                finish_reason "stop";
 *   refusals     requests OpenAI refuses are refused, each within 5 s, with
 *                its status and an error object: bad_request (max_tokens
 *                -1), bad_json, missing_prompt, negative_temperature,
 *                stop_type, oversized_prompt (400, or 413 for the body),
 *                unknown_model (404).
 * Prompt: the first of the cell's prompt set (as the normal suite). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/tokenizer.h"
#include "http_common.h"
#include "promptset.h"
#include "suite.h"

/* Tokens that differ between the artifact's tokenizations of a and b
 * (positions beyond the shorter count as different). */
static int token_diff(const gt_model *m, const char *a, const char *b, int *first)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    size_t la = strlen(a), lb = strlen(b);
    int32_t *ia = malloc((la + 8) * sizeof *ia), *ib = malloc((lb + 8) * sizeof *ib);
    int na = ia ? gt_tokenize(t, a, la, false, ia, (int)la + 8, NULL) : -1;
    int nb = ib ? gt_tokenize(t, b, lb, false, ib, (int)lb + 8, NULL) : -1;
    int d = 0;
    *first = -1;
    if (na < 0 || nb < 0) {
        d = strcmp(a, b) != 0;
        *first = d ? 0 : -1;
    } else {
        int n = na > nb ? na : nb;
        for (int i = 0; i < n; i++)
            if (i >= na || i >= nb || ia[i] != ib[i]) {
                if (*first < 0)
                    *first = i;
                d++;
            }
    }
    free(ia);
    free(ib);
    return d;
}

/* The check that texts a and b are the same tokens, and its metric (the
 * number that differ). Failed: "<what>: N tokens differ, first at I: a vs
 * b"; passed: "<same> the same text: a". */
static void same_text(gt_suite_ctx *c, const gt_model *m, const char *check, const char *metric,
                      const char *a, const char *b, const char *what, const char *same)
{
    char qa[300], qb[300];
    int first, d = token_diff(m, a, b, &first);
    gt_hc_quote(a, qa, sizeof qa);
    gt_hc_quote(b, qb, sizeof qb);
    if (d)
        gt_suite_check(c, check, false, "%s: %d tokens differ, first at %d: \"%s\" vs \"%s\"",
                       what, d, first, qa, qb);
    else
        gt_suite_check(c, check, true, "%s the same text: \"%s\"", same, qa);
    gt_suite_metric(c, metric, d);
}

/* One completion; NULL and a failed check named `check` when it fails. */
static char *complete(gt_suite_ctx *c, const gt_hc *t, const char *check, cJSON *req,
                      gt_hc_completion *out)
{
    gt_err e = {{0}};
    int rc = req ? gt_hc_complete(t, req, out, &e) : gt_err_set(&e, "out of memory");
    cJSON_Delete(req);
    if (rc != 0) {
        gt_suite_check(c, check, false, "%s", e.msg);
        return NULL;
    }
    char *s = strdup(out->text);
    if (!s)
        gt_hc_completion_free(out);
    return s;
}

static cJSON *sampled(const gt_hc *t, const char *prompt, int n, double temp, double seed)
{
    cJSON *q = gt_hc_request(t, prompt, n, temp);
    if (q)
        cJSON_AddNumberToObject(q, "seed", seed);
    return q;
}

/* Each malformed request gets this long: a server that accepts one and
 * starts generating is reported in seconds, by name, instead of holding the
 * cell until its generation ends (llama-server takes max_tokens -1 as
 * "until the context is full"). */
#define REFUSAL_DEADLINE_S 5.0

typedef struct refusal {
    const char *check; /* the result's name */
    const char *what;  /* the request, as the message names it */
    int status;        /* what OpenAI answers */
} refusal;

enum { R_MAX_TOKENS, R_BAD_JSON, R_NO_PROMPT, R_TEMPERATURE, R_STOP_TYPE, R_OVERSIZED, R_MODEL, R_N };

static const refusal REFUSALS[R_N] = {
    [R_MAX_TOKENS] = {"bad_request", "max_tokens -1", 400},
    [R_BAD_JSON] = {"bad_json", "a body that is not JSON", 400},
    [R_NO_PROMPT] = {"missing_prompt", "a request without a prompt", 400},
    [R_TEMPERATURE] = {"negative_temperature", "temperature -1", 400},
    [R_STOP_TYPE] = {"stop_type", "stop given as a number", 400},
    [R_OVERSIZED] = {"oversized_prompt", "a prompt 4x the model's trained context", 400},
    [R_MODEL] = {"unknown_model", "an unknown model name", 404},
};

/* The body of request k (malloc'ed text), or NULL when out of memory. */
static char *refusal_body(const gt_hc *t, const gt_model *m, const char *prompt, int k)
{
    if (k == R_BAD_JSON)
        return strdup("{\"prompt\": \"unterminated");
    cJSON *q = gt_hc_request(t, k == R_NO_PROMPT ? "" : prompt, k == R_MAX_TOKENS ? -1 : 4, 0);
    char *big = NULL;
    if (!q)
        return NULL;
    if (k == R_NO_PROMPT)
        gt_hc_set_prompt(t, q, NULL);
    if (k == R_TEMPERATURE)
        cJSON_ReplaceItemInObjectCaseSensitive(q, "temperature", cJSON_CreateNumber(-1));
    if (k == R_STOP_TYPE)
        cJSON_AddNumberToObject(q, "stop", 5);
    if (k == R_MODEL)
        cJSON_ReplaceItemInObjectCaseSensitive(q, "model",
                                               cJSON_CreateString("gauntlet-no-such-model"));
    if (k == R_OVERSIZED) {
        /* " the" is one token in every vocabulary the matrices use. */
        size_t words = 4 * (size_t)(gt_model_hparams(m)->n_ctx_train > 0
                                        ? gt_model_hparams(m)->n_ctx_train : 4096);
        big = malloc(words * 4 + 1);
        if (big) {
            for (size_t i = 0; i < words; i++)
                memcpy(big + 4 * i, " the", 4);
            big[words * 4] = '\0';
            gt_hc_set_prompt(t, q, big);
        }
    }
    char *s = (k != R_OVERSIZED || big) ? cJSON_PrintUnformatted(q) : NULL;
    free(big);
    cJSON_Delete(q);
    return s;
}

/* One check per request: refused with the status OpenAI gives and an error
 * object, within the deadline. A prompt past the context may also be
 * refused as too large a body (413). Returns -1 only when out of memory. */
static int refusals(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const char *prompt)
{
    char url[600];
    gt_hc_generate_url(t, url, sizeof url);
    for (int k = 0; k < R_N; k++) {
        const refusal *r = &REFUSALS[k];
        char *body = refusal_body(t, m, prompt, k);
        if (!body)
            return -1;
        gt_http_reply br;
        gt_err e = {{0}};
        double t0 = gt_suite_now();
        int sent = gt_http_post_raw(url, body, strlen(body), 0, REFUSAL_DEADLINE_S, &br, &e);
        double took = gt_suite_now() - t0;
        free(body);
        if (sent != 0) {
            if (took >= REFUSAL_DEADLINE_S * 0.95)
                gt_suite_check(c, r->check, false,
                               "%s was not refused within %.0f s (no answer: the server took it "
                               "and is still working on it); OpenAI answers %d at once",
                               r->what, REFUSAL_DEADLINE_S, r->status);
            else
                gt_suite_check(c, r->check, false, "%s: %s", r->what, e.msg);
            continue;
        }
        cJSON *bj = cJSON_Parse(br.body);
        bool has_err = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(bj, "error"));
        bool status_ok = br.status == r->status || (k == R_OVERSIZED && br.status == 413);
        if (br.status >= 200 && br.status < 300)
            gt_suite_check(c, r->check, false,
                           "%s was accepted (HTTP %ld, %.1f s); OpenAI answers %d: %.200s",
                           r->what, br.status, took, r->status, br.body);
        else
            gt_suite_check(c, r->check, status_ok && has_err, "%s: HTTP %ld%s%s in %.2f s: %.200s",
                           r->what, br.status, status_ok ? "" : " (OpenAI answers ",
                           status_ok ? "" : (r->status == 404 ? "404)" : "400)"), took,
                           has_err ? br.body : "no error object");
        cJSON_Delete(bj);
        gt_http_reply_free(&br);
    }
    return 0;
}

int gt_functional_run_http(gt_suite_ctx *c, gt_err *err)
{
    int n = (int)gt_suite_int(c, "n_tokens", 32);
    if (n < 2)
        return gt_err_set(err, "functional settings: n_tokens must be >= 2");
    gt_hc t;
    gt_model *m;
    if (gt_hc_open_model(c, &t, &m, err) != 0)
        return -1;
    gt_promptset ps;
    if (gt_promptset_load(c, gt_model_hparams(m)->n_vocab, 1, &ps, err) != 0)
        return -1;
    const char *prompt = ps.p[0].text;
    char qa[300];

    /* Determinism at temperature 0. */
    gt_hc_completion r1, r2;
    char *a = complete(c, &t, "determinism", gt_hc_request(&t, prompt, n, 0), &r1);
    char *b = a ? complete(c, &t, "determinism", gt_hc_request(&t, prompt, n, 0), &r2) : NULL;
    if (a && b) {
        char same[96];
        snprintf(same, sizeof same, "two temperature-0 requests for %d tokens give", n);
        same_text(c, m, "determinism", "determinism_diff", a, b, "two temperature-0 requests",
                  same);
        gt_hc_completion_free(&r2);
    }
    free(b);
    const char *full = a ? a : NULL; /* the temperature-0 text, for max_tokens and stop */
    int full_tokens = a ? r1.completion_tokens : -1;
    const char *full_finish = a ? r1.finish : "";

    /* Seed reproducibility at temperature 0.8. */
    double seed = (double)(c->seed % 1000000007ull) + 1;
    gt_hc_completion s1, s2, s3;
    char *x = complete(c, &t, "seed", sampled(&t, prompt, n, 0.8, seed), &s1);
    char *y = x ? complete(c, &t, "seed", sampled(&t, prompt, n, 0.8, seed), &s2) : NULL;
    if (x && y) {
        char what[96], same[112];
        snprintf(what, sizeof what, "temperature 0.8, seed %.0f twice", seed);
        snprintf(same, sizeof same, "%s gives", what);
        same_text(c, m, "seed", "seed_diff", x, y, what, same);
        char *z = complete(c, &t, "seed_other", sampled(&t, prompt, n, 0.8, seed + 1), &s3);
        if (z) {
            int f2, d2 = token_diff(m, x, z, &f2);
            gt_suite_log(c, "seed %.0f vs %.0f: %d tokens differ", seed, seed + 1, d2);
            gt_suite_metric(c, "seed_varies", d2 > 0);
            gt_hc_completion_free(&s3);
            free(z);
        }
        gt_hc_completion_free(&s2);
    }
    if (x)
        gt_hc_completion_free(&s1);
    free(x);
    free(y);

    /* max_tokens honoured, and a shorter request is a prefix. */
    if (full) {
        int k = n / 4 > 0 ? n / 4 : 1;
        gt_hc_completion rk;
        char *p = complete(c, &t, "max_tokens", gt_hc_request(&t, prompt, k, 0), &rk);
        if (p) {
            bool stopped = strcmp(rk.finish, "stop") == 0;
            bool count_ok = stopped ? rk.completion_tokens <= k : rk.completion_tokens == k &&
                                                                      strcmp(rk.finish, "length") == 0;
            bool prefix = strncmp(full, p, strlen(p)) == 0;
            gt_hc_quote(p, qa, sizeof qa);
            gt_suite_check(c, "max_tokens", count_ok && prefix,
                           "max_tokens %d: completion_tokens %d, finish_reason \"%s\"; text "
                           "\"%s\" %s the start of the %d-token text",
                           k, rk.completion_tokens, rk.finish, qa, prefix ? "is" : "is not",
                           full_tokens);
            gt_hc_completion_free(&rk);
            free(p);
        }
    }

    /* stop: a string from the middle of the temperature-0 text. */
    size_t fl = full ? strlen(full) : 0;
    if (full && fl >= 8) {
        size_t at = fl / 2;
        while (at > 0 && ((unsigned char)full[at] & 0xc0) == 0x80)
            at--;
        size_t sl = 0;
        while (sl < 4 && at + sl < fl)
            sl++;
        while (at + sl < fl && ((unsigned char)full[at + sl] & 0xc0) == 0x80)
            sl++; /* finish a UTF-8 sequence */
        char stop[16];
        snprintf(stop, sizeof stop, "%.*s", (int)sl, full + at);
        size_t cut = (size_t)(strstr(full, stop) - full);
        cJSON *req = gt_hc_request(&t, prompt, n, 0);
        if (req)
            cJSON_AddStringToObject(req, "stop", stop);
        gt_hc_completion rs;
        char *p = complete(c, &t, "stop", req, &rs);
        if (p) {
            bool ok = strlen(p) == cut && strncmp(p, full, cut) == 0 &&
                      strcmp(rs.finish, "stop") == 0;
            char qs[40];
            gt_hc_quote(stop, qs, sizeof qs);
            gt_hc_quote(p, qa, sizeof qa);
            gt_suite_check(c, "stop", ok,
                           "stop \"%s\": text \"%s\" (%zu bytes, expected the %zu before its "
                           "first occurrence), finish_reason \"%s\"",
                           qs, qa, strlen(p), cut, rs.finish);
            gt_hc_completion_free(&rs);
            free(p);
        }
    } else if (full) {
        gt_suite_result(c, "stop", GT_ST_SKIP,
                        "the temperature-0 text has %zu bytes (finish_reason \"%s\"), too short "
                        "to take a stop string from",
                        fl, full_finish);
    }
    if (a)
        gt_hc_completion_free(&r1);
    free(a);

    /* Requests the server must refuse, each under its own short deadline. */
    int rc = refusals(c, &t, m, prompt);
    gt_promptset_free(&ps);
    if (rc != 0)
        return gt_err_set(err, "out of memory");
    return 0;
}
