/* cpu_x86.h: small helpers shared by the x86 kernel files (cpu_kernels_avx2.c,
 * cpu_kernels_avx512.c, cpu_kquants_avx2.c, cpu_kquants_avx512.c). Only included by files that
 * compile per-function target attributes; these functions carry the AVX2
 * one, so AVX-512 functions may inline them too.
 *
 *   - int8 values in element order (32 in a 256-bit register) to floats,
 *     8 at a time: the K-quant and Q5 kernels build their quants as bytes
 *     and widen them here.
 *   - Q4_K's and Q6_K's quants of one run of 32 elements as bytes (the
 *     f32-activation K-quant kernels and the Q8-activation dots both
 *     decode them).
 *   - The K-quants' packed 6-bit sub-block scales unpacked with 32-bit word
 *     operations (4 bytes at once) instead of one element at a time; the
 *     same values as gt_k_scale_min and quant_k.c's Q3_K unpacking
 *     (tests/test_cpu.c checks every dequantizer bit for bit). */
#ifndef GT_CPU_X86_H
#define GT_CPU_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define GT_CPU_T_AVX2 __attribute__((target("avx2,fma,f16c")))

static inline GT_CPU_T_AVX2 float gt_cpu_hsum8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* The 8-byte groups g = 0..3 of a 32-byte register, each in the low 64 bits. */
static inline GT_CPU_T_AVX2 void gt_cpu_byte_groups(__m256i q, __m128i g[4])
{
    g[0] = _mm256_castsi256_si128(q);
    g[1] = _mm_unpackhi_epi64(g[0], g[0]);
    g[2] = _mm256_extracti128_si256(q, 1);
    g[3] = _mm_unpackhi_epi64(g[2], g[2]);
}

/* The low 8 int8 of g as floats. */
static inline GT_CPU_T_AVX2 __m256 gt_cpu_i8x8_f32(__m128i g)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(g));
}

/* Shift each 16-bit lane left by s (right by -s); s is a constant once the
 * callers' run loops are unrolled. Only bits that stay inside their byte
 * are kept by the callers' masks. */
static inline __attribute__((always_inline)) GT_CPU_T_AVX2 __m256i gt_cpu_shift16(__m256i v, int s)
{
    return s > 0 ? _mm256_slli_epi16(v, s) : s < 0 ? _mm256_srli_epi16(v, -s) : v;
}

static inline __attribute__((always_inline)) GT_CPU_T_AVX2 __m256i gt_cpu_load32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Q4_K/Q5_K run i (elements 32i..32i+31): the nibbles of qs[32*(i/2) ..],
 * low ones for even i. */
static inline __attribute__((always_inline)) GT_CPU_T_AVX2 __m256i gt_cpu_nibbles_k(const uint8_t *qs,
                                                                                   int i)
{
    return _mm256_and_si256(gt_cpu_shift16(gt_cpu_load32(qs + 32 * (i / 2)), -4 * (i % 2)),
                            _mm256_set1_epi8(0x0F));
}

/* Q6_K run i, unsigned (0..63: the stored value, 32 above the quant): the
 * nibbles of ql with the two high bits from qh shifted to bits 4..5. */
static inline __attribute__((always_inline)) GT_CPU_T_AVX2 __m256i gt_cpu_q6k_u(const uint8_t *ql,
                                                                               const uint8_t *qh, int i)
{
    const int h = i / 4, g = i % 4;
    const __m256i l = gt_cpu_shift16(gt_cpu_load32(ql + 64 * h + 32 * (g % 2)), -4 * (g / 2));
    const __m256i hi =
        _mm256_and_si256(gt_cpu_shift16(gt_cpu_load32(qh + 32 * h), 4 - 2 * g), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi8(0x0F)), hi);
}

/* Bit p of m as 0x10 in byte p (0 where clear): the fifth bits of Q5_0's
 * 32 weights, or of a packed Q5_0 panel's 8 rows x 4 weights. The dword
 * broadcast, byte p/8 moved to byte p, its bit p%8 tested. */
static inline __attribute__((always_inline)) GT_CPU_T_AVX2 __m256i gt_cpu_bits_0x10(uint32_t m)
{
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)m), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                                    2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* Q4_K/Q5_K: out[0..7] = the 8 scales, out[8..15] = the 8 mins (6 bits
 * each). Sub-blocks 0..3 keep both in the low 6 bits of bytes 0..7;
 * 4..7 take their low 4 bits from the nibbles of bytes 8..11 and their top
 * 2 bits from the top bits of bytes 0..7. */
static inline void gt_cpu_q4k_scales(const uint8_t s[12], uint8_t out[16])
{
    uint32_t a[3];
    memcpy(a, s, sizeof a);
    const uint32_t m6 = 0x3F3F3F3Fu, m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
    const uint32_t w[4] = {a[0] & m6, (a[2] & m4) | (((a[0] >> 6) & m2) << 4), a[1] & m6,
                           ((a[2] >> 4) & m4) | (((a[1] >> 6) & m2) << 4)};
    memcpy(out, w, sizeof w);
}

/* Q3_K: the 16 6-bit scales as stored (scale + 32): low 4 bits from the
 * nibbles of bytes 0..7, top 2 bits from the bit pairs of bytes 8..11. */
static inline void gt_cpu_q3k_scales(const uint8_t s[12], uint8_t out[16])
{
    uint32_t a[3];
    memcpy(a, s, sizeof a);
    const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
    const uint32_t w[4] = {(a[0] & m4) | ((a[2] & m2) << 4), (a[1] & m4) | (((a[2] >> 2) & m2) << 4),
                           ((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4),
                           ((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4)};
    memcpy(out, w, sizeof w);
}

#endif
