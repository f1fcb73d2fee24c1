/* The control: what a file of harness/store may include (its own face,
 * base, and matrix for the gate) builds, so a failure of the wrong probe
 * is the layering and not a broken probe. */
#include "base.h"
#include "matrix.h"
#include "store.h"

int gt_layering_probe_allowed(void) { return GT_ST_PASS; }
