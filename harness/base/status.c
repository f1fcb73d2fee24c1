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

const char *gt_open_failure_category(const char *msg, bool not_built, bool *is_skip)
{
    static const char *const NO_DEVICE[] = {
        "no device: ",                 /* any backend may say it outright */
        "no CUDA device",              /* cuda: cudaGetDeviceCount found none */
        "cudaErrorNoDevice",           /* ... or failed: no GPU */
        "cudaErrorInsufficientDriver", /* ... or no NVIDIA driver installed */
        "libcuda.so",                  /* the plugin's driver library is absent, */
        "libcudart.so",                /* ... or the CUDA runtime, */
        "libOpenCL.so",                /* ... or the OpenCL ICD loader */
        "no OpenCL platform",          /* opencl: the ICD loader found no driver */
        "no OpenCL device matches",    /* opencl: the profile's platform is not here */
        NULL};
    *is_skip = true;
    for (int i = 0; NO_DEVICE[i]; i++)
        if (strstr(msg, NO_DEVICE[i]))
            return "no device";
    if (not_built)
        return "not built";
    *is_skip = false;
    if (strstr(msg, "clBuildProgram") || strstr(msg, "cannot run the kernels"))
        return "kernel build failed";
    if (strstr(msg, "GT_") && strchr(msg, '='))
        return "bad driver setting"; /* GT_CPU_ISA=sse9, GT_CPU_BLAS_MIN_BATCH=x, ... */
    if (strstr(msg, "driver profile") || strstr(msg, "n_threads=") ||
        strstr(msg, "does not exist") || strstr(msg, "requested, but there") ||
        strstr(msg, " has one device"))
        return "bad driver setting";
    if (strstr(msg, "out of memory"))
        return "out of memory";
    if (strstr(msg, "gt_backend_plugin_entry") || strstr(msg, "no registration") ||
        strstr(msg, "undefined symbol"))
        return "plugin ABI mismatch";
    return "backend failed to open";
}
