/* cpu_igemm_avx512.c: the AVX-512 VNNI kernel of the integer GEMM
 * (cpu_igemm.c has the design and the panel layout).
 *
 * One zmm register holds 4 consecutive weights of each of the panel's 16
 * rows (one 64-byte load of gt_cpu_ig_block.q[g]); one activation row's 4
 * matching bytes are broadcast from memory as the other operand, so one
 * vpdpbusd adds 64 products into the 16 rows' int32 sums. vpdpbusd wants
 * unsigned x signed bytes: the weights are stored +128 (unsigned), the
 * activations stay signed, and each activation block's sum starts at
 * -128 * sum(q_a) (gt_cpu_act8.c, broadcast from memory), so after the 8
 * groups of a block the int32 lanes hold exactly sum(w * q_a).
 *
 * TILE activation rows at once: each weight register is reused TILE times,
 * and TILE independent dependency chains hide vpdpbusd's latency (8
 * vpdpbusd per block and row in one chain). Per block and row the float
 * work is a convert, a multiply by the rows' d_w and an FMA with d_a (and
 * an FNMADD with m_w * s_a where the type has mins): 3 uops beside 8
 * vpdpbusd. TILE = 8: 8 float accumulators, 8 int32 sums, the weight
 * register and the two scale vectors fit the 32 zmm registers. */
#include "cpu.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define TILE 8

static inline __attribute__((always_inline)) T_512 void tile(const gt_cpu_ig_block *w,
                                                             const gt_cpu_act8 *a, int64_t i,
                                                             const int n, const bool mins,
                                                             float *out, int64_t ldo, __mmask16 mask)
{
    const int64_t k = a->k, nb = a->nb;
    const int8_t *q = a->q + i * k;
    const float *d = a->d + i * nb, *s = a->s + i * nb;
    const int32_t *c = a->c + i * nb;
    __m512 acc[TILE];
    for (int t = 0; t < n; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i sum[TILE];
        for (int t = 0; t < n; t++)
            sum[t] = _mm512_set1_epi32(c[t * nb + b]);
        for (int g = 0; g < 8; g++) {
            const __m512i wq = _mm512_load_si512(w[b].q[g]);
            for (int t = 0; t < n; t++) {
                int32_t av;
                memcpy(&av, q + t * k + b * 32 + 4 * g, sizeof av);
                sum[t] = _mm512_dpbusd_epi32(sum[t], wq, _mm512_set1_epi32(av));
            }
        }
        const __m512 wd = _mm512_load_ps(w[b].d);
        for (int t = 0; t < n; t++) {
            const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum[t]), wd);
            acc[t] = _mm512_fmadd_ps(f, _mm512_set1_ps(d[t * nb + b]), acc[t]);
        }
        if (mins) {
            const __m512 wm = _mm512_load_ps(w[b].m);
            for (int t = 0; t < n; t++)
                acc[t] = _mm512_fnmadd_ps(wm, _mm512_set1_ps(s[t * nb + b]), acc[t]);
        }
    }
    for (int t = 0; t < n; t++)
        _mm512_mask_storeu_ps(out + (i + t) * ldo, mask, acc[t]);
}

static T_512 void run(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                      float *out, int64_t ldo, __mmask16 mask, const bool mins)
{
    int64_t i = i0;
    for (; i + TILE <= i1; i += TILE)
        tile(w, a, i, TILE, mins, out, ldo, mask);
    for (; i < i1; i++)
        tile(w, a, i, 1, mins, out, ldo, mask);
}

T_512 void gt_cpu_igemm_avx512(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0,
                               int64_t i1, float *out, int64_t ldo, int n_rows)
{
    const __mmask16 mask = (__mmask16)(n_rows >= 16 ? 0xFFFF : (1u << n_rows) - 1);
    /* Mins in any of the panel's blocks (Q4_K) take the variant with the
     * FNMADD; the others skip it. */
    bool mins = false;
    for (int64_t b = 0; b < a->nb && !mins; b++)
        for (int r = 0; r < GT_CPU_IG_ROWS; r++)
            mins |= w[b].m[r] != 0.0f;
    if (mins)
        run(w, a, i0, i1, out, ldo, mask, true);
    else
        run(w, a, i0, i1, out, ldo, mask, false);
}

#else

void gt_cpu_igemm_avx512(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                         float *out, int64_t ldo, int n_rows)
{
    gt_cpu_igemm_scalar(w, a, i0, i1, out, ldo, n_rows);
}

#endif
