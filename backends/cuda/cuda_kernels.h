/* cuda_kernels.h: device-side helpers shared by cuda_ops.cu and
 * cuda_matmul.cu (CUDA C++ only; never included from C).
 *
 * Weights are read in GGML's block layouts exactly as the GGUF file has
 * them (see gt/quant.h): no repacking at upload, so a tensor view is just
 * (buffer, offset). Blocks are 34, 18 and 20 bytes, so only 2-byte
 * alignment is guaranteed inside a row; loads here are 16-bit or narrower
 * on block data. Dequantization uses __fmul_rn/__fadd_rn so that nvcc
 * cannot contract d*q + m into an FMA: GET_ROWS and the dequantized tiles
 * then equal the reference's values bit for bit.
 *
 * Two ways in: gt_dq<T>(row, k), one element, for F32/F16/BF16/Q8_0/
 * Q4_0/Q4_1; gt_dq8<T>(row, k0, out), 8 elements from k0 (a multiple of
 * 8), for the types of cuda_dequant.h (Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K),
 * whose functions tests/test_cuda_dequant.c checks on the host. */
#ifndef GT_CUDA_KERNELS_H
#define GT_CUDA_KERNELS_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_internal.h"
/* After cuda_internal.h, which declares the runtime's C functions. */
#include "cuda_dequant.h"

#define GT_WARP 32

__device__ __forceinline__ float gt_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float gt_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ uint16_t gt_ld16(const uint8_t *p) { return *(const uint16_t *)p; }

/* Element k of a row of type T (T is a gt_type value). */
template <int T> __device__ __forceinline__ float gt_dq(const uint8_t *row, int k);

template <> __device__ __forceinline__ float gt_dq<GT_TYPE_F32>(const uint8_t *row, int k)
{
    return ((const float *)row)[k];
}
template <> __device__ __forceinline__ float gt_dq<GT_TYPE_F16>(const uint8_t *row, int k)
{
    return gt_h2f(((const uint16_t *)row)[k]);
}
template <> __device__ __forceinline__ float gt_dq<GT_TYPE_BF16>(const uint8_t *row, int k)
{
    return gt_bf2f(((const uint16_t *)row)[k]);
}
template <> __device__ __forceinline__ float gt_dq<GT_TYPE_Q8_0>(const uint8_t *row, int k)
{
    const uint8_t *blk = row + (size_t)(k >> 5) * 34;
    return __fmul_rn((float)(int8_t)blk[2 + (k & 31)], gt_h2f(gt_ld16(blk)));
}
template <> __device__ __forceinline__ float gt_dq<GT_TYPE_Q4_0>(const uint8_t *row, int k)
{
    const uint8_t *blk = row + (size_t)(k >> 5) * 18;
    const int i = k & 31;
    const int b = blk[2 + (i & 15)];
    const int q = i < 16 ? (b & 15) : (b >> 4);
    return __fmul_rn((float)(q - 8), gt_h2f(gt_ld16(blk)));
}
template <> __device__ __forceinline__ float gt_dq<GT_TYPE_Q4_1>(const uint8_t *row, int k)
{
    const uint8_t *blk = row + (size_t)(k >> 5) * 20;
    const int i = k & 31;
    const int b = blk[4 + (i & 15)];
    const int q = i < 16 ? (b & 15) : (b >> 4);
    return __fadd_rn(__fmul_rn((float)q, gt_h2f(gt_ld16(blk))), gt_h2f(gt_ld16(blk + 2)));
}

/* 8 elements k0..k0+7 of a row of type T, a cuda_dequant.h type. */
template <int T> __device__ __forceinline__ void gt_dq8(const uint8_t *row, int k0, float *out)
{
    if (T == GT_TYPE_Q5_0)
        gt_dq8_q5_0(row, k0, out);
    else if (T == GT_TYPE_Q5_1)
        gt_dq8_q5_1(row, k0, out);
    else if (T == GT_TYPE_IQ4_NL)
        gt_dq8_iq4_nl(row, k0, out);
    else if (T == GT_TYPE_Q2_K)
        gt_dq8_q2_K(row, k0, out);
    else if (T == GT_TYPE_Q3_K)
        gt_dq8_q3_K(row, k0, out);
    else if (T == GT_TYPE_Q4_K)
        gt_dq8_q4_K(row, k0, out);
    else if (T == GT_TYPE_Q5_K)
        gt_dq8_q5_K(row, k0, out);
    else if (T == GT_TYPE_Q6_K)
        gt_dq8_q6_K(row, k0, out);
}

/* Whether T is read through gt_dq8 (compile-time). */
template <int T> struct gt_chunked {
    static constexpr bool value = T == GT_TYPE_Q5_0 || T == GT_TYPE_Q5_1 || T == GT_TYPE_IQ4_NL ||
                                  T == GT_TYPE_Q2_K || T == GT_TYPE_Q3_K || T == GT_TYPE_Q4_K ||
                                  T == GT_TYPE_Q5_K || T == GT_TYPE_Q6_K;
};

/* Expands X(type) once per weight type the kernels read: the launchers'
 * switches. */
#define GT_CUDA_WEIGHT_TYPES(X)                                                                    \
    X(GT_TYPE_F32) X(GT_TYPE_F16) X(GT_TYPE_BF16) X(GT_TYPE_Q8_0) X(GT_TYPE_Q4_0) X(GT_TYPE_Q4_1)   \
    X(GT_TYPE_Q5_0) X(GT_TYPE_Q5_1) X(GT_TYPE_IQ4_NL) X(GT_TYPE_Q2_K) X(GT_TYPE_Q3_K)             \
    X(GT_TYPE_Q4_K) X(GT_TYPE_Q5_K) X(GT_TYPE_Q6_K)

__device__ __forceinline__ float gt_warp_sum(float v)
{
    for (int o = GT_WARP / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float gt_warp_max(float v)
{
    for (int o = GT_WARP / 2; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum / max, result in every thread. red holds one float per
 * warp; the trailing barrier lets the next call reuse it. blockDim.x must
 * be a multiple of 32. */
__device__ __forceinline__ float gt_block_sum(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = gt_warp_sum(v);
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    float s = 0.0f;
    for (int w = 0; w < nw; w++)
        s += red[w];
    __syncthreads();
    return s;
}
__device__ __forceinline__ float gt_block_max(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = gt_warp_max(v);
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    float m = red[0];
    for (int w = 1; w < nw; w++)
        m = fmaxf(m, red[w]);
    __syncthreads();
    return m;
}

/* After every launch: a bad configuration is reported with the kernel's
 * name, its grid and the sizes it was given. */
#define GT_LAUNCHED(err, kernel, grid, block, fmt, ...)                                          \
    do {                                                                                       \
        cudaError_t e_ = cudaGetLastError();                                                   \
        if (e_ != cudaSuccess)                                                                 \
            return gt_cuda_fail(err, e_, "kernel %s<<<(%u,%u), %u>>> (" fmt ")", kernel,       \
                                (grid).x, (grid).y, (block).x, __VA_ARGS__);                   \
    } while (0)

#endif
