/* cpu_packed_simd.h: the packed Q4_0, Q5_0 and Q8_0 few-row kernels (cpu_packed.c has the
 * design, cpu.h the layout), written once and compiled twice: included by
 * cpu_kernels_avx2.c and cpu_kernels_avx512.c. The includer defines
 *   PK_T                 the function target attribute
 *   PK_NAME(x)           a name prefix
 *   PK_DPBUSD(acc, u, s) acc + the sums of 4 products u8*s8 per int32 lane
 *   PK_Q8_SIGNED         1 where PK_DPBUSD sums pairs in 16 bits first
 *                        (AVX2's vpmaddubsw saturates at 255 * 127 * 2):
 *                        Q8_0 then multiplies |w| by sign(w) * a, unbiased
 *
 * One ymm register is the panel's 8 rows, one int32 or float lane each.
 * Per Q4_0 block: 4 loads of 8 rows x 4 quant bytes; their low nibbles
 * are weights 4g..4g+3 and their high nibbles 16+4g..16+4g+3 of each row,
 * so 8 multiply-adds against broadcast activation bytes give every row's
 * exact block sum; the activations' -8 * sum q starts it. Q5_0 ORs each
 * nibble register with its fifth bits (two 32-bit masks per group,
 * expanded to 0x10 bytes) and starts at -16 * sum q. Per Q8_0 block:
 * 8 loads of biased bytes, 8 multiply-adds, started at -128 * sum q. Then one convert,
 * one multiply by the 8 rows' scales and one FMA with the activation
 * scale. TILE activation rows share each unpacked weight register. */

#define PK_TILE 4

/* Activation bytes at+4j of row t, broadcast to every lane. */
static inline __attribute__((always_inline)) PK_T __m256i PK_NAME(pk_a4)(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* The panel kinds pk_tile takes. */
enum { PK_Q4_0, PK_Q5_0, PK_Q8_0 };

/* Q8_0 panels: 8 groups of biased bytes; Q4_0 and Q5_0: 4 groups of
 * nibble pairs (Q5_0 with their fifth bits). */
static inline __attribute__((always_inline)) PK_T void
PK_NAME(pk_tile)(const int kind, const void *wv, int64_t nb, const gt_cpu_act8 *a, int64_t i,
                 const int n, float *out, int64_t ldo, int n_rows)
{
    const bool q8 = kind == PK_Q8_0;
    const size_t bb = kind == PK_Q4_0   ? sizeof(gt_cpu_pk_q4_0)
                      : kind == PK_Q5_0 ? sizeof(gt_cpu_pk_q5_0)
                                        : sizeof(gt_cpu_pk_q8_0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[PK_TILE];
    for (int t = 0; t < n; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i sum[PK_TILE];
        const char *blk = (const char *)wv + (size_t)b * bb;
        const gt_cpu_pk_q4_0 *w4 = (const gt_cpu_pk_q4_0 *)blk;
        const gt_cpu_pk_q5_0 *w5 = (const gt_cpu_pk_q5_0 *)blk;
        const gt_cpu_pk_q8_0 *w8 = (const gt_cpu_pk_q8_0 *)blk;
        for (int t = 0; t < n; t++) { /* -128 * sum q; Q4_0's offset 8 takes -8 * sum q, Q5_0's -16 */
            const int32_t c = a->c[(i + t) * a->nb + b];
            sum[t] = _mm256_set1_epi32(q8 ? (PK_Q8_SIGNED ? 0 : c) : kind == PK_Q5_0 ? c / 8 : c / 16);
        }
        const int8_t *q0 = a->q + i * a->k + b * 32;
        if (q8) {
            for (int g = 0; g < 8; g++) {
                const __m256i u = _mm256_loadu_si256((const __m256i *)w8->q[g]);
                if (PK_Q8_SIGNED) { /* |w| times sign(w) * a: no 16-bit saturation */
                    const __m256i sw = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
                    const __m256i aw = _mm256_sign_epi8(sw, sw);
                    for (int t = 0; t < n; t++)
                        sum[t] = PK_DPBUSD(sum[t], aw,
                                           _mm256_sign_epi8(PK_NAME(pk_a4)(q0 + t * a->k + 4 * g), sw));
                } else {
                    for (int t = 0; t < n; t++)
                        sum[t] = PK_DPBUSD(sum[t], u, PK_NAME(pk_a4)(q0 + t * a->k + 4 * g));
                }
            }
        } else {
            for (int g = 0; g < 4; g++) {
                /* Q5_0's q has Q4_0's layout */
                const __m256i raw = _mm256_loadu_si256((const __m256i *)w4->q[g]);
                __m256i lo = _mm256_and_si256(raw, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                if (kind == PK_Q5_0) {
                    lo = _mm256_or_si256(lo, gt_cpu_bits_0x10(w5->h[g][0]));
                    hi = _mm256_or_si256(hi, gt_cpu_bits_0x10(w5->h[g][1]));
                }
                for (int t = 0; t < n; t++) {
                    sum[t] = PK_DPBUSD(sum[t], lo, PK_NAME(pk_a4)(q0 + t * a->k + 4 * g));
                    sum[t] = PK_DPBUSD(sum[t], hi, PK_NAME(pk_a4)(q0 + t * a->k + 16 + 4 * g));
                }
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk)); /* d[] comes first */
        for (int t = 0; t < n; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum[t]), dw),
                                     _mm256_set1_ps(a->d[(i + t) * a->nb + b]), acc[t]);
    }
    for (int t = 0; t < n; t++) {
        if (n_rows == GT_CPU_PK_ROWS) {
            _mm256_storeu_ps(out + (i + t) * ldo, acc[t]);
        } else {
            float v[GT_CPU_PK_ROWS];
            _mm256_storeu_ps(v, acc[t]);
            memcpy(out + (i + t) * ldo, v, sizeof(float) * (size_t)n_rows);
        }
    }
}

static inline __attribute__((always_inline)) PK_T void
PK_NAME(pk_rows)(const int kind, const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0,
                 int64_t i1, float *out, int64_t ldo, int n_rows)
{
    int64_t i = i0;
    for (; i + PK_TILE <= i1; i += PK_TILE)
        PK_NAME(pk_tile)(kind, w, nb, a, i, PK_TILE, out, ldo, n_rows);
    for (; i < i1; i++)
        PK_NAME(pk_tile)(kind, w, nb, a, i, 1, out, ldo, n_rows);
}

static PK_T void PK_NAME(pk_q4_0)(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0,
                                  int64_t i1, float *out, int64_t ldo, int n_rows)
{
    PK_NAME(pk_rows)(PK_Q4_0, w, nb, a, i0, i1, out, ldo, n_rows);
}

static PK_T void PK_NAME(pk_q5_0)(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0,
                                  int64_t i1, float *out, int64_t ldo, int n_rows)
{
    PK_NAME(pk_rows)(PK_Q5_0, w, nb, a, i0, i1, out, ldo, n_rows);
}

static PK_T void PK_NAME(pk_q8_0)(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0,
                                  int64_t i1, float *out, int64_t ldo, int n_rows)
{
    PK_NAME(pk_rows)(PK_Q8_0, w, nb, a, i0, i1, out, ldo, n_rows);
}

#undef PK_TILE
