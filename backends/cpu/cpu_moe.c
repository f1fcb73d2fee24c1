/* cpu_moe.c: the mixture-of-experts ops of the CPU backend (TOPK,
 * MOE_WEIGHTS, MUL_MAT_ID, MOE_SUM; definitions in gt/backend.h).
 *
 * All run on every thread of the pool. TOPK, MOE_WEIGHTS and MOE_SUM split
 * token rows; MUL_MAT_ID splits the (slot, output row) pairs and computes
 * each dot product with the same float-activation kernel MUL_MAT's fdot
 * path uses for the weight type (c->k.fdot), so an expert row costs what a
 * dense row does. Router softmax sums are in double like the reference's:
 * they decide which experts run, so they should not be where cpu and
 * reference part ways. */
#include "cpu.h"

#include <math.h>

void gt_cpu_topk(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const gt_tensor *a = t->src[0];
    const int64_t n = a->ne[0], k = t->ne[0];
    int64_t i0, i1;
    gt_cpu_split(t->ne[1], ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float *x = gt_cpu_f32(a) + i * n;
        int32_t *ids = (int32_t *)gt_tensor_host(t) + i * k;
        for (int64_t s = 0; s < k; s++) {
            int64_t best = -1;
            for (int64_t j = 0; j < n; j++) {
                bool taken = false;
                for (int64_t q = 0; q < s; q++)
                    taken |= ids[q] == j;
                if (!taken && (best < 0 || x[j] > x[best]))
                    best = j;
            }
            ids[s] = (int32_t)best;
        }
    }
}

void gt_cpu_moe_weights(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const gt_tensor *a = t->src[0];
    const int64_t n = a->ne[0], k = t->ne[0];
    const int32_t *ids = gt_tensor_host(t->src[1]);
    int64_t i0, i1;
    gt_cpu_split(t->ne[1], ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float *x = gt_cpu_f32(a) + i * n;
        float *y = gt_cpu_f32(t) + i * k;
        double max = x[0], denom = 0.0, sel = 0.0;
        for (int64_t j = 1; j < n; j++)
            max = x[j] > max ? x[j] : max;
        for (int64_t j = 0; j < n; j++)
            denom += exp((double)x[j] - max);
        for (int64_t s = 0; s < k; s++)
            sel += exp((double)x[ids[i * k + s]] - max) / denom;
        if (sel < 6.103515625e-5)
            sel = 6.103515625e-5;
        for (int64_t s = 0; s < k; s++) {
            const double p = exp((double)x[ids[i * k + s]] - max) / denom;
            y[s] = (float)(t->iparams[0] ? p / sel : p);
        }
    }
}

void gt_cpu_mul_mat_id(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    const gt_tensor *w = t->src[0], *x = t->src[1], *idt = t->src[2];
    const int64_t n_out = t->iparams[0], k = idt->ne[0], K = w->ne[0];
    const int32_t *ids = gt_tensor_host(idt);
    const size_t row = gt_tensor_row_bytes(w);
    const char *base = gt_tensor_host(w);
    const gt_cpu_fdot_fn dot = c->k.fdot[w->type];
    int64_t p0, p1;
    gt_cpu_split(t->ne[1] * n_out, ith, nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        const int64_t r = p / n_out, j = p % n_out;
        const int64_t xr = t->iparams[1] ? r : r / k;
        gt_cpu_f32(t)[r * n_out + j] =
            dot(base + (size_t)(ids[r] * n_out + j) * row, gt_cpu_f32(x) + xr * K, K);
    }
}

void gt_cpu_moe_sum(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth)
{
    (void)c;
    const gt_tensor *a = t->src[0], *wt = t->src[1];
    const int64_t n = t->ne[0], k = wt->ne[0];
    int64_t i0, i1;
    gt_cpu_split(t->ne[1], ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        float *y = gt_cpu_f32(t) + i * n;
        const float *w = gt_cpu_f32(wt) + i * k;
        for (int64_t d = 0; d < n; d++) {
            float sum = 0.0f;
            for (int64_t s = 0; s < k; s++)
                sum += w[s] * gt_cpu_f32(a)[(i * k + s) * n + d];
            y[d] = sum;
        }
    }
}
