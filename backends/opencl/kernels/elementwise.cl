/* elementwise.cl: GET_ROWS, RMS_NORM, ADD, MUL, SILU_MUL, GELU_MUL, SCALE
 * and ROPE.
 *
 * These are memory-bound and small. Each work-item handles EW_W adjacent
 * floats (a -D build option: 16 on CPU devices, where PoCL runs a
 * work-group's items as a loop and wide vectors are what its compiler turns
 * into SIMD; 4 on GPUs, where neighbouring items reading neighbouring
 * vectors coalesce). Every kernel reads an element before writing the same
 * element, so in-place nodes (y is x) are safe. */

#define floatW CAT(float, EW_W)
#define VLOADW CAT(vload, EW_W)
#define VSTOREW CAT(vstore, EW_W)

/* y[i, :] = dequant(w[ids[i], :]); one work-item per 32-value block.
 * An id outside the table cannot be reported from here, so the row becomes
 * NaN and flag records it; the host checks flag after the graph. */
#define GET_ROWS(T)                                                                          \
    kernel void get_rows_##T(global const uchar *w, ulong w_off, ulong row_bytes, int n_table, \
                             int K, global const uchar *ids, ulong ids_off, global uchar *y,  \
                             ulong y_off, global int *flag)                                   \
    {                                                                                        \
        const int b = get_global_id(0), i = get_global_id(1);                                \
        if (32 * b >= K)                                                                     \
            return;                                                                          \
        const int id = CPTR(int, ids, ids_off)[i];                                           \
        global float *out = PTR(float, y, y_off) + (size_t)i * K + 32 * b;                   \
        const int n = min(32, K - 32 * b);                                                   \
        if (id < 0 || id >= n_table) {                                                       \
            flag[0] = 1;                                                                     \
            flag[1] = id;                                                                    \
            flag[2] = i;                                                                     \
            for (int k = 0; k < n; k++)                                                      \
                out[k] = NAN;                                                                \
            return;                                                                          \
        }                                                                                    \
        global const uchar *row = w + w_off + (size_t)id * row_bytes;                        \
        if (n == 32) {                                                                       \
            float16 lo, hi;                                                                  \
            BLOCK_VALUES(T, row, b, lo, hi)                                                  \
            vstore16(lo, 0, out);                                                            \
            vstore16(hi, 1, out);                                                            \
        } else {                                                                             \
            for (int k = 0; k < n; k++)                                                      \
                out[k] = elem_##T(row, 32 * b + k);                                          \
        }                                                                                    \
    }
FOR_EACH_TYPE(GET_ROWS)

/* y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps), times w[0, :] when
 * has_w (RMS_NORM fused with the MUL by its norm weight that follows it:
 * the same float operations in the same order as the two nodes). A
 * work-group per row, NORM_LWS (a power of two) items, the sum reduced in
 * local memory. */
kernel void rms_norm(global const uchar *xb, ulong x_off, global uchar *yb, ulong y_off, int n,
                     float eps, global const uchar *wb, ulong w_off, int has_w)
{
    local float red[NORM_LWS];
    const int lid = get_local_id(0);
    const size_t r = get_group_id(0);
    global const float *x = CPTR(float, xb, x_off) + r * n;
    global float *y = PTR(float, yb, y_off) + r * n;
    const int n4 = n / 4;
    float ss = 0.0f;
    for (int j = lid; j < n4; j += NORM_LWS) {
        float4 v = vload4(j, x);
        ss += dot(v, v);
    }
    for (int j = 4 * n4 + lid; j < n; j += NORM_LWS)
        ss = MAD(x[j], x[j], ss);
    red[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = NORM_LWS / 2; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float scale = 1.0f / sqrt(red[0] / (float)n + eps);
    global const float *w = CPTR(float, wb, w_off);
    if (has_w) {
        for (int j = lid; j < n4; j += NORM_LWS)
            vstore4(vload4(j, x) * scale * vload4(j, w), j, y);
        for (int j = 4 * n4 + lid; j < n; j += NORM_LWS)
            y[j] = x[j] * scale * w[j];
    } else {
        for (int j = lid; j < n4; j += NORM_LWS)
            vstore4(vload4(j, x) * scale, j, y);
        for (int j = 4 * n4 + lid; j < n; j += NORM_LWS)
            y[j] = x[j] * scale;
    }
}

/* The shape shared by ADD, SILU_MUL and GELU_MUL: y = f(a, b) over n floats. */
#define BINARY(name, vexpr, sexpr)                                                          \
    kernel void name(global const uchar *ab, ulong a_off, global const uchar *bb, ulong b_off, \
                     global uchar *yb, ulong y_off, ulong n)                                  \
    {                                                                                        \
        global const float *a = CPTR(float, ab, a_off), *b = CPTR(float, bb, b_off);         \
        global float *y = PTR(float, yb, y_off);                                             \
        const size_t i = get_global_id(0) * EW_W;                                            \
        if (i + EW_W <= n) {                                                                 \
            floatW x = VLOADW(0, a + i), w = VLOADW(0, b + i);                               \
            VSTOREW(vexpr, 0, y + i);                                                        \
        } else {                                                                             \
            for (size_t k = i; k < n; k++) {                                                 \
                float x = a[k], w = b[k];                                                    \
                y[k] = sexpr;                                                                \
            }                                                                                \
        }                                                                                    \
    }
BINARY(add, x + w, x + w)
/* silu(x) * w with silu(x) = x / (1 + e^-x) */
BINARY(silu_mul, x / (1.0f + exp(-x)) * w, x / (1.0f + exp(-x)) * w)
/* gelu(x) * w, gelu in the tanh form Gemma is trained with (backend.h);
 * sqrt(2/pi) rounded to float */
#define GELU(x) (0.5f * (x) * (1.0f + tanh(0.797884560802865f * ((x) + 0.044715f * (x) * (x) * (x)))))
BINARY(gelu_mul, GELU(x) * w, GELU(x) * w)

/* y = a * s over n floats (Gemma's embedding scale) */
kernel void scale(global const uchar *ab, ulong a_off, global uchar *yb, ulong y_off, ulong n,
                  float s)
{
    global const float *a = CPTR(float, ab, a_off);
    global float *y = PTR(float, yb, y_off);
    const size_t i = get_global_id(0) * EW_W;
    if (i + EW_W <= n) {
        VSTOREW(VLOADW(0, a + i) * s, 0, y + i);
    } else {
        for (size_t k = i; k < n; k++)
            y[k] = a[k] * s;
    }
}

/* y[r, :] = a[r, :] * b[0, :] (b: a norm weight row) */
kernel void mul(global const uchar *ab, ulong a_off, global const uchar *bb, ulong b_off,
                global uchar *yb, ulong y_off, int n)
{
    const size_t r = get_global_id(1);
    const int j = get_global_id(0) * EW_W;
    global const float *a = CPTR(float, ab, a_off) + r * n, *b = CPTR(float, bb, b_off);
    global float *y = PTR(float, yb, y_off) + r * n;
    if (j + EW_W <= n) {
        VSTOREW(VLOADW(0, a + j) * VLOADW(0, b + j), 0, y + j);
    } else {
        for (int k = j; k < n; k++)
            y[k] = a[k] * b[k];
    }
}

/* y[r, :] = a[r, :] + b[0, :] (b: a bias row) */
kernel void add_row(global const uchar *ab, ulong a_off, global const uchar *bb, ulong b_off,
                    global uchar *yb, ulong y_off, int n)
{
    const size_t r = get_global_id(1);
    const int j = get_global_id(0) * EW_W;
    global const float *a = CPTR(float, ab, a_off) + r * n, *b = CPTR(float, bb, b_off);
    global float *y = PTR(float, yb, y_off) + r * n;
    if (j + EW_W <= n) {
        VSTOREW(VLOADW(0, a + j) + VLOADW(0, b + j), 0, y + j);
    } else {
        for (int k = j; k < n; k++)
            y[k] = a[k] + b[k];
    }
}

/* Rotates pair j of head h of row r in place. cos/sin come from a table the
 * host computed in double precision, (n_rows, rope_dim/2, 2), so positions
 * in the thousands keep full accuracy without needing cl_khr_fp64. Dims
 * past rope_dim are not touched (the host copies them first when y is not
 * x). */
kernel void rope(global uchar *xb, ulong x_off, int row_len, int n_heads, int head_dim,
                 int rope_dim, int neox, global const float *tab, ulong tab_off)
{
    const int half_rd = rope_dim / 2;
    const int g = get_global_id(0);
    const size_t r = get_global_id(1);
    if (g >= n_heads * half_rd)
        return;
    const int h = g / half_rd, j = g % half_rd;
    global float *v = PTR(float, xb, x_off) + r * row_len + (size_t)h * head_dim;
    global const float *cs = CPTR(float, tab, tab_off) + (r * half_rd + j) * 2;
    const int i0 = neox ? j : 2 * j;
    const int i1 = neox ? j + half_rd : 2 * j + 1;
    const float x0 = v[i0], x1 = v[i1], c = cs[0], s = cs[1];
    v[i0] = x0 * c - x1 * s;
    v[i1] = x0 * s + x1 * c;
}
