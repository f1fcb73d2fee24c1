/* compare.c: the engine behind `gauntlet compare` (see compare.h).
 *
 * Design choices:
 * - Greedy only: with argmax decoding the first diverging token is a
 *   property of the two backends, not of a random draw (--seed is recorded
 *   for the day sampling is compared too).
 * - A's distributions come from its own generation (the logits that chose
 *   each token); B's from one teacher-forced batch over prompt + A's tokens,
 *   so both are taken at exactly the same positions with the same history.
 * - Softmax and KL in double with log-sum-exp: the differences sought are
 *   around 1e-6 nats and float accumulation would drown them.
 * - Each side keeps its own model and session; sessions are truncated to 0
 *   between prompts rather than recreated (no re-upload of weights). */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "gt/sampler.h"
#include "gt/tokenizer.h"

struct gt_cmp {
    gt_cmp_spec spec;
    gt_cli_run a, b;
    int n_vocab;
    char name[160];
};

int gt_cmp_prompts_load(const char *path, gt_cmp_prompt **out, int *n, gt_err *err)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return gt_err_set(err, "cannot open prompt file %s", path);
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, n_cap = 0;
    gt_cmp_prompt *p = NULL;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '\n' || *s == '\r' || *s == '#')
            continue;
        cJSON *j = cJSON_Parse(s);
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
        if (!cJSON_IsString(pr)) {
            cJSON_Delete(j);
            gt_err_set(err, "%s:%d: expected {\"id\": \"...\", \"prompt\": \"...\"}%s", path,
                       lineno, j ? " (no \"prompt\" string)" : " (not JSON)");
            goto fail;
        }
        if (*n == n_cap) {
            gt_cmp_prompt *np = realloc(p, sizeof *np * (size_t)(n_cap = n_cap * 2 + 8));
            if (!np) {
                cJSON_Delete(j);
                gt_err_set(err, "out of memory");
                goto fail;
            }
            p = np;
        }
        char idbuf[32];
        snprintf(idbuf, sizeof idbuf, "p%d", lineno);
        p[*n].id = strdup(cJSON_IsString(id) ? id->valuestring : idbuf);
        p[*n].text = strdup(pr->valuestring);
        (*n)++;
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    if (*n == 0) {
        free(p);
        return gt_err_set(err, "%s: no prompts", path);
    }
    *out = p;
    return 0;
fail:
    free(line);
    fclose(f);
    gt_cmp_prompts_free(p, *n);
    *n = 0;
    return -1;
}

void gt_cmp_prompts_free(gt_cmp_prompt *p, int n)
{
    for (int i = 0; p && i < n; i++) {
        free(p[i].id);
        free(p[i].text);
    }
    free(p);
}

int gt_cmp_open(const gt_cmp_spec *spec, gt_cmp **out, gt_err *err)
{
    gt_cmp *c = calloc(1, sizeof *c);
    if (!c)
        return gt_err_set(err, "out of memory");
    c->spec = *spec;
    /* gt_cli_open prints its own diagnostic; the caller adds context. */
    if (gt_cli_open("compare", spec->model_path, spec->backend_a, spec->n_threads, spec->driver_a,
                    0, &c->a) != 0) {
        free(c);
        return gt_err_set(err, "side A (%s) could not be opened", spec->backend_a);
    }
    if (gt_cli_open("compare", spec->model_path, spec->backend_b, spec->n_threads, spec->driver_b,
                    0, &c->b) != 0) {
        gt_cli_close(&c->a);
        free(c);
        return gt_err_set(err, "side B (%s) could not be opened", spec->backend_b);
    }
    const gt_hparams *hp = gt_model_hparams(c->a.model);
    c->n_vocab = hp->n_vocab;
    snprintf(c->name, sizeof c->name, "%s", hp->name[0] ? hp->name : spec->model_path);
    *out = c;
    return 0;
}

void gt_cmp_close(gt_cmp *c)
{
    if (!c)
        return;
    gt_cli_close(&c->a);
    gt_cli_close(&c->b);
    free(c);
}

const char *gt_cmp_model_name(const gt_cmp *c) { return c->name; }

void gt_cmp_piece(gt_cmp *c, int32_t tok, char *out, size_t cap)
{
    if (tok < 0) {
        snprintf(out, cap, "(end)");
        return;
    }
    int n = gt_token_to_bytes(gt_model_tokenizer(c->a.model), tok, out, cap - 1);
    out[n < 0 ? 0 : (size_t)n < cap - 1 ? (size_t)n : cap - 1] = '\0';
}

/* Greedy generation of up to n tokens after the prompt; logits (n * n_vocab,
 * may be NULL) receives the distribution each token was chosen from. */
static int generate(gt_cli_run *run, int n_vocab, const int32_t *prompt, int n_prompt, int n,
                    float *logits, gt_cmp_side_out *o, gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(run->model);
    const int32_t eos = gt_tokenizer_eos(tok);
    float *cur = malloc(sizeof(float) * (size_t)n_vocab);
    o->tokens = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    size_t text_cap = 256, text_len = 0;
    o->text = malloc(text_cap);
    if (!cur || !o->tokens || !o->text) {
        free(cur);
        return gt_err_set(err, "out of memory");
    }
    o->text[0] = '\0';
    if (gt_session_truncate(run->session, 0, err) != 0)
        goto fail;
    double t0 = gt_now();
    if (gt_session_eval(run->session, prompt, n_prompt, false, cur, err) != 0)
        goto fail;
    double t1 = gt_now();
    o->prefill_tps = t1 > t0 ? n_prompt / (t1 - t0) : 0;
    double td = 0;
    for (int i = 0; i < n; i++) {
        if (logits)
            memcpy(logits + (size_t)i * n_vocab, cur, sizeof(float) * (size_t)n_vocab);
        int32_t t = gt_argmax(cur, n_vocab);
        o->tokens[o->n_tokens++] = t;
        char piece[256];
        int len = gt_token_to_bytes(tok, t, piece, sizeof piece);
        if (len > (int)sizeof piece)
            len = (int)sizeof piece;
        if (len > 0) {
            if (text_len + (size_t)len + 1 > text_cap) {
                char *nt = realloc(o->text, text_cap = (text_len + (size_t)len + 1) * 2);
                if (!nt) {
                    gt_err_set(err, "out of memory");
                    goto fail;
                }
                o->text = nt;
            }
            memcpy(o->text + text_len, piece, (size_t)len);
            text_len += (size_t)len;
            o->text[text_len] = '\0';
        }
        if (t == eos || i == n - 1)
            break;
        double s = gt_now();
        if (gt_session_eval(run->session, &t, 1, false, cur, err) != 0)
            goto fail;
        td += gt_now() - s;
    }
    o->decode_tps = td > 0 ? (o->n_tokens - 1) / td : 0;
    free(cur);
    return 0;
fail:
    free(cur);
    return -1;
}

/* log softmax into out (double). */
static void log_softmax(const float *x, int n, double *out)
{
    double m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > m)
            m = x[i];
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - m);
    double lse = m + log(s);
    for (int i = 0; i < n; i++)
        out[i] = (double)x[i] - lse;
}

double gt_cmp_kl(const float *p, const float *q, int n, double *scratch, bool *same_top1)
{
    double *lp = scratch, *lq = scratch + n;
    log_softmax(p, n, lp);
    log_softmax(q, n, lq);
    double kl = 0;
    for (int j = 0; j < n; j++)
        kl += exp(lp[j]) * (lp[j] - lq[j]);
    if (same_top1)
        *same_top1 = gt_argmax(p, n) == gt_argmax(q, n);
    return kl < 0 ? 0 : kl; /* rounding: KL is never negative */
}

int gt_cmp_run(gt_cmp *c, const gt_cmp_prompt *p, gt_cmp_result *r, gt_err *err)
{
    memset(r, 0, sizeof *r);
    r->prompt = p;
    r->diverge = -1;
    int n_prompt = 0;
    int32_t *ids = gt_cli_tokenize("compare", c->a.model, p->text, false, &n_prompt);
    if (!ids)
        return gt_err_set(err, "prompt %s: tokenizing failed", p->id);
    if (n_prompt == 0) {
        free(ids);
        return gt_err_set(err, "prompt %s: no tokens", p->id);
    }
    r->n_prompt_tokens = n_prompt;
    int n = c->spec.n_tokens;
    int room = gt_session_n_ctx(c->a.session) < gt_session_n_ctx(c->b.session)
                   ? gt_session_n_ctx(c->a.session)
                   : gt_session_n_ctx(c->b.session);
    if (n_prompt + n > room)
        n = room - n_prompt;
    if (n < 1) {
        free(ids);
        return gt_err_set(err, "prompt %s: %d tokens leave no room in a %d-token context", p->id,
                          n_prompt, room);
    }
    const size_t V = (size_t)c->n_vocab;
    float *la = malloc(sizeof(float) * V * (size_t)n);
    float *lb = malloc(sizeof(float) * V * (size_t)n);
    int32_t *forced = malloc(sizeof(int32_t) * (size_t)(n_prompt + n));
    double *scratch = malloc(sizeof(double) * 2 * V);
    int rc = -1;
    if (!la || !lb || !forced || !scratch) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    if (generate(&c->a, c->n_vocab, ids, n_prompt, n, la, &r->a, err) != 0 ||
        generate(&c->b, c->n_vocab, ids, n_prompt, n, NULL, &r->b, err) != 0) {
        gt_err_wrap(err, "prompt %s", p->id);
        goto done;
    }
    int common = r->a.n_tokens < r->b.n_tokens ? r->a.n_tokens : r->b.n_tokens;
    for (int i = 0; i < common && r->diverge < 0; i++)
        if (r->a.tokens[i] != r->b.tokens[i])
            r->diverge = i;
    if (r->diverge < 0 && r->a.n_tokens != r->b.n_tokens)
        r->diverge = common;
    if (r->diverge >= 0) {
        r->div_a = r->diverge < r->a.n_tokens ? r->a.tokens[r->diverge] : -1;
        r->div_b = r->diverge < r->b.n_tokens ? r->b.tokens[r->diverge] : -1;
    }
    /* Teacher forcing: B sees the prompt and A's tokens but the last; the
     * logits at positions n_prompt-1 .. n_prompt+k-2 predict A's k tokens. */
    const int k = r->a.n_tokens;
    memcpy(forced, ids, sizeof(int32_t) * (size_t)n_prompt);
    memcpy(forced + n_prompt, r->a.tokens, sizeof(int32_t) * (size_t)(k - 1));
    const int nf = n_prompt + k - 1;
    float *all = malloc(sizeof(float) * V * (size_t)nf);
    if (!all) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    if (gt_session_truncate(c->b.session, 0, err) != 0 ||
        gt_session_eval(c->b.session, forced, nf, true, all, err) != 0) {
        free(all);
        gt_err_wrap(err, "prompt %s: teacher-forcing side B", p->id);
        goto done;
    }
    memcpy(lb, all + V * (size_t)(n_prompt - 1), sizeof(float) * V * (size_t)k);
    free(all);
    r->kld = malloc(sizeof(double) * (size_t)k);
    if (!r->kld) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    int agree = 0;
    r->kld_max = 0;
    for (int i = 0; i < k; i++) {
        bool same;
        double kl = gt_cmp_kl(la + V * (size_t)i, lb + V * (size_t)i, c->n_vocab, scratch, &same);
        r->kld[i] = kl;
        r->kld_mean += kl;
        if (kl > r->kld_max || i == 0) {
            r->kld_max = kl;
            r->kld_argmax = i;
        }
        agree += same;
    }
    r->kld_mean /= k;
    r->top1 = (double)agree / k;
    rc = 0;
done:
    free(ids);
    free(la);
    free(lb);
    free(forced);
    free(scratch);
    if (rc != 0)
        gt_cmp_result_free(r);
    return rc;
}

void gt_cmp_result_free(gt_cmp_result *r)
{
    free(r->a.tokens);
    free(r->a.text);
    free(r->b.tokens);
    free(r->b.text);
    free(r->kld);
    memset(r, 0, sizeof *r);
}
