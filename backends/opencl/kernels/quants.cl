/* quants.cl: the weight types whose 32 values are not one scale times raw
 * integers: Q5_0, Q5_1, IQ4_NL and the K-quants Q2_K .. Q6_K. Built right
 * after common.cl; it extends FOR_EACH_TYPE, so every kernel template in
 * elementwise.cl, matvec.cl and matmul.cl is instantiated for them too.
 *
 * Each type gives raw_T(row, b, &lo, &hi) = block b's 32 values fully
 * dequantized (SCALED_T is 0, so kernels use them as they are, like f16).
 * K-quants need that: a 256-value superblock has a scale (and min) per 16
 * or 32 values, so there is no per-block scale for ROW_SCALES to hoist.
 * The lo/hi halves are 16 values each, which is exactly the 16-value
 * scale group of Q2_K, Q3_K and Q6_K, so each half takes one scalar scale.
 *
 * Every value is computed with the float operations, in the order, of
 * gt_dequantize_row (runtime/src/quant_k.c): (d*sc)*q - dmin*m, and so on.
 * Contraction into fma is off in this file so that GET_ROWS is bit-exact
 * to the reference. Block b of a K-quant row is sub-block b % 8 of
 * superblock b / 8; byte layouts (gt/quant.h):
 *   Q5_0 22: d, qh[4], qs[16]       Q5_1 24: d, m, qh[4], qs[16]
 *   IQ4_NL 18: d, qs[16]            Q2_K 84: scales[16], qs[64], d, dmin
 *   Q3_K 110: hmask[32], qs[64], scales[12], d
 *   Q4_K 144: d, dmin, scales[12], qs[128]
 *   Q5_K 176: d, dmin, scales[12], qh[32], qs[128]
 *   Q6_K 210: ql[128], qh[64], int8 scales[16], d */

#pragma OPENCL FP_CONTRACT OFF

#define LANE16 ((uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))

/* Bit (shift + lane) of qh, for each of the 16 lanes, as 0 or 16. */
inline int16 high_bit16(uint qh, int shift)
{
    return convert_int16((((uint16)(qh >> shift)) >> LANE16) & 1u) << 4;
}

inline uint u32_at(global const uchar *p)
{
    return (uint)p[0] | (uint)p[1] << 8 | (uint)p[2] << 16 | (uint)p[3] << 24;
}

inline void raw_q5_0(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *p = row + 22 * b;
    const float d = h2f(USHORT_AT(p));
    const uint qh = u32_at(p + 2);
    const uchar16 q = vload16(0, p + 6);
    *lo = convert_float16((convert_int16(q & (uchar)15) | high_bit16(qh, 0)) - 16) * d;
    *hi = convert_float16((convert_int16(q >> (uchar)4) | high_bit16(qh, 16)) - 16) * d;
}

inline void raw_q5_1(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *p = row + 24 * b;
    const float d = h2f(USHORT_AT(p)), m = h2f(USHORT_AT(p + 2));
    const uint qh = u32_at(p + 4);
    const uchar16 q = vload16(0, p + 8);
    *lo = convert_float16(convert_int16(q & (uchar)15) | high_bit16(qh, 0)) * d + m;
    *hi = convert_float16(convert_int16(q >> (uchar)4) | high_bit16(qh, 16)) * d + m;
}

/* GGML's published IQ4_NL levels (gt_iq4nl_levels). */
#define IQ4NL_LEVELS                                                                         \
    ((char16)(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113))

inline void raw_iq4_nl(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *p = row + 18 * b;
    const float d = h2f(USHORT_AT(p));
    const uchar16 q = vload16(0, p + 2);
    *lo = d * convert_float16(shuffle(IQ4NL_LEVELS, q & (uchar)15));
    *hi = d * convert_float16(shuffle(IQ4NL_LEVELS, q >> (uchar)4));
}

inline void raw_q2_k(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *s = row + 84 * (b >> 3);
    const int j = b & 7;
    const float d = h2f(USHORT_AT(s + 80)), dmin = h2f(USHORT_AT(s + 82));
    global const uchar *qs = s + 16 + 32 * (j >> 2);
    const uchar shift = (uchar)(2 * (j & 3));
    const uchar sl = s[2 * j], sh = s[2 * j + 1];
    const float dl = d * (float)(sl & 15), ml = dmin * (float)(sl >> 4);
    const float dh = d * (float)(sh & 15), mh = dmin * (float)(sh >> 4);
    *lo = dl * convert_float16((vload16(0, qs) >> shift) & (uchar)3) - ml;
    *hi = dh * convert_float16((vload16(1, qs) >> shift) & (uchar)3) - mh;
}

/* Q3_K's 6-bit scale i (0..15), minus its bias of 32. */
inline int q3_scale(global const uchar *sc, int i)
{
    const int g = i >> 2, ii = i & 3;
    const int low = (sc[(g & 1) * 4 + ii] >> (4 * (g >> 1))) & 15;
    const int high = (sc[8 + ii] >> (2 * g)) & 3;
    return (low | high << 4) - 32;
}

inline void raw_q3_k(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *s = row + 110 * (b >> 3);
    const int j = b & 7;
    const float d = h2f(USHORT_AT(s + 108));
    global const uchar *qs = s + 32 + 32 * (j >> 2);
    const uchar shift = (uchar)(2 * (j & 3));
    /* a clear high bit (hmask) means the value is 4 lower */
    const char16 ml = as_char16(((vload16(0, s) >> (uchar)j) & (uchar)1) ^ (uchar)1) << (char)2;
    const char16 mh = as_char16(((vload16(1, s) >> (uchar)j) & (uchar)1) ^ (uchar)1) << (char)2;
    const char16 ql = as_char16((vload16(0, qs) >> shift) & (uchar)3) - ml;
    const char16 qh = as_char16((vload16(1, qs) >> shift) & (uchar)3) - mh;
    *lo = (d * (float)q3_scale(s + 96, 2 * j)) * convert_float16(ql);
    *hi = (d * (float)q3_scale(s + 96, 2 * j + 1)) * convert_float16(qh);
}

/* Sub-block j's 6-bit scale and min of a Q4_K/Q5_K superblock (gt_k_scale_min). */
inline void k_scale_min(global const uchar *q, int j, float *sc, float *m)
{
    if (j < 4) {
        *sc = (float)(q[j] & 63);
        *m = (float)(q[j + 4] & 63);
    } else {
        *sc = (float)((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4));
        *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

inline void raw_q4_k(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *s = row + 144 * (b >> 3);
    const int j = b & 7;
    float sc, m;
    k_scale_min(s + 4, j, &sc, &m);
    const float d1 = h2f(USHORT_AT(s)) * sc, m1 = h2f(USHORT_AT(s + 2)) * m;
    global const uchar *qs = s + 16 + 32 * (j >> 1);
    const uchar shift = (uchar)(4 * (j & 1));
    *lo = d1 * convert_float16((vload16(0, qs) >> shift) & (uchar)15) - m1;
    *hi = d1 * convert_float16((vload16(1, qs) >> shift) & (uchar)15) - m1;
}

inline void raw_q5_k(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *s = row + 176 * (b >> 3);
    const int j = b & 7;
    float sc, m;
    k_scale_min(s + 4, j, &sc, &m);
    const float d1 = h2f(USHORT_AT(s)) * sc, m1 = h2f(USHORT_AT(s + 2)) * m;
    global const uchar *qh = s + 16, *qs = s + 48 + 32 * (j >> 1);
    const uchar shift = (uchar)(4 * (j & 1));
    const uchar16 vl = ((vload16(0, qs) >> shift) & (uchar)15) |
                       (((vload16(0, qh) >> (uchar)j) & (uchar)1) << (uchar)4);
    const uchar16 vh = ((vload16(1, qs) >> shift) & (uchar)15) |
                       (((vload16(1, qh) >> (uchar)j) & (uchar)1) << (uchar)4);
    *lo = d1 * convert_float16(vl) - m1;
    *hi = d1 * convert_float16(vh) - m1;
}

inline void raw_q6_k(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *s = row + 210 * (b >> 3);
    const int j = b & 7, h = j >> 2, jj = j & 3;
    const float d = h2f(USHORT_AT(s + 208));
    global const uchar *ql = s + 64 * h + 32 * (jj & 1), *qh = s + 128 + 32 * h;
    const uchar nshift = (uchar)(jj < 2 ? 0 : 4), hshift = (uchar)(2 * jj);
    const char16 vl = as_char16(((vload16(0, ql) >> nshift) & (uchar)15) |
                                (((vload16(0, qh) >> hshift) & (uchar)3) << (uchar)4)) - (char)32;
    const char16 vh = as_char16(((vload16(1, ql) >> nshift) & (uchar)15) |
                                (((vload16(1, qh) >> hshift) & (uchar)3) << (uchar)4)) - (char)32;
    global const char *sc = (global const char *)(s + 192);
    *lo = (d * (float)sc[2 * j]) * convert_float16(vl);
    *hi = (d * (float)sc[2 * j + 1]) * convert_float16(vh);
}

#pragma OPENCL FP_CONTRACT ON

/* The scale pieces of common.cl's scheme, unused (SCALED_T is 0), and
 * single values for row tails: none of these types has a tail (rows are
 * whole blocks), but the kernel templates name elem_T. */
#define FULL_BLOCK_TYPE(T)                                                                   \
    inline ushort dbits_##T(global const uchar *row, int b) { return 0; }                    \
    inline ushort mbits_##T(global const uchar *row, int b) { return 0; }                    \
    inline float elem_##T(global const uchar *row, int k)                                    \
    {                                                                                        \
        float16 lo, hi;                                                                      \
        raw_##T(row, k / 32, &lo, &hi);                                                      \
        float v[32];                                                                         \
        vstore16(lo, 0, v);                                                                  \
        vstore16(hi, 1, v);                                                                  \
        return v[k % 32];                                                                    \
    }
#define FOR_EACH_FULL_BLOCK_TYPE(X)                                                          \
    X(q5_0) X(q5_1) X(iq4_nl) X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k)
FOR_EACH_FULL_BLOCK_TYPE(FULL_BLOCK_TYPE)

#define SCALED_q5_0 0
#define SCALED_q5_1 0
#define SCALED_iq4_nl 0
#define SCALED_q2_k 0
#define SCALED_q3_k 0
#define SCALED_q4_k 0
#define SCALED_q5_k 0
#define SCALED_q6_k 0
#define HAS_MIN_q5_0 0
#define HAS_MIN_q5_1 0
#define HAS_MIN_iq4_nl 0
#define HAS_MIN_q2_k 0
#define HAS_MIN_q3_k 0
#define HAS_MIN_q4_k 0
#define HAS_MIN_q5_k 0
#define HAS_MIN_q6_k 0

#define FOR_EACH_TYPE(X) FOR_EACH_SCALED_TYPE(X) FOR_EACH_FULL_BLOCK_TYPE(X)
