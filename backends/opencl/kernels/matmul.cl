/* matmul.cl: MUL_MAT for batches of activation rows: prefill.
 *
 * y[t, r] = sum_k w[r, k] * x[t, k]. Tiled in registers: each work-item
 * computes an MM_RN x MM_RM tile (weight rows x tokens). Per 32-value
 * block it dequantizes MM_RN weight blocks once and uses each for MM_RM
 * tokens, and loads each token's x block once for MM_RN rows, so a weight
 * byte is read n_tok / MM_RM times instead of n_tok times, and no
 * dequantized copy of the weights ever exists in memory. Accumulators are
 * float16 vectors, summed horizontally once at the end.
 *
 * Global size: (ceil(n_out / MM_RN), ceil(n_tok / MM_RM)) rounded up to the
 * work-group shape (MM_LX, MM_LY); items past the edge return at once, and
 * edge tiles compute clamped rows/tokens they do not store. */

#define MATMUL(T)                                                                            \
    kernel void matmul_##T(global const uchar *w, ulong w_off, ulong row_bytes, int K,        \
                           int n_out, global const uchar *xb, ulong x_off, int n_tok,         \
                           global uchar *yb, ulong y_off)                                     \
    {                                                                                        \
        const int r0 = get_global_id(0) * MM_RN, t0 = get_global_id(1) * MM_RM;              \
        if (r0 >= n_out || t0 >= n_tok)                                                      \
            return;                                                                          \
        global const uchar *row[MM_RN];                                                      \
        global const float *x[MM_RM];                                                        \
        float16 acc[MM_RN][MM_RM];                                                           \
        _Pragma("unroll") for (int r = 0; r < MM_RN; r++)                                    \
        {                                                                                    \
            row[r] = w + w_off + (size_t)min(r0 + r, n_out - 1) * row_bytes;                 \
            _Pragma("unroll") for (int t = 0; t < MM_RM; t++) acc[r][t] = 0.0f;              \
        }                                                                                    \
        _Pragma("unroll") for (int t = 0; t < MM_RM; t++)                                    \
            x[t] = CPTR(float, xb, x_off) + (size_t)min(t0 + t, n_tok - 1) * K;              \
        const int nb = K / 32;                                                               \
        for (int b = 0; b < nb; b++) {                                                       \
            float16 wl[MM_RN], wh[MM_RN];                                                    \
            float d[MM_RN], m[MM_RN];                                                        \
            ROW_SCALES(T, MM_RN, row, b, d, m)                                               \
            _Pragma("unroll") for (int r = 0; r < MM_RN; r++)                                \
            {                                                                                \
                raw_##T(row[r], b, &wl[r], &wh[r]);                                          \
                if (SCALED_##T) {                                                            \
                    const float16 dv = d[r], mv = HAS_MIN_##T ? m[r] : 0.0f;                 \
                    wl[r] = MAD(wl[r], dv, mv);                                              \
                    wh[r] = MAD(wh[r], dv, mv);                                              \
                }                                                                            \
            }                                                                                \
            _Pragma("unroll") for (int t = 0; t < MM_RM; t++)                                \
            {                                                                                \
                const float16 xl = vload16(2 * b, x[t]), xh = vload16(2 * b + 1, x[t]);      \
                _Pragma("unroll") for (int r = 0; r < MM_RN; r++)                            \
                {                                                                            \
                    acc[r][t] = MAD(wl[r], xl, acc[r][t]);                                   \
                    acc[r][t] = MAD(wh[r], xh, acc[r][t]);                                   \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        global float *y = PTR(float, yb, y_off);                                             \
        _Pragma("unroll") for (int t = 0; t < MM_RM; t++)                                    \
        {                                                                                    \
            _Pragma("unroll") for (int r = 0; r < MM_RN; r++)                                \
            {                                                                                \
                float s = hsum16(acc[r][t]);                                                 \
                for (int k = 32 * nb; k < K; k++)                                            \
                    s = MAD(elem_##T(row[r], k), x[t][k], s);                                \
                if (r0 + r < n_out && t0 + t < n_tok)                                        \
                    y[(size_t)(t0 + t) * n_out + r0 + r] = s;                                \
            }                                                                                \
        }                                                                                    \
    }

FOR_EACH_TYPE(MATMUL)
