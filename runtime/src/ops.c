/* ops.c: the graph ops' names, as test-ops, localize and error messages
 * spell them. */
#include "gt/backend.h"

#include <strings.h>

static const char *const OP_NAMES[GT_OP_COUNT] = {
    [GT_OP_NONE] = "NONE",         [GT_OP_GET_ROWS] = "GET_ROWS",
    [GT_OP_RMS_NORM] = "RMS_NORM", [GT_OP_MUL_MAT] = "MUL_MAT",
    [GT_OP_ADD] = "ADD",           [GT_OP_MUL] = "MUL",
    [GT_OP_ROPE] = "ROPE",         [GT_OP_KV_STORE] = "KV_STORE",
    [GT_OP_ATTENTION] = "ATTENTION", [GT_OP_SILU_MUL] = "SILU_MUL",
    [GT_OP_GELU_MUL] = "GELU_MUL",   [GT_OP_SCALE] = "SCALE",
    [GT_OP_TOPK] = "TOPK",           [GT_OP_MOE_WEIGHTS] = "MOE_WEIGHTS",
    [GT_OP_MUL_MAT_ID] = "MUL_MAT_ID", [GT_OP_MOE_SUM] = "MOE_SUM",
};

const char *gt_op_name(gt_op op)
{
    return op >= 0 && op < GT_OP_COUNT ? OP_NAMES[op] : "UNKNOWN";
}

int gt_op_from_name(const char *name, gt_op *out)
{
    for (int i = 0; i < GT_OP_COUNT; i++) {
        if (strcasecmp(OP_NAMES[i], name) == 0) {
            *out = (gt_op)i;
            return 0;
        }
    }
    return -1;
}
