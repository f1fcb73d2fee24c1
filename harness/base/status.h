/* status.h: the outcome vocabulary shared by the matrix, worker, runner,
 * database and gate.
 *
 * A cell ends in exactly one status. Checks inside a cell (one suite's one
 * assertion) use the subset pass/fail/skip/error. The strings are what the
 * database stores and reports print, so they never change meaning:
 *   pass     every check passed and every metric is inside its tolerance
 *   fail     a check failed or a metric is outside its tolerance
 *   xfail    it failed (or crashed, timed out, errored) and the matrix says it
 *            is expected to: a documented limitation
 *   xpass    expected to fail, but passed: the expectation is stale
 *   skip     not run: the matrix asked for what this machine cannot have.
 *            The reason starts with its category, which the gate's
 *            allowed_skips names: "no device: ", "not built: ", "driver
 *            version: ", "unsupported: ", "unsupported model: ", "artifact
 *            missing: ", "skipped by the matrix: ". "unsupported" is an
 *            (op, type) a backend declines, which the default policy allows;
 *            "unsupported model" is a model file the runtime refuses (a
 *            tensor its graph does not use, a metadata key or value it does
 *            not implement: gt_model_load's GT_MODEL_UNSUPPORTED), which it
 *            does not, so a matrix with a model run wrong cannot gate PASS
 *   error    the harness could not judge the cell (bad artifact, quantize
 *            failed, suite error), or the backend would not start on what
 *            this machine has ("bad driver setting: ", "out of memory: ",
 *            "kernel build failed: ", "plugin ABI mismatch: ")
 *   crash    the worker process died on a signal
 *   timeout  the worker ran past the cell's timeout and was killed
 *   pending  recorded but not finished (a run in progress or interrupted);
 *            never a final status */
#ifndef GT_STATUS_H
#define GT_STATUS_H

#include <stdbool.h>

typedef enum gt_status {
    GT_ST_PENDING = 0,
    GT_ST_PASS,
    GT_ST_FAIL,
    GT_ST_XFAIL,
    GT_ST_XPASS,
    GT_ST_SKIP,
    GT_ST_ERROR,
    GT_ST_CRASH,
    GT_ST_TIMEOUT,
    GT_ST_COUNT
} gt_status;

#define GT_ST_BIT(s) (1u << (unsigned)(s))

/* The category of a skip the matrix itself chose: a cell an `expect` entry
 * skips, or a suite a tier's settings leave out for a cell (performance and
 * soak "cells"). Such a skip is never zero coverage of its suite; the gate
 * always allows it where skip is allowed. */
#define GT_SKIP_MATRIX "skipped by the matrix"

const char *gt_status_name(gt_status s);
/* Returns 0 and sets *out, or -1 for a name that is not a status. */
int gt_status_from_name(const char *name, gt_status *out);

/* What a backend that would not open means for a cell, read from its
 * message (the backend contract returns only text): the category that
 * starts the reason ("no device", "not built", "kernel build failed", "bad
 * driver setting", "out of memory", "plugin ABI mismatch", "backend failed
 * to open") and whether it is a skip (the first two) or an error. The
 * worker and `gauntlet plan` both use it, so a plan says what a run will. */
const char *gt_open_failure_category(const char *msg, bool not_built, bool *is_skip);

#endif
