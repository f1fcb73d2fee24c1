/* attention.cl: causal multi-head attention with grouped KV heads over the
 * KV cache.
 *
 * A work-group per (query row i, head h); query head h reads KV head
 * h / (n_head / n_kv). Row i sees cache rows 0 .. pos0 + i, or with a
 * window w > 0 (a sliding-window layer) only the last w of them; rows
 * before the window are never read. The cache rows
 * are taken ATT_CHUNK at a time (an "online" softmax, as in flash
 * attention): the group scores a chunk into local memory (items split the
 * rows), finds its max and sum with local reductions, rescales what it has
 * accumulated so far by exp(old_max - new_max), and adds the chunk's
 * weighted V rows (items split the head's dims, four at a time). So any
 * context length works with ATT_CHUNK floats of local memory, and nothing
 * the size of the context is ever stored.
 *
 * Global size (ATT_LWS * n_head, n_tok), local (ATT_LWS, 1). Local
 * arguments: lq (head_dim floats), ls (ATT_CHUNK floats).
 *
 * Two kernels from one body (ATTENTION(name, T, LOADV, LOAD1, UPTO)):
 * attention over F32 caches and attention_f16 over F16 ones, whose values
 * are read with vload_half (core OpenCL: no cl_khr_fp16 needed), exactly
 * the F32 values KV_STORE's round-to-nearest-even (kv_store_f16,
 * vstore_half_rte) wrote, and computed in F32 from there. */

#define VW ATT_VW
#define floatV CAT(float, ATT_VW)
#define VLOADV CAT(vload, ATT_VW)
#define VSTOREV CAT(vstore, ATT_VW)
#define ATT_G ((ATT_HD_MAX / ATT_VW + ATT_LWS - 1) / ATT_LWS) /* vector groups per item */

/* n (1..VW) floats at p, zero-padded. */
inline floatV loadv_upto(global const float *p, int n)
{
    if (n >= VW)
        return VLOADV(0, p);
    float v[VW];
    for (int i = 0; i < VW; i++)
        v[i] = i < n ? p[i] : 0.0f;
    return VLOADV(0, v);
}

/* The same from an F16 cache. */
inline floatV loadv_upto_half(global const half *p, int n)
{
    if (n >= VW)
        return CAT(vload_half, ATT_VW)(0, p);
    float v[VW];
    for (int i = 0; i < VW; i++)
        v[i] = i < n ? vload_half(i, p) : 0.0f;
    return VLOADV(0, v);
}

inline float hsumv(floatV v)
{
#if ATT_VW == 16
    return hsum16(v);
#elif ATT_VW == 8
    float4 a = v.lo + v.hi;
    return a.x + a.y + a.z + a.w;
#else
    return v.x + v.y + v.z + v.w;
#endif
}

#define ATTENTION(NAME, T, LOADV, LOAD1, UPTO)                                                          \
kernel void NAME(global const uchar *qb, ulong q_off, global const uchar *kb, ulong k_off,              \
                      global const uchar *vb, ulong v_off, global uchar *yb, ulong y_off,               \
                      int n_head, int n_kv, int hd, int pos0, int window, float scale, local float *lq, \
                      local float *ls)                                                                  \
{                                                                                                       \
    local float red[ATT_LWS];                                                                           \
    const int lid = get_local_id(0);                                                                    \
    const int h = get_group_id(0);                                                                      \
    const size_t i = get_global_id(1);                                                                  \
    const int q_dim = n_head * hd, kv_dim = n_kv * hd;                                                  \
    const int kvh = h / (n_head / n_kv);                                                                \
    global const float *q = CPTR(float, qb, q_off) + i * q_dim + (size_t)h * hd;                        \
    global const T *K = CPTR(T, kb, k_off) + (size_t)kvh * hd;                                          \
    global const T *V = CPTR(T, vb, v_off) + (size_t)kvh * hd;                                          \
    global float *out = PTR(float, yb, y_off) + i * q_dim + (size_t)h * hd;                             \
                                                                                                        \
    for (int d = lid; d < hd; d += ATT_LWS)                                                             \
        lq[d] = q[d];                                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                       \
                                                                                                        \
    const int n_seen = pos0 + (int)i + 1;                                                               \
    const int first = window > 0 && n_seen > window ? n_seen - window : 0;                              \
    const int hdv = hd / VW;                                                                            \
    float m = -INFINITY, l = 0.0f;                                                                      \
    floatV acc[ATT_G];                                                                                  \
    for (int k = 0; k < ATT_G; k++)                                                                     \
        acc[k] = 0.0f;                                                                                  \
                                                                                                        \
    for (int c0 = first; c0 < n_seen; c0 += ATT_CHUNK) {                                                \
        const int cn = min(ATT_CHUNK, n_seen - c0);                                                     \
        /* scores of this chunk, and their max */                                                       \
        float cmax = -INFINITY;                                                                         \
        for (int p = lid; p < cn; p += ATT_LWS) {                                                       \
            global const T *kp = K + (size_t)(c0 + p) * kv_dim;                                         \
            floatV sv = 0.0f;                                                                           \
            for (int d = 0; d < hdv; d++)                                                               \
                sv = MAD(LOADV(d, kp), VLOADV(d, lq), sv);                                              \
            float s = hsumv(sv);                                                                        \
            for (int d = VW * hdv; d < hd; d++)                                                         \
                s = MAD(LOAD1(d, kp), lq[d], s);                                                        \
            s *= scale;                                                                                 \
            ls[p] = s;                                                                                  \
            cmax = fmax(cmax, s);                                                                       \
        }                                                                                               \
        red[lid] = cmax;                                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
        for (int s = ATT_LWS / 2; s > 0; s >>= 1) {                                                     \
            if (lid < s)                                                                                \
                red[lid] = fmax(red[lid], red[lid + s]);                                                \
            barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        }                                                                                               \
        const float m_new = fmax(m, red[0]);                                                            \
        const float corr = exp(m - m_new); /* 0 on the first chunk (m = -inf) */                        \
        barrier(CLK_LOCAL_MEM_FENCE);      /* everyone has read red[0] */                               \
                                                                                                        \
        float csum = 0.0f;                                                                              \
        for (int p = lid; p < cn; p += ATT_LWS) {                                                       \
            const float e = exp(ls[p] - m_new);                                                         \
            ls[p] = e;                                                                                  \
            csum += e;                                                                                  \
        }                                                                                               \
        red[lid] = csum;                                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
        for (int s = ATT_LWS / 2; s > 0; s >>= 1) {                                                     \
            if (lid < s)                                                                                \
                red[lid] += red[lid + s];                                                               \
            barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        }                                                                                               \
        l = l * corr + red[0];                                                                          \
        m = m_new;                                                                                      \
                                                                                                        \
        /* acc = acc * corr + sum_p e_p * V[p] over this item's dims */                                 \
        for (int k = 0; k < ATT_G; k++) {                                                               \
            const int g = lid + k * ATT_LWS;                                                            \
            if (VW * g >= hd)                                                                           \
                break;                                                                                  \
            const int nd = min(VW, hd - VW * g);                                                        \
            floatV a = acc[k] * corr;                                                                   \
            global const T *vp = V + (size_t)c0 * kv_dim + VW * g;                                      \
            if (nd == VW) {                                                                             \
                for (int p = 0; p < cn; p++, vp += kv_dim)                                              \
                    a = MAD((floatV)ls[p], LOADV(0, vp), a);                                            \
            } else {                                                                                    \
                for (int p = 0; p < cn; p++, vp += kv_dim)                                              \
                    a = MAD((floatV)ls[p], UPTO(vp, nd), a);                                            \
            }                                                                                           \
            acc[k] = a;                                                                                 \
        }                                                                                               \
        barrier(CLK_LOCAL_MEM_FENCE); /* ls and red are reused by the next chunk */                     \
    }                                                                                                   \
                                                                                                        \
    const float inv = 1.0f / l;                                                                         \
    for (int k = 0; k < ATT_G; k++) {                                                                   \
        const int g = lid + k * ATT_LWS;                                                                \
        if (VW * g >= hd)                                                                               \
            break;                                                                                      \
        const floatV o = acc[k] * inv;                                                                  \
        const int nd = min(VW, hd - VW * g);                                                            \
        if (nd == VW) {                                                                                 \
            VSTOREV(o, g, out);                                                                         \
        } else {                                                                                        \
            float ov[VW];                                                                               \
            VSTOREV(o, 0, ov);                                                                          \
            for (int i = 0; i < nd; i++)                                                                \
                out[VW * g + i] = ov[i];                                                                \
        }                                                                                               \
    }                                                                                                   \
}

#define LOAD_F32(i, p) ((p)[i])
ATTENTION(attention, float, VLOADV, LOAD_F32, loadv_upto)
#define VLOAD_HALFV CAT(vload_half, ATT_VW)
ATTENTION(attention_f16, half, VLOAD_HALFV, vload_half, loadv_upto_half)

/* KV_STORE into an F16 cache: n values rounded to nearest even. */
kernel void kv_store_f16(global const uchar *xb, ulong x_off, global uchar *cb, ulong c_off, ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        vstore_half_rte(CPTR(float, xb, x_off)[i], i, PTR(half, cb, c_off));
}
