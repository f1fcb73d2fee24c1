/* opcheck.h: the op-conformance engine behind `gauntlet test-ops` (and the
 * CPU backend's unit test): every op x weight type x several shapes, run as
 * single-op graphs on a target backend and on the reference, on the same
 * seeded random inputs, judged by NMSE against per-op thresholds, with
 * NaN/Inf checks and guard bytes around every buffer. Uses only the backend
 * vtable, so it works the same for built-in and plugin backends.
 *
 * May use: the runtime's public headers only. */
#ifndef GT_OPCHECK_H
#define GT_OPCHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gt/backend.h"

typedef struct opcheck_opts {
    int op;             /* a gt_op, or -1 for every op */
    int type;           /* weight type of MUL_MAT/GET_ROWS (f32 for the other ops), -1 all */
    uint64_t seed;
    FILE *out;          /* one line per case; NULL prints nothing */
    bool failures_only; /* print only FAIL lines */
} opcheck_opts;

typedef struct opcheck_counts {
    int ok, fail, unsupported;
    /* Over the cases judged OK: sum of squared errors and of squared
     * reference values; their ratio is the pooled NMSE, which unlike one
     * case's NMSE is not at the mercy of a case with two outputs. */
    double sum_se, sum_ref;
} opcheck_counts;

/* Runs every matching case on target, judged against ref; adds to *counts.
 * Returns 0 when the run completed (failures are counted, not errors) and
 * -1 with err when it could not (the reference failed, out of memory). */
int opcheck_run(gt_backend *target, gt_backend *ref, const opcheck_opts *o,
                opcheck_counts *counts, gt_err *err);

/* The NMSE threshold test-ops holds op to (the table in opcheck.c);
 * weight is the weight type of MUL_MAT and GET_ROWS, ignored otherwise.
 * The localizer (localize.h) judges real activations by the same values. */
double opcheck_threshold(gt_op op, gt_type weight);

#endif
