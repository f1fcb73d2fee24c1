/* cuda_matmul.cu: MUL_MAT, t[i,j] = sum_k w[j,k] * x[i,k].
 *
 * Two paths, chosen by the number of activation rows (tokens):
 *
 * - Decode (up to MMV_MAX_TOK rows): a mat-vec kernel per row that reads
 *   the weights in their stored format (Q8_0/Q4_0/Q4_1 blocks, F16, BF16,
 *   F32; Q5_0, Q5_1, IQ4_NL and the K-quants through cuda_dequant.h's
 *   8-element chunks) and dequantizes in registers. Decode is bound by
 *   weight bytes, so the quantized bytes are the only weight traffic. One warp per output
 *   row; for quantized types four lanes share a 32-element block (each
 *   takes 8 elements), so a warp's loads cover 8 consecutive blocks and are
 *   coalesced. The chunked types give each lane 8 consecutive elements, so
 *   a warp covers 256 elements (a K-quant super-block) per step.
 *   Activations are read as float4 when aligned.
 *
 * - Prefill (more rows): weight rows are dequantized a tile at a time into
 *   a scratch buffer (at most TILE_FLOATS floats, kept for the backend's
 *   life) and multiplied with cuBLAS (cublasGemmEx, FP32, or TF32 when the
 *   driver profile says gemm=tf32). Never a dequantized copy of a whole
 *   model; F32 weights go to cuBLAS directly.
 *
 * Row-major t = x . w^T is, in cuBLAS's column-major terms, the (n_out x
 * n_tok) matrix C = op(A) . B with A = the weight tile seen as K x rows
 * (lda = K) transposed, and B = x seen as K x n_tok (ldb = K); C's leading
 * dimension is n_out, so each tile writes its own slice of every row. */
#include "cuda_kernels.h"

#include <stdio.h>

#define MMV_WARPS 4        /* output rows per block */
#define MMV_MAX_TOK 8      /* up to this many rows re-read the weights per row */
#define TILE_FLOATS (16u << 20) /* 64 MiB of dequantized weights per GEMM */

/* --- mat-vec: one warp, one weight row, one activation row --------------- */

template <bool VEC> __device__ __forceinline__ void load8(const float *x, float *o)
{
    if (VEC) {
        const float4 a = *(const float4 *)x, b = *(const float4 *)(x + 4);
        o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
    } else {
#pragma unroll
        for (int t = 0; t < 8; t++)
            o[t] = x[t];
    }
}

template <bool VEC> __device__ __forceinline__ void load4(const float *x, float *o)
{
    if (VEC) {
        const float4 a = *(const float4 *)x;
        o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w;
    } else {
#pragma unroll
        for (int t = 0; t < 4; t++)
            o[t] = x[t];
    }
}

/* Partial dot of row r (K elements) with x for this lane; the caller sums
 * the warp. */
template <int T, bool VEC> __device__ float row_dot(const uint8_t *r, const float *x, int K)
{
    const int lane = threadIdx.x & 31;
    float acc = 0.0f;
    if constexpr (gt_chunked<T>::value) {
        /* Lane l takes chunks l, l+32, ...: a warp covers 256 consecutive
         * elements (one K-quant super-block, 8 blocks of 32) per step. */
        const int nc = K >> 3;
#pragma unroll 2
        for (int c = lane; c < nc; c += 32) {
            float wv[8], xv[8];
            gt_dq8<T>(r, c << 3, wv);
            load8<VEC>(x + (c << 3), xv);
#pragma unroll
            for (int t = 0; t < 8; t++)
                acc += wv[t] * xv[t];
        }
    } else if (T == GT_TYPE_Q8_0 || T == GT_TYPE_Q4_0 || T == GT_TYPE_Q4_1) {
        const int nb = K >> 5, sub = lane & 3;
#pragma unroll 2
        for (int b = lane >> 2; b < nb; b += 8) {
            float xv[8];
            float s = 0.0f;
            if (T == GT_TYPE_Q8_0) {
                const uint8_t *blk = r + (size_t)b * 34;
                const uint8_t *qs = blk + 2 + sub * 8;
                load8<VEC>(x + b * 32 + sub * 8, xv);
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const uint16_t u = gt_ld16(qs + 2 * t);
                    s += (float)(int8_t)(u & 0xff) * xv[2 * t] + (float)(int8_t)(u >> 8) * xv[2 * t + 1];
                }
                acc += gt_h2f(gt_ld16(blk)) * s;
            } else {
                /* Nibble bytes sub*4..sub*4+3: elements j (low) and j+16 (high). */
                const int hdr = T == GT_TYPE_Q4_0 ? 2 : 4;
                const uint8_t *blk = r + (size_t)b * (T == GT_TYPE_Q4_0 ? 18 : 20);
                const uint8_t *qs = blk + hdr + sub * 4;
                load4<VEC>(x + b * 32 + sub * 4, xv);
                load4<VEC>(x + b * 32 + 16 + sub * 4, xv + 4);
                const uint32_t u = (uint32_t)gt_ld16(qs) | ((uint32_t)gt_ld16(qs + 2) << 16);
                float sx = 0.0f;
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const int lo = (u >> (8 * t)) & 15, hi = (u >> (8 * t + 4)) & 15;
                    if (T == GT_TYPE_Q4_0) {
                        s += (float)(lo - 8) * xv[t] + (float)(hi - 8) * xv[4 + t];
                    } else {
                        s += (float)lo * xv[t] + (float)hi * xv[4 + t];
                        sx += xv[t] + xv[4 + t];
                    }
                }
                acc += gt_h2f(gt_ld16(blk)) * s;
                if (T == GT_TYPE_Q4_1)
                    acc += gt_h2f(gt_ld16(blk + 2)) * sx;
            }
        }
    } else if (T == GT_TYPE_F32) {
        const float *w = (const float *)r;
        if (VEC) {
            for (int k = lane * 4; k < K; k += 128) {
                const float4 a = *(const float4 *)(w + k), b = *(const float4 *)(x + k);
                acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
            }
        } else {
            for (int k = lane; k < K; k += 32)
                acc += w[k] * x[k];
        }
    } else { /* F16, BF16: two elements per 32-bit load when aligned */
        const uint16_t *w = (const uint16_t *)r;
        if (VEC) {
            for (int k = lane * 2; k < K; k += 64) {
                const uint32_t u = *(const uint32_t *)(w + k);
                const float2 b = *(const float2 *)(x + k);
                const float w0 = T == GT_TYPE_F16 ? gt_h2f((uint16_t)u) : gt_bf2f((uint16_t)u);
                const float w1 = T == GT_TYPE_F16 ? gt_h2f((uint16_t)(u >> 16)) : gt_bf2f((uint16_t)(u >> 16));
                acc += w0 * b.x + w1 * b.y;
            }
        } else {
            for (int k = lane; k < K; k += 32)
                acc += (T == GT_TYPE_F16 ? gt_h2f(w[k]) : gt_bf2f(w[k])) * x[k];
        }
    }
    return acc;
}

template <int T, bool VEC>
__global__ void __launch_bounds__(MMV_WARPS * 32)
mmv_kernel(const uint8_t *w, size_t row_bytes, const float *x, float *y, int n_out, int K)
{
    const int row = blockIdx.x * MMV_WARPS + (threadIdx.x >> 5);
    if (row >= n_out)
        return; /* whole warps only: no barrier follows */
    const float acc = gt_warp_sum(row_dot<T, VEC>(w + (size_t)row * row_bytes, x, K));
    if ((threadIdx.x & 31) == 0)
        y[row] = acc;
}

static bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* Whether the vector loads of row_dot<T, true> are aligned for every row. */
static bool can_vec(gt_type type, const void *w, size_t row_bytes, const float *x, int K)
{
    switch (type) {
    case GT_TYPE_F32: return aligned(w, 16) && row_bytes % 16 == 0 && aligned(x, 16) && K % 4 == 0;
    case GT_TYPE_F16:
    case GT_TYPE_BF16: return aligned(w, 4) && row_bytes % 4 == 0 && aligned(x, 8) && K % 2 == 0;
    default: return aligned(x, 16) && (K * sizeof(float)) % 16 == 0; /* x rows stay aligned */
    }
}

template <int T>
static void launch_mmv(bool vec, dim3 g, dim3 b, cudaStream_t s, const uint8_t *w, size_t rb,
                       const float *x, float *y, int n_out, int K)
{
    if (vec)
        mmv_kernel<T, true><<<g, b, 0, s>>>(w, rb, x, y, n_out, K);
    else
        mmv_kernel<T, false><<<g, b, 0, s>>>(w, rb, x, y, n_out, K);
}

static int mat_vec(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *wt = t->src[0], *xt = t->src[1];
    const int K = (int)wt->ne[0], n_out = (int)wt->ne[1];
    const uint8_t *w = (const uint8_t *)gt_cuda_ptr(wt);
    const size_t rb = gt_tensor_row_bytes(wt);
    const float *x = (const float *)gt_cuda_ptr(xt);
    float *y = (float *)gt_cuda_ptr(t);
    const bool vec = can_vec(wt->type, w, rb, x, K);
    const dim3 grid((unsigned)((n_out + MMV_WARPS - 1) / MMV_WARPS)), block(MMV_WARPS * 32);
    for (int64_t i = 0; i < xt->ne[1]; i++) {
        const float *xi = x + i * K;
        float *yi = y + i * n_out;
        switch (wt->type) {
#define GT_MMV_CASE(T)                                                                             \
        case T: launch_mmv<T>(vec, grid, block, c->stream, w, rb, xi, yi, n_out, K); break;
            GT_CUDA_WEIGHT_TYPES(GT_MMV_CASE)
#undef GT_MMV_CASE
        default: return gt_err_set(err, "MUL_MAT: no mat-vec kernel for %s", gt_type_name(wt->type));
        }
        GT_LAUNCHED(err, "mmv", grid, block, "%s weight [%d, %d], activation row %lld, %s loads",
                    gt_type_name(wt->type), K, n_out, (long long)i, vec ? "vector" : "scalar");
    }
    return 0;
}

/* --- prefill: dequantized tiles + cuBLAS ----------------------------------- */

template <int T>
__global__ void dequant_rows_kernel(const uint8_t *w, size_t row_bytes, int K, float *out)
{
    const uint8_t *r = w + (size_t)blockIdx.x * row_bytes;
    float *o = out + (size_t)blockIdx.x * K;
    if constexpr (gt_chunked<T>::value) {
        for (int c = threadIdx.x; c < (K >> 3); c += blockDim.x) {
            float v[8];
            gt_dq8<T>(r, c << 3, v);
#pragma unroll
            for (int t = 0; t < 8; t++)
                o[(c << 3) + t] = v[t];
        }
    } else {
        for (int k = threadIdx.x; k < K; k += blockDim.x)
            o[k] = gt_dq<T>(r, k);
    }
}

static int dequant_rows(gt_cuda_ctx *c, gt_type type, const uint8_t *w, size_t rb, int K, int rows,
                        float *out, gt_err *err)
{
    const dim3 grid((unsigned)rows), block(K >= 256 ? 256 : 64);
    switch (type) {
#define GT_DEQUANT_CASE(T)                                                                         \
    case T: dequant_rows_kernel<T><<<grid, block, 0, c->stream>>>(w, rb, K, out); break;
        GT_CUDA_WEIGHT_TYPES(GT_DEQUANT_CASE)
#undef GT_DEQUANT_CASE
    default: return gt_err_set(err, "MUL_MAT: no dequantize kernel for %s", gt_type_name(type));
    }
    GT_LAUNCHED(err, "dequant_rows", grid, block, "%s, %d rows of %d", gt_type_name(type), rows, K);
    return 0;
}

/* Grows the tile to at least n floats (never shrinks: prefill repeats). */
static int ensure_tile(gt_cuda_ctx *c, size_t n, gt_err *err)
{
    if (n <= c->tile_floats)
        return 0;
    cudaError_t e = cudaStreamSynchronize(c->stream); /* the old tile may still be read */
    if (e != cudaSuccess)
        return gt_cuda_fail(err, e, "cudaStreamSynchronize (before growing the matmul tile)");
    if (c->tile) {
        e = cudaFree(c->tile);
        c->tile = NULL;
        c->tile_floats = 0;
        if (e != cudaSuccess)
            return gt_cuda_fail(err, e, "cudaFree (matmul tile)");
    }
    e = cudaMalloc((void **)&c->tile, n * sizeof(float));
    if (e != cudaSuccess) {
        c->tile = NULL;
        return gt_cuda_fail(err, e, "cudaMalloc(%zu bytes) for the matmul tile", n * sizeof(float));
    }
    c->tile_floats = n;
    return 0;
}

static int gemm(gt_cuda_ctx *c, const float *w, int rows, int K, const float *x, int n_tok, float *y,
                int ldy, gt_err *err)
{
    const float one = 1.0f, zero = 0.0f;
    const cublasComputeType_t ct =
        c->gemm == GT_CUDA_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t s = cublasGemmEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tok, K, &one, w,
                                    CUDA_R_32F, K, x, CUDA_R_32F, K, &zero, y, CUDA_R_32F, ldy, ct,
                                    CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return gt_cuda_fail_blas(err, s, "cublasGemmEx(T, N, m=%d, n=%d, k=%d, ldc=%d, %s)", rows,
                                 n_tok, K, ldy, c->gemm == GT_CUDA_GEMM_TF32 ? "tf32" : "fp32");
    return 0;
}

/* Rows of weights dequantized per GEMM for a K-wide matrix of n_out rows. */
static int tile_rows_for(int K, int n_out)
{
    const size_t per = TILE_FLOATS / (size_t)K;
    return (int)(per < 1 ? 1 : per > (size_t)n_out ? (size_t)n_out : per);
}

extern "C" int gt_cuda_matmul_reserve(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *wt = t->src[0];
    if (t->src[1]->ne[1] <= MMV_MAX_TOK || wt->type == GT_TYPE_F32)
        return 0;
    return ensure_tile(c, (size_t)tile_rows_for((int)wt->ne[0], (int)wt->ne[1]) * wt->ne[0], err);
}

static int mat_mat(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *wt = t->src[0], *xt = t->src[1];
    const int K = (int)wt->ne[0], n_out = (int)wt->ne[1], n_tok = (int)xt->ne[1];
    const uint8_t *w = (const uint8_t *)gt_cuda_ptr(wt);
    const size_t rb = gt_tensor_row_bytes(wt);
    const float *x = (const float *)gt_cuda_ptr(xt);
    float *y = (float *)gt_cuda_ptr(t);
    if (wt->type == GT_TYPE_F32)
        return gemm(c, (const float *)w, n_out, K, x, n_tok, y, n_out, err);

    const int tile_rows = tile_rows_for(K, n_out);
    if (ensure_tile(c, (size_t)tile_rows * K, err) != 0)
        return -1;
    for (int j0 = 0; j0 < n_out; j0 += tile_rows) {
        const int rows = n_out - j0 < tile_rows ? n_out - j0 : tile_rows;
        if (dequant_rows(c, wt->type, w + (size_t)j0 * rb, rb, K, rows, c->tile, err) != 0 ||
            gemm(c, c->tile, rows, K, x, n_tok, y + j0, n_out, err) != 0)
            return gt_err_wrap(err, "tile of rows %d..%d", j0, j0 + rows - 1);
    }
    return 0;
}

extern "C" int gt_cuda_op_mul_mat(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    return t->src[1]->ne[1] <= MMV_MAX_TOK ? mat_vec(c, t, err) : mat_mat(c, t, err);
}

extern "C" void gt_cuda_matmul_release(gt_cuda_ctx *c)
{
    if (!c->tile)
        return;
    cudaError_t e = cudaFree(c->tile);
    if (e != cudaSuccess)
        fprintf(stderr, "gauntlet cuda: cudaFree (matmul tile): error %d (%s)\n", (int)e,
                cudaGetErrorName(e));
    c->tile = NULL;
    c->tile_floats = 0;
}
