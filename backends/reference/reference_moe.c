/* reference_moe.c: the mixture-of-experts ops of the reference backend
 * (TOPK, MOE_WEIGHTS, MUL_MAT_ID, MOE_SUM), each a transcription of its
 * definition in gt/backend.h, every sum in double in one fixed order:
 *   MOE_WEIGHTS  max over the row; e_j = exp((double)a_j - max); denom =
 *                sum over j = 0.. in order; p = e / denom; renormalized:
 *                p_s / max(sum over s = 0.. in order of p_s, 6.103515625e-5),
 *                rounded to float once at the end
 *   MUL_MAT_ID   t[r, j] = (float)sum, sum += (double)w[c] * x[c] for
 *                c = 0..K-1 (w = the dequantized expert row)
 *   MOE_SUM      t[i, d] = (float)sum, sum += (double)b[i,s] * a[i*k+s, d]
 *                for s = 0..k-1
 * MUL_MAT_ID's threads split (expert, row block) pairs: an expert row is
 * dequantized once and dotted with every slot that chose that expert; who
 * computes an output never changes how. */
#include "gt/backend.h"

#include <math.h>
#include <stdlib.h>

#include "reference.h"

static float *f32(const gt_tensor *t) { return (float *)gt_tensor_host(t); }
static const int32_t *i32(const gt_tensor *t) { return (const int32_t *)gt_tensor_host(t); }

/* t[i,:] = indices of the k largest of a[i,:], largest first, ties: lower index */
static void op_topk(gt_tensor *t)
{
    const gt_tensor *a = t->src[0];
    const int64_t n = a->ne[0], k = t->ne[0];
    for (int64_t i = 0; i < t->ne[1]; i++) {
        const float *x = f32(a) + i * n;
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

static int op_moe_weights(gt_tensor *t, gt_err *err)
{
    const gt_tensor *a = t->src[0];
    const int64_t n = a->ne[0], k = t->ne[0];
    const int32_t *ids = i32(t->src[1]);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        const float *x = f32(a) + i * n;
        double max = x[0], denom = 0.0, sel = 0.0, p[64];
        if (k > 64)
            return gt_err_set(err, "MOE_WEIGHTS: k %lld > 64", (long long)k);
        for (int64_t j = 1; j < n; j++)
            max = x[j] > max ? x[j] : max;
        for (int64_t j = 0; j < n; j++)
            denom += exp((double)x[j] - max);
        for (int64_t s = 0; s < k; s++) {
            const int32_t e = ids[i * k + s];
            if (e < 0 || e >= n)
                return gt_err_set(err, "MOE_WEIGHTS: expert id %d outside 0..%lld", e,
                                  (long long)n - 1);
            p[s] = exp((double)x[e] - max) / denom;
            sel += p[s];
        }
        if (sel < 6.103515625e-5)
            sel = 6.103515625e-5;
        for (int64_t s = 0; s < k; s++)
            f32(t)[i * k + s] = (float)(t->iparams[0] ? p[s] / sel : p[s]);
    }
    return 0;
}

typedef struct mmid_job {
    const gt_tensor *t;
    int64_t n_exp, n_out, k, K, n_tok, jblock;
    const int64_t *slot_of;  /* (n_tok*k) slots sorted by expert */
    const int64_t *first;    /* (n_exp + 1) expert e's slots: first[e] .. first[e+1]-1 */
} mmid_job;

#define ID_ROWS 16 /* expert rows per work item */

static void mmid_task(void *arg, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const mmid_job *m = arg;
    const gt_tensor *w = m->t->src[0], *x = m->t->src[1];
    float *row = malloc((size_t)m->K * sizeof *row);
    if (!row)
        abort(); /* K floats; the pool has no error path, and this is far below any real limit */
    const bool per_slot = m->t->iparams[1] != 0;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t e = b / m->jblock, j0 = (b % m->jblock) * ID_ROWS;
        if (m->first[e] == m->first[e + 1])
            continue; /* no slot chose expert e */
        for (int64_t j = j0; j < j0 + ID_ROWS && j < m->n_out; j++) {
            gt_dequantize_row(w->type,
                              (const char *)gt_tensor_host(w) +
                                  (size_t)(e * m->n_out + j) * gt_tensor_row_bytes(w),
                              row, m->K);
            for (int64_t q = m->first[e]; q < m->first[e + 1]; q++) {
                const int64_t r = m->slot_of[q], xr = per_slot ? r : r / m->k;
                const float *xv = f32(x) + xr * m->K;
                double sum = 0.0;
                for (int64_t c = 0; c < m->K; c++)
                    sum += (double)row[c] * xv[c];
                f32(m->t)[r * m->n_out + j] = (float)sum;
            }
        }
    }
    free(row);
}

static int op_mul_mat_id(ref_pool *pool, gt_tensor *t, gt_err *err)
{
    const gt_tensor *w = t->src[0], *ids = t->src[2];
    mmid_job m = {.t = t, .n_out = t->iparams[0], .k = ids->ne[0], .K = w->ne[0],
                  .n_tok = ids->ne[1]};
    if (m.n_out <= 0 || w->ne[1] % m.n_out != 0)
        return gt_err_set(err, "MUL_MAT_ID: %lld weight rows are not experts of %lld rows",
                          (long long)w->ne[1], (long long)m.n_out);
    m.n_exp = w->ne[1] / m.n_out;
    m.jblock = (m.n_out + ID_ROWS - 1) / ID_ROWS;
    const int64_t n_slots = m.n_tok * m.k;
    int64_t *slot_of = malloc((size_t)n_slots * sizeof *slot_of);
    int64_t *first = calloc((size_t)m.n_exp + 1, sizeof *first);
    if (!slot_of || !first) {
        free(slot_of);
        free(first);
        return gt_err_set(err, "MUL_MAT_ID: out of memory");
    }
    /* counting sort of the slots by expert (stable: slot order within one) */
    for (int64_t r = 0; r < n_slots; r++) {
        const int32_t e = i32(ids)[r];
        if (e < 0 || e >= m.n_exp) {
            free(slot_of);
            free(first);
            return gt_err_set(err, "MUL_MAT_ID: expert id %d outside 0..%lld", e,
                              (long long)m.n_exp - 1);
        }
        first[e + 1]++;
    }
    for (int64_t e = 0; e < m.n_exp; e++)
        first[e + 1] += first[e];
    int64_t *fill = calloc((size_t)m.n_exp, sizeof *fill);
    if (!fill) {
        free(slot_of);
        free(first);
        return gt_err_set(err, "MUL_MAT_ID: out of memory");
    }
    for (int64_t r = 0; r < n_slots; r++) {
        const int32_t e = i32(ids)[r];
        slot_of[first[e] + fill[e]++] = r;
    }
    free(fill);
    m.slot_of = slot_of;
    m.first = first;
    ref_pool_for(pool, m.n_exp * m.jblock, 1, mmid_task, &m);
    free(slot_of);
    free(first);
    return 0;
}

static void op_moe_sum(gt_tensor *t)
{
    const gt_tensor *a = t->src[0], *wt = t->src[1];
    const int64_t n = t->ne[0], k = wt->ne[0];
    for (int64_t i = 0; i < t->ne[1]; i++)
        for (int64_t d = 0; d < n; d++) {
            double sum = 0.0;
            for (int64_t s = 0; s < k; s++)
                sum += (double)f32(wt)[i * k + s] * f32(a)[(i * k + s) * n + d];
            f32(t)[i * n + d] = (float)sum;
        }
}

int ref_moe_compute(ref_pool *pool, gt_tensor *t, gt_err *err)
{
    switch (t->op) {
    case GT_OP_TOPK: op_topk(t); return 0;
    case GT_OP_MOE_WEIGHTS: return op_moe_weights(t, err);
    case GT_OP_MUL_MAT_ID: return op_mul_mat_id(pool, t, err);
    case GT_OP_MOE_SUM: op_moe_sum(t); return 0;
    default: return gt_err_set(err, "reference: op %d is not a mixture-of-experts op", (int)t->op);
    }
}
