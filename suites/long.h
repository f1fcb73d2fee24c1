/* long.h: what the long suite's two files share (long.c: the suite, its
 * passkey retrieval and memory checks; long_drift.c: drift against depth). */
#ifndef GT_SUITE_LONG_H
#define GT_SUITE_LONG_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/model.h"
#include "suite.h"

#define GT_LONG_MAX_LENGTHS 8

typedef struct gt_long_plan {
    int lengths[GT_LONG_MAX_LENGTHS]; /* ascending checkpoints */
    int n_lengths;
    int n_scored;                     /* positions scored before each checkpoint */
    int k_max;                        /* reference entries kept per position */
    double tail_eps;
    bool is_reference;                /* the cell is the reference backend itself */
} gt_long_plan;

/* Teacher-forced drift at each checkpoint (see long_drift.c). Reports the
 * checks drift_L<L>, the gated metrics at the deepest checkpoint and the
 * series drift_kld; on a failed checkpoint it leaves the localizer's tokens
 * in ctx (loc_long). Returns -1 only when it could not judge. */
int gt_long_drift_run(gt_suite_ctx *c, const gt_model *m, const gt_long_plan *p, gt_err *err);

/* Opens the reference backend and a session of n_ctx on model m, for a cell
 * that is not the reference itself. */
int gt_long_reference_session(const gt_suite_ctx *c, const gt_model *m, int n_ctx,
                              gt_backend **b, gt_session **s, gt_err *err);

#endif
