/* anchor.c: the cell against facts measured outside gauntlet.
 *
 * Every other suite compares a cell with the reference backend, which runs
 * the same graph, tokenizer and quantizer: a bug they share (a layer
 * dropped, a wrong RoPE, a tokenizer shift) passes all of them. An anchor is
 * what llama.cpp measured on the same artifact (matrices/anchors/<model>.json,
 * written by `gauntlet anchors`), and this suite checks the cell against it:
 *
 *   ppl     perplexity on the anchor text, computed the way llama-perplexity
 *           computes it: the text tokenized once (BOS first when the model
 *           adds one), cut into chunks of n_ctx tokens, the first token of
 *           each chunk replaced by BOS, each chunk evaluated as one batch from
 *           an empty context, and the logits of positions n_ctx/2 .. n_ctx-2
 *           scored against the token after each. Judged as anchor.ppl_rel_err
 *           against the anchor's relative tolerance (the harness sets it).
 *   greedy  for each anchored prompt, the cell's greedy tokens must equal
 *           llama.cpp's for as long as llama.cpp's own choice was clear (the
 *           anchor keeps only the prefix before its first near-tie).
 *
 * The harness adds this suite first to every tier of a model with anchors
 * (cmd_qualify.c), so the reference cell is checked too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "suite.h"

static const gt_metric_def METRICS[] = {
    {"ppl", "ppl", -1, false, NULL,
     "perplexity on the anchor text, computed as llama-perplexity does (judged by ppl_rel_err)"},
    {"ppl_rel_err", "ratio", -1, false, NULL,
     "|ppl - llama.cpp's ppl| / llama.cpp's ppl on the same artifact and text"},
    {NULL, NULL, 0, false, NULL, NULL},
};

static const gt_setting_def SETTINGS[] = {{NULL, 0, NULL}};

static double num(const cJSON *o, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int read_text(const char *path, char **out, size_t *len, gt_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gt_err_set(err, "anchor text %s: cannot open", path);
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb) {
                free(buf);
                fclose(f);
                return gt_err_set(err, "out of memory reading %s", path);
            }
            buf = nb;
        }
        got = fread(buf + n, 1, 4096, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* -log softmax(row)[tok], in double. */
static double nll(const float *row, int n_vocab, int32_t tok)
{
    float mx = row[0];
    for (int i = 1; i < n_vocab; i++)
        mx = row[i] > mx ? row[i] : mx;
    double s = 0;
    for (int i = 0; i < n_vocab; i++)
        s += exp((double)row[i] - mx);
    return log(s) + mx - row[tok];
}

/* Perplexity of the anchor text on this cell, llama-perplexity's way. */
static int gt_anchor_ppl(gt_model *m, gt_backend *b, const char *text, size_t len, int n_ctx,
                         int chunks, double *ppl, int *n_scored, gt_err *err)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    const int n_vocab = gt_model_hparams(m)->n_vocab;
    bool bos = gt_tokenizer_adds_bos(t) && gt_tokenizer_bos(t) >= 0;
    int32_t *toks = malloc(sizeof(int32_t) * (len + 8));
    float *logits = malloc(sizeof(float) * (size_t)n_vocab * (size_t)n_ctx);
    int32_t *chunk = malloc(sizeof(int32_t) * (size_t)n_ctx);
    gt_session *s = NULL;
    int rc = -1;
    if (!toks || !logits || !chunk) {
        gt_err_set(err, "out of memory for the anchor text");
        goto out;
    }
    int n = gt_tokenize(t, text, len, bos, toks, (int)len + 8, err);
    if (n < 0)
        goto out;
    if (n / n_ctx < chunks) {
        gt_err_set(err, "anchor text has %d tokens: fewer than %d chunks of %d", n, chunks, n_ctx);
        goto out;
    }
    gt_session_params sp = {.n_ctx = n_ctx, .n_batch = n_ctx};
    if (gt_session_new(m, b, &sp, &s, err) != 0)
        goto out;
    double sum = 0;
    int count = 0, first = n_ctx / 2;
    for (int c = 0; c < chunks; c++) {
        memcpy(chunk, toks + (size_t)c * n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (bos)
            chunk[0] = gt_tokenizer_bos(t);
        if (gt_session_truncate(s, 0, err) != 0 ||
            gt_session_eval(s, chunk, n_ctx, true, logits, err) != 0)
            goto out;
        for (int i = first; i < n_ctx - 1; i++) {
            /* The original token, not the BOS put in its place (i >= 1). */
            sum += nll(logits + (size_t)i * n_vocab, n_vocab, toks[(size_t)c * n_ctx + i + 1]);
            count++;
        }
    }
    *ppl = exp(sum / count);
    *n_scored = count;
    rc = 0;
out:
    gt_session_free(s);
    free(toks);
    free(logits);
    free(chunk);
    return rc;
}

static int check_ppl(gt_suite_ctx *c, gt_model *m, const cJSON *a, gt_err *err)
{
    const char *file = str(a, "text");
    double want = num(a, "ppl", -1);
    int n_ctx = (int)num(a, "n_ctx", 0), chunks = (int)num(a, "chunks", 0);
    if (!file || !(want > 0) || n_ctx < 8 || chunks < 1)
        return gt_err_set(err, "anchor lacks text, ppl, n_ctx or chunks");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", c->data_dir ? c->data_dir : "suites/data", file);
    char *text = NULL;
    size_t len = 0;
    if (read_text(path, &text, &len, err) != 0)
        return -1;
    double ppl;
    int n_scored;
    double t0 = gt_suite_now();
    int rc = gt_anchor_ppl(m, c->backend, text, len, n_ctx, chunks, &ppl, &n_scored, err);
    free(text);
    if (rc != 0)
        return -1;
    gt_suite_log(c, "anchor: ppl %.4f over %d positions (llama.cpp %.4f) in %.1f s", ppl, n_scored,
                 want, gt_suite_now() - t0);
    gt_suite_metric(c, "ppl", ppl);
    gt_suite_metric(c, "ppl_rel_err", fabs(ppl - want) / want);
    return 0;
}

static int check_greedy(gt_suite_ctx *c, gt_model *m, const cJSON *a, gt_err *err)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(a, "greedy");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        return 0; /* validation names quants without greedy anchors */
    gt_session_params sp = {.n_ctx = 512};
    gt_session *s = NULL;
    const int n_vocab = gt_model_hparams(m)->n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    int32_t ids[256], out[128];
    int rc = -1, n_ok = 0, n_tokens = 0;
    char bad[512] = "";
    if (!logits) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    if (gt_session_new(m, c->backend, &sp, &s, err) != 0)
        goto done;
    int idx = 0;
    for (const cJSON *g = list->child; g; g = g->next, idx++) {
        const char *prompt = str(g, "prompt");
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(g, "tokens");
        int n_want = cJSON_GetArraySize(want);
        if (!prompt || !cJSON_IsArray(want) || n_want > 128) {
            gt_err_set(err, "greedy anchor %d lacks prompt or tokens (at most 128)", idx);
            goto done;
        }
        int np = gt_greedy_tokenize(m, prompt, ids, 256, err);
        if (np < 0)
            goto done;
        if (np > 256 || np + n_want > 512) {
            gt_err_set(err, "greedy anchor %d: prompt too long", idx);
            goto done;
        }
        if (n_want == 0) {
            n_ok++;
            continue;
        }
        if (gt_greedy_run(s, ids, np, n_want, out, logits, err) != 0)
            goto done;
        int k = 0;
        for (const cJSON *w = want->child; w && (int32_t)w->valuedouble == out[k]; w = w->next)
            k++;
        n_tokens += n_want;
        if (k == n_want) {
            n_ok++;
        } else if (!bad[0]) {
            const gt_tokenizer *t = gt_model_tokenizer(m);
            int32_t exp_tok = (int32_t)cJSON_GetArrayItem(want, k)->valuedouble;
            const char *gp = gt_token_piece(t, out[k]), *ep = gt_token_piece(t, exp_tok);
            snprintf(bad, sizeof bad, "prompt %d (\"%.40s\"): token %d is %d '%s', llama.cpp's %d '%s'",
                     idx, prompt, k, out[k], gp ? gp : "?", exp_tok, ep ? ep : "?");
        }
    }
    if (bad[0])
        gt_suite_check(c, "greedy", false, "%d of %d prompts as llama.cpp; first miss: %s", n_ok, idx,
                       bad);
    else
        gt_suite_check(c, "greedy", true, "%d prompts, %d tokens, all as llama.cpp's greedy", idx,
                       n_tokens);
    rc = 0;
done:
    gt_session_free(s);
    free(logits);
    return rc;
}

static int anchor_run(gt_suite_ctx *c, gt_err *err)
{
    if (!c->anchor)
        return gt_err_set(err, "the anchor suite runs only for a model with anchors");
    gt_model *m;
    if (gt_suite_model(c, &m, err) != 0)
        return -1;
    const char *want_sha = str(c->anchor, "artifact_sha256");
    if (want_sha && c->model_sha256 && strcmp(want_sha, c->model_sha256) != 0)
        gt_suite_log(c, "anchor: measured on artifact %.12s, this cell runs %.12s (re-run gauntlet "
                        "anchors if the quantizer changed on purpose)",
                     want_sha, c->model_sha256);
    if (check_ppl(c, m, c->anchor, err) != 0)
        return -1;
    return check_greedy(c, m, c->anchor, err);
}

const gt_suite gt_suite_anchor = {
    .name = "anchor",
    .description = "perplexity and greedy text against llama.cpp's on the same artifact "
                   "(matrices/anchors/)",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = anchor_run,
};
