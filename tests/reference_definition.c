/* reference_definition.c: the reference backend's numerics definition, kept
 * frozen for tests/test_reference.c. This is the single-threaded scalar
 * reference as it was before backends/reference became threaded and
 * vectorized (commit bc21548): one output at a time, every sum in double in
 * index order. The live reference must give the same bytes as this file on
 * every op, type and thread count; that is how "faster" is kept from ever
 * meaning "different". Do not optimize this file. */
#include "reference_definition.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
static float *f32(const gt_tensor *t) { return (float *)gt_tensor_host(t); }

static const char *row_ptr(const gt_tensor *t, int64_t row)
{
    return (const char *)gt_tensor_host(t) + (size_t)row * gt_tensor_row_bytes(t);
}

/* t[i,:] = dequant(a[ids[i], :]) */
static int op_get_rows(gt_tensor *t, gt_err *err)
{
    const gt_tensor *table = t->src[0];
    const int32_t *ids = (const int32_t *)gt_tensor_host(t->src[1]);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        if (ids[i] < 0 || ids[i] >= table->ne[1])
            return gt_err_set(err, "GET_ROWS: id %d outside table of %lld rows", ids[i],
                              (long long)table->ne[1]);
        gt_dequantize_row(table->type, row_ptr(table, ids[i]), f32(t) + i * t->ne[0], t->ne[0]);
    }
    return 0;
}

/* t[i,:] = a[i,:] / sqrt(mean(a[i,:]^2) + eps) */
static void op_rms_norm(gt_tensor *t)
{
    const int64_t n = t->ne[0];
    const float eps = t->fparams[0];
    for (int64_t i = 0; i < t->ne[1]; i++) {
        const float *x = f32(t->src[0]) + i * n;
        float *y = f32(t) + i * n;
        double ss = 0.0;
        for (int64_t j = 0; j < n; j++)
            ss += (double)x[j] * x[j];
        const double scale = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)(x[j] * scale);
    }
}

/* t[i,j] = sum_k w[j,k] * x[i,k] */
static int op_mul_mat(gt_tensor *t, gt_err *err)
{
    const gt_tensor *w = t->src[0];
    const gt_tensor *x = t->src[1];
    const int64_t k = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
    float *wrow = malloc(sizeof(float) * (size_t)k); /* (k) one dequantized weight row */
    if (!wrow)
        return gt_err_set(err, "MUL_MAT: out of memory");
    for (int64_t j = 0; j < n_out; j++) {
        gt_dequantize_row(w->type, row_ptr(w, j), wrow, k);
        for (int64_t i = 0; i < n_tok; i++) {
            const float *xi = f32(x) + i * k;
            double sum = 0.0;
            for (int64_t c = 0; c < k; c++)
                sum += (double)wrow[c] * xi[c];
            f32(t)[i * n_out + j] = (float)sum;
        }
    }
    free(wrow);
    return 0;
}

static void op_add(gt_tensor *t)
{
    const int64_t n = t->ne[0] * t->ne[1];
    const float *a = f32(t->src[0]), *b = f32(t->src[1]);
    float *y = f32(t);
    const bool row = t->src[1]->ne[1] == 1; /* a bias: b[0,:] added to every row */
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)((double)a[i] + b[row ? i % t->ne[0] : i]);
}

/* t[i,:] = a[i,:] * b[0,:] */
static void op_mul(gt_tensor *t)
{
    const int64_t n = t->ne[0];
    const float *w = f32(t->src[1]);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        const float *x = f32(t->src[0]) + i * n;
        float *y = f32(t) + i * n;
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)((double)x[j] * w[j]);
    }
}

/* Rotates dimension pairs of every head by pos * base^(-2j/rope_dim). */
static void op_rope(gt_tensor *t)
{
    const int n_heads = t->iparams[0], head_dim = t->iparams[1], rope_dim = t->iparams[2];
    const int pos0 = t->iparams[3], neox = t->iparams[4] == 1;
    const double base = t->fparams[0];
    const int64_t n = t->ne[0];
    for (int64_t i = 0; i < t->ne[1]; i++) {
        const float *x = f32(t->src[0]) + i * n;
        float *y = f32(t) + i * n;
        if (y != x)
            memcpy(y, x, sizeof(float) * (size_t)n);
        const double pos = (double)(pos0 + i);
        for (int h = 0; h < n_heads; h++) {
            float *v = y + (int64_t)h * head_dim;
            for (int j = 0; j < rope_dim / 2; j++) {
                const double theta = pos * pow(base, -2.0 * j / rope_dim);
                const double c = cos(theta), s = sin(theta);
                const int i0 = neox ? j : 2 * j;
                const int i1 = neox ? j + rope_dim / 2 : 2 * j + 1;
                const double x0 = v[i0], x1 = v[i1];
                v[i0] = (float)(x0 * c - x1 * s);
                v[i1] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

/* cache[pos0 + i, :] = a[i, :] */
static void op_kv_store(gt_tensor *t)
{
    const gt_tensor *a = t->src[0], *cache = t->src[1];
    float *dst = f32(cache) + (int64_t)t->iparams[0] * cache->ne[0];
    memcpy(dst, f32(a), sizeof(float) * (size_t)(a->ne[0] * a->ne[1]));
}

/* Causal attention with grouped KV heads: query head h reads KV head
 * h / (n_head / n_kv_head). Row i sees cache rows 0..pos0+i, or with a
 * window w (iparams[4]) only the last w of them. */
static int op_attention(gt_tensor *t, gt_err *err)
{
    const gt_tensor *q = t->src[0], *kc = t->src[1], *vc = t->src[2];
    const int n_head = t->iparams[0], n_kv = t->iparams[1], hd = t->iparams[2];
    const int pos0 = t->iparams[3], window = t->iparams[4];
    const double scale = t->fparams[0];
    const int64_t kv_dim = (int64_t)n_kv * hd, q_dim = (int64_t)n_head * hd;
    const int group = n_head / n_kv;
    double *score = malloc(sizeof(double) * (size_t)(pos0 + q->ne[1])); /* (n_seen) */
    if (!score)
        return gt_err_set(err, "ATTENTION: out of memory");
    for (int64_t i = 0; i < q->ne[1]; i++) {
        const int n_seen = pos0 + (int)i + 1;
        const int first = window > 0 && n_seen > window ? n_seen - window : 0;
        for (int h = 0; h < n_head; h++) {
            const float *qh = f32(q) + i * q_dim + (int64_t)h * hd;
            const int64_t kv_off = (int64_t)(h / group) * hd;
            double max = -INFINITY;
            for (int p = first; p < n_seen; p++) {
                const float *kp = f32(kc) + p * kv_dim + kv_off;
                double dot = 0.0;
                for (int d = 0; d < hd; d++)
                    dot += (double)qh[d] * kp[d];
                score[p] = dot * scale;
                if (score[p] > max)
                    max = score[p];
            }
            double denom = 0.0;
            for (int p = first; p < n_seen; p++) {
                score[p] = exp(score[p] - max);
                denom += score[p];
            }
            float *out = f32(t) + i * q_dim + (int64_t)h * hd;
            for (int d = 0; d < hd; d++) {
                double acc = 0.0;
                for (int p = first; p < n_seen; p++)
                    acc += score[p] * f32(vc)[p * kv_dim + kv_off + d];
                out[d] = (float)(acc / denom);
            }
        }
    }
    free(score);
    return 0;
}

/* t = silu(a) * b, silu(x) = x / (1 + e^-x) */
static void op_silu_mul(gt_tensor *t)
{
    const int64_t n = t->ne[0] * t->ne[1];
    const float *a = f32(t->src[0]), *b = f32(t->src[1]);
    float *y = f32(t);
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        y[i] = (float)(x / (1.0 + exp(-x)) * b[i]);
    }
}

/* t = gelu(a) * b, gelu in its tanh form (backend.h) */
static void op_gelu_mul(gt_tensor *t)
{
    const int64_t n = t->ne[0] * t->ne[1];
    const float *a = f32(t->src[0]), *b = f32(t->src[1]);
    float *y = f32(t);
    const double c = 0.79788456080286535588; /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        y[i] = (float)(0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x))) * b[i]);
    }
}

/* t = a * fparams[0] */
static void op_scale(gt_tensor *t)
{
    const int64_t n = t->ne[0] * t->ne[1];
    const float *a = f32(t->src[0]);
    float *y = f32(t);
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] * t->fparams[0];
}

static int ref_compute(gt_backend *b, const gt_graph *g, gt_err *err)
{
    (void)b;
    for (int n = 0; n < g->n_nodes; n++) {
        gt_tensor *t = g->nodes[n];
        int rc = 0;
        switch (t->op) {
        case GT_OP_NONE: break;
        case GT_OP_GET_ROWS: rc = op_get_rows(t, err); break;
        case GT_OP_RMS_NORM: op_rms_norm(t); break;
        case GT_OP_MUL_MAT: rc = op_mul_mat(t, err); break;
        case GT_OP_ADD: op_add(t); break;
        case GT_OP_MUL: op_mul(t); break;
        case GT_OP_ROPE: op_rope(t); break;
        case GT_OP_KV_STORE: op_kv_store(t); break;
        case GT_OP_ATTENTION: rc = op_attention(t, err); break;
        case GT_OP_SILU_MUL: op_silu_mul(t); break;
        case GT_OP_GELU_MUL: op_gelu_mul(t); break;
        case GT_OP_SCALE: op_scale(t); break;
        default: return gt_err_set(err, "reference: op %d not implemented", (int)t->op);
        }
        if (rc != 0)
            return gt_err_wrap(err, "node %d (%s '%s')", n, gt_op_name(t->op), t->name);
    }
    return 0;
}

static bool def_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len)
{
    (void)b;
    (void)why;
    (void)why_len;
    if (op == GT_OP_MUL_MAT || op == GT_OP_GET_ROWS)
        return gt_type_info(type) && type != GT_TYPE_I32;
    return op > GT_OP_NONE && op < GT_OP_COUNT && type == GT_TYPE_F32;
}

static void def_free(gt_backend *b) { free(b); }

static const gt_backend_iface DEF_IFACE = {
    .free = def_free,
    .supports = def_supports,
    .buffer_alloc = gt_host_buffer_alloc,
    .buffer_from_host = gt_host_buffer_from_host,
    .buffer_free = gt_host_buffer_free,
    .upload = gt_host_upload,
    .download = gt_host_download,
    .compute = ref_compute,
};

gt_backend *reference_definition_open(void)
{
    gt_backend *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->iface = &DEF_IFACE;
    strcpy(b->info.backend, "reference-definition");
    strcpy(b->info.name, "frozen scalar reference (tests only)");
    strcpy(b->info.kind, "cpu");
    return b;
}
