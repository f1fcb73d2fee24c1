/* functional.c: does the runtime behave like a runtime on this backend?
 *
 * Properties that must hold exactly (token identity is the point here):
 *   determinism  the same prompt twice gives the same greedy tokens;
 *   kv_resume    n tokens in one go == n/2 tokens, state saved, restored
 *                into a fresh session, n/2 more;
 *   rollback     truncating back to the prompt and regenerating gives the
 *                first run's tokens again;
 * and properties judged by tolerance or outcome:
 *   prefill      a batch evaluated at once gives the logits of the same
 *                tokens evaluated one by one (max |diff|, the cell's
 *                tolerance: batched matmuls may sum in another order);
 *   overflow     a prompt longer than the context fails with a message
 *                naming the context, and the session still evaluates;
 *   empty_prompt BOS alone evaluates to finite logits (a model that adds no
 *                BOS is noted, and evaluating nothing must be an error);
 *   roundtrip    detokenize(tokenize(p)) == p over the prompt set;
 *   invariance_* the same logits whatever the batch split, the sequences
 *                beside it and the thread count (invariance.h: max |diff|
 *                over the logit range, bit-identical on the reference);
 *   kv_f16_drift the logits with an F16 K/V cache against F32 on the
 *                cell's backend, in every cell (kv_drift.h).
 * Each identity check also reports a count metric ({"eq": 0}) so the
 * database and the gate show the measured value beside its bound.
 *
 * GT_FAULT=nondeterministic perturbs the second determinism run (the top
 * logit of one step is knocked down), which must fail the suite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "http_common.h"
#include "invariance.h"
#include "kv_drift.h"
#include "promptset.h"
#include "suite.h"

static const gt_metric_def METRICS[] = {
    {"determinism_diff", "count", -1, false, "{\"eq\": 0}",
     "greedy tokens that differ between two runs of the same prompt"},
    {"kv_resume_diff", "count", -1, false, "{\"eq\": 0}",
     "tokens that differ between continuous and saved/restored generation"},
    {"rollback_diff", "count", -1, false, "{\"eq\": 0}",
     "tokens that differ after truncating to the prompt and regenerating"},
    {"prefill_max_abs_diff", "logit", -1, false, "{\"max\": 0.05}",
     "max |logit| difference, batched prefill vs token-by-token"},
    {"roundtrip_failures", "count", -1, false, "{\"eq\": 0}",
     "prompts whose detokenized tokens differ from the text"},
    {"state_bytes", "bytes", 0, false, NULL, "serialized session state at the save point"},
    {"seed_diff", "count", -1, false, "{\"eq\": 0}",
     "http cells: tokens that differ between two temperature-0.8 requests with the same seed"},
    {"seed_varies", "count", 0, false, NULL,
     "http cells: 1 when another seed gives another text (info)"},
    GT_INVARIANCE_METRICS,
    GT_KV_DRIFT_METRIC,
    {NULL},
};

static const gt_setting_def SETTINGS[] = {
    {"n_ctx", GT_SET_INT, "session context (default 256)"},
    {"n_tokens", GT_SET_INT, "tokens generated per check (default 32; resume splits it)"},
    {"prefill_tokens", GT_SET_INT, "tokens in the batched-prefill comparison (default 32)"},
    {"prompts", GT_SET_STR, "prompt set file (default by model: see promptset.h)"},
    {"invariance_tokens", GT_SET_INT,
     "tokens of the longest prompt the invariance checks run (default 37; at most n_ctx / 2)"},
    {NULL},
};

static int count_diff(const int32_t *a, const int32_t *b, int n, int *first)
{
    int d = 0;
    *first = -1;
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (*first < 0)
                *first = i;
            d++;
        }
    return d;
}

static void fmt_tokens(const int32_t *t, int n, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < n && strlen(out) + 12 < cap; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%d", i ? " " : "", t[i]);
}

/* Two greedy runs; the second perturbed under the nondeterministic fault. */
static int check_determinism(gt_suite_ctx *c, gt_session *s, const int32_t *prompt, int np,
                             int n, int32_t *first_run, float *logits, gt_err *err)
{
    int32_t *again = malloc((size_t)n * sizeof *again);
    if (!again)
        return gt_err_set(err, "out of memory");
    int rc = -1;
    if (gt_greedy_run(s, prompt, np, n, first_run, logits, err) != 0)
        goto out;
    if (gt_suite_fault(c, "nondeterministic", NULL)) {
        /* Knock the argmax down at step n/2, as a racy reduction might. */
        int n_vocab = gt_model_hparams(gt_session_model(s))->n_vocab;
        int half = n / 2;
        if (gt_greedy_run(s, prompt, np, half, again, logits, err) != 0)
            goto out;
        logits[gt_argmax(logits, n_vocab)] = -INFINITY;
        if (gt_greedy_continue(s, NULL, n - half, again + half, logits, err) != 0)
            goto out;
    } else if (gt_greedy_run(s, prompt, np, n, again, logits, err) != 0) {
        goto out;
    }
    int first, d = count_diff(first_run, again, n, &first);
    char a[256], b[256];
    fmt_tokens(first_run, n, a, sizeof a);
    fmt_tokens(again, n, b, sizeof b);
    if (d)
        gt_suite_check(c, "determinism", false, "%d of %d tokens differ, first at %d: [%s] vs [%s]",
                       d, n, first, a, b);
    else
        gt_suite_check(c, "determinism", true, "0 of %d tokens differ: [%s]", n, a);
    gt_suite_metric(c, "determinism_diff", d);
    rc = 0;
out:
    free(again);
    return rc;
}

/* Continuous generation (ref) vs half, save, restore elsewhere, half. */
static int check_resume(gt_suite_ctx *c, const gt_model *m, gt_session *s, const int32_t *prompt,
                        int np, int n, const int32_t *ref, float *logits, gt_err *err)
{
    int half = n / 2;
    int32_t *out = malloc((size_t)n * sizeof *out);
    void *state = NULL;
    gt_session *s2 = NULL;
    int rc = -1;
    if (!out)
        return gt_err_set(err, "out of memory");
    if (gt_greedy_run(s, prompt, np, half, out, logits, err) != 0)
        goto out;
    size_t sz = gt_session_state_size(s);
    if (!(state = malloc(sz ? sz : 1))) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    gt_err e = {{0}};
    gt_session_params sp = {.n_ctx = gt_session_n_ctx(s)};
    if (gt_session_state_save(s, state, sz, &e) != 0 ||
        gt_session_new(m, c->backend, &sp, &s2, &e) != 0 ||
        gt_session_state_load(s2, state, sz, &e) != 0 ||
        gt_greedy_continue(s2, NULL, n - half, out + half, logits, &e) != 0) {
        gt_suite_check(c, "kv_resume", false, "save/restore after %d tokens: %s", half, e.msg);
        rc = 0;
        goto out;
    }
    int first, d = count_diff(ref, out, n, &first);
    gt_suite_check(c, "kv_resume", d == 0 && gt_session_n_past(s2) == np + n,
                   "%d of %d tokens differ (first at %d) after restoring %zu bytes of state at "
                   "%d tokens; n_past %d (expected %d)",
                   d, n, first, sz, half, gt_session_n_past(s2), np + n);
    gt_suite_metric(c, "kv_resume_diff", d);
    gt_suite_metric(c, "state_bytes", (double)sz);
    rc = 0;
out:
    gt_session_free(s2);
    free(state);
    free(out);
    return rc;
}

/* After a full run in s, truncate to the prompt minus one and regenerate. */
static int check_rollback(gt_suite_ctx *c, gt_session *s, const int32_t *prompt, int np, int n,
                          const int32_t *ref, float *logits, gt_err *err)
{
    int32_t *out = malloc((size_t)n * sizeof *out);
    if (!out)
        return gt_err_set(err, "out of memory");
    int rc = -1;
    if (gt_greedy_run(s, prompt, np, n, out, logits, err) != 0)
        goto out;
    gt_err e = {{0}};
    /* The prompt's last token is evaluated again so its logits come back. */
    if (gt_session_truncate(s, np - 1, &e) != 0 ||
        gt_session_eval(s, prompt + np - 1, 1, false, logits, &e) != 0 ||
        gt_greedy_continue(s, NULL, n, out, logits, &e) != 0) {
        gt_suite_check(c, "rollback", false, "truncate to %d and regenerate: %s", np - 1, e.msg);
        rc = 0;
        goto out;
    }
    int first, d = count_diff(ref, out, n, &first);
    gt_suite_check(c, "rollback", d == 0,
                   "%d of %d tokens differ (first at %d) after truncating %d -> %d", d, n, first,
                   np + n, np - 1);
    gt_suite_metric(c, "rollback_diff", d);
    rc = 0;
out:
    free(out);
    return rc;
}

static int check_prefill(gt_suite_ctx *c, gt_session *s, const int32_t *toks, int n,
                         gt_err *err)
{
    int n_vocab = gt_model_hparams(gt_session_model(s))->n_vocab;
    size_t len = (size_t)n * (size_t)n_vocab;
    float *batch = malloc(len * sizeof *batch), *one = malloc(len * sizeof *one);
    int rc = -1;
    if (!batch || !one) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    if (gt_session_truncate(s, 0, err) != 0 ||
        gt_session_eval(s, toks, n, true, batch, err) != 0 || gt_session_truncate(s, 0, err) != 0)
        goto out;
    for (int i = 0; i < n; i++)
        if (gt_session_eval(s, toks + i, 1, false, one + (size_t)i * n_vocab, err) != 0)
            goto out;
    double mx = 0, scale = 0;
    size_t at = 0;
    long nonfinite = 0;
    for (size_t i = 0; i < len; i++) {
        double d = fabs((double)batch[i] - one[i]);
        if (!isfinite(d)) {
            nonfinite++;
            continue;
        }
        if (d > mx)
            mx = d, at = i;
        if (fabs(one[i]) > scale)
            scale = fabs(one[i]);
    }
    if (nonfinite)
        mx = INFINITY;
    gt_suite_check(c, "prefill", nonfinite == 0,
                   "%d tokens: max |batched - single| = %.3g at position %zu (largest |logit| "
                   "%.3g)%s",
                   n, mx, at / (size_t)n_vocab, scale, nonfinite ? "; non-finite logits" : "");
    gt_suite_metric(c, "prefill_max_abs_diff", mx);
    rc = 0;
out:
    free(batch);
    free(one);
    return rc;
}

/* n_ctx + 1 tokens must fail cleanly; then a short eval must still work. */
static int check_overflow(gt_suite_ctx *c, gt_session *s, const int32_t *prompt, int np,
                          int32_t expect_first, float *logits, gt_err *err)
{
    int n_ctx = gt_session_n_ctx(s);
    int32_t *big = malloc((size_t)(n_ctx + 1) * sizeof *big);
    if (!big)
        return gt_err_set(err, "out of memory");
    for (int i = 0; i <= n_ctx; i++)
        big[i] = prompt[i % np];
    gt_err e = {{0}};
    if (gt_session_truncate(s, 0, err) != 0) {
        free(big);
        return -1;
    }
    int r = gt_session_eval(s, big, n_ctx + 1, false, logits, &e);
    free(big);
    bool clear = r != 0 && e.msg[0] && strstr(e.msg, "context") != NULL;
    if (r == 0)
        gt_suite_check(c, "overflow_error", false, "%d tokens in a context of %d were accepted",
                       n_ctx + 1, n_ctx);
    else
        gt_suite_check(c, "overflow_error", clear && gt_session_n_past(s) == 0,
                       "%d tokens in a context of %d: \"%s\"; n_past %d after", n_ctx + 1, n_ctx,
                       e.msg, gt_session_n_past(s));
    gt_err e2 = {{0}};
    int n_vocab = gt_model_hparams(gt_session_model(s))->n_vocab;
    bool ok = gt_session_eval(s, prompt, np, false, logits, &e2) == 0;
    int32_t got = ok ? gt_argmax(logits, n_vocab) : -1;
    if (ok)
        gt_suite_check(c, "overflow_recovers", got == expect_first,
                       "after the error the prompt evaluates again; next token %d (expected %d)",
                       got, expect_first);
    else
        gt_suite_check(c, "overflow_recovers", false, "eval after the overflow error failed: %s",
                       e2.msg);
    return 0;
}

static void check_empty(gt_suite_ctx *c, const gt_model *m, gt_session *s, float *logits)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    int n_vocab = gt_model_hparams(m)->n_vocab;
    int32_t ids[4];
    gt_err e = {{0}};
    int n = gt_greedy_tokenize(m, "", ids, 4, &e);
    gt_session_truncate(s, 0, NULL);
    const char *note = "";
    if (n == 0 && gt_tokenizer_bos(t) >= 0) {
        ids[0] = gt_tokenizer_bos(t);
        n = 1;
        note = " (the model adds no BOS to prompts; its BOS token was evaluated alone)";
    }
    if (n <= 0) {
        int r = gt_session_eval(s, ids, 0, false, logits, &e);
        gt_suite_check(c, "empty_prompt", r != 0,
                       "model has no BOS: an empty prompt is no tokens, and eval of 0 tokens "
                       "%s%s",
                       r ? "fails: " : "was accepted", r ? e.msg : "");
        return;
    }
    int r = gt_session_eval(s, ids, n, false, logits, &e);
    long bad = 0;
    for (int i = 0; r == 0 && i < n_vocab; i++)
        bad += !isfinite(logits[i]);
    if (r != 0)
        gt_suite_check(c, "empty_prompt", false, "BOS-only prompt: %s", e.msg);
    else
        gt_suite_check(c, "empty_prompt", bad == 0,
                       "BOS-only prompt (%d token) evaluates: %ld non-finite logits, next token "
                       "%d%s",
                       n, bad, gt_argmax(logits, n_vocab), note);
}

static int check_roundtrip(gt_suite_ctx *c, const gt_model *m, const gt_promptset *ps,
                           gt_err *err)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    int fails = 0;
    char first_bad[200] = "";
    for (int i = 0; i < ps->n; i++) {
        const char *text = ps->p[i].text;
        size_t len = strlen(text);
        int cap = (int)len + 8;
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        char *back = malloc(len * 4 + 64);
        if (!ids || !back) {
            free(ids);
            free(back);
            return gt_err_set(err, "out of memory");
        }
        int n = gt_tokenize(t, text, len, false, ids, cap, err);
        bool ok = n >= 0 && n <= cap &&
                  gt_detokenize(t, ids, n, back, len * 4 + 64) == (int)len &&
                  memcmp(back, text, len) == 0;
        if (!ok && !fails++)
            snprintf(first_bad, sizeof first_bad, "%s: \"%.40s\" -> \"%.40s\"", ps->p[i].id,
                     text, n >= 0 ? back : "(tokenize failed)");
        free(ids);
        free(back);
    }
    gt_suite_check(c, "roundtrip", fails == 0, "%d of %d prompts of %s round-trip%s%s",
                   ps->n - fails, ps->n, ps->path, fails ? "; first failure " : "", first_bad);
    gt_suite_metric(c, "roundtrip_failures", fails);
    return 0;
}

static int functional_run(gt_suite_ctx *c, gt_err *err)
{
    int n_ctx = (int)gt_suite_int(c, "n_ctx", 256);
    int n = (int)gt_suite_int(c, "n_tokens", 32);
    int n_pre = (int)gt_suite_int(c, "prefill_tokens", 32);
    int n_inv = (int)gt_suite_int(c, "invariance_tokens", 37);
    if (n < 2 || n_pre < 2 || n_inv < 2 || n_ctx < 16)
        return gt_err_set(err, "functional settings: n_tokens, prefill_tokens and "
                               "invariance_tokens must be >= 2, n_ctx >= 16");
    gt_model *m;
    if (gt_suite_model(c, &m, err) != 0)
        return -1;
    int n_vocab = gt_model_hparams(m)->n_vocab;
    gt_promptset ps;
    if (gt_promptset_load(c, n_vocab, 0, &ps, err) != 0)
        return -1;
    int cap = n_ctx;
    int32_t *prompt = malloc((size_t)cap * sizeof *prompt);
    int32_t *pre = malloc((size_t)cap * sizeof *pre);
    int32_t *ref = malloc((size_t)n * sizeof *ref);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    gt_session *s = NULL;
    int rc = -1;
    if (!prompt || !pre || !ref || !logits) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    /* The first prompt drives generation; the longest one the prefill. */
    int np = gt_greedy_tokenize(m, ps.p[0].text, prompt, cap, err);
    if (np < 0)
        goto out;
    if (np < 1 || np + n > n_ctx) {
        gt_err_set(err, "prompt %s has %d tokens; with %d generated it does not fit %d",
                   ps.p[0].id, np, n, n_ctx);
        goto out;
    }
    int longest = 0;
    for (int i = 1; i < ps.n; i++)
        if (strlen(ps.p[i].text) > strlen(ps.p[longest].text))
            longest = i;
    int npre = gt_greedy_tokenize(m, ps.p[longest].text, pre, cap, err);
    if (npre < 0)
        goto out;
    if (npre > cap)
        npre = cap;
    if (n_inv > npre)
        n_inv = npre;
    if (n_inv > n_ctx / 2)
        n_inv = n_ctx / 2;
    if (npre > n_pre)
        npre = n_pre;
    if (npre < 2) {
        gt_err_set(err, "prompt %s is too short for the prefill check", ps.p[longest].id);
        goto out;
    }
    gt_session_params sp = {.n_ctx = n_ctx};
    gt_err e = {{0}};
    if (!gt_suite_check(c, "session", gt_session_new(m, c->backend, &sp, &s, &e) == 0, "%s",
                        e.msg[0] ? e.msg : "session opened")) {
        rc = 0;
        goto out;
    }
    if (check_determinism(c, s, prompt, np, n, ref, logits, err) != 0 ||
        check_resume(c, m, s, prompt, np, n, ref, logits, err) != 0 ||
        check_rollback(c, s, prompt, np, n, ref, logits, err) != 0 ||
        check_prefill(c, s, pre, npre, err) != 0 ||
        check_overflow(c, s, prompt, np, ref[0], logits, err) != 0 ||
        gt_invariance_run(c, m, pre, n_inv, n_ctx, err) != 0 ||
        gt_kv_drift_run(c, m, pre, n_inv, n_ctx, err) != 0)
        goto out;
    check_empty(c, m, s, logits);
    if (check_roundtrip(c, m, &ps, err) != 0)
        goto out;
    rc = 0;
out:
    gt_session_free(s);
    free(prompt);
    free(pre);
    free(ref);
    free(logits);
    gt_promptset_free(&ps);
    return rc;
}

const gt_suite gt_suite_functional = {
    .name = "functional",
    .description = "determinism, KV save/restore, rollback, batched prefill, context overflow, "
                   "empty prompt, tokenizer round trip, invariance to batch split, parallel "
                   "sequences and threads, F16 K/V drift",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = functional_run,
};
