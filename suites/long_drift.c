/* long_drift.c: the long suite's drift against depth: does a backend leave
 * the reference further behind the deeper its context?
 *
 * One text (the cell's eval text, repeated until it is long enough) runs
 * once through the cell's session. Before each checkpoint L the last
 * n_scored positions are scored teacher-forced: the text up to L - n_scored
 * is one prefill (split at the session's n_batch), then each scored token is
 * a decode step, so the decode path's attention is judged at that depth.
 * The reference evaluates the same prefix and the scored positions as one
 * batch; its summaries (refdist.h: top tokens until the tail is below
 * tail_eps) are cached per checkpoint, so a second run costs the cell only.
 * When the cell is the reference itself, its batch pass fills the cache and
 * the session is truncated back to score its decode path against it, so
 * the reference cell checks decode against batch at depth.
 *
 * Per checkpoint: check drift_L<L> (mean KL within the tolerance of
 * long.drift_kld_mean) and 16 points of the series drift_kld. The metrics
 * are the deepest checkpoint's. The first failed checkpoint leaves the
 * localizer the text up to 16 positions into its scored part. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "long.h"
#include "metrics.h"
#include "numerics.h"
#include "promptset.h"
#include "refdist.h"

#define BIN 8            /* positions per point of the drift_kld series */
#define LOC_TOKENS 16    /* positions the localizer compares node by node */
#define BLOB_MAGIC 0x474C4452u /* "GLDR" */

typedef struct blob_head {
    uint32_t magic, n_pos, k_max, n_vocab, numerics, length;
    uint64_t n_entries;
} blob_head;

/* One checkpoint's reference: summaries of its n_scored positions. */
typedef struct ref_blob {
    unsigned char *data;
    size_t size;
} ref_blob;

static const gt_refdist_pos *blob_pos(const ref_blob *b, int i)
{
    return (const gt_refdist_pos *)(b->data + sizeof(blob_head)) + i;
}

static const gt_refdist_entry *blob_entries(const ref_blob *b, int n_pos)
{
    return (const gt_refdist_entry *)(b->data + sizeof(blob_head) +
                                      (size_t)n_pos * sizeof(gt_refdist_pos));
}

static bool blob_valid(const unsigned char *d, size_t size, int n_pos, int k_max, int n_vocab,
                       int length)
{
    blob_head h;
    const size_t head = sizeof h + (size_t)n_pos * sizeof(gt_refdist_pos);
    if (size < head)
        return false;
    memcpy(&h, d, sizeof h);
    if (h.magic != BLOB_MAGIC || (int)h.n_pos != n_pos || (int)h.k_max != k_max ||
        (int)h.n_vocab != n_vocab || h.numerics != GT_NUMERICS_VERSION ||
        (int)h.length != length || size != head + h.n_entries * sizeof(gt_refdist_entry))
        return false;
    for (int i = 0; i < n_pos; i++) {
        gt_refdist_pos p;
        memcpy(&p, d + sizeof h + (size_t)i * sizeof p, sizeof p);
        if (p.k < 1 || p.k > n_vocab || p.first + (uint64_t)p.k > h.n_entries || p.argmax < 0 ||
            p.argmax >= n_vocab)
            return false;
    }
    return true;
}

/* The blob of n_pos reference rows x (n_vocab each) predicting next[i]. */
static int blob_build(const float *x, const int32_t *next, int n_pos, int n_vocab, int k_max,
                      double tail_eps, int length, gt_refdist_scratch *s, ref_blob *out,
                      gt_err *err)
{
    const int k_min = n_vocab <= 4096 ? n_vocab : 1;
    gt_refdist_pos *pos = calloc((size_t)n_pos, sizeof *pos);
    gt_refdist_entry *ent = malloc((size_t)n_pos * (size_t)k_max * sizeof *ent);
    if (!pos || !ent) {
        free(pos);
        free(ent);
        return gt_err_set(err, "out of memory (reference summaries of %d positions)", n_pos);
    }
    uint64_t n_ent = 0;
    for (int i = 0; i < n_pos; i++) {
        gt_refdist_summarize(x + (size_t)i * n_vocab, n_vocab, next[i], tail_eps, k_min, k_max, s,
                             &pos[i], ent + n_ent);
        pos[i].first = n_ent;
        n_ent += (uint64_t)pos[i].k;
    }
    const size_t head = sizeof(blob_head) + (size_t)n_pos * sizeof *pos;
    out->size = head + n_ent * sizeof *ent;
    out->data = malloc(out->size);
    if (out->data) {
        blob_head h = {BLOB_MAGIC, (uint32_t)n_pos, (uint32_t)k_max, (uint32_t)n_vocab,
                       GT_NUMERICS_VERSION, (uint32_t)length, n_ent};
        memcpy(out->data, &h, sizeof h);
        memcpy(out->data + sizeof h, pos, (size_t)n_pos * sizeof *pos);
        memcpy(out->data + head, ent, n_ent * sizeof *ent);
    }
    free(pos);
    free(ent);
    return out->data ? 0 : gt_err_set(err, "out of memory");
}

/* The eval text's tokens repeated (BOS only once) to n tokens. */
static int32_t *text_tokens(gt_suite_ctx *c, const gt_model *m, int n, char hash[65], gt_err *err)
{
    char *text = NULL, path[1024];
    size_t len = 0;
    if (gt_evaltext_load(c, gt_model_hparams(m)->n_vocab, &text, &len, hash, path, sizeof path,
                         err) != 0)
        return NULL;
    int32_t *ids = malloc((len + 8) * sizeof *ids), *out = malloc((size_t)n * sizeof *out);
    int k = ids && out ? gt_greedy_tokenize(m, text, ids, (int)len + 8, err) : -1;
    free(text);
    const gt_tokenizer *t = gt_model_tokenizer(m);
    const int skip = k > 0 && gt_tokenizer_adds_bos(t) && ids[0] == gt_tokenizer_bos(t);
    if (k <= skip + 1) {
        if (k >= 0)
            gt_err_set(err, "eval text %s has too few tokens (%d)", path, k);
        free(ids);
        free(out);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        out[i] = i < k ? ids[i] : ids[skip + (i - k) % (k - skip)];
    free(ids);
    return out;
}

typedef struct stats {
    double kl_sum, kl_max;
    int top1, n;
} stats;

/* The cell's decode path over positions [from, to): each token evaluated
 * alone, its logits scored against the blob and binned into the series. */
static int score_decode(gt_suite_ctx *c, gt_session *s, const int32_t *toks, int from, int to,
                        const ref_blob *b, gt_refdist_scratch *sc, stats *st, gt_err *err)
{
    const int V = gt_model_hparams(gt_session_model(s))->n_vocab, n_pos = to - from;
    float *x = malloc((size_t)V * sizeof *x);
    double *logq = malloc((size_t)V * sizeof *logq);
    if (!x || !logq) {
        free(x);
        free(logq);
        return gt_err_set(err, "out of memory");
    }
    const gt_refdist_entry *ent = blob_entries(b, n_pos);
    double bin = 0;
    int rc = 0;
    for (int i = 0; i < n_pos && rc == 0; i++) {
        if ((rc = gt_session_eval(s, &toks[from + i], 1, false, x, err)) != 0)
            break;
        const gt_refdist_pos *h = blob_pos(b, i);
        gt_log_softmax(x, V, logq);
        double gap;
        double kl = gt_refdist_kl(h, ent + h->first, logq, sc, &gap);
        if (!isfinite(kl))
            kl = INFINITY;
        st->kl_sum += kl;
        st->kl_max = kl > st->kl_max ? kl : st->kl_max;
        st->top1 += gt_argmax(x, V) == h->argmax;
        st->n++;
        bin += kl;
        if ((i + 1) % BIN == 0 || i + 1 == n_pos) {
            const int w = (i % BIN) + 1;
            gt_suite_point(c, "drift_kld", from + i, bin / w);
            bin = 0;
        }
    }
    free(x);
    free(logq);
    return rc;
}

/* Evaluates toks[*past, to) on s without logits. */
static int advance(gt_session *s, const int32_t *toks, int *past, int to, gt_err *err)
{
    if (to > *past && gt_session_eval(s, toks + *past, to - *past, false, NULL, err) != 0)
        return -1;
    *past = to > *past ? to : *past;
    return 0;
}

/* The reference's rows for [from, to) on session s (at *past), summarized. */
static int reference_rows(gt_session *s, const int32_t *toks, int *past, int from, int to,
                          int length, const gt_long_plan *p, gt_refdist_scratch *sc,
                          ref_blob *out, gt_err *err)
{
    const int V = gt_model_hparams(gt_session_model(s))->n_vocab, n_pos = to - from;
    float *x = malloc((size_t)n_pos * V * sizeof *x);
    if (!x)
        return gt_err_set(err, "out of memory (%d rows of %d logits)", n_pos, V);
    int rc = advance(s, toks, past, from, err);
    if (rc == 0)
        rc = gt_session_eval(s, toks + from, n_pos, true, x, err);
    if (rc == 0) {
        *past = to;
        rc = blob_build(x, toks + from + 1, n_pos, V, p->k_max, p->tail_eps, length, sc, out, err);
    }
    free(x);
    return rc;
}

int gt_long_drift_run(gt_suite_ctx *c, const gt_model *m, const gt_long_plan *p, gt_err *err)
{
    const int V = gt_model_hparams(m)->n_vocab;
    const int Lmax = p->lengths[p->n_lengths - 1];
    char hash[65];
    int32_t *toks = text_tokens(c, m, Lmax + 1, hash, err);
    if (!toks)
        return -1;
    gt_refdist_scratch sc = {0};
    gt_session *s = NULL, *rs = NULL;
    gt_backend *rb = NULL;
    const gt_session_params sp = {.n_ctx = Lmax};
    int rc = gt_refdist_scratch_init(&sc, V);
    if (rc == 0)
        rc = gt_session_new(m, c->backend, &sp, &s, err);
    if (rc != 0)
        goto out;
    const cJSON *tol = cJSON_GetObjectItemCaseSensitive(c->tolerances, "long.drift_kld_mean");
    int past = 0, rpast = 0;
    bool localized = false;
    stats last = {0};
    for (int i = 0; i < p->n_lengths && rc == 0; i++) {
        const int L = p->lengths[i], from = L - p->n_scored;
        char key[65], settings[128];
        snprintf(settings, sizeof settings, "L=%d;n=%d;k=%d;eps=%.3g;v1", L, p->n_scored,
                 p->k_max, p->tail_eps);
        gt_suite_ref_key(c, "long-drift", hash, settings, key);
        ref_blob b = {0};
        void *data = NULL;
        size_t size = 0;
        const int got = gt_suite_ref_get(c, key, &data, &size, err);
        if (got < 0) {
            rc = -1;
            break;
        }
        const bool cached =
            got == 0 && blob_valid(data, size, p->n_scored, p->k_max, V, L);
        if (cached) {
            b.data = data;
            b.size = size;
        } else {
            free(data);
            const double t0 = gt_suite_now();
            if (p->is_reference) {
                /* the batch pass fills the cache; then back to score decode */
                rc = reference_rows(s, toks, &past, from, L, L, p, &sc, &b, err);
                if (rc == 0 && (rc = gt_session_truncate(s, from, err)) == 0)
                    past = from;
            } else {
                if (!rs && gt_long_reference_session(c, m, Lmax, &rb, &rs, err) != 0) {
                    rc = -1;
                    break;
                }
                rc = reference_rows(rs, toks, &rpast, from, L, L, p, &sc, &b, err);
            }
            if (rc == 0)
                rc = gt_suite_ref_put(c, key, "long drift summaries", b.data, b.size, err);
            gt_suite_log(c, "reference at %d tokens: %.1f s", L, gt_suite_now() - t0);
        }
        stats st = {0};
        const double t1 = gt_suite_now();
        if (rc == 0 && (rc = advance(s, toks, &past, from, err)) == 0)
            rc = score_decode(c, s, toks, from, L, &b, &sc, &st, err);
        free(b.data);
        if (rc != 0)
            break;
        past = L;
        const double mean = st.kl_sum / st.n;
        const char *cmp;
        double bound;
        const gt_status v = gt_tol_eval(tol, mean, &cmp, &bound);
        char name[48];
        snprintf(name, sizeof name, "drift_L%d", L);
        if (v == GT_ST_PENDING) {
            gt_suite_result(c, name, GT_ST_ERROR, "no tolerance for long.drift_kld_mean");
        } else {
            gt_suite_result(c, name, v, "kld_mean %.3g kld_max %.3g top1 %.3f over positions "
                            "%d..%d (bound %s %.3g; cell %.1f s)",
                            mean, st.kl_max, (double)st.top1 / st.n, from, L - 1, cmp, bound,
                            gt_suite_now() - t1);
        }
        if (v == GT_ST_FAIL && !localized && !p->is_reference) {
            /* the localizer's prompt: the text up to LOC_TOKENS into the part scored */
            const int n = from + LOC_TOKENS < L ? from + LOC_TOKENS : L;
            free(c->loc_long);
            if ((c->loc_long = malloc((size_t)n * sizeof *c->loc_long))) {
                memcpy(c->loc_long, toks, (size_t)n * sizeof *toks);
                c->n_loc_long = n;
                c->loc_long_from = from;
                snprintf(c->loc_what, sizeof c->loc_what, "long text at %d tokens", n);
            }
            localized = true;
        }
        last = st;
    }
    if (rc == 0) {
        gt_suite_metric(c, "drift_kld_mean", last.kl_sum / last.n);
        gt_suite_metric(c, "drift_kld_max", last.kl_max);
        gt_suite_metric(c, "drift_top1", (double)last.top1 / last.n);
    }
out:
    gt_session_free(rs);
    gt_backend_close(rb);
    gt_session_free(s);
    gt_refdist_scratch_free(&sc);
    free(toks);
    return rc;
}
