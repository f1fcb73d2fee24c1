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

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "jsonv.h"
#include "status.h"

int gt_tol_validate(const gt_jv *v, const cJSON *spec, const char *path);

/* GT_ST_PASS or GT_ST_FAIL, or GT_ST_PENDING ("info") when spec is NULL.
 * *comparator ("<=", ">=", "==", or "" for info) and *tol describe the bound. */
gt_status gt_tol_eval(const cJSON *spec, double value, const char **comparator, double *tol);

/* Slack: how many times looser a bound is than the worst value measured
 * under it (the same arithmetic for `gauntlet db headroom` and for matrix
 * validation against a baseline, matrix.h):
 *   "<=" bound / max(worst, GT_TOL_FLOOR);
 *   ">=" on a 0..1 ratio (ratio_unit, bound <= 1): allowed shortfall over
 *        measured shortfall, (1 - bound) / max(1 - worst, GT_TOL_RATIO_FLOOR);
 *        on other units worst / bound;
 *   "==" 1 (an exact bound has no slack).
 * GT_TOL_FLOOR: values below 1e-9 are float noise (KL of two f32 pipelines
 * is ~1e-12), not a measurement to size a bound by. GT_TOL_RATIO_FLOOR:
 * agreement fractions are counted over 32 to a few thousand items, so a
 * shortfall under one in a hundred is below what a CI tier resolves. A
 * slack above GT_TOL_LOOSE could not catch a regression of that size. */
#define GT_TOL_FLOOR 1e-9
#define GT_TOL_RATIO_FLOOR 0.01
#define GT_TOL_LOOSE 100.0
double gt_tol_slack(const char *comparator, double bound, double worst, bool ratio_unit);

/* The marker a tolerance's "note" carries to keep a bound looser than
 * GT_TOL_LOOSE x its baseline: "loose: <why>" (matrices/README.md). */
#define GT_TOL_LOOSE_MARKER "loose:"
bool gt_tol_loose_noted(const cJSON *spec);

#endif
