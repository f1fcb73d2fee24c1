/* cpu_kquants_avx512.c: fdot and dequant for the K-quants (Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K) in the AVX-512 table; gt_cpu_kernels_avx512 calls
 * gt_cpu_kquants_avx512 to install them.
 *
 * Same plan as cpu_kquants_avx2.c (read that first), with 512-bit byte
 * registers: a super-block is 4 runs of 64 elements, each built as 64
 * bytes in element order, using what AVX-512 adds:
 *   - the 32 bytes of qs (or qh) that a run needs twice go in both halves
 *     of a register (one broadcast load) and one variable 16-bit shift
 *     (vpsrlvw/vpsllvw) moves each half's bits into place at once;
 *   - high bits become byte masks with vptestmb / vptestnmb, applied with
 *     a masked add or subtract (Q3_K: -4 where the bit is clear, Q5_K: +16
 *     where it is set); Q6_K merges its two high bits with one vpternlogd.
 * Each 16-byte lane is then widened to 16 floats (vpmovsxbd, vcvtdq2ps)
 * and meets 16 activations in an FMA; lane t of a run goes to accumulator
 * t, so no FMA waits on the one before.
 *
 * Q4_K is the exception: like Q4_0 in cpu_kernels_avx512.c, each sub-block
 * of 32 gets a table of its 16 possible weights fmsub(q, sc, mn), and
 * vpermps looks each nibble up (vpermps reads only the low 4 index bits,
 * so the high nibble needs a shift and no mask): 7 vector uops per 32
 * weights against ~10 for widening.
 *
 * dequant uses the same bytes and the definition's products, each rounded
 * on its own (no FMA): bit-exact with gt_dequantize_row. */
#include "cpu.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include "cpu_x86.h"

#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INL __attribute__((always_inline)) inline
#define KCH 8 /* super-blocks whose scales are decoded ahead */

typedef struct kscales {
    float sc[16], mn[16]; /* per group of 16 */
} kscales;

static INL T float hsum16(__m512 v)
{
    return gt_cpu_hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

static INL T __m512 u8x16_f32(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)); }
static INL T __m512 i8x16_f32(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)); }

/* ---- scales (exact products, so dequant can share them) ------------------ */

static INL T void scales_q2_K(const gt_block_q2_K *b, kscales *s)
{
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0x0F)));
    const __m512 mn = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
    _mm512_storeu_ps(s->sc, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), sc));
    _mm512_storeu_ps(s->mn, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->dmin)), mn));
}

static INL T void scales_q3_K(const gt_block_q3_K *b, kscales *s)
{
    uint8_t u[16];
    gt_cpu_q3k_scales(b->scales, u);
    const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)u)),
                                       _mm512_set1_epi32(32));
    _mm512_storeu_ps(s->sc, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), _mm512_cvtepi32_ps(v)));
}

/* Q4_K/Q5_K: 8 scales and 8 mins, each duplicated into its 2 groups of 16. */
static INL T void scales_q45_K(const uint8_t scales[12], uint16_t d16, uint16_t dmin16, kscales *s)
{
    uint8_t u[16];
    gt_cpu_q4k_scales(scales, u);
    const __m512 v = u8x16_f32(_mm_loadu_si128((const __m128i *)u)); /* sc 0..7, m 0..7 */
    const __m512 dd = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(d16)),
                                         _mm256_set1_ps(_cvtsh_ss(dmin16)), 1);
    const __m512 p = _mm512_mul_ps(dd, v);
    const __m512i isc = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    _mm512_storeu_ps(s->sc, _mm512_permutexvar_ps(isc, p));
    _mm512_storeu_ps(s->mn, _mm512_permutexvar_ps(_mm512_add_epi32(isc, _mm512_set1_epi32(8)), p));
}

static INL T void scales_q4_K(const gt_block_q4_K *b, kscales *s) { scales_q45_K(b->scales, b->d, b->dmin, s); }
static INL T void scales_q5_K(const gt_block_q5_K *b, kscales *s) { scales_q45_K(b->scales, b->d, b->dmin, s); }

static INL T void scales_q6_K(const gt_block_q6_K *b, kscales *s)
{
    const __m512 v = i8x16_f32(_mm_loadu_si128((const __m128i *)b->scales));
    _mm512_storeu_ps(s->sc, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), v));
}

/* ---- quants of run i (elements 64i .. 64i+63) as bytes ------------------- */

/* 32 bytes at p in both halves of a register. */
static INL T __m512i dup32(const uint8_t *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* 16-bit lane shift counts: a in the low half, b in the high half. */
static INL T __m512i counts(int a, int b)
{
    return _mm512_inserti64x4(_mm512_set1_epi16((short)a), _mm256_set1_epi16((short)b), 1);
}

/* Per-byte bit masks: bit a in the low half, bit b in the high half. */
static INL T __m512i bits(int a, int b)
{
    return _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << a)), _mm256_set1_epi8((char)(1 << b)), 1);
}

/* Q2_K/Q3_K low bits of run i: qs[32*(i/2) ..], groups 2*(i%2) and +1 of
 * that half (shift 0/2 or 4/6). */
static INL T __m512i crumbs(const uint8_t *qs, int i)
{
    const int s = 4 * (i % 2);
    return _mm512_and_si512(_mm512_srlv_epi16(dup32(qs + 32 * (i / 2)), counts(s, s + 2)),
                            _mm512_set1_epi8(3));
}

static INL T __m512i bytes_q2_K(const gt_block_q2_K *b, int i) { return crumbs(b->qs, i); }

static INL T __m512i bytes_q3_K(const gt_block_q3_K *b, int i)
{
    const __m512i lo = crumbs(b->qs, i);
    const __mmask64 clear = _mm512_testn_epi8_mask(dup32(b->hmask), bits(2 * i, 2 * i + 1));
    return _mm512_mask_sub_epi8(lo, clear, lo, _mm512_set1_epi8(4));
}

/* Q4_K/Q5_K nibbles of run i: low then high nibbles of qs[32*i ..]. */
static INL T __m512i nibbles_k(const uint8_t *qs, int i)
{
    return _mm512_and_si512(_mm512_srlv_epi16(dup32(qs + 32 * i), counts(0, 4)), _mm512_set1_epi8(0x0F));
}

static INL T __m512i bytes_q4_K(const gt_block_q4_K *b, int i) { return nibbles_k(b->qs, i); }

static INL T __m512i bytes_q5_K(const gt_block_q5_K *b, int i)
{
    const __m512i lo = nibbles_k(b->qs, i);
    const __mmask64 set = _mm512_test_epi8_mask(dup32(b->qh), bits(2 * i, 2 * i + 1));
    return _mm512_mask_add_epi8(lo, set, lo, _mm512_set1_epi8(16));
}

/* Q6_K run i: half h = i/2 of the block; even runs take the low nibbles of
 * ql[64h .. 64h+63] and qh bits 0-1 / 2-3, odd runs the high nibbles and
 * bits 4-5 / 6-7 (each moved to bits 4-5); u = nibble | high bits. */
static INL T __m512i bytes_q6_K(const gt_block_q6_K *b, int i)
{
    const int h = i / 2;
    const __m512i l = _mm512_loadu_si512((const void *)(b->ql + 64 * h));
    const __m512i qh = dup32(b->qh + 32 * h);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i nib, hi;
    if (i % 2 == 0) {
        nib = _mm512_and_si512(l, m4);
        hi = _mm512_sllv_epi16(qh, counts(4, 2));
    } else {
        nib = _mm512_and_si512(_mm512_srli_epi16(l, 4), m4);
        hi = _mm512_srlv_epi16(qh, counts(0, 2));
    }
    /* nib | (hi & 0x30): truth table 0xF8 is a | (b & c). */
    const __m512i u = _mm512_ternarylogic_epi32(nib, hi, _mm512_set1_epi8(0x30), 0xF8);
    return _mm512_sub_epi8(u, _mm512_set1_epi8(32));
}

/* ---- one run of 64 against the activations -------------------------------- */

static INL T __m128i lane(__m512i v, int t)
{
    switch (t) {
    case 0: return _mm512_castsi512_si128(v);
    case 1: return _mm512_extracti32x4_epi32(v, 1);
    case 2: return _mm512_extracti32x4_epi32(v, 2);
    default: return _mm512_extracti32x4_epi32(v, 3);
    }
}

static INL T void run_dot(__m512i q, const float *sc, const float *mn, const float *x, __m512 acc[4])
{
    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)
    {
        const __m512 qf = i8x16_f32(lane(q, t));
        const __m512 wv = mn ? _mm512_fmsub_ps(qf, _mm512_set1_ps(sc[t]), _mm512_set1_ps(mn[t]))
                             : _mm512_mul_ps(qf, _mm512_set1_ps(sc[t]));
        acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 16 * t), acc[t]);
    }
}

static INL T void run_dq(__m512i q, const float *sc, const float *mn, float *y)
{
    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)
    {
        __m512 v = _mm512_mul_ps(_mm512_set1_ps(sc[t]), i8x16_f32(lane(q, t)));
        if (mn)
            v = _mm512_sub_ps(v, _mm512_set1_ps(mn[t]));
        _mm512_storeu_ps(y + 16 * t, v);
    }
}

/* fdot (widening; Q4_K has its own below) and dequant of one type. */
#define KQ_DQ(NAME, BLOCK, MIN)                                                                  \
    static T void dq_##NAME(const void *src, float *dst, int64_t n)                              \
    {                                                                                            \
        const BLOCK *b = src;                                                                    \
        for (int64_t j = 0; j < n / GT_QK_K; j++) {                                              \
            kscales s;                                                                           \
            scales_##NAME(b + j, &s);                                                            \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                run_dq(bytes_##NAME(b + j, i), s.sc + 4 * i, MIN ? s.mn + 4 * i : NULL,         \
                       dst + j * GT_QK_K + 64 * i);                                              \
        }                                                                                        \
    }

#define KQ_FDOT(NAME, BLOCK, MIN)                                                                \
    static T float fdot_##NAME(const void *w, const float *x, int64_t n)                         \
    {                                                                                            \
        const BLOCK *b = w;                                                                      \
        const int64_t nsb = n / GT_QK_K;                                                         \
        kscales s[KCH];                                                                          \
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),          \
                         _mm512_setzero_ps()};                                                   \
        for (int64_t c0 = 0; c0 < nsb; c0 += KCH) {                                              \
            const int64_t m = nsb - c0 < KCH ? nsb - c0 : KCH;                                   \
            for (int64_t j = 0; j < m; j++)                                                      \
                scales_##NAME(b + c0 + j, &s[j]);                                                \
            for (int64_t j = 0; j < m; j++) {                                                    \
                const float *xb = x + (c0 + j) * GT_QK_K;                                        \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                              \
                    run_dot(bytes_##NAME(b + c0 + j, i), s[j].sc + 4 * i,                        \
                            MIN ? s[j].mn + 4 * i : NULL, xb + 64 * i, acc);                     \
            }                                                                                    \
        }                                                                                        \
        return hsum16(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]))); \
    }

KQ_FDOT(q2_K, gt_block_q2_K, 1)
KQ_FDOT(q3_K, gt_block_q3_K, 0)
KQ_FDOT(q5_K, gt_block_q5_K, 1)
KQ_FDOT(q6_K, gt_block_q6_K, 0)
KQ_DQ(q2_K, gt_block_q2_K, 1)
KQ_DQ(q3_K, gt_block_q3_K, 0)
KQ_DQ(q4_K, gt_block_q4_K, 1)
KQ_DQ(q5_K, gt_block_q5_K, 1)
KQ_DQ(q6_K, gt_block_q6_K, 0)

/* Q4_K by table: sub-blocks 2k (low nibbles of qs[32k ..]) and 2k+1 (high
 * nibbles) share one pair of 16-byte loads widened to int32 lanes. */
static T float fdot_q4_K(const void *w, const float *x, int64_t n)
{
    const gt_block_q4_K *b = w;
    const int64_t nsb = n / GT_QK_K;
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    kscales s[KCH];
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < nsb; c0 += KCH) {
        const int64_t m = nsb - c0 < KCH ? nsb - c0 : KCH;
        for (int64_t j = 0; j < m; j++)
            scales_q4_K(b + c0 + j, &s[j]);
        for (int64_t j = 0; j < m; j++) {
            const uint8_t *qs = b[c0 + j].qs;
            const float *xb = x + (c0 + j) * GT_QK_K, *sc = s[j].sc, *mn = s[j].mn;
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
            {
                /* groups 4k, 4k+2 of 16 are sub-blocks 2k, 2k+1 */
                const __m512 ta = _mm512_fmsub_ps(iota, _mm512_set1_ps(sc[4 * k]), _mm512_set1_ps(mn[4 * k]));
                const __m512 tb =
                    _mm512_fmsub_ps(iota, _mm512_set1_ps(sc[4 * k + 2]), _mm512_set1_ps(mn[4 * k + 2]));
                const __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 32 * k)));
                const __m512i v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 32 * k + 16)));
                const float *xk = xb + 64 * k;
                acc0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(v0, ta), _mm512_loadu_ps(xk), acc0);
                acc1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(v1, ta), _mm512_loadu_ps(xk + 16), acc1);
                acc2 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), tb),
                                       _mm512_loadu_ps(xk + 32), acc2);
                acc3 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), tb),
                                       _mm512_loadu_ps(xk + 48), acc3);
            }
        }
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

void gt_cpu_kquants_avx512(gt_cpu_kernels *k)
{
    k->fdot[GT_TYPE_Q2_K] = fdot_q2_K;
    k->fdot[GT_TYPE_Q3_K] = fdot_q3_K;
    k->fdot[GT_TYPE_Q4_K] = fdot_q4_K;
    k->fdot[GT_TYPE_Q5_K] = fdot_q5_K;
    k->fdot[GT_TYPE_Q6_K] = fdot_q6_K;
    k->dequant[GT_TYPE_Q2_K] = dq_q2_K;
    k->dequant[GT_TYPE_Q3_K] = dq_q3_K;
    k->dequant[GT_TYPE_Q4_K] = dq_q4_K;
    k->dequant[GT_TYPE_Q5_K] = dq_q5_K;
    k->dequant[GT_TYPE_Q6_K] = dq_q6_K;
}

#endif
