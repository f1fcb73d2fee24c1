/* cuda_moe.cu: the mixture-of-experts ops (gt/backend.h): TOPK,
 * MOE_WEIGHTS, MUL_MAT_ID, MOE_SUM, each a direct transcription of its
 * definition, kept simple (this backend is compiled where no GPU is, and
 * checked by test-ops where one is):
 *   TOPK, MOE_WEIGHTS  one thread per token row (n_expert is small);
 *   MUL_MAT_ID         one warp per (slot, output row): lanes split the row,
 *                      dequantize with gt_dq / gt_dq8 as GET_ROWS does and
 *                      reduce with shuffles;
 *   MOE_SUM            one thread per output element, slots in order.
 * An expert id outside 0..n_exp-1 gives NaN outputs (a kernel cannot report
 * it); TOPK never produces one. */
#include "cuda_kernels.h"

#include <math.h>

__global__ void topk_kernel(const float *x, int n, int32_t *ids, int k, int rows)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    const float *r = x + (size_t)i * n;
    int32_t *out = ids + (size_t)i * k;
    for (int s = 0; s < k; s++) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            bool taken = false;
            for (int q = 0; q < s; q++)
                taken |= out[q] == j;
            if (!taken && (best < 0 || r[j] > r[best]))
                best = j;
        }
        out[s] = best;
    }
}

__global__ void moe_weights_kernel(const float *x, int n, const int32_t *ids, float *y, int k,
                                   int norm, int rows)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    const float *r = x + (size_t)i * n;
    double max = r[0], denom = 0.0, sel = 0.0;
    for (int j = 1; j < n; j++)
        max = r[j] > max ? r[j] : max;
    for (int j = 0; j < n; j++)
        denom += exp((double)r[j] - max);
    for (int s = 0; s < k; s++) {
        const int e = ids[(size_t)i * k + s];
        sel += e >= 0 && e < n ? exp((double)r[e] - max) / denom : NAN;
    }
    if (sel < 6.103515625e-5)
        sel = 6.103515625e-5;
    for (int s = 0; s < k; s++) {
        const int e = ids[(size_t)i * k + s];
        const double p = e >= 0 && e < n ? exp((double)r[e] - max) / denom : NAN;
        y[(size_t)i * k + s] = (float)(norm ? p / sel : p);
    }
}

template <int T>
__global__ void mul_mat_id_kernel(const uint8_t *w, size_t row_bytes, int K, int n_out, int n_exp,
                                  const float *x, const int32_t *ids, int k, int per_slot,
                                  float *y, int64_t n_pairs)
{
    const int64_t p = (int64_t)blockIdx.x * (blockDim.x / GT_WARP) + threadIdx.x / GT_WARP;
    const int lane = threadIdx.x % GT_WARP;
    if (p >= n_pairs)
        return;
    const int64_t r = p / n_out;
    const int j = (int)(p % n_out);
    const int e = ids[r];
    if (e < 0 || e >= n_exp) {
        if (lane == 0)
            y[r * n_out + j] = NAN;
        return;
    }
    const uint8_t *row = w + ((size_t)e * n_out + j) * row_bytes;
    const float *xr = x + (size_t)(per_slot ? r : r / k) * K;
    float sum = 0.0f;
    if constexpr (gt_chunked<T>::value) { /* K is a multiple of the block, so of 8 */
        for (int c = lane; c < (K >> 3); c += GT_WARP) {
            float v[8];
            gt_dq8<T>(row, c << 3, v);
#pragma unroll
            for (int t = 0; t < 8; t++)
                sum += v[t] * xr[(c << 3) + t];
        }
    } else {
        for (int c = lane; c < K; c += GT_WARP)
            sum += gt_dq<T>(row, c) * xr[c];
    }
#pragma unroll
    for (int o = GT_WARP / 2; o > 0; o /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0)
        y[r * n_out + j] = sum;
}

__global__ void moe_sum_kernel(const float *a, const float *w, float *y, int n, int k, int rows)
{
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y;
    if (d >= n || i >= rows)
        return;
    float sum = 0.0f;
    for (int s = 0; s < k; s++)
        sum += w[(size_t)i * k + s] * a[((size_t)i * k + s) * n + d];
    y[(size_t)i * n + d] = sum;
}

extern "C" int gt_cuda_op_moe(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0], *b = t->src[1];
    switch (t->op) {
    case GT_OP_TOPK: {
        const dim3 grid((unsigned)((t->ne[1] + 63) / 64)), block(64);
        topk_kernel<<<grid, block, 0, c->stream>>>((const float *)gt_cuda_ptr(a), (int)a->ne[0],
                                                   (int32_t *)gt_cuda_ptr(t), (int)t->ne[0],
                                                   (int)t->ne[1]);
        GT_LAUNCHED(err, "topk", grid, block, "top %lld of %lld", (long long)t->ne[0],
                    (long long)a->ne[0]);
        return 0;
    }
    case GT_OP_MOE_WEIGHTS: {
        const dim3 grid((unsigned)((t->ne[1] + 63) / 64)), block(64);
        moe_weights_kernel<<<grid, block, 0, c->stream>>>(
            (const float *)gt_cuda_ptr(a), (int)a->ne[0], (const int32_t *)gt_cuda_ptr(b),
            (float *)gt_cuda_ptr(t), (int)t->ne[0], t->iparams[0], (int)t->ne[1]);
        GT_LAUNCHED(err, "moe_weights", grid, block, "%lld rows", (long long)t->ne[1]);
        return 0;
    }
    case GT_OP_MOE_SUM: {
        const dim3 grid((unsigned)((t->ne[0] + 127) / 128), (unsigned)t->ne[1]), block(128);
        moe_sum_kernel<<<grid, block, 0, c->stream>>>(
            (const float *)gt_cuda_ptr(a), (const float *)gt_cuda_ptr(b), (float *)gt_cuda_ptr(t),
            (int)t->ne[0], (int)b->ne[0], (int)t->ne[1]);
        GT_LAUNCHED(err, "moe_sum", grid, block, "[%lld, %lld]", (long long)t->ne[0],
                    (long long)t->ne[1]);
        return 0;
    }
    case GT_OP_MUL_MAT_ID: {
        const gt_tensor *ids = t->src[2];
        const int n_out = t->iparams[0];
        const int64_t n_pairs = t->ne[1] * (int64_t)n_out;
        const int warps = 8;
        const dim3 grid((unsigned)((n_pairs + warps - 1) / warps)), block(warps * GT_WARP);
        switch (a->type) {
#define GT_MMID_CASE(T)                                                                            \
    case T:                                                                                        \
        mul_mat_id_kernel<T><<<grid, block, 0, c->stream>>>(                                       \
            (const uint8_t *)gt_cuda_ptr(a), gt_tensor_row_bytes(a), (int)a->ne[0], n_out,         \
            (int)(a->ne[1] / n_out), (const float *)gt_cuda_ptr(b),                                \
            (const int32_t *)gt_cuda_ptr(ids), (int)ids->ne[0], t->iparams[1] != 0,                \
            (float *)gt_cuda_ptr(t), n_pairs);                                                     \
        break;
            GT_CUDA_WEIGHT_TYPES(GT_MMID_CASE)
#undef GT_MMID_CASE
        default: return gt_err_set(err, "MUL_MAT_ID: no kernel for %s", gt_type_name(a->type));
        }
        GT_LAUNCHED(err, "mul_mat_id", grid, block, "%s experts [%lld, %lld] of %d rows",
                    gt_type_name(a->type), (long long)a->ne[0], (long long)a->ne[1], n_out);
        return 0;
    }
    default: return gt_err_set(err, "cuda: op %d is not a mixture-of-experts op", (int)t->op);
    }
}
