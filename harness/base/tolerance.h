/* tolerance.h: what a metric must satisfy, and the verdict.
 *
 * A tolerance is a JSON object with one bound:
 *     {"max": 5000}   value <= 5000      (latency, error, divergence)
 *     {"min": 0.99}   value >= 0.99      (agreement, throughput)
 *     {"eq": 0}       value == 0         (counts of bad things)
 * plus an optional "note" (why this bound). One bound per metric keeps the
 * database row (tolerance, comparator) simple and the report readable. A
 * NaN value never satisfies a bound. The matrix validates tolerances at
 * load time with gt_tol_validate; the worker judges with gt_tol_eval. */
#ifndef GT_TOLERANCE_H
#define GT_TOLERANCE_H

#include <cjson/cJSON.h>

#include "jsonv.h"
#include "status.h"

int gt_tol_validate(const gt_jv *v, const cJSON *spec, const char *path);

/* GT_ST_PASS or GT_ST_FAIL, or GT_ST_PENDING ("info") when spec is NULL.
 * *comparator ("<=", ">=", "==", or "" for info) and *tol describe the bound. */
gt_status gt_tol_eval(const cJSON *spec, double value, const char **comparator, double *tol);

#endif
