/* cpu_qdot.h: the Q8-activation quantized dot kernels (GT_CPU_ACT=q8) and
 * the scale-gathering helpers that the f32-activation kernels of both SIMD
 * tables share, written once and compiled twice:
 * included by cpu_kernels_avx2.c (vpmaddubsw + vpmaddwd) and by
 * cpu_kernels_avx512.c (VNNI vpdpbusd on 256-bit registers). The includer
 * defines
 *   QD_T            the function target attribute
 *   QD_NAME(x)      a name prefix for the generated functions
 *   QD_DOTUS(u, s)  __m256i of 8 int32: sums of 4 products u8*s8 each
 *
 * Design (what limits these loops is ports and memory, not arithmetic):
 *   - per block, the combined scale dw*da is needed as a broadcast. Doing the
 *     f16 conversion, multiply and broadcast per block costs several shuffle
 *     uops (one port) per 32 weights. Instead the scales of 8 blocks are
 *     gathered at once (vpgatherdd at the block stride), converted with one
 *     vcvtph2ps, multiplied by the activation scales and stored to a small
 *     array; the main loop then broadcasts each from memory, which is a
 *     plain load. The Q4 offsets (sum over blocks of dw*s or m*s) fall out
 *     of the same vectors.
 *   - Q4 nibbles: a 128-bit broadcast load puts the 16 bytes in both halves
 *     and one variable shift (0 bits low half, 4 bits high half) plus a mask
 *     gives the 32 values in element order: no lane inserts.
 *   - 256-bit registers, one block each: on current Intel cores 512-bit
 *     integer work runs on two ports and 256-bit on three, and the loop is
 *     not wide enough for 512 bits to pay.
 * Blocks are processed in chunks of QD_CHUNK so the scale array lives on
 * the stack for any row length. */

#define QD_CHUNK 64

/* 8 f16 values at p, p+stride, ... (bytes) as floats. */
static inline QD_T __m256 QD_NAME(gather_f16)(const void *p, int stride)
{
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(stride));
    /* Each gathered dword holds the f16 in its low half (little endian). */
    const __m256i g = _mm256_i32gather_epi32((const int *)p, idx, 1);
    const __m256i lo = _mm256_and_si256(g, _mm256_set1_epi32(0xFFFF));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

static inline QD_T float QD_NAME(hsum)(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline QD_T float QD_NAME(f16)(uint16_t h) { return _cvtsh_ss(h); }

/* c[j] = the f16 at blk + j*stride as a float, for n blocks: the per-block
 * scales of a chunk, converted 8 at a time, for kernels that then broadcast
 * them from memory (a plain load) instead of converting one per block. */
static inline QD_T void QD_NAME(f16s)(const uint8_t *blk, int stride, int64_t n, float *c)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(c + j, QD_NAME(gather_f16)(blk + j * stride, stride));
    for (; j < n; j++) {
        uint16_t h;
        memcpy(&h, blk + j * stride, sizeof h);
        c[j] = QD_NAME(f16)(h);
    }
}

/* Two f16 values side by side at blk + j*stride (Q4_1's d and m): lo[j]
 * the first, hi[j] the second, from one gather of the dword they share. */
static inline QD_T void QD_NAME(f16s_pair)(const uint8_t *blk, int stride, int64_t n, float *lo,
                                           float *hi)
{
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(stride));
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i g = _mm256_i32gather_epi32((const int *)(blk + j * stride), idx, 1);
        const __m256i a = _mm256_and_si256(g, _mm256_set1_epi32(0xFFFF));
        const __m256i b = _mm256_srli_epi32(g, 16);
        /* packus per 128-bit lane: [a0-3 b0-3 | a4-7 b4-7]; then qwords 0,2 | 1,3. */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_ps(lo + j, _mm256_cvtph_ps(_mm256_castsi256_si128(p)));
        _mm256_storeu_ps(hi + j, _mm256_cvtph_ps(_mm256_extracti128_si256(p, 1)));
    }
    for (; j < n; j++) {
        uint16_t h[2];
        memcpy(h, blk + j * stride, sizeof h);
        lo[j] = QD_NAME(f16)(h[0]);
        hi[j] = QD_NAME(f16)(h[1]);
    }
}

/* As f16s, and cs[j] = k * c[j] from the same registers. (Computing cs in a
 * second pass over c reads back the 32-byte stores with differently placed
 * loads, and the failed store forwarding cost Q4_0 rows ~3 cycles a block.) */
static inline QD_T void QD_NAME(f16s_times)(const uint8_t *blk, int stride, int64_t n, float k,
                                            float *c, float *cs)
{
    const __m256 vk = _mm256_set1_ps(k);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = QD_NAME(gather_f16)(blk + j * stride, stride);
        _mm256_storeu_ps(c + j, v);
        _mm256_storeu_ps(cs + j, _mm256_mul_ps(v, vk));
    }
    for (; j < n; j++) {
        uint16_t h;
        memcpy(&h, blk + j * stride, sizeof h);
        c[j] = QD_NAME(f16)(h);
        cs[j] = k * c[j];
    }
}

static inline QD_T __m256i QD_NAME(nibbles)(const uint8_t *qs)
{
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i sh = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(sh, _mm256_set1_epi8(0x0F));
}

/* Q5_0's fifth bits (bit j of the 4 qh bytes is element j's) as 0x10 in
 * byte j. */
static inline QD_T __m256i QD_NAME(fifth_bits)(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    return gt_cpu_bits_0x10(h);
}

/* The weight types with a Q8-activation dot, as rows() takes them. */
enum { QD_Q8_0, QD_Q4_0, QD_Q4_1, QD_Q5_0 };

/* A block's 32 weights as bytes: Q8_0's int8 as stored, Q4's nibbles,
 * Q5_0's nibbles with the fifth bit (qh sits 4 bytes before qs). */
static inline __attribute__((always_inline)) QD_T __m256i QD_NAME(wbytes)(const int type,
                                                                         const uint8_t *qs)
{
    if (type == QD_Q8_0)
        return _mm256_loadu_si256((const __m256i *)qs);
    if (type == QD_Q5_0)
        return _mm256_or_si256(QD_NAME(nibbles)(qs), QD_NAME(fifth_bits)(qs - 4));
    return QD_NAME(nibbles)(qs);
}

/* The block's integer products with the activations at qa, summed by 4:
 * Q8_0 takes the sign trick (|w| unsigned times sign(w)*a). */
static inline __attribute__((always_inline)) QD_T __m256i QD_NAME(prod)(const int type, __m256i u,
                                                                       const int8_t *qa)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)qa);
    return type == QD_Q8_0 ? QD_DOTUS(_mm256_sign_epi8(u, u), _mm256_sign_epi8(a, u))
                           : QD_DOTUS(u, a);
}

/* out[t] = the dot of one weight row (nb blocks of `type`) with each of
 * the R activation rows q[t] (scales d[t], sums s[t]). Written once for
 * R = 1 (qdot) and R = 4 (qdot4) and inlined with both constants, so every
 * row goes through the same operations in the same order whatever R is:
 * a row decoded beside three others gets the bytes it gets alone (batch
 * invariance), while the weight blocks are loaded, unpacked and their
 * scales converted once for all R rows.
 *
 * Per chunk of up to QD_CHUNK blocks: c[t][j] = dw[j] * d[t][j] (the
 * weight scales gathered 8 at a time, see f16s) and, for Q4_0/Q4_1/Q5_0,
 * the offset sum of dw*s (Q4_0: sum (q-8)*a = sum q*a - 8*sum a; Q5_0
 * likewise with 16) or m*s (Q4_1).
 * Then each block's integer products are scaled by c from memory, even
 * blocks into acc0 and odd ones into acc1 (two chains hide the FMA's
 * latency). */
static inline __attribute__((always_inline)) QD_T void
QD_NAME(rows)(const int type, const void *w, const int8_t *const *q, const float *const *d,
              const float *const *s, int64_t nb, const int R, float *out)
{
    const int stride = type == QD_Q8_0   ? (int)sizeof(gt_block_q8_0)
                       : type == QD_Q4_0 ? (int)sizeof(gt_block_q4_0)
                       : type == QD_Q5_0 ? (int)sizeof(gt_block_q5_0)
                                         : (int)sizeof(gt_block_q4_1);
    const int qoff = type == QD_Q8_0   ? (int)offsetof(gt_block_q8_0, qs)
                     : type == QD_Q4_0 ? (int)offsetof(gt_block_q4_0, qs)
                     : type == QD_Q5_0 ? (int)offsetof(gt_block_q5_0, qs)
                                       : (int)offsetof(gt_block_q4_1, qs);
    const int moff = type == QD_Q4_1 ? (int)offsetof(gt_block_q4_1, m) : -1;
    const bool offs = type != QD_Q8_0;
    const uint8_t *x = w;
    float c[4][QD_CHUNK], off[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    __m256 acc0[4], acc1[4];
    for (int t = 0; t < R; t++)
        acc0[t] = acc1[t] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += QD_CHUNK) {
        const int64_t n = nb - b0 < QD_CHUNK ? nb - b0 : QD_CHUNK;
        const uint8_t *blk = x + b0 * stride;
        __m256 o[4];
        float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int t = 0; t < R; t++)
            o[t] = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) {
            const __m256 dw = QD_NAME(gather_f16)(blk + j * stride, stride);
            const __m256 mw = moff >= 0 ? QD_NAME(gather_f16)(blk + j * stride + moff, stride) : dw;
            for (int t = 0; t < R; t++) {
                _mm256_storeu_ps(c[t] + j, _mm256_mul_ps(dw, _mm256_loadu_ps(d[t] + b0 + j)));
                if (offs)
                    o[t] = _mm256_fmadd_ps(mw, _mm256_loadu_ps(s[t] + b0 + j), o[t]);
            }
        }
        for (; j < n; j++) {
            uint16_t h;
            memcpy(&h, blk + j * stride, sizeof h);
            const float dw = QD_NAME(f16)(h);
            float mw = dw;
            if (moff >= 0) {
                memcpy(&h, blk + j * stride + moff, sizeof h);
                mw = QD_NAME(f16)(h);
            }
            for (int t = 0; t < R; t++) {
                c[t][j] = dw * d[t][b0 + j];
                if (offs)
                    tail[t] += mw * s[t][b0 + j];
            }
        }
        if (offs)
            for (int t = 0; t < R; t++)
                off[t] += QD_NAME(hsum)(o[t]) + tail[t];
        for (j = 0; j + 2 <= n; j += 2) {
            const uint8_t *w0 = blk + j * stride + qoff;
            const __m256i u0 = QD_NAME(wbytes)(type, w0), u1 = QD_NAME(wbytes)(type, w0 + stride);
            for (int t = 0; t < R; t++) {
                const int8_t *qa = q[t] + (b0 + j) * GT_CPU_QK;
                const __m256i p0 = QD_NAME(prod)(type, u0, qa);
                const __m256i p1 = QD_NAME(prod)(type, u1, qa + GT_CPU_QK);
                acc0[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(c[t] + j), _mm256_cvtepi32_ps(p0), acc0[t]);
                acc1[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(c[t] + j + 1), _mm256_cvtepi32_ps(p1),
                                          acc1[t]);
            }
        }
        if (j < n) {
            const __m256i u0 = QD_NAME(wbytes)(type, blk + j * stride + qoff);
            for (int t = 0; t < R; t++) {
                const __m256i p0 = QD_NAME(prod)(type, u0, q[t] + (b0 + j) * GT_CPU_QK);
                acc0[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(c[t] + j), _mm256_cvtepi32_ps(p0), acc0[t]);
            }
        }
    }
    for (int t = 0; t < R; t++) {
        const float v = QD_NAME(hsum)(_mm256_add_ps(acc0[t], acc1[t]));
        out[t] = type == QD_Q4_0   ? v - 8.0f * off[t]
                 : type == QD_Q5_0 ? v - 16.0f * off[t]
                 : type == QD_Q4_1 ? v + off[t]
                                   : v;
    }
}

/* qdot_TYPE and qdot4_TYPE: ROWS (rows or krows) inlined with R = 1 and 4. */
#define QD_ONE_AND_FOUR(TYPE, KIND, ROWS)                                                         \
    static QD_T float QD_NAME(qdot_##TYPE)(const void *w, const int8_t *q, const float *d,       \
                                          const float *s, int64_t nb)                            \
    {                                                                                             \
        float out;                                                                                \
        QD_NAME(ROWS)(KIND, w, &q, &d, &s, nb, 1, &out);                                          \
        return out;                                                                               \
    }                                                                                             \
    static QD_T void QD_NAME(qdot4_##TYPE)(const void *w, const int8_t *const q[4],              \
                                           const float *const d[4], const float *const s[4],     \
                                           int64_t nb, float out[4])                             \
    {                                                                                             \
        QD_NAME(ROWS)(KIND, w, q, d, s, nb, 4, out);                                              \
    }

QD_ONE_AND_FOUR(q8_0, QD_Q8_0, rows)
QD_ONE_AND_FOUR(q4_0, QD_Q4_0, rows)
QD_ONE_AND_FOUR(q4_1, QD_Q4_1, rows)
QD_ONE_AND_FOUR(q5_0, QD_Q5_0, rows)

/* ---- K-quants: Q4_K and Q6_K ------------------------------------------------
 * A super-block of 256 is 8 runs of 32, and run i meets activation block
 * 8*sb + i; their scales are per 32 (the activations' d) and per run
 * (Q4_K: 6-bit sc and min) or per 16 (Q6_K: int8), so:
 *   Q4_K  sum_i d*sc_i*da_i * sum(u*a) - dmin * sum_i mn_i * s_i
 *         (u the nibbles 0..15; s = da * sum a, as for Q4_0's offset);
 *   Q6_K  sum_i d*da_i * (sc_2i * sum_lo16((u-32)*a) + sc_2i+1 * sum_hi16)
 *         (u-32 in -32..31 takes Q8_0's sign trick; the group scales are
 *         integer multiplies, exact).
 * Per super-block c[t][i] (the float factor of run i) is formed 8 at a
 * time and each run's integer sum is converted once and FMAed with it,
 * even runs into acc0, odd ones into acc1, the same for any R. */
enum { QD_Q4_K = 8, QD_Q6_K };

static inline __attribute__((always_inline)) QD_T void
QD_NAME(krows)(const int type, const void *w, const int8_t *const *q, const float *const *d,
               const float *const *s, int64_t nb, const int R, float *out)
{
    const int64_t nsb = nb / 8;
    __m256 acc0[4], acc1[4], offv[4];
    for (int t = 0; t < R; t++)
        acc0[t] = acc1[t] = offv[t] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        float c[4][8];
        __m256i sc32[2]; /* Q6_K: the 16 group scales as int32 */
        const uint8_t *qs = NULL, *ql = NULL, *qh = NULL;
        if (type == QD_Q4_K) {
            const gt_block_q4_K *b = (const gt_block_q4_K *)w + sb;
            uint8_t u[16];
            gt_cpu_q4k_scales(b->scales, u);
            const __m128i v = _mm_loadu_si128((const __m128i *)u);
            const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(QD_NAME(f16)(b->d)),
                                            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)));
            const __m256 mn = _mm256_mul_ps(_mm256_set1_ps(QD_NAME(f16)(b->dmin)),
                                            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))));
            for (int t = 0; t < R; t++) {
                _mm256_storeu_ps(c[t], _mm256_mul_ps(sc, _mm256_loadu_ps(d[t] + sb * 8)));
                offv[t] = _mm256_fmadd_ps(mn, _mm256_loadu_ps(s[t] + sb * 8), offv[t]);
            }
            qs = b->qs;
        } else {
            const gt_block_q6_K *b = (const gt_block_q6_K *)w + sb;
            const __m128i v = _mm_loadu_si128((const __m128i *)b->scales);
            sc32[0] = _mm256_cvtepi8_epi32(v);
            sc32[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8));
            const __m256 dw = _mm256_set1_ps(QD_NAME(f16)(b->d));
            for (int t = 0; t < R; t++)
                _mm256_storeu_ps(c[t], _mm256_mul_ps(dw, _mm256_loadu_ps(d[t] + sb * 8)));
            ql = b->ql;
            qh = b->qh;
        }
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        {
            __m256i u, gs = _mm256_setzero_si256();
            if (type == QD_Q4_K) {
                u = gt_cpu_nibbles_k(qs, i);
            } else {
                u = _mm256_sub_epi8(gt_cpu_q6k_u(ql, qh, i), _mm256_set1_epi8(32));
                /* lanes 0-3: group 2i's scale, 4-7: group 2i+1's */
                const int g = 2 * (i % 4);
                gs = _mm256_permutevar8x32_epi32(sc32[i / 4], _mm256_setr_epi32(g, g, g, g, g + 1, g + 1,
                                                                                 g + 1, g + 1));
            }
            for (int t = 0; t < R; t++) {
                const int8_t *qa = q[t] + (sb * 8 + i) * GT_CPU_QK;
                __m256i p = QD_NAME(prod)(type == QD_Q4_K ? QD_Q4_0 : QD_Q8_0, u, qa);
                if (type == QD_Q6_K)
                    p = _mm256_mullo_epi32(p, gs);
                const __m256 ci = _mm256_broadcast_ss(c[t] + i), pf = _mm256_cvtepi32_ps(p);
                if (i & 1)
                    acc1[t] = _mm256_fmadd_ps(ci, pf, acc1[t]);
                else
                    acc0[t] = _mm256_fmadd_ps(ci, pf, acc0[t]);
            }
        }
    }
    for (int t = 0; t < R; t++) {
        const float v = QD_NAME(hsum)(_mm256_add_ps(acc0[t], acc1[t]));
        out[t] = type == QD_Q4_K ? v - QD_NAME(hsum)(offv[t]) : v;
    }
}

QD_ONE_AND_FOUR(q4_K, QD_Q4_K, krows)
QD_ONE_AND_FOUR(q6_K, QD_Q6_K, krows)

#undef QD_ONE_AND_FOUR
