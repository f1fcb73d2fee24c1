/* cmd_worker.c: `gauntlet worker`, the process the runner forks for one
 * cell (internal; see harness/run/worker.c). */
#include "commands.h"
#include "run.h"

int cmd_worker(int argc, char **argv) { return gt_worker_main(argc, argv); }
