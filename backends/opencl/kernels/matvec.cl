/* matvec.cl: MUL_MAT for one (or a few) activation rows: decode.
 *
 * y[t, r] = sum_k w[r, k] * x[t, k]. Decode reads every weight once per
 * token, so this kernel is about streaming weights: a work-group computes
 * MV_ROWS output rows; its MV_LWS items split each row's 32-value blocks
 * between them (item i takes blocks i, i + MV_LWS, ...), dequantize them in
 * registers, accumulate in float16 vectors, and reduce across the group in
 * local memory at the end. The x block is loaded once and used for all
 * MV_ROWS rows, and so is the conversion of their scales (one vector op).
 * On a GPU MV_LWS is large and MV_ROWS small. On a CPU (PoCL runs a
 * work-group's items as a loop on one thread) MV_LWS is 1, so there is
 * no reduction at all, and MV_ROWS is 16, so each x block feeds 16 rows.
 *
 * Global size: (ceil(n_out / MV_ROWS) * MV_LWS, n_tok); local (MV_LWS, 1).
 * Rows past n_out are computed from the last row and not stored. */

#define MATVEC(T)                                                                            \
    kernel void matvec_##T(global const uchar *w, ulong w_off, ulong row_bytes, int K,        \
                           int n_out, global const uchar *xb, ulong x_off, global uchar *yb,  \
                           ulong y_off)                                                      \
    {                                                                                        \
        const int lid = get_local_id(0);                                                     \
        const int r0 = get_group_id(0) * MV_ROWS;                                            \
        const size_t t = get_global_id(1);                                                   \
        global const float *x = CPTR(float, xb, x_off) + t * K;                              \
        global const uchar *row[MV_ROWS];                                                    \
        float16 acc[MV_ROWS];                                                                \
        _Pragma("unroll") for (int r = 0; r < MV_ROWS; r++)                                  \
        {                                                                                    \
            row[r] = w + w_off + (size_t)min(r0 + r, n_out - 1) * row_bytes;                 \
            acc[r] = 0.0f;                                                                   \
        }                                                                                    \
        const int nb = K / 32;                                                               \
        for (int b = lid; b < nb; b += MV_LWS) {                                             \
            const float16 xl = vload16(2 * b, x), xh = vload16(2 * b + 1, x);                \
            const float16 xs = xl + xh;                                                      \
            float d[MV_ROWS], m[MV_ROWS];                                                    \
            ROW_SCALES(T, MV_ROWS, row, b, d, m)                                             \
            _Pragma("unroll") for (int r = 0; r < MV_ROWS; r++)                              \
            {                                                                                \
                float16 lo, hi;                                                              \
                raw_##T(row[r], b, &lo, &hi);                                                \
                if (SCALED_##T) {                                                            \
                    /* the scale once per block: d * (q . x) (+ m * sum x) */                \
                    const float16 qx = MAD(hi, xh, lo * xl);                                 \
                    acc[r] = MAD(qx, (float16)d[r], acc[r]);                                 \
                    if (HAS_MIN_##T)                                                         \
                        acc[r] = MAD(xs, (float16)m[r], acc[r]);                             \
                } else {                                                                     \
                    acc[r] = MAD(lo, xl, acc[r]);                                            \
                    acc[r] = MAD(hi, xh, acc[r]);                                            \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        float sum[MV_ROWS];                                                                  \
        _Pragma("unroll") for (int r = 0; r < MV_ROWS; r++)                                  \
        {                                                                                    \
            sum[r] = hsum16(acc[r]);                                                         \
            for (int k = 32 * nb + lid; k < K; k += MV_LWS)                                  \
                sum[r] = MAD(elem_##T(row[r], k), x[k], sum[r]);                             \
        }                                                                                    \
        MV_REDUCE_AND_STORE                                                                  \
    }

#if MV_LWS > 1
/* Tree reduction over the group; MV_LWS is a power of two. */
#define MV_REDUCE_AND_STORE                                                                  \
    local float red[MV_ROWS][MV_LWS];                                                        \
    _Pragma("unroll") for (int r = 0; r < MV_ROWS; r++) red[r][lid] = sum[r];                \
    barrier(CLK_LOCAL_MEM_FENCE);                                                            \
    for (int s = MV_LWS / 2; s > 0; s >>= 1) {                                               \
        if (lid < s) {                                                                       \
            _Pragma("unroll") for (int r = 0; r < MV_ROWS; r++) red[r][lid] += red[r][lid + s]; \
        }                                                                                    \
        barrier(CLK_LOCAL_MEM_FENCE);                                                        \
    }                                                                                        \
    for (int r = lid; r < MV_ROWS; r += MV_LWS)                                              \
        if (r0 + r < n_out)                                                                  \
            PTR(float, yb, y_off)[t * n_out + r0 + r] = red[r][0];
#else
#define MV_REDUCE_AND_STORE                                                                  \
    _Pragma("unroll") for (int r = 0; r < MV_ROWS; r++) if (r0 + r < n_out)                  \
        PTR(float, yb, y_off)[t * n_out + r0 + r] = sum[r];
#endif

FOR_EACH_TYPE(MATVEC)
