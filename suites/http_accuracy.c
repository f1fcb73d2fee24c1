/* http_accuracy.c: the accuracy suite against an OpenAI-compatible server,
 * through the logprobs it returns.
 *
 * A server gives no logits, only logprobs of tokens and of their top-N
 * alternatives keyed by their text. So this measures what that allows, on
 * the accuracy suite's window: the eval text is tokenized with the
 * artifact's tokenizer and cut into the same chunks (n_ctx tokens, BOS first
 * when the model adds one, the second half of each scored, max_scored). The
 * server's view of each scored position comes one of two ways (the setting
 * "method"; "auto" probes once per cell, on the first chunk):
 *   echo        each chunk's text (its tokens decoded) as one completion with
 *               echo, max_tokens 0 (1 when a server rejects 0, the generated
 *               token then ignored), logprobs N and temperature 0; positions
 *               are aligned by tokenizing that text locally: the server's
 *               token count must equal ours (check token_count; a server
 *               that leaves the BOS out of the echo is aligned one off);
 *   next-token  when the echo carries no prompt logprobs (llama-server, chat
 *               endpoints): one request per position on its prefix
 *               (http_accuracy_next.c).
 * At each scored position (http_accuracy_score.c):
 *   drift_top1   the server's top-1 alternative is the text of the reference
 *                backend's argmax on the artifact; the check top1 fails below
 *                min_top1 (default 0.9), the metric takes the matrix's
 *                tolerance as the normal suite's does;
 *   drift_kld_topn_mean/max   KL(reference || server) with the tokens both
 *                top lists name kept apart and the rest lumped;
 *   ppl, drift_ppl_ratio   from the eval tokens' logprobs, when the server
 *                gave them at every position (the echo method);
 *   logprob_max_abs_diff   max |server - reference| logprob over the eval
 *                token and the shared alternatives (0 up to printing
 *                precision when the server computes what the reference does);
 *   echo_method, logprob_alternatives   how it was scored, and the fewest
 *                alternatives any position had.
 * Then greedy agreement over the prompt set as the normal suite (metrics
 * greedy_match, greedy_first_div; its cache entry), judged on text; then
 * the decode path (http_accuracy_decode.c: decode_tokens >= 64 generated
 * tokens per prompt, the check "decode" and the decode_* metrics); then
 * the check logprobs_wellformed over every logprobs reply of the suite
 * (http_wellformed.c: alternatives are vocabulary tokens, probabilities sum
 * to at most 1, a token generated at temperature 0 is the top one).
 *
 * The reference (argmax, eval token and its logprob, top GT_HA_TOPN per
 * scored position) is cached under "accuracy-http", keyed by artifact, eval
 * text and window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "greedy.h"
#include "http_accuracy.h"
#include "metrics.h"
#include "promptset.h"
#include "suite.h"

#define HTTP_BLOB_MAGIC 0x47544852u /* "GTHR" */

typedef gt_ha_chunk chunk;
typedef gt_ha_ref ref_pos;

/* The chunks of the accuracy window; returns the count, -1 with err. */
static int make_chunks(gt_suite_ctx *c, const gt_model *m, int n_ctx, int max_scored,
                       chunk **out, int *n_pos, char hash[65], char *path, size_t path_cap,
                       gt_err *err)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    char *text;
    size_t len;
    if (gt_evaltext_load(c, gt_model_hparams(m)->n_vocab, &text, &len, hash, path, path_cap,
                         err) != 0)
        return -1;
    int32_t *toks = malloc((len + 8) * sizeof *toks);
    int n_tok = toks ? gt_tokenize(t, text, len, false, toks, (int)len + 8, err) : -1;
    free(text);
    if (n_tok <= 0 || n_tok > (int)len + 8) {
        free(toks);
        return n_tok < 0 ? -1 : gt_err_set(err, "cannot tokenize %s", path);
    }
    bool bos = gt_tokenizer_adds_bos(t) && gt_tokenizer_bos(t) >= 0;
    int stride = bos ? n_ctx - 1 : n_ctx, per_chunk = n_ctx / 2;
    int n_chunks = n_tok / stride;
    if (max_scored > 0 && n_chunks > (max_scored + per_chunk - 1) / per_chunk)
        n_chunks = (max_scored + per_chunk - 1) / per_chunk;
    if (n_chunks < 1) {
        free(toks);
        return gt_err_set(err, "%s has %d tokens, fewer than one chunk of %d", path, n_tok,
                          n_ctx);
    }
    chunk *ch = calloc((size_t)n_chunks, sizeof *ch);
    if (!ch) {
        free(toks);
        return gt_err_set(err, "out of memory");
    }
    int budget = max_scored > 0 ? max_scored : n_chunks * per_chunk, pos = 0;
    for (int i = 0; i < n_chunks; i++) {
        const int32_t *src = toks + (size_t)i * stride;
        int need = gt_detokenize(t, src, stride, NULL, 0);
        ch[i].text = need >= 0 ? malloc((size_t)need + 1) : NULL;
        if (!ch[i].text)
            goto oom;
        gt_detokenize(t, src, stride, ch[i].text, (size_t)need + 1);
        int cap = n_ctx * 2 + 8;
        ch[i].ids = malloc((size_t)cap * sizeof *ch[i].ids);
        if (!ch[i].ids)
            goto oom;
        ch[i].n = gt_greedy_tokenize(m, ch[i].text, ch[i].ids, cap, err);
        if (ch[i].n < 0 || ch[i].n > cap) {
            gt_err_set(err, "chunk %d of %s: cannot tokenize its text again", i, path);
            goto fail;
        }
        ch[i].first = n_ctx / 2 - 1;
        int ns = ch[i].n - 1 - ch[i].first;
        if (ns > budget - pos)
            ns = budget - pos;
        ch[i].n_scored = ns > 0 ? ns : 0;
        pos += ch[i].n_scored;
    }
    free(toks);
    *out = ch;
    *n_pos = pos;
    return n_chunks;
oom:
    gt_err_set(err, "out of memory");
fail:
    for (int i = 0; i < n_chunks; i++) {
        free(ch[i].text);
        free(ch[i].ids);
    }
    free(ch);
    free(toks);
    return -1;
}

/* The reference at every scored position, cached or computed. */
static int reference(gt_suite_ctx *c, const gt_model *m, const chunk *ch, int n_chunks,
                     int n_pos, int n_ctx, const char *hash, ref_pos **out, bool *cached,
                     gt_err *err)
{
    char settings[96], key[65];
    snprintf(settings, sizeof settings, "n_ctx=%d;n_pos=%d;top=%d;http-v2", n_ctx, n_pos, GT_HA_TOPN);
    gt_suite_ref_key(c, "accuracy-http", hash, settings, key);
    size_t want = 8 + (size_t)n_pos * sizeof(ref_pos);
    void *data = NULL;
    size_t size = 0;
    int got = gt_suite_ref_get(c, key, &data, &size, err);
    if (got < 0)
        return -1;
    uint32_t head[2];
    if (got == 0 && size == want && (memcpy(head, data, 8), head[0] == HTTP_BLOB_MAGIC) &&
        (int)head[1] == n_pos) {
        ref_pos *r = malloc((size_t)n_pos * sizeof *r + 1);
        if (!r) {
            free(data);
            return gt_err_set(err, "out of memory");
        }
        memcpy(r, (char *)data + 8, (size_t)n_pos * sizeof *r);
        free(data);
        *out = r;
        *cached = true;
        return 0;
    }
    free(data);
    *cached = false;
    int n_vocab = gt_model_hparams(m)->n_vocab, max_n = 0;
    for (int i = 0; i < n_chunks; i++)
        max_n = ch[i].n > max_n ? ch[i].n : max_n;
    char *blob = malloc(want);
    float *x = malloc((size_t)max_n * (size_t)n_vocab * sizeof *x);
    double *lp = malloc((size_t)n_vocab * sizeof *lp);
    gt_backend *rb = NULL;
    gt_session *s = NULL;
    gt_backend_config cfg = {.n_threads = c->n_threads};
    gt_session_params sp = {.n_ctx = max_n};
    int rc = -1;
    if (!blob || !x || !lp) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    if (gt_backend_open("reference", &cfg, &rb, err) != 0 ||
        gt_session_new(m, rb, &sp, &s, err) != 0) {
        gt_err_wrap(err, "reference backend");
        goto out;
    }
    head[0] = HTTP_BLOB_MAGIC;
    head[1] = (uint32_t)n_pos;
    memcpy(blob, head, 8);
    ref_pos *r = (ref_pos *)(blob + 8);
    int pos = 0;
    for (int i = 0; i < n_chunks && pos < n_pos; i++) {
        if (ch[i].n_scored == 0)
            continue;
        if (gt_session_truncate(s, 0, err) != 0 ||
            gt_session_eval(s, ch[i].ids, ch[i].n, true, x, err) != 0) {
            gt_err_wrap(err, "reference backend, chunk %d", i);
            goto out;
        }
        for (int k = 0; k < ch[i].n_scored; k++, pos++) {
            int j = ch[i].first + k;
            const float *xj = x + (size_t)j * n_vocab;
            gt_log_softmax(xj, n_vocab, lp);
            ref_pos p = {.argmax = gt_argmax(xj, n_vocab), .correct = ch[i].ids[j + 1],
                         .lp = (float)lp[ch[i].ids[j + 1]]};
            int kk = n_vocab < GT_HA_TOPN ? n_vocab : GT_HA_TOPN;
            gt_top_k(xj, n_vocab, kk, p.top_id);
            for (int q = 0; q < GT_HA_TOPN; q++) {
                p.top_id[q] = q < kk ? p.top_id[q] : -1;
                p.top_lp[q] = q < kk ? (float)lp[p.top_id[q]] : -INFINITY;
            }
            memcpy(&r[pos], &p, sizeof p);
        }
    }
    if (gt_suite_ref_put(c, key,
                         "accuracy http reference (argmax, token, its logprob, top-20 per position)",
                         blob, want, err) != 0)
        goto out;
    ref_pos *res = malloc((size_t)n_pos * sizeof *res + 1);
    if (!res) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    memcpy(res, blob + 8, (size_t)n_pos * sizeof *res);
    *out = res;
    rc = 0;
out:
    gt_session_free(s);
    gt_backend_close(rb);
    free(blob);
    free(x);
    free(lp);
    return rc;
}

/* Greedy continuations of the prompt set vs the reference, on text. */
static int greedy_http(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, gt_err *err)
{
    int n_gen = (int)gt_suite_int(c, "n_gen", 16);
    if (n_gen <= 0)
        return 0;
    gt_promptset ps;
    if (gt_promptset_load(c, gt_model_hparams(m)->n_vocab, (int)gt_suite_int(c, "max_prompts", 0),
                          &ps, err) != 0)
        return -1;
    const int n_ctx = 512; /* as accuracy.c */
    const char **prompts = malloc((size_t)ps.n * sizeof *prompts);
    int32_t *ids = malloc(n_ctx * sizeof *ids);
    int32_t *ref = NULL;
    int rc = -1;
    if (!prompts || !ids) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < ps.n; i++)
        prompts[i] = ps.p[i].text;
    char settings[64];
    snprintf(settings, sizeof settings, "n_gen=%d;n=%d;v1", n_gen, ps.n);
    bool cached;
    if (gt_hc_ref_greedy(c, t, m, "accuracy-greedy", ps.sha256, settings, prompts, ps.n, n_gen,
                         n_ctx, &ref, &cached, err) != 0)
        goto out;
    long same = 0, total = 0;
    int used = 0, identical = 0;
    for (int i = 0; i < ps.n; i++) {
        int np = gt_hc_prompt_ids(t, m, ps.p[i].text, ids, n_ctx, err);
        if (np < 0)
            goto out;
        if (np < 1 || np + n_gen > n_ctx)
            continue;
        cJSON *req = gt_hc_request(t, ps.p[i].text, n_gen, 0);
        gt_hc_completion cr;
        gt_err e = {{0}};
        int r = req ? gt_hc_complete(t, req, &cr, &e) : gt_err_set(&e, "out of memory");
        cJSON_Delete(req);
        if (r != 0) {
            gt_suite_check(c, "greedy", false, "prompt %s: %s", ps.p[i].id, e.msg);
            rc = 0;
            goto out;
        }
        int k = gt_hc_agreement(t, m, ref + (size_t)i * n_gen, n_gen, cr.text, cr.finish);
        gt_hc_completion_free(&cr);
        same += k;
        total += n_gen;
        identical += k == n_gen;
        used++;
    }
    gt_accuracy_greedy_result(c, ps.path, n_ctx, cached, used, identical, n_gen, same, total,
                              " (server text)");
    rc = 0;
out:
    free(prompts);
    free(ids);
    free(ref);
    gt_promptset_free(&ps);
    return rc;
}

/* The echo method: each chunk as one completion with echo and its prompt
 * logprobs. Returns 1 (why set) when fallback is allowed and the first
 * chunk's reply has no prompt logprobs or echo is refused; 0 when done (a
 * server failure is a failed check and sets *failed); -1 with err. */
static int score_echo(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const chunk *ch,
                      int n_chunks, const ref_pos *ref, int n_top, bool fallback, gt_ha_sum *s,
                      bool *failed, bool *extra_used, const gt_ha_vocab *v, gt_ha_wf *wf,
                      char *why, size_t why_cap, gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    bool bos = gt_tokenizer_adds_bos(tok) && gt_tokenizer_bos(tok) >= 0;
    int extra = 0; /* generated tokens in each answer (1 when max_tokens 0 is refused) */
    int count_bad = 0, pos = 0, done = 0;
    char count_msg[400] = "";
    gt_hc_alt alt[64];
    for (int i = 0; i < n_chunks; i++) {
        const chunk *k = &ch[i];
        if (k->n_scored == 0)
            continue;
        gt_hc_completion cr;
        gt_err e = {{0}};
        int r = -1;
        for (int attempt = 0; attempt < 2; attempt++) {
            cJSON *req = gt_hc_request(t, k->text, extra, 0);
            if (!req)
                return gt_err_set(err, "out of memory");
            cJSON_AddBoolToObject(req, "echo", true);
            gt_hc_set_logprobs(t, req, n_top);
            r = gt_hc_complete(t, req, &cr, &e);
            cJSON_Delete(req);
            if (r == 0 || cr.status != 400 || extra == 1)
                break;
            gt_suite_log(c, "max_tokens 0 refused (%s); asking for 1", e.msg);
            extra = 1;
        }
        *extra_used = extra == 1;
        int n_lp = r == 0 ? gt_hc_logprob_tokens(cr.logprobs) : -1;
        /* llama-server ignores echo and generates a token even for max_tokens 0. */
        int gen = r == 0 && cr.completion_tokens > extra ? cr.completion_tokens : extra;
        if (fallback && done == 0 && (r != 0 ? cr.status == 400 : n_lp <= gen)) {
            snprintf(why, why_cap, "%s",
                     r != 0 ? e.msg
                            : n_lp < 0 ? "the reply has no logprobs"
                                       : "the reply's logprobs cover the generated tokens only");
            if (r == 0)
                gt_hc_completion_free(&cr);
            return 1;
        }
        if (r != 0) {
            gt_suite_check(c, "logprobs", false, "chunk %d: %s", i, e.msg);
            *failed = true;
            return 0;
        }
        if (n_lp <= gen) {
            gt_suite_check(c, "logprobs", false,
                           "chunk %d: the echo reply has no prompt logprobs (neither "
                           "logprobs.tokens/top_logprobs nor logprobs.content; finish_reason "
                           "\"%s\")",
                           i, cr.finish);
            gt_hc_completion_free(&cr);
            *failed = true;
            return 0;
        }
        done++;
        int n_srv = n_lp - extra;
        int off = n_srv == k->n ? 0 : bos && n_srv == k->n - 1 ? -1 : 1 << 30;
        bool usage_ok = cr.prompt_tokens < 0 || cr.prompt_tokens == k->n ||
                        (off == -1 && cr.prompt_tokens == k->n - 1);
        if (off == 1 << 30 || !usage_ok) {
            if (!count_bad++)
                snprintf(count_msg, sizeof count_msg,
                         "chunk %d: the server has %d prompt tokens (usage.prompt_tokens %d), "
                         "the artifact's tokenizer %d",
                         i, n_srv, cr.prompt_tokens, k->n);
            gt_hc_completion_free(&cr);
            pos += k->n_scored;
            continue;
        }
        char where[64];
        snprintf(where, sizeof where, "chunk %d (echo)", i);
        for (int q = 0; q < n_lp; q++) /* the prompt's tokens, then the generated ones */
            gt_ha_wf_check(wf, v, cr.logprobs, q, q >= n_lp - gen, where);
        for (int q = 0; q < k->n_scored; q++) {
            int j = k->first + q;
            double lp;
            int n_alt = gt_hc_alternatives(cr.logprobs, j + 1 + off, alt, 64, &lp);
            gt_ha_sum_add(s, m, &ref[pos + q], alt, n_alt > 0 ? n_alt : 0, lp, i, j + 1);
        }
        pos += k->n_scored;
        gt_hc_completion_free(&cr);
    }
    if (count_bad)
        gt_suite_check(c, "token_count", false, "%d of %d chunks: %s", count_bad, n_chunks,
                       count_msg);
    else
        gt_suite_check(c, "token_count", true,
                       "%d chunks: the server's token counts equal the artifact's tokenizer's%s",
                       n_chunks, extra ? " (max_tokens 0 refused: 1 used)" : "");
    return 0;
}

/* The eval window's results and metrics (s has scored positions). */
static void window_result(gt_suite_ctx *c, const gt_ha_sum *s, bool cached, bool echo,
                          bool extra_used, int n_top_used, double min_top1)
{
    char how[160];
    if (echo)
        snprintf(how, sizeof how, "echo method (prompt logprobs%s), %d..%d alternatives",
                 extra_used ? ", max_tokens 0 refused: 1 used" : "", s->alt_min, s->alt_max);
    else
        snprintf(how, sizeof how, "next-token method (no echo; %d alternatives asked), %d..%d "
                                  "given",
                 n_top_used, s->alt_min, s->alt_max);
    double top1 = (double)s->agree / (double)s->scored;
    gt_suite_check(c, "top1", top1 >= min_top1,
                   "%s reference; %ld/%ld positions by the %s: the server's top-1 is the "
                   "reference backend's argmax (drift_top1 %.4f, min_top1 %.3g)%s",
                   cached ? "cached" : "computed", s->agree, s->scored, how, top1, min_top1,
                   s->dis_msg);
    gt_suite_metric(c, "scored_tokens", (double)s->scored);
    gt_suite_metric(c, "echo_method", echo ? 1 : 0);
    gt_suite_metric(c, "logprob_alternatives", s->alt_min);
    gt_suite_metric(c, "drift_top1", top1);
    gt_suite_metric(c, "drift_kld_topn_mean", s->kld_sum / (double)s->scored);
    gt_suite_metric(c, "drift_kld_topn_max", s->kld_max);
    if (s->nll_n == s->scored) {
        gt_suite_metric(c, "ppl", exp(s->nll_srv / (double)s->scored));
        gt_suite_metric(c, "drift_ppl_ratio", exp((s->nll_srv - s->nll_ref) / (double)s->scored));
    } else {
        gt_suite_log(c, "no ppl: the eval token's logprob is among the server's alternatives "
                        "at %ld of %ld positions",
                     s->nll_n, s->scored);
    }
    gt_suite_metric(c, "logprob_max_abs_diff", s->lp_max);
}

int gt_accuracy_run_http(gt_suite_ctx *c, gt_err *err)
{
    int n_ctx = (int)gt_suite_int(c, "n_ctx", 128);
    int max_scored = (int)gt_suite_int(c, "max_scored", 0);
    double min_top1 = gt_suite_num(c, "min_top1", 0.9);
    const char *method = gt_suite_str(c, "method", "auto");
    int n_top = (int)gt_suite_int(c, "top_logprobs", GT_HA_TOPN);
    int n_conc = (int)gt_suite_int(c, "concurrency", 4);
    if (n_ctx < 8 || n_ctx > 4096 || max_scored < 0)
        return gt_err_set(err, "accuracy settings: n_ctx must be 8..4096, max_scored >= 0");
    if (strcmp(method, "auto") != 0 && strcmp(method, "echo") != 0 &&
        strcmp(method, "next-token") != 0)
        return gt_err_set(err, "accuracy setting method: \"auto\", \"echo\" or \"next-token\", "
                               "got \"%s\"",
                          method);
    if (n_top < 1 || n_top > GT_HA_TOPN || n_conc < 1 || n_conc > 16)
        return gt_err_set(err, "accuracy settings: top_logprobs must be 1..%d, concurrency "
                               "1..16",
                          GT_HA_TOPN);
    gt_hc t;
    gt_model *m;
    gt_ha_vocab *vocab = NULL;
    if (gt_hc_open_model(c, &t, &m, err) != 0)
        return -1;
    chunk *ch = NULL;
    int n_pos = 0;
    char hash[65], path[1024];
    int n_chunks = make_chunks(c, m, n_ctx, max_scored, &ch, &n_pos, hash, path, sizeof path,
                               err);
    if (n_chunks < 0)
        return -1;
    ref_pos *ref = NULL;
    bool cached = false, extra_used = false;
    int rc = -1;
    gt_ha_wf wf = {0};
    if (gt_ha_vocab_open(m, &vocab, err) != 0)
        goto out;
    double t0 = gt_suite_now();
    if (reference(c, m, ch, n_chunks, n_pos, n_ctx, hash, &ref, &cached, err) != 0)
        goto out;
    gt_suite_log(c, "reference %s in %.2f s", cached ? "cached" : "computed", gt_suite_now() - t0);

    gt_ha_sum s;
    gt_ha_sum_init(&s);
    bool failed = false, echo = strcmp(method, "next-token") != 0 && !t.chat;
    int n_top_used = n_top;
    if (echo) {
        char why[400] = "";
        t0 = gt_suite_now();
        int r = score_echo(c, &t, m, ch, n_chunks, ref, n_top, strcmp(method, "auto") == 0, &s,
                           &failed, &extra_used, vocab, &wf, why, sizeof why, err);
        if (r < 0)
            goto out;
        if (r == 1) {
            gt_suite_log(c, "echo gives no prompt logprobs (%s): scoring by next-token requests",
                         why);
            echo = false;
        } else {
            gt_suite_log(c, "%d chunks through the server (echo) in %.2f s", n_chunks,
                         gt_suite_now() - t0);
        }
    }
    if (!echo && gt_ha_next_token(c, &t, m, ch, n_chunks, ref, n_top, n_conc, &s, &n_top_used,
                                  &failed, vocab, &wf, err) != 0)
        goto out;
    if (s.scored == 0)
        gt_suite_check(c, "top1", false, "no position could be scored (%d planned)", n_pos);
    else
        window_result(c, &s, cached, echo, extra_used, n_top_used, min_top1);
    if (greedy_http(c, &t, m, err) != 0 ||
        gt_ha_decode(c, &t, m, vocab, n_top_used, &wf, err) != 0)
        goto out;
    gt_ha_wf_result(c, &wf);
    rc = 0;
out:
    for (int i = 0; i < n_chunks; i++) {
        free(ch[i].text);
        free(ch[i].ids);
    }
    free(ch);
    free(ref);
    gt_ha_vocab_free(vocab);
    return rc;
}
