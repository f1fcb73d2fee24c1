/* quant_k.c: Q5_0, Q5_1 and the K-quants (Q2_K .. Q6_K, Q8_K): block layouts,
 * dequantization and this project's own quantizers.
 *
 * Dequantization is bit-exact to GGML's block formats: every product is
 * formed in f32 in the order the format's definition gives (scale first,
 * then times the quantized value, then the min subtracted), and this file is
 * compiled with -ffp-contract=off so that no compiler fuses a multiply and a
 * subtract into an FMA, which would round differently. tests/test_kquant.c
 * compares the result bit for bit with gguf-py, an implementation we did not
 * write.
 *
 * Where an element's bits live (p = position in the 256-element super-block):
 *   Q2_K/Q3_K low bits: byte qs[32*(p/128) + p%32], bits 2*((p%128)/32);
 *             sub-block (scale) p/16. Q3_K's third bit: hmask[p%32] bit
 *             4*(p/128) + (p%128)/32; stored value u = q + 4 in 0..7.
 *   Q4_K/Q5_K: byte qs[32*(p/64) + p%32], low nibble when (p%64) < 32;
 *             sub-block p/32. Q5_K's fifth bit: qh[p%32] bit p/32.
 *   Q6_K:     nibble of ql[64*(p/128) + p%32 + 32*((p%64)/32)], low when
 *             (p%128) < 64; two high bits in qh[32*(p/128) + p%32] at bits
 *             2*((p%128)/32); stored u = q + 32; sub-block p/16.
 *
 * The quantizers are not GGML's (nothing requires byte-identical K-quant
 * files): for each sub-block a small search over candidate scales, each
 * refined by least squares, picks the scale (and min) with the smallest
 * squared error; the sub-block scales are then quantized against the
 * super-block's f16 scale, and the values quantized again with the scales
 * as stored, so the error the file carries is the error measured. */
#include "gt/quant.h"
#include "quant_k.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Nearest integer (half away from zero), 0 for NaN, clamped to int range. */
static int near(float v)
{
    if (!(v == v))
        return 0;
    if (v > 1e9f)
        return 1000000000;
    if (v < -1e9f)
        return -1000000000;
    return (int)lroundf(v);
}

/* Best (scale, min) so that x ~ scale*q + min with q in 0..nmax and
 * min <= 0 (the formats store -min). Returns the squared error. */
static float fit_asym(const float *x, int n, int nmax, float *scale, float *min, uint8_t *q)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    if (lo > 0)
        lo = 0;
    *scale = 0;
    *min = lo;
    if (hi <= lo) {
        memset(q, 0, (size_t)n);
        return 0;
    }
    float best = INFINITY;
    uint8_t t[32];
    for (int k = -6; k <= 6; k++) {
        const float iscale = ((float)nmax + 0.1f * (float)k) / (hi - lo);
        double sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            t[i] = (uint8_t)clampi(near(iscale * (x[i] - lo)), 0, nmax);
            sq += t[i], sqq += (double)t[i] * t[i], sx += x[i], sqx += (double)t[i] * x[i];
        }
        const double det = n * sqq - sq * sq;
        if (det <= 0)
            continue;
        double s = (n * sqx - sq * sx) / det, b = (sqq * sx - sq * sqx) / det;
        if (b > 0) { /* the format cannot add: refit through 0 */
            b = 0;
            s = sqx / sqq;
        }
        if (s <= 0)
            continue;
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float e = (float)(s * t[i] + b) - x[i];
            err += e * e;
        }
        if (err < best) {
            best = err;
            *scale = (float)s;
            *min = (float)b;
            memcpy(q, t, (size_t)n);
        }
    }
    return best;
}

/* Best scale so that x ~ scale*q with q in -nneg..nneg-1 (the element of
 * largest magnitude lands on -nneg). Returns the scale (may be negative). */
static float fit_sym(const float *x, int n, int nneg)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax == 0)
        return 0;
    float best = INFINITY, scale = 0;
    for (int k = -6; k <= 6; k++) {
        const float iscale = -((float)nneg + 0.1f * (float)k) / max;
        double sqq = 0, sqx = 0;
        int t[32];
        for (int i = 0; i < n; i++) {
            t[i] = clampi(near(iscale * x[i]), -nneg, nneg - 1);
            sqq += (double)t[i] * t[i], sqx += (double)t[i] * x[i];
        }
        if (sqq == 0)
            continue;
        const float s = (float)(sqx / sqq);
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float e = s * (float)t[i] - x[i];
            err += e * e;
        }
        if (err < best) {
            best = err;
            scale = s;
        }
    }
    return scale;
}

/* Signed value of largest magnitude among v[0..n). */
static float max_signed(const float *v, int n)
{
    float amax = 0, m = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(v[i]) > amax) {
            amax = fabsf(v[i]);
            m = v[i];
        }
    return m;
}

static float max_of(const float *v, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* ---- Q5_0 / Q5_1 -------------------------------------------------------- */

void gt_dequantize_q5_0(const gt_block_q5_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GT_QK5_0) {
        const float d = gt_f16_to_f32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            const int lo = (x[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            const int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)(lo - 16) * d;
            y[j + 16] = (float)(hi - 16) * d;
        }
    }
}

void gt_dequantize_q5_1(const gt_block_q5_1 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GT_QK5_1) {
        const float d = gt_f16_to_f32(x[i].d), m = gt_f16_to_f32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            const int lo = (x[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            const int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)lo * d + m;
            y[j + 16] = (float)hi * d + m;
        }
    }
}

static void pack5(const int *u, uint8_t qs[16], uint8_t qh_out[4])
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((u[j] & 0x0f) | ((u[j + 16] & 0x0f) << 4));
        qh |= (uint32_t)((u[j] >> 4) & 1) << j;
        qh |= (uint32_t)((u[j + 16] >> 4) & 1) << (j + 16);
    }
    memcpy(qh_out, &qh, 4);
}

void gt_quantize_q5_0(const float *x, gt_block_q5_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK5_0) {
        /* The least-squares scale of the search, as stored (f16). */
        y[i].d = gt_f32_to_f16(fit_sym(x, GT_QK5_0, 16));
        const float d = gt_f16_to_f32(y[i].d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int u[GT_QK5_0];
        for (int j = 0; j < GT_QK5_0; j++)
            u[j] = clampi(near(x[j] * id) + 16, 0, 31);
        pack5(u, y[i].qs, y[i].qh);
    }
}

void gt_quantize_q5_1(const float *x, gt_block_q5_1 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK5_1) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < GT_QK5_1; j++) {
            lo = x[j] < lo ? x[j] : lo;
            hi = x[j] > hi ? x[j] : hi;
        }
        /* The search's least-squares (scale, min) where the block has a
         * non-positive minimum (fit_asym keeps min <= 0); the plain range
         * otherwise. */
        float d = (hi - lo) / 31.0f, m = lo;
        if (lo <= 0) {
            uint8_t q[GT_QK5_1];
            fit_asym(x, GT_QK5_1, 31, &d, &m, q);
        }
        y[i].d = gt_f32_to_f16(d);
        y[i].m = gt_f32_to_f16(m);
        const float dq = gt_f16_to_f32(y[i].d), mq = gt_f16_to_f32(y[i].m);
        const float id = dq != 0.0f ? 1.0f / dq : 0.0f;
        int u[GT_QK5_1];
        for (int j = 0; j < GT_QK5_1; j++)
            u[j] = clampi(near((x[j] - mq) * id), 0, 31);
        pack5(u, y[i].qs, y[i].qh);
    }
}

/* ---- Q2_K / Q3_K -------------------------------------------------------- */

void gt_dequantize_q2_K(const gt_block_q2_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = gt_f16_to_f32(x[i].d), dmin = gt_f16_to_f32(x[i].dmin);
        for (int p = 0; p < GT_QK_K; p++, y++) {
            const int q = (x[i].qs[32 * (p / 128) + p % 32] >> (2 * ((p % 128) / 32))) & 3;
            const uint8_t sc = x[i].scales[p / 16];
            const float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
            *y = dl * (float)q - ml;
        }
    }
}

void gt_quantize_q2_K(const float *x, gt_block_q2_K *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK_K) {
        float sc[16], mn[16];
        uint8_t t[16];
        for (int s = 0; s < 16; s++) {
            fit_asym(x + 16 * s, 16, 3, &sc[s], &mn[s], t);
            mn[s] = -mn[s];
        }
        const float d = max_of(sc, 16) / 15.0f, dmin = max_of(mn, 16) / 15.0f;
        y[i].d = gt_f32_to_f16(d);
        y[i].dmin = gt_f32_to_f16(dmin);
        const float dq = gt_f16_to_f32(y[i].d), mq = gt_f16_to_f32(y[i].dmin);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int s = 0; s < 16; s++) {
            const int ls = dq > 0 ? clampi(near(sc[s] / dq), 0, 15) : 0;
            const int lm = mq > 0 ? clampi(near(mn[s] / mq), 0, 15) : 0;
            y[i].scales[s] = (uint8_t)(ls | (lm << 4));
            const float ds = dq * (float)ls, ms = mq * (float)lm;
            for (int l = 0; l < 16; l++) {
                const int p = 16 * s + l;
                const int q = ds > 0 ? clampi(near((x[p] + ms) / ds), 0, 3) : 0;
                y[i].qs[32 * (p / 128) + p % 32] |= (uint8_t)(q << (2 * ((p % 128) / 32)));
            }
        }
    }
}

/* The 16 6-bit values (scale + 32) of a Q3_K block. */
static void q3_scales(const uint8_t b[12], int out[16])
{
    for (int i = 0; i < 4; i++) {
        out[i] = (b[i] & 0xf) | (((b[8 + i] >> 0) & 3) << 4);
        out[4 + i] = (b[4 + i] & 0xf) | (((b[8 + i] >> 2) & 3) << 4);
        out[8 + i] = (b[i] >> 4) | (((b[8 + i] >> 4) & 3) << 4);
        out[12 + i] = (b[4 + i] >> 4) | (((b[8 + i] >> 6) & 3) << 4);
    }
}

void gt_dequantize_q3_K(const gt_block_q3_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = gt_f16_to_f32(x[i].d);
        int sc[16];
        q3_scales(x[i].scales, sc);
        for (int p = 0; p < GT_QK_K; p++, y++) {
            const int lo = (x[i].qs[32 * (p / 128) + p % 32] >> (2 * ((p % 128) / 32))) & 3;
            const int hbit = (x[i].hmask[p % 32] >> (4 * (p / 128) + (p % 128) / 32)) & 1;
            const float dl = d * (float)(sc[p / 16] - 32);
            *y = dl * (float)(lo - (hbit ? 0 : 4));
        }
    }
}

void gt_quantize_q3_K(const float *x, gt_block_q3_K *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK_K) {
        float sc[16];
        for (int s = 0; s < 16; s++)
            sc[s] = fit_sym(x + 16 * s, 16, 4);
        const float d = max_signed(sc, 16) / -32.0f;
        y[i].d = gt_f32_to_f16(d);
        const float dq = gt_f16_to_f32(y[i].d);
        int ls[16];
        for (int s = 0; s < 16; s++)
            ls[s] = dq != 0 ? clampi(near(sc[s] / dq), -32, 31) + 32 : 32;
        for (int k = 0; k < 4; k++) {
            y[i].scales[k] = (uint8_t)((ls[k] & 0xf) | ((ls[8 + k] & 0xf) << 4));
            y[i].scales[4 + k] = (uint8_t)((ls[4 + k] & 0xf) | ((ls[12 + k] & 0xf) << 4));
            y[i].scales[8 + k] = (uint8_t)((ls[k] >> 4) | ((ls[4 + k] >> 4) << 2) |
                                           ((ls[8 + k] >> 4) << 4) | ((ls[12 + k] >> 4) << 6));
        }
        memset(y[i].qs, 0, sizeof y[i].qs);
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int p = 0; p < GT_QK_K; p++) {
            const float ds = dq * (float)(ls[p / 16] - 32);
            const int u = (ds != 0 ? clampi(near(x[p] / ds), -4, 3) : 0) + 4;
            y[i].qs[32 * (p / 128) + p % 32] |= (uint8_t)((u & 3) << (2 * ((p % 128) / 32)));
            y[i].hmask[p % 32] |= (uint8_t)((u >> 2) << (4 * (p / 128) + (p % 128) / 32));
        }
    }
}

/* ---- Q4_K / Q5_K -------------------------------------------------------- */

void gt_k_scale_min(const uint8_t q[12], int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void pack_scale_min(const int ls[8], const int lm[8], uint8_t q[12])
{
    memset(q, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] |= (uint8_t)ls[j];
            q[j + 4] |= (uint8_t)lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

void gt_dequantize_q4_K(const gt_block_q4_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = gt_f16_to_f32(x[i].d), dmin = gt_f16_to_f32(x[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            gt_k_scale_min(x[i].scales, s, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            const uint8_t *q = x[i].qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++, y++)
                *y = d1 * (float)((s & 1) ? q[l] >> 4 : q[l] & 0xf) - m1;
        }
    }
}

void gt_dequantize_q5_K(const gt_block_q5_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = gt_f16_to_f32(x[i].d), dmin = gt_f16_to_f32(x[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            gt_k_scale_min(x[i].scales, s, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            const uint8_t *q = x[i].qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++, y++) {
                const int lo = (s & 1) ? q[l] >> 4 : q[l] & 0xf;
                const int hi = (x[i].qh[l] >> s) & 1;
                *y = d1 * (float)(lo + 16 * hi) - m1;
            }
        }
    }
}

/* Q4_K (nmax 15) and Q5_K (nmax 31): the shared scale/min quantization;
 * u receives the 256 quantized values. */
static void quantize_k_asym(const float *x, int nmax, uint16_t *d_out, uint16_t *dmin_out,
                            uint8_t scales[12], int u[GT_QK_K])
{
    float sc[8], mn[8];
    uint8_t t[32];
    for (int s = 0; s < 8; s++) {
        fit_asym(x + 32 * s, 32, nmax, &sc[s], &mn[s], t);
        mn[s] = -mn[s];
    }
    *d_out = gt_f32_to_f16(max_of(sc, 8) / 63.0f);
    *dmin_out = gt_f32_to_f16(max_of(mn, 8) / 63.0f);
    const float dq = gt_f16_to_f32(*d_out), mq = gt_f16_to_f32(*dmin_out);
    int ls[8], lm[8];
    for (int s = 0; s < 8; s++) {
        ls[s] = dq > 0 ? clampi(near(sc[s] / dq), 0, 63) : 0;
        lm[s] = mq > 0 ? clampi(near(mn[s] / mq), 0, 63) : 0;
        const float ds = dq * (float)ls[s], ms = mq * (float)lm[s];
        for (int l = 0; l < 32; l++)
            u[32 * s + l] = ds > 0 ? clampi(near((x[32 * s + l] + ms) / ds), 0, nmax) : 0;
    }
    pack_scale_min(ls, lm, scales);
}

void gt_quantize_q4_K(const float *x, gt_block_q4_K *y, int64_t nb)
{
    int u[GT_QK_K];
    for (int64_t i = 0; i < nb; i++, x += GT_QK_K) {
        quantize_k_asym(x, 15, &y[i].d, &y[i].dmin, y[i].scales, u);
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * k + l] = (uint8_t)(u[64 * k + l] | (u[64 * k + 32 + l] << 4));
    }
}

void gt_quantize_q5_K(const float *x, gt_block_q5_K *y, int64_t nb)
{
    int u[GT_QK_K];
    for (int64_t i = 0; i < nb; i++, x += GT_QK_K) {
        quantize_k_asym(x, 31, &y[i].d, &y[i].dmin, y[i].scales, u);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int a = u[64 * k + l], b = u[64 * k + 32 + l];
                y[i].qs[32 * k + l] = (uint8_t)((a & 0xf) | ((b & 0xf) << 4));
                y[i].qh[l] |= (uint8_t)(((a >> 4) << (2 * k)) | ((b >> 4) << (2 * k + 1)));
            }
    }
}

/* ---- Q6_K --------------------------------------------------------------- */

void gt_dequantize_q6_K(const gt_block_q6_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = gt_f16_to_f32(x[i].d);
        for (int p = 0; p < GT_QK_K; p++, y++) {
            const int h = p / 128, r = p % 128;
            const uint8_t l = x[i].ql[64 * h + p % 32 + 32 * ((r % 64) / 32)];
            const int lo = r < 64 ? l & 0xf : l >> 4;
            const int hi = (x[i].qh[32 * h + p % 32] >> (2 * (r / 32))) & 3;
            *y = d * (float)x[i].scales[p / 16] * (float)((lo | (hi << 4)) - 32);
        }
    }
}

void gt_quantize_q6_K(const float *x, gt_block_q6_K *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK_K) {
        float sc[16];
        for (int s = 0; s < 16; s++)
            sc[s] = fit_sym(x + 16 * s, 16, 32);
        y[i].d = gt_f32_to_f16(max_signed(sc, 16) / -128.0f);
        const float dq = gt_f16_to_f32(y[i].d);
        for (int s = 0; s < 16; s++)
            y[i].scales[s] = (int8_t)(dq != 0 ? clampi(near(sc[s] / dq), -128, 127) : 0);
        memset(y[i].ql, 0, sizeof y[i].ql);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int p = 0; p < GT_QK_K; p++) {
            const float ds = dq * (float)y[i].scales[p / 16];
            const int u = (ds != 0 ? clampi(near(x[p] / ds), -32, 31) : 0) + 32;
            const int h = p / 128, r = p % 128;
            y[i].ql[64 * h + p % 32 + 32 * ((r % 64) / 32)] |=
                (uint8_t)((u & 0xf) << (r < 64 ? 0 : 4));
            y[i].qh[32 * h + p % 32] |= (uint8_t)((u >> 4) << (2 * (r / 32)));
        }
    }
}

/* ---- Q8_K --------------------------------------------------------------- */

void gt_dequantize_q8_K(const gt_block_q8_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++)
        for (int j = 0; j < GT_QK_K; j++)
            *y++ = x[i].d * (float)x[i].qs[j];
}

void gt_quantize_q8_K(const float *x, gt_block_q8_K *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += GT_QK_K) {
        float amax = 0;
        for (int j = 0; j < GT_QK_K; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = d;
        for (int g = 0; g < GT_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 16 * g; j < 16 * g + 16; j++) {
                y[i].qs[j] = (int8_t)clampi(near(x[j] * id), -127, 127);
                sum += y[i].qs[j];
            }
            y[i].bsums[g] = (int16_t)sum;
        }
    }
}

/* ---- IQ4_NL ------------------------------------------------------------- */

/* GGML's published IQ4_NL levels (the format's definition, not code). */
const int8_t gt_iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

void gt_dequantize_iq4_nl(const gt_block_iq4_nl *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += GT_QK4_NL) {
        const float d = gt_f16_to_f32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)gt_iq4nl_levels[x[i].qs[j] & 0x0f];
            y[j + 16] = d * (float)gt_iq4nl_levels[x[i].qs[j] >> 4];
        }
    }
}

/* Index of the level nearest to v (ties to the lower level). The levels
 * ascend, so a binary search over the midpoints between neighbours; the
 * quantizer calls it through a table of half-unit bins (iq4nl_lut), since
 * every midpoint is a multiple of 0.5. */
static int iq4nl_nearest(float v)
{
    int lo = 0, hi = 15;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        const float cut = 0.5f * ((float)gt_iq4nl_levels[mid] + (float)gt_iq4nl_levels[mid + 1]);
        if (v > cut)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* LUT[b] = nearest level of any v in bin b = floor(2v) + 2*IQ4NL_SPAN. */
#define IQ4NL_SPAN 160
static unsigned char iq4nl_lut[4 * IQ4NL_SPAN];

static void iq4nl_lut_fill(void)
{
    for (int b = 0; b < 4 * IQ4NL_SPAN; b++) /* the bin's interior, off any midpoint */
        iq4nl_lut[b] = (unsigned char)iq4nl_nearest(((float)b - 2 * IQ4NL_SPAN + 0.25f) / 2);
}

static void iq4nl_lut_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, iq4nl_lut_fill);
}

static int iq4nl_index(float v)
{
    /* Outside the table (or NaN, which compares false) before converting to
     * int, so the conversion is always defined. */
    if (!(v > -IQ4NL_SPAN))
        return 0;
    if (!(v < IQ4NL_SPAN))
        return 15;
    return iq4nl_lut[(int)floorf(2 * v) + 2 * IQ4NL_SPAN];
}

/* For each block, candidate scales around max/-127 (the element of largest
 * magnitude on the outermost level), each assignment refit by least
 * squares; the f16-rounded scale with the smallest error is kept. */
void gt_quantize_iq4_nl(const float *x, gt_block_iq4_nl *y, int64_t nb)
{
    iq4nl_lut_init();
    for (int64_t i = 0; i < nb; i++, x += GT_QK4_NL) {
        const float max = max_signed(x, GT_QK4_NL);
        memset(y[i].qs, 0, sizeof y[i].qs);
        y[i].d = 0;
        if (max == 0 || !(max == max))
            continue;
        float best = INFINITY;
        for (int k = -8; k <= 8; k++) {
            const float id = -(127.0f + 2.0f * (float)k) / max;
            int q[GT_QK4_NL];
            double sxv = 0, svv = 0;
            for (int j = 0; j < GT_QK4_NL; j++) {
                q[j] = iq4nl_index(x[j] * id);
                const double v = gt_iq4nl_levels[q[j]];
                sxv += x[j] * v, svv += v * v;
            }
            const uint16_t dh = gt_f32_to_f16((float)(sxv / svv));
            const float d = gt_f16_to_f32(dh);
            float err = 0;
            for (int j = 0; j < GT_QK4_NL; j++) {
                const float e = d * (float)gt_iq4nl_levels[q[j]] - x[j];
                err += e * e;
            }
            if (err < best) {
                best = err;
                y[i].d = dh;
                for (int j = 0; j < 16; j++)
                    y[i].qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            }
        }
    }
}
