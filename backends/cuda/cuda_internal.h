/* cuda_internal.h: private interface between the files of the CUDA backend.
 *
 *   cuda_backend.c      registration, probe, init, buffers, node validation
 *                       and the per-graph driver (plain C over the runtime API)
 *   cuda_constraints.c  the driver profile ("driver>=12.4,cc>=8.0")
 *   cuda_ops.cu         kernels for every op except MUL_MAT
 *   cuda_matmul.cu      MUL_MAT: quantized mat-vec kernels for decode,
 *                       dequantized weight tiles + cuBLAS for batches
 *   cuda_bwprobe.cu     a separate program: the device's copy bandwidth
 *
 * Launchers (gt_cuda_op_*) are C-callable. The node driver has validated
 * types, shapes and buffer bounds before calling one, so a launcher only
 * fails on a CUDA or cuBLAS error, which it reports with the call, the
 * kernel and its sizes. All work goes on the context's one stream, in
 * graph order, so a node may read what the previous one wrote. */
#ifndef GT_CUDA_INTERNAL_H
#define GT_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "gt/backend.h"

#include "cuda_constraints.h"

typedef struct gt_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    gt_cuda_gemm gemm;
    bool sync_each;        /* GT_CUDA_SYNC=1: synchronize after every node */
    bool graphs;           /* profile graphs=on: capture and replay (see cu_compute) */
    cudaGraphExec_t exec;  /* the last graph instantiated, updated while shapes match */
    void *blas_ws;         /* our cuBLAS workspace: nothing allocates during capture */
    float *tile;           /* dequantized weight rows for batched MUL_MAT */
    size_t tile_floats;    /* capacity of tile */
    int32_t *status;       /* device words a kernel sets on bad input (GET_ROWS ids) */
    bool status_armed;     /* a kernel that may set status ran in this graph */
} gt_cuda_ctx;

/* Layout of ctx->status: [0] = 1 + node index of the first bad lookup,
 * [1] = the bad id, [2] = the table's row count. */
#define GT_CUDA_STATUS_WORDS 4

/* Device address of a tensor's first byte (buffers keep it in impl). */
static inline void *gt_cuda_ptr(const gt_tensor *t)
{
    return (char *)t->buf->impl + t->offset;
}

/* "cudaErrorInvalidValue: invalid argument" style text into err. */
int gt_cuda_fail(gt_err *err, cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int gt_cuda_fail_blas(gt_err *err, cublasStatus_t s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Kernels (cuda_ops.cu). node is the node's index, for status reports. */
int gt_cuda_op_get_rows(gt_cuda_ctx *c, const gt_tensor *t, int node, gt_err *err);
int gt_cuda_op_rms_norm(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_add(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_mul(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_rope(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_attention(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
/* KV_STORE into an F16 cache (an F32 one is a device copy, cuda_backend.c). */
int gt_cuda_op_kv_store_f16(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_silu_mul(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_gelu_mul(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
int gt_cuda_op_scale(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
/* TOPK, MOE_WEIGHTS, MUL_MAT_ID, MOE_SUM (cuda_moe.cu) */
int gt_cuda_op_moe(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);

/* MUL_MAT (cuda_matmul.cu). */
int gt_cuda_op_mul_mat(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
/* Grows, outside any capture, the scratch a later gt_cuda_op_mul_mat of t
 * will use. */
int gt_cuda_matmul_reserve(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err);
/* Frees what the matmul path grew (the tile). */
void gt_cuda_matmul_release(gt_cuda_ctx *c);

#ifdef __cplusplus
}
#endif

#endif
