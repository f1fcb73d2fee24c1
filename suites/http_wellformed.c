/* http_wellformed.c: are a server's logprobs a distribution over the
 * model's vocabulary? (see http_accuracy.h)
 *
 * The drift scores compare only the alternatives that match a reference
 * token, so without this a server could return its true top-1 and invent
 * the rest ("zzq0x", probabilities summing to 13) and still score a KL of
 * 0. Here every alternative must name a token of the artifact's vocabulary,
 * one position's probabilities must sum to at most 1 (plus printing
 * rounding: GT_HA_WF_SUM_EPS), and a token generated at temperature 0 must
 * be the top alternative. Names are compared as a server sends them: the
 * token's bytes cleaned to UTF-8 (what `gauntlet serve` sends), its raw
 * bytes when the reply gives a "bytes" array (llama-server cuts "token" to
 * valid UTF-8 and gives the bytes beside it), and a control token's stored
 * piece. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "gt/tokenizer.h"
#include "http_accuracy.h"

typedef struct name {
    char *s;  /* malloc'ed, NUL-terminated after n bytes */
    size_t n;
    int32_t id;
} name;

struct gt_ha_vocab {
    name *text, *raw; /* sorted by bytes, then length */
    int n_text, n_raw;
};

static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn ? 1 : 0;
}

static int by_name(const void *x, const void *y)
{
    const name *a = x, *b = y;
    int c = name_cmp(a->s, a->n, b->s, b->n);
    return c ? c : a->id - b->id;
}

static int add(name *arr, int *n, const char *s, size_t len, int32_t id)
{
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, s, len);
    c[len] = '\0';
    arr[(*n)++] = (name){c, len, id};
    return 0;
}

int gt_ha_vocab_open(const gt_model *m, gt_ha_vocab **out, gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    int n_vocab = gt_tokenizer_n_vocab(tok);
    gt_ha_vocab *v = calloc(1, sizeof *v);
    if (!v || !(v->text = calloc((size_t)n_vocab * 2 + 1, sizeof *v->text)) ||
        !(v->raw = calloc((size_t)n_vocab * 2 + 1, sizeof *v->raw))) {
        gt_ha_vocab_free(v);
        return gt_err_set(err, "out of memory");
    }
    for (int32_t id = 0; id < n_vocab; id++) {
        char raw[256], piece[1024];
        int len = gt_token_to_bytes(tok, id, raw, sizeof raw);
        len = len < 0 ? 0 : len > (int)sizeof raw ? (int)sizeof raw : len;
        size_t pl = gt_hc_piece(m, id, piece, sizeof piece);
        if (add(v->raw, &v->n_raw, raw, (size_t)len, id) != 0 ||
            add(v->text, &v->n_text, piece, pl, id) != 0)
            goto oom;
        const char *stored = gt_token_piece(tok, id);
        if (len == 0 && stored && stored[0] &&
            (add(v->raw, &v->n_raw, stored, strlen(stored), id) != 0 ||
             add(v->text, &v->n_text, stored, strlen(stored), id) != 0))
            goto oom;
    }
    qsort(v->text, (size_t)v->n_text, sizeof *v->text, by_name);
    qsort(v->raw, (size_t)v->n_raw, sizeof *v->raw, by_name);
    *out = v;
    return 0;
oom:
    gt_ha_vocab_free(v);
    return gt_err_set(err, "out of memory");
}

void gt_ha_vocab_free(gt_ha_vocab *v)
{
    if (!v)
        return;
    for (int i = 0; v->text && i < v->n_text; i++)
        free(v->text[i].s);
    for (int i = 0; v->raw && i < v->n_raw; i++)
        free(v->raw[i].s);
    free(v->text);
    free(v->raw);
    free(v);
}

/* The ids named s[0..len) in arr (sorted), up to cap; returns how many. */
static int lookup(const name *arr, int n, const char *s, size_t len, int32_t *ids, int cap)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (name_cmp(arr[mid].s, arr[mid].n, s, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int k = 0;
    for (int i = lo; i < n && name_cmp(arr[i].s, arr[i].n, s, len) == 0; i++, k++)
        if (ids && k < cap)
            ids[k] = arr[i].id;
    return k;
}

/* A "bytes" array as bytes; -1 when it is not one (too long, or an item
 * that is no byte). */
static int bytes_of(const cJSON *b, char *out, size_t cap)
{
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, b)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 255 ||
            it->valuedouble != (int)it->valuedouble || (size_t)n >= cap)
            return -1;
        out[n++] = (char)(int)it->valuedouble;
    }
    return n;
}

int gt_ha_vocab_ids(const gt_ha_vocab *v, const gt_hc_alt *a, int32_t *ids, int cap)
{
    if (a->bytes) {
        char b[1024];
        int n = bytes_of(a->bytes, b, sizeof b);
        return n < 0 ? -1 : lookup(v->raw, v->n_raw, b, (size_t)n, ids, cap);
    }
    return lookup(v->text, v->n_text, a->text, strlen(a->text), ids, cap);
}

bool gt_ha_same_token(const gt_hc_alt *a, const gt_hc_alt *b)
{
    if (a->bytes && b->bytes) {
        char x[1024], y[1024];
        int nx = bytes_of(a->bytes, x, sizeof x), ny = bytes_of(b->bytes, y, sizeof y);
        return nx >= 0 && nx == ny && memcmp(x, y, (size_t)nx) == 0;
    }
    return a->text && b->text && strcmp(a->text, b->text) == 0;
}

__attribute__((format(printf, 4, 5))) static void bad(gt_ha_wf *wf, const char *where,
                                                         int i, const char *fmt, ...)
{
    if (wf->bad++)
        return;
    char why[360];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(wf->first, sizeof wf->first, "%s, token %d: %s", where, i, why);
}

void gt_ha_wf_check(gt_ha_wf *wf, const gt_ha_vocab *v, const cJSON *logprobs, int i,
                    bool sampled, const char *where)
{
    gt_hc_alt alt[64], own;
    double own_lp;
    char q[120];
    int n_alt = gt_hc_alternatives(logprobs, i, alt, 64, &own_lp);
    if (n_alt <= 0)
        return; /* absent alternatives are the "logprobs" check's business */
    long bad_before = wf->bad;
    wf->positions++;
    double sum = 0;
    for (int k = 0; k < n_alt && wf->bad == bad_before; k++) {
        gt_hc_quote(alt[k].text, q, sizeof q);
        int r = gt_ha_vocab_ids(v, &alt[k], NULL, 0);
        if (r < 0)
            bad(wf, where, i, "alternative \"%s\" has a \"bytes\" field that is not an array of "
                              "bytes", q);
        else if (r == 0)
            bad(wf, where, i, "alternative \"%s\" (logprob %.4g) is no token of the "
                              "vocabulary", q, alt[k].lp);
        else if (!(alt[k].lp <= 0))
            bad(wf, where, i, "alternative \"%s\" has logprob %.4g (> 0 or not a number)", q,
                alt[k].lp);
        sum += exp(alt[k].lp);
    }
    if (wf->bad == bad_before && sum > 1 + GT_HA_WF_SUM_EPS)
        bad(wf, where, i, "the probabilities of its %d alternatives sum to %.4g (at most 1 + %g)",
            n_alt, sum, GT_HA_WF_SUM_EPS);
    if (!sampled || wf->bad != bad_before)
        return;
    if (gt_hc_token(logprobs, i, &own) != 0) {
        bad(wf, where, i, "the generated token has no text in the logprobs");
        return;
    }
    gt_hc_quote(own.text, q, sizeof q);
    int r = gt_ha_vocab_ids(v, &own, NULL, 0);
    if (r <= 0) {
        bad(wf, where, i, "the generated token \"%s\" is no token of the vocabulary", q);
        return;
    }
    for (int k = 0; k < n_alt && alt[k].lp >= alt[0].lp - GT_HA_WF_TIE; k++)
        if (gt_ha_same_token(&own, &alt[k]))
            return;
    char top[120];
    gt_hc_quote(alt[0].text, top, sizeof top);
    bad(wf, where, i, "the token generated at temperature 0 is \"%s\" (logprob %.4g), not the "
                      "top alternative \"%s\" (%.4g)",
        q, own.lp, top, alt[0].lp);
}

void gt_ha_wf_result(gt_suite_ctx *c, const gt_ha_wf *wf)
{
    if (wf->positions == 0) {
        gt_suite_check(c, "logprobs_wellformed", false,
                       "no reply gave alternatives to check");
        return;
    }
    if (wf->bad)
        gt_suite_check(c, "logprobs_wellformed", false,
                       "%ld of %ld positions have malformed logprobs; first: %s", wf->bad,
                       wf->positions, wf->first);
    else
        gt_suite_check(c, "logprobs_wellformed", true,
                       "%ld positions: every alternative is a token of the vocabulary, their "
                       "probabilities sum to at most 1 + %g, every token generated at "
                       "temperature 0 is the top alternative",
                       wf->positions, GT_HA_WF_SUM_EPS);
}
