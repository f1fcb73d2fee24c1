/* status.c: names of gt_status values (see status.h for their meaning). */
#include "status.h"

#include <string.h>

static const char *const NAMES[GT_ST_COUNT] = {
    [GT_ST_PENDING] = "pending", [GT_ST_PASS] = "pass",   [GT_ST_FAIL] = "fail",
    [GT_ST_XFAIL] = "xfail",     [GT_ST_XPASS] = "xpass", [GT_ST_SKIP] = "skip",
    [GT_ST_ERROR] = "error",     [GT_ST_CRASH] = "crash", [GT_ST_TIMEOUT] = "timeout",
};

const char *gt_status_name(gt_status s)
{
    return s >= 0 && s < GT_ST_COUNT ? NAMES[s] : "unknown";
}

int gt_status_from_name(const char *name, gt_status *out)
{
    for (int i = 0; i < GT_ST_COUNT; i++) {
        if (name && strcmp(NAMES[i], name) == 0) {
            *out = (gt_status)i;
            return 0;
        }
    }
    return -1;
}
