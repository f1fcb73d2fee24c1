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
/* Adds what the long suite records to cell cell_id of run (its checks,
 * metrics and series), as suites/long.c reports them: lengths 2048, 4096
 * and 8192, passkeys at depths 10/50/90 % (the answers agree except at
 * 8192/90 %, where the cell's answer is FX_LONG_ODD_ANSWER, missed), 16
 * drift_kld points per checkpoint growing with depth (one of them 0, one
 * NULL: FX_LONG_DRIFT_DRAWN are drawable), kv_bytes/kv_plan/peak_rss_mib
 * per length, and long.drift_kld_mean with tolerance <= 1e-4.
 * 0 ok, -1 (printed) on an SQL error. */
int fx_add_long(gt_db *db, int64_t run, const char *cell_id);
#define FX_LONG_DRIFT_POINTS 48
#define FX_LONG_DRIFT_DRAWN 47
#define FX_LONG_ODD_ANSWER "4821\\\"3 <b>" /* JSON-escaped in the message */

/* Adds what the structured suite records to cell cell_id of run (results
 * valid_<case> for its 5 cases, agreement, refuse_<case> for 3 malformed
 * schemas; metrics valid_rate, ref_agreement, refused), as
 * suites/structured_common.c words them:
 *   FX_SC_PASS   every answer valid and the reference's, all refused;
 *   FX_SC_LOOSE  all valid and refused, 3/5 agree against a bound >= 0.4
 *                (as act-q8 cells), so agreement passes with divergences;
 *   FX_SC_FAIL   array incomplete, tool_call invalid, 3/5 agree (bound 1),
 *                unknown_type compiled;
 *   FX_SC_KNOWN  a server's: tool_call invalid, 3/5 agree, pattern answered
 *                200, and a stream check; for an xfail cell;
 *   FX_SC_SKIP   only the skip check of a cell the tier leaves out.
 * The divergences' first cell side holds a quote, "; " and "<b>".
 * 0 ok, -1 (printed) on an SQL error. */
enum { FX_SC_PASS, FX_SC_LOOSE, FX_SC_FAIL, FX_SC_KNOWN, FX_SC_SKIP };
int fx_add_structured(gt_db *db, int64_t run, const char *cell_id, int kind);

/* The log injected into crash cells (to check escaping). */
#define FX_EVIL_LOG "segfault <script>alert(1)</script> & \"quotes\" \x01\xff\xfe end"

#endif
