/* sweep_cell.h: after a failed settings cell, which of its execution
 * settings breaks its backend (private to harness/run). */
#ifndef GT_SWEEP_CELL_H
#define GT_SWEEP_CELL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "suite.h"

/* Whether the cell (its worker spec and context) gets a sweep: a cell
 * whose matrix names settings (n_batch, n_parallel or threads), on a
 * backend other than the reference, that failed a check, with localizing
 * not turned off (qualify --no-localize turns off both follow-ups). */
bool gt_sweep_cell_wanted(const cJSON *spec, const gt_suite_ctx *ctx);
/* Runs gauntlet compare --sweep over the settings the cell names (the
 * defaults' values plus the cell's own) against the reference, on the
 * cell's model and backend; the finding in msg. Returns GT_ST_FAIL when a
 * setting breaks agreement, GT_ST_PASS when every setting agrees (the
 * failure is not a setting's), GT_ST_ERROR when the sweep could not run. */
gt_status gt_sweep_cell_run(const cJSON *spec, gt_suite_ctx *ctx, char *msg, size_t cap);

#endif
