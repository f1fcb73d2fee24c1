/* cpu_kquants_avx2.c: fdot and dequant for the K-quants (Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K) in the AVX2 + FMA + F16C table; gt_cpu_kernels_avx2 calls
 * gt_cpu_kquants_avx2 to install them.
 *
 * A 256-element super-block is handled as 8 runs of 32 elements. For run i
 * a decoder (qN_bytes) builds the run's 32 quants as bytes in element
 * order in one register, straight from the block's bits with whole-register
 * shifts and masks (where each element's bits live: the top of
 * runtime/src/quant_k.c):
 *   Q2_K, Q3_K  low bits: qs[32*(i/4) ..] shifted right by 2*(i%4), & 3;
 *               Q3_K's third bit is bit i of hmask[0..31]: where it is
 *               clear, 4 is subtracted (q = -4..3);
 *   Q4_K, Q5_K  nibbles of qs[32*(i/2) ..], low for even i; Q5_K's fifth
 *               bit is bit i of qh[0..31], shifted to bit 4 and ORed in;
 *   Q6_K        nibbles of ql, the two high bits from qh shifted to bits
 *               4..5, then 32 subtracted (q = -32..31).
 * Each weight byte is loaded once per run that uses it (a load, not a
 * re-read from memory: the block is in L1 after the first).
 * The bytes are widened 8 at a time (vpmovsxbd, vcvtdq2ps) and meet the
 * activations in FMAs. Scales: per super-block the 16 groups of 16 get
 * a scale sc[g] and a min mn[g] (x = sc*q - mn), decoded for a chunk of
 * KCH super-blocks ahead of their dots (the loop then broadcasts them from
 * memory: a plain load); Q4_K/Q5_K's 8 scales of 32 are duplicated into
 * the 16 groups. Types with a min make the weights fmsub(q, sc, mn) in
 * registers; Q3_K/Q6_K sum q*x over a group and scale it once.
 *
 * dequant uses the same bytes and forms the definition's products
 * (sc = d * sub-scale, then sc*q, then - mn), each rounded on its own: no
 * FMA, so it is bit-exact with gt_dequantize_row. */
#include "cpu.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include "cpu_x86.h"

#define T GT_CPU_T_AVX2
#define INL __attribute__((always_inline)) inline
#define KCH 8 /* super-blocks whose scales are decoded ahead */

typedef struct kscales {
    float sc[16], mn[16]; /* per group of 16 */
} kscales;

static INL T __m256 u8x8_f32(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)); }

static INL T void store8x2(__m256 lo, __m256 hi, float *dst)
{
    _mm256_storeu_ps(dst, lo);
    _mm256_storeu_ps(dst + 8, hi);
}

/* ---- scales (exact products, so dequant can share them) ------------------ */

static INL T void scales_q2_K(const gt_block_q2_K *b, kscales *s)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)b->scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i sc = _mm_and_si128(raw, m4), mn = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d)), dmin = _mm256_set1_ps(_cvtsh_ss(b->dmin));
    store8x2(_mm256_mul_ps(d, u8x8_f32(sc)), _mm256_mul_ps(d, u8x8_f32(_mm_srli_si128(sc, 8))), s->sc);
    store8x2(_mm256_mul_ps(dmin, u8x8_f32(mn)), _mm256_mul_ps(dmin, u8x8_f32(_mm_srli_si128(mn, 8))),
             s->mn);
}

static INL T void scales_q3_K(const gt_block_q3_K *b, kscales *s)
{
    uint8_t u[16];
    gt_cpu_q3k_scales(b->scales, u);
    const __m128i v = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)u), _mm_set1_epi8(32));
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
    store8x2(_mm256_mul_ps(d, gt_cpu_i8x8_f32(v)), _mm256_mul_ps(d, gt_cpu_i8x8_f32(_mm_srli_si128(v, 8))),
             s->sc);
}

/* 8 values v[j] into 16 groups: out[2j] = out[2j+1] = v[j]. */
static INL T void dup8x2(__m256 v, float *out)
{
    const __m256 lo = _mm256_unpacklo_ps(v, v), hi = _mm256_unpackhi_ps(v, v);
    store8x2(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31), out);
}

static INL T void scales_q45_K(const uint8_t scales[12], uint16_t d16, uint16_t dmin16, kscales *s)
{
    uint8_t u[16];
    gt_cpu_q4k_scales(scales, u);
    const __m128i v = _mm_loadu_si128((const __m128i *)u);
    dup8x2(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d16)), u8x8_f32(v)), s->sc);
    dup8x2(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(dmin16)), u8x8_f32(_mm_srli_si128(v, 8))), s->mn);
}

static INL T void scales_q4_K(const gt_block_q4_K *b, kscales *s) { scales_q45_K(b->scales, b->d, b->dmin, s); }
static INL T void scales_q5_K(const gt_block_q5_K *b, kscales *s) { scales_q45_K(b->scales, b->d, b->dmin, s); }

static INL T void scales_q6_K(const gt_block_q6_K *b, kscales *s)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)b->scales);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
    store8x2(_mm256_mul_ps(d, gt_cpu_i8x8_f32(v)), _mm256_mul_ps(d, gt_cpu_i8x8_f32(_mm_srli_si128(v, 8))),
             s->sc);
}

/* ---- quants of run i (elements 32i .. 32i+31) as bytes ------------------- */

static INL T __m256i crumbs(const uint8_t *qs, int i)
{
    return _mm256_and_si256(gt_cpu_shift16(gt_cpu_load32(qs + 32 * (i / 4)), -2 * (i % 4)), _mm256_set1_epi8(3));
}

static INL T __m256i bytes_q2_K(const gt_block_q2_K *b, int i) { return crumbs(b->qs, i); }

static INL T __m256i bytes_q3_K(const gt_block_q3_K *b, int i)
{
    const __m256i bit = _mm256_set1_epi8((char)(1 << i));
    const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(gt_cpu_load32(b->hmask), bit), _mm256_setzero_si256());
    return _mm256_sub_epi8(crumbs(b->qs, i), _mm256_and_si256(clear, _mm256_set1_epi8(4)));
}

static INL T __m256i bytes_q4_K(const gt_block_q4_K *b, int i) { return gt_cpu_nibbles_k(b->qs, i); }

static INL T __m256i bytes_q5_K(const gt_block_q5_K *b, int i)
{
    const __m256i h = _mm256_and_si256(gt_cpu_shift16(gt_cpu_load32(b->qh), 4 - i), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(gt_cpu_nibbles_k(b->qs, i), h);
}

static INL T __m256i bytes_q6_K(const gt_block_q6_K *b, int i)
{
    return _mm256_sub_epi8(gt_cpu_q6k_u(b->ql, b->qh, i), _mm256_set1_epi8(32));
}

/* ---- one run of 32 against the activations -------------------------------- */

/* Signed quants, no min: sum q*x per group of 16, times the group's scale. */
static INL T void run_dot(__m256i q, const float *sc, const float *x, __m256 acc[4])
{
    __m128i g[4];
    gt_cpu_byte_groups(q, g);
    for (int t = 0; t < 2; t++) {
        __m256 p = _mm256_mul_ps(gt_cpu_i8x8_f32(g[2 * t]), _mm256_loadu_ps(x + 16 * t));
        p = _mm256_fmadd_ps(gt_cpu_i8x8_f32(g[2 * t + 1]), _mm256_loadu_ps(x + 16 * t + 8), p);
        acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(sc + t), p, acc[t]);
    }
}

/* With a min: weights sc*q - mn in registers. */
static INL T void run_dot_min(__m256i q, const float *sc, const float *mn, const float *x, __m256 acc[4])
{
    __m128i g[4];
    gt_cpu_byte_groups(q, g);
    for (int t = 0; t < 4; t++) {
        const __m256 wv = _mm256_fmsub_ps(gt_cpu_i8x8_f32(g[t]), _mm256_broadcast_ss(sc + t / 2),
                                          _mm256_broadcast_ss(mn + t / 2));
        acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 8 * t), acc[t]);
    }
}

static INL T void run_dq(__m256i q, const float *sc, const float *mn, float *y)
{
    __m128i g[4];
    gt_cpu_byte_groups(q, g);
    for (int t = 0; t < 4; t++) {
        __m256 v = _mm256_mul_ps(_mm256_broadcast_ss(sc + t / 2), gt_cpu_i8x8_f32(g[t]));
        if (mn)
            v = _mm256_sub_ps(v, _mm256_broadcast_ss(mn + t / 2));
        _mm256_storeu_ps(y + 8 * t, v);
    }
}

/* fdot and dequant of one type: scales for a chunk of super-blocks, then
 * the 8 runs of each. */
#define KQ_KERNELS(NAME, BLOCK, MIN)                                                             \
    static T float fdot_##NAME(const void *w, const float *x, int64_t n)                         \
    {                                                                                            \
        const BLOCK *b = w;                                                                      \
        const int64_t nsb = n / GT_QK_K;                                                         \
        kscales s[KCH];                                                                          \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),          \
                         _mm256_setzero_ps()};                                                   \
        for (int64_t c0 = 0; c0 < nsb; c0 += KCH) {                                              \
            const int64_t m = nsb - c0 < KCH ? nsb - c0 : KCH;                                   \
            for (int64_t j = 0; j < m; j++)                                                      \
                scales_##NAME(b + c0 + j, &s[j]);                                                \
            for (int64_t j = 0; j < m; j++) {                                                    \
                const float *xb = x + (c0 + j) * GT_QK_K;                                        \
                _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                              \
                {                                                                                \
                    if (MIN)                                                                     \
                        run_dot_min(bytes_##NAME(b + c0 + j, i), s[j].sc + 2 * i,                \
                                    s[j].mn + 2 * i, xb + 32 * i, acc);                          \
                    else                                                                         \
                        run_dot(bytes_##NAME(b + c0 + j, i), s[j].sc + 2 * i, xb + 32 * i,       \
                                acc + 2 * (i & 1));                                              \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        return gt_cpu_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]),                         \
                                          _mm256_add_ps(acc[2], acc[3])));                       \
    }                                                                                            \
    static T void dq_##NAME(const void *src, float *dst, int64_t n)                              \
    {                                                                                            \
        const BLOCK *b = src;                                                                    \
        for (int64_t j = 0; j < n / GT_QK_K; j++) {                                              \
            kscales s;                                                                           \
            scales_##NAME(b + j, &s);                                                            \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                  \
                run_dq(bytes_##NAME(b + j, i), s.sc + 2 * i, MIN ? s.mn + 2 * i : NULL,         \
                       dst + j * GT_QK_K + 32 * i);                                              \
        }                                                                                        \
    }

KQ_KERNELS(q2_K, gt_block_q2_K, 1)
KQ_KERNELS(q3_K, gt_block_q3_K, 0)
KQ_KERNELS(q4_K, gt_block_q4_K, 1)
KQ_KERNELS(q5_K, gt_block_q5_K, 1)
KQ_KERNELS(q6_K, gt_block_q6_K, 0)

void gt_cpu_kquants_avx2(gt_cpu_kernels *k)
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
