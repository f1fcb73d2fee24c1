/* moe.cl: the mixture-of-experts ops (gt/backend.h): TOPK, MOE_WEIGHTS,
 * MUL_MAT_ID, MOE_SUM. The first two and the last are tiny (a row of
 * n_expert router logits, k weights), so they are one work-item per token
 * row (per element for MOE_SUM) and written to be read, not to be fast.
 * MUL_MAT_ID is one work-item per (output row j, slot r): it dequantizes the
 * chosen expert's row j block by block as GET_ROWS does and accumulates the
 * dot product in a float16 vector. An expert id outside 0..n_exp-1 cannot
 * be reported from a kernel: the outputs that would use it become NaN. */

kernel void topk(global const uchar *xb, ulong x_off, int n, global uchar *yb, ulong y_off,
                 int k)
{
    const size_t i = get_global_id(0);
    global const float *x = CPTR(float, xb, x_off) + i * n;
    global int *ids = PTR(int, yb, y_off) + i * k;
    for (int s = 0; s < k; s++) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            bool taken = false;
            for (int q = 0; q < s; q++)
                taken |= ids[q] == j;
            if (!taken && (best < 0 || x[j] > x[best]))
                best = j;
        }
        ids[s] = best;
    }
}

kernel void moe_weights(global const uchar *xb, ulong x_off, int n, global const uchar *idb,
                        ulong id_off, global uchar *yb, ulong y_off, int k, int norm)
{
    const size_t i = get_global_id(0);
    global const float *x = CPTR(float, xb, x_off) + i * n;
    global const int *ids = CPTR(int, idb, id_off) + i * k;
    global float *y = PTR(float, yb, y_off) + i * k;
    float max = x[0], denom = 0.0f, sel = 0.0f;
    for (int j = 1; j < n; j++)
        max = fmax(max, x[j]);
    for (int j = 0; j < n; j++)
        denom += exp(x[j] - max);
    for (int s = 0; s < k; s++) {
        const int e = ids[s];
        const float p = e >= 0 && e < n ? exp(x[e] - max) / denom : NAN;
        y[s] = p;
        sel += p;
    }
    sel = fmax(sel, 6.103515625e-5f);
    if (norm)
        for (int s = 0; s < k; s++)
            y[s] /= sel;
}

#define MUL_MAT_ID(T)                                                                        \
    kernel void mul_mat_id_##T(global const uchar *w, ulong w_off, ulong row_bytes, int K,    \
                               int n_out, int n_exp, global const uchar *xb, ulong x_off,     \
                               global const uchar *idb, ulong id_off, int k, int per_slot,    \
                               global uchar *yb, ulong y_off)                                 \
    {                                                                                        \
        const int j = get_global_id(0);                                                      \
        const size_t r = get_global_id(1);                                                   \
        if (j >= n_out)                                                                      \
            return;                                                                          \
        const int e = CPTR(int, idb, id_off)[r];                                             \
        global float *out = PTR(float, yb, y_off) + r * n_out + j;                           \
        if (e < 0 || e >= n_exp) {                                                           \
            *out = NAN;                                                                      \
            return;                                                                          \
        }                                                                                    \
        global const uchar *row = w + w_off + ((size_t)e * n_out + j) * row_bytes;           \
        global const float *x = CPTR(float, xb, x_off) + (per_slot ? r : r / k) * K;         \
        float16 acc = 0.0f;                                                                  \
        const int nb = K / 32;                                                               \
        for (int b = 0; b < nb; b++) {                                                       \
            float16 lo, hi;                                                                  \
            BLOCK_VALUES(T, row, b, lo, hi)                                                  \
            acc = MAD(lo, vload16(2 * b, x), acc);                                           \
            acc = MAD(hi, vload16(2 * b + 1, x), acc);                                       \
        }                                                                                    \
        float sum = hsum16(acc);                                                             \
        for (int c = 32 * nb; c < K; c++)                                                    \
            sum = MAD(elem_##T(row, c), x[c], sum);                                          \
        *out = sum;                                                                          \
    }
FOR_EACH_TYPE(MUL_MAT_ID)

kernel void moe_sum(global const uchar *ab, ulong a_off, global const uchar *wb, ulong w_off,
                    global uchar *yb, ulong y_off, int n, int k)
{
    const int d = get_global_id(0);
    const size_t i = get_global_id(1);
    if (d >= n)
        return;
    global const float *a = CPTR(float, ab, a_off);
    global const float *w = CPTR(float, wb, w_off) + i * k;
    float sum = 0.0f;
    for (int s = 0; s < k; s++)
        sum = MAD(w[s], a[(i * k + s) * n + d], sum);
    PTR(float, yb, y_off)[i * n + d] = sum;
}
