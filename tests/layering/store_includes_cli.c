/* A deliberate wrong-direction include: the store is below the CLI, so
 * compiled as a file of harness/store this must not find commands.h. */
#include "commands.h"

int gt_layering_probe_wrong(void) { return GT_EXIT_OK; }
