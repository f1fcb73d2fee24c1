/* cuda_status.c: turning CUDA and cuBLAS status codes into messages that
 * name the call, the status by number and name, and what it means. The
 * driver (cuda_backend.c) and the kernels' launchers (*.cu) all report
 * through these, so they sit below both. */
#include "cuda_internal.h"

#include <stdarg.h>
#include <stdio.h>

static int vfail(gt_err *err, const char *detail, const char *fmt, va_list ap)
{
    char what[640];
    vsnprintf(what, sizeof what, fmt, ap);
    return gt_err_set(err, "%s: %s", what, detail);
}

int gt_cuda_fail(gt_err *err, cudaError_t e, const char *fmt, ...)
{
    char detail[300];
    snprintf(detail, sizeof detail, "error %d (%s): %s", (int)e, cudaGetErrorName(e),
             cudaGetErrorString(e));
    va_list ap;
    va_start(ap, fmt);
    vfail(err, detail, fmt, ap);
    va_end(ap);
    return -1;
}

int gt_cuda_fail_blas(gt_err *err, cublasStatus_t s, const char *fmt, ...)
{
    char detail[300];
    snprintf(detail, sizeof detail, "cuBLAS status %d (%s): %s", (int)s, cublasGetStatusName(s),
             cublasGetStatusString(s));
    va_list ap;
    va_start(ap, fmt);
    vfail(err, detail, fmt, ap);
    va_end(ap);
    return -1;
}
