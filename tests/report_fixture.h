/* report_fixture.h: synthetic qualification runs for the report tests and
 * the report benchmark (ci/bench-report.sh calls `test_reports --make-db`).
 *
 * The schema comes from the harness's own gt_db_open (db.c is compiled into
 * the test), so the rows below are always in the real schema; only the rows
 * are synthetic. A run of n cells lays out as models m0..mK x quants
 * {f32, q8_0, q4_0} x columns {reference/default, cpu/openblas, cpu/blis,
 * opencl/pocl}, and every status appears (cell i gets STATUS_OF(i)), with
 * checks and metrics (accuracy, performance, latency) whose verdicts match
 * the status, a crash log full of markup and invalid UTF-8, and devices.
 *
 * variant 0 is the baseline; variant 1 changes statuses of a few cells
 * (listed by fx_changed) and moves decode speed by -30% in cell 0 and +30%
 * in cell 12 (same cell position in the next model). */
#ifndef GT_REPORT_FIXTURE_H
#define GT_REPORT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "../harness/store/db.h"

/* The status of cell i in a variant. */
const char *fx_status(int i, int variant);
/* Inserts one run of n cells; returns its runs.id or -1. */
int64_t fx_make_run(gt_db *db, int n, int variant, const char *run_key);
/* Same, with cell fail_cell (>= 0) made to fail. Variants 2 and up are
 * further runs for history tests (the current statuses, a day apart);
 * from variant FX_HIST_SLOW_FROM on, cell FX_HIST_SLOW_CELL decodes at half
 * speed. */
int64_t fx_make_run_ex(gt_db *db, int n, int variant, const char *run_key, int fail_cell);
#define FX_HIST_SLOW_FROM 4
#define FX_HIST_SLOW_CELL 16
/* The fake sha256 of model m's quant q (0 f32 = the source, 1 q8_0, 2 q4_0);
 * the fixture records an artifact for each, quants derived from the source. */
void fx_sha(char out[65], int model, int quant);
/* The log injected into crash cells (to check escaping). */
#define FX_EVIL_LOG "segfault <script>alert(1)</script> & \"quotes\" \x01\xff\xfe end"

#endif
