/* cuda_ops.cu: kernels for every op except MUL_MAT (cuda_matmul.cu).
 *
 * Each op is a direct transcription of its definition in gt/backend.h, as
 * the reference backend is, with float accumulation where the reference
 * uses double (the error stays far below the op-test thresholds) and
 * double where it matters for long contexts: ROPE angles are computed in
 * double so that pos * base^(-2j/d) at pos 2000 keeps its precision.
 *
 * In-place nodes (t shares a's storage; ADD, MUL, RMS_NORM, ROPE,
 * SILU_MUL, GELU_MUL, SCALE) are safe because every thread writes only elements it has
 * read itself: elementwise ops by index, RMS_NORM after a block-wide
 * barrier, ROPE one (x0, x1) pair per thread.
 *
 * ATTENTION runs one block per (query row, head) and streams the visible
 * cache rows in tiles with an online softmax (running max and sum,
 * rescaling the partial output per tile), so any context length fits in a
 * few KiB of shared memory. A sliding window (iparams[4] = w > 0, Gemma 3's
 * local layers) only moves the first visible row: row i, at cache row
 * p = pos0 + i, sees rows max(0, p - w + 1)..p, exactly the reference's
 * rows (pos0 is cache-relative: a window layer's ring cache hands the
 * node the row its newest token is stored at).
 *
 * F16 K/V caches (kv_type f16): KV_STORE rounds with __float2half_rn
 * (round to nearest even, as gt_f32_to_f16) and ATTENTION is the same
 * kernel instantiated for __half caches, each value widened exactly
 * (__half2float) where the F32 kernel reads it. */
#include "cuda_kernels.h"

#include <math.h>

/* --- GET_ROWS ------------------------------------------------------------- */

template <int T>
__global__ void get_rows_kernel(const uint8_t *table, size_t row_bytes, int table_rows,
                                const int32_t *ids, float *out, int ne0, int32_t *status,
                                int node)
{
    const int i = blockIdx.x;
    const int id = ids[i];
    float *y = out + (size_t)i * ne0;
    if (id < 0 || id >= table_rows) {
        /* Reported by the host after the graph; the first bad node wins. */
        if (threadIdx.x == 0 && atomicCAS(&status[0], 0, node + 1) == 0) {
            status[1] = id;
            status[2] = table_rows;
        }
        for (int k = threadIdx.x; k < ne0; k += blockDim.x)
            y[k] = 0.0f;
        return;
    }
    const uint8_t *row = table + (size_t)id * row_bytes;
    if constexpr (gt_chunked<T>::value) { /* ne0 is a multiple of the block, so of 8 */
        for (int c = threadIdx.x; c < (ne0 >> 3); c += blockDim.x) {
            float v[8];
            gt_dq8<T>(row, c << 3, v);
#pragma unroll
            for (int t = 0; t < 8; t++)
                y[(c << 3) + t] = v[t];
        }
    } else {
        for (int k = threadIdx.x; k < ne0; k += blockDim.x)
            y[k] = gt_dq<T>(row, k);
    }
}

template <int T>
static void launch_get_rows(dim3 g, dim3 b, cudaStream_t s, const gt_tensor *t, int node,
                            int32_t *status)
{
    const gt_tensor *a = t->src[0];
    get_rows_kernel<T><<<g, b, 0, s>>>((const uint8_t *)gt_cuda_ptr(a), gt_tensor_row_bytes(a),
                                       (int)a->ne[1], (const int32_t *)gt_cuda_ptr(t->src[1]),
                                       (float *)gt_cuda_ptr(t), (int)t->ne[0], status, node);
}

extern "C" int gt_cuda_op_get_rows(gt_cuda_ctx *c, const gt_tensor *t, int node, gt_err *err)
{
    const dim3 grid((unsigned)t->ne[1]), block(256);
    const gt_type type = t->src[0]->type;
    switch (type) {
#define GT_GET_ROWS_CASE(T)                                                                        \
    case T: launch_get_rows<T>(grid, block, c->stream, t, node, c->status); break;
        GT_CUDA_WEIGHT_TYPES(GT_GET_ROWS_CASE)
#undef GT_GET_ROWS_CASE
    default: return gt_err_set(err, "GET_ROWS: no kernel for %s", gt_type_name(type));
    }
    c->status_armed = true;
    GT_LAUNCHED(err, "get_rows", grid, block, "%s table [%lld, %lld], %lld ids", gt_type_name(type),
                (long long)t->src[0]->ne[0], (long long)t->src[0]->ne[1], (long long)t->ne[1]);
    return 0;
}

/* --- RMS_NORM ------------------------------------------------------------- */

__global__ void rms_norm_kernel(const float *x, float *y, int n, float eps)
{
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        ss += xr[j] * xr[j];
    ss = gt_block_sum(ss, red);
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = xr[j] * scale;
}

extern "C" int gt_cuda_op_rms_norm(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const int n = (int)t->ne[0];
    const dim3 grid((unsigned)t->ne[1]), block(n >= 1024 ? 512 : n >= 256 ? 256 : 64);
    rms_norm_kernel<<<grid, block, 0, c->stream>>>((const float *)gt_cuda_ptr(t->src[0]),
                                                   (float *)gt_cuda_ptr(t), n, t->fparams[0]);
    GT_LAUNCHED(err, "rms_norm", grid, block, "[%d, %lld], eps %g", n, (long long)t->ne[1],
                (double)t->fparams[0]);
    return 0;
}

/* --- elementwise: ADD (or a bias row), MUL, SILU_MUL, GELU_MUL, SCALE ----- */

enum { EW_ADD, EW_ADD_ROW, EW_MUL_ROW, EW_SILU_MUL, EW_GELU_MUL, EW_SCALE };

/* GELU_MUL in double, as the reference computes it (tanh form, backend.h);
 * SCALE is one f32 product, as defined, so it equals the reference's. */
template <int OP>
__global__ void elementwise_kernel(const float *a, const float *b, float *y, int64_t n, int ne0,
                                   float s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float x = a[i];
        if (OP == EW_ADD) {
            y[i] = x + b[i];
        } else if (OP == EW_ADD_ROW) {
            y[i] = x + b[i % ne0];
        } else if (OP == EW_MUL_ROW) {
            y[i] = x * b[i % ne0];
        } else if (OP == EW_SILU_MUL) {
            y[i] = x / (1.0f + expf(-x)) * b[i];
        } else if (OP == EW_GELU_MUL) {
            const double xd = x, c = 0.79788456080286535588; /* sqrt(2/pi) */
            y[i] = (float)(0.5 * xd * (1.0 + tanh(c * (xd + 0.044715 * xd * xd * xd))) * (double)b[i]);
        } else {
            y[i] = __fmul_rn(x, s);
        }
    }
}

template <int OP>
static int elementwise(gt_cuda_ctx *c, const gt_tensor *t, const char *name, gt_err *err)
{
    const int64_t n = t->ne[0] * t->ne[1];
    const int64_t want = (n + 255) / 256;
    const dim3 grid((unsigned)(want < 65536 ? want : 65536)), block(256);
    const float *b = OP == EW_SCALE ? NULL : (const float *)gt_cuda_ptr(t->src[1]);
    elementwise_kernel<OP><<<grid, block, 0, c->stream>>>((const float *)gt_cuda_ptr(t->src[0]), b,
                                                          (float *)gt_cuda_ptr(t), n,
                                                          (int)t->ne[0], t->fparams[0]);
    GT_LAUNCHED(err, name, grid, block, "[%lld, %lld]", (long long)t->ne[0], (long long)t->ne[1]);
    return 0;
}

extern "C" int gt_cuda_op_add(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    /* a one-row b is a bias, added to every row (backend.h) */
    if (t->src[1]->ne[1] == 1 && t->ne[1] > 1)
        return elementwise<EW_ADD_ROW>(c, t, "add_row", err);
    return elementwise<EW_ADD>(c, t, "add", err);
}

extern "C" int gt_cuda_op_mul(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    return elementwise<EW_MUL_ROW>(c, t, "mul_row", err);
}

extern "C" int gt_cuda_op_silu_mul(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    return elementwise<EW_SILU_MUL>(c, t, "silu_mul", err);
}

extern "C" int gt_cuda_op_gelu_mul(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    return elementwise<EW_GELU_MUL>(c, t, "gelu_mul", err);
}

extern "C" int gt_cuda_op_scale(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    return elementwise<EW_SCALE>(c, t, "scale", err);
}

/* --- ROPE ----------------------------------------------------------------- */

/* One thread per element index of a row: the first element of each rotated
 * pair rotates the pair, elements outside the rotated dims are copied (when
 * not in place), the pair's second element does nothing. */
/* theta_j = freq_scale * pos * base^(-2j/rope_dim) / factor[j] (factor NULL:
 * ones), cos and sin times mscale (backend.h). */
__global__ void rope_kernel(const float *x, float *y, int ne0, int n_heads, int head_dim,
                            int rope_dim, int pos0, int neox, double base, double freq_scale,
                            double mscale, const float *factor)
{
    const int row = blockIdx.y;
    const float *xr = x + (size_t)row * ne0;
    float *yr = y + (size_t)row * ne0;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < ne0; e += gridDim.x * blockDim.x) {
        const int h = e / head_dim, d = e % head_dim;
        if (h >= n_heads || d >= rope_dim) {
            if (yr != xr)
                yr[e] = xr[e];
            continue;
        }
        int j, i1;
        if (neox) {
            if (d >= rope_dim / 2)
                continue;
            j = d;
            i1 = d + rope_dim / 2;
        } else {
            if (d & 1)
                continue;
            j = d / 2;
            i1 = d + 1;
        }
        const double ff = factor ? (double)factor[j] : 1.0;
        const double theta = freq_scale * (double)(pos0 + row) * pow(base, -2.0 * j / rope_dim) / ff;
        double s, co;
        sincos(theta, &s, &co);
        s *= mscale;
        co *= mscale;
        const int base_i = h * head_dim;
        const double x0 = xr[base_i + d], x1 = xr[base_i + i1];
        yr[base_i + d] = (float)(x0 * co - x1 * s);
        yr[base_i + i1] = (float)(x0 * s + x1 * co);
    }
}

extern "C" int gt_cuda_op_rope(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const int ne0 = (int)t->ne[0];
    if (t->ne[1] > 65535)
        return gt_err_set(err, "ROPE: %lld rows exceed one launch's 65535", (long long)t->ne[1]);
    const dim3 block(128), grid((unsigned)((ne0 + 127) / 128), (unsigned)t->ne[1]);
    const int *ip = t->iparams;
    rope_kernel<<<grid, block, 0, c->stream>>>((const float *)gt_cuda_ptr(t->src[0]),
                                               (float *)gt_cuda_ptr(t), ne0, ip[0], ip[1], ip[2],
                                               ip[3], ip[4] == 1, (double)t->fparams[0],
                                               t->fparams[1] != 0.0f ? (double)t->fparams[1] : 1.0,
                                               t->fparams[2] != 0.0f ? (double)t->fparams[2] : 1.0,
                                               t->src[1] ? (const float *)gt_cuda_ptr(t->src[1])
                                                         : (const float *)0);
    GT_LAUNCHED(err, "rope", grid, block, "[%d, %lld], %d heads of %d, rope_dim %d, pos0 %d, mode %d",
                ne0, (long long)t->ne[1], ip[0], ip[1], ip[2], ip[3], ip[4]);
    return 0;
}

/* --- KV_STORE into an F16 cache --------------------------------------------- */

__global__ void kv_store_f16_kernel(const float *x, __half *dst, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = __float2half_rn(x[i]);
}

extern "C" int gt_cuda_op_kv_store_f16(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0], *cache = t->src[1];
    __half *dst = (__half *)((char *)gt_cuda_ptr(cache) +
                             (size_t)t->iparams[0] * gt_tensor_row_bytes(cache));
    const size_t n = (size_t)(a->ne[0] * a->ne[1]);
    if (n == 0)
        return 0;
    const unsigned threads = 256, blocks = (unsigned)((n + threads - 1) / threads);
    kv_store_f16_kernel<<<blocks, threads, 0, c->stream>>>((const float *)gt_cuda_ptr(a), dst, n);
    GT_LAUNCHED(err, "kv_store_f16", dim3(blocks), dim3(threads), "%zu values", n);
    return 0;
}

/* --- ATTENTION ------------------------------------------------------------ */

#define ATT_THREADS 128
#define ATT_TILE 512 /* cache rows scored per pass */

/* Shared memory: q (hd) | acc (hd) | scores (ATT_TILE) | partial P.V
 * sums, G groups of hd (G = ATT_THREADS / hd when hd <= ATT_THREADS). */
__device__ __forceinline__ float kv_load(const float *p) { return *p; }
__device__ __forceinline__ float kv_load(const __half *p) { return __half2float(*p); }

template <typename KV>
__global__ void __launch_bounds__(ATT_THREADS)
attention_kernel(const float *q, const KV *kc, const KV *vc, float *out, int n_head,
                 int group, int hd, int kv_dim, int pos0, int window, float scale)
{
    extern __shared__ float sm[];
    __shared__ float red[ATT_THREADS / 32];
    float *qs = sm, *acc = sm + hd, *sc = sm + 2 * hd, *part = sm + 2 * hd + ATT_TILE;
    const int i = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
    const size_t q_off = (size_t)i * n_head * hd + (size_t)h * hd;
    const size_t kv_off = (size_t)(h / group) * hd;
    for (int d = tid; d < hd; d += ATT_THREADS) {
        qs[d] = q[q_off + d];
        acc[d] = 0.0f;
    }
    /* P.V work split: thread (g, d) sums rows g, g+G, ... of dimension d. */
    const bool narrow = hd <= ATT_THREADS;
    const int G = narrow ? ATT_THREADS / hd : 1;
    const int g = narrow ? tid / hd : 0;
    const int d0 = narrow ? tid % hd : tid, dstep = narrow ? hd : ATT_THREADS;
    const int n_seen = pos0 + i + 1; /* causal: rows first..pos0+i */
    const int first = window > 0 && n_seen > window ? n_seen - window : 0;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();

    for (int p0 = first; p0 < n_seen; p0 += ATT_TILE) {
        const int len = min(ATT_TILE, n_seen - p0);
        float tmax = -INFINITY;
        for (int lp = tid; lp < len; lp += ATT_THREADS) {
            const KV *kp = kc + (size_t)(p0 + lp) * kv_dim + kv_off;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++)
                dot += qs[d] * kv_load(kp + d);
            dot *= scale;
            sc[lp] = dot;
            tmax = fmaxf(tmax, dot);
        }
        tmax = gt_block_max(tmax, red);
        const float m_new = fmaxf(m, tmax);
        float tsum = 0.0f;
        for (int lp = tid; lp < len; lp += ATT_THREADS) {
            const float e = expf(sc[lp] - m_new);
            sc[lp] = e;
            tsum += e;
        }
        tsum = gt_block_sum(tsum, red); /* its barriers also publish sc */
        const float alpha = expf(m - m_new); /* 0 on the first tile (m = -inf) */
        l = l * alpha + tsum;
        if (g < G) {
            for (int d = d0; d < hd; d += dstep) {
                float s = 0.0f;
                for (int lp = g; lp < len; lp += G)
                    s += sc[lp] * kv_load(vc + (size_t)(p0 + lp) * kv_dim + kv_off + d);
                part[g * hd + d] = s;
            }
        }
        __syncthreads();
        for (int d = tid; d < hd; d += ATT_THREADS) {
            float s = 0.0f;
            for (int k = 0; k < G; k++)
                s += part[k * hd + d];
            acc[d] = acc[d] * alpha + s;
        }
        m = m_new;
        __syncthreads(); /* the next tile overwrites sc and part */
    }
    for (int d = tid; d < hd; d += ATT_THREADS)
        out[q_off + d] = acc[d] / l;
}

extern "C" int gt_cuda_op_attention(gt_cuda_ctx *c, const gt_tensor *t, gt_err *err)
{
    const int n_head = t->iparams[0], n_kv = t->iparams[1], hd = t->iparams[2];
    const int pos0 = t->iparams[3], window = t->iparams[4];
    if (n_head > 65535)
        return gt_err_set(err, "ATTENTION: %d heads exceed one launch's 65535", n_head);
    const int G = hd <= ATT_THREADS ? ATT_THREADS / hd : 1;
    const size_t shmem = sizeof(float) * ((size_t)2 * hd + ATT_TILE + (size_t)G * hd);
    const dim3 grid((unsigned)t->ne[1], (unsigned)n_head), block(ATT_THREADS);
    if (t->src[1]->type == GT_TYPE_F16)
        attention_kernel<__half><<<grid, block, shmem, c->stream>>>(
            (const float *)gt_cuda_ptr(t->src[0]), (const __half *)gt_cuda_ptr(t->src[1]),
            (const __half *)gt_cuda_ptr(t->src[2]), (float *)gt_cuda_ptr(t), n_head, n_head / n_kv,
            hd, n_kv * hd, pos0, window, t->fparams[0]);
    else
        attention_kernel<float><<<grid, block, shmem, c->stream>>>(
            (const float *)gt_cuda_ptr(t->src[0]), (const float *)gt_cuda_ptr(t->src[1]),
            (const float *)gt_cuda_ptr(t->src[2]), (float *)gt_cuda_ptr(t), n_head, n_head / n_kv,
            hd, n_kv * hd, pos0, window, t->fparams[0]);
    GT_LAUNCHED(err, "attention", grid, block,
                "%lld rows, %d heads, %d KV heads of %d, pos0 %d, window %d, %zu bytes shared",
                (long long)t->ne[1], n_head, n_kv, hd, pos0, window, shmem);
    return 0;
}
