/* verdict.h: from how a worker ended and what it reported to a cell status.
 *
 * Raw status first:
 *   killed at the deadline -> timeout; died on a signal -> crash (signal
 *   name and the last log lines in the reason); reported skip -> skip;
 *   exited without "done" -> error; any check error -> error; any failed
 *   check or metric verdict -> fail; zero coverage -> fail; else pass.
 * Zero coverage: a check ran when a result line says pass, fail or error or
 * a metric was judged pass or fail (an "info" metric, a number recorded
 * without a tolerance, judges nothing). A suite of the cell's tier (without
 * a cell: every suite the lines name) none of whose checks ran fails the
 * cell, "no coverage: suite accuracy ran no check (accuracy.greedy: ...)",
 * naming its first skip, unless its only skips are the matrix's own choice
 * (category GT_SKIP_MATRIX, "skipped by the matrix: cell X is not in this
 * tier's performance cells"). A cell in which no check of any suite ran
 * fails too, "no coverage: no check ran in any suite (...)", whatever the
 * skips say: a cell that qualified nothing did not pass. This only turns a
 * would-be pass into fail; a cell that fails, errors or skips keeps that.
 * Then the matrix's expectation: a cell expected to xfail becomes xfail when
 * the raw status is fail, error, crash or timeout, and xpass when it passed
 * (the expectation is stale). The reason names the first failing check or
 * metric with its value and tolerance, which is what the gate prints; a
 * backend that would not open (check backend.open) gives its message alone,
 * "bad driver setting: ...". Checks known to fail (see gt_verdict_judge_cell)
 * are judged after everything else. */
#ifndef GT_VERDICT_H
#define GT_VERDICT_H

#include <stddef.h>

#include "matrix.h"
#include "runner.h"
#include "base.h"

void gt_verdict_judge(const gt_outcome *o, double timeout_s, gt_status expected,
                      const char *expect_reason, gt_status *raw, gt_status *final, char *reason,
                      size_t cap);
/* The same for a matrix cell, with its checks known to fail (expect entries
 * with "check"): when the only failures are such checks the raw status is
 * fail and the final one xfail, "known limitation (REASON): suite.check:
 * message"; when such a check passed and nothing else failed, xpass (the
 * expectation is stale). Anything else failing is judged as usual. */
void gt_verdict_judge_cell(const gt_outcome *o, const gt_cell *c, gt_status *raw,
                           gt_status *final, char *reason, size_t cap);

/* "SIGSEGV (Segmentation fault)" */
void gt_signal_describe(int sig, char *out, size_t cap);

/* The last n non-empty lines of a log joined with " | " (at most cap bytes). */
void gt_log_tail(const char *log, int n, char *out, size_t cap);

#endif
