/* common.cl: helpers every kernel file uses. The program is built from
 * common.cl + elementwise.cl + matvec.cl + matmul.cl + attention.cl, in that
 * order, as one OpenCL C 1.2 program.
 *
 * Conventions:
 * - Every tensor arrives as (buffer, byte offset): views are offsets into
 *   their buffer, never sub-buffers (whose origins must be aligned). PTR()
 *   turns the pair into a typed pointer.
 * - No optional features are assumed. Half floats are converted from their
 *   raw bits with integer operations (PoCL and many others lack
 *   cl_khr_fp16); doubles are never needed.
 * - Quantized weights are dequantized into registers, a 32-value block at a
 *   time, as two float16 vectors (values 0-15 and 16-31). Block fields are
 *   read byte by byte: blocks are 18, 20 or 34 bytes long, so their f16
 *   scales sit at odd-looking, only 2-byte aligned, offsets. */

#define PTR(type, base, off) ((global type *)((global uchar *)(base) + (off)))
#define CPTR(type, base, off) ((global const type *)((global const uchar *)(base) + (off)))

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

inline float16 h2f16(ushort16 h)
{
    uint16 em = convert_uint16(h & (ushort)0x7fff);
    uint16 bits = (em << 13) + select((uint16)0x38000000u, (uint16)0x70000000u,
                                      em >= (uint16)0x7c00u);
    float16 sub = convert_float16(em) * 0x1p-24f;
    float16 f = select(as_float16(bits), sub, em < (uint16)0x0400u);
    return as_float16(as_uint16(f) | (convert_uint16(h & (ushort)0x8000) << 16));
}

inline float bf2f(ushort h) { return as_float((uint)h << 16); }
inline float16 bf2f16(ushort16 h) { return as_float16(convert_uint16(h) << 16); }

/* A little-endian f16 at p (any alignment). */
inline float load_h(global const uchar *p) { return h2f((ushort)(p[0] | (p[1] << 8))); }

inline float hsum16(float16 v)
{
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* Block b (values 32b .. 32b+31) of a weight row, as two float16.
 * Plain types use the same 32-value blocking; their row tails (K % 32) are
 * read with the elem_* functions. */
inline void blk_f32(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const float *p = (global const float *)row + 32 * b;
    *lo = vload16(0, p);
    *hi = vload16(1, p);
}
inline void blk_f16(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const ushort *p = (global const ushort *)row + 32 * b;
    *lo = h2f16(vload16(0, p));
    *hi = h2f16(vload16(1, p));
}
inline void blk_bf16(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const ushort *p = (global const ushort *)row + 32 * b;
    *lo = bf2f16(vload16(0, p));
    *hi = bf2f16(vload16(1, p));
}
/* Q8_0: f16 d, int8 q[32]; x = d*q */
inline void blk_q8_0(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *p = row + 34 * b;
    float d = load_h(p);
    global const char *q = (global const char *)(p + 2);
    *lo = convert_float16(vload16(0, q)) * d;
    *hi = convert_float16(vload16(1, q)) * d;
}
/* Q4_0: f16 d, 16 bytes; byte j holds value j (low nibble) and j+16 (high);
 * x = d*(q-8) */
inline void blk_q4_0(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *p = row + 18 * b;
    float d = load_h(p);
    uchar16 q = vload16(0, p + 2);
    *lo = (convert_float16(q & (uchar)15) - 8.0f) * d;
    *hi = (convert_float16(q >> (uchar)4) - 8.0f) * d;
}
/* Q4_1: f16 d, f16 m, 16 bytes of nibbles; x = d*q + m */
inline void blk_q4_1(global const uchar *row, int b, float16 *lo, float16 *hi)
{
    global const uchar *p = row + 20 * b;
    float d = load_h(p), m = load_h(p + 2);
    uchar16 q = vload16(0, p + 4);
    *lo = mad(convert_float16(q & (uchar)15), d, m);
    *hi = mad(convert_float16(q >> (uchar)4), d, m);
}

/* Single values, for row tails and GET_ROWS of partial blocks. */
inline float elem_f32(global const uchar *row, int k) { return ((global const float *)row)[k]; }
inline float elem_f16(global const uchar *row, int k) { return h2f(((global const ushort *)row)[k]); }
inline float elem_bf16(global const uchar *row, int k) { return bf2f(((global const ushort *)row)[k]); }
inline float elem_q8_0(global const uchar *row, int k)
{
    global const uchar *p = row + 34 * (k / 32);
    return load_h(p) * (float)((global const char *)(p + 2))[k % 32];
}
inline float elem_q4_0(global const uchar *row, int k)
{
    global const uchar *p = row + 18 * (k / 32);
    int j = k % 32;
    uchar q = p[2 + (j & 15)];
    return load_h(p) * ((float)(j < 16 ? q & 15 : q >> 4) - 8.0f);
}
inline float elem_q4_1(global const uchar *row, int k)
{
    global const uchar *p = row + 20 * (k / 32);
    int j = k % 32;
    uchar q = p[4 + (j & 15)];
    return mad((float)(j < 16 ? q & 15 : q >> 4), load_h(p), load_h(p + 2));
}

/* Instantiates a kernel template for every weight type. */
#define FOR_EACH_TYPE(X) X(f32) X(f16) X(bf16) X(q8_0) X(q4_0) X(q4_1)
