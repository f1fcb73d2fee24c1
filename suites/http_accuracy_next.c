/* http_accuracy_next.c: the http accuracy suite's next-token method, for
 * servers that return no prompt logprobs (see http_accuracy.h).
 *
 * Position j of a chunk (predicting ids[j+1]) is one completion: the prompt
 * is ids[0..j] decoded (the BOS left to the server's own rule, as for every
 * prompt), max_tokens 1, temperature 0, logprobs n_top; the alternatives of
 * the one generated token are the server's distribution at j. Positions
 * whose prefix text does not tokenize back to ids[0..j] locally cannot be
 * sent as text faithfully and are left out (counted in the log). The first
 * request probes how many alternatives the server gives (n_top, then 5, then
 * 1 when it answers 400); the rest run n_conc at a time, in any order,
 * scored in order.
 *
 * On a chat cell the prefix is the content of one user message, which the
 * server wraps in its chat template: what comes back is the assistant's
 * first token, not the eval text's next one. So the reference there is the
 * same thing on the reference backend: the distribution after the user turn
 * rendered with the artifact's template and the generation prompt
 * (gt_hc_prompt_ids), one evaluation per prefix, cached under
 * "accuracy-http-chat". The comparison is as strict; only what is compared
 * differs (and ppl, which needs the eval token, is not reported). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "greedy.h"
#include "gt/backend.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "http_accuracy.h"
#include "metrics.h"

typedef struct job {
    char *prompt;
    int ref;          /* index into ref[] */
    int chunk, pos;   /* pos: the predicted token's index in the chunk */
    int n_prompt;     /* tokens of the prompt, BOS included */
    gt_hc_completion cr;
    int rc;
    gt_err e;
} job;

typedef struct pool {
    const gt_hc *t;
    job *jobs;
    int n, next, n_top;
    pthread_mutex_t mu;
} pool;

static cJSON *request(const gt_hc *t, const char *prompt, int n_top)
{
    cJSON *req = gt_hc_request(t, prompt, 1, 0);
    if (req)
        gt_hc_set_logprobs(t, req, n_top);
    return req;
}

static void run_job(const gt_hc *t, job *j, int n_top)
{
    cJSON *req = request(t, j->prompt, n_top);
    j->rc = req ? gt_hc_complete(t, req, &j->cr, &j->e) : gt_err_set(&j->e, "out of memory");
    cJSON_Delete(req);
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            return NULL;
        run_job(p->t, &p->jobs[i], p->n_top);
    }
}

/* The prefix of every planned position that survives the text round trip. */
static int plan(const gt_model *m, const gt_ha_chunk *ch, int n_chunks, job **out, int *n_out,
                int *n_left_out, gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    bool bos = gt_tokenizer_adds_bos(tok) && gt_tokenizer_bos(tok) >= 0;
    int total = 0;
    for (int i = 0; i < n_chunks; i++)
        total += ch[i].n_scored;
    job *jobs = calloc((size_t)total + 1, sizeof *jobs);
    int32_t *back = NULL;
    int n = 0, ref = 0, cap = 0;
    *n_left_out = 0;
    if (!jobs)
        return gt_err_set(err, "out of memory");
    for (int i = 0; i < n_chunks; i++) {
        const gt_ha_chunk *k = &ch[i];
        if (k->n + 8 > cap) {
            cap = k->n + 8;
            int32_t *b = realloc(back, (size_t)cap * sizeof *b);
            if (!b)
                goto oom;
            back = b;
        }
        for (int s = 0; s < k->n_scored; s++, ref++) {
            int j = k->first + s, from = bos ? 1 : 0;
            int need = gt_detokenize(tok, k->ids + from, j + 1 - from, NULL, 0);
            char *text = need >= 0 ? malloc((size_t)need + 1) : NULL;
            if (!text)
                goto oom;
            gt_detokenize(tok, k->ids + from, j + 1 - from, text, (size_t)need + 1);
            int nb = gt_greedy_tokenize(m, text, back, cap, err);
            if (nb < 0) {
                free(text);
                goto fail;
            }
            if (nb != j + 1 || memcmp(back, k->ids, (size_t)nb * sizeof *back) != 0) {
                free(text);
                ++*n_left_out;
                continue;
            }
            jobs[n++] = (job){.prompt = text, .ref = ref, .chunk = i, .pos = j + 1,
                              .n_prompt = j + 1};
        }
    }
    free(back);
    *out = jobs;
    *n_out = n;
    return 0;
oom:
    gt_err_set(err, "out of memory");
fail:
    for (int i = 0; i < n; i++)
        free(jobs[i].prompt);
    free(jobs);
    free(back);
    return -1;
}

/* A chat cell's reference: per job, the reference backend's distribution of
 * the assistant's first token after the rendered user turn (see the top). */
static int chat_reference(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const job *jobs,
                          int n, gt_ha_ref **out, gt_err *err)
{
    gt_sha256 h;
    gt_sha256_init(&h);
    for (int i = 0; i < n; i++)
        gt_sha256_update(&h, jobs[i].prompt, strlen(jobs[i].prompt) + 1);
    char hash[65], settings[64], key[65];
    gt_sha256_final_hex(&h, hash);
    snprintf(settings, sizeof settings, "n=%d;top=%d;chat-user-turn-v1", n, GT_HA_TOPN);
    gt_suite_ref_key(c, "accuracy-http-chat", hash, settings, key);
    size_t want = (size_t)n * sizeof(gt_ha_ref);
    void *data = NULL;
    size_t size = 0;
    int got = gt_suite_ref_get(c, key, &data, &size, err);
    if (got < 0)
        return -1;
    if (got == 0 && size == want) {
        *out = data;
        gt_suite_log(c, "chat reference cached (%d user turns)", n);
        return 0;
    }
    free(data);
    int n_vocab = gt_model_hparams(m)->n_vocab, max_n = 0;
    int32_t **ids = calloc((size_t)n, sizeof *ids);
    int *lens = calloc((size_t)n, sizeof *lens);
    gt_ha_ref *r = calloc((size_t)n + 1, sizeof *r);
    float *x = malloc((size_t)n_vocab * sizeof *x);
    double *lp = malloc((size_t)n_vocab * sizeof *lp);
    gt_backend *rb = NULL;
    gt_session *s = NULL;
    int rc = -1;
    double t0 = gt_suite_now();
    if (!ids || !lens || !r || !x || !lp) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        lens[i] = gt_hc_prompt_ids(t, m, jobs[i].prompt, NULL, 0, err);
        if (lens[i] < 0 || !(ids[i] = malloc((size_t)lens[i] * sizeof **ids + 1)))
            goto out;
        gt_hc_prompt_ids(t, m, jobs[i].prompt, ids[i], lens[i], err);
        max_n = lens[i] > max_n ? lens[i] : max_n;
    }
    gt_backend_config cfg = {.n_threads = c->n_threads};
    gt_session_params sp = {.n_ctx = max_n};
    if (gt_backend_open("reference", &cfg, &rb, err) != 0 ||
        gt_session_new(m, rb, &sp, &s, err) != 0) {
        gt_err_wrap(err, "reference backend");
        goto out;
    }
    int kk = n_vocab < GT_HA_TOPN ? n_vocab : GT_HA_TOPN;
    for (int i = 0; i < n; i++) {
        if (gt_session_truncate(s, 0, err) != 0 ||
            gt_session_eval(s, ids[i], lens[i], false, x, err) != 0) {
            gt_err_wrap(err, "reference backend, user turn %d", i);
            goto out;
        }
        gt_log_softmax(x, n_vocab, lp);
        r[i].argmax = gt_argmax(x, n_vocab);
        r[i].correct = -1;
        r[i].lp = NAN;
        gt_top_k(x, n_vocab, kk, r[i].top_id);
        for (int q = 0; q < GT_HA_TOPN; q++) {
            r[i].top_id[q] = q < kk ? r[i].top_id[q] : -1;
            r[i].top_lp[q] = q < kk ? (float)lp[r[i].top_id[q]] : -INFINITY;
        }
    }
    if (gt_suite_ref_put(c, key, "accuracy http chat reference (argmax, top-20 per user turn)", r,
                         want, err) != 0)
        goto out;
    gt_suite_log(c, "chat reference computed (%d user turns, %.2f s)", n, gt_suite_now() - t0);
    *out = r;
    r = NULL;
    rc = 0;
out:
    for (int i = 0; ids && i < n; i++)
        free(ids[i]);
    free(ids);
    free(lens);
    free(r);
    free(x);
    free(lp);
    gt_session_free(s);
    gt_backend_close(rb);
    return rc;
}

/* The first request, with as many alternatives as the server allows. */
static int probe(const gt_hc *t, job *j, int n_top, int *used)
{
    const int tries[3] = {n_top, 5, 1};
    for (int k = 0; k < 3; k++) {
        if (tries[k] > n_top || (k > 0 && tries[k] >= tries[k - 1]))
            continue;
        gt_hc_completion_free(&j->cr);
        j->e = (gt_err){{0}};
        run_job(t, j, tries[k]);
        *used = tries[k];
        if (j->rc == 0 || j->cr.status != 400)
            break;
    }
    return j->rc;
}

int gt_ha_next_token(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const gt_ha_chunk *ch,
                     int n_chunks, const gt_ha_ref *ref, int n_top, int n_conc, gt_ha_sum *s,
                     int *n_top_used, bool *failed, const gt_ha_vocab *v, gt_ha_wf *wf,
                     gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    bool bos = gt_tokenizer_adds_bos(tok) && gt_tokenizer_bos(tok) >= 0;
    job *jobs = NULL;
    gt_ha_ref *chat_ref = NULL;
    int n = 0, left_out = 0;
    *failed = false;
    if (plan(m, ch, n_chunks, &jobs, &n, &left_out, err) != 0)
        return -1;
    gt_suite_log(c, "next-token: %d positions as prefixes (%d left out: their text does not "
                    "tokenize back to the same ids)",
                 n, left_out);
    int rc = -1;
    if (n == 0) {
        gt_suite_check(c, "logprobs", false, "no scored position's prefix survives the text "
                                             "round trip (%d left out)",
                       left_out);
        *failed = true;
        rc = 0;
        goto out;
    }
    if (t->chat && chat_reference(c, t, m, jobs, n, &chat_ref, err) != 0)
        goto out;
    double t0 = gt_suite_now();
    if (probe(t, &jobs[0], n_top, n_top_used) != 0) {
        gt_suite_check(c, "logprobs", false, "next-token request at chunk %d position %d: %s",
                       jobs[0].chunk, jobs[0].pos, jobs[0].e.msg);
        *failed = true;
        rc = 0;
        goto out;
    }
    pool p = {.t = t, .jobs = jobs, .n = n, .next = 1, .n_top = *n_top_used};
    pthread_mutex_init(&p.mu, NULL);
    int n_thr = n_conc < 1 ? 1 : n_conc > 16 ? 16 : n_conc, started = 0;
    pthread_t thr[16];
    for (int i = 0; i < n_thr; i++)
        started += pthread_create(&thr[started], NULL, worker, &p) == 0;
    if (started == 0)
        worker(&p);
    for (int i = 0; i < started; i++)
        pthread_join(thr[i], NULL);
    pthread_mutex_destroy(&p.mu);
    gt_suite_log(c, "next-token: %d requests (%d alternatives each asked, %d in flight) in %.2f s",
                 n, *n_top_used, started ? started : 1, gt_suite_now() - t0);

    int bad = 0, count_bad = 0;
    char bad_msg[400] = "", count_msg[300] = "";
    gt_hc_alt alt[64];
    for (int i = 0; i < n; i++) {
        job *j = &jobs[i];
        if (j->rc != 0) {
            if (!bad++)
                snprintf(bad_msg, sizeof bad_msg, "chunk %d position %d: %s", j->chunk, j->pos,
                         j->e.msg);
            continue;
        }
        double lp_gen;
        int n_alt = gt_hc_alternatives(j->cr.logprobs, 0, alt, 64, &lp_gen);
        if (n_alt < 0) {
            if (!bad++)
                snprintf(bad_msg, sizeof bad_msg,
                         "chunk %d position %d: the reply has no logprobs for its generated "
                         "token (finish_reason \"%s\")",
                         j->chunk, j->pos, j->cr.finish);
            continue;
        }
        char where[64];
        snprintf(where, sizeof where, "chunk %d position %d (next-token)", j->chunk, j->pos);
        gt_ha_wf_check(wf, v, j->cr.logprobs, 0, true, where);
        int pt = j->cr.prompt_tokens, want = j->n_prompt;
        if (t->chat) { /* the rendered turn, not the raw prefix */
            gt_err e2 = {{0}};
            want = gt_hc_prompt_ids(t, m, j->prompt, NULL, 0, &e2);
        }
        if (pt >= 0 && pt != want && !(bos && pt == want - 1)) {
            if (!count_bad++)
                snprintf(count_msg, sizeof count_msg,
                         "chunk %d position %d: usage.prompt_tokens %d, the artifact's "
                         "tokenizer %d%s",
                         j->chunk, j->pos, pt, want, t->chat ? " (the user turn rendered with "
                                                               "its chat template)" : "");
            continue;
        }
        gt_ha_sum_add(s, m, chat_ref ? &chat_ref[i] : &ref[j->ref], alt, n_alt, NAN, j->chunk,
                      j->pos);
    }
    if (bad) {
        gt_suite_check(c, "logprobs", false, "%d of %d next-token requests failed; first: %s",
                       bad, n, bad_msg);
        *failed = true;
    }
    if (count_bad)
        gt_suite_check(c, "token_count", false, "%d of %d prefixes: %s", count_bad, n, count_msg);
    else
        gt_suite_check(c, "token_count", true,
                       "%d prefixes: the server's prompt token counts equal the artifact's "
                       "tokenizer's",
                       n);
    rc = 0;
out:
    for (int i = 0; i < n; i++) {
        free(jobs[i].prompt);
        gt_hc_completion_free(&jobs[i].cr);
    }
    free(jobs);
    free(chat_ref);
    return rc;
}
