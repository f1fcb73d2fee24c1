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

/* c[j] = dw[j] * d[j] for n blocks (scale at byte 0 of each block, stride
 * bytes apart); returns sum of dw[j]*s[j] when s, or of m[j]*s[j] when
 * moff >= 0 (Q4_1: m at byte moff). */
static inline QD_T float QD_NAME(scales)(const uint8_t *blk, int stride, int moff, const float *d,
                                        const float *s, int64_t n, float *c)
{
    __m256 off = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 dw = QD_NAME(gather_f16)(blk + j * stride, stride);
        _mm256_storeu_ps(c + j, _mm256_mul_ps(dw, _mm256_loadu_ps(d + j)));
        if (moff >= 0)
            off = _mm256_fmadd_ps(QD_NAME(gather_f16)(blk + j * stride + moff, stride),
                                  _mm256_loadu_ps(s + j), off);
        else if (s)
            off = _mm256_fmadd_ps(dw, _mm256_loadu_ps(s + j), off);
    }
    float tail = 0.0f;
    for (; j < n; j++) {
        uint16_t h;
        memcpy(&h, blk + j * stride, sizeof h);
        const float dw = QD_NAME(f16)(h);
        c[j] = dw * d[j];
        if (moff >= 0) {
            memcpy(&h, blk + j * stride + moff, sizeof h);
            tail += QD_NAME(f16)(h) * s[j];
        } else if (s) {
            tail += dw * s[j];
        }
    }
    return QD_NAME(hsum)(off) + tail;
}

static inline QD_T __m256i QD_NAME(nibbles)(const uint8_t *qs)
{
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i sh = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(sh, _mm256_set1_epi8(0x0F));
}

static QD_T float QD_NAME(qdot_q8_0)(const void *w, const int8_t *q, const float *d,
                                    const float *s, int64_t nb)
{
    (void)s;
    const gt_block_q8_0 *x = w;
    float c[QD_CHUNK];
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += QD_CHUNK) {
        const int64_t n = nb - b0 < QD_CHUNK ? nb - b0 : QD_CHUNK;
        QD_NAME(scales)((const uint8_t *)(x + b0), (int)sizeof *x, -1, d + b0, NULL, n, c);
        const int8_t *qa = q + b0 * GT_CPU_QK;
        int64_t j = 0;
        for (; j + 2 <= n; j += 2) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)x[b0 + j].qs);
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)x[b0 + j + 1].qs);
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa + j * GT_CPU_QK));
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(qa + (j + 1) * GT_CPU_QK));
            const __m256i p0 = QD_DOTUS(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(a0, w0));
            const __m256i p1 = QD_DOTUS(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(a1, w1));
            acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(c + j), _mm256_cvtepi32_ps(p0), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(c + j + 1), _mm256_cvtepi32_ps(p1), acc1);
        }
        if (j < n) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)x[b0 + j].qs);
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa + j * GT_CPU_QK));
            const __m256i p0 = QD_DOTUS(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(a0, w0));
            acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(c + j), _mm256_cvtepi32_ps(p0), acc0);
        }
    }
    return QD_NAME(hsum)(_mm256_add_ps(acc0, acc1));
}

/* Q4_0 and Q4_1 share the loop; they differ in block type and offset term. */
#define QD_Q4_BODY(BLOCK, MOFF, SIGN)                                                            \
    const BLOCK *x = w;                                                                          \
    float c[QD_CHUNK];                                                                           \
    float off = 0.0f;                                                                            \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                               \
    for (int64_t b0 = 0; b0 < nb; b0 += QD_CHUNK) {                                              \
        const int64_t n = nb - b0 < QD_CHUNK ? nb - b0 : QD_CHUNK;                               \
        off += QD_NAME(scales)((const uint8_t *)(x + b0), (int)sizeof *x, MOFF, d + b0, s + b0, \
                               n, c);                                                            \
        const int8_t *qa = q + b0 * GT_CPU_QK;                                                   \
        int64_t j = 0;                                                                           \
        for (; j + 2 <= n; j += 2) {                                                             \
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa + j * GT_CPU_QK));       \
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(qa + (j + 1) * GT_CPU_QK)); \
            const __m256i p0 = QD_DOTUS(QD_NAME(nibbles)(x[b0 + j].qs), a0);                     \
            const __m256i p1 = QD_DOTUS(QD_NAME(nibbles)(x[b0 + j + 1].qs), a1);                 \
            acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(c + j), _mm256_cvtepi32_ps(p0), acc0);    \
            acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(c + j + 1), _mm256_cvtepi32_ps(p1), acc1); \
        }                                                                                        \
        if (j < n) {                                                                             \
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qa + j * GT_CPU_QK));       \
            const __m256i p0 = QD_DOTUS(QD_NAME(nibbles)(x[b0 + j].qs), a0);                     \
            acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(c + j), _mm256_cvtepi32_ps(p0), acc0);    \
        }                                                                                        \
    }                                                                                            \
    return QD_NAME(hsum)(_mm256_add_ps(acc0, acc1)) SIGN off;

static QD_T float QD_NAME(qdot_q4_0)(const void *w, const int8_t *q, const float *d,
                                    const float *s, int64_t nb)
{
    QD_Q4_BODY(gt_block_q4_0, -1, -8.0f *)
}

static QD_T float QD_NAME(qdot_q4_1)(const void *w, const int8_t *q, const float *d,
                                    const float *s, int64_t nb)
{
    QD_Q4_BODY(gt_block_q4_1, (int)offsetof(gt_block_q4_1, m), +)
}

#undef QD_Q4_BODY
