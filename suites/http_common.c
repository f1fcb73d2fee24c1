/* http_common.c: see http_common.h. */
#include "http_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/backend.h"
#include "gt/gguf.h"
#include "gt/session.h"
#include "gt/tokenizer.h"

int gt_hc_open(const gt_suite_ctx *c, bool lookup, gt_hc *t, gt_err *err)
{
    memset(t, 0, sizeof *t);
    if (!c->endpoint || !c->endpoint[0])
        return gt_err_set(err, "http cell without an endpoint");
    if (gt_http_global_init(err) != 0)
        return -1;
    snprintf(t->base, sizeof t->base, "%s", c->endpoint);
    t->chat = c->http_api && strcmp(c->http_api, "chat") == 0;
    size_t n = strlen(t->base);
    while (n > 0 && t->base[n - 1] == '/')
        t->base[--n] = '\0';
    snprintf(t->root, sizeof t->root, "%s", t->base);
    if (n >= 3 && strcmp(t->root + n - 3, "/v1") == 0)
        t->root[n - 3] = '\0';
    if (c->served_model && c->served_model[0]) {
        snprintf(t->model, sizeof t->model, "%s", c->served_model);
        return 0;
    }
    if (!lookup)
        return 0;
    char url[600];
    gt_hc_url(t, "/models", url, sizeof url);
    gt_http_reply r;
    if (gt_http_get(url, 30, &r, err) != 0)
        return -1;
    int rc = -1;
    cJSON *o = r.status == 200 ? cJSON_Parse(r.body) : NULL;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "id");
    if (cJSON_IsString(id)) {
        snprintf(t->model, sizeof t->model, "%s", id->valuestring);
        rc = 0;
    } else {
        gt_err_set(err, "GET %s: HTTP %ld, no data[0].id in: %.200s", url, r.status, r.body);
    }
    cJSON_Delete(o);
    gt_http_reply_free(&r);
    return rc;
}

int gt_hc_open_model(gt_suite_ctx *c, gt_hc *t, gt_model **m, gt_err *err)
{
    if (gt_hc_open(c, true, t, err) != 0)
        return -1;
    return gt_suite_model(c, m, err);
}

void gt_hc_url(const gt_hc *t, const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", t->base, path);
}

void gt_hc_generate_url(const gt_hc *t, char *out, size_t cap)
{
    gt_hc_url(t, t->chat ? "/chat/completions" : "/completions", out, cap);
}

void gt_hc_set_prompt(const gt_hc *t, cJSON *req, const char *text)
{
    const char *key = t->chat ? "messages" : "prompt";
    cJSON_DeleteItemFromObjectCaseSensitive(req, key);
    if (!text)
        return;
    if (!t->chat) {
        cJSON_AddStringToObject(req, key, text);
        return;
    }
    cJSON *msgs = cJSON_AddArrayToObject(req, key);
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", text);
    cJSON_AddItemToArray(msgs, u);
}

cJSON *gt_hc_request(const gt_hc *t, const char *prompt, int max_tokens, double temperature)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (t->model[0])
        cJSON_AddStringToObject(o, "model", t->model);
    gt_hc_set_prompt(t, o, prompt);
    cJSON_AddNumberToObject(o, "max_tokens", max_tokens);
    cJSON_AddNumberToObject(o, "temperature", temperature);
    return o;
}

void gt_hc_set_logprobs(const gt_hc *t, cJSON *req, int n)
{
    cJSON_DeleteItemFromObjectCaseSensitive(req, "logprobs");
    cJSON_DeleteItemFromObjectCaseSensitive(req, "top_logprobs");
    if (t->chat) {
        cJSON_AddBoolToObject(req, "logprobs", true);
        cJSON_AddNumberToObject(req, "top_logprobs", n);
    } else {
        cJSON_AddNumberToObject(req, "logprobs", n);
    }
}

/* The artifact's chat template, set up for one use (free it after). */
static int chat_template(const gt_model *m, gt_chat_template *tp, gt_err *err)
{
    const char *text = gt_gguf_get_str(gt_model_gguf(m), "tokenizer.chat_template");
    if (gt_chat_template_init(tp, text, NULL, gt_model_tokenizer(m)) != 0 ||
        tp->family == GT_CHAT_NONE) {
        gt_err_set(err, "a chat cell needs the artifact's chat template to render prompts for "
                        "the reference: %s",
                   tp->why);
        gt_chat_template_free(tp);
        return -1;
    }
    return 0;
}

int gt_hc_prompt_ids(const gt_hc *t, const gt_model *m, const char *prompt, int32_t *ids,
                     int cap, gt_err *err)
{
    if (!t->chat)
        return gt_tokenize(gt_model_tokenizer(m), prompt, strlen(prompt),
                           gt_tokenizer_adds_bos(gt_model_tokenizer(m)), ids, ids ? cap : 0, err);
    gt_chat_template tp;
    if (chat_template(m, &tp, err) != 0)
        return -1;
    gt_chat_msg msg = {.role = "user", .content = (char *)prompt};
    char why[256] = "";
    int n = 0;
    int32_t *r = gt_chat_render(&tp, gt_model_tokenizer(m), &msg, 1, &n, why, sizeof why);
    gt_chat_template_free(&tp);
    if (!r)
        return gt_err_set(err, "rendering a user turn with the %s template: %s",
                          gt_chat_family_name(tp.family), why);
    if (ids)
        memcpy(ids, r, (size_t)(n < cap ? n : cap) * sizeof *ids);
    free(r);
    return n;
}

int32_t gt_hc_turn_end(const gt_hc *t, const gt_model *m)
{
    gt_chat_template tp;
    gt_err e = {{0}};
    if (!t->chat || chat_template(m, &tp, &e) != 0)
        return -1;
    int32_t end = tp.turn_end;
    gt_chat_template_free(&tp);
    return end;
}

static int get_int(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
}

int gt_hc_complete(const gt_hc *t, const cJSON *req, gt_hc_completion *out, gt_err *err)
{
    memset(out, 0, sizeof *out);
    out->prompt_tokens = out->completion_tokens = -1;
    out->text = out->finish = "";
    char url[600];
    gt_hc_generate_url(t, url, sizeof url);
    gt_http_reply r;
    if (gt_http_post_json(url, req, 0, GT_HC_TIMEOUT_S, &r, err) != 0)
        return -1;
    out->status = r.status;
    out->total_s = r.total_s;
    if (r.status != 200) {
        gt_err_set(err, "POST %s: HTTP %ld: %.300s", url, r.status, r.body);
        gt_http_reply_free(&r);
        return -1;
    }
    out->root = cJSON_Parse(r.body);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(out->root, "choices"), 0);
    if (!ch) {
        gt_err_set(err, "POST %s: the reply has no choices[0]: %.300s", url, r.body);
        gt_http_reply_free(&r);
        gt_hc_completion_free(out);
        return -1;
    }
    gt_http_reply_free(&r);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(
        t->chat ? cJSON_GetObjectItemCaseSensitive(ch, "message") : ch,
        t->chat ? "content" : "text");
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(ch, "logprobs");
    out->text = cJSON_IsString(text) ? text->valuestring : "";
    out->finish = cJSON_IsString(fin) ? fin->valuestring : "";
    out->logprobs = cJSON_IsObject(lp) ? lp : NULL;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(out->root, "usage");
    out->prompt_tokens = get_int(u, "prompt_tokens");
    out->completion_tokens = get_int(u, "completion_tokens");
    return 0;
}

void gt_hc_completion_free(gt_hc_completion *r)
{
    cJSON_Delete(r->root);
    r->root = NULL;
}

static int by_lp_desc(const void *a, const void *b)
{
    double x = ((const gt_hc_alt *)a)->lp, y = ((const gt_hc_alt *)b)->lp;
    return x < y ? 1 : x > y ? -1 : 0;
}

int gt_hc_logprob_tokens(const cJSON *logprobs)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(logprobs, "content");
    if (cJSON_IsArray(content))
        return cJSON_GetArraySize(content);
    const cJSON *tops = cJSON_GetObjectItemCaseSensitive(logprobs, "top_logprobs");
    return cJSON_IsArray(tops) ? cJSON_GetArraySize(tops) : -1;
}

int gt_hc_alternatives(const cJSON *logprobs, int i, gt_hc_alt *out, int cap, double *lp)
{
    *lp = NAN;
    int n = 0;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(logprobs, "content");
    const cJSON *it;
    if (cJSON_IsArray(content)) {
        const cJSON *e = cJSON_GetArrayItem(content, i);
        if (!cJSON_IsObject(e))
            return -1;
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(e, "logprob");
        if (cJSON_IsNumber(own))
            *lp = own->valuedouble;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(e, "top_logprobs"))
        {
            const cJSON *tk = cJSON_GetObjectItemCaseSensitive(it, "token");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "logprob");
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(it, "bytes");
            if (n < cap && cJSON_IsString(tk) && cJSON_IsNumber(v))
                out[n++] = (gt_hc_alt){tk->valuestring, v->valuedouble,
                                       cJSON_IsArray(b) ? b : NULL, NULL};
        }
    } else {
        const cJSON *tops = cJSON_GetObjectItemCaseSensitive(logprobs, "top_logprobs");
        const cJSON *e = cJSON_GetArrayItem(tops, i);
        if (!e)
            return -1;
        const cJSON *own =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(logprobs, "token_logprobs"), i);
        if (cJSON_IsNumber(own))
            *lp = own->valuedouble;
        cJSON_ArrayForEach(it, e)
        {
            if (n < cap && cJSON_IsNumber(it) && it->string)
                out[n++] = (gt_hc_alt){it->string, it->valuedouble, NULL, NULL};
        }
    }
    qsort(out, (size_t)n, sizeof *out, by_lp_desc);
    return n;
}

int gt_hc_token(const cJSON *logprobs, int i, gt_hc_alt *out)
{
    *out = (gt_hc_alt){NULL, NAN, NULL, NULL};
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(logprobs, "content");
    const cJSON *tk, *lp;
    if (cJSON_IsArray(content)) {
        const cJSON *e = cJSON_GetArrayItem(content, i);
        tk = cJSON_GetObjectItemCaseSensitive(e, "token");
        lp = cJSON_GetObjectItemCaseSensitive(e, "logprob");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
        out->bytes = cJSON_IsArray(b) ? b : NULL;
        out->id = cJSON_GetObjectItemCaseSensitive(e, "id");
    } else {
        tk = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(logprobs, "tokens"), i);
        lp = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(logprobs, "token_logprobs"), i);
        out->id = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(logprobs, "token_ids"), i);
    }
    if (!cJSON_IsString(tk))
        return -1;
    out->text = tk->valuestring;
    out->lp = cJSON_IsNumber(lp) ? lp->valuedouble : NAN;
    return 0;
}

void gt_hc_quote(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; s[i] && o + 3 < cap; i++) {
        if (s[i] == '\n' || s[i] == '"' || s[i] == '\\') {
            out[o++] = '\\';
            out[o++] = s[i] == '\n' ? 'n' : s[i];
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
}

size_t gt_hc_piece(const gt_model *m, int32_t id, char *out, size_t cap)
{
    char raw[256];
    int len = gt_token_to_bytes(gt_model_tokenizer(m), id, raw, sizeof raw);
    len = len < 0 ? 0 : len > (int)sizeof raw ? (int)sizeof raw : len;
    char *c = gt_utf8_clean(raw, (size_t)len, false);
    snprintf(out, cap, "%s", c ? c : "");
    free(c);
    return strlen(out);
}

int gt_hc_ref_greedy(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const char *kind,
                     const char *data_hash, const char *settings, const char *const *prompts,
                     int n, int n_gen, int n_ctx, int32_t **out, bool *cached, gt_err *err)
{
    char key[65], full[300];
    snprintf(full, sizeof full, "%s%s", settings, t->chat ? ";chat-user-turn-v1" : "");
    gt_suite_ref_key(c, kind, data_hash, full, key);
    size_t want = (size_t)n * (size_t)n_gen * sizeof(int32_t);
    void *data = NULL;
    size_t size = 0;
    int got = gt_suite_ref_get(c, key, &data, &size, err);
    if (got < 0)
        return -1;
    if (got == 0 && size == want) {
        *out = data;
        *cached = true;
        return 0;
    }
    free(data);
    *cached = false;
    int n_vocab = gt_model_hparams(m)->n_vocab;
    int32_t *toks = calloc((size_t)n * (size_t)n_gen + 1, sizeof *toks);
    int32_t *ids = malloc((size_t)n_ctx * sizeof *ids);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    gt_backend *ref = NULL;
    gt_session *s = NULL;
    gt_backend_config cfg = {.n_threads = c->n_threads};
    gt_session_params sp = {.n_ctx = n_ctx};
    int rc = -1;
    if (!toks || !ids || !logits) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    if (gt_backend_open("reference", &cfg, &ref, err) != 0 ||
        gt_session_new(m, ref, &sp, &s, err) != 0) {
        gt_err_wrap(err, "reference backend");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int np = gt_hc_prompt_ids(t, m, prompts[i], ids, n_ctx, err);
        if (np < 0)
            goto out;
        if (np < 1 || np + n_gen > n_ctx)
            continue;
        if (gt_greedy_run(s, ids, np, n_gen, toks + (size_t)i * n_gen, logits, err) != 0) {
            gt_err_wrap(err, "reference backend");
            goto out;
        }
    }
    if (gt_suite_ref_put(c, key, "greedy tokens (int32, prompts x n_gen)", toks, want, err) != 0)
        goto out;
    *out = toks;
    toks = NULL;
    rc = 0;
out:
    gt_session_free(s);
    gt_backend_close(ref);
    free(toks);
    free(ids);
    free(logits);
    return rc;
}

int gt_hc_agreement(const gt_hc *t, const gt_model *m, const int32_t *ref, int n,
                    const char *text, const char *finish)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    int32_t eos = gt_tokenizer_eos(tok), turn_end = gt_hc_turn_end(t, m);
    size_t tl = strlen(text);
    char *raw = malloc((size_t)n * 256 + 1);
    if (!raw)
        return 0;
    size_t len = 0;
    int best = 0;
    for (int k = 0; k < n; k++) {
        if (ref[k] == eos || (turn_end >= 0 && ref[k] == turn_end)) {
            /* The reference ends here; a server that stopped with the same
             * text agrees on everything there is. */
            char *cl = gt_utf8_clean(raw, len, false);
            bool same = cl && strcmp(cl, text) == 0 && strcmp(finish, "stop") == 0;
            free(cl);
            best = same ? n : k;
            break;
        }
        int l = gt_token_to_bytes(tok, ref[k], raw + len, 256);
        len += l < 0 ? 0 : l > 256 ? 256 : (size_t)l;
        char *cl = gt_utf8_clean(raw, len, true);
        size_t cn = cl ? strlen(cl) : 0;
        bool prefix = cl && cn <= tl && memcmp(cl, text, cn) == 0;
        free(cl);
        if (!prefix)
            break;
        best = k + 1;
    }
    free(raw);
    return best;
}
