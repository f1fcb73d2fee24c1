/* cpu_kernels_avx512.c: the AVX-512 (F, BW, VL, DQ, VNNI) kernel table.
 *
 * Starts from the AVX2 table and replaces the kernels that matter for speed:
 * quantized dots (both paths), float dots, the activation quantizer,
 * exp-based ops.
 *
 * Quantized weights x f32 activations (the default path) are 512-bit, one
 * block per two registers (see the section below). Q8-activation dots
 * (GT_CPU_ACT=q8) are cpu_qdot.h's loops with VNNI's vpdpbusd (unsigned
 * bytes x signed bytes, four products summed into each int32 lane) in place
 * of AVX2's vpmaddubsw + vpmaddwd pair. They stay on 256-bit registers:
 * 512-bit integer work has two ports on current Intel cores and 256-bit
 * three, and a two-block 512-bit layout costs lane shuffles on the one
 * port the scale broadcasts need too (measured slower). Float kernels
 * (F32/F16/BF16 dots, exp, silu) are 512-bit. */
#include "cpu.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_x86.h"

#define T_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

static inline T_512 float hsum8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline T_512 float hsum16(__m512 v)
{
    return hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* u8 x s8 products, four summed per int32 lane: one VNNI instruction. */
#define QD_T T_512
#define QD_NAME(x) vnni_##x
#define QD_DOTUS(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))
#include "cpu_qdot.h"
#undef QD_T
#undef QD_NAME
#undef QD_DOTUS

/* The packed Q4_0 and Q8_0 few-row kernels (cpu_packed.c). */
#define PK_T T_512
#define PK_NAME(x) vnni_##x
#define PK_DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define PK_Q8_SIGNED 0
#include "cpu_packed_simd.h"
#undef PK_Q8_SIGNED
#undef PK_T
#undef PK_NAME
#undef PK_DPBUSD

/* ---- quantized weights x f32 activations (the default dot path) ----------
 * One 32-weight block is two 512-bit halves. Q8_0: vpmovsxbd widens 16
 * int8 to int32, vcvtdq2ps makes them floats, and the block's products
 * are summed before one FMA by the block scale. Q4: vpmovzxbd widens the
 * 16 bytes once; vpermps with the block's table of its 16 possible weights
 * fma(q, d, m) (m = -8*d for Q4_0, as in the AVX2 table) turns the low
 * nibble of each lane into its weight (vpermps reads only the index's low
 * 4 bits, so no mask is needed), and the same after a 4-bit shift for the
 * high nibbles: 7 vector uops per block. Scales are converted 8 at a time
 * per chunk (vnni_f16s). */
#define FD_CHUNK 64

static inline T_512 __m512 i8x16(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

static T_512 float fdot_q8_0(const void *w, const float *x, int64_t n)
{
    const gt_block_q8_0 *b = w;
    const int64_t nb = n / GT_QK8_0;
    float c[FD_CHUNK];
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        vnni_f16s((const uint8_t *)(b + b0), (int)sizeof *b, m, c);
        for (int64_t j = 0; j < m; j++) {
            const int8_t *q = b[b0 + j].qs;
            const float *xb = x + (b0 + j) * GT_QK8_0;
            __m512 p = _mm512_mul_ps(i8x16(q), _mm512_loadu_ps(xb));
            p = _mm512_fmadd_ps(i8x16(q + 16), _mm512_loadu_ps(xb + 16), p);
            if (j & 1)
                acc1 = _mm512_fmadd_ps(_mm512_set1_ps(c[j]), p, acc1);
            else
                acc0 = _mm512_fmadd_ps(_mm512_set1_ps(c[j]), p, acc0);
        }
    }
    return hsum16(_mm512_add_ps(acc0, acc1));
}

/* fdot_q8_0 on 4 rows: each row's operations exactly as there (so the
 * same bytes), each block's weights widened once for all four. */
static T_512 void fdot4_q8_0(const void *w, const float *const x[4], int64_t n, float out[4])
{
    const gt_block_q8_0 *b = w;
    const int64_t nb = n / GT_QK8_0;
    float c[FD_CHUNK];
    __m512 acc0[4], acc1[4];
    for (int r = 0; r < 4; r++)
        acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        vnni_f16s((const uint8_t *)(b + b0), (int)sizeof *b, m, c);
        for (int64_t j = 0; j < m; j++) {
            const int8_t *q = b[b0 + j].qs;
            const __m512 w0 = i8x16(q), w1 = i8x16(q + 16), cj = _mm512_set1_ps(c[j]);
            const int64_t at = (b0 + j) * GT_QK8_0;
            for (int r = 0; r < 4; r++) {
                __m512 p = _mm512_mul_ps(w0, _mm512_loadu_ps(x[r] + at));
                p = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[r] + at + 16), p);
                if (j & 1)
                    acc1[r] = _mm512_fmadd_ps(cj, p, acc1[r]);
                else
                    acc0[r] = _mm512_fmadd_ps(cj, p, acc0[r]);
            }
        }
    }
    for (int r = 0; r < 4; r++)
        out[r] = hsum16(_mm512_add_ps(acc0[r], acc1[r]));
}

/* One Q4 block: the block's 16 possible weights fma(q, d, m), q = 0..15,
 * are made once (one FMA on the table); vpermps then looks up each
 * element's weight directly. Elements 0..15 go into *lo, 16..31 into *hi. */
static inline T_512 void q4_block(const uint8_t *qs, const float *x, float d, float m, __m512 table,
                                  __m512 *lo, __m512 *hi)
{
    const __m512 wt = _mm512_fmadd_ps(table, _mm512_set1_ps(d), _mm512_set1_ps(m));
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    const __m512 wl = _mm512_permutexvar_ps(v, wt);
    const __m512 wh = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), wt);
    *lo = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x), *lo);
    *hi = _mm512_fmadd_ps(wh, _mm512_loadu_ps(x + 16), *hi);
}

static T_512 float fdot_q4(const uint8_t *blk, int stride, int qoff, int moff, const float *x,
                           int64_t nb)
{
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float cd[FD_CHUNK], cm[FD_CHUNK];
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        const uint8_t *bc = blk + b0 * stride;
        if (moff == 2) {
            vnni_f16s_pair(bc, stride, m, cd, cm);
        } else if (moff >= 0) {
            vnni_f16s(bc, stride, m, cd);
            vnni_f16s(bc + moff, stride, m, cm);
        } else {
            vnni_f16s_times(bc, stride, m, -8.0f, cd, cm);
        }
        /* Two blocks per step into four accumulators: one FMA chain per
         * accumulator and block pair, so FMA latency does not limit. */
        int64_t j = 0;
        for (; j + 2 <= m; j += 2) {
            q4_block(bc + j * stride + qoff, x + (b0 + j) * 32, cd[j], cm[j], table, &acc0, &acc1);
            q4_block(bc + (j + 1) * stride + qoff, x + (b0 + j + 1) * 32, cd[j + 1], cm[j + 1], table,
                     &acc2, &acc3);
        }
        if (j < m)
            q4_block(bc + j * stride + qoff, x + (b0 + j) * 32, cd[j], cm[j], table, &acc0, &acc1);
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

static T_512 float fdot_q4_0(const void *w, const float *x, int64_t n)
{
    return fdot_q4(w, (int)sizeof(gt_block_q4_0), (int)offsetof(gt_block_q4_0, qs), -1, x,
                   n / GT_QK4_0);
}

static T_512 float fdot_q4_1(const void *w, const float *x, int64_t n)
{
    return fdot_q4(w, (int)sizeof(gt_block_q4_1), (int)offsetof(gt_block_q4_1, qs),
                   (int)offsetof(gt_block_q4_1, m), x, n / GT_QK4_1);
}

/* IQ4_NL is Q4_0's layout with a non-linear table: the block's 16 possible
 * weights are d*levels[q] (one multiply on the table), looked up as Q4's. */
static T_512 float fdot_iq4_nl(const void *w, const float *x, int64_t n)
{
    const gt_block_iq4_nl *b = w;
    const int64_t nb = n / GT_QK4_NL;
    const __m512 levels = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)gt_iq4nl_levels)));
    float cd[FD_CHUNK];
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        vnni_f16s((const uint8_t *)(b + b0), (int)sizeof *b, m, cd);
        int64_t j = 0;
        for (; j + 2 <= m; j += 2) {
            q4_block(b[b0 + j].qs, x + (b0 + j) * 32, cd[j], 0.0f, levels, &acc0, &acc1);
            q4_block(b[b0 + j + 1].qs, x + (b0 + j + 1) * 32, cd[j + 1], 0.0f, levels, &acc2, &acc3);
        }
        if (j < m)
            q4_block(b[b0 + j].qs, x + (b0 + j) * 32, cd[j], 0.0f, levels, &acc0, &acc1);
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

/* Q5_0/Q5_1: the 16 bytes widen once to 16 int32 lanes (vpmovzxbd); the
 * low nibbles are elements 0..15, the high ones 16..31, and the fifth bits
 * are the two halves of qh used directly as lane masks: Q5_1 ORs in 16
 * where its bit is set (q = 0..31), Q5_0 subtracts 16 where it is clear
 * (q - 16 = -16..15, so d factors out: one FMA by d per block, as Q8_0). */
static inline T_512 void q5_ints(const uint8_t *qs, const uint8_t *qhp, bool sub16, __m512i *lo,
                                 __m512i *hi)
{
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    if (sub16)
        qh = ~qh;
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    const __m512i c16 = _mm512_set1_epi32(16);
    const __m512i l = _mm512_and_si512(v, _mm512_set1_epi32(0x0F)), h = _mm512_srli_epi32(v, 4);
    const __mmask16 kl = _cvtu32_mask16(qh & 0xFFFF), kh = _cvtu32_mask16(qh >> 16);
    if (sub16) {
        *lo = _mm512_mask_sub_epi32(l, kl, l, c16);
        *hi = _mm512_mask_sub_epi32(h, kh, h, c16);
    } else {
        *lo = _mm512_mask_or_epi32(l, kl, l, c16);
        *hi = _mm512_mask_or_epi32(h, kh, h, c16);
    }
}

static T_512 float fdot_q5_0(const void *w, const float *x, int64_t n)
{
    const gt_block_q5_0 *b = w;
    const int64_t nb = n / GT_QK5_0;
    float cd[FD_CHUNK];
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        vnni_f16s((const uint8_t *)(b + b0), (int)sizeof *b, m, cd);
        for (int64_t j = 0; j < m; j++) {
            const gt_block_q5_0 *blk = b + b0 + j;
            const float *xb = x + (b0 + j) * GT_QK5_0;
            __m512i lo, hi;
            q5_ints(blk->qs, blk->qh, true, &lo, &hi);
            __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), _mm512_loadu_ps(xb));
            p = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_loadu_ps(xb + 16), p);
            if (j & 1)
                acc1 = _mm512_fmadd_ps(_mm512_set1_ps(cd[j]), p, acc1);
            else
                acc0 = _mm512_fmadd_ps(_mm512_set1_ps(cd[j]), p, acc0);
        }
    }
    return hsum16(_mm512_add_ps(acc0, acc1));
}

/* Q5_1: weights fma(q, d, m) in registers, as Q4_1. */
static T_512 float fdot_q5_1(const void *w, const float *x, int64_t n)
{
    const gt_block_q5_1 *b = w;
    const int64_t nb = n / GT_QK5_1;
    float cd[FD_CHUNK], cm[FD_CHUNK];
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        vnni_f16s_pair((const uint8_t *)(b + b0), (int)sizeof *b, m, cd, cm);
        for (int64_t j = 0; j < m; j++) {
            const gt_block_q5_1 *blk = b + b0 + j;
            const float *xb = x + (b0 + j) * GT_QK5_1;
            const __m512 d = _mm512_set1_ps(cd[j]), mm = _mm512_set1_ps(cm[j]);
            __m512i lo, hi;
            q5_ints(blk->qs, blk->qh, false, &lo, &hi);
            const int a = (int)(j & 1) * 2;
            acc[a] = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), d, mm),
                                     _mm512_loadu_ps(xb), acc[a]);
            acc[a + 1] = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), d, mm),
                                         _mm512_loadu_ps(xb + 16), acc[a + 1]);
        }
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

/* Dequantizers: the same integers, then the definition's products, each
 * rounded on its own (multiply, then add; no FMA): bit-exact. */
static T_512 void dq_q5_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q5_0 *x = src;
    for (int64_t b = 0; b < n / GT_QK5_0; b++) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(x[b].d));
        __m512i lo, hi;
        q5_ints(x[b].qs, x[b].qh, true, &lo, &hi);
        _mm512_storeu_ps(dst + b * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
        _mm512_storeu_ps(dst + b * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
    }
}

static T_512 void dq_q5_1(const void *src, float *dst, int64_t n)
{
    const gt_block_q5_1 *x = src;
    for (int64_t b = 0; b < n / GT_QK5_1; b++) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(x[b].d)), m = _mm512_set1_ps(_cvtsh_ss(x[b].m));
        __m512i lo, hi;
        q5_ints(x[b].qs, x[b].qh, false, &lo, &hi);
        _mm512_storeu_ps(dst + b * 32, _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), m));
        _mm512_storeu_ps(dst + b * 32 + 16,
                         _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(hi), d), m));
    }
}

static T_512 void dq_iq4_nl(const void *src, float *dst, int64_t n)
{
    const gt_block_iq4_nl *x = src;
    const __m512 levels = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)gt_iq4nl_levels)));
    for (int64_t b = 0; b < n / GT_QK4_NL; b++) {
        const __m512 wt = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(x[b].d)), levels);
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x[b].qs));
        _mm512_storeu_ps(dst + b * 32, _mm512_permutexvar_ps(v, wt));
        _mm512_storeu_ps(dst + b * 32 + 16, _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), wt));
    }
}

static T_512 void quantize_act(const float *x, int64_t n, int8_t *q, float *d)
{
    const __m512 fmax = _mm512_set1_ps(FLT_MAX);
    for (int64_t b = 0; b < n / GT_CPU_QK; b++) {
        const float *xb = x + b * GT_CPU_QK;
        const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        const __mmask16 bad = _mm512_cmp_ps_mask(a0, fmax, _CMP_NLE_UQ) |
                              _mm512_cmp_ps_mask(a1, fmax, _CMP_NLE_UQ);
        if (bad) {
            memset(q + b * GT_CPU_QK, 0, GT_CPU_QK);
            d[b] = NAN;
            continue;
        }
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        const __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(q + b * GT_CPU_QK), _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + b * GT_CPU_QK + 16), _mm512_cvtsepi32_epi8(i1));
        d[b] = amax / 127.0f;
    }
}

static T_512 float dot_f32(const float *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static T_512 float fdot_f32(const void *w, const float *x, int64_t n) { return dot_f32(w, x, n); }

static inline T_512 __m512 load16_f16(const uint16_t *h)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}

static inline T_512 __m512 load16_bf16(const uint16_t *h)
{
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)h));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

static T_512 float fdot_f16(const void *w, const float *x, int64_t n)
{
    const uint16_t *h = w;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(load16_f16(h + i), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(load16_f16(h + i + 16), _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(load16_f16(h + i), _mm512_loadu_ps(x + i), s0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h + i));
        s1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + i), s1);
    }
    return hsum16(_mm512_add_ps(s0, s1));
}

static T_512 float fdot_bf16(const void *w, const float *x, int64_t n)
{
    const uint16_t *h = w;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(load16_bf16(h + i), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(load16_bf16(h + i + 16), _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(load16_bf16(h + i), _mm512_loadu_ps(x + i), s0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512i u = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + i));
        const __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
        s1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + i), s1);
    }
    return hsum16(_mm512_add_ps(s0, s1));
}

static inline T_512 __m512 exp16(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* scalef multiplies by 2^n without building exponent bits by hand */
    return _mm512_scalef_ps(p, n);
}

static T_512 float exp_sub_sum(float *x, int64_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(x + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
        _mm512_mask_storeu_ps(x + i, k, e);
        acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    return hsum16(acc);
}

static T_512 void silu_mul(const float *a, const float *b, float *t, int64_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(a + i);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 num = _mm512_mul_ps(x, _mm512_loadu_ps(b + i));
        _mm512_storeu_ps(t + i, _mm512_div_ps(num, _mm512_add_ps(one, e)));
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(k, a + i);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 num = _mm512_mul_ps(x, _mm512_maskz_loadu_ps(k, b + i));
        _mm512_mask_storeu_ps(t + i, k, _mm512_div_ps(num, _mm512_add_ps(one, e)));
    }
}

static inline T_512 __m512 gelu16(__m512 x, __m512 b)
{
    const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    const __m512 u = _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x);
    const __m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f * GT_CPU_GELU_K), u));
    return _mm512_div_ps(_mm512_mul_ps(x, b), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static T_512 void gelu_mul(const float *a, const float *b, float *t, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(t + i, gelu16(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(t + i, k,
                              gelu16(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i)));
    }
}

static T_512 void axpy(float a, const float *x, float *y, int64_t n)
{
    const __m512 va = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(k, x + i),
                                                        _mm512_maskz_loadu_ps(k, y + i)));
    }
}

static T_512 float sum_sq(const float *x, int64_t n) { return dot_f32(x, x, n); }

bool gt_cpu_kernels_avx512(gt_cpu_kernels *k)
{
    if (!gt_cpu_kernels_avx2(k))
        return false;
    k->name = "avx512";
    k->quantize_act = quantize_act;
    k->qdot[GT_TYPE_Q8_0] = vnni_qdot_q8_0;
    k->qdot4[GT_TYPE_Q8_0] = vnni_qdot4_q8_0;
    k->qdot[GT_TYPE_Q4_0] = vnni_qdot_q4_0;
    k->qdot4[GT_TYPE_Q4_0] = vnni_qdot4_q4_0;
    k->qdot[GT_TYPE_Q4_1] = vnni_qdot_q4_1;
    k->qdot4[GT_TYPE_Q4_1] = vnni_qdot4_q4_1;
    k->qdot[GT_TYPE_Q5_0] = vnni_qdot_q5_0;
    k->qdot4[GT_TYPE_Q5_0] = vnni_qdot4_q5_0;
    k->qdot[GT_TYPE_Q4_K] = vnni_qdot_q4_K;
    k->qdot4[GT_TYPE_Q4_K] = vnni_qdot4_q4_K;
    k->qdot[GT_TYPE_Q6_K] = vnni_qdot_q6_K;
    k->qdot4[GT_TYPE_Q6_K] = vnni_qdot4_q6_K;
    k->fdot[GT_TYPE_F32] = fdot_f32;
    k->fdot[GT_TYPE_F16] = fdot_f16;
    k->fdot[GT_TYPE_BF16] = fdot_bf16;
    k->fdot[GT_TYPE_Q8_0] = fdot_q8_0;
    k->fdot4[GT_TYPE_Q8_0] = fdot4_q8_0;
    k->fdot[GT_TYPE_Q4_0] = fdot_q4_0;
    k->fdot[GT_TYPE_Q4_1] = fdot_q4_1;
    k->fdot[GT_TYPE_Q5_0] = fdot_q5_0;
    k->fdot[GT_TYPE_Q5_1] = fdot_q5_1;
    k->fdot[GT_TYPE_IQ4_NL] = fdot_iq4_nl;
    k->dequant[GT_TYPE_Q5_0] = dq_q5_0;
    k->dequant[GT_TYPE_Q5_1] = dq_q5_1;
    k->dequant[GT_TYPE_IQ4_NL] = dq_iq4_nl;
    gt_cpu_kquants_avx512(k);
    k->dot_f32 = dot_f32;
    k->axpy = axpy;
    k->sum_sq = sum_sq;
    k->exp_sub_sum = exp_sub_sum;
    k->silu_mul = silu_mul;
    k->gelu_mul = gelu_mul;
    k->igemm = gt_cpu_igemm_avx512;
    k->pk[GT_TYPE_Q4_0] = vnni_pk_q4_0;
    k->pk[GT_TYPE_Q5_0] = vnni_pk_q5_0;
    k->pk[GT_TYPE_Q8_0] = vnni_pk_q8_0;
    return true;
}

#else

bool gt_cpu_kernels_avx512(gt_cpu_kernels *k)
{
    (void)k;
    return false;
}

#endif
