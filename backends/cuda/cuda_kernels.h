/* cuda_kernels.h: device-side helpers shared by cuda_ops.cu and
 * cuda_matmul.cu (CUDA C++ only; never included from C).
 *
 * Weights are read in GGML's block layouts exactly as the GGUF file has
 * them (see gt/quant.h): no repacking at upload, so a tensor view is just
 * (buffer, offset). Blocks are 34, 18 and 20 bytes, so only 2-byte
 * alignment is guaranteed inside a row; loads here are 16-bit or narrower
 * on block data. Dequantization uses __fmul_rn/__fadd_rn so that nvcc
 * cannot contract d*q + m into an FMA: GET_ROWS and the dequantized tiles
 * then equal the reference's values bit for bit. */
#ifndef GT_CUDA_KERNELS_H
#define GT_CUDA_KERNELS_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_internal.h"

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
