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
 * scored in order. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/tokenizer.h"
#include "http_accuracy.h"

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
        cJSON_AddNumberToObject(req, "logprobs", n_top);
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
                     int *n_top_used, bool *failed, gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    bool bos = gt_tokenizer_adds_bos(tok) && gt_tokenizer_bos(tok) >= 0;
    job *jobs = NULL;
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
        int pt = j->cr.prompt_tokens;
        if (pt >= 0 && pt != j->n_prompt && !(bos && pt == j->n_prompt - 1)) {
            if (!count_bad++)
                snprintf(count_msg, sizeof count_msg,
                         "chunk %d position %d: usage.prompt_tokens %d, the artifact's "
                         "tokenizer %d",
                         j->chunk, j->pos, pt, j->n_prompt);
            continue;
        }
        gt_ha_sum_add(s, m, &ref[j->ref], alt, n_alt, NAN, j->chunk, j->pos);
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
    return rc;
}
