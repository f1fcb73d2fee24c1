/* cpu_ops.c: the cheap, memory-bound ops of the CPU backend: GET_ROWS,
 * RMS_NORM, ADD, MUL, ROPE, KV_STORE, SILU_MUL, GELU_MUL, SCALE.
 *
 * All run on every thread of the pool. Row-wise ops (RMS_NORM, ROPE,
 * GET_ROWS, KV_STORE) split rows; purely elementwise ones (ADD, MUL,
 * SILU_MUL) split the flat element range, so that a decode step's single
 * row is still shared by all threads. Every kernel reads an element before
 * writing the same element, which is what makes the in-place forms (t
 * sharing a's storage) safe.
 *
 * ROPE computes cos/sin once per row and applies them to every head; the
 * angle pos * base^(-2j/d) is formed in double, as the reference does, so
 * positions in the thousands lose no accuracy to float rounding. */
#include "cpu.h"

#include <math.h>
#include <string.h>

void gt_cpu_get_rows(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    const gt_tensor *table = t->src[0];
    const int32_t *ids = gt_tensor_host(t->src[1]);
    const size_t row = gt_tensor_row_bytes(table);
    const char *base = gt_tensor_host(table);
    const int64_t n = t->ne[0];
    float *out = gt_cpu_f32(t);
    int64_t i0, i1;
    gt_cpu_split(t->ne[1], ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++)
        c->k.dequant[table->type](base + (size_t)ids[i] * row, out + i * n, n);
}

void gt_cpu_rms_norm(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    const int64_t n = t->ne[0];
    const float *x = gt_cpu_f32(t->src[0]);
    float *y = gt_cpu_f32(t);
    int64_t i0, i1;
    gt_cpu_split(t->ne[1], ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float ss = c->k.sum_sq(x + i * n, n);
        const float scale = (float)(1.0 / sqrt((double)ss / (double)n + t->fparams[0]));
        c->k.scale(x + i * n, scale, y + i * n, n);
    }
}

void gt_cpu_add(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const float *a = gt_cpu_f32(t->src[0]), *b = gt_cpu_f32(t->src[1]);
    float *y = gt_cpu_f32(t);
    int64_t j0, j1;
    gt_cpu_split(t->ne[0] * t->ne[1], ith, nth, &j0, &j1);
    if (t->src[1]->ne[1] == t->ne[1]) {
        for (int64_t j = j0; j < j1; j++)
            y[j] = a[j] + b[j];
        return;
    }
    /* b is one row (a bias): row by row, as in gt_cpu_mul */
    const int64_t n = t->ne[0];
    for (int64_t j = j0; j < j1;) {
        const int64_t rs = j - j % n, end = rs + n < j1 ? rs + n : j1;
        for (; j < end; j++)
            y[j] = a[j] + b[j - rs];
    }
}

void gt_cpu_mul(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const int64_t n = t->ne[0];
    const float *a = gt_cpu_f32(t->src[0]), *w = gt_cpu_f32(t->src[1]);
    float *y = gt_cpu_f32(t);
    int64_t j0, j1;
    gt_cpu_split(t->ne[0] * t->ne[1], ith, nth, &j0, &j1);
    for (int64_t j = j0; j < j1;) {
        /* walk row by row so the inner loop is a plain vectorizable multiply */
        const int64_t rs = j - j % n, end = rs + n < j1 ? rs + n : j1;
        for (; j < end; j++)
            y[j] = a[j] * w[j - rs];
    }
}

void gt_cpu_silu_mul(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    int64_t j0, j1;
    gt_cpu_split(t->ne[0] * t->ne[1], ith, nth, &j0, &j1);
    if (j1 > j0)
        c->k.silu_mul(gt_cpu_f32(t->src[0]) + j0, gt_cpu_f32(t->src[1]) + j0, gt_cpu_f32(t) + j0,
                      j1 - j0);
}

/* gelu(a) * b, gelu in its tanh form (backend.h), through the ISA's kernel
 * (cpu.h: as a * sigmoid(2u)). With libm's tanhf it was 28% of Gemma 3's
 * prefill at act=q8 (perf, 2026-12-07). */
void gt_cpu_gelu_mul(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    int64_t j0, j1;
    gt_cpu_split(t->ne[0] * t->ne[1], ith, nth, &j0, &j1);
    if (j1 > j0)
        c->k.gelu_mul(gt_cpu_f32(t->src[0]) + j0, gt_cpu_f32(t->src[1]) + j0, gt_cpu_f32(t) + j0,
                      j1 - j0);
}

void gt_cpu_scale(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    int64_t j0, j1;
    gt_cpu_split(t->ne[0] * t->ne[1], ith, nth, &j0, &j1);
    const float *a = gt_cpu_f32(t->src[0]);
    float *y = gt_cpu_f32(t);
    const float s = t->fparams[0];
    for (int64_t j = j0; j < j1; j++)
        y[j] = a[j] * s;
}

void gt_cpu_kv_store(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const gt_tensor *a = t->src[0], *cache = t->src[1];
    const int64_t n = a->ne[0];
    const float *src = gt_cpu_f32(a);
    int64_t i0, i1;
    gt_cpu_split(a->ne[1], ith, nth, &i0, &i1);
    if (cache->type == GT_TYPE_F16) { /* round to nearest even, as the reference */
        uint16_t *d16 = (uint16_t *)gt_tensor_host(cache) + (int64_t)t->iparams[0] * cache->ne[0];
        for (int64_t i = i0 * n; i < i1 * n; i++)
            d16[i] = gt_f32_to_f16(src[i]);
        return;
    }
    float *dst = gt_cpu_f32(cache) + (int64_t)t->iparams[0] * cache->ne[0];
    if (i1 > i0)
        memmove(dst + i0 * n, src + i0 * n, sizeof(float) * (size_t)((i1 - i0) * n));
}

/* cpu_backend.c validates rope_dim <= 2 * GT_CPU_MAX_ROPE_PAIRS. */
#define MAX_PAIRS GT_CPU_MAX_ROPE_PAIRS

void gt_cpu_rope(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const int n_heads = t->iparams[0], hd = t->iparams[1], rd = t->iparams[2];
    const int pos0 = t->iparams[3], neox = t->iparams[4] == 1;
    const int half = rd / 2;
    const int64_t n = t->ne[0];
    /* theta_j = freq_scale * pos * base^(-2j/rd) / factor_j; cos and sin
     * scaled by attn_factor (backend.h) */
    const double freq_scale = t->fparams[1] != 0.0f ? t->fparams[1] : 1.0;
    const double mscale = t->fparams[2] != 0.0f ? t->fparams[2] : 1.0;
    const float *factor = t->src[1] ? gt_cpu_f32(t->src[1]) : NULL;
    double inv_freq[MAX_PAIRS];
    float cs[MAX_PAIRS], sn[MAX_PAIRS];
    for (int j = 0; j < half; j++)
        inv_freq[j] = freq_scale * pow((double)t->fparams[0], -2.0 * j / rd) /
                      (factor ? (double)factor[j] : 1.0);
    const float *x = gt_cpu_f32(t->src[0]);
    float *y = gt_cpu_f32(t);
    int64_t i0, i1;
    gt_cpu_split(t->ne[1], ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const double pos = (double)(pos0 + i);
        for (int j = 0; j < half; j++) {
            const double th = pos * inv_freq[j];
            cs[j] = (float)(mscale * cos(th));
            sn[j] = (float)(mscale * sin(th));
        }
        const float *xr = x + i * n;
        float *yr = y + i * n;
        for (int h = 0; h < n_heads; h++) {
            const float *xv = xr + (int64_t)h * hd;
            float *yv = yr + (int64_t)h * hd;
            for (int j = 0; j < half; j++) {
                const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
                const float x0 = xv[a], x1 = xv[b];
                yv[a] = x0 * cs[j] - x1 * sn[j];
                yv[b] = x0 * sn[j] + x1 * cs[j];
            }
            if (yv != xv)
                for (int j = rd; j < hd; j++)
                    yv[j] = xv[j];
        }
        /* columns past the last head pass through */
        if (yr != xr)
            for (int64_t j = (int64_t)n_heads * hd; j < n; j++)
                yr[j] = xr[j];
    }
}
