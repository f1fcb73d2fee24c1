/* invariance.h: the functional suite's invariance checks (invariance.c).
 *
 * A backend's logits for a sequence must not depend on how the runtime
 * executes it:
 *   invariance_batch_split  the prompt evaluated with all logits in
 *                           micro-batches of the cell's n_batch (when its
 *                           matrix names one; else 1 and 7) against one
 *                           micro-batch;
 *   invariance_parallel     the prompt and 8 decode steps in a session of
 *                           the cell's n_parallel sequences (when named;
 *                           else 4), ragged, one removed early and another
 *                           started late, against the same alone;
 *   invariance_threads      the prompt with the cell's threads against a
 *                           fresh 1-thread instance of its backend.
 * Where the cell already has the least demanding value (an n_batch that
 * does not split the prompt, n_parallel 1, 1 thread) the check is a skip
 * saying so: the matrix's other cells of that axis hold it, and a backend
 * wrong only under one setting fails exactly the cells with that setting.
 * Each metric is the largest |logit difference| divided by the range of the
 * logits compared (max - min), so one bound fits every model: default
 * {"max": 1e-4}, ~80x the worst clean value measured (1.3e-6, SmolLM2 q4_1
 * on cpu) and ~200x below the smallest settings fault (0.021,
 * batch-split@0 on stories260k). The reference backend defines the
 * semantics: on it each check also requires bit-identical logits. */
#ifndef GT_SUITE_INVARIANCE_H
#define GT_SUITE_INVARIANCE_H

#include <stdint.h>

#include "gt/backend.h"
#include "gt/error.h"
#include "gt/model.h"
#include "suite.h"

/* The three metrics, for the functional suite's table. */
#define GT_INVARIANCE_METRICS                                                                  \
    {"invariance_batch_split", "of range", -1, false, "{\"max\": 1e-4}",                       \
     "max |logit difference| between n_batch 1, 7 and the prompt's length, over the logit "    \
     "range (the reference must be bit-identical)"},                                           \
    {"invariance_parallel", "of range", -1, false, "{\"max\": 1e-4}",                          \
     "max |logit difference| of a sequence decoded beside 3 others vs alone, over the logit "  \
     "range (the reference must be bit-identical)"},                                           \
    {"invariance_threads", "of range", -1, false, "{\"max\": 1e-4}",                           \
     "max |logit difference| between 1 and 2 threads, over the logit range (the reference "    \
     "must be bit-identical)"}

/* Runs the three checks on tokens[0..n) (the prompt, at most n_ctx / 2
 * tokens) with sessions of n_ctx positions on the cell's backend. Returns
 * -1 only when it could not run (out of memory); a session or eval that
 * fails is a failed check. */
/* a against b (the baseline) over n logits: max |a - b|, where, and over
 * b's range; non-finite differences are counted (and make rel infinite). */
typedef struct gt_logit_diff {
    double max_abs, range, rel;
    size_t at; /* index of the largest difference */
    long nonfinite;
} gt_logit_diff;
gt_logit_diff gt_logit_diff_of(const float *a, const float *b, size_t n);

/* A fresh instance of the cell's backend (its device, driver, n_batch and
 * n_parallel) with threads and kv_type as given: a run that differs from
 * the cell's in that one setting (invariance_threads, kv_f16_drift). */
int gt_suite_backend_variant(const gt_suite_ctx *c, int n_threads, gt_type kv_type,
                             gt_backend **out, gt_err *err);

int gt_invariance_run(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n,
                      int n_ctx, gt_err *err);

#endif
