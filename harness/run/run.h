/* run.h: the face of harness/run: running cells. The runner forks one
 * worker per cell under deadlines (runner.h) and reads its JSON-lines
 * protocol (worker_lines.h); the worker runs the tier's suites in that
 * process (gt_worker_main); artifacts.h makes or fetches each cell's model
 * file; server_proc.h starts the servers http cells qualify; verdict.h turns
 * what a cell reported into its status.
 *
 * May use: matrix, store, suites, net, compare (a failed accuracy cell is
 * localized), base, the runtime's public headers. */
#ifndef GT_RUN_H
#define GT_RUN_H

#include "artifacts.h"
#include "runner.h"
#include "server_proc.h"
#include "verdict.h"
#include "worker_lines.h"

/* `gauntlet worker` (internal): runs one cell whose plan is read from
 * stdin and reports on the result pipe; returns the process exit code. */
int gt_worker_main(int argc, char **argv);
/* Every GT_FAULT entry is a kind the runtime (gt/fault.h) or the harness
 * (the worker's segv, abort, hang, exit=N; the suites' GT_SUITE_FAULT_KINDS)
 * knows, well-formed; else -1 naming the entry. */
int gt_fault_env_check(gt_err *err);

#endif
