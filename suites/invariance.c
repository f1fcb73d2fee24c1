/* invariance.c: a sequence's logits do not depend on how it is executed
 * (invariance.h): batch split, sequences beside it, thread count.
 *
 * Design choices:
 * - Every comparison is of logits, not tokens: a token comparison passes
 *   any error too small to flip an argmax in a short run, and these are the
 *   bugs that show only at length or on another prompt.
 * - The decode steps of the parallel check are teacher-forced with the
 *   tokens the lone run chose, so both runs see the same history even if an
 *   argmax would flip.
 * - The companions of the parallel check are ragged on purpose: one starts
 *   shorter than the target and is removed after 3 steps, one starts longer
 *   and runs to the end, one starts when the first is removed. Their
 *   entries come before and after the target's in each call, so the
 *   target's tokens sit at different offsets of the packed batch.
 * - The thread check opens two fresh instances of the cell's backend (its
 *   driver and execution settings, only n_threads changed), so it runs
 *   whatever the cell's own thread count is. */
#include "invariance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/sampler.h"
#include "gt/session.h"

#define DECODE_STEPS 8

typedef struct diff {
    double max_abs, range, rel;
    size_t at;   /* index of the largest difference */
    long nonfinite;
} diff;

/* a against b (the baseline) over n values. */
static diff compare(const float *a, const float *b, size_t n)
{
    diff d = {0};
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (!isfinite(x)) {
            d.nonfinite++;
            continue;
        }
        if (x > d.max_abs)
            d.max_abs = x, d.at = i;
        if (b[i] < lo)
            lo = b[i];
        if (b[i] > hi)
            hi = b[i];
    }
    d.range = hi > lo ? hi - lo : 1;
    d.rel = d.nonfinite ? INFINITY : d.max_abs / d.range;
    return d;
}

static bool is_reference(const gt_suite_ctx *c)
{
    return c->backend_name && strcmp(c->backend_name, "reference") == 0;
}

/* One check and its metric: finite everywhere, and on the reference
 * backend bit-identical. what says what was compared. */
static void judge(gt_suite_ctx *c, const char *name, const diff *d, int n_vocab,
                  const char *what)
{
    const bool ref = is_reference(c);
    const bool ok = d->nonfinite == 0 && (!ref || d->max_abs == 0);
    gt_suite_check(c, name, ok,
                   "%s: max |diff| %.3g at position %zu (%.3g of the logit range %.3g)%s%s", what,
                   d->max_abs, d->at / (size_t)n_vocab, d->rel, d->range,
                   d->nonfinite ? "; non-finite logits" : "",
                   ref ? (d->max_abs == 0 ? "; bit-identical, as the reference must be"
                                          : "; the reference must be bit-identical")
                       : "");
    gt_suite_metric(c, name, d->rel);
}

/* All logits of tokens in a fresh session on b with n_batch (0 = default)
 * and n_seq_max. */
static int eval_all(const gt_model *m, gt_backend *b, int n_ctx, int n_batch, int n_seq_max,
                    const int32_t *tokens, int n, float *logits, gt_err *err)
{
    gt_session *s = NULL;
    gt_session_params sp = {.n_ctx = n_ctx, .n_batch = n_batch, .n_seq_max = n_seq_max};
    int rc = gt_session_new(m, b, &sp, &s, err);
    if (rc == 0)
        rc = gt_session_eval(s, tokens, n, true, logits, err);
    gt_session_free(s);
    return rc;
}

static int check_batch_split(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                             int n_ctx, int n_vocab, gt_err *err)
{
    const size_t len = (size_t)n * (size_t)n_vocab;
    float *base = malloc(len * sizeof *base), *got = malloc(len * sizeof *got);
    int rc = -1;
    if (!base || !got) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    /* The prompt's length (one micro-batch) is the baseline; 1 and 7 split it. */
    const int splits[] = {1, 7};
    gt_err e = {{0}};
    if (eval_all(m, c->backend, n_ctx, n, 0, tokens, n, base, &e) != 0) {
        gt_suite_check(c, "invariance_batch_split", false, "n_batch %d: %s", n, e.msg);
        rc = 0;
        goto out;
    }
    diff worst = {0};
    int worst_nb = splits[0];
    for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
        if (eval_all(m, c->backend, n_ctx, splits[k], 0, tokens, n, got, &e) != 0) {
            gt_suite_check(c, "invariance_batch_split", false, "n_batch %d: %s", splits[k],
                           e.msg);
            rc = 0;
            goto out;
        }
        diff d = compare(got, base, len);
        if (k == 0 || d.rel > worst.rel || (d.nonfinite && !worst.nonfinite))
            worst = d, worst_nb = splits[k];
    }
    char what[160];
    snprintf(what, sizeof what, "%d tokens in micro-batches of 1 and 7 vs %d (worst n_batch %d)",
             n, n, worst_nb);
    judge(c, "invariance_batch_split", &worst, n_vocab, what);
    rc = 0;
out:
    free(base);
    free(got);
    return rc;
}

/* A token sequence unlike the prompt (valid ids): the prompt rotated. */
static void other_tokens(const int32_t *tokens, int n, int shift, int32_t *out, int len)
{
    for (int i = 0; i < len; i++)
        out[i] = tokens[(i + shift) % n];
}

static int check_parallel(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                          int n_ctx, int n_vocab, gt_err *err)
{
    const size_t V = (size_t)n_vocab, len = (size_t)(n + DECODE_STEPS) * V;
    float *alone = malloc(len * sizeof *alone), *beside = malloc(len * sizeof *beside);
    const int n1 = n / 3 > 1 ? n / 3 : 1, n2 = n + n / 2, n3 = 5;
    int32_t *o1 = malloc((size_t)n1 * sizeof *o1), *o2 = malloc((size_t)n2 * sizeof *o2);
    int32_t o3[5], dec[DECODE_STEPS];
    gt_session *s = NULL;
    int rc = -1;
    if (!alone || !beside || !o1 || !o2) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    other_tokens(tokens, n, 1, o1, n1);
    other_tokens(tokens, n, 3, o2, n2);
    other_tokens(tokens, n, 5, o3, n3);
    gt_err e = {{0}};
    /* Alone: one sequence, no companions; greedy, the tokens kept. */
    gt_session_params sp = {.n_ctx = n_ctx, .n_seq_max = 1};
    if (gt_session_new(m, c->backend, &sp, &s, &e) != 0 ||
        gt_session_eval(s, tokens, n, true, alone, &e) != 0)
        goto failed;
    for (int i = 0; i < DECODE_STEPS; i++) {
        const float *last = alone + (size_t)(n - 1 + i) * V;
        dec[i] = gt_argmax(last, n_vocab);
        if (gt_session_eval(s, &dec[i], 1, false, alone + (size_t)(n + i) * V, &e) != 0)
            goto failed;
    }
    gt_session_free(s);
    s = NULL;

    /* Beside three others. */
    sp.n_seq_max = 4;
    if (gt_session_new(m, c->backend, &sp, &s, &e) != 0)
        goto failed;
    {
        const gt_seq_eval first[] = {
            {.seq = 1, .tokens = o1, .n = n1},
            {.seq = 0, .tokens = tokens, .n = n, .all_logits = true, .logits = beside},
            {.seq = 2, .tokens = o2, .n = n2},
        };
        if (gt_session_eval_seqs(s, first, 3, &e) != 0)
            goto failed;
    }
    int32_t filler = tokens[0];
    for (int i = 0; i < DECODE_STEPS; i++) {
        gt_seq_eval step[4];
        int k = 0;
        const bool one_alive = i < 3, three_alive = i >= 4;
        if (one_alive)
            step[k++] = (gt_seq_eval){.seq = 1, .tokens = &filler, .n = 1};
        if (i == 4) /* sequence 3 starts with a prompt of its own */
            step[k++] = (gt_seq_eval){.seq = 3, .tokens = o3, .n = n3};
        else if (three_alive)
            step[k++] = (gt_seq_eval){.seq = 3, .tokens = &filler, .n = 1};
        step[k++] = (gt_seq_eval){.seq = 0, .tokens = &dec[i], .n = 1,
                                  .logits = beside + (size_t)(n + i) * V};
        step[k++] = (gt_seq_eval){.seq = 2, .tokens = &filler, .n = 1};
        if (gt_session_eval_seqs(s, step, k, &e) != 0)
            goto failed;
        if (i == 2 && gt_session_seq_truncate(s, 1, 0, &e) != 0) /* sequence 1 finishes */
            goto failed;
    }
    if (gt_session_seq_n_past(s, 0) != n + DECODE_STEPS || gt_session_seq_n_past(s, 1) != 0) {
        gt_suite_check(c, "invariance_parallel", false,
                       "after the run sequence 0 holds %d positions (expected %d) and the "
                       "removed sequence 1 %d (expected 0)",
                       gt_session_seq_n_past(s, 0), n + DECODE_STEPS,
                       gt_session_seq_n_past(s, 1));
        rc = 0;
        goto out;
    }
    {
        diff d = compare(beside, alone, len);
        char what[200];
        snprintf(what, sizeof what,
                 "%d prompt tokens + %d decode steps beside 3 sequences (%d, %d and %d tokens, "
                 "the first removed after 3 steps, the last started at step 5) vs alone",
                 n, DECODE_STEPS, n1, n2, n3);
        judge(c, "invariance_parallel", &d, n_vocab, what);
    }
    rc = 0;
    goto out;
failed:
    gt_suite_check(c, "invariance_parallel", false, "%s", e.msg);
    rc = 0;
out:
    gt_session_free(s);
    free(alone);
    free(beside);
    free(o1);
    free(o2);
    return rc;
}

static int check_threads(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                         int n_ctx, int n_vocab, gt_err *err)
{
    const size_t len = (size_t)n * (size_t)n_vocab;
    float *out[2] = {malloc(len * sizeof(float)), malloc(len * sizeof(float))};
    gt_backend *b[2] = {NULL, NULL};
    int rc = -1;
    if (!out[0] || !out[1]) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    gt_err e = {{0}};
    for (int t = 0; t < 2; t++) {
        const gt_exec_settings *x = &c->backend->exec;
        gt_backend_config cfg = {.device = c->device, .n_threads = t + 1, .driver = c->driver,
                                 .n_batch = x->n_batch, .n_parallel = x->n_parallel};
        if (gt_backend_open(c->backend_name, &cfg, &b[t], &e) != 0 ||
            eval_all(m, b[t], n_ctx, 0, 0, tokens, n, out[t], &e) != 0) {
            gt_suite_check(c, "invariance_threads", false, "%s with %d thread%s: %s",
                           c->backend_name, t + 1, t ? "s" : "", e.msg);
            rc = 0;
            goto out;
        }
    }
    diff d = compare(out[1], out[0], len);
    char what[160];
    snprintf(what, sizeof what, "%d tokens on %s with 2 threads vs 1", n, c->backend_name);
    judge(c, "invariance_threads", &d, n_vocab, what);
    rc = 0;
out:
    for (int t = 0; t < 2; t++) {
        gt_backend_close(b[t]);
        free(out[t]);
    }
    return rc;
}

int gt_invariance_run(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                      int n_ctx, gt_err *err)
{
    const int n_vocab = gt_model_hparams(m)->n_vocab;
    if (check_batch_split(c, m, tokens, n, n_ctx, n_vocab, err) != 0 ||
        check_parallel(c, m, tokens, n, n_ctx, n_vocab, err) != 0 ||
        check_threads(c, m, tokens, n, n_ctx, n_vocab, err) != 0)
        return -1;
    return 0;
}
