/* kv_drift.c: the functional suite's kv_f16_drift metric (kv_drift.h):
 * what rounding the K/V cache to F16 does to a backend's logits.
 *
 * Design choices:
 * - Both runs are on the cell's own backend, so the metric isolates the
 *   cache type from the backend's other arithmetic (cpu vs reference is
 *   the accuracy suite's business).
 * - The F16 run replays the decode tokens the F32 run chose, so a flipped
 *   argmax does not change the history the later steps compare.
 * - One-sequence sessions (no companions): the cell's n_batch still
 *   applies (the backend's exec), its n_parallel is the invariance
 *   checks' concern.
 * - A session's kv_type 0 (= GT_TYPE_F32) means the backend's own, so in
 *   a kv_type f16 cell the F32 run is on a fresh instance of the cell's
 *   backend (its driver and settings, kv_type f32), as invariance_threads
 *   opens one. */
#include "kv_drift.h"

#include "invariance.h"

#include <stdlib.h>

#include "gt/backend.h"
#include "gt/sampler.h"
#include "gt/session.h"

#define DECODE_STEPS 8

/* The prompt's logits then DECODE_STEPS steps with a cache of kv_type;
 * dec is filled greedily (replay false) or replayed. */
static int run(const gt_model *m, gt_backend *b, gt_type kv_type, const int32_t *tokens, int n,
               int n_ctx, int32_t *dec, bool replay, float *out, gt_err *err)
{
    const size_t V = (size_t)gt_model_hparams(m)->n_vocab;
    gt_session *s = NULL;
    const gt_session_params sp = {.n_ctx = n_ctx, .n_seq_max = 1, .kv_type = kv_type};
    int rc = gt_session_new(m, b, &sp, &s, err);
    if (rc == 0)
        rc = gt_session_eval(s, tokens, n, true, out, err);
    for (int i = 0; i < DECODE_STEPS && rc == 0; i++) {
        if (!replay)
            dec[i] = gt_argmax(out + (size_t)(n - 1 + i) * V, (int)V);
        rc = gt_session_eval(s, &dec[i], 1, false, out + (size_t)(n + i) * V, err);
    }
    gt_session_free(s);
    return rc;
}

int gt_kv_drift_run(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n, int n_ctx,
                    gt_err *err)
{
    const char *name = "kv_f16_drift";
    char why[256] = "";
    for (gt_op op = GT_OP_KV_STORE; op <= GT_OP_ATTENTION; op++) {
        if (!gt_backend_supports(c->backend, op, GT_TYPE_F16, why, sizeof why)) {
            gt_suite_result(c, name, GT_ST_SKIP, "backend %s has no F16 K/V cache (%s/f16%s%s)",
                            c->backend->info.backend, gt_op_name(op), why[0] ? ": " : "", why);
            return 0;
        }
    }
    if (n + DECODE_STEPS > n_ctx)
        n = n_ctx - DECODE_STEPS;
    const size_t V = (size_t)gt_model_hparams(m)->n_vocab, len = (size_t)(n + DECODE_STEPS) * V;
    float *f32 = malloc(len * sizeof *f32), *f16 = malloc(len * sizeof *f16);
    int32_t dec[DECODE_STEPS];
    int rc = -1;
    if (!f32 || !f16 || n < 1) {
        gt_err_set(err, n < 1 ? "no room for the kv_f16_drift prompt" : "out of memory");
        goto out;
    }
    gt_err e = {{0}};
    const gt_exec_settings *x = &c->backend->exec;
    gt_backend *b32 = c->backend;
    if (x->kv_type == GT_TYPE_F16) {
        if (gt_suite_backend_variant(c, c->n_threads, GT_TYPE_F32, &b32, &e) != 0) {
            gt_suite_check(c, name, false, "%s with kv_type f32: %s", c->backend_name, e.msg);
            rc = 0;
            goto out;
        }
    }
    const int r32 = run(m, b32, GT_TYPE_F32, tokens, n, n_ctx, dec, false, f32, &e);
    if (b32 != c->backend)
        gt_backend_close(b32);
    if (r32 != 0 ||
        run(m, c->backend, GT_TYPE_F16, tokens, n, n_ctx, dec, true, f16, &e) != 0) {
        gt_suite_check(c, name, false, "%s", e.msg);
        rc = 0;
        goto out;
    }
    /* max |diff| over the range of the F32 logits; non-finite is a failure */
    const gt_logit_diff d = gt_logit_diff_of(f16, f32, len);
    gt_suite_check(c, name, d.nonfinite == 0,
                   "%d tokens and %d decode steps, F16 vs F32 cache: max |diff| %.3g at position "
                   "%zu (%.3g of the logit range %.3g)%s",
                   n, DECODE_STEPS, d.max_abs, d.at / V, d.rel, d.range,
                   d.nonfinite ? "; non-finite logits" : "");
    gt_suite_metric(c, name, d.rel);
    rc = 0;
out:
    free(f32);
    free(f16);
    return rc;
}
