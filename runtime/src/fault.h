/* fault.h: applying GT_FAULT node faults (session.h) around one node.
 * Private to the runtime. */
#ifndef GT_FAULT_H
#define GT_FAULT_H

#include <stdbool.h>

#include "gt/backend.h"
#include "gt/session.h"

/* Whether any node fault is set for this backend. */
bool gt_fault_any(const char *backend);
/* Corrupts the node's parameters before it is computed. */
void gt_fault_before(const char *kind, gt_tensor *t);
/* Corrupts the node's output after it is computed (matmul-short). */
int gt_fault_after(const char *kind, gt_tensor *t, gt_err *err);

#endif
