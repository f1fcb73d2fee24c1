/* cpu_igemm_avx2.c: the AVX2 kernel of the integer GEMM (cpu_igemm.c has
 * the design and the panel layout).
 *
 * Without VNNI there is no u8 x s8 dot with 32-bit sums: vpmaddubsw makes
 * 16-bit pair sums that saturate past 32767, so the +128 weights cannot be
 * used as they are (255 * 127 * 2 overflows). As in cpu_qdot.h the weights
 * are made signed again (xor 0x80), and |w| (unsigned) meets the
 * activation with w's sign (vpsignb): |w| <= 128 and |a| <= 127 keep the
 * pair sums within 16 bits; vpmaddwd with ones widens them to int32. The
 * panel's 16 rows are two halves of 8 (one ymm per 4-weight group); 4
 * activation rows at once (4 float accumulators, 4 int32 sums and the
 * weight registers fit the 16 ymm registers). */
#include "cpu.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TILE 4

static inline __attribute__((always_inline)) T_AVX2 void tile(const gt_cpu_ig_block *w,
                                                              const gt_cpu_act8 *a, int64_t i,
                                                              const int n, int h, float *out,
                                                              int64_t ldo, __m256i mask)
{
    const int64_t k = a->k, nb = a->nb;
    const int8_t *q = a->q + i * k;
    const float *d = a->d + i * nb, *s = a->s + i * nb;
    const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8((char)0x80);
    __m256 acc[TILE];
    for (int t = 0; t < n; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i sum[TILE];
        for (int t = 0; t < n; t++)
            sum[t] = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i ws =
                _mm256_xor_si256(_mm256_load_si256((const __m256i *)w[b].q[g][8 * h]), bias);
            const __m256i wa = _mm256_abs_epi8(ws);
            for (int t = 0; t < n; t++) {
                int32_t av;
                memcpy(&av, q + t * k + b * 32 + 4 * g, sizeof av);
                const __m256i sa = _mm256_sign_epi8(_mm256_set1_epi32(av), ws);
                sum[t] = _mm256_add_epi32(sum[t],
                                          _mm256_madd_epi16(_mm256_maddubs_epi16(wa, sa), ones));
            }
        }
        const __m256 wd = _mm256_load_ps(w[b].d + 8 * h), wm = _mm256_load_ps(w[b].m + 8 * h);
        for (int t = 0; t < n; t++) {
            const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(sum[t]), wd);
            acc[t] = _mm256_fmadd_ps(f, _mm256_set1_ps(d[t * nb + b]), acc[t]);
            acc[t] = _mm256_fnmadd_ps(wm, _mm256_set1_ps(s[t * nb + b]), acc[t]);
        }
    }
    for (int t = 0; t < n; t++)
        _mm256_maskstore_ps(out + (i + t) * ldo + 8 * h, mask, acc[t]);
}

T_AVX2 void gt_cpu_igemm_avx2(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0,
                              int64_t i1, float *out, int64_t ldo, int n_rows)
{
    for (int h = 0; h < 2 && 8 * h < n_rows; h++) {
        const int left = n_rows - 8 * h;
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        int64_t i = i0;
        for (; i + TILE <= i1; i += TILE)
            tile(w, a, i, TILE, h, out, ldo, mask);
        for (; i < i1; i++)
            tile(w, a, i, 1, h, out, ldo, mask);
    }
}

#else

void gt_cpu_igemm_avx2(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                       float *out, int64_t ldo, int n_rows)
{
    gt_cpu_igemm_scalar(w, a, i0, i1, out, ldo, n_rows);
}

#endif
