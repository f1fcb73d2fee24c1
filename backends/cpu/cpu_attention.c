/* cpu_attention.c: causal multi-head attention with grouped KV heads over
 * the KV cache, F32 or F16 (kv_type f16).
 *
 * Decode (few query rows): one task per (query row, head); scores are SIMD
 * dot products with each cached key, softmax subtracts the row maximum
 * before exponentiating (so no exp overflows, and the largest term is
 * exactly 1), and the output is a running axpy over the cached values. The
 * normalisation (1/sum) is applied once at the end.
 *
 * Prefill with BLAS: one task per (head, block of QB query rows). The block's
 * scores S = scale * Q_h K_h^T are one sgemm over the keys the last row of
 * the block can see (a head's slice of a cache row is a strided matrix:
 * ld = n_kv*head_dim), the causal mask zeroes the entries past each row's
 * position after its softmax, and O_h = P V_h is a second sgemm written
 * straight into the output columns of the head. Tasks with the most keys
 * are handed out first so the last ones to finish are the small ones.
 *
 * A window w (iparams[4], Gemma's local layers) limits row p to the keys
 * max(0, p-w+1)..p: the decode loop starts there, and a prefill block's
 * sgemms span only the keys some row of the block can see, each row's
 * scores before its own first key zeroed like those past its position.
 *
 * An F16 cache is read through the exact F16 kernels: decode scores with
 * fdot[F16], each value row's head slice widened (dequant[F16], exact)
 * before its axpy; a prefill block widens the head's K and V slices of its
 * keys into the thread's scratch (contiguous, ld = head_dim) for the sgemms. */
#include "cpu.h"

#include <math.h>
#include <string.h>

#define QB 64

static bool use_blas(const gt_cpu_ctx *c, const gt_tensor *t)
{
    return c->blas.sgemm && t->src[0]->ne[1] >= c->blas_min_batch;
}

void gt_cpu_attention_scratch(const gt_cpu_ctx *c, const gt_tensor *t, size_t *thread_floats)
{
    const size_t n_keys = (size_t)t->iparams[3] + (size_t)t->src[0]->ne[1];
    const size_t hd = (size_t)t->iparams[2];
    const bool f16 = t->src[1]->type == GT_TYPE_F16;
    *thread_floats = use_blas(c, t) ? QB * n_keys + (f16 ? 2 * n_keys * hd : 0)
                                    : n_keys + (f16 ? hd : 0);
}

static float row_max(const float *x, int64_t n)
{
    float m = x[0];
    for (int64_t j = 1; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

static void attention_rows(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, int ith, int nth)
{
    const gt_tensor *q = t->src[0], *kc = t->src[1], *vc = t->src[2];
    const int n_head = t->iparams[0], n_kv = t->iparams[1], hd = t->iparams[2], pos0 = t->iparams[3];
    const int window = t->iparams[4];
    const float scale = t->fparams[0];
    const int64_t q_dim = (int64_t)n_head * hd, kv_dim = (int64_t)n_kv * hd;
    const int group = n_head / n_kv;
    const float *qa = gt_cpu_f32(q), *ka = gt_cpu_f32(kc), *va = gt_cpu_f32(vc);
    const uint16_t *k16 = gt_tensor_host(kc), *v16 = gt_tensor_host(vc);
    const bool f16 = kc->type == GT_TYPE_F16;
    float *out = gt_cpu_f32(t);
    float *score = c->tscratch[ith];
    float *vrow = score + pos0 + q->ne[1]; /* (hd) an F16 value slice widened */
    const int64_t n_tasks = q->ne[1] * n_head;
    int64_t mine = ith;
    for (int64_t task = mine;; task = mine) {
        if (task >= n_tasks)
            break;
        mine = (int64_t)atomic_fetch_add_explicit(counter, 1, memory_order_relaxed) + nth;
        const int64_t i = task / n_head;
        const int h = (int)(task % n_head);
        const int64_t n_seen = pos0 + i + 1;
        const int64_t first = window > 0 && n_seen > window ? n_seen - window : 0;
        const int64_t n_keys = n_seen - first;
        const float *qh = qa + i * q_dim + (int64_t)h * hd;
        const int64_t kv_off = (int64_t)(h / group) * hd;
        for (int64_t p = first; p < n_seen; p++)
            score[p - first] = (f16 ? c->k.fdot[GT_TYPE_F16](k16 + p * kv_dim + kv_off, qh, hd)
                                    : c->k.dot_f32(qh, ka + p * kv_dim + kv_off, hd)) *
                               scale;
        const float sum = c->k.exp_sub_sum(score, n_keys, row_max(score, n_keys));
        float *o = out + i * q_dim + (int64_t)h * hd;
        memset(o, 0, sizeof(float) * (size_t)hd);
        for (int64_t p = first; p < n_seen; p++) {
            const float *v = va + p * kv_dim + kv_off;
            if (f16) {
                c->k.dequant[GT_TYPE_F16](v16 + p * kv_dim + kv_off, vrow, hd);
                v = vrow;
            }
            c->k.axpy(score[p - first], v, o, hd);
        }
        c->k.scale(o, 1.0f / sum, o, hd);
    }
}

static void attention_blas(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, int ith, int nth)
{
    const gt_tensor *q = t->src[0], *kc = t->src[1], *vc = t->src[2];
    const int n_head = t->iparams[0], n_kv = t->iparams[1], hd = t->iparams[2], pos0 = t->iparams[3];
    const int window = t->iparams[4];
    const int64_t n_tok = q->ne[1];
    const int q_dim = n_head * hd, kv_dim = n_kv * hd;
    const int group = n_head / n_kv;
    const float *qa = gt_cpu_f32(q), *ka = gt_cpu_f32(kc), *va = gt_cpu_f32(vc);
    const uint16_t *k16 = gt_tensor_host(kc), *v16 = gt_tensor_host(vc);
    const bool f16 = kc->type == GT_TYPE_F16;
    float *out = gt_cpu_f32(t);
    float *S = c->tscratch[ith];
    /* F16: the head's keys and values widened, (n_keys, hd) each */
    float *kw = S + (size_t)QB * (size_t)(pos0 + n_tok), *vw = kw + (size_t)(pos0 + n_tok) * hd;
    const int64_t n_qb = (n_tok + QB - 1) / QB;
    const int64_t n_tasks = n_qb * n_head;
    int64_t mine = ith;
    for (int64_t task = mine;; task = mine) {
        if (task >= n_tasks)
            break;
        mine = (int64_t)atomic_fetch_add_explicit(counter, 1, memory_order_relaxed) + nth;
        const int64_t qb = n_qb - 1 - task / n_head; /* biggest blocks first */
        const int h = (int)(task % n_head);
        const int64_t i0 = qb * QB, i1 = i0 + QB < n_tok ? i0 + QB : n_tok;
        /* keys [k0, k1): what some row of the block sees */
        const int64_t k1 = pos0 + i1, first0 = pos0 + i0 + 1 - window;
        const int64_t k0 = window > 0 && first0 > 0 ? first0 : 0;
        const int nk = (int)(k1 - k0), rows = (int)(i1 - i0);
        const int64_t kv_off = (int64_t)(h / group) * hd;
        const float *kh = ka + k0 * kv_dim + kv_off, *vh = va + k0 * kv_dim + kv_off;
        int ld = kv_dim;
        if (f16) {
            for (int p = 0; p < nk; p++) {
                c->k.dequant[GT_TYPE_F16](k16 + (k0 + p) * kv_dim + kv_off, kw + (size_t)p * hd, hd);
                c->k.dequant[GT_TYPE_F16](v16 + (k0 + p) * kv_dim + kv_off, vw + (size_t)p * hd, hd);
            }
            kh = kw, vh = vw, ld = hd;
        }
        c->blas.sgemm(GT_CPU_ROW_MAJOR, GT_CPU_NO_TRANS, GT_CPU_TRANS, rows, nk, hd, t->fparams[0],
                      qa + i0 * q_dim + (int64_t)h * hd, q_dim, kh, ld, 0.0f, S, nk);
        for (int r = 0; r < rows; r++) {
            float *sr = S + (int64_t)r * nk;
            const int64_t n_seen = pos0 + i0 + r + 1;
            const int64_t first = window > 0 && n_seen > window ? n_seen - window : 0;
            const int64_t a = first - k0, b = n_seen - k0; /* this row's keys in sr */
            const float sum = c->k.exp_sub_sum(sr + a, b - a, row_max(sr + a, b - a));
            c->k.scale(sr + a, 1.0f / sum, sr + a, b - a);
            memset(sr, 0, sizeof(float) * (size_t)a);
            memset(sr + b, 0, sizeof(float) * (size_t)(nk - b));
        }
        c->blas.sgemm(GT_CPU_ROW_MAJOR, GT_CPU_NO_TRANS, GT_CPU_NO_TRANS, rows, hd, nk, 1.0f, S, nk,
                      vh, ld, 0.0f, out + i0 * q_dim + (int64_t)h * hd, q_dim);
    }
}

void gt_cpu_attention(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, int ith, int nth)
{
    if (use_blas(c, t))
        attention_blas(c, t, counter, ith, nth);
    else
        attention_rows(c, t, counter, ith, nth);
}
