/* cuda_constraints.h: the CUDA backend's driver profile, parsed and checked.
 *
 * A driver profile is the gt_backend_config.driver string a matrix gives the
 * cuda backend. It constrains the versions a cell may run on, and can pick
 * a setting; items are comma-separated, whitespace is ignored:
 *
 *   profile    := item ("," item)*          ("" or NULL: no constraints)
 *   item       := key op version | setting
 *   setting    := "gemm" "=" ("f32" | "tf32")      batched MUL_MAT precision
 *               | "graphs" "=" ("on" | "off")       replay each graph as a CUDA
 *                                                   graph (fewer launches)
 *   key        := "driver"              CUDA version the driver supports
 *                                       (cudaDriverGetVersion: 12040 = 12.4)
 *               | "runtime"             CUDA runtime (cudart) version
 *               | "compute_capability"  device compute capability (alias "cc")
 *   op         := ">=" | "<=" | ">" | "<" | "==" | "=" | "!="
 *   version    := N | N.N | N.N.N       compared part by part, missing parts 0
 *
 * e.g. "driver>=12.4, compute_capability>=8.0" or "cc==9.0,gemm=tf32".
 * "driver" is the CUDA API version of the driver (13.0 for the R580 driver),
 * not the kernel module's 580.xx; that one is reported in the device info.
 *
 * This file is plain C with no CUDA dependency so that the parser is unit
 * tested everywhere (tests/test_cuda.c includes the .c directly). */
#ifndef GT_CUDA_CONSTRAINTS_H
#define GT_CUDA_CONSTRAINTS_H

#include <stddef.h>

#include "gt/error.h"

#define GT_CUDA_MAX_CONSTRAINTS 8

typedef enum gt_cuda_key { GT_CUDA_KEY_DRIVER, GT_CUDA_KEY_RUNTIME, GT_CUDA_KEY_CC } gt_cuda_key;
typedef enum gt_cuda_cmp {
    GT_CUDA_GE, GT_CUDA_LE, GT_CUDA_GT, GT_CUDA_LT, GT_CUDA_EQ, GT_CUDA_NE
} gt_cuda_cmp;
/* How batched MUL_MAT multiplies: plain FP32 (the default, closest to the
 * reference) or TF32 tensor cores (faster prefill, ~1e-3 relative error). */
typedef enum gt_cuda_gemm { GT_CUDA_GEMM_F32, GT_CUDA_GEMM_TF32 } gt_cuda_gemm;

typedef struct gt_cuda_version {
    int v[3]; /* major, minor, patch */
} gt_cuda_version;

typedef struct gt_cuda_constraint {
    gt_cuda_key key;
    gt_cuda_cmp cmp;
    gt_cuda_version want;
} gt_cuda_constraint;

typedef struct gt_cuda_profile {
    int n;
    gt_cuda_constraint c[GT_CUDA_MAX_CONSTRAINTS];
    gt_cuda_gemm gemm;
    /* Capture each compute() into a CUDA graph and replay it (updated in
     * place while the graph's shape stays the same): one launch per token
     * instead of one per kernel. Off by default until measured on a GPU. */
    int graphs;
} gt_cuda_profile;

/* What was found on the machine, for gt_cuda_profile_check. */
typedef struct gt_cuda_found {
    gt_cuda_version driver, runtime, cc;
} gt_cuda_found;

/* Parses text (NULL or "" = empty profile). On error fills err with the
 * offending item and what was expected, and returns -1. */
int gt_cuda_profile_parse(const char *text, gt_cuda_profile *out, gt_err *err);

/* 0 when every constraint holds; else -1 with err naming, for each one that
 * fails, the found and the required version. */
int gt_cuda_profile_check(const gt_cuda_profile *p, const gt_cuda_found *found, gt_err *err);

/* cudaDriverGetVersion / cudaRuntimeGetVersion encoding: 1000*major + 10*minor. */
gt_cuda_version gt_cuda_version_from_int(int v);
/* "12.4" (patch shown only when non-zero); returns buf. */
const char *gt_cuda_version_str(gt_cuda_version v, char *buf, size_t n);
const char *gt_cuda_key_name(gt_cuda_key k);
const char *gt_cuda_cmp_name(gt_cuda_cmp c);

#endif
