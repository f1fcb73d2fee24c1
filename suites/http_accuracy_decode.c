/* http_accuracy_decode.c: the http accuracy suite's decode path (see
 * http_accuracy.h).
 *
 * The eval window is scored from prompt logprobs or one-token requests,
 * which a server computes by prefill: a server whose decode loop is broken
 * (its K/V cache not written after some position) passes those. So here the
 * server generates: each prompt of the prompt set (those that fit a context
 * of 512 with the generation, as the greedy check) is one completion of
 * decode_tokens (>= 64, default 64) tokens at temperature 0 with logprobs.
 * Token ids are not part of the OpenAI API, but servers add them: where the
 * reply gives a generated token's id (llama-server's content[i].id,
 * `gauntlet serve`'s "token_ids"), that id is the token, once it is an id
 * of the vocabulary whose name is the reply's (else the check fails naming
 * the position). Only the id tells control tokens apart: llama-server lists
 * the end token it stopped on as "" with no bytes. Without an id, each
 * token is found in the vocabulary by its name (http_wellformed.c: its
 * bytes when the reply gives them, else its text); where several tokens
 * share a name (every byte token that is not UTF-8 on its own is "\ufffd"
 * as text), the one the reference ranks highest.
 *   - greedy: the server's tokens against the reference's greedy
 *     continuation (cached as the greedy check's): decode_greedy_match,
 *     decode_first_div, as greedy_match / greedy_first_div;
 *   - teacher-forced: the reference backend evaluates the prompt and the
 *     server's own tokens (as a batch: its prefill path, which a fault in
 *     the decode path of every backend leaves alone), so every position the
 *     server generated has the reference's distribution on the same prefix,
 *     past any divergence. The check "decode" fails where the server's token is
 *     not the reference's argmax and not a near-tie (the reference's logprob
 *     of it within tie_margin of its top, default 0.1 nats: float noise
 *     flips near-ties, which is no bug), and where the server stops early
 *     where the reference does not end: a stop on an end token (EOS, or a
 *     chat cell's end of turn) that the reply lists, as llama-server does,
 *     is that token, judged as any other; a stop the reply does not explain
 *     (gauntlet serve lists no end token) needs the reference's argmax
 *     after the last token to be an end token, or one within tie_margin.
 *     The logprobs the server returned for its tokens are scored as the
 *     prompt's (gt_ha_sum_add):
 *     decode_drift_top1, decode_drift_kld_mean/max,
 *     decode_logprob_max_abs_diff, judged by the matrix's tolerances.
 * The teacher-forced reference depends on the server's text, so it is not
 * cached: one batch per prompt (more where token names are ambiguous). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "http_accuracy.h"
#include "metrics.h"
#include "promptset.h"

#define DECODE_N_CTX 512 /* as the greedy check (accuracy.c) */

typedef struct dec {
    gt_suite_ctx *c;
    const gt_hc *t;
    const gt_model *m;
    const gt_ha_vocab *v;
    gt_session *s;
    float *x;          /* the reference's logits, a row per position of one prompt */
    size_t x_rows;
    double *lp;        /* one row's log-softmax */
    int32_t *seq;      /* the prompt and the server's tokens (DECODE_N_CTX) */
    int32_t *cand;     /* the ids of one token name (n_vocab) */
    int n_vocab, n_dec;
    double margin;
    gt_ha_sum sum;
    long same, total, positions;
    int used, ties, bad;
    char tie_msg[320], bad_msg[480];
} dec;

/* Token id as a message shows it: its text, or for a control token (no
 * bytes: "<|im_end|>", "</s>") its stored piece. */
static void shown(const gt_model *m, int32_t id, char *out, size_t cap)
{
    char p[64];
    const char *stored = gt_token_piece(gt_model_tokenizer(m), id);
    if (gt_hc_piece(m, id, p, sizeof p) == 0 && stored)
        snprintf(p, sizeof p, "%s", stored);
    gt_hc_quote(p, out, cap);
}

/* A near-tie or a divergence at one position (stop: the server's end token,
 * on which it stopped): what the message says. */
static void note(dec *d, bool tie, bool stop, const char *prompt, int k, int32_t srv, int32_t ref,
                 double gap)
{
    char qa[80], qb[80];
    shown(d->m, srv, qa, sizeof qa);
    shown(d->m, ref, qb, sizeof qb);
    if (tie && !d->ties++)
        snprintf(d->tie_msg, sizeof d->tie_msg, "; first near-tie: prompt %s token %d, \"%s\" "
                                                "for \"%s\" (gap %.3g)",
                 prompt, k, qa, qb, gap);
    if (!tie && !d->bad++)
        snprintf(d->bad_msg, sizeof d->bad_msg,
                 "prompt %s token %d: the server %s \"%s\" where the reference, "
                 "teacher-forced on the server's text, has \"%s\" (logprob gap %.3g > tie_margin "
                 "%g)",
                 prompt, k, stop ? "stopped on its end token" : "generated", qa, qb, gap,
                 d->margin);
}

static bool is_end(const dec *d, int32_t id)
{
    return id == gt_tokenizer_eos(gt_model_tokenizer(d->m)) ||
           (id >= 0 && id == gt_hc_turn_end(d->t, d->m));
}

#define TOK_NONE (-1)  /* no token of the vocabulary has the reply's name */
#define TOK_AMBIG (-2) /* several have it and no id picks one: the reference does */
#define TOK_BAD (-3)   /* the reply's id is not a token of that name */

/* The id of generated token k. When the reply gives one (llama-server's
 * content[k].id, gauntlet serve's token_ids[k]) it is the token, once it
 * checks out: an id of the vocabulary whose name is the reply's (a control
 * token such as "<|im_end|>" comes as "" with no bytes, which names every
 * control token, so only the id tells them apart); any other is TOK_BAD
 * with why naming it. Without an id, by its name: unambiguous, TOK_AMBIG
 * or TOK_NONE. */
static int32_t token_id(dec *d, const gt_hc_completion *cr, const char *pid, int k, char *why,
                        size_t why_cap)
{
    gt_hc_alt own;
    if (gt_hc_token(cr->logprobs, k, &own) != 0)
        return TOK_NONE;
    int nc = gt_ha_vocab_ids(d->v, &own, d->cand, d->n_vocab);
    if (own.id) {
        double x = cJSON_IsNumber(own.id) ? own.id->valuedouble : -1;
        bool in = x >= 0 && x < d->n_vocab && x == (double)(int32_t)x;
        for (int q = 0; in && q < nc && q < d->n_vocab; q++)
            if (d->cand[q] == (int32_t)x)
                return d->cand[q];
        char qt[80], qv[80], *sent = cJSON_PrintUnformatted(own.id);
        gt_hc_quote(own.text, qt, sizeof qt);
        int at = snprintf(why, why_cap, "prompt %s token %d: the reply gives id %s for the "
                                        "generated token \"%s\", ",
                          pid, k, sent ? sent : "(unprintable)", qt);
        size_t off = at < 0 ? 0 : (size_t)at < why_cap ? (size_t)at : why_cap - 1;
        if (in) {
            shown(d->m, (int32_t)x, qv, sizeof qv);
            snprintf(why + off, why_cap - off, "but the vocabulary's token of that id is \"%s\"",
                     qv);
        } else {
            snprintf(why + off, why_cap - off, "which is no id of the vocabulary (0..%d)",
                     d->n_vocab - 1);
        }
        free(sent);
        return TOK_BAD;
    }
    if (nc <= 0)
        return TOK_NONE;
    return nc == 1 ? d->cand[0] : TOK_AMBIG;
}

/* Among the tokens named as token k, the one the reference ranks highest
 * on the logits row x. */
static int32_t resolve_by_ref(dec *d, const gt_hc_completion *cr, int k, const float *x)
{
    gt_hc_alt own;
    gt_hc_token(cr->logprobs, k, &own);
    int nc = gt_ha_vocab_ids(d->v, &own, d->cand, d->n_vocab);
    int32_t id = -1;
    for (int q = 0; q < nc && q < d->n_vocab; q++)
        if (id < 0 || x[d->cand[q]] > x[id])
            id = d->cand[q];
    return id;
}

/* Scores one reply: prompt ids[0..np), the server's logprobs, the
 * reference's greedy tokens ref[0..n_dec). The reference is teacher-forced
 * in batches (its prefill path, so a fault of the decode path on every
 * backend does not reach it), cut only where a token's name is ambiguous
 * and its logits must pick it. 1 when the reply is unusable (why set), 0
 * when scored, -1 with err. */
static int score(dec *d, const char *pid, const int32_t *ids, int np, const gt_hc_completion *cr,
                 const int32_t *ref, char *why, size_t why_cap, gt_err *err)
{
    int n_got = gt_hc_logprob_tokens(cr->logprobs);
    bool stopped = strcmp(cr->finish, "stop") == 0;
    if (n_got < 0 || n_got > d->n_dec || (!stopped && n_got != d->n_dec)) {
        snprintf(why, why_cap, "prompt %s: %d tokens in the logprobs with finish_reason \"%s\" "
                               "(asked for %d)",
                 pid, n_got, cr->finish, d->n_dec);
        return 1;
    }
    /* seq: the prompt, then the server's tokens; row r of d->x predicts
     * seq[r + 1]. */
    int n = np + n_got;
    memcpy(d->seq, ids, (size_t)np * sizeof *d->seq);
    for (int k = 0; k < n_got; k++) {
        d->seq[np + k] = token_id(d, cr, pid, k, why, why_cap);
        if (d->seq[np + k] == TOK_BAD)
            return 1;
        if (d->seq[np + k] == TOK_NONE) {
            gt_hc_alt own = {0};
            char qt[80];
            gt_hc_token(cr->logprobs, k, &own);
            gt_hc_quote(own.text ? own.text : "(none)", qt, sizeof qt);
            snprintf(why, why_cap, "prompt %s token %d: the generated token \"%s\" is no token "
                                   "of the vocabulary, so the reference cannot follow it",
                     pid, k, qt);
            return 1;
        }
    }
    if ((size_t)n > d->x_rows) {
        float *x = realloc(d->x, (size_t)n * (size_t)d->n_vocab * sizeof *x);
        if (!x)
            return gt_err_set(err, "out of memory");
        d->x = x;
        d->x_rows = (size_t)n;
    }
    if (gt_session_truncate(d->s, 0, err) != 0)
        return -1;
    for (int at = 0; at < n;) {
        int end = at + 1;
        while (end < n && d->seq[end] != TOK_AMBIG)
            end++;
        if (gt_session_eval(d->s, d->seq + at, end - at, true, d->x + (size_t)at * d->n_vocab,
                            err) != 0)
            return gt_err_wrap(err, "reference backend, prompt %s", pid);
        if (end < n)
            d->seq[end] = resolve_by_ref(d, cr, end - np, d->x + (size_t)(end - 1) * d->n_vocab);
        at = end;
    }
    /* llama-server lists the end token it stopped on among its tokens
     * (gauntlet serve does not): then that token is judged below like any
     * other, and nothing is to follow it. */
    bool on_end = stopped && n_got > 0 && is_end(d, d->seq[n - 1]);
    int kk = d->n_vocab < GT_HA_TOPN ? d->n_vocab : GT_HA_TOPN, same = 0;
    bool diverged = false;
    gt_hc_alt alt[64];
    for (int k = 0; k < n_got; k++) {
        const float *x = d->x + (size_t)(np + k - 1) * d->n_vocab;
        gt_log_softmax(x, d->n_vocab, d->lp);
        int32_t a = gt_argmax(x, d->n_vocab), id = d->seq[np + k];
        gt_ha_ref r = {.argmax = a, .correct = id, .lp = (float)d->lp[id]};
        gt_top_k(x, d->n_vocab, kk, r.top_id);
        for (int q = 0; q < GT_HA_TOPN; q++) {
            r.top_id[q] = q < kk ? r.top_id[q] : -1;
            r.top_lp[q] = q < kk ? (float)d->lp[r.top_id[q]] : -INFINITY;
        }
        double own_lp;
        int n_alt = gt_hc_alternatives(cr->logprobs, k, alt, 64, &own_lp);
        gt_ha_sum_add(&d->sum, d->m, &r, alt, n_alt > 0 ? n_alt : 0, own_lp, d->used, k);
        if (id != a)
            note(d, d->lp[a] - d->lp[id] <= d->margin, on_end && k == n_got - 1, pid, k, id, a,
                 d->lp[a] - d->lp[id]);
        if (!diverged) {
            char p1[64], p2[64];
            gt_hc_piece(d->m, id, p1, sizeof p1);
            gt_hc_piece(d->m, ref[k], p2, sizeof p2);
            diverged = strcmp(p1, p2) != 0;
            same += !diverged;
        }
        d->positions++;
    }
    if (stopped && n_got < d->n_dec && !on_end) {
        /* The server ended here without saying on what: the reference must
         * end too, or nearly. */
        const float *x = d->x + (size_t)(n - 1) * d->n_vocab;
        gt_log_softmax(x, d->n_vocab, d->lp);
        int32_t a = gt_argmax(x, d->n_vocab), eos = gt_tokenizer_eos(gt_model_tokenizer(d->m));
        int32_t te = gt_hc_turn_end(d->t, d->m), end = eos;
        if (te >= 0 && (eos < 0 || d->lp[te] > d->lp[eos]))
            end = te;
        if (end < 0 || (!is_end(d, a) && d->lp[a] - d->lp[end] > d->margin)) {
            if (!d->bad++)
                snprintf(d->bad_msg, sizeof d->bad_msg,
                         "prompt %s: the server stopped after %d tokens (finish_reason stop) "
                         "where the reference, teacher-forced on its text, does not end (gap "
                         "%.3g > tie_margin %g)",
                         pid, n_got, end < 0 ? INFINITY : d->lp[a] - d->lp[end], d->margin);
        }
    }
    /* As gt_hc_agreement: what the reference would say after its end does
     * not count. */
    if (stopped && (on_end || n_got < d->n_dec) && !diverged &&
        is_end(d, ref[on_end ? n_got - 1 : n_got]))
        same = d->n_dec;
    d->same += same;
    d->total += d->n_dec;
    d->used++;
    return 0;
}

int gt_ha_decode(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const gt_ha_vocab *v,
                 int n_top, gt_ha_wf *wf, gt_err *err)
{
    dec d = {.c = c, .t = t, .m = m, .v = v, .n_vocab = gt_model_hparams(m)->n_vocab,
             .n_dec = (int)gt_suite_int(c, "decode_tokens", 64),
             .margin = gt_suite_num(c, "tie_margin", 0.1)};
    if (d.n_dec < 64 || d.n_dec > 448)
        return gt_err_set(err, "accuracy setting decode_tokens: 64..448 (the decode path is "
                               "judged on at least 64 generated tokens), got %d",
                          d.n_dec);
    if (!(d.margin >= 0 && d.margin <= 10))
        return gt_err_set(err, "accuracy setting tie_margin: 0..10 nats, got %g", d.margin);
    gt_ha_sum_init(&d.sum);
    gt_promptset ps;
    if (gt_promptset_load(c, d.n_vocab, (int)gt_suite_int(c, "max_prompts", 0), &ps, err) != 0)
        return -1;
    const char **prompts = malloc((size_t)ps.n * sizeof *prompts + 1);
    int32_t *ids = malloc(DECODE_N_CTX * sizeof *ids), *ref = NULL;
    d.seq = malloc(DECODE_N_CTX * sizeof *d.seq);
    d.lp = malloc((size_t)d.n_vocab * sizeof *d.lp);
    d.cand = malloc((size_t)d.n_vocab * sizeof *d.cand);
    gt_backend *rb = NULL;
    int rc = -1;
    if (!prompts || !ids || !d.lp || !d.cand || !d.seq) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < ps.n; i++)
        prompts[i] = ps.p[i].text;
    char settings[64];
    snprintf(settings, sizeof settings, "n_gen=%d;n=%d;v1", d.n_dec, ps.n);
    bool cached;
    if (gt_hc_ref_greedy(c, t, m, "accuracy-greedy", ps.sha256, settings, prompts, ps.n, d.n_dec,
                         DECODE_N_CTX, &ref, &cached, err) != 0)
        goto out;
    gt_backend_config cfg = {.n_threads = c->n_threads};
    gt_session_params sp = {.n_ctx = DECODE_N_CTX};
    if (gt_backend_open("reference", &cfg, &rb, err) != 0 ||
        gt_session_new(m, rb, &sp, &d.s, err) != 0) {
        gt_err_wrap(err, "reference backend");
        goto out;
    }
    double t0 = gt_suite_now();
    for (int i = 0; i < ps.n; i++) {
        int np = gt_hc_prompt_ids(t, m, ps.p[i].text, ids, DECODE_N_CTX, err);
        if (np < 0)
            goto out;
        if (np < 1 || np + d.n_dec > DECODE_N_CTX)
            continue;
        cJSON *req = gt_hc_request(t, ps.p[i].text, d.n_dec, 0);
        if (req)
            gt_hc_set_logprobs(t, req, n_top);
        gt_hc_completion cr;
        gt_err e = {{0}};
        int r = req ? gt_hc_complete(t, req, &cr, &e) : gt_err_set(&e, "out of memory");
        cJSON_Delete(req);
        if (r != 0) {
            gt_suite_check(c, "decode", false, "prompt %s, %d tokens: %s", ps.p[i].id, d.n_dec,
                           e.msg);
            rc = 0;
            goto out;
        }
        char where[96], why[480] = "";
        snprintf(where, sizeof where, "prompt %s (decode)", ps.p[i].id);
        int n_lp = gt_hc_logprob_tokens(cr.logprobs);
        for (int k = 0; k < n_lp; k++)
            gt_ha_wf_check(wf, v, cr.logprobs, k, true, where);
        r = score(&d, ps.p[i].id, ids, np, &cr, ref + (size_t)i * d.n_dec, why, sizeof why, err);
        gt_hc_completion_free(&cr);
        if (r < 0)
            goto out;
        if (r == 1) {
            gt_suite_check(c, "decode", false, "%s", why);
            rc = 0;
            goto out;
        }
    }
    if (d.used == 0) {
        gt_suite_result(c, "decode", GT_ST_SKIP, "no prompt of %s fits a context of %d with %d "
                                                 "generated tokens",
                        ps.path, DECODE_N_CTX, d.n_dec);
        rc = 0;
        goto out;
    }
    gt_suite_log(c, "decode: %d prompts x %d tokens through the server and teacher-forced on "
                    "the reference in %.2f s",
                 d.used, d.n_dec, gt_suite_now() - t0);
    if (d.bad)
        gt_suite_check(c, "decode", false, "%d of %ld generated tokens are neither the "
                                           "reference's argmax nor a near-tie; first: %s",
                       d.bad, d.positions, d.bad_msg);
    else
        gt_suite_check(c, "decode", true,
                       "%s reference greedy; %d prompts, %ld generated tokens: %ld of %ld before "
                       "the first divergence from the reference's greedy output; every token is "
                       "the argmax of the reference teacher-forced on the server's text or "
                       "within tie_margin %g of it (%d near-ties%s)",
                       cached ? "cached" : "computed", d.used, d.positions, d.same, d.total,
                       d.margin, d.ties, d.tie_msg);
    gt_suite_metric(c, "decode_tokens", (double)d.positions);
    gt_suite_metric(c, "decode_greedy_match", (double)d.same / (double)d.total);
    gt_suite_metric(c, "decode_first_div", (double)d.same / d.used);
    gt_suite_metric(c, "decode_near_ties", d.ties);
    if (d.sum.scored > 0) {
        gt_suite_metric(c, "decode_drift_top1", (double)d.sum.agree / (double)d.sum.scored);
        gt_suite_metric(c, "decode_drift_kld_mean", d.sum.kld_sum / (double)d.sum.scored);
        gt_suite_metric(c, "decode_drift_kld_max", d.sum.kld_max);
        gt_suite_metric(c, "decode_logprob_max_abs_diff", d.sum.lp_max);
    }
    rc = 0;
out:
    gt_session_free(d.s);
    gt_backend_close(rb);
    free(prompts);
    free(ids);
    free(ref);
    free(d.x);
    free(d.lp);
    free(d.cand);
    free(d.seq);
    gt_promptset_free(&ps);
    return rc;
}
