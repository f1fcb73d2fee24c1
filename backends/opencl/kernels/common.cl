/* common.cl: helpers every kernel file uses. The program is built from
 * common.cl + quants.cl + elementwise.cl + matvec.cl + matmul.cl +
 * attention.cl, in that order, as one OpenCL C 1.2 program.
 *
 * Conventions:
 * - Every tensor arrives as (buffer, byte offset): views are offsets into
 *   their buffer, never sub-buffers (whose origins must be aligned). PTR()
 *   turns the pair into a typed pointer.
 * - No optional features are assumed. Half floats are converted from their
 *   raw bits with integer operations (PoCL and many others lack
 *   cl_khr_fp16); doubles are never needed.
 * - Quantized weights are dequantized into registers, a 32-value block at a
 *   time, as two float16 vectors (values 0-15 and 16-31); never into
 *   memory. */

/* Multiply-add: fma() where the device has fused multiply-add in hardware
 * (the host passes GT_FMA=1 when CL_DEVICE_SINGLE_FP_CONFIG has CL_FP_FMA;
 * PoCL lowers mad() to a multiply and an add, and defines no FP_FAST_FMAF),
 * else mad(), which lets the compiler choose. */
#if GT_FMA || defined(FP_FAST_FMAF)
#define MAD(a, b, c) fma(a, b, c)
#else
#define MAD(a, b, c) mad(a, b, c)
#endif

#define PTR(type, base, off) ((global type *)((global uchar *)(base) + (off)))
#define CPTR(type, base, off) ((global const type *)((global const uchar *)(base) + (off)))

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* f16 bits -> f32, exactly, without relying on denormal support: normals
 * and inf/nan by rebiasing the exponent, subnormals through an exact
 * integer-to-float conversion. */
inline float h2f(ushort h)
{
    uint em = h & 0x7fffu;
    uint bits = (em << 13) + (em >= 0x7c00u ? 0x70000000u : 0x38000000u);
    float f = em < 0x0400u ? (float)em * 0x1p-24f : as_float(bits);
    return as_float(as_uint(f) | ((uint)(h & 0x8000u) << 16));
}

/* The same on vectors: h2f2 .. h2f16. */
#define DEFINE_H2F(N)                                                                        \
    inline CAT(float, N) CAT(h2f, N)(CAT(ushort, N) h)                                       \
    {                                                                                        \
        CAT(uint, N) em = CAT(convert_uint, N)(h & (ushort)0x7fff);                          \
        CAT(uint, N) bits = (em << 13) + select((CAT(uint, N))0x38000000u,                   \
                                                (CAT(uint, N))0x70000000u,                   \
                                                em >= (CAT(uint, N))0x7c00u);                \
        CAT(float, N) sub = CAT(convert_float, N)(em) * 0x1p-24f;                            \
        CAT(float, N) f = select(CAT(as_float, N)(bits), sub, em < (CAT(uint, N))0x0400u);   \
        return CAT(as_float, N)(CAT(as_uint, N)(f) |                                         \
                                (CAT(convert_uint, N)(h & (ushort)0x8000) << 16));           \
    }
DEFINE_H2F(2)
DEFINE_H2F(4)
DEFINE_H2F(8)
DEFINE_H2F(16)
/* Width 1, so kernels can convert "N rows' scales" for any N in 1..16. */
#define vload1(o, p) ((p)[o])
#define vstore1(v, o, p) ((p)[o] = (v))
#define h2f1 h2f
/* out[0..N) = f32 of the f16 bits in[0..N) (private arrays), vectorized. */
#define H2F_N(N, in, out) CAT(vstore, N)(CAT(h2f, N)(CAT(vload, N)(0, in)), 0, out)

inline float bf2f(ushort h) { return as_float((uint)h << 16); }
inline float16 bf2f16(ushort16 h) { return as_float16(convert_uint16(h) << 16); }

inline float hsum16(float16 v)
{
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* The weight types, as three pieces each kernel combines:
 *   raw_T(row, b, &lo, &hi)  block b (values 32b .. 32b+31) as two float16,
 *                            before its scale: q (Q8_0, Q4_1), q - 8 (Q4_0),
 *                            or the values themselves (F32, F16, BF16);
 *   dbits_T / mbits_T        the f16 bits of the block's scale d and min m;
 *   SCALED_T, HAS_MIN_T      whether x = d*raw, and whether + m.
 * Kernels gather the scales of all the rows they work on and convert them
 * in one vector operation: per row, a scalar f16 conversion costs more
 * instructions than the block's 32 values do. Block layouts (quant.h):
 *   Q8_0 34 bytes: d, int8 q[32]; Q4_0 18: d, 16 bytes of nibbles;
 *   Q4_1 20: d, m, 16 bytes; byte j holds value j (low nibble) and j + 16.
 * Rows are at least 2-byte aligned (the host checks), so scales are read as
 * ushorts. Plain types use the same 32-value blocking; row tails (K % 32)
 * are read with elem_T. */
#define SCALED_f32 0
#define SCALED_f16 0
#define SCALED_bf16 0
#define SCALED_q8_0 1
#define SCALED_q4_0 1
#define SCALED_q4_1 1
#define HAS_MIN_f32 0
#define HAS_MIN_f16 0
#define HAS_MIN_bf16 0
#define HAS_MIN_q8_0 0
#define HAS_MIN_q4_0 0
#define HAS_MIN_q4_1 1

inline void raw_f32(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const float *p = (global const float *)row + 32 * b;
    *lo = vload16(0, p);
    *hi = vload16(1, p);
}
inline void raw_f16(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const ushort *p = (global const ushort *)row + 32 * b;
    *lo = h2f16(vload16(0, p));
    *hi = h2f16(vload16(1, p));
}
inline void raw_bf16(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const ushort *p = (global const ushort *)row + 32 * b;
    *lo = bf2f16(vload16(0, p));
    *hi = bf2f16(vload16(1, p));
}
inline void raw_q8_0(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const char *q = (global const char *)(row + 34 * b + 2);
    *lo = convert_float16(vload16(0, q));
    *hi = convert_float16(vload16(1, q));
}
inline void raw_q4_0(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    uchar16 q = vload16(0, row + 18 * b + 2);
    *lo = convert_float16(as_char16(q & (uchar)15) - (char)8);
    *hi = convert_float16(as_char16(q >> (uchar)4) - (char)8);
}
inline void raw_q4_1(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    uchar16 q = vload16(0, row + 20 * b + 4);
    *lo = convert_float16(q & (uchar)15);
    *hi = convert_float16(q >> (uchar)4);
}

#define USHORT_AT(p) (*(global const ushort *)(p))
inline ushort dbits_f32(global const uchar *row, int b) { return 0; }
inline ushort dbits_f16(global const uchar *row, int b) { return 0; }
inline ushort dbits_bf16(global const uchar *row, int b) { return 0; }
inline ushort dbits_q8_0(global const uchar *row, int b) { return USHORT_AT(row + 34 * b); }
inline ushort dbits_q4_0(global const uchar *row, int b) { return USHORT_AT(row + 18 * b); }
inline ushort dbits_q4_1(global const uchar *row, int b) { return USHORT_AT(row + 20 * b); }
inline ushort mbits_f32(global const uchar *row, int b) { return 0; }
inline ushort mbits_f16(global const uchar *row, int b) { return 0; }
inline ushort mbits_bf16(global const uchar *row, int b) { return 0; }
inline ushort mbits_q8_0(global const uchar *row, int b) { return 0; }
inline ushort mbits_q4_0(global const uchar *row, int b) { return 0; }
inline ushort mbits_q4_1(global const uchar *row, int b) { return USHORT_AT(row + 20 * b + 2); }

/* d[r], m[r] = scale and min of block b of row[r], for r < N. */
#define ROW_SCALES(T, N, row, b, d, m)                                                       \
    if (SCALED_##T) {                                                                        \
        ushort db_[N], mb_[N];                                                               \
        _Pragma("unroll") for (int r_ = 0; r_ < N; r_++)                                     \
        {                                                                                    \
            db_[r_] = dbits_##T(row[r_], b);                                                 \
            mb_[r_] = mbits_##T(row[r_], b);                                                 \
        }                                                                                    \
        H2F_N(N, db_, d);                                                                    \
        if (HAS_MIN_##T)                                                                     \
            H2F_N(N, mb_, m);                                                                \
    }

/* Dequantized block b of one row (GET_ROWS), from its raw values. */
#define BLOCK_VALUES(T, row, b, lo, hi)                                                      \
    {                                                                                        \
        raw_##T(row, b, &lo, &hi);                                                           \
        if (SCALED_##T) {                                                                    \
            const float d_ = h2f(dbits_##T(row, b));                                         \
            const float m_ = HAS_MIN_##T ? h2f(mbits_##T(row, b)) : 0.0f;                   \
            lo = MAD(lo, (float16)d_, (float16)m_);                                          \
            hi = MAD(hi, (float16)d_, (float16)m_);                                          \
        }                                                                                    \
    }

/* Single values, for row tails and GET_ROWS of partial blocks. */
inline float elem_f32(global const uchar *row, int k) { return ((global const float *)row)[k]; }
inline float elem_f16(global const uchar *row, int k) { return h2f(((global const ushort *)row)[k]); }
inline float elem_bf16(global const uchar *row, int k) { return bf2f(((global const ushort *)row)[k]); }
inline float elem_q8_0(global const uchar *row, int k)
{
    global const uchar *p = row + 34 * (k / 32);
    return h2f(USHORT_AT(p)) * (float)((global const char *)(p + 2))[k % 32];
}
inline float elem_q4_0(global const uchar *row, int k)
{
    global const uchar *p = row + 18 * (k / 32);
    int j = k % 32;
    uchar q = p[2 + (j & 15)];
    return h2f(USHORT_AT(p)) * ((float)(j < 16 ? q & 15 : q >> 4) - 8.0f);
}
inline float elem_q4_1(global const uchar *row, int k)
{
    global const uchar *p = row + 20 * (k / 32);
    int j = k % 32;
    uchar q = p[4 + (j & 15)];
    return MAD((float)(j < 16 ? q & 15 : q >> 4), h2f(USHORT_AT(p)), h2f(USHORT_AT(p + 2)));
}

/* The types above; quants.cl adds the rest and defines FOR_EACH_TYPE,
 * which instantiates a kernel template for every weight type. */
#define FOR_EACH_SCALED_TYPE(X) X(f32) X(f16) X(bf16) X(q8_0) X(q4_0) X(q4_1)
