/* fault_apply.c: what each runtime fault (gt/fault.h) does to a node or to
 * the logits; fault.c decides which apply. Everything goes through the
 * backend's download/upload, so every backend gets the same fault. */
#include "fault.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gt/quant.h"

/* splitmix64: the noise is a function of (position, token) alone, so a
 * faulted build is still deterministic (the fault is wrong numbers, not
 * flaky ones). */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double gauss(uint64_t seed)
{
    const double u1 = ((double)(mix(seed) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = (double)(mix(seed ^ 0x5DEECE66Dull) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void gt_fault_logits(const gt_fault_set *f, float *logits, int rows, int n_vocab, int pos0)
{
    for (int r = 0; r < rows; r++) {
        float *l = logits + (size_t)r * n_vocab;
        const int pos = pos0 + r;
        float lo = l[0], hi = l[0];
        for (int i = 1; i < n_vocab; i++) {
            lo = l[i] < lo ? l[i] : lo;
            hi = l[i] > hi ? l[i] : hi;
        }
        const double range = (double)hi - lo;
        if (f->scale)
            for (int i = 0; i < n_vocab; i++)
                l[i] = (float)(l[i] * (1.0 + f->scale_x));
        if (f->noise)
            for (int i = 0; i < n_vocab; i++)
                l[i] += (float)(f->noise_x * range * gauss(((uint64_t)pos << 32) | (uint32_t)i));
        if (f->swap_a >= 0) {
            const float t = l[f->swap_a];
            l[f->swap_a] = l[f->swap_b];
            l[f->swap_b] = t;
        }
        if (f->const_token >= 0)
            l[f->const_token] = (float)(hi + range + 1.0);
        if (f->nan_at == pos)
            for (int i = 0; i < n_vocab; i++)
                l[i] = NAN;
    }
}

/* Whether a weight type is quantized: anything but the float formats. */
static bool quantized(gt_type t)
{
    return t != GT_TYPE_F32 && t != GT_TYPE_F16 && t != GT_TYPE_BF16;
}

int gt_fault_quant_scale(const gt_fault_set *f, gt_tensor *t, gt_err *err)
{
    if (!f || !f->quant || t->op != GT_OP_MUL_MAT || !quantized(t->src[0]->type))
        return 0;
    const size_t n = (size_t)(t->ne[0] * t->ne[1]);
    float *v = malloc(sizeof(float) * n);
    if (!v)
        return gt_err_set(err, "out of memory applying fault logit-scale-quant");
    const gt_backend_iface *bi = t->buf->backend->iface;
    int rc = bi->download(t->buf, t->offset, v, sizeof(float) * n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        v[i] = (float)(v[i] * (1.0 + f->quant_x));
    if (rc == 0)
        rc = bi->upload(t->buf, t->offset, v, sizeof(float) * n, err);
    free(v);
    return rc;
}

void gt_fault_before(const char *kind, gt_tensor *t)
{
    if (strcmp(kind, "rope-mode") == 0)
        t->iparams[4] ^= 1;
    else if (strcmp(kind, "attn-overread") == 0)
        t->iparams[3] += 1; /* row i now believes it sits one position later */
    else if (strcmp(kind, "norm-eps") == 0)
        t->fparams[0] = 1.0f;
}

/* matmul-short, applied to the computed node: t[i,j] loses the terms of
 * the last d columns of K, as a kernel whose loop stops one block early. */
int gt_fault_after(const char *kind, gt_tensor *t, gt_err *err)
{
    if (strcmp(kind, "matmul-short") != 0 || t->op != GT_OP_MUL_MAT)
        return 0;
    const gt_tensor *a = t->src[0], *b = t->src[1];
    const gt_type_traits *ti = gt_type_info(a->type);
    const int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    int64_t d = ti->block_size;
    while (d < 32 && d * 2 <= K)
        d *= 2;
    const size_t row = gt_tensor_row_bytes(a), tail = gt_row_size(a->type, d);
    float *tv = malloc(sizeof(float) * (size_t)(N * M)), *bv = malloc(sizeof(float) * (size_t)(K * M));
    char *av = malloc(row * (size_t)N);
    float *w = malloc(sizeof(float) * (size_t)d);
    int rc = -1;
    if (!tv || !bv || !av || !w) {
        gt_err_set(err, "out of memory applying fault %s", kind);
        goto done;
    }
    const gt_backend_iface *bi = t->buf->backend->iface;
    if (bi->download(t->buf, t->offset, tv, sizeof(float) * (size_t)(N * M), err) != 0 ||
        bi->download(b->buf, b->offset, bv, sizeof(float) * (size_t)(K * M), err) != 0 ||
        a->buf->backend->iface->download(a->buf, a->offset, av, row * (size_t)N, err) != 0)
        goto done;
    for (int64_t j = 0; j < N; j++) {
        gt_dequantize_row(a->type, av + (size_t)j * row + row - tail, w, d);
        for (int64_t i = 0; i < M; i++) {
            const float *x = bv + i * K + K - d;
            double s = 0;
            for (int64_t k = 0; k < d; k++)
                s += (double)w[k] * x[k];
            tv[i * N + j] -= (float)s;
        }
    }
    rc = bi->upload(t->buf, t->offset, tv, sizeof(float) * (size_t)(N * M), err);
done:
    free(tv);
    free(bv);
    free(av);
    free(w);
    return rc;
}
