/* cpu_kernels_avx2.c: the AVX2 + FMA + F16C kernel table.
 *
 * Compiled with per-function target attributes (no global -mavx2), so the
 * library still runs on any x86-64; cpu_backend.c only installs this table
 * after __builtin_cpu_supports says the CPU has all three.
 *
 * Quantized weights x f32 activations (the default dot path, below the
 * cpu_qdot.h include): int8 or nibbles widened to int32 (vpmovsxbd /
 * vpmovzxbd), converted to float and FMA'd with the activations; Q4
 * weights are dequantized in registers as fma(q, d, m), Q4_0 with m = -8d.
 *
 * Q8-activation dots (GT_CPU_ACT=q8, cpu_qdot.h) work one 32-element block
 * per 256-bit register:
 *   Q8_0 x Q8: signed*signed has no byte multiply, so |w| (unsigned) times
 *              a with w's sign (vpsignb) feeds vpmaddubsw; |w| <= 128 and
 *              |a| <= 127 keep the 16-bit pair sums below 32767.
 *   Q4_0/Q4_1: nibbles are already unsigned (0..15): vpmaddubsw directly,
 *              the offset (-8, or m) is applied once per block through the
 *              activation's block sum s (see cpu.h).
 * Each block's int32 lanes become floats and are scaled by dw*da with one
 * FMA; the horizontal sum happens once per row.
 *
 * exp() is a Cody-Waite range reduction (x = n*ln2 + r, |r| <= ln2/2) and a
 * degree-7 Taylor polynomial for e^r (truncation error r^8/8! < 6e-9
 * relative, below float rounding), scaled by 2^n built in the exponent
 * bits. Inputs are clamped to [-87.3, 88] so 2^n stays a normal float;
 * clamping is written so a NaN input stays NaN. */
#include "cpu.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_x86.h"

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ROUND_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline T_AVX2 float hsum8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline T_AVX2 float hmax8(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline T_AVX2 int hsum8i(__m256i v)
{
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

static inline T_AVX2 float f16(uint16_t h) { return _cvtsh_ss(h); }

static T_AVX2 void quantize_act(const float *x, int64_t n, int8_t *q, float *d)
{
    const __m256 nosign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / GT_CPU_QK; b++) {
        const float *xb = x + b * GT_CPU_QK;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 a0 = _mm256_and_ps(v0, nosign), a1 = _mm256_and_ps(v1, nosign);
        __m256 a2 = _mm256_and_ps(v2, nosign), a3 = _mm256_and_ps(v3, nosign);
        __m256 m = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
        /* NaN or inf: "not <= FLT_MAX" is true for both. */
        __m256 bad = _mm256_or_ps(
            _mm256_or_ps(_mm256_cmp_ps(a0, fmax, _CMP_NLE_UQ), _mm256_cmp_ps(a1, fmax, _CMP_NLE_UQ)),
            _mm256_or_ps(_mm256_cmp_ps(a2, fmax, _CMP_NLE_UQ), _mm256_cmp_ps(a3, fmax, _CMP_NLE_UQ)));
        if (_mm256_movemask_ps(bad)) {
            memset(q + b * GT_CPU_QK, 0, GT_CPU_QK);
            d[b] = NAN;
            continue;
        }
        const float amax = hmax8(m);
        const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), ROUND_NEAREST));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), ROUND_NEAREST));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), ROUND_NEAREST));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), ROUND_NEAREST));
        /* packs work within 128-bit lanes; the permute restores order. */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        p = _mm256_permutevar8x32_epi32(p, order);
        _mm256_storeu_si256((__m256i *)(q + b * GT_CPU_QK), p);
        d[b] = amax / 127.0f;
    }
}

/* u8 x s8 products, four summed per int32 lane (no VNNI: two steps). */
#define QD_T T_AVX2
#define QD_NAME(x) avx2_##x
#define QD_DOTUS(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))
#include "cpu_qdot.h"
#undef QD_T
#undef QD_NAME
#undef QD_DOTUS

/* The packed Q4_0 and Q8_0 few-row kernels (cpu_packed.c). */
#define PK_T T_AVX2
#define PK_NAME(x) avx2_##x
#define PK_DPBUSD(acc, u, s) _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#define PK_Q8_SIGNED 1
#include "cpu_packed_simd.h"
#undef PK_Q8_SIGNED
#undef PK_T
#undef PK_NAME
#undef PK_DPBUSD

/* ---- quantized weights x f32 activations (the default dot path) ----------
 * The weights are widened in registers (int8 or nibble -> int32 -> float)
 * and meet the f32 activations in FMAs: no activation rounding at all. The
 * block scales of a chunk are converted 8 at a time first (avx2_f16s) and
 * broadcast from memory in the loop. */
#define FD_CHUNK 64

/* 8 int8 at p as floats. */
static inline T_AVX2 __m256 i8x8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* out[r] = the Q8_0 row w dotted with each of the R f32 rows x[r]. Written
 * once and inlined for R = 1 (fdot) and R = 4 (fdot4), so a row's
 * operations are the same whatever R is (batch invariance: serve
 * --parallel's rows get the bytes they get alone); each block's weights
 * are widened once for all R rows. Even blocks go into acc0, odd ones
 * into acc1. */
static inline __attribute__((always_inline)) T_AVX2 void fdot_q8_0_rows(const void *w,
                                                                       const float *const *x,
                                                                       int64_t n, const int R,
                                                                       float *out)
{
    const gt_block_q8_0 *b = w;
    const int64_t nb = n / GT_QK8_0;
    float c[FD_CHUNK];
    __m256 acc0[4], acc1[4];
    for (int r = 0; r < R; r++)
        acc0[r] = acc1[r] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        avx2_f16s((const uint8_t *)(b + b0), (int)sizeof *b, m, c);
        for (int64_t j = 0; j < m; j++) {
            const int8_t *q = b[b0 + j].qs;
            const __m256 w0 = i8x8(q), w1 = i8x8(q + 8), w2 = i8x8(q + 16), w3 = i8x8(q + 24);
            const __m256 cj = _mm256_broadcast_ss(c + j);
            const int64_t at = (b0 + j) * GT_QK8_0;
            for (int r = 0; r < R; r++) {
                const float *xb = x[r] + at;
                __m256 p = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
                p = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), p);
                p = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), p);
                p = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), p);
                if (j & 1)
                    acc1[r] = _mm256_fmadd_ps(cj, p, acc1[r]);
                else
                    acc0[r] = _mm256_fmadd_ps(cj, p, acc0[r]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        out[r] = hsum8(_mm256_add_ps(acc0[r], acc1[r]));
}

static T_AVX2 float fdot_q8_0(const void *w, const float *x, int64_t n)
{
    float out;
    fdot_q8_0_rows(w, &x, n, 1, &out);
    return out;
}

static T_AVX2 void fdot4_q8_0(const void *w, const float *const x[4], int64_t n, float out[4])
{
    fdot_q8_0_rows(w, x, n, 4, out);
}

/* Q4_0 and Q4_1 share one loop: each weight is w = fma(q, d, m) with q the
 * unsigned nibble and m = the block's m (Q4_1) or -8*d (Q4_0, where q*d -
 * 8*d rounds once, exactly as d*(q-8)), then acc += w*x. The 16 bytes hold
 * elements 0..15 in the low nibbles and 16..31 in the high ones; four
 * accumulators, one per 8 elements, keep the FMA chains short. */
static T_AVX2 float fdot_q4(const uint8_t *blk, int stride, int qoff, int moff, const float *x,
                            int64_t nb)
{
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    float cd[FD_CHUNK], cm[FD_CHUNK];
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        const uint8_t *bc = blk + b0 * stride;
        if (moff == 2) {
            avx2_f16s_pair(bc, stride, m, cd, cm);
        } else if (moff >= 0) {
            avx2_f16s(bc, stride, m, cd);
            avx2_f16s(bc + moff, stride, m, cm);
        } else {
            avx2_f16s_times(bc, stride, m, -8.0f, cd, cm);
        }
        for (int64_t j = 0; j < m; j++) {
            const uint8_t *q = bc + j * stride + qoff;
            const float *xb = x + (b0 + j) * 32;
            const __m256 d = _mm256_broadcast_ss(cd + j), mm = _mm256_broadcast_ss(cm + j);
            const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q));
            const __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8)));
            const __m256i nib[4] = {_mm256_and_si256(v0, m4), _mm256_and_si256(v1, m4),
                                    _mm256_srli_epi32(v0, 4), _mm256_srli_epi32(v1, 4)};
            for (int g = 0; g < 4; g++) {
                const __m256 wv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(nib[g]), d, mm);
                acc[g] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xb + 8 * g), acc[g]);
            }
        }
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

static T_AVX2 float fdot_q4_0(const void *w, const float *x, int64_t n)
{
    return fdot_q4(w, (int)sizeof(gt_block_q4_0), (int)offsetof(gt_block_q4_0, qs), -1, x,
                   n / GT_QK4_0);
}

static T_AVX2 float fdot_q4_1(const void *w, const float *x, int64_t n)
{
    return fdot_q4(w, (int)sizeof(gt_block_q4_1), (int)offsetof(gt_block_q4_1, qs),
                   (int)offsetof(gt_block_q4_1, m), x, n / GT_QK4_1);
}

/* ---- Q5_0, Q5_1, IQ4_NL: bytes in element order, then widened ------------
 * A block's 32 values are built as bytes in one register (avx2_nibbles:
 * elements 0..15 from the low nibbles, 16..31 from the high ones), then
 * widened 8 at a time to int32 and floats:
 *   Q5:     the fifth bits become byte masks (bits_to_bytes: vpshufb puts
 *           qh byte k/8 in byte k, an AND and a compare test bit k%8);
 *           Q5_0 ORs 0xF0 where the bit is clear (the int8 q - 16), Q5_1
 *           ORs 0x10 where it is set (q = 0..31);
 *   IQ4_NL: vpshufb looks the nibbles up in the 16 int8 levels.
 * Signed values (Q5_0, IQ4_NL) are dotted first and scaled by d once per
 * block, as Q8_0; Q5_1 makes its weights fma(q, d, m), as Q4_1. */

/* 0xFF in byte k where bit k of bits is set. */
static inline T_AVX2 __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                          2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
}

/* sum over the 32 int8 q[e] * x[e], in 8 lanes. */
static inline T_AVX2 __m256 dot_i8x32(__m256i q, const float *x)
{
    __m128i g[4];
    gt_cpu_byte_groups(q, g);
    __m256 p = _mm256_mul_ps(gt_cpu_i8x8_f32(g[0]), _mm256_loadu_ps(x));
    p = _mm256_fmadd_ps(gt_cpu_i8x8_f32(g[1]), _mm256_loadu_ps(x + 8), p);
    p = _mm256_fmadd_ps(gt_cpu_i8x8_f32(g[2]), _mm256_loadu_ps(x + 16), p);
    return _mm256_fmadd_ps(gt_cpu_i8x8_f32(g[3]), _mm256_loadu_ps(x + 24), p);
}

static inline T_AVX2 __m256i q5_bytes(const uint8_t *qs, const uint8_t *qhp, bool sub16)
{
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    const __m256i nib = avx2_nibbles(qs), hb = bits_to_bytes(qh);
    return sub16 ? _mm256_or_si256(nib, _mm256_andnot_si256(hb, _mm256_set1_epi8((char)0xF0)))
                 : _mm256_or_si256(nib, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
}

static inline T_AVX2 __m256i iq4nl_bytes(const uint8_t *qs)
{
    const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)gt_iq4nl_levels));
    return _mm256_shuffle_epi8(levels, avx2_nibbles(qs));
}

/* Q5_0 and IQ4_NL: signed bytes, dot, times d. */
#define FD_SIGNED_LOOP(BLOCK, BYTES)                                                             \
    const BLOCK *b = w;                                                                          \
    const int64_t nb = n / 32;                                                                   \
    float cd[FD_CHUNK];                                                                          \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                               \
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {                                              \
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;                               \
        avx2_f16s((const uint8_t *)(b + b0), (int)sizeof *b, m, cd);                             \
        for (int64_t j = 0; j < m; j++) {                                                        \
            const BLOCK *blk = b + b0 + j;                                                       \
            const __m256 p = dot_i8x32(BYTES, x + (b0 + j) * 32);                                \
            if (j & 1)                                                                           \
                acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(cd + j), p, acc1);                    \
            else                                                                                 \
                acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(cd + j), p, acc0);                    \
        }                                                                                        \
    }                                                                                            \
    return hsum8(_mm256_add_ps(acc0, acc1));

static T_AVX2 float fdot_q5_0(const void *w, const float *x, int64_t n)
{
    FD_SIGNED_LOOP(gt_block_q5_0, q5_bytes(blk->qs, blk->qh, true))
}

static T_AVX2 float fdot_iq4_nl(const void *w, const float *x, int64_t n)
{
    FD_SIGNED_LOOP(gt_block_iq4_nl, iq4nl_bytes(blk->qs))
}

#undef FD_SIGNED_LOOP

static T_AVX2 float fdot_q5_1(const void *w, const float *x, int64_t n)
{
    const gt_block_q5_1 *b = w;
    const int64_t nb = n / GT_QK5_1;
    float cd[FD_CHUNK], cm[FD_CHUNK];
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t b0 = 0; b0 < nb; b0 += FD_CHUNK) {
        const int64_t m = nb - b0 < FD_CHUNK ? nb - b0 : FD_CHUNK;
        avx2_f16s_pair((const uint8_t *)(b + b0), (int)sizeof *b, m, cd, cm);
        for (int64_t j = 0; j < m; j++) {
            const gt_block_q5_1 *blk = b + b0 + j;
            const float *xb = x + (b0 + j) * GT_QK5_1;
            const __m256 d = _mm256_broadcast_ss(cd + j), mm = _mm256_broadcast_ss(cm + j);
            __m128i g[4];
            gt_cpu_byte_groups(q5_bytes(blk->qs, blk->qh, false), g);
            for (int k = 0; k < 4; k++)
                acc[k] = _mm256_fmadd_ps(_mm256_fmadd_ps(gt_cpu_i8x8_f32(g[k]), d, mm),
                                         _mm256_loadu_ps(xb + 8 * k), acc[k]);
        }
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

/* Dequantizers: the same bytes, then the definition's products, each
 * rounded on its own (multiply, then add; no FMA): bit-exact. */
static T_AVX2 void dq_q5_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q5_0 *x = src;
    for (int64_t b = 0; b < n / GT_QK5_0; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d));
        __m128i g[4];
        gt_cpu_byte_groups(q5_bytes(x[b].qs, x[b].qh, true), g);
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(dst + b * 32 + 8 * k, _mm256_mul_ps(gt_cpu_i8x8_f32(g[k]), d));
    }
}

static T_AVX2 void dq_q5_1(const void *src, float *dst, int64_t n)
{
    const gt_block_q5_1 *x = src;
    for (int64_t b = 0; b < n / GT_QK5_1; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d)), m = _mm256_set1_ps(f16(x[b].m));
        __m128i g[4];
        gt_cpu_byte_groups(q5_bytes(x[b].qs, x[b].qh, false), g);
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(dst + b * 32 + 8 * k, _mm256_add_ps(_mm256_mul_ps(gt_cpu_i8x8_f32(g[k]), d), m));
    }
}

static T_AVX2 void dq_iq4_nl(const void *src, float *dst, int64_t n)
{
    const gt_block_iq4_nl *x = src;
    for (int64_t b = 0; b < n / GT_QK4_NL; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d));
        __m128i g[4];
        gt_cpu_byte_groups(iq4nl_bytes(x[b].qs), g);
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(dst + b * 32 + 8 * k, _mm256_mul_ps(d, gt_cpu_i8x8_f32(g[k])));
    }
}

static T_AVX2 float dot_f32(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float sum = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static T_AVX2 float fdot_f32(const void *w, const float *x, int64_t n) { return dot_f32(w, x, n); }

static inline T_AVX2 __m256 load_f16(const uint16_t *h)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

static inline T_AVX2 __m256 load_bf16(const uint16_t *h)
{
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

static inline float bf16_1(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static T_AVX2 float fdot_f16(const void *w, const float *x, int64_t n)
{
    const uint16_t *h = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(load_f16(h + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(load_f16(h + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(load_f16(h + i), _mm256_loadu_ps(x + i), s0);
    float sum = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        sum += f16(h[i]) * x[i];
    return sum;
}

static T_AVX2 float fdot_bf16(const void *w, const float *x, int64_t n)
{
    const uint16_t *h = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(load_bf16(h + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(load_bf16(h + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(load_bf16(h + i), _mm256_loadu_ps(x + i), s0);
    float sum = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        sum += bf16_1(h[i]) * x[i];
    return sum;
}

static T_AVX2 void dq_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, load_f16(h + i));
    for (; i < n; i++)
        dst[i] = f16(h[i]);
}

static T_AVX2 void dq_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, load_bf16(h + i));
    for (; i < n; i++)
        dst[i] = bf16_1(h[i]);
}

static T_AVX2 void dq_q8_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q8_0 *x = src;
    for (int64_t b = 0; b < n / GT_QK8_0; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d));
        for (int g = 0; g < 4; g++) {
            const __m128i q8 = _mm_loadl_epi64((const __m128i *)(x[b].qs + 8 * g));
            _mm256_storeu_ps(dst + b * 32 + 8 * g,
                             _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
        }
    }
}

/* (q-8) in integers, then one multiply: the same rounding as the reference. */
static T_AVX2 void dq_q4_0(const void *src, float *dst, int64_t n)
{
    const gt_block_q4_0 *x = src;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i eight = _mm256_set1_epi32(8);
    for (int64_t b = 0; b < n / GT_QK4_0; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d));
        const __m128i raw = _mm_loadu_si128((const __m128i *)x[b].qs);
        const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int g = 0; g < 4; g++) {
            const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[g]), eight);
            _mm256_storeu_ps(dst + b * 32 + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(v)));
        }
    }
}

/* d*q + m as a multiply then an add (not an FMA), as the reference rounds. */
static T_AVX2 void dq_q4_1(const void *src, float *dst, int64_t n)
{
    const gt_block_q4_1 *x = src;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / GT_QK4_1; b++) {
        const __m256 d = _mm256_set1_ps(f16(x[b].d)), m = _mm256_set1_ps(f16(x[b].m));
        const __m128i raw = _mm_loadu_si128((const __m128i *)x[b].qs);
        const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int g = 0; g < 4; g++) {
            const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[g]));
            _mm256_storeu_ps(dst + b * 32 + 8 * g, _mm256_add_ps(_mm256_mul_ps(d, v), m));
        }
    }
}

static T_AVX2 void axpy(float a, const float *x, float *y, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static T_AVX2 void scale(const float *x, float a, float *y, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = a * x[i];
}

static T_AVX2 float sum_sq(const float *x, int64_t n) { return dot_f32(x, x, n); }

static inline T_AVX2 __m256 exp8(__m256 x)
{
    /* max(lo, x) and min(hi, x) return x when x is NaN (second operand). */
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static T_AVX2 float exp_sub_sum(float *x, int64_t n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum8(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    return sum;
}

static inline __attribute__((always_inline)) T_AVX2 __m256 silu8(__m256 x, __m256 b)
{
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(_mm256_mul_ps(x, b), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static inline __attribute__((always_inline)) T_AVX2 __m256 gelu8(__m256 x, __m256 b)
{
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 u2 = _mm256_mul_ps(_mm256_set1_ps(-2.0f * GT_CPU_GELU_K),
                                    _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
    return _mm256_div_ps(_mm256_mul_ps(x, b), _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(u2)));
}

/* t = f(a, b) 8 at a time, the last n % 8 through f as well (padded): an
 * element's result depends on its own inputs only, not on where a thread's
 * range ends. (A scalar tail with libm's expf gave other bits, so a row of
 * a batch split across threads differed from the row alone: serve
 * --parallel's answers then differed from serial ones on AVX2.) */
static inline __attribute__((always_inline)) T_AVX2 void map8(__m256 (*f)(__m256, __m256),
                                                             const float *a, const float *b,
                                                             float *t, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(t + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    if (i < n) {
        float pa[8] = {0}, pb[8] = {0}, pt[8];
        memcpy(pa, a + i, sizeof(float) * (size_t)(n - i));
        memcpy(pb, b + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(pt, f(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb)));
        memcpy(t + i, pt, sizeof(float) * (size_t)(n - i));
    }
}

static T_AVX2 void silu_mul(const float *a, const float *b, float *t, int64_t n) { map8(silu8, a, b, t, n); }

static T_AVX2 void gelu_mul(const float *a, const float *b, float *t, int64_t n) { map8(gelu8, a, b, t, n); }

bool gt_cpu_kernels_avx2(gt_cpu_kernels *k)
{
    gt_cpu_kernels_scalar(k); /* F32 dequant (memcpy) and anything not overridden */
    k->name = "avx2";
    k->quantize_act = quantize_act;
    k->qdot[GT_TYPE_Q8_0] = avx2_qdot_q8_0;
    k->qdot4[GT_TYPE_Q8_0] = avx2_qdot4_q8_0;
    k->qdot[GT_TYPE_Q4_0] = avx2_qdot_q4_0;
    k->qdot4[GT_TYPE_Q4_0] = avx2_qdot4_q4_0;
    k->qdot[GT_TYPE_Q4_1] = avx2_qdot_q4_1;
    k->qdot4[GT_TYPE_Q4_1] = avx2_qdot4_q4_1;
    k->qdot[GT_TYPE_Q5_0] = avx2_qdot_q5_0;
    k->qdot4[GT_TYPE_Q5_0] = avx2_qdot4_q5_0;
    k->qdot[GT_TYPE_Q4_K] = avx2_qdot_q4_K;
    k->qdot4[GT_TYPE_Q4_K] = avx2_qdot4_q4_K;
    k->qdot[GT_TYPE_Q6_K] = avx2_qdot_q6_K;
    k->qdot4[GT_TYPE_Q6_K] = avx2_qdot4_q6_K;
    k->fdot[GT_TYPE_F32] = fdot_f32;
    k->fdot[GT_TYPE_F16] = fdot_f16;
    k->fdot[GT_TYPE_BF16] = fdot_bf16;
    k->fdot[GT_TYPE_Q8_0] = fdot_q8_0;
    k->fdot4[GT_TYPE_Q8_0] = fdot4_q8_0;
    k->fdot[GT_TYPE_Q4_0] = fdot_q4_0;
    k->fdot[GT_TYPE_Q4_1] = fdot_q4_1;
    k->dequant[GT_TYPE_F16] = dq_f16;
    k->dequant[GT_TYPE_BF16] = dq_bf16;
    k->dequant[GT_TYPE_Q8_0] = dq_q8_0;
    k->dequant[GT_TYPE_Q4_0] = dq_q4_0;
    k->dequant[GT_TYPE_Q4_1] = dq_q4_1;
    k->fdot[GT_TYPE_Q5_0] = fdot_q5_0;
    k->fdot[GT_TYPE_Q5_1] = fdot_q5_1;
    k->fdot[GT_TYPE_IQ4_NL] = fdot_iq4_nl;
    k->dequant[GT_TYPE_Q5_0] = dq_q5_0;
    k->dequant[GT_TYPE_Q5_1] = dq_q5_1;
    k->dequant[GT_TYPE_IQ4_NL] = dq_iq4_nl;
    gt_cpu_kquants_avx2(k);
    k->dot_f32 = dot_f32;
    k->axpy = axpy;
    k->scale = scale;
    k->sum_sq = sum_sq;
    k->exp_sub_sum = exp_sub_sum;
    k->silu_mul = silu_mul;
    k->gelu_mul = gelu_mul;
    k->igemm = gt_cpu_igemm_avx2;
    k->pk[GT_TYPE_Q4_0] = avx2_pk_q4_0;
    k->pk[GT_TYPE_Q5_0] = avx2_pk_q5_0;
    k->pk[GT_TYPE_Q8_0] = avx2_pk_q8_0;
    return true;
}

#else

bool gt_cpu_kernels_avx2(gt_cpu_kernels *k)
{
    (void)k;
    return false;
}

#endif
