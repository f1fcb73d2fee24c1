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
 * - A setting the cell names is held fixed, one it does not name is
 *   varied: a cell of a settings matrix (nb7-np4-t2) compares its own
 *   n_batch, n_parallel and threads with the least demanding value (one
 *   micro-batch, alone, 1 thread) and skips, saying why, where it has
 *   that value already; a cell without settings tries n_batch 1 and 7, 4
 *   sequences and its threads against 1. So a backend wrong only under one
 *   setting fails exactly the cells that have it (ci/settings-faults.sh).
 * - The other sequences of the parallel check are ragged on purpose: short
 *   ones removed after 3 steps, long ones to the end, late ones started
 *   at step 5. Their entries come before and after the target's in each
 *   call, so the target's tokens sit at other offsets of the packed batch.
 * - The thread check opens a fresh 1-thread instance of the cell's backend
 *   (its driver and execution settings, only n_threads changed). */
#include "invariance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/sampler.h"
#include "gt/session.h"

#define DECODE_STEPS 8

gt_logit_diff gt_logit_diff_of(const float *a, const float *b, size_t n)
{
    gt_logit_diff d = {0};
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
static void judge(gt_suite_ctx *c, const char *name, const gt_logit_diff *d, int n_vocab,
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
    const char *name = "invariance_batch_split";
    const gt_exec_settings *x = &c->backend->exec;
    /* A cell that names its n_batch is held to it; one that names none is
     * split at 1 and 7. */
    int splits[2] = {1, 7}, n_splits = 2;
    if (x->n_batch > 0) {
        if (x->n_batch >= n) {
            gt_suite_result(c, name, GT_ST_SKIP,
                            "the cell's n_batch %d does not split the %d-token prompt; the "
                            "cells with a smaller n_batch test splits",
                            x->n_batch, n);
            return 0;
        }
        splits[0] = x->n_batch;
        n_splits = 1;
    }
    const size_t len = (size_t)n * (size_t)n_vocab;
    float *base = malloc(len * sizeof *base), *got = malloc(len * sizeof *got);
    int rc = -1;
    if (!base || !got) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    /* The baseline is one micro-batch: room for the prompt and the filler
     * tokens of the cell's companions (at most 4 each per eval). */
    const int one = n + 4 * (x->n_parallel > 1 ? x->n_parallel - 1 : 0);
    gt_err e = {{0}};
    if (eval_all(m, c->backend, n_ctx, one, 0, tokens, n, base, &e) != 0) {
        gt_suite_check(c, name, false, "n_batch %d: %s", one, e.msg);
        rc = 0;
        goto out;
    }
    gt_logit_diff worst = {0};
    int worst_nb = splits[0];
    for (int k = 0; k < n_splits; k++) {
        if (eval_all(m, c->backend, n_ctx, splits[k], 0, tokens, n, got, &e) != 0) {
            gt_suite_check(c, name, false, "n_batch %d: %s", splits[k], e.msg);
            rc = 0;
            goto out;
        }
        gt_logit_diff d = gt_logit_diff_of(got, base, len);
        if (k == 0 || d.rel > worst.rel || (d.nonfinite && !worst.nonfinite))
            worst = d, worst_nb = splits[k];
    }
    char what[160];
    if (n_splits == 1)
        snprintf(what, sizeof what, "%d tokens in micro-batches of %d (the cell's) vs one", n,
                 worst_nb);
    else
        snprintf(what, sizeof what, "%d tokens in micro-batches of 1 and 7 vs one (worst %d)", n,
                 worst_nb);
    judge(c, name, &worst, n_vocab, what);
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

/* The others of the parallel check, by j % 3: short and removed after 3
 * decode steps; long, to the end; started at decode step 5 (index 4). */
enum { ROLE_LATE, ROLE_SHORT, ROLE_LONG };
#define LATE_STEP 4
#define SHORT_STEPS 3
#define LATE_TOKENS 5

static int check_parallel(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                          int n_ctx, int n_vocab, gt_err *err)
{
    const char *name = "invariance_parallel";
    /* A cell that names n_parallel is held to it; one that names none
     * runs 4 sequences. */
    const int np = c->backend->exec.n_parallel > 0 ? c->backend->exec.n_parallel : 4;
    if (np < 2) {
        gt_suite_result(c, name, GT_ST_SKIP,
                        "the cell runs one sequence (n_parallel 1); the cells with n_parallel > "
                        "1 test sequences side by side");
        return 0;
    }
    const size_t V = (size_t)n_vocab, len = (size_t)(n + DECODE_STEPS) * V;
    float *alone = malloc(len * sizeof *alone), *beside = malloc(len * sizeof *beside);
    const int n_short = n / 3 > 1 ? n / 3 : 1;
    const int n_long = n + n / 2 < n_ctx - DECODE_STEPS ? n + n / 2 : n_ctx - DECODE_STEPS;
    int32_t *others = malloc((size_t)(np - 1) * (size_t)n_long * sizeof *others);
    gt_seq_eval *ev = malloc((size_t)np * sizeof *ev);
    int32_t dec[DECODE_STEPS];
    gt_session *s = NULL;
    int rc = -1;
    if (!alone || !beside || !others || !ev) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    for (int j = 1; j < np; j++)
        other_tokens(tokens, n, j, others + (size_t)(j - 1) * n_long, n_long);
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

    /* Beside the others: the target's entry in the middle of each call, so
     * its tokens sit at another offset of the packed batch than alone. */
    sp.n_seq_max = np;
    if (gt_session_new(m, c->backend, &sp, &s, &e) != 0)
        goto failed;
    const int32_t filler = tokens[0];
    for (int step = -1; step < DECODE_STEPS; step++) { /* -1: the prompts */
        int k = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) /* the target */
                ev[k++] = step < 0 ? (gt_seq_eval){.seq = 0, .tokens = tokens, .n = n,
                                                   .all_logits = true, .logits = beside}
                                   : (gt_seq_eval){.seq = 0, .tokens = &dec[step], .n = 1,
                                                   .logits = beside + (size_t)(n + step) * V};
            for (int j = 1 + pass; j < np; j += 2) {
                const int32_t *own = others + (size_t)(j - 1) * n_long;
                const int role = j % 3;
                gt_seq_eval o = {.seq = j, .tokens = &filler, .n = 1};
                if (role == ROLE_SHORT && step >= SHORT_STEPS)
                    continue; /* removed */
                if (role == ROLE_LATE && step < LATE_STEP)
                    continue; /* not started */
                if (step < 0 || (role == ROLE_LATE && step == LATE_STEP)) {
                    o.tokens = own;
                    o.n = role == ROLE_SHORT ? n_short : role == ROLE_LONG ? n_long : LATE_TOKENS;
                }
                ev[k++] = o;
            }
        }
        if (gt_session_eval_seqs(s, ev, k, &e) != 0)
            goto failed;
        for (int j = 1; step == SHORT_STEPS - 1 && j < np; j++) /* the short ones finish */
            if (j % 3 == ROLE_SHORT && gt_session_seq_truncate(s, j, 0, &e) != 0)
                goto failed;
    }
    if (gt_session_seq_n_past(s, 0) != n + DECODE_STEPS || gt_session_seq_n_past(s, 1) != 0) {
        gt_suite_check(c, name, false,
                       "after the run sequence 0 holds %d positions (expected %d) and the "
                       "removed sequence 1 %d (expected 0)",
                       gt_session_seq_n_past(s, 0), n + DECODE_STEPS,
                       gt_session_seq_n_past(s, 1));
        rc = 0;
        goto out;
    }
    {
        gt_logit_diff d = gt_logit_diff_of(beside, alone, len);
        char what[240];
        snprintf(what, sizeof what,
                 "%d prompt tokens + %d decode steps beside %d other sequence%s (ragged: %d "
                 "tokens and removed after %d steps, %d tokens, %d started at step %d) vs alone",
                 n, DECODE_STEPS, np - 1, np > 2 ? "s" : "", n_short, SHORT_STEPS, n_long,
                 LATE_TOKENS, LATE_STEP + 1);
        judge(c, name, &d, n_vocab, what);
    }
    rc = 0;
    goto out;
failed:
    gt_suite_check(c, name, false, "%d sequences: %s", np, e.msg);
    rc = 0;
out:
    gt_session_free(s);
    free(alone);
    free(beside);
    free(others);
    free(ev);
    return rc;
}

static int check_threads(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                         int n_ctx, int n_vocab, gt_err *err)
{
    const char *name = "invariance_threads";
    const gt_exec_settings *x = &c->backend->exec;
    /* The cell's own thread count against 1; a one-thread cell has nothing
     * to compare (the cells with more threads hold it). */
    if (c->n_threads == 1) {
        gt_suite_result(c, name, GT_ST_SKIP,
                        "the cell runs 1 thread; the cells with more threads compare against 1");
        return 0;
    }
    const size_t len = (size_t)n * (size_t)n_vocab;
    float *cell = malloc(len * sizeof *cell), *one = malloc(len * sizeof *one);
    gt_backend *b1 = NULL;
    int rc = -1;
    if (!cell || !one) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    gt_err e = {{0}};
    if (eval_all(m, c->backend, n_ctx, 0, 0, tokens, n, cell, &e) != 0 ||
        gt_suite_backend_variant(c, 1, x->kv_type, &b1, &e) != 0 ||
        eval_all(m, b1, n_ctx, 0, 0, tokens, n, one, &e) != 0) {
        gt_suite_check(c, name, false, "%s: %s", c->backend_name, e.msg);
        rc = 0;
        goto out;
    }
    gt_logit_diff d = gt_logit_diff_of(cell, one, len);
    char what[160], t[16] = "default";
    if (c->n_threads > 0)
        snprintf(t, sizeof t, "%d", c->n_threads);
    snprintf(what, sizeof what, "%d tokens on %s with the cell's threads (%s) vs 1", n,
             c->backend_name, t);
    judge(c, name, &d, n_vocab, what);
    rc = 0;
out:
    gt_backend_close(b1);
    free(cell);
    free(one);
    return rc;
}

int gt_suite_backend_variant(const gt_suite_ctx *c, int n_threads, gt_type kv_type,
                             gt_backend **out, gt_err *err)
{
    const gt_exec_settings *x = &c->backend->exec;
    const gt_backend_config cfg = {.device = c->device, .n_threads = n_threads,
                                   .driver = c->driver, .n_batch = x->n_batch,
                                   .n_parallel = x->n_parallel, .kv_type = kv_type};
    return gt_backend_open(c->backend_name, &cfg, out, err);
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
