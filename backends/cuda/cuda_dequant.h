/* cuda_dequant.h: dequantization of 8 consecutive elements of a weight row,
 * for the block types the CUDA kernels read through chunks: Q5_0, Q5_1,
 * IQ4_NL and the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
 *
 * One definition serves two compilers. Under nvcc the functions are
 * __host__ __device__ and the kernels of cuda_ops.cu (GET_ROWS) and
 * cuda_matmul.cu (mat-vec, dequantized tiles) call them; as plain C (no
 * CUDA anywhere) tests/test_cuda_dequant.c calls the very same functions
 * and compares their floats bit for bit with gt_dequantize_row
 * (runtime/src/quant.c, quant_k.c), which is itself tested bit-exact
 * against gguf-py. So the device reads the same bits the reference reads.
 *
 * Exactness rules, shared with the reference:
 *   - every product and difference is one f32 operation in the order the
 *     reference writes it (scale first, then times q, then the min taken
 *     away). On the device that is __fmul_rn/__fadd_rn/__fsub_rn, which
 *     nvcc never contracts into an FMA; the host test is compiled with
 *     -ffp-contract=off for the same reason;
 *   - f16 scales are converted exactly (__half2float on the device, the
 *     bit-level conversion below on the host). NaN scales have no meaning
 *     in a weight file and their payload is not promised to match.
 * Blocks are read with byte loads only: block sizes (22, 24, 18, 84, 110,
 * 144, 176, 210 bytes) and tensor offsets guarantee no more than 2-byte
 * alignment inside a row.
 *
 * k0 is the index of the first of the 8 elements in the row and a
 * multiple of 8, so a chunk never straddles a block, a 16-element
 * sub-block or a 32-element nibble group: each chunk has one scale.
 * Element bit positions are as quant_k.c spells them out. */
#ifndef GT_CUDA_DEQUANT_H
#define GT_CUDA_DEQUANT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define GT_DQ_FN static __host__ __device__ __forceinline__
#else
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#define GT_DQ_FN static inline __host__ __device__
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "gt/quant.h"
#ifdef __cplusplus
}
#endif

#define GT_DQ_CHUNK 8 /* elements per call */

/* Bytes per block of each chunked type (GGUF's block sizes). */
#define GT_DQ_Q5_0_BYTES 22   /* d, qh[4], qs[16] */
#define GT_DQ_Q5_1_BYTES 24   /* d, m, qh[4], qs[16] */
#define GT_DQ_IQ4_NL_BYTES 18 /* d, qs[16] */
#define GT_DQ_Q2_K_BYTES 84   /* scales[16], qs[64], d, dmin */
#define GT_DQ_Q3_K_BYTES 110  /* hmask[32], qs[64], scales[12], d */
#define GT_DQ_Q4_K_BYTES 144  /* d, dmin, scales[12], qs[128] */
#define GT_DQ_Q5_K_BYTES 176  /* d, dmin, scales[12], qh[32], qs[128] */
#define GT_DQ_Q6_K_BYTES 210  /* ql[128], qh[64], scales[16], d */

/* --- rounding-exact f32 arithmetic and f16 loads --------------------------- */

GT_DQ_FN float gt_dq_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

GT_DQ_FN float gt_dq_add(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

GT_DQ_FN float gt_dq_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

/* The little-endian f16 at p (2-byte aligned or not), as f32. */
GT_DQ_FN float gt_dq_f16(const uint8_t *p)
{
    const uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    /* Exact: normals and subnormals map to f32 without rounding. */
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        float v = (float)man * 0x1p-24f; /* man < 2^10: exact */
        return sign ? -v : v;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | (man << 13);
    else
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
#endif
}

GT_DQ_FN uint32_t gt_dq_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* --- Q5_0, Q5_1: 32-element blocks, fifth bit of element j is qh bit j ------ */

/* The 8 five-bit values of elements j0..j0+7 of a block (j0 = 0, 8, 16, 24):
 * low nibbles of qs[j] for j < 16, high nibbles of qs[j-16] above. */
GT_DQ_FN void gt_dq_q5_bits(const uint8_t *qs, uint32_t qh, int j0, int u[8])
{
    for (int t = 0; t < 8; t++) {
        const int j = j0 + t;
        const int nib = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
        u[t] = nib | (int)(((qh >> j) & 1u) << 4);
    }
}

/* x = (q - 16) * d */
GT_DQ_FN void gt_dq8_q5_0(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 5) * GT_DQ_Q5_0_BYTES;
    const float d = gt_dq_f16(blk);
    int u[8];
    gt_dq_q5_bits(blk + 6, gt_dq_u32(blk + 2), k0 & 31, u);
    for (int t = 0; t < 8; t++)
        out[t] = gt_dq_mul((float)(u[t] - 16), d);
}

/* x = q * d + m */
GT_DQ_FN void gt_dq8_q5_1(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 5) * GT_DQ_Q5_1_BYTES;
    const float d = gt_dq_f16(blk), m = gt_dq_f16(blk + 2);
    int u[8];
    gt_dq_q5_bits(blk + 8, gt_dq_u32(blk + 4), k0 & 31, u);
    for (int t = 0; t < 8; t++)
        out[t] = gt_dq_add(gt_dq_mul((float)u[t], d), m);
}

/* --- IQ4_NL: Q4_0's layout, nibble q indexes 16 fixed levels ----------------- */

/* gt_iq4nl_levels[q] from two 64-bit constants (bytes 0..7 and 8..15), so
 * the device needs no table in memory; test_cuda_dequant checks it equals
 * the runtime's table. */
GT_DQ_FN int gt_dq_iq4nl_level(int q)
{
    const uint64_t lo = 0xF6EADDCFBFAD9881ull; /* -127 -104 -83 -65 -49 -35 -22 -10 */
    const uint64_t hi = 0x7159453526190D01ull; /*    1   13  25  38  53  69  89 113 */
    return (int)(int8_t)(uint8_t)(((q < 8 ? lo : hi) >> (8 * (q & 7))) & 0xffu);
}

/* x = d * level[q] */
GT_DQ_FN void gt_dq8_iq4_nl(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 5) * GT_DQ_IQ4_NL_BYTES;
    const float d = gt_dq_f16(blk);
    const int j0 = k0 & 31;
    const uint8_t *qs = blk + 2 + (j0 & 15);
    for (int t = 0; t < 8; t++) {
        const int q = j0 < 16 ? (qs[t] & 0x0f) : (qs[t] >> 4);
        out[t] = gt_dq_mul(d, (float)gt_dq_iq4nl_level(q));
    }
}

/* --- K-quants: 256-element super-blocks; p = position in the super-block ---- */

/* Q2_K: x = (d * sc) * q - dmin * m; q = 2 bits of qs[32*(p/128) + p%32] at
 * 2*((p%128)/32); sc, m = low, high nibble of scales[p/16]. */
GT_DQ_FN void gt_dq8_q2_K(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 8) * GT_DQ_Q2_K_BYTES;
    const int p = k0 & 255;
    const float d = gt_dq_f16(blk + 80), dmin = gt_dq_f16(blk + 82);
    const uint8_t sc = blk[p / 16];
    const float dl = gt_dq_mul(d, (float)(sc & 0xf)), ml = gt_dq_mul(dmin, (float)(sc >> 4));
    const uint8_t *qs = blk + 16 + 32 * (p / 128) + p % 32;
    const int shift = 2 * ((p % 128) / 32);
    for (int t = 0; t < 8; t++)
        out[t] = gt_dq_sub(gt_dq_mul(dl, (float)((qs[t] >> shift) & 3)), ml);
}

/* Q3_K's 6-bit scale of sub-block s (0..15), stored plus 32: the low nibble
 * of scales[s%8] (high nibble for s >= 8), two high bits of
 * scales[8 + s%4] at 2*(s/4). */
GT_DQ_FN int gt_dq_q3_scale(const uint8_t *scales, int s)
{
    const int lo = (scales[s % 8] >> (4 * (s / 8))) & 0xf;
    const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return lo | (hi << 4);
}

/* Q3_K: x = (d * (sc - 32)) * (lo - (hbit ? 0 : 4)); lo as Q2_K's q, hbit
 * = bit 4*(p/128) + (p%128)/32 of hmask[p%32]. */
GT_DQ_FN void gt_dq8_q3_K(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 8) * GT_DQ_Q3_K_BYTES;
    const int p = k0 & 255;
    const float d = gt_dq_f16(blk + 108);
    const float dl = gt_dq_mul(d, (float)(gt_dq_q3_scale(blk + 96, p / 16) - 32));
    const uint8_t *qs = blk + 32 + 32 * (p / 128) + p % 32;
    const uint8_t *hm = blk + p % 32;
    const int shift = 2 * ((p % 128) / 32), hshift = 4 * (p / 128) + (p % 128) / 32;
    for (int t = 0; t < 8; t++) {
        const int lo = (qs[t] >> shift) & 3;
        const int hbit = (hm[t] >> hshift) & 1;
        out[t] = gt_dq_mul(dl, (float)(lo - (hbit ? 0 : 4)));
    }
}

/* The 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K (as
 * gt_k_scale_min). */
GT_DQ_FN void gt_dq_k_scale_min(const uint8_t *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: x = (d * sc) * q - dmin * m; sub-block s = p/32; q = nibble of
 * qs[32*(p/64) + p%32], low for even s. */
GT_DQ_FN void gt_dq8_q4_K(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 8) * GT_DQ_Q4_K_BYTES;
    const int p = k0 & 255, s = p / 32;
    const float d = gt_dq_f16(blk), dmin = gt_dq_f16(blk + 2);
    int sc, m;
    gt_dq_k_scale_min(blk + 4, s, &sc, &m);
    const float d1 = gt_dq_mul(d, (float)sc), m1 = gt_dq_mul(dmin, (float)m);
    const uint8_t *qs = blk + 16 + 32 * (s / 2) + p % 32;
    const int shift = (s & 1) ? 4 : 0;
    for (int t = 0; t < 8; t++)
        out[t] = gt_dq_sub(gt_dq_mul(d1, (float)((qs[t] >> shift) & 0xf)), m1);
}

/* Q5_K: Q4_K plus a fifth bit, bit s of qh[p%32]: q = lo + 16*hi. */
GT_DQ_FN void gt_dq8_q5_K(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 8) * GT_DQ_Q5_K_BYTES;
    const int p = k0 & 255, s = p / 32;
    const float d = gt_dq_f16(blk), dmin = gt_dq_f16(blk + 2);
    int sc, m;
    gt_dq_k_scale_min(blk + 4, s, &sc, &m);
    const float d1 = gt_dq_mul(d, (float)sc), m1 = gt_dq_mul(dmin, (float)m);
    const uint8_t *qh = blk + 16 + p % 32;
    const uint8_t *qs = blk + 48 + 32 * (s / 2) + p % 32;
    const int shift = (s & 1) ? 4 : 0;
    for (int t = 0; t < 8; t++) {
        const int q = ((qs[t] >> shift) & 0xf) + 16 * ((qh[t] >> s) & 1);
        out[t] = gt_dq_sub(gt_dq_mul(d1, (float)q), m1);
    }
}

/* Q6_K: x = (d * sc) * (q - 32), sc = int8 scales[p/16]; low 4 bits are a
 * nibble of ql[64*(p/128) + p%32 + 32*((p%64)/32)], low when (p%128) < 64;
 * high 2 bits in qh[32*(p/128) + p%32] at 2*((p%128)/32). */
GT_DQ_FN void gt_dq8_q6_K(const uint8_t *row, int k0, float *out)
{
    const uint8_t *blk = row + (size_t)(k0 >> 8) * GT_DQ_Q6_K_BYTES;
    const int p = k0 & 255, h = p / 128, r = p % 128;
    const float d = gt_dq_f16(blk + 208);
    const float ds = gt_dq_mul(d, (float)(int8_t)blk[192 + p / 16]);
    const uint8_t *ql = blk + 64 * h + p % 32 + 32 * ((r % 64) / 32);
    const uint8_t *qh = blk + 128 + 32 * h + p % 32;
    const int lshift = r < 64 ? 0 : 4, hshift = 2 * (r / 32);
    for (int t = 0; t < 8; t++) {
        const int q = ((ql[t] >> lshift) & 0xf) | (((qh[t] >> hshift) & 3) << 4);
        out[t] = gt_dq_mul(ds, (float)(q - 32));
    }
}

/* --- by type ------------------------------------------------------------------ */

/* Whether gt_dq8 reads this type. */
GT_DQ_FN int gt_dq8_has(int type)
{
    switch (type) {
    case GT_TYPE_Q5_0:
    case GT_TYPE_Q5_1:
    case GT_TYPE_IQ4_NL:
    case GT_TYPE_Q2_K:
    case GT_TYPE_Q3_K:
    case GT_TYPE_Q4_K:
    case GT_TYPE_Q5_K:
    case GT_TYPE_Q6_K: return 1;
    default: return 0;
    }
}

/* Elements k0..k0+7 of a row of type (a gt_dq8_has type); returns 0, or -1
 * for any other type (out untouched). The kernels call the per-type
 * functions directly, through templates; this is for the host test. */
GT_DQ_FN int gt_dq8(int type, const uint8_t *row, int k0, float *out)
{
    switch (type) {
    case GT_TYPE_Q5_0: gt_dq8_q5_0(row, k0, out); return 0;
    case GT_TYPE_Q5_1: gt_dq8_q5_1(row, k0, out); return 0;
    case GT_TYPE_IQ4_NL: gt_dq8_iq4_nl(row, k0, out); return 0;
    case GT_TYPE_Q2_K: gt_dq8_q2_K(row, k0, out); return 0;
    case GT_TYPE_Q3_K: gt_dq8_q3_K(row, k0, out); return 0;
    case GT_TYPE_Q4_K: gt_dq8_q4_K(row, k0, out); return 0;
    case GT_TYPE_Q5_K: gt_dq8_q5_K(row, k0, out); return 0;
    case GT_TYPE_Q6_K: gt_dq8_q6_K(row, k0, out); return 0;
    default: return -1;
    }
}

#endif
