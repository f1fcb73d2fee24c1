/* gate.h: the release gate over a recorded run.
 *
 * Reads everything from the database: cells carry their "required" flag
 * (decided by the matrix's gate patterns when the run was created) and the
 * run carries its gate policy as written (allowed statuses, performance
 * regression threshold), so a merged database can be gated again later
 * without the matrix file (`gauntlet db gate`).
 *
 * The gate passes when every required cell has an allowed status (default:
 * pass, xfail, skip), every required skip's category (its reason up to the
 * first ':', e.g. "no device") is in the policy's allowed_skips (default
 * "no device", "unsupported"; "skipped by the matrix" always is), every cell
 * of a model or backend the stored matrix marks "required": true passed, and,
 * with a baseline, no regress-flagged metric of a required cell got worse
 * than the threshold, and some cell ran: a run whose every cell was
 * skipped (or that has none) fails, "FAIL run: 0 cells ran: ...", since it
 * qualified nothing whatever skips the policy allows (one --shard judged
 * alone is exempt, with a note: which cells land in it is arithmetic, and
 * the merged run is held to the rule). Each failure is
 * printed: the cell, its status and reason, every failing check and every
 * metric outside its tolerance with value and bound.
 *
 * A merged run (`gauntlet merge`, recorded in run_merges) must also hold
 * every one of the n_cells it was planned with: a shard whose database was
 * never merged fails the gate by name ("shard 2/4 missing"), with the
 * expansion indexes of its cells that never ran. A database that was not
 * merged (one shard's own, gated by `qualify --shard`) is judged on its own
 * cells, as before. */
#ifndef GT_GATE_H
#define GT_GATE_H

#include <stdint.h>
#include <stdio.h>

#include "db.h"
#include "gt/error.h"

/* 0 pass, 1 fail, -1 error. base may be NULL (no baseline); base_db may be
 * db itself. */
int gt_gate_eval(gt_db *db, int64_t run_id, gt_db *base_db, int64_t base_run_id, FILE *out,
                 gt_err *err);

#endif
